"""One simulated box of the fleet test (tests/collector/test_fleet.py), as its own processes.

This process serves a simulated engine pair (`spark_otel.sim.run_box`, qwen dense and nemotron
MoE), runs an instrumented eval against it (a serial lane on qwen, a load lane of several
workers on nemotron, a ceiling cell and a governed pair on nemotron) with the telemetry the
environment asks for (``OTEL_EXPORTER_OTLP_ENDPOINT``: the box's collector, ``SPARK_OTEL_STORE``:
the box's own embedded store), and starts ``spark-otel receive`` for the two engines and the
simulated GPU as a child process. Nothing here knows about the other box.

    python fleet_box_runner.py '{"box": "box-a", "speed": 10, ...}'

The test drives it one command a line on stdin (``extras``, ``serial-start``, ``load-start``,
``load-stop``, ``finish``); each is answered by one JSON line on stdout with the real Unix time
it took effect. ``finish`` stops everything, flushes and prints every cell the runner ran.
``serial_workers`` (default 1) runs the qwen lane with that many streams, ``load_workers`` the
nemotron lane's; ``metric_export_interval_ms`` (default 1000) is the eval's metric export interval
(benchmarks/bench_fleet.py runs 32 streams in all at the box, 16 on each engine).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import openai
from tests.support.box_workload import Lane, ceiling_cell, governed_pair

import spark_otel
from spark_otel import _clock
from spark_otel.sim import run_box


def say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, "time": time.time(), **fields}) + "\n")
    sys.stdout.flush()


def start_receive(box: str, urls: dict[str, str], interval_s: float, log: Path) -> subprocess.Popen[bytes]:
    """`spark-otel receive` for this box's engines and simulated GPU, OTLP only, as its own process
    (its own service.instance.id; no store: the box's store holds the eval's cells)."""
    env = {k: v for k, v in os.environ.items() if k != "SPARK_OTEL_STORE"}
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"service.instance.id={box}-receive"
    env["OTEL_SERVICE_NAME"] = "spark-otel-fleet-receiver"
    argv = [sys.executable, "-m", "spark_otel", "receive", "--interval", str(interval_s)]
    for name, url in urls.items():
        argv += ["--engine", f"{name}={url}"]
    argv += ["--gpu", "sim", "--sim-url", urls["qwen"]]
    with log.open("ab") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)


def main() -> int:
    config = json.loads(sys.argv[1])
    box_name: str = config["box"]
    workdir = Path(config["workdir"])
    evals: dict[str, str] = config["evals"]
    with run_box({"qwen": "dense", "nemotron": "moe"}, speed=config["speed"], seed=config["seed"]) as box:
        urls = {name: box.url(name) for name in box.engines}
        receive = start_receive(box_name, urls, config["receive_interval_s"], workdir / "receive.log")
        export_ms = int(config.get("metric_export_interval_ms", 1000))
        telemetry = spark_otel.configure(otlp=True, metric_export_interval_ms=export_ms, set_global=False)
        spark_otel.instrument()
        qwen = openai.OpenAI(base_url=urls["qwen"] + "/v1", api_key="sim", max_retries=0, timeout=60)
        nemo = openai.OpenAI(base_url=urls["nemotron"] + "/v1", api_key="sim", max_retries=0, timeout=60)
        qwen_model, nemo_model = qwen.models.list().data[0].id, nemo.models.list().data[0].id
        prefix = f"{box_name}-"
        serial_workers = int(config.get("serial_workers", 1))
        serial = Lane(
            qwen, qwen_model, evals["serial"], "qwen", serial_workers, config["serial_tokens"], prefix
        )
        load = Lane(
            nemo, nemo_model, evals["load"], "nemotron", config["load_workers"], config["load_tokens"], prefix
        )
        stop_serial, stop_load = threading.Event(), threading.Event()
        threads: dict[str, list[threading.Thread]] = {"serial": [], "load": []}
        extras: dict[str, Any] = {}
        # The box's model clock, which stamps the store's cells: real = anchor + model offset / scale.
        anchor = {
            "real_wall_ns": _clock._Anchor.real_wall_ns,
            "model_wall_ns": _clock._Anchor.clock_wall_ns,
            "scale": _clock._Anchor.rate,
        }
        say("ready", urls=urls, receive_pid=receive.pid, pid=os.getpid(), anchor=anchor)
        try:
            for line in sys.stdin:
                command = line.strip()
                if command == "extras":
                    ceiling_id = f"{prefix}ceiling-1"
                    result = ceiling_cell(nemo, nemo_model, evals["ceiling"], ceiling_id)
                    extras["ceiling"] = {
                        "cell_id": ceiling_id,
                        "status": result.status,
                        "findings": len(result.findings),
                    }
                    extras["governed"] = [f"{prefix}g-first", f"{prefix}g-second"]
                    governed_pair(
                        nemo, nemo_model, evals["governed"], workdir / "rules.toml", extras["governed"]
                    )
                    say("extras", **extras)
                elif command == "serial-start":
                    for worker in range(serial_workers):
                        thread = threading.Thread(target=serial.run, args=(stop_serial, worker))
                        thread.start()
                        threads["serial"].append(thread)
                    say("serial-start")
                elif command == "load-start":
                    for worker in range(config["load_workers"]):
                        thread = threading.Thread(target=load.run, args=(stop_load, worker))
                        thread.start()
                        threads["load"].append(thread)
                    say("load-start")
                elif command == "load-stop":
                    stop_load.set()
                    for thread in threads["load"]:
                        thread.join()
                    say("load-stop")
                elif command == "finish":
                    break
                else:
                    say("error", message=f"unknown command {command!r}")
        except Exception:
            say("error", message=traceback.format_exc())
        finally:
            stop_serial.set()
            stop_load.set()
            for thread in threads["serial"] + threads["load"]:
                thread.join()
            serial_done = time.time()
            receive.send_signal(signal.SIGTERM)
            try:
                receive_rc = receive.wait(timeout=30)
            except subprocess.TimeoutExpired:
                receive.kill()
                receive_rc = -9
            spark_otel.uninstrument()
            telemetry.force_flush(10_000)
            spark_otel.shutdown()
            dropped = {name: box.stats(name).dropped_model_s for name in box.engines}
        say(
            "done",
            serial_done=serial_done,
            cells={
                evals["serial"]: serial.cell_ids(),
                evals["load"]: load.cell_ids(),
                evals["ceiling"]: [extras["ceiling"]["cell_id"]] if "ceiling" in extras else [],
                evals["governed"]: extras.get("governed", []),
            },
            errors=[repr(exc) for exc in serial.errors + load.errors],
            dropped_model_s=dropped,
            receive_rc=receive_rc,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
