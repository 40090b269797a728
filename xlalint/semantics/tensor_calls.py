"""Is it a tensor? The kinds of calls: torch functions, tensor methods, builtins, project functions.

A part of the semantic model (``model.SemanticModel`` composes it), beside ``tensors.TensorInference``:
what a call returns, from the tables of torch functions and tensor methods (``tables``), the builtins,
``.to(device)`` moves, and for a function or class of another project module its summary (``self.facts``);
and whether an expression names a device, a CPU device or a data loader.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import passthrough
from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.tensor_methods import TENSOR_ATTRIBUTES
from xlalint.semantics.guards import flash_attention_class, onnx_export_class
from xlalint.semantics.tensors import element_key_of
from xlalint.semantics.syntax import (
    assigned_names, child_nodes, dotted_name, keyword_arg, last_name, name_words, positional_args, string_value,
)


class CallKinds:
    """What calls return, and what names a device or a loader."""

    def _infer_call(self, e: cst.Call):
        func = e.func
        if _returns_host_tensors(e):
            return K.CPU_TENSORS  # `processor(images=..., return_tensors="pt")`: a dict of host tensors
        moved = self._moved_kind(e)
        if moved is not None:
            return moved
        q = self.qualname(func)
        if q is not None:
            return self._infer_qualified_call(e, q)
        if type(func) is cst.Name:
            name = func.value
            if name == "self":  # self(idx) in a module's method (generate): runs forward
                cls = self.current_class()
                return K.TENSOR if cls is not None and self.classes.get(cls, {}).get("module") else K.UNKNOWN
            if name not in self.imports:
                r = self._infer_builtin(e, name)
                if r is not NotImplemented:
                    return r
            f = self._lookup_func(name)
            if f is not None:
                k = passthrough.at_call(f.call_return_kind, e, self.kind)
                # only where its own walk could not tell (a device result stays one: the walk knows better
                # than the arguments' kinds, litgpt's sampler is given device logits at every call that counts)
                if (k is K.UNKNOWN or (k in K.DEVICE_TENSORS and self.copied_to_host_arguments(e))) and \
                        places_nothing(f.node, self.imports) and self.host_arguments(e):
                    return K.CPU_TENSOR  # xyxy2xywh(torch.tensor(box)): host tensors in, the same ops, host out
                return k
            if name in self.classes:
                return K.MODULE if self.classes[name]["module"] else K.instance(f"{self.module_name}:{name}")
            found, fk = self._env_lookup(name)
            if found and fk == K.MODULE:
                return self._module_output(e)
            if found and fk is not K.UNKNOWN:
                return K.UNKNOWN
            if not found and name in getattr(self, "toplevel_defs", ()):
                return K.UNKNOWN  # `parse_model(cfg)`, a function of this module defined further down: not a model
            words = name_words(name)
            if words and words[-1] in T.MODEL_NAME_WORDS | {"criterion"} and e.args:
                return self._module_output(e)
            if name in ("loss_fn", "lossfn", "loss_func", "loss_function", "criterion") and e.args:
                return self._module_output(e)
            return K.UNKNOWN
        if type(func) is cst.Attribute:
            if self.kind(func) == K.MODULE:
                return self._module_output(e)  # self.proj(x)
            return self._infer_method_call(e, func)
        if type(func) is cst.Call or type(func) is cst.Subscript:
            fk = self.kind(func)
            return K.TENSOR if fk == K.MODULE else K.UNKNOWN
        return K.UNKNOWN

    def _moved_kind(self, e: cst.Call):
        """``move_to_device(batch, self.device)`` (``T.DEVICE_MOVERS``): what it is given, on the device it is
        given (on the host for ``"cpu"``), or None for another call."""
        args = positional_args(e)
        if last_name(e.func) not in T.DEVICE_MOVERS or not args:
            return None
        target = args[1] if len(args) > 1 else keyword_arg(e, "device")
        k = self.kind(args[0])
        if target is not None and (self.is_cpu_device(target) or self.is_cuda_device(target)):
            return K.CPU_TENSORS if k in (K.TENSORS, K.CPU_TENSORS) else K.CPU_TENSOR
        if k in (K.TENSORS, K.CPU_TENSORS):
            return K.TENSORS
        return K.TENSOR if k in K.ANY_TENSOR else None

    def read_kind(self, recv):
        """The kind of what a read of ``recv`` (`.item()`, `.tolist()`) sees: ``recv``'s, but for a host copy
        made on the spot (`x.detach().cpu().tolist()`) that of what was copied: unknown when that is unknown
        (`.cpu()` of an unknown value is a host tensor for what iterates it, not evidence of no transfer)."""
        k = self.kind(recv)
        base = recv
        while (k == K.CPU_TENSOR and type(base) is cst.Call and not base.args and type(base.func) is cst.Attribute
               and base.func.attr.value in ("cpu", "detach")):
            base = base.func.value
        return K.UNKNOWN if base is not recv and self.kind(base) is K.UNKNOWN else k

    def _module_output(self, e: cst.Call):
        """What a model or a loss module returns: a device tensor, unless it is given a host copy made here and
        host values only (``criterion(prediction.cpu(), y)``: it runs where its inputs are)."""
        return K.CPU_TENSOR if self.copied_to_host_arguments(e) and self.host_arguments(e) else K.TENSOR

    def _infer_builtin(self, e: cst.Call, name: str):
        args = positional_args(e)
        if self._lookup_func(name) is not None:
            return NotImplemented
        if name in ("len", "int", "float", "bool", "str", "repr", "isinstance", "issubclass", "hasattr",
                    "range", "format", "hash", "id", "type", "round", "callable", "ord", "chr", "hex",
                    "print", "getattr", "input", "open", "divmod", "all", "any", "dict", "set", "frozenset"):
            if name == "getattr" and len(args) >= 2:
                bk = self.kind(args[0])
                if bk == K.MODULE or bk in K.ANY_TENSOR:
                    return K.UNKNOWN
            if name == "dict" and args:
                return K.UNKNOWN
            if name == "round" and args and self.kind(args[0]) in K.ANY_TENSOR:
                return K.UNKNOWN
            return K.NOT_TENSOR
        if name in ("iter", "list", "tuple", "sorted", "reversed") and args:
            k = self.kind(args[0])
            if K.callable_keys(k) is not None:
                return k  # `self.callbacks = list(callbacks)`: still the callbacks
            if name == "iter":
                return k if k is not K.UNKNOWN else (K.LOADER if self._looks_like_loader(args[0]) else K.UNKNOWN)
            if k in (K.TENSORS, K.TENSOR, K.BOOL_TENSOR):
                return K.TENSORS
            if k in (K.CPU_TENSORS, K.CPU_TENSOR):
                return K.CPU_TENSORS
            return K.NOT_TENSOR if k == K.NOT_TENSOR else K.UNKNOWN
        if name == "next" and args:
            k = self.kind(args[0])
            if k is K.UNKNOWN and self._looks_like_loader(args[0]):
                k = K.LOADER
            return K.element_of(k)
        if name in ("sum", "max", "min", "abs"):
            ks = [self.kind(a) for a in args]
            if any(k in K.HOLDS_DEVICE_TENSOR for k in ks):
                return K.TENSOR
            if ks and all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if name in ("zip", "enumerate", "map", "filter"):
            return K.UNKNOWN
        return NotImplemented

    def _scaler_kind(self, e: cst.Call):
        """``GradScaler(...)``: a scaler on an XLA step when it is enabled (no ``enabled=`` or
        ``enabled=True``) and the file is XLA code or the scaler is made for the ``"xla"`` device."""
        enabled = keyword_arg(e, "enabled")
        if enabled is not None and not (type(enabled) is cst.Name and enabled.value == "True"):
            return K.UNKNOWN  # disabled, or enabled by an expression we cannot evaluate
        if self.cond_depth > 0:
            return K.UNKNOWN  # made only under a test (`if cfg.use_pytorch_amp:`): enabled by an expression too
        args = positional_args(e)
        device = args[0] if args else keyword_arg(e, "device")
        if self.imports_xla or (device is not None and string_value(device) == "xla"):
            return K.SCALER
        return K.UNKNOWN  # a CUDA scaler in a GPU script: not an XLA step

    def _infer_qualified_call(self, e: cst.Call, q: str):
        ns, _, fn = q.rpartition(".")
        if q in T.ANY_RESULT_TORCH_FUNCTIONS:
            return K.UNKNOWN  # torch.load(f): a module, a state dict or a tensor
        if q in T.GRAD_SCALER_CLASSES:
            return self._scaler_kind(e)
        if q in T.NON_TENSOR_TORCH_FUNCTIONS:
            return K.NOT_TENSOR
        if q in T.HOST_TENSOR_READERS:  # torchaudio.load(path): decoded on the host
            return K.CPU_TENSORS if T.HOST_TENSOR_READERS[q] == "tuple" else K.CPU_TENSOR
        if q in T.HOST_RUNTIME_CONSTRUCTORS:
            return K.instance(T.HOST_RUNTIME)  # `ort.InferenceSession(path)`: its outputs are NumPy arrays
        if q in T.CPU_LOADER_CONSTRUCTORS or q.endswith(".DataLoader"):
            return K.CPU_LOADER
        if q in T.DEVICE_LOADER_CONSTRUCTORS:
            return K.LOADER
        if q in T.TENSOR_SEQUENCE_TORCH_FUNCTIONS:  # `torch.split(x, sizes)`: the pieces stay where x is
            return K.TENSORS if self._any_arg_kind(e, K.DEVICE_TENSORS) else (
                K.CPU_TENSORS if self.all_args_cpu(e) else K.UNKNOWN)
        if ns == "torch.distributions" or ns.startswith("torch.distributions."):
            # `Categorical(logits=out)`: a distribution over device tensors, whose samples are device tensors
            if self._any_arg_kind(e, K.DEVICE_TENSORS):
                return K.instance(T.DEVICE_DISTRIBUTION)
            if self.all_args_cpu(e, keywords=True):
                return K.instance(T.HOST_DISTRIBUTION)  # `Categorical(policy(state).cpu())`: host samples
            return K.UNKNOWN
        if q in T.BOOL_RESULT_FUNCTIONS:
            return K.BOOL_TENSOR if not self.all_args_cpu(e) else K.CPU_TENSOR
        if q in T.CPU_FACTORY_FUNCTIONS:
            dev = keyword_arg(e, "device")
            if dev is not None and self.is_cuda_device(dev):
                return K.CPU_TENSOR  # `device=torch.cuda.current_device()`: on CUDA, not the XLA device
            if dev is None or self.is_cpu_device(dev):
                if fn in ("tensor", "as_tensor") and self._any_arg_kind(e, K.HOLDS_DEVICE_TENSOR):
                    return K.TENSOR
                return K.CPU_TENSOR
            return K.TENSOR
        if ns in T.TENSOR_NAMESPACES and fn[:1].islower():
            if fn.endswith("_like"):
                args = positional_args(e)
                k = self.kind(args[0]) if args else K.TENSOR
                if k == K.BOOL_TENSOR and keyword_arg(e, "dtype") is not None:
                    return K.TENSOR  # torch.zeros_like(mask, dtype=torch.float)
                return k
            if self.all_args_cpu(e):
                return K.CPU_TENSOR
            return K.TENSOR
        if ns.startswith("torch.nn") and fn[:1].isupper() and not ns.startswith("torch.nn.utils"):
            return K.MODULE  # nn.Linear(...), nn.Sequential(...)
        if ns.startswith("torch_xla") and fn in ("all_reduce", "all_gather", "reduce_scatter", "mesh_reduce"):
            return K.TENSOR if fn != "mesh_reduce" else K.UNKNOWN
        if fn == "from_pretrained" and "Model" in ns:
            return K.MODULE
        if ns.startswith("torch.nn.utils") and fn in ("clip_grad_norm_", "clip_grad_norm", "parameters_to_vector"):
            return K.TENSOR
        if self.facts is not None and self.facts.knows(q):
            return passthrough.at_call(self._project_call_kind(q), e, self.kind)
        return K.NOT_TENSOR if q.startswith(_HOST_LIBRARIES) else K.UNKNOWN

    def _infer_method_call(self, e: cst.Call, func: cst.Attribute):
        meth = func.attr.value
        recv = func.value
        rk = self.kind(recv)
        cls_key = K.instance_class(rk)
        if cls_key == T.DEVICE_DISTRIBUTION:
            return K.TENSOR if meth in T.DISTRIBUTION_TENSOR_METHODS else K.UNKNOWN  # dist.sample()
        if cls_key == T.HOST_DISTRIBUTION:
            return K.CPU_TENSOR if meth in T.DISTRIBUTION_TENSOR_METHODS else K.UNKNOWN
        if cls_key == T.HOST_RUNTIME:
            return K.CPU_TENSORS if meth in T.HOST_RUNTIME_RESULTS else K.UNKNOWN
        if cls_key is not None:  # trainer.step(batch): what the method returns
            return self._method_return(cls_key, meth)
        if meth in ("astype", "asnumpy", "as_numpy"):
            # NumPy's and pandas' conversion, MXNet's and Triton's (`pb_utils` tensors) to NumPy: a torch tensor
            # has none of them
            return K.NOT_TENSOR
        if rk in K.ANY_TENSOR:
            cpu = rk == K.CPU_TENSOR
            if meth in _DICT_OUTPUT_METHODS and not cpu:
                # a tensor has no .items(): this "tensor" is a dict of them (a criterion's loss dict,
                # a model output), and its values are device tensors
                return _DICT_OUTPUT_METHODS[meth]
            if meth not in TENSOR_ATTRIBUTES:
                # `instances.has("gt_masks")`: a tensor has no such method, so the receiver is not the tensor it
                # was taken for (an object moved with `.to(device)`), and what it returns is not known
                return K.UNKNOWN
            if meth in T.NON_TENSOR_METHODS or meth.startswith("is_"):
                return K.NOT_TENSOR  # `.is_contiguous()`, `.is_floating_point()`: Python bools
            if meth == "cpu":
                return K.CPU_TENSOR
            if meth in ("to", "cuda", "type_as"):
                if meth == "to":
                    return self._infer_to(e, rk)
                if meth == "cuda":
                    return K.CPU_TENSOR  # on a CUDA device: not the XLA device's (reading it is no XLA sync)
                return K.TENSOR
            if meth in T.BOOL_RESULT_METHODS:
                return K.CPU_TENSOR if cpu else K.BOOL_TENSOR
            if meth in ("split", "chunk", "unbind", "tensor_split"):
                return K.CPU_TENSORS if cpu else K.TENSORS
            if meth in ("any", "all") and rk == K.BOOL_TENSOR:
                return K.BOOL_TENSOR
            if meth in ("any", "all"):
                return K.BOOL_TENSOR if not cpu else K.CPU_TENSOR
            if rk == K.BOOL_TENSOR and meth in T.BOOL_PRESERVING_METHODS:
                return K.BOOL_TENSOR  # mask.unsqueeze(-1), mask.view(-1), mask.expand_as(x)
            if meth.startswith("_"):
                return K.UNKNOWN  # not a public tensor method: the receiver may not be a tensor
            return rk if rk != K.BOOL_TENSOR else K.TENSOR
        if rk in (K.TENSORS, K.CPU_TENSORS):
            if meth == "items":
                # (key, value) pairs; those of a host container are host values (`predictions.items()` of
                # outputs moved to the CPU)
                return K.ITEMS if rk == K.TENSORS else K.CPU_TENSORS
            if meth == "values":
                return rk
            if meth in ("keys", "__len__"):
                return K.NOT_TENSOR
            if meth in ("get", "pop"):
                return self._entry_kind(e, func, rk)
            if meth == "cuda":  # a batch moved to a CUDA device: not the XLA device
                return K.CPU_TENSORS
            if meth == "to":  # a batch moved to the device (BatchEncoding.to(device))
                return K.TENSORS if self._infer_to(e, K.CPU_TENSOR) == K.TENSOR else rk
            return K.UNKNOWN
        if rk == K.MODULE:
            if meth in ("parameters", "buffers"):
                return K.TENSORS
            if meth in ("to", "cuda", "cpu", "train", "eval", "half", "float", "double", "bfloat16", "requires_grad_", "apply"):
                return K.MODULE
            if meth in ("generate", "forward", "encode", "decode", "embed"):
                return K.TENSOR
            if meth in ("named_parameters", "named_buffers"):
                return K.ITEMS  # (name, tensor) pairs
            if meth in ("state_dict", "modules", "children", "named_modules"):
                return K.UNKNOWN
            return K.UNKNOWN
        if rk in (K.LOADER, K.CPU_LOADER):
            if meth in ("per_device_loader",):
                return K.LOADER
            return K.UNKNOWN
        if rk == K.NOT_TENSOR:
            return K.NOT_TENSOR
        # Unknown receiver.
        if meth in ("item", "tolist", "size", "dim", "numel", "ndimension", "nelement", "format", "join", "lower", "upper", "strip", "split", "startswith", "endswith", "replace", "keys", "numpy"):
            return K.NOT_TENSOR  # `.numpy()` of anything: a NumPy array on the host
        if meth in ("step", "reset") and (H.words_of(last_name(recv) or "") or [""])[-1] in H.ENV_RECEIVER_WORDS:
            return K.NOT_TENSOR  # a Gym environment's observations, rewards and info: NumPy arrays and Python values
        if meth == "per_device_loader":
            return K.LOADER
        if meth == "cpu" or (meth == "to" and self.to_cpu(e)):
            # x.cpu() / x.to("cpu") on something unknown: a module if it is named like one, else what it returns
            # is on the host whatever it was (a tensor's copy; reading it, or its rows, costs nothing more)
            return K.MODULE if _named_like_module(recv) else K.CPU_TENSOR
        if meth in ("to", "cuda") and (meth == "cuda" or self._is_device_expr(e)):
            # x.to(device) on something unknown: a module if it is named like one, else a tensor (on CUDA,
            # `x.cuda()`, `x.to("cuda:1")`: not on the XLA device)
            rname = (last_name(recv) or "").lower()
            if _named_like_module(recv):
                return K.MODULE
            cuda = meth == "cuda" or self._infer_to(e, K.TENSOR) == K.CPU_TENSOR
            if rname in ("batch", "inputs", "data") or rname.endswith("_batch"):
                return K.CPU_TENSORS if cuda else K.TENSORS
            if type(recv) in (cst.Name, cst.Attribute, cst.Subscript):
                return K.CPU_TENSOR if cuda else K.TENSOR
            return K.UNKNOWN
        if meth == "prepare" and last_name(recv) in ("accelerator", "accel"):
            return K.UNKNOWN
        if meth in T.ACCELERATOR_METHODS and last_name(recv) in T.ACCELERATOR_RECEIVERS:
            if T.ACCELERATOR_METHODS[meth] == "module":
                return K.MODULE
            args = positional_args(e)
            ak = self.kind(args[0]) if args else K.UNKNOWN
            if ak in (K.TENSORS, K.CPU_TENSORS, K.CPU_TENSOR, K.NOT_TENSOR):
                return ak if ak != K.CPU_TENSORS else K.UNKNOWN
            return K.TENSOR
        if meth in ("from_pretrained",) and "Model" in (dotted_name(recv) or ""):
            return K.MODULE
        if type(recv) is cst.Name and recv.value == "self":
            cls = self.current_class()
            if cls is not None and f"{cls}.{meth}" in self.funcs:
                return self.funcs[f"{cls}.{meth}"].return_kind
        return K.UNKNOWN

    def _project_call_kind(self, q: str):
        """A call of a function or class of another module: what its summary says it returns."""
        r = self.facts.resolve(q)
        if r is None:
            return K.UNKNOWN
        if r[0] == "func":
            return self.facts.returns(r[1])
        if r[0] == "class":
            return K.MODULE if self.facts.class_is_module(r[1]) else K.instance(r[1])
        return K.UNKNOWN

    def _class_attribute(self, class_key: str, attr: str):
        """The kind of attribute ``attr`` of the objects of a project class: this module's own, or
        another's facts (which then record only that this attribute was read)."""
        mod, _, cls = class_key.partition(":")
        if mod == self.module_name and cls in self.classes:
            return self.classes[cls]["attrs"].get(attr, K.UNKNOWN)
        if self.facts is not None:
            return self.facts.class_attribute(class_key, attr)
        return K.UNKNOWN

    def entry_guards(self, cls: Optional[str]) -> list:
        """The guards a method starts under: off XLA for a flash-attn or ONNX-export class, a
        host runtime (``runs_on_host``) or a Ray actor placed on GPUs (``device_pins.gpu_actor``), else none."""
        off = flash_attention_class(cls) or onnx_export_class(cls) or self.runs_on_host(cls) or bool(
            cls and self.classes.get(cls, {}).get("gpu_actor"))
        return [(None, True, False)] if off else []

    def runs_on_host(self, cls: Optional[str], _depth: int = 0) -> bool:
        """A class of this module whose objects answer ``device`` with the CPU (``device_pins.
        declares_host_device``), itself or through a base in this module or another."""
        rec = self.classes.get(cls) if cls else None
        if rec is None or _depth > 8:
            return False
        if rec["attrs"].get("device") == K.HOST_DEVICE:
            return True
        for b in rec.get("bases", ()):
            local = b[len(self.module_name) + 1:] if b.startswith(self.module_name + ".") else None
            if local in self.classes:
                if self.runs_on_host(local, _depth + 1):
                    return True
            elif self.facts is not None and self.facts.knows(b):
                r = self.facts.resolve(b)
                if r is not None and r[0] == "class" and self.facts.class_attribute(r[1], "device") == K.HOST_DEVICE:
                    return True
        return False

    def _method_of(self, class_key: str, meth: str) -> Optional[str]:
        """The project-wide key of the function ``obj.meth()`` runs on an object of ``class_key``."""
        mod, _, cls = class_key.partition(":")
        if mod == self.module_name and f"{cls}.{meth}" in self.funcs:
            return f"{mod}:{cls}.{meth}"
        if self.facts is not None:
            return self.facts.method(class_key, meth)
        return None

    def _method_return(self, class_key: str, meth: str):
        key = self._method_of(class_key, meth)
        if key is None:
            return K.UNKNOWN
        mod, _, local = key.partition(":")
        if mod == self.module_name:
            f = self.funcs.get(local)
            return f.return_kind if f is not None else K.UNKNOWN
        return self.facts.returns(key)

    def _entry_kind(self, e: cst.Call, func: cst.Attribute, rk):
        """``d.get(key)`` / ``d.pop(key, default)`` of a container of tensors: the entry's own kind where it was
        given one (``d["temperature"] = ...``), unknown when the default is a Python literal (``kwargs.get(
        "temperature", 0.0)``: a setting beside the tensors), else an element's kind."""
        args = positional_args(e)
        if args and type(func.value) is cst.Name:
            key = element_key_of(func.value.value, args[0])
            if key is not None:
                found, k = self._env_lookup(key)
                if found:
                    return k
        if len(args) > 1 and type(args[1]) in (cst.Integer, cst.Float, cst.SimpleString) or (
                len(args) > 1 and type(args[1]) is cst.Name and args[1].value in ("True", "False")):
            return K.UNKNOWN
        return K.element_of(rk)

    def _infer_to(self, e: cst.Call, rk):
        args = positional_args(e)
        dev = keyword_arg(e, "device")
        target = dev if dev is not None else (args[0] if args else None)
        dtype = keyword_arg(e, "dtype")
        if rk == K.BOOL_TENSOR and dtype is not None and self.qualname(dtype) != "torch.bool":
            rk = K.TENSOR  # mask.to(device, dtype=torch.float): no longer a mask
        if target is None:
            return rk if rk in K.ANY_TENSOR else K.TENSOR
        if self.is_cpu_device(target) or self.is_cuda_device(target):
            return K.CPU_TENSOR
        if type(target) is cst.Attribute and target.attr.value == "dtype" and dev is None:
            return rk if rk in K.ANY_TENSOR else K.TENSOR  # `mask.to(x.dtype)`: a cast, where it was
        q = self.qualname(target) or ""
        if q.startswith("torch.") and q.split(".")[-1] in _DTYPES:
            if rk == K.BOOL_TENSOR and q != "torch.bool":
                return K.TENSOR  # mask.to(torch.long): no longer a mask
            return rk if rk in K.ANY_TENSOR else K.TENSOR
        tk = self.kind(target)
        if tk in K.ANY_TENSOR:  # .to(other) follows other
            return tk
        if rk in (K.CPU_TENSORS, K.TENSORS):
            return K.TENSORS  # `tokenizer(..., return_tensors="pt").to(device)`: the whole dict moves
        return K.BOOL_TENSOR if rk == K.BOOL_TENSOR else K.TENSOR  # mask.to(device): still a mask

    def _is_device_expr(self, call: cst.Call) -> bool:
        """``.to(device)``, ``.to(xm.xla_device())``, ``.to(accelerator.device)``, ``.to(device=dev)``."""
        args = positional_args(call)
        target = keyword_arg(call, "device") or (args[0] if args else None)
        if target is None or self.is_cpu_device(target):
            return False
        if type(target) is cst.Call:
            n = (last_name(target.func) or "").lower()
            return n in ("xla_device", "device") or "device" in n
        n = (last_name(target) or "").lower()
        return n in ("device", "dev", "xla_device", "xla_dev") or n.endswith("device")

    def _any_arg_kind(self, e: cst.Call, kinds) -> bool:
        for a in e.args:
            k = self.kind(a.value)
            if k in kinds:
                return True
        return False

    def _looks_like_loader(self, node) -> bool:
        n = last_name(node)
        if not n:
            return False
        low = n.lower()
        if type(node) is cst.Call:
            return low in ("train_dataloader", "val_dataloader", "test_dataloader", "per_device_loader")
        return low in T.LOADER_NAMES or low.endswith(T.LOADER_NAME_SUFFIXES)

    def _is_loader_value(self, node) -> bool:
        return self.kind(node) in (K.LOADER, K.CPU_LOADER) or self._looks_like_loader(node)

    def iterates_batches(self, it) -> bool:
        """The ``for`` goes over a loader's batches, however wrapped (``tqdm(enumerate(loader), total=n)``)."""
        while type(it) is cst.Call:
            if self._iterates_loader(it):
                return True
            args = positional_args(it)
            it = args[0] if args else None
        return it is not None and self._iterates_loader(it)

    def _iterates_loader(self, it) -> bool:
        if type(it) is cst.Call:
            args = positional_args(it)
            if args and any(self._is_loader_value(a) for a in args[:2]):
                return True  # enumerate(loader), tqdm(loader), log_every(loader, 10), zip(loader, ...)
        k = self.kind(it)
        if k in (K.LOADER, K.CPU_LOADER):
            return True
        return self._looks_like_loader(it)


# Methods of a dict-like model output or loss dict taken for a tensor: what they give.
_DICT_OUTPUT_METHODS = {"items": K.ITEMS, "values": K.TENSORS, "get": K.TENSOR}

_DTYPES = frozenset(
    {"float32", "float", "float16", "half", "bfloat16", "float64", "double", "int64", "long", "int32",
     "int", "int16", "int8", "uint8", "bool", "complex64", "complex128"}
)

# libraries whose calls return host values (NumPy arrays, images, numbers, strings), never torch tensors
_HOST_LIBRARIES = ("math.", "os.", "time.", "json.", "random.", "sys.", "argparse.", "logging.", "numpy.", "scipy.",
                   "cv2.", "PIL.", "pandas.", "sklearn.")


def _returns_host_tensors(call: cst.Call) -> bool:
    """A tokenizer, processor or feature extractor asked for PyTorch tensors (``return_tensors="pt"``): they are
    built on the host, in a dict (transformers' ``BatchEncoding``/``BatchFeature``), until ``.to(device)``."""
    return any(a.keyword is not None and a.keyword.value == "return_tensors" and string_value(a.value) == "pt"
               for a in call.args)


def _named_like_module(recv) -> bool:
    """``recv``'s last name ends in a model word (``model``, ``net``, ``head``, ``layer``, ``ddp``, ...)."""
    words = name_words((last_name(recv) or "").lower())
    return bool(words) and (words[-1] in T.MODEL_NAME_WORDS or words[-1] in ("head", "layer", "ddp"))


_PLACING_METHODS = frozenset({"to", "cuda", "xla", "type_as", "new_tensor", "new_zeros", "new_ones", "new_empty",
                              "new_full"})


def places_nothing(node, imports: dict) -> bool:
    """A plain function whose body (nested functions and classes left out) computes with what it is given and
    puts nothing on a device: no ``.to(...)``/``.cuda()``, no ``device=``, no call of another function of
    the module or of a parameter (which might), no ``self``. What it returns from host tensors is on the
    host (a box conversion, a normalisation)."""
    if type(node) is not cst.FunctionDef:
        return False
    ps = node.params
    params = {p.name.value for p in (*ps.posonly_params, *ps.params, *ps.kwonly_params)}
    if "self" in params or "cls" in params:
        return False
    local = params | assigned_names(node.body)
    stack = list(node.body.body) if type(node.body) is cst.IndentedBlock else [node.body]
    while stack:
        n = stack.pop()
        t = type(n)
        if t in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            return False  # what a nested function does is not looked at here
        if t is cst.Call:
            func = n.func
            if type(func) is cst.Attribute and func.attr.value in _PLACING_METHODS:
                return False
            root = func
            while type(root) is cst.Attribute:
                root = root.value
            if type(func) is cst.Attribute and type(root) is cst.Name and not (
                    root.value in local or imports.get(root.value, "").startswith(_COMPUTE_LIBRARIES)):
                return False  # `utils.to_device(x)`, `net.forward(x)`: another module's function, a global
            if any(a.keyword is not None and a.keyword.value == "device" for a in n.args):
                return False
            if type(func) is cst.Name and (func.value in params or func.value not in _PURE_BUILTINS):
                return False  # a parameter called, or a function of the module (or imported) that might place
        elif t is cst.Name and n.value in ("self", "global"):
            return False
        elif t in (cst.Global, cst.Nonlocal):
            return False
        stack.extend(child_nodes(n))
    return True


_COMPUTE_LIBRARIES = ("torch", "numpy", "math", "einops")
_PURE_BUILTINS = frozenset({"len", "int", "float", "bool", "str", "isinstance", "range", "min", "max", "abs",
                            "sum", "round", "list", "tuple", "zip", "enumerate", "sorted", "reversed", "dict",
                            "any", "all", "map", "getattr", "hasattr", "type"})
