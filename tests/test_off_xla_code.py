"""Issue 32 cause 8: code that never runs on XLA prints nothing, decided from what the program says of its
device and from who imports a module. Each case has its twin that stays a finding.

- a script hard-wired to CUDA names no XLA even when it plots (``set_xlabel`` is not "xla"), and a device
  name given only CUDA indices pins CUDA even where a function above ``main()`` uses it;
- a module runs where its importers run: packages count their modules' importers (``import a.b.c`` runs
  ``a`` and ``a.b``; ``from .heads import *``), a registering module imported by its own package is decided
  by the package's importers, functions that import a module lazily are importers too, and a module that
  takes its device as an argument runs on its importers' device;
- a ``setup.py`` beside an ``__init__.py`` is a module of the package, not a project root;
- a script whose entry point loads a model that only CUDA kernels run (bitsandbytes 8/4-bit, torchao) does
  not run on XLA anywhere: not only the loading function, every function of it;
- a method of a project module class (``q_module.pack_weight(w)``) is not a pass of the model: a loop
  calling it is not a model loop.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_xlalint
from xlalint.config import build_settings
from xlalint.run.project import lint_files
from xlalint.semantics.project import marked_root
from xlalint.sources.discover import iter_python_files


def _lint(*paths) -> list:
    settings = build_settings(None)
    files = [str(p) for p in iter_python_files([str(p) for p in paths], settings)]
    return lint_files(files, settings, jobs=1, cache=None)


def _where(findings) -> set:
    return {(Path(f.path).name, f.line, f.code) for f in findings}


def _lines_and_codes(tmp_path, name: str, source: str) -> set:
    """(line, code) of what a one-file project (`pyproject.toml` and `name`) prints, linted whole."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / name).write_text(source)
    return {(f.line, f.code) for f in _lint(tmp_path)}


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


DDP_SCRIPT = '''import torch
import torch.distributed as dist
import matplotlib.pyplot as plt


def calc_loss(model, x, y, device):
    x, y = x.to(device), y.to(device)
    return torch.nn.functional.cross_entropy(model(x), y)


def train(model, loader, opt, device):
    for x, y in loader:
        loss = calc_loss(model, x, y, device)
        loss.backward()
        opt.step()
        print(loss.item())


def plot(losses):
    fig, ax = plt.subplots()
    ax.set_xlabel("Epochs")
    ax.plot(losses)


def main(rank, model, loader, opt):
    dist.init_process_group(backend="nccl", rank=rank, world_size=2)
    torch.cuda.set_device(rank)
    device = torch.device({device})
    train(model.to(device), loader, opt, device)
'''


def test_a_ddp_script_pinned_to_its_rank_gpu_is_not_xla_code_even_when_it_plots(tmp_path):
    _write(tmp_path, {"pyproject.toml": "", "ddp.py": DDP_SCRIPT.format(device='"cuda", rank')})
    assert _where(_lint(tmp_path)) == set()


def test_a_ddp_script_whose_device_is_a_setting_stays_xla_code(tmp_path):
    _write(tmp_path, {"pyproject.toml": "", "ddp.py": DDP_SCRIPT.format(device="args.device")})
    assert _where(_lint(tmp_path)) == {("ddp.py", 16, "XLA001")}


HEAD = '''import torch
import torch.nn as nn
from {builder} import HEADS


@HEADS.register_module()
class DepthHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 1)

    def forward(self, x):
        out = self.proj(x)
        if out.mean().item() > 0:
            out = out * 2
        return out
'''

MMCV_PACKAGE = {
    "pyproject.toml": "",
    "pkg/__init__.py": "",
    "pkg/eval/__init__.py": "",
    # an evaluation's set-up module, not the project's build script
    "pkg/eval/setup.py": "def get_args_parser():\n    return None\n",
    "pkg/eval/depth/__init__.py": "",
    "pkg/eval/depth/models/__init__.py": "from .builder import HEADS, build_head\nfrom .heads import *  # noqa\n",
    "pkg/eval/depth/models/builder.py": (
        "class Registry:\n"
        "    def register_module(self):\n"
        "        return lambda cls: cls\n"
        "HEADS = Registry()\n"
        "def build_head(cfg):\n"
        "    return None\n"),
    "pkg/eval/depth/models/heads/__init__.py": "from .depth_head import DepthHead\n",
    "pkg/eval/depth/models/heads/depth_head.py": HEAD.format(builder="..builder"),
}

CUDA_NOTEBOOK_SCRIPT = '''import torch
import pkg.eval.depth.models
from pkg.eval.depth.models import build_head

model = build_head(dict(type="DepthHead"))
model.cuda()
with torch.no_grad():
    for x in [torch.randn(2, 8) for _ in range(3)]:
        print(model(x.cuda()))
'''

XLA_SCRIPT = '''import torch
import torch_xla
from pkg.eval.depth.models.heads import DepthHead


def train(loader):
    device = torch_xla.device()
    model = DepthHead().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in loader:
        loss = model(x.to(device)).sum()
        loss.backward()
        opt.step()
        torch_xla.sync()
'''


def test_registered_heads_used_only_by_a_cuda_script_are_not_xla_code(tmp_path):
    _write(tmp_path, {**MMCV_PACKAGE, "demo.py": CUDA_NOTEBOOK_SCRIPT})
    assert _where(_lint(tmp_path)) == set()


def test_registered_heads_trained_on_xla_by_another_script_stay_findings(tmp_path):
    _write(tmp_path, {**MMCV_PACKAGE, "demo.py": CUDA_NOTEBOOK_SCRIPT, "train_tpu.py": XLA_SCRIPT})
    assert _where(_lint(tmp_path)) == {("depth_head.py", 14, "XLA001")}


def test_a_setup_module_beside_an_init_is_not_a_project_root(tmp_path):
    _write(tmp_path, MMCV_PACKAGE)
    assert marked_root(str(tmp_path / "pkg" / "eval")) == str(tmp_path)
    (tmp_path / "lone").mkdir()
    (tmp_path / "lone" / "setup.py").write_text("")
    assert marked_root(str(tmp_path / "lone")) == str(tmp_path / "lone")


def test_a_lazy_import_in_a_hub_function_is_an_importer(tmp_path):
    """``def depth_head(): from pkg.eval.depth.models.heads import DepthHead``: the hub entry point loads it
    for whoever calls it, on any device; only a CUDA demo imports it at the top."""
    hub = ("def depth_head():\n"
           "    from pkg.eval.depth.models.heads import DepthHead\n"
           "    return DepthHead()\n")
    _write(tmp_path, {**MMCV_PACKAGE, "demo.py": CUDA_NOTEBOOK_SCRIPT, "hubconf.py": hub})
    assert _where(_lint(tmp_path)) == {("depth_head.py", 14, "XLA001")}


def test_a_module_taking_its_device_as_an_argument_runs_on_its_importers_device(tmp_path):
    helper = ("import torch\n"
              "def score(model, loader, device):\n"
              "    for batch in loader:\n"
              "        out = model(batch.to(device))\n"
              "        print(out.mean().item())\n")
    gpu = ("import torch\nfrom scoring import score\n"
           "rw_device = torch.device('cuda:{}'.format(1))\n"
           "model = torch.nn.Linear(4, 1).to(rw_device)\n"
           "score(model, [torch.randn(2, 4) for _ in range(3)], rw_device)\n")
    _write(tmp_path, {"pyproject.toml": "", "scoring.py": helper, "score_gpu.py": gpu})
    assert _where(_lint(tmp_path)) == set()
    tpu = ("import torch\nimport torch_xla\nfrom scoring import score\n"
           "device = torch_xla.device()\n"
           "model = torch.nn.Linear(4, 1).to(device)\n"
           "score(model, [torch.randn(2, 4) for _ in range(3)], device)\n")
    (tmp_path / "score_tpu.py").write_text(tpu)
    assert _where(_lint(tmp_path)) == {("scoring.py", 5, "XLA001")}


BNB_SCRIPT = '''import torch
from transformers import AutoModelForCausalLM, BitsAndBytesConfig


def evaluate(model, loader, device):
    model.eval()
    for batch in loader:
        with torch.no_grad():
            out = model(batch["input_ids"].to(device))
        print(out.logits.argmax(-1).cpu())


def load(name, quantize):
    {load}
    return model


def main(args):
    device = torch.device(args.device)
    model = load(args.model, args.quantize)
    evaluate(model, args.loader, device)


if __name__ == "__main__":
    main(parse_args())
'''


def test_a_script_whose_entry_point_loads_a_4bit_model_is_not_xla_code(tmp_path):
    load = ('bnb = BitsAndBytesConfig(load_in_4bit=True)\n'
            '    model = AutoModelForCausalLM.from_pretrained(name, quantization_config=bnb)')
    _write(tmp_path, {"pyproject.toml": "", "run.py": BNB_SCRIPT.format(load=load)})
    assert _where(_lint(tmp_path)) == set()


def test_a_script_quantizing_with_torchao_is_not_xla_code(tmp_path):
    load = ('from transformers import TorchAoConfig\n'
            '    model = AutoModelForCausalLM.from_pretrained(name, quantization_config=TorchAoConfig("int8_weight_only"))')
    _write(tmp_path, {"pyproject.toml": "", "run.py": BNB_SCRIPT.format(load=load)})
    assert _where(_lint(tmp_path)) == set()


def test_a_script_that_quantizes_only_when_asked_stays_xla_code(tmp_path):
    load = ('model = AutoModelForCausalLM.from_pretrained(\n'
            '        name, quantization_config=BitsAndBytesConfig(load_in_4bit=True) if quantize else None)')
    _write(tmp_path, {"pyproject.toml": "", "run.py": BNB_SCRIPT.format(load=load)})
    assert _where(_lint(tmp_path)) == {("run.py", 10, "XLA001")}


QUANTIZER = '''import torch
import torch.nn as nn


class PackedLinear(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("packed", torch.zeros(n, dtype=torch.uint8))

    def pack_weight(self, w):
        self.packed.copy_(w.to(torch.uint8))

    def forward(self, x):
        return x


class Quantizer:
    def __init__(self, layer):
        self.layer = layer
        self.H = torch.zeros((8, 8), device=layer.weight.device)

    def quantize(self):
        w = self.layer.weight.detach()
        H = self.H
        dead = torch.diag(H) == 0
        H[dead, dead] = 1
        q_module = PackedLinear(w.numel())
        q_module.pack_weight(w)
        return q_module, {loss}


def quantize_blocks(model, inputs, device):
    for block in model.blocks:
        block.to(device)
        for name in ("attn", "mlp"):
            quantizer = Quantizer(block.get_submodule(name))
            q, err = quantizer.quantize()
            setattr(block, name, q)
            print(err)
        for x in inputs:
            block(x.to(device))
'''


def test_a_method_of_a_project_module_class_is_not_a_model_pass(tmp_path):
    """GPTQ-style quantization: a loop over a block's sublayers calls `quantize()`, which packs weights
    with `q_module.pack_weight(w)`: not a model run, so the sublayer loop is not an evaluation loop and
    the boolean-mask write inside `quantize` runs once per sublayer of a one-off script."""
    _write(tmp_path, {"pyproject.toml": "", "gptq.py": QUANTIZER.format(loss="0.0")})
    assert _where(_lint(tmp_path)) == set()


def test_a_project_module_called_with_inputs_is_still_a_model_pass(tmp_path):
    """The twin: `q_module(w)` runs the module, so the sublayer loop is a model loop and the mask write
    in `quantize` is reported."""
    src = QUANTIZER.format(loss="0.0").replace("q_module.pack_weight(w)", "q_module(w)")
    _write(tmp_path, {"pyproject.toml": "", "gptq.py": src})
    line = src.splitlines().index("        H[dead, dead] = 1") + 1
    assert ("gptq.py", line, "XLA003") in _where(_lint(tmp_path))


def test_registered_heads_a_package_loads_by_name_are_not_decided_by_static_importers(tmp_path):
    """fairseq's `models/__init__.py` imports every model folder with `importlib`: the framework loads the
    registered model for whatever program builds it by name, so a CUDA demo importing the package statically
    does not make it CUDA code."""
    package = dict(MMCV_PACKAGE)
    package["pkg/eval/depth/models/__init__.py"] = (
        "import importlib\nimport os\n"
        + MMCV_PACKAGE["pkg/eval/depth/models/__init__.py"]
        + "for name in os.listdir(os.path.dirname(__file__)):\n"
          "    importlib.import_module('pkg.eval.depth.models.' + name.split('.')[0])\n")
    _write(tmp_path, {**package, "demo.py": CUDA_NOTEBOOK_SCRIPT})
    assert _where(_lint(tmp_path)) == {("depth_head.py", 14, "XLA001")}


TRAINER = '''import torch


class Trainer:
    def __init__(self, args, model, loader):
        self.local_rank = args.local_rank
        self.device = {device}
        self.data_type = torch.float16 if args.fp16 else torch.float32
        self.model, self.loader = model, loader

    def train(self):
        torch.cuda.set_device(self.local_rank)
        self.model.to(self.device)
        opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        for x, y in self.loader:
            x = x.to(self.data_type)
            loss = self.model(x.to(self.device), y.to(self.device))
            loss.backward()
            opt.step()
            print(loss.item())
'''


def test_a_trainer_that_sets_its_device_to_its_rank_gpu_is_not_xla_code(tmp_path):
    """YOLOX: `self.device = "cuda:{}".format(self.local_rank)` is a CUDA device index, and `x.to(self.data_type)`
    a dtype: the class places on nothing chosen at run time."""
    _write(tmp_path, {"pyproject.toml": "", "trainer.py": TRAINER.format(device='"cuda:{}".format(self.local_rank)')})
    assert _where(_lint(tmp_path)) == set()


def test_a_trainer_whose_device_is_an_argument_stays_xla_code(tmp_path):
    _write(tmp_path, {"pyproject.toml": "", "trainer.py": TRAINER.format(device="args.device")})
    assert _where(_lint(tmp_path)) == {("trainer.py", 20, "XLA001")}


def test_a_megengine_demo_is_not_torch_code(tmp_path):
    demo = ("import megengine.functional as F\nimport numpy as np\n\n\n"
            "def postprocess(model, images, conf):\n"
            "    for img in images:\n"
            "        detections = model(img)\n"
            "        conf_mask = detections[:, 4] >= conf\n"
            "        detections = detections[conf_mask]\n"
            "        print(F.argmax(detections, 1).numpy())\n")
    _write(tmp_path, {"pyproject.toml": "", "demo.py": demo})
    assert _where(_lint(tmp_path)) == set()


def test_an_attribute_a_function_tests_with_hasattr_is_a_python_attribute_not_a_tensor(tmp_path):
    """neuronx-distributed's `param_is_not_shared(param)`: `not hasattr(param, "shared") or not param.shared`
    reads a flag somebody set on the parameter, not a tensor."""
    found = _lines_and_codes(tmp_path, "train.py", (
        "import torch\nimport torch_xla\n\n\ndef clip(model, loader, opt):\n"
        "    for x, y in loader:\n"
        "        loss = model(x.to(torch_xla.device())).sum()\n"
        "        loss.backward()\n"
        "        for p in model.parameters():\n"
        "            if not hasattr(p.grad, 'shared') or not p.grad.shared:\n"
        "                p.grad.mul_(0.5)\n"
        "            if p.grad.sum() > 0:\n"
        "                p.grad.zero_()\n"
        "        opt.step()\n"
        "        torch_xla.sync()\n"))
    assert (10, "XLA002") not in found and (12, "XLA002") in found


def test_a_loop_that_moves_items_of_its_batch_through_names_iterates_host_batches(tmp_path):
    """neuronx-distributed's evaluation: `input_ids = batch["input_ids"]; input_ids = input_ids.to("xla")`: the
    loop moves what it needs itself, so the loader yields host tensors: `labels`, never moved, stays there."""
    found = _lines_and_codes(tmp_path, "evaluate.py", (
        "import torch\nimport torch_xla\n\n\ndef evaluate(model, tokenizer, test_loader):\n"
        "    with torch.no_grad():\n"
        "        for step, batch in enumerate(test_loader):\n"
        "            input_ids = batch['input_ids']\n"
        "            input_ids = input_ids.to('xla')\n"
        "            labels = batch['labels']\n"
        "            out = model.generate(input_ids=input_ids, max_new_tokens=8)\n"
        "            a = tokenizer.decode(out[0].cpu())\n"
        "            b = tokenizer.decode(labels[0].cpu())\n"))
    assert (12, "XLA001") in found and (13, "XLA001") not in found


def test_flash_attention_classes_and_branches_are_not_xla_code(tmp_path):
    """transformers-style models copied into a project (optimum-tpu, parler-tts): `LlamaFlashAttention2`'s
    methods and a helper only they call, and `if self.config._attn_implementation == "flash_attention_2":`,
    run flash-attn's CUDA kernels. The eager attention beside them is XLA code."""
    found = _lines_and_codes(tmp_path, "modeling.py", (
        "import torch\nimport torch.nn as nn\nimport torch_xla\n\n\n"
        "def _get_unpad_data(attention_mask):\n"
        "    indices = torch.nonzero(attention_mask.flatten(), as_tuple=False).flatten()\n"
        "    return indices, attention_mask.sum(-1).max().item()\n\n\n"
        "class LlamaAttention(nn.Module):\n"
        "    def forward(self, h, mask):\n"
        "        if self.config._attn_implementation == 'flash_attention_2':\n"
        "            return h[mask.bool()]\n"
        "        return h.masked_fill(mask == 0, 0)[mask.bool()]\n\n\n"
        "class LlamaFlashAttention2(LlamaAttention):\n"
        "    def forward(self, h, mask):\n"
        "        indices, n = _get_unpad_data(mask)\n"
        "        return h.flatten(0, 1)[indices]\n"))
    assert (15, "XLA003") in found
    assert not {(7, "XLA003"), (8, "XLA001"), (14, "XLA003")} & found


def test_the_older_flash_attention_flag_is_not_xla_code(tmp_path):
    """transformers 4.3x models copied into a project (EAGLE's `modeling_mixtral_kv.py`): `if
    self._use_flash_attention_2:` picks flash-attn's CUDA kernels, as the `_attn_implementation` test does."""
    found = _lines_and_codes(tmp_path, "modeling.py", (
        "import torch\nimport torch.nn as nn\nimport torch_xla\n\n\n"
        "class MixtralModel(nn.Module):\n"
        "    def forward(self, h, mask):\n"
        "        if self._use_flash_attention_2:\n"
        "            return h[mask.bool()]\n"
        "        return h.masked_fill(mask == 0, 0)[mask.bool()]\n"))
    assert (9, "XLA003") not in found and (10, "XLA003") in found


def test_a_forward_parameter_compared_with_a_size_is_a_python_int(tmp_path):
    """demucs: `assert z.shape[-1] == length` in a layer's forward: `length` is a size, not a tensor (a
    guessed parameter); a comparison with a tensor the code computes is still a device test."""
    found = _lines_and_codes(tmp_path, "layers.py", (
        "import torch\nimport torch.nn as nn\nimport torch_xla\n\n\n"
        "class Decoder(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv1d(4, 4, 3, padding=1)\n\n"
        "    def forward(self, x, length):\n"
        "        z = self.conv(x)[..., :length]\n"
        "        assert z.shape[-1] == length, (z.shape[-1], length)\n"
        "        assert (z.abs() < 1e6).all()\n"
        "        return z\n"))
    assert (13, "XLA002") not in found and (14, "XLA002") in found


RANK_SCRIPT = '''import os
import torch
import torch.distributed as dist


def train(model, loader, opt):
    rank = {rank}
    model.to({device})
    for x, y in loader:
        x, y = x.to({device}), y.to({device})
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
'''


def test_a_script_that_moves_its_batches_to_its_rank_is_not_xla_code(tmp_path):
    """`x.to(rank)`: an int device is a CUDA index (torch_xla's devices are `xla:N`, chosen by
    `torch_xla.device()`): the rank from torch.distributed, DeepSpeed's comm, the LOCAL_RANK variable or the
    arguments is a GPU layout (DeepSpeed and torchrun scripts, Ray GPU workers), not a device a user points
    at XLA."""
    for rank, device in [("dist.get_rank()", "rank"), ('int(os.environ["LOCAL_RANK"])', "rank"),
                         ("None", "args.local_rank"), ("dist.get_rank()", "torch.device(rank)")]:
        source = RANK_SCRIPT.format(rank=rank, device=device).replace("(model, loader, opt)", "(model, loader, opt, args=None)")
        assert _lines_and_codes(tmp_path, "train.py", source) == set(), (rank, device)


def test_a_script_whose_device_is_chosen_stays_xla_code_beside_its_rank(tmp_path):
    source = RANK_SCRIPT.format(rank="dist.get_rank()", device="device").replace("(model, loader, opt)", "(model, loader, opt, device)")
    assert _lines_and_codes(tmp_path, "train.py", source) == {(15, "XLA001")}


def test_a_placement_that_follows_a_weight_is_not_a_device_choice(tmp_path):
    """EAGLE's evaluation scripts: `.to(model.base_model.lm_head.weight.device)` goes wherever the weights
    are (the script put them on CUDA), neither CUDA by name nor a device chosen at run time; so the script
    pins CUDA, and the device-free library it alone imports is not XLA code. `.to(self.accelerator.device)`
    stays a choice."""
    lib = ("import torch\n\n\n"
           "def decode(model, ids, steps):\n"
           "    for _ in range(steps):\n"
           "        nxt = model(ids)[:, -1].argmax(-1)\n"
           "        if nxt.item() == 2:\n"
           "            break\n"
           "        ids = torch.cat([ids, nxt[:, None]], 1)\n"
           "    return ids\n")
    script = ("import torch\nfrom lib import decode\n\n\n"
              "def main(model, ids, buffers):\n"
              "    model.cuda()\n"
              "    buffers = buffers.to({device})\n"
              "    return decode(model, ids, 8)\n")
    _write(tmp_path, {"pyproject.toml": "", "lib.py": lib,
                      "run.py": script.format(device="model.base_model.lm_head.weight.device")})
    assert _where(_lint(tmp_path)) == set()
    _write(tmp_path, {"run.py": script.format(device="self.accelerator.device").replace("(model,", "(self, model,")})
    assert ("lib.py", 7, "XLA001") in _where(_lint(tmp_path))


def test_a_host_runtime_of_a_compiled_model_is_not_xla_code(tmp_path):
    """Neuron's inference wrappers (`NeuronBaseForCausalLM`): a class whose `device` property answers the
    CPU is the host side of a model compiled ahead of time: it pads and logs host tensors around the compiled
    graph's call. Its methods, and those of a subclass in another module, are not XLA code; a class whose
    `device` is anything else is."""
    base = ("import logging\nimport torch\nimport torch.nn as nn\n\n\n"
            "class HostForCausalLM(nn.Module):\n"
            "    @property\n"
            "    def device(self) -> torch.device:\n"
            "        \"\"\"We don't want generate() to move anything.\"\"\"\n"
            "        return torch.device({where!r})\n\n"
            "    def forward(self, input_ids, attention_mask=None):\n"
            "        self._log_input(input_ids)\n"
            "        if attention_mask.sum() > 0:\n"
            "            return input_ids\n"
            "        return input_ids * 2\n\n"
            "    def _log_input(self, input_ids):\n"
            "        logging.info('input_ids =%s', input_ids)\n")
    sub = ("from base import HostForCausalLM\n\n\n"
           "class HostForImageText(HostForCausalLM):\n"
           "    def forward(self, input_ids, pixel_mask=None):\n"
           "        if pixel_mask.any():\n"
           "            return input_ids\n"
           "        return input_ids + 1\n")
    _write(tmp_path, {"pyproject.toml": "", "base.py": base.format(where="cpu"), "sub.py": sub})
    assert _where(_lint(tmp_path)) == set()
    _write(tmp_path, {"base.py": base.format(where="meta")})
    assert {("base.py", 14, "XLA002"), ("base.py", 19, "XLA006"), ("sub.py", 6, "XLA002")} <= _where(_lint(tmp_path))


def test_a_model_built_on_xformers_attention_is_not_xla_code(tmp_path):
    """mistral-inference: `from xformers.ops.fmha import memory_efficient_attention` at the top: xformers'
    attention has CUDA kernels only, and the decoding loop of a module importing that model is CUDA code too.
    Imported under `if is_xformers_available():` (diffusers) it is optional: the module stays XLA code."""
    model = ("import torch\nimport torch.nn as nn\n{imp}\n\n\n"
             "class Attention(nn.Module):\n"
             "    def forward(self, q, k, v, mask):\n"
             "        if mask.any():\n"
             "            return q\n"
             "        return q + k + v\n")
    gen = ("import torch\nfrom model import Attention\n\n\n"
           "def generate(model, ids, n, eos):\n"
           "    for _ in range(n):\n"
           "        nxt = model(ids, ids, ids, ids > 0)[:, -1]\n"
           "        if nxt.item() == eos:\n"
           "            break\n"
           "    return ids\n")
    _write(tmp_path, {"pyproject.toml": "", "model.py": model.format(imp="from xformers.ops import memory_efficient_attention"),
                      "generate.py": gen})
    assert _where(_lint(tmp_path)) == set()
    optional = "from diffusers.utils import is_xformers_available\nif is_xformers_available():\n    import xformers.ops"
    _write(tmp_path, {"model.py": model.format(imp=optional)})
    assert {("model.py", 10, "XLA002"), ("generate.py", 8, "XLA001")} <= _where(_lint(tmp_path))


def test_a_qlora_config_chosen_by_a_flag_still_quantizes_on_cuda(tmp_path):
    """qlora: `BitsAndBytesConfig(load_in_4bit=args.bits == 4, ...)` on the loading function's straight line:
    the k-bit model runs bitsandbytes' CUDA kernels (a literal `False` would not)."""
    source = ("import torch\nfrom transformers import AutoModelForCausalLM, BitsAndBytesConfig\n\n\n"
              "def load(args):\n"
              "    return AutoModelForCausalLM.from_pretrained(args.model, quantization_config=BitsAndBytesConfig(\n"
              "        load_in_4bit={flag}, bnb_4bit_quant_type='nf4'))\n\n\n"
              "def train(args, loader, opt):\n"
              "    model = load(args)\n"
              "    for batch in loader:\n"
              "        loss = model(**batch).loss\n"
              "        loss.backward()\n"
              "        opt.step()\n"
              "        print(loss.item())\n")
    assert _lines_and_codes(tmp_path, "qlora.py", source.format(flag="args.bits == 4")) == set()
    assert _lines_and_codes(tmp_path, "qlora.py", source.format(flag="False")) == {(16, "XLA001")}




SNLI_LOOP = '''import torch
from torchtext.legacy import data
from model import SNLIClassifier

device = torch.device("cpu")
train_iter, dev_iter = data.BucketIterator.splits((train, dev), batch_size=64, device=device)
model = SNLIClassifier(config)
model.to(device)
opt = torch.optim.Adam(model.parameters())
iterations = 0
for epoch in range(10):
    n_correct, n_total = 0, 0
    for batch_idx, batch in enumerate(train_iter):
        model.train(); opt.zero_grad()
        iterations += 1
        answer = model(batch)
        n_correct += (torch.max(answer, 1)[1].view(batch.label.size()) == batch.label).sum().item()
        n_total += batch.{count}
        train_acc = 100. * n_correct / n_total
        loss = criterion(answer, batch.label)
        loss.backward(); opt.step()
        if iterations % 100 == 0:
            print('acc {{:.4f}}'.format(train_acc))
'''


def test_a_batch_objects_counts_are_python_ints(tmp_path):
    """pytorch/examples' SNLI trainer: torchtext's `batch.batch_size` (PyG's `batch.num_graphs`) counts a batch
    object, a Python int, so the accuracy computed from it and from `.item()` results is a float; a field of
    the batch (`batch.label`) is a tensor."""
    assert (23, "XLA006") not in _lines_and_codes(tmp_path, "train.py", SNLI_LOOP.format(count="batch_size"))
    assert (23, "XLA006") in _lines_and_codes(tmp_path, "train.py", SNLI_LOOP.format(count="label.sum()"))


def test_a_ray_actor_placed_on_gpus_is_not_xla_code(tmp_path):
    """Issue 32 cause 8: `@ray.remote(num_gpus=1)` places an actor on a CUDA worker (open-instruct's GRPO
    learners): its methods, and a helper only they call, do not run on XLA. Its twin, an actor asking only for
    CPUs that takes the XLA device itself, stays XLA code."""
    source = (Path(__file__).parent / "data" / "ray_actors.py").read_text()
    assert _lines_and_codes(tmp_path, "actors.py", source) == {(28, "XLA010"), (32, "XLA001")}


def test_a_function_that_launches_a_triton_kernel_is_not_xla_code(tmp_path):
    """Issue 32 cause 8: a kernel compiled by `@triton.jit` and launched as `kernel[grid](...)` runs on a GPU only
    (triton has no XLA backend): the wrapper that launches it is not XLA code. Its twin, the reference path the
    step takes when triton is off, stays XLA code."""
    source = (Path(__file__).parent / "data" / "triton_kernels.py").read_text()
    assert _lines_and_codes(tmp_path, "kernels.py", source) == {(27, "XLA002")}


def test_a_function_that_only_pins_cuda_is_not_xla_code_in_a_device_agnostic_module(tmp_path):
    """Issue 32 cause 8 (round 11, read after scoring: lm-evaluation-harness's audio LM): a method that moves its
    generation inputs `.to("cuda")` on its straight line and places nothing on a chosen device runs on CUDA,
    though its class places the model on the device it is given: its read of the generation is not XLA code.
    Its twin, the method that uses the chosen device, stays XLA code."""
    source = (Path(__file__).parent / "data" / "cuda_pinned_method.py").read_text()
    assert _lines_and_codes(tmp_path, "lm.py", source) == {(29, "XLA001")}


def test_code_after_a_required_import_of_a_cuda_only_library_is_not_xla_code(tmp_path):
    """Issue 32 cause 8 (round 14, read after scoring: llm-foundry's MegaBlocks callback): a function that imports
    a CUDA-only library, plainly or in a `try` whose handler raises, cannot go past the import on a TPU host:
    what follows it in its block is not XLA code. An optional import (a handler that falls back) is no pin."""
    source = '''import torch


class MoEStats:
    def batch_end(self, state, step):
        if step % 10 == 0:
            try:
                from megablocks.layers.moe import get_load_balancing_loss
            except ImportError:
                raise RuntimeError("MegaBlocks is required")
            tokens = torch.concat([t.clone() for t, _ in get_load_balancing_loss()])
            print(tokens.max().item())

    def fused(self, x):
        from flash_attn import flash_attn_func
        return flash_attn_func(x, x, x).sum().item()

    def optional(self, x):
        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None
        return x.sum().item()


def train(model, loader, opt, device):
    stats = MoEStats()
    for step, x in enumerate(loader):
        loss = model(x.to(device)).sum()
        loss.backward()
        opt.step()
        stats.batch_end(None, step)
        stats.fused(loss)
        stats.optional(loss)
'''
    assert _lines_and_codes(tmp_path, "callbacks.py", source) == {(23, "XLA001")}


def test_a_device_asked_of_deepspeeds_accelerator_is_no_xla_device(tmp_path):
    """Issue 32 cause 8 (round 14, read after scoring: minRF's DeepSpeed trainer): a device from DeepSpeed's
    accelerator (`torch.device(get_accelerator().device_name(), local_rank)`) is CUDA, ROCm, XPU, ... never
    XLA: a script that places only there is not XLA code. Its twin takes its device from a setting."""
    script = '''import torch
from deepspeed.accelerator import get_accelerator


def main(model, loader, opt, local_rank, args):
    device = {device}
    model = model.to(device)
    for x in loader:
        loss = model(x.to(device)).sum()
        loss.backward()
        opt.step()
        print(loss.item())
'''
    pinned = script.replace("{device}", "torch.device(get_accelerator().device_name(), local_rank)")
    assert _lines_and_codes(tmp_path, "train.py", pinned) == set()
    chosen = script.replace("{device}", "torch.device(args.device)")
    (tmp_path / "twin").mkdir()
    assert _lines_and_codes(tmp_path / "twin", "train.py", chosen) == {(12, "XLA001")}


def test_a_class_named_for_onnx_export_is_not_xla_code(tmp_path):
    """Issue 32 (round 14, read after scoring: segment-anything's `SamOnnxModel`): a wrapper named for ONNX is
    traced once by `torch.onnx.export` and run by ONNX Runtime. Its twin, the model it wraps, stays XLA code."""
    source = '''import torch


class Decoder(torch.nn.Module):
    def forward(self, x, labels):
        return x[labels > 0].sum()


class SamOnnxModel(torch.nn.Module):
    def forward(self, x, labels):
        return x[labels > 0].sum()
'''
    assert _lines_and_codes(tmp_path, "model.py", source) == {(6, "XLA003")}


LORA_GPU = '''import torch
import torch.distributed as dist


def parse_gpu(args):
    if args.platform == "local":
        dist.init_process_group(backend="nccl")
        local_rank = dist.get_rank()
        args.device = torch.device("cuda", local_rank)
    else:
        args.device = torch.device("cuda", 0)
'''

LORA_MODEL = '''import torch
import torch.nn as nn


class LMModel(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.head = nn.Linear(n, n)

    def forward(self, x, target=None):
        logits = self.head(x)
        if target is not None:
            acc = (logits.argmax(-1) == target).float().mean()
            if acc.item() > 0.99:
                print("converged")
        return logits.sum()
'''

LORA_TRAIN = '''import argparse

import torch

from gpu import parse_gpu
from model import LMModel


def train_validate(model, optimizer, loader, args):
    for idx, data in enumerate(loader):
        x = data["input"].to(args.device)
        loss = model(x, data["target"].to(args.device))
        loss.backward()
        optimizer.step()
        print(f"loss {{loss.item():.3f}}")


if __name__ == "__main__":
    args = argparse.ArgumentParser().parse_args()
    parse_gpu(args)
    model = LMModel(64)
    model = model{place}
    optimizer = torch.optim.Adam(model.parameters())
    train_validate(model, optimizer, [], args)
'''

DIT_TRAIN = '''import torch
from accelerate import Accelerator


def main(args, model, loader, opt):
    {check}
    accelerator = Accelerator()
    device = accelerator.device
    model = model.to(device)
    for x, y in loader:
        loss = model(x.to(device), y.to(device)).mean()
        accelerator.backward(loss)
        opt.step()
        print(loss.item())
'''


def test_a_program_that_places_its_model_on_cuda_by_name_is_not_xla_code(tmp_path):
    """Issue 32 cause 8 (round 15, read after scoring: microsoft/LoRA's NLG scripts): the script's main block
    moves the model with `.cuda()` on its straight line, which raises where there is no CUDA, whatever device
    its batches go to (`args.device`, set by a helper of another module): the script and the model module only
    it imports are not XLA code. Its twin, the same script moving the model to `args.device`, stays XLA code."""
    for place, expected in ((".cuda()", set()),
                            (".to(args.device)", {("model.py", 14, "XLA001"), ("train.py", 15, "XLA001")})):
        root = tmp_path / place.strip(".()").replace("(", "_").replace(".", "_")
        _write(root, {"pyproject.toml": "", "gpu.py": LORA_GPU, "model.py": LORA_MODEL,
                      "train.py": LORA_TRAIN.format(place=place)})
        assert {(Path(f.path).name, f.line, f.code) for f in _lint(root)} == expected, place


def test_a_function_that_asserts_cuda_is_available_is_not_xla_code(tmp_path):
    """Issue 32 cause 8 (round 15, read after scoring: fast-DiT's trainer): `assert torch.cuda.is_available()` on
    the function's straight line fails on a TPU host, though the function moves its model and batches to the
    device accelerate chooses: its step is not XLA code. Its twin, the assert only under an option, stays."""
    assert _lines_and_codes(tmp_path, "train.py", DIT_TRAIN.format(
        check='assert torch.cuda.is_available(), "Training currently requires at least one GPU."')) == set()
    assert _lines_and_codes(tmp_path, "train.py", DIT_TRAIN.format(
        check="if args.gpu_only:\n        assert torch.cuda.is_available()")) == {(15, "XLA001")}
    # an argument check that raises before it ends no call early: every call that goes on reaches the assert
    assert _lines_and_codes(tmp_path, "train.py", DIT_TRAIN.format(
        check="if args.results_dir is None:\n        raise ValueError('--results-dir is required')\n    "
              "assert torch.cuda.is_available(), 'Training currently requires at least one GPU.'")) == set()


def test_asserting_the_device_is_cuda_or_making_cuda_the_default_is_not_xla_code(tmp_path):
    """Issue 32 cause 8 (round 16, read after scoring: llm.c's Llama 3 trainer): `assert device_type in {'cuda'}`,
    `== "cuda"` or `"cuda" in device` on the straight line fails with the device set to XLA, and so does a
    function that makes CUDA the default tensor type before building its model; what follows is not XLA code.
    The twins accept another device (`in ("cuda", "cpu")`, `!= "mps"`) or set a CPU default, and stay."""
    for check in ("assert device_type in {'cuda'}, 'GPU required to run LLaMA 3'", "assert device_type == 'cuda'",
                  "assert 'cuda' in device_type", "torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)"):
        assert _lines_and_codes(tmp_path, "train.py", DIT_TRAIN.format(
            check=f"device_type = args.device\n    {check}")) == set(), check
    for check in ("assert device_type in ('cuda', 'cpu')", "assert device_type != 'mps'",
                  "torch.set_default_tensor_type(torch.FloatTensor)"):
        assert _lines_and_codes(tmp_path, "train.py", DIT_TRAIN.format(
            check=f"device_type = args.device\n    {check}")) == {(15, "XLA001")}, check


REINFORCE = '''import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Categorical


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine = nn.Linear(4, 2)

    def forward(self, x):
        return F.softmax(self.affine(x), dim=1)


policy = Policy(){place}
optimizer = torch.optim.Adam(policy.parameters(), lr=1e-2)


def select_action(state):
    probs = policy(torch.from_numpy(state).float().unsqueeze(0){place})
    action = Categorical(probs).sample()
    return action.item()


def main(env):
    for episode in range(1000):
        state = env.reset()
        for t in range(1000):
            state, reward, done = env.step(select_action(state))
            if done:
                break
        loss = -torch.stack(policy.saved).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None)
'''


def test_a_script_that_never_places_a_tensor_on_a_device_is_host_code(tmp_path):
    """Issue 32 cause 5 (round 9, read: pytorch/examples' REINFORCE and regression scripts): a program that puts
    nothing on a device, names none and imports no project code holds CPU tensors, as a notebook does: its
    `action.item()` is no XLA transfer, also when a module that places nothing imports it. Its twins: the same
    script moving its policy and states to a device, and the same script imported by a module of the project that
    places tensors on a device (which may hand it device tensors)."""
    for d in ("cpu", "dev", "imp", "default", "lib"):
        (tmp_path / d).mkdir()
    # a library that may place what it builds for the script (detectron2's trainer, ultralytics' YOLO)
    lib = REINFORCE.format(place="").replace("import argparse\n", "import argparse\n\nimport detectron2\n")
    assert (27, "XLA001") in _lines_and_codes(tmp_path / "lib", "reinforce.py", lib)
    # a default device set for every tensor built without one places them all
    default = REINFORCE.format(place="").replace("policy = Policy()", 'torch.set_default_device("xla")\npolicy = Policy()')
    assert (26, "XLA001") in _lines_and_codes(tmp_path / "default", "reinforce.py", default)
    assert _lines_and_codes(tmp_path / "cpu", "reinforce.py", REINFORCE.format(place="")) == set()
    assert (25, "XLA001") in _lines_and_codes(tmp_path / "dev", "reinforce.py", REINFORCE.format(place=".to(device)"))
    # imported by a module that places nothing either: nothing in the project can hand it device tensors
    _write(tmp_path / "imp", {"run.py": "from reinforce import select_action\n"})
    assert _lines_and_codes(tmp_path / "imp", "reinforce.py", REINFORCE.format(place="")) == set()
    _write(tmp_path / "imp", {"run.py": "import torch\nfrom reinforce import select_action\n\n"
                                        "select_action(torch.zeros(4).to(torch.device('xla')))\n"})
    assert (25, "XLA001") in _lines_and_codes(tmp_path / "imp", "reinforce.py", REINFORCE.format(place=""))


RL_INIT = "from rl.ppo import ppo\n"
RL_CORE = """import torch
import torch.nn as nn


class ActorCritic(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.pi = nn.Linear(obs_dim, act_dim)
        self.v = nn.Linear(obs_dim, 1)
"""
RL_PPO = """import gym
import numpy as np
import torch
from torch.optim import Adam

import rl.core as core


class Buffer:
    def __init__(self, size, obs_dim):
        self.obs = np.zeros((size, obs_dim), dtype=np.float32)
        self.ret = np.zeros(size, dtype=np.float32)

    def get(self):
        data = dict(obs=self.obs, ret=self.ret)
        return {k: torch.as_tensor(v, dtype=torch.float32) for k, v in data.items()}


def ppo(env_fn, epochs=50, steps=4000, lr=1e-3):
    env = env_fn()
    ac = core.ActorCritic(env.observation_space.shape[0], env.action_space.n)
    config = locals()
    buf = Buffer(steps, env.observation_space.shape[0])
    opt = Adam(ac.parameters(), lr=lr)

    def update():
        data = buf.get()
        loss = ((ac.v(data["obs"]).squeeze(-1) - data["ret"]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    for epoch in range(epochs):
        print(epoch, update(), config["lr"])


if __name__ == "__main__":
    ppo(lambda: gym.make("CartPole-v1"))
"""


def test_an_rl_library_that_places_nothing_anywhere_runs_on_the_host(tmp_path):
    """spinningup's shape: `ppo()` builds its network and its batches itself (from NumPy buffers) and trains them,
    imported by its package; nothing in the project puts anything on a device: its `.item()` reads a host tensor
    (linted whole, one file at a time and from the cache). `locals()` in it binds no name: the module is whole.
    Its twin moves the network and the batch to a device chosen at run time: the read is a finding."""
    _write(tmp_path, {"pyproject.toml": "", "rl/__init__.py": RL_INIT, "rl/core.py": RL_CORE, "rl/ppo.py": RL_PPO})

    def found(*args):
        r = run_xlalint("--output-format", "json", "--isolated", *args, cwd=tmp_path)
        assert r.returncode in (0, 1), r.stderr
        return {(Path(f["filename"]).name, f["line"], f["code"]) for f in json.loads(r.stdout)}

    for args in (("--no-cache", "."), ("--no-cache", "rl/ppo.py"), ("rl/ppo.py",), ("rl/ppo.py",)):
        assert found(*args) == set(), args
    placed = RL_PPO.replace("    opt = Adam(", "    device = torch.device(args_device)\n    ac.to(device)\n    opt = Adam(").replace(
        "def ppo(env_fn,", "def ppo(env_fn, args_device,").replace('data = buf.get()', 'data = {k: v.to(device) for k, v in buf.get().items()}')
    (tmp_path / "rl" / "ppo.py").write_text(placed.replace('gym.make("CartPole-v1"))', 'gym.make("CartPole-v1"), "cuda")'))
    for args in (("--no-cache", "."), ("--no-cache", "rl/ppo.py"), ("rl/ppo.py",), ("rl/ppo.py",)):
        assert found(*args) == {("ppo.py", 34, "XLA001")}, args


CUDA_INDEX_SCRIPT = """import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

DEVICE = {device}


def compute_accuracy(model, data_loader, device):
    correct, total = 0, 0
    for features, targets in data_loader:
        features, targets = features.to(device), targets.to(device)
        logits = model(features)
        correct += (logits.argmax(1) == targets).sum()
        total += targets.size(0)
    return correct.float() / total * 100


train_loader = DataLoader(datasets.MNIST("data", download=True, transform=transforms.ToTensor()), batch_size=128)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
model.to(DEVICE)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(10):
    for batch_idx, (features, targets) in enumerate(train_loader):
        features, targets = features.to(DEVICE), targets.to(DEVICE)
        cost = F.cross_entropy(model(features), targets)
        optimizer.zero_grad()
        cost.backward()
        optimizer.step()
        print(f"cost {{cost.item():.4f}}")
    print(compute_accuracy(model, train_loader, device=DEVICE))
"""


def test_a_helpers_device_parameter_that_every_call_gives_a_gpu_index_is_that_gpu(tmp_path):
    """Round 18, read after scoring (rasbt's deeplearning-models notebooks): `DEVICE = "cuda:2"` is the program's
    only device, and `compute_accuracy(..., device=DEVICE)` its helper's only call: the helper's `device` holds the
    same hard-wired GPU, not a device chosen at run time, so the whole script is CUDA code. Its twin chooses its
    device at run time: its per-step read is a finding."""
    (tmp_path / "pinned").mkdir()
    (tmp_path / "chosen").mkdir()
    assert _lines_and_codes(tmp_path / "pinned", "train.py", CUDA_INDEX_SCRIPT.format(device='"cuda:2"')) == set()
    chosen = CUDA_INDEX_SCRIPT.format(device='torch.device("cuda" if torch.cuda.is_available() else "cpu")')
    assert (31, "XLA001") in _lines_and_codes(tmp_path / "chosen", "train.py", chosen)


DDP_RANK_GPU = """import torch
import torch.nn.functional as F
from torch.distributed import init_process_group
from torch.nn.parallel import DistributedDataParallel


def train(rank, a, h, generator, loader, optim):
    init_process_group(backend=h.dist_config["dist_backend"], init_method=h.dist_config["dist_url"],
                       world_size=h.world_size, rank=rank)
    device = {device}
    generator = DistributedDataParallel(generator.to(device), device_ids=[rank]).to(device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = F.l1_loss(generator(x), y)
        optim.zero_grad()
        loss.backward()
        optim.step()
        print("loss {{:4.3f}}".format(loss.item()))
"""


def test_a_process_group_backend_from_a_config_is_no_device_choice(tmp_path):
    """Round 18, read after scoring (hifi-gan's trainer): `from torch.distributed import init_process_group` with
    its backend read from a config names no device; the tensors go to `torch.device('cuda:{:d}'.format(rank))`,
    the rank's own GPU: CUDA code. Its twin puts them on a device chosen at run time."""
    (tmp_path / "gpu").mkdir()
    (tmp_path / "chosen").mkdir()
    pinned = DDP_RANK_GPU.format(device="torch.device('cuda:{:d}'.format(rank))")
    assert _lines_and_codes(tmp_path / "gpu", "train.py", pinned) == set()
    chosen = DDP_RANK_GPU.format(device="torch.device(a.device)")
    assert (18, "XLA001") in _lines_and_codes(tmp_path / "chosen", "train.py", chosen)


RANK_HELPER_UTILS = """import torch


def move_batch(batch, world_size, rank, device):
    chunk = len(batch["input_ids"]) // world_size
    sliced = {k: v[rank * chunk:(rank + 1) * chunk] for k, v in batch.items()}
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in sliced.items()}
"""

RANK_HELPER_TRAINER = """import torch
import torch.nn.functional as F
from utils import move_batch


class Trainer:
    def __init__(self, policy, loader, optimizer, rank=0, world_size=1, device=None):
        self.policy, self.loader, self.optimizer = policy, loader, optimizer
        self.rank, self.world_size, self.device = rank, world_size, device

    def train(self):
        for batch in self.loader:
            batch = move_batch(batch, self.world_size, self.rank, {device})
            logits = self.policy(batch["input_ids"])
            loss = F.cross_entropy(logits, batch["labels"])
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            print(f"loss {{loss.item():.3f}}")
"""


def test_a_helper_given_the_process_rank_as_its_device_places_on_that_gpu(tmp_path):
    """Round 19, read after scoring (DPO's trainers): `slice_and_move_batch_for_device(batch, ..., self.rank)`
    moves the batch with `v.to(device)` in another module; the trainer passes the process rank, a CUDA device
    index, so its batches and everything computed from them are on a GPU: the trainer is CUDA code, as it would be
    with `batch.to(self.rank)` itself. Its twin passes the device chosen at run time: its per-step read is a
    finding."""
    for name, device in (("rank", "self.rank"), ("chosen", "self.device")):
        root = tmp_path / name
        _write(root, {"pyproject.toml": "", "utils.py": RANK_HELPER_UTILS,
                      "trainer.py": RANK_HELPER_TRAINER.format(device=device)})
        found = _where(_lint(root))
        if name == "rank":
            assert found == set(), found
        else:
            assert ("trainer.py", 19, "XLA001") in found, found


HOST_HELPER = """import torch
from torch import nn


def train(model, trainloader, criterion, optimizer, epochs=5):
    for e in range(epochs):
        running_loss = 0
        for images, labels in trainloader:
            optimizer.zero_grad()
            loss = criterion(model(images.view(images.shape[0], -1)), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        print(running_loss / len(trainloader))
"""

HOST_HELPER_SCRIPT = """import torch
from torch import nn, optim
from torchvision import datasets, transforms
import fc_model


if __name__ == "__main__":
    trainset = datasets.FashionMNIST("data", download=True, train=True, transform=transforms.ToTensor())
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)){place}
    optimizer = optim.Adam(model.parameters(), lr=0.001)
    fc_model.train(model, trainloader, nn.CrossEntropyLoss(), optimizer)
"""


def test_a_helper_only_host_programs_import_runs_on_the_host(tmp_path):
    """Round 19, read after scoring (Udacity's `fc_model.py` and `helpers.py`): a course's helper module that places
    nothing is imported only by notebooks and scripts that place nothing either; its training loop is handed host
    tensors, and its `loss.item()` costs nothing on XLA. Its twin's script moves the model to a device chosen at run
    time: the helper's per-step read is a finding."""
    for name, place in (("host", ""), ("device", ".to(device)")):
        root = tmp_path / name
        script = HOST_HELPER_SCRIPT.format(place=place)
        if place:
            script = script.replace("import fc_model\n", "import fc_model\n\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n")
        _write(root, {"pyproject.toml": "", "fc_model.py": HOST_HELPER, "train.py": script})
        found = _where(_lint(root))
        if name == "host":
            assert found == set(), found
        else:
            assert ("fc_model.py", 13, "XLA001") in found, found


def test_a_module_that_compiles_cuda_sources_when_imported_needs_cuda(tmp_path):
    """A custom op module that builds its CUDA kernels with `torch.utils.cpp_extension.load(..., sources=[...".cu"])`
    at its top (StyleGAN2 ports' `op/fused_act.py`) cannot be imported where there is no CUDA toolkit: neither can
    the model that imports it nor the training script. The same op built from C++ sources only (a CPU extension)
    leaves them XLA code."""
    for sources, expected in (('"fused_bias_act.cpp", "fused_bias_act_kernel.cu"', set()),
                              ('"fused_bias_act.cpp"', {("train.py", 13, "XLA001")})):
        root = tmp_path / sources.count(".cu\"").__str__()
        _write(root, {
            "pyproject.toml": "",
            "op/__init__.py": "from .fused_act import fused_leaky_relu\n",
            "op/fused_act.py": ("import os\nfrom torch.utils.cpp_extension import load\n\nmodule_path = os.path.dirname(__file__)\n"
                                f"fused = load(\"fused\", sources=[os.path.join(module_path, s) for s in ({sources},)])\n\n\n"
                                "def fused_leaky_relu(x, bias):\n    return fused.fused_bias_act(x, bias, 0, 1, 0.2, 2 ** 0.5)\n"),
            "model.py": ("import torch\nfrom op import fused_leaky_relu\n\n\nclass Generator(torch.nn.Module):\n"
                         "    def __init__(self):\n        super().__init__()\n        self.lin = torch.nn.Linear(8, 8)\n"
                         "        self.bias = torch.nn.Parameter(torch.zeros(8))\n\n    def forward(self, z):\n"
                         "        return fused_leaky_relu(self.lin(z), self.bias)\n"),
            "train.py": ("import torch\nfrom model import Generator\n\n\ndef train(loader, device):\n"
                         "    g = Generator().to(device)\n    opt = torch.optim.Adam(g.parameters())\n"
                         "    for z in loader:\n        loss = g(z.to(device)).pow(2).mean()\n        opt.zero_grad()\n"
                         "        loss.backward()\n        opt.step()\n        print(loss.item())\n"),
        })
        assert _where(_lint(root)) == expected, (sources, _where(_lint(root)))



TWO_CLASSES = '''import torch


class EngineWrapper:
    def __init__(self, engine, device="cuda:0"):
        self.engine = engine
        self.device = device

    def run(self, x):
        {wrapper_body}


class Token2Wav:
    def __init__(self, model, device_id=0):
        self.device = f"cuda:{device_id}"
        self.model = model.to(self.device).eval()
        self.window = torch.ones(16).cuda()
        self.engine = EngineWrapper(None, device=self.device)

    def synthesize(self, token_batches):
        out = []
        for tokens in token_batches:
            mel = self.model(tokens.to(self.device))
            out.append(mel.sum().item())
        return out
'''


def test_two_classes_self_device_attributes_are_two_names():
    """Round 25, read after scoring (a speech generator's Triton runtime): `self.device = f"cuda:{device_id}"` in
    one class, only ever a CUDA device, and `self.device = device` in another class of the same module that places
    nothing with it: the module places on CUDA only (with `.cuda()` beside), so it is not XLA code. Its twin's
    other class places on its own `self.device`, a device its caller chooses: the module is XLA code."""
    import textwrap

    from xlalint.analysis.source import lint_source

    silent = TWO_CLASSES.replace("{wrapper_body}", "return self.engine(x)")
    assert [f.code for f in lint_source(silent, "token2wav.py")] == []
    chosen = TWO_CLASSES.replace("{wrapper_body}", "return self.engine(x.to(self.device))")
    assert [(f.line, f.code) for f in lint_source(chosen, "token2wav.py")] == [(24, "XLA001")]
