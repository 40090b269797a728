"""Text and JSON views of a ``VerifyReport``."""

from __future__ import annotations

import json
import os

from xlalint.verify.costs import fmt_ms
from xlalint.verify.costs import render_lines as render_cost_lines
from xlalint.verify.fix_impact import render_lines as render_fix_impact

_SPARK = "▁▂▃▄▅▆▇█"


def shown_path(path: str) -> str:
    """A path as the report shows it: relative to the working directory when it is under it."""
    if not path:
        return "?"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def place(path: str, line, cell=None, *, base: bool = False) -> str:
    """``train.py:12``, or ``notebook.ipynb:cell 8:12`` for a line of a notebook's cell (as the static
    report writes it). ``base``: the file's base name, for a call path (``via train.py:35``)."""
    shown = os.path.basename(path) if base and path else shown_path(path)
    return f"{shown}:cell {cell}:{line}" if cell is not None else f"{shown}:{line}"


def sparkline(values: list) -> str:
    if not values:
        return ""
    top = max(values)
    if top <= 0:
        return _SPARK[0] * len(values)
    return "".join(_SPARK[min(len(_SPARK) - 1, round(v / top * (len(_SPARK) - 1)))] if v else " " for v in values)


def where_text(report) -> str:
    """Where the program was when it stopped: its innermost user frame, the callers as a path, and what
    torch_xla was doing ("inside a step barrier for 41.2 s, an XLA compile")."""
    where = getattr(report, "where", None) or []
    if not where:
        return ""
    inner = where[-1]
    text = f"at {place(inner['path'], inner['line'], inner.get('cell'))} in {inner['function']}"
    callers = [place(f["path"], f["line"], f.get("cell"), base=True) for f in reversed(where[:-1])]
    if callers:
        text += " via " + " <- ".join(callers)
    inside = getattr(report, "stopped_inside", None)
    if inside:
        what = inside.get("what")
        if inside.get("compiling"):
            text += (f", in the middle of an XLA compile (inside {what} for {inside.get('seconds', '?')} s)"
                     if what else ", in the middle of an XLA compile")
        elif what:
            text += f", inside {what} for {inside.get('seconds', '?')} s"
    return text


def stop_text(report) -> str:
    timeout = getattr(report, "timeout", None)
    stop = {
        "max_steps": f"stopped after --max-steps {report.max_steps}",
        "finished": "the program finished",
        "exit": "the program called sys.exit",
        "os_exit": "the program called os._exit",
        "timeout": f"stopped at --timeout {timeout:g}s" if timeout else "stopped at --timeout",
        "error": "the program raised an exception",
        "interrupted": f"interrupted by {getattr(report, 'interrupted', None) or 'a signal'}",
        "no_barrier": "stopped early: the training loop never reaches a step barrier",
    }.get(report.stop_reason, report.stop_reason)
    where = where_text(report)
    if where and report.stop_reason in ("timeout", "interrupted", "error"):
        stop += " " + where
    return stop


# Root causes of steady-state recompiles shown in full in the text report; the others are summed up in one
# line. A shape that changes recompiles the graph before each host read: one group per graph cut, the same
# root cause each time, shown as one entry. --format json lists every group.
MAX_RECOMPILE_GROUPS = 4


def by_root_cause(groups: list) -> list:
    """The recompile groups with the same root cause (the same user lines and kinds of change; the same
    descriptions when no user line is known) as one entry each, most compiles first:
    [{"groups", "count", "steps", "cuts", "causes", "others", "explained_by", "compile_ms", "notes"}]."""
    entries: dict = {}
    for rc in groups:
        mine = [c for c in rc.root_causes if c.get("user")]
        key = (tuple(sorted({(c["path"], c["line"], c.get("kind", "")) for c in mine}))
               or ("other", tuple(c["description"] for c in rc.root_causes)))
        e = entries.setdefault(key, {"groups": [], "count": 0, "steps": set(), "cuts": [], "causes": {}, "others": 0,
                                     "explained_by": set(), "compile_ms": None, "notes": []})
        e["groups"].append(rc)
        e["count"] += rc.count
        e["steps"].update(rc.steps)
        if rc.cut_path and (rc.cut_path, rc.cut_line, rc.cut_cell) not in e["cuts"]:
            e["cuts"].append((rc.cut_path, rc.cut_line, rc.cut_cell))
        for c in mine or rc.root_causes:
            e["causes"].setdefault((c["path"], c["line"], c.get("kind", ""), c.get("op", "")), c)
        e["others"] = max(e["others"], len(rc.root_causes) - len(mine) if mine else 0)
        e["explained_by"].update(rc.explained_by)
        if rc.compile_ms is not None:
            e["compile_ms"] = (e["compile_ms"] or 0.0) + rc.compile_ms
        if (not rc.root_causes or not rc.note.startswith("root cause from")) and rc.note not in e["notes"]:
            e["notes"].append(rc.note)
    out = [dict(e, steps=sorted(e["steps"]), explained_by=sorted(e["explained_by"]), causes=list(e["causes"].values()))
           for e in entries.values()]
    out.sort(key=lambda e: (-e["count"], -(e["compile_ms"] or 0.0)))  # counts first: the order of a run is stable
    return out


def _lines_by_file(places) -> str:
    """``a.py:3, 9; b.py:4; nb.ipynb:cell 8:2`` for ``(path, line, cell)`` triples."""
    by_file: dict = {}
    for path, line, cell in sorted(set(places), key=lambda p: (p[0], p[2] or 0, p[1])):
        by_file.setdefault(shown_path(path) + (f":cell {cell}" if cell is not None else ""), []).append(str(line))
    return "; ".join(f"{p}:{', '.join(lines)}" for p, lines in by_file.items())


def _folded(entries) -> str:
    groups = [rc for e in entries for rc in e["groups"]]
    count = sum(rc.count for rc in groups)
    steps = sorted({s for rc in groups for s in rc.steps})
    cuts = _lines_by_file((rc.cut_path, rc.cut_line, rc.cut_cell) for rc in groups if rc.cut_path)
    causes = _lines_by_file((c["path"], c["line"], c.get("cell")) for rc in groups for c in rc.root_causes
                            if c.get("user") and c.get("path"))
    rules = sorted({code for rc in groups for code in rc.explained_by})
    text = (f"… {len(entries)} more root causes: {count} uncached compile(s) at steps {', '.join(map(str, steps))}"
            f"{f'; graph cuts at {cuts}' if cuts else ''}{f'; root causes at {causes}' if causes else ''}")
    return text + (f"; explained by {', '.join(rules)}" if rules else "") + " (--format json lists every group)"


def render_text(report) -> str:
    out = []
    w = out.append
    n = len(report.steps)
    stop = stop_text(report)
    warm = sum(1 for r in report.steps if r.warmup)
    steps = f"{n} step{'s' if n != 1 else ''}"
    w(f"xlalint --verify {report.target}: {steps} ({stop}); warm-up: steps 0-{max(warm, 1) - 1}")
    if report.error:
        w("")
        w(f"error: {report.error}")
        if report.traceback and not (report.stop_reason == "timeout" and getattr(report, "where", None)):
            w(report.traceback.rstrip())
        if report.program_output and not report.traceback:
            w("program output (last lines):")
            w(report.program_output)
    costs = render_cost_lines(getattr(report, "costs", None) or {}, shown_path)
    if costs:
        w("")
        out.extend(costs)
    impact = render_fix_impact(getattr(report, "fix_impact", None), shown_path)
    if impact:
        w("")
        out.extend(impact)
    nb = getattr(report, "no_barrier", None)
    if nb:
        w("")
        loop = nb.get("loop")
        at = place(loop["path"], loop["line"], loop.get("cell")) if loop else "the training loop"
        w(f"Missing step barrier at {at}:")
        w(f"  {nb['message']}")
        w("  iteration  IR nodes  uncached  cached  transfers  compile s   wall s")
        for i, r in enumerate(nb["iterations"], 1):
            w(f"  {i:>9} {r['ir_nodes']:>9} {r['uncached']:>9} {r['cached']:>7} {r['transfers']:>10}"
              f" {r['compile_s']:>10.3f} {r['wall_s']:>8.3f}")
        w(f"  fix: {nb['fix']}")
    if report.findings:
        w("")
        w("Findings:")
        for v in report.findings:
            f = v.finding
            w(f"  {place(f.path, f.line, getattr(f, 'cell', None))}:{getattr(f, 'column', 1)}: {f.code} {f.name}: "
              f"{v.status}: {v.evidence}")
    if report.misses:
        w("")
        w("Misses (no rule flagged these lines):")
        for m in report.misses:
            if m.kind == "missing step barrier" and nb:
                w(f"  {place(m.path, m.line, m.cell)}: {m.kind}: see above")
                continue
            w(f"  {place(m.path, m.line, m.cell)}: {m.kind}: {m.message}")
    real = [rc for rc in report.recompiles if rc.kind == "recompile"]
    fresh = [rc for rc in report.recompiles if rc.kind != "recompile"]
    if real:
        w("")
        w("Steady-state recompiles by root cause (the line that created the node whose shape changed):")
        entries = by_root_cause(real)
        for e in entries[:MAX_RECOMPILE_GROUPS]:
            cuts = _lines_by_file(e["cuts"])
            cut = f"graph cut{'s' if len(e['cuts']) > 1 else ''} at {cuts}" if cuts else "graph cut at an unknown line"
            ms = f" ({fmt_ms(e['compile_ms'])} of compile time)" if e["compile_ms"] else ""
            w(f"  {e['count']} uncached compile(s) at steps {', '.join(map(str, e['steps']))}{ms}; {cut}")
            # the user's lines first; nodes made inside torch (functional.py) or by autograd (no location)
            # are consequences of those, counted in one line (all of them are in --format json)
            for c in e["causes"]:
                w(f"    root cause {place(c['path'], c['line'], c.get('cell'))}: {c['description']}")
            if e["others"]:
                w(f"    (+{e['others']} changed node(s) created in library code or at an unknown location)")
            for note in e["notes"]:
                w(f"    {note}")
            if e["explained_by"]:
                w(f"    explained by {', '.join(e['explained_by'])}")
            elif len(e["steps"]) < 2:
                w("    happened on one step only: listed, not counted as a miss")
        if entries[MAX_RECOMPILE_GROUPS:]:
            w(f"  {_folded(entries[MAX_RECOMPILE_GROUPS:])}")
    if fresh:
        w("")
        w("New code paths compiled after warm-up (first compiles, not recompiles):")
        for rc in fresh:
            cut = place(rc.cut_path, rc.cut_line, rc.cut_cell) if rc.cut_path else "an unknown line"
            w(f"  {rc.count} compile(s) at step {', '.join(map(str, rc.steps))}, graph cut at {cut}: {rc.note}")
    if report.transfers_without_cut:
        w("")
        w("Transfers without a graph cut (reads after the step's sync; not flagged by design):")
        for m in report.transfers_without_cut:
            w(f"  {place(m.path, m.line, m.cell)}: {m.message}")
    if report.steps:
        w("")
        w("Per step:  step  uncached  cached  transfers  fallbacks  wall ms")
        for r in report.steps:
            tag = "  (warm-up)" if r.warmup else ""
            w(
                f"          {r.index:>5} {r.uncached:>9} {r.cached:>7} {r.transfers:>10} {r.fallbacks:>10}"
                f" {r.wall_ms:>8.1f}{tag}"
            )
        w(f"  uncached compiles per step: {sparkline([r.uncached for r in report.steps])}")
        w(f"  transfers per step:         {sparkline([r.transfers for r in report.steps])}")
        t = report.timing
        if t:
            steady = (
                f"after warm-up median {t['steady_median_ms']} ms, mean {t['steady_mean_ms']} ms"
                if t.get("steady_median_ms") is not None
                else "no step after warm-up"
            )
            warm_ms = ", ".join(str(x) for x in t["warmup_ms"])
            w(f"  wall time: warm-up {t['warmup_total_ms']} ms ({warm_ms}; step 0 includes setup); {steady}")
    for note in report.notes:
        w(f"note: {note}")
    counts = {}
    for v in report.findings:
        counts[v.status] = counts.get(v.status, 0) + 1
    w("")
    w(
        f"{counts.get('CONFIRMED', 0)} confirmed, {counts.get('NOT CONFIRMED', 0)} not confirmed, "
        f"{counts.get('NOT REACHED', 0)} not reached, {len(report.misses)} missed; exit {report.exit_code}"
    )
    return "\n".join(out) + "\n"


def render_json(report) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str) + "\n"
