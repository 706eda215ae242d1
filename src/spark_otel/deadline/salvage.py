"""Extract the complete findings from a model's answer, even one cut off mid-stream.

A finder asked for a JSON document of findings that hits its deadline leaves a prefix: some
findings whole, the last one half-written. These extractors return exactly the complete
ones, never a partial object, and never mistake prose inside a JSON string for a finding.
They are pure (text in, findings out, no I/O), and the built-in ones are incremental: feed
chunks as they stream in, and the total work stays linear in the text.

    >>> json_findings('<think>a {b}</think>```json\\n{"findings": [{"id": 1}, {"id": 2, "t": "x}')
    [{'id': 1}]
    >>> jsonl_findings('{"id": 1}\\n{"id": 2, "t": "cut')
    [{'id': 1}]
    >>> regex_findings(r"BUG: (?P<what>[^\\n]+)\\n", "BUG: leak\\nBUG: ra")
    [{'what': 'leak'}]

Built in:

- `JsonFindings` / `json_findings`: objects in a top-level JSON array, or in the array under
  a ``"findings"`` key (configurable) of a top-level object. Skips a ``<think>...</think>``
  block, prose before the document and code-fence lines (```` ```json ````).
- `JsonLinesFindings` / `jsonl_findings`: one JSON object per line; other lines are skipped.
- `RegexFindings` / `regex_findings`: a user's pattern; named groups become a dict, else the
  match text. A match that touches the end of a cut-off text may be partial and is dropped.

Any callable ``(text) -> list`` works as an extractor too (`as_extractor`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from .._exceptions import ConfigError

__all__ = [
    "CallableFindings",
    "Extractor",
    "ExtractorSpec",
    "JsonFindings",
    "JsonLinesFindings",
    "NoFindings",
    "RegexFindings",
    "as_extractor",
    "json_findings",
    "jsonl_findings",
    "regex_findings",
]

DEFAULT_KEYS: tuple[str, ...] = ("findings",)


@runtime_checkable
class Extractor(Protocol):
    """An incremental extractor: fed the answer's text in order, it returns new findings.

    ``feed`` returns the findings completed by this chunk; ``close`` those only the end of
    the text completes (a last line without a newline), told whether the text was cut off.
    ``findings`` holds all of them. One extractor serves one answer.
    """

    findings: list[Any]

    def feed(self, chunk: str) -> list[Any]: ...

    def close(self, *, cut_off: bool = False) -> list[Any]: ...


ExtractorSpec = str | re.Pattern[str] | Extractor | Callable[[str], Sequence[Any]]
"""What `as_extractor` accepts: ``"json"``, ``"jsonl"``, a compiled pattern, an `Extractor`,
or a callable ``(text) -> findings``; ``None`` salvages nothing."""


# --- JSON documents -------------------------------------------------------------------------------

# Outside a document: where a document, a code fence or a reasoning block may start.
_SEEK = re.compile(r"[\[{]|```|<think>")
_THINK_END = "</think>"
_HOLD_BACK = len("<think>") - 1  # a tag or fence split across chunks must be seen whole
# Inside a document, outside strings: the next structural or impossible character. Digits,
# signs, exponents and the letters of true/false/null are skipped over in one jump.
_STRUCT = re.compile(r"[^\s0-9+\-.eEtrufalsn]")
_IN_STRING = re.compile(r'["\\]')
_FINDINGS = "F"  # a stack marker: the array whose object elements are findings
_CLOSERS = {"}": "{", "]": "["}
_TRIM_AT = 4096  # drop consumed text once this much has piled up, to stay linear


class JsonFindings:
    """Complete objects of a findings array, from a JSON document that may be cut off.

    The document is the first ``[`` or ``{`` (outside a ``<think>`` block) that parses as
    JSON: prose such as ``see [the diff]`` before it is passed over. In an array document
    every object element is a finding; in an object document, every object in the array
    under one of ``keys``. Strings are scanned with their escapes, so braces, brackets and
    quotes inside a string never count as structure. After a document ends, later documents
    (a second fenced block) add their findings too.
    """

    def __init__(self, keys: Iterable[str] = DEFAULT_KEYS) -> None:
        self.findings: list[Any] = []
        self._keys = frozenset(keys)
        self._text = ""
        self._pos = 0
        self._mode = "seek"  # seek | think | fence_line | doc
        self._stack: list[str] = []
        self._doc_start = 0
        self._committed = False  # the document has yielded a finding: no longer retracted
        self._finding_start = -1
        self._in_string = False
        self._string_start = 0
        self._last_string: str | None = None  # the last string at depth 1 of an object document
        self._key: str | None = None
        self._closed = False

    def feed(self, chunk: str) -> list[Any]:
        if self._closed:
            raise ValueError("this extractor was closed; make a new one per answer")
        if not chunk:
            return []
        self._text += chunk
        found: list[Any] = []
        self._scan(found)
        self._trim()
        self.findings.extend(found)
        return found

    def close(self, *, cut_off: bool = False) -> list[Any]:
        """Ends the text; a JSON document can only complete with its closing bracket, so
        closing adds nothing."""
        self._closed = True
        return []

    # -- scanner -----------------------------------------------------------------------------------
    def _scan(self, found: list[Any]) -> None:
        while True:
            if self._mode == "seek":
                if not self._seek():
                    return
            elif self._mode == "think":
                end = self._text.find(_THINK_END, self._pos)
                if end < 0:
                    self._pos = max(self._pos, len(self._text) - len(_THINK_END) + 1)
                    return
                self._pos = end + len(_THINK_END)
                self._mode = "seek"
            elif self._mode == "fence_line":
                end = self._text.find("\n", self._pos)
                if end < 0:
                    self._pos = len(self._text)
                    return
                self._pos = end + 1
                self._mode = "seek"
            elif not self._scan_doc(found):
                return

    def _seek(self) -> bool:
        text = self._text
        match = _SEEK.search(text, self._pos)
        if match is None:
            self._pos = max(self._pos, len(text) - _HOLD_BACK)
            return False
        token = match.group()
        if token == "<think>":
            self._pos = match.end()
            self._mode = "think"
        elif token == "```":
            self._pos = match.end()
            self._mode = "fence_line"
        else:
            self._begin_doc(match.start())
        return True

    def _begin_doc(self, start: int) -> None:
        self._mode = "doc"
        self._doc_start = start
        self._pos = start
        self._stack = []
        self._committed = False
        self._finding_start = -1
        self._in_string = False
        self._last_string = None
        self._key = None

    def _abandon_doc(self) -> None:
        """The candidate is not JSON after all. An uncommitted one is rescanned as prose from
        just after its first bracket; a committed one simply ends here."""
        if not self._committed:
            self._pos = self._doc_start + 1
        self._mode = "seek"
        self._stack = []
        self._finding_start = -1
        self._in_string = False

    def _scan_doc(self, found: list[Any]) -> bool:
        """Scans until the text runs out (False) or the document ends or fails (True).

        Strings, ``:`` and ``,`` (most of a document's structure) are handled in this loop;
        brackets, which come once or twice per finding, go to `_open` and `_close`.
        """
        text = self._text
        n = len(text)
        pos = self._pos
        stack = self._stack
        while pos < n:
            if self._in_string:
                match = _IN_STRING.search(text, pos)
                if match is None:
                    pos = n
                    break
                at = match.start()
                if text[at] == "\\":
                    if at + 1 >= n:
                        pos = at  # the escaped character has not arrived yet
                        break
                    pos = at + 2
                    continue
                self._in_string = False
                pos = at + 1
                if len(stack) == 1 and stack[0] == "{" and self._end_top_string(pos):
                    return True
                continue
            match = _STRUCT.search(text, pos)
            if match is None:
                pos = n
                break
            at = match.start()
            char = text[at]
            pos = at + 1
            if char == '"':
                self._in_string = True
                self._string_start = at
            elif char in ":,":
                if len(stack) == 1 and stack[0] == "{":
                    self._key = self._last_string if char == ":" else None
            elif char in "{[":
                self._open(char, at)
            elif self._close(char, at, found):
                return True
        self._pos = pos
        return False

    def _end_top_string(self, end: int) -> bool:
        """A string ending at ``end`` at depth 1 of an object document may be the key of the
        findings array, so it is decoded; True when it is not JSON and the document is
        abandoned."""
        try:
            self._last_string = json.loads(self._text[self._string_start : end])
        except ValueError:
            self._pos = end
            self._abandon_doc()
            return True
        return False

    def _open(self, char: str, at: int) -> None:
        """Pushes a bracket. The findings array (the document itself, or the array under one
        of ``keys``) is pushed as its marker, and an object directly in it starts a finding."""
        stack = self._stack
        if not stack:
            stack.append(_FINDINGS if char == "[" else "{")
        elif char == "[" and len(stack) == 1 and stack[0] == "{" and self._key in self._keys:
            stack.append(_FINDINGS)
        else:
            if char == "{" and stack[-1] == _FINDINGS:
                self._finding_start = at
            stack.append(char)

    def _close(self, char: str, at: int, found: list[Any]) -> bool:
        """A closing bracket ends its container, and a finding closed in the findings array is
        emitted; any other character here (a mismatched bracket, one JSON never allows)
        abandons the document. True when the document is over, ended or abandoned."""
        stack = self._stack
        top = stack.pop() if stack else None
        opener = "[" if top == _FINDINGS else top
        expected = _CLOSERS.get(char)
        if expected is None or opener != expected:
            self._pos = at
            self._abandon_doc()
            return True
        if char == "}" and stack and stack[-1] == _FINDINGS and self._finding_start >= 0:
            self._emit(self._text[self._finding_start : at + 1], found)
            self._finding_start = -1
        if stack:
            return False
        self._mode = "seek"
        self._pos = at + 1
        return True

    def _emit(self, raw: str, found: list[Any]) -> None:
        try:
            value = json.loads(raw)
        except ValueError:
            return  # e.g. a bad literal inside: never a finding
        if isinstance(value, dict):
            found.append(value)
            self._committed = True

    def _trim(self) -> None:
        """Forget text no later step can look at: before the document (while it can still be
        abandoned), the open finding, or the scan position."""
        if self._mode == "doc":
            keep = self._pos if self._committed else self._doc_start
            if self._finding_start >= 0:
                keep = min(keep, self._finding_start)
            if self._in_string:
                keep = min(keep, self._string_start)
        else:
            keep = self._pos
        if keep < _TRIM_AT:
            return
        self._text = self._text[keep:]
        self._pos -= keep
        self._doc_start -= keep
        self._string_start -= keep
        if self._finding_start >= 0:
            self._finding_start -= keep


def json_findings(text: str, keys: Iterable[str] = DEFAULT_KEYS) -> list[Any]:
    """The complete findings in ``text`` (see `JsonFindings`)."""
    extractor = JsonFindings(keys)
    extractor.feed(text)
    extractor.close()
    return extractor.findings


# --- JSON Lines -----------------------------------------------------------------------------------


class JsonLinesFindings:
    """One JSON object per line. Lines that are not an object (prose, fences, a ``<think>``
    block, a line cut off mid-object) are skipped."""

    def __init__(self) -> None:
        self.findings: list[Any] = []
        self._partial: list[str] = []
        self._in_think = False
        self._closed = False

    def feed(self, chunk: str) -> list[Any]:
        if self._closed:
            raise ValueError("this extractor was closed; make a new one per answer")
        found: list[Any] = []
        start = 0
        while True:
            end = chunk.find("\n", start)
            if end < 0:
                if start < len(chunk):
                    self._partial.append(chunk[start:])
                break
            self._partial.append(chunk[start:end])
            line = "".join(self._partial)
            self._partial = []
            self._line(line, found)
            start = end + 1
        self.findings.extend(found)
        return found

    def close(self, *, cut_off: bool = False) -> list[Any]:
        """The last line, if it has no newline: an object that parses is complete, cut off
        or not."""
        self._closed = True
        found: list[Any] = []
        if self._partial:
            self._line("".join(self._partial), found)
            self._partial = []
        self.findings.extend(found)
        return found

    def _line(self, line: str, found: list[Any]) -> None:
        if self._in_think:
            end = line.find(_THINK_END)
            if end < 0:
                return
            self._in_think = False
            line = line[end + len(_THINK_END) :]
        if not line.lstrip().startswith("{"):
            begin = line.find("<think>")
            if begin >= 0:
                end = line.find(_THINK_END, begin)
                if end < 0:
                    self._in_think = True
                    return
                line = line[end + len(_THINK_END) :]
        line = line.strip()
        if not line.startswith("{"):
            return
        try:
            value = json.loads(line)
        except ValueError:
            return
        if isinstance(value, dict):
            found.append(value)


def jsonl_findings(text: str) -> list[Any]:
    """The complete JSON Lines objects in ``text`` (see `JsonLinesFindings`)."""
    extractor = JsonLinesFindings()
    extractor.feed(text)
    extractor.close()
    return extractor.findings


# --- user patterns and callables ------------------------------------------------------------------


class RegexFindings:
    """Matches of a user's pattern: a dict of the named groups, else the matched text.

    A match that reaches the end of the text so far could be partial: it waits for more text,
    and is dropped if the text ends cut off. The pattern runs when a chunk brings a newline,
    every `RUN_EVERY_CHARS` of text and at `close`; matching resumes after the last match, and
    the text before it is dropped (a lookbehind cannot see it). Empty matches are not findings.
    """

    RUN_EVERY_CHARS = 1024

    def __init__(self, pattern: str | re.Pattern[str]) -> None:
        self.findings: list[Any] = []
        self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._parts: list[str] = []
        self._pending = 0
        self._closed = False

    def feed(self, chunk: str) -> list[Any]:
        if self._closed:
            raise ValueError("this extractor was closed; make a new one per answer")
        self._parts.append(chunk)
        self._pending += len(chunk)
        if "\n" in chunk or self._pending >= self.RUN_EVERY_CHARS:
            self._pending = 0
            return self._match(final=False)
        return []

    def close(self, *, cut_off: bool = False) -> list[Any]:
        self._closed = True
        return self._match(final=not cut_off)

    def _match(self, *, final: bool) -> list[Any]:
        text = "".join(self._parts)
        found: list[Any] = []
        consumed = 0
        for match in self._pattern.finditer(text):
            if match.end() == match.start():
                continue
            if not final and match.end() >= len(text):
                break
            groups = match.groupdict()
            found.append(groups if groups else match.group())
            consumed = match.end()
        self._parts = [text[consumed:]] if consumed < len(text) else []
        self.findings.extend(found)
        return found


def regex_findings(pattern: str | re.Pattern[str], text: str, *, cut_off: bool = True) -> list[Any]:
    """The matches of ``pattern`` in ``text``, cut off unless told otherwise (`RegexFindings`)."""
    extractor = RegexFindings(pattern)
    extractor.feed(text)
    extractor.close(cut_off=cut_off)
    return extractor.findings


class CallableFindings:
    """Adapts a plain function ``(text) -> findings``: it runs once, on the whole text, at
    `close`; the function itself decides what counts as complete."""

    def __init__(self, func: Callable[[str], Sequence[Any]]) -> None:
        self.findings: list[Any] = []
        self._func = func
        self._parts: list[str] = []

    def feed(self, chunk: str) -> list[Any]:
        self._parts.append(chunk)
        return []

    def close(self, *, cut_off: bool = False) -> list[Any]:
        found = list(self._func("".join(self._parts)))
        self.findings.extend(found)
        return found


class NoFindings:
    """Salvages nothing: for answers that are not findings (``extractor=None``)."""

    def __init__(self) -> None:
        self.findings: list[Any] = []

    def feed(self, chunk: str) -> list[Any]:
        return []

    def close(self, *, cut_off: bool = False) -> list[Any]:
        return []


def as_extractor(spec: ExtractorSpec | None) -> Extractor:
    """A fresh `Extractor` for one answer from what the caller named (``None``: no salvage)."""
    if spec is None:
        return NoFindings()
    if spec == "json":
        return JsonFindings()
    if spec == "jsonl":
        return JsonLinesFindings()
    if isinstance(spec, str):
        raise ConfigError(
            f"unknown extractor {spec!r}: use 'json', 'jsonl', a compiled pattern or a callable"
        )
    if isinstance(spec, re.Pattern):
        return RegexFindings(spec)
    if isinstance(spec, Extractor):
        return spec
    if callable(spec):
        return CallableFindings(spec)
    raise ConfigError(f"extractor {spec!r} is neither 'json', 'jsonl', a pattern, an Extractor nor callable")
