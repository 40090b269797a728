"""Which ``forward`` a call of a module runs, when the module is an object of a project class.

A part of the semantic model (``model.SemanticModel`` composes it). The kinds say only that a value is
a module (``kinds.MODULE``), not of which class; where the source shows the class, this names it:

- ``self(x)`` (or ``self.forward(x)``) in a method of a module class runs that class's ``forward``;
- ``self.attn(h, pos)`` runs the ``forward`` of the class that ``__init__`` builds into ``self.attn``
  (``self.attn = Attention(args)``; every assignment there the same class);
- ``layer(h, pos)`` in ``for layer in self.layers:`` with ``self.layers = nn.ModuleList([Block(...) for
  ...])`` (or a list of such constructors) runs ``Block``'s;
- ``model(x)`` with ``model = LM(cfg).to(device)`` the only binding of ``model`` in the function runs
  ``LM``'s (``.to``/``.eval``/``.cuda``... return the module itself);
- ``self.model(x)`` with ``self.model = model`` in ``__init__(self, model: Transformer)``, and ``model(x)`` for
  a parameter ``model: Transformer``: the annotation names the class;
- ``self.layers = nn.ModuleList()`` filled by ``self.layers.append(Block(...))``: ``Block``'s.

Anything else (a parameter without such an annotation, an attribute set from one, a name bound twice to
different classes) is not known: None. The answer is a callee key as ``CallSites.callee_key`` gives them
(``Cls.forward`` of this module, ``@pkg.mod:Cls.forward`` of another). It feeds parameter seeds (what the
callers pass ``forward``) and rules that follow values into callees (XLA009); it adds no edge to the call
graph: a module's ``forward`` already runs every step.
"""

from __future__ import annotations

import functools
from typing import Optional

import libcst as cst

from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics.syntax import NODE_TYPES, child_nodes, positional_args

# methods of a module that return the module itself
_SAME_MODULE = frozenset({"to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16",
                          "requires_grad_", "to_empty", "xpu"})
# containers of modules whose iteration gives the modules put in
_MODULE_LISTS = frozenset({"torch.nn.ModuleList"})
# every expression node type: no statement, `with` item or `except` clause is inside one (a `:=` is)
_EXPRESSIONS = frozenset(t for t in NODE_TYPES if issubclass(t, cst.BaseExpression))
_SCOPES = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp})
# a simple statement or a `with` item: what it binds is taken at the node, the rest of it is expressions
_LEAVES = frozenset({cst.WithItem} | {t for t in NODE_TYPES if issubclass(t, cst.BaseSmallStatement)})


class ModuleCalls:
    """``module_forward_key``: the ``forward`` a module call runs, from the source's constructors."""

    def module_forward_key(self, func) -> Optional[str]:
        """The callee key of the ``forward`` that calling ``func`` runs (``func(...)``), or None."""
        if type(func) is cst.Attribute and func.attr.value == "forward":
            func = func.value
        cls = self.module_class_of(func)
        if cls is None:
            return None
        if cls[0] == "@":
            return f"{cls}.forward"
        return f"{cls}.forward" if f"{cls}.forward" in self.funcs else None

    def module_method_key(self, func) -> Optional[str]:
        """``self.policy.act(state)``: the callee key of a method (not one of nn.Module's own: ``train``,
        ``to``, ``parameters``, ...; not one that runs the model, ``forward``, ``generate``, ``sample``: a call
        of those is a model run, whose result the loops around it decide) of the project class the module is
        known to be, or None."""
        if (type(func) is not cst.Attribute or func.attr.value in H.MODEL_RUN_METHODS
                or _module_own(func.attr.value)):
            return None
        if type(func.value) is cst.Name and func.value.value == "self":
            return None  # the class's own methods: callee_key resolves them
        cls = self.module_class_of(func.value)
        if cls is None:
            return None
        key = f"{cls}.{func.attr.value}"
        return key if cls[0] == "@" or key in self.funcs else None

    # ------------------------------------------------------------------ the class of a module value
    def module_class_of(self, e) -> Optional[str]:
        """A local class name (``Attention``) or ``@`` and a project-wide class key, or None."""
        if type(e) is cst.Name:
            if e.value == "self":
                cls = self.current_class()
                return cls if cls is not None and self.classes.get(cls, {}).get("module") else None
            for lp in reversed(self.loop_stack):  # `for layer in self.layers:`
                node = lp.node
                if type(node) is cst.For and type(node.target) is cst.Name and node.target.value == e.value:
                    return self._element_class(node.iter)
            return self._single_binding_class(e.value)
        if type(e) is cst.Attribute and type(e.value) is cst.Name and e.value.value == "self":
            return self._attribute_class(e.attr.value, element=False)
        return None

    def _element_class(self, it) -> Optional[str]:
        if type(it) is cst.Attribute and type(it.value) is cst.Name and it.value.value == "self":
            return self._attribute_class(it.attr.value, element=True)
        return None

    def _attribute_class(self, attr: str, element: bool) -> Optional[str]:
        """The class ``__init__`` builds into ``self.<attr>`` (``element``: of the modules in the list it
        builds there)."""
        cls = self.current_class()
        init = self.funcs.get(f"{cls}.__init__") if cls is not None else None
        if init is None or type(init.node) is not cst.FunctionDef:
            return None
        memo = self._module_class_memo
        key = (id(init.node), attr, element)
        if key not in memo:
            memo[key] = self._bound_class(init.node, ("self", attr), element)
        return memo[key]

    def _seeded_class(self, param: str) -> Optional[str]:
        gkey = self.func.env.get(K.class_seed(param))  # its seeds, as the walk applied them
        if gkey is None:
            return None
        mod, _, cls = gkey.partition(":")
        return cls if mod == self.module_name else "@" + gkey

    def _single_binding_class(self, name: str) -> Optional[str]:
        node = self.func.node
        if node is None and self.func is self.top:
            node = self.module  # a script's or a notebook's model, built at its top level
        elif type(node) is not cst.FunctionDef:
            return None
        memo = self._module_class_memo
        names = memo.get(("params", id(node)))
        if names is None and type(node) is cst.Module:
            names = memo["params", id(node)] = frozenset()
        elif names is None:
            params = node.params
            names = memo["params", id(node)] = frozenset(
                p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params))
        if name in names:
            # `def generate(model: Transformer, ...)`, or every caller passes a module of one class
            # (`train_fn(model, ...)` with `model = Seq2Seq(...).to(device)`: the parameter's class seed)
            return self._annotated_class(node, name) or self._seeded_class(name)
        key = (id(node), name, False)
        if key not in memo:
            memo[key] = self._bound_class(node, name, False)
        return memo[key]

    def _bound_class(self, node: cst.FunctionDef, name, element: bool) -> Optional[str]:
        """``_same_class`` of what ``node`` binds to ``name``. Its statements first: a class is rare, and
        only then can a ``:=`` deep in an expression (a binding otherwise than by assignment) change the
        answer, so only then are the expressions searched too."""
        bound = self._bindings_of(node, False)
        cls = self._same_class(bound.get(name), element, node)
        if cls is None and element and type(name) is tuple and bound.get(name) and all(
                _empty_list(self, v) for v in bound[name]):
            # `self.layers = nn.ModuleList()` then `self.layers.append(EncoderBlock(args))` in a loop
            return self._same_class(bound.get((*name, "+")), False, node)
        if cls is not None:
            cls = self._same_class(self._bindings_of(node, True).get(name), element, node)
        return cls

    def _bindings_of(self, node: cst.FunctionDef, expressions: bool) -> dict:
        """``_bindings(node, expressions)``, once per function: it depends on the function's syntax only
        (a function asks about each of its names in turn: one walk of its body, not one per name)."""
        memo = self._module_class_memo
        key = ("bindings", id(node), expressions)
        if key not in memo:
            memo[key] = _bindings(node, expressions)
        return memo[key]

    def _same_class(self, values, element: bool, init=None) -> Optional[str]:
        """The class every value in ``values`` constructs (a list of, with ``element``), or None. ``init``:
        the function binding them, whose annotated parameters name the class of what is passed in."""
        if not values or any(v is None for v in values):
            return None
        found = {self._constructed(v, element, init) for v in values}
        return found.pop() if len(found) == 1 else None

    def _constructed(self, v, element: bool, init=None) -> Optional[str]:
        if element:
            if type(v) is cst.Call and self.qualname(v.func) in _MODULE_LISTS and len(v.args) == 1:
                v = positional_args(v)[0] if positional_args(v) else None
            if type(v) in (cst.ListComp, cst.GeneratorExp):
                return self._constructed(v.elt, False)
            if type(v) in (cst.List, cst.Tuple) and v.elements:
                found = {self._constructed(el.value, False) for el in v.elements}
                return found.pop() if len(found) == 1 else None
            return None
        while type(v) is cst.Call and type(v.func) is cst.Attribute and v.func.attr.value in _SAME_MODULE:
            v = v.func.value
        if type(v) is cst.Name and init is not None:
            return self._annotated_class(init, v.value)
        if type(v) is not cst.Call:
            return None
        return self._module_class_named(v.func)

    def _module_class_named(self, f) -> Optional[str]:
        """The module class an expression names (``Attention``, ``model.Transformer``): a local class name or
        ``@`` and a project-wide class key, or None."""
        if type(f) is cst.Name and f.value in self.classes and f.value not in self.imports:
            return f.value if self.classes[f.value].get("module") else None
        q = self.qualname(f)
        if q is None or self.facts is None or not self.facts.knows(q):
            return None
        r = self.facts.resolve(q)
        if r is not None and r[0] == "class" and self.facts.class_is_module(r[1]):
            return "@" + r[1]
        return None

    def _annotated_class(self, node: cst.FunctionDef, name: str) -> Optional[str]:
        """The module class a parameter of ``node`` is annotated with (``def __init__(self, model:
        Transformer)``, then ``self.model = model``), or None."""
        if type(node) is not cst.FunctionDef:
            return None
        params = node.params
        for p in (*params.posonly_params, *params.params, *params.kwonly_params):
            if p.name.value == name:
                ann = p.annotation.annotation if p.annotation is not None else None
                if type(ann) is cst.SimpleString:
                    return None  # a forward reference: not resolved
                return self._module_class_named(ann) if ann is not None else None
        return None


def _bindings(func: cst.FunctionDef, expressions: bool = True) -> dict:
    """Every binding in a function's own scope: name (or ("self", attr)) -> [value, or None when it is
    bound otherwise than by a plain assignment (a loop, a ``with``, an augmented assignment)].
    ``expressions=False``: the bindings of its statements only, the expressions not searched (the
    same but for the ``:=`` in them; most of a function's nodes are expressions)."""
    out: dict = {}
    bind = functools.partial(_bind, out)
    if type(func) is cst.Module:
        stack = list(func.body)
    else:
        stack = list(func.body.body) if hasattr(func.body, "body") else []
    while stack:
        n = stack.pop()
        tp = type(n)
        if not expressions and tp in _EXPRESSIONS:
            continue
        if tp in _SCOPES:
            if tp is cst.FunctionDef or tp is cst.ClassDef:
                out.setdefault(n.name.value, []).append(None)
            continue
        if tp is cst.Assign:
            for t in n.targets:
                bind(t.target, n.value)
        elif tp is cst.AnnAssign:
            bind(n.target, n.value)
        elif tp is cst.AugAssign:
            bind(n.target, None)
        elif tp is cst.For:
            bind(n.target, None)
        elif tp is cst.WithItem and n.asname is not None:
            bind(n.asname.name, None)
        elif tp is cst.NamedExpr:
            bind(n.target, None)
        elif tp in (cst.Import, cst.ImportFrom) and not isinstance(n.names, cst.ImportStar):
            for alias in n.names:
                if alias.asname is not None:
                    bind(alias.asname.name, None)
                elif type(alias.name) is cst.Name:
                    bind(alias.name, None)
        elif tp is cst.ExceptHandler and n.name is not None:
            bind(n.name.name, None)
        elif tp is cst.Del:
            bind(n.target, None)
        elif tp is cst.Expr and type(n.value) is cst.Call:
            _appended(out, n.value)
        if not expressions and tp in _LEAVES:
            continue
        stack.extend(child_nodes(n))
    return out


def _module_own(method: str) -> bool:
    """A method every ``nn.Module`` has (``train``, ``to``, ``parameters``, ``register_buffer``): a call of it
    is the module's own, whatever the class overrides."""
    return method in H.MODULE_UTILITY_METHODS or method.startswith(H.MODULE_UTILITY_PREFIXES)


def _appended(out: dict, call: cst.Call) -> None:
    """``self.layers.append(Block(args))``: an element put into ``self.layers`` (under ("self", "layers",
    "+")); ``extend`` and other growth by a call: an element not known (None)."""
    f = call.func
    if (type(f) is cst.Attribute and f.attr.value in ("append", "extend", "insert") and type(f.value) is cst.Attribute
            and type(f.value.value) is cst.Name and f.value.value.value == "self"):
        args = positional_args(call)
        value = args[0] if f.attr.value == "append" and len(args) == 1 else None
        out.setdefault(("self", f.value.attr.value, "+"), []).append(value)


def _empty_list(calls, v) -> bool:
    """``nn.ModuleList()`` or ``[]``: a list of modules filled later by ``append``."""
    if type(v) is cst.List:
        return not v.elements
    return (type(v) is cst.Call and calls.qualname(v.func) in _MODULE_LISTS
            and (not v.args or (len(v.args) == 1 and _empty_list(calls, v.args[0].value))))


def _bind(out: dict, target, value) -> None:
    """``target`` bound to ``value`` (None: otherwise than by a plain assignment), into ``out``. A function of
    the module, not a closure of ``_bindings``: a recursive closure is a reference cycle (the function, its
    cell), which would keep ``out`` and the syntax it holds alive past the walk (``run.memory``: what survives
    a walk is frozen, never collected; on torch + torch_xla, 3.7 million nodes)."""
    if type(target) is cst.Name:
        out.setdefault(target.value, []).append(value)
    elif type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value == "self":
        out.setdefault(("self", target.attr.value), []).append(value)
    elif type(target) in (cst.Tuple, cst.List):
        for el in target.elements:
            _bind(out, el.value, None)
    elif type(target) is cst.StarredElement:
        _bind(out, target.value, None)
