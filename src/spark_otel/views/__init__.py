"""The words, tables and JSON shapes people read: what the command line and the HTML report both
render, from the facts the analyses return, so each sentence and each table exists once.

    tables   table shapes, number formats, units and the glossary the CLI and the report share
    budget   where each cell's time went, as tables
    timeouts why each timeout happened: its line, its table and its JSON
    layout   which columns of a list fit a terminal's width (lower-priority ones dropped)
    cells    recent cells as a list (one row each, with their energy) and as JSON
    requests recent requests as a list and JSON; how many cells are requests; what a store holds
    hints    hint lines wrap at the terminal's width, a backticked command kept whole
    gauges   each gauge's verdict and its evidence as a sentence
    answers  the article's two questions answered in one line each (the demo's and the report's)
    curves   a rate curve and a lane's shape in words
    rules    each queue rule and its evidence in words, as a table and as advise's JSON
    rules_file  the advisor's rules as the governor's rules file (TOML)
    rule_catches  which cells each governor rule catches, as a table and JSON (rules check, lanes)
    live_cells  each cell in flight now: elapsed, tokens so far, live tok/s, its admission verdict (lanes)
    adaptive_decisions  what the adaptive governor admitted and held, why and for whom (report, lanes)
    governed_runs  the demo's Act 5 side by side: ungoverned, static rules, adaptive (table, answer, JSON)
"""
