"""Tensors a loop grows from one iteration to the next (XLA009's growth findings): a name it rebinds to itself
concatenated with more (``ids = torch.cat([ids, nxt], dim=-1)``), a KV cache it gives back to the model call that
returned it (transformers' ``past_key_values``), or what a function of the module returns grown
(``ids = append_token(ids, nxt)``); and whether a graph of the iteration reads the grown tensor at all.

Syntax only: ``StepValues`` asks it before a loop's body is walked, and answers what a call returns grown
(``Scan.helper_growth``) from the model.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import tables as T
from xlalint.semantics.syntax import NODE_TYPES, child_nodes, dotted_name, names_in, target_names


_CONCATENATIONS = frozenset({"torch.cat", "torch.concat", "torch.concatenate"})


def grown_dim(name: str, value, model=None) -> Optional[int]:
    """``torch.cat([name, x], dim=d)`` / ``torch.cat((name, x), d)``: the dimension ``name`` grows along (a
    literal; 0 by default), else None."""
    if type(value) is not cst.Call or not value.args:
        return None
    q = (model.qualname(value.func) if model is not None else None) or dotted_name(value.func) or ""
    if q not in _CONCATENATIONS:
        return None
    first = value.args[0].value
    if type(first) not in (cst.List, cst.Tuple) or not any(
            type(el.value) is cst.Name and el.value.value == name for el in first.elements):
        return None
    dim = next((a.value for a in value.args[1:] if a.keyword is None or a.keyword.value in ("dim", "axis")), None)
    return 0 if dim is None else int_literal(dim)


class Scan:
    """What ``grown_in`` asks besides the syntax: the keywords that pass a model its cache, and what a call
    of this module's functions returns grown (``StepValues._helper_growth``)."""

    def __init__(self, keywords=T.CACHE_KEYWORDS, helper_growth=None) -> None:
        self.keywords = keywords
        self.helper_growth = helper_growth or (lambda call: {})


def grown_in(block, bound: set, scan: Optional[Scan] = None) -> list:
    """(name, (dim, call)) of the tensors a loop body grows: rebinds to themselves concatenated with more
    (call None), or takes back from a model call it passed them to as its KV cache (``out = model(x,
    past_key_values=past)`` then ``past = out.past_key_values``; ``logits, past = model(x, past_key_values=past)``:
    dim None, that call), before binding them any other way in the iteration, so that each iteration starts
    from the last one's value (on any of its branches and inner loops, not in functions defined in it).
    ``x = torch.cat([x, y])`` after ``x = noise(...)`` in the same iteration, or a loop target, is built
    afresh every step: it does not grow; ``x = x[:, : n + 1]`` before it is still the last iteration's value,
    trimmed. A function of the module that returns its argument grown grows what the loop gives it back
    (``ids = append_token(ids, nxt)``: that call, its dim). ``bound``: the loop's own targets."""
    grown: dict = {}
    _visit_grown(block, grown, set(bound), {}, scan or Scan())
    return list(grown.items())


def _visit_grown(n, grown: dict, bound: set, outputs: dict, scan) -> None:
    """``grown_in``'s walk, in source order (a module function: a closure calling itself would keep the
    tree alive in a reference cycle). ``outputs``: name -> (cache name, call) of a model call's result that
    was given a carried cache (``out = model(x, past_key_values=past)``)."""
    t = type(n)
    if t in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
        return
    if t is cst.Assign:
        if len(n.targets) == 1 and type(n.targets[0].target) is cst.Name:
            name = n.targets[0].target.value
            dim = grown_dim(name, n.value)
            if dim is not None and name not in bound:
                grown.setdefault(name, (dim, None))
        before = {k for k, v in grown.items() if v[0] is None}
        _note_cache(n, grown, bound, outputs, scan)
        for tg in n.targets:  # a cache taken back, then changed again (`past = evict(past)`): its length
            for x in target_names(tg.target):  # is what that change makes it, maybe a bounded window
                if x.value in before:
                    grown.pop(x.value, None)
        reads = names_in(n.value)
        for tg in n.targets:
            bound.update(x.value for x in target_names(tg.target) if x.value not in reads)
        return
    if t in (cst.AnnAssign, cst.AugAssign):
        bound.update(x.value for x in target_names(n.target))
        return
    if t is cst.If:  # bound before the growth only when both branches bind it: `if i == 0: past = prefill(...)
        then = set(bound)  # else: out = model(..., past_key_values=past)` carries `past` on every other iteration
        _visit_grown(n.body, grown, then, outputs, scan)
        other = set(bound)
        if n.orelse is not None:
            _visit_grown(n.orelse, grown, other, outputs, scan)
        bound |= then & other
        return
    if t in (cst.For, cst.While):  # an inner loop's body may not run: what it binds is not bound after it
        inner = set(bound)
        if t is cst.For:
            inner.update(x.value for x in target_names(n.target))
        _visit_grown(n.body, grown, inner, outputs, scan)
        return
    if t in (cst.SimpleStatementLine, cst.IndentedBlock, cst.If, cst.Else, cst.For, cst.While, cst.With,
             cst.Try, cst.ExceptHandler, cst.Finally):
        for c in child_nodes(n):
            _visit_grown(c, grown, bound, outputs, scan)


# Reads of a tensor's metadata: no graph takes the tensor as an input
_METADATA = T.NON_TENSOR_ATTRIBUTES | frozenset({"size", "dim", "numel", "ndimension", "nelement"})


def feeds_a_graph(loop, name: str) -> bool:
    """A tensor the loop grows with ``torch.cat`` is read by something else in the loop (its test or body)
    than the ``cat`` that grows it: a model call, a slice, a host read. A loop cut only by host reads of
    other values (no barrier) leaves a tensor read nowhere else pending: no graph of an iteration takes it
    as an input, and its growth compiles nothing per iteration (measured: a 10-token decode that grows its
    ids and reads only the next token compiled 11 graphs, 10 without the ``cat``; the grown ids read every
    iteration, ``ids.sum().item()``: 21). Metadata reads (``ids.shape[1]``, ``len(ids)``) are not graph inputs."""
    stack = [loop.test] if type(loop) is cst.While else []
    stack.append(loop.body)
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Name:
            if n.value == name:
                return True
            continue
        if t in (cst.FunctionDef, cst.ClassDef):
            continue
        if t is cst.Assign:
            if grown_dim(name, n.value) is None:
                stack.append(n.value)  # its targets are written, not read
            continue
        if t is cst.Attribute:
            if n.attr.value in _METADATA and type(n.value) is cst.Name:
                continue
            stack.append(n.value)
            continue
        if t is cst.Call and type(n.func) is cst.Name and n.func.value == "len":
            continue
        if t in NODE_TYPES:
            stack.extend(child_nodes(n))
    return False


def _note_cache(n: cst.Assign, grown: dict, bound: set, outputs: dict, scan) -> None:
    """A carried KV cache taken back from the model call it was given to (``grown_in``): ``past =
    out.past_key_values`` / ``out[1]`` where ``out`` is that call's result, ``past = model(...,
    past_key_values=past).past_key_values``, ``logits, past = model(x, past_key_values=past)``."""
    names = [x.value for tg in n.targets for x in target_names(tg.target)]
    single = names[0] if len(n.targets) == 1 and type(n.targets[0].target) is cst.Name else None
    value = _unless_none(n.value)  # `past = out.past_key_values if use_cache else None`
    root = value
    keywords = scan.keywords
    if type(n.value) is cst.Call:
        _note_helper(n, grown, bound, scan)
    if single is not None and type(root) is cst.Attribute and root.attr.value not in keywords:
        return
    while type(root) in (cst.Attribute, cst.Subscript):
        root = root.value
    if type(root) is cst.Name and single is not None and root is not value:
        given = outputs.get(root.value)  # past = out.past_key_values
        if given is not None and given[0] == single and single not in bound:
            grown.setdefault(single, (None, given[1]))
        return
    if type(root) is not cst.Call:
        return
    # `past_key_values=past`, or the cache passed by position under a cache's name (`self.forward(ids, mask,
    # past_key_values)`)
    cache = next((a.value.value for a in root.args if type(a.value) is cst.Name and (
        a.value.value in keywords if a.keyword is None else a.keyword.value in keywords)), None)
    if cache is None or cache in bound:
        return
    if cache in names:
        grown.setdefault(cache, (None, root))  # logits, past = model(x, past_key_values=past)
    elif single is not None and root is n.value:
        outputs[single] = (cache, root)  # out = model(x, past_key_values=past)


def _unless_none(e):
    """``a if cond else None`` (or ``None if cond else a``): ``a``; else ``e``."""
    if type(e) is cst.IfExp:
        if type(e.orelse) is cst.Name and e.orelse.value == "None":
            return e.body
        if type(e.body) is cst.Name and e.body.value == "None":
            return e.orelse
    return e


def _note_helper(n: cst.Assign, grown: dict, bound: set, scan) -> None:
    """``ids = append_token(ids, nxt)`` / ``ids, done = step(ids)`` of a function that returns its argument
    grown (``scan.helper_growth``): the carried name grows along the dim the function concatenates."""
    call = n.value
    names = [tg.target for tg in n.targets]
    if len(names) != 1:
        return
    target = names[0]
    returned = None
    for where, (dim, position) in scan.helper_growth(call).items():
        arg = call.args[where] if isinstance(where, int) else next(a for a in call.args if a.keyword is not None
                                                                    and a.keyword.value == where)
        if type(arg.value) is not cst.Name or arg.value.value in bound:
            continue
        name = arg.value.value
        if position is None:
            returned = target if type(target) is cst.Name else None
        elif type(target) in (cst.Tuple, cst.List) and position < len(target.elements):
            returned = target.elements[position].value
        if type(returned) is cst.Name and returned.value == name:
            grown.setdefault(name, (dim, call))


def returns_grown(fn: cst.FunctionDef) -> dict:
    """The parameters a function returns concatenated with more: param -> (dim, position in a returned tuple
    or None): ``return torch.cat([ids, nxt], dim=1)``, or a name bound so (``ids = torch.cat([ids, t], 1)``)
    returned alone or in a tuple, on every return (not in nested functions)."""
    ps = {p.name.value for p in (*fn.params.posonly_params, *fn.params.params, *fn.params.kwonly_params)}
    cats: dict = {}  # name -> (param, dim) of `name = torch.cat([param, ...], dim)`
    returns: list = []
    stack = [fn.body]
    while stack:
        n = stack.pop()
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if type(n) is cst.Assign and len(n.targets) == 1 and type(n.targets[0].target) is cst.Name:
            target = n.targets[0].target.value
            for p in sorted(ps):  # the one it rebinds first (`ids = torch.cat([ids, nxt], 1)`), else the first
                dim = grown_dim(p, n.value)
                if dim is not None and (target not in cats or p == target):
                    cats[target] = (p, dim)
        elif type(n) is cst.Return:
            returns.append(n.value)
            continue
        if type(n) in NODE_TYPES:
            stack.extend(child_nodes(n))
    found: dict = {}
    for i, value in enumerate(returns):
        items = [(None, value)] if type(value) is not cst.Tuple else [(k, e.value) for k, e in enumerate(value.elements)]
        mine: dict = {}
        for position, e in items:
            if type(e) is cst.Name and e.value in cats:
                p, d = cats[e.value]
                mine[p] = (d, position)
                continue
            for p in sorted(ps):  # every parameter joined in the returned `cat`
                d = grown_dim(p, e)
                if d is not None:
                    mine[p] = (d, position)
        found = mine if i == 0 else {p: v for p, v in found.items() if mine.get(p) == v}
    return found


def int_literal(node) -> Optional[int]:
    """The value of an int literal (``3``, ``-1``), else None."""
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        v = int_literal(node.expression)
        return -v if v is not None else None
    if type(node) is not cst.Integer:
        return None
    try:
        return int(node.value, 0)
    except ValueError:
        return None
