"""Host values: where a tensor a call makes lives, by what the call says (a CPU device, a host copy).

A part of the semantic model (``model.SemanticModel`` composes it): ``"cpu"``, ``torch.device("cpu")`` and a
name last bound to one; ``"cuda:1"`` and names only ever given CUDA device indices; ``x.cpu()``,
``x.to("cpu")``, ``torch.from_numpy(a)`` as host copies; the arguments of a call that are all host values.
"""

from __future__ import annotations

import libcst as cst

from xlalint.semantics import device_pins
from xlalint.semantics import kinds as K
from xlalint.semantics.syntax import (
    NODE_TYPES, bindings, child_nodes, dotted_name, keyword_arg, name_words, names_in, positional_args, string_value,
    root_name, target_names,
)


class HostValues:
    """Devices named by the source and the host tensors calls make."""

    def host_arguments(self, e: cst.Call) -> bool:
        """Every argument of the call is a host value (a host tensor, a NumPy value, a Python value) and one
        at least a host tensor."""
        if not e.args or any(a.star for a in e.args):
            return False
        kinds = [self.kind(a.value) for a in e.args]
        return all(k in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR) for k in kinds) and (
            K.CPU_TENSOR in kinds or K.CPU_TENSORS in kinds)

    def copied_to_host_arguments(self, e: cst.Call) -> bool:
        """An argument of the call is a host copy made here (``bboxes_iou(truth_box.cpu(), anchors)``, or a
        name this function bound to one): a helper whose own walk returns a device tensor (its other callers
        pass device tensors) computes this call's result on the host, with the host copy (``host_arguments``
        asks that the others be host values too). Not a host kind that only came from a parameter's context
        (litgpt's sampler walked once with a host ``probs``: its result stays what its own walk found)."""
        for a in e.args:
            v = a.value
            if type(v) is cst.Name:
                v = self._bound_calls.get((id(self.func), v.value))
            if v is not None and self.host_copy(v):
                return True
        return False

    def host_copy(self, v) -> bool:
        """``x.cpu()``, ``x.to("cpu")``, ``x.detach().cpu()``, ``torch.from_numpy(a)``: a host tensor by the
        call that makes it."""
        if type(v) is not cst.Call:
            return False
        if type(v.func) is cst.Attribute and (v.func.attr.value == "cpu" or (v.func.attr.value == "to" and self.to_cpu(v))):
            return True
        return self.qualname(v.func) in ("torch.from_numpy", "torch.as_tensor") and keyword_arg(v, "device") is None \
            and self.kind(v.args[0].value if v.args else v) == K.NOT_TENSOR

    def to_cpu(self, call: cst.Call) -> bool:
        """``.to("cpu")``, ``.to(device="cpu")``, ``.to(torch.device("cpu"))``."""
        target = device_pins.to_target(call)
        return target is not None and self.is_cpu_device(target)

    def is_cuda_device(self, node) -> bool:
        """``"cuda:1"``, ``torch.cuda.current_device()``, a name only ever given CUDA device indices: a tensor
        put there is on a CUDA device, never the XLA device (``kinds.CPU_TENSOR``: reading it is no XLA sync).
        Not a device variable (``device``, even set to "cuda": the run's setting, pointed at XLA on a TPU)."""
        if type(node) is cst.Name:
            return node.value in self.cuda_ordinal_names
        return device_pins.names_cuda(node)

    def is_cpu_device(self, node) -> bool:
        """``"cpu"``, ``torch.device("cpu")``, or a name last bound to one (``names_cpu_device``)."""
        if type(node) is cst.Name:
            return self.names_cpu_device(node.value)
        if type(node) is cst.Call and self.qualname(node.func) == "torch.device":  # `import torch as T; T.device(...)`
            args = positional_args(node)
            return bool(args) and device_pins.is_cpu_device(args[0])
        return device_pins.is_cpu_device(node)

    def all_args_cpu(self, e: cst.Call, keywords: bool = False) -> bool:
        """Some positional argument (any argument, with ``keywords``: `Categorical(probs=p.cpu())`) is a host
        tensor and none a device tensor: an op or a module given a host tensor runs on the host (its other
        tensors must be there too, or it fails)."""
        ks = [self.kind(a.value) for a in e.args if keywords or a.keyword is None]
        return any(k in (K.CPU_TENSOR, K.CPU_TENSORS) for k in ks) and not any(k in K.HOLDS_DEVICE_TENSOR for k in ks)

    def uploaded(self, expr) -> bool:
        """``expr`` (``labels``, ``labels.data``, ``labels.detach()``) is what was uploaded to the device, not
        computed since (``_uploads``): reading it back copies it, and runs no graph
        (``classes = classes.to(device)`` ... ``classes.to('cpu').numpy()``)."""
        while True:
            if type(expr) is cst.Attribute and expr.attr.value == "data":
                expr = expr.value
            elif type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value == "detach" \
                    and not expr.args:
                expr = expr.func.value
            else:
                break
        return type(expr) is cst.Name and (id(self.func), expr.value) in self._uploaded

    def read_before_upload(self, node, receiver, kind) -> bool:
        """``node`` reads ``receiver`` before a call of its function that moves a value to the run's device
        (``new_inter = new_inter.to(config["device"])``): the function stages its inputs on the host and uploads
        them after, so a value of unknown kind it reads there is a host value, and so is any part of what it
        uploads later (``n = batch["len"].max().item()`` before ``x = batch["x"].to(device)``). A loop body that
        uploads first and reads after keeps its reads, and so does a function whose upload is not built from
        what it read (a periodic block that logs ``trainer.loss.item()`` and then samples from a prompt it
        uploads)."""
        f = self.func
        staged = self._staged_nodes.get(id(f))
        if staged is None:
            body = self.module if f is self.top else f.node  # a script's own statements, or the function's
            staged = self._staged_nodes[id(f)] = self._before_uploads(body)
        before_any, sources, by_root = staged
        root = root_name(receiver)
        if kind is K.UNKNOWN and id(node) in before_any and root in sources and f is not self.top:
            return True  # (not a script's or a notebook's own statements: one after another, they do many things)
        return root is not None and id(node) in by_root.get(root, ())

    def _before_uploads(self, body) -> tuple:
        """The ids of the nodes before the last upload that stages (``_in_order``), and per name whose parts are
        uploaded (``batch`` of ``batch["x"].to(device)``, or bound to a container of uploads: ``batch = {k:
        v.to(device) ...}``) the ids of the nodes where it holds host values: before it is bound to its uploads,
        or everywhere when it never is. A name moved whole (``x = x.to(device)``) is as often a defensive no-op:
        it claims nothing of the name; nor does a parameter moved whole of what the function read before."""
        params = _param_names(body)
        made_from: dict = {}  # name -> the names its assignments read
        built: set = set()  # names bound to what the function builds on the host (`Interaction(test)`, `{...}`)
        for target, value in bindings(body.body if type(body) is cst.FunctionDef else body):
            if value is not None and type(target) is cst.Name:
                made_from.setdefault(target.value, set()).update(names_in(value))
                if _builds_on_host(value):
                    built.add(target.value)
        sources: set = set()  # the names what it stages is built from, through its assignments
        seen: list = []
        last = 0
        roots: dict = {}
        rebound: set = set()
        stmt_value: dict = {}  # id of a node in a comprehension -> the comprehension (`{k: v.to(d) for k, v in ...}`)
        for n, in_loop in _in_order(body):
            seen.append(id(n))
            if type(n) in (cst.DictComp, cst.ListComp, cst.SetComp, cst.GeneratorExp) and id(n) not in stmt_value:
                stmt_value.update((id(c), n) for c, _ in _in_order(n))
            if type(n) is cst.Call and self._uploads_value(n):
                receiver = n.func.value
                whole = _container_of(receiver) is None  # `x.to(d)`, `x.float().to(d)`: not a part of a container
                if not in_loop and not (whole and root_name(receiver) in params):
                    last = len(seen)  # a loop that uploads reads its next pass's values after its last upload
                    staged = _closure(names_in(stmt_value.get(id(n), receiver)), made_from)
                    if staged & built:  # what it uploads is built here from what it read, not moved in passing
                        sources |= staged
            elif type(n) in (cst.Assign, cst.AnnAssign) and n.value is not None:
                targets = [t.target for t in n.targets] if type(n) is cst.Assign else [n.target]
                if self._container_upload(n.value):
                    for t in targets:
                        if type(t) is cst.Name:
                            rebound.add(t.value)
                            roots[t.value] = len(seen) + sum(1 for _ in _in_order(n))  # after the whole statement
                bound = {t.value for tg in targets for t in target_names(tg)}
                for root in self._parts_bound(n.value):
                    if root in bound:  # `images, labels = images[0].to(device), ...`: the name is its upload after
                        rebound.add(root)
                        roots[root] = len(seen)
                    else:
                        roots.setdefault(root, len(seen))
        everywhere = frozenset(seen)
        return frozenset(seen[:last]), sources, {r: (frozenset(seen[:at]) if r in rebound else everywhere)
                                                 for r, at in roots.items()}

    def _parts_bound(self, v) -> list:
        """The containers whose parts ``v`` binds as uploaded: ``batch`` of ``x = batch["x"].to(device)`` or
        ``x, y = batch.x.to(device), batch.y.to(device)`` (a part moved in passing, ``batch["x"].to(d) == 0``, is
        as often a defensive move: no claim)."""
        calls = [e.value for e in v.elements] if type(v) in (cst.Tuple, cst.List) else [v]
        out = []
        for c in calls:
            if type(c) is cst.Call and self._uploads_value(c):
                root = _container_of(c.func.value)
                if root is not None and root not in self.module_imports:  # not `torch` of `torch.zeros(...).to(d)`
                    out.append(root)
        return out

    def _container_upload(self, v) -> bool:
        """``{k: t.to(device) for k, t in batch.items()}``, ``[t.to(device) for t in batch]``, ``{"x":
        x.to(device), ...}``: a container of uploads (not ``model(x.to(device))``, the model's output)."""
        t = type(v)
        if t is cst.DictComp:
            return type(v.value) is cst.Call and self._uploads_value(v.value)
        if t in (cst.ListComp, cst.GeneratorExp):
            return type(v.elt) is cst.Call and self._uploads_value(v.elt)
        if t is cst.Dict:
            return bool(v.elements) and all(type(e) is cst.DictElement and type(e.value) is cst.Call
                                            and self._uploads_value(e.value) for e in v.elements)
        return False

    def _uploads_value(self, call: cst.Call) -> bool:
        """``x.to(device)`` / ``x.to(config["device"])`` of a value, not of a model."""
        func = call.func
        if type(func) is not cst.Attribute or func.attr.value != "to":
            return False
        target = device_pins.to_target(call)
        if target is None or device_pins.is_cpu_device(target) or self.kind(func.value) is K.MODULE:
            return False
        if type(target) is cst.Subscript and len(target.slice) == 1 and type(target.slice[0].slice) is cst.Index:
            return string_value(target.slice[0].slice.value) == "device"  # `config["device"]`
        if type(target) is cst.Name:  # `device`, `dev`, `xla_device`: not `x.to(dtype)`
            return "device" in name_words(target.value) or target.value == "dev"
        return device_pins.names_the_run_device(target)

def _in_order(block):
    """(node, in a loop of the block) for the nodes under ``block`` in source order (what runs when it runs:
    nested functions, classes and lambdas left out)."""
    stack = [(c, False) for c in reversed(list(child_nodes(block)))] if type(block) in NODE_TYPES else []
    while stack:
        n, in_loop = stack.pop()
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        yield n, in_loop
        inner = in_loop or type(n) in (cst.For, cst.While)
        stack.extend((c, inner) for c in reversed(list(child_nodes(n))))


def _param_names(node) -> set:
    if type(node) is not cst.FunctionDef:
        return set()
    p = node.params
    return {a.name.value for a in (*p.posonly_params, *p.params, *p.kwonly_params)}


def _container_of(part):
    """``batch`` of a part of it: ``batch["x"]``, ``batch.x``, ``batch["x"][0]`` (not the whole of it reshaped,
    ``images.view(n, -1)``, nor ``x.data``); None for anything else."""
    if type(part) not in (cst.Subscript, cst.Attribute):
        return None
    while type(part) in (cst.Subscript, cst.Attribute):
        if type(part) is cst.Attribute and part.attr.value == "data":
            return None
        part = part.value
    return part.value if type(part) is cst.Name else None


def _closure(names: set, made_from: dict) -> set:
    """``names`` and every name their assignments read, transitively."""
    out, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(made_from.get(n, ()))
    return out


def _builds_on_host(value) -> bool:
    """A container literal, an object of a class (``Interaction(test)``), or a tensor made from Python values
    (``torch.tensor([...])``): what a function assembles on the host before it uploads it."""
    if type(value) in (cst.Dict, cst.List, cst.Tuple, cst.DictComp, cst.ListComp):
        return True
    if type(value) is not cst.Call:
        return False
    name = dotted_name(value.func) or ""
    last = name.rpartition(".")[2]
    return name in ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.LongTensor", "torch.FloatTensor") \
        or (last[:1].isupper() and not name.startswith(("torch.", "nn.")))
