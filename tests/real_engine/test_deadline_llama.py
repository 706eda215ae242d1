"""`stream_with_deadline` on a long generation from llama.cpp's server: cut off within 0.2 s of its
deadline, status ``deadline``, and what arrived kept (a prefix of the answer the same greedy
request gives in full); the server then stops generating, its slot freed. A short one that ends
first keeps the server's usage, which llama.cpp sends on its finishing chunk."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest
from tests.support.llama_server import LlamaServer
from tests.support.waiting import wait_for

from spark_otel.deadline import DeadlineResult, DeadlineStatus, astream_with_deadline, stream_with_deadline
from spark_otel.receivers import scrape_engine

DEADLINE_S = 1.0
PROMPTNESS_S = 0.2
# Far more than the tiny model decodes in a second on one thread (a few hundred tokens).
LONG = 3000
REQUEST = {
    "model": "tiny-llama",
    "prompt": "Write a very long story about a lighthouse keeper.",
    "max_tokens": LONG,
    "temperature": 0.0,
    # Both requests process the prompt alike (no cached prefix), so greedy decoding repeats itself.
    "extra_body": {"ignore_eos": True, "cache_prompt": False},
}


def _check_cut_off(llama: LlamaServer, result: DeadlineResult, wall_s: float) -> None:
    assert result.status is DeadlineStatus.DEADLINE
    assert result.deadline_s == DEADLINE_S
    assert DEADLINE_S <= wall_s <= DEADLINE_S + PROMPTNESS_S
    assert result.timings.elapsed_s == pytest.approx(DEADLINE_S, abs=PROMPTNESS_S)
    assert result.usage.source == "streamed"  # no usage chunk: the stream never finished
    assert 0 < result.usage.completion_tokens < LONG
    assert result.text
    # The server noticed the closed connection and freed the slot: nothing decodes for nobody.
    wait_for(lambda: scrape_engine(llama.url).requests_running == 0, "llama-server's slot freed", 10.0, 0.05)
    # What arrived is the start of the answer itself (greedy decoding gives the same tokens).
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key="none", max_retries=0)
    full = client.completions.create(**{**REQUEST, "max_tokens": result.usage.completion_tokens + 64})  # type: ignore[call-overload]
    assert full.choices[0].text.startswith(result.text)


def test_a_long_generation_is_cut_off_at_its_deadline_and_keeps_what_arrived(llama: LlamaServer) -> None:
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key="none")
    started = time.monotonic()
    result = stream_with_deadline(client, deadline_s=DEADLINE_S, extractor=None, **REQUEST)
    _check_cut_off(llama, result, time.monotonic() - started)


def test_the_async_twin_cuts_off_a_long_generation_too(llama: LlamaServer) -> None:
    async def run() -> tuple[DeadlineResult, float]:
        async with openai.AsyncOpenAI(base_url=llama.url + "/v1", api_key="none") as client:
            started = time.monotonic()
            result = await astream_with_deadline(client, deadline_s=DEADLINE_S, extractor=None, **REQUEST)
            return result, time.monotonic() - started

    result, wall_s = asyncio.run(run())
    _check_cut_off(llama, result, wall_s)


def test_a_generation_that_ends_before_its_deadline_keeps_the_servers_usage(llama: LlamaServer) -> None:
    # llama.cpp sends a completions stream's usage on the chunk that finishes it, not on a chunk
    # of its own as vLLM does: the result still takes the server's count, and its finish reason.
    client = openai.OpenAI(base_url=llama.url + "/v1", api_key="none")
    result = stream_with_deadline(client, deadline_s=30.0, extractor=None, **{**REQUEST, "max_tokens": 40})
    assert result.status is DeadlineStatus.LENGTH_CAP
    assert result.finish_reason == "length"
    assert result.usage.source == "usage"
    assert result.usage.completion_tokens == 40
    plain = client.completions.create(**{**REQUEST, "max_tokens": 1})  # type: ignore[call-overload]
    assert result.usage.prompt_tokens == plain.usage.prompt_tokens
