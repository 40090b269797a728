"""The language server's incremental parse must give the tree (and so the findings) of a full parse."""

from __future__ import annotations

import glob
from pathlib import Path

import libcst as cst
import pytest

from xlalint.analysis.source import lint_source
from xlalint.parse.incremental import IncrementalParser, split

ROOT = Path(__file__).resolve().parent.parent
FILES = sorted(glob.glob(str(ROOT / "tests" / "fixtures" / "*.py"))) + sorted(glob.glob(str(ROOT / "examples" / "*.py"))) + sorted(
    glob.glob(str(ROOT / "xlalint" / "**" / "*.py"), recursive=True))

TRICKY = '''"""Module docstring
with lines at column 0
def not_a_def():
"""
# a comment at the top

import torch  # trailing


@decorator
@other(
    1,
)
def f(x):
    """doc
x = 1 inside the docstring
    """
    return x.item()
    # an indented comment after the body

if torch.cuda.is_available():
    y = 1
elif False:
    y = 2
else:
    y = 3
try:
    pass
except Exception:
    pass
finally:
    pass
z = [
1,
]
w = 1 + \\
2
s = f"""{z}
at column 0"""
class C:
    pass
# the end
'''


@pytest.mark.parametrize("path", FILES, ids=lambda p: Path(p).relative_to(ROOT).as_posix())
def test_same_code_and_findings_as_a_full_parse(path):
    text = Path(path).read_text(encoding="utf-8")
    parser = IncrementalParser()
    assert parser(text).code == text
    assert lint_source(text, path, parse=IncrementalParser()) == lint_source(text, path)


def test_split_keeps_the_text_and_cuts_only_at_statement_starts():
    chunks = split(TRICKY)
    assert "".join(chunks) == TRICKY
    assert chunks[0].startswith('"""Module docstring') and "def not_a_def" in chunks[0]
    assert any(c.startswith("@decorator\n@other(\n    1,\n)\ndef f(x):") for c in chunks)
    assert any(c.startswith("if torch.cuda") and "else:\n    y = 3" in c for c in chunks)
    parser = IncrementalParser()
    module = parser(TRICKY)
    assert module.code == TRICKY
    # `z = [\n1,\n]` and `w = 1 + \\\n2` are cut wrongly by the line rule: the chunk does not parse,
    # and the whole file is parsed the ordinary way
    assert parser.fallbacks == 1


def test_an_edit_parses_only_the_edited_statement_again():
    text = (ROOT / "examples" / "slow_train.py").read_text()
    parser = IncrementalParser()
    parser(text)
    n = parser.parsed
    edited = text.replace("import torch\n", "import torch  # edited\n", 1)
    assert parser(edited).code == edited
    assert parser.parsed == n + 1
    assert lint_source(edited, "slow_train.py", parse=parser) == lint_source(edited, "slow_train.py")


def test_a_half_typed_file_falls_back_to_the_full_parse_and_its_error():
    text = "import torch\n\ndef f(x):\n    return x.\n"
    (finding,) = lint_source(text, "t.py", parse=IncrementalParser())
    assert finding.code == "XLA900" and finding.line == 4
    with pytest.raises(cst.ParserSyntaxError):
        IncrementalParser()(text)


def test_crlf_and_tabs_fall_back_or_agree():
    for text in ("import torch\r\nx = 1\r\n", "def f():\n\treturn 1\n\ndef g():\n    return 2\n"):
        assert IncrementalParser()(text).code == text


def test_a_session_of_edits_gives_the_findings_of_a_full_lint_each_time():
    """Chunks, joined statements and their positions are reused across lints: lines added above a
    finding must still move it, a removed statement must drop its findings."""
    text = (ROOT / "examples" / "slow_train.py").read_text()
    parser = IncrementalParser()
    edits = [
        lambda t: t.replace("import torch\n", "import torch\n# one\n# two\n", 1),
        lambda t: t.replace("\ndef ", "\n\n\ndef ", 1),
        lambda t: t.replace(".item()", ".detach()", 1),
        lambda t: t.replace("\n\n\ndef ", "\ndef ", 1),
        lambda t: t + "\nfor x in loader:\n    print(model(x).sum())\n",
        lambda t: t.replace("# one\n", "", 1),
        lambda t: t.replace("\nfor x in loader:\n    print(model(x).sum())\n", ""),
    ]
    for i, edit in enumerate(edits):
        text = edit(text)
        got = lint_source(text, "slow_train.py", parse=parser)
        assert got == lint_source(text, "slow_train.py"), i
    assert parser.fallbacks == 0
