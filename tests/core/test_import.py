"""Importing spark-otel has no side effects: its modules register no hook and read no environment
(the OpenTelemetry SDK it imports does both, on its own account)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import atexit, json, os, sys

seen = {"atexit": [], "fork": [], "environ": []}
real_register, real_fork = atexit.register, os.register_at_fork


PLUMBING = ("os", "atexit", "collections.abc", "_collections_abc", "__main__")


def caller():
    # The module of the nearest frame outside os, atexit and the mapping ABCs.
    frame = sys._getframe(2)
    while frame.f_globals.get("__name__") in PLUMBING:
        frame = frame.f_back
    return frame.f_globals.get("__name__", "")


def note(kind, what):
    module = caller()
    if module.startswith("spark_otel"):
        seen[kind].append(f"{module}: {what}")


atexit.register = lambda fn, *a, **k: note("atexit", repr(fn)) or real_register(fn, *a, **k)
os.register_at_fork = lambda **k: note("fork", sorted(k)) or real_fork(**k)


class Watched(type(os.environ)):
    def __getitem__(self, key):
        note("environ", key)
        return super().__getitem__(key)

    def __contains__(self, key):
        note("environ", key)
        return super().__contains__(key)


env = os.environ
os.environ = Watched(env._data, env.encodekey, env.decodekey, env.encodevalue, env.decodevalue)
IMPORTS
print(json.dumps(seen))
"""


def _side_effects(imports: str) -> dict[str, list[str]]:
    env = {"SPARK_OTEL_TIME_SCALE": "not a number", "SPARK_OTEL_STORE": "/nonexistent/x.sqlite"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.replace("IMPORTS", imports)],
        capture_output=True, text=True, env=env, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_spark_otel_registers_no_hook_and_reads_no_environment() -> None:
    imports = "import spark_otel, spark_otel.instrumentation, spark_otel.deadline, spark_otel.cli"
    assert _side_effects(imports) == {"atexit": [], "fork": [], "environ": []}


def test_the_probe_detects_a_side_effect() -> None:
    """The check above can fail: configure() reads the environment (here, and refuses it)."""
    found = _side_effects("import spark_otel\ntry:\n    spark_otel.configure()\nexcept Exception:\n    pass")
    assert "spark_otel.telemetry.pipeline: SPARK_OTEL_TIME_SCALE" in found["environ"]
