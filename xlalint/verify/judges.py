"""The judges: one verdict per static finding (CONFIRMED, NOT CONFIRMED, NOT REACHED) on the counters
charged to its lines, and to the lines further down the stack it is the caller of. One judge per rule family:

- host transfers (XLA001, XLA002, XLA006 and any other code): transfers at the lines on most of the steps
  where they ran;
- CPU fallbacks (XLA003, XLA007): an ``aten::*`` fallback on most steps, and/or steady-state compiles at
  (or with a root cause at) the lines;
- steady-state recompiles from a changed input shape (XLA005);
- graphs compiled in eval mode (XLA004);
- a missing step barrier (XLA010): ``missing_barrier.py``;
- any other code, also: a steady-state recompile whose root cause is at the finding's line; a tensor
  grown by ``torch.cat`` every iteration (XLA009): steady-state recompiles from a changed input shape on
  the steps the line ran.
"""

from __future__ import annotations

from xlalint.rules.step_varying_int import is_growth_message

from xlalint.verify.missing_barrier import judge_missing_barrier
from xlalint.verify.phrasing import period, plural
from xlalint.verify.results import CONFIRMED, NOT_CONFIRMED, NOT_REACHED, FindingVerdict
from xlalint.verify.step_table import LineStats, Run, most, norm_path

TRANSFER_RULES = {"XLA001", "XLA002", "XLA006", "XLA008", "XLA011"}
FALLBACK_RULES = {"XLA003", "XLA007"}


def judge(finding, run: Run, recompiles: list) -> FindingVerdict:
    if finding.code == "XLA010":
        return judge_missing_barrier(finding, run)
    # A finding answers for the events at its lines and for those further down the stack it is the caller of.
    st = run.stats(finding.path, finding.line, getattr(finding, "end_line", finding.line), via=True)
    code = finding.code
    ran_steps = sorted(s for s, n in st.runs.items() if n > 0 and s < run.n_steps)
    total_runs = sum(st.runs.values())
    if total_runs == 0:
        return FindingVerdict(finding, NOT_REACHED, "this line never ran in this run", {"runs": 0})
    n = run.n_steps
    numbers = {
        "runs": total_runs,
        "steps_ran": len(ran_steps),
        "steps": n,
        "transfers": st.total("transfers"),
        "graph_cuts": st.total("uncached") + st.total("cached"),
        "uncached_compiles": st.total("uncached"),
        "scalar_reads": st.total("scalar_reads"),
        "fallbacks": st.fallback_ops(),
    }
    where_ran = f"ran {plural(total_runs, 'time')}" + (
        f" on {len(ran_steps)} of {n} steps" if n else " (no step barrier was reached)"
    )
    if code == "XLA005":
        return _judge_steady_recompiles(finding, run, recompiles, numbers, where_ran)
    if code == "XLA004":
        return _judge_eval_switch(finding, run, st, ran_steps, numbers, where_ran)
    if code in FALLBACK_RULES:
        v = _judge_fallback(finding, run, st, ran_steps, recompiles, numbers)
        if v is not None:
            return v
    v = _judge_transfer(finding, run, st, ran_steps, numbers)
    if v is not None:
        return v
    if code not in TRANSFER_RULES:
        v = _judge_recompile_at_line(finding, run, st, recompiles, numbers)
        if v is not None:
            return v
    if is_growth_message(code, finding.message):
        v = _judge_growth(finding, run, st, recompiles, numbers)
        if v is not None:
            return v
    return FindingVerdict(finding, NOT_CONFIRMED, _not_confirmed(st, run, where_ran), numbers)


def _judge_recompile_at_line(finding, run, st, recompiles, numbers):
    # Any other rule (e.g. a step-varying Python int used as a slice bound): a steady-state recompile
    # whose root cause is this line.
    steady_uc = _steady_uc_at(finding, run, st, recompiles)
    if not steady_uc:
        return None
    causes = [
        c["description"]
        for rc in recompiles
        for c in rc.root_causes
        if c["path"] == st.path and st.line <= c["line"] <= st.end_line
    ]
    numbers["steady_recompile_steps"] = steady_uc
    ev = f"UncachedCompile rose on {len(steady_uc)} of {len(run.steady)} steps after warm-up"
    if causes:
        ev += "; root cause at this line: " + causes[0]
    return FindingVerdict(finding, CONFIRMED, ev, numbers)


def _not_confirmed(st: LineStats, run: Run, where_ran: str) -> str:
    moved = []
    t = [s for s, v in st.transfers.items() if v]
    if t:
        moved.append(f"host transfers on {len(t)} of the {len(_buckets(st, run))} steps it ran")
    f = [s for s, v in st.fallbacks.items() if v]
    if f:
        moved.append(f"CPU fallbacks on {len(f)} steps")
    if moved:
        return f"the line {where_ran}; only " + ", ".join(moved) + " (not on most of them)"
    return f"the line {where_ran} and no counter moved at it"


def _buckets(st: LineStats, run: Run) -> list:
    """Steps where the line ran, plus the tail after the last barrier when it ran there."""
    return sorted(s for s, k in st.runs.items() if k > 0)


def _judge_transfer(finding, run, st, ran_steps, numbers):
    buckets = _buckets(st, run)
    with_transfer = [s for s in buckets if st.transfers.get(s, 0) > 0]
    if not with_transfer or not most(len(with_transfer), len(buckets)):
        return None
    t = sum(st.transfers.get(s, 0) for s in buckets)
    cuts = sum(st.cuts(s) for s in buckets)
    over = _over_steps(with_transfer, run)
    uc = sum(st.uncached.get(s, 0) for s in buckets)
    if run.n_steps == 0 and uc:
        ev = (
            f"{plural(t, 'host transfer')} at this line with no step barrier reached: "
            f"{uc} of its {plural(cuts, 'graph cut')} compiled a new graph (the pending graph keeps growing)"
        )
    elif cuts:
        ev = (
            f"{plural(t, 'host transfer')} and {plural(cuts, 'extra graph execution')} "
            f"{over} at this line"
        )
    else:
        ev = (
            f"{plural(t, 'host transfer')} {over} at this line, without a graph cut "
            "(the value was already computed when it was read)"
        )
    sr = st.total("scalar_reads")
    if sr:
        ev += f"; {plural(sr, 'scalar read')} (_local_scalar_dense)"
    fb = st.fallback_ops()
    if fb:
        ev += "; CPU fallbacks: " + ", ".join(f"{k} x{v}" for k, v in sorted(fb.items()))
    numbers["steps_with_transfer"] = len(with_transfer)
    return FindingVerdict(finding, CONFIRMED, ev, numbers)


def _over_steps(steps: list, run: Run) -> str:
    if run.n_steps == 0:
        return "before any step barrier (none was reached)"
    in_loop = [s for s in steps if s < run.n_steps]
    if len(in_loop) == len(steps):
        if len(steps) < run.n_steps:
            return f"on {len(steps)} of {run.n_steps} steps{period(steps)}"
        return f"over {plural(len(steps), 'step')}"
    if not in_loop:
        return "after the last step"
    return f"over {plural(len(in_loop), 'step')} and after the last step"


def _judge_fallback(finding, run, st, ran_steps, recompiles, numbers):
    buckets = _buckets(st, run)
    with_fb = [s for s in buckets if st.fallbacks.get(s)]
    steady_uc = _steady_uc_at(finding, run, st, recompiles)
    parts = []
    ok = False
    if with_fb and most(len(with_fb), len(buckets)):
        ok = True
        ops = st.fallback_ops()
        parts.append(
            ", ".join(f"{k} fell back to the CPU {plural(v, 'time')}" for k, v in sorted(ops.items()))
            + f" {_over_steps(with_fb, run)} at this line"
        )
    if steady_uc:
        ok = True
        parts.append(
            f"UncachedCompile rose on {len(steady_uc)} of {len(run.steady)} steps after warm-up at this line"
        )
    if not ok:
        return None
    t = st.total("transfers")
    if t:
        parts.append(plural(t, "host transfer"))
    numbers["steady_recompile_steps"] = steady_uc
    return FindingVerdict(finding, CONFIRMED, "; ".join(parts), numbers)


def _judge_growth(finding, run, st, recompiles, numbers):
    """XLA009 on a ``torch.cat`` that grows a tensor every iteration: confirmed by steady-state recompiles,
    on steps where the line ran, whose root cause is an input whose shape changed (the grown tensor, used
    by the next graph with one more position). The cause names the line that first used the input, not
    the ``cat`` that made it: the evidence is the shape change on the steps the growth ran."""
    ran = {s for s, n in st.runs.items() if n > 0}
    steady = set(run.steady)
    grown = [(rc, c) for rc in recompiles if rc.kind == "recompile" and ran & steady & set(rc.steps)
             for c in rc.root_causes if c["kind"] == "input-shape"]
    if not grown:
        return None
    steps = sorted({s for rc, _ in grown for s in rc.steps} & ran & steady)
    numbers["steady_recompile_steps"] = steps
    ev = (f"UncachedCompile rose on {plural(len(steps), 'step')} after warm-up where this line ran, from an input "
          f"whose shape changed: {grown[0][1]['description']}")
    return FindingVerdict(finding, CONFIRMED, ev, numbers)


def _steady_uc_at(finding, run, st, recompiles) -> list:
    steps = {s for s in run.steady if st.uncached.get(s, 0) > 0}
    path = norm_path(finding.path)
    end = max(finding.line, getattr(finding, "end_line", finding.line))
    for rc in recompiles:
        if any(c["path"] == path and finding.line <= c["line"] <= end for c in rc.root_causes):
            steps.update(rc.steps)
    return sorted(steps)


def _judge_steady_recompiles(finding, run, recompiles, numbers, where_ran):
    steady = run.steady
    if not steady:
        return FindingVerdict(
            finding,
            NOT_CONFIRMED,
            f"the line {where_ran}, but the run stopped within the warm-up (steps 0-{run.steady_from - 1}): "
            "no steady state to measure (raise --max-steps)",
            numbers,
        )
    rising = [s for s in steady if run.step_rows[s].uncached > 0]
    numbers["steady_recompile_steps"] = rising
    causes = [c for rc in recompiles if rc.kind == "recompile" for c in rc.root_causes]
    shapes = [c["description"] for c in causes if c["kind"] == "input-shape"]
    others = [c["description"] for c in causes if c["kind"] != "input-shape"]
    ev = f"UncachedCompile rose on {len(rising)} of {len(steady)} steps after warm-up"
    # Confirmed when a steady-state recompile came from an input whose shape changed (what XLA005 is about;
    # a partial last batch recompiles once per epoch: rare in a short run, but real). Compiles that keep
    # rising for another reason, or for a reason that was not found, do not confirm it.
    if shapes:
        return FindingVerdict(finding, CONFIRMED, ev + "; " + shapes[0], numbers)
    if not most(len(rising), len(steady)):
        return FindingVerdict(finding, NOT_CONFIRMED, f"the line {where_ran}; {ev} (compilation settled)", numbers)
    if others:
        why = "their root cause is elsewhere: " + others[0]
    else:
        notes = sorted({rc.note for rc in recompiles if rc.kind == "recompile"}) or ["no graph dumps were taken"]
        why = "no input whose shape changed was found (tried: " + "; ".join(notes) + ")"
    return FindingVerdict(finding, NOT_CONFIRMED, f"the line {where_ran}; {ev}, but {why}", numbers)


def _judge_eval_switch(finding, run, st, ran_steps, numbers, where_ran):
    if run.n_steps == 0:
        n_eval = sum(
            ev.get("eval_uncached", 0) for per in run.lines.values() for d in per.values() for ev in d["events"].values()
        )
        numbers["eval_compiles"] = n_eval
        if n_eval:
            return FindingVerdict(
                finding, CONFIRMED,
                f"{plural(n_eval, 'graph')} compiled while the model was in eval mode; no step barrier was "
                "reached, so the cost per switch could not be measured", numbers,
            )
        return FindingVerdict(finding, NOT_CONFIRMED, f"the line {where_ran}; no graph compiled in eval mode", numbers)
    if not ran_steps:
        return FindingVerdict(finding, NOT_CONFIRMED, f"the line {where_ran}, never inside a step", numbers)
    in_loop = _eval_compiles_in(run, ran_steps)
    first = ran_steps[0]
    later = [s for s in ran_steps if s > first]
    extra = sum(in_loop.values())
    numbers["eval_compiles"] = extra
    numbers["eval_compile_steps"] = sorted(in_loop)
    if not extra:
        # No eval-mode compile seen: fall back on uncached compiles in the steps that switched after warm-up.
        eligible = [s for s in ran_steps if s >= 1 and (s >= run.steady_from or s == first)]
        compiled = [s for s in eligible if run.step_rows[s].uncached > 0]
        extra = sum(run.step_rows[s].uncached for s in compiled)
        in_loop = {s: run.step_rows[s].uncached for s in compiled}
        numbers["extra_compiles"] = extra
    if not extra:
        return FindingVerdict(
            finding, NOT_CONFIRMED, f"the line {where_ran} and no graph compiled in eval mode in those steps", numbers
        )
    quiet = [s for s in later if s not in in_loop]
    ev = (
        f"{plural(extra, 'extra compile')} for the eval graph in steps where this line ran (step "
        f"{', '.join(map(str, sorted(in_loop)))}); one compile per distinct eval graph, not one per switch: "
        f"{len(quiet)} of the {len(later)} later switches compiled nothing"
    )
    return FindingVerdict(finding, CONFIRMED, ev, numbers)


def _eval_compiles_in(run: Run, ran_steps: list) -> dict:
    """step -> uncached compiles charged while the model was in eval mode (the child follows
    model.train/eval), in the steps where the finding's line ran."""
    eval_uc: dict = {}
    for per in run.lines.values():
        for d in per.values():
            for s, ev in d["events"].items():
                if ev.get("eval_uncached") and s < run.n_steps:
                    eval_uc[s] = eval_uc.get(s, 0) + ev["eval_uncached"]
    return {s: n for s, n in eval_uc.items() if s in set(ran_steps)}
