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
    return lint_files(list(iter_python_files(paths, settings, warn)), settings, jobs=1, cache=None, warn=warn)


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
    jobs = pool.default_jobs() if jobs is None or jobs <= 0 else jobs
    pool.raise_recursion_limit()
    out: list[Finding] = []
    for root, asked in by_root(paths).items():
        out.extend(lint_project(root, asked, settings, jobs=jobs, cache=cache, warn=warn))
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
    if len(files) > len(asked):  # only the modules connected to the asked ones by imports can matter
        connected = connected_files(index, asked, inputs.read_text)
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
    levels = dependency_levels(index, inputs.decls) if len(files) > 1 else {}
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
            facts.update(changes)
        pending = [p for p in files if "reads" in results[p] and results[p]["reads"]
                   and not facts.agrees(results[p]["summary"]["module"], results[p]["reads"])]
        if not pending:
            break
    memory.release_memory(memory.TRIM_EVERY)  # the last walks' trees, before deciding and storing
    # in file order, whatever order the walks ran in: the paths messages name do not depend on the schedule
    results = {p: results[p] for p in files if p in results}
    memory.thaw()
    # flake8 asks for every file of a project, one at a time, over one state: decide them all at once
    decided = asked if honor_noqa or state is None or not whole else files
    found = decision.decide(results, decided, root, index, honor_noqa)
    if state is not None and whole:
        store.store_project(cache, root, state, results)
        store.store_findings(cache, root, state, decided, found, honor_noqa, fresh=True)
    return store.only_of(found, asked)


def _waves(paths: list, levels: dict) -> list:
    """``paths`` grouped by dependency level (``project.dependency_levels``), lowest first."""
    by_level: dict = {}
    for p in paths:
        by_level.setdefault(levels.get(p, 0), []).append(p)
    return [by_level[k] for k in sorted(by_level)]
