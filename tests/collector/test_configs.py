"""Every shipped collector, Jaeger, Prometheus, Tempo, Grafana and compose config, checked by the
real tools where they can run here (otelcol validate, jaeger validate, promtool, a live
Prometheus scrape) and statically where they cannot (Tempo, Grafana and Docker are not
installable here)."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml
from tests.support import collector_stack
from tests.support.collector_stack import (
    COLLECTOR_DIR,
    ROOT,
    Prometheus,
    Unusable,
    free_ports,
    prometheus_config,
    prometheus_service,
    resolve_otelcol,
)

from spark_otel import _semconv as sc

DATA = Path(__file__).parent / "data"
FLEET_ENV = {"SPARK_OTEL_CENTRAL_ENDPOINT": "127.0.0.1:24317"}

# Each shipped collector config, as it is meant to be started (overlays after the base).
COLLECTOR_CONFIGS = {
    "otelcol.yaml": (["otelcol.yaml"], {}),
    "otelcol.yaml + otelcol-prometheus-otlp.yaml": (["otelcol.yaml", "otelcol-prometheus-otlp.yaml"], {}),
    "otelcol.yaml + otelcol-fleet.yaml": (["otelcol.yaml", "otelcol-fleet.yaml"], FLEET_ENV),
    "otelcol-central.yaml": (["otelcol-central.yaml"], {}),
}
# The collector configs whose listeners must default to loopback, and Jaeger's.
LISTENING_CONFIGS = ("otelcol.yaml", "otelcol-central.yaml", "jaeger.yaml")


def _validate(otelcol: Path, files: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [str(otelcol), "validate"]
    for name in files:
        argv += ["--config", str(COLLECTOR_DIR / name)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("name", list(COLLECTOR_CONFIGS))
def test_every_shipped_collector_config_passes_otelcol_validate(otelcol_bin: Path, name: str) -> None:
    files, extra = COLLECTOR_CONFIGS[name]
    proc = _validate(otelcol_bin, files, {"PATH": "/usr/bin:/bin", **extra})
    assert proc.returncode == 0, proc.stderr


def test_validate_rejects_a_config_with_an_unknown_component(otelcol_bin: Path, tmp_path: Path) -> None:
    broken = (COLLECTOR_DIR / "otelcol.yaml").read_text().replace("span_metrics:", "spanmetricz:", 1)
    (tmp_path / "broken.yaml").write_text(broken)
    proc = subprocess.run(
        [str(otelcol_bin), "validate", "--config", str(tmp_path / "broken.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0
    assert "spanmetricz" in proc.stderr


def test_a_fleet_box_needs_its_central_endpoint(otelcol_bin: Path) -> None:
    proc = _validate(otelcol_bin, ["otelcol.yaml", "otelcol-fleet.yaml"], {"PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0
    assert 'otlp_grpc/central: requires a non-empty "endpoint"' in proc.stderr


def _jaeger_validate(jaeger: Path, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(jaeger), "validate", "--config", str(config)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )


def test_jaeger_config_passes_jaeger_validate_and_a_broken_one_does_not(
    jaeger_bin: Path, tmp_path: Path
) -> None:
    proc = _jaeger_validate(jaeger_bin, COLLECTOR_DIR / "jaeger.yaml")
    assert proc.returncode == 0, proc.stderr
    text = (COLLECTOR_DIR / "jaeger.yaml").read_text()
    broken = text.replace("exporters: [jaeger_storage_exporter]", "exporters: [jaeger_storage_exportr]")
    assert broken != text
    (tmp_path / "jaeger.yaml").write_text(broken)
    proc = _jaeger_validate(jaeger_bin, tmp_path / "jaeger.yaml")
    assert proc.returncode != 0
    assert "jaeger_storage_exportr" in proc.stderr


def test_jaeger_is_the_release_the_build_script_names(jaeger_bin: Path) -> None:
    """The binary the tests run is the module version scripts/build-jaeger.sh pins."""
    script = (ROOT / "scripts" / "build-jaeger.sh").read_text()
    pinned = re.search(r"SPARK_OTEL_JAEGER_VERSION:-(v[0-9.]+)", script)
    assert pinned
    proc = subprocess.run(
        [str(jaeger_bin), "version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert f'"gitVersion":"{pinned.group(1)}"' in proc.stdout


def _used_types(config: dict) -> set[str]:
    used = set()
    for section in ("receivers", "processors", "exporters", "connectors", "extensions"):
        for key in config.get(section) or {}:
            used.add(key.split("/")[0])
    return used


def test_the_binary_holds_exactly_the_components_the_configs_use(otelcol_bin: Path) -> None:
    proc = subprocess.run(
        [str(otelcol_bin), "components"], capture_output=True, text=True, timeout=60, check=True
    )
    components = yaml.safe_load(proc.stdout)
    built = {
        entry["name"]
        for section in ("receivers", "processors", "exporters", "connectors", "extensions")
        for entry in components.get(section) or []
    }
    used: set[str] = set()
    for files, _ in COLLECTOR_CONFIGS.values():
        for name in files:
            used |= _used_types(yaml.safe_load((COLLECTOR_DIR / name).read_text()))
    assert used == built
    shipped = {p.name for p in COLLECTOR_DIR.glob("otelcol*.yaml")}
    assert shipped == {name for files, _ in COLLECTOR_CONFIGS.values() for name in files}


def _receiver_endpoints(config: dict) -> list[str]:
    out = []
    for receiver in (config.get("receivers") or {}).values():
        for protocol in (receiver.get("protocols") or {}).values():
            out.append(protocol["endpoint"])
    for extension in (config.get("extensions") or {}).values():
        for key in ("endpoint", "http", "grpc"):
            value = (extension or {}).get(key)
            out.append(value["endpoint"] if isinstance(value, dict) else value)
    return [e for e in out if e]


@pytest.mark.parametrize("name", LISTENING_CONFIGS)
def test_listeners_bind_loopback_by_default(name: str) -> None:
    config = yaml.safe_load((COLLECTOR_DIR / name).read_text())
    listen = _receiver_endpoints(config)
    assert len(listen) >= 3, listen
    defaults = [re.fullmatch(r"\$\{env:[A-Z_]+:-([^}]+)\}", e) for e in listen]
    assert all(defaults), listen  # every listener has its own variable ...
    assert all(d.group(1).startswith("127.0.0.1:") for d in defaults if d), listen  # ... loopback by default
    reader = config["service"]["telemetry"]["metrics"]["readers"][0]
    assert reader["pull"]["exporter"]["prometheus"]["host"] == "127.0.0.1"


def test_one_setting_sends_traces_to_tempo_or_jaeger() -> None:
    """Both stores take OTLP/gRPC on the port the collector's one trace exporter defaults to, and
    SPARK_OTEL_TRACES_ENDPOINT moves it (the end-to-end tests point it at a running Jaeger)."""
    collector = yaml.safe_load((COLLECTOR_DIR / "otelcol.yaml").read_text())
    trace_exporters = collector["service"]["pipelines"]["traces"]["exporters"]
    assert trace_exporters == ["otlp_grpc/traces", "span_metrics"]
    endpoint = collector["exporters"]["otlp_grpc/traces"]["endpoint"]
    assert endpoint == "${env:SPARK_OTEL_TRACES_ENDPOINT:-127.0.0.1:14317}"
    central = yaml.safe_load((COLLECTOR_DIR / "otelcol-central.yaml").read_text())
    assert central["exporters"]["otlp_grpc/traces"]["endpoint"] == endpoint
    port = endpoint.rstrip("}").rsplit(":", 1)[1]
    tempo = yaml.safe_load((COLLECTOR_DIR / "tempo.yaml").read_text())
    assert (
        tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].rsplit(":", 1)[1] == port
    )
    jaeger = yaml.safe_load((COLLECTOR_DIR / "jaeger.yaml").read_text())
    jaeger_grpc = jaeger["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert jaeger_grpc.rstrip("}").rsplit(":", 1)[1] == port
    assert jaeger["service"]["pipelines"]["traces"]["receivers"] == ["otlp"]


def test_the_box_name_reaches_every_metric_point_and_the_central_collector_only_relays() -> None:
    collector = yaml.safe_load((COLLECTOR_DIR / "otelcol.yaml").read_text())
    metrics = collector["service"]["pipelines"]["metrics"]["processors"]
    # The box's name on the resource first, then copied onto every data point (host_name).
    assert metrics.index("resource") < metrics.index("transform/box") < metrics.index("batch")
    statements = collector["processors"]["transform/box"]["metric_statements"][0]["statements"]
    assert statements[0].startswith(
        'set(datapoint.attributes["host.name"], resource.attributes["host.name"])'
    )
    central = yaml.safe_load((COLLECTOR_DIR / "otelcol-central.yaml").read_text())
    # Span metrics, the box name and the delta guard happen on the boxes, once.
    assert "connectors" not in central
    for pipeline in central["service"]["pipelines"].values():
        assert pipeline["processors"] == ["memory_limiter", "batch"]
    fleet = yaml.safe_load((COLLECTOR_DIR / "otelcol-fleet.yaml").read_text())
    assert fleet["service"]["pipelines"]["metrics"]["exporters"] == ["otlp_grpc/central"]
    assert fleet["service"]["pipelines"]["traces"]["exporters"] == ["otlp_grpc/central", "span_metrics"]


def test_span_metrics_dimensions_are_semconv_attributes() -> None:
    config = yaml.safe_load((COLLECTOR_DIR / "otelcol.yaml").read_text())
    connector = config["connectors"]["span_metrics"]
    dims = [d["name"] for d in connector["dimensions"]]
    expected = {sc.EVAL_NAME, sc.ENGINE, sc.CELL_STATUS, sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_REQUEST_MODEL}
    assert expected <= set(dims)
    assert set(dims) <= {v for k, v in vars(sc).items() if k.isupper() and isinstance(v, str)}
    assert connector["namespace"] == sc.SPAN_METRICS_NAMESPACE
    buckets = connector["histogram"]["explicit"]["buckets"]
    assert buckets[0] == "1s"
    assert buckets[-1] == "1h"


def test_metrics_pipeline_guards_delta_before_remote_write() -> None:
    config = yaml.safe_load((COLLECTOR_DIR / "otelcol.yaml").read_text())
    metrics = config["service"]["pipelines"]["metrics"]
    assert metrics["processors"][0] == "memory_limiter"
    assert "delta_to_cumulative" in metrics["processors"]
    assert metrics["processors"].index("delta_to_cumulative") < metrics["processors"].index("batch")
    assert "prometheus_remote_write" in metrics["exporters"]
    assert "span_metrics" in metrics["receivers"]
    assert "span_metrics" in config["service"]["pipelines"]["traces"]["exporters"]


def test_prometheus_config_and_rules_pass_promtool(promtool_bin: Path) -> None:
    proc = subprocess.run(
        [str(promtool_bin), "check", "config", str(COLLECTOR_DIR / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rules found" in proc.stdout
    rules = subprocess.run(
        [str(promtool_bin), "check", "rules", str(COLLECTOR_DIR / "rules.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert rules.returncode == 0, rules.stdout + rules.stderr


def test_promtool_rejects_a_broken_rule(promtool_bin: Path, tmp_path: Path) -> None:
    bad = tmp_path / "rules.yml"
    bad.write_text("groups:\n  - name: x\n    rules:\n      - record: a:b\n        expr: sum(rate(x[1m])\n")
    proc = subprocess.run(
        [str(promtool_bin), "check", "rules", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode != 0


class _Exposition(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def vllm_endpoint() -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 serving a real vLLM /metrics capture."""
    handler = type("Handler", (_Exposition,), {"body": (DATA / "vllm-metrics.txt").read_bytes()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_prometheus_ships_the_scrape_path_off_and_reads_targets_without_a_restart(
    prometheus_bin: Path, tmp_path: Path, vllm_endpoint: str
) -> None:
    """Shape 2 of docs/deploy.md runs `spark-otel receive`; an engine scraped as well would double
    every series, so the shipped `engines` job has no targets until engines.d/ lists some."""
    shipped = yaml.safe_load((COLLECTOR_DIR / "prometheus.yml").read_text())
    job = next(j for j in shipped["scrape_configs"] if j["job_name"] == "engines")
    assert "static_configs" not in job
    assert [sd["files"] for sd in job["file_sd_configs"]] == [["engines.d/*.yml"]]
    config = prometheus_config(tmp_path)
    (port,) = free_ports(1)
    prom = prometheus_service(prometheus_bin, config, tmp_path, port)
    api = Prometheus(prom, f"http://127.0.0.1:{port}", config)

    def engine_targets() -> list[dict]:
        body = httpx.get(f"{api.url}/api/v1/targets", timeout=10).json()
        return [t for t in body["data"]["activeTargets"] if t["labels"].get("job") == "engines"]

    try:
        prom.start()
        time.sleep(1.0)  # a discovery round
        assert engine_targets() == []
        # The documented switch: list the engine in engines.d/ (the example's format).
        prometheus_config(tmp_path, engine_targets={"qwen": vllm_endpoint})
        result = api.wait_for('spark_otel_engine_generation_tokens_total{spark_otel_engine="qwen"}', 30)
        assert [t["labels"]["instance"] for t in engine_targets()] == [vllm_endpoint]
        assert [float(r["value"][1]) for r in result] == [1739.0]
        assert r"engine_index" in result[0]["metric"]
        # The example names the box as a box's collector does, so the box filter keeps it.
        assert result[0]["metric"]["host_name"] == "spark-box"
        running = api.query('spark_otel_engine_requests_running{spark_otel_engine="qwen"}')
        assert len(running) == 1
        waiting = api.query("spark_otel_engine_requests_waiting")
        assert len(waiting) == 1
        assert api.query("spark_otel_engine_prompt_tokens_total")[0]["value"][1] == "246"
        assert not api.query('{__name__=~"vllm:(generation_tokens_total|num_requests_running)"}')
    finally:
        prom.stop()


def test_unusable_collector_path_fails_even_outside_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    not_executable = tmp_path / "otelcol-spark"
    not_executable.write_text("")
    monkeypatch.setenv("SPARK_OTEL_OTELCOL", str(not_executable))
    resolved = resolve_otelcol()
    assert isinstance(resolved, Unusable)
    assert resolved.always_fails
    assert "not an executable file" in resolved.reason


@pytest.mark.parametrize("prints_path", [False, True], ids=["no output", "not executable"])
def test_a_build_without_an_executable_path_fails_even_outside_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, prints_path: bool
) -> None:
    """The build script exits 0 but names no executable: a broken script, never a skip."""
    not_executable = tmp_path / "otelcol-spark"
    not_executable.write_text("")
    script = tmp_path / "scripts" / "build-collector.sh"
    script.parent.mkdir()
    script.write_text("echo building >&2\n" + (f"echo {not_executable}\n" if prints_path else ""))
    go = tmp_path / "bin" / "go"  # resolve_otelcol builds only where Go is installed
    go.parent.mkdir()
    go.write_text("#!/bin/sh\n")
    go.chmod(0o755)
    monkeypatch.setenv("PATH", f"{go.parent}:{os.environ['PATH']}")
    monkeypatch.delenv("SPARK_OTEL_OTELCOL", raising=False)
    monkeypatch.setattr(collector_stack, "ROOT", tmp_path)
    resolved = resolve_otelcol()
    assert isinstance(resolved, Unusable)
    assert resolved.always_fails
    assert ("not an executable file" if prints_path else "printed no path") in resolved.reason


def test_tempo_config_is_monolithic_3x_with_generator_writing_to_prometheus() -> None:
    config = yaml.safe_load((COLLECTOR_DIR / "tempo.yaml").read_text())
    # Tempo 3 monolithic: these blocks were removed (migrate-to-3.md) and load strictly.
    assert not {"ingester", "ingester_client", "compactor", "metrics_generator_client"} & set(config)
    assert config["storage"]["trace"]["backend"] == "local"
    grpc = config["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    collector = yaml.safe_load((COLLECTOR_DIR / "otelcol.yaml").read_text())
    traces_exporter = collector["exporters"]["otlp_grpc/traces"]["endpoint"]
    assert grpc.rsplit(":", 1)[1] == traces_exporter.rstrip("}").rsplit(":", 1)[1]
    remote = config["metrics_generator"]["storage"]["remote_write"][0]["url"]
    assert remote.endswith("/api/v1/write")
    assert config["overrides"]["defaults"]["metrics_generator"]["processors"] == [
        "service-graphs",
        "span-metrics",
    ]


def _provisioned_datasources() -> list[dict]:
    path = COLLECTOR_DIR / "grafana" / "provisioning" / "datasources" / "spark_otel.yaml"
    return yaml.safe_load(path.read_text())["datasources"]


def test_grafana_datasources_link_traces_to_metrics() -> None:
    sources = {d["uid"]: d for d in _provisioned_datasources()}
    assert set(sources) == {"prometheus", "tempo", "jaeger"}
    assert sources["prometheus"]["type"] == "prometheus"
    assert sources["jaeger"]["type"] == "jaeger"
    assert sources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"][0]["datasourceUid"] == "tempo"
    # Jaeger's trace-to-metrics links are Tempo's, key for key (the end-to-end test runs them).
    assert sources["jaeger"]["jsonData"]["tracesToMetrics"] == sources["tempo"]["jsonData"]["tracesToMetrics"]
    t2m = sources["tempo"]["jsonData"]["tracesToMetrics"]
    assert t2m["datasourceUid"] == "prometheus"
    tags = {tag["key"]: tag.get("value", tag["key"]) for tag in t2m["tags"]}
    assert tags[sc.EVAL_NAME] == "spark_otel_eval"
    assert tags[sc.ENGINE] == "spark_otel_engine"
    # Remote write carries service.name as `job`; the end-to-end test runs these queries live.
    assert tags["service.name"] == "job"
    # Grafana expands $VAR in provisioning files: the query macro must be escaped as $$.
    for query in t2m["queries"]:
        assert "$$__tags" in query["query"]
        assert re.search(r"(?<!\$)\$__tags", query["query"]) is None


def test_grafana_dashboard_provider_points_at_the_mounted_json() -> None:
    path = COLLECTOR_DIR / "grafana" / "provisioning" / "dashboards" / "spark_otel.yaml"
    provider = yaml.safe_load(path.read_text())["providers"][0]
    assert provider["type"] == "file"
    compose = yaml.safe_load((COLLECTOR_DIR / "compose.yaml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    mounted = {m.split(":")[1]: m.split(":")[0] for m in mounts}
    source = mounted[provider["options"]["path"]]
    assert (COLLECTOR_DIR / source).resolve() == (ROOT / "dashboards" / "json").resolve()


def test_compose_cross_references_hold() -> None:
    compose = yaml.safe_load((COLLECTOR_DIR / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"collector", "prometheus", "tempo", "jaeger", "grafana"}
    declared_volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        for dep in service.get("depends_on", []):
            assert dep in services, f"{name} depends on unknown {dep}"
            # A service that always runs cannot wait for one that runs only in a profile.
            assert not services[dep].get("profiles") or service.get("profiles"), f"{name} needs {dep}"
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (COLLECTOR_DIR / source).exists(), f"{name} mounts missing {source}"
            elif not source.startswith("${"):
                assert source in declared_volumes, f"{name} uses undeclared volume {source}"
    env = services["collector"]["environment"]
    # One setting picks the trace store: its profile. Each store answers to `traces` on the
    # collector's port, and the profiles are apart.
    host, port = env["SPARK_OTEL_TRACES_ENDPOINT"].split(":")
    assert host == "traces"
    assert services["tempo"]["profiles"] == ["tempo"]
    assert services["jaeger"]["profiles"] == ["jaeger"]
    for store in ("tempo", "jaeger"):
        assert services[store]["networks"]["default"]["aliases"] == [host]
    tempo = yaml.safe_load((COLLECTOR_DIR / "tempo.yaml").read_text())
    assert tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"] == f"0.0.0.0:{port}"
    jaeger_env = services["jaeger"]["environment"]
    assert jaeger_env["SPARK_OTEL_JAEGER_OTLP_GRPC_ENDPOINT"] == f"0.0.0.0:{port}"
    assert services["jaeger"]["command"] == ["--config", "/etc/jaeger/jaeger.yaml"]
    assert "./jaeger.yaml:/etc/jaeger/jaeger.yaml:ro" in services["jaeger"]["volumes"]
    # Grafana's Jaeger datasource reads the query port the jaeger service publishes.
    query_port = jaeger_env["SPARK_OTEL_JAEGER_QUERY_HTTP_ENDPOINT"].rsplit(":", 1)[1]
    assert f"127.0.0.1:{query_port}:{query_port}" in services["jaeger"]["ports"]
    assert env["SPARK_OTEL_PROMETHEUS_URL"].startswith("http://prometheus:9090/")
    prom_cmd = services["prometheus"]["command"]
    assert "--web.enable-remote-write-receiver" in prom_cmd
    # Every file Prometheus' config names is mounted beside it.
    prom_config = yaml.safe_load((COLLECTOR_DIR / "prometheus.yml").read_text())
    mounted = {m.split(":")[1] for m in services["prometheus"]["volumes"]}
    for rule_file in prom_config["rule_files"]:
        assert f"/etc/prometheus/{rule_file}" in mounted
    for job in prom_config["scrape_configs"]:
        for sd in job.get("file_sd_configs", []):
            for pattern in sd["files"]:
                assert f"/etc/prometheus/{Path(pattern).parent}" in mounted, pattern
    grafana_env = services["grafana"]["environment"]
    datasource_urls = {d["uid"]: d["url"] for d in _provisioned_datasources()}
    assert "PROMETHEUS_URL" in datasource_urls["prometheus"]
    assert grafana_env["PROMETHEUS_URL"] == "http://prometheus:9090"
    assert grafana_env["TEMPO_URL"].startswith("http://tempo:3200")
    assert grafana_env["JAEGER_URL"] == f"http://jaeger:{query_port}"
    assert "JAEGER_URL" in datasource_urls["jaeger"]


def test_make_test_runs_what_ci_runs() -> None:
    """`make test` promises CI's steps: .ci/run's test command, each step in the venv, in order."""
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    steps = [step.strip() for step in ci.split("&&")]
    assert steps == ["ruff check .", "ruff format --check .", "lint-imports", "mypy", "pytest -q"]
    proc = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "test"], capture_output=True, text=True, timeout=60, check=True
    )
    recipe = proc.stdout.replace("\\\n", " ")
    positions = [recipe.find(f".venv/bin/{step}") for step in steps]
    assert -1 not in positions, recipe
    assert positions == sorted(positions), recipe
    # With every real component required, as .ci/run exports: a missing one fails, never skips.
    assert "SPARK_OTEL_REQUIRE_REAL_COMPONENTS=1 .venv/bin/pytest -q" in recipe
    assert "SPARK_OTEL_JAEGER=" in recipe
    assert "SPARK_OTEL_LLAMA_SERVER=" in recipe
