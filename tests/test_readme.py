"""Every command the README shows (each ``$ `` line of a ``console`` block) works as written, in order,
on a fresh copy of this repository: ``make run``, ``.venv/bin/xlalint``, ``pip install .``,
``pipx install .``, ``flake8``, ``xlalint --verify``; and what it prints is the README's sample under it
(times masked). A trailing ``# exit N`` is the expected status (0 otherwise).

scripts/readme_samples.py runs the commands (a copy holding what ``git ls-files`` lists, a temporary
HOME, a fresh virtualenv with pipx as "the environment you train in"; ``xlalint --verify`` with the
Python running the tests, which has the verify extra) and rewrites the samples: when this test fails
on a sample, run ``python scripts/readme_samples.py`` and commit the README.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_fixtures import expected_marks

from conftest import ROOT
from tests.verify_zygote import fast_compile

README = ROOT / "README.md"
_spec = importlib.util.spec_from_file_location("readme_samples", ROOT / "scripts" / "readme_samples.py")
samples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(samples)


def readme_commands() -> list:
    """(command, expected exit status) for each ``$ `` line of the README's console blocks."""
    return samples.commands(README.read_text(encoding="utf-8"))


def test_the_readme_shows_the_commands_this_test_runs():
    commands = [c for c, _ in readme_commands()]
    assert commands[0] == "make run"
    for needed in ("pip install .", "pipx install .", ".venv/bin/xlalint --select XLA001 examples/slow_train.py",
                   "xlalint --verify examples/slow_train.py", "flake8 --select XLA"):
        assert any(c.startswith(needed) for c in commands), needed
    text = README.read_text(encoding="utf-8")
    assert "pip install xlalint" not in text and "rev: v0" not in text  # neither exists
    with_samples = [c for c, _, sample, _ in samples.blocks(text) if sample]
    assert with_samples[:2] == ["make run", ".venv/bin/xlalint --select XLA001 examples/slow_train.py    # exit 1: it has findings"]
    assert len(with_samples) == 6, with_samples  # make run, the full format, the notebook, two --verify, flake8
    verified = [c.split()[2] for c in commands if c.startswith("xlalint --verify")]
    assert verified == ["examples/slow_train.py", "examples/fast_train.py"]  # check_verified_example's


def test_the_checks_of_the_verified_examples_can_fail():
    slow = (ROOT / "examples" / "slow_train.py")
    rows = ["Per step:  step  uncached  cached  transfers  fallbacks  wall ms",
            "              0         7       0          6          1   4077.6  (warm-up)",
            "              2         1       4          4          1   1164.0"]
    findings = [f"  examples/slow_train.py:{line}:1: {code} rule-name: CONFIRMED: evidence" for line, code in sorted(_marks(slow))]
    good = "\n".join(["Findings:", *findings, *rows, "8 confirmed, 0 not confirmed, 0 not reached, 0 missed; exit 1"])
    check_verified_example("xlalint --verify examples/slow_train.py --max-steps 10", good)
    for bad in (good.replace(": CONFIRMED:", ": NOT CONFIRMED:", 1), good.replace(findings[0] + "\n", ""),
                good.replace("0 missed", "1 missed")):
        with pytest.raises(AssertionError):
            check_verified_example("xlalint --verify examples/slow_train.py --max-steps 10", bad)
    fast = "\n".join([rows[0], rows[1], "              2         0       1          3          0     17.9",
                      "0 confirmed, 0 not confirmed, 0 not reached, 0 missed; exit 0"])
    check_verified_example("xlalint --verify examples/fast_train.py --max-steps 10", fast)
    with pytest.raises(AssertionError):  # a compile after warm-up
        check_verified_example("xlalint --verify examples/fast_train.py --max-steps 10", fast.replace("  0       1  ", "  1       1  "))


def test_the_comparison_masks_times_only():
    row = "              2         1       4          4          1   1164.0"
    wall = "  wall time: warm-up 6269.01 ms (4077.58, 2191.43; step 0 includes setup); after warm-up median 1259.04 ms, mean 1329.05 ms"
    assert not samples.differences([row, wall], [row.replace("1164.0", "17.9"), wall.replace("1259.04", "17.43")])
    assert samples.differences([row], [row.replace("  4  ", "  5  ")])  # a count, not a time
    assert samples.differences(["Found 8 findings in 1 file checked."], ["Found 9 findings in 1 file checked."])
    other = row.replace("1164.0", "  17.9")  # the column is right-aligned: its padding is part of the time
    assert samples.keep_times([row, wall], [other, "wall time line, not timed"]) == [other, "wall time line, not timed"]
    assert samples.keep_times([row, "x"], [other, "y"]) == [row, "y"]  # the old run's times, the new text
    assert samples.keep_times([row], [other.replace("  4  ", "  5  ")]) == [other.replace("  4  ", "  5  ")]
    ranking = ["Where the time goes (after warm-up: 8 steps, 5,402 ms per step on average; ranked by measured cost):",
               "  1. a.py:92 XLA001 host-read: costs 5.5 ms per step (<1% of the step time): 1 transfer",
               "  2. a.py:93 XLA002 tensor-condition: costs 3.5 ms per step (1% of the step time): 1 transfer",
               "  unexplained: 52 ms per step (1%): the rest", "", "Findings:"]
    swapped = [ranking[0].replace("5,402", "17"), ranking[2].replace("  2.", "  1.").replace("(1%", "(3%"),
               ranking[1].replace("  1.", "  2."), *ranking[3:]]
    assert not samples.differences(ranking, swapped)  # the order of the ranking, its shares are the times'
    assert samples.differences(ranking, [ranking[0], ranking[1].replace("XLA001", "XLA003"), *ranking[2:]])
    assert samples.differences(ranking, [ranking[0], ranking[1].replace("1 transfer", "2 transfers"), *ranking[2:]])
    assert samples.differences(["  1. x: 3%"], ["  1. x: 4%"])  # a share is masked only in the ranking
    cut = [ranking[0], ranking[1][:70] + "5,746 m…", ranking[2][:70] + "1…"]  # lines cut at WIDTH in a time
    assert not samples.differences(cut, [ranking[0], ranking[1][:70] + "9…", ranking[2][:70] + "12,018 ms…"])
    long = ranking[0:1] + [ranking[1] + " + 1 extra graph execution; and more words to cut" * 3]
    wider = [long[0], long[1].replace("5.5 ms", "1,205.5 ms")]  # the same row, its cut 6 characters earlier
    assert not samples.differences(*(samples.normalise("\n".join(x), Path("/n"), Path("/n")) for x in (long, wider)))
    cut = samples.normalise("x" * 200 + "\n", Path("/nowhere"), Path("/nowhere"))
    assert cut == ["x" * (samples.WIDTH - 1) + "…"]


VERDICT = re.compile(r"^  examples/(?P<file>\w+\.py):(?P<line>\d+):\d+: (?P<code>XLA\d+) [\w-]+: (?P<status>[A-Z ]+):")
STEP_ROW = re.compile(r"^\s+(?P<step>\d+)\s+(?P<uncached>\d+)\s+(?P<cached>\d+)\s+(?P<transfers>\d+)\s+(?P<fallbacks>\d+)\s+[\d.]+(?P<warmup>\s+\(warm-up\))?$")


def _marks(path: Path) -> set:
    return expected_marks(path.read_text(encoding="utf-8"))


def check_verified_example(command: str, output: str) -> None:
    """What tests/test_verify_fixtures.py checks of its fixtures, on the bundled examples, from the README's
    --verify runs (so that they run under torch_xla once): every `# expect:` mark of the slow one is
    CONFIRMED and nothing is missed; the fixed twin has no finding and no miss, and after warm-up no
    uncached compile and no CPU fallback."""
    name = command.split()[2].rsplit("/", 1)[-1]
    verdicts = {(int(m["line"]), m["code"]): m["status"] for m in map(VERDICT.match, output.splitlines()) if m}
    steady = [m for m in map(STEP_ROW.match, output.splitlines()) if m and not m["warmup"]]
    assert steady, output
    assert all(int(m["fallbacks"]) == 0 for m in steady) or name == "slow_train.py", output
    assert ", 0 missed; exit" in output, output
    if name == "slow_train.py":
        marks = _marks(ROOT / "examples" / name)
        assert len(marks) >= 8 and set(verdicts) == marks, (sorted(verdicts), sorted(marks))
        assert set(verdicts.values()) == {"CONFIRMED"}, verdicts
    else:
        assert not verdicts and not _marks(ROOT / "examples" / name)
        assert all(int(m["uncached"]) == 0 for m in steady), output
        assert output.rstrip().endswith("0 confirmed, 0 not confirmed, 0 not reached, 0 missed; exit 0"), output


def test_every_readme_command_works_as_written_and_prints_its_sample(tmp_path, monkeypatch):
    # The two `xlalint --verify` runs compile at XLA's CPU optimization level 0 (verify_zygote.fast_compile):
    # they print the same but for their times, which the comparison masks (the same graphs, counts and
    # verdicts; the README's own times come from scripts/readme_samples.py, run without it). slow_train.py's
    # run and its graph-dump re-run compile 25 graphs: 97 -> 50 CPU seconds.
    monkeypatch.setenv("XLA_FLAGS", fast_compile(dict(os.environ))["XLA_FLAGS"])
    text = README.read_text(encoding="utf-8")
    expected_samples = {c: s for c, _, s, _ in samples.blocks(text) if s is not None}
    log, stale = [], []
    for command, expected, r, seconds, clone in samples.run_commands(tmp_path, text):
        log.append(f"$ {command}  -> exit {r.returncode} in {seconds:.0f} s")
        assert r.returncode == expected, "\n".join(log) + f"\noutput:\n{r.stdout[-3000:]}"
        assert "Traceback" not in r.stdout, r.stdout[-3000:]
        if command == "make run":
            assert "Found 8 findings in 1 file checked." in r.stdout and "All checks passed (1 file checked)." in r.stdout
            assert ".venv/bin/xlalint" in r.stdout.split("Next:")[1]
        if command.startswith("xlalint --verify examples/"):
            check_verified_example(command, r.stdout)
        if command in expected_samples:
            diff = samples.differences(expected_samples[command], samples.normalise(r.stdout, clone, tmp_path))
            if diff:
                stale.append(f"$ {command}\n{diff}")
    print("\n".join(log))  # shown with -s, and in the report of a failure above
    assert not stale, ("README samples differ from a fresh run (python scripts/readme_samples.py rewrites them):\n"
                       + "\n\n".join(stale))
    assert (tmp_path / "home" / ".local" / "bin" / "xlalint").exists()  # pipx put it there
    assert (tmp_path / "train-env" / "bin" / "xlalint").exists()  # pip install . put it there


def test_the_readmes_local_pre_commit_hook_works_and_honours_excludes(tmp_path):
    """The README's `repo: local` snippet, verbatim, in a user's repository: pre-commit runs the
    `xlalint` on the PATH on the committed files, and the project's bare-name exclude keeps
    `third_party/` out even though pre-commit names its files (the hook runs --force-exclude)."""
    text = README.read_text(encoding="utf-8")
    m = re.search(r"```yaml\n(repos:\n  - repo: local\n.*?)```", text, re.DOTALL)
    assert m, "the README's local hook snippet"
    slow = "import torch\nfor x in loader:\n    loss = model(x).sum()\n    v = loss.item()\n"
    (tmp_path / ".pre-commit-config.yaml").write_text(m.group(1))
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nextend-exclude = ["third_party"]\n')
    (tmp_path / "third_party" / "vendored").mkdir(parents=True)
    (tmp_path / "third_party" / "vendored" / "slow.py").write_text(slow)
    (tmp_path / "ok.py").write_text("import torch\nx = torch.zeros(3)\n")
    git_env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t.invalid", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t.invalid", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    env = {**os.environ, **git_env, "PRE_COMMIT_HOME": str(tmp_path / ".pre-commit-home"), "PRE_COMMIT_COLOR": "never",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
    for args in (["init", "-q"], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True, capture_output=True)
    pre_commit = str(Path(sys.executable).parent / "pre-commit")
    r = subprocess.run([pre_commit, "run", "--all-files"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr  # third_party/ is excluded: nothing to report
    (tmp_path / "train.py").write_text(slow)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, env=env, check=True, capture_output=True)
    r = subprocess.run([pre_commit, "run", "--all-files"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--> train.py:4:9" in r.stdout and "third_party" not in r.stdout, r.stdout
