"""Where a batch is moved to the device by the code that uses it: a loop that moves its batch, a function that moves
the batch it is handed (issue 32: a plain loader's batch is on the host until the step moves it). By the syntax only;
the model binds the kinds (``bindings``)."""

from __future__ import annotations

import libcst as cst

from xlalint.semantics import device_pins
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.syntax import child_nodes, keyword_arg, last_name, own_nodes, positional_args, target_names


def loop_moves_its_batch(node: cst.For, names: set) -> bool:
    """The loop's body moves one of ``names`` (what it iterates) to the device, or an item of it, or rebinds one
    to it moved (``batch = move_to_device(batch, device)``)."""
    stmts = node.body.body if type(node.body) is cst.IndentedBlock else ()
    return moves_to_device(node.body, names) or any(rebinding_move(stmts, name) is not None for name in names)


def moved_batch_params(node, info) -> list:
    """``def train_step(self, batch): ... batch = move_to_device(batch, self.device)``: the parameters (with the
    value that moves each) that the function rebinds, on its straight line, to themselves moved to the run's
    device: it is handed host data (a plain loader's batch, whatever its callers' loader was taken for). A batch
    only (a container of tensors, or a parameter of no known kind moved as one), not one tensor moved
    (``labels = labels.to(device)``), nor a move to another tensor's device, nor a copy moved in one branch
    (``candidates[:, 1:].to(logits.device)``): defensive moves of values that may be there already."""
    if type(node) is not cst.FunctionDef or type(node.body) is not cst.IndentedBlock:
        return []
    p = node.params
    out = []
    for i, param in enumerate((*p.posonly_params, *p.params, *p.kwonly_params)):
        name = param.name.value
        if i == 0 and name in ("self", "cls") and info.class_key is not None:
            continue
        move = rebinding_move(node.body.body, name)
        if info.env.get(name, K.UNKNOWN) in (K.TENSORS, K.UNKNOWN) and move is not None and not _moves_itself(move, name):
            out.append((name, move))
    return out


def moves_to_device(body, names: set, movers: bool = False) -> bool:
    """The block calls ``.to(...)``/``.cuda()`` on one of ``names`` or an item of it (not in nested defs), or on
    a name it bound to an item of one (``input_ids = batch["input_ids"]`` then ``input_ids.to("xla")``); with
    ``movers``, or hands one to a device mover (``move_to_device(batch, self.device)``: ``T.DEVICE_MOVERS``; only
    where its result is bound back: torchtune's ``batch_to_device(batch, device)`` moves the batch in place)."""
    names = set(names) | _items_bound(body, names)
    for n in _own_calls(body):
        moved = None
        if type(n.func) is cst.Attribute and n.func.attr.value in ("to", "cuda") and not device_pins.casts_only(n) \
                and not _to_host(n):
            moved = n.func.value
        elif movers and last_name(n.func) in T.DEVICE_MOVERS and positional_args(n):
            moved = positional_args(n)[0]
        while type(moved) in (cst.Subscript, cst.Attribute):
            moved = moved.value
        if type(moved) is cst.Name and moved.value in names:
            return True
    return False


def rebinding_move(stmts, name: str):
    """The value of the first statement of ``stmts`` (a function's own straight line) that rebinds ``name`` to
    ``name`` moved to the device (``batch = move_to_device(batch, d)``, ``x = x.to(d)``, ``batch = {k: v.to(d)
    for k, v in batch.items()}``), or None."""
    for stmt in stmts:
        if type(stmt) is not cst.SimpleStatementLine:
            continue
        for small in stmt.body:
            if (type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name
                    and small.targets[0].target.value == name and moves_to_device(small.value, {name}, movers=True)
                    and _to_the_run_device(small.value)):
                return small.value
    return None


def _to_the_run_device(value) -> bool:
    """Every move in ``value`` targets the run's device (``device``, ``self.device``, ``args.device``,
    ``accelerator.device``, ``xm.xla_device()``), not where another value is (``labels.to(logits.device)``: an
    alignment with a tensor that may be on the device already)."""
    targets = []
    for n in _own_calls(value):
        if type(n.func) is cst.Attribute and n.func.attr.value == "to":
            targets.append(device_pins.to_target(n))
        elif last_name(n.func) in T.DEVICE_MOVERS:
            args = positional_args(n)
            targets.append(keyword_arg(n, "device") or (args[1] if len(args) > 1 else None))
    return bool(targets) and all(t is not None and device_pins.names_the_run_device(t) for t in targets)


def _moves_itself(body, name: str) -> bool:
    """The block calls ``name.to(...)``/``name.cuda()`` on the name itself (a tensor), not on an item of it."""
    return any(type(n.func) is cst.Attribute and n.func.attr.value in ("to", "cuda") and not device_pins.casts_only(n)
               and not _to_host(n) and type(n.func.value) is cst.Name and n.func.value.value == name for n in _own_calls(body))


def _to_host(call: cst.Call) -> bool:
    """``x.to("cpu")``, ``x.to(device="cpu")``, ``x.to(torch.device("cpu"))``: a copy to the host, not a move to the
    device."""
    target = device_pins.to_target(call)
    return target is not None and device_pins.is_cpu_device(target)


def _own_calls(node):
    """The calls ``node`` makes when it runs (itself included), not those in nested functions."""
    return (n for n in (node, *own_nodes(node)) if type(n) is cst.Call)


def _items_bound(body, names: set) -> set:
    """Names the block binds to an item or a field of one of ``names`` (``labels = batch["labels"]``, ``x, y =
    batch``, ``for k, v in batch.items()`` in a comprehension)."""
    out, stack = set(), [body]
    while stack:
        n = stack.pop()
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if type(n) is cst.Assign and (type(n.value) in (cst.Subscript, cst.Attribute) or (
                type(n.value) is cst.Name and any(type(tg.target) in (cst.Tuple, cst.List) for tg in n.targets))):
            root = n.value
            while type(root) in (cst.Subscript, cst.Attribute):
                root = root.value
            if type(root) is cst.Name and root.value in names:
                out.update(x.value for tg in n.targets for x in target_names(tg.target))
            continue
        if type(n) is cst.CompFor:  # `{k: v.to(device) for k, v in batch.items()}`
            root = n.iter
            while type(root) in (cst.Call, cst.Attribute, cst.Subscript):
                root = root.func if type(root) is cst.Call else root.value
            if type(root) is cst.Name and root.value in names:
                out.update(x.value for x in target_names(n.target))
        stack.extend(child_nodes(n))
    return out


# calls that make a tensor from a host value (a NumPy array, a list): their argument is not a tensor
_FROM_HOST = frozenset({"from_numpy", "as_tensor", "tensor", "LongTensor", "FloatTensor"})


def numpy_batch_params(node, info) -> list:
    """``def to_device(data, device): ids, texts, lens = data; texts = torch.from_numpy(texts).to(device)``: the
    parameters the function unpacks, on its straight line, into names some of which it turns into tensors from
    host values (``torch.from_numpy``, ``torch.as_tensor``): a batch of host values (NumPy arrays, ids, sizes), none
    of whose items is a device tensor, those it leaves as they are (the ids it hands back) included."""
    if type(node) is not cst.FunctionDef or type(node.body) is not cst.IndentedBlock:
        return []
    p = node.params
    params = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    unpacked: dict = {}  # name -> the parameter it was unpacked from
    for stmt in own_nodes(node.body):
        if type(stmt) is cst.Assign and len(stmt.targets) == 1 and type(stmt.value) is cst.Name \
                and stmt.value.value in params and type(stmt.targets[0].target) in (cst.Tuple, cst.List):
            for x in target_names(stmt.targets[0].target):
                unpacked[x.value] = stmt.value.value
    if not unpacked:
        return []
    found = set()
    for n in _own_calls(node.body):
        if last_name(n.func) in _FROM_HOST and n.args and type(n.args[0].value) is cst.Name \
                and n.args[0].value.value in unpacked:
            found.add(unpacked[n.args[0].value.value])
    return sorted(name for name in found if info.env.get(name, K.UNKNOWN) in (K.TENSORS, K.UNKNOWN))
