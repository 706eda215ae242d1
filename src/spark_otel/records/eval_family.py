"""An eval's family: its name without the date or run id a runner appends to each run.

Real eval runs carry a date or a run id in their name (``golden-review-20261207``,
``demo-serial-2e14``, ``gsm8k-run3``...), so rules and history keyed by the exact name would
protect yesterday's run only. The family is what stays the same from one run to the next: the
name with its trailing run-id parts stripped, one at a time, where a part is what follows the
last ``-``, ``_``, ``.``, ``:``, ``@``, ``#`` or space and is

* all digits, optionally a time after a ``T`` and a ``Z`` (``20261207``, ``3``, ``07T08``, ``00Z``);
* ``run``, ``r`` or ``v`` and digits (``run3``, ``r12``, ``v2``);
* four or more lowercase hex digits (``2e14``, ``beef``, a git hash or a uuid's parts).

The first part is never stripped (``gsm8k`` stays ``gsm8k``), and nothing is stripped from
inside a part (``inspect_evals/gsm8k`` stays whole: ``evals/gsm8k`` is no run id).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["eval_family"]

_TAIL = re.compile(r"^(.+?)[-_.:@# ]+(\d+(T\d+)?Z?|(run|r|v)\d+|[0-9a-f]{4,})$")


@lru_cache(maxsize=4096)
def eval_family(eval_name: str) -> str:
    """``eval_name`` without its trailing run-id parts (see the module's docstring)."""
    name = eval_name.strip()
    while (m := _TAIL.match(name)) is not None:
        name = m.group(1)
    return name
