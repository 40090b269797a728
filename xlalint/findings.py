"""Findings are plain values: every front end (text, JSON, SARIF, GitHub, flake8, verify) is a view of them."""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Optional


@functools.total_ordering
@dataclass(frozen=True)
class Finding:
    """One reported problem. Lines and columns are 1-based; the end is exclusive like ruff's.

    ``cell`` is set for a notebook (xlalint/notebook.py): the 1-based cell, and the lines count in it.
    Findings sort by path, cell, line, column, code.
    """

    path: str
    line: int
    column: int
    code: str
    end_line: int
    end_column: int
    name: str
    message: str
    severity: str = "warning"
    fix: str = ""
    cell: Optional[int] = None

    def _key(self) -> tuple:
        return (self.path, self.cell or 0, self.line, self.column, self.code, self.end_line, self.end_column,
                self.name, self.message, self.severity, self.fix)

    def __lt__(self, other):
        if not isinstance(other, Finding):
            return NotImplemented
        return self._key() < other._key()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["filename"] = d.pop("path")
        out = {
            "code": d["code"],
            "name": d["name"],
            "message": d["message"],
            "filename": d["filename"],
            "line": d["line"],
            "column": d["column"],
            "end_line": d["end_line"],
            "end_column": d["end_column"],
            "severity": d["severity"],
            "fix": d["fix"],
        }
        if self.cell is not None:  # a notebook: line and column are in this cell
            out["cell"] = self.cell
        return out


@dataclass(frozen=True)
class FileError:
    """A file that could not be linted at all (unreadable, not a file...). Not a finding: exit 2 is for usage."""

    path: str
    message: str
