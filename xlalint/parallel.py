"""Many files: the cache first, then the misses across a process pool.

The parent reads and hashes every file (cheap) and answers what it can from the cache, so a warm run
parses nothing and starts no worker. The misses go to a pool whose workers receive the resolved
Settings once, at start-up (never a config lookup per file), then only lists of paths; they send back
plain tuples (the cache key and the Finding fields), which the parent stores in the cache. With one job,
or a handful of files, everything runs in this process. The findings are the same whichever way: each
file is linted by ``engine.lint_source`` from its bytes and nothing else.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from typing import Callable, Iterable, Optional

from xlalint import engine
from xlalint.cache import Cache
from xlalint.findings import Finding

# Below this many files to parse, starting workers costs more than it saves.
MIN_FILES_FOR_POOL = 4


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _row(f: Finding) -> tuple:
    return (f.line, f.column, f.code, f.end_line, f.end_column, f.name, f.message, f.severity, f.fix)


def _lint_one(path: str, settings, want_key: bool) -> tuple:
    """(path, cache key or None, finding rows) for one file: read once, parse once."""
    max_size = settings.max_file_size if settings is not None else engine_default_max_size()
    data, err = engine.read_file(path, max_size)
    if err is not None:
        return path, None, [_row(err)]
    codes = settings.codes_for(path) if settings is not None else None
    findings = engine.lint_source(data, path, codes, limits=_limits(settings))
    key = Cache.key(data, codes if codes is not None else _all_codes()) if want_key else None
    return path, key, [_row(f) for f in findings]


def engine_default_max_size() -> int:
    from xlalint.config import DEFAULT_MAX_FILE_SIZE

    return DEFAULT_MAX_FILE_SIZE


def _all_codes() -> frozenset:
    from xlalint.rules import all_rules

    return frozenset(r.code for r in all_rules())


# ---------------------------------------------------------------------------------------- workers
_WORKER: dict = {}


def _init_worker(settings, want_key: bool) -> None:
    _WORKER["settings"] = settings
    _WORKER["want_key"] = want_key
    _raise_recursion_limit()


def _lint_chunk(paths: list) -> list:
    settings, want_key = _WORKER["settings"], _WORKER["want_key"]
    return [_lint_one(p, settings, want_key) for p in paths]


def _raise_recursion_limit() -> None:
    # libcst and the walk recurse once per nesting level; generated code nests deeply.
    if sys.getrecursionlimit() < 10000:
        sys.setrecursionlimit(10000)


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


# ---------------------------------------------------------------------------------------- entry point
def lint_files(
    paths: Iterable[str],
    settings,
    *,
    jobs: Optional[int] = None,
    cache: Optional[Cache] = None,
    warn: Optional[Callable[[str], None]] = None,
) -> list[Finding]:
    """Lint every path in ``paths`` (files, not directories); the findings sorted."""
    jobs = default_jobs() if jobs is None or jobs <= 0 else jobs
    _raise_recursion_limit()
    max_size = settings.max_file_size if settings is not None else engine_default_max_size()
    out: list[Finding] = []
    todo: list[str] = []

    if cache is None:
        todo = list(paths)
    else:
        # read each file once and look it up; on a miss one job lints the bytes it has, a pool re-reads
        for path in paths:
            data, err = engine.read_file(path, max_size)
            if err is not None:
                out.append(err)
                continue
            codes = settings.codes_for(path) if settings is not None else _all_codes()
            key = Cache.key(data, codes)
            rows = cache.get(key)
            if rows is not None:
                out.extend(Finding(path, *r) for r in rows)
            elif jobs == 1:
                findings = engine.lint_source(data, path, codes, limits=_limits(settings))
                cache.put(key, [_row(f) for f in findings])
                out.extend(findings)
            else:
                todo.append(path)
        if jobs == 1:
            return sorted(out)

    want_key = cache is not None
    if jobs == 1 or len(todo) < MIN_FILES_FOR_POOL:
        results: Iterable = (_lint_one(p, settings, want_key) for p in todo)
        _collect(results, out, cache)
    else:
        jobs = min(jobs, len(todo))
        ctx = _pool_context()
        pool = ctx.Pool(jobs, initializer=_init_worker, initargs=(settings, want_key))
        try:
            for chunk in pool.imap_unordered(_lint_chunk, _chunks(todo, jobs)):
                _collect(chunk, out, cache)
            pool.close()
        except BaseException:
            pool.terminate()
            raise
        finally:
            pool.join()
    return sorted(out)


def _collect(results: Iterable, out: list, cache: Optional[Cache]) -> None:
    for path, key, rows in results:
        if cache is not None and key is not None:
            cache.put(key, rows)
        out.extend(Finding(path, *r) for r in rows)


def _limits(settings):
    return settings.limits if settings is not None else None
