"""ruff's habits, which users bring with them: excludes, .gitignore, the nearest config per file,
file-level suppressions in comments only, standard input, the output options, colour, --verify's help."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import CLEAN, HOST_READ, ROOT, assert_no_traceback, finding_lines, run_xlalint, write
from xlalint.analysis.source import lint_source

CONFIG = "[tool.xlalint]\nextend-exclude = [\"third_party\", \"gen/*.py\"]\n"


# ------------------------------------------------------------------------------------------ excludes
@pytest.mark.parametrize("named", [
    "third_party/x.py",            # the README's own example: a bare name...
    "src/third_party/deep/y.py",   # ...matches a folder of that name at any depth
    "build/z.py",                  # a default exclude
    "gen/g.py",                    # a pattern with a slash, relative to the project root
])
def test_force_exclude_skips_named_files_in_excluded_folders(tmp_path, named):
    write(tmp_path, {"pyproject.toml": CONFIG, named: HOST_READ, "ok.py": HOST_READ})
    # what pre-commit runs: the staged files by name, with --force-exclude
    r = run_xlalint("--force-exclude", "--output-format", "concise", named, "ok.py", cwd=tmp_path)
    assert_no_traceback(r)
    assert finding_lines(r.stdout) == ["ok.py:4:9: XLA001"], r.stdout
    # an absolute path, from another directory, finds the same config and the same exclude
    r = run_xlalint("--force-exclude", tmp_path / named, cwd=tmp_path.parent)
    assert (r.returncode, finding_lines(r.stdout)) == (0, []), r.stdout
    # without --force-exclude a file named on the command line is linted (as in ruff)
    r = run_xlalint("--output-format", "concise", named, cwd=tmp_path)
    assert finding_lines(r.stdout) == [f"{named}:4:9: XLA001"], r.stdout


def test_walk_skips_bare_name_excludes_at_any_depth(tmp_path):
    write(tmp_path, {"pyproject.toml": CONFIG, "src/third_party/a.py": HOST_READ, "src/b.py": HOST_READ,
                     "gen/g.py": HOST_READ, "sub/gen/g.py": HOST_READ})
    r = run_xlalint("-q", "--output-format", "concise", cwd=tmp_path)
    # `gen/*.py` has a slash: it is anchored at the project root, so sub/gen/g.py is linted
    assert finding_lines(r.stdout) == ["src/b.py:4:9: XLA001", "sub/gen/g.py:4:9: XLA001"], r.stdout


def test_force_exclude_applies_to_the_stdin_filename(tmp_path):
    write(tmp_path, {"pyproject.toml": CONFIG})
    r = run_xlalint("--force-exclude", "--stdin-filename", "third_party/t.py", input=HOST_READ, cwd=tmp_path)
    assert (r.returncode, finding_lines(r.stdout)) == (0, []), r.stdout


# ----------------------------------------------------------------------------------------- gitignore
def _git_init(path):
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True)


def test_gitignore_is_respected_in_a_git_work_tree(tmp_path):
    write(tmp_path, {
        ".gitignore": "ignored/\n*_gen.py\n!keep_gen.py\n/rooted.py\n",
        "ignored/a.py": HOST_READ, "x_gen.py": HOST_READ, "keep_gen.py": HOST_READ,
        "rooted.py": HOST_READ, "sub/rooted.py": HOST_READ, "sub/.gitignore": "local.py\n",
        "sub/local.py": HOST_READ, "main.py": HOST_READ,
    })
    outside = run_xlalint("-q", "--output-format", "concise", cwd=tmp_path)
    assert len(finding_lines(outside.stdout)) == 7  # not a git work tree: .gitignore means nothing
    _git_init(tmp_path)
    r = run_xlalint("-q", "--output-format", "concise", cwd=tmp_path)
    assert finding_lines(r.stdout) == ["keep_gen.py:4:9: XLA001", "main.py:4:9: XLA001", "sub/rooted.py:4:9: XLA001"], r.stdout
    # a file named on the command line is linted whatever .gitignore says (as in ruff)
    r = run_xlalint("-q", "--output-format", "concise", "x_gen.py", cwd=tmp_path)
    assert finding_lines(r.stdout) == ["x_gen.py:4:9: XLA001"]
    r = run_xlalint("-q", "--no-respect-gitignore", "--output-format", "concise", cwd=tmp_path)
    assert len(finding_lines(r.stdout)) == 7
    write(tmp_path, {"pyproject.toml": "[tool.xlalint]\nrespect-gitignore = false\n"})
    r = run_xlalint("-q", "--output-format", "concise", cwd=tmp_path)
    assert len(finding_lines(r.stdout)) == 7


# ------------------------------------------------------------------------------- nearest config
def test_the_nearest_config_decides_for_each_file_whatever_the_argument_order(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "[tool.xlalint]\nignore = [\"XLA006\"]\n",
        "a/t.py": HOST_READ + '    print(f"{loss}")\n',
        "b/pyproject.toml": "[tool.xlalint]\nignore = [\"XLA001\"]\n",
        "b/t.py": HOST_READ + '    print(f"{loss}")\n',
        "c/pyproject.toml": "[project]\nname = 'c'\n",  # no [tool.xlalint]: the parent's config applies
        "c/t.py": HOST_READ + '    print(f"{loss}")\n',
    })
    expected = ["a/t.py:4:9: XLA001", "b/t.py:5:11: XLA006", "c/t.py:4:9: XLA001"]
    for order in (("a", "b", "c"), ("b", "c", "a"), ("c/t.py", "b/t.py", "a/t.py")):
        r = run_xlalint("-q", "--output-format", "concise", *order, cwd=tmp_path)
        assert finding_lines(r.stdout) == expected, (order, r.stdout)
    r = run_xlalint("-q", "--output-format", "concise", cwd=tmp_path)
    assert finding_lines(r.stdout) == expected
    # --config FILE: one config for every file
    r = run_xlalint("-q", "--output-format", "concise", "--config", "b/pyproject.toml", "a", "c", cwd=tmp_path)
    assert finding_lines(r.stdout) == ["a/t.py:5:11: XLA006", "c/t.py:5:11: XLA006"], r.stdout


def test_extend_ignore_on_the_command_line(tmp_path):
    write(tmp_path, {"t.py": HOST_READ + '    print(f"{loss}")\n'})
    r = run_xlalint("-q", "--output-format", "concise", "--extend-ignore", "XLA006", "t.py", cwd=tmp_path)
    assert finding_lines(r.stdout) == ["t.py:4:9: XLA001"]
    r = run_xlalint("--extend-ignore", "XLA1234", "t.py", cwd=tmp_path)
    assert r.returncode == 2 and "XLA1234" in r.stderr


# ---------------------------------------------------------------------- file-level suppressions
@pytest.mark.parametrize("text", [
    'NOTE = "# xlalint: skip-file"\n',
    "NOTE = '''\n# xlalint: skip-file\n'''\n",
    'NOTE = "# xlalint: noqa"\n',
    'DOC = f"{1} # xlalint: noqa: XLA001"\n',
])
def test_file_directives_in_strings_do_nothing(text):
    assert [f.code for f in lint_source(text + HOST_READ, "t.py")] == ["XLA001"]


@pytest.mark.parametrize("comment, left", [
    ("# xlalint: skip-file", []),
    ("# xlalint: noqa", []),
    ("#xlalint:noqa", []),
    ("# xlalint: noqa: XLA001", ["XLA006"]),
    ("# xlalint: noqa: XLA006, XLA001", []),
    ("# xlalint: noqa: XLA0", []),
    ("# xlalint: noqa: XLA002", ["XLA001", "XLA006"]),
    ("# not a directive: xlalint skip-file", ["XLA001", "XLA006"]),
])
def test_file_directives_in_comments(comment, left):
    src = HOST_READ + '    print(f"{loss}")  ' + comment + "\n"
    assert [f.code for f in lint_source(src, "t.py")] == left


# ----------------------------------------------------------------------------- standard input
def test_stdin_filename_alone_reads_standard_input(tmp_path):
    write(tmp_path, {"other.py": HOST_READ})  # must not be linted: no path means standard input here
    r = run_xlalint("--output-format", "concise", "--stdin-filename", "train.py", input=HOST_READ, cwd=tmp_path)
    assert finding_lines(r.stdout) == ["train.py:4:9: XLA001"], r.stdout
    assert r.stdout.splitlines()[-1] == "Found 1 finding in 1 file checked."


# ------------------------------------------------------------------------------------ output
def test_output_file(tmp_path):
    write(tmp_path, {"t.py": HOST_READ})
    r = run_xlalint("--output-format", "json", "-o", "report.json", "t.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (1, "")
    assert [f["code"] for f in json.loads((tmp_path / "report.json").read_text())] == ["XLA001"]
    r = run_xlalint("--output-file", "nodir/report.json", "t.py", cwd=tmp_path)
    assert r.returncode == 2 and "nodir/report.json" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("env, args, coloured", [
    ({}, (), False),                                    # a pipe
    ({"FORCE_COLOR": "1"}, (), True),
    ({"NO_COLOR": "1"}, ("--color", "always"), True),   # the flag decides first
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, (), False),
    ({"FORCE_COLOR": "1"}, ("--color", "never"), False),
])
def test_color_environment(tmp_path, env, args, coloured):
    write(tmp_path, {"t.py": HOST_READ})
    r = run_xlalint(*args, "t.py", cwd=tmp_path, env=env)
    assert ("\033[" in r.stdout) == coloured


# ----------------------------------------------------------------------------------- --verify
def test_verify_without_torch_xla_says_how_to_install_it(tmp_path):
    write(tmp_path, {"train.py": CLEAN})
    code = (
        "import sys; sys.modules['torch_xla'] = None\n"  # as if it were not installed
        "from xlalint.cli import main; sys.exit(main(['--verify', 'train.py']))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'plugins'}"})
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("xlalint --verify train.py: cannot run it: ")
    assert "pip install '.[verify]'" in r.stderr and "Linux x86_64" in r.stderr and "macOS" in r.stderr
