"""The findings of a project, decided from its modules' analyses over the whole program's call graph:
how often each candidate runs, and through which path."""

from __future__ import annotations

import os
from typing import Iterable

from xlalint.analysis.file_findings import failing_module, internal_error, rule_words
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
    host that applies its own (flake8).

    An exception in the project pass for a module (its summary in the program), in a rule's project
    step or in deciding a module's findings is one XLA902 at each file it costs, and the rest is
    decided as usual; when the program cannot be built at all, each asked file is decided alone."""
    asked = list(asked)
    if index is None:
        index = ProjectIndex(root, results)
    errors: dict = {}  # path -> its XLA902 findings
    try:
        program, live = _program(results, root, index, errors)
    except Exception as e:  # noqa: BLE001 - a bug of xlalint's: each file decided alone, with an XLA902
        if len(results) <= 1:
            return sorted(_file_rows(results, asked) + [internal_error(p, "the project's decision", e) for p in asked
                                                        if "summary" in results.get(p, {})])
        out = []
        for p in asked:
            if p in results:
                out.extend(decide({p: results[p]}, [p], root, index, honor_noqa))
                if "summary" in results[p]:
                    out.append(internal_error(p, "the project's decision (this file was decided alone)", e))
        return sorted(out)
    cands = {}
    for path, r in live.items():
        mod = r["summary"]["module"]
        try:
            ctxs = program.ctxs[mod]
            cands[mod] = [_Found(c, ctxs[c[8]]) for c in r["cands"]]
        except Exception as e:  # noqa: BLE001
            cands[mod] = []
            errors.setdefault(path, []).append(internal_error(path, "the project pass for the module", e))
    by_code = rules_by_code()
    for code in sorted({c for r in live.values() for c in r.get("rules", {})}):
        data = {r["summary"]["module"]: r["rules"][code] for r in live.values() if code in r.get("rules", {})}
        _resolve(by_code[code], program, data, cands, live, errors)
    out = []
    steps = program.steps
    for path in asked:
        r = results.get(path)
        if r is None:
            continue
        out.extend(Finding(path, *row) for row in r.get("file", ()))
        if path not in live:
            continue
        mod = r["summary"]["module"]
        try:
            out.extend(_findings(path, mod, cands[mod], steps, by_code, honor_noqa))
        except Exception as e:  # noqa: BLE001
            errors.setdefault(path, []).append(internal_error(path, "deciding the module's findings", e))
    cells = {p: results[p]["cells"] for p in asked if "cells" in results.get(p, {})}
    if cells:  # notebooks: lines of their program -> lines of their cells (xlalint/sources/notebook.py)
        mapped = []
        for p, t in cells.items():
            try:
                mapped.extend(map_findings([f for f in out if f.path == p], t))
            except Exception as e:  # noqa: BLE001 - its findings cannot be placed: one XLA902 instead
                errors[p] = [internal_error(p, "mapping the findings to the notebook's cells", e)]
        out = [f for f in out if f.path not in cells] + mapped
    out.extend(f for p in asked for f in errors.get(p, ()))
    return sorted(out)


def _file_rows(results: dict, asked: list) -> list:
    return [Finding(p, *row) for p in asked for row in results.get(p, {}).get("file", ())]


def _program(results: dict, root: str, index, errors: dict) -> tuple:
    """The program of every module with a summary, and those modules (path -> result). A module whose
    summary makes building the program raise is left out of it, with an XLA902; an exception that names
    no module is raised."""
    live = {p: r for p, r in results.items() if "summary" in r}
    for _ in range(MAX_LEFT_OUT):
        summaries, paths = {}, {}
        for path, r in live.items():
            mod = r["summary"]["module"]
            summaries[mod] = r["summary"]
            paths[mod] = _display(path, root)
        try:
            return Program(Facts(index, summaries), paths), live
        except Exception as e:  # noqa: BLE001
            culprit = failing_module(e, {r["summary"]["module"]: p for p, r in live.items()})
            if culprit is None:
                raise
            errors.setdefault(culprit, []).append(internal_error(culprit, "the project pass for the module", e))
            live = {p: r for p, r in live.items() if p != culprit}
    raise RuntimeError(f"the program could not be built: {MAX_LEFT_OUT} modules left out, and it still raises")


# modules left out of a program that raises, one at a time, before each file is decided alone instead
MAX_LEFT_OUT = 8


def _resolve(rule, program, data: dict, cands: dict, live: dict, errors: dict) -> None:
    """A rule's project step. When it raises, its candidates are as the modules left them (as if the step
    had not run) and each file whose data or candidates it had gets an XLA902."""
    mine = [c for cs in cands.values() for c in cs if c.code == rule.code]
    before = [(c.message, c.fix, c.cost, c.frequency, c.edit) for c in mine]
    try:
        rule.resolve_project(program, data, cands)
    except Exception as e:  # noqa: BLE001
        for c, (message, fix, cost, frequency, edit) in zip(mine, before):
            c.message, c.fix, c.cost, c.frequency, c.edit = message, fix, cost, frequency, edit
        where = f"{rule_words(rule)}, deciding over the whole project"
        for path, r in live.items():
            mod = r["summary"]["module"]
            if mod in data or any(c.code == rule.code for c in cands.get(mod, ())):
                errors.setdefault(path, []).append(internal_error(path, where, e))


def _exported_frequency(data) -> Frequency:
    """A frequency as a module's summary keeps it: level, period, after the sync, the hot loop's kind (an
    evaluation branch: "every evaluation batch") and the period of its function."""
    level, period, after_sync, *rest = data
    return Frequency(level, period, after_sync, hot=rest[0] if rest else None, within=rest[1] if len(rest) > 1 else None)


def _findings(path: str, mod: str, found: list, steps, by_code: dict, honor_noqa: bool) -> list:
    """The findings of one module's candidates, decided (the ones that do not run every step dropped)."""
    seen = {}
    for c in found:
        if c.quiet and honor_noqa:
            continue
        if c.when in ("step", "step-any"):
            fr = steps.frequency(c.ctx)
            if not fr.per_step or (c.when == "step" and fr.after_sync):
                continue
        elif c.when == "custom":
            if c.ctx.func.excluded:
                continue  # never an XLA step (a module run only by code hard-wired to CUDA: project.program)
            fr = c.frequency if isinstance(c.frequency, Frequency) else (
                _exported_frequency(c.frequency) if c.frequency else None)
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
    return list(seen.values())


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
