"""The public surface: exactly these names, sorted, each resolving."""

import pytest

import spark_otel

PUBLIC_API = [
    "Cell",
    "CellState",
    "CellStatus",
    "ConfigError",
    "ContextThreadPoolExecutor",
    "DeadlineResult",
    "EngineError",
    "GovernorError",
    "InputError",
    "LoadWindow",
    "MetricSample",
    "NoGpuError",
    "NoGpuMetricsError",
    "Request",
    "SparkOtelError",
    "SparkOtelInstrumentor",
    "StoreError",
    "Telemetry",
    "__version__",
    "astream_with_deadline",
    "carry_context",
    "cell",
    "configure",
    "current_cell",
    "govern",
    "instrument",
    "shutdown",
    "stream_with_deadline",
    "ungovern",
    "uninstrument",
]


def test_the_exported_names_are_the_public_api_sorted() -> None:
    assert spark_otel.__all__ == PUBLIC_API  # a change to the public API is a change to this list
    assert sorted(spark_otel.__all__) == spark_otel.__all__
    assert dir(spark_otel) == spark_otel.__all__


def test_every_public_name_resolves_and_a_misspelt_one_does_not() -> None:
    for name in spark_otel.__all__:
        assert getattr(spark_otel, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'instrumnt'"):
        spark_otel.instrumnt  # type: ignore[attr-defined]  # noqa: B018


def test_each_public_name_is_its_homes_object_loaded_on_first_use_and_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Names resolve lazily (importing spark_otel loads no submodule): each is looked up in its
    home module once, then kept on the package."""
    import importlib

    homes = spark_otel._HOMES  # type: ignore[attr-defined]
    assert sorted(homes) == [n for n in PUBLIC_API if n in homes]
    for name, home in homes.items():
        monkeypatch.delitem(vars(spark_otel), name, raising=False)
        value = getattr(spark_otel, name)
        assert value is getattr(importlib.import_module(f"spark_otel.{home}"), name), name
        assert vars(spark_otel)[name] is value, name


def test_the_error_tree_is_exported_and_every_error_is_a_spark_otel_error() -> None:
    """The tree `_exceptions` draws: one `except spark_otel.SparkOtelError` catches each of them."""
    tree = {
        "ConfigError": "SparkOtelError",
        "InputError": "SparkOtelError",
        "NoGpuMetricsError": "InputError",
        "EngineError": "SparkOtelError",
        "NoGpuError": "SparkOtelError",
        "StoreError": "SparkOtelError",
        "GovernorError": "SparkOtelError",
    }
    for name, parent in tree.items():
        error = getattr(spark_otel, name)
        assert error.__bases__[0] is getattr(spark_otel, parent), name
    assert issubclass(spark_otel.ConfigError, ValueError)
    assert spark_otel.ConfigError.exit_code == 2
    assert {getattr(spark_otel, n).exit_code for n in tree if n != "ConfigError"} == {1}
    from spark_otel.governor import GovernorError
    from spark_otel.probe import ProbeIncomplete

    assert GovernorError is spark_otel.GovernorError
    assert issubclass(ProbeIncomplete, spark_otel.EngineError)
