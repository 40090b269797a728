"""An incremental parse for the language server: after an edit, only the edited top-level statement is
parsed again.

The parse is most of a lint (a 1,000-line file: ~95 ms of ~200 ms CPU). An edit touches one function or
one top-level statement, so the file is cut into chunks at the lines that start a top-level statement
(column 0, not a comment, decorator-led definitions kept whole), each chunk is parsed on its own by
libcst and cached by its text, and the statements are joined into one ``Module``: the same tree, line
for line, as ``libcst.parse_module`` of the whole file (comments and blank lines between chunks become
the next statement's leading lines, exactly what they render as).

Every doubt falls back to one ordinary parse of the whole file: a chunk that does not parse (a cut
inside a string or brackets, ``else:`` at column 0, a half-typed line), CR line endings, or chunks that
disagree on the indentation unit. A syntax error is then reported by the ordinary parse, with its real
position.
"""

from __future__ import annotations

import re
import threading

import libcst as cst

# A line that may start a top-level statement: column 0, not blank, not a comment, not a closing
# bracket, not a clause that continues the statement above.
_START = re.compile(r"^(?![ \t#\r\n)\]}]|(?:else|elif|except|finally)\b)", re.MULTILINE)


# Comments and strings, to find the triple-quoted strings (a cut inside one would be a wrong cut).
_SCAN = re.compile(
    r"#[^\n]*"
    r"|\'\'\'(?:[^\\]|\\.)*?\'\'\'|\"\"\"(?:[^\\]|\\.)*?\"\"\""
    r"|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"",
    re.DOTALL,
)


class IncrementalParser:
    """One per document: it keeps the chunks of the last text it parsed (the memory of one tree), which
    the next version of the same document mostly shares."""

    def __init__(self) -> None:
        self._chunks: dict = {}
        self._used: dict = {}
        # a chunk's first statement with the comments and blank lines carried before it: the same node
        # for as long as both are unchanged, so positions cached by node (locate_cache) still apply
        self._joined: dict = {}
        self._joined_used: dict = {}
        self.parsed = 0  # chunks parsed (cache misses), for tests and the bench
        self.fallbacks = 0
        self._lock = threading.Lock()
        self.locate_cache: dict = {}  # for engine's Locator: statement node -> (positions, line count)

    def _chunk(self, text: str) -> cst.Module:
        hit = self._chunks.get(text)
        if hit is None:
            hit = cst.parse_module(text)
            self.parsed += 1
        self._used[text] = hit
        return hit

    def __call__(self, text: str) -> cst.Module:
        with self._lock:
            return self._parse(text)

    def _parse(self, text: str) -> cst.Module:
        if "\r" in text:
            return self._full(text)
        self._used = {}
        self._joined_used = {}
        try:
            module = self._join(split(text))
        except (cst.ParserSyntaxError, _Disagree):
            return self._full(text)  # keeps the chunks of the last good parse: typing goes on from there
        self._chunks = self._used
        self._joined = self._joined_used
        keep = set(module.body)  # positions of the statements still in the file (xlalint/parse/locate.py)
        self.locate_cache = {k: v for k, v in self.locate_cache.items() if k == "config" or k in keep}
        return module

    def _full(self, text: str) -> cst.Module:
        self.fallbacks += 1
        self.locate_cache = {}
        return cst.parse_module(text)

    def _join(self, chunks: list) -> cst.Module:
        modules = [self._chunk(c) for c in chunks]
        if not modules:
            return cst.parse_module("")
        indents = {m.default_indent for m in modules if _has_block(m)}
        if len(indents) > 1:
            raise _Disagree
        first = modules[0]
        body: list = []
        carry: list = list(first.header)  # comment lines waiting for the next statement
        header: list = []
        for i, m in enumerate(modules):
            lines = carry + (list(m.header) if i else [])
            carry = []
            if not m.body:
                carry = lines + list(m.footer)
                continue
            stmts = list(m.body)
            if not body and i == 0:
                header, lines = lines, []
            if lines:
                key = (stmts[0], *lines)  # libcst nodes hash and compare by identity
                joined = self._joined.get(key)
                if joined is None:
                    joined = stmts[0].with_changes(leading_lines=[*lines, *stmts[0].leading_lines])
                self._joined_used[key] = joined
                stmts[0] = joined
            body.extend(stmts)
            carry = list(m.footer)
        last = modules[-1]
        if not body:
            return cst.parse_module("".join(chunks))
        return cst.Module(
            body=body,
            header=header,
            footer=carry,
            encoding=first.encoding,
            default_indent=indents.pop() if indents else first.default_indent,
            default_newline=first.default_newline,
            has_trailing_newline=last.has_trailing_newline,
        )


class _Disagree(Exception):
    pass


def _has_block(m: cst.Module) -> bool:
    return any(isinstance(getattr(s, "body", None), cst.IndentedBlock) for s in m.body)


def split(text: str) -> list:
    """``text`` cut before each line that may start a top-level statement (a decorator keeps its
    definition: the cut is before the first decorator). Joined, the chunks are ``text``."""
    starts = [m.start() for m in _START.finditer(text)]
    if '"""' in text or "'''" in text:
        spans = [(m.start(), m.end()) for m in _SCAN.finditer(text) if m.end() - m.start() >= 6 and text[m.start()] in "\"'"
                 and text.startswith(text[m.start()] * 3, m.start())]
        if spans:
            import bisect

            ends = [e for _, e in spans]
            kept = []
            for st in starts:
                i = bisect.bisect_right(ends, st)  # the first string ending after st
                if i < len(spans) and spans[i][0] < st:
                    continue  # inside a triple-quoted string
                kept.append(st)
            starts = kept
    cuts = []
    prev_deco = False
    for s in starts:
        is_deco = text.startswith("@", s)
        if not prev_deco:
            cuts.append(s)
        prev_deco = is_deco
    if not cuts or cuts[0] != 0:
        cuts.insert(0, 0)
    cuts.append(len(text))
    return [text[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]
