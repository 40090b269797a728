"""``xlalint --verify``: real runs of small programs on the torch_xla CPU device (tests/verify_programs/).

Each child run costs a few seconds (compiles, and importing torch + torch_xla unless it is forked from one
start-up: tests/verify_zygote.py), so every program runs once, with few steps, and the tests share the report.
Under CI=true a missing torch_xla fails these tests instead of skipping them.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from tests import verify_zygote
from tests.conftest import HAVE_XLA
from tests.test_verify_fixtures import assert_costs_consistent

from xlalint.findings import Finding
from xlalint.verify import CONFIRMED, NOT_CONFIRMED, NOT_REACHED, collect, render_json, render_text
from xlalint.verify import graphs, report as report_mod
from xlalint.verify.costs import fmt_ms
from xlalint.verify.judges import judge
from xlalint.verify.misses import find_misses
from xlalint.verify.recompiles import find_recompiles
from xlalint.verify.runner import split_target
from xlalint.verify.step_table import Run, most

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "verify_programs")
ROOT = os.path.dirname(HERE)
#: The child process's own code: never in the user's traceback or frames.
CHILD_CODE = os.path.join("xlalint", "verify", "child")


def prog(name: str) -> str:
    return os.path.join(PROGRAMS, name)


def finding(path: str, line: int, code: str, name: str = "rule") -> Finding:
    return Finding(path=path, line=line, column=5, code=code, end_line=line, end_column=40, name=name, message=code)


def provider(*specs):
    """A findings provider returning hand-made findings: (file base name, line, code)."""
    seen = []

    def lint_paths(paths):
        seen.append(sorted(paths))
        return [finding(p, line, code) for p in paths for base, line, code in specs if os.path.basename(p) == base]

    lint_paths.seen = seen
    return lint_paths


ITEM_SPECS = (
    ("item_per_step.py", 14, "XLA001"),  # total += loss.item(): a host read mid-step
    ("item_per_step.py", 15, "XLA001"),  # opt.zero_grad(): a (wrong) finding that no counter confirms
    ("item_per_step.py", 19, "XLA006"),  # after the loop: never reached with --max-steps
)

#: test name -> (target, program args, hand-made findings, max_steps, timeout). The module fixture starts the
#: runs of the selected tests two at a time (each child is mostly single-threaded import + compile time).
JOBS = {
    "test_item_per_step_is_confirmed_with_numbers": (prog("item_per_step.py"), (), ITEM_SPECS, 5, 120.0),
    "test_program_that_raises_exits_2_with_its_traceback": (prog("raises.py"), (), (), 5, 120.0),
    "test_program_that_never_reaches_a_step": (prog("no_step.py"), (), (), 5, 120.0),
    "test_program_that_hangs_is_stopped_at_the_timeout": (prog("hangs.py"), (), (), 5, 12.0),
    "test_timeout_in_the_middle_of_a_compile_is_a_timeout": (prog("compile_forever.py"), (), (), 5, 40.0),
    "test_program_arguments_after_double_dash": (
        prog("with_args.py"), ("--steps", "4", "--read-loss"), (("with_args.py", 17, "XLA001"),), 5, 120.0),
    "test_function_target": (
        prog("functions.py") + "::train_step_reads", (), (("functions.py", 12, "XLA002"),), 5, 120.0),
    "test_attribution_lands_in_the_imported_helper_module": (
        prog("uses_helper.py"), (), (("helper_mod.py", 5, "XLA001"),), 5, 120.0),
    "test_cpu_fallback_nobody_flags_is_a_miss": (prog("miss_histc.py"), (), (), 5, 120.0),
    "test_steady_state_recompile_is_a_miss_with_its_root_cause_line": (prog("recompile_slice.py"), (), (), 5, 120.0),
    "test_finding_at_the_root_cause_line_is_confirmed": (
        prog("recompile_slice.py"), (), (("recompile_slice.py", 10, "XLA009"),), 5, 120.0),
    "test_missing_step_barrier_is_found_early_and_named": (
        prog("char_gpt.py"), ("--device=xla",), (("char_gpt.py", 97, "XLA010"), ("char_gpt.py", 108, "XLA001")),
        8, 300.0),
    "test_with_the_barrier_the_same_script_runs_steps": (
        prog("char_gpt.py"), ("--device=xla", "--barrier", "--max-iters", "6"), (("char_gpt.py", 97, "XLA010"),),
        8, 300.0),
    "test_project_events_are_placed_once_with_their_callers_and_periodic_costs_count": (
        prog("project/train.py"), (), (), 12, 300.0),
    "test_project_findings_at_the_callers_lines_explain_the_helpers_events": (
        prog("project/train.py"), (),
        (("train.py", 22, "XLA001"), ("train.py", 25, "XLA001"), ("losses.py", 6, "XLA003")), 12, 300.0),
}


def _run_job(job):
    target, args, specs, max_steps, timeout = job
    prov = provider(*specs)
    rep = collect(target, list(args), max_steps=max_steps, timeout=timeout, findings_provider=prov)
    return rep, prov


class _EachProgramOnce:
    """``runner.run_child`` for this module's runs: two tests that run the same program with the same
    arguments (recompile_slice.py, project/train.py: only the static findings they judge differ, and
    those are read after the run) start its child once; each later call gets a copy of the first one's
    raw run, which collect() then analyses with its own findings."""

    def __init__(self, run_child):
        self.run_child = run_child
        self.lock = threading.Lock()
        self.runs: dict = {}  # key -> Future of the raw run
        self.started = []  # the keys of the children really started

    def __call__(self, *args, **kwargs):
        key = repr((args, sorted(kwargs.items())))
        with self.lock:
            first = key not in self.runs
            if first:
                self.runs[key] = Future()
                self.started.append(key)
        if first:
            try:
                self.runs[key].set_result(self.run_child(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - every caller sees it
                self.runs[key].set_exception(e)
        return copy.deepcopy(self.runs[key].result())


@pytest.fixture(scope="module")
def runs(request):
    if not HAVE_XLA:
        yield {}
        return
    from xlalint.verify import runner

    selected = {item.name for item in request.session.items}
    # forked from one torch_xla start-up (tests/verify_zygote.py), but the compile that must outlast the
    # timeout and its grace period: that child is started as xlalint starts it
    with verify_zygote.forked_children(started=[prog("compile_forever.py")]), pytest.MonkeyPatch.context() as mp:
        once = _EachProgramOnce(runner.run_child)
        mp.setattr(runner, "run_child", once)
        pool = ThreadPoolExecutor(max_workers=2)
        futures = {name: pool.submit(_run_job, job) for name, job in JOBS.items() if name in selected}
        futures["_once"] = once
        yield futures
        pool.shutdown(wait=True)


def test_a_program_that_two_tests_judge_runs_once(xla, runs):
    """Both recompile_slice.py tests got their report from one run of the program (and its second run with
    graph dumps): the findings each judged differ, the child runs do not."""
    needed = {"test_steady_state_recompile_is_a_miss_with_its_root_cause_line", "test_finding_at_the_root_cause_line_is_confirmed"}
    if not needed <= set(runs):
        pytest.skip("the recompile_slice.py tests are not selected")
    for name in needed:
        runs[name].result()
    started = [k for k in runs["_once"].started if "recompile_slice.py" in k]
    assert len(started) == 2 and sum("'graph_dumps', True" in k for k in started) == 1, started


@pytest.fixture
def result(request, xla, runs):
    """The (report, provider) of this test's run."""
    return runs[request.node.name].result()


def verdict(rep, line: int, path_end: str = ""):
    [v] = [v for v in rep.findings if v.finding.line == line and v.finding.path.endswith(path_end)]
    return v


# ---------------------------------------------------------------------------------------------------------
# Real runs
# ---------------------------------------------------------------------------------------------------------
def test_item_per_step_is_confirmed_with_numbers(result):
    rep, _ = result
    assert rep.exit_code == 1
    assert rep.stop_reason == "max_steps" and len(rep.steps) == 5
    v = verdict(rep, 14)
    assert v.status == CONFIRMED
    assert v.numbers["transfers"] == 5 and v.numbers["graph_cuts"] == 5 and v.numbers["scalar_reads"] == 5
    assert "5 host transfers and 5 extra graph executions over 5 steps at this line" in v.evidence
    nc = verdict(rep, 15)
    assert nc.status == NOT_CONFIRMED and "ran 5 times" in nc.evidence and "no counter moved" in nc.evidence
    assert verdict(rep, 19).status == NOT_REACHED
    assert rep.misses == []  # the host read is a finding, not a miss
    # Per step: the read splits the graph in two (2 graph executions) and transfers once, every step.
    assert [r.transfers for r in rep.steps] == [1] * 5
    assert all(r.graphs == 2 for r in rep.steps)
    text = render_text(rep)
    assert "item_per_step.py:14:5: XLA001 rule: CONFIRMED: 5 host transfers" in text
    assert "NOT REACHED" in text and "exit 1" in text
    data = json.loads(render_json(rep))
    assert data["exit_code"] == 1
    assert {f["verdict"] for f in data["findings"]} == {CONFIRMED, NOT_CONFIRMED, NOT_REACHED}
    assert data["steps"][0]["index"] == 0 and "wall_ms" in data["steps"][0]
    # where the time goes: the one read is the one row, its cost is what it made the main thread wait
    assert_costs_consistent(rep)
    [row] = rep.costs["rows"]
    assert (row["kind"], row["code"], row["places"][0]["line"]) == ("finding", "XLA001", 14)
    assert row["transfers_per_step"] == 1 and row["graph_cuts_per_step"] == 1 and row["compiles_per_step"] == 0
    assert v.numbers["cost"]["rank"] == 1 and v.numbers["cost"]["ms_per_step"] == row["ms_per_step"] > 0
    assert re.search(r"costs [\d.,]+ ms per step \(\S+% of the step time\): 1 transfer \+ 1 extra graph execution: ", row["text"])
    assert "cost" not in nc.numbers  # no counter moved at it: it costs nothing
    assert text.index("Where the time goes") < text.index("Findings:")
    assert re.search(r"^  1\. \S*item_per_step\.py:14 XLA001 rule: costs ", text, re.M), text
    assert data["costs"]["rows"][0]["ms_per_step"] == row["ms_per_step"]
    assert data["findings"][[f["line"] for f in data["findings"]].index(14)]["numbers"]["cost"]["rank"] == 1


def test_clean_twin_exits_0_and_compiles_settle_via_the_module_cli(xla):
    """The clean twin through ``python -m xlalint.verify`` (the default provider: the real engine)."""
    proc = subprocess.run(
        [sys.executable, "-m", "xlalint.verify", prog("clean.py"), "--max-steps", "5", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["misses"] == [] and data["exit_code"] == 0
    assert [f["verdict"] for f in data["findings"] if f["verdict"] == CONFIRMED] == []
    steady = [s for s in data["steps"] if not s["warmup"]]
    assert steady and all(s["uncached"] == 0 and s["transfers"] == 0 for s in steady)
    assert data["timing"]["steady_median_ms"] is not None


def test_program_that_raises_exits_2_with_its_traceback(result):
    rep, _ = result
    assert rep.exit_code == 2 and rep.stop_reason == "error"
    assert "ValueError: boom at step 2" in rep.traceback
    assert 'raises.py", line 11' in rep.traceback
    assert CHILD_CODE not in rep.traceback and "runpy" not in rep.traceback
    text = render_text(rep)
    assert "the program raised an exception" in text and "boom at step 2" in text
    assert len(rep.steps) == 3  # what ran before the crash is still shown
    # The header says what happened and where, in the user's frames
    head = text.splitlines()[0]
    assert "3 steps (the program raised an exception at " in head and "raises.py:11 in <module>" in head


def test_program_that_never_reaches_a_step(result):
    rep, _ = result
    assert rep.exit_code == 2
    assert "without reaching a step barrier" in rep.error
    assert rep.steps == []


def test_program_that_hangs_is_stopped_at_the_timeout(result):
    rep, _ = result
    assert rep.exit_code == 2
    assert "timed out after 12s" in rep.error
    # Where it hung, when torch_xla had started by then (on a very slow machine the import itself may be cut).
    assert "hangs.py" in (rep.traceback or "") or "starting torch_xla" in (rep.traceback or "")
    assert rep.elapsed < 12.0 + 10.0
    head = render_text(rep).splitlines()[0]
    assert "(stopped at --timeout 12s" in head and "raised" not in head
    if rep.where:  # torch_xla had started: the loop's line, in the user's frames
        assert "hangs.py:10 in <module>" in head
        assert rep.where[-1]["line"] == 10 and not any(CHILD_CODE in f["path"] for f in rep.where)


def test_timeout_in_the_middle_of_a_compile_is_a_timeout(result):
    """The compile releases the GIL but never returns to Python before the grace period ends: the control
    thread's partial result is the report; the header names the timeout, the line and the compile."""
    rep, _ = result
    assert rep.stop_reason == "timeout" and "timed out after 40s" in rep.error
    head = render_text(rep).splitlines()[0]
    assert "(stopped at --timeout 40s at " in head and "compile_forever.py:11 in <module>" in head, head
    assert "raised" not in head
    assert rep.stopped_inside and rep.stopped_inside.get("compiling"), rep.stopped_inside
    assert "in the middle of an XLA compile (inside `TensorBase.__float__` for " in head


def test_program_arguments_after_double_dash(result):
    rep, _ = result
    assert rep.stop_reason == "finished" and len(rep.steps) == 4  # --steps 4 reached the program
    v = verdict(rep, 17)
    assert v.status == CONFIRMED and v.numbers["transfers"] == 4
    assert rep.exit_code == 1


def test_function_target(result):
    rep, prov = result
    assert rep.stop_reason == "max_steps"  # the __main__ block (a SystemExit) never ran
    v = verdict(rep, 12)
    assert v.status == CONFIRMED and v.numbers["transfers"] == 5
    # A branch that flips changes the graph; the recompile is explained by the XLA002 finding on its `if`.
    assert rep.misses == []
    assert rep.exit_code == 1


def test_attribution_lands_in_the_imported_helper_module(result):
    rep, prov = result
    assert sorted(os.path.basename(p) for p in prov.seen[0]) == ["helper_mod.py", "uses_helper.py"]
    v = verdict(rep, 5, "helper_mod.py")
    assert v.status == CONFIRMED and v.numbers["transfers"] == 5 and v.numbers["graph_cuts"] == 5
    assert rep.misses == []  # nothing charged to the caller's line in uses_helper.py


def test_cpu_fallback_nobody_flags_is_a_miss(result):
    rep, _ = result
    assert rep.exit_code == 1
    [miss] = rep.misses
    assert (os.path.basename(miss.path), miss.line, miss.kind) == ("miss_histc.py", 9, "cpu fallback")
    assert miss.counters["fallbacks"] == {"aten::histc": 5}
    assert "aten::histc" in render_text(rep)
    assert all(r.fallbacks == 1 for r in rep.steps)
    assert_costs_consistent(rep)
    [row] = [r for r in rep.costs["rows"] if r["kind"] == "miss"]
    assert row["places"][0]["line"] == 9 and row["fallbacks_per_step"] == 1 and miss.counters["cost"]["rank"] >= 1
    assert "miss (cpu fallback): costs " in render_text(rep)


def test_steady_state_recompile_is_a_miss_with_its_root_cause_line(result):
    rep, _ = result
    assert rep.exit_code == 1
    [rc] = [rc for rc in rep.recompiles if rc.kind == "recompile"]
    assert rc.steps == [2, 3, 4] and rc.cut_line == 13  # the graph is cut at sync() ...
    causes = {(os.path.basename(c["path"]), c["line"]) for c in rc.root_causes}
    assert ("recompile_slice.py", 10) in causes  # ... but the shape changed at the slice
    assert "f32[8, 6] -> f32[8, 7]" in rc.root_causes[0]["description"]
    [miss] = rep.misses
    assert (miss.line, miss.kind) == (10, "steady-state recompile")
    assert [r.uncached for r in rep.steps] == [1, 1, 1, 1, 1]
    # the compiles at the sync() are the cost of the root cause's miss (line 10), not of line 13
    assert_costs_consistent(rep)
    assert rc.compile_ms > 0
    [row] = rep.costs["rows"]
    assert (row["kind"], row["places"][0]["line"], row["compiles_per_step"]) == ("miss", 10, 1)
    assert row["compile_ms_per_step"] * 3 == pytest.approx(rc.compile_ms, abs=0.01)
    assert f"({fmt_ms(rc.compile_ms)} of compile time)" in render_text(rep)


def test_finding_at_the_root_cause_line_is_confirmed(result):
    rep, _ = result
    v = verdict(rep, 10)
    assert v.status == CONFIRMED
    assert "UncachedCompile rose on 3 of 3 steps after warm-up" in v.evidence and "xla::select" in v.evidence
    assert rep.misses == []
    assert_costs_consistent(rep)
    [row] = rep.costs["rows"]
    assert (row["code"], row["compiles_per_step"]) == ("XLA009", 1) and "1 compile x " in row["text"]


def test_project_events_are_placed_once_with_their_callers_and_periodic_costs_count(result):
    """train.py's loop calls helpers in a package beside it: every event lands once, at the innermost line
    of the project, with the callers as a path; a helper that runs every 4 (or 6) steps is a cost."""
    rep, prov = result
    assert sorted(os.path.relpath(p, PROGRAMS) for p in prov.seen[0]) == [
        "project/helpers/losses.py", "project/helpers/metrics.py", "project/train.py"
    ]
    where = [(os.path.relpath(m.path, PROGRAMS), m.line) for m in rep.misses]
    assert sorted(where) == [
        ("project/helpers/losses.py", 6), ("project/helpers/metrics.py", 6), ("project/helpers/metrics.py", 7),
        ("project/helpers/metrics.py", 14),
    ], [m.message for m in rep.misses]
    by = {(os.path.basename(m.path), m.line): m for m in rep.misses}
    fmt = by[("metrics.py", 6)]
    assert "3 host transfers that cut the graph" in fmt.message
    assert "on 3 of 12 steps (every 4 steps) via train.py:22" in fmt.message
    ev = by[("metrics.py", 14)]  # one read per eval batch, 3 batches, every 6 steps
    assert "6 host transfers" in ev.message and "on 2 of 12 steps (every 6 steps) via train.py:25" in ev.message
    mask = by[("losses.py", 6)]
    assert "aten::nonzero" in mask.message and "via train.py:16" in mask.message
    assert "its backward falls back again in train.py:17" in mask.message
    assert "steady-state recompile" in mask.kind
    assert mask.counters["fallbacks"] == {"aten::nonzero": 12}
    assert_costs_consistent(rep)
    periodic = [r for r in rep.costs["rows"] if r["kind"] == "miss" and r["places"][0]["line"] == 6
                and r["places"][0]["path"].endswith("metrics.py")]
    assert len(periodic) == 1 and periodic[0]["steps"] == fmt.counters["steps"] == [3, 7, 11], periodic
    assert re.search(r"per step on average \(\S+% of the step time; every 4 steps: [\d.,]+ ms each time\)", periodic[0]["text"])
    misses_text = render_text(rep).split("Misses", 1)[1].split("\n\n", 1)[0]
    assert misses_text.count("losses.py:6: ") == 1 and "train.py:16:" not in misses_text  # one event, one place


def test_project_findings_at_the_callers_lines_explain_the_helpers_events(result):
    rep, _ = result
    assert rep.misses == [], [m.message for m in rep.misses]
    log = verdict(rep, 22, "train.py")
    assert log.status == CONFIRMED and log.numbers["transfers"] == 6  # 2 reads x 3 log steps, in the helper
    assert_costs_consistent(rep)
    assert log.numbers["cost"]["ms_per_step"] > 0  # the helper's reads are the cost of the flagged call
    assert "on 3 of 12 steps (every 4 steps)" in log.evidence
    assert verdict(rep, 25, "train.py").status == CONFIRMED
    assert verdict(rep, 6, "losses.py").status == CONFIRMED


def test_missing_step_barrier_is_found_early_and_named(result):
    """nanoGPT's mistake: a loop written for GPU, run with --device=xla, never reaches a barrier. The run
    stops after 3 iterations whose pending graph grew, names the loop, and keeps every measurement."""
    rep, _ = result
    assert rep.stop_reason == "no_barrier" and rep.status == "no-barrier" and rep.error is None
    nb = rep.no_barrier
    assert (os.path.basename(nb["loop"]["path"]), nb["loop"]["line"]) == ("char_gpt.py", 97)
    sizes = [r["ir_nodes"] for r in nb["iterations"]]
    assert len(sizes) == 3 and sizes[0] < sizes[1] < sizes[2]
    assert "torch_xla.sync()" in nb["fix"]
    v = verdict(rep, 97)
    assert v.status == CONFIRMED and "without reaching a step barrier" in v.evidence
    assert "optimizer.step() at char_gpt.py:103" in v.evidence
    read = verdict(rep, 108)  # the per-iteration loss read: each compiled a new, larger graph
    assert read.status == CONFIRMED and "with no step barrier reached" in read.evidence
    assert "extra graph execution" not in read.evidence and "after the last step" not in read.evidence
    assert rep.misses == []  # the XLA010 finding explains it
    text = render_text(rep)
    head = text.splitlines()[0]
    assert "0 steps (stopped early: the training loop never reaches a step barrier" in head and "raised" not in head
    assert "Missing step barrier at " in text and "char_gpt.py:97" in text
    assert rep.exit_code == 1


def test_with_the_barrier_the_same_script_runs_steps(result):
    rep, _ = result
    assert rep.no_barrier is None and rep.stop_reason == "finished" and len(rep.steps) == 6
    v = verdict(rep, 97)
    assert v.status == NOT_CONFIRMED and "reached a step barrier on 6 steps" in v.evidence
    assert not [m for m in rep.misses if m.kind == "missing step barrier"]


# ---------------------------------------------------------------------------------------------------------
# Pure logic (no child process)
# ---------------------------------------------------------------------------------------------------------
DUMP = b"""[ScheduleSyncTensorsGraph]
TensorsGraphInfo:
  sync (/venv/site-packages/torch_xla/torch_xla.py:87)
  <module> (/p/train.py:11)

Root Hashes: (aa)

## BEGIN_GRAPH
IR {
  %0 = f32[8,16]{1,0} xla::device_data(), location=<module>@train.py:5, xla_shape=f32[8,16]{1,0}
  %1 = f32[8,5]{1,0} xla::select(%0), location=<module>@train.py:7, xla_shape=f32[8,5]{1,0}, ROOT=0
  %2 = f32[] aten::sum(%1), location=<module>@train.py:8, xla_shape=f32[], ROOT=1
}

Graph Hash: h1

## END_GRAPH

[ScheduleSyncTensorsGraph]
TensorsGraphInfo:
  sync (/venv/site-packages/torch_xla/torch_xla.py:87)
  <module> (/p/train.py:11)

Root Hashes: (bb)

## BEGIN_GRAPH
IR {
  %0 = f32[8,16]{1,0} xla::device_data(), location=<module>@train.py:5, xla_shape=f32[8,16]{1,0}
  %1 = f32[8,6]{1,0} xla::select(%0), location=<module>@train.py:7, xla_shape=f32[8,6]{1,0}, ROOT=0
  %2 = f32[] aten::sum(%1), location=<module>@train.py:8, xla_shape=f32[], ROOT=1
}

Graph Hash: h2

## END_GRAPH
"""


def test_graph_dump_diff_finds_the_node_where_the_shape_change_starts():
    g1, g2 = graphs.parse(DUMP)
    assert g1.hash == "h1" and g1.frames[-1] == ("<module>", "/p/train.py", 11) and g2.offset > 0
    [change] = graphs.diff(g1, g2)  # aten::sum only inherits the change: not reported
    assert (change.kind, change.op, change.file, change.line) == ("node-shape", "xla::select", "train.py", 7)
    assert change.describe() == "xla::select at train.py:7 changed shape: f32[8, 5] -> f32[8, 6]"


def test_graph_diff_reports_input_shape_changes():
    old_input = b"%0 = f32[8,16]{1,0} xla::device_data(), location=<module>@train.py:5, xla_shape=f32[8,16]"
    new_input = b"%0 = f32[8,12]{1,0} xla::device_data(), location=<module>@train.py:5, xla_shape=f32[8,12]"
    g1, g2 = graphs.parse(DUMP.replace(old_input, new_input, 1))
    changes = graphs.diff(g1, g2)
    assert changes[0].kind == "input-shape"
    assert changes[0].describe().startswith("input shape changed: f32[8, 12] -> f32[8, 16]")


def test_split_target_and_sparkline():
    assert split_target("a/b.py::main") == ("a/b.py", "main")
    assert split_target("train.py") == ("train.py", None)
    assert report_mod.sparkline([2, 0, 0, 1]) == "█  ▅"
    assert report_mod.sparkline([0, 0]) == "▁▁"
    assert most(3, 5) and not most(2, 4) and not most(0, 0)


def test_first_body_step_skips_an_mpdeviceloader_setup_step():
    """MpDeviceLoader syncs before the loop body ran once: warm-up counts from the first body step."""
    body = {str(s): 1 for s in range(1, 6)}
    result = {
        "steps": [{"uncached": 1, "cached": 0, "d2h": 0, "aten": {}, "wall": 0.1, "dump_offset": 0}] * 6,
        "lines": {"/p/t.py": {"3": {"hits": {"0": 1}, "events": {}}, "10": {"hits": body, "events": {}},
                              "11": {"hits": body, "events": {}}}},
    }
    run = Run(result, [], warmup=2)
    assert run.first_body_step == 1 and run.steady == [3, 4, 5]


def test_a_recompile_whose_root_cause_was_not_found_is_explained_by_nothing():
    """An XLA005 finding elsewhere does not explain a recompile with no root cause: it is a miss that
    says what was tried, and the XLA005 finding is not confirmed by it."""
    steps = [{"uncached": 1 + s, "cached": 0, "d2h": 0, "aten": {}, "wall": 0.1, "dump_offset": 0} for s in range(6)]
    body = {str(s): 1 for s in range(6)}
    result = {
        "steps": steps,
        "lines": {"/p/t.py": {"3": {"hits": {"0": 1}, "events": {}},
                              "9": {"hits": body, "events": {str(s): {"d2h": 0, "uncached": 1, "cached": 0,
                                                                       "aten": {}, "eval_uncached": 0}
                                                             for s in range(6)}}}},
    }
    run = Run(result, [], warmup=2)
    recompiles = find_recompiles(run)
    assert recompiles and not recompiles[0].root_causes
    xla005 = finding("/p/t.py", 3, "XLA005")
    misses, _ = find_misses(run, [xla005], recompiles)
    assert recompiles[0].explained_by == []
    [miss] = misses
    assert miss.kind == "steady-state recompile" and "root cause not found: graph dumps were off" in miss.message
    v = judge(xla005, run, recompiles)
    assert v.status == NOT_CONFIRMED and "no input whose shape changed was found (tried: " in v.evidence
