"""Whether a module switched to eval mode inside a loop runs before the loop switches it back (XLA004).

U-ViT's trainer ends every step with ``nnet.eval()`` and starts the next with ``nnet.train()``; in between it
samples with the EMA copy and saves checkpoints: ``nnet`` itself never runs in eval mode, so no eval graph of it is
ever built. The question is answered by where the module can be reached from, not by names: the module is a local
name of the function, and what may run it is a name bound from it (``score_model = ScoreModel(nnet)``), a function
defined there that mentions one (a closure), or an object that was handed it or that it came from (a holder:
``accelerator.prepare(train_state.nnet)``). A module that is a parameter, ``self``'s or a global of another function
is reachable from code this function cannot see: unknown, so the switch counts.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import tables as T

from xlalint.semantics.syntax import child_nodes, last_name, positional_params, root_name

# calls that run no module, whatever they are handed: writing a checkpoint, formatting its path, logging, a barrier
NO_FORWARD_CALLS = T.SAVE_METHODS | {
    "state_dict", "format", "join", "makedirs", "mkdir", "exists", "print", "info", "warning", "debug", "log",
    "get_rank", "barrier", "wait_for_everyone", "empty_cache", "int", "str", "len"}


def eval_mode_unused(scope, loop, call: cst.Call, may_be_module) -> bool:
    """``X.eval()`` (``call``) inside ``loop`` of ``scope`` (a function, or the module) is undone before ``X`` can
    run: the loop's body starts with ``X.train()`` (a statement of its own), and from the call to the end of the
    body, the loop's header and the body's statements before that ``train()``, nothing mentions ``X`` or a name
    that may reach it, and nothing calls a holder of it (but to save or log). ``may_be_module(name)``: what the
    module was made from may be the module itself (not a device, a config or a loader)."""
    recv = call.func.value if type(call.func) is cst.Attribute else None
    if type(recv) is not cst.Name or type(loop) not in (cst.For, cst.While) or type(loop.body) is not cst.IndentedBlock:
        return False
    name = recv.value
    body = list(loop.body.body)
    head = _head_until_train(body, name)
    if head is None:
        return False
    reach = _reach(scope, name, may_be_module)
    if reach is None:
        return False
    aliases, holders = reach
    tail = _nodes_after(body, call)
    if tail is None:
        return False
    header = [loop.iter] if type(loop) is cst.For else [loop.test]
    for node in (*tail, *header, *head):
        if not _quiet(node, aliases, holders):
            return False
    return True


def _head_until_train(body: list, name: str) -> Optional[list]:
    """The loop body's statements before its first statement ``name.train()``, or None when it has none."""
    for i, st in enumerate(body):
        if type(st) is cst.SimpleStatementLine and len(st.body) == 1 and type(st.body[0]) is cst.Expr:
            c = st.body[0].value
            if (type(c) is cst.Call and type(c.func) is cst.Attribute and c.func.attr.value == "train"
                    and type(c.func.value) is cst.Name and c.func.value.value == name
                    and not any(type(a.value) is cst.Name and a.value.value == "False" for a in c.args)):
                return body[:i]
    return None


def _reach(scope, name: str, may_be_module) -> Optional[tuple]:
    """(names that may hold or run the module, names of objects that may hold it), or None when the module is
    reachable from outside the scope (a parameter, a global or nonlocal of a function, ``self``'s)."""
    if type(scope) is cst.FunctionDef:
        if name in positional_params(scope) or name in {p.name.value for p in scope.params.kwonly_params}:
            return None
        statements = scope.body.body if type(scope.body) is cst.IndentedBlock else ()
    elif type(scope) is cst.Module:
        statements = scope.body
    else:
        return None
    assigns, defs, calls = [], [], []
    stack = list(statements)
    while stack:
        n = stack.pop()
        t = type(n)
        if t in (cst.Global, cst.Nonlocal) and any(a.name.value == name for a in n.names):
            return None
        if t in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            defs.append(n)
            continue  # its body is the closure's, asked as a whole below
        if t in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.NamedExpr):
            assigns.append(n)
        elif t is cst.For:
            assigns.append(n)
        elif t is cst.WithItem and n.asname is not None:
            assigns.append(n)
        elif t is cst.Expr and type(n.value) is cst.Call:
            calls.append(n.value)
        stack.extend(child_nodes(n))
    aliases, holders = {name}, set()
    for a in assigns:  # where the module came from: `nnet = accelerator.prepare(train_state.nnet)`
        value, targets = _value_and_targets(a)
        if value is not None and any(_binds_name(t, name) for t in targets):
            handed, read = _came_from(value)
            aliases |= {x for x in handed if may_be_module(x)}  # `nnet = net.to(device)`: `net` is the module
            holders |= read
    changed = True
    while changed:
        changed = False
        for a in assigns:
            value, targets = _value_and_targets(a)
            if value is None or not _came_from(value)[0] & aliases:
                continue  # `out = nnet(x)`, `metrics = train_step(batch)`: what it computes, not the module
            for t in targets:
                if type(t) is cst.Name:
                    if t.value not in aliases:
                        aliases.add(t.value)  # `score_model = ScoreModel(nnet)`
                        changed = True
                else:  # `ema.model = nnet`, `models[0] = nnet`: the object it is stored in holds it
                    root = root_name(t)
                    if root is not None and root not in holders:
                        holders.add(root)
                        changed = True
        for d in defs:
            # a closure that runs it, or a class whose methods may
            if type(d) is not cst.Lambda and d.name.value not in aliases and not _quiet(d, aliases, holders):
                aliases.add(d.name.value)
                changed = True
        for c in calls:
            # `ema.register(nnet)` as a statement: the object it is called on keeps it (a call whose result is bound
            # makes that result hold it instead: `score_model = sde.ScoreModel(nnet)`)
            if type(c.func) is cst.Attribute and any(_came_from(a.value)[0] & aliases for a in c.args):
                root = root_name(c.func)
                if root is not None and root not in aliases and root not in holders:
                    holders.add(root)
                    changed = True
    return aliases, holders - aliases


def _variables(node) -> set:
    """The names ``node`` reads or writes as variables: not an attribute's name (``state.nnet``) or a keyword."""
    out, stack = set(), [node]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Name:
            out.add(n.value)
        elif t is cst.Attribute:
            stack.append(n.value)
        elif t is cst.Arg:
            stack.append(n.value)
        else:
            stack.extend(child_nodes(n))
    return out


# a module's methods that return the module itself
_SELF_METHODS = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_",
                           "apply", "type", "to_empty"})


def _came_from(value) -> tuple:
    """(the names an expression hands on: a call's arguments, the chain a method is called on, the value itself;
    the objects whose attribute it reads). ``nnet = accelerator.prepare(train_state.nnet, loader)``: ``loader``
    handed on, ``train_state`` read from; ``model = net.to(device)``: ``net`` and ``device`` handed on. Not the
    object a method is called on by name (``accelerator``): it makes what it returns."""
    names, holders, stack = set(), set(), [value]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Name:
            names.add(n.value)
        elif t is cst.Call:
            stack.extend(a.value for a in n.args)
            if type(n.func) is cst.Attribute and (type(n.func.value) is not cst.Name or n.func.attr.value in _SELF_METHODS):
                stack.append(n.func.value)  # `net.to(device)` is `net`; `Model(cfg).to(device)` came from `Model(cfg)`
        elif t in (cst.Attribute, cst.Subscript):
            root = root_name(n)
            if root is not None:
                holders.add(root)
        else:
            stack.extend(child_nodes(n))
    return names, holders


def _value_and_targets(a) -> tuple:
    t = type(a)
    if t is cst.Assign:
        return a.value, [x for tgt in a.targets for x in _flatten(tgt.target)]
    if t in (cst.AnnAssign, cst.AugAssign):
        return a.value, _flatten(a.target)
    if t is cst.NamedExpr:
        return a.value, [a.target]
    if t is cst.For:
        return a.iter, _flatten(a.target)
    return a.item, _flatten(a.asname.name)  # WithItem


def _flatten(target) -> list:
    if type(target) in (cst.Tuple, cst.List):
        return [x for e in target.elements for x in _flatten(e.value)]
    if type(target) is cst.StarredElement:
        return _flatten(target.value)
    return [target]


def _binds_name(target, name: str) -> bool:
    return type(target) is cst.Name and target.value == name


def _nodes_after(body: list, call: cst.Call) -> Optional[list]:
    """The nodes that run after ``call`` in one pass of the loop body, in source order (pre-order of the body
    after the call), or None when the call is not in the body."""
    out, seen = [], False
    stack = list(reversed(body))
    while stack:
        n = stack.pop()
        if n is call:
            seen = True
            continue
        if seen:
            out.append(n)
            continue
        stack.extend(reversed(child_nodes(n)))
    return out if seen else None


def _quiet(node, aliases: set, holders: set) -> bool:
    """``node`` (whole) neither mentions a name that may run the module nor calls a holder of it (but to save or
    log)."""
    if _variables(node) & aliases:
        return False
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) is cst.Call and (last_name(n.func) or "") not in NO_FORWARD_CALLS:
            if root_name(n.func) in holders or any(_came_from(a.value)[0] & holders for a in n.args):
                return False
        stack.extend(child_nodes(n))
    return True
