"""Function values and generators: what a callback runs where it is called, what a loop over a generator binds.

A part of the semantic model (``model.SemanticModel`` composes it). A project function passed as a value
(``on_token=print_token``, ``callbacks=[log, partial(save, k=1)]``, ``self.log_step``, a lambda given to
a project function) has a callable kind (``kinds.callables``): a parameter or an attribute that receives
one is seeded with it (``seeds``), and calling it runs those functions there (a call-graph edge from the
call, and call sites that seed their parameters). A generator function returns what iterating it gives
(``kinds.generator``): ``for x, y in batches(device, n):`` binds what it yields.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics.steps import FuncInfo
from xlalint.semantics.syntax import last_name, positional_args

# decorators that make a generator function something else when called
_NOT_GENERATORS = frozenset({"contextmanager", "asynccontextmanager", "fixture"})


class Callables:
    """Callable kinds of function values, lambdas walked as functions, and generators' items."""

    def callable_kind(self, e):
        """``e`` as a value that a callee may call: a project function or method (``print_token``,
        ``self.log_step``, ``meter.update``), ``functools.partial`` of one with keywords only, a lambda
        walked as a function, a list of them, or a name already holding one (``kinds.callables``), else
        None."""
        t = type(e)
        if t is cst.Lambda:
            key = self._lambda_keys.get(id(e))
            return K.callables([f"{self.module_name}:{key}"]) if key is not None and key in self.funcs else None
        if t is cst.Subscript and type(e.value) is cst.Dict:
            # `{"heun": sample_heun, "euler": sample_euler}[sampler]`: a table of functions picked by a key,
            # any of them (a sampler chosen by name)
            ks = [self.callable_kind(el.value) for el in e.value.elements if type(el) is cst.DictElement]
            if ks and all(ks) and len(ks) == len(e.value.elements):
                return K.callables([c for k in ks for c in K.callable_keys(k)])
            return None
        if t in (cst.List, cst.Tuple):
            ks = [self.callable_kind(el.value) for el in e.elements]
            if ks and all(ks):
                return K.callables([c for k in ks for c in K.callable_keys(k)])
            return None
        if t is cst.Call:
            if not (self.qualname(e.func) == "functools.partial" or (
                    type(e.func) is cst.Name and e.func.value == "partial")):
                return None
            args = positional_args(e)
            if len(args) == 1 and all(a.star == "" for a in e.args):
                return self.callable_kind(args[0])  # partial(log_metric, name="loss"): its positions unchanged
            return None
        if t is cst.Name:
            f = self._lookup_func(e.value)
            if f is not None:
                return K.callables([f"{self.module_name}:{f.key}"])
            found, k = self._env_lookup(e.value)
            if found and K.callable_keys(k) is not None:
                return k
            if not found and e.value in getattr(self, "toplevel_defs", ()):
                return K.callables([f"{self.module_name}:{e.value}"])  # defined further down
        elif t is cst.Attribute:
            k = self.kind(e)
            if K.callable_keys(k) is not None:
                return k
            if type(e.value) is cst.Name and e.value.value == "self":
                cls = self.current_class()
                if cls is not None and f"{cls}.{e.attr.value}" in self.funcs:
                    return K.callables([f"{self.module_name}:{cls}.{e.attr.value}"])
                return None
            cls_key = K.instance_class(self.kind(e.value))
            if cls_key is not None:
                m = self._method_of(cls_key, e.attr.value)
                return K.callables([m]) if m is not None else None
        else:
            return None
        q = self.qualname(e)
        if q is not None and self.facts is not None and self.facts.knows(q):
            r = self.facts.resolve(q)
            if r is not None and r[0] == "func":
                return K.callables([r[1]])
        return None

    def callable_callee(self, kind) -> Optional[str]:
        keys = K.callable_keys(kind)
        return H.CALLABLE_PREFIX + "|".join(keys) if keys else None

    def walk_lambda_function(self, node: cst.Lambda) -> None:
        """A lambda passed to a project function (``on_token=lambda t: print(t.tolist())``) is a function:
        its body runs where that function calls it, with what it passes, not where it is written."""
        key = self._lambda_keys.get(id(node))
        if key is None:
            key = self._lambda_keys[id(node)] = f"{self.func.key}.<locals>.<lambda{len(self._lambda_keys)}>"
        parent = self.func if self.func is not self.top else None
        info = FuncInfo(key=key, name="<lambda>", class_key=None, node=node, parent=parent,
                        top_index=self.top_index, excluded=self.func.excluded)
        replaced = self.funcs.get(key)
        if replaced is not None:
            self._replaced.append(replaced)
        self.funcs[key] = info
        saved = (self.func, self.loop_stack, self.guards, self.cond_depth, self.no_grad_depth, self.eval_depth,
                 self.closure_depth)
        self.func, self.loop_stack, self.guards, self.cond_depth = info, [], [], 0
        self.no_grad_depth = self.eval_depth = self.closure_depth = 0
        self._bind_params(node, info)
        info.seeds = self._param_seeds(info)
        info.env.update(info.seeds)
        try:
            self.walk(node.body)
        finally:
            (self.func, self.loop_stack, self.guards, self.cond_depth, self.no_grad_depth, self.eval_depth,
             self.closure_depth) = saved

    def _yield(self, node: cst.Yield) -> None:
        """``yield x.to(device), y.to(device)``: what a loop over the generator's call binds."""
        self._emit("Yield", node)
        self.walk_children(node)
        v = node.value
        if type(v) is cst.From:
            k = self.kind(v.item)
            item, parts = K.element_of(k), K.generator_parts(k)
        elif v is None:
            item, parts = K.NOT_TENSOR, None
        else:
            item = self.kind(v)
            parts = tuple(self.kind(el.value) for el in v.elements) if type(v) is cst.Tuple and not any(
                type(el) is cst.StarredElement for el in v.elements) else None
        f = self.func
        if f.yields is None:
            f.yields = []
        f.yields.append((item, parts))

    def end_generator(self, f: FuncInfo) -> None:
        """After ``f``'s walk: a generator function returns what iterating it gives (``kinds.generator``);
        not a ``@contextmanager`` (its call is a context manager)."""
        ys = f.yields
        if ys is None or type(f.node) is not cst.FunctionDef or any(
                (last_name(d.decorator.func if type(d.decorator) is cst.Call else d.decorator) or "") in _NOT_GENERATORS
                for d in f.node.decorators):
            return
        items = {item for item, _ in ys}
        parts = {p for _, p in ys}
        item = items.pop() if len(items) == 1 else K.UNKNOWN
        f.return_kind = K.generator(item, parts.pop() if len(parts) == 1 else None)
