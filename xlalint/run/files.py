"""Which files make a project: its root for each file asked for, and the Python files under it."""

from __future__ import annotations

import os

from xlalint.semantics.project import find_root, marked_root
from xlalint.sources.discover import iter_python_files


def by_root(paths, folders=()) -> dict:
    """The files asked for, grouped by their project root (``project.find_root``), in order. ``folders``:
    the directories the user named; a file with no root marker at or above it (an unpacked archive, a
    Kaggle folder, a research code drop) belongs to the outermost named folder that holds it, so that
    ``train.py`` and ``tagger/losses.py`` of one plain folder are one project, not one per directory."""
    anchors = sorted({os.path.normpath(os.path.abspath(f)) for f in folders}, key=len)
    groups: dict = {}
    for p in paths:
        root = find_root(p)
        if anchors and root == _own_dir(p) and marked_root(root) is None:
            here = os.path.normpath(os.path.abspath(p))
            root = next((a for a in anchors if here.startswith(a.rstrip(os.sep) + os.sep)), root)
        groups.setdefault(root, []).append(p)
    return groups


def anchors_for(paths, folders=()) -> list:
    """Where files without a root marker belong (``by_root``): the folders the user named, else the current
    directory when it holds every file named (``xlalint tagger/losses.py`` run in a plain folder: the file still
    sees ``train.py`` beside it, which imports it), never the filesystem's root or the home directory."""
    folders = list(folders)
    if folders:
        return folders
    cwd = os.path.normpath(os.getcwd())
    if cwd in _NEVER_ANCHORS:
        return []
    inside = [os.path.normpath(os.path.abspath(p)) for p in paths]
    return [cwd] if inside and all(p.startswith(cwd.rstrip(os.sep) + os.sep) for p in inside) else []


def root_for(path: str, anchors=()) -> str:
    """The project root of one file linted by a front end that names no folder (the flake8 plugin, the
    language server): ``anchors`` are where the user works (flake8's current directory, the editor's
    workspace folders); a file with no root marker under one of them belongs to it, as in ``by_root``.
    The filesystem's root and the home directory are never anchors: a stray file there is not a project
    of everything below."""
    usable = [a for a in anchors if a and os.path.normpath(os.path.abspath(a)) not in _NEVER_ANCHORS]
    return next(iter(by_root([path], usable)))


_NEVER_ANCHORS = frozenset({os.path.abspath(os.sep), os.path.normpath(os.path.expanduser("~"))})


def _own_dir(path: str) -> str:
    p = os.path.abspath(path)
    return p if os.path.isdir(p) else os.path.dirname(p)


def project_files(root: str, asked: list, settings) -> list:
    """The modules of the project at ``root``: its Python files (as discovery finds them, so excludes
    apply) and the files asked for."""
    files = list(iter_python_files(project_tops(root, asked), settings))
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
