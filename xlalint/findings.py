"""Findings are plain values: every front end (text, JSON, SARIF, GitHub, flake8, verify) is a view of them."""

from __future__ import annotations

from dataclasses import dataclass


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
    fix: str = ""  # how to fix it, in words (every rule has one)
    # the message in parts, for the full format: a headline that names the expression, and the cost
    headline: str = ""
    cost: str = ""
    # an automatic fix: ((line, column, end_line, end_column, new text), ...), 1-based, end exclusive,
    # "safe" (keeps what the program computes) or "unsafe" (changes a type or drops data), and a title
    edits: tuple = ()
    applicability: str = ""
    fix_title: str = ""

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
        }


# The fields a cache entry stores, in order (everything but the path).
ROW_FIELDS = tuple(f for f in Finding.__dataclass_fields__ if f != "path")


def finding_row(f: Finding) -> tuple:
    return tuple(getattr(f, n) for n in ROW_FIELDS)


@dataclass(frozen=True)
class FileError:
    """A file that could not be linted at all (unreadable, not a file...). Not a finding: exit 2 is for usage."""

    path: str
    message: str
