"""The house's rules, drawn from the code itself (``ast``, every import, function-level ones too):
imports only point down the floors below, no import circle, no ``_private`` name of another module used,
no module over 700 lines, no class over 500.

The floors, from the ground up (each module on exactly one; a new module must be given its floor here):
values -> sources -> parse -> semantics -> rules -> analysis -> run -> front ends.
"""

from __future__ import annotations

import ast
import fnmatch
import sys
from pathlib import Path

import pytest

from xlalint.semantics.project.levels import components

ROOT = Path(__file__).resolve().parent.parent
# where the code lives, and the top-level name it is imported by
PACKAGES = {"xlalint": ROOT / "xlalint", "xlalint_flake8": ROOT / "plugins" / "xlalint_flake8"}

# module glob (relative to the repository) -> floor. A module imports only from its own floor or below.
FLOORS = [
    # 0 values: what every floor passes around, knowing nothing (the version, a Finding, a Problem)
    ("xlalint/__init__.py", 0),
    ("xlalint/findings.py", 0),
    # 1 sources: which files, their bytes and text, the comments that silence findings, notebooks as
    # program text; no tree, no rule, no project
    ("xlalint/sources/*", 1),
    # 2 parse: text -> a libcst tree, safely (the guard, the big stack), and the positions of its nodes
    ("xlalint/parse/*", 2),
    # 3 semantics: the walker and its models (what is a tensor, what runs every step), the project's
    # facts; it drives rules it is given but never imports them
    ("xlalint/semantics/*", 3),
    # 4 rules: one module per rule, asking the model its questions
    ("xlalint/rules/*", 4),
    # 5 analysis: one module's parse + walk with the rules; a project's findings decided from them
    ("xlalint/analysis/*", 5),
    # 6 run: which files make a project, the cache, the pool, the rounds; and the settings it runs with
    # (config names rules and limits, so it sits above them; nothing below needs it)
    ("xlalint/config.py", 6),
    ("xlalint/run/*", 6),
    # 7 front ends: what a person or a tool talks to
    ("xlalint/cli.py", 7),
    ("xlalint/__main__.py", 7),
    ("xlalint/server.py", 7),
    ("xlalint/fix.py", 7),
    ("xlalint/report/*", 7),
    ("xlalint/verify/*", 7),
    ("plugins/xlalint_flake8/*", 7),
]

MAX_MODULE_LINES = 700
MAX_CLASS_LINES = 500

# What breaks the rules today, each with its reason: empty since issue 31 (an entry that no longer breaks a
# rule fails the test too, so that it is removed at once).
KNOWN_TODAY: set = set()


# ---------------------------------------------------------------------------------------- the graph
def _modules() -> dict:
    """Dotted name -> file, for every module of the packages."""
    out = {}
    for top, base in PACKAGES.items():
        for f in sorted(base.rglob("*.py")):
            parts = [top, *f.relative_to(base).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


MODULES = _modules()


def _rel(f: Path) -> str:
    return f.relative_to(ROOT).as_posix()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _imports(name: str, tree: ast.Module) -> list:
    """(line, imported module, imported name or None) for every import in the module, at any depth."""
    package = name if _is_package(name) else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out.append((node.lineno, a.name, None))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                out.append((node.lineno, base, a.name))
    return out


def _target(module: str, name) -> tuple:
    """The module an import reaches (ours, else None) and the name taken from it (None: the module)."""
    if name is not None and f"{module}.{name}" in MODULES:
        return f"{module}.{name}", None
    while module and module not in MODULES:
        module = module.rpartition(".")[0]
    return (module or None), name


def _graph(only=None) -> tuple:
    """Edges (importer -> imported, with the line) and the private names taken across modules (of the
    modules ``only``, or all)."""
    edges, private = [], []
    for name, f in MODULES.items():
        if only is not None and name not in only:
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"), str(f))
        bound = {}  # local name -> one of our modules, for `mod._private`
        for line, module, imported in _imports(name, tree):
            target, taken = _target(module, imported)
            if target is None or target == name:
                continue
            edges.append((name, target, line))
            if taken is not None and taken.startswith("_") and not taken.startswith("__"):
                private.append((name, target, taken))
            leaf = target.rpartition(".")[2]
            if leaf.startswith("_") and not leaf.startswith("__") and not _inside(name, target.rpartition(".")[0]):
                private.append((name, target, "(module)"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in MODULES:
                        bound[a.asname or a.name.partition(".")[0]] = a.name if a.asname else a.name.partition(".")[0]
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    target, taken = _target(_imports_base(name, node), a.name)
                    if target is not None and taken is None:
                        bound[a.asname or a.name] = target
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = _module_of(_dotted(node.value), bound)
                if owner is not None and owner != name:
                    private.append((name, owner, node.attr))
    return edges, private


def _dotted(node):
    """``a.b.c`` for a chain of names and attributes, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _module_of(dotted, bound: dict):
    """The module of ours that ``dotted`` names, through the names the imports bound; else None."""
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head not in bound:
        return None
    full = bound[head] + ("." + rest if rest else "")
    return full if full in MODULES else None


def _imports_base(name: str, node: ast.ImportFrom) -> str:
    return next(m for line, m, n in _imports(name, ast.Module(body=[node], type_ignores=[])))


def _inside(importer: str, package: str) -> bool:
    return importer == package or importer.startswith(package + ".")


def _floor(name: str):
    rel = _rel(MODULES[name])
    found = [floor for glob, floor in FLOORS if fnmatch.fnmatch(rel, glob)]
    return found[0] if len(found) == 1 else None


EDGES, PRIVATE = _graph()


# ---------------------------------------------------------------------------------------- the rules
def test_every_module_is_on_exactly_one_floor():
    unplaced = [_rel(f) for name, f in MODULES.items()
                if sum(fnmatch.fnmatch(_rel(f), glob) for glob, _ in FLOORS) != 1]
    assert unplaced == [], "give each module one floor in FLOORS"


def test_imports_only_point_down():
    up = sorted(f"{_rel(MODULES[a])}:{line} imports {_rel(MODULES[b])} (floor {_floor(a)} -> {_floor(b)})"
                for a, b, line in EDGES if _floor(b) > _floor(a))
    assert up == []


def _circles() -> list:
    """The strongly connected components of more than one module, each sorted (the project pass's own
    Tarjan, ``levels.components``, over the import graph)."""
    graph: dict = {n: set() for n in MODULES}
    for a, b, _ in EDGES:
        graph[a].add(b)
    return [sorted(c) for c in components(graph) if len(c) > 1]


def test_no_import_circle():
    assert _circles() == []


def _violations() -> set:
    found = set()
    for a, b, taken in PRIVATE:
        found.add(("private", f"{_rel(MODULES[a])} -> {_rel(MODULES[b])}:{taken}"))
    for name, f in MODULES.items():
        text = f.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            found.add(("module-size", _rel(f)))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                found.add(("class-size", f"{_rel(f)}:{node.name}"))
    return found


def test_no_private_name_crosses_a_module_and_nothing_is_too_big():
    found = _violations()
    assert sorted(found - KNOWN_TODAY) == [], "new: fix them (KNOWN_TODAY only shrinks)"
    assert sorted(KNOWN_TODAY - found) == [], "fixed: remove them from KNOWN_TODAY"


# ---------------------------------------------------------------------------------------- the test's own
@pytest.mark.parametrize("source, expect", [
    ("from xlalint.run.project import lint_files\n", "up"),
    ("def f():\n    from xlalint.run import pool\n    return pool\n", "up"),
    ("from xlalint.sources.read import _nothing\n", "private"),
    ("from xlalint.sources import read\nread._private_thing\n", "private"),
    ("import xlalint.sources.read as r\nr._x\n", "private"),
    ("import xlalint.sources.read\nxlalint.sources.read._x\n", "private"),
    ("from . import read\nread._x\n", "private"),
    ("from xlalint.sources import read\nread.__name__\nread.decode_source\n", None),
])
def test_the_rules_see_what_they_should(source, expect, monkeypatch):
    # the drawing itself, on a module placed on the sources floor (it must fail to pass)
    name = "xlalint.sources._probe"
    probe = ROOT / "xlalint" / "sources" / "probe_for_the_architecture_test.py"
    monkeypatch.setitem(MODULES, name, probe)
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source if self == probe else real_read(self, *a, **k))
    edges, private = _graph(only={name})
    ups = [(a, b) for a, b, _ in edges if a == name and _floor(b) > _floor(a)]
    mine = [p for p in private if p[0] == name]
    assert (expect == "up") == bool(ups)
    assert (expect == "private") == bool(mine)


def test_a_circle_is_found(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "EDGES", EDGES + [("xlalint.findings", "xlalint.analysis.module", 1)])
    assert any("xlalint.findings" in c for c in _circles())
