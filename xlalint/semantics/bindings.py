"""Bindings: what each name, attribute and element holds, as the walk reaches it.

A part of the semantic model (``model.SemanticModel`` composes it): imports (``import`` and ``from``
statements, relative imports resolved against the module's name), assignments and unpacking, ``for`` and
``with`` targets, parameters (from annotations, defaults and names), the attributes of ``self`` per class
(every assignment kept with the function that made it, so that a function walked again replaces its own),
and the containers a device tensor is put into. ``tensors`` reads these bindings to answer ``kind(expr)``.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import device_pins, moves
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics import value_uses
from xlalint.semantics.steps import FuncInfo
from xlalint.semantics.syntax import (
    dotted_name, is_shape, last_name, name_words, names_in, positional_args, target_names,
)
from xlalint.semantics.tensors import element_key, element_key_of
from xlalint.semantics.unbound import is_host_library


class Bindings:
    """Names, imports, targets, parameters and attributes: the environments the walk keeps."""

    def _import(self, node: cst.Import) -> None:
        self._emit("Import", node)
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                local, target = alias.asname.name.value, full
            else:
                local = target = full.split(".")[0]
            self.imports[local] = target
            if self._at_module_level():
                self.module_imports[local] = target
            else:
                self.nested_imports.add(full)
            self._bind_name(local, K.NOT_TENSOR)
            self._note_import(full)
        if self.func is not self.top and device_pins.imports_cuda_only(node):
            # a function that imports a CUDA-only library (MegaBlocks inside a callback's `batch_end`): what follows
            # in its block never runs on a TPU host
            self.guards.append((None, True, False))

    def _at_module_level(self) -> bool:
        return self.func is self.top and self.class_key is None

    def _import_from(self, node: cst.ImportFrom) -> None:
        self._emit("ImportFrom", node)
        mod = dotted_name(node.module) if node.module is not None else None
        if node.relative:
            mod = self._absolute(len(node.relative), mod)
        if mod:
            self._note_import(mod)
        if type(node.names) is cst.ImportStar:
            if mod and self._at_module_level() and mod not in self.star_modules:
                self.star_modules.append(mod)
            if mod and self.facts is not None and self.facts.knows(mod):
                for nm in self.facts.star_names(mod):  # `from utils import *` of a project module
                    self.imports.setdefault(nm, f"{mod}.{nm}")
                    self._bind_name(nm, K.NOT_TENSOR)
            return
        for alias in node.names:
            nm = dotted_name(alias.name)
            if nm is None:
                continue
            local = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else nm
            if mod:
                self.imports[local] = f"{mod}.{nm}"
                if self._at_module_level():
                    self.module_imports[local] = f"{mod}.{nm}"
                else:
                    self.nested_imports.add(f"{mod}.{nm}")
            self._bind_name(local, K.NOT_TENSOR)
        if self.func is not self.top and device_pins.imports_cuda_only(node):
            # a function that imports a CUDA-only library (MegaBlocks inside a callback's `batch_end`): what follows
            # in its block never runs on a TPU host
            self.guards.append((None, True, False))

    def _absolute(self, dots: int, mod: Optional[str]) -> Optional[str]:
        """``from ..x import y`` in this module -> the absolute package name, or None above the root."""
        parts = self.module_name.split(".") if self.module_name != "__main__" else []
        if not self.is_package:
            parts = parts[:-1]
        up = dots - 1
        if up > len(parts):
            return None
        base = parts[: len(parts) - up] if up else parts
        name = ".".join(base + ([mod] if mod else []))
        return name or None

    def _note_import(self, full: str) -> None:
        if full == "torch" or full.startswith("torch."):
            self.imports_torch = True
            if not full.startswith(_TORCH_TOOLS):
                self.torch_compute = True
            if full == "torch.distributed.rpc" or full.startswith("torch.distributed.rpc."):
                # RPC's TensorPipe agent carries host tensors (CUDA ones through a device map, XLA ones never): the
                # module's copies to the host are what its calls need (host_read asks)
                self.uses_rpc = True
        elif full.split(".", 1)[0] in _OTHER_FRAMEWORKS:
            self.other_framework = True
        if full.startswith(_DEVICE_FRAMEWORKS):
            self.places_on_device = True  # torch_xla, accelerate, ...
        elif self.facts is not None and self.facts.knows(full):
            self.project_imports.add(full)  # a project module: it may place (step_marks asks the facts)
        elif not is_host_library(full):
            # a library that may place what it builds (detectron2's trainer, ultralytics' YOLO), or, analysed
            # alone, a module that may be the project's: a script importing one is no host program
            self.other_imports = True
        if self.other_framework and not self.torch_compute:
            # a JAX or TensorFlow program that only borrows torch's tools (TensorBoard, the DataLoader): its
            # arrays are not torch tensors, and nothing in it runs on torch_xla
            self.top.excluded = True
        if full.startswith(("torch_xla", "accelerate", "lightning", "pytorch_lightning")):
            self.imports_xla = full.startswith("torch_xla") or self.imports_xla
            self.imports_torch = True

    def _env_lookup(self, name: str):
        f = self.func
        while f is not None:
            if name in f.env:
                return True, f.env[name]
            f = f.parent
        if name in self.top.env:
            return True, self.top.env[name]
        return False, K.UNKNOWN

    def _bind_name(self, name: str, kind) -> None:
        if kind in K.DEVICE_TENSORS and name in T.CPU_TENSOR_NAMES:
            kind = K.CPU_TENSOR
        if self.func.guessed:
            self.func.guessed.discard(name)
        self.func.loop_results.discard(name)
        env = self.func.env
        env[name] = kind
        if name + "[" in self._element_prefixes:  # `images = ...` again: its elements' own kinds are gone
            for key in [k for k in env if k.startswith(name + "[")]:
                del env[key]

    def reads_loop_result(self, expr) -> bool:
        """``expr`` reads what an evaluation loop of the function computed, after the loop (``dev_loss.item()``,
        ``torch.mean(torch.cat(eval_metrics)).to("cpu")``): the evaluation's result, read once per evaluation,
        which is what the fix for a read inside such a loop says to do."""
        results = self.func.loop_results
        return bool(results) and bool(names_in(expr) & results)

    def _uploads(self, value, kind) -> bool:
        """``value`` moves a host tensor to the device as it is (``labels.to(device)`` of a loader's CPU batch): the
        result is device data, with no computation pending."""
        return (type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in ("to", "cuda")
                and kind in K.DEVICE_TENSORS and self.kind(value.func.value) in (K.CPU_TENSOR, K.CPU_TENSORS))

    def note_mutation(self, call: cst.Call) -> None:
        """``call`` may change a tensor in place: an in-place method (``flag.add_(1)``), a collective that
        reduces into its argument (``dist.all_reduce(flag)``), an ``out=``: what was uploaded is then computed on."""
        func = call.func
        if type(func) is cst.Attribute and func.attr.value.endswith("_") and not func.attr.value.endswith("__") \
                and type(func.value) is cst.Name:
            self._uploaded.discard((id(self.func), func.value.value))
        mutating = last_name(func) in _MUTATING_CALLS
        for a in call.args:
            if type(a.value) is cst.Name and (mutating or (a.keyword is not None and a.keyword.value == "out")):
                self._uploaded.discard((id(self.func), a.value.value))

    def _bind_target(self, target, value, kind, iter_expr=None) -> None:
        """Bind an assignment/for target. ``iter_expr``: the target takes the elements of it."""
        if iter_expr is not None:
            self._bind_iteration(target, iter_expr)
            return
        if type(target) is cst.Subscript and type(target.value) is cst.Name and self._uploaded:
            self._uploaded.discard((id(self.func), target.value.value))  # `y[y == -1] = 0`: written on the device
        if type(target) is cst.Name:
            if value is None and kind == K.TENSOR and name_words(target.value)[-1:] == ("dict",):
                # `loss, output_dict = policy(batch)`: an item named a dict is a dict (its truth is its length),
                # not one more tensor of the model's output
                kind = K.TENSORS
            results = self.func.loop_results
            from_results = bool(results) and value is not None and bool(names_in(value) & results)
            key = (id(self.func), target.value)
            if self._uploads(value, kind):
                self._uploaded.add(key)
            else:
                self._uploaded.discard(key)
            self._bind_name(target.value, kind)
            if from_results:
                # `dev_acc = 100. * n_correct / len(dev)` after an evaluation loop, `total = torch.tensor(total)`
                results.add(target.value)
            if type(value) is cst.Dict:
                self._bind_dict_entries(target.value, value)
            if type(value) is cst.Call:
                self._bound_calls[key] = value  # `results = self.pre_attention_ops(x)`, unpacked below it
            else:
                self._bound_calls.pop(key, None)
        elif type(target) in (cst.Tuple, cst.List):
            elts = target.elements
            held = value
            if type(value) is cst.Name:
                # `rc_length, input_length, ... = results`: the parts of the call `results` holds
                held = self._bound_calls.get((id(self.func), value.value), value)
            if type(value) in (cst.Tuple, cst.List) and len(value.elements) == len(elts) \
                    and not any(type(v) is cst.StarredElement for v in value.elements):
                for e, v in zip(elts, value.elements):
                    self._bind_target(e.value, v.value, self.kind(v.value))
                return
            if type(value) in (cst.Tuple, cst.List) and self._bind_around_starred(elts, value.elements):
                return
            if type(value) is cst.Call and last_name(value.func) == "prepare":
                args = positional_args(value)
                if len(args) == len(elts):
                    for e, a in zip(elts, args):
                        k = self.kind(a)
                        if k in (K.CPU_LOADER, K.LOADER) or self._looks_like_loader(a):
                            k = K.LOADER
                        self._bind_target(e.value, None, k)
                    return
            ek = K.element_of(kind) if kind is not K.UNKNOWN else K.UNKNOWN
            if is_shape(value) or (kind == K.NOT_TENSOR and type(value) is cst.Call):
                # `b, n, _ = x.shape`: Python ints; `top1, top5 = accuracy_np(out, y)`: the items of what a
                # function returns as a Python value (its `return a, b` made of Python values)
                ek = K.NOT_TENSOR
            if kind == K.ITEMS:
                ek = K.TENSOR
            parts = self.annotated_parts(held, len(elts)) or self.next_parts(value, len(elts))
            if parts is not None:  # `k, pad = _pad_to_block_size(...)` returning `Tuple[torch.Tensor, int]`
                handed = self.handed_back_kinds(held, len(elts))
                for i, (e, pk) in enumerate(zip(elts, parts)):
                    # an item its returns leave unknown: the argument it hands back (a flag list), else an item
                    # of what the call returns
                    self._bind_target(e.value, None, pk if pk is not K.UNKNOWN else handed.get(i, ek))
                return
            parts = self.project_parts(held.func, len(elts)) if type(held) is cst.Call else None
            if parts is not None:  # of another module's function, from its summary: an item its returns leave
                for e, pk in zip(elts, parts):  # unknown stays so (`windows, (Hp, Wp)`: the sizes)
                    self._bind_target(e.value, None, pk)
                return
            for e in elts:
                if type(e) is cst.StarredElement:
                    self._bind_target(e.value, None, K.TENSORS if ek == K.TENSOR else K.UNKNOWN)
                else:
                    self._bind_target(e.value, None, ek)
        elif type(target) is cst.Attribute:
            if type(target.value) is cst.Name and target.value.value == "self":
                cls = self.current_class()
                if cls is not None and cls in self.classes:
                    attrs = self.classes[cls]["attrs"]
                    name = target.attr.value
                    if type(value) is cst.Name and value.value == "None":
                        return  # `self.loss = None` until the first step sets it: no kind of its own
                    if type(value) is cst.Name:
                        f = self._lookup_func(value.value)
                        if f is not None or value.value in getattr(self, "toplevel_defs", ()):
                            self.classes[cls].setdefault("func_attrs", {})[name] = f.key if f else value.value
                    # every assignment is kept with the function that made it: walking a function again
                    # (better-known parameters) replaces its own assignments, not the others'
                    entries = self.classes[cls].setdefault("entries", {}).setdefault(name, [])
                    order = self._func_order.setdefault(self.func.key, len(self._func_order))
                    entries.append((order, len(entries), self.func.key, kind, _is_number_literal(value)))
                    attrs[name] = attribute_kind(entries)
                    if self.func is not self.top:  # what the function itself just stored (`self.sigmas = s.to("cpu")`)
                        self.func.env["self." + name] = kind
                    # where each assignment runs: one made after the step's barrier holds computed data
                    self.classes[cls].setdefault("writes", {}).setdefault(name, []).append(
                        (self.step_context(), _no_new_ops(value)))
        elif type(target) is cst.StarredElement:
            self._bind_target(target.value, None, K.UNKNOWN)
        elif type(target) is cst.Subscript:
            key = element_key(target)
            if key is not None:  # `images[0] = images[0].cuda()`: this element's own kind
                self._element_prefixes.add(key[: key.index("[") + 1])
                self.func.env[key] = kind
            if type(value) not in (cst.List, cst.Tuple, cst.ListComp):
                # logs["loss"] = loss; not `feats[key] = [out]`: a dict of lists, whose items are lists (their
                # slices and concatenations are Python's), not the tensors `feats[key]` would otherwise be taken for
                self._holds(target.value, kind)

    def _bind_around_starred(self, elts, values) -> bool:
        """``batch, seq, mask = *x.shape[:2], mask``: the items before the value's one starred item and after
        it bound by position from each end, those it covers to one of its items (a shape's are ints). False
        (nothing bound) when the target has a starred item too, or the value more than one."""
        starred = [i for i, v in enumerate(values) if type(v) is cst.StarredElement]
        if len(starred) != 1 or any(type(e) is cst.StarredElement for e in elts):
            return False
        i, after = starred[0], len(values) - starred[0] - 1
        if i + after > len(elts):
            return False
        sk = self.kind(values[i].value)
        covered = K.NOT_TENSOR if sk == K.NOT_TENSOR else K.element_of(sk)
        for j, e in enumerate(elts):
            if j < i:
                self._bind_target(e.value, values[j].value, self.kind(values[j].value))
            elif j >= len(elts) - after:
                v = values[len(values) - (len(elts) - j)].value
                self._bind_target(e.value, v, self.kind(v))
            else:
                self._bind_target(e.value, None, covered)
        return True

    def _bind_dict_entries(self, name: str, value: cst.Dict) -> None:
        """``metrics = {"loss": loss, "epoch": epoch}``: ``metrics["epoch"]`` is what was put under that key
        (the dict as a whole holds a tensor; its Python entries are not tensors)."""
        for el in value.elements:
            if type(el) is not cst.DictElement:
                continue
            key = element_key_of(name, el.key)
            if key is not None:
                self._element_prefixes.add(name + "[")
                self.func.env[key] = self.kind(el.value)

    def _callee_of(self, func) -> Optional[FuncInfo]:
        """The function of this module a call of ``func`` runs: ``f(...)`` or ``self.m(...)``, else None."""
        if type(func) is cst.Name:
            return self._lookup_func(func.value)
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            cls = self.current_class()
            if cls is not None and f"{cls}.{func.attr.value}" in self.funcs:
                return self.funcs[f"{cls}.{func.attr.value}"]
        # `patches, grid = self.splitter(x)`: the `forward` of the module class the source shows;
        # `action, logp, value = self.policy.act(state)`: another method of it
        key = self.module_forward_key(func) or self.module_method_key(func)
        return self.funcs.get(key) if key is not None else None

    def _holds(self, container, kind) -> None:
        """A device tensor was put into ``container`` (``d[k] = t``, ``d.update(k=t)``, ``xs.append(t)``):
        a Python dict or list of this function becomes a container of tensors (printing it reads them)."""
        if kind in (K.CPU_TENSOR, K.CPU_TENSORS):
            # `res = {}` then `res[image_id] = {"boxes": boxes.cpu(), ...}`: a dict of host tensors
            if type(container) is cst.Name and container.value not in self.imports \
                    and self._env_lookup(container.value) == (True, K.NOT_TENSOR):
                self._bind_name(container.value, K.CPU_TENSORS)
            return
        if kind not in K.HOLDS_DEVICE_TENSOR:
            return
        if self.kind(container) in K.ANY_TENSOR:
            return  # `self.cache_k[:b, pos] = k`: a write into a tensor, which stays one (not a container)
        if type(container) is cst.Attribute and type(container.value) is cst.Name and container.value.value == "self":
            self._bind_target(container, None, K.TENSORS)  # self.history.append(loss)
            return
        if type(container) is not cst.Name:
            return
        found, k = self._env_lookup(container.value)
        if found and k == K.NOT_TENSOR and container.value not in self.imports:
            self._bind_name(container.value, K.TENSORS)

    def _host_batch_if_moved(self, node: cst.For) -> None:
        """``for batch in data_loader: batch[k] = batch[k].to(device)``: a loop that moves its batch to the
        device itself iterates host batches (unless the loader is known to be a device loader): only what
        it moves is on the device; what it leaves behind (``batch["meta"]``) stays on the host."""
        kinds = {n.value: self._env_lookup(n.value)[1] for n in target_names(node.target)}
        names = {name for name, k in kinds.items() if k in (K.TENSORS, K.TENSOR)}
        if not names or not moves.loop_moves_its_batch(node, names):
            return
        it = node.iter
        while type(it) is cst.Call and positional_args(it) and (
                dotted_name(it.func) in ("enumerate", "iter") or dotted_name(it.func) in T.TRANSPARENT_ITERATION_WRAPPERS):
            it = positional_args(it)[0]
        if self.kind(it) == K.LOADER:
            return  # MpDeviceLoader, an accelerator-prepared loader: `.to(device)` of a device tensor is a no-op
        for name in names:
            self._bind_name(name, K.CPU_TENSORS if kinds[name] == K.TENSORS else K.CPU_TENSOR)

    def host_params_if_moved(self, node, info: FuncInfo) -> None:
        """A batch parameter the function moves to the run's device itself is a host batch before the move and
        a device batch after it (``moves.moved_batch_params``)."""
        for name, move in moves.moved_batch_params(node, info):
            self._bind_name(name, K.CPU_TENSORS)
            self._batch_moves.add(id(move))
        for name in moves.numpy_batch_params(node, info):  # `ids, texts = data; torch.from_numpy(texts)`
            self._bind_name(name, K.CPU_TENSORS)

    def batch_moved_kind(self, value, kind):
        """The kind an assignment of ``value`` binds: a device batch where it is such a move, whatever the move's
        own kind (``{k: v.to(d) if torch.is_tensor(v) else v ...}`` mixes moved tensors with the rest)."""
        return K.TENSORS if id(value) in self._batch_moves else kind

    def _bind_iteration(self, target, iter_expr) -> None:
        """``for target in iter_expr``: bind the target to the kind of one element."""
        if type(iter_expr) is cst.Call:
            fname = dotted_name(iter_expr.func)
            args = positional_args(iter_expr)
            if fname in ("enumerate",) and args:
                if type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2:
                    self._bind_target(target.elements[0].value, None, K.NOT_TENSOR)
                    counter = target.elements[0].value
                    if type(counter) is cst.Name and self._iterates_loader(args[0]):
                        self.func.step_counters.add(counter.value)
                    self._bind_iteration(target.elements[1].value, args[0])
                    return
            if fname == "zip" and args and type(target) in (cst.Tuple, cst.List) and len(target.elements) == len(args):
                for e, a in zip(target.elements, args):
                    self._bind_iteration(e.value, a)
                return
            if args and (
                fname in T.TRANSPARENT_ITERATION_WRAPPERS
                or (self.qualname(iter_expr.func) or "") in T.TRANSPARENT_ITERATION_WRAPPERS
                or (fname not in ("range", "zip", "enumerate") and self._is_loader_value(args[0]))
            ):
                # tqdm(loader), islice(loader, n), metric_logger.log_every(loader, 10): yields the loader's batches
                self._bind_iteration(target, args[0])
                return
            if fname in ("range", "reversed", "sorted") and fname not in self.imports:
                if fname == "range":
                    self._bind_target(target, None, K.NOT_TENSOR)
                    return
        k = self.kind(iter_expr)
        if k is K.UNKNOWN and type(target) is cst.Name and (
            target.value in ("batch", "mb", "micro_batch", "minibatch") or target.value.endswith("_batch")
        ):
            self._bind_target(target, None, K.TENSORS)
            return
        if k == K.ITEMS:
            if type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2:
                self._bind_target(target.elements[0].value, None, K.NOT_TENSOR)
                self._bind_target(target.elements[1].value, None, K.TENSOR)
                return
        if k is K.UNKNOWN and self._looks_like_loader(iter_expr):
            k = K.LOADER
        parts = K.generator_parts(k)
        if parts is not None and type(target) in (cst.Tuple, cst.List) and len(target.elements) == len(parts) \
                and not any(type(e) is cst.StarredElement for e in target.elements):
            for e, pk in zip(target.elements, parts):  # `for x, y, names in batches(...)`: each as yielded
                self._bind_target(e.value, None, pk)
            return
        if type(target) in (cst.Tuple, cst.List) and not any(type(e) is cst.StarredElement for e in target.elements):
            items = self.appended_items(iter_expr, len(target.elements))
            if items is not None:  # `for has_data, idx, out in results:` of `results.append((True, idx, out))`
                ek = K.element_of(k) if k is not K.UNKNOWN else K.UNKNOWN
                for e, pk in zip(target.elements, items):
                    self._bind_target(e.value, None, pk if pk is not K.UNKNOWN else K.element_of(ek))
                return
        self._bind_target(target, None, K.element_of(k))

    def _bind_params(self, node: cst.FunctionDef, info: FuncInfo) -> None:
        params = node.params
        info.guessed.clear()
        all_params = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
        name = node.name.value if type(node) is cst.FunctionDef else "<lambda>"
        is_forward = info.root and name == "forward"
        is_step_method = name in ("training_step", "validation_step", "test_step", "predict_step")
        receivers = None  # _container_receivers(node), computed when a guess needs it
        sizes = None  # value_uses.size_names(node), likewise
        autograd_function = (bool(all_params) and all_params[0].name.value == "ctx") or bool(
            info.class_key and self.classes.get(info.class_key, {}).get("autograd")
        )
        for i, p in enumerate(all_params):
            pname = p.name.value
            if i == 0 and pname in ("self", "cls") and info.class_key is not None:
                continue
            k = K.UNKNOWN
            if pname in T.CPU_TENSOR_NAMES:
                self._bind_name(pname, K.CPU_TENSOR)
                continue
            if p.annotation is not None:
                k = self._annotation_kind(p.annotation.annotation)
            elif is_forward:
                if pname == "ctx" or autograd_function:
                    # autograd.Function.forward(ctx, ...): its inputs are anything the caller passes
                    k = K.NOT_TENSOR if pname == "ctx" else K.UNKNOWN
                elif _config_like_param(pname):
                    k = K.UNKNOWN
                elif pname in (receivers := receivers if receivers is not None else _container_receivers(node)):
                    k = K.UNKNOWN  # `cache.get(i)`, `cache.update(i, kv)`: an object, not a tensor
                elif pname in (sizes := sizes if sizes is not None else value_uses.size_names(node)):
                    k = K.UNKNOWN  # `x.view(B, H, W, C)`: a size, a Python int (`forward(self, x, H, W)`)
                elif p.default is None or (type(p.default) is cst.Name and p.default.value == "None"):
                    k = K.TENSOR
                    self._bind_name(pname, k)
                    info.guessed.add(pname)  # a guess from the rule: its attributes are not known to be tensors
                    # and the callers' to overrule: one that every caller passes a Python value is one
                    self._guessed_params.setdefault(info.key, set()).add(pname)
                    continue
                else:
                    k = K.NOT_TENSOR
            elif is_step_method:
                if pname in ("batch", "inputs", "data"):
                    k = K.TENSORS
                elif pname in ("batch_idx", "batch_nb", "dataloader_idx", "idx", "step"):
                    k = K.NOT_TENSOR
            else:
                words = name_words(pname)
                if pname == "batch" or pname.endswith("_batch"):
                    k = K.TENSORS
                    self._guessed_params.setdefault(info.key, set()).add(pname)
                elif words and (words[-1] in T.MODEL_NAME_WORDS or words[-1] == "criterion"):
                    k = K.MODULE
                elif p.default is not None and type(p.default) in (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString):
                    k = K.NOT_TENSOR
            self._bind_name(pname, k)
        for star in (params.star_arg, params.star_kwarg):
            if type(star) is cst.Param:
                self._bind_name(star.name.value, K.UNKNOWN)

    def _lookup_func(self, name: str) -> Optional[FuncInfo]:
        f = self.func
        while f is not None:
            key = f.local_funcs.get(name)
            if key is not None:
                return self.funcs.get(key)
            f = f.parent
        return self.funcs.get(name)

    def current_class(self) -> Optional[str]:
        f = self.func
        while f is not None:
            if f.class_key is not None:
                return f.class_key
            f = f.parent
        return self.class_key


def attribute_kind(entries):
    """The kind of ``self.<name>`` from its assignments ``(order, n, function, kind, number literal)``,
    in walk order: the first decides, a later unknown changes nothing, different known kinds make it
    unknown, and a number literal is a start value (``self.sum = 0`` in ``reset()``): a device tensor
    assigned or added later (``self.sum += val * n``) makes it a tensor (a meter)."""
    result, start_value, first = K.UNKNOWN, False, True
    for _order, _n, _func, kind, literal in sorted(entries, key=lambda e: (e[0], e[1])):
        if first:
            result, start_value, first = kind, literal and kind == K.NOT_TENSOR, False
        elif literal or kind is K.UNKNOWN:
            continue
        elif start_value and result == K.NOT_TENSOR and kind in K.HOLDS_DEVICE_TENSOR:
            result, start_value = (K.TENSOR if kind in K.DEVICE_TENSORS else K.TENSORS), False
        else:
            start_value = False
            result = K.join(result, kind)
    return result


def _is_number_literal(value) -> bool:
    """A start value: a number, or an empty list / dict / tuple (filled later)."""
    if type(value) is cst.UnaryOperation and type(value.operator) is cst.Minus:
        value = value.expression
    if type(value) in (cst.List, cst.Dict, cst.Tuple):
        return not value.elements
    return type(value) in (cst.Integer, cst.Float)


def _no_new_ops(value) -> bool:
    """``loss``, ``loss.detach()``, ``batch["input_ids"]``: a value that adds no operation to the graph."""
    while True:
        if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "detach" \
                and not value.args:
            value = value.func.value
        elif type(value) in (cst.Attribute, cst.Subscript):
            value = value.value
        else:
            return type(value) is cst.Name


# Methods a torch.Tensor does not have, that caches, dicts and lists do: a parameter whose body calls one
# (`cache.get(i)`, `past_key_values.get_seq_length()`) is not a tensor, whatever its name suggests
_NOT_TENSOR_METHODS = frozenset({"get", "update", "keys", "items", "append", "extend", "pop", "setdefault",
                                 "insert", "remove", "clear", "get_seq_length", "get_max_length", "reset"})


def _container_receivers(node) -> frozenset:
    """The names ``node``'s body calls one of ``_NOT_TENSOR_METHODS`` on (``cache.get(i)``)."""
    visitor = _ContainerReceivers(node)
    node.visit(visitor)
    return frozenset(visitor.found)


class _ContainerReceivers(cst.CSTVisitor):
    """``_container_receivers``' visitor. A class of the module: a class made per call is a reference cycle
    (a class and its methods), which would keep the function it closes over alive past the walk
    (``run.memory`` freezes what survives a walk)."""

    def __init__(self, node) -> None:
        super().__init__()
        self.node = node
        self.found: set = set()

    def visit_Call(self, call: cst.Call) -> None:
        f = call.func
        if type(f) is cst.Attribute and type(f.value) is cst.Name and f.attr.value in _NOT_TENSOR_METHODS:
            self.found.add(f.value.value)

    def visit_FunctionDef(self, inner) -> bool:
        return inner is self.node  # not nested functions' own names


def _config_like_param(name: str) -> bool:
    low = name.lower()
    return (
        low in T.NON_TENSOR_PARAM_NAMES
        or low.startswith(T.NON_TENSOR_PARAM_PREFIXES)
        or low.endswith(T.NON_TENSOR_PARAM_SUFFIXES)
    )


# other array frameworks: a module that imports one and no torch compute is not torch code
_OTHER_FRAMEWORKS = frozenset({"jax", "jaxlib", "flax", "optax", "haiku", "tensorflow", "keras", "mlx", "paddle", "mindspore",
                               "megengine", "oneflow", "jittor", "mxnet"})
# torch's tools that programs of other frameworks borrow
_TORCH_TOOLS = ("torch.utils.tensorboard", "torch.utils.data")
# frameworks that place tensors on devices for the program
_DEVICE_FRAMEWORKS = ("torch_xla", "accelerate", "lightning", "pytorch_lightning", "deepspeed", "transformers", "ignite",
                      "fastai", "composer", "speechbrain", "mmengine", "catalyst", "torchtune")


# collectives that write their result into their tensor argument (`dist.all_reduce(flag)`)
_MUTATING_CALLS = frozenset({"all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor",
                             "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "scatter",
                             "gather", "recv", "irecv"})
