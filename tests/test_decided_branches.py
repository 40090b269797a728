"""Branches the source decides (semantics/constants.py): a test that can only have one value leaves one arm
dead, and nothing in a dead arm is reported, nor anything in a function only a dead arm calls. Each case has
a twin where the source does not decide, which stays a finding. The fixture `decided_branches.py` holds the
real-looking shapes (merge-NMS, a reward scorer, a beam search)."""

from __future__ import annotations

import json
import textwrap

from pathlib import Path

from tests.conftest import run_xlalint
from xlalint.analysis.source import lint_source

HEAD = "import torch\nimport torch_xla\n"


def lint(body: str) -> set:
    src = HEAD + textwrap.dedent(body)  # line numbers count from the body's first line
    return {(f.line - HEAD.count("\n"), f.code) for f in lint_source(src, "train.py")}


STEP = """
def train(model, loader):
    device = torch_xla.device()
    for img in loader:
        pred = model(img.to(device))
        if SHOW:
            print(pred.sum().item())
"""


def test_a_module_switch_bound_once_to_false_leaves_its_branch_dead():
    assert lint("SHOW = False\n" + STEP) == set()


def read_line(src: str) -> int:
    """The line of STEP's host read in ``src``."""
    return [ln.strip() for ln in src.splitlines()].index("print(pred.sum().item())") + 1


def test_a_switch_bound_twice_or_to_true_is_not_dead():
    for src in ("SHOW = False\nSHOW = True\n" + STEP, "SHOW = True\n" + STEP):
        assert lint(src) == {(read_line(src), "XLA001")}


def test_a_module_whose_configurator_may_overwrite_its_globals_has_no_constants():
    # nanoGPT's shape: `exec(open("configurator.py").read())` sets any global from the command line
    src = "SHOW = False\n" + STEP + 'exec(open("configurator.py").read())\n'
    assert lint(src) == {(read_line(src), "XLA001")}


def test_a_global_declared_in_a_function_is_not_a_constant():
    src = "SHOW = False\ndef enable():\n    global SHOW\n    SHOW = True\n" + STEP
    assert lint(src) == {(read_line(src), "XLA001")}


def test_a_local_switch_and_a_function_only_a_dead_branch_calls():
    found = lint("""
        def apply_classifier(x):
            return x[x[:, 4] > 0.5]

        def detect(model, loader, classify_arg):
            device = torch_xla.device()
            classify = False
            for img in loader:
                pred = model(img.to(device))
                if classify:
                    pred = apply_classifier(pred)
                if classify_arg:
                    print(pred.max().item())
        """)
    # the parameter's branch runs; the literal's never does, nor apply_classifier, which only it calls
    assert found == {(13, "XLA001")}


def test_a_parameter_is_never_a_constant_even_with_a_literal_default():
    found = lint("""
        def detect(model, loader, classify=False):
            device = torch_xla.device()
            for img in loader:
                pred = model(img.to(device))
                if classify:
                    print(pred.max().item())
        """)
    assert found == {(7, "XLA001")}


DECODE = """
    def exists(v):
        return v is not None

    def decode(model, out, steps, eos_token=None):
        {prelude}
        for _ in range(steps):
            out = torch.cat((out, model(out)[:, -1:].argmax(-1)), dim=-1)
            if not exists(eos_token):
                continue
            if (out == eos_token).all():
                break
        return out

    def main(model, prompts):
        for p in prompts:
            decode(model, p.to(torch_xla.device()), 8, eos_token=2)
    """


def test_an_assert_decides_the_early_exit_after_it():
    assert (11, "XLA002") in lint(DECODE.replace("{prelude}", "pass"))
    assert (11, "XLA002") not in lint(DECODE.replace("{prelude}", 'assert not exists(eos_token), "not supported"'))


def test_an_assert_on_a_name_bound_again_decides_nothing():
    prelude = "assert not exists(eos_token)\n        eos_token = 2"
    assert (12, "XLA002") in lint(DECODE.replace("{prelude}", prelude))


def test_an_attribute_only_ever_set_to_tensors_is_never_none():
    body = """
        class Scorer:
            {default}
            def __init__(self, weights=None):
                if weights is not None:
                    self.weights = torch.tensor(weights)
                else:
                    self.weights = torch.ones(3)

            def score(self, r):
                if self.weights is not None:
                    return (r * self.weights).sum()
                return r[r > 0].sum()

            def reset(self, w):
                self.weights = {reset}

        def train(model, loader):
            scorer = Scorer()
            for x in loader:
                loss = scorer.score(model(x.to(torch_xla.device())))
        """
    assert lint(body.replace("{default}", "").replace("{reset}", "torch.zeros(3)")) == set()
    # reset to a parameter (maybe None), or a class-level default of None: the other arm may run
    assert lint(body.replace("{default}", "").replace("{reset}", "w")) == {(13, "XLA003")}
    assert lint(body.replace("{default}", "weights = None").replace("{reset}", "torch.zeros(3)")) == {(13, "XLA003")}
    # `w or torch.ones(3)` falls back to a tensor, `torch.ones(3) if w is None else torch.tensor(w)` is one either way
    assert lint(body.replace("{default}", "").replace("{reset}", "w or torch.ones(3)")) == set()
    assert lint(body.replace("{default}", "").replace("{reset}", "torch.ones(3) if w is None else torch.tensor(w)")) == set()
    assert lint(body.replace("{default}", "").replace("{reset}", "w or None")) == {(13, "XLA003")}


def test_a_nested_function_sees_its_enclosing_functions_name_not_the_module_constant():
    src = "SHOW = False\n" + """
def train(model, loader, SHOW):
    def step(img):
        pred = model(img.to(torch_xla.device()))
        if SHOW:
            print(pred.sum().item())
    for img in loader:
        step(img)
"""
    assert lint(src) == {(read_line(src), "XLA001")}


LOSSES = """
def diou_loss(a, b):
    assert (a >= b).all()
    return (a - b).abs().sum()


def box_loss(pred, gt, fg, box_reg_loss_type="smooth_l1", use_mask=True):
    if box_reg_loss_type == "smooth_l1":
        return (pred - gt).abs().sum()
    elif box_reg_loss_type == "giou":
        return (pred[fg] - gt[fg]).abs().sum()
    elif box_reg_loss_type == "diou":
        return diou_loss(pred, gt)
    if not use_mask:
        return (pred - gt).sum()
    return pred[fg].sum()


def train(model, loader, opt, cfg):
    device = torch_xla.device()
    for x, gt in loader:
        pred = model(x.to(device))
        fg = gt.to(device) > 0
        loss = box_loss(pred, gt.to(device), fg, {args})
        loss.backward()
        opt.step()
        torch_xla.sync()
"""


def test_a_branch_on_a_parameter_runs_only_from_the_callers_whose_literals_take_it():
    """Issue 32 cause 9 (round 16, read after scoring: detectron2's dense box loss): `if box_reg_loss_type ==
    "diou":` in a function the step calls with `box_reg_loss_type="giou"` never runs from that call, nor does
    what it calls (`diou_loss`'s assert); the "giou" branch does. A call that passes a variable (a config's
    choice) may take every branch; a call that passes nothing takes the default's branch; after arms that all
    return, the rest runs only when none was taken; a flag passed False takes `if not flag: return`."""
    giou_mask, diou_assert, default_mask = (11, "XLA003"), (3, "XLA002"), (16, "XLA003")
    assert lint(LOSSES.replace("{args}", 'box_reg_loss_type="giou"')) == {giou_mask}
    assert lint(LOSSES.replace("{args}", '"diou"')) == {diou_assert}
    assert lint(LOSSES.replace("{args}", "cfg.loss_type")) == {giou_mask, diou_assert, default_mask}
    assert lint(LOSSES.replace("{args}", "box_reg_loss_type=cfg.loss_type")) == {giou_mask, diou_assert, default_mask}
    # the default ("smooth_l1") returns before every masked line
    assert lint(LOSSES.replace(", {args}", "")) == set()
    assert diou_assert in lint(LOSSES.replace("{args}", "**cfg.loss_kwargs"))  # may name the type
    assert lint(LOSSES.replace("{args}", '"other", use_mask=False')) == set()
    assert lint(LOSSES.replace("{args}", '"other", use_mask=True')) == {default_mask}


def test_the_path_a_message_names_is_a_caller_that_can_take_the_branch(tmp_path):
    """Two callers in other modules, linted whole, one file at a time and from the cache: one passes "giou", the
    other a config's choice. The "diou" branch's finding names the second (the first can never run it); with
    only the first, the line is silent."""
    losses = LOSSES.split("def train(")[0]
    caller = """import torch
import torch_xla
from losses import box_loss


def {name}(model, loader, opt, cfg):
    device = torch_xla.device()
    for x, gt in loader:
        pred = model(x.to(device))
        loss = box_loss(pred, gt.to(device), gt.to(device) > 0, {arg})
        loss.backward()
        opt.step()
        torch_xla.sync()
"""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "losses.py").write_text(HEAD + textwrap.dedent(losses))
    (tmp_path / "detector.py").write_text(caller.format(name="train", arg='box_reg_loss_type="giou"'))
    def diou(*args):
        r = run_xlalint("--output-format", "json", "--isolated", *args, cwd=tmp_path)
        assert r.returncode in (0, 1), r.stderr
        return [f for f in json.loads(r.stdout) if Path(f["filename"]).name == "losses.py" and f["line"] == 5]

    assert diou("--no-cache", ".") == []
    (tmp_path / "finetune.py").write_text(caller.format(name="finetune", arg="cfg.loss_type"))
    for args in (("--no-cache", "."), ("--no-cache", "losses.py"), ("losses.py",), ("losses.py",)):
        found = diou(*args)
        assert [f["code"] for f in found] == ["XLA002"], args
        assert "finetune.py:10" in found[0]["message"] and "detector.py" not in found[0]["message"], args


CACHE_POSITION = """
from typing import Optional


class GPT(torch.nn.Module):
    def __init__(self, gpt: torch.nn.Module):
        super().__init__()
        self.gpt = gpt

    def prepare(self, ids, past, cache_position: Optional[torch.Tensor] = None):
        past_length = int(cache_position[0]) if cache_position is not None else past.get_seq_length()
        if cache_position is None:
            cache_position = torch.arange(past_length, past_length + ids.shape[1], device=ids.device)
        return ids[:, past_length:], cache_position

    @torch.no_grad()
    def generate(self, ids, steps, pos: Optional[torch.Tensor] = None):
        past = None
        for i in range(steps):
            x, cache_position = self.prepare(ids, past{args})
            logits, past = self.gpt(x, past, cache_position)
            ids = torch.cat([ids, logits[:, -1:].argmax(-1)], 1)
        return ids
"""


def test_a_test_above_the_parameters_rebinding_is_decided_by_the_callers_arguments():
    """Issue 32 cause 9 (round 19, read after scoring: ChatTTS's `_prepare_generation_inputs`): `int(cache_position[0])
    if cache_position is not None else ...` stands above `if cache_position is None: cache_position = ...`; its only
    caller never passes `cache_position`, so the read never runs. The rebinding below does not hide what the
    arguments say at the test above it (a conditional expression's arms, as an `if`'s). A caller that passes a
    tensor position reads it every decoding step."""
    read = (11, "XLA001")
    assert read not in lint(CACHE_POSITION.replace("{args}", ""))
    assert read in lint(CACHE_POSITION.replace("{args}", ", pos"))
