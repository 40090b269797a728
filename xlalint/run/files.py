"""Which files make a project: its root for each file asked for, and the Python files under it."""

from __future__ import annotations

import os

from xlalint.semantics.project import find_root
from xlalint.sources.discover import iter_python_files


def by_root(paths) -> dict:
    """The files asked for, grouped by their project root (``project.find_root``), in order."""
    groups: dict = {}
    for p in paths:
        groups.setdefault(find_root(p), []).append(p)
    return groups


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
