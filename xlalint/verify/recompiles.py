"""The recompiles of a run and their root causes: the uncached compiles of steady-state steps, grouped by
(cut line, root cause), with the root cause found by diffing each new graph's IR (``graphs.py``) against
the last graph cut at the same place.

A new graph in steady state is either a *recompile* (a graph cut at the same place compiled before, and
the ops that differ come from lines that ran before: a shape or a branch changed) or a *new code path*
(the first graph cut at that place, or ops from lines that run for the first time: an evaluation that
starts at step 50). Only recompiles are misses (``misses.py``).
"""

from __future__ import annotations

import os

from xlalint.verify import graphs as graphs_mod
from xlalint.verify.results import Recompile
from xlalint.verify.step_table import Run, norm_path


def find_recompiles(run: Run) -> list:
    """Group the uncached compiles of steady-state steps by (cut line, root cause): ``[Recompile]``."""
    is_user = _user_predicate(run)
    by_step = _graphs_by_step(run)
    warm = range(min(run.steady_from, run.n_steps))
    seen_hashes = {g.hash for s in warm for g in by_step.get(s, [])}
    history = [g for s in warm for g in by_step.get(s, [])]
    groups: dict = {}
    for s in run.steady:
        row = run.step_rows[s]
        new_graphs = [g for g in by_step.get(s, []) if g.hash and g.hash not in seen_hashes]
        if row.uncached > 0:
            cut_lines = _cut_lines(run, s)
            if not new_graphs:
                grp = _group(
                    groups,
                    (tuple(cut_lines[:1]), ()),
                    "root cause not found: "
                    + ("graph dumps were off" if not run.graphs else "the graph dumps of this step show no new graph"),
                    "recompile",
                )
                grp["steps"].append(s)
                grp["count"] += row.uncached
            for g in new_graphs[: max(row.uncached, 1)]:
                _add_new_graph(groups, run, s, g, history, cut_lines, is_user)
        seen_hashes.update(g.hash for g in by_step.get(s, []))
        history.extend(by_step.get(s, []))
    return [_recompile(key, grp) for key, grp in groups.items()]


def _group(groups: dict, key, note: str, kind: str) -> dict:
    return groups.setdefault(key, {"steps": [], "count": 0, "causes": {}, "note": note, "kind": kind, "stack": []})


def _add_new_graph(groups: dict, run: Run, s: int, g, history: list, cut_lines: list, is_user) -> None:
    """Count a graph first seen at steady-state step ``s`` in the group of its cut site and root causes."""
    site = graphs_mod.cut_site(g, is_user)
    ref = _reference_graph(g, history, is_user)
    causes, note, kind = _root_causes(run, s, g, ref)
    cut = [site] if site else cut_lines[:1]
    key = (tuple(cut), tuple((c["path"], c["line"], c["kind"]) for c in causes), kind)
    grp = _group(groups, key, note, kind)
    if not grp["stack"]:
        grp["stack"] = list(graphs_mod.user_frames(g, is_user))
    if s not in grp["steps"]:
        grp["steps"].append(s)
    grp["count"] += 1
    for c in causes:
        k = (c["path"], c["line"], c["kind"], c["op"])
        if k not in grp["causes"]:
            grp["causes"][k] = dict(c, examples=[])
        ex = grp["causes"][k]["examples"]
        if len(ex) < 3:
            ex.append((c["before"], c["after"]))


def _root_causes(run: Run, s: int, g, ref) -> tuple:
    """(causes, note, kind) of a new graph against its reference graph (None: the first cut there)."""
    if ref is None:
        return [], "the first graph cut at this place: a code path that ran for the first time", "new code path"
    kind = "recompile"
    causes = [_locate(c, run) for c in graphs_mod.diff(ref, g)]
    note = (
        f"root cause from the IR diff against the graph of step {ref.step}"
        if causes
        else "root cause not found: the IR text of the two graphs is the same "
        "(a difference the text dump does not show)"
    )
    fresh = [
        c for c in causes
        if c["user"] and c["kind"] == "structure" and _first_run(run, c["path"], c["line"]) == s
    ]
    if fresh:
        kind = "new code path"
        note = "ops from lines that ran for the first time in this step: a new code path"
    return causes, note, kind


def _recompile(key, grp: dict) -> Recompile:
    cut = key[0]
    causes = [
        {
            "path": c["path"],
            "line": c["line"],
            "kind": c["kind"],
            "op": c["op"],
            "user": c["user"],
            "description": _describe_cause(c),
        }
        for c in grp["causes"].values()
    ]
    # User lines first: they are what the user can change.
    causes.sort(key=lambda c: (not c["user"], c["path"], c["line"]))
    cp, cl = cut[0] if cut else (None, None)
    return Recompile(
        steps=grp["steps"],
        count=grp["count"],
        cut_path=cp,
        cut_line=cl,
        root_causes=causes,
        note=grp["note"],
        kind=grp["kind"],
        cut_stack=grp["stack"],
    )


def _first_run(run: Run, path: str, line: int):
    hits = run.lines.get(path, {}).get(line, {}).get("hits", {})
    steps = [s for s, n in hits.items() if n]
    return min(steps) if steps else None


def _describe_cause(c: dict) -> str:
    ex = c["examples"][:2]
    shapes = "; ".join(
        f"{graphs_mod.pretty_shape(a)} -> {graphs_mod.pretty_shape(b)}" for a, b in ex
    )
    where = f"{os.path.basename(c['path'])}:{c['line']}" if c["path"] else "an unknown location"
    if c["kind"] == "input-shape":
        return f"input shape changed: {shapes} (an input first used at {where})"
    if c["kind"] == "node-shape":
        return f"{c['op']} created at {where} changed shape: {shapes}"
    if c["kind"] == "structure":
        before, after = ex[0] if ex else ("", "")
        what = after if before == "absent" else before
        return f"the graph changed structure between steps: {what} (ops created at {where})"
    return f"{c['op']} created at {where} changed its attributes or constants"


def _user_predicate(run: Run):
    users = set(run.user_files)
    return lambda p: norm_path(p) in users


def _graphs_by_step(run: Run) -> dict:
    """Assign every dumped graph to the step whose barrier came after it."""
    bounds = [st.get("dump_offset", 0) for st in run.raw_steps]
    out: dict = {}
    for g in run.graphs:
        s = 0
        while s < len(bounds) and g.offset >= bounds[s]:
            s += 1
        g.step = s
        out.setdefault(s, []).append(g)
    return out


def _reference_graph(g, history: list, is_user):
    """The most recent earlier graph cut at the same place (same user frames), preferring the same size."""
    frames = graphs_mod.user_frames(g, is_user)
    same_site = [h for h in history if graphs_mod.user_frames(h, is_user) == frames]
    if not same_site:
        return None
    same_size = [h for h in same_site if len(h.nodes) == len(g.nodes)]
    return (same_size or same_site)[-1]


def _locate(change, run: Run) -> dict:
    """Map an IR location (a base name) to a user file that ran."""
    path = ""
    if change.file:
        matches = [f for f in run.user_files if os.path.basename(f) == change.file]
        if len(matches) > 1:
            # Prefer a file where that line actually ran.
            ran = [f for f in matches if change.line in run.lines.get(f, {})]
            matches = ran or matches
        path = matches[0] if matches else change.file
    return {
        "path": path,
        "line": change.line,
        "kind": change.kind,
        "op": change.op,
        "before": change.before,
        "after": change.after,
        "user": path in run.user_files,
    }


def _cut_lines(run: Run, step: int) -> list:
    """User lines where an uncached compile was charged at this step (the sync or the host read)."""
    out = []
    for f, per_line in run.lines.items():
        for ln, d in per_line.items():
            ev = d["events"].get(step)
            if ev and ev["uncached"]:
                out.append((f, ln))
    return sorted(out)
