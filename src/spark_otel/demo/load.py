"""The demo's load: cells of one eval on one engine (`Lane`), and plain streams imposed on an
engine as a recorded load window."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _clock
from .schedule import _DEMO_CELL_ATTRIBUTES, CEILING_S, DEMO_RUN, SERIAL_ENGINE

if TYPE_CHECKING:
    from ..model import LoadWindow

__all__ = ["Lane", "openai_client", "same_engine_load", "sleep_model"]

_logger = logging.getLogger(__name__)


def _prompt(chars: int, seed: int) -> str:
    words = ("diff", "review", "function", "branch", "return", "pointer", "buffer", "lock", "retry", "index")
    rng = random.Random(seed)
    text = " ".join(rng.choice(words) for _ in range(chars // 5))
    return text[:chars]


def _generate(client: Any, model: str, prompt: str, tokens: int, *, stream: bool) -> None:
    """One chat completion of about ``tokens`` output tokens.

    Streamed cells go through `spark_otel.stream_with_deadline` (the ceiling holds, and what
    arrives is kept); the other evals send plain calls, which cost the demo's own process
    nothing per token, so its CPU does not slow the box it measures.
    """
    import spark_otel

    # min_tokens sets the length; the model then stops on its own ("stop", not a length cap), as a
    # real answer does, well inside max_tokens.
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 4 * tokens,
        "extra_body": {"min_tokens": tokens},
    }
    if stream:
        spark_otel.stream_with_deadline(client, deadline_s=CEILING_S, extractor=None, **kwargs)
    else:
        client.chat.completions.create(**kwargs)


@dataclass(frozen=True)
class Lane:
    """One eval's cells on one engine: who sends them and what they look like."""

    client: Any
    model: str
    eval_name: str
    engine: str
    workers: int
    tokens: tuple[int, int]
    prompt_chars: int
    stream: bool

    @classmethod
    def serial(
        cls, client: Any, model: str, eval_name: str, tokens: tuple[int, int], prompt_chars: int
    ) -> Lane:
        """The serial eval: one worker streaming its cells on the serial engine (Acts 4 and 5)."""
        return cls(
            client=client,
            model=model,
            eval_name=eval_name,
            engine=SERIAL_ENGINE,
            workers=1,
            tokens=tokens,
            prompt_chars=prompt_chars,
            stream=True,
        )

    def cell(self, cell_id: str, seed: int, **attributes: Any) -> None:
        """Run one cell; its length and prompt follow from ``seed`` alone; ``attributes`` go on
        the cell beside the demo's own."""
        import spark_otel

        n = random.Random(seed).randint(*self.tokens)
        try:
            with spark_otel.cell(
                self.eval_name,
                cell_id,
                engine=self.engine,
                deadline_s=CEILING_S,
                workers=self.workers,
                **_DEMO_CELL_ATTRIBUTES,
                **attributes,
            ):
                _generate(self.client, self.model, _prompt(self.prompt_chars, seed), n, stream=self.stream)
        except Exception as exc:  # the cell's span records the failure; the eval goes on
            _logger.info("demo: cell %s of %s ended with %s", cell_id, self.eval_name, exc)

    def run(self, stop: threading.Event, seed: int) -> int:
        """Run cells back to back until ``stop`` is set; returns how many ran."""
        count = 0
        while not stop.is_set():
            self.cell(f"{self.engine}-{seed}-{count:03d}", seed * 1000 + count)
            count += 1
        return count

    def run_set(self, n_cells: int, **attributes: Any) -> None:
        """The same ``n_cells`` cells (ids, prompts, lengths) at this lane's worker count."""
        with ThreadPoolExecutor(self.workers, thread_name_prefix="demo-cells") as pool:
            list(pool.map(lambda i: self.cell(f"pr-{i:02d}", 500 + i, **attributes), range(n_cells)))


def sleep_model(seconds: float) -> None:
    time.sleep(_clock.to_real_s(seconds))


def openai_client(base_url: str) -> Any:
    import openai

    return openai.OpenAI(
        base_url=base_url + "/v1", api_key="sim", timeout=_clock.to_real_s(CEILING_S), max_retries=0
    )


LOAD_ANSWER_TOKENS = 256
"""Tokens of each answer an imposed same-engine stream asks for, back to back."""


def same_engine_load(client: Any, model: str, streams: int, seconds: float, tag: str) -> LoadWindow:
    """``streams`` more plain requests on the serial eval's engine, back to back for ``seconds``:
    the article's "one more Qwen stream". Returns the window it ran over, for the store."""
    from ..model import LoadWindow

    stop = threading.Event()
    ends: list[int] = []

    def stream(seed: int) -> None:
        count = 0
        while not stop.is_set():
            prompt = _prompt(200, 9000 + seed * 1000 + count)
            with contextlib.suppress(Exception):  # a failed request ends nothing of the eval's
                client.chat.completions.create(
                    model=model,
                    messages=[{"role": "user", "content": prompt}],
                    # Long answers: the load is off only between them (a client's turnaround, a
                    # new prefill), which would otherwise read as a smaller cost than its own.
                    max_tokens=LOAD_ANSWER_TOKENS,
                    extra_body={"ignore_eos": True},
                )
            count += 1
        ends.append(_clock.wall_ns())

    start = _clock.wall_ns()
    with ThreadPoolExecutor(streams, thread_name_prefix="demo-load") as pool:
        try:
            for i in range(streams):
                pool.submit(stream, i)
            sleep_model(seconds)
        finally:  # on any error too (Ctrl-C): leaving the block waits for the streams
            stop.set()
    name = f"{streams} more {SERIAL_ENGINE} stream{'' if streams == 1 else 's'}"
    return LoadWindow(
        uid=f"demo-{tag}-load-{streams}",
        name=name,
        kind="load",
        engine=SERIAL_ENGINE,
        start_unix_ns=start,
        end_unix_ns=max(ends, default=_clock.wall_ns()),
        streams=streams,
        attributes={DEMO_RUN: tag},
    )
