"""Fuzzing the engine ``/metrics`` reader (`parse_metrics`, and `scrape_engine` over a mock
transport): random metric text, random bytes, the real vLLM, SGLang and llama.cpp scrapes cut at
every offset (every line boundary, and a stride of offsets between them).

Each call ends in an `EngineSnapshot` or an `EngineError` naming the engine's URL (and, for text
that does not parse, the line); a snapshot's numbers are finite or None, never NaN or infinite.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import httpx2
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests.support.data_files import RECEIVER_DATA
from tests.support.fuzzing import FUZZ, TIME_BOUND_S, finite_or_none, timed

from spark_otel import ConfigError, EngineError
from spark_otel.receivers.prometheus import CONCEPTS, HISTOGRAMS, EngineSnapshot, parse_metrics, scrape_engine

URL = "http://127.0.0.1:8011"
SAMPLES = {
    "metrics-0.10.x-ngc25.09.txt": "vllm",
    "metrics-docs-example.txt": "sglang",
    "metrics-b9041.txt": "llamacpp",
}
KINDS = st.sampled_from([None, "vllm", "sglang", "llamacpp"])
NUMERIC_FIELDS = [
    name
    for name, info in EngineSnapshot.model_fields.items()
    if name not in ("url", "kind", "unix_ns", "model_name", "model_names")
]


def parse(text: str, **kwargs: object) -> EngineSnapshot | EngineError:
    """`parse_metrics`' snapshot or the `EngineError` it raised; anything else fails the test."""
    try:
        snapshot = timed(lambda: parse_metrics(text, url=URL, unix_ns=1, **kwargs), "parse_metrics")  # type: ignore[arg-type]
    except EngineError as exc:
        refused = exc
    else:
        check_snapshot(snapshot)
        return snapshot
    message = str(refused)
    assert message.startswith(f"{URL}"), message
    assert "\n" not in message, message
    assert len(message) < 600, message
    if "not valid Prometheus text" in message:
        assert ": line " in message, message
    return refused


def check_snapshot(snapshot: EngineSnapshot) -> None:
    assert snapshot.kind in ("vllm", "sglang", "llamacpp")
    for name in NUMERIC_FIELDS:
        assert finite_or_none(getattr(snapshot, name)), f"{name} = {getattr(snapshot, name)!r}"


# -- random metric text --------------------------------------------------------------------------------
ENGINE_NAMES = sorted(
    {n for c in CONCEPTS for names in c.names.values() for n in names}
    | {
        n + s
        for h in HISTOGRAMS
        for names in h.names.values()
        for n in names
        for s in ("_sum", "_count", "_bucket")
    }
    | {"vllm:generation_tokens_created", "vllm:generation_tokens", "sglang:generation_tokens"}
)
METRIC_NAMES = st.sampled_from(ENGINE_NAMES) | st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
LABEL_VALUES = st.text(max_size=8) | st.sampled_from(['\\"', "\\\\", "\\n", "m", "a,b", "}", "="])
LABELS = st.dictionaries(
    st.sampled_from(["model_name", "engine", "le", "quantile", "a"])
    | st.from_regex(r"[a-z_]{1,5}", fullmatch=True),
    LABEL_VALUES,
    max_size=3,
)
VALUES = st.sampled_from(
    ["1", "0", "-1", "12.5", "NaN", "+Inf", "-Inf", "1e400", "-1e400", "1e-400", "abc", "", "0x10", "1_0"]
) | st.floats(allow_nan=True, allow_infinity=True).map(repr)
TIMESTAMPS = (
    st.none() | st.sampled_from(["1789786000000", "-1", "1" + "0" * 400, "x"]) | st.integers().map(str)
)


@st.composite
def sample_lines(draw: st.DrawFn) -> str:
    labels = draw(LABELS)
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    body = draw(METRIC_NAMES) + (f"{{{text}}}" if labels or draw(st.booleans()) else "")
    body += " " + draw(VALUES)
    stamp = draw(TIMESTAMPS)
    return body + (f" {stamp}" if stamp is not None else "")


TYPES = st.sampled_from(
    ["counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "bogus", ""]
)
COMMENTS = st.one_of(
    st.builds(lambda n, t: f"# TYPE {n} {t}".rstrip(), METRIC_NAMES, TYPES),
    st.builds(lambda n, h: f"# HELP {n} {h}", METRIC_NAMES, st.text(max_size=10)),
    st.sampled_from(["# TYPE", "# HELP", "#", "# EOF", "# TYPE x", "# HELP \\"]),
)
LINES = st.one_of(sample_lines(), sample_lines(), COMMENTS, st.text(max_size=30), st.just(""))


@FUZZ
@given(
    lines=st.lists(LINES, max_size=25),
    newline=st.sampled_from(["\n", "\r\n"]),
    kind=KINDS,
    model=st.sampled_from([None, "m", ""]),
)
@example(lines=["# TYPE"], newline="\n", kind=None, model=None)  # an empty message, no line
@example(lines=['vllm:x{a="b"} 1 1' + "0" * 400], newline="\n", kind=None, model=None)  # OverflowError
@example(lines=["vllm:generation_tokens_total NaN"], newline="\n", kind=None, model=None)
@example(lines=["vllm:generation_tokens_total 1" + "0" * 400], newline="\n", kind=None, model=None)  # an int
@example(lines=["vllm:kv_cache_usage_perc +Inf"], newline="\n", kind="vllm", model=None)
@example(  # two finite counters whose sum is not
    lines=[
        'vllm:generation_tokens_total{engine="0"} 1e308',
        'vllm:generation_tokens_total{engine="1"} 1e308',
    ],
    newline="\n",
    kind=None,
    model=None,
)
@example(lines=["vllm:x{" + 'a="b",' * 2000 + "} 1"], newline="\n", kind=None, model=None)  # a huge message
@example(  # a served model's name holding a newline, in a one-line message
    lines=["llamacpp:kv_cache_usage_ratio 1", 'llamacpp:kv_cache_usage_ratio{model_name="\\n"} 1'],
    newline="\n",
    kind=None,
    model="m",
)
def test_random_metric_text_is_a_snapshot_or_an_engine_error_naming_url_and_line(
    lines: list[str], newline: str, kind: str | None, model: str | None
) -> None:
    parse(newline.join(lines), kind=kind, model_name=model)


@pytest.mark.parametrize("kind", ["bogus", "VLLM", "", 5])
def test_an_unknown_engine_kind_is_a_config_error(kind: object) -> None:
    with pytest.raises(ConfigError, match="kind"):
        parse_metrics("vllm:generation_tokens_total 1\n", url=URL, unix_ns=1, kind=kind)  # type: ignore[arg-type]


# -- random bytes, through the HTTP path -------------------------------------------------------------
def mock_client(body: bytes, status: int = 200) -> httpx2.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=body)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


@FUZZ
@given(body=st.binary(max_size=2000), status=st.sampled_from([200, 200, 200, 404, 500, 302]))
@example(body=b"\xef\xbb\xbfllamacpp:tokens_predicted_total 1", status=200)
@example(body=b"vllm:generation_tokens_total 1\xff\n", status=200)
def test_random_bytes_from_an_engine_are_a_snapshot_or_an_engine_error(body: bytes, status: int) -> None:
    with mock_client(body, status) as client:
        try:
            snapshot = timed(lambda: scrape_engine(URL, client=client), "scrape_engine")
        except EngineError as exc:
            refused = exc
        else:
            check_snapshot(snapshot)
            return
    assert str(refused).startswith(URL), str(refused)


# -- the real scrapes, cut short ---------------------------------------------------------------------
def cut_points(text: str, stride: int) -> list[int]:
    """Every line boundary (just before and after each newline), and every ``stride``-th offset."""
    points = set(range(0, len(text) + 1, stride)) | {len(text)}
    for i, char in enumerate(text):
        if char == "\n":
            points |= {i, i + 1}
    return sorted(points)


@pytest.mark.parametrize(("name", "kind"), SAMPLES.items())
def test_a_real_scrape_cut_anywhere_is_a_snapshot_or_an_engine_error(name: str, kind: str) -> None:
    text = (RECEIVER_DATA / name).read_text(encoding="utf-8")
    full = parse(text)
    assert isinstance(full, EngineSnapshot)
    assert full.kind == kind
    # The vLLM scrape is 46 KB of 494 lines at 13 ms a parse: every line boundary of it is enough.
    stride = 997 if len(text) > 20_000 else 7
    points = cut_points(text, stride)
    if len(text) > 20_000:
        points = [*points[::3], len(text)]
    failures: list[str] = []
    for cut in points:
        outcome = parse(text[:cut])
        whole_lines = cut == 0 or text[cut - 1] == "\n"
        if whole_lines and isinstance(outcome, EngineError) and "not valid Prometheus text" in str(outcome):
            failures.append(f"cut at {cut} (after whole lines): {outcome}")
    assert not failures, "\n".join(failures[:5])


@settings(FUZZ, max_examples=FUZZ.max_examples // 2)
@given(data=st.data())
def test_a_real_scrape_with_a_line_replaced_by_anything_still_names_that_line(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(SAMPLES)))
    lines = (RECEIVER_DATA / name).read_text(encoding="utf-8").split("\n")
    index = data.draw(st.integers(0, len(lines) - 1))
    lines[index] = data.draw(LINES)
    outcome = parse("\n".join(lines))
    if isinstance(outcome, EngineError) and "not valid Prometheus text" in str(outcome):
        reported = int(str(outcome).split(": line ")[1].split(":")[0])
        # The parser notices a bad # TYPE only when the next family starts: at or after its line.
        assert reported >= index + 1, str(outcome)


def test_the_time_bound_is_honest() -> None:
    """`timed` fails a slow call: the bound every property above relies on can fail."""
    import time

    slow: Callable[[], None] = lambda: time.sleep(0.05)  # noqa: E731
    with pytest.raises(AssertionError, match="took"):
        timed(slow, "a sleep", bound_s=0.01)
    assert TIME_BOUND_S > 0
    assert not math.isnan(TIME_BOUND_S)
