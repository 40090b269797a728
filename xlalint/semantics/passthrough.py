"""Functions that return one of their arguments: what a call returns is what that call passed.

``def default(val, d): return val if exists(val) else d`` returns a float hyperparameter at one call and a
device tensor at another; a single return kind for the function would make every call's result a tensor
(issue 33, item 10). A plain function whose every ``return`` gives back a parameter (``return val``,
``return d() if callable(d) else d``, ``return a or b``) gets a passthrough kind instead (``kinds.passthrough``),
exported like any return kind, and a call resolves it with its own arguments (``at_call``).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import kinds as K

_LITERALS = (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)

# parts of a spec: (position, name, called): the parameter at `position` (keyword `name`) is returned
# as it is (called False) or called and its result returned (called True: unknown at any call)


def _params(node) -> list:
    ps = node.params
    return [p.name.value for p in list(ps.posonly_params) + list(ps.params)]


def spec_of_return(value, node) -> Optional[tuple]:
    """The parts a ``return value`` gives back when it is made of the function's parameters only, else
    None. ``node``: the function (a plain function, not a method)."""
    if value is None or type(node) is not cst.FunctionDef:
        return None
    params = _params(node)
    parts: list = []
    return tuple(parts) if _visit(value, params, parts) and any(not called for _, _, called in parts) else None


def _visit(e, params: list, parts: list) -> bool:
    """``e`` is made of ``params`` only (the parts it gives back appended to ``parts``). A function of the
    module, not a recursive closure of ``spec_of_return``: that is a reference cycle left by every
    ``return`` walked (``run.memory`` freezes what survives a walk: it would stay for the whole run)."""
    t = type(e)
    if t is cst.Name and e.value in params:
        parts.append((params.index(e.value), e.value, False))
        return True
    if t is cst.Call and type(e.func) is cst.Name and e.func.value in params:
        parts.append((params.index(e.func.value), e.func.value, True))
        return True
    if t is cst.IfExp:
        return _visit(e.body, params, parts) and _visit(e.orelse, params, parts)
    if t is cst.BooleanOperation:
        return _visit(e.left, params, parts) and _visit(e.right, params, parts)
    return False


def combine(before, spec):
    """The function's spec after one more ``return``: None before any, False once one is not a passthrough."""
    if before is False or spec is None:
        return False
    return spec if before is None else tuple(sorted(set(before) | set(spec)))


def at_call(kind, call: cst.Call, kind_of):
    """The kind a call returns, given its callee's return ``kind``: a passthrough resolved with the call's
    own arguments (their kinds by ``kind_of``), joined; other kinds as they are."""
    spec = K.passthrough_spec(kind)
    if spec is None:
        return kind
    if any(a.star for a in call.args):
        return K.UNKNOWN
    positional = [a.value for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    result, seen = K.UNKNOWN, False
    for position, name, called in spec:
        arg = positional[position] if position < len(positional) else keywords.get(name)
        if arg is None:
            continue  # its default: the function's own value, not a tensor passed here
        k = kind_of(arg)
        if called:
            # `d()` runs only when `d` is callable: a literal or a tensor passed here is not, so that arm
            # gives nothing at this call; anything else may be a function whose result is unknown
            if type(arg) in _LITERALS or k in K.ANY_TENSOR or k in (K.TENSORS, K.CPU_TENSORS):
                continue
            return K.UNKNOWN
        result, seen = (k, True) if not seen else (K.join(result, k), True)
    return result



def combine_parts(before, value, kind_of):
    """A function's ``return_parts`` after one more ``return value``."""
    if before is False or type(value) is not cst.Tuple or any(type(e) is cst.StarredElement for e in value.elements):
        return False
    parts = tuple(kind_of(e.value) for e in value.elements)
    if before is None:
        return parts
    if len(before) != len(parts):
        return False
    return tuple(a if a == b else None for a, b in zip(before, parts))
