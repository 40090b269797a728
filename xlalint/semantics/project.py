"""The project: its modules, how their imports resolve, and the facts one module's analysis gives another.

The shape is the one mypy, pyright and Infer share: summarise each module alone, solve over the
summaries, check each module with the solved facts.

* ``ProjectIndex`` knows the files: the project root (nearest ``pyproject.toml``, ``setup.py``,
  ``setup.cfg`` or ``.git``), each file's module name (``src/`` layouts, packages), and resolves a dotted
  name to a module, a function or a class, following names a package's ``__init__`` re-exports.
* ``Facts`` is what the walk of one module may ask about the others (what a function returns, whether a
  class is an ``nn.Module``, what an attribute holds, what callers pass to a parameter). Every answer
  is recorded as a *read*: a module's result stays valid for as long as the facts it read are unchanged,
  which is what makes the cache right and tells the engine which modules to walk again.
* ``Program`` rebuilds the call graph of every module from the summaries and answers, through
  ``steps.Steps``, how often any context of any module runs, with the path that makes it so.

Summaries are plain data (dicts, lists, strings, numbers): they go through ``marshal`` to the cache and
between processes, and no syntax tree outlives its module's walk.
"""

from __future__ import annotations

import marshal
import os
import re
import zlib
from typing import Iterable, Optional

from xlalint.semantics import hot_loops as H
from xlalint.semantics import kinds as K
from xlalint.semantics import seeds as S
from xlalint.semantics.steps import Ctx, FuncInfo, LoopInfo, Steps

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
MAX_RESOLVE_DEPTH = 8


def find_root(path: str) -> str:
    """The project root of ``path``: the nearest directory above it with a root marker, else the
    directory itself (a lone script, or a tree with no marker). Inside an installed package it is the
    ``site-packages`` directory, whatever lies above it (a virtual environment inside a project)."""
    p = os.path.abspath(path)
    start = p if os.path.isdir(p) else os.path.dirname(p)
    parts = start.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):  # an installed package: its modules are named from here
        if parts[i] in ("site-packages", "dist-packages"):
            return os.sep.join(parts[: i + 1]) or os.sep
    return marked_root(start) or start


def marked_root(directory: str) -> Optional[str]:
    """The nearest directory at or above ``directory`` with a root marker, or None."""
    d = directory
    while True:
        if any(os.path.exists(os.path.join(d, m)) for m in ROOT_MARKERS):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def relative(path: str, root: str) -> str:
    """``os.path.relpath(os.path.abspath(path), root)``, remembered: a host that asks for every file of
    a large project in turn (flake8) names every file of it on each call."""
    key = (path, root, os.getcwd())
    rel = _RELATIVE.get(key)
    if rel is None:
        if len(_RELATIVE) > 500_000:
            _RELATIVE.clear()
        rel = _RELATIVE[key] = os.path.relpath(os.path.abspath(path), root)
    return rel


_RELATIVE: dict = {}


def module_name(path: str, root: str) -> tuple[str, bool]:
    """(dotted module name, is a package ``__init__``) of a file under ``root``; ``src/`` layouts
    drop the ``src`` part, as an installed package would."""
    rel = relative(path, root)
    parts = rel.replace(os.sep, "/").split("/")
    if len(parts) > 1 and parts[0] == "src":
        parts = parts[1:]
    last = parts[-1]
    for ext in (".pyi", ".py", ".ipynb"):  # a notebook is a module too (xlalint/notebook.py)
        if last.endswith(ext):
            last = last[: -len(ext)]
    is_pkg = last == "__init__"
    parts = parts[:-1] if is_pkg else parts[:-1] + [last]
    parts = [p for p in parts if p not in ("", ".")]
    return ".".join(parts) or "__main__", is_pkg


class ProjectIndex:
    """The modules of one project: names to files and back."""

    def __init__(self, root: str, paths: Iterable[str]):
        self.root = root
        self.by_module: dict[str, str] = {}
        self.by_path: dict[str, str] = {}
        self.packages: set[str] = set()
        for p in sorted(paths):
            name, is_pkg = module_name(p, root)
            if name in self.by_module:
                # two files, one name (a root that is a package: its __init__.py and __main__.py; x.py
                # and x.ipynb; pkg.py and pkg/__init__.py; src/x.py and x.py): one is the module (a
                # package wins, as in Python); the other is analysed under a name of its own that no
                # import reaches, so that no two analyses of a run share a name
                if not is_pkg:
                    self._aside(p, name, False)
                    continue
                self._aside(self.by_module[name], name, name in self.packages)
            self.by_module[name] = p
            self.by_path[p] = name
            if is_pkg:
                self.packages.add(name)
        # every prefix of a module is a package, even without an __init__ (namespace packages)
        self.prefixes = {".".join(m.split(".")[:i]) for m in self.by_module for i in range(1, m.count(".") + 1)}

    def _aside(self, path: str, name: str, is_pkg: bool) -> None:
        alias = f"{name}@{relative(path, self.root)}"
        self.by_path[path] = alias
        if is_pkg:
            self.packages.add(alias)

    def module_of(self, path: str) -> tuple[str, bool]:
        name = self.by_path.get(path)
        if name is None:
            return module_name(path, self.root)
        return name, name in self.packages

    def split(self, dotted: str, importer: str = "") -> Optional[tuple[str, str]]:
        """(module, the rest) for the longest module prefix of ``dotted``; a module beside the
        importer (a script's own directory is on ``sys.path``) when no top-level one matches."""
        for base in ("", _package_dir(importer)):
            full = f"{base}.{dotted}" if base else dotted
            parts = full.split(".")
            for i in range(len(parts), 0, -1):
                mod = ".".join(parts[:i])
                if mod in self.by_module:
                    return mod, ".".join(parts[i:])
            if not base:
                continue
        return None

    def knows(self, dotted: str, importer: str = "") -> bool:
        """``dotted`` may name something in the project (a module, or a name inside one)."""
        head = dotted.split(".")[0]
        if head in self.by_module or head in self.prefixes:
            return True
        base = _package_dir(importer)
        return bool(base) and (f"{base}.{head}" in self.by_module or f"{base}.{head}" in self.prefixes)


def _package_dir(module: str) -> str:
    return module.rpartition(".")[0]


# --------------------------------------------------------------------------------------------------
# Facts: what one module's walk may ask about the others, with every answer recorded
# --------------------------------------------------------------------------------------------------
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
        if op == "ret":
            self._by_module.setdefault(arg.partition(":")[0], set()).add(k)
        elif op in ("sites", "veto"):
            self._by_callee.setdefault(arg, set()).add(k)
        elif op in ("clsm", "clsa"):
            self._by_class.add(k)

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


def _seed_kind(kind):
    """The part of an argument's kind that parameter seeding uses (see SemanticModel._param_seeds)."""
    if kind in (K.TENSOR, K.BOOL_TENSOR, K.TENSORS, K.MODULE, K.LOADER, K.SCALER, K.NOT_TENSOR, K.CPU_TENSOR, K.CPU_TENSORS) or K.instance_class(kind) or K.instances_class(kind):
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
        k = (self.module, key) if key.startswith("r|") else key  # only name resolution depends on the importer
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
                sk = _seed_kind(slot[2])
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


# --------------------------------------------------------------------------------------------------
# Program: the call graph of every module, rebuilt from the summaries
# --------------------------------------------------------------------------------------------------
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
        for mod, s in facts.summaries.items():
            self._load(mod, s, paths.get(mod, s.get("path", mod)))
        self._mark_hooks()
        self.steps = Steps(self.funcs, self.loops, self.tops, self.targets)

    def _mark_hooks(self) -> None:
        """Per-step hooks the modules alone cannot see (hot_loops): a method of a class whose base in
        another module derives from a callback base, a function of another module registered as a hook."""
        for mod, s in self.facts.summaries.items():
            for ref in s.get("hooks", ()):
                for t in self.targets(self._callee(mod, ref)):
                    self.funcs[t].root = True
        for key, f in self.funcs.items():
            if f.root or f.class_key is None or f.name not in H.ALL_HOOK_METHODS:
                continue
            mod = f.module
            if f.name in H.hook_methods_of(self.facts.external_bases(f"{mod}:{f.class_key}")):
                f.root = True

    def _load(self, mod: str, s: dict, path: str) -> None:
        callee = mod + "\0"  # + a callee: self._callee(mod, callee) without a call per call site
        top = FuncInfo(key=f"{mod}:<module>", name="<module>", class_key=None, node=None, parent=None,
                       module=mod, path=path)
        funcs = {"": top}
        for key, rec in s["funcs"].items():
            f = FuncInfo(key=f"{mod}:{key}", name=rec[0], class_key=rec[1], node=None, parent=None,
                         root=rec[2], closure=rec[3], step_call_outside_loops=rec[4],
                         barrier_outside_loops=rec[5], trains_outside_loops=rec[6], return_kind=rec[7],
                         module=mod, path=path, runs_model=len(rec) > 11 and rec[11])
            funcs[key] = f
            self.funcs[f.key] = f
        self.tops.append(top)
        loops = []
        for fk, loader, direct, trains, calls, syncs, outer, *hot in s["loops"]:
            loops.append(LoopInfo(node=None, func=funcs.get(fk, top), iterates_loader=loader,
                                  direct_step_call=direct, trains=trains, calls=[callee + c for c in calls],
                                  sync_points=[(seq, callee + c if c is not None else None, u) for seq, c, u in syncs],
                                  outer=loops[outer] if outer is not None else None,
                                  runs_model=bool(hot and hot[0]), hint=hot[1] if len(hot) > 1 else None))
        self.loops.extend(loops)
        self.loops_of[mod] = loops
        ctxs = []
        for fk, loop_ids, period, non_xla, closure, seq, error, once, line in s["ctxs"]:
            ctxs.append(Ctx(funcs.get(fk, top), tuple(loops[i] for i in loop_ids), period, non_xla, closure, seq,
                            error, once, line))
        self.ctxs[mod] = ctxs
        for key, rec in s["funcs"].items():
            f = funcs[key]
            f.calls = [(callee + c, ctxs[i]) for c, i in rec[8]]
            f.sync_points = [(seq, callee + c if c is not None else None, u) for seq, c, u in rec[9]]
            f.sets_up = rec[10]
        top.calls = [(callee + c, ctxs[i]) for c, i in s["top_calls"]]

    @staticmethod
    def _callee(mod: str, callee: str) -> str:
        return f"{mod}\0{callee}"

    def targets(self, callee: str) -> list:
        t = self._targets.get(callee)
        if t is None:
            mod, _, local = callee.partition("\0")
            t = [x for x in self.facts.callee_targets(local, mod) if x in self.funcs]
            self._targets[callee] = t
        return t


# --------------------------------------------------------------------------------------------------
# Which modules matter to the files asked: the ones connected to them by imports
# --------------------------------------------------------------------------------------------------
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<from>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^#\n;]+)"
    r"|import[ \t]+(?P<mods>[^#\n;]+))",
    re.MULTILINE,
)


def imported_names(text: str, module: str, is_package: bool) -> set:
    """Dotted names a module's text imports (a cheap scan, no parse: over-inclusion is harmless)."""
    out = set()
    pkg_parts = module.split(".") if module != "__main__" else []
    if not is_package:
        pkg_parts = pkg_parts[:-1]
    for m in _IMPORT.finditer(text):
        if m.group("mods"):
            for part in m.group("mods").split(","):
                name = part.strip().split(" as ")[0].strip()
                if name:
                    out.add(name)
            continue
        base = m.group("from")
        dots = len(base) - len(base.lstrip("."))
        rest = base[dots:]
        if dots:
            up = pkg_parts[: len(pkg_parts) - (dots - 1)] if dots - 1 <= len(pkg_parts) else []
            base = ".".join(up + ([rest] if rest else []))
        if not base:
            continue
        out.add(base)
        for part in m.group("names").strip("()").replace("\n", " ").split(","):
            name = part.strip().split(" as ")[0].strip()
            if name and name != "*":
                out.add(f"{base}.{name}")
    return out


def connected_files(index: ProjectIndex, asked: Iterable[str], read) -> list:
    """The files connected to ``asked`` through imports, either way (what they import, what imports
    them, and so on): the part of the project whose facts can reach the asked files."""
    edges: dict = {p: set() for p in index.by_path}
    for path, mod in index.by_path.items():
        text = read(path)
        if text is None:
            continue
        for name in imported_names(text, mod, mod in index.packages):
            hit = index.split(name, mod)
            if hit is not None:
                target = index.by_module[hit[0]]
                if target != path:
                    edges[path].add(target)
                    edges.setdefault(target, set()).add(path)
    # a package's __init__ runs before its modules: importing pkg.mod imports pkg
    for mod, path in index.by_module.items():
        parent = mod.rpartition(".")[0]
        if parent in index.by_module:
            edges[path].add(index.by_module[parent])
            edges[index.by_module[parent]].add(path)
    seen, todo = set(), [p for p in asked if p in edges]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        todo.extend(edges.get(p, ()))
    return sorted(seen | set(asked))


# --------------------------------------------------------------------------------------------------
# Declarations: what other modules need to resolve names, from CPython's parser, before any walk
# --------------------------------------------------------------------------------------------------
def declarations(text, module: str, is_package: bool) -> Optional[dict]:
    """A module's names (functions, classes with their methods and bases, imports) and the lines of its
    calls, from ``ast`` (about a tenth of libcst's parse): with every module's declarations known
    before the first walk, names resolve across modules from the start and only what the walks infer
    (returns, attributes, arguments) can send a module round again. ``text``: the source, or its
    ``ast.Module`` when CPython has parsed it already. None if CPython cannot parse it."""
    import ast

    from xlalint.parse.locate import def_keys, statement_blocks

    if isinstance(text, ast.Module):
        tree = text
    else:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return None
    pkg = module.split(".") if module != "__main__" else []
    if not is_package:
        pkg = pkg[:-1]
    imports: dict = {}
    funcs: dict = {}
    classes: dict = {}
    stars: list = []  # the modules `from m import *` names: the walk binds their names (Facts._member)

    def dotted(node) -> Optional[str]:
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            parts.append(node.id)
            return ".".join(reversed(parts))
        return None

    def qualify(name: Optional[str]) -> Optional[str]:
        if not name:
            return None
        head, _, rest = name.partition(".")
        if head in imports:
            return imports[head] + ("." + rest if rest else "")
        if name in classes:
            return f"{module}.{name}"
        return name

    def local(stmts, cls: Optional[str]) -> None:
        """Classes defined inside functions, keyed as the walk keys them (``Local``, or ``Cls.Local`` in a
        method of ``Cls``): the walked summary has them, and a summary whose names differ from its
        declarations' makes the facts resolve every name again (Facts.update)."""
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                local(s.body, None)  # inside a function nested in a function, or in a local class
            elif isinstance(s, ast.ClassDef):
                key = f"{cls}.{s.name}" if cls else s.name
                classes[key] = [False, {}, [b for b in (qualify(dotted(x)) for x in s.bases) if b]]
                local(s.body, key)
            else:
                for b in statement_blocks(s):
                    local(b, cls)

    def body(stmts, prefix: str, in_class: bool) -> None:
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = prefix + s.name
                funcs[key] = [s.name, prefix[:-1] if in_class else None, False, False, False, False, False, None, []]
                local(s.body, prefix[:-1] if in_class else None)
            elif isinstance(s, ast.ClassDef):
                key = prefix + s.name
                classes[key] = [False, {}, [b for b in (qualify(dotted(x)) for x in s.bases) if b]]
                body(s.body, key + ".", True)
            elif isinstance(s, (ast.If, ast.Try, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
                # `try: import x`, `if TYPE_CHECKING:`, a def under `for`/`with`, under `if` in a class
                for b in statement_blocks(s):
                    body(b, prefix, in_class)
            elif isinstance(s, ast.Import) and not prefix:
                for a in s.names:
                    if a.asname:
                        imports[a.asname] = a.name
                    else:
                        imports[a.name.split(".")[0]] = a.name.split(".")[0]
            elif isinstance(s, ast.ImportFrom) and not prefix:
                base = s.module
                if s.level:
                    up = s.level - 1
                    if up > len(pkg):
                        continue
                    base = ".".join(pkg[: len(pkg) - up] + ([s.module] if s.module else [])) or None
                if not base:
                    continue
                for a in s.names:
                    if a.name != "*":
                        imports[a.asname or a.name] = f"{base}.{a.name}"
                    elif base not in stars:
                        stars.append(base)

    body(tree.body, "", False)
    calls: dict = {}
    for node in _ast_calls(tree):
        name = dotted(node.func)
        if name:
            calls.setdefault(name, []).append((node.lineno, node.col_offset))
    return {
        "summary": {"module": module, "imports": imports, "funcs": funcs, "top_calls": [], "loops": [],
                    "ctxs": [], "classes": classes, "sites": {}, "stars": stars},
        "calls": {k: [ln for ln, _ in sorted(v)] for k, v in calls.items()},
        "defs": def_keys(tree),  # where each function starts, for the positions of what is reported in it
    }


def _ast_calls(tree) -> list:
    """Every ``ast.Call`` of a CPython tree, in no particular order: ``ast.walk`` without its two
    generators per node (less than half of ``ast.walk``'s time: on torch, about 3.2 -> 1.5 s)."""
    import ast

    found = []
    stack = [tree]
    pop, push, extend = stack.pop, stack.append, stack.extend
    call, node_type, context = ast.Call, ast.AST, ast.expr_context
    while stack:
        node = pop()
        try:
            fields = node._fields
        except AttributeError:  # a name of Global.names, the None key of a `**` in a Dict
            continue
        if type(node) is call:
            found.append(node)
        for name in fields:
            v = getattr(node, name, None)
            if type(v) is list:
                extend(v)
            elif isinstance(v, node_type) and not isinstance(v, context):
                push(v)
    return found


# --------------------------------------------------------------------------------------------------
# The order of the walks: a module after the modules whose functions and classes it uses
# --------------------------------------------------------------------------------------------------
def dependency_levels(index: ProjectIndex, decls: dict) -> dict:
    """path -> level, from the declarations (``decls``: path -> ``declarations()``): a module's level is
    above the levels of the modules whose functions or classes it calls or derives from (by name, as
    CPython's parse gives them); the modules of a cycle share a level. Walking level by level, with the
    facts updated between levels, most reads of another module's returns and classes see that module's
    walked summary the first time, instead of sending the reader round again."""
    facts = Facts(index, {d["summary"]["module"]: d["summary"] for d in decls.values()})
    path_of = {d["summary"]["module"]: p for p, d in decls.items()}
    deps: dict = {}
    for p, d in decls.items():
        s = d["summary"]
        mod, imports = s["module"], s["imports"]
        out = set()
        names = list(d["calls"])
        for rec in s["classes"].values():
            names.extend(rec[2])
        for name in names:
            head, _, rest = name.partition(".")
            target = imports.get(head)
            if target is None:
                continue  # this module's own name, or a builtin
            r = facts.resolve(target + ("." + rest if rest else ""), mod)
            if r is None or r[0] == "module":
                continue
            q = path_of.get(r[1].partition(":")[0])
            if q is not None and q != p:
                out.add(q)
        deps[p] = out
    # Tarjan's strongly connected components, iteratively (no recursion limit): each component comes out
    # after every component it depends on, so its level is known when it does
    level: dict = {}
    num: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    counter = 0
    for start in sorted(deps):
        if start in num:
            continue
        work = [(start, iter(sorted(deps[start])))]
        num[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in num:
                    num[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(deps.get(w, ())))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], num[w])
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
            if low[v] == num[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                members = set(comp)
                lv = 1 + max((level[w] for c in comp for w in deps.get(c, ()) if w not in members), default=-1)
                for c, sub in _cycle_levels(sorted(members), deps).items():
                    level[c] = lv + sub
    return level


def _cycle_levels(members: list, deps: dict) -> dict:
    """The modules of one dependency cycle, each at a sub-level: the cycle is put in an order that breaks
    as few of its dependencies as it can (Eades, Lin and Smyth's greedy order: modules nothing left
    depends on go last, modules that depend on nothing left go first, else the one most depended on),
    and a module's sub-level is above those of the modules before it that it depends on. Walked by
    sub-level, a module of torch's 300-module cycle reads most of its callees' walked returns the
    first time, instead of their declarations (which send it round again)."""
    if len(members) == 1:
        return {members[0]: 0}
    inside = set(members)
    out = {m: set(deps.get(m, ())) & inside for m in members}  # m depends on these
    into: dict = {m: set() for m in members}  # these depend on m
    for m, ws in out.items():
        for w in ws:
            into[w].add(m)
    left = set(members)
    first: list = []  # walked first, in this order
    last: list = []  # walked last, in reverse order
    n_out = {m: len(out[m]) for m in members}
    n_in = {m: len(into[m]) for m in members}

    def take(m) -> None:
        left.discard(m)
        for w in out[m]:
            if w in left:
                n_in[w] -= 1
        for u in into[m]:
            if u in left:
                n_out[u] -= 1

    while left:
        moved = True
        while moved:
            moved = False
            for m in sorted(x for x in left if n_out[x] == 0):  # depends on nothing left
                first.append(m)
                take(m)
                moved = True
            for m in sorted(x for x in left if n_in[x] == 0):  # nothing left depends on it
                last.append(m)
                take(m)
                moved = True
        if left:
            m = max(sorted(left), key=lambda x: n_in[x] - n_out[x])
            first.append(m)
            take(m)
    order = first + last[::-1]
    pos = {m: i for i, m in enumerate(order)}
    sub: dict = {}
    for m in order:
        sub[m] = 1 + max((sub[w] for w in out[m] if pos[w] < pos[m]), default=-1)
    return sub
