"""`configure()`: the embedded store by default, OTLP from the standard variables, both at once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import spark_otel
from spark_otel import ConfigError
from spark_otel.store import Store
from spark_otel.telemetry import configure, otlp_configured

pytestmark = pytest.mark.usefixtures("clean_env")


def test_without_an_endpoint_cells_go_to_the_store(tmp_path: Path) -> None:
    telemetry = configure(store=tmp_path / "s.sqlite", set_global=False)
    assert telemetry.store is not None
    assert not telemetry.otlp
    with spark_otel.cell("golden", "B#1", engine="qwen") as c:
        c.add_tokens(prompt=10, completion=20)
    telemetry.force_flush()
    (stored,) = Store(tmp_path / "s.sqlite").cells()
    assert (stored.eval_name, stored.cell_id, stored.completion_tokens) == ("golden", "B#1", 20)
    assert "spark_otel.cells" in Store(tmp_path / "s.sqlite").sample_names()


def test_an_endpoint_turns_on_otlp_and_off_the_store_unless_asked(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    assert otlp_configured()
    telemetry = configure(set_global=False)
    assert telemetry.otlp
    assert telemetry.store is None
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "both.sqlite"))
    both = configure(set_global=False)
    assert both.otlp
    assert both.store is not None
    assert both.store.path == tmp_path / "both.sqlite"


def test_an_unknown_protocol_turns_otlp_off_and_the_store_on(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    monkeypatch.setenv("SPARK_OTEL_STORE", str(tmp_path / "kept.sqlite"))
    telemetry = configure(set_global=False)
    try:
        assert (telemetry.otlp, telemetry.store is not None) == (False, True)
    finally:
        telemetry.shutdown()
    with pytest.raises(ConfigError, match="carrier-pigeon"):
        configure(store=False, set_global=False)


def test_a_store_handed_in_is_not_closed_by_reconfiguring(tmp_path: Path) -> None:
    mine = Store(tmp_path / "mine.sqlite")
    configure(store=mine, set_global=False)
    configure(store=mine, set_global=False)
    spark_otel.shutdown()
    assert mine.cells() == []  # still open: the caller owns it
    mine.close()


def test_service_name_from_resource_attributes_is_honoured(monkeypatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=my-evals,deployment.environment.name=lab")
    telemetry = configure(store=False, set_global=False)
    attrs = telemetry.tracer_provider.resource.attributes
    assert attrs["service.name"] == "my-evals"
    assert attrs["deployment.environment.name"] == "lab"
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES")
    assert (
        configure(store=False, set_global=False).tracer_provider.resource.attributes["service.name"]
        == "spark-otel"
    )


def test_a_cell_with_nothing_configured_still_reaches_the_store(tmp_path: Path) -> None:
    path = tmp_path / "auto.sqlite"
    script = (
        "import spark_otel\nwith spark_otel.cell('golden', 'B#9') as c:\n    c.add_tokens(completion=3)\n"
    )
    env = {**os.environ, "SPARK_OTEL_STORE": str(path)}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60, env=env)
    (stored,) = Store(path).cells()
    assert (stored.cell_id, stored.completion_tokens) == ("B#9", 3)


def test_cells_from_forked_pool_workers_are_flushed_without_an_explicit_shutdown(tmp_path: Path) -> None:
    path = tmp_path / "fork.sqlite"
    script = textwrap.dedent(
        f"""
        import multiprocessing as mp
        import spark_otel

        def work(i):
            with spark_otel.cell("golden", f"w{{i}}") as c:
                c.add_tokens(completion=i + 1)
            return i

        if __name__ == "__main__":
            spark_otel.configure(store={str(path)!r})
            with mp.get_context("fork").Pool(2) as pool:
                assert sorted(pool.map(work, range(8))) == list(range(8))
                pool.close()
                pool.join()
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert sorted(c.cell_id for c in Store(path).cells()) == [f"w{i}" for i in range(8)]


def test_a_telemetry_shut_down_by_itself_is_no_longer_in_force(tmp_path: Path) -> None:
    from spark_otel.telemetry import current_telemetry

    first = configure(store=tmp_path / "first.sqlite")
    first.shutdown()
    assert current_telemetry() is None  # a cell now sets up afresh instead of using closed providers
    second = configure(store=tmp_path / "second.sqlite")
    try:
        first.shutdown()  # idempotent, and never ends the telemetry now in force
        assert current_telemetry() is second
    finally:
        second.shutdown()


def test_a_runner_that_configures_twice_exits_with_both_stores_written_and_nothing_on_stderr(
    tmp_path: Path,
) -> None:
    """spark-otel's own exit hook shuts the telemetry in force; the SDK's hooks (which would shut
    the providers first and make that a second, warned-about shutdown) stay off."""
    first, second = tmp_path / "first.sqlite", tmp_path / "second.sqlite"
    script = textwrap.dedent(
        f"""
        import spark_otel
        for path, cell_id in (({str(first)!r}, "a"), ({str(second)!r}, "b")):
            spark_otel.configure(store=path)
            with spark_otel.cell("golden", cell_id) as c:
                c.add_tokens(completion=2)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert [[c.cell_id for c in Store(p).cells()] for p in (first, second)] == [["a"], ["b"]]
