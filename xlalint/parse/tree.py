"""Text -> libcst tree: the parse, and CPython's own words when it fails."""

from __future__ import annotations

import ast
import threading
import warnings
from typing import Optional

import libcst as cst

_VALIDATE = cst.CSTNode.__post_init__
_PARSE_LOCK = threading.Lock()


def _unchecked(self) -> None:
    pass


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module``, without libcst checking each node its parser builds: every node's
    constructor validates it (``CSTNode.__post_init__``: ``self._validate()``, a fifth of the parse),
    and the parser's nodes are valid by construction (libcst's own comment there says validation at
    parse time could go). The check is skipped only while this parse runs, and only while the
    constructor is libcst's own, doing nothing else; CPython has compiled the text first anyway."""
    if cst.CSTNode.__post_init__ is not _VALIDATE or _VALIDATE.__code__.co_names != ("_validate",):
        return cst.parse_module(text)
    with _PARSE_LOCK:
        cst.CSTNode.__post_init__ = _unchecked
        try:
            return cst.parse_module(text)
        finally:
            cst.CSTNode.__post_init__ = _VALIDATE


def cpython_syntax_error(text: str) -> Optional[tuple]:
    """CPython's line, column and message for a syntax error, or None if CPython parses the file.

    libcst points at the token after the error (often the next line) with a list of every token it
    expected; CPython says where and what (``expected ':'``, ``'(' was never closed``).
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as e:
        if e.lineno:
            return e.lineno, max(e.offset or 1, 1), e.msg
    except (RecursionError, MemoryError, ValueError):
        pass
    return None
