"""Where the time goes, on a hand-made run (no torch_xla): who each event's measured time is charged to,
the ranking, the merged rows, periodic costs, the unexplained rest. The timings here are data, not
measurements: the checks are exact."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from xlalint.verify.costs import attach_costs, measure, render_lines
from xlalint.verify.results import FindingVerdict, Miss, Recompile
from xlalint.verify.step_table import Run

N = 6  # steps 0-1 warm-up, 2-5 steady


def _ev(d2h=0, uncached=0, cached=0, aten=None, eval_uncached=0, wall_ms=0.0, compile_ms=0.0, transfer_ms=0.0):
    return {"d2h": d2h, "uncached": uncached, "cached": cached, "aten": aten or {}, "eval_uncached": eval_uncached,
            "wall_ms": wall_ms, "compile_ms": compile_ms, "transfer_ms": transfer_ms}


@pytest.fixture
def case(tmp_path):
    train = os.path.realpath(str(tmp_path / "train.py"))
    every = {str(s): 1 for s in range(N)}
    lines = {
        "10": {"hits": every, "events": {str(s): _ev(d2h=1, cached=1, wall_ms=5.0, transfer_ms=0.1) for s in range(N)}},
        "20": {"hits": every, "events": {str(s): (_ev(uncached=1, wall_ms=61.0, compile_ms=60.0) if s in (3, 5)
                                                  else _ev(cached=1, wall_ms=2.0)) for s in range(N)}},
        "29": {"hits": {"0": 1, "4": 1}, "events": {}},
        "30": {"hits": {"0": 1, "4": 1}, "events": {"4": _ev(d2h=1, uncached=1, eval_uncached=1, wall_ms=42.0, compile_ms=40.0)}},
        # a helper's read, called from line 10: the finding at the caller's line answers for it
        "50": {"hits": every, "events": {str(s): _ev(d2h=1, cached=1, wall_ms=1.0) for s in range(N)},
               "paths": [{"callers": [[train, 10]], "n": N}]},
        "40": {"hits": every, "events": {str(s): _ev(d2h=1, cached=1, aten={"aten::nonzero": 1}, wall_ms=3.0) for s in range(N)}},
    }
    steps, tot = [], {"uncached": 0, "cached": 0, "d2h": 0, "aten": {}}
    for s in range(N):
        steps.append({"uncached": 0, "cached": 0, "d2h": 0, "aten": {}, "wall": 0.1})  # 100 ms a step
    run = Run({"steps": steps, "lines": {train: lines}, "start": tot})
    assert run.steady == [2, 3, 4, 5]

    def finding(line, code):
        return SimpleNamespace(path=train, line=line, end_line=line, code=code, name=code.lower())

    findings = [finding(5, "XLA005"), finding(6, "XLA005"), finding(10, "XLA001"), finding(29, "XLA004"), finding(30, "XLA001")]
    rc = Recompile(steps=[3, 5], count=2, cut_path=train, cut_line=20, note="root cause from the IR diff",
                   root_causes=[{"path": train, "line": 12, "kind": "input-shape", "op": "", "user": True,
                                 "description": "input shape changed"}], cut_stack=[(train, 20)])
    misses = [Miss(train, 40, "cpu fallback", "m", 4, 6)]
    return run, findings, misses, rc


def test_each_event_is_charged_to_what_explains_it_and_the_rest_adds_up(case):
    run, findings, misses, rc = case
    costs = measure(run, findings, misses, [rc])
    rows = [(r["kind"], [p["line"] for p in r["places"]], r["ms_per_step"]) for r in costs["rows"]]
    assert rows == [
        ("finding", [5, 6], 30.0),  # the recompiles at the sync: an input's shape changed -> XLA005 (both, one row)
        ("finding", [29], 10.0),  # the graph compiled in eval mode at step 4 -> XLA004, not the .item() that cut it
        ("finding", [10], 6.0),
        ("miss", [40], 3.0),
        ("finding", [30], 0.5),  # what the eval .item() waited beyond the compile
    ]
    assert costs["step_ms"] == 100.0
    assert costs["no_finding_ms"] == 1.5  # the sync's own waits: (2 + 1 + 2 + 1) / 4
    assert [x["line"] for x in costs["no_finding_lines"]] == [20]
    assert costs["unexplained_ms"] == 49.0
    first = costs["rows"][0]
    assert first["compiles_per_step"] == 0.5 and first["steps"] == [3, 5]
    assert first["text"] == ("costs 30 ms per step on average (30% of the step time; every 2 steps: 60 ms each time): "
                             "1 compile x 60 ms")  # the breakdown per time
    assert costs["rows"][1]["text"] == ("costs 10 ms per step on average (10% of the step time; once after "
                                        "warm-up, at step 4: 40 ms): 1 compile x 40 ms")
    assert costs["rows"][2]["text"] == "costs 6.0 ms per step (6% of the step time): 2 transfers + 2 extra graph executions: 6.0 ms"
    assert costs["rows"][3]["fallbacks_per_step"] == 1


def test_costs_are_attached_to_their_findings_misses_and_recompiles(case, tmp_path):
    run, findings, misses, rc = case
    verdicts = [FindingVerdict(f, "CONFIRMED", "e", {}) for f in findings]
    costs = attach_costs(measure(run, findings, misses, [rc]), verdicts, misses, [rc])
    assert "recompile_compile_ms" not in costs
    assert rc.compile_ms == 120.0
    assert [v.numbers["cost"]["ms_per_step"] for v in verdicts] == [15.0, 15.0, 6.0, 10.0, 0.5]
    assert verdicts[0].numbers["cost"]["shared_evenly_with"] == [5, 6] and verdicts[0].numbers["cost"]["rank"] == 1
    assert misses[0].counters["cost"]["rank"] == 4
    text = "\n".join(render_lines(costs, os.path.basename))
    assert text.splitlines()[0] == "Where the time goes (after warm-up: 4 steps, 100 ms per step on average; ranked by measured cost):"
    assert "  1. train.py:5, 6 XLA005 xla005 (2 findings): costs 30 ms per step" in text
    assert "  4. train.py:40 miss (cpu fallback): costs 3.0 ms per step" in text
    assert "  no finding: lines no rule flags (train.py:20): 1.5 ms per step (2%)" in text
    assert "  unexplained: 49 ms per step (49%)" in text


def test_a_recompile_nobody_explains_is_its_miss_and_no_steady_step_is_no_costs(case):
    run, findings, misses, rc = case
    rc.root_causes = [dict(rc.root_causes[0], kind="node-shape")]  # not an input: XLA005 does not explain it
    miss = Miss(rc.root_causes[0]["path"], 12, "steady-state recompile", "m", 2, 4)
    costs = measure(run, [f for f in findings if f.code != "XLA005"], [miss], [rc])
    assert (costs["rows"][0]["kind"], costs["rows"][0]["places"][0]["line"], costs["rows"][0]["ms_per_step"]) == ("miss", 12, 30.0)
    run.steady_from = N
    assert measure(run, findings, misses, [rc]) == {}
