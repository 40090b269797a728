"""Facts: what one module's walk may ask about the others, with every answer recorded.

``Facts`` holds every module's summary and answers questions about them (what a function returns, whether
a class is an ``nn.Module``, what an attribute holds, what callers pass to a parameter, where a name leads
through re-exports). ``FactsView`` is one walk's reader: every answer it gives is recorded as a *read*, so
that a module's result stays valid for as long as the facts it read are unchanged, which is what makes the
cache right and tells the engine which modules to walk again.
"""

from __future__ import annotations

import marshal
import zlib
from typing import Optional

from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import seeds as S
from xlalint.semantics.project.index import ProjectIndex


MAX_RESOLVE_DEPTH = 8


class Facts:
    """Solved facts about every module's summary. ``view(module)`` gives a walk its reader."""

    def __init__(self, index: ProjectIndex, summaries: dict):
        self.index = index
        self.summaries = summaries  # module -> summary (as written by the walker)
        self._forget()

    def _forget(self) -> None:
        """Drop every solved answer."""
        self._resolved: dict = {}
        self._sites: Optional[dict] = None  # callee gkey -> {caller module: [its sites]}
        self._site_targets: dict = {}  # caller module -> the callees its sites went to
        self._subclasses: Optional[dict] = None
        self._answers: dict = {}  # the answer to each question, as a FactsView records it
        self._imported: Optional[dict] = None  # the names some module imports -> the importers (_importers())
        # the answers update() may drop, by what they depend on (so it never scans all of them)
        self._by_module: dict = {}  # module -> the "ret|" answers about its functions
        self._by_callee: dict = {}  # callee gkey -> its "sites|" and "veto|" answers
        self._by_class: set = set()  # the "clsm|" and "clsa|" answers (a class's base may have changed)

    def update(self, changes: dict) -> None:
        """Replace some modules' summaries (module -> summary, None: gone), keeping every solved answer
        that cannot have changed. Names, methods, subclasses and where each call site goes depend only
        on a module's shape (its functions, classes and their bases, imports and star imports), which a
        walk rarely changes from the declarations: when no shape changed, only the answers about
        returns, attributes and sites are asked again, and only the changed modules' sites are
        re-resolved. (Rebuilding everything after each level of a round was most of a warm run.)"""
        same_shape = all(_shape(self.summaries.get(m)) == _shape(s) for m, s in changes.items())
        for m, s in changes.items():
            if s is None:
                self.summaries.pop(m, None)
            else:
                self.summaries[m] = s
        if not same_shape:
            self._forget()
            return
        touched: set = set()  # the functions whose callers' sites changed
        if self._sites is not None:
            for m in changes:
                old = self._site_targets.pop(m, ())
                touched.update(old)
                for t in old:
                    self._sites[t].pop(m, None)
                if m in self.summaries:
                    self._add_sites(m)
                    touched.update(self._site_targets[m])

        # kept: name resolution ((importer, "r|name")), methods ("m|"), star names ("star|"); dropped:
        # the returns of the changed modules' functions, the sites of the functions whose callers
        # changed, and every class answer (a class's attributes may come from a changed base)
        drop = [k for m in changes for k in self._by_module.pop(m, ())]
        if self._sites is None:
            drop.extend(k for ks in self._by_callee.values() for k in ks)
            self._by_callee.clear()
        else:
            drop.extend(k for t in touched for k in self._by_callee.pop(t, ()))
        drop.extend(self._by_class)
        self._by_class = set()
        for k in drop:
            self._answers.pop(k, None)

    def _remember(self, k, key: str, value) -> None:
        """Record a view's answer (``k``: its memo key, ``key``: the question) where update() finds it."""
        self._answers[k] = value
        op, _, arg = key.partition("|")
        if op in ("ret", "per"):
            self._by_module.setdefault(arg.partition(":")[0], set()).add(k)
        elif op in ("sites", "veto"):
            self._by_callee.setdefault(arg, set()).add(k)
        elif op in ("clsm", "clsa", "perm", "imp", "plc", "plcany", "devp", "hostimp"):
            self._by_class.add(k)  # answers over several modules: dropped on every update

    # ---------------------------------------------------------------- name resolution
    def resolve(self, dotted: str, importer: str = "", _depth: int = 0):
        """What a dotted name is in the project: ("func", gkey), ("class", gkey), ("module", name) or None."""
        key = (dotted, importer)
        if key in self._resolved:
            return self._resolved[key]
        self._resolved[key] = None  # cycle guard
        result = None
        hit = self.index.split(dotted, importer)
        if hit is not None and _depth < MAX_RESOLVE_DEPTH:
            mod, rest = hit
            result = ("module", mod) if not rest else self._member(mod, rest, _depth)
        self._resolved[key] = result
        return result

    def _member(self, mod: str, rest: str, depth: int):
        s = self.summaries.get(mod)
        if s is None:
            return None
        if rest in s["funcs"]:
            return ("func", f"{mod}:{rest}")
        if rest in s["classes"]:
            return ("class", f"{mod}:{rest}")
        head, _, tail = rest.partition(".")
        if head in s["classes"] and tail:  # Cls.method, inherited
            m = self.method(f"{mod}:{head}", tail)
            return ("func", m) if m else None
        target = s["imports"].get(head)  # a re-export: `from .losses import masked_ce` in __init__
        if target is not None:
            return self.resolve(target + ("." + tail if tail else ""), mod, depth + 1)
        if f"{mod}.{head}" in self.index.by_module or f"{mod}.{head}" in self.index.prefixes:
            return self.resolve(f"{mod}.{rest}", "", depth + 1)
        # `from .core import *`: the names the walk binds, the star module's public functions and classes
        for star in s.get("stars", ()):
            r = self.resolve(star, mod, depth + 1)
            t = self.summaries.get(r[1]) if r is not None and r[0] == "module" else None
            if t is not None and not head.startswith("_") and (head in t["funcs"] or head in t["classes"]):
                return self.resolve(f"{r[1]}.{rest}", "", depth + 1)
        return None

    def method(self, class_gkey: str, meth: str, _seen=None) -> Optional[str]:
        """The function a method call runs: the class's own, else its first base's that has it."""
        seen = _seen or set()
        if class_gkey in seen or len(seen) > MAX_RESOLVE_DEPTH:
            return None
        seen.add(class_gkey)
        mod, _, cls = class_gkey.partition(":")
        s = self.summaries.get(mod)
        if s is None or cls not in s["classes"]:
            return None
        if f"{cls}.{meth}" in s["funcs"]:
            return f"{mod}:{cls}.{meth}"
        for base in s["classes"][cls][2]:
            r = self.resolve(base, mod)
            if r is not None and r[0] == "class":
                found = self.method(r[1], meth, seen)
                if found:
                    return found
        return None

    def subclasses(self, class_gkey: str) -> list:
        """Every project class that derives from ``class_gkey``, transitively."""
        if self._subclasses is None:
            direct: dict = {}
            for mod, s in self.summaries.items():
                for cls, rec in s["classes"].items():
                    for base in rec[2]:
                        r = self.resolve(base, mod)
                        if r is not None and r[0] == "class":
                            direct.setdefault(r[1], []).append(f"{mod}:{cls}")
            self._subclasses = direct
        out, todo = [], list(self._subclasses.get(class_gkey, ()))
        while todo:
            c = todo.pop()
            if c not in out:
                out.append(c)
                todo.extend(self._subclasses.get(c, ()))
        return out

    # ---------------------------------------------------------------- kinds
    def returns(self, gkey: str):
        mod, _, key = gkey.partition(":")
        s = self.summaries.get(mod)
        rec = s["funcs"].get(key) if s else None
        return rec[7] if rec else K.UNKNOWN

    def return_parts(self, gkey: str):
        """The kinds of the items of the tuple a function returns on every path (``return windows, (Hp, Wp)``),
        None where one is not known; None when it does not return one tuple shape."""
        mod, _, key = gkey.partition(":")
        s = self.summaries.get(mod)
        rec = s["funcs"].get(key) if s else None
        return rec[14] if rec and len(rec) > 14 else None

    def periodic(self, gkey: str) -> Optional[str]:
        """The period of a function that returns a periodic test (``step % N == 0``), or None."""
        mod, _, key = gkey.partition(":")
        s = self.summaries.get(mod)
        return s.get("periodic", {}).get(key) if s else None

    def device_params(self, ref: str) -> list:
        """Where callers pass the devices a project function places on (``device_pins.device_params``);
        ``ref``: a callee of the walk without its "@" (``pkg.utils.move_batch``, ``pkg.core:Trainer.step``)."""
        gkey = ref
        if ":" not in ref:
            r = self.resolve(ref)
            if r is None or r[0] != "func":
                return []
            gkey = r[1]
        mod, _, key = gkey.partition(":")
        s = self.summaries.get(mod)
        return s.get("device_params", {}).get(key, []) if s else []

    def places(self, dotted: str, importer: str = "") -> bool:
        """Importing ``dotted`` from ``importer`` may put tensors on a device: the module it names, its packages
        or what they import in turn place one, import a framework that does (``summary["places"]``), or are
        not known yet. A notebook importing only a plotting helper of its course (``from res.plot_lib import
        set_default``) still runs on the host."""
        hit = self.index.split(dotted, importer)
        if hit is None:
            return True
        seen: set = set()
        stack = [hit[0]]
        while stack:
            mod = stack.pop()
            if mod in seen:
                continue
            seen.add(mod)
            s = self.summaries.get(mod)
            if s is None or s.get("places", True):
                return True
            parent = mod.rpartition(".")[0]
            if parent in self.summaries:
                stack.append(parent)  # importing `a.b` runs the package `a` first
            for target in [*s["imports"].values(), *s.get("stars", ()), *s.get("nested_imports", ())]:
                found = self.index.split(target, mod)
                if found is not None:
                    stack.append(found[0])
        return False

    def places_anywhere(self) -> bool:
        """Some module of the project puts a tensor on a device, names one or imports a framework that does
        (``summary["places"]``), or is not walked yet: a project whose code places nothing anywhere (an RL
        library that builds its networks and its batches itself, from NumPy) runs on the host."""
        return any(s.get("places", True) for s in self.summaries.values())

    def imported(self, module: str) -> bool:
        """Some module of the project imports ``module`` (or a name from it)."""
        return module in self._importers()

    def _importers(self) -> dict:
        """module -> the modules that import it, a name from it or one of its submodules (which runs it first)."""
        if self._imported is None:
            names: dict = {}
            for importer, s in self.summaries.items():
                for target in list(s["imports"].values()) + list(s.get("stars", ())):
                    hit = self.index.split(target, importer)  # a script's sibling resolves as its own directory's
                    if hit is not None:
                        parts = hit[0].split(".")
                        for i in range(1, len(parts) + 1):
                            names.setdefault(".".join(parts[:i]), set()).add(importer)
            self._imported = names
        return self._imported

    def importers_on_host(self, module: str) -> bool:
        """Some module imports ``module`` and every one that does runs on the host (``summary["host"]``: a
        notebook or script that places nothing, or a helper only such programs import)."""
        importers = self._importers().get(module, set()) - {module}
        return bool(importers) and all((self.summaries.get(m) or {}).get("host", False) for m in importers)

    def periodic_method(self, name: str) -> Optional[str]:
        """The period of the project's methods called ``name`` that return a periodic test, when there are
        some and they agree on it, else None."""
        periods = {p for s in self.summaries.values() for k, p in s.get("periodic", {}).items()
                   if k.rpartition(".")[2] == name and "." in k}
        return periods.pop() if len(periods) == 1 else None

    def klass(self, gkey: str):
        """(is an nn.Module, {attribute: kind}) of a project class, with its bases' attributes."""
        mod, _, cls = gkey.partition(":")
        s = self.summaries.get(mod)
        rec = s["classes"].get(cls) if s else None
        if rec is None:
            return None
        is_module, attrs = rec[0], dict(rec[1])
        for base in rec[2]:
            r = self.resolve(base, mod)
            if r is not None and r[0] == "class" and r[1] != gkey:
                b = self.klass(r[1])
                if b is not None:
                    is_module = is_module or b[0]
                    for a, k in b[1].items():
                        attrs.setdefault(a, k)
        return is_module, attrs

    def sites(self, gkey: str) -> list:
        """What callers in other modules pass: [(positional kinds, keyword kinds, via an attribute)]."""
        if self._sites is None:
            self._sites = {}
            for mod in self.summaries:
                self._add_sites(mod)
        return [x for sites in self._sites.get(gkey, {}).values() for x in sites]

    def _add_sites(self, mod: str) -> None:
        targets = set()
        for callee, sites in self.summaries[mod]["sites"].items():
            own = callee.startswith(f"@{mod}:")  # a method's calls through self.: for its overrides
            for t in self.callee_targets(callee, mod, overrides=own):
                if not (own and t.startswith(f"{mod}:")):
                    self._sites.setdefault(t, {}).setdefault(mod, []).extend(sites)
                    targets.add(t)
        self._site_targets[mod] = targets

    def callee_targets(self, callee: str, mod: str, overrides: bool = True) -> list:
        """The project functions a recorded callee may run (a method call also runs the overrides)."""
        if callee.startswith(H.DISPATCH_PREFIX):  # cb.on_step_end(): the project's callback methods
            return self.dispatched(callee[len(H.DISPATCH_PREFIX):])
        if callee.startswith(H.CALLABLE_PREFIX):  # on_token(nxt): the callbacks its callers passed
            out = []
            for gkey in callee[len(H.CALLABLE_PREFIX):].split("|"):
                m, _, key = gkey.partition(":")
                s = self.summaries.get(m)
                if s is not None and key in s["funcs"]:
                    out.append(gkey)
            return out
        if callee.startswith("@"):
            ref = callee[1:]
            if ":" in ref:  # "@pkg.core:Trainer.step": a method of a known class
                cls, _, meth = ref.rpartition(".")
                first = self.method(cls, meth)
            else:
                r = self.resolve(ref, mod)
                first = r[1] if r is not None and r[0] == "func" else None
                cls, meth = None, ref.rpartition(".")[2]
        else:
            s = self.summaries.get(mod)
            first = f"{mod}:{callee}" if s is not None and callee in s["funcs"] else None
            cls, meth = None, callee.rpartition(".")[2]
        out = [first] if first else []
        if overrides:
            cls = cls or (self._class_of(first) if first else None)
            for sub in self.subclasses(cls) if cls else ():
                smod, _, scls = sub.partition(":")
                s = self.summaries.get(smod)
                if s and f"{scls}.{meth}" in s["funcs"] and f"{sub}.{meth}" not in out:
                    out.append(f"{sub}.{meth}")
        return out

    def dispatched(self, meth: str) -> list:
        """The methods named ``meth`` of the project's callback-like classes (hot_loops)."""
        out = []
        for mod, s in self.summaries.items():
            for cls in s["classes"]:
                if f"{cls}.{meth}" in s["funcs"] and self.callback_like(f"{mod}:{cls}"):
                    out.append(f"{mod}:{cls}.{meth}")
        return out

    def callback_like(self, class_gkey: str, _depth: int = 0) -> bool:
        mod, _, cls = class_gkey.partition(":")
        if H.callback_like_name(cls.rpartition(".")[2]):
            return True
        s = self.summaries.get(mod)
        if s is None or cls not in s["classes"] or _depth > MAX_RESOLVE_DEPTH:
            return False
        for base in s["classes"][cls][2]:
            if H.callback_like_name(base.rpartition(".")[2]) or base in H.PER_STEP_HOOK_METHODS:
                return True
            r = self.resolve(base, mod)
            if r is not None and r[0] == "class" and self.callback_like(r[1], _depth + 1):
                return True
        return False

    def external_bases(self, class_gkey: str, _depth: int = 0) -> list:
        """The bases of a project class outside the project, through its project bases."""
        mod, _, cls = class_gkey.partition(":")
        s = self.summaries.get(mod)
        if s is None or cls not in s["classes"] or _depth > MAX_RESOLVE_DEPTH:
            return []
        out = []
        for base in s["classes"][cls][2]:
            r = self.resolve(base, mod)
            if r is not None and r[0] == "class":
                out.extend(self.external_bases(r[1], _depth + 1))
            else:
                out.append(base)
        return out

    def _class_of(self, gkey: str) -> Optional[str]:
        """The class a method's key belongs to, or None for a function."""
        mod, _, key = gkey.partition(":")
        cls = key.rpartition(".")[0]
        s = self.summaries.get(mod)
        return f"{mod}:{cls}" if cls and s is not None and cls in s["classes"] else None

    def view(self, module: str) -> "FactsView":
        return FactsView(self, module)

    def agrees(self, module: str, reads: dict) -> bool:
        """A module's result read these facts: are they still what the facts say? Other modules' call
        sites of one of its functions ("sites|", "veto|") may have changed as long as the seeds its walk
        took from them ("seeds|", ``FactsView.export``) come out the same."""
        v = FactsView(self, module)
        asked_again = None
        for key, value in reads.items():
            if key == "seeds|":
                continue
            if v.answer(key) != value:
                op, _, gkey = key.partition("|")
                if op in ("sites", "veto") and "seeds|" in reads:
                    asked_again = asked_again or set()
                    asked_again.add(gkey)
                    continue
                return False
        if asked_again:
            try:
                records = marshal.loads(zlib.decompress(reads["seeds|"]))
            except (ValueError, TypeError, EOFError, zlib.error):
                return False
            for gkey in sorted(asked_again):
                if gkey not in records:
                    return False
                sites, veto = v.answer("sites|" + gkey), v.answer("veto|" + gkey)
                if not all(S.same_seeds(record, sites, veto) for record in records[gkey]):
                    return False
        return True


def _shape(s: Optional[dict]):
    """What name resolution reads of a module's summary (Facts.update)."""
    if s is None:
        return None
    # a function nested in another ("f.<locals>.g") cannot be named from another module: the walk
    # records them, the declarations do not
    return ({k for k in s["funcs"] if ".<locals>." not in k}, sorted((c, tuple(rec[2])) for c, rec in s["classes"].items()),
            s["imports"], tuple(s.get("stars", ())))


def seed_kind(kind):
    """The part of an argument's kind that parameter seeding uses (see SemanticModel._param_seeds)."""
    if kind in (K.TENSOR, K.BOOL_TENSOR, K.TENSORS, K.MODULE, K.LOADER, K.SCALER, K.NOT_TENSOR, K.CPU_TENSOR, K.CPU_TENSORS) \
            or K.module_class(kind) or K.instance_class(kind) or K.instances_class(kind) or K.generator_item(kind) or K.callable_keys(kind):
        return kind
    return None


class FactsView:
    """One module's reader of the facts: answers and records every question it asks."""

    def __init__(self, facts: Facts, module: str):
        self.facts = facts
        self.module = module
        self.reads: dict = {}
        self.seeds: dict = {}  # gkey -> [[shape, seeds]]: the seeds the walk asked for (note_seeds)

    def answer(self, key: str):
        memo = self.facts._answers
        # only name resolution depends on the importer (and what an imported module does, found by name)
        k = (self.module, key) if key.startswith(("r|", "plc|")) else key
        if k not in memo:
            self.facts._remember(k, key, self._answer(key))
        return memo[k]

    def _answer(self, key: str):
        op, _, arg = key.partition("|")
        f = self.facts
        if op == "r":
            r = f.resolve(arg, self.module)
            return list(r) if r is not None else None
        if op == "ret":
            return f.returns(arg)
        if op == "retp":
            return f.return_parts(arg)
        if op == "per":
            return f.periodic(arg)
        if op == "devp":
            return f.device_params(arg)
        if op == "perm":
            return f.periodic_method(arg)
        if op == "imp":
            return f.imported(arg)
        if op == "plc":
            return f.places(arg, self.module)
        if op == "plcany":
            return f.places_anywhere()
        if op == "hostimp":
            return f.importers_on_host(arg)
        if op == "clsm":  # whether a class is an nn.Module (None: no such class)
            k = f.klass(arg)
            return k[0] if k is not None else None
        if op == "clsa":  # the kind of one attribute of a class's objects (None: not known)
            cls, _, attr = arg.rpartition("|")
            k = f.klass(cls)
            return k[1].get(attr) if k is not None else None
        if op == "m":
            cls, _, meth = arg.rpartition(".")
            return f.method(cls, meth)
        if op == "star":  # the public names `from mod import *` binds (its functions and classes)
            r = f.resolve(arg, self.module)
            s = f.summaries.get(r[1]) if r is not None and r[0] == "module" else None
            if s is None:
                return []
            return sorted({n for n in list(s["funcs"]) + list(s["classes"]) if "." not in n and not n.startswith("_")})
        if op == "sites":
            # only what can seed a parameter matters to the walk, argument slot by slot: the kinds that
            # seed, and whether some caller passes "not a tensor" there too (which vetoes the seed)
            return [[slot, key, sorted(kinds) + ([K.NOT_TENSOR] if veto else [])]
                    for (slot, key), (veto, kinds) in self._slots(arg) if kinds]
        if op == "veto":
            # the slots where callers pass only "not a tensor": asked only when a seed is on the table
            # (see SemanticModel._param_seeds), so a new such caller sends nobody round again
            return [[slot, key] for (slot, key), (veto, kinds) in self._slots(arg) if veto and not kinds]
        raise KeyError(key)

    def _slots(self, gkey: str) -> list:
        """What callers in other modules pass to ``gkey``, by argument slot (("p", position) or ("k",
        keyword)): [(slot, (some caller passes "not a tensor", {kinds that seed}))], sorted."""
        slots: dict = {}
        for p, kw, _v in self.facts.sites(gkey):
            for slot in [("p", i, k) for i, k in enumerate(p)] + [("k", n, k) for n, k in kw.items()]:
                sk = seed_kind(slot[2])
                if sk is None:
                    continue
                rec = slots.setdefault(slot[:2], [False, set()])
                if sk == K.NOT_TENSOR:
                    rec[0] = True
                else:
                    rec[1].add(sk)
        return sorted(slots.items(), key=lambda x: repr(x[0]))

    def _ask(self, key: str):
        if key in self.reads:
            return self.reads[key]
        v = self.answer(key)
        self.reads[key] = v
        return v

    def knows(self, dotted: str) -> bool:
        return self.facts.index.knows(dotted, self.module)

    def resolve(self, dotted: str):
        r = self._ask("r|" + dotted)
        return tuple(r) if r is not None else None

    def returns(self, gkey: str):
        return self._ask("ret|" + gkey)

    def return_parts(self, gkey: str):
        return self._ask("retp|" + gkey)

    def periodic(self, gkey: str) -> Optional[str]:
        return self._ask("per|" + gkey)

    def device_params(self, ref: str) -> list:
        return self._ask("devp|" + ref)

    def periodic_method(self, name: str) -> Optional[str]:
        return self._ask("perm|" + name)

    def imported(self, module: str) -> bool:
        return self._ask("imp|" + module)

    def places(self, dotted: str) -> bool:
        return self._ask("plc|" + dotted)

    def places_anywhere(self) -> bool:
        return self._ask("plcany|")

    def importers_on_host(self, module: str) -> bool:
        return self._ask("hostimp|" + module)

    # a class is read piece by piece: a module that asks one attribute is not walked again when another
    # changes
    def class_is_module(self, gkey: str) -> Optional[bool]:
        return self._ask("clsm|" + gkey)

    def class_attribute(self, gkey: str, attr: str):
        k = self._ask(f"clsa|{gkey}|{attr}")
        return k if k is not None else K.UNKNOWN

    def method(self, class_gkey: str, meth: str):
        return self._ask(f"m|{class_gkey}.{meth}")

    def sites(self, gkey: str) -> list:
        """[(positional kinds, keyword kinds)]: what callers in other modules pass (``seeds.sites_of``)."""
        return S.sites_of(self._ask("sites|" + gkey))

    def note_seeds(self, gkey: str, shape, seeds: dict) -> None:
        """The walk asked for ``gkey``'s seeds (``seeds.seeds``) and got ``seeds``: kept with the reads,
        so that other modules' new call sites send this module round again only when they change the
        seeds (``Facts.agrees``)."""
        record = [tuple(shape), seeds]
        kept = self.seeds.setdefault(gkey, [])
        if record not in kept:
            kept.append(record)

    def export(self) -> dict:
        """What the walk read, as its result keeps it: the answers, and the seeds it asked for packed
        under "seeds|" (read back only when other modules' call sites change: a record for each
        function of the project, a third of the reads unpacked)."""
        out = dict(self.reads)
        if self.seeds:
            out["seeds|"] = zlib.compress(marshal.dumps(self.seeds), 1)
        return out

    def vetoes(self, gkey: str) -> list:
        """[(slot, position or keyword)]: where callers in other modules pass only "not a tensor"."""
        return [tuple(x) for x in self._ask("veto|" + gkey)]

    def star_names(self, module: str) -> list:
        return self._ask("star|" + module)
