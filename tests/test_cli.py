"""The command line, run as users run it: the real console script in a subprocess."""

from __future__ import annotations

import json

import pytest

from conftest import CLEAN, HOST_READ, assert_no_traceback, finding_lines, run_xlalint, write
from xlalint import __version__
from xlalint.rules import all_rules

# XLA001 at line 4 and XLA006 (a tensor formatted into a string every step) at line 5
TWO_RULES = HOST_READ + '    print(f"loss {loss}")\n'


def test_default_path_is_cwd_and_walk_skips_default_and_extra_excludes(tmp_path):
    write(tmp_path, {
        "a.py": HOST_READ,
        "pkg/b.py": HOST_READ,
        "notes.txt": HOST_READ,
        "pkg/c.pyi": HOST_READ,
        **{f"{d}/x.py": HOST_READ for d in (".git", ".venv", "venv", "build", "dist", "__pycache__", "node_modules")},
        "gen/skipme.py": HOST_READ,
        "pkg/skip_this.py": HOST_READ,
    })
    r = run_xlalint("--extend-exclude", "gen,skip_*.py", cwd=tmp_path)
    assert_no_traceback(r)
    assert finding_lines(r.stdout) == ["a.py:4:9: XLA001", "pkg/b.py:4:9: XLA001"], r.stdout
    assert r.returncode == 1
    assert "Found 2 findings in 2 files checked." in r.stdout


def test_exclude_replaces_the_defaults(tmp_path):
    write(tmp_path, {"a.py": HOST_READ, "build/b.py": HOST_READ, "other/c.py": HOST_READ})
    r = run_xlalint("-q", "--exclude", "other", ".", cwd=tmp_path)
    assert finding_lines(r.stdout) == ["a.py:4:9: XLA001", "build/b.py:4:9: XLA001"], r.stdout


def test_explicit_file_is_linted_even_if_excluded(tmp_path):
    write(tmp_path, {"build/b.py": HOST_READ})
    r = run_xlalint("-q", "build/b.py", cwd=tmp_path)
    assert finding_lines(r.stdout) == ["build/b.py:4:9: XLA001"], r.stdout


def test_stdin_with_and_without_a_filename(tmp_path):
    r = run_xlalint("-q", "-", input=HOST_READ, cwd=tmp_path)
    assert finding_lines(r.stdout) == ["-:4:9: XLA001"], r.stdout
    assert r.returncode == 1
    r = run_xlalint("-q", "--stdin-filename", "train.py", "-", input=HOST_READ, cwd=tmp_path)
    assert finding_lines(r.stdout) == ["train.py:4:9: XLA001"], r.stdout


def test_stdin_filename_gets_per_file_ignores(tmp_path):
    write(tmp_path, {"pyproject.toml": '[tool.xlalint]\nper-file-ignores = {"scripts/*" = ["XLA001"]}\n'})
    r = run_xlalint("-q", "--stdin-filename", "scripts/t.py", "-", input=HOST_READ, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("args, expected", [
    ((), {"XLA001", "XLA006"}),
    (("--select", "XLA001"), {"XLA001"}),
    (("--select", "XLA0"), {"XLA001", "XLA006"}),
    (("--select", "ALL", "--ignore", "XLA00"), set()),
    (("--ignore", "XLA006"), {"XLA001"}),
    (("--select", "XLA006", "--extend-select", "XLA001"), {"XLA001", "XLA006"}),
    (("--select", "XLA9"), set()),
    (("--select", "xla001"), {"XLA001"}),
])
def test_rule_selection(tmp_path, args, expected):
    write(tmp_path, {"t.py": TWO_RULES})
    r = run_xlalint("--format", "json", *args, "t.py", cwd=tmp_path)
    assert_no_traceback(r)
    codes = {f["code"] for f in json.loads(r.stdout)}
    assert codes == expected
    assert r.returncode == (1 if expected else 0)


def test_unknown_selector_is_a_usage_error(tmp_path):
    write(tmp_path, {"t.py": HOST_READ})
    r = run_xlalint("--select", "XLA1234", "t.py", cwd=tmp_path)
    assert r.returncode == 2
    assert_no_traceback(r)
    assert "XLA1234" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_full_format_is_the_default_and_concise_is_one_line(tmp_path):
    write(tmp_path, {"t.py": HOST_READ})
    r = run_xlalint("t.py", cwd=tmp_path)
    assert r.stdout.splitlines() == [
        "XLA001 `loss.item()` reads one value to the host every step",
        " --> t.py:4:9",
        "  |",
        "2 | for x in loader:",
        "3 |     loss = model(x).sum()",
        "4 |     v = loss.item()",
        "  |         ^^^^^^^^^^^",
        "  |",
        "cost: 1 extra graph execution + 1 device-to-host transfer each time (the graph is cut and run early)",
        "help: accumulate on the device (`total += loss.detach()`) and read once after the loop, or read it in `xm.add_step_closure`",
        "",
        "Found 1 finding in 1 file checked.",
    ], r.stdout
    assert "\033[" not in r.stdout  # a pipe is not a terminal
    r = run_xlalint("-q", "t.py", cwd=tmp_path)
    assert "Found" not in r.stdout and finding_lines(r.stdout) == ["t.py:4:9: XLA001"]
    for fmt in ("concise", "text"):  # text: the old name of the one-line format
        r = run_xlalint("--output-format", fmt, "t.py", cwd=tmp_path)
        lines = r.stdout.splitlines()
        assert lines[0].startswith("t.py:4:9: XLA001 `loss.item()` reads one value to the host every step: 1 extra"), lines
        assert lines[-1] == "Found 1 finding in 1 file checked."


def test_frequencies_read_right(tmp_path):
    # every N steps: the cost is said per occurrence ("each time"), never "per step"
    write(tmp_path, {"t.py": HOST_READ.replace("    v = loss.item()\n", "    if step % args.log_every == 0:\n        v = loss.item()\n")})
    r = run_xlalint("--output-format", "concise", "t.py", cwd=tmp_path)
    assert "every `args.log_every` steps: 1 extra graph execution + 1 device-to-host transfer each time" in r.stdout, r.stdout
    assert "per step" not in r.stdout


def test_full_format_on_standard_input_shows_the_source(tmp_path):
    r = run_xlalint("--stdin-filename", "train.py", input=HOST_READ, cwd=tmp_path)
    assert " --> train.py:4:9" in r.stdout and "4 |     v = loss.item()" in r.stdout, r.stdout


def test_color_always_and_never(tmp_path):
    write(tmp_path, {"t.py": HOST_READ})
    r = run_xlalint("--color", "always", "t.py", cwd=tmp_path)
    assert "\033[" in r.stdout and "XLA001" in r.stdout
    r = run_xlalint("--color", "never", "t.py", cwd=tmp_path)
    assert "\033[" not in r.stdout


def test_json_format_fields(tmp_path):
    write(tmp_path, {"t.py": HOST_READ})
    r = run_xlalint("--format", "json", "t.py", cwd=tmp_path)
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert isinstance(data, list) and len(data) == 1
    f = data[0]
    assert set(f) == {"code", "name", "message", "headline", "cost", "help", "filename", "line", "column",
                      "end_line", "end_column", "location", "end_location", "severity", "fix"}
    assert f["fix"] is None  # `v = loss.item()` has no automatic fix
    assert f["headline"] == "`loss.item()` reads one value to the host every step"
    assert f["message"] == f"{f['headline']}: {f['cost']}. Fix: {f['help']}"
    assert (f["code"], f["name"], f["filename"]) == ("XLA001", "host-read", "t.py")
    # `loss.item()` spans columns 9..20 of line 4; the end is exclusive
    assert (f["line"], f["column"], f["end_line"], f["end_column"]) == (4, 9, 4, 20)
    assert f["severity"] in ("warning", "error") and f["message"]
    r = run_xlalint("--format", "json", "-", input=CLEAN, cwd=tmp_path)
    assert (r.returncode, json.loads(r.stdout)) == (0, [])


def test_statistics(tmp_path):
    write(tmp_path, {"a.py": TWO_RULES, "b.py": HOST_READ})
    r = run_xlalint("--statistics", ".", cwd=tmp_path)
    assert r.returncode == 1
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert [(n.strip(), code, name.split()[-1]) for n, code, name in rows] == [
        ("2", "XLA001", "host-read"), ("1", "XLA006", "per-step-format")]
    r = run_xlalint("--statistics", "--output-format", "json", ".", cwd=tmp_path)
    assert r.returncode == 1
    assert json.loads(r.stdout) == [
        {"code": "XLA001", "name": "host-read", "count": 2, "fixable": False, "fixable_count": 0},
        {"code": "XLA006", "name": "per-step-format", "count": 1, "fixable": False, "fixable_count": 0},
    ]


def test_exit_zero(tmp_path):
    write(tmp_path, {"t.py": HOST_READ})
    r = run_xlalint("--exit-zero", "t.py", cwd=tmp_path)
    assert r.returncode == 0 and "XLA001" in r.stdout


def test_version_list_rules_explain():
    for flag in ("--version", "-V"):
        r = run_xlalint(flag)
        assert (r.returncode, r.stdout.strip()) == (0, f"xlalint {__version__}")
    r = run_xlalint("--list-rules")
    assert r.returncode == 0
    listed = [line.split()[0] for line in r.stdout.splitlines()]
    assert listed == [rule.code for rule in all_rules()]
    r = run_xlalint("--explain", "xla001")
    assert r.returncode == 0 and r.stdout.startswith("XLA001 (host-read)")
    by_name = run_xlalint("--explain", "host-read")
    assert (by_name.returncode, by_name.stdout) == (0, r.stdout)
    r = run_xlalint("--explain", "XLA999")
    assert r.returncode == 2 and r.stdout == ""
    assert "XLA999" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_missing_path_exits_2_but_lints_the_others(tmp_path):
    write(tmp_path, {"t.py": HOST_READ})
    r = run_xlalint("nope.py", "t.py", "nodir/", cwd=tmp_path)
    assert_no_traceback(r)
    assert r.returncode == 2
    assert finding_lines(r.stdout) == ["t.py:4:9: XLA001"]
    assert "nope.py: no such file or directory" in r.stderr
    assert "nodir/: no such file or directory" in r.stderr
    assert "2 paths not found" in r.stdout


def test_a_missing_path_is_never_all_checks_passed(tmp_path):
    for args in (("nope.py",), ("nope.py", "--output-format", "concise"), ("nope.py", "--stdin-filename", "x.py")):
        r = run_xlalint(*args, cwd=tmp_path, input=CLEAN)
        assert_no_traceback(r)
        assert r.returncode == 2, args
        assert "All checks passed" not in r.stdout, args
        assert r.stderr.strip() == "xlalint: error: nope.py: no such file or directory"


def test_unknown_option_is_a_usage_error():
    r = run_xlalint("--no-such-flag")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    r = run_xlalint("--format", "xml")
    assert r.returncode == 2


def test_python_dash_m_works_too(tmp_path):
    import subprocess
    import sys

    write(tmp_path, {"t.py": HOST_READ})
    r = subprocess.run([sys.executable, "-m", "xlalint", "-q", "t.py"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 1 and finding_lines(r.stdout) == ["t.py:4:9: XLA001"]
