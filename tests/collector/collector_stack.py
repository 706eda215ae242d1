"""The real observability stack on 127.0.0.1 for the collector tests: the built collector, a
second collector as the Tempo stand-in, and Debian's Prometheus, each on free ports in a temp
dir. `tests/collector/conftest.py` turns these into fixtures that always stop what they start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR_DIR = ROOT / "collector"
ENGINE_LABEL = "spark_otel_engine"
START_TIMEOUT_S = 60.0
# The stack's servers yield to the test process, which runs the simulated box: on a 2-core
# machine a Go server's garbage collection on both cores stalls the box's step loop past the
# 50 ms it may lag before dropping model time. Lower priority and one core each keep it clear.
BACKGROUND = ["nice", "-n", "10"]
BACKGROUND_ENV = {"GOMAXPROCS": "1"}


def require_real_components() -> bool:
    return bool(os.environ.get("SPARK_OTEL_REQUIRE_REAL_COMPONENTS") or os.environ.get("CI"))


def missing(what: str) -> NoReturn:
    """Fail where real components are required (CI), skip elsewhere."""
    if require_real_components():
        pytest.fail(f"{what} (SPARK_OTEL_REQUIRE_REAL_COMPONENTS/CI is set: this is a failure)")
    pytest.skip(what)


@dataclass(frozen=True)
class Unusable:
    """Why there is no collector binary; ``always_fails`` where skipping would hide a mistake."""

    reason: str
    always_fails: bool = False


# Set by tests/collector/conftest.py once the tests are collected: the binary, or why not.
OTELCOL_KEY = pytest.StashKey[Path | Unusable]()


def resolve_otelcol(say: Callable[[str], object] | None = None, timeout_s: float = 1800) -> Path | Unusable:
    """``SPARK_OTEL_OTELCOL``, else the cached or freshly built ``scripts/build-collector.sh``."""
    env = os.environ.get("SPARK_OTEL_OTELCOL")
    if env:
        path = Path(env)
        if not (path.is_file() and os.access(path, os.X_OK)):
            return Unusable(f"SPARK_OTEL_OTELCOL={env}: not an executable file", always_fails=True)
        return path
    if shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists():
        return Unusable(
            "no collector: SPARK_OTEL_OTELCOL is unset and Go is not installed to build one "
            "(run `make collector` where Go is, and set SPARK_OTEL_OTELCOL to the path it prints)"
        )
    if say is not None:
        say(
            "tests/collector: finding or building the collector with scripts/build-collector.sh "
            "(a cold build takes minutes)"
        )
    try:
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / "build-collector.sh")],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Unusable(f"building the collector took over {timeout_s:.0f}s: run `make collector` first")
    if proc.returncode != 0:
        return Unusable(
            f"building the collector failed (run `make collector` to see why): {proc.stderr[-2000:]}"
        )
    # The build said it succeeded: output without an executable path is a broken script, which
    # skipping would hide.
    lines = proc.stdout.strip().splitlines()
    if not lines:
        return Unusable("scripts/build-collector.sh succeeded but printed no path", always_fails=True)
    path = Path(lines[-1])
    if not (path.is_file() and os.access(path, os.X_OK)):
        return Unusable(
            f"scripts/build-collector.sh printed {lines[-1]!r}: not an executable file", always_fails=True
        )
    return path


def free_ports(count: int) -> list[int]:
    """Distinct free 127.0.0.1 ports (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


@dataclass
class Service:
    """One server process with its log file; `stop()` and `start()` may be called repeatedly."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    ready_url: str
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.log_path.parent
        )
        log.close()
        self.wait_ready()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(self.ready_url, timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(
            f"{self.name} not ready at {self.ready_url} after {START_TIMEOUT_S}s:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@dataclass
class Prometheus:
    service: Service
    url: str
    config_path: Path

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, str | float] = {"query": expr}
        if at is not None:
            params["time"] = at
        resp = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=30.0)
        body = resp.json()
        if body.get("status") != "success":
            raise AssertionError(f"query {expr!r} failed: {body}")
        return list(body["data"]["result"])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params: dict[str, str | float] = {"query": expr, "start": start, "end": end, "step": step}
        resp = httpx.get(f"{self.url}/api/v1/query_range", params=params, timeout=30.0)
        body = resp.json()
        if body.get("status") != "success":
            raise AssertionError(f"range query {expr!r} failed: {body}")
        return list(body["data"]["result"])

    def metric_names(self) -> list[str]:
        resp = httpx.get(f"{self.url}/api/v1/label/__name__/values", timeout=30.0)
        return list(resp.json()["data"])

    def wait_for(self, expr: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """The first non-empty result of ``expr``, or the empty one after ``timeout_s``: callers
        that need data assert on it, and some check that a series never arrives."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.5)


@dataclass
class Stack:
    """The collector, the Tempo stand-in and Prometheus, wired together."""

    prometheus: Prometheus
    standin: Service
    collector: Service
    traces_file: Path
    otlp_grpc: str
    otlp_http: str
    engine_targets: dict[str, str] = field(default_factory=dict)

    def spans(self) -> list[dict[str, Any]]:
        """Every span the Tempo stand-in wrote, flattened, with resource attributes merged."""
        out: list[dict[str, Any]] = []
        if not self.traces_file.exists():
            return out
        for line in self.traces_file.read_text().splitlines():
            if not line.strip():
                continue
            doc = json.loads(line)
            for rs in doc.get("resourceSpans", []):
                resource = attributes_of(rs.get("resource", {}).get("attributes", []))
                for ss in rs.get("scopeSpans", []):
                    for span in ss.get("spans", []):
                        out.append(
                            {
                                "name": span.get("name"),
                                "attributes": attributes_of(span.get("attributes", [])),
                                "resource": resource,
                                "traceId": span.get("traceId"),
                                "spanId": span.get("spanId"),
                                "parentSpanId": span.get("parentSpanId", ""),
                            }
                        )
        return out


def attributes_of(kvs: list[dict[str, Any]]) -> dict[str, Any]:
    """OTLP JSON key/value list -> plain dict (ints arrive as strings in OTLP JSON)."""
    out: dict[str, Any] = {}
    for kv in kvs:
        value = kv.get("value", {})
        if "stringValue" in value:
            out[kv["key"]] = value["stringValue"]
        elif "intValue" in value:
            out[kv["key"]] = int(value["intValue"])
        elif "doubleValue" in value:
            out[kv["key"]] = float(value["doubleValue"])
        elif "boolValue" in value:
            out[kv["key"]] = bool(value["boolValue"])
        else:
            out[kv["key"]] = value
    return out


def prometheus_config(
    tmp: Path, *, engine_targets: dict[str, str] | None = None, interval: str = "1s"
) -> Path:
    """The shipped prometheus.yml with test intervals and absolute rule paths.

    The `engines` scrape job keeps its shipped file discovery, pointed at ``tmp/engines.d``:
    empty (as shipped) unless ``engine_targets`` are given, which are written there in the
    format of ``collector/engines.d/engines.yml.example``.
    """
    config = yaml.safe_load((COLLECTOR_DIR / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = interval
    config["global"]["evaluation_interval"] = interval
    config["rule_files"] = [str(COLLECTOR_DIR / name) for name in config.get("rule_files", [])]
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "engines")
    targets_dir = tmp / "engines.d"
    targets_dir.mkdir(parents=True, exist_ok=True)
    for sd in job["file_sd_configs"]:
        sd["files"] = [str(tmp / pattern) for pattern in sd["files"]]
    if engine_targets:
        example = yaml.safe_load((COLLECTOR_DIR / "engines.d" / "engines.yml.example").read_text())
        entries = [
            {"targets": [target], "labels": {**example[0]["labels"], ENGINE_LABEL: name}}
            for name, target in engine_targets.items()
        ]
        (targets_dir / "engines.yml").write_text(yaml.safe_dump(entries))
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def prometheus_service(
    binary: Path,
    config: Path,
    workdir: Path,
    port: int,
    *,
    flags: Sequence[str] = (),
    prefix: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Service:
    """A Prometheus on 127.0.0.1:``port`` keeping its data and log under ``workdir``."""
    return Service(
        "prometheus",
        [
            *prefix,
            str(binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            *flags,
            "--log.level=warn",
        ],
        dict(env) if env is not None else {"PATH": "/usr/bin:/bin"},
        workdir / "prometheus.log",
        f"http://127.0.0.1:{port}/-/ready",
    )


def start_stack(
    tmp: Path,
    otelcol: Path,
    prometheus: Path,
    *,
    engine_targets: dict[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
    collector_config: Path | None = None,
) -> Stack:
    tmp.mkdir(parents=True, exist_ok=True)
    (prom_port, grpc_port, http_port, tempo_port, health, standin_health, metrics_port, standin_metrics) = (
        free_ports(8)
    )
    prom_dir = tmp / "prometheus"
    prom_dir.mkdir()
    config_path = prometheus_config(prom_dir, engine_targets=engine_targets)
    prom_url = f"http://127.0.0.1:{prom_port}"
    prom = prometheus_service(
        prometheus,
        config_path,
        prom_dir,
        prom_port,
        flags=("--web.enable-remote-write-receiver", "--enable-feature=exemplar-storage"),
        prefix=BACKGROUND,
        env={**os.environ, **BACKGROUND_ENV},
    )
    traces_file = tmp / "standin" / "traces.jsonl"
    traces_file.parent.mkdir()
    env = {**os.environ, **BACKGROUND_ENV}
    env.update(
        {
            "SPARK_OTEL_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{grpc_port}",
            "SPARK_OTEL_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
            "SPARK_OTEL_TEMPO_ENDPOINT": f"127.0.0.1:{tempo_port}",
            "SPARK_OTEL_PROMETHEUS_URL": f"{prom_url}/api/v1/write",
            "SPARK_OTEL_HEALTH_ENDPOINT": f"127.0.0.1:{health}",
            "SPARK_OTEL_COLLECTOR_METRICS_PORT": str(metrics_port),
            "SPARK_OTEL_SPAN_METRICS_FLUSH": "1s",
            "SPARK_OTEL_BOX": "e2e-box",
            "SPARK_OTEL_TEMPO_STANDIN_FILE": str(traces_file),
            "SPARK_OTEL_STANDIN_HEALTH_ENDPOINT": f"127.0.0.1:{standin_health}",
            "SPARK_OTEL_STANDIN_METRICS_PORT": str(standin_metrics),
        }
    )
    env.update(extra_env or {})
    standin = Service(
        "tempo stand-in",
        [*BACKGROUND, str(otelcol), "--config", str(COLLECTOR_DIR / "tempo-standin.yaml")],
        env,
        traces_file.parent / "standin.log",
        f"http://127.0.0.1:{standin_health}/",
    )
    (tmp / "collector").mkdir()
    collector = Service(
        "collector",
        [*BACKGROUND, str(otelcol), "--config", str(collector_config or COLLECTOR_DIR / "otelcol.yaml")],
        env,
        tmp / "collector" / "collector.log",
        f"http://127.0.0.1:{health}/",
    )
    stack = Stack(
        prometheus=Prometheus(prom, prom_url, config_path),
        standin=standin,
        collector=collector,
        traces_file=traces_file,
        otlp_grpc=f"http://127.0.0.1:{grpc_port}",
        otlp_http=f"http://127.0.0.1:{http_port}",
        engine_targets=dict(engine_targets or {}),
    )
    return stack


def variable_values(model: dict[str, Any], picked: Mapping[str, str] | None = None) -> dict[str, str]:
    """What Grafana sends for each of a dashboard's variables, as it loads by default.

    A variable with "All" sends its ``allValue`` (``.*``) unless ``picked`` names a value; a
    single-select one has no "All", so ``picked`` must give it a value (one from the run).
    """
    picked = dict(picked or {})
    values: dict[str, str] = {}
    for variable in model.get("templating", {}).get("list", []):
        name = variable["name"]
        if name in picked:
            values[name] = picked[name]
        elif variable.get("includeAll"):
            values[name] = variable["allValue"]
        else:
            raise AssertionError(f"{model.get('title')}: single-select variable {name!r} needs a value")
    return values


def grafana_expr(
    target: dict[str, Any],
    variables: Mapping[str, str],
    *,
    rate_interval: str = "30s",
    range_: str = "5m",
    interval: str = "15s",
) -> str:
    """A panel query as Grafana sends it: macros and template variables substituted."""
    expr = (
        target["expr"]
        .replace("$__rate_interval", rate_interval)
        .replace("$__range", range_)
        .replace("$__interval", interval)
    )
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace("${" + name + "}", variables[name]).replace("$" + name, variables[name])
    left = re.search(r"\$\{?\w+", expr)
    if left:
        raise AssertionError(f"{left.group(0)} left unsubstituted in {expr!r}")
    return expr
