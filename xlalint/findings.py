"""Findings are plain values: every front end (text, JSON, SARIF, GitHub, flake8, verify) is a view of them."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional


@functools.total_ordering
@dataclass(frozen=True)
class Finding:
    """One reported problem. Lines and columns are 1-based; the end is exclusive like ruff's."""

    path: str
    line: int
    column: int
    code: str
    end_line: int
    end_column: int
    name: str
    message: str
    severity: str = "warning"
    fix: str = ""  # how to fix it, in words (every rule has one)
    # the message in parts, for the full format: a headline that names the expression, and the cost
    headline: str = ""
    cost: str = ""
    # an automatic fix: ((line, column, end_line, end_column, new text), ...), 1-based, end exclusive,
    # "safe" (keeps what the program computes) or "unsafe" (changes a type or drops data), and a title
    edits: tuple = ()
    applicability: str = ""
    fix_title: str = ""
    # a notebook (xlalint/sources/notebook.py): the 1-based cell, and line and column count in it
    cell: Optional[int] = None

    def _key(self) -> tuple:
        """Findings sort by path, cell, line, column, code."""
        return (self.path, self.cell or 0, self.line, self.column, self.code, self.end_line, self.end_column,
                self.name, self.message, self.severity, self.fix, self.headline, self.cost, self.edits,
                self.applicability, self.fix_title)

    def __lt__(self, other):
        if not isinstance(other, Finding):
            return NotImplemented
        return self._key() < other._key()

    def to_dict(self) -> dict:
        """ruff's JSON field names where they exist (``fix`` is the structured fix, or None)."""
        fix = None
        if self.edits:
            fix = {
                "applicability": self.applicability,
                "message": self.fix_title,
                "edits": [
                    {"content": content, "location": {"row": l, "column": c}, "end_location": {"row": el, "column": ec}}
                    for (l, c, el, ec, content) in self.edits
                ],
            }
        return {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "headline": self.headline or self.message,
            "cost": self.cost,
            "help": self.fix,
            "filename": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "location": {"row": self.line, "column": self.column},
            "end_location": {"row": self.end_line, "column": self.end_column},
            "severity": self.severity,
            "fix": fix,
            **({"cell": self.cell} if self.cell is not None else {}),
        }


# The fields a cache entry stores, in order (everything but the path).
ROW_FIELDS = tuple(f for f in Finding.__dataclass_fields__ if f != "path")


def finding_row(f: Finding) -> tuple:
    return tuple(getattr(f, n) for n in ROW_FIELDS)


@dataclass(frozen=True)
class Problem:
    """Why a file is not linted (unreadable, too big, refused by the guard or CPython): a finding code,
    a message and where. The analysis floor turns it into a Finding of that code's rule."""

    code: str  # XLA900 (it does not parse) or XLA901 (unreadable, too big or too complex to analyse)
    message: str
    line: int = 1
    column: int = 1


@dataclass(frozen=True)
class FileError:
    """A file that could not be linted at all (unreadable, not a file...). Not a finding: exit 2 is for usage."""

    path: str
    message: str
