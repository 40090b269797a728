"""Findings are plain values: every front end (text, JSON, SARIF, GitHub, flake8, verify) is a view of them."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, order=True)
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
    fix: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["filename"] = d.pop("path")
        return {
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


@dataclass(frozen=True)
class FileError:
    """A file that could not be linted at all (unreadable, not a file...). Not a finding: exit 2 is for usage."""

    path: str
    message: str
