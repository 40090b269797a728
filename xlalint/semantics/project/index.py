"""The project's files and modules: the root, each file's module name, and names resolved to modules.

``ProjectIndex`` knows the files: the project root (nearest ``pyproject.toml``, ``setup.py``, ``setup.cfg``
or ``.git``), each file's module name (``src/`` layouts, packages), and splits a dotted name into the
module that defines it and the rest.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional


ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def find_root(path: str) -> str:
    """The project root of ``path``: the nearest directory above it with a root marker, else the
    directory itself (a lone script, or a tree with no marker). Inside an installed package it is the
    ``site-packages`` directory, whatever lies above it (a virtual environment inside a project)."""
    p = os.path.abspath(path)
    start = p if os.path.isdir(p) else os.path.dirname(p)
    parts = start.split(os.sep)
    for i in range(len(parts) - 1, 0, -1):  # an installed package: its modules are named from here
        if parts[i] in ("site-packages", "dist-packages"):
            return os.sep.join(parts[: i + 1]) or os.sep
    return marked_root(start) or start


def is_marked(directory: str) -> bool:
    """The directory holds a root marker. A ``setup.py`` beside an ``__init__.py`` is a module of a package
    (dinov2's ``eval/setup.py`` sets up an evaluation), not a project's build script."""
    for m in ROOT_MARKERS:
        if os.path.exists(os.path.join(directory, m)):
            if m == "setup.py" and os.path.exists(os.path.join(directory, "__init__.py")):
                continue
            return True
    return False


def marked_root(directory: str) -> Optional[str]:
    """The nearest directory at or above ``directory`` with a root marker, or None."""
    d = directory
    while True:
        if is_marked(d):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def relative(path: str, root: str) -> str:
    """``os.path.relpath(os.path.abspath(path), root)``, remembered: a host that asks for every file of
    a large project in turn (flake8) names every file of it on each call."""
    key = (path, root, os.getcwd())
    rel = _RELATIVE.get(key)
    if rel is None:
        if len(_RELATIVE) > 500_000:
            _RELATIVE.clear()
        rel = _RELATIVE[key] = os.path.relpath(os.path.abspath(path), root)
    return rel


_RELATIVE: dict = {}


def module_name(path: str, root: str) -> tuple[str, bool]:
    """(dotted module name, is a package ``__init__``) of a file under ``root``; ``src/`` layouts
    drop the ``src`` part, as an installed package would (``split`` still finds ``src.model`` of a script that
    imports it so: ``from src.model import RWKV``)."""
    rel = relative(path, root)
    parts = rel.replace(os.sep, "/").split("/")
    if len(parts) > 1 and parts[0] == "src":
        parts = parts[1:]
    last = parts[-1]
    for ext in (".pyi", ".py", ".ipynb"):  # a notebook is a module too (xlalint/sources/notebook.py)
        if last.endswith(ext):
            last = last[: -len(ext)]
    is_pkg = last == "__init__"
    parts = parts[:-1] if is_pkg else parts[:-1] + [last]
    parts = [p for p in parts if p not in ("", ".")]
    return ".".join(parts) or "__main__", is_pkg


class ProjectIndex:
    """The modules of one project: names to files and back."""

    def __init__(self, root: str, paths: Iterable[str]):
        self.root = root
        self.by_module: dict[str, str] = {}
        self.by_path: dict[str, str] = {}
        self.packages: set[str] = set()
        self.src_layout = False  # a `src/` at the root, whose modules are named without it (``module_name``)
        for p in sorted(paths):
            name, is_pkg = module_name(p, root)
            self.src_layout = self.src_layout or relative(p, root).replace(os.sep, "/").startswith("src/")
            if name in self.by_module:
                # two files, one name (a root that is a package: its __init__.py and __main__.py; x.py
                # and x.ipynb; pkg.py and pkg/__init__.py; src/x.py and x.py): one is the module (a
                # package wins, as in Python); the other is analysed under a name of its own that no
                # import reaches, so that no two analyses of a run share a name
                if not is_pkg:
                    self._aside(p, name, False)
                    continue
                self._aside(self.by_module[name], name, name in self.packages)
            self.by_module[name] = p
            self.by_path[p] = name
            if is_pkg:
                self.packages.add(name)
        # every prefix of a module is a package, even without an __init__ (namespace packages)
        self.prefixes = {".".join(m.split(".")[:i]) for m in self.by_module for i in range(1, m.count(".") + 1)}

    def _aside(self, path: str, name: str, is_pkg: bool) -> None:
        alias = f"{name}@{relative(path, self.root)}"
        self.by_path[path] = alias
        if is_pkg:
            self.packages.add(alias)

    def module_of(self, path: str) -> tuple[str, bool]:
        name = self.by_path.get(path)
        if name is None:
            return module_name(path, self.root)
        return name, name in self.packages

    def split(self, dotted: str, importer: str = "") -> Optional[tuple[str, str]]:
        """(module, the rest) for the longest module prefix of ``dotted``: a top-level one, else one under the
        importer's own directory (a script's directory is on ``sys.path``) or, nearest first, under a folder above
        it (a course's ``week08/gans/models/StyleGAN2/train.py`` imports ``gans.models.StyleGAN2.model``: it is run
        from ``week08/``, with ``python -m`` or from a notebook there)."""
        for base in _search_bases(importer):
            full = f"{base}.{dotted}" if base else dotted
            parts = full.split(".")
            for i in range(len(parts), len(base.split(".")) if base else 0, -1):
                mod = ".".join(parts[:i])
                if mod in self.by_module:
                    return mod, ".".join(parts[i:])
        if dotted.startswith("src.") and self.src_layout:  # a `src/` at the root, named without it
            return self.split(dotted[4:], importer)
        return None

    def knows(self, dotted: str, importer: str = "") -> bool:
        """``dotted`` may name something in the project (a module, or a name inside one)."""
        head = dotted.split(".")[0]
        if head in self.by_module or head in self.prefixes:
            return True
        if head == "src" and "." in dotted and self.src_layout and self.knows(dotted[4:], importer):
            return True  # a `src/` at the root, named without it (``module_name``)
        return any(f"{base}.{head}" in self.by_module or f"{base}.{head}" in self.prefixes
                   for base in _search_bases(importer) if base)


def _search_bases(importer: str):
    """Where an absolute import of ``importer`` may start: the root (""), then the importer's directory and
    each directory above it, nearest first."""
    yield ""
    base = _package_dir(importer.partition("@")[0])  # `scripts.ladder@scripts/ladder.py`: beside a notebook of its name
    while base:
        yield base
        base = _package_dir(base)


def _package_dir(module: str) -> str:
    return module.rpartition(".")[0]
