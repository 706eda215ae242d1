"""Shapes that several layers share, kept below all of them: a cell as a span (both ways), the
probe's report document, a rate curve, the rules file, an Inspect AI sample's rules as a cell.

    span_codec   cells, requests, load windows and server timings as spans, both ways
    probe_report the concurrency probe's versioned report document
    rate_curve   a decode-rate curve over concurrency levels, as measured or read off cells
    rules_file   the governor's rules file: its rules, parsed and checked
    eval_family  an eval's name without the run id a runner appends (what rules and history key on)
    inspect_sample  one Inspect AI sample and epoch as one cell: its names, status, ceiling, tokens
    cell_columns cells as columns (numpy arrays), for the store's columnar read and the analyses over them
"""
