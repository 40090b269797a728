"""A notebook's ``--verify`` report by cell.

``--verify notebook.ipynb`` runs the notebook's code cells as one script (``sources.notebook.write_script``)
and judges the script's findings like any program's; every place of that report is then a line of the
temporary script. ``by_cell`` moves each of them back to the notebook, ``cell N, line L``, with the one
mapping the static report uses (``sources.notebook.locate`` / ``map_findings`` over the script's cell
table): the findings (``Finding.cell``), the misses and the transfers without a cut (``Miss.cell``), the
recompiles' cuts (``Recompile.cut_cell``), root causes and cut stacks, the frames where the program stopped,
the missing barrier's loop; and, in the words of the evidence, notes, tracebacks and the program's output,
``script.py:41`` becomes ``notebook.ipynb:cell 8:12`` and ``File "script.py", line 41`` becomes
``File "notebook.ipynb", cell 8, line 12``. Lines of other files (a module the notebook imports) stay as
they are.

The findings judged are the notebook's own (``script_findings``): the notebook linted where it is, as a
notebook (what ``xlalint notebook.ipynb`` reports), moved onto the script's lines for the judges by
``program_line``, ``locate``'s inverse beside it in ``sources/notebook.py``.
"""

from __future__ import annotations

import os
import re
from dataclasses import is_dataclass, replace

from xlalint.sources.notebook import locate, map_findings, program_line


class CellPlaces:
    """The places of one script, moved to its notebook's cells."""

    def __init__(self, notebook: str, script: str, table: list) -> None:
        self.notebook = os.path.abspath(notebook)
        self.script = os.path.realpath(script)
        self.table = table
        name = re.escape(os.path.basename(self.script))
        full = "|".join(re.escape(p) for p in sorted({script, self.script, os.path.abspath(script)}, key=len, reverse=True))
        # `File "/tmp/x.py", line 41` (a traceback), then `/tmp/x.py:41` or `x.py:41` (evidence, warnings)
        self._frame = re.compile(rf'File "(?:{full})", line (\d+)')
        self._place = re.compile(rf"(?<![\w./-])(?:(?P<full>{full})|{name}):(?P<line>\d+)")

    def ours(self, path) -> bool:
        return bool(path) and os.path.realpath(path) == self.script

    def at(self, path, line) -> tuple:
        """(path, line, cell) of a place: the notebook's cell and line for the script's lines, else as it
        was with cell None. The script's header line is no cell's: it keeps its line."""
        if not self.ours(path) or not isinstance(line, int):
            return path, line, None
        cell, in_cell = locate(self.table, line)
        return (self.notebook, in_cell, cell) if cell is not None else (path, line, None)

    def text(self, s):
        if not isinstance(s, str) or not s:
            return s

        def frame(m):
            cell, line = locate(self.table, int(m.group(1)))
            return f'File "{self.notebook}", cell {cell}, line {line}' if cell is not None else m.group(0)

        def place(m):
            cell, line = locate(self.table, int(m.group("line")))
            if cell is None:
                return m.group(0)
            shown = self.notebook if m.group("full") else os.path.basename(self.notebook)
            return f"{shown}:cell {cell}:{line}"

        return self._place.sub(place, self._frame.sub(frame, s))

    # ------------------------------------------------------------------ the report's parts
    def finding(self, f):
        if not is_dataclass(f):  # a provider's stand-in (tests): as it is
            return f
        if self.at(f.path, f.line)[2] is None:  # another file (or the script's header line)
            return replace(f, message=self.text(f.message))
        (moved,) = map_findings([replace(f, path=self.notebook)], self.table)
        return replace(moved, message=self.text(moved.message), headline=self.text(moved.headline),
                       cost=self.text(moved.cost))

    def miss(self, m):
        path, line, cell = self.at(m.path, m.line)
        return replace(m, path=path, line=line, cell=cell, message=self.text(m.message))

    def frame_dict(self, d: dict) -> dict:
        """A {"path", "line", ...} dict (a root cause, a frame, a loop)."""
        if not isinstance(d, dict):
            return d
        path, line, cell = self.at(d.get("path"), d.get("line"))
        out = {k: self.text(v) for k, v in d.items()}
        if cell is not None:
            out.update(path=path, line=line, cell=cell)
            if isinstance(d.get("end_line"), int):
                out["end_line"] = self.at(d["path"], d["end_line"])[1]
        return out

    def costs(self, costs):
        """The ranking of where the time goes (verify/costs.py): its rows' places and the lines no rule flags."""
        if not costs:
            return costs
        out = dict(costs)
        out["rows"] = [dict(r, places=[self.frame_dict(p) for p in r.get("places", ())]) for r in costs.get("rows", ())]
        out["no_finding_lines"] = [self.frame_dict(x) for x in costs.get("no_finding_lines", ())]
        return out

    def pair(self, p):
        """A (path, line) pair of a stack: [path, line] or [notebook, line, cell]."""
        if not isinstance(p, (list, tuple)) or len(p) < 2:
            return p
        path, line, cell = self.at(p[0], p[1])
        return [path, line] if cell is None else [path, line, cell]

    def recompile(self, rc):
        path, line, cell = self.at(rc.cut_path, rc.cut_line)
        return replace(rc, cut_path=path, cut_line=line, cut_cell=cell, note=self.text(rc.note),
                       root_causes=[self.frame_dict(c) for c in rc.root_causes],
                       cut_stack=[self.pair(p) for p in rc.cut_stack])

    def no_barrier(self, nb):
        if not nb:
            return nb
        out = {k: self.text(v) for k, v in nb.items()}
        if nb.get("loop"):
            out["loop"] = self.frame_dict(nb["loop"])
        if nb.get("step_line"):
            out["step_line"] = self.pair(nb["step_line"])
        if nb.get("callers"):
            out["callers"] = [self.pair(c) for c in nb["callers"]]
        return out


def script_findings(notebook: str, script: str, table: list, provider):
    """A findings provider for the run of ``script``: the static findings of ``notebook`` itself (linted
    where it is, with its project's config and modules, as a notebook: what ``xlalint notebook.ipynb``
    reports), moved onto the script's lines for the judges (``by_cell`` moves them back)."""
    nb = os.path.abspath(notebook)
    real = os.path.realpath(script)

    def provide(paths: list) -> list:
        others = [p for p in paths if os.path.realpath(p) != real]
        out = []
        for f in provider([notebook] + others):
            if os.path.abspath(f.path) != nb:
                out.append(f)
            elif f.cell is not None and program_line(table, f.cell, f.line) is not None:
                start = program_line(table, f.cell, f.line)
                out.append(replace(f, path=script, line=start, cell=None,
                                   end_line=start + max(f.end_line - f.line, 0)))
        return out

    return provide


def by_cell(report, notebook: str, script: str, table: list):
    """The report of the run of ``script`` (made from ``notebook``, its cell table ``table``) with every
    place of the script in the notebook's cells, and ``target`` the notebook."""
    c = CellPlaces(notebook, script, table)
    return replace(
        report,
        findings=[replace(v, finding=c.finding(v.finding), evidence=c.text(v.evidence)) for v in report.findings],
        misses=[c.miss(m) for m in report.misses],
        transfers_without_cut=[c.miss(m) for m in report.transfers_without_cut],
        recompiles=[c.recompile(rc) for rc in report.recompiles],
        where=[c.frame_dict(w) for w in report.where],
        no_barrier=c.no_barrier(report.no_barrier),
        user_files=sorted({c.notebook if c.ours(p) else p for p in report.user_files}),
        notes=[c.text(n) for n in report.notes],
        error=c.text(report.error),
        traceback=c.text(report.traceback),
        program_output=c.text(report.program_output),
        costs=c.costs(getattr(report, "costs", None)),
    )
