"""``--verify --fix-impact``: each available fix is applied in memory, the program runs again for the same
steps, and the report says the median ms per step before and after, with what the fix changed on the
device (transfers, compiles, fallbacks per step): that is what is checked here, never a timing threshold.
The user's file is never written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tests.conftest import require_torch_xla

from xlalint.findings import Finding
from xlalint.verify.fix_impact import fixed_sources

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAM = os.path.join(HERE, "verify_programs", "item_per_step.py")


def test_each_fix_runs_in_memory_and_its_effect_is_measured(tmp_path, forked_verify_children):
    require_torch_xla()
    from xlalint.verify import collect, render_json, render_text

    train = tmp_path / "train.py"
    shutil.copyfile(PROGRAM, train)
    before = (train.read_bytes(), os.stat(train).st_mtime_ns)
    rep = collect(str(train), [], max_steps=5, timeout=300, fix_impact=True)
    assert (train.read_bytes(), os.stat(train).st_mtime_ns) == before  # never written
    assert sorted(os.listdir(tmp_path)) == ["train.py"]  # no copy beside it either
    fi = rep.fix_impact
    [entry] = fi["fixes"]
    assert [(f["code"], f["line"], f["applicability"]) for f in entry["fixes"]] == [("XLA001", 14, "unsafe")]  # total becomes a tensor
    assert fi["all"] is None  # one fix: nothing more to run together
    assert entry["error"] is None
    # the verify run reads the loss every step; the fixed one (loss.detach()) never does
    assert fi["before"]["transfers_per_step"] == 1 and entry["after"]["transfers_per_step"] == 0
    assert entry["after"]["steps"] == len(rep.steps) == 5
    assert fi["before"]["median_ms"] > 0 and entry["after"]["median_ms"] > 0
    text = render_text(rep)
    assert "What the fixes save (--fix-impact" in text
    assert "train.py:14 XLA001 (unsafe fix): " in text and "per step: transfers 0," in text
    assert json.loads(render_json(rep))["fix_impact"]["fixes"][0]["after"]["transfers_per_step"] == 0
    # the HTML page: the same table, the fix's row with its median and no transfer left
    from xlalint.verify.html import render_html

    table = render_html(rep).split("<table id=fix-impact>", 1)[1].split("</table>", 1)[0]
    fixed = table.split("<tr data-fix=measured", 1)[1].split("</tr>", 1)[0]
    assert "train.py:14 XLA001</code> (unsafe fix)" in fixed
    assert f"data-after-ms='{entry['after']['median_ms']:.3f}'" in fixed and "<td class=num>0<td class=num>" in fixed


def test_fixed_sources_applies_the_edits_to_the_text_only(tmp_path):
    f = tmp_path / "t.py"
    f.write_text("x = loss.item()\ny = 1\n")
    finding = Finding(path=str(f), line=1, column=5, code="XLA001", end_line=1, end_column=16, name="host-read",
                      message="m", edits=((1, 10, 1, 14, "detach"),), applicability="safe")
    [(path, (text, n))] = fixed_sources([finding]).items()
    assert (path, text, n) == (os.path.realpath(f), "x = loss.detach()\ny = 1\n", 1)
    assert f.read_text() == "x = loss.item()\ny = 1\n"


def test_fix_impact_without_verify_is_a_clear_error():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "plugins")]))
    r = subprocess.run([sys.executable, "-m", "xlalint", "--fix-impact", "examples/slow_train.py"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--fix-impact measures fixes in a --verify run" in r.stderr and "Traceback" not in r.stderr


def test_a_fix_that_changes_no_counter_is_said_to_be_likely_noise():
    from xlalint.verify.fix_impact import render_lines

    fig = {"median_ms": 100.0, "steps": 10, "steady_steps": 8, "transfers_per_step": 4.0, "fallbacks_per_step": 1.0,
           "uncached_after_warmup": 3}
    fix = {"code": "XLA005", "name": "n", "path": "t.py", "line": 7, "title": "", "applicability": "unsafe"}
    fi = {"before": fig, "all": None, "fixes": [
        {"fixes": [fix], "after": dict(fig, median_ms=60.0), "error": None},
        {"fixes": [dict(fix, line=9)], "after": dict(fig, median_ms=90.0, transfers_per_step=3.0), "error": None},
        {"fixes": [dict(fix, line=11)], "after": None, "error": "the fix no longer applies"},
    ]}
    lines = render_lines(fi, str)
    assert lines[2] == ("  t.py:7 XLA005 (unsafe fix): 60 ms (saves 40 ms, 40%); per step: transfers 4, CPU fallbacks 1; "
                        "uncached compiles after warm-up: 3; no counter changed: the difference in time is likely noise")
    assert lines[3].startswith("  t.py:9 XLA005 (unsafe fix): 90 ms (saves 10 ms, 10%); per step: transfers 3,") and "noise" not in lines[3]
    assert lines[4] == "  t.py:11 XLA005 (unsafe fix): the fix no longer applies"


def _report_with(fi: dict):
    from xlalint.verify.results import VerifyReport

    return VerifyReport(target="t.py", status="ok", exit_code=1, stop_reason="max_steps", steps=[], warmup=2,
                        max_steps=10, findings=[], misses=[], recompiles=[], transfers_without_cut=[], user_files=[],
                        timing={}, notes=[], fix_impact=fi)


def test_the_html_page_has_the_fix_impact_table_as_the_text_says_it():
    import re

    from xlalint.verify.html import render_html
    from xlalint.verify.report import render_text

    fig = {"median_ms": 100.0, "steps": 10, "steady_steps": 8, "transfers_per_step": 4.0, "fallbacks_per_step": 1.0,
           "uncached_after_warmup": 3}
    fix = {"code": "XLA001", "name": "host-read", "path": "t.py", "line": 7, "title": "Keep <it> on the device",
           "applicability": "unsafe"}
    fi = {"before": fig, "fixes": [
        {"fixes": [fix], "after": dict(fig, median_ms=60.0, transfers_per_step=3.0), "error": None},
        {"fixes": [dict(fix, line=9, code="XLA005", applicability="safe", title="")], "after": dict(fig, median_ms=120.0),
         "error": None},
        {"fixes": [dict(fix, line=11)], "after": None, "error": "the fix no longer applies"},
    ], "all": {"fixes": [fix, dict(fix, line=9)], "after": dict(fig, median_ms=50.0, transfers_per_step=2.0,
                                                                     uncached_after_warmup=0), "error": None}}
    page = render_html(_report_with(fi))
    table = page.split("<table id=fix-impact>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr data-fix=(\w+)[^>]*>(.*?)</tr>", table, re.S)
    cells = [(kind, [re.sub(r"<[^>]+>", "", c).strip() for c in re.split(r"<td[^>]*>", body)[1:]]) for kind, body in rows]
    assert cells == [
        ("before", ["before (the verify run)", "100 ms", "", "4", "1", "3", ""]),
        ("measured", ["t.py:7 XLA001 (unsafe fix)Keep &lt;it&gt; on the device", "60 ms", "40 ms (40%)", "3", "1", "3", ""]),
        ("measured", ["t.py:9 XLA005 (safe fix)", "120 ms", "-20 ms (-20%)", "4", "1", "3",
                      "no counter changed: the difference in time is likely noise"]),
        ("error", ["t.py:11 XLA001 (unsafe fix)Keep &lt;it&gt; on the device", "-", "-", "-", "-", "-", "the fix no longer applies"]),
        ("measured", ["all 2 fixes together", "50 ms", "50 ms (50%)", "2", "1", "0", ""]),
    ]
    assert page.index("What the fixes save") < page.index("<h2>Per step</h2>")
    # the same figures as the text report
    text = render_text(_report_with(fi))
    assert "  t.py:9 XLA005 (safe fix): 120 ms (costs 20 ms, -20%); " in text
    assert "  all 2 fixes together: 50 ms (saves 50 ms, 50%); per step: transfers 2," in text
    # no --fix-impact: no section; no fix available: said so
    assert "fix-impact" not in render_html(_report_with(None))
    assert "no finding has an automatic fix" in render_html(_report_with({"before": fig, "fixes": [], "all": None}))
