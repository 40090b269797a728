"""The project: its modules, how their imports resolve, and the facts one module's analysis gives another.

The shape is the one mypy, pyright and Infer share: summarise each module alone, solve over the
summaries, check each module with the solved facts.

* ``ProjectIndex`` knows the files: the project root (nearest ``pyproject.toml``, ``setup.py``,
  ``setup.cfg`` or ``.git``), each file's module name (``src/`` layouts, packages), and resolves a dotted
  name to a module, a function or a class, following names a package's ``__init__`` re-exports.
* ``Facts`` is what the walk of one module may ask about the others (what a function returns, whether a
  class is an ``nn.Module``, what an attribute holds, what callers pass to a parameter). Every answer
  is recorded as a *read*: a module's result stays valid for as long as the facts it read are unchanged,
  which is what makes the cache right and tells the engine which modules to walk again.
* ``Program`` rebuilds the call graph of every module from the summaries and answers, through
  ``steps.Steps``, how often any context of any module runs, with the path that makes it so.

Summaries are plain data (dicts, lists, strings, numbers): they go through ``marshal`` to the cache and
between processes, and no syntax tree outlives its module's walk.

The rooms: ``index`` (files and module names), ``facts`` (Facts and one walk's FactsView), ``program``
(the call graph), ``declarations`` (which files matter, and what each declares before any walk),
``levels`` (the order of the walks).
"""

from xlalint.semantics.project.declarations import connected_files, declarations, imported_names
from xlalint.semantics.project.facts import MAX_RESOLVE_DEPTH, Facts, FactsView, seed_kind
from xlalint.semantics.project.index import ROOT_MARKERS, ProjectIndex, find_root, marked_root, module_name, relative
from xlalint.semantics.project.levels import dependency_levels
from xlalint.semantics.project.program import Program

__all__ = [
    "MAX_RESOLVE_DEPTH", "ROOT_MARKERS", "Facts", "FactsView", "Program", "ProjectIndex", "connected_files",
    "declarations", "dependency_levels", "find_root", "imported_names", "marked_root", "module_name",
    "relative", "seed_kind",
]
