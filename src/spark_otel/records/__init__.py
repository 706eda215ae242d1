"""Shapes that several layers share, kept below all of them: a cell as a span (both ways), the
probe's report document, a rate curve, the rules file, an Inspect sample's naming as a cell.

    span_codec   cells, requests, load windows and server timings as spans, both ways
    probe_report the concurrency probe's versioned report document
    rate_curve   a decode-rate curve over concurrency levels, as measured or read off cells
    rules_file   the governor's rules file: its rules, parsed and checked
    inspect_samples  an Inspect AI sample as a cell (eval, cell id, engine, workers, ceiling, status)
"""
