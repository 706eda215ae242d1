"""`spark-otel probe`'s checks of its options, before any request: each refusal in its exact words
with exit 2, and each value just inside a bound let through (to the engine, which here is a
closed port, so the run ends with "cannot reach the engine" and exit 1). A guard moved by one, a
check that tests the wrong option or a bound dropped shows up as a different line."""

from __future__ import annotations

import pytest

from spark_otel.cli import build_parser, main

TYPO = "a guard against a typo that would swamp the engine and this machine; add --allow-large to mean it"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--tokens", "0"], "--tokens, --repeats and --prompt-chars must be positive"),
        (["--repeats", "0"], "--tokens, --repeats and --prompt-chars must be positive"),
        (["--prompt-chars", "0"], "--tokens, --repeats and --prompt-chars must be positive"),
        (["--streams", "257"], f"--streams 257 is past the limit of 256, {TYPO}"),
        (["--tokens", "131073"], f"--tokens 131,073 is past the limit of 131,072, {TYPO}"),
        (["--prompt-chars", "1000001"], f"--prompt-chars 1,000,001 is past the limit of 1,000,000, {TYPO}"),
        (["--repeats", "101"], f"--repeats 101 is past the limit of 100, {TYPO}"),
        (["--timeout", "0"], "--timeout must be a finite number > 0 and <= 86,400, got 0"),
        (["--timeout", "86401"], "--timeout must be a finite number > 0 and <= 86,400, got 86401"),
        (["--time-scale", "0"], "--time-scale must be a finite number > 0, got 0"),
        (
            ["--engine-name", "nemotron"],
            "--engine names the engine 'qwen' but --engine-name says 'nemotron'",
        ),
    ],
)
def test_probe_refuses_in_exact_words_with_exit_2(
    options: list[str], message: str, free_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["probe", "--engine", f"qwen=http://127.0.0.1:{free_port}", *options, "--no-store"]) == 2
    assert capsys.readouterr() == ("", f"spark-otel: error: {message}\n")


@pytest.mark.parametrize(
    "options",
    [
        ["--tokens", "1", "--repeats", "1", "--prompt-chars", "1"],
        ["--streams", "256", "--tokens", "131072", "--prompt-chars", "1000000", "--repeats", "100"],
        [
            "--streams",
            "1000",
            "--tokens",
            "200000",
            "--prompt-chars",
            "2000000",
            "--repeats",
            "200",
            "--allow-large",
        ],
        ["--timeout", "0.5"],
        ["--timeout", "86400"],
        ["--time-scale", "0.5"],
        ["--engine-name", "qwen"],  # the same name twice is no conflict
    ],
)
def test_probe_lets_each_value_inside_its_bounds_through_to_the_engine(
    options: list[str], free_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port}"
    assert main(["probe", "--engine", f"qwen={url}", *options, "--no-store"]) == 1
    assert capsys.readouterr() == (
        "",
        f"spark-otel: error: {url}: cannot reach the engine: ConnectError: All connection attempts failed\n",
    )


def test_streams_are_read_as_integers_between_commas_spaces_and_empty_parts_aside() -> None:
    args = build_parser().parse_args(["probe", "--engine", "http://127.0.0.1:8011", "--streams", " 1, 2,,4,"])
    assert args.streams == [1, 2, 4]


@pytest.mark.parametrize(
    ("streams", "message"),
    [
        ("1,x", "'1,x' is not a comma-separated list of integers"),
        ("1;2", "'1;2' is not a comma-separated list of integers"),
        ("0,2", "'0,2': give positive stream counts, e.g. 1,2,4,8"),
        ("0", "'0': give positive stream counts, e.g. 1,2,4,8"),
        (" , ", "' , ': give positive stream counts, e.g. 1,2,4,8"),
    ],
)
def test_bad_streams_are_refused_by_the_parser_in_exact_words(
    streams: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["probe", "--engine", "http://127.0.0.1:8011", "--streams", streams])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[-1] == f"spark-otel probe: error: argument --streams: {message}"
