"""Small questions about libcst syntax that every part of the analysis asks (no inference here)."""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Optional

import libcst as cst

_SKIP_FIELD_PREFIXES = (
    "whitespace", "lpar", "rpar", "leading_lines", "lines_after", "comma", "semicolon", "equal",
    "colon", "dot", "operator", "header", "footer", "newline", "star", "asynchronous", "lbrace",
    "rbrace", "lbracket", "rbracket", "trailing", "first_line", "empty_lines", "indent", "encoding",
    "default_indent", "default_newline", "has_trailing_newline", "start", "end", "conversion",
    "relative", "type_parameters", "posonly_ind", "arrow",
)
FIELDS: dict[type, tuple[str, ...]] = {}


def _node_types() -> frozenset:
    out, todo = set(), [cst.CSTNode]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return frozenset(out)


# every libcst node class: ``type(v) in NODE_TYPES`` is ``isinstance(v, cst.CSTNode)`` without the ABC's
# instance check, which the walk would pay on every field of every node (a fifth of its time). A leaf
# class is tested as ``type(v) is cst.Name`` for the same reason: libcst's parser makes no subclasses.
NODE_TYPES = _node_types()


def child_fields(tp: type) -> tuple[str, ...]:
    f = FIELDS.get(tp)
    if f is None:
        f = FIELDS[tp] = tuple(
            x.name for x in dataclasses.fields(tp) if not x.name.startswith(_SKIP_FIELD_PREFIXES)
        )
    return f


def child_nodes(node) -> list:
    """``node.children`` without libcst's visitor (which rebuilds every child): the nodes in its fields,
    whitespace left out."""
    out = []
    for f in child_fields(type(node)):
        v = getattr(node, f)
        if type(v) in NODE_TYPES:
            out.append(v)
        elif type(v) in (tuple, list):
            out.extend(c for c in v if type(c) in NODE_TYPES)
    return out


def contains(tree, node) -> bool:
    """``node`` is ``tree`` or in it (by identity)."""
    stack = [tree]
    while stack:
        t = stack.pop()
        if t is node:
            return True
        stack.extend(child_nodes(t))
    return False


def names_in(node) -> set:
    """Every name read or written anywhere in ``node``'s subtree."""
    out, stack = set(), [node]
    while stack:
        n = stack.pop()
        if type(n) is cst.Name:
            out.add(n.value)
        elif type(n) in NODE_TYPES:
            stack.extend(child_nodes(n))
    return out


def own_nodes(block):
    """Every node under ``block``, the bodies of nested functions, classes and lambdas left out (what runs
    when the block runs)."""
    stack = list(child_nodes(block)) if type(block) in NODE_TYPES else []
    while stack:
        n = stack.pop()
        if type(n) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        yield n
        stack.extend(child_nodes(n))


def ends_with_break(block) -> bool:
    """The block's last statement ends with ``break``."""
    stmts = getattr(block, "body", ())
    last = stmts[-1] if stmts else None
    return type(last) is cst.SimpleStatementLine and bool(last.body) and type(last.body[-1]) is cst.Break


def runs_once_at_most(body) -> bool:
    """A loop body that ends with a ``break`` no ``continue`` of its own skips: the loop runs one iteration at
    most (``for x, y in loader: print(model(x)); break``, a look at one batch)."""
    if not ends_with_break(body):
        return False
    stack = list(body.body)
    while stack:
        n = stack.pop()
        if type(n) is cst.Continue:
            return False
        if type(n) in (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue  # a nested loop's `continue` is its own
        stack.extend(child_nodes(n))
    return True


def target_names(target) -> list:
    """The names an assignment or ``for`` target binds: ``x``, ``(a, (b, c))`` (not attributes, items)."""
    if type(target) is cst.Name:
        return [target]
    if type(target) in (cst.Tuple, cst.List):
        return [n for e in target.elements for n in target_names(e.value)]
    return []


def bindings(block) -> list:
    """(target, value) of every binding in ``block``, nested functions, classes and lambdas left out: the
    value bound when it is a plain assignment to one target (``x = v``, ``x: T = v``), else None (a ``for``
    or ``with`` target, ``+=``, ``:=``, one of several targets or unpacked)."""
    out, stack = [], [block]
    while stack:
        n = stack.pop()
        t = type(n)
        if t in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if t is cst.Assign:
            one = len(n.targets) == 1 and type(n.targets[0].target) is cst.Name
            out.extend((tg.target, n.value if one else None) for tg in n.targets)
        elif t is cst.AnnAssign:
            out.append((n.target, n.value))
        elif t in (cst.AugAssign, cst.For, cst.NamedExpr):
            out.append((n.target, None))
        elif t is cst.WithItem and n.asname is not None:
            out.append((n.asname.name, None))
        stack.extend(child_nodes(n))
    return out


def assigned_names(block) -> set:
    """The names assigned anywhere in ``block`` (assignments, ``for`` and ``with`` targets, ``:=``), nested
    functions, classes and lambdas left out."""
    return {x.value for target, _ in bindings(block) for x in target_names(target)}


def root_name(expr) -> Optional[str]:
    """The name an expression reaches through subscripts, attributes and method calls: ``batch`` of
    ``batch["x"]``, ``batch.x[0]``, ``batch["len"].max()``, ``ema.model``; None for anything else."""
    while True:
        t = type(expr)
        if t is cst.Name:
            return expr.value
        if t in (cst.Subscript, cst.Attribute):
            expr = expr.value
        elif t is cst.Call and type(expr.func) is cst.Attribute:
            expr = expr.func.value
        else:
            return None


def dotted_name(node) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    parts = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


def last_name(node) -> Optional[str]:
    """The last identifier of a Name/Attribute/Call chain: ``self.optimizer`` -> ``optimizer``."""
    if type(node) is cst.Call:
        node = node.func
    if type(node) is cst.Attribute:
        return node.attr.value
    if type(node) is cst.Name:
        return node.value
    return None


def string_value(node) -> Optional[str]:
    """The value of a string literal (not a bytes one), else None."""
    if type(node) is not cst.SimpleString:
        return None
    v = node.value
    q = v[0]
    if (q == "'" or q == '"') and "\\" not in v and "\r" not in v:
        # no prefix, no escape, no newline to normalise: the text between the quotes (libcst's
        # evaluated_value asks CPython's parser, once per literal the rules look at)
        n = 3 if len(v) >= 6 and v[1] == q and v[2] == q else 1
        return v[n:-n]
    try:
        value = node.evaluated_value
    except Exception:  # noqa: BLE001 - odd prefixes
        return None
    return value if isinstance(value, str) else None


def keyword_arg(call: cst.Call, name: str):
    for a in call.args:
        if a.keyword is not None and a.keyword.value == name:
            return a.value
    return None


def positional_args(call: cst.Call) -> list:
    return [a.value for a in call.args if a.keyword is None and not a.star]


def positional_params(func: cst.FunctionDef) -> list:
    """The names of a function's parameters a call can pass by position, in order (``self`` included)."""
    ps = func.params
    return [p.name.value for p in (*ps.posonly_params, *ps.params)]


def argument_for(call: cst.Call, position: int, name: str):
    """What ``call`` passes for the parameter at ``position`` (counted among the call's positional arguments)
    named ``name``: its positional argument there, else its ``name=`` keyword, else None (its default). Not
    for a call with ``*args``/``**kwargs``: where they land is not known."""
    positional = [a.value for a in call.args if a.keyword is None]
    if 0 <= position < len(positional):
        return positional[position]
    return next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)


_WORD_SPLIT = re.compile(r"[_\W]+")


def name_words(name: str) -> tuple[str, ...]:
    """The lower-case words of an identifier (``trainLoss_2`` -> ``("trainloss", "2")``). Asked for the same
    few thousand names again and again (every call's callee, every parameter): cached, unless the name
    is long enough for the cache to hold much memory (a generated file's)."""
    return _name_words(name) if len(name) <= 64 else _split_words(name)


def _split_words(name: str) -> tuple[str, ...]:
    return tuple(w for w in _WORD_SPLIT.split(name.lower()) if w)


_name_words = functools.lru_cache(maxsize=4096)(_split_words)



def code_of(node) -> str:
    try:
        return cst.Module(body=[]).code_for_node(node).strip()
    except Exception:  # noqa: BLE001
        return "N"


def is_shape(value) -> bool:
    """``x.shape``, ``x.size()``, or a slice of them (``x.shape[:2]``): a tuple of Python ints."""
    if type(value) is cst.Subscript:
        value = value.value
    if type(value) is cst.Attribute:
        return value.attr.value == "shape"
    return (type(value) is cst.Call and not value.args and type(value.func) is cst.Attribute
            and value.func.attr.value == "size")



def mode_before(block, target) -> Optional[str]:
    """``"eval"`` or ``"train"``: the mode the last ``x.eval()`` / ``x.train()`` statement run on the way to the
    statement ``target`` inside ``block`` (a list of statements) set, in its own block or an enclosing one
    (``model.eval()`` then ``for x, y in loader:``), else None. Nested functions and classes are not entered."""
    mode = None
    for stmt in block:
        if stmt is target:
            return mode
        t = type(stmt)
        if t is cst.SimpleStatementLine:
            for small in stmt.body:
                m = _mode_call(small.value) if type(small) is cst.Expr else None
                mode = m or mode
            continue
        if t in (cst.FunctionDef, cst.ClassDef) or not contains(stmt, target):
            continue
        for inner in _inner_blocks(stmt):
            if contains(inner, target):
                found = mode_before(inner.body if type(inner) is cst.IndentedBlock else [inner], target)
                return found or mode
        return mode
    return mode


def _mode_call(e) -> Optional[str]:
    """``x.eval()`` -> "eval"; ``x.train()``, ``x.train(True)`` -> "train"; ``x.train(False)`` -> "eval"."""
    if type(e) is not cst.Call or type(e.func) is not cst.Attribute:
        return None
    meth = e.func.attr.value
    if meth == "eval" and not e.args:
        return "eval"
    if meth == "train" and len(e.args) <= 1:
        if not e.args:
            return "train"
        v = e.args[0].value
        if type(v) is cst.Name and v.value in ("True", "False"):
            return "train" if v.value == "True" else "eval"
    return None


def _inner_blocks(stmt) -> list:
    """The statement blocks a compound statement holds (its body, else branches, handlers, finally)."""
    out = []
    for name in ("body", "orelse", "finalbody"):
        part = getattr(stmt, name, None)
        if part is None:
            continue
        if type(part) in (cst.Else, cst.If, cst.Finally):
            out.extend([part.body] if type(part) is not cst.If else [part])
        elif type(part) is cst.IndentedBlock or type(part) is cst.SimpleStatementSuite:
            out.append(part)
    out.extend(h.body for h in getattr(stmt, "handlers", ()))
    return out


def measured_lengths(test) -> dict:
    """name -> dimension of the lengths an expression reads: ``x.shape[1]``, ``x.size(1)`` (1), ``len(x)`` (0)
    (``while prefix.shape[1] < T:``). Only literal dimensions."""
    out: dict = {}
    stack = [test]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is cst.Subscript and type(n.value) is cst.Attribute and n.value.attr.value == "shape" \
                and type(n.value.value) is cst.Name and len(n.slice) == 1 and type(n.slice[0].slice) is cst.Index \
                and type(n.slice[0].slice.value) is cst.Integer:
            out.setdefault(n.value.value.value, int(n.slice[0].slice.value.value))
        elif t is cst.Call and type(n.func) is cst.Attribute and n.func.attr.value == "size" \
                and type(n.func.value) is cst.Name and len(n.args) == 1 and type(n.args[0].value) is cst.Integer:
            out.setdefault(n.func.value.value, int(n.args[0].value.value))
        elif t is cst.Call and type(n.func) is cst.Name and n.func.value == "len" and len(n.args) == 1 \
                and type(n.args[0].value) is cst.Name:
            out.setdefault(n.args[0].value.value, 0)
        if t in NODE_TYPES:
            stack.extend(child_nodes(n))
    return out
