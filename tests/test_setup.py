"""What sets up the machine does so on purpose: `make test` changes nothing outside the clone (no system
package manager); the one system package a test uses (the browser of tests/test_verify_html.py) is
installed by `make browser`, which .ci/run runs before `make test` and the README names with its size."""

from __future__ import annotations

import re

from conftest import ROOT

SYSTEM_INSTALLERS = re.compile(r"\b(apt-get|apt|dpkg|yum|dnf|brew|sudo|snap)\b")


def _recipes() -> dict:
    """target -> its recipe lines, from the Makefile."""
    out, target = {}, None
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("\t") and target:
            out[target].append(line)
            continue
        m = re.match(r"^([A-Za-z$][\w.$()/-]*):(?!=)", line)
        target = m.group(1) if m else None
        if target:
            out[target] = []
    return out


def test_make_test_and_make_run_install_nothing_outside_the_clone():
    recipes = _recipes()
    for target in ("test", "run", "$(VENV)/.installed", "$(VENV)/.installed-test", "$(BIN)/python"):
        assert target in recipes, sorted(recipes)
        for line in recipes[target]:
            assert not SYSTEM_INSTALLERS.search(line), f"make {target}: {line.strip()}"
    assert any("apt-get install" in line for line in recipes["browser"])


def test_ci_installs_the_browser_before_the_tests():
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines.index("make browser") < lines.index("make test"), lines


def test_the_readme_names_make_browser_and_what_it_installs():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    i = text.index("make browser")
    around = text[i - 400:i + 400]
    assert "chromium" in around and "MB" in around, around
