"""Code that runs less often than the loop around it (issue 32 cause 4, round 24 read after scoring): a handler
of a failure (`except AssertionError:` around a NaN check) runs when something went wrong, and the arm of
`total = loss.item() if total is None else total + loss.item()` that fills an accumulator bound before the
loop runs on its first pass only. Each with its twin that stays a finding."""

from __future__ import annotations

import textwrap

from xlalint.analysis.source import lint_source

HEAD = "import torch\nimport torch_xla\n\n"


def lint(body: str) -> set:
    src = HEAD + textwrap.dedent(body)
    return {(f.line - HEAD.count("\n"), f.code) for f in lint_source(src, "train.py")}


HANDLER = """
def train(model, loader, opt, logger, device):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        d = loss.detach().clamp(min=1e-8)
        try:
            check(d)
        except {caught}:
            logger.info("bad values %s", d.max().item())
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch_xla.sync()
"""


def test_a_handler_of_a_failure_does_not_run_every_step():
    """RecBole's DGCF logs the minimum and maximum of its degrees in `except AssertionError:` after a NaN check:
    only when the check failed. So do a bare `except:`, `except Exception:` and `except (RuntimeError,
    FloatingPointError):`. A handler of what code catches to take another path on a normal run (`KeyError`,
    `AttributeError`, ...) may run every step: its read stays a finding."""
    for caught in ("AssertionError", "Exception", "(RuntimeError, FloatingPointError)", "Exception as e"):
        assert lint(HANDLER.format(caught=caught)) == set(), caught
    assert lint(HANDLER.format(caught="KeyError")) == {(9, "XLA001")}
    assert lint(HANDLER.format(caught="(AttributeError, TypeError)")) == {(9, "XLA001")}
    assert lint(HANDLER.replace("except {caught}:", "except:")) == set()


FIRST_PASS = """
def train_epoch(model, loader, opt, device):
    total_loss = None
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        total_loss = (loss.item() if total_loss is None
                      else total_loss + loss.item())
        torch_xla.sync()
    return total_loss
"""


def test_the_arm_that_fills_an_accumulator_on_the_first_pass_runs_once():
    """RecBole's trainer: `total_loss = loss.item() if total_loss is None else total_loss + loss.item()` with
    `total_loss = None` before the loop reads in its first arm on the first batch only; the second arm reads on
    every other batch and stays a finding. So does the first arm where the loop sets the name back to None
    (every pass is a first pass), and an `if total is None:` block likewise."""
    assert lint(FIRST_PASS) == {(10, "XLA001")}
    reset = FIRST_PASS.replace("        opt.step()\n", "        opt.step()\n        total_loss = None\n")
    assert lint(reset) == {(10, "XLA001"), (11, "XLA001")}
    as_block = FIRST_PASS.replace(
        "        total_loss = (loss.item() if total_loss is None\n                      else total_loss + loss.item())\n",
        "        if total_loss is None:\n            total_loss = loss.item()\n        else:\n"
        "            total_loss += loss.detach()\n")
    assert lint(as_block) == set()


def test_an_accumulator_reset_every_step_and_filled_in_a_micro_batch_loop_is_filled_every_step():
    """The twin of the first-pass fill: `total = None` in the step loop and `total = loss.item() if total is None
    else ...` in a micro-batch loop inside it: the first arm runs on the first micro-batch of every step."""
    source = """
def train(model, loader, opt, device, chunks):
    for x, y in loader:
        total = None
        for xc, yc in zip(x.chunk(chunks), y.chunk(chunks)):
            loss = torch.nn.functional.mse_loss(model(xc.to(device)), yc.to(device))
            loss.backward()
            total = (loss.item() if total is None
                     else total + loss.item())
        opt.step()
        torch_xla.sync()
"""
    assert lint(source) == {(8, "XLA001"), (9, "XLA001")}


def test_a_value_the_step_binds_before_testing_it_for_none_is_filled_on_any_step():
    """`extra = batch.get("extra")` then `if extra is None: extra = ...item()`: the name is bound on every pass,
    so it may be None on any of them: not a first-pass fill."""
    source = """
def train(model, loader, opt, device):
    for batch in loader:
        out = model(batch["x"].to(device))
        extra = batch.get("extra")
        if extra is None:
            extra = out.mean().item()
        out.sum().backward()
        opt.step()
        torch_xla.sync()
"""
    assert lint(source) == {(7, "XLA001")}


VOCODER = '''import torch
import torch.nn as nn


class Vocoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(80, 480)

    def inference(self, mel, finalize=True):
        return self.proj(mel.transpose(1, 2)).flatten(1)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Vocoder().to(device)
    mel = torch.rand(1, 80, 300).to(device)
    full = model.inference(mel)
    for i in range(0, 300, 30):
        chunk = model.inference(mel[:, :, : i + 38], finalize=False)[:, i * 480:]
        print((full[:, i * 480: i * 480 + chunk.shape[1]] - chunk).abs().max().item())
'''


def _lint_project(root, files: dict) -> set:
    from pathlib import Path

    from xlalint.config import build_settings
    from xlalint.run.project import lint_files

    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    paths = sorted(str(p) for p in root.rglob("*.py"))
    found = lint_files(paths, build_settings(None), jobs=1, cache=None)
    for p in paths:  # one file at a time (its importers seen under the root) gives the same findings
        assert lint_files([p], build_settings(None), jobs=1, cache=None) == [f for f in found if f.path == p], p
    return {(Path(f.path).relative_to(root).as_posix(), f.line, f.code) for f in found}


def test_the_main_block_of_a_library_module_is_a_check_run_by_hand(tmp_path):
    """Round 25, read after scoring (a speech generator's vocoder and flow modules): a module of a package that
    the project's other modules import ends with `if __name__ == "__main__":` comparing its streaming output
    chunk by chunk with its whole output: a check run by hand, once, not a generation loop. The same block in a
    script at the root, which another script imports for a helper, is the program's own loop: still a finding."""
    lib = {"pyproject.toml": "", "tts/__init__.py": "", "tts/vocoder.py": VOCODER,
           "tts/api.py": "from tts.vocoder import Vocoder\n\n\ndef load():\n    return Vocoder()\n"}
    assert _lint_project(tmp_path / "lib", lib) == set()
    # in a folder without an `__init__.py` of a package that has one (`cosyvoice/flow/flow.py`)
    nested = {"pyproject.toml": "", "tts/__init__.py": "", "tts/hifigan/vocoder.py": VOCODER,
              "tts/api.py": "from tts.hifigan.vocoder import Vocoder\n\n\ndef load():\n    return Vocoder()\n"}
    assert _lint_project(tmp_path / "nested", nested) == set()
    script = {"pyproject.toml": "", "vocoder.py": VOCODER, "api.py": "from vocoder import Vocoder\n\nv = Vocoder()\n"}
    assert ("vocoder.py", 21, "XLA001") in _lint_project(tmp_path / "script", script)
    # a folder of scripts with no `__init__.py` anywhere
    scripts = {"pyproject.toml": "", "tools/vocoder.py": VOCODER,
               "tools/api.py": "from tools.vocoder import Vocoder\n\nv = Vocoder()\n"}
    assert ("tools/vocoder.py", 21, "XLA001") in _lint_project(tmp_path / "scripts", scripts)
    alone = {"pyproject.toml": "", "tts/__init__.py": "", "tts/vocoder.py": VOCODER}  # nothing imports it
    assert ("tts/vocoder.py", 21, "XLA001") in _lint_project(tmp_path / "alone", alone)
