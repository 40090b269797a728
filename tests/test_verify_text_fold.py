"""The text report of ``--verify`` shows the first steady-state recompile groups in full and sums up the
others in one line (a shape that changes recompiles the graph before each host read: one group per
graph cut, the same root cause each time); ``--format json`` keeps every group. No torch_xla needed:
the report is built here."""

from __future__ import annotations

import json
import os

from xlalint.verify.results import Recompile, VerifyReport
from xlalint.verify.report import MAX_RECOMPILE_GROUPS, render_json, render_text

TRAIN = os.path.join("examples", "slow_train.py")


def _report(n_groups: int) -> VerifyReport:
    groups = [
        Recompile(steps=[7 + 2 * (i % 2)], count=1, cut_path=TRAIN, cut_line=89 + i, note="root cause from the IR dumps",
                  root_causes=[{"path": TRAIN, "line": 84, "description": "input shape changed", "user": True},
                               {"path": "", "line": 0, "description": "library", "user": False}],
                  explained_by=["XLA005", f"XLA00{1 + i % 3}"])
        for i in range(n_groups)
    ]
    return VerifyReport(target=TRAIN, status="ok", exit_code=1, stop_reason="max_steps", steps=[], warmup=2,
                        max_steps=10, findings=[], misses=[], recompiles=groups, transfers_without_cut=[],
                        user_files=[TRAIN], timing={}, notes=[])


def test_long_recompile_lists_are_folded_in_one_line_with_what_they_hold():
    text = render_text(_report(MAX_RECOMPILE_GROUPS + 6))
    groups = [line for line in text.splitlines() if line.startswith("  ") and "uncached compile(s) at steps" in line]
    assert len(groups) == MAX_RECOMPILE_GROUPS + 1  # the full ones, then the fold
    folded = groups[-1]
    assert folded == (
        f"  … 6 more groups: 6 uncached compile(s) at steps 7, 9; graph cuts at {TRAIN}:{89 + MAX_RECOMPILE_GROUPS}, "
        f"{', '.join(str(89 + i) for i in range(MAX_RECOMPILE_GROUPS + 1, MAX_RECOMPILE_GROUPS + 6))}; "
        f"root causes at {TRAIN}:84; explained by XLA001, XLA002, XLA003, XLA005 (--format json lists every group)")
    assert len(json.loads(render_json(_report(MAX_RECOMPILE_GROUPS + 6)))["recompiles"]) == MAX_RECOMPILE_GROUPS + 6


def test_a_short_list_is_shown_whole():
    text = render_text(_report(MAX_RECOMPILE_GROUPS))
    assert "more groups" not in text
    assert sum("uncached compile(s) at steps" in line for line in text.splitlines()) == MAX_RECOMPILE_GROUPS
