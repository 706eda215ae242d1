"""The public surface: exactly these names, sorted, each resolving."""

import pytest

import spark_otel

PUBLIC_API = [
    "Cell",
    "CellState",
    "CellStatus",
    "ContextThreadPoolExecutor",
    "DeadlineResult",
    "LoadWindow",
    "MetricSample",
    "Request",
    "SparkOtelInstrumentor",
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
