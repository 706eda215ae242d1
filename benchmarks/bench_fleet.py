"""What one fleet box sends, and what the centre spends on it, at the demo's load and at 32 streams.

The fleet shape of docs/deploy.md on 127.0.0.1, as tests/collector/test_fleet.py runs it: the
built collector per box (otelcol.yaml + otelcol-fleet.yaml) in front of one central collector
(otelcol-central.yaml, as shipped), one Prometheus and one Jaeger. One simulated box at a time
(tests/collector/fleet_box_runner.py: a simulated qwen and nemotron, an instrumented eval,
`spark-otel receive` for both engines and the simulated GPU) runs one load, interleaved round by
round, each on a fresh box (its own name, collector and series):

- demo: the fleet test's load, a serial stream on qwen and four workers on nemotron (5 streams);
- 32 streams: 16 workers on each engine.

After a warm-up, each phase reads over ``--seconds``: the box collector's own counters (its
telemetry at ``detailed``, for byte sizes): spans, metric points and OTLP/HTTP body bytes taken
in, spans, points and protobuf bytes sent to the centre; the samples Prometheus appended; the CPU
seconds of the central collector (net of what it spends idle, measured first), the box collector,
Prometheus and Jaeger (``/proc/PID/stat``). At the end it counts each box's series in Prometheus
with every label's cardinality, and fails if a label names a cell. It prints the median of the
rounds with their range, the ratio of the two loads, and both scaled to 100 boxes.

    .venv/bin/python benchmarks/bench_fleet.py [--rounds 2] [--seconds 30] [--warmup 12] [--export-s 1]
    .venv/bin/python benchmarks/bench_fleet.py --rounds 1 --seconds 90 --export-s 15   # as deployed

Needs the collector and Jaeger (``SPARK_OTEL_OTELCOL``/``SPARK_OTEL_JAEGER`` or ``make collector
jaeger``) and ``prometheus`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import series_checks  # noqa: E402
from tests.support.collector_stack import (  # noqa: E402
    Collector,
    Fleet,
    Unusable,
    resolve_jaeger,
    resolve_otelcol,
    start_fleet,
)
from tests.support.fleet_boxes import BoxRun, start_box  # noqa: E402

from spark_otel.store import Store  # noqa: E402

SPEED = 10.0  # the fleet test's: model seconds per real second
LOADS = {"demo": (1, 4), "32 streams": (16, 16)}  # (qwen workers, nemotron workers)
EVALS = {"serial": "bench-serial", "load": "bench-load", "ceiling": "bench-ceiling", "governed": "bench-g"}
DETAILED = "--set=service::telemetry::metrics::level=detailed"
SETTLE_S = 4.0
FLEET = 100


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _counters(url: str) -> dict[str, float]:
    """A /metrics page's samples summed by name (``_total`` dropped: the collector's own counters
    carry none), and by name and HTTP route where it has one."""
    out: dict[str, float] = defaultdict(float)
    for family in text_string_to_metric_families(httpx.get(url, timeout=10).text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total")
            out[name] += sample.value
            if "http_route" in sample.labels:
                out[f"{name}:{sample.labels['http_route']}"] += sample.value
    return out


def _pid(service: Any) -> int:
    return int(service.proc.pid)


def _snapshot(fleet: Fleet, box: Collector | None) -> dict[str, float]:
    snap = {"t": time.time(), "central_cpu": _cpu_s(fleet.central.pid())}
    snap["prom_cpu"] = _cpu_s(_pid(fleet.prometheus.service))
    snap["jaeger_cpu"] = _cpu_s(_pid(fleet.jaeger.service))
    snap["prom_samples"] = _counters(f"{fleet.prometheus.url}/metrics")[
        "prometheus_tsdb_head_samples_appended"
    ]
    if box is not None:
        snap["box_cpu"] = _cpu_s(box.pid())
        c = _counters(box.metrics_url)
        snap["in_spans"] = c["otelcol_receiver_accepted_spans"]
        snap["in_points"] = c["otelcol_receiver_accepted_metric_points"]
        snap["in_trace_bytes"] = c["http_server_request_body_size_sum:/v1/traces"]
        snap["in_metric_bytes"] = c["http_server_request_body_size_sum:/v1/metrics"]
        snap["out_spans"] = c["otelcol_exporter_sent_spans"]
        snap["out_points"] = c["otelcol_exporter_sent_metric_points"]
        snap["out_bytes"] = c["otelcol_exporter_enqueue_size_bytes_sum"]
    return snap


def _rates(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    wall = b["t"] - a["t"]
    return {k: (b[k] - a[k]) / wall for k in a if k != "t"}


def _phase(fleet: Fleet, tmp: Path, box: str, load: str, args: argparse.Namespace) -> dict[str, float]:
    """One box running ``load``: its figures per second over the measured window."""
    qwen, nemotron = LOADS[load]
    collector = fleet.boxes[box]
    collector.service.start()
    config = {
        "speed": SPEED,
        "seed": 0,
        "evals": EVALS,
        "serial_tokens": 100,
        "load_tokens": 300,
        "serial_workers": qwen,
        "load_workers": nemotron,
        "receive_interval_s": args.export_s,  # receive is on real time; it exports per scrape
        "metric_export_interval_ms": int(args.export_s * 1000),
    }
    run: BoxRun = start_box(box, tmp / box / "box", collector.otlp_http, config)
    try:
        run.ready = run.wait("ready", 90)
        started = time.time()
        run.command("serial-start")
        run.command("load-start")
        time.sleep(args.warmup)
        first = _snapshot(fleet, collector)
        time.sleep(args.seconds)
        last = _snapshot(fleet, collector)
        run.command("load-stop", 120)
        done = run.finish()
    finally:
        run.kill()
        collector.service.stop()
    if done["errors"]:
        raise SystemExit(f"{box}: the eval failed: {done['errors'][:3]}")
    figures = _rates(first, last)
    with Store(run.store, read_only=True) as store:
        ends = [run.real_s(c.end_unix_ns) for c in store.cells()]
    figures["cells"] = sum(first["t"] <= e < last["t"] for e in ends) / (last["t"] - first["t"])
    figures["dropped_share"] = max(done["dropped_model_s"].values()) / ((time.time() - started) * SPEED)
    return figures


# (key, row label, scale for printing, unit)
ROWS = [
    ("cells", "cells finished", 1, "/s"),
    ("in_spans", "box in: spans", 1, "/s"),
    ("in_points", "box in: metric points", 1, "/s"),
    ("in_bytes", "box in: OTLP/HTTP bodies", 1e-3, "kB/s"),
    ("out_spans", "to centre: spans", 1, "/s"),
    ("out_points", "to centre: points (+ span metrics)", 1, "/s"),
    ("out_bytes", "to centre: protobuf, before gzip", 1e-3, "kB/s"),
    ("prom_samples", "Prometheus: samples appended", 1, "/s"),
    ("central_net", "central collector CPU, net of idle", 100, "% core"),
    ("box_cpu", "box collector CPU (detailed telemetry)", 100, "% core"),
    ("prom_cpu", "Prometheus CPU", 100, "% core"),
    ("jaeger_cpu", "Jaeger CPU", 100, "% core"),
]


def _summary(phases: list[dict[str, float]]) -> dict[str, tuple[float, float, float]]:
    out = {}
    for key, *_ in ROWS:
        values = [p[key] for p in phases]
        out[key] = (statistics.median(values), min(values), max(values))
    return out


def _series(fleet: Fleet, tmp: Path, boxes: dict[str, str], start: float) -> dict[str, dict[str, Any]]:
    """Each load's box: its series count (ingested, recorded) and label cardinality."""
    out = {}
    cell_ids, hex_ids = series_checks.per_cell_values(tmp / b / "box" / "store.sqlite" for b in boxes)
    for box, load in boxes.items():
        got = series_checks.box_series(fleet.prometheus, box, start, time.time())
        out[load] = {
            "box": box,
            "series": len(got.series),
            "ingested": len(got.ingested),
            "recorded": len(got.recorded),
            "buckets": sum(s["__name__"].endswith("_bucket") for s in got.series),
            "cardinality": got.cardinality(),
            "per_cell_labels": series_checks.per_cell_labels(got, cell_ids, hex_ids),
        }
    return out


def _fmt(value: float, scale: float) -> str:
    v = value * scale
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.2f}" if abs(v) < 10 else f"{v:,.1f}"


def _print(result: dict[str, Any]) -> None:
    s, loads = result["settings"], list(LOADS)
    print(
        f"one fleet box, speed {s['speed']:g}x, metrics exported every {s['export_s']:g} s, "
        f"{s['rounds']} round(s) x {s['seconds']:g} s measured after {s['warmup']:g} s warm-up; "
        f"load average {s['load_before']:.1f} -> {s['load_after']:.1f} on {s['cpus']} CPUs"
    )
    print(f"central collector idle: {100 * result['central_idle']:.2f} % core\n")
    head = f"{'per box':<40} " + " ".join(f"{name + ' (range)':>24}" for name in loads) + f" {'ratio':>6}"
    print(head)
    for key, label, scale, unit in ROWS:
        cells = []
        for load in loads:
            med, lo, hi = result["summary"][load][key]
            cells.append(f"{_fmt(med, scale)} ({_fmt(lo, scale)}-{_fmt(hi, scale)})")
        base = result["summary"][loads[0]][key][0]
        ratio = result["summary"][loads[1]][key][0] / base if base else float("nan")
        print(f"{label + ', ' + unit:<40} " + " ".join(f"{c:>24}" for c in cells) + f" {ratio:>5.1f}x")
    print("\nPrometheus series per box (all series the box's data made, recording rules' included)")
    for load in loads:
        ser = result["series"][load]
        top = ", ".join(f"{k} {v}" for k, v in ser["cardinality"].items() if v > 1)
        print(
            f"  {load}: {ser['series']} series ({ser['ingested']} written, {ser['recorded']} recorded; "
            f"{ser['buckets']} histogram buckets); labels with more than one value: {top}"
        )
        print(f"    labels naming a cell or request: {', '.join(ser['per_cell_labels']) or 'none'}")
    print(f"\n{FLEET} boxes at each load (x{FLEET}; series and central CPU grow with boxes, not cells)")
    for load in loads:
        m = {k: v[0] for k, v in result["summary"][load].items()}
        print(
            f"  {load}: {FLEET * m['out_spans']:,.0f} spans/s, {FLEET * m['out_points']:,.0f} points/s, "
            f"{FLEET * m['out_bytes'] / 1e6:,.2f} MB/s into the centre; Prometheus "
            f"{FLEET * m['prom_samples']:,.0f} samples/s, {FLEET * result['series'][load]['series']:,} "
            f"series; central collector {FLEET * m['central_net']:.2f} cores"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of both loads (default 2)")
    parser.add_argument("--seconds", type=float, default=30.0, help="measured seconds per phase (default 30)")
    parser.add_argument("--warmup", type=float, default=12.0, help="seconds before measuring (default 12)")
    parser.add_argument(
        "--export-s",
        type=float,
        default=1.0,
        help="seconds between metric exports: the eval's, receive's and span metrics' (default 1, the fleet "
        "test's; 15 is what docs/deploy.md sets)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0 or args.export_s < 1:
        parser.error(
            "--rounds must be at least 1, --seconds above 0, --warmup 0 or more, --export-s 1 or more"
        )
    binaries = {"collector": resolve_otelcol(), "jaeger": resolve_jaeger()}
    prometheus = shutil.which("prometheus")
    for what, found in binaries.items():
        if isinstance(found, Unusable):
            raise SystemExit(f"no {what}: {found.reason}")
    if prometheus is None:
        raise SystemExit("prometheus is not on PATH (apt-get install prometheus)")
    names = {
        f"bench-{i}-{'demo' if load == 'demo' else 's32'}": load for i in range(args.rounds) for load in LOADS
    }
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp_name:
        tmp = Path(tmp_name)
        fleet = start_fleet(
            tmp,
            Path(str(binaries["collector"])),
            Path(prometheus),
            Path(str(binaries["jaeger"])),
            list(names),
            box_env={"SPARK_OTEL_SPAN_METRICS_FLUSH": f"{args.export_s:g}s"},
        )
        for box in fleet.boxes.values():
            box.service.argv.append(DETAILED)
        start = time.time()
        for service in (fleet.prometheus.service, fleet.jaeger.service, fleet.central.service):
            service.start()
        try:
            idle_a = _snapshot(fleet, None)
            time.sleep(args.seconds)
            central_idle = _rates(idle_a, _snapshot(fleet, None))["central_cpu"]
            phases: dict[str, list[dict[str, float]]] = {load: [] for load in LOADS}
            for box, load in names.items():
                figures = _phase(fleet, tmp, box, load, args)
                figures["in_bytes"] = figures["in_trace_bytes"] + figures["in_metric_bytes"]
                figures["central_net"] = figures["central_cpu"] - central_idle
                phases[load].append(figures)
                print(
                    f"{box}: {figures['cells']:.1f} cells/s, {figures['in_spans']:.1f} spans/s, "
                    f"{figures['in_points']:.0f} points/s; the box dropped "
                    f"{100 * figures['dropped_share']:.2f}% of model time",
                    file=sys.stderr,
                )
            time.sleep(SETTLE_S)
            series = _series(fleet, tmp, {b: n for b, n in names.items() if b.startswith("bench-0-")}, start)
        finally:
            for service in reversed(fleet.services()):
                service.stop()
    result = {
        "settings": {
            "speed": SPEED,
            "rounds": args.rounds,
            "seconds": args.seconds,
            "warmup": args.warmup,
            "export_s": args.export_s,
            "cpus": os.cpu_count(),
            "load_before": load_before,
            "load_after": os.getloadavg()[0],
            "loads": {k: {"qwen_workers": q, "nemotron_workers": n} for k, (q, n) in LOADS.items()},
        },
        "central_idle": central_idle,
        "phases": phases,
        "summary": {load: _summary(p) for load, p in phases.items()},
        "series": series,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    worst = max(p["dropped_share"] for ps in phases.values() for p in ps)
    named = [lbl for s in series.values() for lbl in s["per_cell_labels"]]
    if named or worst > 0.02:
        print(f"NOT VALID: labels naming cells {named[:5]}; a box dropped {100 * worst:.1f}% of model time")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
