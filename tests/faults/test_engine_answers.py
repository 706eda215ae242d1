"""Answers that are not what the protocol promises, and outputs that cannot be written, named
instead of an internal error: a usage count that is not a whole number (the probe said
"internal error: ValueError"), `probe -o` into a missing directory (it measured everything, then
failed and wrote nothing), an nvidia-smi line past csv's field limit (an internal error), a
/metrics answer that never ends."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.support.gpu_fakes import fake_pynvml, fake_smi
from tests.support.scripted_engine import DONE_EVENT, TOKEN_EVENT, Answer, ScriptedEngine

from spark_otel._exceptions import EngineError, NoGpuError
from spark_otel.cli import main
from spark_otel.probe import ProbeSettings, run_probe
from spark_otel.receivers.gpu import SMI_MAX_LINE, parse_smi_csv
from spark_otel.receivers.prometheus import ascrape_engine, scrape_engine

TINY = ProbeSettings(streams=[1, 2], tokens=4, warmup=False, gpu="none")


def _usage(count: object, *, stream: bool) -> Answer:
    usage = {"prompt_tokens": 40, "completion_tokens": count}
    if not stream:
        return Answer(body=json.dumps({"choices": [{"index": 0, "text": "x"}], "usage": usage}).encode())
    chunk = b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n"
    return Answer(events=[TOKEN_EVENT, chunk, DONE_EVENT])


@pytest.mark.parametrize("mode", ["stream", "plain"])
@pytest.mark.parametrize("count", ["many", 2.5, -4, 10**23, [4]])
def test_a_usage_count_that_is_not_a_whole_number_is_an_engine_error_naming_the_field(
    count: object, mode: str
) -> None:
    def answer(number: int, body: dict[str, Any]) -> Answer:
        return _usage(count, stream=bool(body.get("stream")))

    with ScriptedEngine(answer=answer) as engine, pytest.raises(EngineError) as raised:
        run_probe(engine.url, TINY.model_copy(update={"mode": mode}), store=None)
    assert type(raised.value) is EngineError  # nothing was measured: no partial report
    message = str(raised.value)
    assert message.startswith(f"{engine.url}/v1/completions: every stream at level 1 failed: ")
    assert f"the engine's usage.completion_tokens is {count!r}" in message


def test_the_probe_command_says_so_in_one_line_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedEngine(answer=lambda number, body: _usage("many", stream=True)) as engine:
        assert (
            main(
                [
                    "probe",
                    "--engine",
                    f"q={engine.url}",
                    "--streams",
                    "1",
                    "--tokens",
                    "4",
                    "--gpu",
                    "none",
                    "--no-store",
                ]
            )
            == 1
        )
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "internal error" not in err
    assert err.startswith(f"spark-otel: error: {engine.url}/v1/completions: warm-up request failed: ")
    assert "usage.completion_tokens is 'many'" in err


@pytest.mark.parametrize("option", ["-o", "--plot"])
@pytest.mark.parametrize("where", ["missing/probe.json", "a-file/probe.json", "."])
def test_an_output_that_cannot_be_written_is_refused_before_any_request(
    option: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("")
    target = tmp_path / where
    with ScriptedEngine() as engine:
        code = main(
            [
                "probe",
                "--engine",
                f"q={engine.url}",
                "--streams",
                "1",
                "--tokens",
                "4",
                option,
                str(target),
                "--no-store",
            ]
        )
        assert engine.hits == {}  # not even the engine's model list was asked for
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"spark-otel: error: {'--out' if option == '-o' else option} {target}: ")
    assert ("is a directory" if where == "." else "directory") in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_an_nvidia_smi_line_past_the_cap_is_named_not_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = "0, " + "x" * 200_000 + ", GPU-a, 1, 2, 3, 4, 5, 6\n"  # past csv's 131,072 field limit
    with pytest.raises(NoGpuError) as raised:
        parse_smi_csv(line, unix_ns=0)
    assert str(raised.value) == (
        f"nvidia-smi line 1: {len(line) - 1:,} characters, past the cap of {SMI_MAX_LINE:,}; "
        "not nvidia-smi's answer"
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))
    monkeypatch.setenv("PATH", str(fake_smi(tmp_path, line)) + os.pathsep + os.environ["PATH"])
    assert main(["gpu-sample", "--source", "smi", "--once", "--store", str(tmp_path / "s.sqlite")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "past the cap of 4,096" in err
    assert not (tmp_path / "s.sqlite").exists()


def test_a_quoted_field_that_never_closes_is_named_as_not_csv() -> None:
    text = '0,"' + "x" * 3_000 + "\n" + ("y" * 3_000 + "\n") * 50  # one field over 150,000 characters
    with pytest.raises(NoGpuError, match=r"^nvidia-smi: not CSV output: field larger than field limit"):
        parse_smi_csv(text, unix_ns=0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["report", "--out", "{tmp}/a-file/report"],
            "--out {tmp}/a-file/report: is below {tmp}/a-file, which is not a directory",
        ),
        (["report", "--out", "{tmp}/a-file"], "--out {tmp}/a-file: is not a directory"),
        (
            ["advise", "--write-rules", "{tmp}/missing/rules.toml"],
            "--write-rules {tmp}/missing/rules.toml: {tmp}/missing: no such directory",
        ),
    ],
)
def test_an_output_place_that_cannot_take_it_is_refused_before_the_store_is_read(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("")
    given = [a.format(tmp=tmp_path) for a in argv]
    assert main([*given, "--store", str(tmp_path / "no-store.sqlite")]) == 2  # not "no such store"
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("spark-otel: error: " + message.format(tmp=tmp_path))


class _EndlessMetrics:
    """A /metrics that never ends: chunked, ``chunk`` bytes every ``every_s`` seconds, until the
    client goes away."""

    def __init__(self, chunk: int, every_s: float) -> None:
        self.chunk, self.every_s = chunk, every_s
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                line = b"#" * (outer.chunk - 1) + b"\n"
                try:
                    while True:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                        self.wfile.flush()
                        time.sleep(outer.every_s)
                except OSError:
                    return

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> _EndlessMetrics:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("chunk", "every_s", "said"),
    [
        (1 << 20, 0.0, "/metrics answer is larger than the cap of 33,554,432 bytes; the scrape was stopped"),
        (100, 0.05, "/metrics answer still coming after the scrape's timeout of 1 s"),
    ],
)
def test_a_metrics_answer_that_never_ends_is_stopped_at_its_cap_or_its_timeout(
    chunk: int, every_s: float, said: str
) -> None:
    """An engine streaming /metrics without end grew the receiver until the kernel killed it, or
    (a trickle: each read within httpx's timeout) held the scrape forever."""
    with _EndlessMetrics(chunk, every_s) as engine:
        with pytest.raises(EngineError) as raised:
            scrape_engine(engine.url, timeout_s=1.0)
        assert str(raised.value) == f"{engine.url}/metrics: {said}"
        with pytest.raises(EngineError) as raised:
            asyncio.run(ascrape_engine(engine.url, timeout_s=1.0))
        assert str(raised.value) == f"{engine.url}/metrics: {said}"


ERROR_EVENT = b'data: {"error": {"message": "out of memory", "type": "InternalServerError", "code": 500}}\n\n'
HTML = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
NOT_WHAT_WAS_ASKED = {
    "an error event, then [DONE]": (
        "stream",
        Answer(events=[TOKEN_EVENT, ERROR_EVENT, DONE_EVENT]),
        "the engine sent an error event: out of memory",
    ),
    "an error event, then the end": (
        "stream",
        Answer(events=[ERROR_EVENT]),
        "the engine sent an error event: out of memory",
    ),
    "an HTML page for a stream": (
        "stream",
        Answer(body=HTML, content_type="text/html"),
        f"the engine answered text/html, not an event stream: {HTML.decode()}",
    ),
    "an HTML page for a plain answer": (
        "plain",
        Answer(body=HTML, content_type="text/html"),
        f"the engine answered text/html, not JSON: {HTML.decode()}",
    ),
}


@pytest.mark.parametrize("case", NOT_WHAT_WAS_ASKED)
def test_an_error_event_or_a_page_that_is_not_the_answer_is_named_as_what_it_is(case: str) -> None:
    """Not "the stream ended without [DONE]", "no usage chunk" or a JSON parse error: the error
    names what the engine sent instead."""
    mode, answer, said = NOT_WHAT_WAS_ASKED[case]
    with ScriptedEngine(answer=lambda number, body: answer) as engine, pytest.raises(EngineError) as raised:
        run_probe(engine.url, TINY.model_copy(update={"mode": mode, "streams": [1]}), store=None)
    assert str(raised.value) == f"{engine.url}/v1/completions: every stream at level 1 failed: {said}"
