"""The real observability stack on 127.0.0.1 for the collector tests: the built collector, Jaeger
v2 (built from its Go module) as the trace store, and Debian's Prometheus, each on free ports in a
temp dir; and the fleet shape, a collector per box in front of a central collector and those
stores. `tests/collector/conftest.py` turns these into fixtures that always stop what they start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest
import yaml
from tests.support.ports import free_ports

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR_DIR = ROOT / "collector"
ENGINE_LABEL = "spark_otel_engine"
START_TIMEOUT_S = 60.0
# The stack's servers yield to the test process, which runs the simulated box: on a 2-core
# machine a Go server's garbage collection on both cores stalls the box's step loop past the
# 50 ms it may lag before dropping model time. Lower priority and one core each keep it clear.
BACKGROUND = ["nice", "-n", "10"]
BACKGROUND_ENV = {"GOMAXPROCS": "1"}
# SPARK_OTEL_BOX of the one-box stack's collector: the host_name its series carry.
E2E_BOX = "e2e-box"


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


# Set by tests/collector/conftest.py once the tests are collected: each binary, or why not.
OTELCOL_KEY = pytest.StashKey[Path | Unusable]()
JAEGER_KEY = pytest.StashKey[Path | Unusable]()


@dataclass(frozen=True)
class Built:
    """A binary the tests build from Go modules when no path is given."""

    what: str
    env: str
    script: str
    make_target: str


OTELCOL = Built("the collector", "SPARK_OTEL_OTELCOL", "build-collector.sh", "collector")
JAEGER = Built("Jaeger", "SPARK_OTEL_JAEGER", "build-jaeger.sh", "jaeger")


def resolve_built(
    built: Built, say: Callable[[str], object] | None = None, timeout_s: float = 1800
) -> Path | Unusable:
    """``$SPARK_OTEL_...`` (``built.env``), else the cached or freshly built ``scripts/...``."""
    env = os.environ.get(built.env)
    if env:
        path = Path(env)
        if not (path.is_file() and os.access(path, os.X_OK)):
            return Unusable(f"{built.env}={env}: not an executable file", always_fails=True)
        return path
    if shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists():
        return Unusable(
            f"no {built.what}: {built.env} is unset and Go is not installed to build it "
            f"(run `make {built.make_target}` where Go is, and set {built.env} to the path it prints)"
        )
    if say is not None:
        say(
            f"tests/collector: finding or building {built.what} with scripts/{built.script} "
            "(a cold build takes minutes)"
        )
    try:
        proc = subprocess.run(
            ["bash", str(ROOT / "scripts" / built.script)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Unusable(
            f"building {built.what} took over {timeout_s:.0f}s: run `make {built.make_target}` first"
        )
    if proc.returncode != 0:
        return Unusable(
            f"building {built.what} failed (run `make {built.make_target}` to see why): {proc.stderr[-2000:]}"
        )
    # The build said it succeeded: output without an executable path is a broken script, which
    # skipping would hide.
    lines = proc.stdout.strip().splitlines()
    if not lines:
        return Unusable(f"scripts/{built.script} succeeded but printed no path", always_fails=True)
    path = Path(lines[-1])
    if not (path.is_file() and os.access(path, os.X_OK)):
        return Unusable(
            f"scripts/{built.script} printed {lines[-1]!r}: not an executable file", always_fails=True
        )
    return path


def resolve_otelcol(say: Callable[[str], object] | None = None, timeout_s: float = 1800) -> Path | Unusable:
    """``SPARK_OTEL_OTELCOL``, else the cached or freshly built ``scripts/build-collector.sh``."""
    return resolve_built(OTELCOL, say, timeout_s)


def resolve_jaeger(say: Callable[[str], object] | None = None, timeout_s: float = 1800) -> Path | Unusable:
    """``SPARK_OTEL_JAEGER``, else the cached or freshly built ``scripts/build-jaeger.sh``."""
    return resolve_built(JAEGER, say, timeout_s)


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


@dataclass(frozen=True)
class JaegerSpan:
    """One span as Jaeger's query API (the one Grafana's Jaeger datasource reads) returns it."""

    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    name: str
    attributes: dict[str, Any]
    resource: dict[str, Any]  # the process: service.name and the other resource attributes
    start_us: int
    duration_us: int

    @property
    def end_us(self) -> int:
        return self.start_us + self.duration_us


def _jaeger_tags(tags: list[dict[str, Any]]) -> dict[str, Any]:
    """Jaeger's typed tag list -> plain dict (int64 and float64 arrive as JSON numbers)."""
    return {tag["key"]: tag["value"] for tag in tags}


def jaeger_spans(trace: dict[str, Any]) -> list[JaegerSpan]:
    """The spans of one trace of ``/api/traces`` or ``/api/traces/{id}``."""
    processes = {
        pid: {**_jaeger_tags(p.get("tags") or []), "service.name": p["serviceName"]}
        for pid, p in (trace.get("processes") or {}).items()
    }
    out = []
    for span in trace.get("spans") or []:
        parents = [r["spanID"] for r in span.get("references") or [] if r.get("refType") == "CHILD_OF"]
        out.append(
            JaegerSpan(
                trace_id=span["traceID"],
                span_id=span["spanID"],
                parent_span_id=parents[0] if parents else "",
                name=span["operationName"],
                attributes=_jaeger_tags(span.get("tags") or []),
                resource=processes.get(span.get("processID"), {}),
                start_us=int(span["startTime"]),
                duration_us=int(span["duration"]),
            )
        )
    return out


@dataclass
class Jaeger:
    """Jaeger v2 with in-memory storage (collector/jaeger.yaml) and its HTTP query API."""

    service: Service
    query_url: str
    otlp_grpc: str  # host:port, what a collector's SPARK_OTEL_TRACES_ENDPOINT names

    def _get(self, path: str, params: Mapping[str, str | int] | None = None) -> Any:
        resp = httpx.get(f"{self.query_url}{path}", params=params, timeout=30.0)
        body = resp.json()
        if resp.status_code == 404 and path.startswith("/api/traces/"):
            return {"data": []}
        if resp.status_code != 200 or body.get("errors"):
            raise AssertionError(f"Jaeger {path} {dict(params or {})}: HTTP {resp.status_code} {body}")
        return body

    def find_traces(
        self,
        service: str,
        *,
        start_ns: int,
        end_ns: int,
        tags: Mapping[str, str] | None = None,
        limit: int = 1000,
    ) -> list[list[JaegerSpan]]:
        """``GET /api/traces``: the traces of ``service`` with a span that started in
        [start, end] (µs, as the API takes them) and carries every tag (span, resource or scope
        attribute, compared as text)."""
        params: dict[str, str | int] = {
            "service": service,
            "start": start_ns // 1000,
            "end": -(-end_ns // 1000),
            "limit": limit,
        }
        if tags:
            params["tags"] = json.dumps(dict(tags))
        return [jaeger_spans(trace) for trace in self._get("/api/traces", params)["data"] or []]

    def trace(self, trace_id: str) -> list[JaegerSpan]:
        data = self._get(f"/api/traces/{trace_id}")["data"] or []
        return jaeger_spans(data[0]) if data else []

    def services(self) -> list[str]:
        return sorted(self._get("/api/services")["data"] or [])


@dataclass
class Stack:
    """The collector, Jaeger and Prometheus, wired together."""

    prometheus: Prometheus
    jaeger: Jaeger
    collector: Service
    otlp_grpc: str
    otlp_http: str
    engine_targets: dict[str, str] = field(default_factory=dict)

    def services(self) -> list[Service]:
        """In the order to start them (the stores before the collector that writes to them)."""
        return [self.prometheus.service, self.jaeger.service, self.collector]


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


def _remote_write_prometheus(
    binary: Path, tmp: Path, engine_targets: dict[str, str] | None = None
) -> Prometheus:
    (port,) = free_ports(1)
    prom_dir = tmp / "prometheus"
    prom_dir.mkdir(parents=True)
    config_path = prometheus_config(prom_dir, engine_targets=engine_targets)
    service = prometheus_service(
        binary,
        config_path,
        prom_dir,
        port,
        flags=("--web.enable-remote-write-receiver", "--enable-feature=exemplar-storage"),
        prefix=BACKGROUND,
        env={**os.environ, **BACKGROUND_ENV},
    )
    return Prometheus(service, f"http://127.0.0.1:{port}", config_path)


def jaeger_store(binary: Path, tmp: Path) -> Jaeger:
    """Jaeger v2 as collector/jaeger.yaml runs it, every listener on a free 127.0.0.1 port."""
    otlp_grpc, otlp_http, query_http, query_grpc, health, metrics = free_ports(6)
    workdir = tmp / "jaeger"
    workdir.mkdir(parents=True)
    env = {
        **os.environ,
        **BACKGROUND_ENV,
        "SPARK_OTEL_JAEGER_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{otlp_grpc}",
        "SPARK_OTEL_JAEGER_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{otlp_http}",
        "SPARK_OTEL_JAEGER_QUERY_HTTP_ENDPOINT": f"127.0.0.1:{query_http}",
        "SPARK_OTEL_JAEGER_QUERY_GRPC_ENDPOINT": f"127.0.0.1:{query_grpc}",
        "SPARK_OTEL_JAEGER_HEALTH_ENDPOINT": f"127.0.0.1:{health}",
        "SPARK_OTEL_JAEGER_METRICS_PORT": str(metrics),
    }
    service = Service(
        "jaeger",
        [*BACKGROUND, str(binary), "--config", str(COLLECTOR_DIR / "jaeger.yaml")],
        env,
        workdir / "jaeger.log",
        f"http://127.0.0.1:{health}/status",
    )
    return Jaeger(service, f"http://127.0.0.1:{query_http}", f"127.0.0.1:{otlp_grpc}")


@dataclass
class Collector:
    """One otelcol-spark process and the addresses it listens on."""

    service: Service
    otlp_grpc: str  # host:port
    otlp_http: str  # http://host:port, what OTEL_EXPORTER_OTLP_ENDPOINT names
    metrics_url: str  # the collector's own /metrics

    def pid(self) -> int:
        if self.service.proc is None or self.service.proc.poll() is not None:
            raise AssertionError(f"{self.service.name} is not running")
        return self.service.proc.pid


def collector_process(
    name: str,
    otelcol: Path,
    configs: Sequence[Path],
    workdir: Path,
    env: Mapping[str, str],
) -> Collector:
    """otelcol-spark with ``configs`` (overlays after the base), its listeners on free ports."""
    grpc_port, http_port, health, metrics_port = free_ports(4)
    workdir.mkdir(parents=True)
    full_env = {
        **os.environ,
        **BACKGROUND_ENV,
        "SPARK_OTEL_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{grpc_port}",
        "SPARK_OTEL_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
        "SPARK_OTEL_HEALTH_ENDPOINT": f"127.0.0.1:{health}",
        "SPARK_OTEL_COLLECTOR_METRICS_PORT": str(metrics_port),
        "SPARK_OTEL_SPAN_METRICS_FLUSH": "1s",
        **env,
    }
    argv = [*BACKGROUND, str(otelcol)]
    for config in configs:
        argv += ["--config", str(config)]
    return Collector(
        Service(name, argv, full_env, workdir / "collector.log", f"http://127.0.0.1:{health}/"),
        otlp_grpc=f"127.0.0.1:{grpc_port}",
        otlp_http=f"http://127.0.0.1:{http_port}",
        metrics_url=f"http://127.0.0.1:{metrics_port}/metrics",
    )


def start_stack(
    tmp: Path,
    otelcol: Path,
    prometheus: Path,
    jaeger: Path,
    *,
    engine_targets: dict[str, str] | None = None,
    extra_env: dict[str, str] | None = None,
    collector_config: Path | None = None,
) -> Stack:
    """Shape 2 of docs/deploy.md: one box's collector writing to Prometheus and Jaeger (not started)."""
    tmp.mkdir(parents=True, exist_ok=True)
    prom = _remote_write_prometheus(prometheus, tmp, engine_targets)
    store = jaeger_store(jaeger, tmp)
    box = collector_process(
        "collector",
        otelcol,
        [collector_config or COLLECTOR_DIR / "otelcol.yaml"],
        tmp / "collector",
        {
            "SPARK_OTEL_TRACES_ENDPOINT": store.otlp_grpc,
            "SPARK_OTEL_PROMETHEUS_URL": f"{prom.url}/api/v1/write",
            "SPARK_OTEL_BOX": E2E_BOX,
            **(extra_env or {}),
        },
    )
    return Stack(
        prometheus=prom,
        jaeger=store,
        collector=box.service,
        otlp_grpc=f"http://{box.otlp_grpc}",
        otlp_http=box.otlp_http,
        engine_targets=dict(engine_targets or {}),
    )


@dataclass
class Fleet:
    """Shape 3 of docs/deploy.md on one machine: a collector per box (otelcol.yaml with the
    otelcol-fleet.yaml overlay) sending to one central collector (otelcol-central.yaml), which
    writes to one Prometheus and one Jaeger."""

    prometheus: Prometheus
    jaeger: Jaeger
    central: Collector
    boxes: dict[str, Collector]

    def services(self) -> list[Service]:
        """In the order to start them (each writer after what it writes to)."""
        return [
            self.prometheus.service,
            self.jaeger.service,
            self.central.service,
            *(box.service for box in self.boxes.values()),
        ]


def start_fleet(
    tmp: Path,
    otelcol: Path,
    prometheus: Path,
    jaeger: Path,
    boxes: Sequence[str],
    *,
    box_env: Mapping[str, str] | None = None,
) -> Fleet:
    """The fleet's services, configured and not started; ``SPARK_OTEL_BOX`` is each box's name."""
    tmp.mkdir(parents=True, exist_ok=True)
    prom = _remote_write_prometheus(prometheus, tmp)
    store = jaeger_store(jaeger, tmp)
    central = collector_process(
        "central collector",
        otelcol,
        [COLLECTOR_DIR / "otelcol-central.yaml"],
        tmp / "central",
        {
            "SPARK_OTEL_TRACES_ENDPOINT": store.otlp_grpc,
            "SPARK_OTEL_PROMETHEUS_URL": f"{prom.url}/api/v1/write",
        },
    )
    per_box = {
        name: collector_process(
            f"{name} collector",
            otelcol,
            [COLLECTOR_DIR / "otelcol.yaml", COLLECTOR_DIR / "otelcol-fleet.yaml"],
            tmp / name / "collector",
            {"SPARK_OTEL_BOX": name, "SPARK_OTEL_CENTRAL_ENDPOINT": central.otlp_grpc, **(box_env or {})},
        )
        for name in boxes
    }
    return Fleet(prometheus=prom, jaeger=store, central=central, boxes=per_box)


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
