"""``xlalint --verify``: run a training program on an XLA device and prove or refute each static finding.

API (the CLI and the tests use only these):

- ``collect(target, program_args=(), *, max_steps=20, timeout=300.0, findings_provider=None, warmup=2)``
  -> ``VerifyReport``: runs the program in a child process and judges every finding.
- ``render_text(report) -> str`` / ``render_json(report) -> str``.
- ``run(target, program_args, *, max_steps=20, timeout=300.0, fmt="text", out=sys.stdout,
  findings_provider=None, html=None, fix_impact=False, remember=True, cache_dir=None) -> int``: collect +
  render + the exit code (0 clean, 1 confirmed finding or miss, 2 the program could not be run); what was
  measured in each file is kept for the language server's hover (``remember.py``).
- ``python -m xlalint.verify TARGET [--max-steps N] [--timeout S] [--format text|json] [--fix-impact] [-- ARGS...]``.

``target`` is ``path/to/train.py`` (run as ``__main__``) or ``path/to/file.py::function`` (the file is
imported under another name and the zero-argument function called).
"""

from __future__ import annotations

import os
import sys

from xlalint.verify.report import render_json, render_text
from xlalint.verify.results import (
    CONFIRMED,
    NOT_CONFIRMED,
    NOT_REACHED,
    FindingVerdict,
    Miss,
    Recompile,
    VerifyReport,
)
from xlalint.verify.step_table import DEFAULT_WARMUP, StepRow

__all__ = [
    "CONFIRMED",
    "NOT_CONFIRMED",
    "NOT_REACHED",
    "FindingVerdict",
    "Miss",
    "Recompile",
    "StepRow",
    "VerifyReport",
    "collect",
    "render_json",
    "render_text",
    "run",
]


def _default_findings_provider(paths: list) -> list:
    from xlalint.run.project import lint_paths

    return list(lint_paths(paths))


def collect(
    target: str,
    program_args=(),
    *,
    max_steps: int = 20,
    timeout: float = 300.0,
    findings_provider=None,
    warmup: int = DEFAULT_WARMUP,
    trace: bool | str = True,
    graph_dumps: str | bool = "auto",
    fix_impact: bool = False,
    sources: dict | None = None,
) -> VerifyReport:
    """Run ``target`` under torch_xla in a child process and build the report. Never raises for the
    user's program: its crash, hang or exit is part of the report.

    ``graph_dumps``: the IR graph dumps that find a recompile's root cause make every step 2-3x slower
    (torch_xla writes the whole graph as text at every cut), so by default ("auto") the program runs once
    without them, and a second time with them only when the first run saw steady-state recompiles; that
    run's root causes are merged into the report. ``True``/``False`` force one run with/without them.

    ``fix_impact``: then run the program again with each available fix applied (``fix_impact.py``) and
    report the median ms per step before and after. ``sources``: {path: text} run instead of those files.
    """
    from xlalint.verify.runner import Interrupts

    with Interrupts.catch():
        report = _collect(target, program_args, max_steps=max_steps, timeout=timeout, findings_provider=findings_provider,
                          warmup=warmup, trace=trace, graph_dumps=graph_dumps, sources=sources)
        if fix_impact and report.status == "ok" and not Interrupts.signum:
            from xlalint.verify.fix_impact import measure_fix_impact

            report.fix_impact = measure_fix_impact(report, lambda src: _collect(
                target, program_args, max_steps=max_steps, timeout=timeout, findings_provider=lambda paths: [],
                warmup=warmup, trace=trace, graph_dumps=False, sources=src))
        return report


def _collect(target, program_args, *, max_steps, timeout, findings_provider, warmup, trace, graph_dumps, sources=None):
    import signal

    from xlalint.verify.costs import attach_costs
    from xlalint.verify.costs import measure as measure_costs
    from xlalint.verify.judges import judge
    from xlalint.verify.misses import find_misses
    from xlalint.verify.missing_barrier import no_barrier_info
    from xlalint.verify.recompiles import find_recompiles
    from xlalint.verify.runner import Interrupts, run_child, split_target
    from xlalint.verify.step_table import Run, timing

    target_file, function = split_target(target)
    if target_file.lower().endswith(".ipynb") and os.path.isfile(target_file):  # hook: xlalint/sources/notebook.py
        from dataclasses import replace

        from xlalint.sources.notebook import NotebookError, write_script
        from xlalint.verify.by_cell import by_cell, script_findings

        try:  # its code cells as one script (magics as `pass`), verified like any script, reported by cell
            script, table = write_script(target_file)
        except (NotebookError, OSError) as e:
            return _error_report(target, max_steps, warmup, f"{target_file}: {e}")
        report = collect(script + (f"::{function}" if function else ""), program_args, max_steps=max_steps,
                         timeout=timeout, warmup=warmup, trace=trace, graph_dumps=graph_dumps,
                         findings_provider=script_findings(target_file, script, table,
                                                           findings_provider or _default_findings_provider))
        return replace(by_cell(report, target_file, script, table), target=target)
    notes: list = []
    if not os.path.isfile(target_file):
        return _error_report(target, max_steps, warmup, f"no such file: {target_file}")
    raw = run_child(
        target,
        list(program_args),
        max_steps=max_steps,
        timeout=timeout,
        # IR debug locations name the innermost Python frame that created a node: under the event
        # attribution's TorchFunctionMode that would be xlalint's own frame, so a run with graph dumps
        # attributes with the line tracer (its timings are never the ones reported).
        trace=("lines" if trace else False) if graph_dumps is True else trace,
        graph_dumps=graph_dumps is True,
        sources=sources,
    )
    output = _tail(raw.stdout + raw.stderr)
    res = raw.result
    if res is None and raw.interrupted:
        return _error_report(
            target, max_steps, warmup,
            f"interrupted by {raw.interrupted} before the program reported anything; it was stopped",
            output=output, elapsed=raw.elapsed, exit_code=128 + int(signal.Signals[raw.interrupted]),
            stop_reason="interrupted",
        )
    if res is None:
        why = (
            f"the program hung past --timeout {timeout:g}s and did not stop when asked; it was killed"
            if raw.killed
            else f"the program's process ended (exit status {raw.returncode}) without a result: "
            "a crash of the interpreter or of torch_xla"
        )
        return _error_report(target, max_steps, warmup, why, output=output, elapsed=raw.elapsed)
    status = res.get("status", "error")
    if status == "setup_error":
        return _error_report(
            target, max_steps, warmup, "torch_xla could not be started", res.get("traceback"), output, raw.elapsed
        )
    if status == "error" and res.get("error_kind") == "no_function":
        return _error_report(target, max_steps, warmup, res.get("traceback"), None, output, raw.elapsed)

    run_ = Run(res, raw.graphs, warmup=warmup)
    findings: list = []
    if run_.user_files:
        provider = findings_provider or _default_findings_provider
        try:
            findings = list(provider(sorted(run_.user_files)))
        except ImportError as exc:
            notes.append(f"static findings unavailable ({exc}): every event is reported as a miss")
    user = set(run_.user_files)
    findings = [f for f in findings if os.path.realpath(f.path) in user]
    findings.sort(key=lambda f: (os.path.realpath(f.path), f.line, getattr(f, "column", 0), f.code))
    recompiles = find_recompiles(run_) if run_.n_steps else []
    if graph_dumps == "auto" and any(rc.kind == "recompile" for rc in recompiles) and not (
        Interrupts.signum or status in ("timeout", "interrupted")
    ):
        last = max(s for rc in recompiles for s in rc.steps)
        raw2 = run_child(
            target, list(program_args), max_steps=min(max_steps, last + 1), timeout=timeout,
            trace="lines" if trace else False, graph_dumps=True, sources=sources,
        )
        if raw2.result is not None and raw2.result.get("steps"):
            run2 = Run(raw2.result, raw2.graphs, warmup=warmup)
            recompiles = find_recompiles(run2)
            notes.append(
                "steady-state recompiles seen: the root causes come from a second run with IR graph dumps "
                f"(XLA_IR_DEBUG=1, XLA_SAVE_TENSORS_FILE), {len(run2.step_rows)} steps; the timings from the first"
            )
        else:
            notes.append("the second run with IR graph dumps failed: the recompiles' root causes are unknown")
    verdicts = [judge(f, run_, recompiles) for f in findings]
    misses, quiet = find_misses(run_, findings, recompiles) if run_.n_steps else ([], [])
    costs = attach_costs(measure_costs(run_, findings, misses, recompiles), verdicts, misses, recompiles)

    where = res.get("where") or []
    inside = res.get("stopped_inside")
    if status == "interrupted" or raw.interrupted or Interrupts.signum:
        sig = raw.interrupted or Interrupts.name() or "a signal"
        status = "interrupted"
        notes.append(
            f"interrupted by {sig} after {run_.n_steps} step{'s' if run_.n_steps != 1 else ''}: the program was "
            "stopped and every process it started was ended; the verdicts below are on what was measured until then"
        )
    nb = no_barrier_info(run_) if status == "no_barrier" else None
    if nb and not any(v.finding.code == "XLA010" and v.status == CONFIRMED for v in verdicts):
        loop = nb.get("loop") or {"path": nb["step_line"][0], "line": nb["step_line"][1]}
        misses.append(Miss(
            loop["path"], loop["line"], "missing step barrier", nb["message"] + "; fix: " + nb["fix"],
            0, 0, {"iterations": nb["iterations"]},
        ))
    error = tb = None
    if status == "error":
        error, tb = "the program raised an exception", res.get("traceback")
    elif status == "timeout" and run_.n_steps == 0:
        error = f"timed out after {timeout:g}s before the first step barrier"
        tb = res.get("timeout_stack") or None
    elif run_.n_steps == 0 and status not in ("interrupted", "no_barrier"):
        error = (
            "the program finished without reaching a step barrier (torch_xla.sync(), xm.mark_step(), "
            "xm.optimizer_step(barrier=True) or an MpDeviceLoader iteration): nothing per step to verify"
        )
        tail, start = res.get("tail") or {}, res.get("start") or {}
        if tail:
            uc = (tail.get("uncached") or 0) - (start.get("uncached") or 0)
            d2h = (tail.get("d2h") or 0) - (start.get("d2h") or 0)
            error += f"; in all, {uc} graph{'s' if uc != 1 else ''} compiled and {d2h} host transfer{'s' if d2h != 1 else ''}"
    if status == "timeout" and run_.n_steps:
        notes.append(
            f"stopped at --timeout {timeout:g}s after {run_.n_steps} steps (raise --timeout for more steps)"
        )
    if status in ("exit", "os_exit") and res.get("program_exit_code"):
        notes.append(f"the program exited with status {res.get('program_exit_code')}")
    if res.get("partial"):
        notes.append(
            "the program did not return to Python within the grace period (it was inside torch_xla) and was "
            "killed: this report is what the run had measured when it was asked to stop"
        )
    if run_.n_steps and run_.n_steps <= warmup:
        notes.append(
            f"only {run_.n_steps} steps ran, all within the {warmup} warm-up steps: steady-state recompiles "
            "could not be measured"
        )
    if status == "interrupted":
        exit_code = 128 + int(signal.Signals[raw.interrupted or Interrupts.name() or "SIGINT"])
    else:
        exit_code = 2 if error else (1 if any(v.status == CONFIRMED for v in verdicts) or misses else 0)
    return VerifyReport(
        target=target,
        status="error" if error else (
            status if status in ("timeout", "interrupted") else ("no-barrier" if nb else "ok")
        ),
        exit_code=exit_code,
        stop_reason=status,
        steps=run_.step_rows,
        warmup=warmup,
        max_steps=max_steps,
        findings=verdicts,
        misses=misses,
        recompiles=recompiles,
        transfers_without_cut=quiet,
        user_files=sorted(run_.user_files),
        timing=timing(run_),
        notes=notes,
        error=error,
        traceback=tb,
        program_output=output,
        elapsed=round(raw.elapsed, 2),
        where=where,
        stopped_inside=inside,
        interrupted=raw.interrupted or Interrupts.name(),
        timeout=timeout,
        no_barrier=nb,
        costs=costs,
    )


def _tail(text: str, n: int = 40) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def _error_report(target, max_steps, warmup, error, tb=None, output="", elapsed=0.0, exit_code=2,
                  stop_reason="error") -> VerifyReport:
    return VerifyReport(
        target=target,
        status="error",
        exit_code=exit_code,
        stop_reason=stop_reason,
        steps=[],
        warmup=warmup,
        max_steps=max_steps,
        findings=[],
        misses=[],
        recompiles=[],
        transfers_without_cut=[],
        user_files=[],
        timing={},
        notes=[],
        error=error,
        traceback=tb,
        program_output=output,
        elapsed=round(elapsed, 2),
    )


def run(
    target: str,
    program_args: list,
    *,
    max_steps: int = 20,
    timeout: float = 300.0,
    fmt: str = "text",
    out=None,
    findings_provider=None,
    html: str | None = None,
    fix_impact: bool = False,
    remember: bool = True,
    cache_dir: str | None = None,
) -> int:
    """Verify ``target``, write the report to ``out`` (stdout by default) and return the exit code.
    ``html``: also write the report as one self-contained page to this path. ``remember``: keep what was
    measured in each file for the language server's hover (``remember.py``), in ``cache_dir`` when given,
    else in the project's ``.xlalint_cache``."""
    import time

    out = out or sys.stdout
    started = time.time()
    report = collect(
        target, program_args, max_steps=max_steps, timeout=timeout, findings_provider=findings_provider,
        fix_impact=fix_impact,
    )
    if remember:
        from xlalint.verify.remember import remember as keep

        report.notes.extend(keep(report, started, cache_dir))
    if html:
        from xlalint.verify.html import write_html

        try:
            write_html(report, html)
        except OSError as exc:
            report.notes.append(f"could not write the HTML report {html}: {exc.strerror or exc}")
    try:
        out.write(render_json(report) if fmt == "json" else render_text(report))
        out.flush()
    except (OSError, ValueError):  # SIGHUP: the terminal is gone; the program was still stopped
        pass
    return report.exit_code


def main(argv: list | None = None) -> int:
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    program_args: list = []
    if "--" in argv:
        i = argv.index("--")
        argv, program_args = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(
        prog="python -m xlalint.verify",
        description="Run a PyTorch/XLA program on an XLA device and confirm or refute each xlalint finding.",
    )
    p.add_argument("target", help="train.py, or file.py::function to call one zero-argument function")
    p.add_argument("--max-steps", type=int, default=20, help="stop after this many step barriers (default 20)")
    p.add_argument("--timeout", type=float, default=300.0, help="stop the program after S seconds (default 300)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--html", metavar="FILE", help="also write the report as one self-contained HTML page")
    p.add_argument("--fix-impact", action="store_true",
                   help="also run the program with each available fix applied (in memory) and report the median ms per step before and after")
    p.add_argument("--no-cache", action="store_true",
                   help="do not keep what was measured for the language server's hover (.xlalint_cache/verify)")
    p.add_argument("--cache-dir", metavar="DIR", help="keep it under DIR instead of the project's .xlalint_cache")
    args = p.parse_args(argv)
    return run(args.target, program_args, max_steps=args.max_steps, timeout=args.timeout, fmt=args.format,
               html=args.html, fix_impact=args.fix_impact, remember=not args.no_cache, cache_dir=args.cache_dir)
