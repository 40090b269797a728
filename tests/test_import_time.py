"""What a module does when it is imported or run (issue 32 cause 8, round 24 read after scoring): a model module
that builds its CUDA kernels from `.cu` sources at import (named by an f-string, or in every branch of an
`if`/`else` at its top) cannot be imported on a TPU host, nor can the script whose `__main__` block imports it,
nor the trainer only that script imports (`from src.model import RWKV` finds `src/model.py` at the root, whose
module is named without `src`, as an installed package's). Each with its twin that stays XLA code."""

from __future__ import annotations

import json
from pathlib import Path

from xlalint.config import build_settings
from xlalint.run.project import lint_files
from xlalint.sources.discover import iter_python_files


def _lint(root: Path) -> set:
    settings = build_settings(None)
    files = [str(p) for p in iter_python_files([str(root)], settings)]
    return {(Path(f.path).relative_to(root).as_posix(), f.line, f.code) for f in lint_files(files, settings, jobs=1, cache=None)}


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


KERNELS = {
    "f-string": 'wkv = load(name="wkv", sources=["cuda/wkv_op.cpp", f"cuda/wkv_cuda_{T_MAX}.cu"])\n',
    "every branch": ('if os.environ.get("FLOAT_MODE") == "bf16":\n'
                     '    wkv = load(name="wkv_bf16", sources=["cuda/wkv_op_bf16.cpp", "cuda/wkv_cuda_bf16.cu"])\n'
                     'else:\n'
                     '    wkv = load(name="wkv", sources=["cuda/wkv_op.cpp", "cuda/wkv_cuda.cu"])\n'),
    # twins: a kernel built in one branch only (the other runs without it), a C++-only (CPU) extension
    "one branch": ('if os.environ.get("USE_KERNEL") == "1":\n'
                   '    wkv = load(name="wkv", sources=["cuda/wkv_op.cpp", "cuda/wkv_cuda.cu"])\n'),
    "cpu extension": 'wkv = load(name="wkv", sources=["cpu/wkv_op.cpp", f"cpu/wkv_{T_MAX}.cpp"])\n',
}

MODEL = '''import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

T_MAX = int(os.environ.get("T_MAX", "1024"))
{kernel}

class RWKV(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.emb = nn.Embedding(n, 64)
        self.head = nn.Linear(64, n)

    def forward(self, idx):
        return self.head(self.emb(idx))
'''

TRAINER = '''import torch


def train_loop(model, loader, opt, device):
    for x, y in loader:
        logits = model(x.to(device))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.to(device).flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {loss.item():.3f}")
'''

TRAIN = '''import argparse

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    import torch
    from src.trainer import train_loop
    from src.model import RWKV

    model = RWKV(50277).to(args.device)
    opt = torch.optim.Adam(model.parameters())
    train_loop(model, torch.load("batches.pt"), opt, args.device)
'''


def test_a_script_whose_main_block_imports_a_model_built_on_cuda_kernels_is_not_xla_code(tmp_path):
    """RWKV's v7 `train.py` imports `src.model` in its `__main__` block, and the model builds its kernels with
    `load(..., sources=[f"cuda/....cu"])` (an f-string) or in both branches of a float-mode test: neither the
    script nor `src/trainer.py`, which only it imports, runs on XLA. A kernel built in one branch only, or a C++
    extension, leaves the trainer's per-step read a finding."""
    for case, kernel in KERNELS.items():
        root = tmp_path / case.replace(" ", "-")
        _write(root, {"pyproject.toml": "", "src/__init__.py": "", "src/model.py": MODEL.format(kernel=kernel),
                      "src/trainer.py": TRAINER, "train.py": TRAIN})
        found = _lint(root)
        if case in ("f-string", "every branch"):
            assert found == set(), (case, found)
        else:
            assert found == {("src/trainer.py", 11, "XLA001")}, (case, found)


def test_a_module_imported_by_another_program_as_well_stays_xla_code(tmp_path):
    """The trainer is imported by the CUDA-kernel script and by a second script that never loads the kernels
    (its own model): it runs on XLA there, so its read stays a finding. Importing a script does not run its
    `__main__` block: a script importing `train.py` says nothing of where the trainer runs."""
    root = tmp_path / "p"
    _write(root, {"pyproject.toml": "", "src/__init__.py": "", "src/model.py": MODEL.format(kernel=KERNELS["f-string"]),
                  "src/trainer.py": TRAINER, "train.py": TRAIN,
                  "finetune.py": ("import torch\nfrom src.trainer import train_loop\n\n\n"
                                  "def main(loader, device):\n    model = torch.nn.Linear(8, 8).to(device)\n"
                                  "    train_loop(model, loader, torch.optim.SGD(model.parameters(), 0.1), device)\n")})
    assert _lint(root) == {("src/trainer.py", 11, "XLA001")}


ENGINE = '''import torch
{top}

class Synthesizer:
    def __init__(self, model, device):
        self.model = model.to(device)
        self.device = device

    def load_engine(self, path):
        {inner}
        self.engine = runtime.deserialize_cuda_engine(open(path, "rb").read())
        print(self.model.weight.sum().item())

    def synthesize(self, tokens):
        out = []
        for t in range(200):
            logits = self.model(tokens.to(self.device))
            out.append(int(logits.argmax()))
        return out
'''


def test_a_module_that_imports_tensorrt_is_not_xla_code(tmp_path):
    """TensorRT exists only for CUDA: a module importing it at its top cannot be imported on a TPU host (its
    decode loop's per-token read is silent); imported inside one method, that method alone is not XLA code,
    and the decode loop beside it stays a finding."""
    top = _write_one(tmp_path / "top", ENGINE.format(top="import tensorrt as trt\n", inner="runtime = trt.Runtime(None)"))
    assert top == set()
    inner = _write_one(tmp_path / "inner", ENGINE.format(
        top="", inner="import tensorrt as trt\n        runtime = trt.Runtime(None)"))
    assert inner == {("tts.py", 19, "XLA001")}


def _write_one(root: Path, source: str) -> set:
    _write(root, {"pyproject.toml": "", "tts.py": source})
    return _lint(root)


def test_an_import_of_src_resolves_beside_the_script_when_no_src_is_at_the_root(tmp_path):
    """pytorch/examples' `language_translation/main.py` imports `from src.model import ...` of its own
    `language_translation/src/`: without a `src/` at the project's root, `src.model` is looked up beside the
    script, never as the root's `model` (which the project does not have: the name is still known)."""
    root = tmp_path / "p"
    _write(root, {
        "pyproject.toml": "",
        "app/src/__init__.py": "",
        "app/src/model.py": "def accuracy(logits, y):\n    return (logits.argmax(-1) == y).float().mean()\n",
        "app/main.py": ("import torch\nimport torch_xla\nfrom src.model import accuracy\n\n\n"
                        "def train(model, loader, opt):\n    device = torch_xla.device()\n"
                        "    for x, y in loader:\n        x, y = x.to(device), y.to(device)\n"
                        "        out = model(x)\n        loss = torch.nn.functional.cross_entropy(out, y)\n"
                        "        loss.backward()\n        opt.step()\n        acc = accuracy(out, y)\n"
                        "        print(f\"{acc:.3f}\")\n        torch_xla.sync()\n"),
    })
    assert ("app/main.py", 15, "XLA006") in _lint(root)


QUANTIZER = '''import torch


def find_params(x, maxq=15):
    xmin, xmax = x.min(1)[0], x.max(1)[0]
    tmp = xmin < 0
    if torch.any(tmp):
        xmin[tmp] = -xmax[tmp]
    return (xmax - xmin) / maxq
'''
CALIBRATE = '''import torch
from .quantizer import find_params


def calibrate(model, loader, device):
    scales = []
    for x in loader:
        out = model(x.to(device))
        scales.append(find_params(out))
    return scales
'''


def test_a_vendored_copy_of_a_cuda_only_library_is_not_xla_code(tmp_path):
    """OLMo vendors AutoGPTQ (`inference/compression/dependencies/AutoGPTQ/auto_gptq/...`): the library's own
    modules import each other relatively, so no import of `auto_gptq` shows they need CUDA; being inside its
    package does (GPTQ runs on CUDA, Triton and ExLlama kernels). The same code in a package of the project's own
    name is XLA code: its tensor-valued `if`, run for every calibration batch, is a finding."""
    for package, expected in (("third_party/AutoGPTQ/auto_gptq", set()),
                              ("mylib/quant", {("mylib/quant/quantizer.py", 7, "XLA002")})):
        root = tmp_path / package.replace("/", "-")
        _write(root, {"pyproject.toml": "", f"{package}/__init__.py": "", f"{package}/quantizer.py": QUANTIZER,
                      f"{package}/calibrate.py": CALIBRATE})
        assert {f for f in _lint(root) if f[2] == "XLA002"} == expected, package


def test_cuda_only_rasterizers_and_engines_are_not_xla_code(tmp_path):
    """3-D vision trainers import Gaussian splatting's CUDA rasterizer and k-NN (`diff_gaussian_rasterization`,
    `simple_knn`), gsplat, PointNet++'s ops or KNN-CUDA at their top, and an LLM server LMDeploy's engine: none
    imports on a TPU host. The same module without the import is XLA code (its decode loop's read is a finding)."""
    for lib in ("diff_gaussian_rasterization", "simple_knn._C", "gsplat", "pointnet2_ops.pointnet2_utils",
                "knn_cuda", "lmdeploy"):
        found = _write_one(tmp_path / lib, ENGINE.format(top=f"import {lib} as trt\n", inner="runtime = trt.Runtime(None)"))
        assert found == set(), lib
    assert _write_one(tmp_path / "none", ENGINE.format(top="", inner="runtime = None")) == {("tts.py", 18, "XLA001")}


STYLEGAN_TRAIN = '''import torch
from gans.models.stylegan.model import Generator


def train(loader, device, steps):
    g = Generator().to(device)
    opt = torch.optim.Adam(g.parameters())
    for step, real in zip(range(steps), loader):
        loss = g(real.to(device)).mean()
        loss.backward()
        opt.step()
        print(loss.item())
'''
STYLEGAN_MODEL = '''import torch.nn as nn
from gans.models.stylegan.op import fused_leaky_relu


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return fused_leaky_relu(self.fc(x))
'''


def test_an_absolute_import_from_a_folder_above_the_script_finds_its_cuda_kernels(tmp_path):
    """A course repository holds `week08/gans/models/stylegan/train.py`, run from `week08/` (a notebook there,
    `python -m gans.models.stylegan.train`), which imports `gans.models.stylegan.model`: the import is resolved
    from the folder above the script that holds `gans/`, so the model's `op` package, which builds its CUDA
    kernels from `.cu` sources at import, makes the trainer CUDA-only code. With a C++ (CPU) extension instead,
    the trainer is XLA code and its per-step `loss.item()` a finding."""
    for ext, expected in ((".cu", set()), (".cpp", {("week08/gans/models/stylegan/train.py", 12, "XLA001")})):
        root = tmp_path / ext.strip(".")
        _write(root, {
            "pyproject.toml": "",
            "week08/gans/models/stylegan/train.py": STYLEGAN_TRAIN,
            "week08/gans/models/stylegan/model.py": STYLEGAN_MODEL,
            "week08/gans/models/stylegan/op/__init__.py": "from .fused_act import fused_leaky_relu\n",
            "week08/gans/models/stylegan/op/fused_act.py": (
                "import os\nfrom torch.utils.cpp_extension import load\n\nhere = os.path.dirname(__file__)\n"
                f"fused = load('fused', sources=[os.path.join(here, 'fused_bias_act{ext}')])\n\n\n"
                "def fused_leaky_relu(x):\n    return fused.fused_bias_act(x)\n"),
        })
        assert {f for f in _lint(root) if f[2] == "XLA001"} == expected, ext


SCRIPT_TRAIN = '''import os

import torch
from olmo_like.trainer import fit


def main(model, loader):
    fit(model, loader, torch.device(os.environ["DEVICE"]))


if __name__ == "__main__":
    main(None, None)
'''
TRAINER_LIB = '''import torch


def fit(model, loader, device):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        print(loss.item())
'''
LADDER = '''import torch


def run(rank):
    torch.cuda.set_device(rank)
    model = torch.nn.Linear(4, 4).cuda()
    from train import main
    main(model, None)
'''


def test_a_script_another_cuda_script_imports_is_still_an_entry_point(tmp_path):
    """Round 21 (OLMo's `scripts/ladder.py`, a CUDA launcher, imports `from train import main` of the training
    script beside it, which has its own `__main__` block): the training script runs by itself too, so it and the
    trainer it imports stay XLA code, and the launcher's import is resolved from its folder even beside a notebook of
    its name (`ladder.py` next to `ladder.ipynb`). Without that block, or in a package, it is the launcher's code."""
    root = tmp_path / "p"
    _write(root, {
        "pyproject.toml": "",
        "olmo_like/__init__.py": "",
        "olmo_like/trainer.py": TRAINER_LIB,
        "scripts/train.py": SCRIPT_TRAIN,
        "scripts/ladder.py": LADDER,
        "scripts/ladder.ipynb": json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}),
    })
    assert ("olmo_like/trainer.py", 10, "XLA001") in _lint(root)
    no_main = SCRIPT_TRAIN.replace('\n\nif __name__ == "__main__":\n    main(None, None)\n', "\n")
    _write(root, {"scripts/train.py": no_main})
    assert ("olmo_like/trainer.py", 10, "XLA001") not in _lint(root)
    # a module of a package (EAGLE's `eagle/model/cnets.py` ends with a `__main__` block that prints the model): its
    # `__main__` block is a check run by hand, not an entry point
    _write(root, {"scripts/train.py": SCRIPT_TRAIN, "scripts/__init__.py": ""})
    assert ("olmo_like/trainer.py", 10, "XLA001") not in _lint(root)
