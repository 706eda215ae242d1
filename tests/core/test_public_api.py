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
