"""One round of walks: each file answered from the cache when it can be, the others walked in this
process or, when there are enough of them, across a pool of forked workers.

The workers inherit the run's inputs, index and facts once, at start-up (never a config lookup per
file), then receive only lists of paths; they send back plain data (the cache key and the result),
which the parent stores. The results are the same whichever way: each file is analysed from its bytes
and the facts, nothing else.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from typing import Optional

from xlalint.analysis.file_findings import problem_finding, row
from xlalint.analysis.module import analyse_module
from xlalint.run import memory, store
from xlalint.run.cache import Cache
from xlalint.run.inputs import Inputs

# Below this many files to parse, starting workers costs more than it saves.
MIN_FILES_FOR_POOL = 4


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def raise_recursion_limit() -> None:
    # libcst and the walk recurse once per nesting level; generated code nests deeply.
    if sys.getrecursionlimit() < 10000:
        sys.setrecursionlimit(10000)


_WORKER: dict = {}


def _init_worker(inputs: Inputs, index, facts) -> None:
    _WORKER.update(inputs=inputs, index=index, facts=facts)
    raise_recursion_limit()


def _pool_context():
    methods = multiprocessing.get_all_start_methods()
    # fork starts a worker in milliseconds with libcst and the rules already imported
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _chunks(paths: list, jobs: int) -> list:
    """Largest files first, in chunks of about the same size: the pool's tail is then a small file, not
    the one 1 MB file that takes seconds (file sizes vary ten-thousandfold). Chunks keep IPC negligible."""
    sizes = {}
    for p in paths:
        try:
            sizes[p] = os.stat(p).st_size
        except OSError:
            sizes[p] = 0
    ordered = sorted(paths, key=lambda p: -sizes[p])
    target = max(32 * 1024, sum(sizes.values()) // (jobs * 16))
    chunks, chunk, acc = [], [], 0
    for p in ordered:
        chunk.append(p)
        acc += sizes[p]
        if acc >= target or len(chunk) >= 32:
            chunks.append(chunk)
            chunk, acc = [], 0
    if chunk:
        chunks.append(chunk)
    return chunks


def run_round(paths: list, index, facts, inputs: Inputs, jobs: int, cache: Optional[Cache], results: dict) -> None:
    """Every file of ``paths`` analysed under ``facts``, into ``results`` (and the cache)."""
    todo = []
    for path in paths:
        hit = store.cached_result(path, index, facts, inputs, cache)
        if hit is not None:
            results[path] = hit
        else:
            todo.append(path)
    if not todo:
        return
    if jobs == 1 or len(todo) < MIN_FILES_FOR_POOL:
        for path in todo:
            store.keep_result(results, cache, *analyse_one(path, index, facts, inputs))
        return
    _WORKER.update(inputs=inputs, index=index, facts=facts)  # inherited by the forked workers
    ctx = _pool_context()
    jobs = min(jobs, len(todo))
    pool = ctx.Pool(jobs, initializer=_init_worker, initargs=(inputs, index, facts))
    try:
        for chunk in pool.imap_unordered(_analyse_chunk, _chunks(todo, jobs)):
            for item in chunk:
                store.keep_result(results, cache, *item)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def analyse_one(path: str, index, facts, inputs: Inputs) -> tuple:
    """(path, cache key or None, result) for one file: read once, parse once."""
    data, err = inputs.read(path)
    if err is not None:
        return path, None, {"file": [row(problem_finding(err, path))]}
    settings = inputs.settings
    codes = settings.codes_for(path) if settings is not None else None
    module, is_pkg = index.module_of(path)
    decl = inputs.decls.get(path)
    result = memory.without_collector(
        analyse_module, data, path, codes, module=module, is_package=is_pkg, facts=facts, limits=inputs.limits,
        decl=decl, parse=inputs.parse.get(path), checked=bool(decl and decl.get("checked")))
    memory.release_memory(len(data))
    return path, store.cache_key(data, path, index, inputs), result


def _analyse_chunk(paths: list) -> list:
    w = _WORKER
    return [analyse_one(p, w["index"], w["facts"], w["inputs"]) for p in paths]
