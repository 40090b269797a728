"""``--verify --html``: the page renders in a real browser (headless Chromium) with the run's numbers.

Needs torch_xla and a Chromium or Chrome: the one named by ``XLALINT_BROWSER``, else the first of
``BROWSERS`` on the PATH (``make browser`` installs Debian's ``chromium``; the test suite installs
nothing). Without one the test is skipped with one line that says so; under CI=true it fails instead.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAM = os.path.join(HERE, "verify_programs", "item_per_step.py")
CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _need(ok: bool, what: str, why: str = ""):
    if not ok:
        why = why or f"{what} is not installed"
        if CI:
            pytest.fail(f"{why}, and CI=true")
        pytest.skip(why)


BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")  # as the Makefile's


def _chromium() -> str | None:
    named = os.environ.get("XLALINT_BROWSER")
    if named:
        return shutil.which(named)
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def _dump_dom(browser: str, page: str, profile: str) -> str:
    proc = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", "--dump-dom", "file://" + page],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_html_report_renders_in_a_browser_with_the_runs_numbers(tmp_path):
    _need(importlib.util.find_spec("torch_xla") is not None, "torch_xla")
    browser = _chromium()
    looked = f"XLALINT_BROWSER={os.environ['XLALINT_BROWSER']}" if os.environ.get("XLALINT_BROWSER") else ", ".join(BROWSERS)
    _need(browser is not None, "a browser", f"no headless browser on the PATH ({looked}): `make browser` installs Debian's chromium")
    page = str(tmp_path / "report.html")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "plugins")]), PJRT_DEVICE="CPU")
    proc = subprocess.run(
        [sys.executable, "-m", "xlalint", "--verify", PROGRAM, "--max-steps", "5", "--html", page,
         "--cache-dir", str(tmp_path / "cache")],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the .item() is confirmed
    source = open(page, encoding="utf-8").read()
    assert "http://" not in source.replace("http://www.w3.org/2000/svg", "") and "https://" not in source
    dom = _dump_dom(browser, page, str(tmp_path / "profile"))
    assert 'data-rendered="ok"' in dom  # the inline script ran
    # four charts, one bar per step, with the run's numbers: 1 host transfer on each of the 5 steps
    for series in ("uncached", "transfers", "fallbacks", "wall_ms"):
        assert f'data-series="{series}"' in dom
    transfers = dom.split('data-series="transfers"', 1)[1].split('data-series="fallbacks"', 1)[0]
    bars = re.findall(r'<rect[^>]*data-step="(\d+)"[^>]*data-value="([\d.]+)"', transfers)
    assert [(int(s), float(v)) for s, v in bars] == [(i, 1.0) for i in range(5)]
    assert "total 5 over 5 steps" in transfers
    # the findings with their verdicts beside their source lines
    assert "item_per_step.py:14" in dom and "total += loss.item()" in dom
    assert "CONFIRMED</span>" in dom and "5 host transfers and 5 extra graph executions over 5 steps" in dom
    # where the time goes: a table with a bar per row, the read first, and the rows, the lines no rule
    # flags and the unexplained rest adding up to the step time after warm-up
    costs = dom.split('id="costs"', 1)[1].split("</table>", 1)[0]
    assert dom.index('id="costs"') < dom.index('id="findings"')
    rows = re.findall(r"<tr data-ms=\"([\d.]+)\">(.*?)</tr>", costs, re.S)
    assert len(rows) >= 2 and "item_per_step.py:14 XLA001" in rows[0][1] and "unexplained" in rows[-1][1]
    assert all('class="bar"' in body for _, body in rows)
    data = __import__("json").loads(re.search(r'id="report-data">(.*?)</script>', source, re.S).group(1))
    assert abs(sum(float(ms) for ms, _ in rows) - data["costs"]["step_ms"]) < 0.01 * len(rows) + 0.01
    # what was measured is kept for the editor's hover (in --cache-dir: the repository's own stays untouched)
    from xlalint.run.measured import load

    kept = load(PROGRAM, cache_dir=str(tmp_path / "cache"))
    assert [(e["line"], e["code"], e["verdict"]) for e in kept["lines"]] == [(14, "XLA001", "CONFIRMED")]
    assert kept["lines"][0]["cost"] == data["findings"][0]["numbers"]["cost"]["text"]
