"""Is it a tensor? The inference of an expression's kind, for the walker's current bindings.

A part of the semantic model (``model.SemanticModel`` composes it): it reads the bindings the walk keeps
(``bindings``: ``_env_lookup``, ``classes``, ``imports``) and the project's facts about other modules
(``self.facts``), and answers ``kind(expr)`` for names, attributes, subscripts, operators and annotations;
calls are answered by ``tensor_calls.CallKinds``.
"""

from __future__ import annotations

from typing import Optional

import re

import libcst as cst

from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.syntax import NODE_TYPES, child_nodes, dotted_name, is_shape, last_name, name_words, string_value


# a list, tuple or comprehension written out: what `*` repeats is that list
_DISPLAYS = (cst.List, cst.Tuple, cst.ListComp)


class TensorInference:
    """``kind(expr)``: names, attributes, subscripts, operators and annotations."""

    def kind(self, expr):
        key = id(expr)
        cache = self._kind_cache
        if key in cache:
            return cache[key]
        k = self._infer(expr)
        cache[key] = k
        return k

    def name_kind(self, name: str):
        """The kind a bare name has here, not cached: ``kind(cst.Name(name))`` would cache it under the id of a
        node made for the question, which CPython reuses for the next such node (a stale answer for another name)."""
        return self._infer(cst.Name(name))

    def forget_kinds(self, tree) -> None:
        """Drop the cached kinds of ``tree``'s nodes: asked before the walk bound the names they read (a
        comprehension's element asked by a rule at its ``Assign``, before its ``for`` targets exist), they
        would answer from the wrong scope."""
        cache = self._kind_cache
        if not cache:
            return
        stack = [tree]
        while stack:
            n = stack.pop()
            cache.pop(id(n), None)
            stack.extend(child_nodes(n))

    def _probed_attributes(self) -> set:
        """(dotted name, attribute) pairs the current function tests with ``hasattr(p.grad, "attribute")``: an attribute
        whose existence is in doubt is one somebody set on the object, not part of the tensor's API."""
        f = self.func
        found = self._probed_attrs.get(id(f))
        if found is None:
            found = set()
            stack = [f.node] if f.node is not None else []
            while stack:
                n = stack.pop()
                if (type(n) is cst.Call and type(n.func) is cst.Name and n.func.value == "hasattr" and len(n.args) == 2
                        and dotted_name(n.args[0].value) and string_value(n.args[1].value) is not None):
                    found.add((dotted_name(n.args[0].value), string_value(n.args[1].value)))
                elif type(n) in NODE_TYPES:
                    stack.extend(child_nodes(n))
            self._probed_attrs[id(f)] = found
        return found

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
            if base.split(".")[-1] == "NDArray":
                return K.NOT_TENSOR  # numpy.typing's `NDArray[np.float32]`: a host array
            if base.split(".")[-1] in T.TENSOR_CONTAINER_ANNOTATIONS and ann.slice:
                # tuple[Tensor, Tensor], list[Tensor], dict[str, Tensor]: a container of tensors
                args = [el.slice.value for el in ann.slice if type(el.slice) is cst.Index]
                ks = [self._annotation_kind(a) for a in args if type(a) is not cst.Ellipsis]
                ks = ks[1:] if base.split(".")[-1] in ("dict", "Dict", "Mapping") else ks
                if ks and all(k in K.DEVICE_TENSORS for k in ks):
                    return K.TENSORS
                if ks and all(k == K.NOT_TENSOR for k in ks):
                    return K.NOT_TENSOR  # Tuple[int, int]: a grid of Python ints
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
        if last == "ndarray" and text in ("ndarray", "np.ndarray", "numpy.ndarray"):
            return K.NOT_TENSOR  # a NumPy array: on the host
        if last[:1].isupper() and _names_a_model_class(last):
            return K.MODULE  # `CLIPTextModelWithProjection`, `T5EncoderModel`, `nn.Module`: a model, not a tensor
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
                cls = self.current_class()
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
            if type(e.operator) is cst.Multiply and (type(e.left) in _DISPLAYS or type(e.right) in _DISPLAYS):
                # `[3] * (K - 1)`, `(None,) * dims`: the list repeated, whatever counts it
                return left if type(e.left) in _DISPLAYS else right
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
            sides = [e.left] + [c.comparator for c in e.comparisons]
            if any(_a_size(x) for x in sides) and any(
                    type(x) is cst.Name and x.value in self.func.guessed for x in sides):
                return K.NOT_TENSOR  # `z.shape[-1] == length`: a `forward` parameter compared with a size is one
            ks = [self.kind(x) for x in sides]
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
            if ks and len(ks) == len(e.elements) and all(k in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR) for k in ks) \
                    and any(k != K.NOT_TENSOR for k in ks):
                return K.CPU_TENSORS  # `{"boxes": boxes, "scores": scores}` of host tensors
            if all(k == K.NOT_TENSOR for k in ks):
                return K.NOT_TENSOR
            return K.UNKNOWN
        if type(e) in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
            k = self.kind(e.elt)
            if k in K.HOLDS_DEVICE_TENSOR:
                return K.TENSORS
            if k in (K.CPU_TENSOR, K.CPU_TENSORS):
                return K.CPU_TENSORS  # `[{k: v.cpu() for k, v in t.items()} for t in outputs]`: host copies
            if k == K.NOT_TENSOR:
                return K.NOT_TENSOR
            return K.UNKNOWN
        if type(e) is cst.DictComp:
            k = self.kind(e.value)
            if k in (K.CPU_TENSOR, K.CPU_TENSORS):
                return K.CPU_TENSORS  # `{k: v.detach().cpu() for k, v in sd.items()}`: host copies
            return K.TENSORS if k in K.HOLDS_DEVICE_TENSOR else K.UNKNOWN
        if type(e) is cst.NamedExpr:
            return self.kind(e.value)
        return K.UNKNOWN

    def _infer_attribute(self, e: cst.Attribute):
        attr = e.attr.value
        base = e.value
        if type(base) is cst.Name and base.value == "self":
            own = self.func.env.get("self." + attr)
            if own in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR) or K.instance_class(own) == T.HOST_RUNTIME:
                # `self.sigmas = sigmas.to("cpu")` then `self.sigmas[-1].item()`: the host copy it stored; a session
                # `isinstance(self.spk_model, onnxruntime.InferenceSession)` showed
                return own
            cls = self.current_class()
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
            if type(base) is cst.Name and base.value in self.func.guessed and attr not in T.TENSOR_ATTRIBUTES:
                return K.UNKNOWN  # `kv_cache.n_layers` of a `forward(x, kv_cache=None)`: an object, not a tensor
            if attr.startswith("_") and attr not in T.TENSOR_ATTRIBUTES:
                return K.UNKNOWN  # `p._ddp_ignored`: a Python attribute a library set on the tensor
            if (dotted_name(base), attr) in self._probed_attributes():
                return K.UNKNOWN  # `hasattr(p, "shared") and p.shared`: a Python attribute set on the tensor
            if attr.startswith(("is_", "has_")):
                # `t.is_xpu`, `t.is_mkldnn`: a backend's flag; `qz.has_rsample` of a model's distribution: a bool
                return K.NOT_TENSOR
            if attr in T.TENSOR_ATTRIBUTES:
                return K.CPU_TENSOR if bk == K.CPU_TENSOR else K.TENSOR
            if attr in T.TUPLE_OUTPUT_FIELDS:
                return K.CPU_TENSORS if bk == K.CPU_TENSOR else K.TENSORS  # `out.past_key_values`: a tuple
            if (name_words(attr) or [""])[-1] in T.DISTRIBUTION_FIELD_WORDS:
                # `vae.encode(x).latent_dist`: a distribution over device tensors (its `.sample()` is one)
                return K.UNKNOWN if bk == K.CPU_TENSOR else K.instance(T.DEVICE_DISTRIBUTION)
            return K.CPU_TENSOR if bk == K.CPU_TENSOR else K.TENSOR  # a model output's field
        if bk in (K.TENSORS,):
            return K.TENSOR  # batch.input_ids
        if bk == K.CPU_TENSORS:
            return K.CPU_TENSOR
        if bk == K.MODULE:
            if attr in ("weight", "bias"):
                return K.TENSOR
            return self._module_attribute(base, attr)
        if bk == K.NOT_TENSOR:
            return K.NOT_TENSOR
        return K.UNKNOWN

    def _module_attribute(self, base, attr: str):
        """``model.counts`` of a model whose class the source shows: what its class keeps there when that is
        on the host or no tensor (``self.counts = torch.zeros(4)`` in ``__init__``: a plain attribute, which
        ``model.to(device)`` does not move, unlike parameters and buffers), else unknown."""
        cls = self.module_class_of(base)
        if cls is None:
            return K.UNKNOWN
        key = cls[1:] if cls.startswith("@") else f"{self.module_name}:{cls}"
        k = self._class_attribute(key, attr)
        return k if k in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR) else K.UNKNOWN

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
        if bk in (K.TENSORS, K.CPU_TENSORS) and _counter_key(e):
            return K.UNKNOWN  # `ckpt_dict[training.STEPS_KEY]`, `state["epoch"]`, `kwargs["use_cache"]`: not a tensor
        if bk in (K.TENSORS, K.TENSOR):
            return K.TENSOR
        if bk in (K.CPU_TENSORS, K.CPU_TENSOR):
            return K.CPU_TENSOR
        if bk == K.NOT_TENSOR:
            return K.NOT_TENSOR
        if bk == K.MODULE:
            return K.MODULE  # nn.Sequential / ModuleList indexing
        return K.UNKNOWN


# the words of a key that holds a run's counter or seed in a dict of tensors (a checkpoint, a state dict):
# `"epoch"`, `"global_step"`, `training.STEPS_KEY`, `"seed"`
_COUNTER_KEY_WORDS = frozenset({"step", "steps", "epoch", "epochs", "seed", "iteration", "iterations", "iter"})
# ... or a setting's flag beside the tensors of a generation's keyword arguments: `"use_cache"`, `"return_dict"`
_FLAG_KEY_HEADS = frozenset({"use", "return", "output", "do", "is", "has"})


def _counter_key(e: cst.Subscript) -> bool:
    """The subscript's key names a counter (``_COUNTER_KEY_WORDS``) or a flag (``_FLAG_KEY_HEADS``): a string, or a
    constant's name."""
    if len(e.slice) != 1 or type(e.slice[0].slice) is not cst.Index:
        return False
    idx = e.slice[0].slice.value
    text = string_value(idx)
    if text is None and type(idx) in (cst.Name, cst.Attribute):
        text = last_name(idx)
        if not (text or "").isupper():
            return False  # `batch[k]`: a loop's key, not a constant
    words = name_words(text or "")
    # `model_kwargs["use_cache"]`, `inputs["return_dict"]`, `kwargs["output_attentions"]`: a setting's flag
    return bool(words) and (bool(_COUNTER_KEY_WORDS & set(words)) or (words[0] in _FLAG_KEY_HEADS and len(words) > 1))


def element_key(e) -> Optional[str]:
    """``images[0]`` / ``batch["input"]``: a key for one element of a named container, else None."""
    if not (type(e) is cst.Subscript and type(e.value) is cst.Name and len(e.slice) == 1
            and type(e.slice[0].slice) is cst.Index):
        return None
    return element_key_of(e.value.value, e.slice[0].slice.value)


def element_key_of(name: str, idx) -> Optional[str]:
    """The key of ``name[idx]`` for a constant index: ``metrics['loss']`` and ``metrics["loss"]`` are one."""
    if type(idx) is cst.Integer:
        return f"{name}[{idx.value}]"
    value = string_value(idx)
    return f"{name}[{value!r}]" if value is not None else None


def _a_size(e) -> bool:
    """``x.shape[-1]``, ``x.size()[1]``, ``x.size(0)``, ``x.numel()``, ``len(x)``: a Python int by what it reads."""
    if type(e) is cst.Subscript:
        return is_shape(e.value)
    if type(e) is cst.Call:
        if type(e.func) is cst.Attribute and e.func.attr.value in ("size", "numel", "dim"):
            return True
        return type(e.func) is cst.Name and e.func.value == "len"
    return False


_CAMEL_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")


def _names_a_model_class(name: str) -> bool:
    """A class name that says it is a model: the word Model or Module in its CamelCase (``CLIPTextModelWith
    Projection``, ``UNet2DConditionModel``, ``nn.Module``) or a task head (``LlamaForCausalLM``,
    ``...ForConditionalGeneration``). Not the other words of a model's variable names: a CTC ``Decoder``, a
    ``LabelEncoder`` or a ``torch.Generator`` are no models."""
    words = [w.lower() for w in _CAMEL_WORDS.findall(name)]
    return bool({"model", "module"} & set(words)) or "for" in words[1:]
