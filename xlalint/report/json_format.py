"""A JSON list of findings (code, name, message, filename, line, column, end_line, end_column, severity, fix)."""

from __future__ import annotations

import json


def render(findings, out, *, color: bool = False, root=None) -> None:
    json.dump([f.to_dict() for f in findings], out, indent=2)
    out.write("\n")
