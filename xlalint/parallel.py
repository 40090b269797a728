"""Many files: the cache first, then the misses across a process pool.

The parent reads and hashes every file (cheap) and answers what it can from the cache, so a warm run
parses nothing and starts no worker. The misses go to a pool whose workers receive the resolved
Settings once, at start-up (never a config lookup per file), then only lists of paths; they send back
plain tuples (the cache key and the Finding fields), which the parent stores in the cache. With one job,
or a handful of files, everything runs in this process. The findings are the same whichever way: each
file is linted by ``engine.lint_source`` from its bytes and nothing else.
"""

from __future__ import annotations

import gc
import hashlib
import marshal
import multiprocessing
import os
import sys
import time
from typing import Callable, Iterable, Optional

from xlalint import engine
from xlalint.cache import Cache
from xlalint.findings import Finding, finding_row
from xlalint.semantics.project import Facts, ProjectIndex, connected_files, dependency_levels, find_root, relative

# Below this many files to parse, starting workers costs more than it saves.
MIN_FILES_FOR_POOL = 4


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def engine_default_max_size() -> int:
    from xlalint.config import DEFAULT_MAX_FILE_SIZE

    return DEFAULT_MAX_FILE_SIZE


def _all_codes() -> frozenset:
    from xlalint.rules import all_rules

    return frozenset(r.code for r in all_rules())


# ---------------------------------------------------------------------------------------- workers
_WORKER: dict = {}


def _init_worker(settings, index, facts) -> None:
    _WORKER.update(settings=settings, index=index, facts=facts)
    _raise_recursion_limit()


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


# ---------------------------------------------------------------------------------------- the project
# Rounds of "walk the modules whose facts changed": each walk records the facts it read about other
# modules; after a round the facts are solved again from every summary, and a module whose reads no
# longer hold is walked again. Facts only grow more precise, so this settles in a few rounds.
MAX_ROUNDS = 8


def lint_files(
    paths: Iterable[str],
    settings,
    *,
    jobs: Optional[int] = None,
    cache: Optional[Cache] = None,
    warn: Optional[Callable[[str], None]] = None,
) -> list[Finding]:
    """Lint every path in ``paths`` (files, not directories) as part of its project: the modules
    around each file (under its project root) are summarised too, and only ``paths`` are reported."""
    jobs = default_jobs() if jobs is None or jobs <= 0 else jobs
    _raise_recursion_limit()
    groups: dict = {}
    for p in paths:
        groups.setdefault(find_root(p), []).append(p)
    out: list[Finding] = []
    for root, asked in groups.items():
        out.extend(lint_project(root, asked, settings, jobs=jobs, cache=cache, warn=warn))
    return sorted(out)


def project_files(root: str, asked: list, settings) -> list:
    """The modules of the project at ``root``: its Python files (as discovery finds them, so excludes
    apply) and the files asked for."""
    files = list(engine.iter_python_files(project_tops(root, asked), settings))
    norm = {os.path.normpath(os.path.abspath(f)) for f in files}
    for p in asked:
        if os.path.normpath(os.path.abspath(p)) not in norm:
            files.append(p)
    return files


def project_tops(root: str, asked: list) -> list:
    """Where the project's files are discovered: its root, or for installed packages each asked file's
    own top-level package, not everything installed beside it."""
    if os.path.basename(root) not in ("site-packages", "dist-packages"):
        return [root]
    top = sorted({os.path.join(root, os.path.relpath(os.path.abspath(p), root).split(os.sep)[0]) for p in asked})
    return [t for t in top if os.path.isdir(t)]


def lint_project(root: str, asked: list, settings, *, jobs: int = 1, cache: Optional[Cache] = None,
                 warn=None, files: Optional[list] = None, sources: Optional[dict] = None,
                 honor_noqa: bool = True, parse: Optional[dict] = None) -> list[Finding]:
    """The findings of the ``asked`` files of the project at ``root``. ``sources``: path -> text that
    stands for the file on disk (an editor's buffer, flake8's lines); ``honor_noqa=False`` keeps what
    ``# noqa`` suppresses in the asked files, for a host that applies its own (flake8); ``parse``: path
    -> a parse function for that file (the language server's incremental parse)."""
    files = files if files is not None else project_files(root, asked, settings)
    # one name per file: the asked paths as the user wrote them, the others as discovery gives them
    by_abs = {os.path.normpath(os.path.abspath(p)): p for p in files}
    for p in asked:
        by_abs[os.path.normpath(os.path.abspath(p))] = p
    files = sorted(by_abs.values())
    index = ProjectIndex(root, files)
    _SOURCES.clear()
    _SOURCES.update(sources or {})  # before anything reads a file: the project's state is the buffers'
    # the whole project unchanged since a run that stored its results (every file's bytes, the settings,
    # xlalint's code): that run's per-file results, without a walk or a round
    state = _project_state(files, index, settings) if cache is not None and not parse else None
    if state is None:
        return _analyse_project(root, asked, files, index, settings, jobs, cache, None, honor_noqa, parse)
    found = _from_store(cache, root, state, asked, files, index, honor_noqa)
    if found is not None:
        return found
    # one process analyses the project at a time: flake8's jobs each start with a file of the same
    # project, and the ones that waited read back what the first one stored
    with cache.exclusive(_project_key(root)):
        found = _from_store(cache, root, state, asked, files, index, honor_noqa)
        if found is not None:
            return found
        return _analyse_project(root, asked, files, index, settings, jobs, cache, state, honor_noqa, parse)


def _from_store(cache: Cache, root: str, state: str, asked: list, files: list, index, honor_noqa: bool):
    """The findings of the ``asked`` files when the whole project is unchanged since a run that stored
    its results (every file's bytes, the settings, xlalint's code): decided by that run, or decided
    again from its per-file results, without a walk or a round. Else None."""
    found = _stored_findings(cache, root, state, asked, honor_noqa)  # the asked files decided by an earlier run
    if found is not None:
        cache.hits += len(files)
        return found
    hit = cache.load(_project_key(root), count=False)
    spelled = {_rel(p, root): p for p in files}  # stored by path under the root: `xlalint .` or `src/x.py`
    # the results are decoded only for the same state (on torch they are 25 MB, 150 MB decoded)
    stored = _unmarshal(hit[0].get("packed")) if hit and hit[0].get("state") == state else None
    hit = None
    if isinstance(stored, dict) and set(stored) <= set(spelled):
        cache.hits += len(files)  # every file's result came from the cache
        decided = asked if honor_noqa else files  # see _analyse_project
        found = engine.decide({spelled[r]: v for r, v in stored.items()}, decided, root, index, honor_noqa)
        _store_findings(cache, root, state, decided, found, honor_noqa, fresh=False)
        return _of(found, asked)
    return None


def _analyse_project(root: str, asked: list, files: list, index, settings, jobs: int, cache: Optional[Cache],
                     state: Optional[str], honor_noqa: bool, parse: Optional[dict]) -> list[Finding]:
    """``lint_project`` when nothing stored answers: declare, walk in rounds until the facts agree,
    decide, and store the project's results when ``state`` is known and the whole project was walked."""
    whole = True
    if len(files) > len(asked):  # only the modules connected to the asked ones by imports can matter
        connected = connected_files(index, asked, lambda p: _read_text(p, settings))
        whole = len(connected) == len(files)
        files = connected
        index = ProjectIndex(root, files)
    results: dict = {}
    _PARSE.clear()
    _PARSE.update(parse or {})
    # every module's names first (CPython's parser): the first walks resolve names across modules
    _DECLS.clear()
    for p in files:
        d = _declarations(p, index, settings, cache)
        if d is not None:
            _DECLS[p] = d
    # the facts: every module's declarations, each replaced by its walked summary once walked
    facts = Facts(index, {d["summary"]["module"]: d["summary"] for d in _DECLS.values()})
    levels = dependency_levels(index, _DECLS) if len(files) > 1 else {}
    pending = files
    for n in range(MAX_ROUNDS):
        if os.environ.get("XLALINT_DEBUG_ROUNDS"):
            print(f"xlalint: round {n}: {len(pending)} of {len(files)} modules", file=sys.stderr)
        # level by level (callees before callers), the facts updated between levels: the same schedule
        # whatever the number of jobs, so -j N gives what -j 1 gives
        for wave in _waves(pending, levels):
            _run_round(wave, index, facts, settings, jobs, cache, results)
            changes = {}
            for p in wave:
                r = results[p]
                if "summary" in r:
                    changes[r["summary"]["module"]] = r["summary"]
                else:
                    changes[index.module_of(p)[0]] = None
            facts.update(changes)
        pending = [p for p in files if "reads" in results[p] and results[p]["reads"]
                   and not facts.agrees(results[p]["summary"]["module"], results[p]["reads"])]
        if not pending:
            break
    _release_memory(TRIM_EVERY)  # the last walks' trees, before deciding and storing
    # in file order, whatever order the walks ran in: the paths messages name do not depend on the schedule
    results = {p: results[p] for p in files if p in results}
    gc.unfreeze()  # what the walks froze (_release_memory) is the collector's again once this run ends
    # flake8 asks for every file of a project, one at a time, over one state: decide them all at once
    decided = asked if honor_noqa or state is None or not whole else files
    found = engine.decide(results, decided, root, index, honor_noqa)
    if state is not None and whole:  # the project's last state only: the entry is rewritten, never added to
        cache.store(_project_key(root), [{"state": state, "packed": marshal.dumps({_rel(p, root): r for p, r in results.items()})}])
        _store_findings(cache, root, state, decided, found, honor_noqa, fresh=True)
    return _of(found, asked)


def _of(found: list, asked: list) -> list:
    """The findings of the ``asked`` files among ``found``."""
    want = set(asked)
    return [f for f in found if f.path in want]


def _project_key(root: str) -> str:
    """The cache entry of a project's last whole run: one per project root (and, through the cache's
    salt, per settings and xlalint version), so a run after each edit rewrites it instead of adding one."""
    return hashlib.blake2b(os.path.abspath(root).encode("utf-8", "surrogatepass"), digest_size=20).hexdigest() + "p"


def _stored_findings(cache: Cache, root: str, state: str, asked: list, honor_noqa: bool) -> Optional[list]:
    """The findings of the ``asked`` files as a run over this same project state decided them, or None.
    Deciding (the whole program's call graph, for how often each candidate runs) is most of a warm run
    on a large project; a one-file run (pre-commit, an editor) over an unchanged project needs none of
    it. The messages name paths as seen from the working directory, so the entry is per directory too;
    what ``# noqa`` suppresses is kept for flake8 (``honor_noqa=False``), so that is another entry."""
    hit = cache.load(_findings_key(root, honor_noqa), count=False)
    entry = hit[0] if hit else None
    if not entry or entry.get("state") != state or entry.get("cwd") != os.getcwd():
        return None
    stored = entry.get("found")
    rels = [_rel(p, root) for p in asked]
    if not isinstance(stored, dict) or not all(r in stored for r in rels):
        return None
    try:
        return sorted(Finding(p, *row) for p, r in zip(asked, rels) for row in stored[r])
    except TypeError:  # an entry of another shape: decide again (and rewrite it)
        return None


def _store_findings(cache: Cache, root: str, state: str, asked: list, found: list, honor_noqa: bool,
                    fresh: bool) -> None:
    """Keep the findings just decided for the asked files (``_stored_findings``), with those of other
    files decided over the same state unless ``fresh`` (a whole run rewrites the entry)."""
    rows: dict = {}
    if not fresh:
        hit = cache.load(_findings_key(root, honor_noqa), count=False)
        entry = hit[0] if hit else None
        if entry and entry.get("state") == state and entry.get("cwd") == os.getcwd() and isinstance(entry.get("found"), dict):
            rows = entry["found"]
    by_path: dict = {p: [] for p in asked}
    for f in found:
        by_path.setdefault(f.path, []).append(finding_row(f))
    for p, fs in by_path.items():
        rows[_rel(p, root)] = fs
    cache.store(_findings_key(root, honor_noqa), [{"state": state, "cwd": os.getcwd(), "found": rows}])


def _findings_key(root: str, honor_noqa: bool) -> str:
    return _project_key(root) + ("f" if honor_noqa else "n")


def _project_state(files: list, index, settings) -> str:
    """The whole project as it is: every file's path under the root with its contents key (or why it
    cannot be read), hashed."""
    h = hashlib.blake2b(digest_size=20)
    for rel, p in sorted((_rel(p, index.root), p) for p in files):
        h.update(f"{rel}\0{_state_part(p, index, settings)}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _state_part(path: str, index, settings) -> str:
    """A file's part of the project state: its contents key, or why it cannot be read. Remembered for
    this process by the file's stat, so that a host asking for every file of a large project in turn
    (flake8) does not read and hash the whole project again each time; a file changed in the last
    seconds is always read again (its timestamp cannot tell two quick edits apart: git's "racy" rule)."""
    memo = None
    if path not in _SOURCES:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - RACY_NS:
            memo = (os.path.abspath(path), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, index.root,
                    index.module_of(path), settings.codes_for(path) if settings is not None else None, _max_size(settings))
            part = _STATE_PARTS.get(memo)
            if part is not None:
                return part
    data, err = _read(path, settings)
    part = _cache_key(data, path, index, settings) if err is None else f"error:{err.code}:{err.message}"
    if memo is not None:
        _STATE_PARTS[memo] = part
    return part


RACY_NS = 3_000_000_000
_STATE_PARTS: dict = {}  # see _state_part


def _rel(path: str, root: str) -> str:
    return relative(path, os.path.abspath(root))


def _waves(paths: list, levels: dict) -> list:
    """``paths`` grouped by dependency level (``project.dependency_levels``), lowest first."""
    by_level: dict = {}
    for p in paths:
        by_level.setdefault(levels.get(p, 0), []).append(p)
    return [by_level[k] for k in sorted(by_level)]


_SOURCES: dict = {}  # path -> text standing for the file on disk, for this run
_DECLS: dict = {}  # path -> its declarations (project.declarations), for this run
_PARSE: dict = {}  # path -> the parse function for it, for this run


def _declarations(path: str, index, settings, cache: Optional[Cache]) -> Optional[dict]:
    """A file's declarations and CPython's verdict (``engine.declare``), from the cache when it has them."""
    data, err = _read(path, settings)
    if err is not None:
        return None
    key = None
    if cache is not None:
        key = _cache_key(data, path, index, settings) + "d"
        hit = cache.load(key, count=False)
        if hit:
            return hit[0]
    module, is_pkg = index.module_of(path)
    d = engine.declare(data, path, module, is_pkg, _limits(settings))
    if d is not None and key is not None:
        cache.store(key, [d])
    return d


def _read(path: str, settings):
    text = _SOURCES.get(path)
    if text is not None:
        return text.encode("utf-8", "surrogatepass"), None
    return engine.read_file(path, _max_size(settings))


def _run_round(paths: list, index, facts, settings, jobs: int, cache: Optional[Cache], results: dict) -> None:
    todo = []
    for path in paths:
        hit = _cached(path, index, facts, settings, cache)
        if hit is not None:
            results[path] = hit
        else:
            todo.append(path)
    if not todo:
        return
    if jobs == 1 or len(todo) < MIN_FILES_FOR_POOL:
        for path in todo:
            _store(results, cache, *_analyse_one(path, index, facts, settings))
        return
    _WORKER.update(settings=settings, index=index, facts=facts)  # inherited by the forked workers
    ctx = _pool_context()
    jobs = min(jobs, len(todo))
    pool = ctx.Pool(jobs, initializer=_init_worker, initargs=(settings, index, facts))
    try:
        for chunk in pool.imap_unordered(_analyse_chunk, _chunks(todo, jobs)):
            for item in chunk:
                _store(results, cache, *item)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _read_text(path: str, settings) -> Optional[str]:
    data, err = _read(path, settings)
    if err is None and path.lower().endswith(".ipynb"):  # a notebook's imports are in its code cells
        from xlalint.notebook import program_text

        return program_text(data)
    return data.decode("utf-8", "replace") if err is None else None


def _cache_key(data: bytes, path: str, index, settings) -> str:
    codes = settings.codes_for(path) if settings is not None else _all_codes()
    module, is_pkg = index.module_of(path)
    return Cache.key(data + b"\0" + module.encode() + (b"\0pkg" if is_pkg else b""), codes)


def _cached(path: str, index, facts, settings, cache: Optional[Cache]):
    """A stored result of this file's contents whose reads agree with the facts, or None."""
    if cache is None:
        return None
    data, err = _read(path, settings)
    if err is not None:
        return None
    variants = cache.load(_cache_key(data, path, index, settings))
    module = index.module_of(path)[0]
    for v in variants or ():
        if "packed" in v and (not v.get("reads") or facts.agrees(module, v["reads"])):
            result = _unpack(v)
            if result is not None:
                return result
    return None


def _store(results: dict, cache: Optional[Cache], path: str, key: Optional[str], result: dict) -> None:
    results[path] = result
    if cache is not None and key is not None:
        old = cache.load(key, count=False) or []
        variants = [_pack(result)] + [v for v in old if "packed" in v and v.get("reads") != result.get("reads")]
        cache.store(key, variants[:MAX_VARIANTS])


def _pack(result: dict) -> dict:
    """A stored variant: the facts it read, and the rest of it marshalled apart, so that a warm run
    that asks which variant agrees with the facts decodes only the reads (the summaries are most of an
    entry: replaying torch's rounds decoded every variant of every module, a quarter of the run)."""
    return {"reads": result.get("reads"), "packed": marshal.dumps({k: v for k, v in result.items() if k != "reads"})}


def _unmarshal(blob):
    """What ``marshal.dumps`` made ``blob`` from, if it was a dict; else None."""
    try:
        value = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        return None
    return value if isinstance(value, dict) else None


def _unpack(variant: dict) -> Optional[dict]:
    result = _unmarshal(variant["packed"])
    if result is None:
        return None
    if variant.get("reads") is not None:
        result["reads"] = variant["reads"]
    return result


# results of one file's contents under different facts about its neighbours: one per round it can be
# walked in, so that a warm run replays every round of the cold one from the cache (with 4, the modules
# walked in all 5 rounds of torch's project pass lost their first result and were walked again)
MAX_VARIANTS = MAX_ROUNDS


def _analyse_one(path: str, index, facts, settings) -> tuple:
    """(path, cache key or None, result) for one file: read once, parse once."""
    data, err = _read(path, settings)
    if err is not None:
        return path, None, {"file": [engine._row(err)]}
    codes = settings.codes_for(path) if settings is not None else None
    module, is_pkg = index.module_of(path)
    decl = _DECLS.get(path)
    gc_was_on = gc.isenabled()
    gc.disable()  # see _release_memory
    try:
        result = engine.analyse_module(data, path, codes, module=module, is_package=is_pkg, facts=facts,
                                       limits=_limits(settings),
                                       decl=decl, parse=_PARSE.get(path),
                                       checked=bool(decl and decl.get("checked")))
    finally:
        if gc_was_on:
            gc.enable()
    _release_memory(len(data))
    return path, _cache_key(data, path, index, settings), result


# bytes of source walked between two trims (_release_memory): a tree takes about 90 bytes of memory per
# byte of source, so at most about 90 MB of freed trees wait for the next trim. After each of torch's
# small files, the trims were 1.6% of a run and most of its system time: malloc_trim walks the whole heap
# however little was freed, and the pages it gives back are faulted in again by the next parse. Every
# quarter megabyte they still cost about 5% of a -j 1 run (7 s of system time on torch, against 3 s
# every megabyte and 1 s with none), and the peak is the largest file's tree either way (395 MB).
TRIM_EVERY = 1024 * 1024


def _release_memory(size: int = TRIM_EVERY) -> None:
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
    ends (``gc.unfreeze`` in _analyse_project)."""
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


def _analyse_chunk(paths: list) -> list:
    w = _WORKER
    return [_analyse_one(p, w["index"], w["facts"], w["settings"]) for p in paths]


def _max_size(settings) -> int:
    return settings.max_file_size if settings is not None else engine_default_max_size()


def _limits(settings):
    return settings.limits if settings is not None else None
