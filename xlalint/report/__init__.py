"""Reporters: thin views of one sorted list of findings. ``FORMATS`` maps --format names to them."""

from __future__ import annotations

import importlib

FORMATS = {
    "full": "xlalint.report.text",
    "concise": "xlalint.report.text",
    "text": "xlalint.report.text",  # the old name of concise
    "json": "xlalint.report.json_format",
    "sarif": "xlalint.report.sarif",
    "github": "xlalint.report.github",
}


def printable(text: str, keep: str = "") -> str:
    """``text`` with every character a terminal would act on or hide written as an escape: ``\\x1b``
    for ESC, ``\\x07`` for BEL, ``\\u202e`` for a right-to-left override, ``\\x9b`` for the one-byte CSI;
    whatever ``str.isprintable`` rejects (control and format characters, separators other than the
    space), except the characters in ``keep``. What a linted file or its name holds is printed, never
    obeyed: a code frame of a binary file cannot move the cursor, recolour or clear the screen."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else _escape(ch) for ch in text)


_SHORT = {"\t": "\\t", "\r": "\\r", "\n": "\\n"}


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def get_reporter(name: str):
    """The module for format ``name``; it has ``render(findings, out, *, color=False, root=None)``."""
    return importlib.import_module(FORMATS[name])
