"""The HTML report: concurrency curves, neighbour cost, deadline outcomes and the advisor's rules.

Reporting is separate from measuring: `inputs_from_store` and `inputs_from_otlp_json` turn
recorded data (from the embedded store, an OTLP JSON export or backfilled records) into
`ReportInputs`; `build_report` runs the analyses (`overview_from_inputs`, the very call
`spark-otel advise` makes, so both give the same rules) into a `ReportContent`; `render_html`
formats it into one self-contained page and `write_report` writes the page and the same PNGs as
separate files. Plotting needs the ``plot`` extra (matplotlib), imported on first use.

    inputs    recorded data from the store or OTLP JSON exports
    content   the analyses a report shows
    plots     PNG plots
    html      the page and its template
"""

from __future__ import annotations

from .content import ReportContent, build_report, overview_from_inputs
from .html import render_html, write_report
from .inputs import ReportInputs, inputs_from_otlp_json, inputs_from_store
from .plots import plot_probe, render_images

__all__ = [
    "ReportContent",
    "ReportInputs",
    "build_report",
    "inputs_from_otlp_json",
    "inputs_from_store",
    "overview_from_inputs",
    "plot_probe",
    "render_html",
    "render_images",
    "write_report",
]
