"""The tests' own layout: what several tests share lives in tests/support, and no other module of
tests/ is imported by another one (conftest.py files included, as importers and as imported). A
test module keeps the helpers only it uses; a helper a second module needs moves to support."""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).parent


def _imported(path: Path, tree: ast.Module, root: Path) -> Iterator[tuple[int, str]]:
    """Every module an import anywhere in ``path`` names, with its line: ``from a import b`` names
    ``a`` and ``a.b`` (b may be a module); a relative import is named from ``root``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = path.parents[node.level - 1].relative_to(root).parts
                base = ".".join([*package, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _module_file(name: str, importer: Path, tests: Path) -> Path | None:
    """The file of tests/ that ``name`` imports from ``importer``, if any: dotted from the folder
    above tests/ (``tests.x.y``), or bare from the importer's own folder (a folder put on sys.path)."""
    parts = name.split(".")
    base = tests.parent if parts[0] == tests.name else importer.parent
    for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
        if candidate.is_file() and candidate.resolve() != importer.resolve():
            return candidate
    return None


def violations(tests: Path) -> list[str]:
    """``file:line: imports name (file)`` for each import of a module of ``tests`` outside its
    support package, whoever imports it."""
    support = tests / "support"
    found = []
    for path in sorted(tests.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, name in _imported(path, tree, tests.parent):
            target = _module_file(name, path, tests)
            if target is not None and not target.is_relative_to(support):
                where = path.relative_to(tests.parent)
                found.append(f"{where}:{line}: imports {name} ({target.relative_to(tests.parent)})")
    return sorted(set(found))


def test_no_module_of_tests_imports_another_but_those_of_tests_support() -> None:
    assert violations(TESTS) == [], "move what these share into tests/support"


def test_every_kind_of_import_of_a_test_module_is_found(tmp_path: Path) -> None:
    """The check itself, on a tree of its own: dotted, from a package, bare beside the importer,
    relative, inside a function, from a conftest.py, and of a conftest.py; support is free to use."""
    tests = tmp_path / "tests"
    files = {
        "conftest.py": "from tests.support.shared import helper\n",
        "support/__init__.py": "",
        "support/shared.py": "from tests.support import other\n",
        "support/other.py": "",
        "a/conftest.py": "from tests.b.test_two import HELPER\n",
        "a/helper_module.py": "",
        "a/test_one.py": textwrap.dedent(
            """
            import helper_module
            from tests.b import test_two
            from . import conftest


            def test_x():
                from tests.conftest import fixture_helper
            """
        ),
        "b/test_two.py": "HELPER = 1\nfrom tests.support.shared import helper\n",
    }
    for name, text in files.items():
        (tests / name).parent.mkdir(parents=True, exist_ok=True)
        (tests / name).write_text(text)

    assert violations(tests) == [
        "tests/a/conftest.py:1: imports tests.b.test_two (tests/b/test_two.py)",
        "tests/a/test_one.py:2: imports helper_module (tests/a/helper_module.py)",
        "tests/a/test_one.py:3: imports tests.b.test_two (tests/b/test_two.py)",
        "tests/a/test_one.py:4: imports tests.a.conftest (tests/a/conftest.py)",
        "tests/a/test_one.py:8: imports tests.conftest (tests/conftest.py)",
    ]
