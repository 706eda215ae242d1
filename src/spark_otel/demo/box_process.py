"""The simulated box in a child process, so its servers never compete with the demo's clients
for one interpreter lock, as a real engine never would."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .._exceptions import ConfigError, EngineError
from ..sim.clock import model_time
from .schedule import _ENGINES

__all__ = ["box_process", "serve_box_main"]

_BOX_START_S = 60.0


def serve_box_main() -> None:
    """The simulated box in a child process: its servers then never compete with the demo's
    clients for one interpreter lock, as a real engine never would. Prints the engines' URLs as
    one JSON line and serves until its stdin closes."""
    import json
    import sys

    try:
        from ..sim import run_box

        speed, epoch = float(sys.argv[1]), int(sys.argv[2])
        with model_time(speed, epoch_unix_ns=epoch), run_box(_ENGINES, speed=speed, seed=0) as box:
            print(json.dumps({name: box.url(name) for name in box.engines}), flush=True)
            sys.stdin.read()
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)


@contextmanager
def box_process(speed: float, epoch_unix_ns: int) -> Iterator[dict[str, str]]:
    import json
    import subprocess
    import sys

    code = "from spark_otel.demo import serve_box_main; serve_box_main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, repr(speed), str(epoch_unix_ns)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        ready = threading.Thread(target=lambda: lines.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        lines: list[str] = []
        ready.start()
        ready.join(_BOX_START_S)
        if not lines or not lines[0].strip():
            raise EngineError(f"the simulated box did not start within {_BOX_START_S:.0f} s")
        urls = json.loads(lines[0])
        if "error" in urls:
            raise ConfigError(f"the simulated box did not start: {urls['error']}")
        yield urls
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(5)
