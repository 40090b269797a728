"""Each rule's VALID/INVALID examples are its tests; each rule documents itself (ruff's sections)."""

from __future__ import annotations

import re
import textwrap

import pytest

from conftest import run_xlalint
from xlalint.analysis.source import lint_source
from xlalint.rules import all_rules

RULES = all_rules()
VALID = [(r, i, src) for r in RULES for i, src in enumerate(r.VALID)]
INVALID = [(r, i, src) for r in RULES for i, src in enumerate(r.INVALID)]


def _numbered(src: str) -> str:
    return "\n".join(f"{n:>3} | {line}" for n, line in enumerate(src.splitlines(), 1))


@pytest.mark.parametrize("rule, i, src", VALID, ids=[f"{r.code}-valid-{i}" for r, i, _ in VALID])
def test_valid_example_has_no_finding_of_its_rule(rule, i, src):
    hits = [f for f in lint_source(src, "example.py") if f.code == rule.code]
    assert not hits, (f"{rule.code} VALID[{i}] reported:\n"
                      + "\n".join(f"  {f.line}:{f.column} {f.message}" for f in hits) + "\n" + _numbered(src))


@pytest.mark.parametrize("rule, i, src", INVALID, ids=[f"{r.code}-invalid-{i}" for r, i, _ in INVALID])
def test_invalid_example_has_a_finding_of_its_rule(rule, i, src):
    found = lint_source(src, "example.py")
    assert any(f.code == rule.code for f in found), (
        f"{rule.code} INVALID[{i}] not reported (got {[f.code for f in found]}):\n" + _numbered(src))


def test_examples_only_select_their_own_rule():
    # a rule's INVALID examples still fire when only that rule is enabled
    for rule, i, src in INVALID:
        assert any(f.code == rule.code for f in lint_source(src, "example.py", {rule.code})), (rule.code, i)


def test_every_walking_rule_has_examples():
    for r in RULES:
        if r.walks:
            assert r.VALID and r.INVALID, f"{r.code} needs VALID and INVALID examples"


def _norm(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_is_documented_and_explained(rule):
    assert re.fullmatch(r"XLA\d{3}", rule.code)
    assert re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", rule.name), rule.name
    assert rule.summary.strip() and "\n" not in rule.summary.strip()
    assert rule.severity in ("warning", "error")
    sections = {"what_it_does": rule.what_it_does}
    if not rule.code.startswith("XLA9"):
        sections.update(why_slow=rule.why_slow, example=rule.example, use_instead=rule.use_instead)
    for name, text in sections.items():
        assert text.strip(), f"{rule.code} has no {name}"
    r = run_xlalint("--explain", rule.code)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith(f"{rule.code} ({rule.name})")
    assert rule.summary.strip() in out
    for name, text in sections.items():
        assert _norm(text) in out, f"--explain {rule.code} lacks its {name}"
    if not rule.code.startswith("XLA9"):
        for title in ("## What it does", "## Why is this slow on XLA?", "## Example", "## Use instead"):
            assert title in out


def test_codes_and_names_are_unique():
    assert len({r.code for r in RULES}) == len(RULES)
    assert len({r.name for r in RULES}) == len(RULES)
