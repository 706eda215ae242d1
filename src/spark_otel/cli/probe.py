"""Measure what concurrent streams buy on one engine: the article's Appendix A.

For each level N, fires N identical /v1/completions with min_tokens = max_tokens and ignore_eos,
so every stream produces exactly --tokens tokens (checked against usage). Reads the engine's
generation counter before and after each level, at quiescent points, and prints per level:
per-stream tok/s (median, p10, p90), the probe's aggregate, the engine's aggregate and
engine/probe, their ratio (above 1: another tenant decoded at the same time), mean GPU power
where a power source is available, time to first token (streaming mode), the client's own CPU
per token, and the streams off pin (that did not produce exactly --tokens tokens).
--json prints the versioned report instead of the table; --out FILE writes it to a file.

Each level is recorded in the embedded store as a load window ("probe N streams"), and the whole
run as a probe document, so `spark-otel neighbour-cost` and `spark-otel advise` see it.
Against the simulated box, times read in model time (the engine's /sim/info speed), and the
table says so.

    spark-otel probe --engine qwen=http://127.0.0.1:8011 --streams 1,2,4,8,16,32 --tokens 512

Name the engine as your eval's cells do (qwen=URL, or --engine-name): a probe labelled otherwise
reads as load on another engine. Without a name, the label is the engine's /sim/info name, else
the URL's host:port; the probe warns when no recorded cell carries its label. A probe that fails
partway prints and stores the levels it measured before it stops with the error.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .._exceptions import ConfigError
from .._files import check_output, write_output
from ..records.probe_report import MAX_LEVELS, MAX_PROMPT_CHARS, MAX_REPEATS, MAX_STREAMS, MAX_TOKENS
from ..views.tables import PROBE_PRIORITIES, model_time, probe_energy_line, probe_table
from ._common import add_store_argument, open_store, print_hint, print_table
from ._console import progress

if TYPE_CHECKING:
    from ..records.probe_report import ProbeReport


# Past these a typo (--streams 100000) would swamp the engine and this machine; --allow-large
# lifts them, up to the caps nothing lifts (the probe document's own bounds).
LIMITS = {"--streams": 256, "--tokens": 131_072, "--prompt-chars": 1_000_000, "--repeats": 100}
CAPS = {
    "--streams": MAX_STREAMS,
    "--tokens": MAX_TOKENS,
    "--prompt-chars": MAX_PROMPT_CHARS,
    "--repeats": MAX_REPEATS,
}


def _levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers") from exc
    if not levels or min(levels) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give positive stream counts, e.g. 1,2,4,8")
    return levels


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        required=True,
        metavar="[NAME=]URL",
        help="engine base URL, optionally with the engine label your cells carry "
        "(qwen=http://127.0.0.1:8011, as `spark-otel receive` takes it)",
    )
    parser.add_argument(
        "--streams", type=_levels, default="1,2,4,8,16,32", help="levels: concurrent streams, comma-separated"
    )
    parser.add_argument("--tokens", type=int, default=512, help="output tokens per stream")
    parser.add_argument("--model", help="model id (default: the engine's first listed model)")
    parser.add_argument(
        "--engine-name",
        metavar="NAME",
        help="engine label for the load windows and curve; must match the engine label of the eval's "
        "cells, or neighbour-cost and advise read the probe as another engine (default: NAME from "
        "--engine, else /sim/info's name, else the URL's host:port)",
    )
    parser.add_argument("--prompt-chars", type=int, default=200, help="prompt length, characters")
    parser.add_argument("--repeats", type=int, default=1, help="rounds per level")
    parser.add_argument(
        "--warmup",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send one untimed request first",
    )
    parser.add_argument(
        "--mode",
        choices=["stream", "plain"],
        default="stream",
        help="stream: SSE, gives time to first token; plain: one JSON body per request, "
        "no TTFT but no parse cost while the answer is produced",
    )
    parser.add_argument("--name", help="run name for the stored probe document")
    parser.add_argument(
        "--gpu",
        choices=["auto", "sim", "nvml", "smi", "none"],
        default="auto",
        help="where mean power per level comes from: the simulated box's /sim/gpu, NVML, nvidia-smi, "
        "or none; auto tries them in that order and leaves power out when none answers",
    )
    parser.add_argument("--time-scale", type=float, help="model-time scale (default: the engine's /sim/info)")
    parser.add_argument(
        "--timeout", type=float, default=900.0, metavar="SECONDS", help="per-request ceiling, model seconds"
    )
    add_store_argument(parser)
    parser.add_argument("--no-store", action="store_true", help="do not record in the store")
    parser.add_argument(
        "--json", action="store_true", help="print the versioned JSON report instead of the table"
    )
    parser.add_argument(
        "--wide", action="store_true", help="every column of the table, however narrow the terminal"
    )
    parser.add_argument("-o", "--out", metavar="FILE", help="write the versioned JSON report to this file")
    parser.add_argument("--plot", metavar="FILE.png", help="plot per-stream and aggregate tok/s")
    parser.add_argument(
        "--allow-large",
        action="store_true",
        help="lift the guards against a typo: "
        + ", ".join(f"{option} at most {limit:,}" for option, limit in LIMITS.items())
        + " (the caps past them: "
        + ", ".join(f"{option} {cap:,}" for option, cap in CAPS.items())
        + ")",
    )


def run(args: argparse.Namespace) -> int:
    from ..probe import ProbeIncomplete, ProbeSettings, run_probe
    from ..receivers.receiver import split_engine_spec
    from ..telemetry import configure, otlp_configured
    from ._common import Bounds

    _check_sizes(args)
    Bounds(above=0, at_most=86_400).check("--timeout", args.timeout)
    Bounds(above=0).check("--time-scale", args.time_scale)
    name, url = split_engine_spec(args.engine, name_optional=True)
    if name and args.engine_name and name != args.engine_name:
        raise ConfigError(f"--engine names the engine {name!r} but --engine-name says {args.engine_name!r}")
    settings = ProbeSettings(
        streams=args.streams,
        tokens=args.tokens,
        model=args.model,
        prompt_chars=args.prompt_chars,
        repeats=args.repeats,
        warmup=args.warmup,
        mode=args.mode,
        name=args.name,
        engine=args.engine_name or name,
        gpu=args.gpu,
        time_scale=args.time_scale,
        request_timeout_s=args.timeout,
    )
    store = None if args.no_store else open_store(args, write=True)
    total = len(settings.streams) * settings.repeats
    telemetry = None
    if otlp_configured():  # levels go to the collector as load-window spans as well
        telemetry = configure(service_name="spark-otel-probe", store=False)
    try:
        # The bar is on stderr, and only on a terminal: the probe's warnings print above it.
        with progress(f"probing {url}", total) as bar:
            report = run_probe(url, settings, store=store, on_level=lambda _lv: bar.advance())
    except ProbeIncomplete as exc:
        _print_report(exc.report, args)  # what was measured before the failure, then the error
        raise
    finally:
        if telemetry is not None:
            telemetry.shutdown()
        if store is not None:
            store.close()
    _print_report(report, args)
    return 0


def _check_sizes(args: argparse.Namespace) -> None:
    """The options that size the run within their guards and caps, and the outputs writable, before
    any request."""
    if args.tokens < 1 or args.repeats < 1 or args.prompt_chars < 1:
        raise ConfigError("--tokens, --repeats and --prompt-chars must be positive")
    given = {
        "--streams": max(args.streams),
        "--tokens": args.tokens,
        "--prompt-chars": args.prompt_chars,
        "--repeats": args.repeats,
    }
    for option, value in given.items():
        if value > CAPS[option]:
            raise ConfigError(
                f"{option} {value:,} is past the cap of {CAPS[option]:,}, which --allow-large does not lift"
            )
        if value > LIMITS[option] and not args.allow_large:
            raise ConfigError(
                f"{option} {value:,} is past the limit of {LIMITS[option]:,}, a guard against a typo "
                "that would swamp the engine and this machine; add --allow-large to mean it"
            )
    if len(args.streams) > MAX_LEVELS:
        raise ConfigError(f"--streams lists {len(args.streams):,} levels, past the cap of {MAX_LEVELS}")
    # Where the report goes is checked now, not after minutes of measuring.
    for option in ("--out", "--plot"):
        if getattr(args, option[2:]):
            check_output(getattr(args, option[2:]), what=option)


def _print_report(report: ProbeReport, args: argparse.Namespace) -> None:
    """The table and the report's warnings, or with --json the report itself, on stdout; then
    --out and --plot (what they wrote is said on stderr when stdout holds the JSON)."""
    if args.json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")  # as --out writes the file
    else:
        columns, rows = probe_table(report)
        print_table(
            f"{report.metadata.engine} ({report.metadata.model}), {report.settings.tokens} tokens per stream"
            + model_time([report.metadata.time_scale]),
            columns,
            rows,
            priorities=PROBE_PRIORITIES,
            wide=args.wide,
        )
        print_hint(probe_energy_line(report))
        for warning in report.warnings:
            print_hint(f"warning: {warning}")
    said = sys.stderr if args.json else sys.stdout
    if args.out:
        report.save_file(args.out)
        print(f"wrote {args.out}", file=said)
    if args.plot:
        from ..report import plot_probe

        write_output(args.plot, plot_probe(report))
        print(f"wrote {args.plot}", file=said)
