"""``# noqa``, ``# noqa: CODES`` and ``# xlalint: skip-file``."""

from __future__ import annotations

import pytest

from conftest import HOST_READ, finding_lines, run_xlalint, write
from xlalint.analysis.source import lint_source

LOOP = "import torch\nfor x in loader:\n    loss = model(x).sum()\n"


def codes(src: str) -> list:
    return [(f.line, f.code) for f in lint_source(src, "t.py")]


def test_unsuppressed_baseline():
    assert codes(LOOP + "    v = loss.item()\n") == [(4, "XLA001")]
    assert codes(LOOP + '    print(f"{loss}")\n') == [(4, "XLA006")]


@pytest.mark.parametrize("comment", [
    "# noqa",
    "# noqa: XLA001",
    "# noqa:XLA001",
    "# NOQA: xla001",
    "# noqa: XLA006,XLA001",
    "# noqa: XLA006, XLA001",
    "# some words  # noqa: XLA001",
    "#noqa",
])
def test_noqa_suppresses(comment):
    assert codes(LOOP + f"    v = loss.item()  {comment}\n") == []


@pytest.mark.parametrize("comment", ["# noqa: XLA006", "# noqa: E501", "# noqa:XLA002,XLA003", "# no qa"])
def test_noqa_for_another_code_does_not_suppress(comment):
    assert codes(LOOP + f"    v = loss.item()  {comment}\n") == [(4, "XLA001")]


def test_noqa_names_one_of_two_findings_on_the_line():
    src = LOOP + '    print(f"{loss} {loss.item()}")  # noqa: XLA006\n'
    assert codes(src) == [(4, "XLA001")]
    src = LOOP + '    print(f"{loss} {loss.item()}")  # noqa: XLA001, XLA006\n'
    assert codes(src) == []


MULTILINE = LOOP + (
    "    v = compute(\n"
    "        1,\n"
    "        loss.item(),{middle}\n"
    "    ){last}\n"
)


def test_multiline_statement_reports_inner_line():
    assert codes(MULTILINE.format(middle="", last="")) == [(6, "XLA001")]


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_multiline_statement_noqa_on_first_reported_or_last_line(where):
    src = MULTILINE.format(middle="  # noqa: XLA001" if where == "middle" else "",
                           last="  # noqa: XLA001" if where == "last" else "")
    if where == "first":
        src = src.replace("compute(\n", "compute(  # noqa: XLA001\n")
    assert codes(src) == []


def test_noqa_on_an_unrelated_line_does_not_suppress():
    src = LOOP + "    y = 1  # noqa\n    v = loss.item()\n"
    assert codes(src) == [(5, "XLA001")]


def test_noqa_inside_a_string_is_not_a_comment_but_harmless():
    # a `# noqa` inside a string literal on the same line: documented as suppressing or not; must not crash
    lint_source(LOOP + '    v = loss.item(); s = "# noqa"\n', "t.py")


@pytest.mark.parametrize("marker", ["# xlalint: skip-file", "#xlalint:skip-file", "# XLALINT: SKIP-FILE"])
def test_skip_file(marker):
    assert codes(marker + "\n" + HOST_READ) == []
    assert codes(HOST_READ + marker + "\n") == []


def test_skip_file_also_skips_syntax_errors():
    assert codes("# xlalint: skip-file\nfor x in y\n") == []


def test_suppressions_through_the_cli(tmp_path):
    write(tmp_path, {
        "a.py": HOST_READ.replace("loss.item()", "loss.item()  # noqa: XLA001"),
        "b.py": HOST_READ.replace("loss.item()", "loss.item()  # noqa: XLA006"),
        "c.py": "# xlalint: skip-file\n" + HOST_READ,
    })
    r = run_xlalint("-q", ".", cwd=tmp_path)
    assert finding_lines(r.stdout) == ["b.py:4:9: XLA001"]
    assert r.returncode == 1
