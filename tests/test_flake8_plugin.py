"""The flake8 plugin is a thin view of the engine: the real ``flake8`` executable must report what the
real ``xlalint`` CLI reports (code, line, column, message), leave ``# noqa`` and syntax errors to
flake8, and honour ``[tool.xlalint]`` per-file-ignores but not its selection."""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
FLAKE8 = str(BIN / "flake8")
XLALINT = str(BIN / "xlalint")
PROJECTS = ROOT / "tests" / "fixtures" / "projects"
FIXTURES = sorted(os.path.relpath(p, ROOT) for p in glob.glob(str(ROOT / "tests" / "fixtures" / "*.py")))
# machine-readable flake8 output: one finding per line, the message last (it may contain colons)
FORMAT = "--format=%(path)s\t%(row)d\t%(col)d\t%(code)s\t%(text)s"

SLOW = textwrap.dedent("""\
    import torch
    import torch_xla

    model = torch.nn.Linear(4, 2).to(torch_xla.device())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    for step in range(3):
        loss = model(torch.randn(8, 4)).sum()
        loss.backward()
        opt.step()
        total += loss.item(){comment}
        torch_xla.sync()
""")


def run(cmd, cwd=ROOT):
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)


def flake8(*args, cwd=ROOT) -> tuple[list, subprocess.CompletedProcess]:
    proc = run([FLAKE8, FORMAT, *args], cwd=cwd)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr + proc.stdout
    rows = []
    for line in proc.stdout.splitlines():
        path, row, col, code, text = line.split("\t", 4)
        rows.append((os.path.normpath(path), int(row), int(col), code, text))
    return sorted(rows), proc


def cli(*args, cwd=ROOT) -> list:
    proc = run([XLALINT, "--format", "json", *args], cwd=cwd)
    assert proc.returncode in (0, 1), proc.stderr
    return sorted(
        (os.path.normpath(f["filename"]), f["line"], f["column"], f["code"], f["message"])
        for f in json.loads(proc.stdout)
        if not f["code"].startswith("XLA9")
    )


def test_flake8_reports_what_the_cli_reports_on_every_fixture():
    assert FIXTURES, "no fixtures found"
    # the same selection on both sides: `--select XLA` also turns on the rules that are off by default
    from_cli = cli("--select", "XLA", *FIXTURES)
    from_flake8, proc = flake8("--select", "XLA", *FIXTURES)
    assert from_cli, "the fixtures should hold findings, or this comparison proves nothing"
    # same codes on the same lines and the same (1-based) columns, with the same messages
    assert from_flake8 == from_cli
    assert proc.returncode == 1


def test_rules_off_by_default_stay_off_in_flake8_unless_selected():
    from xlalint.rules import all_rules

    off = [r.code for r in all_rules() if not r.on_by_default]
    assert off, "no rule is off by default: this test proves nothing"
    fixture = [f for f in FIXTURES if "per_sample_loss_iteration" in f]
    default, _ = flake8(*fixture)
    chosen, _ = flake8("--extend-select", ",".join(off), *fixture)
    assert not [r for r in default if r[3] in off], default
    assert [r for r in chosen if r[3] in off], chosen


def test_flake8_columns_are_the_cli_columns_not_off_by_one(tmp_path):
    source = SLOW.format(comment="")
    (tmp_path / "train.py").write_text(source)
    from_flake8, _ = flake8("--isolated", "--select", "XLA", "train.py", cwd=tmp_path)
    from_cli = cli("--isolated", "train.py", cwd=tmp_path)
    line = source.splitlines().index("    total += loss.item()") + 1
    col = "    total += loss.item()".index("loss.item()") + 1  # 1-based, as the CLI prints it
    assert [(r[1], r[2], r[3]) for r in from_flake8] == [(line, col, "XLA001")]
    assert from_flake8 == from_cli


def test_noqa_is_handled_by_flake8(tmp_path):
    (tmp_path / "same_code.py").write_text(SLOW.format(comment="  # noqa: XLA001"))
    (tmp_path / "other_code.py").write_text(SLOW.format(comment="  # noqa: XLA006"))
    (tmp_path / "bare.py").write_text(SLOW.format(comment="  # noqa"))
    files = ["same_code.py", "other_code.py", "bare.py"]
    rows, _ = flake8("--isolated", "--select", "XLA", *files, cwd=tmp_path)
    assert [(r[0], r[3]) for r in rows] == [("other_code.py", "XLA001")]
    assert rows == cli("--isolated", *files, cwd=tmp_path)
    # the plugin hands flake8 the unsuppressed findings: flake8's --disable-noqa brings them back
    rows, _ = flake8("--isolated", "--select", "XLA", "--disable-noqa", *files, cwd=tmp_path)
    assert sorted(r[0] for r in rows) == sorted(files)


def test_a_project_in_flake8_is_the_project_in_xlalint_and_noqa_stays_flake8s(tmp_path):
    # a finding in a helper module that only its caller makes per-step (callbacks.py:24, called from
    # the trainer's step loop in another module), suppressed by a `# noqa` flake8 must see through
    root = tmp_path / "proj"
    shutil.copytree(PROJECTS / "trainer_callbacks", root)
    cb = root / "callbacks.py"
    cb.write_text(cb.read_text().replace("loss = trainer.loss.item()  # expect: XLA001",
                                         "loss = trainer.loss.item()  # noqa: XLA001"))
    rows, _ = flake8("--select", "XLA", ".", cwd=root)
    assert rows == cli(".", cwd=root)
    assert "callbacks.py" not in {r[0] for r in rows} and len(rows) == 2
    rows, _ = flake8("--select", "XLA", "--disable-noqa", ".", cwd=root)
    assert ("callbacks.py", 24, "XLA001") in {(r[0], r[1], r[3]) for r in rows}


def test_a_syntax_error_is_flake8s_e999_not_a_plugin_crash(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nfor x in loader\n    x.item()\n")
    rows, proc = flake8("--isolated", "--select", "XLA,E999", "broken.py", cwd=tmp_path)
    assert [r[3] for r in rows] == ["E999"], proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert "XLA900" not in proc.stdout


def test_per_file_ignores_from_pyproject_apply_but_selection_is_flake8s(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.xlalint]
        select = ["XLA006"]  # selection is flake8's: the plugin does not apply it
        per-file-ignores = { "scripts/*" = ["XLA001"] }
    """))
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "ignored.py").write_text(SLOW.format(comment=""))
    (tmp_path / "train.py").write_text(SLOW.format(comment=""))
    rows, _ = flake8("--isolated", "--select", "XLA", "scripts/ignored.py", "train.py", cwd=tmp_path)
    assert [(r[0], r[3]) for r in rows] == [("train.py", "XLA001")]
    # --extend-ignore is flake8's own, and works on the plugin's codes
    rows, _ = flake8("--isolated", "--select", "XLA", "--extend-ignore", "XLA001", "train.py", cwd=tmp_path)
    assert rows == []


def test_a_bad_xlalint_config_is_one_clear_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xlalint]\nselcet = [\"XLA001\"]\n")
    (tmp_path / "train.py").write_text(SLOW.format(comment=""))
    proc = run([FLAKE8, "--isolated", "--select", "XLA", "train.py"], cwd=tmp_path)
    assert proc.returncode != 0
    assert "unknown key 'selcet'" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr


def test_the_plugin_is_registered_with_flake8():
    proc = run([FLAKE8, "--version"])
    assert "xlalint:" in proc.stdout


# ---- in-process: what a subprocess cannot observe (what is parsed, how often config is read)
@pytest.fixture
def checker_cls(monkeypatch):
    import xlalint_flake8

    monkeypatch.setattr(xlalint_flake8.XlaLintChecker, "_settings", None)
    return xlalint_flake8.XlaLintChecker


def test_files_without_torch_or_xla_are_not_parsed(checker_cls, monkeypatch):
    import libcst

    def no_parse(*a, **k):
        raise AssertionError("parsed a file that cannot hold a finding")

    monkeypatch.setattr(libcst, "parse_module", no_parse)
    lines = ["import numpy as np\n", "for x in data:\n", "    print(x.item())\n"]
    assert list(checker_cls(None, "plain.py", lines).run()) == []


def test_config_is_resolved_once_per_process(checker_cls, monkeypatch):
    import xlalint_flake8

    calls = []
    real = xlalint_flake8.find_config
    monkeypatch.setattr(xlalint_flake8, "find_config", lambda start: calls.append(start) or real(start))
    lines = SLOW.format(comment="").splitlines(keepends=True)
    for name in ("a.py", "b.py", "c.py"):
        found = list(checker_cls(None, name, lines).run())
        assert [(f[0], f[2].split()[0]) for f in found] == [(11, "XLA001")]
    assert len(calls) == 1


def test_a_tree_is_decided_once_not_once_per_file(checker_cls, monkeypatch, tmp_path):
    # flake8 hands the plugin one file at a time, and each file's findings depend on the whole project:
    # the first file decides every file of the project and the cache keeps them; the others read theirs
    # back (deciding the whole call graph per file, flake8 over torch's 2,131 files never finished)
    from xlalint.analysis import decision
    from xlalint.run.project import lint_files
    from xlalint.config import all_codes, build_settings, find_config

    root = tmp_path / "proj"
    shutil.copytree(PROJECTS / "trainer_callbacks", root)
    # its own [tool.xlalint] table: the settings' root (and the cache under it) is this copy, never a
    # configured folder above the temporary directory whose cache an earlier run filled
    with open(root / "pyproject.toml", "a") as fh:
        fh.write("\n[tool.xlalint]\n")
    monkeypatch.chdir(root)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))
    real = decision.decide
    decided = []
    monkeypatch.setattr(decision, "decide", lambda *a, **k: decided.append(a[1]) or real(*a, **k))
    rows = []
    for name in files:
        lines = Path(name).read_text().splitlines(keepends=True)
        rows += [(name, r[0], r[1] + 1, r[2].split()[0]) for r in checker_cls(None, name, lines).run()]
    assert len(decided) == 1 and len(decided[0]) == len(files)
    # what the CLI reports with every rule on (flake8 does the selecting)
    settings = dataclasses.replace(build_settings(find_config(".")), enabled=frozenset(all_codes()))
    expected = [(f.path, f.line, f.column, f.code) for f in lint_files(files, settings, jobs=1, cache=None)]
    assert sorted(rows) == sorted(expected) and len(rows) == 3
