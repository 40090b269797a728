"""What a run keeps in the findings cache (xlalint/run/cache.py), and how it finds it again.

Per file, by its contents: its declarations, and the results of its walks under different facts about
its neighbours (variants, each with the facts it read). Per project, by its root: the state of the
whole project (every file's contents key) with every module's results of the last whole run, and the
findings decided over that state, so that a run over an unchanged project walks and decides nothing.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import time
from typing import Optional

from xlalint.analysis import decision
from xlalint.analysis.file_findings import has_internal_error
from xlalint.analysis.module import declare
from xlalint.findings import Finding, finding_row
from xlalint.run.cache import Cache
from xlalint.run.inputs import Inputs
from xlalint.semantics.project import relative

# results of one file's contents under different facts about its neighbours: one per round it can be
# walked in (run/project.py's MAX_ROUNDS is this number), so that a warm run replays every round of the
# cold one from the cache (with 4, the modules walked in all 5 rounds of torch's project pass lost their
# first result and were walked again)
MAX_VARIANTS = 8


# ---------------------------------------------------------------------------------------- per file
def cache_key(data: bytes, path: str, index, inputs: Inputs) -> str:
    """A file's entry: its bytes, its module name, the codes enabled for it."""
    module, is_pkg = index.module_of(path)
    return Cache.key(data + b"\0" + module.encode() + (b"\0pkg" if is_pkg else b""), inputs.codes(path))


def declarations(path: str, index, inputs: Inputs, cache: Optional[Cache]) -> Optional[dict]:
    """A file's declarations and CPython's verdict (``analysis.module.declare``), from the cache when it
    has them."""
    data, err = inputs.read(path)
    if err is not None:
        return None
    key = None
    if cache is not None:
        key = cache_key(data, path, index, inputs) + "d"
        hit = cache.load(key, count=False)
        if hit:
            return hit[0]
    module, is_pkg = index.module_of(path)
    d = declare(data, path, module, is_pkg, inputs.limits)
    if d is not None and key is not None:
        cache.store(key, [d])
    return d


def cached_result(path: str, index, facts, inputs: Inputs, cache: Optional[Cache]):
    """A stored result of this file's contents whose reads agree with the facts, or None."""
    if cache is None:
        return None
    data, err = inputs.read(path)
    if err is not None:
        return None
    variants = cache.load(cache_key(data, path, index, inputs))
    module = index.module_of(path)[0]
    for v in variants or ():
        if "packed" in v and (not v.get("reads") or facts.agrees(module, v["reads"])):
            result = _unpack(v)
            if result is not None:
                return result
    return None


def keep_result(results: dict, cache: Optional[Cache], path: str, key: Optional[str], result: dict) -> None:
    """``result`` is the file's: in ``results``, and in the cache under ``key`` beside the variants of
    other reads (unless it holds an internal error)."""
    results[path] = result
    if cache is not None and key is not None and not has_internal_error(result):
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


# ---------------------------------------------------------------------------------------- per project
def _rel(path: str, root: str) -> str:
    return relative(path, os.path.abspath(root))


def project_key(root: str) -> str:
    """The cache entry of a project's last whole run: one per project root (and, through the cache's
    salt, per settings and xlalint version), so a run after each edit rewrites it instead of adding one."""
    return hashlib.blake2b(os.path.abspath(root).encode("utf-8", "surrogatepass"), digest_size=20).hexdigest() + "p"


def project_state(files: list, index, inputs: Inputs) -> str:
    """The whole project as it is: every file's path under the root with its contents key (or why it
    cannot be read), hashed."""
    h = hashlib.blake2b(digest_size=20)
    for rel, p in sorted((_rel(p, index.root), p) for p in files):
        h.update(f"{rel}\0{_state_part(p, index, inputs)}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _state_part(path: str, index, inputs: Inputs) -> str:
    """A file's part of the project state: its contents key, or why it cannot be read. Remembered for
    this process by the file's stat, so that a host asking for every file of a large project in turn
    (flake8) does not read and hash the whole project again each time; a file changed in the last
    seconds is always read again (its timestamp cannot tell two quick edits apart: git's "racy" rule)."""
    memo = None
    settings = inputs.settings
    if path not in inputs.sources:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - RACY_NS:
            memo = (os.path.abspath(path), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, index.root,
                    index.module_of(path), settings.codes_for(path) if settings is not None else None, inputs.max_size)
            part = _STATE_PARTS.get(memo)
            if part is not None:
                return part
    data, err = inputs.read(path)
    part = cache_key(data, path, index, inputs) if err is None else f"error:{err.code}:{err.message}"
    if memo is not None:
        _STATE_PARTS[memo] = part
    return part


RACY_NS = 3_000_000_000
_STATE_PARTS: dict = {}  # see _state_part


def from_store(cache: Cache, root: str, state: str, asked: list, files: list, index, honor_noqa: bool):
    """The findings of the ``asked`` files when the whole project is unchanged since a run that stored
    its results (every file's bytes, the settings, xlalint's code): decided by that run, or decided
    again from its per-file results, without a walk or a round. Else None."""
    found = _stored_findings(cache, root, state, asked, honor_noqa)  # the asked files decided by an earlier run
    if found is not None:
        cache.hits += len(files)
        return found
    hit = cache.load(project_key(root), count=False)
    spelled = {_rel(p, root): p for p in files}  # stored by path under the root: `xlalint .` or `src/x.py`
    # the results are decoded only for the same state (on torch they are 25 MB, 150 MB decoded)
    stored = _unmarshal(hit[0].get("packed")) if hit and hit[0].get("state") == state else None
    hit = None
    if isinstance(stored, dict) and set(stored) <= set(spelled):
        cache.hits += len(files)  # every file's result came from the cache
        decided = asked if honor_noqa else files  # see run/project.py's analyse_project
        found = decision.decide({spelled[r]: v for r, v in stored.items()}, decided, root, index, honor_noqa)
        store_findings(cache, root, state, decided, found, honor_noqa, fresh=False)
        return only_of(found, asked)
    return None


def store_project(cache: Cache, root: str, state: str, results: dict) -> None:
    """Keep every module's results of a whole run over ``state``: the project's last state only (the
    entry is rewritten, never added to)."""
    cache.store(project_key(root), [{"state": state, "packed": marshal.dumps({_rel(p, root): r for p, r in results.items()})}])


def only_of(found: list, asked: list) -> list:
    """The findings of the ``asked`` files among ``found``."""
    want = set(asked)
    return [f for f in found if f.path in want]


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


def store_findings(cache: Cache, root: str, state: str, asked: list, found: list, honor_noqa: bool,
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
    return project_key(root) + ("f" if honor_noqa else "n")
