"""Tests the source decides: a branch that never runs because its test can only have one value.

``merge = False  # use merge-NMS`` and, later in the same function, ``if merge and n > 1:``; ``DEBUG = False`` at a
module's top and ``if DEBUG:`` in its functions; ``assert not exists(eos_token), "not supported yet"`` and,
later, ``if not exists(eos_token): continue``; ``self.reward_weights`` set to a tensor on every path of
``__init__`` and tested with ``is not None``. Each is decided as pyright narrows a declared type: from
bindings the source shows, never from what a caller might pass. A name is a constant only when it is bound
exactly once in its scope, by a literal, and never declared ``global``/``nonlocal`` elsewhere; a module whose
globals a configurator may overwrite (``exec(...)``, ``globals()``) has none. Not seen: another module setting
``mod.FLAG = True`` on a module's constant (a monkey patch), which the per-module view cannot know.

Pure functions of the syntax; ``branches.Branches`` asks them for each ``if``.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics.syntax import NODE_TYPES, child_nodes, code_of, dotted_name, last_name, own_nodes

# no value: the name is bound more than once, by a non-literal, or declared global/nonlocal somewhere
_VARIES = object()


def literal(node) -> object:
    """``_literal`` for the other parts of the model: the literal's value, or ``VARIES``."""
    return _literal(node)


VARIES = _VARIES


def _literal(node) -> object:
    """The value of ``True``/``False``/``None``, an integer, a float or a plain string literal, else _VARIES."""
    t = type(node)
    if t is cst.Name and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if t in (cst.Integer, cst.Float, cst.SimpleString):
        try:
            return node.evaluated_value
        except Exception:  # noqa: BLE001 - a literal libcst cannot evaluate: not a constant
            return _VARIES
    return _VARIES


def _scope_bindings(nodes, out: dict) -> None:
    """Record in ``out`` each name bound by ``nodes``: its literal value when bound once by ``name = literal``,
    else _VARIES."""
    for n in nodes:
        t = type(n)
        targets = ()
        value = _VARIES
        if t is cst.Assign:
            targets = [tg.target for tg in n.targets]
            if len(targets) == 1:
                value = _literal(n.value)
        elif t is cst.AnnAssign:
            targets = [n.target]
            value = _literal(n.value) if n.value is not None else _VARIES
        elif t in (cst.AugAssign, cst.For, cst.NamedExpr, cst.CompFor):
            targets = [n.target]
        elif t is cst.WithItem and n.asname is not None:
            targets = [n.asname.name]
        elif t is cst.ExceptHandler and n.name is not None:
            targets = [n.name.name]
        elif t in (cst.Import, cst.ImportFrom) and type(n.names) in (tuple, list):
            targets = [a.asname.name if a.asname is not None else a.name for a in n.names]
        elif t in (cst.FunctionDef, cst.ClassDef):
            targets = [n.name]
        elif t is cst.Del:
            targets = [n.target]
        elif t in (cst.MatchAs, cst.MatchStar) and n.name is not None:
            targets = [n.name]  # `case Point(x=0, y=y):` binds y
        for target in targets:
            for name in _names(target):
                out[name] = value if name not in out else _VARIES


def _names(target) -> list:
    if type(target) is cst.Name:
        return [target.value]
    if type(target) in (cst.Tuple, cst.List):
        return [x for e in target.elements for x in _names(e.value)]
    if type(target) is cst.StarredElement:
        return _names(target.value)
    return []


def declared_names(node) -> frozenset:
    """The names any function in ``node`` declares ``global`` or ``nonlocal`` (it may rebind them)."""
    out = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if type(n) in (cst.Global, cst.Nonlocal):
            out.update(x.name.value for x in n.names)
        if type(n) in NODE_TYPES:
            stack.extend(child_nodes(n))
    return frozenset(out)


def module_constants(module: cst.Module, declared: frozenset = frozenset()) -> dict:
    """The module's names bound once, at its top level, by a literal (``DEBUG = False``), and never rebound:
    none when the module may overwrite its globals (``exec(open("configurator.py").read())``, ``globals()``).
    ``declared``: the names some function of the module declares ``global`` or ``nonlocal`` (``declared_names``)."""
    found: dict = {}
    top = []
    for stmt in module.body:
        top.append(stmt)
        if type(stmt) not in (cst.FunctionDef, cst.ClassDef):  # their bodies are scopes of their own
            top.extend(own_nodes(stmt))
    for n in top:
        if type(n) is cst.Call and (last_name(n.func) in ("exec", "globals", "setattr", "vars")):
            return {}
    _scope_bindings(top, found)
    found = {k: v for k, v in found.items() if v is not _VARIES}
    return {k: v for k, v in found.items() if k not in declared}


def function_constants(node: cst.FunctionDef, outer: dict, enclosing=(), declared: frozenset = frozenset(),
                       memo: Optional[dict] = None) -> dict:
    """The names a function's test may read as constants: its own names bound once by a literal, and the
    module's (``outer``) that neither it nor a function it is nested in (``enclosing``) binds or takes as a
    parameter."""
    memo = {} if memo is None else memo
    local = _locals(node, memo)
    shadowed = set()
    for f in enclosing:
        shadowed.update(_locals(f, memo))
    out = {k: v for k, v in outer.items() if k not in local and k not in declared and k not in shadowed}
    out.update({k: v for k, v in local.items() if v is not _VARIES and k not in declared})
    return out


def _locals(node: cst.FunctionDef, memo: dict) -> dict:
    """A function's parameters (varying) and the names its body binds (a literal bound once, else varying),
    once per function (``memo``: id of the node -> them)."""
    found = memo.get(id(node))
    if found is not None:
        return found
    local: dict = {}
    memo[id(node)] = local
    params = node.params
    for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
        local[p.name.value] = _VARIES
    for p in (params.star_arg, params.star_kwarg):
        if isinstance(p, cst.Param):
            local[p.name.value] = _VARIES
    _scope_bindings(own_nodes(node.body), local)
    return local


def asserted(node: cst.Assert) -> tuple:
    """(the source text of what an ``assert`` proves, its truth): ``assert not exists(x)`` -> (``exists(x)``,
    False); ``assert x is None`` -> (``x is None``, True)."""
    test, truth = node.test, True
    while type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test, truth = test.expression, not truth
    return code_of(test), truth


def never_none_attributes(classdef: cst.ClassDef) -> frozenset:
    """The ``self.X`` attributes a class only ever sets to a value that cannot be None: a literal other than
    None, a display (``[]``, ``{}``), or a call of a torch function or of a class (``torch.tensor(w)``,
    ``torch.ones(n)``, ``Linear(...)``), in every method, and that the class body does not declare with a default
    (``X = None``). Read after it is set, ``self.X is None`` is False."""
    values: dict = {}
    for stmt in classdef.body.body:
        if type(stmt) is cst.SimpleStatementLine:
            for small in stmt.body:
                if type(small) in (cst.Assign, cst.AnnAssign):
                    for t in (small.targets if type(small) is cst.Assign else [small]):
                        target = t.target
                        if type(target) is cst.Name:
                            values.setdefault(target.value, []).append(None)  # a class-level default
        if type(stmt) is not cst.FunctionDef:
            continue
        for n in own_nodes(stmt.body):
            if type(n) is cst.Assign:
                for t in n.targets:
                    _note_attribute(t.target, n.value if len(n.targets) == 1 else None, values)
            elif type(n) is cst.AnnAssign:
                _note_attribute(n.target, n.value, values)
            elif type(n) in (cst.AugAssign, cst.For, cst.NamedExpr):
                _note_attribute(n.target, None, values)
            elif type(n) is cst.WithItem and n.asname is not None:
                _note_attribute(n.asname.name, None, values)
    return frozenset(k for k, vs in values.items() if vs and all(v is not None and never_none(v) for v in vs))


def _note_attribute(target, value, values: dict) -> None:
    if type(target) in (cst.Tuple, cst.List):
        for e in target.elements:
            _note_attribute(e.value, None, values)
        return
    if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self":
        values.setdefault(target.attr.value, []).append(value)


# builtins and tensor methods whose result is never None (`len(batch)`, `x.size(1)`)
_NEVER_NONE_CALLS = frozenset({"len", "int", "float", "str", "bool", "tuple", "list", "dict", "set", "range", "size"})


def never_none(value) -> bool:
    """An expression that cannot be None: a literal other than None, a display or comprehension, arithmetic or a
    comparison, ``x or <never None>``, a conditional of two such, ``x.shape[i]``, a call of a torch function, of a class (``Linear(...)``) or of ``len``/``int``/
    ``x.size`` and the like. (An attribute's every value, ``never_none_attributes``; a call's argument, which then
    decides ``param is None``: ``argument_tests``.)"""
    t = type(value)
    if t in (cst.List, cst.Dict, cst.Set, cst.Tuple, cst.ListComp, cst.DictComp, cst.SetComp, cst.GeneratorExp,
             cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.FormattedString, cst.ConcatenatedString,
             cst.BinaryOperation, cst.UnaryOperation, cst.Comparison):
        return True
    if t is cst.Name:
        return value.value in ("True", "False")
    if t is cst.BooleanOperation and type(value.operator) is cst.Or:
        return never_none(value.right)  # `max_seq_len or 576`: the default when the value is falsy
    if t is cst.IfExp:
        return never_none(value.body) and never_none(value.orelse)
    if t is cst.Subscript:
        return type(value.value) is cst.Attribute and value.value.attr.value == "shape"
    if t is cst.Call:
        name = dotted_name(value.func) or ""
        last = last_name(value.func) or ""
        return (name.startswith(("torch.", "nn.", "np.", "numpy.")) or (last[:1].isupper() and not last.isupper())
                or last in _NEVER_NONE_CALLS)
    return False


def decidable(test, out: set) -> bool:
    """The names in ``test`` that ``truth`` could decide it by (a bare name, ``not``/``and``/``or`` of one, a
    name compared with a literal or ``None``) go into ``out``; True when a ``self.X is None`` comparison is there
    too. Asked first, so that the walk computes a function's constants only where a test could use them."""
    t = type(test)
    if t is cst.Name:
        out.add(test.value)
        return False
    if t is cst.UnaryOperation:
        return decidable(test.expression, out)
    if t is cst.BooleanOperation:
        left = decidable(test.left, out)
        return decidable(test.right, out) or left
    if t is cst.Comparison and len(test.comparisons) == 1:
        sides = (test.left, test.comparisons[0].comparator)
        if any(_literal(x) is not _VARIES for x in sides):
            out.update(x.value for x in sides if type(x) is cst.Name and x.value not in ("True", "False", "None"))
        return type(test.comparisons[0].operator) in (cst.Is, cst.IsNot) and any(
            type(x) is cst.Attribute and type(x.value) is cst.Name and x.value.value == "self" for x in sides)
    return False


def parameters(node) -> set:
    """A function's parameter names (never constants)."""
    p = node.params
    out = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)}
    out.update(x.name.value for x in (p.star_arg, p.star_kwarg) if isinstance(x, cst.Param))
    return out


def truth(test, consts: dict, facts: dict, never_none: frozenset = frozenset()) -> Optional[bool]:
    """What ``test`` always evaluates to, as far as the source decides: ``consts`` (name -> literal),
    ``facts`` (source text -> truth, from asserts), ``never_none`` (``self.X`` attributes never None); else None."""
    t = type(test)
    if t is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = truth(test.expression, consts, facts, never_none)
        return None if inner is None else not inner
    if t is cst.BooleanOperation:
        left = truth(test.left, consts, facts, never_none)
        right = truth(test.right, consts, facts, never_none)
        if type(test.operator) is cst.And:
            return False if False in (left, right) else True if left is True and right is True else None
        return True if True in (left, right) else False if left is False and right is False else None
    known = facts.get(code_of(test)) if facts else None
    if known is not None:
        return known
    if t is cst.Name:
        if test.value in consts:
            return bool(consts[test.value])
        return {"True": True, "False": False, "None": False}.get(test.value)
    if t is cst.Comparison and len(test.comparisons) == 1:
        op = type(test.comparisons[0].operator)
        left, right = test.left, test.comparisons[0].comparator
        if op in (cst.Is, cst.IsNot) and type(right) is cst.Name and right.value == "None":
            is_none = _is_none(left, consts, never_none)
            if is_none is not None:
                return is_none if op is cst.Is else not is_none
        if op in (cst.Equal, cst.NotEqual):
            a, b = _value(left, consts), _value(right, consts)
            if a is not _VARIES and b is not _VARIES and type(a) is type(b):
                return (a == b) if op is cst.Equal else (a != b)
    return None


def _is_none(node, consts: dict, never_none: frozenset) -> Optional[bool]:
    if type(node) is cst.Name and node.value in consts:
        return consts[node.value] is None
    if type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == "self" \
            and node.attr.value in never_none:
        return False
    return None


def _value(node, consts: dict) -> object:
    if type(node) is cst.Name and node.value in consts:
        return consts[node.value]
    if type(node) is cst.Name:
        return _VARIES
    return _literal(node)

