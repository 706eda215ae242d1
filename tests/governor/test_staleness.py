"""Is a rule still about the model it was measured on? `check_engines` against real HTTP engines
on 127.0.0.1 that answer `/v1/models`, only `/metrics`, nothing useful, or nothing at all."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spark_otel.receivers.served_models import EngineCheck, check_engines, served_models
from spark_otel.records.rules_file import parse_rules

METRICS = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{model_name="qwen3.8-27b"} 2\n'
    'vllm:num_requests_running{model_name="qwen-alias"} 0\n'
)

Routes = dict[str, tuple[int, str]]
HANG = "(no answer)"


@pytest.fixture
def engine() -> Iterator[Callable[[Routes], str]]:
    """An engine that answers each path with the (status, body) given; any other path: 404."""
    servers: list[ThreadingHTTPServer] = []

    def start(routes: Routes) -> str:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = routes.get(self.path, (404, "not found"))
                if body == HANG:
                    time.sleep(3)  # longer than any timeout the tests give
                    return
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _models(*ids: object) -> tuple[int, str]:
    return 200, json.dumps({"object": "list", "data": list(ids)})


def test_served_models_lists_v1_models_skipping_entries_without_an_id(
    engine: Callable[[Routes], str],
) -> None:
    url = engine({"/v1/models": _models({"id": "qwen3.8-27b"}, {"object": "model"}, "bare", {"id": 7})})
    assert served_models(url) == ("qwen3.8-27b", "7")
    assert served_models(url + "/v1/") == ("qwen3.8-27b", "7")  # the OpenAI URL names the same engine


@pytest.mark.parametrize(
    "models",
    [(404, "not found"), _models(), _models({"object": "model"}), (200, "{}"), (500, "{}")],
    ids=["no /v1/models", "no models", "no ids", "no data", "a server error"],
)
def test_served_models_falls_back_to_the_model_names_of_metrics(
    engine: Callable[[Routes], str], models: tuple[int, str]
) -> None:
    url = engine({"/v1/models": models, "/metrics": (200, METRICS)})
    assert served_models(url) == ("qwen-alias", "qwen3.8-27b")  # sorted, as the receiver lists them


@pytest.mark.parametrize(
    "routes",
    [
        {},
        {"/metrics": (200, "# TYPE up gauge\nup 1\n")},  # metrics without a model name
        {"/metrics": (503, METRICS)},
        {"/v1/models": (200, "not json"), "/metrics": (200, METRICS)},
    ],
    ids=["nothing", "no model names", "metrics refused", "models not json"],
)
def test_an_engine_that_does_not_say_what_it_serves_gives_none(
    engine: Callable[[Routes], str], routes: Routes
) -> None:
    assert served_models(engine(routes)) is None


def test_an_engine_that_does_not_answer_gives_none(free_port: int) -> None:
    assert served_models(f"http://127.0.0.1:{free_port}", timeout_s=0.5) is None


def test_check_engines_reports_each_engine_the_rules_name_in_order(
    engine: Callable[[Routes], str], free_port: int
) -> None:
    current = engine({"/v1/models": _models({"id": "qwen3.8-27b"})})
    moved = engine({"/v1/models": _models({"id": "nemotron-nano"}, {"id": "nemo-alias"})})
    down = f"http://127.0.0.1:{free_port}"
    rules = parse_rules(
        f"""
[engines.a_current]
model = "qwen3.8-27b"
url = "{current}"
[engines.b_moved]
model = "nemotron-super"
url = "{moved}"
[engines.c_unrecorded]
url = "{current}"
[engines.a0_no_url]
model = "m0"
[engines.d_down]
model = "m"
url = "{down}"

[[lane]]
engine = "b_moved"
cells = 8
[[lane]]
engine = "a_current"
cells = 2
[[lane]]
engine = "c_unrecorded"
cells = 2
[[lane]]
engine = "e_no_url"
cells = 2
[[lane]]
engine = "a0_no_url"
cells = 1
[[cross_engine]]
engine = "e_no_url"
cells = 0
while_engine = "d_down"
""",
        where="r",
    )
    checks = check_engines(rules, timeout_s=0.5)
    assert checks == [
        EngineCheck("a0_no_url", "m0", None, "no url in [engines]: not checked"),
        EngineCheck("a_current", "qwen3.8-27b", ("qwen3.8-27b",), None),
        EngineCheck(
            "b_moved",
            "nemotron-super",
            ("nemotron-nano", "nemo-alias"),
            "measured on nemotron-super, now serves nemotron-nano, nemo-alias: stale (still applied); "
            f"re-measure with `spark-otel probe --engine b_moved={moved} --streams 1,2,4,8`, then "
            "`spark-otel advise --write-rules FILE`",
        ),
        EngineCheck("c_unrecorded", None, ("qwen3.8-27b",), "no model recorded in [engines]: not checked"),
        EngineCheck("d_down", "m", None, f"{down} did not say what it serves: not checked"),
        EngineCheck("e_no_url", None, None, "no url in [engines]: not checked"),
    ]
    assert [c.stale for c in checks] == [False, False, True, False, False, False]


@pytest.mark.parametrize(
    "routes",
    [{"/v1/models": (200, HANG)}, {"/metrics": (200, HANG)}],
    ids=["models", "metrics"],
)
def test_an_engine_that_never_answers_costs_at_most_the_timeout(
    engine: Callable[[Routes], str], routes: Routes
) -> None:
    url = engine(routes)
    rules = parse_rules(
        f'[engines.q]\nmodel = "m"\nurl = "{url}"\n[[lane]]\nengine = "q"\ncells = 1\n', where="r"
    )
    start = time.monotonic()
    assert served_models(url, timeout_s=0.3) is None
    assert check_engines(rules, timeout_s=0.3) == [
        EngineCheck("q", "m", None, f"{url} did not say what it serves: not checked")
    ]
    assert time.monotonic() - start < 2.0  # two waits of 0.3 s, not the client's default
