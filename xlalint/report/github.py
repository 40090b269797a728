"""GitHub Actions workflow commands: one ``::warning``/``::error`` annotation per finding.

``::warning file=train.py,line=20,col=21,endLine=20,endColumn=32,title=XLA001 host-read::message``
GitHub shows it on the pull request's diff. The path is the one the finding carries, made relative to
the working directory (the checkout, in a workflow) when it is under it. Escaping follows the runner's
rules: ``%``, CR and LF in the message; also ``:`` and ``,`` in the properties. Any other character a
terminal would act on (ESC, BEL, ...) is written as an escape (``\\x1b``): the log that shows these lines
renders ANSI sequences.
"""

from __future__ import annotations

import os

from xlalint.report import printable

COMMANDS = {"error": "error", "warning": "warning"}  # anything else is a "notice"


def escape_data(s: str) -> str:
    return printable(s, keep="\r\n").replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def _display_path(path: str) -> str:
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    return path.replace(os.sep, "/")


def render(findings, out, *, color: bool = False, root=None) -> None:
    cells = None
    for f in findings:
        command = COMMANDS.get(f.severity, "notice")
        if f.cell is not None:  # a notebook: the line of the .ipynb file that holds the cell's line
            if cells is None:
                from xlalint.sources.notebook import FileLines

                cells = FileLines()
            file_line = cells.line(f.path, f.cell, f.line)
            props = (("file", _display_path(f.path)),) + ((("line", str(file_line)),) if file_line else ()) + (
                ("title", f"{f.code} {f.name} (cell {f.cell}, line {f.line}, column {f.column})"),)
        else:
            props = (
                ("file", _display_path(f.path)),
                ("line", str(f.line)),
                ("col", str(f.column)),
                ("endLine", str(f.end_line)),
                ("endColumn", str(f.end_column)),
                ("title", f"{f.code} {f.name}"),
            )
        joined = ",".join(f"{k}={escape_property(v)}" for k, v in props)
        out.write(f"::{command} {joined}::{escape_data(f.message)}\n")
