"""Drive a simulated box of the fleet (tests/collector/fleet_box_runner.py, its own processes) from
another process: start it with the OTLP settings a fleet box's runner uses, send it commands one a
line and read its JSON answers on a thread. The fleet test and benchmarks/bench_fleet.py share it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
from tests.support.collector_stack import ROOT

RUNNER = ROOT / "tests" / "collector" / "fleet_box_runner.py"
SERVICE = "spark-otel-fleet"
EXPORT_TIMEOUT_S = 2.0


@dataclass
class BoxRun:
    """One box's runner process, driven one command a line; its answers are read on a thread."""

    name: str
    workdir: Path
    proc: subprocess.Popen[str]
    events: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    ready: dict[str, Any] = field(default_factory=dict)
    marks: dict[str, float] = field(default_factory=dict)
    done: dict[str, Any] = field(default_factory=dict)

    @property
    def store(self) -> Path:
        return self.workdir / "store.sqlite"

    def _read(self, out: IO[str]) -> None:
        for line in out:
            try:
                self.events.put(json.loads(line))
            except json.JSONDecodeError:
                self.events.put({"event": "noise", "line": line})
        self.events.put({"event": "eof"})

    def start_reading(self) -> None:
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def wait(self, event: str, timeout_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                got = self.events.get(timeout=max(left, 0.01))
            except queue.Empty:
                pytest.fail(f"{self.name}: no {event!r} after {timeout_s:g}s:\n{self.log_tail()}")
            if got["event"] == event:
                return got
            if got["event"] in ("error", "eof"):
                pytest.fail(f"{self.name}: {got} while waiting for {event!r}:\n{self.log_tail()}")

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def command(self, command: str, timeout_s: float = 60.0) -> float:
        """Run ``command`` and return the real Unix time the runner says it took effect."""
        self.send(command)
        self.marks[command] = float(self.wait(command, timeout_s)["time"])
        return self.marks[command]

    def finish(self, timeout_s: float = 90.0) -> dict[str, Any]:
        """Stop the box's lanes and its receiver, flush its telemetry; what the runner ran."""
        self.send("finish")
        self.done = self.wait("done", timeout_s)
        self.proc.wait(timeout=30)
        return self.done

    def real_s(self, model_unix_ns: int) -> float:
        """Real Unix seconds of a timestamp the runner took on its model clock."""
        a = self.ready["anchor"]
        return (a["real_wall_ns"] + (model_unix_ns - a["model_wall_ns"]) / a["scale"]) / 1e9

    def kill(self) -> None:
        """Kill the runner and the receiver it started, if still running."""
        if self.proc.poll() is not None:
            return
        receive_pid = self.ready.get("receive_pid")
        self.proc.kill()
        self.proc.wait(timeout=10)
        if receive_pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(receive_pid), 9)

    def log_tail(self, chars: int = 4000) -> str:
        text = ""
        for log in ("runner.log", "receive.log"):
            path = self.workdir / log
            if path.exists():
                text += f"--- {log}\n" + path.read_text(errors="replace")[-chars:]
        return text


def otlp_env(collector_http: str, box: str, store: Path) -> dict[str, str]:
    """A fleet box's runner environment: OTLP/HTTP to the box's collector, its own store."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPARK_OTEL_"))}
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector_http,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TIMEOUT": str(EXPORT_TIMEOUT_S),
            "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "cumulative",
            "OTEL_RESOURCE_ATTRIBUTES": f"service.instance.id={box}-runner,deployment.environment.name=ci",
            "OTEL_SERVICE_NAME": SERVICE,
            "OTEL_BSP_SCHEDULE_DELAY": "500",
            "SPARK_OTEL_STORE": str(store),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


def start_box(name: str, workdir: Path, collector_http: str, config: dict[str, Any]) -> BoxRun:
    """Start box ``name``'s runner (``config`` as fleet_box_runner.py takes it), logging to
    ``workdir``; the caller waits for its "ready" and kills it (``BoxRun.kill``) if it must."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = otlp_env(collector_http, name, workdir / "store.sqlite")
    # The runner, a script, imports its workload from tests.support.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    with (workdir / "runner.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, str(RUNNER), json.dumps({**config, "box": name, "workdir": str(workdir)})],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            cwd=ROOT,
        )
    run = BoxRun(name, workdir, proc)
    run.start_reading()
    return run
