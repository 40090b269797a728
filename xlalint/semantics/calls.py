"""Calls: what each call runs, the call sites it records, and the parameters they seed.

A part of the semantic model (``model.SemanticModel`` composes it): for every call the walk reaches, the
function it runs (``callee_key``: a function of this module, ``@`` and a function or method of another
project module, or a dispatched hook), the step marks it makes (``optimizer.step()``, ``xm.mark_step()``,
a barrier), the call with its context for the call graph (``steps``), and the kinds of its arguments per
call site, from which the parameters of the callee are seeded (``seeds``, and ``project`` across modules).
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from xlalint.semantics import argument_tests
from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import seeds as S
from xlalint.semantics import tables as T
from xlalint.semantics.steps import FuncInfo
from xlalint.semantics.syntax import dotted_name, keyword_arg, last_name, positional_args, positional_params

UNRESOLVED = object()  # the model's _callee_memo: the callee of the call being heard is not resolved yet


class CallSites:
    """Call sites, callee resolution and parameter seeds."""

    def note_formatting(self, expr, dunders=T.FORMAT_DUNDERS[1:]) -> None:
        """``expr`` is formatted here (``f"{meter}"``, ``print(meter)``, ``str(meter)``): when it is an
        object of a project class, its first method of ``dunders`` that exists runs here, as often as
        this line (a call-graph edge; its findings say "called from train.py:51")."""
        cls_key = K.instance_class(self.kind(expr))
        if cls_key is None:
            return
        for d in dunders:
            target = self._method_of(cls_key, d)
            if target is not None:
                break
        else:
            return
        mod, _, local = target.partition(":")
        callee = local if mod == self.module_name and local in self.funcs else "@" + target
        ctx = self.step_context()
        self.func.calls.append((callee, ctx))
        if callee[0] == "@":
            self._site_refs[id(ctx)] = (None, expr, self.top_index)
        if self.loop_stack:
            self._note_loop_call(callee)

    def _note_loop_call(self, callee: str) -> None:
        """``callee`` is called in the innermost loop's own body; on every iteration when no ``if`` of the body
        is around the call."""
        loop = self.loop_stack[-1]
        loop.calls.append(callee)
        if self.cond_depth == loop.cond_depth:
            loop.every_calls.append(callee)

    def is_builtin(self, func, name: str) -> bool:
        """``func`` is the builtin ``name``: not shadowed by an import or a def in this file."""
        return (
            type(func) is cst.Name
            and func.value == name
            and name not in self.imports
            and self._lookup_func(name) is None
        )

    def _note_call(self, node: cst.Call, q: Optional[str]) -> None:
        func = node.func
        step = False  # marks a training step (a loop doing it is a step loop)
        barrier = False  # ends the step's graph (sync, mark_step)
        trains = False  # backward() or an optimizer step, as opposed to a bare barrier
        if q in T.STEP_FUNCTIONS:
            step = True
            barrier = T.STEP_FUNCTIONS[q]
            if q.endswith("optimizer_step"):
                b = keyword_arg(node, "barrier")
                barrier = type(b) is cst.Name and b.value == "True"
                trains = True
        elif type(func) is cst.Attribute:
            meth = func.attr.value
            recv = last_name(func.value) or ""
            if meth in T.STEP_METHODS_ANY_RECEIVER:
                step = trains = True
                if type(func.value) is cst.Name and self.kind(func.value) is K.UNKNOWN and not node.args:
                    # `loss = model.get_loss(x); loss.backward()`: what is backpropagated is a device tensor
                    self._bind_name(func.value.value, K.TENSOR)
            elif meth == "step" and any(h in recv.lower() for h in T.STEP_RECEIVER_HINTS) and (
                not node.args or "scaler" in recv.lower()
            ):
                step = trains = True  # optimizer.step(), scaler.step(optimizer)
            elif meth in ("mark_step", "optimizer_step") and recv in ("xm", "xla_model"):
                step = True
                barrier = meth == "mark_step"
                trains = meth == "optimizer_step"
            elif meth == "sync" and recv == "torch_xla":
                step = barrier = True
        if not self.loop_stack and self.func is not self.top and _sets_up(q, func):
            self.func.sets_up = True
        if q in T.COMPILE_WRAPPERS:
            for a in positional_args(node)[:1]:
                n = dotted_name(a)
                if n:
                    self.compiled_names.add(n)
        self._note_hot(node, func)
        callee = self.callee_key(func)
        ctx = self.step_context(argument_tests.call_arguments(node) if callee is not None else None)
        if callee is not None and (not self._rewalking_quietly or callee.startswith(H.CALLABLE_PREFIX)):
            # a callback's call is known only once its parameter is (a walk again): recorded then too
            self._record_call_site(callee, node, func)
        forward = self.module_forward_key(func) if callee is None or callee not in self.funcs else None
        if forward is not None and not self._rewalking_quietly and not self.func.excluded:
            # `self.attn(h, start_pos)`: what it passes seeds the forward's parameters (no call-graph edge:
            # a forward runs every step already); a unit test's CPU tensors say nothing of the real callers
            self._record_call_site(forward, node, func, demo=self.func is self.top)
        if step:
            if self.loop_stack:
                loop = self.loop_stack[-1]
                loop.direct_step_call = True
                loop.trains = loop.trains or trains
            else:
                self.func.step_call_outside_loops = True
                self.func.barrier_outside_loops = self.func.barrier_outside_loops or barrier
                self.func.trains_outside_loops = self.func.trains_outside_loops or trains
        if callee is not None:
            self.func.calls.append((callee, ctx))
            if callee[0] == "@" or ("." in callee and callee not in self.funcs):
                text = dotted_name(node.func) or "?"
                ordinal = self._site_ordinals.get(id(node))
                if ordinal is None:
                    ordinal = self._site_ordinals[id(node)] = self._site_counts.get(text, 0)
                    self._site_counts[text] = ordinal + 1
                self._site_refs[id(ctx)] = (text, ordinal)
            if self.loop_stack:
                self._note_loop_call(callee)
        if self.closure_depth == 0 and (barrier or callee is not None):
            point = [self.seq, None if barrier else callee, None]
            (self.loop_stack[-1] if self.loop_stack else self.func).sync_points.append(point)
            self._block_syncs[-1].append(point)

    def _record_call_site(self, callee: str, node: cst.Call, func, demo: bool = False) -> None:
        """``demo``: a model run at a module's top level (`preds = v(torch.randn(1, 3, 256, 256))` under `if
        __name__ == "__main__":`): its host tensors are a smoke test's, and say nothing of the real callers; nor
        do a unit test module's calls (`GRPOTrainer.get_high_entropy_mask(mock, cpu_entropies, ...)`) of the
        project's functions (its own helpers still learn from them)."""
        if self.top.excluded and callee[:1] == "@":
            return
        pos, kw = [], {}
        for a in node.args:
            if a.star == "*":
                return  # f(*args): positions unknown
            k = self.kind(a.value)
            if demo and k in (K.CPU_TENSOR, K.CPU_TENSORS):
                k = K.UNKNOWN
            if k is K.UNKNOWN or k == K.NOT_TENSOR:
                k = self.callable_kind(a.value) or k  # `on_token=print_token`: the callee may call it
            elif k == K.MODULE:
                k = self._module_of_class(a.value)  # `train_fn(model, ...)`: which forward `model(...)` runs there
            if a.star == "**":  # f(**losses): only the callee's **kwargs learns from it (_param_seeds)
                if "**" not in kw or k in K.HOLDS_DEVICE_TENSOR:
                    kw["**"] = k
            elif a.keyword is None:
                pos.append(k)
            else:
                kw[a.keyword.value] = k
        via_self = type(func) is cst.Attribute
        self.call_sites.setdefault(callee, []).append((self.func.key, pos, kw, via_self))
        if callee.startswith(H.CALLABLE_PREFIX):
            self.callable_sites_added = True
            for local in self._local_targets(callee):  # this module's callbacks learn from it
                self.call_sites.setdefault(local, []).append((self.func.key, pos, kw, False))

    def _module_of_class(self, e):
        """A module argument's kind for a call site: of its project class when the source shows it."""
        cls = self.module_class_of(e)
        if cls is None:
            return K.MODULE
        return K.module_of(cls[1:] if cls[0] == "@" else f"{self.module_name}:{cls}")

    def callee_key(self, func) -> Optional[str]:
        """The function a call runs: a key of this module (``helper``, ``Cls.meth``), or ``@`` and the
        name of a function of another project module (``@pkg.losses.masked_ce``,
        ``@pkg.core:Trainer.step`` for a method of an object of a known class), or None."""
        memo = self._callee_memo
        if memo is not None and memo[0] is func:
            if memo[1] is UNRESOLVED:
                memo[1] = self._resolve_callee(func)
            return memo[1]
        return self._resolve_callee(func)

    def _resolve_callee(self, func) -> Optional[str]:
        if type(func) is cst.Name:
            f = self._lookup_func(func.value)
            if f is None and func.value in getattr(self, "toplevel_defs", ()):
                found, _ = self._env_lookup(func.value)
                return func.value if not found else None  # defined further down this file
            if f is not None:
                return f.key
            c = self.classes.get(func.value)
            if c is not None and not c["module"] and f"{func.value}.__init__" in self.funcs:
                return f"{func.value}.__init__"  # ProgressMeter(n, [top1, top5]): its __init__ runs here
            found, k = self._env_lookup(func.value)
            if found and K.callable_keys(k) is not None:
                return self.callable_callee(k)  # `on_token(nxt)` with a callback parameter
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            cls = self.current_class()
            if cls is not None:
                held = self.classes.get(cls, {}).get("func_attrs", {}).get(func.attr.value)
                if held is not None and f"{cls}.{func.attr.value}" not in self.funcs:
                    return held  # `self.neg_loss = _neg_loss` in __init__, called as `self.neg_loss(out, t)`
                if f"{cls}.{func.attr.value}" not in self.funcs:
                    k = self.classes.get(cls, {}).get("attrs", {}).get(func.attr.value)
                    if K.callable_keys(k) is not None:
                        return self.callable_callee(k)  # `self.on_step(loss)`: a callback given to __init__
                return f"{cls}.{func.attr.value}"
        if type(func) is cst.Attribute and func.attr.value == "apply" and type(func.value) is cst.Name and (
                func.value.value in getattr(self, "function_classes", ())
                or self.classes.get(func.value.value, {}).get("autograd")):
            return f"{func.value.value}.forward"  # `RankSort.apply(logits, t)`: an autograd.Function's forward
        if type(func) is cst.Attribute:  # meter.update(loss) on an object of a class of this file
            mod, _, cls = (K.instance_class(self.kind(func.value)) or "").partition(":")
            if mod == self.module_name and f"{cls}.{func.attr.value}" in self.funcs:
                return f"{cls}.{func.attr.value}"
            key = self.module_method_key(func)
            if key is not None:
                return key  # `self.policy_old.act(state)` with `self.policy_old = ActorCritic(...)`
        if self.facts is None:
            return self._dispatched_hook(func)
        q = self.qualname(func)
        if q is not None:
            if not self.facts.knows(q):
                return None
            r = self.facts.resolve(q)
            if r is None and q.endswith(".apply"):
                # `RankSort.apply(...)` of an autograd.Function imported from another module: its forward
                fwd = self.facts.resolve(q[: -len("apply")] + "forward")
                if fwd is not None and fwd[0] == "func":
                    return "@" + q[: -len("apply")] + "forward"
            if r is not None and r[0] == "class":  # a constructor of a plain class runs its __init__
                cls_key = K.instance_class(self._project_call_kind(q))
                if cls_key is not None:
                    return f"@{cls_key}.__init__"
            return "@" + q
        if type(func) is cst.Attribute:
            cls_key = K.instance_class(self.kind(func.value))
            if cls_key is not None:
                return f"@{cls_key}.{func.attr.value}"
        return self._dispatched_hook(func)

    def _dispatched_hook(self, func) -> Optional[str]:
        """``cb.on_step_end(self)`` on an object of unknown class: the project's callback methods of that
        name (hot_loops.DISPATCHED_HOOKS)."""
        if type(func) is cst.Attribute and func.attr.value in H.DISPATCHED_HOOKS and self.kind(func.value) is K.UNKNOWN:
            return H.DISPATCH_PREFIX + func.attr.value
        return None

    def _param_seeds(self, f: FuncInfo, full: bool = True) -> dict:
        """Kinds for ``f``'s unknown parameters from what its callers pass: in this file and in other
        modules (``full``), or only in other modules (the first walk of ``f``). In a project, the
        question and its answer go with the walk's reads (``seeds.same_seeds``)."""
        node = f.node
        if type(node) not in (cst.FunctionDef, cst.Lambda):
            return {}
        shape = self._seed_shape(f, node, full)
        facts = self.facts
        if facts is None:
            return S.seeds(shape, [], list, self._known_param(f))
        gkey = f"{self.module_name}:{f.key}"
        out = S.seeds(shape, facts.sites(gkey), lambda: facts.vetoes(gkey), self._known_param(f))
        facts.note_seeds(gkey, shape, out)
        return out

    def _known_param(self, f: FuncInfo) -> Callable[[str], bool]:
        """Whether the walk knows a name's kind otherwise (annotated, defaulted): not from a seed."""
        env, seeds = f.env, f.seeds
        return lambda name: env.get(name, K.UNKNOWN) is not K.UNKNOWN and name not in seeds

    def _seed_shape(self, f: FuncInfo, node: cst.FunctionDef, full: bool) -> S.Shape:
        """``f``'s side of its seeds (``seeds.Shape``): its parameters, and with ``full`` what this
        module's callers pass it."""
        p = node.params
        names = tuple(positional_params(node))
        # `Cls.apply(x, t)` of an autograd.Function passes x to forward(ctx, x, t)
        autograd = f.class_key is not None and self.classes.get(f.class_key, {}).get("autograd")
        offset = 1 if f.class_key is not None and names and (names[0] in ("self", "cls") or autograd) else 0
        named = names + tuple(x.name.value for x in p.kwonly_params)
        known = self._known_param(f)
        none = ({}, (), False)
        guessed = tuple(sorted(self._guessed_params.get(f.key, ())))
        shape = S.Shape(
            names, offset, named,
            p.star_kwarg.name.value if type(p.star_kwarg) is cst.Param else None,
            guessed,
            tuple(n for n in named if known(n)),
            f.class_key is not None and not self.classes.get(f.class_key, {"module": True})["module"],
            none, none, full,
            tuple(x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params)
                  if x.default is None and x.name.value in guessed))
        if full:
            own = [(pos, kw) for _c, pos, kw, _v in self.call_sites.get(f.key, ())]
            base = [(pos, kw) for _c, pos, kw, _v in self._base_sites(f)]
            shape = shape._replace(own=S.compact(S.gather(own, shape)), base=S.compact(S.gather(base, shape)))
        return shape

    def _base_sites(self, f: FuncInfo) -> list:
        """An override receives what its base classes (in this module) pass to ``self.<name>(...)``."""
        out, seen, stack = [], set(), [f.class_key] if f.class_key else []
        prefix = self.module_name + "."
        while stack:
            for b in self.classes.get(stack.pop(), {}).get("bases", ()):
                local = b[len(prefix):] if b.startswith(prefix) else None
                if local in self.classes and local not in seen:
                    seen.add(local)
                    stack.append(local)
                    out.extend(site for site in self.call_sites.get(f"{local}.{f.name}", ()) if site[3])
        return out


def _sets_up(q: Optional[str], func) -> bool:
    """The call sets a training run up (an optimizer, a loader, an accelerator: see T.SETUP_FUNCTIONS) or loads
    a model from disk (T.MODEL_LOAD_FUNCTIONS)."""
    if q is not None:
        if q in T.SETUP_FUNCTIONS or q in T.MODEL_LOAD_FUNCTIONS:
            return True
        if q.startswith(T.SETUP_FUNCTION_PREFIXES):
            last = q.rsplit(".", 1)[-1]
            return last[:1].isupper() and "." not in q[len("torch.optim."):]
    if type(func) is cst.Attribute:
        if func.attr.value in T.MODEL_LOAD_METHODS:
            return True
        hints = T.SETUP_METHODS.get(func.attr.value)
        recv = (last_name(func.value) or "").lower()
        return bool(hints) and any(h in recv for h in hints)
    return False
