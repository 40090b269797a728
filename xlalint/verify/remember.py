"""Keep what a ``--verify`` run measured in each file of the program, for the language server's hover
(the store and the hover's words: ``xlalint/run/measured.py``).

Per file of the program that ran (the user's files, ``VerifyReport.user_files``): each finding there with
its verdict, evidence and cost per step, each miss with its kind, message and cost. Every file that ran is
written, also one where nothing was measured, so that a stale entry of an earlier run never outlives the
run that replaced it. A file changed on disk while the program ran is not kept (which version was measured
cannot be told), nor is a notebook (its lines are cells').
"""

from __future__ import annotations

import os

from xlalint.run.measured import save


def per_file(report) -> dict:
    """{real path: [the stored lines]} of every finding and miss of the report outside a notebook cell."""
    out: dict = {os.path.realpath(p): [] for p in report.user_files}
    for v in report.findings:
        f = v.finding
        if getattr(f, "cell", None) is not None or not f.path:
            continue
        cost = (v.numbers or {}).get("cost") or {}
        out.setdefault(os.path.realpath(f.path), []).append({
            "kind": "finding", "line": f.line, "code": f.code, "name": getattr(f, "name", ""),
            "verdict": v.status, "evidence": v.evidence, "cost": cost.get("text"),
            "with": list(cost.get("shared_evenly_with") or ()),
        })
    for m in report.misses:
        if m.cell is not None or not m.path:
            continue
        cost = (m.counters or {}).get("cost") or {}
        out.setdefault(os.path.realpath(m.path), []).append({
            "kind": "miss", "line": m.line, "miss": m.kind, "message": m.message, "cost": cost.get("text"),
        })
    return out


def remember(report, started: float, cache_dir=None) -> list:
    """Store what ``report`` (a run started at ``started``, seconds since the epoch) measured in each file;
    returns notes for the report: a file edited while the program ran, a store that cannot be written.
    Nothing is kept of a run that reached no step, or of a notebook's."""
    target = str(report.target).split("::")[0]
    if not report.steps or target.lower().endswith(".ipynb"):
        return []
    program, _, function = str(report.target).partition("::")
    ran = os.path.realpath(program) + (f"::{function}" if function else "")  # as the editor, elsewhere, finds it
    notes = []
    for path, lines in sorted(per_file(report).items()):
        try:
            if os.stat(path).st_mtime > started:
                notes.append(f"{os.path.basename(path)} changed while the program ran: what was measured in it is "
                             "not kept for the editor's hover")
                continue
            with open(path, "rb") as fh:
                text = fh.read().decode("utf-8-sig", "surrogateescape")
        except OSError:
            continue  # gone since the run: nothing to show it on
        try:
            save(path, text, when=started, target=ran, lines=lines, cache_dir=cache_dir)
        except OSError as exc:
            notes.append(f"could not keep the measurements for the editor's hover ({exc.strerror or exc})")
            break
    return notes
