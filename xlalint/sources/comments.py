"""The comments that turn findings off: file-level directives and ``# noqa`` on a line.

File-level, in a real comment (never in a string): ``# xlalint: skip-file``, and as in ruff
``# xlalint: noqa`` (every code) or ``# xlalint: noqa: XLA001, XLA006`` (those codes, in the file).
"""

from __future__ import annotations

import io
import re
import tokenize

FILE_DIRECTIVE_HINT = re.compile(rb"xlalint\s*:\s*(?:skip-file|noqa)", re.IGNORECASE)
FILE_DIRECTIVE = re.compile(
    r"#\s*xlalint\s*:\s*(?:(?P<skip>skip-file)\b|noqa(?![\w-])(?:\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?)",
    re.IGNORECASE,
)
NOQA = re.compile(
    r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)

ALL_CODES = object()


def file_suppressions(text: str):
    """The file-level directives in the comments of ``text``: ALL_CODES (skip the file), a set of
    code prefixes to turn off in it, or None. Only comments count (``tokenize``): the same words in a
    string do nothing. A file that does not tokenize to the end keeps the comments before the error."""
    off: set = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            m = FILE_DIRECTIVE.search(tok.string)
            if m is None:
                continue
            if m.group("skip") or not m.group("codes"):
                return ALL_CODES
            off.update(c.upper() for c in re.split(r"[,\s]+", m.group("codes")) if c)
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return off or None


def noqa_map(lines: list[str]) -> dict:
    """Line -> the codes its ``# noqa: ...`` names, or None for a bare ``# noqa`` (every code)."""
    m = {}
    for i, line in enumerate(lines, 1):
        if "#" not in line or "noqa" not in line.lower():
            continue
        hit = NOQA.search(line)
        if hit:
            codes = hit.group("codes")
            m[i] = None if not codes else {c.upper() for c in re.split(r"[,\s]+", codes) if c}
    return m
