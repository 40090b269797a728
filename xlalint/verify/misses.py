"""The misses: what cost the run on most steps with no finding to explain it, and what is only listed.

- A line with no finding (at the line, or at a caller's line on the events' stack) where a transfer cut
  the graph or an ``aten::*`` op fell back to the CPU on most of the steps where the line ran after
  warm-up, and on at least 2 of them. The same fallback op on a line that has a finding - or inside the
  ``loss.backward()`` of an unflagged ``x[mask]`` - is that line's cost, named there, not a second miss.
- A steady-state recompile that repeated and that no finding explains: one miss per root-cause line.
- Listed apart, never misses: transfers without a graph cut (reads after the step's sync), and what
  happened on a single step after warm-up.

One line, one miss: a boolean-mask index that both falls back and recompiles is one entry.
"""

from __future__ import annotations

from xlalint.rules.step_varying_int import is_growth_message

import os

from xlalint.verify.phrasing import period, plural, via_text
from xlalint.verify.results import Miss
from xlalint.verify.source_lines import enclosing_condition_lines, is_backward_call
from xlalint.verify.step_table import SCALAR_READ_COUNTERS, Run, most, norm_path


def find_misses(run: Run, findings: list, recompiles: list) -> tuple:
    """(misses, transfers_without_cut): lines where costly events happened on most steps with no finding."""
    # Fallback ops seen on lines that have a finding: the same op on another line (typically the
    # `loss.backward()` that runs the backward of a flagged `x[mask]`) is that finding's cost, not a miss.
    flagged_ops: set = set()
    for f in findings:
        flagged_ops.update(run.stats(f.path, f.line, getattr(f, "end_line", f.line)).fallback_ops())
    forward_ops, backward_lines = _fallback_lines(run)
    misses, quiet = [], []
    for path, per_line in run.lines.items():
        if path == "<startup>":
            continue
        for ln in sorted(per_line):
            if not per_line[ln]["events"]:
                continue
            entry = _line_entry(run, findings, path, ln, flagged_ops, forward_ops, backward_lines)
            if entry is not None:
                is_miss, m = entry
                (misses if is_miss else quiet).append(m)
    misses += _recompile_misses(run, findings, recompiles)
    return _one_per_line(misses), quiet


def _covered(findings: list, path: str, line: int) -> list:
    path = norm_path(path)
    return [
        f
        for f in findings
        if norm_path(f.path) == path and f.line <= line <= max(f.line, getattr(f, "end_line", f.line))
    ]


def _fallback_lines(run: Run) -> tuple:
    """(op -> forward lines where it fell back, backward lines with a fallback).

    The backward of an op that fell back (a boolean-mask index in a helper) falls back again inside
    `loss.backward()`: one cause, charged once, at the forward line; the backward line is named there."""
    forward_ops: dict = {}  # op -> lines (not backward calls) where it fell back
    backward_lines = set()
    for path, per_line in run.lines.items():
        for ln, d in per_line.items():
            if not any(k not in SCALAR_READ_COUNTERS for ev in d["events"].values() for k in ev["aten"]):
                continue
            if is_backward_call(path, ln):
                backward_lines.add((path, ln))
                continue
            for ev in d["events"].values():
                for k in ev["aten"]:
                    forward_ops.setdefault(k, set()).add((path, ln))
    return forward_ops, backward_lines


def _line_entry(run: Run, findings: list, path: str, ln: int, flagged_ops: set, forward_ops: dict,
                backward_lines: set):
    """(is_miss, Miss) for one line with events, or None when it is nothing to report."""
    n = run.n_steps
    st = run.stats(path, ln)
    steps = range(n)
    # A line is judged on the steps where it ran: a helper that runs every 4 steps and reads the
    # loss each time costs on every step where it runs. Warm-up steps do not count; what happened on
    # a single step after warm-up is listed, not counted.
    ran = [s for s in steps if st.runs.get(s) and s >= run.steady_from]
    cut_t = [s for s in ran if st.transfers.get(s, 0) and st.cuts(s)]
    fb = [s for s in ran if st.fallbacks.get(s)]
    plain_t = [s for s in ran if st.transfers.get(s, 0) and not st.cuts(s)]
    counters = {
        "transfers": sum(st.transfers.get(s, 0) for s in steps),
        "graph_cuts": sum(st.cuts(s) for s in steps),
        "scalar_reads": sum(st.scalar_reads.get(s, 0) for s in steps),
        "fallbacks": {k: v for k, v in st.fallback_ops().items()},
        "steps": sorted(set(cut_t) | set(fb) | set(plain_t)),
    }
    if _explained(run, findings, path, ln, bool(fb), counters["fallbacks"], flagged_ops, forward_ops,
                  backward_lines):
        return None
    via = via_text(run, path, ln)

    def on(k_steps):
        return f"on {len(k_steps)} of {n} steps{period(k_steps)}"

    if len(fb) >= 2 and most(len(fb), len(ran)):
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(counters["fallbacks"].items()))
        again = sorted(
            f"{os.path.basename(p)}:{b}" for p, b in backward_lines
            if any((path, ln) in forward_ops.get(k, ()) for k in counters["fallbacks"])
        )
        if again:
            ops += "; its backward falls back again in " + ", ".join(again)
        return True, Miss(
            path, ln, "cpu fallback",
            f"CPU fallback {on(fb)} ({ops}); "
            f"{plural(counters['transfers'], 'host transfer')} and "
            f"{plural(counters['graph_cuts'], 'graph cut')} at this line{via}; no rule flags it",
            len(fb), n, counters,
        )
    if len(cut_t) >= 2 and most(len(cut_t), len(ran)):
        return True, Miss(
            path, ln, "graph-cut transfer",
            f"{plural(counters['transfers'], 'host transfer')} that cut the graph "
            f"({plural(counters['graph_cuts'], 'extra graph execution')}) {on(cut_t)}{via}; "
            "no rule flags it",
            len(cut_t), n, counters,
        )
    if len(plain_t) >= 2 and most(len(plain_t), len(ran)):
        return False, Miss(
            path, ln, "transfer without graph cut",
            f"{plural(counters['transfers'], 'host transfer')} {on(plain_t)} with no "
            f"graph cut (a read after the step's sync: costs a copy, not a split){via}",
            len(plain_t), n, counters,
        )
    if len(cut_t) == 1 or len(fb) == 1:
        s1 = (cut_t or fb)[0]
        return False, Miss(
            path, ln, "once after warm-up",
            f"{plural(counters['transfers'], 'host transfer')}, "
            f"{plural(counters['graph_cuts'], 'graph cut')}"
            + (f", CPU fallbacks {counters['fallbacks']}" if counters["fallbacks"] else "")
            + f" on one step after warm-up (step {s1}){via}: listed, not counted",
            1, n, counters,
        )
    return None


def _explained(run: Run, findings: list, path: str, ln: int, fell_back: bool, fallbacks: dict, flagged_ops: set,
               forward_ops: dict, backward_lines: set) -> bool:
    """True when a finding explains the line's events, or its fallbacks are another line's cost."""
    covered = _covered(findings, path, ln)
    if not covered:
        # A finding at a caller's line on the events' stack explains them (the helper's read is the
        # cost of the flagged call in train.py).
        for callers in run.callers(path, ln):
            covered = [f for p, c in callers for f in _covered(findings, p, c)]
            if covered:
                break
    if covered:
        return True
    if fell_back and set(fallbacks) <= flagged_ops:
        return True
    if (path, ln) in backward_lines and fallbacks and all(k in forward_ops for k in fallbacks):
        return True  # named at the forward line's miss
    if (path, ln) in backward_lines and fallbacks and all(
        k in flagged_ops or k.replace("_backward", "") in flagged_ops for k in fallbacks
    ):
        return True  # the backward of a flagged op (`aten::_embedding_bag_backward`): that finding's cost
    return False


def _recompile_misses(run: Run, findings: list, recompiles: list) -> list:
    """One miss per root-cause line of the steady-state recompiles no finding explains (and that repeated);
    sets each recompile's ``explained_by``."""
    by_root: dict = {}  # one miss per root-cause line, whatever the cut sites
    for rc in recompiles:
        if rc.kind != "recompile":
            continue
        rc.explained_by = _explaining_codes(run, findings, rc)
        if rc.explained_by:
            continue
        user_causes = [c for c in rc.root_causes if c["path"] in run.user_files]
        at = user_causes[0] if user_causes else None
        path, line = (at["path"], at["line"]) if at else (rc.cut_path or "", rc.cut_line or 0)
        shown = user_causes or rc.root_causes
        why = "; ".join(c["description"] for c in shown[:2]) or rc.note
        if not rc.root_causes:
            why = rc.note if rc.note.startswith("root cause not found") else "root cause not found: " + rc.note
        g = by_root.setdefault((path, line), {"steps": set(), "count": 0, "cuts": [], "why": why})
        g["steps"].update(rc.steps)
        g["count"] += rc.count
        if rc.cut_path:
            cut = f"{os.path.basename(rc.cut_path)}:{rc.cut_line}"
            if cut not in g["cuts"]:
                g["cuts"].append(cut)
    misses = []
    for (path, line), g in by_root.items():
        steps = sorted(g["steps"])
        if len(steps) < 2:
            # Once, never again (e.g. the first log step after the optimizer state settled): one compile is
            # not a pattern worth a miss. It stays in the report's recompiles.
            continue
        cut = f" (graph cut at {', '.join(g['cuts'])})" if g["cuts"] else ""
        misses.append(
            Miss(
                path, line, "steady-state recompile",
                f"UncachedCompile rose {plural(g['count'], 'time')} on {len(steps)} of {len(run.steady)} steps "
                f"after warm-up{cut}: {g['why']}",
                len(steps), len(run.steady),
                {"uncached_compiles": g["count"], "steps": steps},
            )
        )
    return misses


def _explaining_codes(run: Run, findings: list, rc) -> list:
    """The codes of the findings that explain a recompile: on the cut's stack, at the root-cause line, at
    the ``if``/``while`` whose branch added or removed the changed ops, or (XLA005) an input's shape."""
    lines = [(c["path"], c["line"]) for c in rc.root_causes if c["path"]]
    if rc.cut_path:
        lines.append((rc.cut_path, rc.cut_line))
    # Ops that come and go between graphs sit under a data-dependent condition: its finding explains them.
    lines += [
        (c["path"], ln)
        for c in rc.root_causes
        if c["kind"] == "structure" and c["path"] in run.user_files
        for ln in enclosing_condition_lines(c["path"], c["line"])
    ]
    lines += list(rc.cut_stack)  # a finding anywhere on the cut's stack (the caller of a helper's read)
    codes = sorted({f.code for p, ln in lines for f in _covered(findings, p, ln)})
    if any(c["kind"] == "input-shape" for c in rc.root_causes):
        # Inputs of varying shape are what XLA005 (bucketing) is about, wherever its finding sits. Only
        # then: a recompile whose root cause was not found is explained by nothing.
        codes += sorted({f.code for f in findings if f.code == "XLA005"} - set(codes))
        # ... and a tensor grown by `torch.cat` (XLA009) on the steps where the growth ran
        steps = set(rc.steps)
        if "XLA009" not in codes and any(
                is_growth_message(f.code, f.message)
                and steps & {s for s, n in run.stats(f.path, f.line, f.line).runs.items() if n > 0}
                for f in findings):
            codes.append("XLA009")
    return codes


def _one_per_line(misses: list) -> list:
    """One line, one miss: a boolean-mask index both falls back and recompiles."""
    merged: dict = {}
    for m in misses:
        key = (norm_path(m.path) if m.path else "", m.line)
        if key in merged:
            first = merged[key]
            first.kind += " + " + m.kind
            first.message += "; and " + m.message
            first.counters = {**m.counters, **first.counters, "also": m.counters}
            first.steps = max(first.steps, m.steps)
        else:
            merged[key] = m
    return list(merged.values())
