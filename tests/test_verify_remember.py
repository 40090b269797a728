"""What a ``--verify`` run measured, kept per file for the language server's hover (xlalint/verify/remember.py
writes it, xlalint/run/measured.py keeps and reads it): the round trip, and what the hover says when the
file is the one that ran, when it changed around the line, and when the line itself changed. The reports
here are made by hand (no torch_xla): the figures are data, the checks exact."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from xlalint.findings import Finding
from xlalint.run.measured import entry_path, load, measured_hover
from xlalint.verify.remember import remember
from xlalint.verify.results import CONFIRMED, NOT_CONFIRMED, FindingVerdict, Miss, VerifyReport

TRAIN = (
    "import torch\n"
    "for x in loader:\n"
    "    loss = model(x).sum()\n"
    "    v = loss.item()\n"
    "    print(loss)\n"
)
COST = "costs 10 ms per step (1% of the step time): 1 transfer + 1 extra graph execution: 10 ms"


def _report(path: str, findings=(), misses=(), steps=(1,), target=None) -> VerifyReport:
    return VerifyReport(target=target or path, status="ok", exit_code=1, stop_reason="max_steps", steps=list(steps),
                        warmup=2, max_steps=5, findings=list(findings), misses=list(misses), recompiles=[],
                        transfers_without_cut=[], user_files=[os.path.realpath(path)], timing={}, notes=[])


def _verdict(path, line, code, status=CONFIRMED, evidence="10 host transfers over 10 steps", cost=None):
    f = Finding(path=path, line=line, column=5, code=code, end_line=line, end_column=20, name=code.lower(), message="m")
    return FindingVerdict(f, status, evidence, {"cost": cost} if cost else {})


@pytest.fixture
def train(tmp_path):
    p = tmp_path / "proj" / "train.py"
    p.parent.mkdir()
    (tmp_path / "proj" / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    p.write_text(TRAIN)
    return str(p)


def _kept(train, started=None):
    rep = _report(train, findings=[_verdict(train, 4, "XLA001", cost={"text": COST, "ms_per_step": 10.0}),
                                   _verdict(train, 5, "XLA006", status=NOT_CONFIRMED,
                                            evidence="the line ran 10 times and no counter moved")],
                  misses=[Miss(train, 3, "cpu fallback", "aten::nonzero fell back on 8 of 8 steps", 8, 8,
                               {"cost": {"text": "costs 3.0 ms per step (<1% of the step time)"}})])
    return remember(rep, time.time() if started is None else started)


def test_the_round_trip_keeps_each_line_with_its_verdict_cost_and_text(train):
    assert _kept(train) == []
    where = entry_path(train)
    project = Path(os.path.realpath(os.path.dirname(train)))
    assert where.is_file() and where.parent == project / ".xlalint_cache" / "verify"  # the project's cache dir
    assert (project / ".xlalint_cache" / "CACHEDIR.TAG").is_file()  # a cache directory made here says so
    entry = load(train)
    assert entry["path"] == os.path.realpath(train) and entry["target"] == os.path.realpath(train)
    assert [(e["kind"], e["line"], e.get("code"), e.get("verdict"), e["cost"], e["source"]) for e in entry["lines"]] == [
        ("finding", 4, "XLA001", CONFIRMED, COST, "v = loss.item()"),
        ("finding", 5, "XLA006", NOT_CONFIRMED, None, "print(loss)"),
        ("miss", 3, None, None, "costs 3.0 ms per step (<1% of the step time)", "loss = model(x).sum()"),
    ]


def test_hover_on_the_text_that_ran_shows_what_was_measured(train):
    started = time.mktime((2026, 11, 26, 17, 40, 0, 0, 0, -1))
    os.utime(train, (started - 60, started - 60))  # written before that run
    assert _kept(train, started=started) == []
    assert measured_hover(train, TRAIN, 4, 12, [("XLA001", 4)]) == (
        f"**Measured by `xlalint --verify`** (2026-11-26 17:40): XLA001 CONFIRMED; {COST}")
    # a finding the run did not confirm: its verdict and evidence
    assert measured_hover(train, TRAIN, 5, 6, [("XLA006", 5)]).endswith(
        "XLA006 NOT CONFIRMED: the line ran 10 times and no counter moved")
    # a line no rule flags: the miss, when the cursor is on its code; not in its indentation
    assert measured_hover(train, TRAIN, 3, 6, []).endswith(
        "no rule flags this line, yet the run measured a miss (cpu fallback): aten::nonzero fell back on 8 of 8 "
        "steps; costs 3.0 ms per step (<1% of the step time)")
    assert measured_hover(train, TRAIN, 3, 2, []) is None
    # nothing measured there: a code the run has no entry for, a line with nothing
    assert measured_hover(train, TRAIN, 4, 12, [("XLA002", 4)]) is None
    assert measured_hover(train, TRAIN, 2, 3, []) is None


def test_hover_after_an_edit_keeps_the_lines_that_read_the_same_and_says_so(train):
    _kept(train)
    moved = "# a comment added above\n" + TRAIN
    text = measured_hover(train, moved, 5, 12, [("XLA001", 5)])
    assert "on an earlier version of this file; this line reads the same" in text and text.endswith(COST)
    assert "earlier version" in measured_hover(train, moved, 4, 6, [])  # the miss moved too
    # the line itself was edited: what was measured was other code
    edited = TRAIN.replace("v = loss.item()", "v = loss.item() * 2")
    assert measured_hover(train, edited, 4, 12, [("XLA001", 4)]) is None


def test_after_an_edit_two_measured_lines_that_read_the_same_are_told_apart_by_their_place_or_not_at_all(train):
    twice = TRAIN + "    v = loss.item()\n"
    with open(train, "w") as fh:
        fh.write(twice)
    remember(_report(train, findings=[_verdict(train, 4, "XLA001", cost={"text": "costs 10 ms per step"}),
                                      _verdict(train, 6, "XLA001", cost={"text": "costs 99 ms per step"})]), time.time())
    assert measured_hover(train, twice, 6, 12, [("XLA001", 6)]).endswith("costs 99 ms per step")
    renamed = twice.replace("import torch", "import torch as t")  # the lines stay where they were
    assert measured_hover(train, renamed, 6, 12, [("XLA001", 6)]).endswith("costs 99 ms per step")
    assert measured_hover(train, renamed, 4, 12, [("XLA001", 4)]).endswith("costs 10 ms per step")
    shifted = "# a comment\n" + twice  # which of the two is which cannot be told: nothing
    assert measured_hover(train, shifted, 5, 12, [("XLA001", 5)]) is None


def test_two_findings_with_one_cost_say_so(train):
    shared = {"text": "costs 5,762 ms per step on average (71% of the step time)", "shared_evenly_with": [3, 4]}
    remember(_report(train, findings=[_verdict(train, 3, "XLA005", cost=shared), _verdict(train, 4, "XLA005", cost=shared)]),
             time.time())
    assert measured_hover(train, TRAIN, 4, 12, [("XLA005", 4)]).endswith(
        "XLA005 CONFIRMED; costs 5,762 ms per step on average (71% of the step time) (shared by the XLA005 findings "
        "at lines 3 and 4: the same events)")
    # after an edit above, the lines named are those of the version that ran
    assert measured_hover(train, "\n" + TRAIN, 5, 12, [("XLA005", 5)]).endswith(
        "(shared by the XLA005 findings that were at lines 3 and 4: the same events)")


def test_the_hover_names_the_program_that_ran_when_it_is_another_file(train, monkeypatch, tmp_path):
    monkeypatch.chdir(os.path.dirname(train))  # the CLI's target, relative to where it ran
    rep = _report(train, findings=[_verdict(train, 4, "XLA001", cost={"text": COST})], target="train.py")
    remember(rep, time.time())
    monkeypatch.chdir(tmp_path)  # the editor's working directory is another
    assert "running" not in measured_hover(train, TRAIN, 4, 12, [("XLA001", 4)])
    remember(dataclasses.replace(rep, target="main.py::entry"), time.time())  # a helper of another program
    assert ", running main.py): XLA001 CONFIRMED" in measured_hover(train, TRAIN, 4, 12, [("XLA001", 4)])


def test_the_last_run_replaces_the_entry_even_when_it_measured_nothing_there(train):
    _kept(train)
    assert measured_hover(train, TRAIN, 4, 12, [("XLA001", 4)]) is not None
    remember(_report(train), time.time())  # the fixed program: no finding, no miss in this file
    assert load(train)["lines"] == []
    assert measured_hover(train, TRAIN, 4, 12, [("XLA001", 4)]) is None


def test_what_is_not_kept(train, tmp_path):
    # a file edited while the program ran: which version ran cannot be told
    notes = _kept(train, started=time.time() - 3600)
    assert notes == ["train.py changed while the program ran: what was measured in it is not kept for the editor's hover"]
    assert load(train) is None
    # a run that reached no step; a notebook's
    assert remember(_report(train, findings=[_verdict(train, 4, "XLA001", cost={"text": COST})], steps=()), time.time()) == []
    nb = _report(train, findings=[_verdict(train, 4, "XLA001", cost={"text": COST})], target=str(tmp_path / "n.ipynb"))
    assert remember(nb, time.time()) == [] and load(train) is None


def test_a_store_that_cannot_be_written_is_a_note_not_a_failure(train, tmp_path):
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the cache directory would go")
    rep = _report(train, findings=[_verdict(train, 4, "XLA001", cost={"text": COST})])
    notes = remember(rep, time.time(), cache_dir=str(blocker))
    assert len(notes) == 1 and notes[0].startswith("could not keep the measurements for the editor's hover")


def test_bad_entries_are_ignored(train):
    _kept(train)
    where = entry_path(train)
    entry = json.loads(where.read_text())
    where.write_text(json.dumps(dict(entry, format=99)))
    assert load(train) is None and measured_hover(train, TRAIN, 4, 12, [("XLA001", 4)]) is None
    where.write_text(json.dumps(dict(entry, path="/elsewhere/train.py")))  # another file's, by a hash clash
    assert load(train) is None
    where.write_text(json.dumps(dict(entry, lines=[{"kind": "finding", "line": "4"}])))
    assert load(train) is None
    where.write_text("{torn")
    assert load(train) is None
    where.write_text(json.dumps(entry))
    assert load(train) is not None


def test_the_cli_passes_no_cache_and_cache_dir_to_the_verify_run(monkeypatch, train, tmp_path):
    pytest.importorskip("torch_xla")  # the CLI checks for it before it calls the verify run
    import xlalint.verify as verify
    from xlalint.cli import main

    seen = []
    monkeypatch.setattr(verify, "run", lambda *a, **k: seen.append(k) or 0)
    assert main(["--verify", train, "--no-cache"]) == 0
    assert main(["--verify", train, "--cache-dir", str(tmp_path / "c")]) == 0
    assert [(k["remember"], k["cache_dir"]) for k in seen] == [(False, None), (True, str(tmp_path / "c"))]
