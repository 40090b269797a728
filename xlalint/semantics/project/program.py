"""The program: every module's call graph, rebuilt from the summaries, and how often each context runs.

``Program`` turns the summaries' functions, loops and call sites into ``steps`` records under
project-wide keys and answers, through ``steps.Steps``, how often any context of any module runs, with the
path that makes it so.
"""

from __future__ import annotations

from xlalint.semantics import hot_loops as H
from xlalint.semantics.project.facts import Facts
from xlalint.semantics.steps import Ctx, FuncInfo, LoopInfo, Steps, is_test_module, test_helpers


class Program:
    """Every module's functions, loops and call sites as ``steps`` records under project-wide keys."""

    def __init__(self, facts: Facts, paths: dict):
        self.facts = facts
        self.funcs: dict[str, FuncInfo] = {}
        self.loops: list[LoopInfo] = []
        self.tops: list[FuncInfo] = []
        self.ctxs: dict[str, list] = {}  # module -> its contexts, by index
        self.loops_of: dict[str, list] = {}
        self._targets: dict = {}
        self._funcs_of: dict = {}  # module -> its FuncInfos, <module> included
        for mod, s in facts.summaries.items():
            self._load(mod, s, paths.get(mod, s.get("path", mod)))
        self._importers = self._importers_of()
        self.excluded_by_importers = self._runs_only_off_xla()
        self._exclude_library_mains()
        self._exclude_test_helpers()
        self._mark_hooks()
        self._mark_applied_functions()
        self.steps = Steps(self.funcs, self.loops, self.tops, self.targets)

    def _mark_applied_functions(self) -> None:
        """An ``autograd.Function``'s ``forward`` runs where ``Cls.apply(...)`` is called: once the project
        applies it anywhere it is a root like a module's ``forward`` (every step, however its callers are
        reached: a loss kept in an attribute, a registry); a Function nobody applies never runs."""
        applied = set()
        for f in [*self.funcs.values(), *self.tops]:
            for callee, _ctx in f.calls:
                applied.update(t for t in self.targets(callee) if t.endswith(".forward"))
        for key in applied:
            f = self.funcs[key]
            if f.name == "forward" and f.class_key is not None and not f.root:
                bases = self.facts.summaries[f.module]["classes"].get(f.class_key, (None, None, ()))[2]
                if any(b.rpartition(".")[2] == "Function" for b in bases):
                    f.root = True

    def _exclude_test_helpers(self) -> None:
        """A module in a test folder beside the tests that use it (``test_helpers``): a reference model, a
        golden, a runner of the tests. Its loops compare runs and its tensors are goldens, not training."""
        mods = self.facts.summaries
        for mod in test_helpers(mods, {m for m in mods if is_test_module(m)}):
            for f in self._funcs_of.get(mod, ()):
                f.excluded = True

    def _runs_only_off_xla(self) -> set:
        """Modules that run only where code hard-wired to CUDA runs: a module that never names XLA, whose every
        importer in the project (unit tests aside) pins CUDA or needs a CUDA-only library (``cuda_only``) or is
        such a module itself: a reward model trained only through DeepSpeed and scored only on ``cuda:1``,
        mmcv heads built only by notebooks that call ``.cuda()`` (a device the module takes as an argument is
        its importers' device). A package's ``__init__`` is the library's face to code outside
        the project, a module nobody imports (a ``__main__``) or a script outside any package with an ``if __name__ ==
        "__main__":`` block (another script also imports it: OLMo's ``scripts/train.py``) is an entry point (a
        package's module's ``__main__`` block is a check run by hand: ``_exclude_library_mains``), and a module that registers
        what it defines (``@register_criterion``) is loaded through a registry: none is decided by its
        importers, unless its own package imports it (mmcv's ``from .dpt_head import DPTHead`` in
        ``decode_heads/__init__.py``): then whoever imports the package loads it. Their functions are marked ``excluded`` (never an XLA
        step); the modules are returned."""
        summaries = self.facts.summaries
        importers = self._importers
        needs_cuda = {mod for mod, s in summaries.items() if s.get("requires_cuda")}
        hard = {mod: self._project_modules(mod, s.get("hard_imports", ())) for mod, s in summaries.items()}
        runs = {mod: self._project_modules(mod, s.get("main_imports", ())) for mod, s in summaries.items()}
        # not XLA code because it pins CUDA or needs a CUDA-only library (unit tests, CPU notebooks and JAX
        # modules are not XLA code either, but say nothing of where the code they import runs)
        off = {mod for mod, s in summaries.items() if s.get("cuda_only")}
        tests = {mod for mod in summaries if is_test_module(mod)}
        found: set = set()
        changed = True
        while changed:
            changed = False
            for mod, s in summaries.items():
                if mod in off:
                    continue
                if hard[mod] & needs_cuda:
                    # importing it imports a module that needs a CUDA-only library (apex): it cannot be
                    # imported on a TPU host either, whatever it says of XLA
                    needs_cuda.add(mod)
                elif runs[mod] & needs_cuda and not importers.get(mod):
                    # a script whose `__main__` block imports such a module (RWKV's `train.py` imports its model
                    # there): it runs nowhere but there, nor does what only it imports
                    pass
                elif (s.get("names_xla") or mod.endswith("__main__") or (s.get("script") and not self._packaged(mod))
                      or (s.get("registers") and not self._statically_loaded(mod, hard))
                      or not importers.get(mod, set()) - tests or not importers[mod] - tests <= off):
                    continue
                off.add(mod)
                found.add(mod)
                changed = True
        for mod in found:
            for f in self._funcs_of.get(mod, ()):
                f.excluded = True
        return found

    def _importers_of(self) -> dict:
        """module -> the project's modules that import it: what they bind (`from a import b`), star-import
        (`from .heads import *`), import whole (`import a.b.c` binds only `a`) or import in their functions."""
        summaries = self.facts.summaries
        importers: dict = {}
        for mod, s in summaries.items():
            for target in {*s["imports"].values(), *s.get("stars", ()), *s.get("hard_imports", ()),
                           *s.get("nested_imports", ())}:
                hit = self.facts.index.split(target, mod)
                if hit is None:
                    continue
                # importing `a.b.c` runs the packages `a` and `a.b` first; a package's own modules importing
                # it (`from ..builder import HEADS` in `models/heads/dpt.py`) are loaded through it: they say
                # nothing of where it runs
                target = hit[0]
                while target and target != mod and not mod.startswith(target + "."):
                    if target in summaries:
                        importers.setdefault(target, set()).add(mod)
                    target = target.rpartition(".")[0]
        return importers

    def _exclude_library_mains(self) -> None:
        """The module-level code of a library module, a module of a package (its folder, or one above it up to the
        project's root, has an ``__init__.py``: CosyVoice's ``cosyvoice/flow/`` has none, ``cosyvoice/`` has one)
        that other modules of the project import (unit tests aside): what runs when it is imported runs once,
        and its ``if __name__ == "__main__":`` block is a check run by hand (a streaming vocoder compared chunk by
        chunk with its whole output, a debug loop over the data loader), not a training or generation step.
        Its functions keep their own frequencies: a loop in a function is what it is, whoever calls it."""
        summaries = self.facts.summaries
        for top in self.tops:
            mod = top.module
            if (self._packaged(mod) and not is_test_module(mod)
                    and {m for m in self._importers.get(mod, ()) if not is_test_module(m)} and mod in summaries):
                top.excluded = True

    def _packaged(self, mod: str) -> bool:
        """The module's folder, or one above it up to the project's root, has an ``__init__.py``."""
        by_module = self.facts.index.by_module
        parents = mod.partition("@")[0].split(".")[:-1]
        return any(".".join(parents[:i]) in by_module for i in range(1, len(parents) + 1))

    def _project_modules(self, mod: str, names) -> set:
        """The project's modules among what ``mod`` imports by ``names``, itself aside."""
        return {hit[0] for hit in (self.facts.index.split(t, mod) for t in names) if hit is not None and hit[0] != mod}

    def _statically_loaded(self, mod: str, hard: dict) -> bool:
        """A registering module whose own package imports it (mmcv's ``from .dpt_head import DPTHead``), and
        no package above it loads modules by name (fairseq's ``models/__init__.py`` imports every folder
        with ``importlib``): whoever imports the package loads it, so its importers decide where it runs."""
        parent = mod.rpartition(".")[0]
        if mod not in hard.get(parent, ()):
            return False
        summaries = self.facts.summaries
        while parent:
            s = summaries.get(parent)
            if s is not None and any(v.partition(".")[0] == "importlib" for v in s["imports"].values()):
                return False
            parent = parent.rpartition(".")[0]
        return True

    def _mark_hooks(self) -> None:
        """Per-step hooks the modules alone cannot see (hot_loops): a method of a class whose base in
        another module derives from a callback base, a function of another module registered as a hook."""
        for mod, s in self.facts.summaries.items():
            for ref in s.get("hooks", ()):
                for t in self.targets(self.site_key(mod, ref)):
                    self.funcs[t].root = True
        for key, f in self.funcs.items():
            if f.root or f.class_key is None or f.name not in H.ALL_HOOK_METHODS:
                continue
            mod = f.module
            if f.name in H.hook_methods_of(self.facts.external_bases(f"{mod}:{f.class_key}")):
                f.root = True

    def _load(self, mod: str, s: dict, path: str) -> None:
        callee = mod + "\0"  # + a callee: self.site_key(mod, callee) without a call per call site
        top = FuncInfo(key=f"{mod}:<module>", name="<module>", class_key=None, node=None, parent=None,
                       module=mod, path=path, excluded=bool(s.get("excluded")))
        funcs = {"": top}
        for key, rec in s["funcs"].items():
            f = FuncInfo(key=f"{mod}:{key}", name=rec[0], class_key=rec[1], node=None, parent=None,
                         root=rec[2], closure=rec[3], step_call_outside_loops=rec[4],
                         barrier_outside_loops=rec[5], trains_outside_loops=rec[6], return_kind=rec[7],
                         module=mod, path=path, runs_model=len(rec) > 11 and rec[11],
                         excluded=len(rec) > 12 and rec[12], no_grad=len(rec) > 13 and rec[13])
            funcs[key] = f
            self.funcs[f.key] = f
        self.tops.append(top)
        self._funcs_of[mod] = list(funcs.values())
        loops = []
        for fk, loader, direct, trains, calls, syncs, outer, *hot in s["loops"]:
            loops.append(LoopInfo(node=None, func=funcs.get(fk, top), iterates_loader=loader,
                                  direct_step_call=direct, trains=trains, calls=[callee + c for c in calls],
                                  sync_points=[(seq, callee + c if c is not None else None, u) for seq, c, u in syncs],
                                  outer=loops[outer] if outer is not None else None,
                                  runs_model=bool(hot and hot[0]), hint=hot[1] if len(hot) > 1 else None,
                                  seq=hot[2] if len(hot) > 3 else 0, end_seq=hot[3] if len(hot) > 3 else 0,
                                  few=len(hot) > 4 and bool(hot[4]),
                                  every_calls=[callee + c for c in hot[5]] if len(hot) > 5 else [],
                                  infers=len(hot) > 6 and bool(hot[6]),
                                  over_positions=len(hot) > 7 and bool(hot[7])))
        self.loops.extend(loops)
        self.loops_of[mod] = loops
        ctxs = []
        for fk, loop_ids, period, non_xla, closure, seq, error, once, line, *more in s["ctxs"]:
            ctxs.append(Ctx(funcs.get(fk, top), tuple(loops[i] for i in loop_ids), period, non_xla, closure, seq,
                            error, once, line, bool(more and more[0]), len(more) > 1 and bool(more[1]),
                            tuple(tuple(t) for t in more[2]) if len(more) > 2 else (),
                            tuple(tuple(a) for a in more[3]) if len(more) > 3 and more[3] is not None else None))
        self.ctxs[mod] = ctxs
        for key, rec in s["funcs"].items():
            f = funcs[key]
            f.calls = [(callee + c, ctxs[i]) for c, i in rec[8]]
            f.sync_points = [(seq, callee + c if c is not None else None, u) for seq, c, u in rec[9]]
            f.sets_up = rec[10]
        top.calls = [(callee + c, ctxs[i]) for c, i in s["top_calls"]]

    @staticmethod
    def site_key(mod: str, callee: str) -> str:
        return f"{mod}\0{callee}"

    def targets(self, callee: str) -> list:
        t = self._targets.get(callee)
        if t is None:
            mod, _, local = callee.partition("\0")
            t = [x for x in self.facts.callee_targets(local, mod) if x in self.funcs]
            self._targets[callee] = t
        return t
