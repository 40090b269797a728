"""Functions that return one of their arguments: what a call returns is what that call passed.

``def default(val, d): return val if exists(val) else d`` returns a float hyperparameter at one call and a
device tensor at another; a single return kind for the function would make every call's result a tensor
(issue 33, item 10). A plain function whose every ``return`` gives back a parameter (``return val``,
``return d() if callable(d) else d``, ``return a or b``) gets a passthrough kind instead (``kinds.passthrough``),
exported like any return kind, and a call resolves it with its own arguments (``at_call``). So does one whose
returns are arithmetic of its parameters and numbers (``def time_shift(mu, sigma, t): return math.exp(mu) /
(math.exp(mu) + (1 / t - 1) ** sigma)``): the result lives where the call's tensor arguments live (a schedule
built on the CPU and passed to it stays on the CPU).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import kinds as K
from xlalint.semantics.syntax import argument_for, bindings, last_name, positional_params

_LITERALS = (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)

# parts of a spec: (position, name, how): the parameter at `position` (keyword `name`) is returned as it is
# (AS_IS), called and its result returned (CALLED: unknown at any call), or computed with (ARITH)
AS_IS, CALLED, ARITH = 0, 1, 2



def spec_of_return(value, node) -> Optional[tuple]:
    """The parts a ``return value`` gives back when it is made of the function's parameters only, else
    None. ``node``: the function (a plain function, not a method)."""
    if value is None or type(node) is not cst.FunctionDef:
        return None
    params = positional_params(node)
    parts: list = []
    return tuple(parts) if _visit(value, params, parts) and any(how != CALLED for _, _, how in parts) else None


def _visit(e, params: list, parts: list) -> bool:
    """``e`` is made of ``params`` only (the parts it gives back appended to ``parts``). A function of the
    module, not a recursive closure of ``spec_of_return``: that is a reference cycle left by every
    ``return`` walked (``run.memory`` freezes what survives a walk: it would stay for the whole run)."""
    t = type(e)
    if t is cst.Name and e.value in params:
        parts.append((params.index(e.value), e.value, AS_IS))
        return True
    if t is cst.Call and type(e.func) is cst.Name and e.func.value in params:
        parts.append((params.index(e.func.value), e.func.value, CALLED))
        return True
    if t is cst.IfExp:
        return _visit(e.body, params, parts) and _visit(e.orelse, params, parts)
    if t is cst.BooleanOperation:
        return _visit(e.left, params, parts) and _visit(e.right, params, parts)
    if t in (cst.BinaryOperation, cst.UnaryOperation) and type(getattr(e, "operator", None)) is not cst.MatrixMultiply:
        inner: list = []
        if not all(_arithmetic(x, params, inner) for x in ((e.left, e.right) if t is cst.BinaryOperation
                                                          else (e.expression,))):
            return False
        parts.extend(inner)
        return True
    return False


def _arithmetic(e, params: list, parts: list) -> bool:
    """``e`` is numbers, parameters, arithmetic of them and ``math`` calls on them (the parameters met outside
    ``math`` calls appended to ``parts`` as ARITH)."""
    t = type(e)
    if t in (cst.Integer, cst.Float):
        return True
    if t is cst.Name and e.value in params:
        parts.append((params.index(e.value), e.value, ARITH))
        return True
    if t is cst.BinaryOperation:
        return _arithmetic(e.left, params, parts) and _arithmetic(e.right, params, parts)
    if t is cst.UnaryOperation:
        return _arithmetic(e.expression, params, parts)
    if (t is cst.Call and type(e.func) is cst.Attribute and type(e.func.value) is cst.Name
            and e.func.value.value == "math" and not any(a.keyword or a.star for a in e.args)):
        return all(_arithmetic(a.value, params, []) for a in e.args)  # `math.exp(mu)`: a Python float, always
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
    result, seen = K.UNKNOWN, False
    computed, arith = K.UNKNOWN, False  # the kind of the arithmetic of the ARITH parts, and whether there is one
    for position, name, how in spec:
        arg = argument_for(call, position, name)
        if arg is None:
            continue  # its default: the function's own value, not a tensor passed here
        k = kind_of(arg)
        if how == ARITH:
            computed, arith = (K.arithmetic(computed, k) if arith else k), True
            continue
        if how == CALLED:
            # `d()` runs only when `d` is callable: a literal or a tensor passed here is not, so that arm
            # gives nothing at this call; anything else may be a function whose result is unknown
            if type(arg) in _LITERALS or k in K.ANY_TENSOR or k in (K.TENSORS, K.CPU_TENSORS):
                continue
            return K.UNKNOWN
        result, seen = (k, True) if not seen else (K.join(result, k), True)
    if arith:
        if computed is K.UNKNOWN:  # an argument of the arithmetic not known here: what the function's walk saw
            computed = K.passthrough_fallback(kind)
        result = computed if not seen else K.join(result, computed)
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


# a copy of what it is given: `copy.deepcopy(flags)`, `flags.copy()`, `list(flags)`
_COPIES = frozenset({"deepcopy", "copy", "list", "tuple", "dict"})


def handed_back(before, value, func_node):
    """A function's ``return_handed`` after one more ``return value``: per item of the returned tuple, the index
    of the parameter it hands back as given (``return ids, new_token, finish_flag`` of a helper handed the
    lists ``new_token`` and ``finish_flag``; also a copy bound once, ``finish_flag = copy.deepcopy(finish_flag)``),
    else None; False once a return is not such a tuple."""
    if before is False or type(value) is not cst.Tuple or type(func_node) is not cst.FunctionDef:
        return False
    params = positional_params(func_node)
    copies = _copied_params(func_node, set(params))
    now = []
    for e in value.elements:
        v = e.value
        name = v.value if type(v) is cst.Name else None
        name = copies.get(name, name)
        now.append(params.index(name) if name in params else None)
    now = tuple(now)
    if before is None:
        return now
    if len(before) != len(now):
        return False
    return tuple(a if a == b else None for a, b in zip(before, now))


def _copied_params(func_node, params: set) -> dict:
    """name -> the parameter it copies, for the names bound once, to a copy of a parameter (or the parameter
    rebound to its own copy): ``finish_flag = copy.deepcopy(finish_flag)``."""
    seen: dict = {}
    for target, value in bindings(func_node.body):
        if type(target) is not cst.Name:
            continue
        src = None
        if type(value) is cst.Call and last_name(value.func) in _COPIES:
            args = [a.value for a in value.args if a.keyword is None]
            if len(args) == 1 and type(args[0]) is cst.Name and args[0].value in params:
                src = args[0].value
            elif not args and type(value.func) is cst.Attribute and type(value.func.value) is cst.Name \
                    and value.func.value.value in params:
                src = value.func.value.value  # `flags.copy()`
        seen[target.value] = src if target.value not in seen else None
    return {k: v for k, v in seen.items() if v is not None}
