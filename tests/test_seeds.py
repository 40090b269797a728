"""``seeds.seeds`` against the walk's seeding as it was written before it became a pure function (the
reference below, kept verbatim but for plain data in and out): random parameters, callers and kinds.
And ``seeds.same_seeds``, which the project pass asks instead of walking a module again."""

from __future__ import annotations

import random

import pytest

from xlalint.semantics import kinds as K
from xlalint.semantics import seeds as S

KINDS = [K.TENSOR, K.BOOL_TENSOR, K.CPU_TENSOR, K.TENSORS, K.CPU_TENSORS, K.MODULE, K.LOADER, K.SCALER,
         K.NOT_TENSOR, K.ITEMS, None, K.instance("m:Meter"), K.instance("m:Other")]
SEEDABLE = frozenset({K.TENSOR, K.BOOL_TENSOR, K.TENSORS, K.MODULE, K.LOADER, K.SCALER})


def reference(names, is_method, guessed, star_kw, named, sites, env, seeded, plain_class, vetoes):
    """SemanticModel._param_seeds before this change, with its inputs as plain data: ``sites`` every
    (pos, kw) in the order the walk gathered them, ``vetoes`` the slots callers elsewhere veto."""
    def external_vetoes():
        offset = 1 if is_method else 0
        return {key if slot == "k" else names[key + offset] for slot, key in vetoes
                if slot == "k" or key + offset < len(names)}

    if not sites:
        return {}
    seen: dict = {}
    extra: list = []
    for pos, kw in sites:
        if star_kw is not None:
            extra.extend(k for name, k in kw.items() if name == "**" or name not in named)
        if "**" in kw:
            continue
        offset = 1 if is_method else 0
        for i, k in enumerate(pos):
            if i + offset < len(names):
                seen.setdefault(names[i + offset], []).append(k)
        for name, k in kw.items():
            seen.setdefault(name, []).append(k)
    seeds = {}
    if extra:
        if any(k in K.HOLDS_DEVICE_TENSOR for k in extra):
            seeds[star_kw] = K.TENSORS
        elif any(k == K.NOT_TENSOR for k in extra):
            seeds[star_kw] = K.NOT_TENSOR
    vetoed = None
    for name, ks in seen.items():
        if name in guessed and all(k == K.NOT_TENSOR for k in ks):
            seeds[name] = K.NOT_TENSOR
            continue
        told = [k for k in ks if k is not None]
        if told and all(k in (K.CPU_TENSORS, K.CPU_TENSOR) for k in told) and len(set(told)) == 1:
            seeds[name] = told[0]
            continue
        if env.get(name, K.UNKNOWN) is not K.UNKNOWN and name in env and name not in seeded:
            continue
        if any(k == K.NOT_TENSOR for k in ks):
            if plain_class and any(k in K.DEVICE_TENSORS for k in ks):
                seeds[name] = K.TENSOR
            continue
        known = [k for k in ks if k in SEEDABLE or K.instance_class(k) is not None or K.instances_class(k) is not None]
        if not known:
            continue
        if vetoed is None:
            vetoed = external_vetoes()
        if name in vetoed:
            continue
        if all(k == known[0] for k in known):
            seeds[name] = known[0]
        elif all(k in K.DEVICE_TENSORS for k in known):
            seeds[name] = K.TENSOR
    return seeds


def _site(rnd, names, pool):
    pos = [rnd.choice(KINDS) for _ in range(rnd.randint(0, len(names) + 1))]
    kw = {rnd.choice(pool): rnd.choice(KINDS) for _ in range(rnd.randint(0, 2))}
    if rnd.random() < 0.05:
        kw["**"] = rnd.choice(KINDS)
    return pos, kw


def _answer(sites):
    """The "sites|" answer other modules' sites give: per slot, the kinds (as FactsView._answer)."""
    slots: dict = {}
    for pos, kw in sites:
        for i, k in enumerate(pos):
            if k is not None:
                slots.setdefault(("p", i), set()).add(k)
        for name, k in kw.items():
            if k is not None and name != "**":
                slots.setdefault(("k", name), set()).add(k)
    return [[slot, key, sorted(kinds)] for (slot, key), kinds in sorted(slots.items(), key=repr)]


@pytest.mark.parametrize("seed", range(300))
def test_seeds_are_the_walks_seeds(seed):
    rnd = random.Random(seed)
    is_method = rnd.random() < 0.4
    names = (["self"] if is_method else []) + [f"p{i}" for i in range(rnd.randint(0, 4))]
    kwonly = [f"k{i}" for i in range(rnd.randint(0, 2))]
    named = names + kwonly
    star_kw = "kwargs" if rnd.random() < 0.3 else None
    pool = named + ["other", "kwargs"]
    guessed = {n for n in named if rnd.random() < 0.2}
    env = {n: rnd.choice(KINDS) for n in pool if rnd.random() < 0.3}
    seeded = {n for n in env if rnd.random() < 0.3}
    plain_class = is_method and rnd.random() < 0.5
    own = [_site(rnd, names, pool) for _ in range(rnd.randint(0, 2))]
    base = [_site(rnd, names, pool) for _ in range(rnd.randint(0, 1))]
    elsewhere = _answer([_site(rnd, names, pool) for _ in range(rnd.randint(0, 3))])
    vetoes = [("p", i) for i in range(len(names)) if rnd.random() < 0.15] + [("k", n) for n in kwonly if rnd.random() < 0.15]
    full = rnd.random() < 0.7
    offset = 1 if is_method else 0

    # what the walk gathered, in its order: this module's sites, other modules', base classes', then
    # the name-guessed parameters other modules veto
    external = S.sites_of(elsewhere)
    if full:
        vetoed = {key if slot == "k" else names[key + offset] for slot, key in vetoes if slot == "k" or key + offset < len(names)}
        said = [([], {n: K.NOT_TENSOR}) for n in sorted(guessed & vetoed)]
        gathered = own + external + base + said
    else:
        gathered = external
    want = reference(names, is_method, guessed, star_kw, set(named), gathered, env, seeded, plain_class, vetoes)

    def known(name):
        return env.get(name, K.UNKNOWN) is not K.UNKNOWN and name not in seeded

    shape = S.Shape(tuple(names), offset, tuple(named), star_kw, tuple(sorted(guessed)),
                    tuple(n for n in named if known(n)), plain_class, ({}, (), False), ({}, (), False), full)
    if full:
        shape = shape._replace(own=S.compact(S.gather(own, shape)), base=S.compact(S.gather(base, shape)))
    got = S.seeds(shape, external, lambda: vetoes, known)
    assert got == want
    # asked again from the record, with the same answers: the same seeds, unless a caller names a
    # keyword the shape does not describe (then the module is walked again: never a wrong "same")
    outside = any(n not in named for _, kw in gathered for n in kw if n != "**")
    assert S.same_seeds([tuple(shape), got], elsewhere, [list(v) for v in vetoes]) or outside


def test_same_seeds_tells_a_new_caller_that_changes_nothing_from_one_that_changes_a_seed():
    shape = S.Shape(("x", "weight"), 0, ("x", "weight"), None, (), ("weight",), False,
                    ({}, (), False), ({}, (), False), True)
    before = S.seeds(shape, [], list, lambda n: n == "weight")
    assert before == {}
    record = [tuple(shape), before]
    assert S.same_seeds(record, [["p", 1, [K.TENSOR]]], [])  # `weight` is known (annotated)
    assert not S.same_seeds(record, [["p", 0, [K.TENSOR]]], [])  # `x` becomes a tensor
    assert S.same_seeds(record, [["p", 0, [K.TENSOR]]], [["p", 0]])  # ... unless vetoed
    assert not S.same_seeds(record, [["k", "other", [K.TENSOR]]], [])  # a keyword it cannot tell about
