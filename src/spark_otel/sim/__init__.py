"""A simulated vLLM-compatible engine box, calibrated to the article, over real HTTP on 127.0.0.1.

    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=100.0, seed=0) as box:
        client = openai.OpenAI(base_url=box.url("qwen") + "/v1", api_key="none")
        box.predicted_rate("qwen", 8, neighbours={"nemotron": 4})   # the ground truth, tok/s

Every figure the box reports is in model time; the box runs ``speed`` times faster than real time.
A runner in another process follows the box's clock with ``spark_otel.configure(clock=follow(URL))``
(or ``SPARK_OTEL_CLOCK``, see `clock`). The servers need the ``sim`` extra (uvicorn, starlette):
``pip install 'spark-otel[sim]'``.
"""

from __future__ import annotations

from .box import BoxModel, EngineStats, GpuReadout, RequestTiming, draw_output_tokens
from .clock import follow, model_time
from .profiles import DENSE, MOE, PROFILES, Profile, get_profile
from .server import Box, EngineSpec, parse_engine_spec, run_box

__all__ = [
    "DENSE",
    "MOE",
    "PROFILES",
    "Box",
    "BoxModel",
    "EngineSpec",
    "EngineStats",
    "GpuReadout",
    "Profile",
    "RequestTiming",
    "draw_output_tokens",
    "follow",
    "get_profile",
    "model_time",
    "parse_engine_spec",
    "run_box",
]
