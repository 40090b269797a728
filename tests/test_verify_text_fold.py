"""The text report of ``--verify`` groups the steady-state recompiles by root cause (a shape that changes
recompiles the graph before each host read: one group per graph cut, the same root cause each time, shown
as one entry with its steps, its graph cuts and its compile time), shows the first root causes in full and
sums up the others in one line; ``--format json`` keeps every group. No torch_xla needed: the report is
built here."""

from __future__ import annotations

import json
import os

from xlalint.verify.results import Recompile, VerifyReport
from xlalint.verify.report import MAX_RECOMPILE_GROUPS, render_json, render_text

TRAIN = os.path.join("examples", "slow_train.py")


def _group(i: int, cause_line: int, compile_ms: float | None = None) -> Recompile:
    return Recompile(steps=[7 + 2 * (i % 2)], count=1, cut_path=TRAIN, cut_line=89 + i, note="root cause from the IR dumps",
                     root_causes=[{"path": TRAIN, "line": cause_line, "kind": "input-shape",
                                   "description": f"input shape changed (line {cause_line})", "user": True},
                                  {"path": "", "line": 0, "description": "library", "user": False}],
                     explained_by=["XLA005", f"XLA00{1 + i % 3}"], compile_ms=compile_ms)


def _report(groups: list) -> VerifyReport:
    return VerifyReport(target=TRAIN, status="ok", exit_code=1, stop_reason="max_steps", steps=[], warmup=2,
                        max_steps=10, findings=[], misses=[], recompiles=groups, transfers_without_cut=[],
                        user_files=[TRAIN], timing={}, notes=[])


def _entries(text: str) -> list:
    return [line for line in text.splitlines() if line.startswith("  ") and "uncached compile(s) at steps" in line]


def test_groups_with_one_root_cause_are_one_entry_with_their_cuts_steps_and_compile_time():
    text = render_text(_report([_group(i, 84, compile_ms=600.0) for i in range(6)]))
    assert _entries(text) == [
        f"  6 uncached compile(s) at steps 7, 9 (3,600 ms of compile time); graph cuts at {TRAIN}:89, 90, 91, 92, 93, 94"]
    assert text.count(f"root cause {TRAIN}:84: input shape changed (line 84)") == 1
    assert "explained by XLA001, XLA002, XLA003, XLA005" in text
    assert len(json.loads(render_json(_report([_group(i, 84) for i in range(6)])))["recompiles"]) == 6


def test_many_root_causes_are_folded_in_one_line_with_what_they_hold():
    # the costliest root causes first: the fold holds the cheapest
    groups = [_group(i, 60 + i, compile_ms=100.0 * (10 - i)) for i in range(MAX_RECOMPILE_GROUPS + 6)]
    text = render_text(_report(groups))
    entries = _entries(text)
    assert len(entries) == MAX_RECOMPILE_GROUPS + 1  # the full ones, then the fold
    assert [f"({1000 - 100 * i:,} ms of compile time)" in e for i, e in enumerate(entries[:-1])] == [True] * MAX_RECOMPILE_GROUPS
    rest = range(MAX_RECOMPILE_GROUPS, MAX_RECOMPILE_GROUPS + 6)
    assert entries[-1] == (
        f"  … 6 more root causes: 6 uncached compile(s) at steps 7, 9; graph cuts at {TRAIN}:{', '.join(str(89 + i) for i in rest)}; "
        f"root causes at {TRAIN}:{', '.join(str(60 + i) for i in rest)}; explained by XLA001, XLA002, XLA003, XLA005 "
        "(--format json lists every group)")
    assert len(json.loads(render_json(_report(groups)))["recompiles"]) == MAX_RECOMPILE_GROUPS + 6


def test_a_short_list_is_shown_whole():
    text = render_text(_report([_group(i, 60 + i) for i in range(MAX_RECOMPILE_GROUPS)]))
    assert "more root causes" not in text
    assert len(_entries(text)) == MAX_RECOMPILE_GROUPS


def test_root_causes_are_ordered_by_their_compiles_then_their_compile_time():
    # compile times move with the machine's load; the counts do not: the order of the entries is the counts'
    few_slow = [_group(0, 60, compile_ms=9000.0)]
    many_fast = [_group(i, 61, compile_ms=100.0) for i in range(3)]
    entries = _entries(render_text(_report(few_slow + many_fast)))
    assert entries[0].startswith("  3 uncached compile(s)") and entries[1].startswith("  1 uncached compile(s)")
