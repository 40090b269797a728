"""A training loop that never reaches a step barrier (XLA010): what the child measured at each
``optimizer.step()`` (the pending graph growing iteration after iteration), the loop it names, the fix,
and the verdict on an XLA010 finding."""

from __future__ import annotations

import os

from xlalint.verify.phrasing import plural
from xlalint.verify.results import CONFIRMED, NOT_CONFIRMED, NOT_REACHED, FindingVerdict
from xlalint.verify.source_lines import enclosing_loop
from xlalint.verify.step_table import Run, norm_path

FIX_NO_BARRIER = (
    "call torch_xla.sync() (xm.mark_step()) once per iteration, after optimizer.step(), or iterate the "
    "loader through MpDeviceLoader; the fixes of other findings that defer work to a step "
    "(xm.add_step_closure) only work once the loop has a barrier"
)


def no_barrier_info(run: Run) -> dict | None:
    """What the child measured when a training loop never reached a step barrier: the loop's line (around
    the optimizer.step() call, or around one of its callers), the growth per iteration, and the fix."""
    nb = run.result.get("no_barrier")
    if not nb:
        return None
    if "loop" in nb:
        return nb
    frames = [tuple(nb["step_line"])] + [tuple(c) for c in nb.get("callers", [])]
    loop = None
    for p, ln in frames:
        span = enclosing_loop(p, ln)
        if span:
            loop = {"path": p, "line": span[0], "end_line": span[1]}
            break
    its = nb["iterations"]
    nodes = " -> ".join(f"{r['ir_nodes']:,}" for r in its)
    compiles = ", ".join(str(r["uncached"]) for r in its)
    secs = ", ".join(f"{r['compile_s']:g}" for r in its)
    walls = ", ".join(f"{r['wall_s']:g}" for r in its)
    step_at = f"{os.path.basename(nb['step_line'][0])}:{nb['step_line'][1]}"
    where = f"the loop at {os.path.basename(loop['path'])}:{loop['line']}" if loop else "the training loop"
    nb["loop"] = loop
    nb["message"] = (
        f"{where} ran {len(its)} training iterations (optimizer.step() at {step_at}) without reaching a step "
        f"barrier, and the pending graph grew every iteration: {nodes} IR nodes (first parameter's graph); "
        f"uncached compiles per iteration {compiles}, compile time {secs} s, wall time {walls} s; "
        f"stopped after {len(its)} iterations"
    )
    nb["fix"] = FIX_NO_BARRIER
    return nb


def judge_missing_barrier(finding, run: Run) -> FindingVerdict:
    """XLA010: CONFIRMED when the run stopped because the loop holding the finding never reached a
    barrier while its pending graph grew."""
    nb = no_barrier_info(run)
    st = run.stats(finding.path, finding.line, getattr(finding, "end_line", finding.line))
    numbers = {"runs": sum(st.runs.values()), "steps": run.n_steps}
    loop = nb.get("loop") if nb else None
    if loop and norm_path(finding.path) == norm_path(loop["path"]) and loop["line"] <= finding.line <= loop["end_line"]:
        numbers["iterations"] = nb["iterations"]
        return FindingVerdict(finding, CONFIRMED, nb["message"], numbers)
    if run.n_steps:
        return FindingVerdict(
            finding, NOT_CONFIRMED, f"the program reached a step barrier on {plural(run.n_steps, 'step')}", numbers
        )
    if not numbers["runs"]:
        return FindingVerdict(finding, NOT_REACHED, "this line never ran in this run", numbers)
    return FindingVerdict(
        finding, NOT_CONFIRMED,
        "no step barrier was reached, but no growing graph was measured here (xlalint measures it at "
        "optimizer.step())", numbers,
    )
