"""Code hard-wired to CUDA: a module that puts its tensors on CUDA by name and never on a device chosen at
run time, and never names XLA or a TPU, does not run on torch_xla (issue 32, cause 8).

The question is asked per call while the walk visits it (``pin_of``): a call either pins CUDA
by a literal (``model.cuda()``, ``x.to("cuda")``, ``torch.device("cuda:0")``, ``device="cuda"``,
``Fabric(accelerator="cuda")``, ``init_process_group("nccl")``, ``torch.cuda.set_device(rank)``), places on
a device chosen elsewhere (``x.to(device)``, ``device=args.device``), or neither. A module with a pin,
no placement chosen elsewhere and no mention of XLA or TPU anywhere in its text is excluded like a JAX
module: its findings would describe costs of a program that never runs on XLA.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from xlalint.semantics.syntax import dotted_name, string_value

PIN = "pin"  # places on CUDA by name
CHOSEN = "chosen"  # places on a device chosen at run time (a variable, an argument)

_MENTIONS_XLA = re.compile(r"xla|tpu", re.IGNORECASE)
_DEVICE_KEYWORDS = frozenset({"device", "map_location", "accelerator", "backend"})
_CUDA_WORDS = ("cuda", "gpu", "nccl")
_NOT_DEVICES = ("dtype", "float", "half", "bfloat16", "int", "long", "bool", "memory_format", "non_blocking")


def mentions_xla(text: str) -> bool:
    """The module's text names XLA or a TPU anywhere (an import, a device string, a flag, a comment)."""
    return _MENTIONS_XLA.search(text) is not None


def _is_cuda_value(node) -> Optional[bool]:
    """True: names CUDA; False: a device chosen elsewhere; None: not a device (a dtype, a literal "cpu")."""
    s = string_value(node)
    if s is not None:
        low = s.lower()
        if low.startswith(_CUDA_WORDS):
            return True
        return None  # "cpu", "meta", "auto": neither
    if type(node) is cst.Call and dotted_name(node.func) in ("torch.device", "device") and node.args:
        return _is_cuda_value(node.args[0].value)
    if type(node) is cst.Integer:
        return None
    name = dotted_name(node)
    if name is None:
        return False if type(node) in (cst.Subscript, cst.Call, cst.IfExp) else None
    last = name.rsplit(".", 1)[-1].lower()
    if last.startswith("torch.") or any(w in last for w in _NOT_DEVICES) or name.startswith("torch."):
        return None  # x.to(torch.float16), x.to(dtype)
    return False


def pin_of(node: cst.Call) -> Optional[str]:
    """Whether the call pins CUDA by a literal (PIN), places on a device chosen elsewhere (CHOSEN: a
    variable, even one set to "cuda" as a default: a device variable is what a user sets to XLA), or
    neither (None)."""
    func = node.func
    name = dotted_name(func) or ""
    method = func.attr.value if type(func) is cst.Attribute else None
    if method == "cuda" and not name.startswith("torch.cuda"):
        return PIN  # model.cuda(), x.cuda(non_blocking=True), x.cuda(rank)
    if name in ("torch.cuda.set_device", "torch.distributed.init_process_group", "dist.init_process_group"):
        if name == "torch.cuda.set_device":
            return PIN
        args = [a.value for a in node.args if a.keyword is None or a.keyword.value == "backend"]
        return PIN if args and _is_cuda_value(args[0]) else None
    found = None
    if method == "to" and node.args and node.args[0].keyword is None:
        v = _is_cuda_value(node.args[0].value)
        if v is True:
            return PIN
        if v is False:
            found = CHOSEN
    for a in node.args:
        if a.keyword is not None and a.keyword.value in _DEVICE_KEYWORDS:
            v = _is_cuda_value(a.value)
            if v is True:
                return PIN
            if v is False:
                found = CHOSEN
    return found


