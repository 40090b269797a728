"""Every fixture's ``# expect: CODE`` marks against what ``lint_source`` reports, in both directions.

tests/fixtures/README.md describes the marks. A line without a mark must produce no finding;
``_shims.py`` and examples/fast_train.py carry no marks and must lint clean.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from xlalint.run.project import lint_files
from xlalint.config import build_settings
from xlalint.analysis.source import lint_source

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = [ROOT / "examples" / "slow_train.py", ROOT / "examples" / "fast_train.py"]
MARK = re.compile(r"#\s*expect:\s*(?P<codes>XLA\d+(?:\s*,\s*XLA\d+)*)")

FILES = sorted(FIXTURES.glob("*.py")) + [p for p in EXAMPLES if p.exists()]


def expected_marks(text: str) -> set:
    out = set()
    for i, line in enumerate(text.splitlines(), 1):
        m = MARK.search(line)
        if m:
            out |= {(i, c.strip()) for c in m.group("codes").split(",")}
    return out


def test_marks_are_parsed():
    assert expected_marks("a  # expect: XLA001\nb\nc  # expect: XLA001, XLA006\n") == {
        (1, "XLA001"), (3, "XLA001"), (3, "XLA006")}


def test_there_are_fixtures():
    assert len(FILES) >= 10


def _one_module(path: Path) -> list:
    return lint_source(path.read_bytes(), str(path))


def _as_the_cli_does(path: Path) -> list:
    # the project pass (the CLI, pre-commit, flake8 and the editor): the file is a module of its project;
    # XLA008 is off by default, lint_source runs every rule
    return lint_files([str(path)], build_settings(None, extend_select=["XLA008"]), jobs=1, cache=None)


@pytest.mark.parametrize("lint", [_one_module, _as_the_cli_does], ids=["one-module", "project"])
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_fixture(path: Path, lint):
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    want = expected_marks(text)
    findings = [f for f in lint(path) if Path(f.path).resolve() == path.resolve()]
    got = {(f.line, f.code): f for f in findings}
    missing = sorted(want - set(got))
    unexpected = sorted(set(got) - want)
    if not missing and not unexpected:
        return
    rel = path.relative_to(ROOT).as_posix()
    report = [f"{rel}: {len(missing)} missing, {len(unexpected)} unexpected"]
    for line, code in missing:
        report.append(f"  missing    {line:>4} {code}  | {lines[line - 1].strip()}")
    for key in unexpected:
        f = got[key]
        report.append(f"  unexpected {f.line:>4}:{f.column:<3} {f.code}  {f.message}")
        report.append(f"                        | {lines[f.line - 1].strip() if f.line <= len(lines) else ''}")
    pytest.fail("\n".join(report), pytrace=False)
