"""A cell's class and ceiling-boundness at admission, from what it declares and its eval family's
history in the rules file; the general rules over them; and a version 1 file meaning what it meant."""

from __future__ import annotations

import pytest

from spark_otel import ConfigError
from spark_otel.governor.classing import Profile, profile
from spark_otel.governor.decision import InFlight, holding_rule
from spark_otel.records.eval_family import eval_family
from spark_otel.records.rules_file import parse_rules

GENERAL = """
version = 2
ceiling_bound_fraction = 0.75
long_context_prompt_tokens = 24000

[slowdown]
qwen = 2.0

[[limit]]
engine = "qwen"
cell_class = "generation-heavy"
ceiling_bound = true
cells = 1

[[limit]]
engine = "qwen"
cell_class = "generation-heavy"
ceiling_bound = false
cells = 8

[[cross_engine]]
engine = "nemotron"
cells = 0
while_engine = "qwen"
while_ceiling_bound = true

[[history]]
engine = "qwen"
family = "golden-review"
cell_class = "generation-heavy"
n_cells = 30
share = 0.75
p90_alone_s = 700.0

[[history]]
engine = "qwen"
family = "golden-review"
cell_class = "long-context"
n_cells = 10
share = 0.25
p90_alone_s = 200.0

[[history]]
engine = "qwen"
family = "quick-gen"
cell_class = "generation-heavy"
n_cells = 50
share = 1.0
p90_alone_s = 60.0
"""
RULES = parse_rules(GENERAL, where="general")


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("demo-serial-2e14", "demo-serial"),
        ("demo-serial-beef", "demo-serial"),
        ("golden-review-20261207", "golden-review"),
        ("golden-review-2026-12-07T08:05:00Z", "golden-review"),
        ("my_eval_2026_12_07", "my_eval"),
        ("mmlu-pro-v2-run3", "mmlu-pro"),
        ("gsm8k", "gsm8k"),
        ("gsm8k-run3", "gsm8k"),
        ("inspect_evals/gsm8k", "inspect_evals/gsm8k"),
        ("review-code", "review-code"),
        ("1234", "1234"),
    ],
)
def test_an_eval_family_is_its_name_without_its_run_id(name: str, family: str) -> None:
    assert eval_family(name) == family


@pytest.mark.parametrize(
    ("eval_name", "declared", "prompt", "deadline", "expected"),
    [
        # The next run, under a new name: its family's history (the most common class; 700 s alone,
        # twice that beside the costliest neighbour, reaches 75% of 1,800 s).
        ("golden-review-20261208", None, None, 1800.0, Profile("generation-heavy", True, "history")),
        # The same cells under a ceiling of 3,600 s do not come near it.
        ("golden-review-20261208", None, None, 3600.0, Profile("generation-heavy", False, "history")),
        # A long prompt declared: long-context, and its class's history (200 s) decides.
        ("golden-review-r9", None, 30_000, 1800.0, Profile("long-context", False, "history")),
        # A class declared wins over the prompt.
        (
            "golden-review-r9",
            "generation-heavy",
            30_000,
            1800.0,
            Profile("generation-heavy", True, "history"),
        ),
        # A short family: 60 s alone, 120 s slowed, far inside its ceiling.
        ("quick-gen-7", None, None, 1800.0, Profile("generation-heavy", False, "history")),
        # No ceiling: never ceiling-bound.
        ("golden-review-1", None, None, None, Profile("generation-heavy", False, "no ceiling")),
        # Never measured: a cell with a ceiling is taken as ceiling-bound (the safe side).
        ("fresh-eval", None, None, 1800.0, Profile(None, True, "no history")),
        ("fresh-eval", None, 24_000, 1800.0, Profile("long-context", True, "no history")),
    ],
)
def test_a_cell_is_classed_at_admission_from_what_it_declares_and_its_history(
    eval_name: str, declared: str | None, prompt: int | None, deadline: float | None, expected: Profile
) -> None:
    seen = profile(
        RULES,
        engine="qwen",
        eval_name=eval_name,
        deadline_s=deadline,
        cell_class=declared,
        prompt_tokens=prompt,
    )
    assert seen == expected


def test_history_on_another_engine_says_nothing_about_this_one() -> None:
    seen = profile(RULES, engine="nemotron", eval_name="golden-review-1", deadline_s=1800.0)
    assert seen == Profile(None, True, "no history")


def _cell(engine: str, eval_name: str, deadline: float | None = 1800.0) -> InFlight:
    seen = profile(RULES, engine=engine, eval_name=eval_name, deadline_s=deadline)
    return InFlight(engine, eval_name, seen.cell_class, deadline is not None, seen.ceiling_bound)


def test_the_neighbour_yields_while_any_ceiling_bound_cell_runs_whatever_its_eval_is_called() -> None:
    yields = RULES.cross_engine[0]
    neighbour = _cell("nemotron", "cards-batch-5")
    for running in ("golden-review-20261208", "fresh-eval", "other-eval-0001"):
        assert holding_rule(neighbour, [_cell("qwen", running)], RULES) == yields
    # Beside cells far inside their ceiling, or with none, it runs.
    assert holding_rule(neighbour, [_cell("qwen", "quick-gen-7")], RULES) is None
    assert holding_rule(neighbour, [_cell("qwen", "golden-review-1", None)], RULES) is None
    # A ceiling-bound eval between two of its cells still counts (present), as in version 1.
    assert holding_rule(neighbour, [], RULES, present=[_cell("qwen", "golden-review-2")]) == yields


def test_limits_hold_by_class_and_ceiling_bound_across_evals() -> None:
    bound, free = RULES.limit
    # Two ceiling-bound generation-heavy cells of different evals share the one slot.
    assert holding_rule(_cell("qwen", "fresh-eval"), [_cell("qwen", "golden-review-3")], RULES) is None
    fresh = InFlight("qwen", "fresh-eval", "generation-heavy", True, True)
    assert holding_rule(fresh, [_cell("qwen", "golden-review-3")], RULES) == bound
    # The short family's cells batch to 8, whatever the ceiling-bound cells do.
    short = [_cell("qwen", f"quick-gen-{i}") for i in range(7)]
    assert (
        holding_rule(_cell("qwen", "quick-gen-9"), [*short, _cell("qwen", "golden-review-3")], RULES) is None
    )
    assert holding_rule(_cell("qwen", "quick-gen-9"), [*short, _cell("qwen", "quick-gen-8")], RULES) == free


VERSION_1 = """
version = 1

[[limit]]
engine = "qwen"
eval = "golden-review-20261207"
cell_class = "generation-heavy"
cells = 1

[[cross_engine]]
engine = "nemotron"
cells = 0
while_engine = "qwen"

[[cross_engine]]
engine = "llama"
cells = 0
while_engine = "qwen"
while_eval = "golden-review-20261207"
"""


def test_a_version_1_file_means_what_it_meant() -> None:
    rules = parse_rules(VERSION_1, where="v1")
    assert rules.form == "mixed"
    any_ceiling, named = rules.cross_engine
    neighbour = InFlight("nemotron", "cards", None, False)
    # Without while_eval: any cell with a ceiling holds nemotron, short or long, named or not.
    short = profile(rules, engine="qwen", eval_name="quick", deadline_s=1800.0)
    assert short == Profile(None, True, "no history")
    assert holding_rule(neighbour, [InFlight("qwen", "quick", None, True, False)], rules) == any_ceiling
    assert holding_rule(neighbour, [InFlight("qwen", "quick", None, False)], rules) is None
    # With while_eval: that eval under that name only.
    llama = InFlight("llama", "cards", None, False)
    assert holding_rule(llama, [InFlight("qwen", "golden-review-20261207", None, True)], rules) == named
    assert holding_rule(llama, [InFlight("qwen", "golden-review-20261208", None, True)], rules) is None
    # The limit names its eval, and gives it its class.
    assert profile(rules, engine="qwen", eval_name="golden-review-20261207", deadline_s=None).cell_class == (
        "generation-heavy"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "version = 1\n[[history]]\nengine='q'\nfamily='f'\nn_cells=1\nshare=1\np90_alone_s=1\n",
            "version 1 has no history",
        ),
        (
            "version = 1\n[[cross_engine]]\nengine='n'\ncells=0\nwhile_engine='q'\n"
            "while_ceiling_bound=true\n",
            "version 1 has no while_ceiling_bound",
        ),
        (
            "[[cross_engine]]\nengine='n'\ncells=0\nwhile_engine='q'\nwhile_eval='e'\nwhile_ceiling_bound=true\n",
            "while_eval and while_ceiling_bound",
        ),
        ("[slowdown]\nq = 0.5\n", "slowdown.q is 0.5"),
    ],
)
def test_a_file_that_mixes_up_the_versions_is_refused_by_name(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_rules(text, where="rules.toml")
    assert problem in str(raised.value)
    assert str(raised.value).startswith("rules.toml: ")


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("version = 1\n[[lane]]\nengine='q'\ncells=2\n", 1),
        ("version = 2\n[[lane]]\nengine='q'\ncells=2\n", 2),
        ("[[lane]]\nengine='q'\ncells=2\n", 1),  # written by hand, or before version 2: 1's meaning
        ("[[cross_engine]]\nengine='n'\ncells=0\nwhile_engine='q'\nwhile_ceiling_bound=true\n", 2),
        ("[slowdown]\nq = 1.5\n", 2),
    ],
)
def test_the_version_a_file_is_read_as_is_the_one_it_says_else_the_one_its_keys_need(
    text: str, version: int
) -> None:
    """What `rules check` reports: a file that says no version is version 1 unless it uses a key
    only version 2 has."""
    assert parse_rules(text, where="rules.toml").format_version == version
