"""A run's memory between walks: the collector kept off the walks' leftovers, freed trees given back."""

from __future__ import annotations

import gc

# bytes of source walked between two trims (release_memory): a tree takes about 90 bytes of memory per
# byte of source, so at most about 90 MB of freed trees wait for the next trim. After each of torch's
# small files, the trims were 1.6% of a run and most of its system time: malloc_trim walks the whole heap
# however little was freed, and the pages it gives back are faulted in again by the next parse. Every
# quarter megabyte they still cost about 5% of a -j 1 run (7 s of system time on torch, against 3 s
# every megabyte and 1 s with none), and the peak is the largest file's tree either way (395 MB).
TRIM_EVERY = 1024 * 1024


def release_memory(size: int = TRIM_EVERY) -> None:
    """Give the freed memory of walks back to the system (glibc's ``malloc_trim``), once ``TRIM_EVERY``
    bytes of source have been walked since the last time (``size``: the source just walked). A syntax
    tree is built on a thread of its own, in a malloc arena of its own; the small summaries that outlive
    it are scattered through that arena, which then never shrinks: on torch, hundreds of MB of freed
    trees stayed resident. A no-op where there is no glibc.

    The cyclic collector is off during a walk: a parse allocates millions of objects, and each
    collection it triggers would also traverse everything the earlier walks left (the summaries: on
    torch, hundreds of MB). What survives a walk is frozen (``gc.freeze``: plain data, never traversed
    again; freed by reference counting when replaced), without a full collection first: the walks
    leave few cycles (the model breaks its own on release; over all of torch about 31,000 small
    objects in all, closures of recursive helpers, none holding a tree), and a full collection after
    each walk cost about 6% of a run. What cycles a freeze keeps go back to the collector when the run
    ends (``thaw``)."""
    if gc.isenabled():
        gc.freeze()
    walked = _TRIM.get("walked", 0) + size
    _TRIM["walked"] = walked
    if walked < TRIM_EVERY and size < TRIM_EVERY // 4:
        return
    _TRIM["walked"] = 0
    trim = _TRIM.get("fn", False)
    if trim is False:
        trim = None
        try:
            import ctypes

            trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError, ImportError):
            pass
        _TRIM["fn"] = trim
    if trim is not None:
        trim(0)


_TRIM: dict = {}


def thaw() -> None:
    """What the walks froze (``release_memory``) is the collector's again: the run's walks are over."""
    gc.unfreeze()


def without_collector(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with the cyclic collector off (see ``release_memory``)."""
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return fn(*args, **kwargs)
    finally:
        if gc_was_on:
            gc.enable()
