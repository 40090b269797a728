"""The audit scorer's bookkeeping: matching labels to findings, groups, the half split, hidden held-out misses.

No network and no xlalint run: a tiny git snapshot is made in a temporary directory and the linter is
replaced by canned findings. Run: python -m pytest -q bench/audit/test_score.py
"""

import csv
import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import score  # noqa: E402
from score import ledger  # noqa: E402


def finding(path, line, code, text):
    return ledger.Finding(path, "", line, 1, code, "msg", text, ledger.fingerprint(text))


def label(path, line, rule, text, kind="must", group="", repo="o/r", commit="c"):
    return {"repo": repo, "commit": commit, "path": path, "cell": "", "line": line, "rule": rule, "label": kind,
            "fingerprint": ledger.fingerprint(text), "group": group, "note": f"note {path}:{line}"}


def test_a_label_follows_its_text_when_lines_move():
    lab = label("a.py", 10, "XLA001", "x = loss.item()")
    moved = finding("a.py", 14, "XLA001", "x = loss.item()")
    other = finding("a.py", 10, "XLA001", "y = acc.item()")  # another finding now on the label's old line
    s = score.score_repo([other, moved], [lab], ["a.py"])
    assert (s.by_rule["XLA001"].tp, s.by_rule["XLA001"].fn) == (1, 0)
    assert [f.text for f in s.false] == ["y = acc.item()"]


def test_a_second_finding_on_a_labelled_line_is_neither_true_nor_false():
    lab = label("g.py", 94, "XLA009", "nxt = torch.where(mask[:, cur], tokens[:, cur], nxt)")
    two = [finding("g.py", 94, "XLA009", "nxt = torch.where(mask[:, cur], tokens[:, cur], nxt)")] * 2
    s = score.score_repo(two, [lab], ["g.py"])
    assert (s.by_rule["XLA009"].tp, s.by_rule["XLA009"].fp, s.false) == (1, 0, [])


def test_falls_back_to_the_line_and_needs_the_same_rule():
    lab = label("a.py", 7, "XLA002", "if mask.any():")
    edited = finding("a.py", 7, "XLA002", "if mask.any():  # reformatted")
    assert score.score_repo([edited], [lab], ["a.py"]).by_rule["XLA002"].tp == 1
    wrong_rule = finding("a.py", 7, "XLA001", "if mask.any():")
    s = score.score_repo([wrong_rule], [lab], ["a.py"])
    assert s.by_rule["XLA002"].fn == 1 and s.by_rule["XLA001"].fp == 1


def test_repeated_text_pairs_each_label_with_its_own_finding():
    labs = [label("a.py", 10, "XLA001", "l = loss.item()"), label("a.py", 50, "XLA001", "l = loss.item()")]
    one = finding("a.py", 51, "XLA001", "l = loss.item()")
    s = score.score_repo([one], labs, ["a.py"])
    assert (s.by_rule["XLA001"].tp, s.by_rule["XLA001"].fn) == (1, 1)
    assert [u[0]["line"] for _, u in s.misses] == [10]  # the finding at 51 is the label at 50's


def test_a_group_counts_once_and_is_found_on_any_of_its_lines():
    labs = [label("c.py", 5, "XLA005", "targets = torch.zeros(n, max(lengths))", group="collate"),
            label("c.py", 9, "XLA005", "collate_fn=collate_fn)", group="collate")]
    s = score.score_repo([finding("c.py", 9, "XLA005", "collate_fn=collate_fn)")], labs, ["c.py"])
    assert (s.by_rule["XLA005"].tp, s.by_rule["XLA005"].fn, s.by_rule["XLA005"].fp) == (1, 0, 0)
    s = score.score_repo([], labs, ["c.py"])
    assert (s.by_rule["XLA005"].tp, s.by_rule["XLA005"].fn) == (0, 1)


def test_debatable_lines_count_neither_way_and_unread_files_are_unscored():
    labs = [label("a.py", 3, "XLA005", "dl = DataLoader(ds)", kind="debatable")]
    fs = [finding("a.py", 3, "XLA005", "dl = DataLoader(ds)"), finding("b.py", 8, "XLA001", "v = t.item()")]
    s = score.score_repo(fs, labs, ["a.py"])
    t = s.total()
    assert (t.tp, t.fn, t.fp, s.unscored) == (0, 0, 0, 1)
    assert score.score_repo([], labs, ["a.py"]).total().fn == 0


def test_off_by_default_rules_are_scored_apart():
    labs = [label("a.py", 3, "XLA008", "for v in t:"), label("a.py", 4, "XLA001", "x = v.item()")]
    fs = [finding("a.py", 3, "XLA008", "for v in t:"), finding("a.py", 4, "XLA001", "x = v.item()")]
    base = score.score_repo(fs, labs, ["a.py"], {"XLA001"})
    assert set(base.by_rule) == {"XLA001"} and base.by_rule["XLA001"].tp == 1


def test_read_labels_rejects_a_bad_label(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text(",".join(score.COLUMNS) + "\no/r,c,a.py,,3,XLA001,maybe,abc,,n\n")
    with pytest.raises(SystemExit, match="label must be one of"):
        score.read_labels(str(path))


# --- end to end on a fake snapshot ------------------------------------------------------------

SOURCE = {
    "o/dev": {"train.py": "for x, y in loader:\n    loss = model(x)\n    print(loss.item())\n"
                          "    acc = (p == y).sum().item()\n"},
    "o/held": {"gen.py": "for i in range(n):\n    a = alphas[i]\n    v = a.item()\n"},
}


def make_snapshot(tmp_path, repo, files):
    src = tmp_path / "work" / repo.replace("/", "+")
    src.mkdir(parents=True)
    for name, text in files.items():
        (src / name).write_text(text)
    git = ["git", "-C", str(src), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "m"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    mirror = tmp_path / "mirror" / repo.replace("/", "+") / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(mirror)], check=True)
    return commit


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    commits = {repo: make_snapshot(tmp_path, repo, files) for repo, files in SOURCE.items()}
    specs = [{"repo": "o/dev", "commit": commits["o/dev"], "path": ".", "half": "dev", "kind": "k",
              "files": ["train.py"]},
             {"repo": "o/held", "commit": commits["o/held"], "path": ".", "half": "heldout", "kind": "k",
              "files": ["gen.py"]}]
    (tmp_path / "repos.json").write_text(json.dumps({"repositories": specs}))
    labs = [label("train.py", 3, "XLA001", "print(loss.item())", repo="o/dev", commit=commits["o/dev"]),
            label("train.py", 4, "XLA001", "acc = (p == y).sum().item()", repo="o/dev", commit=commits["o/dev"]),
            label("gen.py", 2, "XLA009", "a = alphas[i]", repo="o/held", commit=commits["o/held"]),
            label("gen.py", 3, "XLA001", "v = a.item()", repo="o/held", commit=commits["o/held"])]
    with open(tmp_path / "labels.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=score.COLUMNS)
        w.writeheader()
        w.writerows(labs)
    # The linter finds one label of each repository: the dev half misses line 4, the held-out half line 2.
    canned = {"o+dev": [{"filename": "train.py", "line": 3, "column": 5, "code": "XLA001", "message": "m"}],
              "o+held": [{"filename": "gen.py", "line": 3, "column": 5, "code": "XLA001", "message": "m"}]}
    calls = []

    def fake_lint(root, path, python, code_dir, jobs):
        calls.append(root)
        return canned[os.path.basename(root).split("@")[0]]
    monkeypatch.setattr(ledger, "lint", fake_lint)
    args = ["--repos", str(tmp_path / "repos.json"), "--labels", str(tmp_path / "labels.csv"),
            "--mirror", str(tmp_path / "mirror"), "--workdir", str(tmp_path / "wd")]
    return args, calls


def test_scores_each_half_and_lists_only_the_dev_misses(corpus, capsys):
    args, calls = corpus
    assert score.main(args + ["--list"]) == 0
    out = capsys.readouterr().out
    assert "| o/dev | dev | 1 | 0 | 1 | 1 | 0 | 0.50 | 1.00 |" in out
    assert "| o/held | heldout | 1 | 0 | 1 | 1 | 0 | 0.50 | 1.00 |" in out
    assert "train.py:4 XLA001" in out  # a dev miss, listed
    assert "gen.py" not in out and "XLA009" in out  # the held-out miss is counted, never named
    assert "heldout: 1 misses" in out and "held out" in out
    assert len(calls) == 2


def test_heldout_misses_only_with_their_flag_and_reuse_does_not_lint(corpus, capsys):
    args, calls = corpus
    score.main(args)
    capsys.readouterr()
    score.main(args + ["--reuse", "--show-heldout-misses"])
    out = capsys.readouterr().out
    assert "gen.py:2 XLA009" in out
    assert len(calls) == 2  # the second run scored the saved findings


def test_a_stale_fingerprint_is_an_error(corpus, tmp_path):
    args, _ = corpus
    path = tmp_path / "labels.csv"
    rows = list(csv.DictReader(open(path)))
    rows[0]["line"] = "2"  # the label no longer points at its text
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=score.COLUMNS)
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(SystemExit, match="not that of the line"):
        score.main(args)
