"""``.gitignore`` for the directory walk, as ruff (and git) read it: only inside a git work tree.

The patterns of every ``.gitignore`` from the repository root down to a directory, and
``.git/info/exclude``, apply to what the walk finds in it; the last matching pattern wins, ``!``
re-includes, a trailing ``/`` matches directories only, a pattern with a ``/`` before its end is
anchored to its file's directory, ``**`` spans directories. Files named on the command line are linted
whatever .gitignore says (as in ruff).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Optional


def _to_regex(pattern: str) -> str:
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
                continue
            if pattern.startswith("**", i) and i + 2 == n:
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


class _Rules:
    """The patterns of one ignore file; paths are relative to ``base`` (its directory, or the repo root)."""

    def __init__(self, base: str, lines: list[str]):
        self.base = base
        self.rules: list[tuple[re.Pattern, bool, bool]] = []  # (regex, negated, directories only)
        for raw in lines:
            line = raw.rstrip("\n").rstrip("\r")
            if not line.strip() or line.startswith("#"):
                continue
            if not line.endswith("\\ "):
                line = line.rstrip(" ")
            negated = line.startswith("!")
            if negated:
                line = line[1:]
            elif line.startswith("\\!") or line.startswith("\\#"):
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            if not line:
                continue
            if "/" in line:  # anchored to the file's directory
                rx = _to_regex(line.lstrip("/"))
            else:
                rx = "(?:.*/)?" + _to_regex(line)
            self.rules.append((re.compile(rx + r"\Z", re.DOTALL), negated, dir_only))

    def match(self, abspath: str, is_dir: bool) -> Optional[bool]:
        """True ignored, False re-included, None no pattern matched."""
        rel = os.path.relpath(abspath, self.base).replace(os.sep, "/")
        if rel.startswith("../"):
            return None
        verdict = None
        for rx, negated, dir_only in self.rules:
            if dir_only and not is_dir:
                continue
            if rx.match(rel):
                verdict = not negated
        return verdict


@lru_cache(maxsize=4096)
def _repo_root(directory: str) -> Optional[str]:
    d = directory
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


@lru_cache(maxsize=4096)
def _rules_in(directory: str, name: str) -> Optional[_Rules]:
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.readlines()
    except OSError:
        return None
    base = directory if name == ".gitignore" else os.path.dirname(os.path.dirname(directory))
    rules = _Rules(base, lines)
    return rules if rules.rules else None


@lru_cache(maxsize=4096)
def _chain(directory: str) -> tuple:
    """The ignore files that apply in ``directory``, outermost first."""
    root = _repo_root(directory)
    if root is None:
        return ()
    dirs = []
    d = directory
    while True:
        dirs.append(d)
        if d == root:
            break
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    chain = []
    exclude = _rules_in(os.path.join(root, ".git", "info"), "exclude")
    if exclude is not None:
        chain.append(exclude)
    for d in reversed(dirs):
        r = _rules_in(d, ".gitignore")
        if r is not None:
            chain.append(r)
    return tuple(chain)


def is_ignored(path: str, is_dir: bool) -> bool:
    """``path`` is ignored by git's ignore files (False outside a git work tree). Its parent directories
    are not tested: the walk never enters an ignored directory."""
    abspath = os.path.abspath(path)
    if os.path.basename(abspath) == ".git":
        return True
    verdict = None
    for rules in _chain(os.path.dirname(abspath)):
        v = rules.match(abspath, is_dir)
        if v is not None:
            verdict = v
    return bool(verdict)
