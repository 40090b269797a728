"""A lint of files on disk, each as part of its project: the entry points of every front end.

For each project root, the asked files' findings come from the store when the whole project is
unchanged; else (one process at a time per project) every module is declared, walked in rounds until
the facts agree, the findings are decided over the whole program, and the results are stored.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Iterable, Optional

from xlalint.analysis import decision
from xlalint.analysis.file_findings import failing_module, has_internal_error, internal_error, row
from xlalint.findings import Finding
from xlalint.run import memory, pool, store
from xlalint.run.cache import Cache
from xlalint.run.files import by_root, project_files
from xlalint.run.inputs import Inputs
from xlalint.semantics.project import Facts, ProjectIndex, connected_files, dependency_levels
from xlalint.sources.discover import iter_python_files

# Rounds of "walk the modules whose facts changed": each walk records the facts it read about other
# modules; after a round the facts are solved again from every summary, and a module whose reads no
# longer hold is walked again. Facts only grow more precise, so this settles in a few rounds. A warm
# run replays every round from the cache: one stored variant per round.
MAX_ROUNDS = store.MAX_VARIANTS


def lint_paths(paths: list[str], settings=None, warn=None) -> list[Finding]:
    """Lint files and directories, each file as part of its project; the findings sorted."""
    return lint_files(list(iter_python_files(paths, settings, warn)), settings, jobs=1, cache=None, warn=warn,
                      folders=[p for p in paths if os.path.isdir(p)])


def lint_files(
    paths: Iterable[str],
    settings,
    *,
    jobs: Optional[int] = None,
    cache: Optional[Cache] = None,
    warn: Optional[Callable[[str], None]] = None,
    folders: Iterable[str] = (),
) -> list[Finding]:
    """Lint every path in ``paths`` (files, not directories) as part of its project: the modules
    around each file (under its project root) are summarised too, and only ``paths`` are reported.
    ``folders``: the directories the user named, the root of the files under them that have no root
    marker (``files.by_root``)."""
    jobs = pool.default_jobs() if jobs is None or jobs <= 0 else jobs
    pool.raise_recursion_limit()
    out: list[Finding] = []
    for root, asked in by_root(paths, folders).items():
        try:
            out.extend(lint_project(root, asked, settings, jobs=jobs, cache=cache, warn=warn))
        except Exception as e:  # noqa: BLE001 - a bug of xlalint's: the other projects are still linted
            out.extend(internal_error(p, "the run over the file's project", e) for p in asked)
    return sorted(out)


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
    inputs = Inputs(settings, sources, parse)  # before anything reads a file: the project's state is the buffers'
    # the whole project unchanged since a run that stored its results (every file's bytes, the settings,
    # xlalint's code): that run's per-file results, without a walk or a round
    state = store.project_state(files, index, inputs) if cache is not None and not parse else None
    if state is None:
        return analyse_project(root, asked, files, index, inputs, jobs, cache, None, honor_noqa)
    found = store.from_store(cache, root, state, asked, files, index, honor_noqa)
    if found is not None:
        return found
    # one process analyses the project at a time: flake8's jobs each start with a file of the same
    # project, and the ones that waited read back what the first one stored
    with cache.exclusive(store.project_key(root)):
        found = store.from_store(cache, root, state, asked, files, index, honor_noqa)
        if found is not None:
            return found
        return analyse_project(root, asked, files, index, inputs, jobs, cache, state, honor_noqa)


def analyse_project(root: str, asked: list, files: list, index, inputs: Inputs, jobs: int, cache: Optional[Cache],
                    state: Optional[str], honor_noqa: bool) -> list[Finding]:
    """``lint_project`` when nothing stored answers: declare, walk in rounds until the facts agree,
    decide, and store the project's results when ``state`` is known and the whole project was walked."""
    whole = True
    errors: dict = {}  # path -> XLA902 findings of the project pass (each phase falls back on what is safe)
    if len(files) > len(asked):  # only the modules connected to the asked ones by imports can matter
        try:
            connected = connected_files(index, asked, inputs.read_text)
        except Exception as e:  # noqa: BLE001 - every file is connected, then
            _blame(errors, e, "the project's import graph", files, asked, index)
            connected = files
        whole = len(connected) == len(files)
        files = connected
        index = ProjectIndex(root, files)
    results: dict = {}
    # every module's names first (CPython's parser): the first walks resolve names across modules
    inputs.decls.clear()
    for p in files:
        d = store.declarations(p, index, inputs, cache)
        if d is not None:
            inputs.decls[p] = d
    # the facts: every module's declarations, each replaced by its walked summary once walked
    facts = Facts(index, {d["summary"]["module"]: d["summary"] for d in inputs.decls.values()})
    try:
        levels = dependency_levels(index, inputs.decls) if len(files) > 1 else {}
    except Exception as e:  # noqa: BLE001 - one level: the same findings, in more rounds
        _blame(errors, e, "the order of the project's walks", files, asked, index)
        levels = {}
    pending = files
    for n in range(MAX_ROUNDS):
        if os.environ.get("XLALINT_DEBUG_ROUNDS"):
            print(f"xlalint: round {n}: {len(pending)} of {len(files)} modules", file=sys.stderr)
        # level by level (callees before callers), the facts updated between levels: the same schedule
        # whatever the number of jobs, so -j N gives what -j 1 gives
        for wave in _waves(pending, levels):
            pool.run_round(wave, index, facts, inputs, jobs, cache, results)
            changes = {}
            for p in wave:
                r = results[p]
                if "summary" in r:
                    changes[r["summary"]["module"]] = r["summary"]
                else:
                    changes[index.module_of(p)[0]] = None
            _update(facts, changes, wave, index, results)
        pending = [p for p in files if "reads" in results[p] and results[p]["reads"]
                   and not _agrees(facts, p, results)]
        if not pending:
            break
    memory.release_memory(memory.TRIM_EVERY)  # the last walks' trees, before deciding and storing
    # in file order, whatever order the walks ran in: the paths messages name do not depend on the schedule
    results = {p: results[p] for p in files if p in results}
    memory.thaw()
    # flake8 asks for every file of a project, one at a time, over one state: decide them all at once
    decided = asked if honor_noqa or state is None or not whole else files
    found = decision.decide(results, decided, root, index, honor_noqa)
    found.extend(f for p in decided for f in errors.get(p, ()))
    if any(has_internal_error(r) for r in results.values()) or any(f.code == "XLA902" for f in found):
        state = None  # an internal error is never stored: a run with --show-internal-errors meets it again
    if state is not None and whole:
        store.store_project(cache, root, state, results)
        store.store_findings(cache, root, state, decided, found, honor_noqa, fresh=True)
    return store.only_of(found, asked)


def _update(facts, changes: dict, wave: list, index, results: dict) -> None:
    """``facts.update(changes)``; when it raises, module by module, and a module whose summary cannot
    be taken in is left out of the facts, with an XLA902 (its own findings then come from no walk)."""
    try:
        facts.update(changes)
        return
    except Exception:  # noqa: BLE001 - found again below, module by module
        pass
    for p in wave:
        mod = index.module_of(p)[0]
        r = results[p]
        if "summary" in r:
            mod = r["summary"]["module"]
        try:
            facts.update({mod: changes.get(mod)})
        except Exception as e:  # noqa: BLE001
            results[p] = {"file": r.get("file", []) + [row(internal_error(p, "the project's facts", e))]}
            try:
                facts.update({mod: None})
            except Exception:  # noqa: BLE001 - as left by the failed update; decide() copes
                pass


def _agrees(facts, path: str, results: dict) -> bool:
    """The facts a module's walk read still hold (else it is walked again); a module whose reads cannot
    be checked keeps its walk, with an XLA902."""
    r = results[path]
    try:
        return facts.agrees(r["summary"]["module"], r["reads"])
    except Exception as e:  # noqa: BLE001
        results[path] = {**r, "file": r.get("file", []) + [row(internal_error(path, "the project's facts", e))]}
        return True


def _blame(errors: dict, exc: Exception, where: str, files: list, asked: list, index) -> None:
    """An XLA902 for a project-wide phase: at the module it raised on, else at every file asked for."""
    culprit = failing_module(exc, {**{p: p for p in files}, **{index.module_of(p)[0]: p for p in files}})
    for p in [culprit] if culprit in asked else asked:
        errors.setdefault(p, []).append(internal_error(p, where, exc))


def _waves(paths: list, levels: dict) -> list:
    """``paths`` grouped by dependency level (``project.dependency_levels``), lowest first."""
    by_level: dict = {}
    for p in paths:
        by_level.setdefault(levels.get(p, 0), []).append(p)
    return [by_level[k] for k in sorted(by_level)]
