"""What the command line shows beside its results, on stderr: log records (each once), and a spinner
or progress bar naming the phase while a command works, only when stderr is a terminal.

Log records go through one handler for the whole command run (`cli_logging`). While a spinner
or bar is live, the handler prints through the live display's console, above it, so a warning
never breaks the bar; a record identical to one already printed in the run (same level, same
message) is dropped. Nothing here writes to stdout: a command's result reads the same with
or without a terminal.

Needs rich only to draw; without it (the core install) or without a terminal, nothing is drawn.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Rich consoles with a live display on them (innermost last): where log records are printed.
_live_consoles: list[Any] = []


class OnceFilter(logging.Filter):
    """Lets a record through only the first time its level and message are seen."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            key = (record.levelno, record.getMessage())
        except Exception:  # a record whose arguments do not format: let the handler report it
            return True
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


class _Formatter(logging.Formatter):
    """``spark-otel: warning: message``, as the commands' own error lines read."""

    def format(self, record: logging.LogRecord) -> str:
        text = f"spark-otel: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class CliHandler(logging.Handler):
    """Prints records on stderr, or through the live display's console while one is live."""

    def __init__(self, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.setFormatter(_Formatter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if _live_consoles:
                from rich.text import Text

                _live_consoles[-1].print(Text(text))
            else:
                stream = sys.stderr  # looked up now: whatever stderr is at the time
                stream.write(text + "\n")
                stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


@contextmanager
def cli_logging(*, debug: bool = False) -> Iterator[CliHandler]:
    """One handler on the root logger for one command run: warnings and errors (with ``debug``,
    everything), each printed once. Removed again at exit, with the root level restored."""
    handler = CliHandler(logging.DEBUG if debug else logging.WARNING)
    handler.addFilter(OnceFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    if debug:
        root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def stderr_console(*, force_terminal: bool | None = None) -> Any | None:
    """A rich console on stderr when it is a terminal (or ``force_terminal``), else None: then
    nothing is drawn. None as well without rich, which only draws."""
    try:
        from rich.console import Console
    except ImportError:
        return None
    console = Console(stderr=True, force_terminal=force_terminal)
    if not console.is_terminal or console.is_dumb_terminal:
        return None
    return console


class Phase:
    """The phase a command is in (``text``), on a spinner; `update` names the next one, drawn at
    once. Without a terminal nothing is drawn."""

    def __init__(self, text: str, spinner: Any | None = None, live: Any | None = None) -> None:
        self.text = text
        self._spinner = spinner
        self._live = live

    def update(self, text: str) -> None:
        self.text = text
        if self._spinner is not None and self._live is not None:
            self._spinner.update(text=text)
            self._live.refresh()


@contextmanager
def status(text: str, *, force_terminal: bool | None = None) -> Iterator[Phase]:
    """A spinner on stderr naming the phase (``text``), while the block runs, when stderr is a
    terminal; log records print above it. Yields the `Phase` to update."""
    console = stderr_console(force_terminal=force_terminal)
    if console is None:
        yield Phase(text)
        return
    from rich.live import Live
    from rich.spinner import Spinner

    spinner = Spinner("dots", text=text)
    # stdout stays the command's own: only stderr writes are routed above the display.
    with Live(
        spinner,
        console=console,
        transient=True,
        refresh_per_second=12.5,
        redirect_stdout=False,
        redirect_stderr=True,
    ) as live:
        _live_consoles.append(console)
        try:
            yield Phase(text, spinner, live)
        finally:
            _live_consoles.remove(console)


class Bar:
    """A progress bar's handle: `advance` one step. Without a terminal it only counts."""

    def __init__(self, progress: Any | None = None, task: Any = None) -> None:
        self._progress = progress
        self._task = task
        self.done = 0

    def advance(self, steps: int = 1) -> None:
        self.done += steps
        if self._progress is not None:
            self._progress.advance(self._task, steps)


@contextmanager
def progress(description: str, total: int, *, force_terminal: bool | None = None) -> Iterator[Bar]:
    """A progress bar on stderr (``total`` steps) while the block runs, when stderr is a terminal;
    log records print above it."""
    console = stderr_console(force_terminal=force_terminal)
    if console is None:
        yield Bar()
        return
    from rich.progress import Progress

    with Progress(console=console, transient=True, redirect_stdout=False) as bar:
        _live_consoles.append(console)
        try:
            yield Bar(bar, bar.add_task(description, total=total))
        finally:
            _live_consoles.remove(console)
