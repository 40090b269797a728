"""Which files to lint under the paths given: explicit files always; directories walked for ``*.py``
and ``*.ipynb``, skipping what the excludes (of the nearest config) and, in a git work tree,
``.gitignore`` say."""

from __future__ import annotations

import os
from typing import Iterable, Iterator

from xlalint.sources.gitignore import is_ignored


def _settings_for(settings, path: str):
    """``settings`` is one Settings for every file, or a config.Resolver (the nearest config per file)."""
    return settings.for_path(path) if hasattr(settings, "for_path") else settings


def iter_python_files(paths: Iterable[str], settings, warn=None) -> Iterator[str]:
    """Files to lint under ``paths``: explicit files always; directories walked for ``*.py`` and
    ``*.ipynb``, skipping what the excludes (of the nearest config) and, in a git work tree, .gitignore say."""
    seen_dirs = set()
    for p in paths:
        if os.path.isdir(p):
            yield from _walk_dir(p, settings, seen_dirs, warn)
        else:
            yield p


def _walk_dir(root: str, settings, seen_dirs: set, warn) -> Iterator[str]:
    try:
        real = os.path.realpath(root)
    except OSError:
        real = root
    if real in seen_dirs:
        if warn:
            warn(f"{root}: skipped, the same directory as {real}, already linted (a symlink, or a symlink loop)")
        return
    seen_dirs.add(real)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as e:
        if warn:
            warn(f"{root}: cannot list directory: {e.strerror or e}")
        return
    here = _settings_for(settings, root) if settings is not None else None
    gitignore = here is not None and getattr(here, "respect_gitignore", False)
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if not is_dir and not entry.name.endswith((".py", ".ipynb")):
            continue  # before the excludes: most of a tree's files are not Python
        path = os.path.join(root, entry.name) if root not in (".",) else entry.name
        if here is not None and here.is_excluded(path):
            continue
        if gitignore and is_ignored(path, is_dir):
            continue
        if is_dir:
            yield from _walk_dir(path, settings, seen_dirs, warn)
        else:
            yield path
