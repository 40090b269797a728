"""The findings of a project, decided from its modules' analyses over the whole program's call graph:
how often each candidate runs, and through which path."""

from __future__ import annotations

import os
from typing import Iterable

from xlalint.findings import Finding
from xlalint.rules import rules_by_code
from xlalint.semantics import hot_loops
from xlalint.semantics.project import Facts, Program, ProjectIndex
from xlalint.semantics.steps import Frequency
from xlalint.sources.notebook import map_findings


def decide(results: dict, asked: Iterable[str], root: str, index=None, honor_noqa: bool = True) -> list[Finding]:
    """The findings of the ``asked`` files, from every module's analysis (``results``: path -> what
    ``analyse_module`` gave), decided over the whole program's call graph: how often each candidate
    runs, and through which path. ``honor_noqa=False`` keeps what ``# noqa`` comments suppress, for a
    host that applies its own (flake8)."""
    if index is None:
        index = ProjectIndex(root, results)
    summaries, paths, cands = {}, {}, {}
    for path, r in results.items():
        if "summary" in r:
            mod = r["summary"]["module"]
            summaries[mod] = r["summary"]
            paths[mod] = _display(path, root)
    program = Program(Facts(index, summaries), paths)
    for path, r in results.items():
        if "summary" in r:
            mod = r["summary"]["module"]
            ctxs = program.ctxs[mod]
            cands[mod] = [_Found(c, ctxs[c[8]]) for c in r["cands"]]
    by_code = rules_by_code()
    for code in sorted({c for r in results.values() for c in r.get("rules", {})}):
        data = {r["summary"]["module"]: r["rules"][code] for r in results.values() if code in r.get("rules", {})}
        by_code[code].resolve_project(program, data, cands)
    out = []
    steps = program.steps
    for path in asked:
        r = results.get(path)
        if r is None:
            continue
        out.extend(Finding(path, *row) for row in r.get("file", ()))
        if "summary" not in r:
            continue
        mod = r["summary"]["module"]
        seen = {}
        for c in cands[mod]:
            if c.quiet and honor_noqa:
                continue
            if c.when in ("step", "step-any"):
                fr = steps.frequency(c.ctx)
                if not fr.per_step or (c.when == "step" and fr.after_sync):
                    continue
            elif c.when == "custom":
                fr = c.frequency if isinstance(c.frequency, Frequency) else (
                    Frequency(*c.frequency) if c.frequency else None)
                if fr is None or not fr.per_step:
                    continue
            else:
                fr = None
            when = fr.describe(mod) if fr is not None else "every step"
            rule = by_code[c.code]
            headline = c.message.replace("{when}", when)
            cost = c.cost.replace("{when}", when)
            fix = hot_loops.fix_for(c.code, fr.hot if fr is not None else None, c.fix)  # the loop's own fix
            # the one-line message (concise, flake8, SARIF, GitHub) is the parts joined
            message = f"{headline}: {cost}. Fix: {fix}" if cost else headline
            f = Finding(path, c.line, c.col, c.code, c.end_line, c.end_col, rule.name, message, rule.severity,
                        fix, headline if cost else "", cost, tuple(tuple(e) for e in c.edits),
                        c.applicability, c.fix_title)
            seen[(c.line, c.col, c.code)] = f
        out.extend(seen.values())
    cells = {p: results[p]["cells"] for p in asked if "cells" in results.get(p, {})}
    if cells:  # notebooks: lines of their program -> lines of their cells (xlalint/sources/notebook.py)
        out = [f for f in out if f.path not in cells] + [g for p, t in cells.items() for g in map_findings([f for f in out if f.path == p], t)]
    return sorted(out)


class _Found:
    """A candidate in the project view: where it is, what it says, and the context that decides it."""

    __slots__ = ("code", "line", "col", "end_line", "end_col", "message", "fix", "when", "ctx", "frequency",
                 "cost", "edit", "edits", "applicability", "fix_title", "quiet")

    def __init__(self, row: list, ctx):
        (self.code, self.line, self.col, self.end_line, self.end_col, self.message, self.fix, self.when,
         _ctx_i, self.frequency, self.cost, self.edits, self.applicability, self.fix_title, self.quiet) = row
        self.ctx = ctx
        self.edit = None  # set_parts() in a project-wide decision: no tree here, so no edit


def _display(path: str, root: str) -> str:
    """A path as messages show it: relative to the working directory when under it, else to the project
    root (an editor's server runs elsewhere)."""
    for base in (os.getcwd(), root):
        try:
            rel = os.path.relpath(os.path.abspath(path), base)
        except ValueError:
            continue
        if not rel.startswith(".."):
            return rel
    return path
