"""Where the time goes: what each finding and each miss costs per step, measured, and what is left.

The child records, with every event it charges to a line (``child/recorder.py``'s ``flush``), how long
the main thread waited in the call that moved the counters (the ``.item()``, the fallen-back op, the
step barrier) and the compile and device-to-host transfer time torch_xla measured in it (``CompileTime``,
``TransferFromDeviceTime``). Here each steady-state step's events are charged to an owner:

- the compile part of an event (its ``CompileTime``) to what explains the recompile it belongs to (the
  recompile group of that graph cut and step): the findings at its root-cause lines (an ``if`` whose branch
  changed the graph, XLA005 for an input whose shape changed), else the findings on the cut's stack, else
  the recompile's miss; graphs compiled in eval mode to the XLA004 findings that ran in that step;
- the rest of the event's wait (transfers, the extra executions of a graph cut, CPU fallbacks) to the line
  the attribution charged it to: the findings at that line, else a finding at a caller's line on its
  stack, else that line's miss, else "no finding" (the step's own work: the barrier's execution, input
  copies).

An event charged to several findings is split evenly between them; findings of one rule whose shares are
the same (two XLA005 lines behind the same recompiles) are one row. The unexplained rest is the step's
wall time minus everything charged: Python, tracing the graph, the input pipeline, and executions that
ran on torch_xla's worker thread while the main thread did not wait for them. Costs are per step after
warm-up (the mean over the steady steps); what happens on some steps only is averaged and also said per
time ("every 5 steps: 30 ms each time").
"""

from __future__ import annotations

import os

from xlalint.verify.phrasing import period, plural
from xlalint.verify.source_lines import enclosing_condition_lines
from xlalint.verify.step_table import SCALAR_READ_COUNTERS, Run, norm_path


def fmt_ms(ms: float) -> str:
    """``3,612 ms``, ``12 ms``, ``0.4 ms``: always in ms (one unit to compare rows by eye)."""
    return f"{ms:,.0f} ms" if ms >= 10 else f"{ms:.1f} ms"


def percent(share: float) -> str:
    """``87%``; ``<1%`` for a cost that rounds to nothing but is not nothing."""
    p = round(100 * share)
    return "<1%" if p == 0 and share > 0 else f"{p}%"


def _count(x: float, word: str, plural_word: str | None = None) -> str:
    """``1 transfer``, ``0.9 compiles``, ``2 extra executions`` (per step, on average)."""
    r = round(x)
    if abs(x - r) < 0.05:
        return plural(int(r), word, plural_word)
    text = f"{x:.1f}" if x >= 0.1 else f"{x:.2f}"
    return f"{text} {plural_word or word + 's'}"


class _Cost:
    """What one owner was charged over the steady steps."""

    def __init__(self):
        self.compile_ms = 0.0
        self.compiles = 0.0
        self.rest_ms = 0.0
        self.transfers = 0.0
        self.cuts = 0.0
        self.fallbacks = 0.0
        self.by_step: dict = {}

    def add(self, step: int, share: float, compile_ms=0.0, compiles=0.0, rest_ms=0.0, transfers=0, cuts=0,
            fallbacks=0) -> None:
        self.compile_ms += share * compile_ms
        self.compiles += share * compiles
        self.rest_ms += share * rest_ms
        self.transfers += share * transfers
        self.cuts += share * cuts
        self.fallbacks += share * fallbacks
        self.by_step[step] = self.by_step.get(step, 0.0) + share * (compile_ms + rest_ms)

    @property
    def ms(self) -> float:
        return self.compile_ms + self.rest_ms

    def key(self) -> tuple:
        return tuple(round(x, 3) for x in (self.compile_ms, self.compiles, self.rest_ms, self.transfers, self.cuts))

    def merged(self, other: "_Cost") -> "_Cost":
        out = _Cost()
        for name in ("compile_ms", "compiles", "rest_ms", "transfers", "cuts", "fallbacks"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        for s in set(self.by_step) | set(other.by_step):
            out.by_step[s] = self.by_step.get(s, 0.0) + other.by_step.get(s, 0.0)
        return out


def _covering(findings: list, path: str, line: int) -> list:
    """Indexes of the findings whose lines hold ``line`` of ``path``."""
    path = norm_path(path)
    return [
        i for i, f in enumerate(findings)
        if norm_path(f.path) == path and f.line <= line <= max(f.line, getattr(f, "end_line", f.line))
    ]


class _Owners:
    """Who answers for an event: findings (by index), a miss (by index), or no one (the line)."""

    def __init__(self, run: Run, findings: list, misses: list, recompiles: list):
        self.run = run
        self.findings = findings
        self.misses = {(norm_path(m.path), m.line): j for j, m in enumerate(misses) if m.path}
        self.recompiles = [rc for rc in recompiles if rc.kind == "recompile"]
        self.new_paths = [rc for rc in recompiles if rc.kind != "recompile"]

    def of_line(self, path: str, line: int) -> list:
        covered = _covering(self.findings, path, line)
        if not covered:
            # a finding at a caller's line on the event's stack (the helper's read is the flagged call's cost)
            for callers in self.run.callers(path, line):
                covered = sorted({i for p, c in callers for i in _covering(self.findings, p, c)})
                if covered:
                    break
        if covered:
            return [("finding", i) for i in covered]
        j = self.misses.get((norm_path(path), line))
        if j is not None:
            return [("miss", j)]
        return [("none", norm_path(path), line)]

    def of_compile(self, path: str, line: int, step: int) -> list | None:
        """The owners of a steady-state compile at this cut line and step, or None when it belongs to no
        recompile group (it is then the line's)."""
        key = (norm_path(path), line)
        groups = [rc for rc in self.recompiles if step in rc.steps and rc.cut_path and (norm_path(rc.cut_path), rc.cut_line) == key]
        if not groups:
            groups = [rc for rc in self.recompiles if step in rc.steps and key in {(norm_path(p), ln) for p, ln in rc.cut_stack}]
        if not groups:
            return None
        owners: set = set()
        for rc in groups:
            owners.update(self._explaining(rc))
        return sorted(owners, key=str) or None

    def _explaining(self, rc) -> list:
        root = []
        for c in rc.root_causes:
            if not c.get("path") or not c.get("user", True):
                continue
            root += _covering(self.findings, c["path"], c["line"])
            if c.get("kind") == "structure":
                for ln in enclosing_condition_lines(c["path"], c["line"]):
                    root += _covering(self.findings, c["path"], ln)
        if any(c.get("kind") == "input-shape" for c in rc.root_causes):
            root += [i for i, f in enumerate(self.findings) if f.code == "XLA005"]
        if root:
            return [("finding", i) for i in sorted(set(root))]
        stack = list(rc.cut_stack) + ([(rc.cut_path, rc.cut_line)] if rc.cut_path else [])
        on_stack = sorted({i for p, ln in stack for i in _covering(self.findings, p, ln)})
        if on_stack:
            return [("finding", i) for i in on_stack]
        for c in rc.root_causes:
            j = self.misses.get((norm_path(c["path"]), c["line"])) if c.get("path") else None
            if j is not None:
                return [("miss", j)]
        if rc.cut_path:
            j = self.misses.get((norm_path(rc.cut_path), rc.cut_line))
            if j is not None:
                return [("miss", j)]
        return []

    def eval_switches(self, step: int) -> list:
        """XLA004 findings whose line ran at this step: the owners of graphs compiled in eval mode."""
        out = []
        for i, f in enumerate(self.findings):
            if f.code == "XLA004":
                st = self.run.stats(f.path, f.line, getattr(f, "end_line", f.line))
                if st.runs.get(step):
                    out.append(("finding", i))
        return out


def measure(run: Run, findings: list, misses: list, recompiles: list) -> dict:
    """The costs per owner over the steady steps, as plain data (``rows`` ranked, the ``none`` lines, the
    unexplained rest); ``{}`` when no step ran after warm-up or the run measured no time."""
    steady = [s for s in run.steady if s < len(run.step_rows)]
    if not steady:
        return {}
    step_ms = sum(run.step_rows[s].wall_ms for s in steady) / len(steady)
    owners = _Owners(run, findings, misses, recompiles)
    costs: dict = {}
    compile_at: dict = {}  # (path, line, step) -> compile ms measured there

    def charge(who: list, step: int, **parts) -> None:
        share = 1.0 / len(who)
        for o in who:
            costs.setdefault(o, _Cost()).add(step, share, **parts)

    steady_set = set(steady)
    for path, per_line in run.lines.items():
        if path == "<startup>":
            continue
        for ln, d in per_line.items():
            for s, ev in d["events"].items():
                if s not in steady_set:
                    continue
                compile_ms = ev.get("compile_ms", 0.0) if ev["uncached"] else 0.0
                wait = max(ev.get("wall_ms", 0.0), compile_ms + ev.get("transfer_ms", 0.0))
                fallbacks = sum(v for k, v in ev["aten"].items() if k not in SCALAR_READ_COUNTERS)
                line_owners = owners.of_line(path, ln)
                if compile_ms:
                    compile_at[(norm_path(path), ln, s)] = compile_ms
                    n_eval = min(ev.get("eval_uncached", 0), ev["uncached"])
                    xla004 = owners.eval_switches(s) if n_eval else []
                    if xla004:
                        f = n_eval / ev["uncached"]
                        charge(xla004, s, compile_ms=f * compile_ms, compiles=n_eval)
                        compile_ms, n = (1 - f) * compile_ms, ev["uncached"] - n_eval
                    else:
                        n = ev["uncached"]
                    if n:
                        who = owners.of_compile(path, ln, s) or line_owners
                        charge(who, s, compile_ms=compile_ms, compiles=n)
                charge(line_owners, s, rest_ms=wait - ev.get("compile_ms", 0.0) * bool(ev["uncached"]),
                       transfers=ev["d2h"], cuts=ev["uncached"] + ev["cached"], fallbacks=fallbacks)
    n = len(steady)
    rows = _rows(costs, findings, misses, n, step_ms)
    none = sorted(((o, c) for o, c in costs.items() if o[0] == "none"), key=lambda oc: -oc[1].ms)
    none_ms = sum(c.ms for _, c in none) / n
    attributed = sum(r["ms_per_step"] for r in rows)
    return {
        "steady_steps": n,
        "step_ms": round(step_ms, 3),
        "rows": rows,
        "no_finding_ms": round(none_ms, 3),
        "no_finding_lines": [
            {"path": o[1], "line": o[2], "ms_per_step": round(c.ms / n, 3), "what": _what(c, n)} for o, c in none
        ],
        "unexplained_ms": round(step_ms - attributed - none_ms, 3),
        "recompile_compile_ms": _group_compile_ms(recompiles, compile_at),
    }


def _group_compile_ms(recompiles: list, compile_of: dict) -> list:
    """Each recompile group's measured compile time, in the order of ``recompiles`` (a cut line's compile
    time at a step is split between the groups of that cut and step by their compiles per step)."""
    def per_step(g) -> float:
        return g.count / max(len(g.steps), 1)

    out = []
    for rc in recompiles:
        total = 0.0
        for s in rc.steps:
            key = (norm_path(rc.cut_path), rc.cut_line, s) if rc.cut_path else None
            if key not in compile_of:
                continue
            sharing = [g for g in recompiles if s in g.steps and g.cut_path and (norm_path(g.cut_path), g.cut_line) == key[:2]]
            total += compile_of[key] * per_step(rc) / (sum(per_step(g) for g in sharing) or 1.0)
        out.append(round(total, 3))
    return out


def _rows(costs: dict, findings: list, misses: list, n: int, step_ms: float) -> list:
    """The findings and misses with a cost, ranked; findings of one rule with the same shares merged."""
    groups: list = []  # [(kind, [indexes], _Cost)]
    costs = {o: c for o, c in costs.items() if c.ms > 0.0005}  # an event whose wait was not timed costs nothing here
    for o, c in sorted(((o, c) for o, c in costs.items() if o[0] == "finding"), key=lambda oc: oc[0][1]):
        f = findings[o[1]]
        for g in groups:
            if g[0] == "finding" and findings[g[1][0]].code == f.code and g[3] == c.key():
                g[1].append(o[1])
                g[2] = g[2].merged(c)
                break
        else:
            groups.append(["finding", [o[1]], c, c.key()])
    for o, c in costs.items():
        if o[0] == "miss":
            groups.append(["miss", [o[1]], c, c.key()])
    rows = []
    for kind, idx, c, _ in groups:
        if kind == "finding":
            fs = [findings[i] for i in idx]
            places = [{"path": f.path, "line": f.line} for f in fs]
            label = {"code": fs[0].code, "name": getattr(fs[0], "name", "")}
        else:
            m = misses[idx[0]]
            places = [{"path": m.path, "line": m.line}]
            label = {"code": None, "name": m.kind}
        rows.append(_row(kind, idx, places, label, c, n, step_ms))
    rows.sort(key=lambda r: (-r["ms_per_step"], r["kind"], r["places"][0]["line"]))
    return rows


def _row(kind, idx, places, label, c: _Cost, n: int, step_ms: float) -> dict:
    ms = c.ms / n
    steps = sorted(s for s, v in c.by_step.items() if v > 0)
    share = ms / step_ms if step_ms > 0 else 0.0
    text = f"costs {fmt_ms(ms)} per step"
    per = n  # the breakdown: per step, or per time when it happens on some steps only
    if steps and len(steps) < n:
        per = len(steps)
        each = c.ms / len(steps)
        if len(steps) == 1:
            when = f"once after warm-up, at step {steps[0]}: {fmt_ms(each)}"
        else:
            when = f"{period(steps).strip(' ()') or f'on {len(steps)} of {n} steps'}: {fmt_ms(each)} each time"
        text += f" on average ({percent(share)} of the step time; {when})"
    else:
        text += f" ({percent(share)} of the step time)"
    what = _what(c, per, "extra graph execution")
    if what:
        text += ": " + what
    return {
        "kind": kind,
        "index": idx,
        "places": places,
        **label,
        "ms_per_step": round(ms, 3),
        "share": round(share, 4),
        "steps": steps,
        "compile_ms_per_step": round(c.compile_ms / n, 3),
        "compiles_per_step": round(c.compiles / n, 3),
        "other_ms_per_step": round(c.rest_ms / n, 3),
        "transfers_per_step": round(c.transfers / n, 3),
        "graph_cuts_per_step": round(c.cuts / n, 3),
        "fallbacks_per_step": round(c.fallbacks / n, 3),
        "text": text,
    }


def _what(c: _Cost, n: int, execution: str = "graph execution") -> str:
    """``0.9 compiles x 1,300 ms; 1 transfer + 1 extra execution: 4 ms``: the owner's costs over ``n``
    (the steady steps: per step on average; the steps it cost on: per time)."""
    parts = []
    if c.compiles > 0:
        parts.append(f"{_count(c.compiles / n, 'compile')} x {fmt_ms(c.compile_ms / c.compiles)}")
    events = []
    if c.transfers:
        events.append(_count(c.transfers / n, "transfer"))
    if c.cuts:
        events.append(_count(c.cuts / n, execution))
    if c.fallbacks:
        events.append(_count(c.fallbacks / n, "CPU fallback"))
    if events and c.rest_ms > 0:
        parts.append(" + ".join(events) + f": {fmt_ms(c.rest_ms / n)}")
    return "; ".join(parts)


def attach_costs(costs: dict, verdicts: list, misses: list, recompiles: list) -> dict:
    """Put each finding's and miss's cost in its numbers (``numbers["cost"]``, ``counters["cost"]``) and
    each recompile group's compile time on it; returns the costs without the per-group list."""
    group_ms = costs.pop("recompile_compile_ms", None) or []
    for rc, ms in zip(recompiles, group_ms):
        rc.compile_ms = ms
    for rank, row in enumerate(costs.get("rows", []), 1):
        k = len(row["index"])
        cost = {"ms_per_step": round(row["ms_per_step"] / k, 3), "share": round(row["share"] / k, 4), "rank": rank,
                "text": row["text"]}
        if k > 1:
            cost["shared_evenly_with"] = [p["line"] for p in row["places"]]
        for i in row["index"]:
            if row["kind"] == "finding" and i < len(verdicts):
                verdicts[i].numbers["cost"] = cost
            elif row["kind"] == "miss" and i < len(misses):
                misses[i].counters["cost"] = cost
    return costs


def row_label(row: dict, shown) -> str:
    """``examples/slow_train.py:38, 75 XLA005 unbucketed-variable-length (2 findings)`` or a miss's place
    and kind; ``shown`` formats a path."""
    by_file: dict = {}
    for p in row["places"]:
        by_file.setdefault(shown(p["path"]) + (f":cell {p['cell']}" if p.get("cell") is not None else ""),
                           []).append(str(p["line"]))
    where = "; ".join(f"{f}:{', '.join(lines)}" for f, lines in by_file.items())
    if row["kind"] == "finding":
        k = len(row["places"])
        return f"{where} {row['code']} {row['name']}" + (f" ({k} findings)" if k > 1 else "")
    return f"{where} miss ({row['name']})"


def none_label(costs: dict, shown, limit: int = 3) -> str:
    """``lines no rule flags (train.py:74, train.py:106)``: the costliest few, in file and line order (an
    order that does not move with the clock)."""
    lines = sorted((costs.get("no_finding_lines") or [])[:limit], key=lambda x: (x["path"], x["line"])) + (
        costs.get("no_finding_lines") or [])[limit:]
    named = ", ".join(f"{os.path.basename(x['path'])}:" + (f"cell {x['cell']}:" if x.get("cell") is not None else "")
                      + f"{x['line']}" for x in lines[:limit])
    more = f" and {len(lines) - limit} more" if len(lines) > limit else ""
    return f"lines no rule flags ({named}{more})" if lines else "lines no rule flags"


#: Rows of the ranking shown in the text report; the others are summed up in one line (JSON has all).
MAX_ROWS = 10


def render_lines(costs: dict, shown) -> list:
    """The text report's "Where the time goes" table: the ranked rows, what lines no rule flags cost, and
    the unexplained rest; they add up to the mean step time after warm-up."""
    if not costs:
        return []
    step_ms = costs["step_ms"]

    def pct(ms):
        return percent(ms / step_ms) if step_ms > 0 else "?%"

    out = [f"Where the time goes (after warm-up: {plural(costs['steady_steps'], 'step')}, "
           f"{fmt_ms(step_ms)} per step on average; ranked by measured cost):"]
    rows = costs["rows"]
    for k, r in enumerate(rows[:MAX_ROWS], 1):
        out.append(f"  {k}. {row_label(r, shown)}: {r['text']}")
    if rows[MAX_ROWS:]:
        rest = sum(r["ms_per_step"] for r in rows[MAX_ROWS:])
        out.append(f"  … {len(rows) - MAX_ROWS} more: {fmt_ms(rest)} per step in all ({pct(rest)}; --format json lists every row)")
    if costs["no_finding_lines"]:
        out.append(f"  no finding: {none_label(costs, shown)}: {fmt_ms(costs['no_finding_ms'])} per step "
                   f"({pct(costs['no_finding_ms'])}): the step's own compiles, executions and copies")
    u = costs["unexplained_ms"]
    out.append(f"  unexplained: {fmt_ms(u) if u >= 0 else '-' + fmt_ms(-u)} per step ({pct(u)}): the rest of the "
               "step (Python, tracing the graph, the input pipeline, executions nobody waited for)")
    return out
