"""A true finding with a wrong frequency is a wrong message: the frequency each message names.

The fixtures' ``# expect:`` marks say where findings are; these tests say what their messages claim about
how often the line runs (issue #32, cause 9), for the guards that make code periodic from afar: a periodic
predicate (``should_log(step)``) called behind an early return, in the same module or in another one whose
class is not known where it is called.
"""

from __future__ import annotations

from pathlib import Path

from xlalint.run.project import lint_files
from xlalint.sources.discover import iter_python_files
from xlalint.config import build_settings

ROOT = Path(__file__).resolve().parent
FIXTURES = ROOT / "fixtures"


def _lint(*paths) -> list:
    settings = build_settings(None)
    files = [str(p) for p in iter_python_files([str(p) for p in paths], settings)]
    return lint_files(files, settings, jobs=1, cache=None)


def _messages(findings, name: str, code: str = "XLA001") -> dict:
    return {f.line: f.message for f in findings if Path(f.path).name == name and f.code == code}


def test_periodic_predicate_behind_an_early_return_in_the_same_module():
    msgs = _messages(_lint(FIXTURES / "once_per_evaluation_guards.py"), "once_per_evaluation_guards.py")
    assert "every `self.log_every` steps" in msgs[31]


def test_periodic_predicate_of_an_object_built_by_a_factory_in_another_module():
    findings = _lint(FIXTURES / "projects" / "metrics_processor")
    assert {(Path(f.path).name, f.line) for f in findings} == {("train.py", 43), ("metrics.py", 17)}
    for f in findings:
        assert "every `self.log_freq` steps" in f.message, f.message


def test_a_name_bound_to_a_periodic_test_guards_like_the_test(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "def train(model, opt, loader, log_every):\n"
        "    for step, (x, y) in enumerate(loader):\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        log_now = step % log_every == 0\n"
        "        if not log_now:\n"
        "            continue\n"
        "        print(loss.item())\n"
        "        if step % 10:\n"
        "            continue\n"
        "        print(loss.item())\n"
    )
    msgs = _messages(_lint(tmp_path), "t.py")
    assert "every `log_every` steps" in msgs[11]
    assert "every 10 steps" in msgs[14]


def test_first_batches_and_last_batch_guards_are_not_per_step(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "def train(model, opt, loader):\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        if i < 3:\n"
        "            print(x[:2].tolist())\n"
        "        if i == len(loader) - 1:\n"
        "            print(loss.item())\n"
        "        print(loss.item())\n"
    )
    assert sorted(_messages(_lint(tmp_path), "t.py")) == [12]


def test_a_branch_taken_only_while_evaluating_says_every_evaluation_batch(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "class Criterion(torch.nn.Module):\n"
        "    def forward(self, logits, target, model, stage):\n"
        "        loss = (logits - target).pow(2).mean()\n"
        "        if not model.training:\n"
        "            self.preds = logits.detach().cpu().tolist()\n"
        "        if stage != Stage.TRAIN:\n"
        "            print(loss.item())\n"
        "        print(loss.item())\n"
        "        return loss\n"
    )
    msgs = _messages(_lint(tmp_path), "t.py")
    assert "every evaluation batch" in msgs[7] and "every evaluation batch" in msgs[9]
    assert "every step" in msgs[10]



POOLERS = '''import torch


def boxes_to_rois(boxes, sizes):
    indices = torch.repeat_interleave(torch.arange(len(sizes), device=boxes.device), sizes)
    return torch.cat([indices[:, None].float(), boxes], dim=1)


class ROIPooler(torch.nn.Module):
    def forward(self, x, boxes, sizes):
        {pooler_body}
        return x[:, :1] * rois.sum()
'''

EXPORT = '''import torch

import poolers


class ExportROIPooler(poolers.ROIPooler):
    def forward(self, x, boxes, sizes):
        assert not self.training
        rois = poolers.boxes_to_rois(boxes, sizes)
        print(rois.sum().item())
        return x[:, :1] * rois.sum()
'''


def test_a_forward_that_asserts_it_is_not_training_runs_every_evaluation_batch(tmp_path):
    """Issue 32 cause 9 (round 16, read after scoring: detectron2's Caffe2 export pooler): `assert not
    self.training` at the top of a `forward` makes the rest of it evaluation-only: its own read says "every
    evaluation batch", and a helper it shares with the training `forward` is named by the training path
    ("every step"), never by the export one; with the training `forward` not calling it, by the export one."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "export.py").write_text(EXPORT)
    (tmp_path / "poolers.py").write_text(POOLERS.replace("{pooler_body}", "rois = boxes_to_rois(boxes, sizes)"))
    found = _lint(tmp_path)
    export = _messages(found, "export.py")
    assert list(export) == [10] and "every evaluation batch" in export[10], export
    shared = _messages(found, "poolers.py", "XLA003")
    assert list(shared) == [5] and "every step" in shared[5] and "export.py" not in shared[5], shared
    (tmp_path / "poolers.py").write_text(POOLERS.replace("{pooler_body}", "rois = boxes"))
    shared = _messages(_lint(tmp_path), "poolers.py", "XLA003")
    assert list(shared) == [5] and "every evaluation batch" in shared[5] and "export.py:9" in shared[5], shared

def test_the_inference_path_of_a_forward_that_dispatches_on_its_mode_says_every_evaluation_batch(tmp_path):
    """Issue 32 cause 9 (round 15, read after scoring: lerobot's Wall-X policy): `forward(mode=...)` trains when
    the mode is empty and runs `self.predict(...)` under `elif mode == "predict":`: the prediction is inference,
    not a training step. The training path it dispatches to stays every step."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "m.py").write_text(
        "import torch\n"
        "import torch.nn as nn\n"
        "class Policy(nn.Module):\n"
        "    def predict(self, x):\n"
        "        out = self.head(x)\n"
        "        return out[:, :(out > 0).sum().item()]\n"
        "    def train_step(self, x):\n"
        "        loss = self.head(x).sum()\n"
        "        print(loss.item())\n"
        "        return loss\n"
        "    def forward(self, x, mode=None):\n"
        "        if not mode:\n"
        "            return self.train_step(x)\n"
        "        elif mode == \"predict\":\n"
        "            return self.predict(x)\n"
        "def train(model, loader, opt, device):\n"
        "    for x in loader:\n"
        "        model(x.to(device)).backward()\n"
        "        opt.step()\n"
    )
    msgs = _messages(_lint(tmp_path), "m.py")
    assert "every evaluation batch" in msgs[6] and "every step" not in msgs[6]
    assert "every step" in msgs[9]


def test_a_forward_flag_that_names_the_mode_splits_training_from_evaluation(tmp_path):
    """BLIP's VQA `forward(..., train=True)`: its `else:` (and a callee there) runs only in evaluation."""
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "class VQA(torch.nn.Module):\n"
        "    def forward(self, h, answers, train=True, is_eval=False):\n"
        "        if train:\n"
        "            print(h.sum().item())\n"
        "        else:\n"
        "            return self.rank(h.sum(-1)).tolist()\n"
        "        if is_eval:\n"
        "            print(h.max().item())\n"
        "        return (h * answers).sum()\n"
        "    def rank(self, scores):\n"
        "        return scores.topk(4).indices\n"
    )
    msgs = _messages(_lint(tmp_path), "t.py")
    assert "every step" in msgs[6]
    assert "every evaluation batch" in msgs[8] and "every evaluation batch" in msgs[10]
    # OpenMMLab's convention: forward(img, img_metas, return_loss=True), the test-time path under `else:`
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "class Depther(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.head = torch.nn.Linear(8, 1)\n"
        "    def forward(self, img, img_metas, return_loss=True):\n"
        "        if return_loss:\n"
        "            return self.head(img).mean()\n"
        "        else:\n"
        "            return self.head(img).cpu().numpy()\n"
    )
    msgs = _messages(_lint(tmp_path), "t.py")
    assert "every evaluation batch" in msgs[11]


def test_the_operand_after_a_short_circuit_on_xla_is_never_tested(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "from torch_xla.core.xla_model import is_xla_tensor\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, logits, neg_is_pos):\n"
        "        if is_xla_tensor(logits) or neg_is_pos.any():\n"
        "            logits = logits * 2\n"
        "        if logits.sum() > 0 or neg_is_pos.any():\n"
        "            logits = logits * 3\n"
        "        return logits\n"
    )
    assert sorted(_messages(_lint(tmp_path), "t.py", "XLA002")) == [8]


def test_a_hot_loop_inside_a_periodic_function_names_both():
    """nanoGPT's estimate_loss(): `losses[k] = loss.item()` in its loop over eval_iters, called every
    eval_interval steps, reads every evaluation batch, not once every eval_interval steps (issue #35)."""
    msgs = _messages(_lint(FIXTURES / "nanogpt_eval_interval.py"), "nanogpt_eval_interval.py")
    assert "every evaluation batch (the loop runs every `eval_interval` steps)" in msgs[97]
    assert "accumulate on the device" in msgs[97]


def test_an_evaluation_loop_in_a_periodic_helper_and_a_no_grad_forward_say_how_often_they_run():
    name = "evaluation_results_and_metric_dicts.py"
    msgs = _messages(_lint(FIXTURES / name), name)
    # `loss_over()` loops over a loader without training, called every `eval_every` steps
    assert "every evaluation batch (the loop runs every `eval_every` steps)" in msgs[30], msgs[30]
    # a post-processor's `forward` under `@torch.no_grad()`: not "every step"
    assert "every call of a `@torch.no_grad()` `forward`" in msgs[53], msgs[53]
    assert "every step" in msgs[75]  # the training loop's own read stays "every step"


def test_padding_in_a_unit_test_module_is_not_a_training_cost(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    body = (
        "import torch\n"
        "def _batch(seqs):\n"
        "    n = max(s.shape[0] for s in seqs)\n"
        "    out = torch.zeros(len(seqs), n)\n"
        "    for i, s in enumerate(seqs):\n"
        "        out[i, : s.shape[0]] = s\n"
        "    return out\n"
    )
    (tests / "test_batches.py").write_text(body)
    (tmp_path / "collate.py").write_text(body)
    found = {(Path(f.path).name, f.code) for f in _lint(tmp_path)}
    assert ("test_batches.py", "XLA005") not in found
    assert ("collate.py", "XLA005") in found  # the same helper outside a test module is reported


def test_a_periodic_predicate_names_the_period_its_caller_passes(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "def divisible_by(num, den):\n"
        "    return (num % den) == 0\n"
        "def train(model, loader, opt, validate_every, cfg):\n"
        "    for i, (x, y) in enumerate(loader):\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        if divisible_by(i, validate_every):\n"
        "            print(loss.item())\n"
        "        if divisible_by(i, den=cfg.generate_every):\n"
        "            print(loss.item())\n"
        "        torch_xla.sync()\n"
    )
    msgs = _messages(_lint(tmp_path), "t.py")
    assert "every `validate_every` steps" in msgs[11], msgs[11]
    assert "every `cfg.generate_every` steps" in msgs[13], msgs[13]


CUDA_LOOP = (
    "import torch\n"
    "import torch.nn as nn\n"
    "{setup}\n"
    "model = nn.Linear(4, 4){place_model}\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "for step in range(10):\n"
    "    x = torch.randn(8, 4){place_x}\n"
    "    loss = model(x).sum()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "    print(loss.item())\n"
)


def test_a_module_hard_wired_to_cuda_is_not_xla_code_and_its_device_agnostic_twin_is(tmp_path):
    """Issue 32 cause 8: `.cuda()` / `device="cuda"` literals and nothing chosen at run time, XLA never named:
    not XLA code. A device variable (even one set to "cuda" by default) is what a user points at XLA."""
    cases = {
        "pinned.py": dict(setup="", place_model=".cuda()", place_x=".cuda()"),
        "pinned_kw.py": dict(setup="", place_model=".to('cuda')", place_x=" + torch.zeros(8, 4, device='cuda')"),
        "variable.py": dict(setup="device = 'cuda'", place_model=".to(device)", place_x=".to(device)"),
        "chosen.py": dict(setup="device = 'cuda' if torch.cuda.is_available() else 'cpu'",
                          place_model=".to(device)", place_x=".to(device)"),
        "names_xla.py": dict(setup="# runs on a TPU too (torch_xla)", place_model=".cuda()", place_x=".cuda()"),
        # XLA and TPU as words: "outputs" holds "tpu" and "xlarge" starts with "xla", neither names them
        "words.py": dict(setup="outputs = []  # vit_xlarge throughput", place_model=".cuda()", place_x=".cuda()"),
        "flag.py": dict(setup="use_tpu = False", place_model=".cuda()", place_x=".cuda()"),
        # `device=w.device` follows its input: neither a pin nor a device chosen at run time
        "follows.py": dict(setup="w = model_weight = torch.zeros(4)", place_model=".cuda()",
                           place_x=".cuda() + torch.zeros(8, 4, device=w.device)"),
        # `self.device` / `args.device`: the run's device, chosen elsewhere (a setting); `model.device` follows
        # the model's placement (`.cuda()` here)
        "holder.py": dict(setup="import argparse\nargs = argparse.Namespace(device='cpu')",
                          place_model=".to(args.device)", place_x=" + torch.zeros(8, 4, device=args.device)"),
        # ... but a model moved with `.cuda()` on the program's straight line is on CUDA whatever device the
        # batches go to (microsoft/LoRA's NLG scripts, round 15): no XLA device setting reaches it
        "model_cuda.py": dict(setup="import argparse\nargs = argparse.Namespace(device='cpu')", place_model=".cuda()",
                              place_x=".cuda() + torch.zeros(8, 4, device=args.device)"),
        "model_device.py": dict(setup="", place_model=".cuda()",
                                place_x=".cuda() + torch.zeros(8, 4, device=model.device)"),
        # a CUDA-only library imported unconditionally: the module cannot be imported on a TPU host, whatever
        # its device variable says; imported under `try:` it is optional
        "flash.py": dict(setup="from flash_attn import flash_attn_func\ndevice = 'cuda'",
                         place_model=".to(device)", place_x=".to(device)"),
        # whatever the module says of XLA (lit-gpt's model.py tests `device.type == "xla"`): the import fails
        "flash_names_xla.py": dict(setup="from flash_attn import flash_attn_func\ndevice = 'cuda'\n"
                                         "on_xla = torch.device(device).type == 'xla'",
                                   place_model=".to(device)", place_x=".to(device)"),
        "optional_flash.py": dict(setup="try:\n    from flash_attn import flash_attn_func\nexcept ImportError:\n"
                                        "    flash_attn_func = None\ndevice = 'cuda'",
                                  place_model=".to(device)", place_x=".to(device)"),
        # a variable only ever given a CUDA device index is a hard-wired layout (a reward model on GPU 1, a
        # rank's own GPU), not the run's device setting; one also given plain "cuda" is that setting
        "index_variable.py": dict(setup='rw_device = torch.device("cuda:{}".format(1))',
                                  place_model=".to(rw_device)", place_x=".to(rw_device)"),
        "rank_variable.py": dict(setup='rank = 0\ndevice = f"cuda:{rank}"', place_model=".to(device)",
                                 place_x=".to(device)"),
        "current_device.py": dict(setup="", place_model=".to(torch.cuda.current_device())",
                                  place_x=".to(torch.cuda.current_device())"),
        "setting_or_rank.py": dict(setup='import os\ndevice = "cuda"\nif "RANK" in os.environ:\n'
                                         '    device = f"cuda:{os.environ[\'RANK\']}"',
                                   place_model=".to(device)", place_x=".to(device)"),
        # DeepSpeed has no XLA accelerator
        "deepspeed.py": dict(setup="from transformers import TrainingArguments\n"
                                   "args = TrainingArguments(output_dir='out', deepspeed='ds_config.json')",
                             place_model="", place_x=""),
        # CUDA the default for device-less tensors: it raises without CUDA, whatever the device variable says
        "default_type.py": dict(setup="device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                                      "if __name__ == '__main__':\n"
                                      "    torch.set_default_tensor_type('torch.cuda.FloatTensor')",
                                place_model=".to(device)", place_x=".to(device)"),
        "asserts_gpu.py": dict(setup="assert torch.cuda.is_available(), 'requires a GPU'", place_model="",
                               place_x=""),
        # an assert in the branch that picks an optional CUDA feature is no requirement of the program
        "optional_gpu.py": dict(setup="import os\ndevice = 'cuda'\nif os.environ.get('FUSED'):\n"
                                      "    assert torch.cuda.is_available(), 'fused optimizers need CUDA'",
                                place_model=".to(device)", place_x=".to(device)"),
    }
    for name, parts in cases.items():
        (tmp_path / name).write_text(CUDA_LOOP.format(**parts))
    found = {Path(f.path).name for f in _lint(tmp_path) if f.code == "XLA001"}
    assert found == {"variable.py", "chosen.py", "names_xla.py", "flag.py", "optional_flash.py", "holder.py",
                     "setting_or_rank.py", "optional_gpu.py"}, found


CUDA_BOUND_STEP = (
    "import torch\nimport bitsandbytes as bnb\nfrom peft import prepare_model_for_kbit_training\n"
    "from transformers import AutoModelForCausalLM, BitsAndBytesConfig\n\n\n"
    "def train(model, loader, device, args):\n"
    "{setup}\n"
    "    opt = torch.optim.AdamW(model.parameters())\n"
    "    for x in loader:\n"
    "        loss = model(x.to(device)).sum()\n"
    "        loss.backward()\n"
    "        opt.step()\n"
    "{in_loop}\n"
    "        print(loss.item())\n"
)


def test_a_function_that_quantizes_with_bitsandbytes_is_not_xla_code(tmp_path):
    """Issue 32 cause 8, per function: bitsandbytes, a model loaded in 8 or 4 bits, peft's k-bit preparation,
    made unconditionally: the model or optimizer runs on CUDA kernels, the function is not XLA code. Under an
    `if` the call is optional, and the step runs on XLA. A CUDA runtime call that raises without a driver
    (`torch.cuda.synchronize()`, `get_device_name`) in code that chooses its device at run time is a line a
    user deletes on the way to XLA: the step is XLA code (as the ledger's judges read MAE's loop)."""
    cases = {
        "synchronize.py": dict(setup="    pass", in_loop="        torch.cuda.synchronize()"),
        "guarded_sync.py": dict(setup="    pass", in_loop="        if torch.cuda.is_available():\n"
                                                           "            torch.cuda.synchronize()"),
        "tried_sync.py": dict(setup="    pass", in_loop="        try:\n            torch.cuda.synchronize()\n"
                                                         "        except RuntimeError:\n            pass"),
        "name.py": dict(setup="    print(torch.cuda.get_device_name(0))", in_loop="        pass"),
        "bnb_optimizer.py": dict(setup="    opt8 = bnb.optim.AdamW8bit(model.parameters())", in_loop="        pass"),
        "optional_bnb.py": dict(setup="    if args.adam8bit:\n        opt8 = bnb.optim.AdamW8bit(model.parameters())",
                                in_loop="        pass"),
        "load_8bit.py": dict(setup="    model = AutoModelForCausalLM.from_pretrained('m', load_in_8bit=True)",
                             in_loop="        pass"),
        "load_flag.py": dict(setup="    model = AutoModelForCausalLM.from_pretrained('m', load_in_8bit=args.q)",
                             in_loop="        pass"),
        "load_4bit.py": dict(setup="    model = AutoModelForCausalLM.from_pretrained(\n        'm', "
                                   "quantization_config=BitsAndBytesConfig(load_in_4bit=True))",
                             in_loop="        pass"),
        "kbit.py": dict(setup="    model = prepare_model_for_kbit_training(model)", in_loop="        pass"),
        "memory.py": dict(setup="    print(torch.cuda.max_memory_allocated())", in_loop="        pass"),
    }
    for name, parts in cases.items():
        (tmp_path / name).write_text(CUDA_BOUND_STEP.format(**parts))
    found = {Path(f.path).name for f in _lint(tmp_path) if f.code == "XLA001"}
    assert found == {"synchronize.py", "guarded_sync.py", "tried_sync.py", "name.py", "optional_bnb.py",
                     "load_flag.py", "memory.py"}, found


def test_every_rule_leaves_a_module_that_cannot_run_on_xla_alone_train_eval_switches_too(tmp_path):
    """A module that imports a CUDA-only library unconditionally (apex, flash_attn) is never an XLA step:
    XLA004's switch of modes was still reported there (trlx's NeMo trainer, which imports apex)."""
    loop = (
        "{setup}\nimport torch\nimport lightning.pytorch as pl\n"
        "class PPO(pl.LightningModule):\n"
        "    def generate(self, x):\n"
        "        was_training = self.model.training\n"
        "        self.model.eval()\n"
        "        out = self.model(x)\n"
        "        self.model.train(was_training)\n"
        "        self.model.train()\n"
        "        return out\n"
        "    def validation_step(self, batch, batch_idx):\n"
        "        return self.generate(batch)\n"
    )
    (tmp_path / "plain.py").write_text(loop.format(setup=""))
    (tmp_path / "apex_trainer.py").write_text(loop.format(setup="from apex.transformer import parallel_state"))
    found = {(Path(f.path).name, f.code) for f in _lint(tmp_path)}
    assert ("plain.py", "XLA004") in found and not any(name == "apex_trainer.py" for name, _ in found), found


def test_a_whole_evaluation_through_a_helper_ends_it_for_reads_in_a_periodic_block_only(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "def evaluate(model, loader):\n"
        "    total = 0\n"
        "    for x, y in loader:\n"
        "        total = total + model(x).sum()\n"
        "    return total\n"
        "def run_eval(model, loader):\n"
        "    return evaluate(model, loader)\n"
        "def train(model, loader, val, opt, every):\n"
        "    for step, (x, y) in enumerate(loader):\n"
        "        loss = model(x).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        if step % every == 0:\n"
        "            val_loss = run_eval(model, val)\n"
        "            print(val_loss.item())\n"
        "        out = run_eval(model, val)\n"
        "        print(out.item())\n"
        "        torch_xla.sync()\n"
    )
    lines = {f.line for f in _lint(tmp_path) if f.code == "XLA001"}
    assert 17 not in lines  # the periodic evaluation's result, read once after it (through run_eval)
    assert 19 in lines  # the same read every step, outside a periodic block, is still a finding


BRAIN = 'import torch\nimport torch.nn as nn\nimport torch_xla\n\n\nclass Stage:\n    TRAIN = 1\n    VALID = 2\n\n\nclass Brain:\n    def __init__(self, model, device):\n        self.model = model\n        self.device = device\n\n    def compute_forward(self, batch, stage):\n        x, prompt_len = batch\n        x, prompt_len = x.to(self.device), prompt_len.to(self.device)\n        h = self.model(x)\n        if stage != Stage.TRAIN:\n            n = x.shape[1] + int(prompt_len[0].item())\n            h = h[:, :n]\n        return h\n\n    def fit(self, batches, opt):\n        for batch in batches:\n            out = self.compute_forward(batch, Stage.TRAIN)\n            out.sum().backward()\n            opt.step()\n            torch_xla.sync()\n'


def test_a_varying_int_in_an_evaluation_branch_says_every_evaluation_batch_in_a_project_too(tmp_path):
    """Issue 32 cause 9: XLA009 under `if stage != Stage.TRAIN:` runs per evaluation batch; the project pass
    rebuilt its frequency from the module's summary without the hot loop's kind and said "every step"."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "brain.py").write_text(BRAIN)
    (tmp_path / "train.py").write_text("from brain import Brain\n")
    for found in (_lint(tmp_path), _lint(tmp_path / "brain.py")):
        msgs = _messages(found, "brain.py", "XLA009")
        assert "every evaluation batch" in msgs[22] and "every step" not in msgs[22], msgs
        assert "every evaluation batch" in _messages(found, "brain.py")[21]


def test_the_first_pass_of_an_inner_loop_runs_as_often_as_the_loop_is_entered(tmp_path):
    """`for i in range(n): if i == 0: ...` runs once each time the loop runs, as if it stood before it: in a
    decode loop, not every decoding step (whisper's no-speech probability); in a micro-batch loop inside the
    step loop, every step."""
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "def decode(model, tokens, steps):\n"
        "    for i in range(steps):\n"
        "        logits = model(tokens)\n"
        "        if i == 0:\n"
        "            first = logits[:, 0].softmax(-1).tolist()\n"
        "        if i % 2 == 0:\n"
        "            every_other = logits[:, 0].tolist()\n"
        "        tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], 1)\n"
        "    return tokens\n"
        "def train(model, loader, opt, accum):\n"
        "    for step, (x, y) in enumerate(loader):\n"
        "        for i in range(accum):\n"
        "            loss = model(x).sum()\n"
        "            loss.backward()\n"
        "            if i == 0 and step > 0:\n"
        "                print(loss.item())\n"
        "        opt.step()\n"
        "        torch_xla.sync()\n"
    )
    found = {f.line: f.message for f in _lint(tmp_path) if f.code == "XLA001"}
    assert 7 not in found  # once per decode, not every decoding step
    assert "every 2 decoding steps" in found[9] or "decoding step" in found[9], found
    assert "every step" in found[18], found



def test_a_block_that_returns_runs_once_per_call_not_every_pass_of_the_loop(tmp_path):
    """`if idx_next == eos_id: return idx[:input_pos]` in a decode loop leaves the function: the slice at a
    device position runs once per generation (litgpt's XLA generate), not every decoding step; the same
    slice in a block that does not leave the function still runs every decoding step."""
    src = (
        "import torch\n"
        "import torch_xla.core.xla_model as xm\n"
        "def generate(model, idx: torch.Tensor, max_returned_tokens: int, *, temperature: float = 1.0,\n"
        "             eos_id: int | None = None) -> torch.Tensor:\n"
        "    T = idx.size(0)\n"
        "    device, dtype = idx.device, idx.dtype\n"
        "    empty = torch.empty(max_returned_tokens, dtype=dtype, device=device)\n"
        "    empty[:T] = idx\n"
        "    idx = empty\n"
        "    input_pos = torch.tensor([0], device=device)\n"
        "    xm.mark_step()\n"
        "    for _ in range(max_returned_tokens):\n"
        "        x = idx.index_select(0, input_pos).view(1, -1)\n"
        "        logits = model(x, input_pos)\n"
        "        logits = logits[0, -1] / temperature\n"
        "        probs = torch.nn.functional.softmax(logits, dim=-1)\n"
        "        idx_next = torch.multinomial(probs, num_samples=1).to(dtype=dtype)\n"
        "        input_pos = input_pos[-1:] + 1\n"
        "        xm.mark_step()\n"
        "        idx = idx.index_copy(0, input_pos, idx_next)\n"
        "        if idx_next == eos_id:\n"
        "            return idx[:input_pos]\n"
        "    return idx\n"
    )
    (tmp_path / "returns.py").write_text(src)
    (tmp_path / "stays.py").write_text(src.replace("return idx[:input_pos]", "idx = idx[:input_pos]"))
    found = {(Path(f.path).name, f.line, f.code): f.message for f in _lint(tmp_path)}
    assert ("returns.py", 22, "XLA003") not in found, found
    assert "every decoding step" in found[("stays.py", 22, "XLA003")], found



def test_a_helper_that_places_nothing_returns_host_tensors_for_host_arguments(tmp_path):
    """yolov5's `save_one_txt`: a row copied to the host, rebuilt with `torch.tensor(...)`, converted by a
    box helper that only computes with what it is given (and is also called with device tensors elsewhere)
    and read with `.tolist()`: a host tensor in, a host tensor out, no transfer."""
    (tmp_path / "general.py").write_text('import numpy as np\nimport torch\n\n\ndef xyxy2xywh(x):\n    y = x.clone() if isinstance(x, torch.Tensor) else np.copy(x)\n    y[..., 0] = (x[..., 0] + x[..., 2]) / 2\n    y[..., 1] = (x[..., 1] + x[..., 3]) / 2\n    y[..., 2] = x[..., 2] - x[..., 0]\n    y[..., 3] = x[..., 3] - x[..., 1]\n    return y\n\n\ndef save_one_txt(predn, shape, file):\n    gn = torch.tensor(shape)[[1, 0, 1, 0]]\n    for *xyxy, conf, cls in predn.tolist():\n        xywh = (xyxy2xywh(torch.tensor(xyxy).view(1, 4)) / gn).view(-1).tolist()\n        with open(file, "a") as f:\n            f.write(f"{cls} {xywh} {conf}\\n")\n\n\ndef run(model, dataloader, device):\n    model.eval()\n    for im, targets, paths, shapes in dataloader:\n        im = im.to(device)\n        preds = model(im)\n        for si, pred in enumerate(preds):\n            save_one_txt(pred.clone(), shapes[si][0], "out.txt")\n\n\ndef boxes_for_loss(pred, device):\n    box = xyxy2xywh(pred[:, :4].to(device))\n    return box.sum()\n')
    found = {(f.line, f.code) for f in _lint(tmp_path)}
    assert (16, "XLA001") in found and (17, "XLA001") not in found, found
    # its twin: a helper that moves what it makes to the run's device returns a device tensor
    (tmp_path / "general.py").write_text('import numpy as np\nimport torch\n\n\ndef xyxy2xywh(x):\n    y = x.clone() if isinstance(x, torch.Tensor) else np.copy(x)\n    y[..., 0] = (x[..., 0] + x[..., 2]) / 2\n    y[..., 1] = (x[..., 1] + x[..., 3]) / 2\n    y[..., 2] = x[..., 2] - x[..., 0]\n    y[..., 3] = x[..., 3] - x[..., 1]\n    return y\n\n\ndef save_one_txt(predn, shape, file):\n    gn = torch.tensor(shape)[[1, 0, 1, 0]]\n    for *xyxy, conf, cls in predn.tolist():\n        xywh = (xyxy2xywh(torch.tensor(xyxy).view(1, 4)) / gn).view(-1).tolist()\n        with open(file, "a") as f:\n            f.write(f"{cls} {xywh} {conf}\\n")\n\n\ndef run(model, dataloader, device):\n    model.eval()\n    for im, targets, paths, shapes in dataloader:\n        im = im.to(device)\n        preds = model(im)\n        for si, pred in enumerate(preds):\n            save_one_txt(pred.clone(), shapes[si][0], "out.txt")\n\n\ndef boxes_for_loss(pred, device):\n    box = xyxy2xywh(pred[:, :4].to(device))\n    return box.sum()\n'.replace("    return y\n", "    return y.to(DEVICE)\n", 1).replace(
        'with open(file, "a") as f:\n            f.write(f"{cls} {xywh} {conf}\\n")',
        'print(cls, xywh, conf)'))  # (a row written to a file is a dump: test_a_copy_the_loop_writes_to_a_file...)
    found = {(f.line, f.code) for f in _lint(tmp_path)}
    assert (17, "XLA001") in found, found


def test_an_evaluation_loop_inside_a_periodic_block_reads_every_evaluation_batch(tmp_path):
    """`if step % eval_interval == 0:` around the evaluation loop runs the loop every N steps and reads on each
    of its batches; a period guard inside the loop (`if i % 10 == 0:`) is every 10 evaluation batches."""
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "def main(model, loader, val_loader, device, eval_interval):\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    for step, (x, y) in enumerate(loader):\n"
        "        loss = model(x.to(device), y.to(device))\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        if step % eval_interval == 0:\n"
        "            model.eval()\n"
        "            total = 0.0\n"
        "            with torch.no_grad():\n"
        "                for i, (vx, vy) in enumerate(val_loader):\n"
        "                    vloss = model(vx.to(device), vy.to(device))\n"
        "                    total += vloss.item()\n"
        "                    if i % 10 == 0:\n"
        "                        print(vloss.item())\n"
        "            model.train()\n"
    )
    msgs = _messages(_lint(tmp_path), "t.py")
    assert "every evaluation batch (the loop runs every `eval_interval` steps)" in msgs[14], msgs[14]
    assert "every 10 evaluation batches" in msgs[16], msgs[16]



def test_a_local_callback_runs_where_its_own_function_passes_it(tmp_path):
    """Issue 32 cause 9: `compute_features(sample_fn, ...)` is called by the training script's evaluation with
    its own `sample_fn` and by a sampling script with another: each sampler runs where its own function passes
    it, never on the other program's path."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "features.py").write_text(
        "import torch\n"
        "def compute_features(sample_fn, n):\n"
        "    feats = []\n"
        "    for _ in range(n):\n"
        "        feats.append(sample_fn(4))\n"
        "    return torch.cat(feats)\n"
    )
    (tmp_path / "samplers.py").write_text(
        "import torch\n"
        "def sample_euler(model, x, sigmas):\n"
        "    for i in range(len(sigmas) - 1):\n"
        "        x = x + (sigmas[i + 1] - sigmas[i]) * model(x)\n"
        "    return x\n"
        "def sample_ancestral(model, x, sigmas):\n"
        "    for i in range(len(sigmas) - 1):\n"
        "        x = x + (sigmas[i + 1] - sigmas[i]) * model(x)\n"
        "        if sigmas[i + 1] > 0:\n"
        "            x = x + torch.randn_like(x)\n"
        "    return x\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "from features import compute_features\n"
        "from samplers import sample_euler\n"
        "def main(model, loader, opt, every):\n"
        "    device = torch_xla.device()\n"
        "    sigmas = torch.linspace(1, 0, 10, device=device)\n"
        "    def evaluate():\n"
        "        def sample_fn(n):\n"
        "            return sample_euler(model, torch.randn(n, 8, device=device), sigmas)\n"
        "        return compute_features(sample_fn, 4)\n"
        "    for step, (x, y) in enumerate(loader):\n"
        "        loss = model(x.to(device)).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        if step % every == 0:\n"
        "            evaluate()\n"
        "        torch_xla.sync()\n"
    )
    (tmp_path / "sample.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "from features import compute_features\n"
        "from samplers import sample_ancestral\n"
        "def main(model):\n"
        "    device = torch_xla.device()\n"
        "    sigmas = torch.linspace(1, 0, 10, device=device)\n"
        "    def sample_fn(n):\n"
        "        return sample_ancestral(model, torch.randn(n, 8, device=device), sigmas)\n"
        "    print(compute_features(sample_fn, 2).shape)\n"
    )
    msgs = [f.message for f in _lint(tmp_path) if Path(f.path).name == "samplers.py" and f.line == 9]
    assert msgs, "the per-step test of the ancestral sampler is a finding"
    assert all("train.py" not in m and "every `every` steps" not in m for m in msgs), msgs


def test_results_read_after_each_pass_of_a_sweep_are_read_once_per_pass(tmp_path):
    """Issue 32 cause 4: an evaluation loop inside a sweep (`for t in temperatures:`), and the rewards of the
    pass read after it: once per sweep value and evaluation, as a read after an evaluation's loop."""
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "def evaluate_sweep(model, loader, device, temperatures, reward_fn):\n"
        "    stats = {}\n"
        "    for t in temperatures:\n"
        "        outs = []\n"
        "        for x, _ in loader:\n"
        "            outs.append(model(x.to(device)) / t)\n"
        "        rewards = reward_fn(outs)\n"
        "        stats[t] = [r.sum().item() for r in rewards]\n"
        "    return stats\n"
        "def main(model, loader, val, reward_fn, opt):\n"
        "    device = torch_xla.device()\n"
        "    for step, (x, y) in enumerate(loader):\n"
        "        loss = model(x.to(device)).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        if step % 10 == 0:\n"
        "            evaluate_sweep(model, val, device, (0.5, 1.0), reward_fn)\n"
        "        torch_xla.sync()\n"
    )
    assert not [f for f in _lint(tmp_path) if f.code == "XLA001"]


def test_decoded_audio_and_images_are_host_tensors(tmp_path):
    """Issue 32 cause 5: `torchaudio.load` decodes on the host: the loudness of the reference audio, computed
    before it is moved, is a host value."""
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torchaudio\n"
        "def infer(ref_audio, model, device, target_rms=0.1):\n"
        "    audio, sr = ref_audio\n"
        "    rms = torch.sqrt(torch.mean(torch.square(audio)))\n"
        "    if rms < target_rms:\n"
        "        audio = audio * target_rms / rms\n"
        "    out = model(audio.to(device))\n"
        "    return out * rms / target_rms if rms < target_rms else out\n"
        "def main(model, device, paths):\n"
        "    for p in paths:\n"
        "        audio, sr = torchaudio.load(p)\n"
        "        wave = infer((audio, sr), model, device)\n"
        "        print(wave.mean().item())\n"
    )
    assert {(f.line, f.code) for f in _lint(tmp_path)} == {(14, "XLA001")}


def test_what_a_processor_returns_as_pt_tensors_is_on_the_host_until_moved(tmp_path):
    """Issue 32 cause 5: `processor(..., return_tensors="pt")` builds its tensors on the host (trl's RLOO counts
    image tiles from its image processor's rows and columns, splits them per sample and reads each group);
    `.to(device)` moves the whole dict, and reads of what the model computes from it stay findings."""
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "def step(model, processor, tokenizer, loader, images, num_images, device, opt):\n"
        "    for texts in loader:\n"
        "        info = processor.image_processor(images=images, return_tensors='pt')\n"
        "        tiles = info['image_rows'] * info['image_cols']\n"
        "        tiles = tiles + (tiles > 1).to(tiles.dtype)\n"
        "        num_tiles = [g.sum().item() for g in torch.split(tiles, num_images)]\n"
        "        inputs = tokenizer(texts, return_tensors='pt').to(device)\n"
        "        loss = model(**inputs, num_tiles=num_tiles).loss\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        print(inputs['input_ids'][0, 0].item(), loss.item())\n"
    )
    assert {(f.line, f.code) for f in _lint(tmp_path)} == {(12, "XLA001")}


def test_a_dict_of_host_copies_made_by_a_comprehension_holds_host_tensors(tmp_path):
    """Issue 32 cause 5 (round 14, read after scoring: minRF's EMA over host copies of the state dict): a dict
    comprehension of `.cpu()` copies, returned by a helper or kept in place, holds host tensors; its twin of
    device values stays a finding."""
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "def extract_state(model):\n"
        "    return {k: v.detach().cpu() for k, v in model.state_dict().items()}\n"
        "def train(model, loader, opt):\n"
        "    device = torch_xla.device()\n"
        "    model.to(device)\n"
        "    ema = extract_state(model)\n"
        "    for x in loader:\n"
        "        loss = model(x.to(device)).sum()\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        for k, v in extract_state(model).items():\n"
        "            ema[k] = ema[k] * 0.99 + v * 0.01\n"
        "            print(ema[k].norm().item())\n"
        "        scaled = {k: v * 2 for k, v in model.state_dict().items()}\n"
        "        print(scaled['w'].sum().item())\n"
        "        torch_xla.sync()\n"
    )
    assert {(f.line, f.code) for f in _lint(tmp_path)} == {(17, "XLA001")}


def test_only_cuda_importers_make_a_device_free_module_gpu_code(tmp_path):
    """Issue 32 cause 8, project-wide: a module that chooses no device runs where its importers run. Imported
    only by a script hard-wired to `cuda:1`, it is GPU code; imported by unit tests and a CLI's `__main__`, or
    registered by name for a framework's registry (loaded by importlib, whatever its static importers), it is
    not decided by them."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    loop = ("import torch\nimport torch.nn as nn\n{head}"
            "class Reward(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.head = nn.Linear(4, 1)\n"
            "    def forward(self, x):\n"
            "        r = self.head(x)\n"
            "        print(r.mean().item())\n"
            "        return r\n")
    (tmp_path / "gpu_only.py").write_text(loop.format(head=""))
    (tmp_path / "cli_step.py").write_text(loop.format(head=""))
    (tmp_path / "registered.py").write_text(loop.format(
        head="from registry import register_trainer\n@register_trainer('plain')\nclass Plain:\n    pass\n"))
    (tmp_path / "registry.py").write_text("def register_trainer(name):\n    return lambda cls: cls\n")
    script = ('import torch\nfrom {mod} import Reward\nrw_device = torch.device("cuda:{{}}".format(1))\n'
              'model = Reward().to(rw_device)\nprint(model(torch.randn(2, 4).to(rw_device)))\n')
    (tmp_path / "score.py").write_text(script.format(mod="gpu_only"))
    (tmp_path / "score_registered.py").write_text(script.format(mod="registered"))
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "__init__.py").write_text("")
    (tmp_path / "cli" / "__main__.py").write_text("from cli_step import Reward\n")
    (tmp_path / "test_cli.py").write_text("from cli.__main__ import Reward\n")
    (tmp_path / "test_cli_step.py").write_text("from cli_step import Reward\n")
    found = {Path(f.path).name for f in _lint(tmp_path) if f.code == "XLA001"}
    assert found == {"cli_step.py", "registered.py"}, found


def test_an_exporter_writing_weights_to_a_file_copies_them_on_purpose(tmp_path):
    """Issue 32 (other): `serialize_fp32(file, tensor)` copies each weight to the host to write it to the
    exported file: the copy is its purpose, as a checkpoint writer's is; a per-step log line written to a file
    by a function that is not an exporter stays a finding."""
    (tmp_path / "t.py").write_text(
        "import struct\n"
        "import torch\n"
        "import torch_xla\n"
        "def serialize_fp32(file, tensor):\n"
        "    d = tensor.detach().cpu().view(-1).to(torch.float32).numpy()\n"
        "    file.write(struct.pack(f'{len(d)}f', *d))\n"
        "def legacy_export(model, filepath):\n"
        "    with open(filepath, 'wb') as f:\n"
        "        for p in model.parameters():\n"
        "            serialize_fp32(f, p)\n"
        "def log_line(f, loss):\n"
        "    f.write(f'{loss.item()}')\n"
        "def main(model, loader, opt):\n"
        "    device = torch_xla.device()\n"
        "    model = model.to(device)\n"
        "    with open('log.txt', 'w') as f:\n"
        "        for step, (x, y) in enumerate(loader):\n"
        "            loss = model(x.to(device), y.to(device))\n"
        "            loss.backward()\n"
        "            opt.step()\n"
        "            log_line(f, loss)\n"
        "            if step % 100 == 0:\n"
        "                legacy_export(model, 'model.bin')\n"
    )
    assert {(f.line, f.code) for f in _lint(tmp_path)} == {(12, "XLA001")}


def test_a_function_that_caches_on_the_host_copies_on_purpose(tmp_path):
    """Round 16, read after scoring (sd-scripts' `cache_batch_latents`): a function named for caching that moves
    what it computed to the host (`vae.encode(x).latent_dist.sample().to("cpu")`, kept for later epochs)
    copies on purpose, as a checkpoint writer does. The same copy in a function that does not cache stays."""
    src = (
        "import torch\nimport torch_xla\n"
        "def {name}(vae, images, infos):\n"
        "    latents = vae(images).to('cpu')\n"
        "    for info, latent in zip(infos, latents):\n"
        "        info.latents = latent\n"
        "def main(vae, model, loader, opt, infos):\n"
        "    device = torch_xla.device()\n"
        "    for x in loader:\n"
        "        x = x.to(device)\n"
        "        {name}(vae, x, infos)\n"
        "        model(x).sum().backward()\n"
        "        opt.step()\n"
        "        torch_xla.sync()\n"
    )
    (tmp_path / "t.py").write_text(src.replace("{name}", "cache_batch_latents"))
    assert {(f.line, f.code) for f in _lint(tmp_path)} == set()
    (tmp_path / "t.py").write_text(src.replace("{name}", "encode_batch_latents"))
    assert {(f.line, f.code) for f in _lint(tmp_path)} == {(4, "XLA001")}



def test_a_guard_on_an_epoch_counter_counts_epochs_not_steps(tmp_path):
    """Issue 32 cause 9: `if epoch % args.val_frequency == 0:` before an evaluation loop runs it once in N
    epochs (open_clip's evaluate); a step-loop line under `if epoch % 5 == 0:` runs every step of one epoch
    in 5. Both said "every N steps". DreamBooth's `(step + steps_per_epoch * epoch) % N` counts steps."""
    (tmp_path / "train.py").write_text(
        "import torch\n\n\n"
        "def evaluate(model, data, epoch, args):\n"
        "    if (epoch % args.val_frequency) == 0 or epoch == args.epochs:\n"
        "        for i, (x, y) in enumerate(data):\n"
        "            with torch.no_grad():\n"
        "                feats = model(x.to(args.device))\n"
        "            print(feats.cpu())\n\n\n"
        "def train(model, loader, opt, args):\n"
        "    for epoch in range(args.epochs):\n"
        "        for step, (x, y) in enumerate(loader):\n"
        "            loss = model(x.to(args.device)).sum()\n"
        "            loss.backward()\n"
        "            opt.step()\n"
        "            if epoch % 5 == 0:\n"
        "                print(loss.item())\n"
        "            if step % 10 == 0:\n"
        "                print(loss.item())\n"
        "            if (step + len(loader) * epoch) % args.validation_steps == 0:\n"
        "                print(loss.item())\n"
        "        evaluate(model, loader, epoch, args)\n")
    msgs = _messages(_lint(tmp_path), "train.py")
    assert "every evaluation batch (the loop runs every `args.val_frequency` epochs)" in msgs[9], msgs
    assert "every step of every 5th epoch" in msgs[19], msgs
    assert "every 10 steps" in msgs[21], msgs
    # DreamBooth's `(step + num_update_steps_per_epoch * epoch) % validation_steps`: a global step count
    assert "every `args.validation_steps` steps" in msgs[23], msgs


def test_a_validation_step_runs_every_evaluation_batch_and_metric_states_are_device_tensors(tmp_path):
    """Issue 32 cause 9 / issue 33 item 6: a Lightning `validation_step` and what it calls run every
    evaluation batch, not every training step; a torchmetrics state (`self.add_state("cer",
    default=torch.tensor(0))`) lives on the module's device, so `float(self.cer)` in `compute()`, called by
    `validation_step` every batch, reads it to the host. A plain int attribute of the metric stays silent."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "metrics.py").write_text(
        "import torch\n"
        "from torchmetrics import Metric\n\n\n"
        "class ErrorRate(Metric):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.add_state('errors', default=torch.tensor(0), dist_reduce_fx='sum')\n"
        "        self.total = 0\n\n"
        "    def update(self, preds, target):\n"
        "        self.errors += (preds != target).sum()\n"
        "        self.total += target.numel()\n\n"
        "    def compute(self):\n"
        "        return float(self.errors) / max(float(self.total), 1.0)\n"
    )
    (tmp_path / "model.py").write_text(
        "import torch\n"
        "import lightning.pytorch as pl\n"
        "from metrics import ErrorRate\n\n\n"
        "class Tagger(pl.LightningModule):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.net = torch.nn.Linear(8, 4)\n"
        "        self.err = ErrorRate()\n\n"
        "    def training_step(self, batch, batch_idx):\n"
        "        x, y = batch\n"
        "        return torch.nn.functional.cross_entropy(self.net(x), y)\n\n"
        "    def validation_step(self, batch, batch_idx):\n"
        "        x, y = batch\n"
        "        preds = self.net(x).argmax(-1)\n"
        "        print(preds.sum().item())\n"
        "        self.err(preds, y)\n"
        "        self.log('err', self.err.compute())\n"
    )
    found = _lint(tmp_path)
    assert {(Path(f.path).name, f.line, f.code) for f in found} == {("model.py", 19, "XLA001"), ("metrics.py", 16, "XLA001")}
    assert "every evaluation batch" in _messages(found, "model.py")[19]
    assert "every evaluation batch (called from model.py:21 in `validation_step()`, which runs every evaluation batch)" \
        in _messages(found, "metrics.py")[16]


def test_every_rule_together_keeps_the_kinds_of_a_comprehension_rebinding_its_source(tmp_path):
    """LLaVA's `input_ids = [ids[mask] for ids, mask in zip(input_ids, attention_mask)]` then a loop over
    them testing `(cur == IMAGE_TOKEN).sum()`: the XLA002 findings must not depend on which other rules
    run (XLA009 once asked the kind of every assigned value before the walk reached it, and the
    comprehension's element kinds were lost)."""
    (tmp_path / "arch.py").write_text(
        "import torch\nimport torch.nn as nn\nIMAGE_TOKEN = -200\n\n\n"
        "class Mixer(nn.Module):\n"
        "    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):\n"
        "        input_ids = [ids[mask] for ids, mask in zip(input_ids, attention_mask)]\n"
        "        out = []\n"
        "        for cur in input_ids:\n"
        "            n = (cur == IMAGE_TOKEN).sum()\n"
        "            if n == 0:\n"
        "                out.append(cur)\n"
        "        return out\n"
    )
    every = {(f.line, f.code) for f in _lint(tmp_path)}
    assert (12, "XLA002") in every


def test_a_test_folders_helpers_beside_its_tests_are_test_code_and_a_lone_program_there_is_not(tmp_path):
    """A reference model or runner in a test folder beside the test modules that use it is test code (its
    CPU goldens and comparison loops are not training); a training program alone in a test folder (an
    integration test's script, a linter's fixtures) is still linted as code."""
    (tmp_path / "pyproject.toml").write_text("")
    moe = tmp_path / "test" / "moe"
    moe.mkdir(parents=True)
    for d in (tmp_path / "test", moe):
        (d / "__init__.py").write_text("")
    helper = ("import torch\nimport torch_xla\n\ndef compare(model, batches):\n"
              "    device = torch_xla.device()\n    for x in batches:\n        out = model(x.to(device))\n"
              "        print(out.sum().item())\n        torch_xla.sync()\n")
    (moe / "environment_setup.py").write_text(helper)
    (moe / "test_routing.py").write_text("from test.moe.environment_setup import compare\n\n"
                                         "def test_routing():\n    compare(None, [])\n")
    fixtures = tmp_path / "tests" / "fixtures"
    fixtures.mkdir(parents=True)
    (fixtures / "slow_train.py").write_text(helper)
    found = {(p.rpartition("/")[2], line) for p, line, _ in
             ((f.path, f.line, f.code) for f in _lint(tmp_path))}
    assert ("environment_setup.py", 8) not in found
    assert ("slow_train.py", 8) in found


def test_a_lazy_init_of_the_objects_state_runs_once_not_every_call(tmp_path):
    """`if self.inv_freq is None: ... self.inv_freq = ...` in a forward builds the state on the first call
    and keeps it (a rotary embedding's frequencies): not a per-step cost. A local default is per call."""
    (tmp_path / "t.py").write_text(
        "import math\nimport torch\nimport torch_xla\n"
        "class Rotary(torch.nn.Module):\n"
        "    def forward(self, x, scale=None):\n"
        "        if self.inv_freq is None:\n"
        "            freqs = 1.0 / (10000 ** (torch.arange(0, 8, 2).float().to(x.device) / 8))\n"
        "            kept = [f.item() for f in freqs if 2 * math.pi / f < 100]\n"
        "            self.inv_freq = torch.tensor(kept, device=x.device)\n"
        "        if scale is None:\n"
        "            scale = x.abs().max().item()\n"
        "        return x * self.inv_freq.sum() / scale\n"
    )
    found = {f.line for f in _lint(tmp_path)}
    assert 8 not in found and 11 in found


def test_a_block_that_gives_an_object_the_attribute_it_lacks_runs_once(tmp_path):
    """Round 16, read after scoring (detectron2's COCO evaluator): `if not hasattr(self._metadata, "json_file"):`
    converts the dataset and sets `self._metadata.json_file`: once, not at every evaluation. A block that tests
    the attribute but sets another runs every time."""
    src = (
        "import torch\nimport torch_xla\n"
        "def convert(model, dataset):\n"
        "    first = dataset[0].to(torch_xla.device())\n"
        "    out = model(first)\n"
        "    return out.sum().item()\n"
        "class Evaluator:\n"
        "    def __init__(self, model, dataset, meta):\n"
        "        self.meta = meta\n"
        "        if not hasattr(self.meta, 'json_file'):\n"
        "            self.meta.{attr} = convert(model, dataset)\n"
        "def train(model, loader, opt, dataset, meta):\n"
        "    for step, x in enumerate(loader):\n"
        "        model(x.to(torch_xla.device())).sum().backward()\n"
        "        if step % 100 == 0:\n"
        "            Evaluator(model, dataset, meta)\n"
        "        opt.step()\n"
        "        torch_xla.sync()\n"
    )
    (tmp_path / "t.py").write_text(src.replace("{attr}", "json_file"))
    assert {f.line for f in _lint(tmp_path)} == set()
    (tmp_path / "t.py").write_text(src.replace("{attr}", "areas"))
    assert {f.line for f in _lint(tmp_path)} == {6}


SAMPLE_IMAGES = """import torch
import torch_xla


def sample_images(args, epoch, steps, model, x):
    if steps == 0:
        if not args.sample_at_first:
            return
    else:
        if args.sample_every_n_steps is None and args.sample_every_n_epochs is None:
            return
        if args.sample_every_n_epochs is not None:
            if epoch is None or epoch % args.sample_every_n_epochs != 0:
                return
        else:
            {step_exit}
    image = model(x)
    print(image.cpu())


def train(args, model, loader, opt):
    for step, x in enumerate(loader):
        x = x.to(torch_xla.device())
        model(x).sum().backward()
        sample_images(args, None, step, model, x)
        opt.step()
        torch_xla.sync()
"""


def test_exits_in_the_arms_of_an_if_else_make_the_rest_periodic(tmp_path):
    """Round 16, read after scoring (sd-scripts' `sample_images`): `if steps == 0: (if not first: return) else:
    (... if steps % every != 0 or epoch is not None: return)`: every path that goes on passed a periodic exit (or
    runs once, at the start): the rest runs every N steps. The twin's step arm has no periodic exit."""
    exit_ = "if steps % args.sample_every_n_steps != 0 or epoch is not None:\n                return"
    (tmp_path / "t.py").write_text(SAMPLE_IMAGES.replace("{step_exit}", exit_))
    msgs = _messages(_lint(tmp_path), "t.py")
    assert list(msgs) == [19] and "every `args.sample_every_n_steps` steps" in msgs[19], msgs
    (tmp_path / "t.py").write_text(SAMPLE_IMAGES.replace("{step_exit}", "pass"))
    msgs = _messages(_lint(tmp_path), "t.py")
    assert list(msgs) == [18] and "every step" in msgs[18], msgs
    # a size's divisibility (`height % 8`) is no period (sd-scripts' image generator checked it, then raised)
    size = "if args.height % 8 != 0 or args.width % 8 != 0:\n                raise ValueError('size')"
    (tmp_path / "t.py").write_text(SAMPLE_IMAGES.replace("{step_exit}", size))
    msgs = _messages(_lint(tmp_path), "t.py")
    assert list(msgs) == [19] and "every step" in msgs[19], msgs


def test_a_post_processors_forward_runs_every_evaluation_batch(tmp_path):
    """DETR's `PostProcessPanoptic.forward` turns the model's outputs into predictions for the evaluation:
    not a training step. Any other module's forward is still every step."""
    (tmp_path / "t.py").write_text(
        "import torch\nimport torch_xla\n"
        "class PostProcessPanoptic(torch.nn.Module):\n"
        "    def forward(self, outputs, sizes):\n"
        "        keep = outputs['scores'] > 0.85\n"
        "        return outputs['masks'][keep].cpu()\n"
        "class Criterion(torch.nn.Module):\n"
        "    def forward(self, outputs, target):\n"
        "        return outputs['masks'][target > 0].sum()\n"
    )
    found = {(f.line, f.code): f.message for f in _lint(tmp_path)}
    assert "every evaluation batch" in found[(6, "XLA003")] and "every evaluation batch" in found[(6, "XLA001")]
    assert "every step" in found[(9, "XLA003")]


def test_an_attribute_the_step_computes_before_its_barrier_is_read_as_data_in_a_later_hook(tmp_path):
    """neuronx-distributed's Lightning modules: `xm.mark_step()` then `self.loss = loss.detach()` in
    `training_step`, read in `on_train_batch_end`: the step's graph computed it, the read copies data and
    cuts nothing. A value made after the barrier with new operations, or with no barrier at all, is read
    from a graph the read itself must run."""
    (tmp_path / "m.py").write_text(
        "import torch\nimport torch_xla.core.xla_model as xm\nimport lightning.pytorch as pl\n\n\n"
        "class Module(pl.LightningModule):\n"
        "    def training_step(self, batch, batch_idx):\n"
        "        loss = self.model(batch['input_ids']).mean()\n"
        "        self.last = loss.detach()\n"
        "        xm.mark_step()\n"
        "        self.scaled = loss.detach() * 2\n"
        "        self.loss = loss.detach()\n"
        "        return loss\n\n"
        "    def on_train_batch_end(self, *args, **kwargs):\n"
        "        print(self.loss.item())\n"
        "        print(self.last.item())\n"
        "        print(self.scaled.item())\n\n\n"
        "class Plain(pl.LightningModule):\n"
        "    def training_step(self, batch, batch_idx):\n"
        "        self.last = self.model(batch['input_ids']).mean().detach()\n"
        "        return self.last\n\n"
        "    def on_train_batch_end(self, *args, **kwargs):\n"
        "        print(self.last.item())\n"
    )
    assert {f.line for f in _lint(tmp_path) if f.code == "XLA001"} == {18, 27}


NANOGPT_EVAL = '''import torch
import torch.distributed as dist


def iterate_examples(split):
    for i in range(10):
        yield i


def train(model, loader, opt, device, ddp, ddp_rank, ddp_world_size, max_steps):
    for step in range(max_steps):
        last_step = step == max_steps - 1
        if step % 250 == 0 or last_step:
            model.eval()
            num_correct = 0
            num_total = 0
            for i, example in enumerate(iterate_examples("val")):
                if i % ddp_world_size != ddp_rank:
                    continue
                tokens = torch.zeros(4, 8, dtype=torch.long).to(device)
                with torch.no_grad():
                    logits, loss = model(tokens)
                pred = logits.argmax().item()
                num_total += 1
                num_correct += int(pred == example)
            if ddp:
                num_total = torch.tensor(num_total, dtype=torch.long, device=device)
                dist.all_reduce(num_total, op=dist.ReduceOp.SUM)
                num_total = num_total.item()
            print(num_correct / num_total)
        model.train()
        x, y = next(loader)
        logits, loss = model(x.to(device), y.to(device))
        loss.backward()
        opt.step()
'''


def test_a_benchmark_in_the_log_block_reads_per_example_and_its_all_reduced_total_once(tmp_path):
    """Issue 32 causes 4 and 9 (round 15, read after scoring: build-nanogpt's HellaSwag evaluation): the loop in
    the training loop's periodic block runs the model without training: an evaluation. Its per-example read
    happens every 250 steps (many times), not "every ddp_world_size steps": `i % ddp_world_size != ddp_rank` deals
    the examples out to the processes, it is no period. The total it counted, made a tensor, all-reduced and read
    after it (`num_total = torch.tensor(num_total, ...)` rebinding the same name), is the evaluation's result,
    read once per evaluation: silent."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(NANOGPT_EVAL)
    msgs = _messages(_lint(tmp_path), "train.py")
    assert set(msgs) == {23}
    assert "every 250 steps" in msgs[23] and "world_size" not in msgs[23]


def test_a_loop_over_batch_indices_is_no_decoding_loop(tmp_path):
    """Issue 32 cause 9 (round 15, read after scoring: a course notebook's test loop): `for batch_idx in
    range(len(test_data_gen)):` goes over the batches of a data generator ("gen" is no decode word there): every
    evaluation batch, not every decoding step. Its twin over token positions stays a decoding loop."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "def test(model, test_data_gen, device):\n"
        "    num_correct = 0\n"
        "    with torch.no_grad():\n"
        "        for batch_idx in range(len(test_data_gen)):\n"
        "            data, target = test_data_gen[batch_idx]\n"
        "            y_pred = model(data.to(device)).argmax(dim=1)\n"
        "            num_correct += (y_pred == target.to(device)).sum().item()\n"
        "    return num_correct\n"
        "def generate(model, idx, max_new_tokens):\n"
        "    with torch.no_grad():\n"
        "        for pos in range(max_new_tokens):\n"
        "            logits = model(idx)\n"
        "            print(logits.argmax().item())\n"
        "    return idx\n")
    msgs = _messages(_lint(tmp_path), "t.py")
    assert "every evaluation batch" in msgs[8] and "decoding" not in msgs[8]
    assert "every decoding step" in msgs[14]


def test_a_loader_loop_after_model_eval_runs_every_evaluation_batch(tmp_path):
    """``model.eval()`` then a loop over a loader that trains nothing: an accuracy pass, not the training's
    step loop (a notebook's cell after the training cell); a later ``model.train()`` makes the next loop a
    training loop again, and one under ``torch.no_grad()`` is an inference pass too."""
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "import torch_xla\n"
        "device = torch_xla.device()\n"
        "model = torch.nn.Linear(4, 2).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 4)), batch_size=2)\n"
        "model.train()\n"
        "for (x,) in loader:\n"
        "    loss = model(x.to(device)).sum()\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    print(loss.cpu())\n"
        "model.eval()\n"
        "for (x,) in loader:\n"
        "    out = model(x.to(device)).cpu()\n"
        "model.train()\n"
        "for (x,) in loader:\n"
        "    out = model(x.to(device)).cpu()\n"
        "def accuracy(model, loader):\n"
        "    with torch.no_grad():\n"
        "        for (x,) in loader:\n"
        "            out = model(x.to(device)).cpu()\n"
        "accuracy(model, loader)\n"
    )
    msgs = _messages(_lint(tmp_path), "t.py")
    assert "every step" in msgs[12]
    assert "every evaluation batch" in msgs[15], msgs[15]
    assert "every step" in msgs[18], msgs[18]
    assert "every evaluation batch" in msgs[22], msgs[22]


def test_a_loss_of_a_host_copy_is_a_host_tensor(tmp_path):
    """``criterion(prediction.cpu(), y)``: the loss module runs where its inputs are; formatting the loss
    reads nothing from the device (the copy is the cost, reported where it is made)."""
    (tmp_path / "t.py").write_text(
        "import numpy as np\n"
        "import torch\n"
        "import torch_xla\n"
        "device = torch_xla.device()\n"
        "rnn = torch.nn.RNN(1, 8, batch_first=True).to(device)\n"
        "criterion = torch.nn.MSELoss()\n"
        "opt = torch.optim.SGD(rnn.parameters(), lr=0.1)\n"
        "for step in range(100):\n"
        "    x = torch.from_numpy(np.random.randn(1, 10, 1).astype(np.float32)).to(device)\n"
        "    y = torch.from_numpy(np.random.randn(1, 10, 8).astype(np.float32))\n"
        "    prediction, h = rnn(x)\n"
        "    loss = criterion(prediction.cpu(), y)\n"
        "    loss.backward()\n"
        "    opt.step()\n"
        "    if (step + 1) % 20 == 0:\n"
        "        print('loss {:4f}'.format(loss))\n"
        "    torch_xla.sync()\n"
    )
    findings = [f for f in _lint(tmp_path) if Path(f.path).name == "t.py"]
    assert [(f.line, f.code) for f in findings] == [(12, "XLA001")], [(f.line, f.code, f.message) for f in findings]


SOPHIA = '''import torch
import torch_xla


def train(model, optimizer, get_batch, hess_interval, max_iters):
    device = torch_xla.device()
    for iter_num in range(max_iters):
        x, y = get_batch()
        loss = model(x.to(device), y.to(device))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if iter_num % hess_interval {test}:
            norm = loss.detach()
        else:
            optimizer.update_hessian()
            norm = optimizer.hessian_norm().item()
        torch_xla.sync()
'''


def test_the_else_branch_of_a_negated_periodic_test_runs_every_period(tmp_path):
    """Round 26, read after scoring (Sophia's trainer: `if iter_num % hess_interval != hess_interval - 1:` a plain
    step, `else:` the Hessian update and its norm read): the `else` branch runs every `hess_interval` steps, and
    the read's message says so. Twin: the `else` of `== 0` runs on the other steps: "every step"."""
    for test, when in (("!= hess_interval - 1", "every `hess_interval` steps"),
                       ("== 0", "every step")):
        path = tmp_path / f"sophia{len(when)}.py"
        path.write_text(SOPHIA.replace("{test}", test))
        msgs = _messages(_lint(path), path.name)
        assert set(msgs) == {17}, msgs
        assert when in msgs[17], msgs[17]
