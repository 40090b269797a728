"""Walks again: a function walked once more when what it receives or what it calls became better known.

A part of the semantic model (``model.SemanticModel`` composes it). After the module's walk, a function
whose parameters the module's own callers seed differently (``calls``) is walked again with those kinds;
callers of a function whose return kind changed are walked again (a bounded number of rounds); methods of
plain classes that read attributes set later (a meter's ``__str__``) are walked again with the final
attributes. A walk again replaces the function's own candidates, loops, call sites and attribute
assignments, and keeps everything else.
"""

from __future__ import annotations

import libcst as cst

from xlalint.semantics import kinds as K
from xlalint.semantics.bindings import attribute_kind
from xlalint.semantics.steps import FuncInfo


class Rewalk:
    """The module's functions walked again with better-known parameters, returns and attributes."""

    # rounds of walking callers again when what a function returns became known on its second walk
    _RETURN_ROUNDS = 2

    def _refine_params(self) -> None:
        """Re-walk the functions whose parameters turn out to be tensors, with those kinds."""
        for rnd in range(self._RETURN_ROUNDS + 1):
            self.callable_sites_added = False
            before = self._rewalk_plans()
            if rnd == self._RETURN_ROUNDS:
                break
            # what the callers now pass (their callees' parameters may be known better); a callback's
            # call recorded on a walk again: the callback learns its parameters
            # a guessed `forward` parameter that turned out a Python value re-recorded what f passes on
            # (`self.attn(h, start_pos)`): its callees learn it on the next round
            if not self._rewalk_callers(before) and not self.callable_sites_added and not self._recorded_again:
                break
        self.callable_sites_added = False
        self._rewalk_format_methods()
        if self.callable_sites_added:  # `self.on_step(loss)` in a method walked again with its attributes
            self._rewalk_plans()

    def _rewalk_plans(self) -> dict:
        """Walk again the functions whose seeds changed (module-level functions, methods, nested functions, and
        the lambdas passed as callbacks); their return kinds before, by key."""
        plans = []
        for f in list(self.funcs.values()):
            if f.node is not None:
                seeds = self._param_seeds(f)
                if seeds != f.seeds:  # the first walk had only what other modules pass
                    plans.append((f, seeds))
        before = {f.key: f.return_kind for f, _ in plans}
        recorded = False
        for f, seeds in plans:
            if self.funcs.get(f.key) is not f:
                continue  # a lambda made again by its function's walk again
            recorded |= self._rewalk_seeded(f, seeds)
        self._recorded_again = recorded
        return before

    def _rewalk_seeded(self, f: FuncInfo, seeds: dict) -> bool:
        """Walk ``f`` again with its parameters' new kinds. When a guessed ``forward`` parameter turned out a
        Python value (every caller passes an int: ``start_pos``), what ``f`` passes on changes too
        (``self.attn(h, start_pos)``): its call sites are recorded again (True), for the next round."""
        unguessed = any(k in (K.NOT_TENSOR, K.UNKNOWN) and f.seeds.get(name, K.TENSOR) != k
                        and name in self._guessed_params.get(f.key, ()) and f.name == "forward" for name, k in seeds.items())
        # a callback received that f hands on (`generate(..., callback=cb)` passing `callback=callback` to its
        # decode loop): what f passes on changes too
        forwarded = any(K.callable_keys(k) is not None and f.seeds.get(name) != k for name, k in seeds.items())
        # a parameter's module class became known (`train_fn(model, ...)`): its `model(src, trg, 0.5)` now
        # records what it passes that class's `forward`
        forwarded = forwarded or any(name.startswith(K.class_seed("")) and f.seeds.get(name) != k
                                     for name, k in seeds.items())
        # what f passes its callees is recorded anew: a parameter that became a tensor reaches the helpers
        # f hands it to (`update(preds, labels)` calling `biu(preds, labels)` in the same file); another round
        # only when what it passes changed
        prefix = f.key + ".<locals>."
        mine = lambda key: key == f.key or key.startswith(prefix)  # noqa: E731
        passed = sorted((callee, repr(r)) for callee, recs in self.call_sites.items() for r in recs if mine(r[0]))
        self._rewalk(f, seeds, record=True)
        f.seeds = seeds
        again = sorted((callee, repr(r)) for callee, recs in self.call_sites.items() for r in recs if mine(r[0]))
        return unguessed or forwarded or again != passed

    def _rewalk_format_methods(self) -> None:
        # methods of plain classes read attributes that other methods set (a meter's `__str__` what its
        # `update()` stored): walked before those were known, walk them again with the final attributes
        for key, (reads, seen) in self._format_seen.items():
            f = self.funcs.get(key)
            if f is not None and f.node is not None and self._read_attributes(f.class_key, reads)[1] != seen:
                self._rewalk(f, f.seeds)

    def _read_attributes(self, class_key: str, reads) -> tuple:
        """(``reads``, the kinds of those attributes of ``class_key`` now; all of them when ``reads`` is
        None): what a method of a plain class saw of its object."""
        attrs = self.classes[class_key]["attrs"]
        if reads is None:
            return None, dict(attrs)
        return reads, {a: attrs.get(a) for a in reads}

    def note_reads_all_attributes(self) -> None:
        """The method being walked reads every attribute of its object (``**self.__dict__``)."""
        self._attr_reads = None

    def _rewalk_callers(self, before: dict) -> bool:
        """``mask = make_mask(x)`` read ``make_mask``'s return before its parameters were known: walk the
        functions of this file that call a function whose return kind changed again, recording what they
        pass anew. True when any was walked."""
        changed = {k for k, rk in before.items() if k in self.funcs and self.funcs[k].return_kind != rk}
        if not changed:
            return False
        top = any(c in changed for c, _ in self.top.calls)
        if top:  # a script's or a notebook's loop at module level: `acc = accuracy(logits, y)`
            self._rewalk_top()
        callers = {}
        for g in self.funcs.values():
            if g.node is None or not any(c in changed for c, _ in g.calls):
                continue
            while g.parent is not None:
                g = g.parent
            if g.node is not None and g.key not in changed:
                callers[g.key] = g
        for g in callers.values():
            prefix = g.key + ".<locals>."
            for callee, recs in self.call_sites.items():
                recs[:] = [r for r in recs if r[0] != g.key and not r[0].startswith(prefix)]
            self._rewalk(g, g.seeds, record=True)
        return bool(callers) or top

    def _rewalk_top(self) -> None:
        """Walk the module's own statements again, as ``_rewalk`` walks a caller again: what they call
        returns better-known kinds now. The definitions keep their walks: a ``def`` or a class is walked
        again only as far as the module runs it (its decorators, a class's own statements)."""
        top = self.top
        prefix = top.key + ".<locals>."  # its lambdas passed as callbacks, made again by the walk
        mine = lambda key: key == top.key or key.startswith(prefix)  # noqa: E731
        for recs in self.call_sites.values():
            recs[:] = [r for r in recs if not mine(r[0])]
        self.candidates = [c for c in self.candidates if not mine(c.ctx.func.key)]
        self.loops = [lp for lp in self.loops if not mine(lp.func.key)]
        for key in [k for k in self.funcs if k.startswith(prefix)]:
            self._replaced.append(self.funcs.pop(key))
        for store in (top.env, top.periods, top.polarities, top.loop_results, top.step_counters, top.calls, top.sync_points):
            store.clear()
        top.step_call_outside_loops = top.barrier_outside_loops = top.trains_outside_loops = False
        top.runs_model = False
        self._kind_cache.clear()
        for rule in self.rules:
            rule.before_rewalk()
        saved = (self.loop_stack, self.guards, self.stmt, self.cond_depth, self.top_index, self._type_tested)
        self.loop_stack, self.guards, self.cond_depth, self._type_tested = [], [], 0, []
        self._defs_walked = True
        try:
            for i, stmt in enumerate(self.module.body):
                self.walk_top(i, stmt)
        finally:
            self._defs_walked = False
            (self.loop_stack, self.guards, self.stmt, self.cond_depth, self.top_index, self._type_tested) = saved

    def _rewalk(self, f: FuncInfo, seeds: dict, record: bool = False) -> None:
        """Walk ``f`` again with parameter kinds ``seeds``; ``record``: its call sites are recorded
        again (its callees' parameters may learn from them), else the first walk's are kept."""
        prefix = f.key + ".<locals>."
        mine = lambda fi: fi is f or fi.key.startswith(prefix)  # noqa: E731
        mine_key = lambda key: key == f.key or key.startswith(prefix)  # noqa: E731
        if record:
            for recs in self.call_sites.values():
                recs[:] = [r for r in recs if not mine_key(r[0])]
        self.candidates = [c for c in self.candidates if not mine(c.ctx.func)]
        self.loops = [lp for lp in self.loops if not mine(lp.func)]
        for key in [k for k in self.funcs if k.startswith(prefix)]:  # made again by the walk
            old = self.funcs.pop(key)
            self._replaced.append(old)  # release() breaks their cycles (their syntax with them)
            if old.seeds:
                self.carried_seeds[key] = old.seeds  # what its calls passed, for the walk that makes it again
        f.env.clear()
        f.periods.clear()
        f.polarities.clear()
        f.loop_results.clear()
        f.local_funcs.clear()
        f.step_counters.clear()
        f.calls.clear()
        f.sync_points.clear()
        f.sets_up = False
        f.step_call_outside_loops = f.barrier_outside_loops = f.trains_outside_loops = False
        f.runs_model = False
        f.return_kind = K.UNKNOWN
        f.returns_none_only = False
        f.passes = None
        f.return_parts = None
        f.return_handed = None
        f.yields = None
        self._kind_cache.clear()
        for c in self.classes.values():  # its attribute assignments are made again by the walk
            for name, entries in c.get("entries", {}).items():
                kept = [e for e in entries if not mine_key(e[2])]
                if len(kept) != len(entries):
                    entries[:] = kept
                    if kept:
                        c["attrs"][name] = attribute_kind(kept)
                    else:
                        c["attrs"].pop(name, None)
        for rule in self.rules:
            rule.before_rewalk()
        saved = (self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth,
                 self.top_index, self.closure_depth, self.error_depth)
        self.func, self.loop_stack, self.guards = f, [], self.entry_guards(f.class_key)
        self.class_key, self.stmt, self.cond_depth = f.class_key, f.node, 0
        self.top_index, self.closure_depth, self.error_depth = f.top_index, 0, 0
        self._rewalking_quietly = not record
        saved_eval, self.eval_depth = self.eval_depth, 0
        try:
            self._bind_params(f.node, f)
            f.env.update(seeds)
            self.host_params_if_moved(f.node, f)
            self.walk_block(f.node.body)
            self.end_generator(f)
        finally:
            self.eval_depth = saved_eval
            self._rewalking_quietly = False
            (self.func, self.loop_stack, self.guards, self.class_key, self.stmt, self.cond_depth,
             self.top_index, self.closure_depth, self.error_depth) = saved
