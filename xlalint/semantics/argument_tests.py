"""Branches a caller's arguments decide: ``if box_reg_loss_type == "diou":`` in a function that one caller
calls with ``box_reg_loss_type="giou"`` never runs from that caller.

The walk notes, for each branch of a function, the tests it makes of the function's own parameters (a
parameter the body never binds again) against literals (``param == "diou"``, ``param is None``, ``if
param:``), and for each call site the literal values it passes. When the steps ask how often a line runs
(``steps.Steps.function_frequency``), a call site whose literals make one of the line's tests false is not a
way the line runs: the frequency, and the path its message names, come from the other call sites (a caller
that passes a variable, ``self.box_reg_loss_type``, may take the branch). As pyright narrows a declared
literal type at a call, from what the source shows: an argument that is not a literal decides nothing.

A test is a tuple ``(name, index, default, op, value)``: the parameter's name, its position among the
positional parameters after ``self``/``cls`` (None: keyword-only), its default (``NO_DEFAULT`` when it has no
literal one), ``op`` one of ``==``, ``!=``, ``truthy``, ``falsy``, and the literal. A call's arguments are a
tuple of ``(key, known, value)``: a parameter name or a position, whether the argument is a literal, and
the literal; ``("*", True, True)`` when the call unpacks ``*args``/``**kwargs`` (a parameter it does not name
may still be given). An argument that is no literal but can never be None (``maxlen=x.shape[1]``, ``n + 1``,
``len(batch)``, a float) is known as ``NOT_NONE``: it decides ``param is None`` and nothing else. Plain data,
kept in the project summaries.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import constants
from xlalint.semantics.syntax import assigned_names

NO_DEFAULT = "<no default>"
NOT_NONE = "<not None>"  # an argument that is no literal and never None (constants.never_none)
_VARIES = constants.VARIES
_STAR = "*"


def literal(node) -> object:
    """``True``/``False``/``None``, an integer (``-1`` too) or a plain string literal (``constants.literal``: the
    same literals a constant is bound to), else ``_VARIES``; a float decides no equality test."""
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus and type(node.expression) is cst.Integer:
        inner = literal(node.expression)
        return -inner if isinstance(inner, int) else _VARIES
    value = constants.literal(node)
    return value if value is None or isinstance(value, (int, str)) else _VARIES


def parameters_until_bound(node: cst.FunctionDef) -> dict:
    """name -> (position or None, literal default, until): ``until`` None when the body never binds the parameter
    again, else how many of the body's first statements run before one that binds it (a test in one of them sees
    the argument: ``int(cache_position[0]) if cache_position is not None else ...`` above ``if cache_position is
    None: cache_position = torch.arange(...)``)."""
    p = node.params
    positional = [*p.posonly_params, *p.params]
    if positional and positional[0].name.value in ("self", "cls"):
        positional = positional[1:]
    out = {}
    for i, param in enumerate(positional):
        out[param.name.value] = (i, _default(param))
    for param in p.kwonly_params:
        out[param.name.value] = (None, _default(param))
    rebound = assigned_names(node.body) & set(out)
    until: dict = {}
    if rebound:
        for i, stmt in enumerate(getattr(node.body, "body", ())):
            for name in (assigned_names(stmt) & rebound) - set(until):
                until[name] = i
    return {k: (*v, until.get(k, 0) if k in rebound else None) for k, v in out.items()}


def _default(param: cst.Param) -> object:
    if param.default is None:
        return NO_DEFAULT
    value = literal(param.default)
    return NO_DEFAULT if value is _VARIES else value


def tests_of(test, params: dict, negate: bool = False) -> tuple:
    """What ``test`` (or its negation) being true says of ``params`` (the parameters holding their arguments at
    the test: ``Branches.fixed_parameters``, from ``parameters_until_bound``): the tests a
    branch's body runs under. ``a and b`` holds both (its negation says nothing); ``not a`` flips."""
    t = type(test)
    if t is cst.UnaryOperation and type(test.operator) is cst.Not:
        return tests_of(test.expression, params, not negate)
    if t is cst.BooleanOperation:
        if type(test.operator) is (cst.Or if negate else cst.And):
            return tests_of(test.left, params, negate) + tests_of(test.right, params, negate)
        return ()
    if t is cst.Name and test.value in params:
        return (_test(test.value, params, "falsy" if negate else "truthy", None),)
    if t is not cst.Comparison or len(test.comparisons) != 1:
        return ()
    comp = test.comparisons[0]
    left, right, op = test.left, comp.comparator, type(comp.operator)
    if type(left) is not cst.Name or left.value not in params:
        left, right = right, left
    if type(left) is not cst.Name or left.value not in params:
        return ()
    value = literal(right)
    if value is _VARIES:
        return ()
    if op in (cst.Equal, cst.Is):
        equal = True
    elif op in (cst.NotEqual, cst.IsNot):
        equal = False
    else:
        return ()
    if op in (cst.Is, cst.IsNot) and value is not None and not isinstance(value, bool):
        return ()
    return (_test(left.value, params, "==" if equal != negate else "!=", value),)


def _test(name: str, params: dict, op: str, value) -> tuple:
    index, default = params[name]
    return (name, index, default, op, value)


def call_arguments(call: cst.Call) -> tuple:
    """What a call passes: ``((key, known, value), ...)`` (see the module's docstring)."""
    out = []
    position = 0
    star = False
    for a in call.args:
        if a.star:
            star = True
            continue
        if a.keyword is not None:
            key = a.keyword.value
        elif star:
            continue  # after `*args`, a positional argument's position is unknown
        else:
            key, position = position, position + 1
        value = literal(a.value)
        if value is _VARIES and constants.never_none(a.value):
            value = NOT_NONE
        out.append((key, True, value) if value is not _VARIES else (key, False, None))
    if star:
        out.append((_STAR, True, True))
    return tuple(out)


def compatible(tests: tuple, args: Optional[tuple]) -> bool:
    """Whether a call site passing ``args`` (None: not known) may run a line under ``tests``."""
    if not tests or args is None:
        return True
    given = {k: (known, v) for k, known, v in args}
    star = _STAR in given
    for name, index, default, op, value in tests:
        found = given.get(name) or (given.get(index) if index is not None else None)
        if found is not None:
            known, passed = found
            if not known:
                continue  # a variable: it may take the branch
        elif star or default == NO_DEFAULT:
            continue  # an unpacked container may give it
        else:
            passed = default
        if not _holds(op, passed, value):
            return False
    return True


def _holds(op: str, passed, value) -> bool:
    if passed == NOT_NONE:  # known only not to be None
        return op == "!=" if value is None and op in ("==", "!=") else True
    if op == "truthy":
        return bool(passed)
    if op == "falsy":
        return not passed
    same = passed == value and type(passed) is type(value)
    return same if op == "==" else not same
