"""Hostile bytes never reach the terminal: what a linted file (or its name) holds is printed escaped
(``\\x1b``), never obeyed, in every format that goes to a terminal (full, concise, github, the warnings
on standard error); JSON and SARIF escape it themselves (``\\u001b``).

The file is binary-ish: an ESC sequence that would clear the screen and recolour it, BEL, backspace, a
carriage return, DEL, the one-byte CSI (U+009B) and a right-to-left override (U+202E), in a comment, in
an f-string that a finding quotes, and on the line of a syntax error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, assert_no_traceback, run_xlalint, write
from xlalint.report import printable

HOSTILE = "\x1b[2J\x1b[31m\x07\x08\x7f\x9b\u202e"
# a per-step format of a device tensor (XLA006) whose f-string holds the hostile characters, a comment
# beside it that holds them too, a tab and BEL before the expression (the carets must still line up)
PROGRAM = (
    "import torch\n"
    "for x in loader:\n"
    "    loss = model(x).sum()\n"
    "    loss.backward()\n"
    f"    # {HOSTILE} a comment\n"
    f"\tprint(\"\x07\", f\"{HOSTILE}{{loss}}\")  # {HOSTILE}\n"
)
BROKEN = f"import torch\nx = 1 {HOSTILE}\n"
RAW = ("\x1b", "\x07", "\x08", "\x7f", "\x9b", "\u202e")


def _clean(text: str) -> None:
    found = [ch for ch in RAW if ch in text]
    assert not found, f"raw {found!r} reached the output:\n{text!r}"


@pytest.fixture
def hostile(tmp_path):
    # the tab indentation of the last line is mixed with spaces: make the loop body tab-indented too
    write(tmp_path, {"x.py": PROGRAM.replace("\n    ", "\n\t"), "broken.py": BROKEN})
    return tmp_path


@pytest.mark.parametrize("fmt", ["full", "concise", "github", "json", "sarif"])
def test_no_raw_control_character_in_any_format(hostile, fmt):
    r = run_xlalint("--isolated", "--no-cache", "--output-format", fmt, "x.py", "broken.py", cwd=hostile)
    assert_no_traceback(r)
    assert r.returncode == 1, r.stdout + r.stderr
    _clean(r.stdout)
    _clean(r.stderr)
    assert "XLA006" in r.stdout and "XLA900" in r.stdout
    if fmt in ("json", "sarif"):
        json.loads(r.stdout)  # escaped by json itself, and still valid
    else:  # the characters are still told, escaped
        assert "\\x1b[2J\\x1b[31m\\x07\\x08\\x7f\\x9b\\u202e" in r.stdout


def test_the_code_frame_shows_the_line_escaped_with_the_carets_under_the_expression(hostile):
    r = run_xlalint("--isolated", "--no-cache", "x.py", cwd=hostile)
    lines = r.stdout.splitlines()
    (i,) = [n for n, line in enumerate(lines) if line.startswith("6 | ")]
    shown, carets = lines[i], lines[i + 1]
    assert shown == "6 |     print(\"\\x07\", f\"\\x1b[2J\\x1b[31m\\x07\\x08\\x7f\\x9b\\u202e{loss}\")  # \\x1b[2J\\x1b[31m\\x07\\x08\\x7f\\x9b\\u202e"
    # the carets span the f-string as shown: from `f` to its closing quote
    start, end = carets.index("^"), carets.rindex("^") + 1
    assert shown[start:end] == 'f"\\x1b[2J\\x1b[31m\\x07\\x08\\x7f\\x9b\\u202e{loss}"'
    assert lines[i - 1] == "5 |     # \\x1b[2J\\x1b[31m\\x07\\x08\\x7f\\x9b\\u202e a comment"


def test_flake8_gets_the_message_escaped(hostile):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
    r = subprocess.run([sys.executable, "-m", "flake8", "--select", "XLA", "x.py"], cwd=hostile, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "XLA006" in r.stdout, r.stdout + r.stderr
    _clean(r.stdout)
    assert "\\x1b[2J\\x1b[31m\\x07\\x08\\x7f\\x9b\\u202e" in r.stdout


def test_a_hostile_file_name_and_warnings_are_escaped(tmp_path):
    r = run_xlalint("--isolated", "--no-cache", "--output-format", "concise", "--stdin-filename", "a\x1b[31m.py", "-",
                    f"missing\x1b[2J.py", cwd=tmp_path, input="import torch\nfor x in loader:\n    v = model(x).sum().item()\n")
    assert_no_traceback(r)
    _clean(r.stdout)
    _clean(r.stderr)
    assert "a\\x1b[31m.py:3:9: XLA001" in r.stdout
    assert "xlalint: error: missing\\x1b[2J.py: no such file or directory" in r.stderr


def test_printable():
    assert printable("plain `loss.item()` — ünïcödé ✓") == "plain `loss.item()` — ünïcödé ✓"
    assert printable("a\tb\x1b[0m\r\n\x00\u200f\U000e0001") == "a\\tb\\x1b[0m\\r\\n\\x00\\u200f\\U000e0001"
    assert printable("a\tb\r\n\x1b", keep="\t\r\n") == "a\tb\r\n\\x1b"
    assert printable("\udcff") == "\\udcff"  # a lone surrogate (an undecodable file name) is not written raw
