"""The speeds the simulated two-engine box runs at for the box fixtures several directories share
(tests/conftest.py): slow enough that a loaded 2-core machine keeps up with their streams."""

from __future__ import annotations

PROBE_BOX_SPEED = 25.0  # slow enough that a loaded 2-core machine keeps up with the streams
GAUGES_BOX_SPEED = 20.0  # slow enough that a loaded 2-core machine keeps up with 8 streams
