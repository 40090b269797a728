"""``[tool.xlalint]`` in the nearest pyproject.toml (or ``--config FILE``), and its errors."""

from __future__ import annotations

import json

import pytest

from conftest import CLEAN, HOST_READ, assert_no_traceback, finding_lines, run_xlalint, write

TWO_RULES = HOST_READ + '    print(f"loss {loss}")\n'


def codes_by_file(stdout: str) -> dict:
    out: dict = {}
    for f in json.loads(stdout):
        out.setdefault(f["filename"], set()).add(f["code"])
    return out


def test_nearest_pyproject_upward_from_the_first_path(tmp_path):
    # the config lives in proj/, xlalint runs from tmp_path: found by walking up from proj/src/
    write(tmp_path, {
        "proj/pyproject.toml": "[tool.xlalint]\nselect = [\"XLA0\"]\nignore = [\"XLA006\"]\n",
        "proj/src/t.py": TWO_RULES,
        # a pyproject without [tool.xlalint] closer to the file is skipped
        "proj/src/pyproject.toml": "[project]\nname = 'x'\n",
    })
    r = run_xlalint("--format", "json", "proj/src", cwd=tmp_path)
    assert_no_traceback(r)
    assert codes_by_file(r.stdout) == {"proj/src/t.py": {"XLA001"}}


def test_every_key(tmp_path):
    write(tmp_path, {
        "pyproject.toml": (
            "[tool.xlalint]\n"
            "select = [\"XLA001\"]\n"
            "extend-select = [\"XLA006\"]\n"
            "extend-ignore = []\n"
            "exclude = [\"skipped\"]\n"
            "extend-exclude = [\"gen_*.py\"]\n"
            "max-file-size = 200\n"
            "[tool.xlalint.per-file-ignores]\n"
            "\"tests/*\" = [\"XLA001\"]\n"
            "\"scripts/**\" = \"XLA0\"\n"
        ),
        "a.py": TWO_RULES,
        "tests/check_a.py": TWO_RULES,  # (a test_*.py is a unit test: no findings at all)
        "scripts/deep/s.py": TWO_RULES,
        "skipped/x.py": TWO_RULES,
        "build/kept.py": HOST_READ,  # exclude replaced the defaults
        "gen_table.py": TWO_RULES,
        "big.py": HOST_READ + "# padding\n" * 20,
    })
    r = run_xlalint("--format", "json", ".", cwd=tmp_path)
    assert_no_traceback(r)
    assert codes_by_file(r.stdout) == {
        "a.py": {"XLA001", "XLA006"},
        "tests/check_a.py": {"XLA006"},
        "build/kept.py": {"XLA001"},
        "big.py": {"XLA901"},
    }


def test_extend_ignore_and_command_line_over_config(tmp_path):
    write(tmp_path, {"pyproject.toml": "[tool.xlalint]\nextend-ignore = [\"XLA006\"]\n", "t.py": TWO_RULES})
    r = run_xlalint("--format", "json", "t.py", cwd=tmp_path)
    assert codes_by_file(r.stdout) == {"t.py": {"XLA001"}}
    r = run_xlalint("--format", "json", "--select", "XLA006", "t.py", cwd=tmp_path)
    assert codes_by_file(r.stdout) == {"t.py": {"XLA006"}}


def test_config_option_and_isolated(tmp_path):
    write(tmp_path, {
        "pyproject.toml": "[tool.xlalint]\nselect = [\"XLA006\"]\n",
        "other.toml": "[tool.xlalint]\nselect = [\"XLA001\"]\n",
        "t.py": TWO_RULES,
    })
    r = run_xlalint("--format", "json", "--config", "other.toml", "t.py", cwd=tmp_path)
    assert codes_by_file(r.stdout) == {"t.py": {"XLA001"}}
    r = run_xlalint("--format", "json", "--isolated", "t.py", cwd=tmp_path)
    assert codes_by_file(r.stdout) == {"t.py": {"XLA001", "XLA006"}}
    r = run_xlalint("--config", "missing.toml", "t.py", cwd=tmp_path)
    assert r.returncode == 2 and "missing.toml" in r.stderr
    assert_no_traceback(r)


BAD_CONFIGS = {
    "unknown-key": ("[tool.xlalint]\nselct = [\"XLA001\"]\n", "'selct'"),
    "unknown-code": ("[tool.xlalint]\nselect = [\"XLA999\"]\n", "XLA999"),
    "unknown-code-ignore": ("[tool.xlalint]\nignore = [\"E501\"]\n", "E501"),
    "unknown-code-per-file": ("[tool.xlalint.per-file-ignores]\n\"a/*\" = [\"XLA777\"]\n", "XLA777"),
    "select-not-a-list": ("[tool.xlalint]\nselect = \"XLA001\"\n", "select"),
    "exclude-item-not-a-string": ("[tool.xlalint]\nexclude = [1]\n", "exclude"),
    "extend-exclude-not-a-list": ("[tool.xlalint]\nextend-exclude = \"build\"\n", "extend-exclude"),
    "max-file-size-bool": ("[tool.xlalint]\nmax-file-size = true\n", "max-file-size"),
    "max-file-size-negative": ("[tool.xlalint]\nmax-file-size = -5\n", "max-file-size"),
    "per-file-ignores-not-codes": ("[tool.xlalint.per-file-ignores]\n\"a/*\" = 3\n", "per-file-ignores"),
    "table-not-a-table": ("[tool]\nxlalint = 3\n", "[tool.xlalint]"),
    "invalid-toml": ("[tool.xlalint\nselect = [\n", "invalid TOML"),
}


@pytest.mark.parametrize("name", list(BAD_CONFIGS))
def test_bad_config_is_one_line_and_exit_2(tmp_path, name):
    text, culprit = BAD_CONFIGS[name]
    write(tmp_path, {"pyproject.toml": text, "t.py": HOST_READ})
    r = run_xlalint(".", cwd=tmp_path)
    assert_no_traceback(r)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xlalint: error: "), r.stderr
    assert culprit in lines[0]
    assert r.stdout == ""


def test_bad_per_file_ignores_on_command_line(tmp_path):
    write(tmp_path, {"t.py": CLEAN})
    r = run_xlalint("--per-file-ignores", "nocolon", "t.py", cwd=tmp_path)
    assert r.returncode == 2 and "nocolon" in r.stderr
    r = run_xlalint("-q", "--per-file-ignores", "t.py:XLA001", "t.py", cwd=tmp_path)
    assert r.returncode == 0
    assert finding_lines(r.stdout) == []
