"""``--fix``, ``--unsafe-fixes`` and ``--diff``: each fix is a libcst transformation of the linted tree,
idempotent, and the fixed file lints clean of what was fixed, still compiles, and still runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, assert_no_traceback, finding_lines, require_torch_xla, run_xlalint, write
from tests.verify_zygote import fast_compile
from xlalint.config import build_settings
from xlalint.analysis.source import lint_source
from xlalint.fix import fix_source

FIXTURES = sorted(p for p in (ROOT / "tests" / "fixtures").glob("*.py") if not p.name.startswith("_"))
SETTINGS = build_settings(None)

ACCUMULATE = textwrap.dedent("""\
    import torch
    import torch_xla
    total = 0.0
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        total += loss.item()
        torch_xla.sync()
""")
LOADERS = textwrap.dedent("""\
    import torch
    import torch_xla
    from torch.utils.data import DataLoader
    a = DataLoader(ds, batch_size=8, shuffle=True)
    b = DataLoader(
        ds,
        batch_size=8,
    )
    c = DataLoader(
        ds,
        batch_size=8
    )
    for x in a:
        model(x).sum().backward()
        torch_xla.sync()
    for x in b:
        model(x).sum().backward()
        torch_xla.sync()
    for x in c:
        model(x).sum().backward()
        torch_xla.sync()
""")
PADDING = textwrap.dedent("""\
    import torch
    from transformers import DataCollatorWithPadding
    collator = DataCollatorWithPadding(tokenizer)
    for step in range(10):
        enc = tokenizer(texts, padding='longest', truncation=True, max_length=32, return_tensors="pt")
        other = tokenizer(texts, padding=True, return_tensors="pt")
        loss = model(**enc).loss + model(**other).loss
        loss.backward()
        optimizer.step()
""")


def _fix(src: str, unsafe: bool):
    findings = lint_source(src, "t.py")
    return fix_source(src, "t.py", findings, SETTINGS, unsafe)


def test_accumulating_a_host_read_is_an_unsafe_fix():
    findings = lint_source(ACCUMULATE, "t.py")
    (f,) = findings
    assert (f.code, f.applicability, f.edits) == ("XLA001", "unsafe", ((8, 14, 8, 25, "loss.detach()"),))
    assert _fix(ACCUMULATE, unsafe=False)[:2] == (ACCUMULATE, 0)  # --fix alone leaves it
    new, n, left = _fix(ACCUMULATE, unsafe=True)
    assert (n, left) == (1, [])
    assert new == ACCUMULATE.replace("total += loss.item()", "total += loss.detach()")


EVALUATE = textwrap.dedent("""\
    import torch
    import torch_xla


    def evaluate(model, batches):
        correct, seen = 0, 0
        for x, y in batches:
            correct += (model(x).argmax(-1) == y).sum().item()
            seen += len(y)
        if seen == 0:
            return {"accuracy": correct}
        return correct / seen


    def train(loader, val_loader):
        device = torch_xla.device()
        model = torch.nn.Linear(4, 2).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        val = [(x.to(device), y.to(device)) for x, y in val_loader]
        for step, (x, y) in enumerate(loader):
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
            if step % 100 == 0:
                print(f"accuracy {evaluate(model, val):.3f}")
            torch_xla.sync()
""")


def test_an_accumulated_read_that_a_function_returns_is_read_once_at_the_return():
    """The function still returns a number: no caller starts formatting a tensor (XLA006 at the print)."""
    (f,) = [f for f in lint_source(EVALUATE, "t.py") if f.code == "XLA001"]
    assert f.fix_title == ("replace with `(model(x).argmax(-1) ==….sum().detach()` and read `correct` once at the "
                           "`return` (`float(correct)`); `correct` becomes a device tensor until then")
    new, n, left = _fix(EVALUATE, unsafe=True)
    assert n == 1
    assert new == (EVALUATE.replace(".sum().item()", ".sum().detach()")
                   .replace('{"accuracy": correct}', '{"accuracy": float(correct)}')
                   .replace("return correct / seen", "return float(correct) / seen"))
    # what is left: one read per evaluation, at each return after its loop, every 100 steps (not reported: the
    # evaluation's graphs have run by then); no format of a tensor at line 26
    assert left == [], left
    namespace = {}
    exec(compile(new, "t.py", "exec"), namespace)  # an empty evaluation returns a number too
    assert namespace["evaluate"](None, []) == {"accuracy": 0.0}


@pytest.mark.parametrize("ret", ["correct[0] / seen", "correct.sum() / seen", "[c for c in correct]"])
def test_a_return_that_uses_the_accumulator_otherwise_than_as_a_value_is_left_alone(ret):
    src = EVALUATE.replace("return correct / seen", f"return {ret}").replace('{"accuracy": correct}', "0")
    (f,) = [f for f in lint_source(src, "t.py") if f.code == "XLA001"]
    assert len(f.edits) == 1 and f.fix_title.endswith("becomes a device tensor, read it once after the loop")


def test_a_findings_edits_are_applied_together_or_not_at_all():
    from xlalint.fix import apply_edits

    text = "a = x.item()\nb = y\nreturn a\n"
    first = ((1, 7, 1, 13, "detach()"), (3, 8, 3, 9, "float(a)"))
    overlapping = ((2, 5, 2, 6, "z"), (3, 8, 3, 9, "int(a)"))  # its second edit overlaps the first group's
    assert apply_edits(text, [first, overlapping]) == ("a = x.detach()\nb = y\nreturn float(a)\n", 1)
    assert apply_edits(text, [overlapping]) == ("a = x.item()\nb = z\nreturn int(a)\n", 1)


def test_dataloader_gets_drop_last_keeping_its_layout():
    new, n, left = _fix(LOADERS, unsafe=True)
    assert n == 3 and [f.code for f in left] == []
    assert "a = DataLoader(ds, batch_size=8, shuffle=True, drop_last=True)\n" in new
    assert "b = DataLoader(\n    ds,\n    batch_size=8,\n    drop_last=True,\n)\n" in new
    assert "c = DataLoader(\n    ds,\n    batch_size=8,\n    drop_last=True\n)\n" in new
    assert all(f.applicability == "unsafe" for f in lint_source(LOADERS, "t.py"))  # it drops data


def test_padding_fixes_are_safe():
    new, n, left = _fix(PADDING, unsafe=False)
    assert n == 2
    assert "DataCollatorWithPadding(tokenizer, pad_to_multiple_of=64)" in new
    assert "tokenizer(texts, padding='max_length', truncation=True, max_length=32" in new
    # padding=True without max_length has no mechanical fix: which length to pad to is a decision
    assert [f.code for f in left] == ["XLA005"] and left[0].line == 6 and not left[0].edits


@pytest.mark.parametrize("path", FIXTURES + [ROOT / "examples" / "slow_train.py"], ids=lambda p: p.name)
def test_fixes_on_the_fixtures_are_idempotent_and_lint_clean(path):
    src = path.read_text(encoding="utf-8")
    before = lint_source(src, str(path))
    fixed = [f for f in before if f.edits]
    new, n, after = fix_source(src, str(path), before, SETTINGS, unsafe=True)
    assert n == len(fixed)
    compile(new, str(path), "exec")
    # what was fixed is gone, nothing is left to fix, and a second --fix changes nothing
    assert not any(f.edits for f in after)
    gone = {(f.code, f.line) for f in fixed}
    assert not gone & {(f.code, f.line) for f in after}, after
    assert fix_source(new, str(path), after, SETTINGS, unsafe=True)[:2] == (new, 0)


def test_the_fixtures_have_fixes_of_every_kind():
    titles = {f.fix_title.split(";")[0].split("`")[1] for p in FIXTURES for f in lint_source(p.read_text(), str(p)) if f.edits}
    assert {"drop_last=True", "pad_to_multiple_of=64", 'padding="max_length"'} <= titles, titles
    assert any(t.endswith(".detach()") for t in titles)


# ----------------------------------------------------------------------------------------- the CLI
def test_fix_writes_safe_fixes_and_reports_what_is_left(tmp_path):
    write(tmp_path, {"a.py": PADDING, "b.py": ACCUMULATE})
    r = run_xlalint("--output-format", "concise", ".", cwd=tmp_path)
    assert "a.py:3:12: XLA005 [*] " in r.stdout and "b.py:8:14: XLA001 `loss.item()`" in r.stdout
    assert "[*] 2 fixable with the `--fix` option (1 hidden fix can be enabled with the `--unsafe-fixes` option)." in r.stdout
    r = run_xlalint("--fix", "--output-format", "concise", ".", cwd=tmp_path)
    assert_no_traceback(r)
    assert r.returncode == 1  # findings remain
    assert "Found 4 findings (2 fixed, 2 remaining) in 2 files checked." in r.stdout, r.stdout
    assert (tmp_path / "b.py").read_text() == ACCUMULATE
    assert "pad_to_multiple_of=64" in (tmp_path / "a.py").read_text()
    r = run_xlalint("--fix", "--unsafe-fixes", "-q", "--output-format", "concise", "b.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "")
    assert "total += loss.detach()" in (tmp_path / "b.py").read_text()


def test_the_counts_after_fix_add_up(tmp_path):
    """The bundled example: 8 findings, 3 fixed, 5 left; the read at evaluate()'s return, once per evaluation
    after its loop (every `args.eval_every` steps), is not a finding of its own."""
    write(tmp_path, {"slow_train.py": (ROOT / "examples" / "slow_train.py").read_text()})
    r = run_xlalint("--isolated", "--no-cache", "--fix", "--unsafe-fixes", "--output-format", "concise", "slow_train.py",
                    cwd=tmp_path)
    assert_no_traceback(r)
    lines = r.stdout.splitlines()
    assert lines[-1] == "Found 8 findings (3 fixed, 5 remaining) in 1 file checked.", r.stdout
    assert len(finding_lines(r.stdout)) == 5
    assert "return float(correct) / sum(" in (tmp_path / "slow_train.py").read_text()


# the evaluation run on every step: the read that the fix moves to its return is a finding of its own
EVALUATE_EVERY_STEP = EVALUATE.replace("        if step % 100 == 0:\n            print", "        print")


def test_the_counts_after_fix_name_what_the_fixes_introduced(tmp_path):
    write(tmp_path, {"t.py": EVALUATE_EVERY_STEP})
    r = run_xlalint("--isolated", "--no-cache", "--fix", "--unsafe-fixes", "--output-format", "concise", "t.py",
                    cwd=tmp_path)
    assert_no_traceback(r)
    assert r.stdout.splitlines()[-2:] == ["Found 1 finding (1 fixed, 0 remaining) in 1 file checked.",
                                          "The fixes introduced 2 new findings, listed above: t.py:11:29: XLA001, "
                                          "t.py:12:12: XLA001."], r.stdout
    write(tmp_path, {"t.py": EVALUATE_EVERY_STEP})
    r = run_xlalint("--isolated", "--no-cache", "--diff", "--unsafe-fixes", "t.py", cwd=tmp_path)
    assert r.stderr.splitlines()[-1] == "Would fix 1 finding, and introduce 2: t.py:11:29: XLA001, t.py:12:12: XLA001."


def test_findings_that_a_fix_moved_are_not_counted_as_fixed_or_new(tmp_path):
    """Two fixes add a line each above the `v = loss.item()` (XLA001, no fix): it moves from line 22 to 24
    and is still the same finding."""
    src = LOADERS.replace("for x in c:\n    model(x).sum().backward()\n",
                          "for x in c:\n    loss = model(x).sum()\n    loss.backward()\n    v = loss.item()\n")
    write(tmp_path, {"t.py": src})
    before = run_xlalint("--isolated", "--no-cache", "--output-format", "concise", "t.py", cwd=tmp_path)
    assert finding_lines(before.stdout)[-1] == "t.py:22:9: XLA001", before.stdout
    r = run_xlalint("--isolated", "--no-cache", "--fix", "--unsafe-fixes", "--output-format", "concise", "t.py", cwd=tmp_path)
    assert finding_lines(r.stdout) == ["t.py:24:9: XLA001"], r.stdout
    assert r.stdout.splitlines()[-1] == "Found 4 findings (3 fixed, 1 remaining) in 1 file checked.", r.stdout


def test_diff_says_what_it_would_fix_and_introduce(tmp_path):
    write(tmp_path, {"slow_train.py": (ROOT / "examples" / "slow_train.py").read_text()})
    r = run_xlalint("--isolated", "--no-cache", "--diff", "--unsafe-fixes", "slow_train.py", cwd=tmp_path)
    assert r.returncode == 1 and "+    return float(correct) / sum(" in r.stdout
    assert r.stderr.splitlines()[-1] == "Would fix 3 findings."


def test_diff_writes_nothing(tmp_path):
    write(tmp_path, {"b.py": ACCUMULATE})
    r = run_xlalint("--diff", "b.py", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "")  # the only fix is unsafe
    r = run_xlalint("--diff", "--unsafe-fixes", "b.py", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.splitlines()[:2] == ["--- b.py", "+++ b.py"]
    assert "-    total += loss.item()" in r.stdout and "+    total += loss.detach()" in r.stdout
    assert "Would fix 1 finding." in r.stderr
    assert (tmp_path / "b.py").read_text() == ACCUMULATE
    r = run_xlalint("--diff", "--unsafe-fixes", "-", input=ACCUMULATE, cwd=tmp_path)
    assert r.returncode == 1 and "+    total += loss.detach()" in r.stdout


def test_json_carries_the_structured_fix(tmp_path):
    write(tmp_path, {"b.py": ACCUMULATE})
    r = run_xlalint("--output-format", "json", "b.py", cwd=tmp_path)
    (f,) = json.loads(r.stdout)
    assert f["fix"] == {
        "applicability": "unsafe",
        "message": "replace with `loss.detach()`; `total` becomes a device tensor, read it once after the loop",
        "edits": [{"content": "loss.detach()", "location": {"row": 8, "column": 14}, "end_location": {"row": 8, "column": 25}}],
    }


def test_fix_leaves_standard_input_alone(tmp_path):
    r = run_xlalint("--fix", "--unsafe-fixes", "--output-format", "concise", "-", input=ACCUMULATE, cwd=tmp_path)
    assert r.returncode == 1 and "use --diff" in r.stderr
    assert finding_lines(r.stdout) == ["-:8:14: XLA001"]


def test_fixed_programs_still_run(tmp_path):
    """The fixtures with fixes, fixed (unsafe fixes too), run to the end on the CPU device: one process
    for all of them, so that torch_xla starts once (and compiles fast: whether they run is the question)."""
    require_torch_xla()
    fixed = []
    for p in FIXTURES:
        src = p.read_text(encoding="utf-8")
        findings = lint_source(src, str(p))
        if any(f.edits for f in findings):
            new, _, _ = fix_source(src, p.name, findings, SETTINGS, unsafe=True)
            (tmp_path / p.name).write_text(new, encoding="utf-8")
            fixed.append(p.name)
    (tmp_path / "_shims.py").write_text((ROOT / "tests" / "fixtures" / "_shims.py").read_text())
    assert len(fixed) >= 4, fixed
    code = (
        "import runpy, sys\n"
        "sys.path.insert(0, '.')\n"
        f"for name in {fixed!r}:\n"
        "    sys.argv = [name]\n"
        "    runpy.run_path(name, run_name='__main__')\n"
        "    print('ran', name, flush=True)\n"
    )
    env = fast_compile({**os.environ, "PJRT_DEVICE": "CPU"})
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert [line.split()[1] for line in r.stdout.splitlines() if line.startswith("ran ")] == fixed
