"""The ledger's bookkeeping: matching findings to verdicts, the sample rule, checking out a snapshot.

Run: python -m pytest -q bench/ledger/test_ledger.py
"""

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ledger  # noqa: E402


def finding(path, line, code, text, column=5, cell=""):
    return ledger.Finding(path, cell, line, column, code, "msg", text, ledger.fingerprint(text))


def verdict(f, verdict="true", cause="", line=None):
    return {"repo": "o/r", "commit": "c", "path": f.path, "cell": f.cell, "line": str(line or f.line),
            "column": str(f.column), "code": f.code, "fingerprint": f.fingerprint, "verdict": verdict,
            "cause": cause, "reason": "r"}


def numbered(findings):
    """Occurrence numbers as findings_of gives them."""
    seen = {}
    for f in sorted(findings, key=lambda f: (f.path, f.cell, f.line, f.column)):
        key = (f.path, f.cell, f.code, f.fingerprint)
        f.occurrence = seen.get(key, 0)
        seen[key] = f.occurrence + 1
    return findings


def test_a_verdict_follows_its_line_when_lines_shift():
    old = finding("a.py", 10, "XLA001", "x = loss.item()")
    new = finding("a.py", 14, "XLA001", "x = loss.item()")  # four lines inserted above
    other = finding("a.py", 10, "XLA001", "y = acc.item()")  # a different finding now on the old line
    gone = ledger.match([new, other], [verdict(old, "false", "3")])
    assert gone == []
    assert new.verdict is not None and new.verdict["verdict"] == "false"
    assert other.verdict is None


def test_repeated_line_text_pairs_by_nearest_line():
    a, b = finding("a.py", 10, "XLA001", "lossf = loss.item()"), finding("a.py", 50, "XLA001", "lossf = loss.item()")
    va, vb = verdict(a, "true"), verdict(b, "false", "4")
    a2, b2 = finding("a.py", 12, "XLA001", "lossf = loss.item()"), finding("a.py", 52, "XLA001", "lossf = loss.item()")
    assert ledger.match([b2, a2], [vb, va]) == []
    assert a2.verdict is va and b2.verdict is vb


def test_two_findings_on_one_line_keep_their_own_verdicts_when_one_is_gone():
    """`total = x.item() if total is None else total + x.item()`: two findings of one text on one line, the first
    judged false, the second true. A build that drops the first leaves the second with its own verdict (the
    false one is gone), not with its neighbour's."""
    text = "total = x.item() if total is None else total + x.item()"
    first, second = finding("t.py", 9, "XLA001", text, column=21), finding("t.py", 9, "XLA001", text, column=75)
    v1, v2 = verdict(first, "false", "4"), verdict(second, "true")
    kept = finding("t.py", 9, "XLA001", text, column=75)
    assert ledger.match([kept], [v1, v2]) == [v1]
    assert kept.verdict is v2


def test_falls_back_to_the_line_when_the_text_changed():
    old = finding("a.py", 7, "XLA002", "if mask.any():")
    edited = finding("a.py", 7, "XLA002", "if mask.any():  # reformatted")
    assert ledger.match([edited], [verdict(old)]) == []
    assert edited.verdict is not None


def test_a_verdict_without_its_finding_is_gone():
    old = finding("a.py", 7, "XLA002", "if mask.any():")
    still = finding("a.py", 9, "XLA001", "v = t.item()")
    gone = ledger.match([still], [verdict(old, "false", "7"), verdict(still)])
    assert [v["code"] for v in gone] == ["XLA002"]
    assert still.verdict is not None


def test_notebook_cells_are_part_of_the_key():
    # The same line text in two cells; cell 9's finding moved from its line 3 to line 5.
    f1 = finding("n.ipynb", 3, "XLA001", "loss.item()", cell="4")
    f2 = finding("n.ipynb", 5, "XLA001", "loss.item()", cell="9")
    v = verdict(f2, "false", "5", line=3)
    assert ledger.match([f1, f2], [v]) == []
    assert f2.verdict is v and f1.verdict is None


def test_score_counts_only_the_sample_and_lists_unjudged():
    fs = numbered([finding("a.py", n, "XLA001", f"v{n} = t.item()") for n in range(1, 41)])
    spec = {"sample": {"seed": 7, "size": 10}}
    picked = ledger.sample(fs, 7, 10)
    verdicts = [verdict(f, "true") for f in picked[:6]] + [verdict(f, "false", "3") for f in picked[6:8]]
    s = ledger.score(fs, spec, verdicts)
    assert (s.printed, s.scope, s.true, s.false, len(s.unjudged)) == (40, 10, 6, 2, 2)
    assert s.precision() == 0.75


def test_the_sample_keeps_its_members_when_other_findings_come_and_go():
    fs = numbered([finding("a.py", n, "XLA001", f"v{n} = t.item()") for n in range(1, 101)])
    picked = {(f.path, f.fingerprint) for f in ledger.sample(fs, 32, 20)}
    rest = [f for f in fs if (f.path, f.fingerprint) not in picked]
    # Drop ten findings outside the sample and add ten new ones: the sample may only gain the new ones.
    later = numbered([f for f in fs if f not in rest[:10]]
                     + [finding("b.py", n, "XLA002", f"if c{n}.any():") for n in range(10)])
    again = {(f.path, f.fingerprint) for f in ledger.sample(later, 32, 20)}
    assert {k for k in again if k[0] == "a.py"} <= picked
    assert len(again) == 20
    # Another seed draws another sample.
    assert {(f.path, f.fingerprint) for f in ledger.sample(fs, 33, 20)} != picked


def test_read_verdicts_rejects_a_false_verdict_without_a_cause(tmp_path):
    p = tmp_path / "v.csv"
    p.write_text(",".join(ledger.COLUMNS) + "\no/r,c,a.py,,3,1,XLA001,abc,false,,why\n")
    with pytest.raises(SystemExit, match="needs a cause"):
        ledger.read_verdicts(str(p))
    p.write_text(",".join(ledger.COLUMNS) + "\no/r,c,a.py,,3,1,XLA001,abc,maybe,,why\n")
    with pytest.raises(SystemExit, match="verdict must be one of"):
        ledger.read_verdicts(str(p))


def test_checkout_writes_the_tree_and_says_how_to_fetch_a_missing_snapshot(tmp_path):
    src = tmp_path / "work"
    src.mkdir()
    (src / "pkg").mkdir()
    (src / "pkg" / "m.py").write_text("x = 1\n")
    git = ["git", "-C", str(src), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "m"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    mirror = tmp_path / "mirror"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(mirror / "o+r" / "repo")], check=True)
    out = ledger.checkout(str(mirror), "o/r", commit, str(tmp_path / "co"))
    assert (tmp_path / "co" / "pkg" / "m.py").read_text() == "x = 1\n"
    assert out == str(tmp_path / "co")
    with pytest.raises(SystemExit, match="github:o/missing"):
        ledger.checkout(str(mirror), "o/missing", commit, str(tmp_path / "co2"))
    with pytest.raises(SystemExit, match="lacks commit"):
        ledger.checkout(str(mirror), "o/r", "0" * 40, str(tmp_path / "co3"))


def test_append_routes_judged_rows_to_their_half_and_drops_the_code(tmp_path, monkeypatch):
    monkeypatch.setattr(ledger, "HERE", str(tmp_path))
    specs = [{"repo": "o/dev", "commit": "c1", "half": "dev"}, {"repo": "o/held", "commit": "c2", "half": "heldout"}]
    rows = tmp_path / "new.csv"
    header = ",".join(ledger.COLUMNS + ["text", "message"])
    rows.write_text(header + "\n"
                    "o/dev,c1,a.py,,3,1,XLA001,abc,true,,read per step,x = t.item(),msg\n"
                    "o/held,c2,b.py,,4,1,XLA002,def,false,3,a Python int,if n > 0:,msg\n"
                    "o/held,c2,b.py,,9,1,XLA002,123,,,,if m > 0:,msg\n")
    assert ledger.append_judged(str(rows), specs) == 0
    dev = ledger.read_verdicts(str(tmp_path / "verdicts.csv"))
    held = ledger.read_verdicts(str(tmp_path / "heldout-verdicts.csv"))
    assert [(r["path"], r["verdict"]) for r in dev] == [("a.py", "true")]
    assert [(r["path"], r["verdict"], r["cause"]) for r in held] == [("b.py", "false", "3")]
    assert "text" not in dev[0] and "t.item()" not in (tmp_path / "verdicts.csv").read_text()
