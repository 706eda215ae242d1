"""spark-otel's Grafana dashboards as code (grafana-foundation-sdk, pinned exactly).

Regenerate the committed JSON with ``python -m dashboards.build`` (or ``make dashboards``);
the tests fail when ``dashboards/json/`` is out of date with this code.
"""
