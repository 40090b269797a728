"""What a module's walk gives the rest of the project: its summary and its candidates, as plain data.

A part of the semantic model (``model.SemanticModel`` composes it). ``export`` turns the walk's records
(functions, loops, contexts, classes, call sites into other modules, candidates with their positions,
fixes and ``# noqa`` marks, the rules' own project data) into dicts and lists that ``marshal`` stores and
that ``project.Facts`` and ``project.Program`` read; ``release`` then breaks the records' reference cycles so
that the tree is freed at once.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from xlalint.semantics import device_pins
from xlalint.semantics.project import seed_kind


class Export:
    """The module's summary and candidates as plain data, and the release of the walk's records."""

    def export(self, locator, noqa=None, call_lines: Optional[dict] = None) -> dict:
        """(summary, candidates) as plain data: what other modules may ask about this one, and what
        the rules found here with the context that decides how often it runs.

        ``noqa``: line -> suppressed codes (None: all); a candidate a ``# noqa`` comment suppresses is
        kept, marked (its row's last item), so that one walk serves a host that applies its own noqa
        (flake8) as well as the CLI (``engine.decide``). The positions of candidates and of calls into
        other modules are the only ones computed."""
        mod = self.module_name
        ctx_ids: dict = {}
        ctxs: list = []
        site_lines = call_lines or {}
        loop_ids = {id(lp): i for i, lp in enumerate(self.loops)}

        def callee_ref(callee: str) -> str:
            if callee[0] != "@" and callee not in self.funcs and "." in callee:
                cls = callee.rpartition(".")[0]
                if cls in self.classes:  # self.meth() inherited from a base class elsewhere
                    return f"@{mod}:{callee}"
            return callee

        def ctx_id(ctx) -> int:
            i = ctx_ids.get(id(ctx))
            if i is None:
                line = 0
                site = self._site_refs.get(id(ctx))
                if site is not None and site[0] is None:  # an implicit call (formatting): its node
                    line = locator.span(site[1], site[2], self._func_within(ctx.func))[0]
                elif site is not None:
                    lines = site_lines.get(site[0], ())
                    line = lines[site[1]] if site[1] < len(lines) else 0
                f = ctx.func
                i = ctx_ids[id(ctx)] = len(ctxs)
                ctxs.append([f.key if f is not self.top else "", [loop_ids[id(lp)] for lp in ctx.loops if id(lp) in loop_ids],
                             ctx.period, ctx.non_xla, ctx.closure or f.closure, ctx.seq, ctx.error_path, ctx.once, line,
                             ctx.eval_only, ctx.period_outside, [list(t) for t in ctx.tests],
                             None if ctx.args is None else [list(a) for a in ctx.args]])
            return i

        funcs = {}
        for key, f in self.funcs.items():
            funcs[key] = [f.name, f.class_key, f.root, f.closure, f.step_call_outside_loops, f.barrier_outside_loops,
                          f.trains_outside_loops, f.call_return_kind, [(callee_ref(c), ctx_id(x)) for c, x in f.calls],
                          [(s, callee_ref(c) if c is not None else None, u) for s, c, u in f.sync_points], f.sets_up,
                          f.runs_model, f.excluded, f.no_grad,
                          list(f.return_parts) if f.return_parts and not f.passes else None]
        top_calls = [(callee_ref(c), ctx_id(x)) for c, x in self.top.calls]
        loops = [[lp.func.key if lp.func is not self.top else "", lp.iterates_loader, lp.direct_step_call, lp.trains,
                  [callee_ref(c) for c in lp.calls], [(s, callee_ref(c) if c is not None else None, u) for s, c, u in lp.sync_points],
                  loop_ids.get(id(lp.outer)), lp.runs_model, lp.hint, lp.seq, lp.end_seq, lp.few,
                  [callee_ref(c) for c in lp.every_calls], lp.infers, lp.over_positions]
                 for lp in self.loops]
        classes = {k: [c["module"], {a: v for a, v in c["attrs"].items() if v is not None}, c.get("bases", [])]
                   for k, c in self.classes.items()}
        sites: dict = {}
        for callee, recs in self.call_sites.items():
            ref = callee_ref(callee)
            if ref[0] == "@":
                _put_sites(sites, ref, recs)
            elif ref in self.funcs and self.funcs[ref].class_key is not None:
                # `self.debug(batch)` in a base class: overrides in other modules receive what it passes
                _put_sites(sites, f"@{mod}:{ref}", [r for r in recs if r[3]])
        cands = []
        cand_ids: dict = {}
        for c in self.candidates:
            if c.when == "always" and (c.ctx.non_xla or c.ctx.error_path):
                continue
            if c.when == "custom" and c.frequency is None and not getattr(c.rule, "decides_in_project", False):
                continue
            line, col, end_line, end_col = locator.span(c.node, c.top_index, self._within(c))
            quiet = bool(noqa) and _suppressed(noqa, self._noqa_lines(locator, c, line, end_line), c.rule.code)
            fr = c.frequency
            cand_ids[id(c)] = len(cands)
            cands.append([c.rule.code, line, col, end_line, end_col, c.message, c.fix, c.when, ctx_id(c.ctx),
                          [fr.level, fr.period, fr.after_sync, fr.hot, fr.within]
                          if fr is not None and c.when == "custom" else None,
                          *self._fix_parts(locator, c), quiet])
        rules = {}
        for r in self.rules:
            data = r.export(ctx_id, lambda c: cand_ids.get(id(c)))
            if data:
                rules[r.code] = data
        summary = {"module": mod, "imports": dict(self.module_imports), "stars": list(self.star_modules),
                   "nested_imports": sorted(self.nested_imports),
                   "funcs": funcs, "top_calls": top_calls, "loops": loops, "ctxs": ctxs, "classes": classes, "sites": sites,
                   "hooks": sorted(k for k in self.hook_keys if k[0] == "@"),  # hooks defined elsewhere
                   "periodic": self.periodic, "excluded": self.top.excluded,
                   "names_xla": self.names_xla, "requires_cuda": self.requires_cuda, "cuda_only": self.cuda_only,
                   "hard_imports": self.hard_imports, "main_imports": self.main_imports, "script": self.is_script, "registers": self.registers,
                   "places": self.places_on_device, "host": self.host_module,
                   "device_params": {k: device_pins.device_params(f.node, f.device_params, f.class_key is not None)
                                     for k, f in self.funcs.items()
                                     if f.device_params and type(f.node) is cst.FunctionDef}}
        return {"summary": summary, "cands": cands, "rules": rules}

    def release(self) -> None:
        """Break the model's reference cycles once its walk is exported (functions and the contexts of
        their calls, loops and their outer loops, rules and the model): the syntax tree they hold is then
        freed by reference counting at once. Left to the cyclic collector, the whole tree (millions of
        nodes on a large module) is traversed again to find it, after every walk: about a tenth of a
        walk's cost. The model is unusable afterwards."""
        for f in [*self.funcs.values(), *self._replaced, self.top]:
            f.release()
        for x in [*self.loops, *self.candidates, *self.rules]:
            x.__dict__.clear()
        self.__dict__.clear()

    def _fix_parts(self, locator, c) -> list:
        """The message's parts a rule attached (``rules.set_parts``): the cost, and an automatic fix as
        text edits of this tree (node, replacement node -> its span and the replacement's code; a fifth
        item of the edit holds more (node, replacement) pairs in the same function, applied together)."""
        edit = getattr(c, "edit", None)
        edits, applicability, title = (), "", ""
        if edit is not None:
            node, replacement, applicability, title, *more = edit
            within = self._within(c)
            edits = tuple((*locator.span(n, c.top_index, within), self.module.code_for_node(r))
                          for n, r in ((node, replacement), *(more[0] if more else ())))
        return [getattr(c, "cost", ""), edits, applicability, title]

    def _within(self, c):
        """The function that holds candidate ``c`` (its def node, its key), for the locator."""
        return self._func_within(c.ctx.func)

    def _func_within(self, f):
        return (f.node, f.key) if f is not self.top and f.node is not None else None

    def _noqa_lines(self, locator, c, line: int, end_line: int) -> set:
        """``# noqa`` counts on the reported line, and on the first or last line of its statement."""
        lines = {line}
        if c.stmt is not None:
            sl, _, el, _ = locator.span(c.stmt, c.top_index, self._within(c))
            if type(c.stmt) in (cst.If, cst.For, cst.While, cst.With, cst.FunctionDef, cst.ClassDef):
                el = end_line  # a compound statement: its header, not its whole body
            lines |= {sl, el}
        return lines


def _put_sites(sites: dict, ref: str, recs) -> None:
    """Only the kinds that can seed a parameter (project.FactsView), each distinct site once."""
    out = sites.setdefault(ref, [])
    for _c, pos, kw, v in recs:
        site = [[seed_kind(k) for k in pos], {n: seed_kind(k) for n, k in kw.items() if seed_kind(k) is not None}, v]
        if (any(k is not None for k in site[0]) or site[1]) and site not in out:
            out.append(site)
    if not out:
        del sites[ref]


def _suppressed(noqa: dict, lines: set, code: str) -> bool:
    for ln in lines:
        if ln in noqa:
            codes = noqa[ln]
            if codes is None or any(code.startswith(c) for c in codes):
                return True
    return False
