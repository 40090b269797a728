"""Is it a tensor? The inference of an expression's kind, for the walker's current bindings.

A mixin of the semantic model: it reads the bindings the walk keeps (``_env_lookup``, ``classes``,
``imports``) and the project's facts about other modules (``self.facts``), and answers ``kind(expr)``.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.syntax import dotted_name, keyword_arg, last_name, name_words, positional_args, string_value


class TensorInference:
    def kind(self, expr):
        key = id(expr)
        cache = self._kind_cache
        if key in cache:
            return cache[key]
        k = self._infer(expr)
        cache[key] = k
        return k

    def is_tensor(self, expr) -> bool:
        """True when ``expr`` is known to be a tensor on the device."""
        return self.kind(expr) in K.DEVICE_TENSORS

    def holds_tensor(self, expr) -> bool:
        """True when ``expr`` is a device tensor or a container of them (formatting it reads them)."""
        return self.kind(expr) in K.HOLDS_DEVICE_TENSOR

    def is_bool_tensor(self, expr) -> bool:
        k = self.kind(expr)
        if k == K.BOOL_TENSOR:
            return True
        if k == K.TENSOR and type(expr) in (cst.Name, cst.Attribute):
            name = (last_name(expr) or "").lower()
            return name.endswith(T.MASK_NAME_SUFFIXES) or name in T.MASK_NAMES
        return False

    def qualname(self, expr) -> Optional[str]:
        """Resolve a Name/Attribute through the file's imports: ``T.nonzero`` -> ``torch.nonzero``."""
        head = expr
        while type(head) is cst.Attribute:
            head = head.value
        if type(head) is not cst.Name:
            return None
        base = self.imports.get(head.value)  # most names are not imported: no dotted name built for them
        if base is None:
            return None
        rest = dotted_name(expr).partition(".")[2]
        return base + ("." + rest if rest else "")

    def _annotation_kind(self, ann):
        if type(ann) is cst.BinaryOperation and type(ann.operator) is cst.BitOr:
            return self._union_kind([ann.left, ann.right])  # int | None
        text = dotted_name(ann)
        if type(ann) is cst.SimpleString:
            text = string_value(ann)
        if type(ann) is cst.Subscript:
            base = dotted_name(ann.value) or ""
            if base.split(".")[-1] == "Optional" and ann.slice:
                inner = ann.slice[0].slice
                if type(inner) is cst.Index:
                    return self._annotation_kind(inner.value)
            if base.split(".")[-1] == "Union" and ann.slice:
                return self._union_kind([el.slice.value for el in ann.slice if type(el.slice) is cst.Index])
            if base.split(".")[-1] in T.TENSOR_CONTAINER_ANNOTATIONS and ann.slice:
                # tuple[Tensor, Tensor], list[Tensor], dict[str, Tensor]: a container of tensors
                args = [el.slice.value for el in ann.slice if type(el.slice) is cst.Index]
                ks = [self._annotation_kind(a) for a in args if type(a) is not cst.Ellipsis]
                ks = ks[1:] if base.split(".")[-1] in ("dict", "Dict", "Mapping") else ks
                if ks and all(k in K.DEVICE_TENSORS for k in ks):
                    return K.TENSORS
            return K.UNKNOWN
        if not text:
            return K.UNKNOWN
        last = text.split(".")[-1]
        if last in ("Tensor", "FloatTensor", "LongTensor"):
            return K.TENSOR
        if last == "BoolTensor":
            return K.BOOL_TENSOR
        if last in ("int", "float", "bool", "str", "bytes", "complex", "Size"):
            return K.NOT_TENSOR
        return K.UNKNOWN

    def _union_kind(self, members):
        """``int | None``, ``Union[Tensor, None]``: the members' kind when they agree (None left out)."""
        ks = []
        for a in members:
            if type(a) is cst.Name and a.value == "None":
                continue
            ks.append(self._annotation_kind(a))
        if ks and all(k == ks[0] for k in ks):
            return ks[0]
        return K.UNKNOWN

    # ------------------------------------------------------------------ tensor inference
    def _infer(self, e):
        if type(e) is cst.Name:
            found, k = self._env_lookup(e.value)
            if found:
                return k
            if e.value in ("True", "False", "None"):
                return K.NOT_TENSOR
            if e.value in self.imports:
                return K.NOT_TENSOR
            if e.value == "self":
                cls = self._current_class()
                if cls is not None and cls in self.classes:
                    return K.instance(f"{self.module_name}:{cls}")
            if self._looks_like_loader(e):
                return K.LOADER
            return K.UNKNOWN
        if type(e) in (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString,
                          cst.ConcatenatedString, cst.FormattedString, cst.Lambda, cst.Ellipsis):
            return K.NOT_TENSOR
        if type(e) is cst.Attribute:
            return self._infer_attribute(e)
        if type(e) is cst.Call:
            return self._infer_call(e)
        if type(e) is cst.Subscript:
            return self._infer_subscript(e)
        if type(e) is cst.BinaryOperation:
            left, right = self.kind(e.left), self.kind(e.right)
            if type(e.operator) is cst.Modulo and type(e.left) in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString):
                return K.NOT_TENSOR
            if type(e.operator) in (cst.BitAnd, cst.BitOr, cst.BitXor) and (
                left == K.BOOL_TENSOR or right == K.BOOL_TENSOR
            ):
                return K.BOOL_TENSOR
            if type(e.operator) is cst.Add and (left in (K.TENSORS,) or right in (K.TENSORS,)):
                return K.UNKNOWN
            return K.arithmetic(left, right)
        if type(e) is cst.UnaryOperation:
            if type(e.operator) is cst.Not:
                return K.NOT_TENSOR
            k = self.kind(e.expression)
            if type(e.operator) is cst.BitInvert and (k == K.BOOL_TENSOR or self.is_bool_tensor(e.expression)):
                return K.BOOL_TENSOR
            return k if k in K.ANY_TENSOR or k == K.NOT_TENSOR else K.UNKNOWN
        if type(e) is cst.Comparison:
            ops = [c.operator for c in e.comparisons]
            if any(type(o) in (cst.Is, cst.IsNot, cst.In, cst.NotIn) for o in ops):
                return K.NOT_TENSOR
            if any(type(x) is cst.Name and x.value == "None" for x in [e.left] + [c.comparator for c in e.comparisons]):
                return K.NOT_TENSOR  # `t == None` is False, a Python bool (Tensor.__eq__ of None)
            if any(type(x) in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
                   for x in [e.left] + [c.comparator for c in e.comparisons]):
                return K.NOT_TENSOR  # `k != "meta"`: a tensor is never compared with a string; `k` is a key
            ks = [self.kind(e.left)] + [self.kind(c.comparator) for c in e.comparisons]
            if any(k in K.DEVICE_TENSORS for k in ks):
                return K.BOOL_TENSOR
            if any(k == K.CPU_TENSOR for k in ks):
                return K.CPU_TENSOR
            if all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if type(e) is cst.BooleanOperation:
            a, b = self.kind(e.left), self.kind(e.right)
            return K.join(a, b)
        if type(e) is cst.IfExp:
            return K.join(self.kind(e.body), self.kind(e.orelse))
        if type(e) in (cst.Tuple, cst.List, cst.Set):
            ks = [self.kind(el.value) for el in e.elements]
            if any(k in K.HOLDS_DEVICE_TENSOR for k in ks):
                return K.TENSORS
            if ks and K.instance_class(ks[0]) is not None and all(k == ks[0] for k in ks):
                return K.instances(K.instance_class(ks[0]))  # [batch_time, losses, top1]
            if ks and all(k in (K.CPU_TENSOR, K.CPU_TENSORS) for k in ks):
                return K.CPU_TENSORS
            if all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if type(e) is cst.Dict:
            ks = [self.kind(el.value) for el in e.elements if type(el) is cst.DictElement]
            if any(k in K.HOLDS_DEVICE_TENSOR for k in ks):
                return K.TENSORS
            if all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if type(e) in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
            k = self.kind(e.elt)
            if k in K.HOLDS_DEVICE_TENSOR:
                return K.TENSORS
            if k == K.NOT_TENSOR:
                return K.NOT_TENSOR
            return K.UNKNOWN
        if type(e) is cst.DictComp:
            k = self.kind(e.value)
            return K.TENSORS if k in K.HOLDS_DEVICE_TENSOR else K.UNKNOWN
        if type(e) is cst.NamedExpr:
            return self.kind(e.value)
        return K.UNKNOWN

    def _infer_attribute(self, e: cst.Attribute):
        attr = e.attr.value
        base = e.value
        if type(base) is cst.Name and base.value == "self":
            cls = self._current_class()
            if cls is not None and cls in self.classes:
                attrs = self.classes[cls]["attrs"]
                if self._attr_reads is not None:
                    self._attr_reads.add(attr)
                if attr in attrs:
                    return attrs[attr]
            if attr == "training":
                return K.NOT_TENSOR
            return K.UNKNOWN
        q = self.qualname(e)
        if q is not None:
            if self.facts is not None and self.facts.knows(q):
                return K.UNKNOWN  # a module-level value of another project module
            return K.NOT_TENSOR  # torch.float32, xm.xrt_world_size, math.pi, ...
        bname = last_name(base)
        if bname and bname.lower() in ("args", "config", "cfg", "opt", "opts", "hparams", "flags", "conf", "params", "options", "settings", "hps"):
            return K.NOT_TENSOR
        bk = self.kind(base)
        if attr in T.NON_TENSOR_ATTRIBUTES:
            return K.NOT_TENSOR
        cls_key = K.instance_class(bk)
        if cls_key is not None:  # trainer.loss: what the class stores in self.loss
            return self._class_attribute(cls_key, attr)
        if attr in T.CPU_TENSOR_NAMES:
            return K.CPU_TENSOR
        if bk in K.ANY_TENSOR:
            if attr.startswith("_") and attr not in T.TENSOR_ATTRIBUTES:
                return K.UNKNOWN  # `p._ddp_ignored`: a Python attribute a library set on the tensor
            if attr.startswith("is_"):
                return K.NOT_TENSOR  # `t.is_xpu`, `t.is_mkldnn`: a backend's flag, a bool
            if attr in T.TENSOR_ATTRIBUTES:
                return K.CPU_TENSOR if bk == K.CPU_TENSOR else K.TENSOR
            return K.CPU_TENSOR if bk == K.CPU_TENSOR else K.TENSOR  # a model output's field
        if bk in (K.TENSORS,):
            return K.TENSOR  # batch.input_ids
        if bk == K.CPU_TENSORS:
            return K.CPU_TENSOR
        if bk == K.MODULE:
            if attr in ("weight", "bias"):
                return K.TENSOR
            return K.UNKNOWN
        if bk == K.NOT_TENSOR:
            return K.NOT_TENSOR
        return K.UNKNOWN

    def _infer_subscript(self, e: cst.Subscript):
        key = element_key(e)
        if key is not None:
            found, k = self._env_lookup(key)
            if found:
                return k  # an element given its own kind: `images[0] = images[0].cuda()`
        bk = self.kind(e.value)
        if K.instances_class(bk) is not None:
            return K.element_of(bk)
        if bk == K.BOOL_TENSOR:
            return K.BOOL_TENSOR  # mask[:, 0], mask[idx]: still booleans
        if bk in (K.TENSORS, K.CPU_TENSORS) and len(e.slice) == 1 and type(e.slice[0].slice) is cst.Slice:
            return bk  # `parts[1:]` of a tuple from chunk()/split(), of a batch: still a container
        if bk in (K.TENSORS, K.TENSOR):
            return K.TENSOR
        if bk in (K.CPU_TENSORS, K.CPU_TENSOR):
            return K.CPU_TENSOR
        if bk == K.NOT_TENSOR:
            return K.NOT_TENSOR
        if bk == K.MODULE:
            return K.MODULE  # nn.Sequential / ModuleList indexing
        return K.UNKNOWN

    def _infer_call(self, e: cst.Call):
        func = e.func
        q = self.qualname(func)
        if q is not None:
            return self._infer_qualified_call(e, q)
        if type(func) is cst.Name:
            name = func.value
            if name == "self":  # self(idx) in a module's method (generate): runs forward
                cls = self._current_class()
                return K.TENSOR if cls is not None and self.classes.get(cls, {}).get("module") else K.UNKNOWN
            if name not in self.imports:
                r = self._infer_builtin(e, name)
                if r is not NotImplemented:
                    return r
            f = self._lookup_func(name)
            if f is not None:
                return f.return_kind
            if name in self.classes:
                return K.MODULE if self.classes[name]["module"] else K.instance(f"{self.module_name}:{name}")
            found, fk = self._env_lookup(name)
            if found and fk == K.MODULE:
                return K.TENSOR
            if found and fk is not K.UNKNOWN:
                return K.UNKNOWN
            words = name_words(name)
            if words and words[-1] in T.MODEL_NAME_WORDS | {"criterion"} and e.args:
                return K.TENSOR
            if name in ("loss_fn", "lossfn", "loss_func", "loss_function", "criterion") and e.args:
                return K.TENSOR
            return K.UNKNOWN
        if type(func) is cst.Attribute:
            if self.kind(func) == K.MODULE:
                return K.TENSOR  # self.proj(x)
            return self._infer_method_call(e, func)
        if type(func) is cst.Call or type(func) is cst.Subscript:
            fk = self.kind(func)
            return K.TENSOR if fk == K.MODULE else K.UNKNOWN
        return K.UNKNOWN

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
        if q in T.CPU_LOADER_CONSTRUCTORS or q.endswith(".DataLoader"):
            return K.CPU_LOADER
        if q in T.DEVICE_LOADER_CONSTRUCTORS:
            return K.LOADER
        if q in T.TENSOR_SEQUENCE_TORCH_FUNCTIONS:
            return K.TENSORS if self._any_arg_kind(e, K.DEVICE_TENSORS) else K.UNKNOWN
        if q in T.BOOL_RESULT_FUNCTIONS:
            return K.BOOL_TENSOR if not self._all_args_cpu(e) else K.CPU_TENSOR
        if q in T.CPU_FACTORY_FUNCTIONS:
            dev = keyword_arg(e, "device")
            if dev is None or self._is_cpu_device(dev):
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
            if self._all_args_cpu(e):
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
            return self._project_call_kind(q)
        return K.NOT_TENSOR if q.startswith(("math.", "os.", "time.", "json.", "random.", "sys.", "argparse.", "logging.")) else K.UNKNOWN

    def _infer_method_call(self, e: cst.Call, func: cst.Attribute):
        meth = func.attr.value
        recv = func.value
        rk = self.kind(recv)
        cls_key = K.instance_class(rk)
        if cls_key is not None:  # trainer.step(batch): what the method returns
            return self._method_return(cls_key, meth)
        if rk in K.ANY_TENSOR:
            cpu = rk == K.CPU_TENSOR
            if meth in _DICT_OUTPUT_METHODS and not cpu:
                # a tensor has no .items(): this "tensor" is a dict of them (a criterion's loss dict,
                # a model output), and its values are device tensors
                return _DICT_OUTPUT_METHODS[meth]
            if meth in T.NON_TENSOR_METHODS:
                return K.NOT_TENSOR
            if meth == "cpu":
                return K.CPU_TENSOR
            if meth in ("to", "cuda", "type_as"):
                if meth == "to":
                    return self._infer_to(e, rk)
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
                return K.ITEMS if rk == K.TENSORS else K.UNKNOWN
            if meth == "values":
                return rk
            if meth in ("keys", "__len__"):
                return K.NOT_TENSOR
            if meth in ("get", "pop"):
                return K.element_of(rk)
            if meth in ("to", "cuda"):  # a batch moved to the device (BatchEncoding.to(device))
                return K.TENSORS if meth == "cuda" or self._infer_to(e, K.CPU_TENSOR) == K.TENSOR else rk
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
        if meth in ("item", "tolist", "size", "dim", "numel", "ndimension", "nelement", "format", "join", "lower", "upper", "strip", "split", "startswith", "endswith", "replace", "keys"):
            return K.NOT_TENSOR
        if meth == "per_device_loader":
            return K.LOADER
        if meth in ("to", "cuda") and (meth == "cuda" or self._is_device_expr(e)):
            # x.to(device) on something unknown: a module if it is named like one, else a tensor
            rname = (last_name(recv) or "").lower()
            words = name_words(rname)
            if words and (words[-1] in T.MODEL_NAME_WORDS or words[-1] in ("head", "layer", "ddp")):
                return K.MODULE
            if rname in ("batch", "inputs", "data") or rname.endswith("_batch"):
                return K.TENSORS
            if type(recv) in (cst.Name, cst.Attribute, cst.Subscript):
                return K.TENSOR
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
            cls = self._current_class()
            if cls is not None and f"{cls}.{meth}" in self.funcs:
                return self.funcs[f"{cls}.{meth}"].return_kind
        return K.UNKNOWN

    # ------------------------------------------------------------------ objects of project classes
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

    def _infer_to(self, e: cst.Call, rk):
        args = positional_args(e)
        dev = keyword_arg(e, "device")
        target = dev if dev is not None else (args[0] if args else None)
        dtype = keyword_arg(e, "dtype")
        if rk == K.BOOL_TENSOR and dtype is not None and self.qualname(dtype) != "torch.bool":
            rk = K.TENSOR  # mask.to(device, dtype=torch.float): no longer a mask
        if target is None:
            return rk if rk in K.ANY_TENSOR else K.TENSOR
        if self._is_cpu_device(target):
            return K.CPU_TENSOR
        q = self.qualname(target) or ""
        if q.startswith("torch.") and q.split(".")[-1] in _DTYPES:
            if rk == K.BOOL_TENSOR and q != "torch.bool":
                return K.TENSOR  # mask.to(torch.long): no longer a mask
            return rk if rk in K.ANY_TENSOR else K.TENSOR
        tk = self.kind(target)
        if tk in K.ANY_TENSOR:  # .to(other) follows other
            return tk
        return K.BOOL_TENSOR if rk == K.BOOL_TENSOR else K.TENSOR  # mask.to(device): still a mask

    def _is_device_expr(self, call: cst.Call) -> bool:
        """``.to(device)``, ``.to(xm.xla_device())``, ``.to(accelerator.device)``, ``.to(device=dev)``."""
        args = positional_args(call)
        target = keyword_arg(call, "device") or (args[0] if args else None)
        if target is None or self._is_cpu_device(target):
            return False
        if type(target) is cst.Call:
            n = (last_name(target.func) or "").lower()
            return n in ("xla_device", "device") or "device" in n
        n = (last_name(target) or "").lower()
        return n in ("device", "dev", "xla_device", "xla_dev") or n.endswith("device")

    def _is_cpu_device(self, node) -> bool:
        s = string_value(node)
        if s is not None:
            return s.split(":")[0] == "cpu"
        if type(node) is cst.Call and (self.qualname(node.func) == "torch.device"):
            args = positional_args(node)
            return bool(args) and (string_value(args[0]) or "").split(":")[0] == "cpu"
        return False

    def _any_arg_kind(self, e: cst.Call, kinds) -> bool:
        for a in e.args:
            k = self.kind(a.value)
            if k in kinds:
                return True
        return False

    def _all_args_cpu(self, e: cst.Call) -> bool:
        ks = [self.kind(a.value) for a in e.args if a.keyword is None]
        return bool(ks) and all(k in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR) for k in ks) and any(
            k in (K.CPU_TENSOR, K.CPU_TENSORS) for k in ks
        )

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


def element_key(e) -> Optional[str]:
    """``images[0]`` / ``batch["input"]``: a key for one element of a named container, else None."""
    if not (type(e) is cst.Subscript and type(e.value) is cst.Name and len(e.slice) == 1
            and type(e.slice[0].slice) is cst.Index):
        return None
    idx = e.slice[0].slice.value
    if type(idx) in (cst.Integer, cst.SimpleString):
        return f"{e.value.value}[{idx.value}]"
    return None
