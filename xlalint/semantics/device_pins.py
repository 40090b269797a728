"""Code hard-wired to CUDA: a module that puts its tensors on CUDA by name and never on a device chosen at
run time, and never names XLA or a TPU, does not run on torch_xla (issue 32, cause 8).

The question is asked per call while the walk visits it (``pin_of``): a call either pins CUDA
by a literal (``model.cuda()``, ``x.to("cuda")``, ``torch.device("cuda:0")``, ``device="cuda"``,
``Fabric(accelerator="cuda")``, ``init_process_group("nccl")``, ``torch.cuda.set_device(rank)``), places on
a device chosen elsewhere (``x.to(device)``, ``device=args.device``), or neither. A module with a pin,
no placement chosen elsewhere and no mention of XLA or TPU anywhere in its text is excluded like a JAX
module: its findings would describe costs of a program that never runs on XLA. So is a module that imports
a CUDA-only library (``flash_attn``, ``mamba_ssm``, ...) unconditionally and never names XLA or a TPU: it
cannot be imported on a TPU host at all.
"""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from xlalint.semantics.syntax import (
    NODE_TYPES, child_nodes, code_of, dotted_name, keyword_arg, last_name, own_nodes, positional_args, positional_params,
    string_value,
)

PIN = "pin"  # places on CUDA by name
CHOSEN = "chosen"  # places on a device chosen at run time (a variable, an argument)

# XLA or a TPU as a word or a word's start (`torch_xla`, `XLA_USE_BF16`, `XLAStrategy`, `tpu_cores`, `tpus`,
# `TPUv4`), not inside or at the start of another word: "output" holds "tpu", "xlarge" and `set_xlabel`
# start with "xla" (a lower-case "xla" or "tpu" followed by a lower-case letter other than a plural's "s")
_MENTIONS_XLA = re.compile(r"(?<![A-Za-z])(?:XLA|TPU|(?:xla|Xla)(?![a-z])|(?:tpu|Tpu)(?![a-rt-z]))")
_DEVICE_KEYWORDS = frozenset({"device", "map_location", "accelerator", "backend"})
_CUDA_WORDS = ("cuda", "gpu", "nccl")
# `self.device`, `args.device`, `cfg.device`: the run's device, chosen elsewhere (a setting). Not
# `model.device`, `fabric.device` or `mask.device`: they follow where something was placed, and that
# placement is a pin or a choice of its own (`Fabric(accelerator="cuda")`, `model.to(device)`)
_HOLDERS_OF_THE_DEVICE = frozenset({
    "self", "args", "cfg", "config", "conf", "opt", "opts", "hparams", "params", "settings", "options",
    "run_opts", "flags", "FLAGS"})
# `self.accelerator.device`, `self.fabric.device`: the device a launcher chose at run time (XLA under it)
_RUNTIMES = frozenset({"accelerator", "fabric", "trainer", "engine", "runner", "strategy", "state", "xm"})
_NOT_DEVICES = ("dtype", "float", "half", "bfloat16", "int", "long", "bool", "memory_format", "non_blocking")


# Libraries that exist only as CUDA builds: a module importing one unconditionally (not under `try:` or `if`)
# cannot even be imported on a TPU host, or uses kernels that exist only for CUDA: xformers' attention
# (`memory_efficient_attention`, its `fmha` attention biases) has CUDA and ROCm kernels only and its wheels
# pin a CUDA build of torch; code that imports it at its top is written for them (diffusers and others that
# can run without it import it under `if is_xformers_available():`). (Not triton, deepspeed or bitsandbytes:
# they import without a GPU, and only some of their calls need one: `needs_cuda_call`.)
CUDA_ONLY_LIBRARIES = frozenset({
    "flash_attn", "flash_attn_2_cuda", "flash_attn_interface", "mamba_ssm", "causal_conv1d",
    "selective_scan_cuda", "grouped_gemm", "transformer_engine", "apex", "amp_C", "fused_layer_norm_cuda",
    "cupy", "pycuda", "cuml", "cudf", "cugraph", "xformers",
    # MegaBlocks' MoE layers (its grouped GEMMs and Triton kernels), Liger's and FlashInfer's fused kernels, and
    # flash-attn's extension modules
    "megablocks", "liger_kernel", "flashinfer", "fused_dense_lib", "dropout_layer_norm", "rotary_emb",
    "xentropy_cuda_lib",
    # NVIDIA's inference engines and CUDA-only kernels: TensorRT (and Torch-TensorRT, TensorRT-LLM), the `nvidia`
    # namespace (DALI, the CUDA libraries' wheels),
    # tiny-cuda-nn, nvdiffrast, spconv, SageAttention
    "tensorrt", "torch_tensorrt", "tensorrt_llm", "nvidia", "tinycudann", "nvdiffrast", "spconv",
    "sageattention",
    # GPTQ's CUDA, Triton and ExLlama kernels (AutoGPTQ, ExLlama)
    "auto_gptq", "exllama", "exllamav2", "exllama_kernels", "exllamav2_kernels",
    # CUDA rasterizers and point-cloud kernels of 3-D vision code (Gaussian splatting's rasterizer and k-NN, gsplat,
    # PointNet++'s ops, KNN-CUDA), and LMDeploy's TurboMind engine
    "diff_gaussian_rasterization", "simple_knn", "gsplat", "pointnet2_ops", "knn_cuda", "lmdeploy",
})


def imports_cuda_only(stmt) -> bool:
    """``import flash_attn`` / ``from megablocks.layers.moe import MoE``: an import of a CUDA-only library
    (``CUDA_ONLY_LIBRARIES``), which fails on a TPU host."""
    if type(stmt) is cst.Import:
        return any((dotted_name(a.name) or "").partition(".")[0] in CUDA_ONLY_LIBRARIES for a in stmt.names)
    if type(stmt) is cst.ImportFrom and not stmt.relative and stmt.module is not None:
        return (dotted_name(stmt.module) or "").partition(".")[0] in CUDA_ONLY_LIBRARIES
    return False


# a quantized load that only bitsandbytes' CUDA kernels run: `from_pretrained(..., load_in_8bit=True)`
_BNB_KEYWORDS = frozenset({"load_in_8bit", "load_in_4bit"})
# peft's preparation of a model quantized in 8 or 4 bits (by bitsandbytes or GPTQ: CUDA kernels)
_KBIT_PREPARATION = frozenset({"prepare_model_for_kbit_training", "prepare_model_for_int8_training"})


def needs_cuda_call(call: cst.Call, qualname=None, bound=frozenset()) -> Optional[str]:
    """What the call needs CUDA for, else None: a model loaded in 8 or 4 bits by bitsandbytes
    (``load_in_8bit=True``, ``quantization_config=BitsAndBytesConfig(load_in_4bit=True)``), anything of
    bitsandbytes itself (``bnb.optim.AdamW8bit(...)``), a k-bit model prepared for training: the model or
    the optimizer itself runs on CUDA kernels, whatever device the program chooses. ``qualname`` resolves a
    callee through the module's imports (``bnb.optim.AdamW8bit`` -> ``bitsandbytes.optim.AdamW8bit``).

    Not the CUDA runtime calls that raise without a driver (``torch.cuda.synchronize()`` for timing,
    ``torch.cuda.get_device_name()``): in a program that chooses its device at run time they are lines a user
    deletes on the way to XLA, and the step around them is XLA code (the ledger's judges: MAE's
    ``train_one_epoch`` synchronises every step, and its ``loss.item()`` is a true finding).

    A model quantized by torchao (``quantization_config=TorchAoConfig(...)``, ``torchao.quantization.quantize_``)
    needs it too: torchao's quantized kernels have no XLA backend (not its other tools: the ledger's judges
    took a float8 recipe passed to accelerate as XLA code). ``bound``: the names of the module's functions that need CUDA
    themselves (``main()`` calling ``load_model()``)."""
    if type(call.func) is cst.Name and call.func.value in bound:
        return f"{call.func.value}()"
    if type(call.func) is cst.Subscript and type(call.func.value) is cst.Name and call.func.value.value in bound:
        return f"{call.func.value.value}[grid]()"  # a triton kernel launched (`_fwd_kernel[grid](q, k, v)`)
    name = (qualname(call.func) if qualname is not None else None) or dotted_name(call.func) or ""
    if name.startswith(("bitsandbytes.", "torchao.quantization.")):
        return name
    if name.rpartition(".")[2] in _KBIT_PREPARATION:
        return name
    for a in call.args:
        if a.keyword is None:
            continue
        if a.keyword.value in _BNB_KEYWORDS and type(a.value) is cst.Name and a.value.value == "True":
            return f"{a.keyword.value}=True"
        if (a.keyword.value in _BNB_KEYWORDS and last_name(call.func) == "BitsAndBytesConfig"
                and type(a.value) is cst.Comparison):
            return f"{a.keyword.value}={code_of(a.value)}"  # `load_in_4bit=args.bits == 4`: QLoRA's k-bit setting
        if a.keyword.value == "quantization_config" and type(a.value) is cst.Call:
            config = last_name(a.value.func)
            if config == "TorchAoConfig" or (config == "BitsAndBytesConfig" and needs_cuda_call(a.value) is not None):
                return config
    return None


def cuda_requirement(block, main_block: bool = False, qualname=None, bound=frozenset(),
                     placements: bool = False) -> Optional[str]:
    """What makes a block of statements unable to run on XLA past some point, else None: a call of
    ``needs_cuda_call`` or ``assert torch.cuda.is_available()``, made unconditionally, on the block's straight
    line (in the bodies of its ``for``,
    ``while`` and ``with`` statements too, not under an ``if``, a ``try``, a conditional expression or in a
    nested function). A function whose body has one never completes a step on a TPU host: what it does per
    step is not XLA code (issue 32, cause 8). ``main_block``: a module's body, whose
    ``if __name__ == "__main__":`` block runs too. ``bound``: as ``needs_cuda_call``'s. ``placements`` (a module
    that never names XLA): a placement on CUDA by name too (``model.cuda()``, ``x.to("cuda:0")``), which puts the
    model or its inputs where no XLA device setting reaches, whatever device the rest is moved to (not the
    process set-up a user deletes on the way to XLA: ``torch.cuda.set_device(rank)``)."""
    for stmt in block:
        t = type(stmt)
        if main_block and t is cst.If and is_main_guard(stmt.test) and type(stmt.body) is cst.IndentedBlock:
            found = cuda_requirement(stmt.body.body, qualname=qualname, bound=bound, placements=placements)
            if found is not None:
                return found
        if t is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) is cst.Assert and asserts_cuda(small.test):
                    return f"assert {code_of(small.test)}"
                found = _straight_calls(small, qualname, bound, placements)
                if found is not None:
                    return found
        elif t in (cst.For, cst.While, cst.With) and type(stmt.body) is cst.IndentedBlock:
            found = cuda_requirement(stmt.body.body, qualname=qualname, bound=bound, placements=placements)
            if found is not None:
                return found
        if t in (cst.If, cst.Try, cst.TryStar) and any(type(n) is cst.Return for n in own_nodes(stmt)):
            # `if not dist.is_initialized(): return x`: a call may complete without what follows (an `if` that only
            # raises ends no call early: every call that goes on reaches the rest)
            return None
    return None


def _straight_calls(node, qualname=None, bound=frozenset(), placements: bool = False) -> Optional[str]:
    """``needs_cuda_call`` of a call the statement always makes (the value of an expression, an assignment,
    a return, and their arguments), not one behind ``if``/``and``/``or``, in a lambda or a comprehension."""
    if type(node) in (cst.Lambda, cst.IfExp, cst.BooleanOperation, cst.ListComp, cst.SetComp, cst.DictComp,
                      cst.GeneratorExp, cst.If, cst.Assert):
        return None
    if type(node) is cst.Call:
        found = needs_cuda_call(node, qualname, bound)
        if found is None and placements and (_places_on_cuda(node) or sets_cuda_default(node)):
            found = code_of(node.func)  # `lm_net = lm_net.cuda()`: the model is on CUDA, whatever the batches are
        if found is not None:
            return found
    for child in node.children:
        if isinstance(child, cst.CSTNode):
            found = _straight_calls(child, qualname, bound, placements)
            if found is not None:
                return found
    return None


def _places_on_cuda(call: cst.Call) -> bool:
    """``model.cuda()``, ``x.to("cuda:0")``, ``torch.zeros(n, device="cuda")``: a placement on CUDA by name (not a
    project function handed ``device="cuda"``: a notebook timing its predictions on the CPU, then on a GPU)."""
    if pin_of(call) != PIN:
        return False
    if type(call.func) is cst.Attribute and call.func.attr.value in ("cuda", "to"):
        return True
    return (dotted_name(call.func) or "").startswith("torch.") and any(
        a.keyword is not None and a.keyword.value == "device" for a in call.args)


def is_main_guard(test) -> bool:
    return (type(test) is cst.Comparison and dotted_name(test.left) == "__name__" and len(test.comparisons) == 1
            and string_value(test.comparisons[0].comparator) == "__main__")


def sets_cuda_default(call: cst.Call) -> bool:
    """``torch.set_default_tensor_type("torch.cuda.FloatTensor")`` / ``(torch.cuda.FloatTensor)`` /
    ``torch.set_default_device("cuda")``."""
    name = dotted_name(call.func) or ""
    if not call.args or name.rpartition(".")[2] not in ("set_default_tensor_type", "set_default_device"):
        return False
    arg = call.args[0].value
    text = string_value(arg) or dotted_name(arg) or ""
    return text.startswith("torch.cuda.") or names_cuda(arg)


# what a module that quantizes with bitsandbytes or torchao, launches triton kernels or places on CUDA by name
# says somewhere (``cuda_requirement``): without it, no function of the module is looked at again for such calls
_MENTIONS_CUDA_NEEDS = re.compile(
    r"bitsandbytes|load_in_[48]bit|BitsAndBytesConfig|TorchAoConfig|torchao|prepare_model_for_(?:kbit|int8)_training"
    r"|triton|cuda|deepspeed")


def mentions_cuda_needs(text: str) -> bool:
    """The module's text names bitsandbytes, its 8/4-bit loading, torchao, triton, CUDA or DeepSpeed anywhere."""
    return _MENTIONS_CUDA_NEEDS.search(text) is not None


def triton_kernels(module: cst.Module, qualname=None) -> frozenset:
    """The module's functions compiled by triton (``@triton.jit``, ``@triton.autotune(...)`` over it,
    ``@triton.heuristics(...)``): launched as ``kernel[grid](...)``, they run on a GPU only (triton has no XLA
    backend), so a function that launches one on its straight line needs CUDA (``needs_cuda_call``)."""
    out = set()
    for stmt in module.body:
        if type(stmt) is not cst.FunctionDef:
            continue
        for d in stmt.decorators:
            dec = d.decorator.func if type(d.decorator) is cst.Call else d.decorator
            name = (qualname(dec) if qualname is not None else None) or dotted_name(dec) or ""
            if name.partition(".")[0] == "triton" and name.rpartition(".")[2] in ("jit", "autotune", "heuristics"):
                out.add(stmt.name.value)
                break
    return frozenset(out)


def mentions_xla(text: str) -> bool:
    """The module's text names XLA or a TPU anywhere (an import, a device string, a flag, a comment)."""
    return _MENTIONS_XLA.search(text) is not None


def _leading_text(node) -> Optional[str]:
    """The literal text a string expression starts with: ``"cuda:0"``, ``f"cuda:{rank}"`` and
    ``"cuda:{}".format(rank)`` start with "cuda:"."""
    s = string_value(node)
    if s is not None:
        return s
    if type(node) is cst.FormattedString:
        first = node.parts[0] if node.parts else None
        return first.value if type(first) is cst.FormattedStringText else ""
    if (type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "format"
            and string_value(node.func.value) is not None):
        return string_value(node.func.value)
    return None


def cuda_ordinal(node) -> bool:
    """The expression names one CUDA device by its index: ``"cuda:1"``, ``f"cuda:{rank}"``,
    ``torch.device("cuda", rank)``, ``torch.cuda.current_device()``, ``torch.cuda.device_count() - 1``. A
    variable holding one is a hard-wired device layout (a reward model on GPU 1, a rank's own GPU), not the
    run's device setting that a user points at XLA (``device = "cuda"`` is that setting)."""
    text = _leading_text(node)
    if text is not None:
        return text.lower().startswith("cuda:")
    if type(node) is cst.Name:
        return node.value in _RANK_NAMES  # x.to(local_rank)
    if type(node) is cst.Attribute:
        return node.attr.value in _RANK_NAMES  # x.to(args.local_rank), torch.device(self.local_rank)
    if type(node) is cst.Call:
        name = dotted_name(node.func) or ""
        if name in ("torch.cuda.current_device", "torch.cuda.device_count"):
            return True
        if _asks_deepspeed_accelerator(node):
            return True  # `torch.device(get_accelerator().device_name(), local_rank)`: DeepSpeed's, never XLA
        if name.rpartition(".")[2] in _RANK_GETTERS:
            return True  # x.to(dist.get_rank()), deepspeed.comm.get_local_rank()
        if name == "int" and node.args and _names_rank_variable(node.args[0].value):
            return True  # int(os.environ["LOCAL_RANK"])
        if name in ("torch.device", "device") and node.args:
            first = node.args[0].value
            return cuda_ordinal(first) or (len(node.args) > 1 and (string_value(first) or "").lower() == "cuda")
        return False
    if type(node) is cst.BinaryOperation:  # torch.cuda.device_count() - 1
        return cuda_ordinal(node.left) or cuda_ordinal(node.right)
    return False


def _asks_deepspeed_accelerator(node) -> bool:
    """The expression asks DeepSpeed's accelerator for a device (``get_accelerator().device_name()``,
    ``get_accelerator().current_device_name()``): DeepSpeed has CUDA, ROCm, XPU, NPU, HPU, MPS and CPU
    accelerators and no XLA one."""
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is cst.Call and last_name(n.func) == "get_accelerator":
            return True
        if type(n) in (cst.Call, cst.Attribute, cst.Arg):
            stack.extend(c for c in n.children if isinstance(c, cst.CSTNode))
    return False


# A process's rank as a device: an int device is a CUDA index (torch_xla's devices are `xla:N`, chosen by
# `torch_xla.device()`), the layout of DeepSpeed, torchrun and Ray GPU workers
_RANK_NAMES = frozenset({"local_rank", "rank", "global_rank", "local_process_index", "gpu", "gpu_id", "gpu_rank"})
_RANK_GETTERS = frozenset({"get_rank", "get_local_rank", "get_global_rank"})


def _names_rank_variable(node) -> bool:
    """``os.environ["LOCAL_RANK"]``, ``os.environ.get("LOCAL_RANK", 0)``, ``os.getenv("RANK")``."""
    if type(node) is cst.Subscript and node.slice:
        key = node.slice[0].slice
        return type(key) is cst.Index and (string_value(key.value) or "").endswith("RANK")
    if type(node) is cst.Call and node.args and last_name(node.func) in ("get", "getenv"):
        return (string_value(node.args[0].value) or "").endswith("RANK")
    return False


def names_cuda(node, ordinal_names=frozenset()) -> bool:
    """The expression is a CUDA device by what it says: a literal ``"cuda"``/``"cuda:0"``, a formatted
    ``f"cuda:{rank}"``, ``torch.device("cuda", i)``, ``torch.cuda.current_device()``, or a name that is only
    ever given CUDA device indices (``ordinal_names``). A tensor put there is not on the XLA device."""
    if type(node) is cst.Name:
        return node.value in ordinal_names or node.value in _RANK_NAMES
    text = _leading_text(node)
    if text is not None:
        return text.lower().startswith(_CUDA_WORDS)
    if type(node) is cst.Attribute and node.attr.value in _RANK_NAMES:
        return True
    if type(node) is cst.Call and dotted_name(node.func) in ("torch.device", "device") and node.args:
        return names_cuda(node.args[0].value, ordinal_names)
    return cuda_ordinal(node)


def _is_cuda_value(node, ordinal_names=frozenset()) -> Optional[bool]:
    """True: names CUDA; False: a device chosen elsewhere; None: not a device (a dtype, a literal "cpu")."""
    if names_cuda(node, ordinal_names):
        return True
    s = string_value(node)
    if s is not None or type(node) is cst.FormattedString:
        return None  # "cpu", "meta", "auto": neither
    if type(node) is cst.Call and dotted_name(node.func) in ("torch.device", "device") and node.args:
        return _is_cuda_value(node.args[0].value, ordinal_names)
    if type(node) is cst.Integer:
        return None
    if (type(node) is cst.Attribute and node.attr.value == "device"
            and (last_name(node.value) or "") not in _HOLDERS_OF_THE_DEVICE
            and (type(node.value) is cst.Name or (last_name(node.value) or "") not in _RUNTIMES)):
        # `device=mask.device`, `.to(model.lm_head.weight.device)`: wherever that tensor or module was put,
        # neither CUDA nor a choice (`self.device`, `self.args.device` are the settings)
        return None
    name = dotted_name(node)
    if name is None:
        return False if type(node) in (cst.Subscript, cst.Call, cst.IfExp) else None
    last = name.rsplit(".", 1)[-1].lower()
    if last.startswith("torch.") or any(w in last for w in _NOT_DEVICES) or name.startswith("torch."):
        return None  # x.to(torch.float16), x.to(dtype)
    return False


def pin_of(node: cst.Call, ordinal_names=frozenset(), asserted: bool = False) -> Optional[str]:
    """Whether the call pins CUDA by a literal (PIN), places on a device chosen elsewhere (CHOSEN: a
    variable, even one set to "cuda" as a default: a device variable is what a user sets to XLA), or
    neither (None). A variable only ever given CUDA device indices (``ordinal_names``: ``rw_device =
    torch.device("cuda:{}".format(1))``) pins, and so does ``torch.cuda.is_available()`` when it is what an
    ``assert`` tests (``asserted``)."""
    func = node.func
    name = dotted_name(func) or ""
    method = func.attr.value if type(func) is cst.Attribute else None
    if method == "cuda" and not name.startswith("torch.cuda"):
        return PIN  # model.cuda(), x.cuda(non_blocking=True), x.cuda(rank)
    if name in ("torch.cuda.set_device", "torch.distributed.init_process_group", "dist.init_process_group",
                "init_process_group"):  # `from torch.distributed import init_process_group`
        if name == "torch.cuda.set_device":
            return PIN
        args = [a.value for a in node.args if a.keyword is None or a.keyword.value == "backend"]
        return PIN if args and _is_cuda_value(args[0], ordinal_names) else None
    if name == "deepspeed.initialize":
        return PIN  # DeepSpeed has no XLA accelerator
    if name == "torch.cuda.is_available" and asserted:
        return PIN  # `assert torch.cuda.is_available(), "needs a GPU"`
    found = None
    if method == "to" and node.args and node.args[0].keyword is None:
        v = _is_cuda_value(node.args[0].value, ordinal_names)
        if v is True:
            return PIN
        if v is False:
            found = CHOSEN
    for a in node.args:
        if (a.keyword is not None and a.keyword.value == "deepspeed"
                and (string_value(a.value) is not None or type(a.value) is cst.Dict)):
            return PIN  # TrainingArguments(deepspeed="ds_config.json"): DeepSpeed has no XLA accelerator
        if a.keyword is not None and a.keyword.value in _DEVICE_KEYWORDS:
            v = _is_cuda_value(a.value, ordinal_names)
            if v is True:
                return PIN
            if v is False:
                found = CHOSEN
    return found


_DTYPES = frozenset({"float16", "float32", "float64", "bfloat16", "half", "float", "double", "int8", "int16",
                     "int32", "int64", "long", "int", "uint8", "bool", "complex64", "complex128"})


def is_dtype(node) -> bool:
    """``torch.float16``, ``torch.bfloat16 if bf16 else torch.float32``: a dtype, not a device."""
    if type(node) is cst.IfExp:
        return is_dtype(node.body) and is_dtype(node.orelse)
    name = dotted_name(node) or ""
    return name.startswith("torch.") and name.rpartition(".")[2] in _DTYPES


def names_the_run_device(node) -> bool:
    """``device``, ``self.device``, ``args.device``, ``accelerator.device``, ``xm.xla_device()``,
    ``torch.device(name)``: the device the run chose (a setting, a launcher's), not where a tensor or a module
    was put (``logits.device``, ``model.device``)."""
    if type(node) is cst.Name:
        return True
    if type(node) is cst.Attribute:
        holder = last_name(node.value) or ""
        return holder in _HOLDERS_OF_THE_DEVICE or holder in _RUNTIMES
    if type(node) is cst.Call:
        return (last_name(node.func) or "") in ("xla_device", "device", "get_device")
    return False


def casts_only(node: cst.Call) -> bool:
    """``x.to(torch.float)``, ``x.to(dtype=torch.bfloat16)``, ``x.to(y.dtype)``: a cast, not a placement."""
    return bool(node.args) and all(
        _names_dtype(a.value) if a.keyword is None else a.keyword.value in ("dtype", "non_blocking", "copy")
        for a in node.args)


def _names_dtype(node) -> bool:
    return is_dtype(node) or (type(node) is cst.Attribute and node.attr.value == "dtype") or (
        type(node) is cst.Name and node.value == "dtype")


def device_names(node: cst.Call) -> Optional[set]:
    """The plain names a placing call puts its tensors on (``x.to(device)``, ``torch.zeros(n, device=dev)``,
    ``model.to(self.device)``), or None when a device it chooses is not one (``args.device``,
    ``devices[rank]``): whether a
    name chooses at run time is known only once every binding of the module is seen (a function defined
    above ``main()``'s ``device = torch.device("cuda", rank)`` uses it)."""
    values = []
    if type(node.func) is cst.Attribute and node.func.attr.value == "to" and node.args and node.args[0].keyword is None:
        values.append(node.args[0].value)
    values.extend(a.value for a in node.args if a.keyword is not None and a.keyword.value in _DEVICE_KEYWORDS)
    names = set()
    for v in values:
        if _is_cuda_value(v) is False:
            if type(v) is cst.Name:
                names.add(v.value)
            elif type(v) is cst.Attribute and type(v.value) is cst.Name and v.value.value == "self":
                names.add(f"self.{v.attr.value}")  # `model.to(self.device)`: what the class assigns it
            else:
                return None
    return names


def asserts_cuda(test) -> bool:
    """``assert torch.cuda.is_available(), "requires a GPU"``, ``assert device_type == "cuda"``, ``assert
    device_type in {"cuda"}``, ``assert "cuda" in device``: the program says it cannot run without CUDA (a device
    set to XLA fails the assertion). Not ``assert device in ("cuda", "cpu")``: it accepts another device."""
    if type(test) is cst.Call:
        return pin_of(test, asserted=True) == PIN
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return False
    op, right = type(test.comparisons[0].operator), test.comparisons[0].comparator
    if op is cst.Equal:
        return _cuda_string(right) or _cuda_string(test.left)
    if op is cst.In and _cuda_string(test.left):
        return True  # `"cuda" in device`
    return op is cst.In and type(right) in (cst.Set, cst.Tuple, cst.List) and bool(right.elements) and all(
        _cuda_string(e.value) for e in right.elements)


def _cuda_string(node) -> bool:
    text = string_value(node)
    return text is not None and (text == "cuda" or text.startswith("cuda:"))


def gpu_actor(classdef: cst.ClassDef) -> bool:
    """A Ray actor class placed on GPUs (``@ray.remote(num_gpus=1)``): Ray schedules it on a worker with a CUDA
    device (a TPU worker is asked for with ``resources={"TPU": n}``), so its methods run on CUDA, never on XLA."""
    for d in classdef.decorators:
        call = d.decorator
        if type(call) is not cst.Call or (dotted_name(call.func) or "").rpartition(".")[2] != "remote":
            continue
        for a in call.args:
            if a.keyword is not None and a.keyword.value == "num_gpus" and not (
                    type(a.value) is cst.Integer and a.value.value == "0"):
                return True
    return False


def declares_host_device(classdef: cst.ClassDef) -> bool:
    """The class answers ``device`` with the CPU (``@property def device(self): return torch.device("cpu")``):
    the host-side runtime of a model compiled ahead of time (Neuron's traced decoders, an ONNX or TensorRT
    session) that tells ``generate()`` not to move anything. Its methods prepare host tensors for the compiled
    graph and read its host outputs: not XLA code."""
    for stmt in classdef.body.body if type(classdef.body) is cst.IndentedBlock else ():
        if type(stmt) is not cst.FunctionDef or stmt.name.value != "device":
            continue
        if not any((dotted_name(d.decorator) or "").rpartition(".")[2] == "property" for d in stmt.decorators):
            continue
        body = stmt.body.body if type(stmt.body) is cst.IndentedBlock else ()
        returns = [small.value for line in body if type(line) is cst.SimpleStatementLine
                   for small in line.body if type(small) is cst.Return and small.value is not None]
        return len(returns) == 1 and is_cpu_device(returns[0])
    return False


def to_target(call: cst.Call):
    """The device a ``.to(...)`` call names: its ``device=`` keyword, else its first positional argument, or None."""
    args = positional_args(call)
    return keyword_arg(call, "device") or (args[0] if args else None)


def is_cpu_device(node) -> bool:
    """``"cpu"``, ``"cpu:0"``, ``torch.device("cpu")``: the host, by what it says."""
    if type(node) is cst.Call and dotted_name(node.func) in ("torch.device", "device") and node.args:
        node = node.args[0].value
    return (string_value(node) or "").lower().partition(":")[0] == "cpu"



def params_given_cuda(module: cst.Module, names: set, ordinal_names) -> set:
    """Of ``names`` (placement names), the parameters every call in ``module`` passes a hard-wired CUDA device
    (``compute_accuracy(model, loader, device=DEVICE)`` with ``DEVICE = "cuda:2"``): in a program that is whole
    (a notebook, a script no module imports), they hold that device. A name also bound otherwise, a function
    never called here or called with anything else: not one of them."""
    return params_given(module, names, lambda v: names_cuda(v, ordinal_names))


def params_given_cpu(module: cst.Module, names: set) -> set:
    """Of ``names``, the parameters every call in ``module`` passes the CPU (``pred_and_store(..., device="cpu")``,
    ``device=torch.device("cpu")``): in a whole program, what the function places there is on the host."""
    return params_given(module, names, is_cpu_device)


def params_given(module: cst.Module, names: set, passed) -> set:
    """Of ``names``, the parameters whose every call in ``module`` passes a value ``passed`` accepts (see
    ``params_given_cuda``)."""
    defs: dict = {}  # function name -> its parameters, by position
    calls: dict = {}  # function name -> its calls
    stack = [module]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.FunctionDef:
            ps = n.params
            defs.setdefault(n.name.value, []).append(positional_params(n)
                                                     + [p.name.value for p in ps.kwonly_params])
        elif t is cst.Call and type(n.func) is cst.Name:
            calls.setdefault(n.func.value, []).append(n)
        if t in NODE_TYPES or t is cst.Module:
            stack.extend(child_nodes(n))
    given: dict = {}  # parameter name -> all its functions' calls pass CUDA there
    for fname, signatures in defs.items():
        if len(signatures) != 1:
            continue
        params = signatures[0]
        for name in names & set(params):
            ok = bool(calls.get(fname)) and all(_passes(c, params, name, passed) for c in calls[fname])
            given[name] = given.get(name, True) and ok
    return {name for name, ok in given.items() if ok}


def _passes(call: cst.Call, params: list, name: str, passed) -> bool:
    index = params.index(name)
    for i, a in enumerate(call.args):
        if a.star:
            return False
        if (a.keyword is not None and a.keyword.value == name) or (a.keyword is None and i == index):
            return passed(a.value)
    return False  # its default: not known here


def device_params(node: cst.FunctionDef, names: set, method: bool) -> list:
    """Where callers pass ``names`` (the function's own parameters it places on: ``v.to(device)``): [[position
    in a call, or -1 for keyword-only, name]]; ``method``: a call through the object does not pass ``self``."""
    p = node.params
    positional = positional_params(node)
    offset = 1 if method and positional and positional[0] in ("self", "cls") else 0
    out = [[i - offset, n] for i, n in enumerate(positional) if n in names and i >= offset]
    out.extend([-1, x.name.value] for x in p.kwonly_params if x.name.value in names)
    return out


def helper_pin(call: cst.Call, params: list, ordinal_names=frozenset()) -> Optional[str]:
    """What a call of a project helper that places on its parameters (``device_params``) does: PIN when it
    passes a CUDA device by what it says (``slice_and_move_batch_for_device(batch, ..., self.rank)``: a rank is a
    CUDA index), CHOSEN when a device chosen elsewhere, None when neither or not passed (its default)."""
    out = None
    for pos, name in params:
        for i, a in enumerate(call.args):
            if a.star:
                return None
            if (a.keyword is not None and a.keyword.value == name) or (a.keyword is None and i == pos):
                v = _is_cuda_value(a.value, ordinal_names)
                if v is False:
                    return CHOSEN
                if v:
                    out = PIN
                break
    return out
