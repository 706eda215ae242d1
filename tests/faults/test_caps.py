"""Every option that sizes work has a cap, named in the refusal: a bin that would make more than
10,000 receiver intervals (`instruments --bin 0.01` ran for 50 s and took 5.2 GB), a count of 23
digits (`cells -n`, an internal error from SQLite), the probe's sizes past what `--allow-large`
may lift. Each is refused before any work, with exit 2 and one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_otel import _semconv as sc
from spark_otel._exceptions import ConfigError
from spark_otel.analysis.gauges import MAX_RECEIVER_INTERVALS, receiver_intervals
from spark_otel.cli import main
from spark_otel.model import MetricSample
from spark_otel.receivers.served_models import check_engines
from spark_otel.records.probe_report import ProbeSettings
from spark_otel.records.rules_file import RulesFile
from spark_otel.report.inputs import DEFAULT_BIN_S, read_inputs
from spark_otel.store import Store

S = 1_000_000_000
T0 = 1_700_000_000 * S


def _scrapes(span_s: int, every_s: int) -> list[MetricSample]:
    """A vLLM generation counter scraped every ``every_s`` seconds for ``span_s`` seconds."""
    return [
        MetricSample(
            name=sc.ENGINE_GENERATION_TOKENS, unix_ns=T0 + t * S, value=10.0 * t, attributes={sc.ENGINE: "q"}
        )
        for t in range(0, span_s + 1, every_s)
    ]


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("spark-otel: error: ")
    return err.removeprefix("spark-otel: error: ").rstrip("\n")


def test_a_bin_that_makes_more_intervals_than_the_cap_is_refused_naming_the_cap_and_a_bin_that_fits() -> None:
    scrapes = _scrapes(200, 10)  # 200 s: 20,000 bins of 10 ms
    with pytest.raises(ConfigError) as raised:
        receiver_intervals(scrapes, 0.01)
    assert str(raised.value) == (
        "a bin of 0.01 s makes 20,000 intervals over 200 s of engine scrapes, past the cap of 10,000; "
        "use a bin of at least 1 s"
    )
    assert len(receiver_intervals(scrapes, 0.02)) == MAX_RECEIVER_INTERVALS  # the cap itself is allowed


def test_instruments_refuses_such_a_bin_in_one_line_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.write_samples(_scrapes(200, 10))
    assert main(["instruments", "--store", str(path), "--intervals", "receiver", "--bin", "0.01"]) == 2
    assert _error(capsys) == (
        "--bin 0.01: a bin of 0.01 s makes 20,000 intervals over 200 s of engine scrapes, past the cap "
        "of 10,000; use a bin of at least 1 s"
    )


def test_the_default_bin_widens_over_a_long_span_of_scrapes_and_says_so(tmp_path: Path) -> None:
    """Four days of scrapes: 11,520 bins of 30 s; the report's reading widens them to 35 s."""
    with Store(tmp_path / "s.sqlite") as store:
        store.write_samples(_scrapes(4 * 86_400, 600))
        found = read_inputs(store, source="receiver")
        with pytest.raises(ConfigError, match="past the cap of 10,000; use a bin of at least 35 s"):
            read_inputs(store, source="receiver", bin_s=DEFAULT_BIN_S)
    assert len(found.intervals) == 4 * 86_400 // 35
    assert found.intervals[0].end_unix_ns - found.intervals[0].start_unix_ns == 35 * S
    assert found.notes == [
        "receiver bins of 35 s, not 30 s: the scrapes span too long for 10,000 bins of 30 s"
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["cells", "-n", "100000000000000000000000"],
            "--limit must be a whole number >= 1 and <= 1,000,000,000, got 1e+23",
        ),
        (
            ["neighbour-cost", "--eval", "e", "--workers", "100000000000000000000000"],
            "--workers must be a whole number >= 1 and <= 1,000,000,000, got 1e+23",
        ),
        (
            ["concurrency", "--merge-gap", "1e308"],
            "--merge-gap must be a finite number >= 0 and <= 31,536,000, got 1e+308",
        ),
        (
            ["neighbour-cost", "--eval", "e", "--merge-gap", "1e308"],
            "--merge-gap must be a finite number >= 0 and <= 31,536,000, got 1e+308",
        ),
        (
            ["rules", "check", "{tmp}/rules.toml", "--timeout", "-1"],
            "--timeout must be a finite number > 0 and <= 3,600, got -1",
        ),
        (
            ["rules", "check", "{tmp}/rules.toml", "--timeout", "nan"],
            "--timeout must be a finite number > 0 and <= 3,600, got nan",
        ),
    ],
)
def test_a_count_or_timeout_out_of_range_is_refused_naming_the_option_and_its_range(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.sqlite"
    Store(store).close()
    (tmp_path / "rules.toml").write_text("")
    given = [a.format(tmp=tmp_path) for a in argv]
    if given[0] != "rules":
        given += ["--store", str(store)]
    assert main(given) == 2
    assert _error(capsys) == message


@pytest.mark.parametrize(
    ("option", "value", "cap"),
    [
        ("--streams", "1,100000000000000000000000", "4,096"),
        ("--tokens", "100000000000000000000000", "1,048,576"),
        ("--prompt-chars", "20000000", "16,777,216"),
        ("--repeats", "1001", "1,000"),
    ],
)
def test_the_probe_refuses_a_size_past_its_cap_even_with_allow_large(
    option: str, value: str, cap: str, free_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["probe", "--engine", f"q=http://127.0.0.1:{free_port}", option, value, "--no-store"]
    assert main([*argv, "--allow-large"]) == 2
    shown = f"{int(value.rpartition(',')[2]):,}"
    assert _error(capsys) == f"{option} {shown} is past the cap of {cap}, which --allow-large does not lift"


def test_the_probe_refuses_more_levels_than_its_cap(
    free_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    levels = ",".join(["1"] * 65)
    assert (
        main(["probe", "--engine", f"http://127.0.0.1:{free_port}", "--streams", levels, "--no-store"]) == 2
    )
    assert _error(capsys) == "--streams lists 65 levels, past the cap of 64"


def test_the_library_keeps_the_same_caps_on_the_probe_settings() -> None:
    with pytest.raises(ValueError, match="a level of 4,097 streams; at most 4,096 streams a level"):
        ProbeSettings(streams=[1, 4097])
    with pytest.raises(ValueError, match="less than or equal to 1048576"):
        ProbeSettings(tokens=1_048_577)
    with pytest.raises(ValueError, match="finite number"):
        ProbeSettings(time_scale=float("inf"))
    assert ProbeSettings(streams=[4096], tokens=1_048_576, repeats=1000).repeats == 1000


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["sim", "--speed", "1e300", "--duration", "1"],
            "--speed must be inf or from 0.001 to 1,000,000, got 1e+300",
        ),
        (
            ["sim", "--speed", "1e-300", "--duration", "1"],
            "--speed must be inf or from 0.001 to 1,000,000, got 1e-300",
        ),
        (
            ["demo", "--speed", "1e-300", "--store", "{tmp}/s.sqlite", "--out", "{tmp}/demo"],
            "--speed must be a finite number >= 0.001 and <= 1,000,000, got 1e-300",
        ),
    ],
)
def test_a_speed_past_what_the_model_clock_holds_is_refused_before_the_box_starts(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A speed of 1e300 or 1e-300 overflowed the model clock's nanoseconds: an internal error."""
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    assert _error(capsys) == message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("timeout_s", [0, -1.0, float("nan"), float("inf"), 3601, True])
def test_the_library_keeps_the_rules_checks_timeout_in_range(timeout_s: float) -> None:
    with pytest.raises(
        ConfigError, match="timeout_s must be a finite number of seconds above 0 and at most 3,600"
    ):
        check_engines(RulesFile(), timeout_s=timeout_s)


def test_the_rules_checks_timeout_may_be_a_whole_hour() -> None:
    assert check_engines(RulesFile(), timeout_s=3600) == []  # the cap itself is in range


@pytest.mark.parametrize("gap_s", [1e308, float("inf"), 31_536_001.0])
def test_the_library_refuses_a_merge_gap_past_a_year_instead_of_overflowing(gap_s: float) -> None:
    from spark_otel._exceptions import ConfigError
    from spark_otel.analysis.concurrency import concurrency

    with pytest.raises(ConfigError) as refused:
        concurrency([], merge_gap_s=gap_s)
    assert str(refused.value) == f"merge gap {gap_s:g} s is past a year (31,536,000 s)"
