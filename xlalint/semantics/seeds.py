"""Parameter seeds: the kinds a function's parameters take from what its callers pass.

One pure function, ``seeds``, used twice: by the walk (``SemanticModel._param_seeds``), and by the
project pass when the callers in other modules changed after the walk (``Facts.agrees``). The walk
records the function's side of the question (its ``Shape``: its parameters, what its own module's
callers pass, which parameters it knows otherwise) with the seeds it got; the project pass asks the
same question again with the new callers. When the seeds come out the same, the walk would be the same
too (it sees its callers only through its seeds), and the module is not walked again: on torch, two in
five of the walks that new callers sent round again gave the same result.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from xlalint.semantics import kinds as K

SEEDABLE = frozenset({K.TENSOR, K.BOOL_TENSOR, K.TENSORS, K.MODULE, K.LOADER, K.SCALER})


class Shape(NamedTuple):
    """A function's side of its seeds, as plain data (it is stored with the walk's reads)."""

    names: tuple  # positional parameters, `self` included
    offset: int  # 1 for a method (callers' positions start after `self`), else 0
    named: tuple  # every parameter a keyword can name (positional and keyword-only)
    star_kw: Optional[str]  # the `**kwargs` parameter
    guessed: tuple  # parameters whose kind is a guess from their name
    known: tuple  # the named parameters whose kind the walk knows otherwise (annotated, defaulted)
    plain_class: bool  # a method of a class that is not an nn.Module
    own: tuple  # what this module's callers pass (``gather``: (per parameter, into **kwargs, any site))
    base: tuple  # what this module's base classes pass to `self.<name>(...)`, the same way
    with_vetoes: bool  # the full question (the walk's refinement), not only the other modules' sites
    required: tuple = ()  # the guessed parameters without a default (an optional tensor is often passed None)


class Outside(Exception):
    """A caller names a keyword the shape does not describe: the question cannot be answered again."""


def sites_of(answer) -> list:
    """The other modules' call sites, [(positional kinds, keyword kinds)], from a "sites|" answer: one
    site per kind and slot (the seeds ask whether any kind vetoes and whether the kinds agree, never how
    many callers pass them)."""
    out = []
    for slot, key, kinds in answer or ():
        for k in kinds:
            out.append(([None] * key + [k], {}) if slot == "p" else ([], {key: k}))
    return out


def gather(sites, shape: Shape) -> tuple:
    """What ``sites`` ([(positional kinds, keyword kinds)]) pass: (parameter -> kinds, kinds passed into
    **kwargs, whether there is any site)."""
    names, offset, named = shape.names, shape.offset, shape.named
    seen: dict = {}
    extra: list = []
    for pos, kw in sites:
        if shape.star_kw is not None:
            extra.extend(k for name, k in kw.items() if name == "**" or name not in named)
        if "**" in kw:
            continue  # which named parameters `**d` fills is unknown
        for i, k in enumerate(pos):
            if i + offset < len(names):
                seen.setdefault(names[i + offset], []).append(k)
        for name, k in kw.items():
            seen.setdefault(name, []).append(k)
    return seen, extra, bool(sites)


def compact(part: tuple) -> tuple:
    """``gather``'s answer with each kind once (the seeds ask only which kinds callers pass)."""
    seen, extra, any_site = part
    return {name: _once(ks) for name, ks in seen.items()}, _once(extra), any_site


def _once(kinds) -> list:
    return sorted(set(kinds), key=str)


def seeds(shape: Shape, external: list, vetoes: Callable[[], list], known: Callable[[str], bool]) -> dict:
    """Kinds for the function's unknown parameters. ``external``: what callers in other modules pass
    (``sites_of``); ``vetoes()``: the slots where they pass only Python values ((slot, position or
    keyword), asked only when a seed is on the table); ``known(name)``: whether the walk knows the kind
    of a name otherwise (raises ``Outside`` when that cannot be told)."""
    names, offset = shape.names, shape.offset
    vetoed = None

    def vetoed_names() -> set:
        return {key if slot == "k" else names[key + offset]
                for slot, key in vetoes() if slot == "k" or key + offset < len(names)}

    if shape.with_vetoes and shape.guessed:
        # a name-guessed parameter (`batch`) to which callers elsewhere pass only Python values (their
        # slots come as vetoes, not sites): a site that says so
        vetoed = vetoed_names()
        said = [([], {name: K.NOT_TENSOR}) for name in shape.guessed if name in vetoed]
    else:
        said = []
    if not external and not said and not shape.own[2] and not shape.base[2]:
        return {}
    seen: dict = {}
    extra: list = []  # what callers pass into **kwargs
    for part in (shape.own, gather(external, shape), shape.base, gather(said, shape)):
        for name, ks in part[0].items():
            seen.setdefault(name, []).extend(ks)
        extra.extend(part[1])
    out = {}
    if extra:
        # `update(self, **kwargs)`: a dict of tensors when a caller passes one (`**loss_dict`, `loss=loss`),
        # a dict of Python values when the callers' known values all are
        if any(k in K.HOLDS_DEVICE_TENSOR for k in extra):
            out[shape.star_kw] = K.TENSORS
        elif any(k == K.NOT_TENSOR for k in extra):
            out[shape.star_kw] = K.NOT_TENSOR
    guessed = set(shape.guessed)
    for name, ks in seen.items():
        classes = {K.module_class(k) for k in ks}
        if None not in classes:
            # every caller passes a module of one project class: which `forward` a call of it runs
            if len(classes) == 1:
                out[K.class_seed(name)] = classes.pop()
            ks = [K.MODULE] * len(ks)
        elif len(classes) > 1:
            ks = [K.MODULE if K.module_class(k) is not None else k for k in ks]
        if name in guessed and all(k == K.NOT_TENSOR for k in ks):
            out[name] = K.NOT_TENSOR  # `display(self, batch)` called with a step number: not a batch
            continue
        if name in shape.required and K.NOT_TENSOR in ks and all(k is K.UNKNOWN or k == K.NOT_TENSOR for k in ks):
            # `model(src, trg, 0)` in one caller, a value not known in the other: a guess that a caller belies,
            # and no caller backs, is no longer made (not for an optional parameter: `mask=None` is passed None)
            out[name] = K.UNKNOWN
            continue
        told = [k for k in ks if k is not None]
        if told and all(k in (K.CPU_TENSORS, K.CPU_TENSOR) for k in told) and len(set(told)) == 1:
            out[name] = told[0]  # callers pass host tensors (a batch they did not move): over any guess
            continue
        if known(name):
            continue  # annotated or otherwise known
        if any(k == K.NOT_TENSOR for k in ks):
            if shape.plain_class and any(k in K.DEVICE_TENSORS for k in ks):
                # an object of a plain class fed a device tensor by some caller (`top1.update(acc1[0])`
                # beside `losses.update(loss.item())`): its attributes hold device tensors
                out[name] = K.TENSOR
            continue
        found = [k for k in ks if k in SEEDABLE or K.instance_class(k) is not None or K.instances_class(k) is not None
                 or K.generator_item(k) is not None or K.callable_keys(k) is not None]
        if not found:
            continue
        if vetoed is None:  # asked only now: it matters only where a seed is on the table
            vetoed = vetoed_names()
        if name in vetoed:
            continue
        if all(k == found[0] for k in found):
            out[name] = found[0]
        elif all(K.callable_keys(k) is not None for k in found):  # different callbacks: any of them runs
            out[name] = K.callables([c for k in found for c in K.callable_keys(k)])
        elif all(k in K.DEVICE_TENSORS for k in found):
            out[name] = K.TENSOR
    return out


def same_seeds(record, external_answer, veto_answer) -> bool:
    """Whether a recorded question (``[shape, seeds]``) gets the same seeds from the other modules'
    call sites now (their "sites|" and "veto|" answers)."""
    shape, before = Shape(*record[0]), record[1]
    known = set(shape.known)
    named = set(shape.named)

    def is_known(name: str) -> bool:
        if name not in named:
            raise Outside(name)
        return name in known

    try:
        return seeds(shape, sites_of(external_answer), lambda: [tuple(x) for x in veto_answer or ()], is_known) == before
    except Outside:
        return False
