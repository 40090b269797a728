"""The order of the walks: a module after the modules whose functions and classes it uses.

``dependency_levels`` gives each module a level above those it depends on (the modules of an import
cycle share one), so that walking level by level reads facts that are already solved.
"""

from __future__ import annotations

from xlalint.semantics.project.facts import Facts
from xlalint.semantics.project.index import ProjectIndex


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
    level: dict = {}
    for comp in components(deps):  # each after every component it depends on: their levels are known
        members = set(comp)
        lv = 1 + max((level[w] for c in comp for w in deps.get(c, ()) if w not in members), default=-1)
        for c, sub in _cycle_levels(sorted(members), deps).items():
            level[c] = lv + sub
    return level


def components(deps: dict) -> list:
    """The strongly connected components of the graph ``deps`` (node -> the nodes it depends on), by
    Tarjan's algorithm, iteratively (no recursion limit): each component comes after every component it
    depends on. Deterministic: nodes and their dependencies are visited in sorted order."""
    out: list = []
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
                out.append(comp)
    return out


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
