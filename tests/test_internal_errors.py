"""No input loses a run (issue 34): an exception in a rule or a phase of xlalint is one XLA902 at the file,
naming the rule or the phase; every other finding is still reported and the exit status is 2, in the
command line, the flake8 plugin and the language server (tests/test_server.py). The crash sweep over
project layouts is tests/test_crash_sweep.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, assert_no_traceback, write
from xlalint.config import build_settings
from xlalint.run.project import lint_files
from xlalint.semantics.project import ProjectIndex

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins"), os.environ.get("PYTHONPATH", "")])}
ENV.pop("XLALINT_DEBUG", None)

# Runs the command line (or flake8) with one method of one rule raising: argv = rule code, the method
# ("resolve_project": its project step), then the command's own arguments.
INJECT = textwrap.dedent("""\
    import sys
    from xlalint.rules import rules_by_code
    code, method, tool = sys.argv[1:4]
    def boom(*args, **kwargs):
        raise ZeroDivisionError("injected for a test")
    rule = rules_by_code()[code]
    setattr(rule, method, classmethod(boom) if method == "resolve_project" else boom)
    if tool == "flake8":
        from flake8.main.cli import main
    else:
        from xlalint.cli import main
    sys.exit(main(sys.argv[4:]))
""")

PROJECT = {
    "helpers.py": "import torch\n\n\ndef window(x, n):\n    return x[:n]\n",
    "train.py": textwrap.dedent("""\
        import torch
        import torch_xla
        from helpers import window


        def train(model, loader):
            for step, x in enumerate(loader):
                out = window(model(x), step)
                print(f"{out}")
                print(out.item())
                torch_xla.sync()
    """),
    "pyproject.toml": "[project]\nname = 'p'\n",
}


def _xlalint(cwd, *args, inject=None, env=None):
    cmd = [sys.executable, "-c", INJECT, *inject, "xlalint"] if inject else [sys.executable, "-m", "xlalint"]
    r = subprocess.run(cmd + ["--output-format", "json", *args], cwd=cwd, capture_output=True, text=True,
                       env={**ENV, **(env or {})}, timeout=120)
    return r, [(f["filename"], f["line"], f["code"], f["message"]) for f in json.loads(r.stdout or "[]")]


def _without(found, code):
    return [f for f in found if f[2] != code]


# ---------------------------------------------------------------------------------------- the cause
@pytest.mark.parametrize("layout", [
    ["__init__.py", "__main__.py", "core.py"],  # a package that is its own root (issue 34)
    ["x.py", "x.ipynb"],
    ["pkg.py", "pkg/__init__.py"],
    ["x.py", "src/x.py"],
])
def test_every_file_of_a_project_has_a_module_name_of_its_own(tmp_path, layout):
    paths = [str(tmp_path / p) for p in layout]
    index = ProjectIndex(str(tmp_path), paths)
    names = [index.module_of(p)[0] for p in paths]
    assert len(set(names)) == len(names), names
    if "__init__.py" in layout:  # the package keeps the name imports reach it by
        assert index.module_of(str(tmp_path / "__init__.py")) == ("__main__", True)


def test_the_reproduction_of_issue_34_lints_cleanly(tmp_path):
    from xlalint.semantics.project import find_root, marked_root

    if marked_root(str(tmp_path)) is not None:
        pytest.skip("a project marker above the temporary directory")
    pkg = write(tmp_path / "pkg", {"__init__.py": "def g(a):\n    pass\n\n\ndef f(a):\n    g(a)\n", "__main__.py": ""})
    assert find_root(str(pkg / "__init__.py")) == str(pkg)  # the package is its own root
    r = subprocess.run([sys.executable, "-m", "xlalint", "--no-cache", "pkg"], cwd=tmp_path, capture_output=True,
                       text=True, env=ENV, timeout=120)
    assert_no_traceback(r)
    assert (r.returncode, r.stdout.strip()) == (0, "All checks passed (2 files checked).")


# ---------------------------------------------------------------------------------------- the CLI
def test_a_rule_that_raises_in_its_walk_is_one_xla902_per_file_and_the_rest_is_reported(tmp_path):
    write(tmp_path, PROJECT)
    normal, found = _xlalint(tmp_path, "--no-cache", ".")
    assert normal.returncode == 1 and {f[2] for f in found} >= {"XLA001", "XLA006", "XLA009"}
    r, broken = _xlalint(tmp_path, "--no-cache", ".", inject=["XLA006", "on_Call"])
    assert_no_traceback(r)
    assert r.returncode == 2
    internal = [f for f in broken if f[2] == "XLA902"]
    assert [(f[0], f[1]) for f in internal] == [("train.py", 1)]  # helpers.py has no call: on_Call never ran
    for f in internal:
        assert "internal error in rule XLA006 (per-step-format): ZeroDivisionError: injected for a test" in f[3]
        assert "report it" in f[3]
    # everything else is what a run without that rule reports
    assert _without(broken, "XLA902") == _without(found, "XLA006")
    ignored = _xlalint(tmp_path, "--no-cache", "--extend-ignore", "XLA006", ".")[1]
    assert _without(broken, "XLA902") == ignored


def test_a_rule_that_raises_in_its_project_step(tmp_path):
    write(tmp_path, PROJECT)
    found = _xlalint(tmp_path, "--no-cache", ".")[1]
    r, broken = _xlalint(tmp_path, "--no-cache", ".", inject=["XLA009", "resolve_project"])
    assert_no_traceback(r)
    assert r.returncode == 2
    internal = [f for f in broken if f[2] == "XLA902"]
    assert {f[0] for f in internal} == {"helpers.py", "train.py"}
    assert all("rule XLA009 (step-varying-python-int), deciding over the whole project" in f[3] for f in internal)
    # only the findings the project step decides are gone (helpers.py's x[:n], passed the loop counter)
    lost = [f for f in found if f not in broken]
    assert [(f[0], f[2]) for f in lost] == [("helpers.py", "XLA009")]


def test_the_traceback_is_printed_only_when_asked_and_an_internal_error_is_never_cached(tmp_path):
    write(tmp_path, PROJECT)
    cache = ["--cache-dir", str(tmp_path / "cache")]
    quiet, first = _xlalint(tmp_path, *cache, ".", inject=["XLA006", "on_Call"])
    assert "Traceback" not in quiet.stderr and any(f[2] == "XLA902" for f in first)
    # the cache kept nothing of it: the next run meets the error again, and can show it
    shown, again = _xlalint(tmp_path, *cache, "--show-internal-errors", ".", inject=["XLA006", "on_Call"])
    assert again == first and shown.returncode == 2
    assert "Traceback" in shown.stderr and "ZeroDivisionError: injected for a test" in shown.stderr
    assert "internal error in rule XLA006 (per-step-format)" in shown.stderr
    debug, _ = _xlalint(tmp_path, *cache, ".", inject=["XLA006", "on_Call"], env={"XLALINT_DEBUG": "1"})
    assert "Traceback" in debug.stderr
    # fixed (no injection): the findings come back, from a fresh analysis
    ok, fixed = _xlalint(tmp_path, *cache, ".")
    assert ok.returncode == 1 and not any(f[2] == "XLA902" for f in fixed)


def test_a_fix_that_raises_leaves_the_file_and_reports_xla902(tmp_path):
    text = ("import torch\nimport torch_xla\ntotal = 0.0\nfor x, y in loader:\n    loss = model(x).sum()\n"
            "    loss.backward()\n    optimizer.step()\n    total += loss.item()\n    torch_xla.sync()\n")
    write(tmp_path, {"a.py": text, "b.py": text})
    code = ("import sys, xlalint.fix as f\nreal = f.fix_source\n"
            "def broken(text, path, *a):\n    if path.endswith('a.py'):\n        raise KeyError('injected')\n"
            "    return real(text, path, *a)\nf.fix_source = broken\n"
            "from xlalint.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    r = subprocess.run([sys.executable, "-c", code, "--no-cache", "--fix", "--unsafe-fixes", "--output-format",
                        "concise", "a.py", "b.py"], cwd=tmp_path, capture_output=True, text=True, env=ENV, timeout=120)
    assert_no_traceback(r)
    assert r.returncode == 2
    assert (tmp_path / "a.py").read_text() == text and (tmp_path / "b.py").read_text() != text  # b was fixed
    assert "a.py:1:1: XLA902 internal error in fixing the file: KeyError: 'injected'" in r.stdout
    assert "a.py:8:14: XLA001" in r.stdout


# ---------------------------------------------------------------------------------------- phases
def test_the_project_pass_for_one_module_raising(tmp_path, monkeypatch):
    from xlalint.semantics import project

    write(tmp_path, PROJECT)
    files = [str(tmp_path / "helpers.py"), str(tmp_path / "train.py")]
    settings = build_settings(None)
    found = lint_files(files, settings, jobs=1, cache=None)
    real = project.Program._load

    def load(self, mod, s, path):
        if mod == "helpers":
            raise IndexError("injected for a test")
        return real(self, mod, s, path)

    monkeypatch.setattr(project.Program, "_load", load)
    broken = lint_files(files, settings, jobs=1, cache=None)
    internal = [f for f in broken if f.code == "XLA902"]
    assert [(os.path.basename(f.path), f.line) for f in internal] == [("helpers.py", 1)]
    assert "the project pass for the module: IndexError: injected for a test" in internal[0].message
    # train.py's own findings are all there; helpers.py's depended on the project
    assert [f for f in broken if f.path.endswith("train.py")] == [f for f in found if f.path.endswith("train.py")]


def test_a_notebook_whose_findings_cannot_be_mapped_to_its_cells(tmp_path, monkeypatch):
    import nbformat

    from xlalint.analysis import decision

    loop = "import torch\nfor x in loader:\n    print(model(x).item())\n"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(loop)])
    write(tmp_path, {"n.ipynb": nbformat.writes(nb), "t.py": loop, "pyproject.toml": ""})
    files = [str(tmp_path / "n.ipynb"), str(tmp_path / "t.py")]

    def broken(findings, table):
        raise ValueError("injected for a test")

    monkeypatch.setattr(decision, "map_findings", broken)
    found = lint_files(files, build_settings(None), jobs=1, cache=None)
    assert [(os.path.basename(f.path), f.line, f.code) for f in found] == [
        ("n.ipynb", 1, "XLA902"), ("t.py", 3, "XLA001")]
    assert "mapping the findings to the notebook's cells: ValueError: injected for a test" in found[0].message


def test_the_semantic_model_itself_raising_costs_that_file_only(tmp_path, monkeypatch):
    from xlalint.semantics.model import SemanticModel

    write(tmp_path, PROJECT)
    files = [str(tmp_path / "helpers.py"), str(tmp_path / "train.py")]
    real = SemanticModel.run

    def run(self):
        if self.module_name == "helpers":
            raise RuntimeError("injected for a test")
        return real(self)

    monkeypatch.setattr(SemanticModel, "run", run)
    found = lint_files(files, build_settings(None), jobs=1, cache=None)
    helpers = [f for f in found if f.path.endswith("helpers.py")]
    assert [(f.line, f.code) for f in helpers] == [(1, "XLA902")]
    assert "the semantic model's walk: RuntimeError: injected for a test" in helpers[0].message
    assert "XLA001" in {f.code for f in found if f.path.endswith("train.py")}


# ---------------------------------------------------------------------------------------- flake8
def test_flake8_reports_one_xla902_for_the_file_and_the_other_findings(tmp_path):
    write(tmp_path, PROJECT)
    r = subprocess.run([sys.executable, "-c", INJECT, "XLA006", "on_Call", "flake8", "--select", "XLA",
                        "helpers.py", "train.py"], cwd=tmp_path, capture_output=True, text=True, env=ENV, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1  # flake8's status for findings
    rows = sorted(ln.split(" ")[0].removeprefix("./") + " " + ln.split(" ")[1] for ln in r.stdout.splitlines())
    assert rows == sorted(["helpers.py:5:12: XLA009", "train.py:1:1: XLA902", "train.py:10:15: XLA001"]), r.stdout
    assert "internal error in rule XLA006 (per-step-format)" in r.stdout


def test_a_phase_that_raises_after_the_rules_ran_is_blamed_on_the_phase_not_on_a_rule(tmp_path, monkeypatch):
    # the declarations are computed after the rules' walk: an error there is the phase's, once, and is
    # not pinned on the last rule the walk ran (a loop variable of the code that caught it)
    from xlalint.analysis import module

    write(tmp_path, PROJECT)
    files = [str(tmp_path / "helpers.py"), str(tmp_path / "train.py")]

    def broken(text, mod, is_package):
        raise OSError("injected for a test")

    monkeypatch.setattr(module, "declarations", broken)
    found = lint_files(files, build_settings(None), jobs=1, cache=None)
    assert [(os.path.basename(f.path), f.code) for f in found] == [("helpers.py", "XLA902"), ("train.py", "XLA902")]
    assert all("internal error in the module's declarations: OSError: injected for a test" in f.message for f in found)
