"""Settings: ``[tool.xlalint]`` of the nearest pyproject.toml, then the command line on top.

Unknown keys, unknown codes and values of the wrong type are errors that name the culprit: a typo in
a linter's config that silently does nothing is worse than no config.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9/3.10
    import tomli as tomllib

from xlalint.parse import guard
from xlalint.rules import all_rules

DEFAULT_EXCLUDE = (".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "build", "dist",
                   "__pycache__", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache",
                   ".xlalint_cache", ".eggs", "*.egg-info")
# libcst builds ~600 bytes of objects per source byte: a 5 MB file takes about 2 minutes and 3 GB to
# lint, and files that big are generated, not written. Over the limit a file is one XLA901 finding.
DEFAULT_MAX_FILE_SIZE = 1024 * 1024

KNOWN_KEYS = {
    "select": list,
    "ignore": list,
    "extend-select": list,
    "extend-ignore": list,
    "exclude": list,
    "extend-exclude": list,
    "per-file-ignores": dict,
    "max-file-size": int,
    "max-tokens": int,
    "respect-gitignore": bool,
    "max-expression-depth": int,
    "max-nesting-cost": int,
}


class ConfigError(Exception):
    """A bad setting: reported as one line and exit status 2."""


@dataclass
class Settings:
    enabled: frozenset = frozenset()
    exclude: tuple = DEFAULT_EXCLUDE
    extend_exclude: tuple = ()
    per_file_ignores: tuple = ()  # ((glob, frozenset(codes)), ...)
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    max_tokens: int = guard.DEFAULT_MAX_TOKENS
    max_expression_depth: int = guard.DEFAULT_MAX_EXPRESSION_DEPTH
    max_nesting_cost: int = guard.DEFAULT_MAX_NESTING_COST
    root: Path = field(default_factory=Path.cwd)
    config_path: Optional[Path] = None
    respect_gitignore: bool = True

    def codes_for(self, path: str) -> frozenset:
        """The codes enabled for ``path`` after per-file-ignores."""
        if not self.per_file_ignores:
            return self.enabled
        rel = _relative(path, self.root)
        codes = set(self.enabled)
        for pattern, ignored in self.per_file_ignores:
            if _glob_match(rel, pattern):
                codes = {c for c in codes if not any(c.startswith(i) for i in ignored)}
        return frozenset(codes)

    def is_excluded(self, path: str, ancestors: bool = False) -> bool:
        """``path`` matches an exclude glob: a bare glob (``build``, ``*.pyc``) matches a file or
        directory name, a glob with a slash (``tests/fixtures``) the path relative to the project root.

        The walk tests each entry it finds (it never enters an excluded directory). With
        ``ancestors=True`` (``--force-exclude``, for paths named on the command line) the directories
        above the path are tested too, up to the project root, as ruff does: ``third_party`` then
        excludes ``third_party/x.py`` and ``src/third_party/y.py``.
        """
        if self._excluded_here(path):
            return True
        if not ancestors:
            return False
        absolute = Path(os.path.abspath(path))
        root = self.root.resolve()
        try:
            parts = absolute.relative_to(root).parts[:-1]
            base = root
        except ValueError:  # outside the project: only the directories the user wrote
            given = Path(path)
            parts = tuple(p for p in given.parts[:-1] if p not in ("..", ".") and p != given.anchor)
            base = None
        for i in range(len(parts), 0, -1):
            sub = parts[:i]
            candidate = str(base.joinpath(*sub)) if base is not None else os.path.join(*sub)
            if self._excluded_here(candidate):
                return True
        return False

    def _excluded_here(self, path: str) -> bool:
        names, rels = _exclude_matchers(tuple(self.exclude) + tuple(self.extend_exclude))
        if names is not None and names.match(os.path.basename(path.rstrip("/\\")) or path):
            return True
        if rels is None:
            return False
        rel = _relative(path, self.root)
        return bool(rels[0].match(rel)) or rel.startswith(rels[1])

    @property
    def limits(self) -> guard.Limits:
        """What the pre-parse guard allows (xlalint/parse/guard.py)."""
        return guard.Limits(self.max_tokens, self.max_expression_depth, self.max_nesting_cost)

    def fingerprint(self) -> str:
        return repr((sorted(self.enabled), self.per_file_ignores, self.max_file_size, self.limits))


@lru_cache(maxsize=64)
def _exclude_matchers(patterns: tuple):
    """The exclude globs compiled, once per set of patterns (the walk asks for every entry it finds):
    (a regex of the bare globs, matched against a name, or None; (a regex of the globs with a slash,
    matched against the path relative to the root, and the prefixes that exclude what is under them)
    or None)."""
    names, rels, prefixes = [], [], []
    for pattern in patterns:
        pat = pattern.rstrip("/")
        if pat.startswith("./"):
            pat = pat[2:]
        if "/" not in pat:
            names.append(fnmatch.translate(pat))
        else:
            rels.append(fnmatch.translate(pat))
            prefixes.append(pat.rstrip("*").rstrip("/") + "/")
    name_re = re.compile("|".join(f"(?:{n})" for n in names)) if names else None
    rel_re = (re.compile("|".join(f"(?:{r})" for r in rels)), tuple(prefixes)) if rels else None
    return name_re, rel_re


def _relative(path: str, root: Path) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _glob_match(rel: str, pattern: str) -> bool:
    """per-file-ignores: a glob with a slash matches the relative path, a bare one the file name."""
    pattern = pattern.rstrip("/")
    if "/" not in pattern:
        return fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern) or fnmatch.fnmatchcase(rel, pattern)
    return fnmatch.fnmatchcase(rel, pattern) or rel.startswith(pattern.rstrip("*").rstrip("/") + "/")


def all_codes() -> list[str]:
    return [r.code for r in all_rules()]


def expand_codes(selectors: Iterable[str], where: str) -> set:
    """``XLA0`` -> every XLA0xx code; ``ALL`` -> every code. Unknown selectors are errors."""
    codes = all_codes()
    out = set()
    for raw in selectors:
        if not isinstance(raw, str):
            raise ConfigError(f"{where}: expected a rule code, got {raw!r}")
        s = raw.strip().upper()
        if not s:
            continue
        if s == "ALL":
            out.update(codes)
            continue
        matched = [c for c in codes if c.startswith(s)]
        if not matched:
            raise ConfigError(f"{where}: unknown rule code or prefix {raw!r} (known: {', '.join(codes)})")
        out.update(matched)
    return out


def default_enabled() -> set:
    return {r.code for r in all_rules() if r.on_by_default}


def _has_xlalint_table(candidate: Path) -> bool:
    try:
        data = tomllib.loads(candidate.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return True  # let load_config report it
    return "xlalint" in data.get("tool", {})


def find_config(start: str) -> Optional[Path]:
    """The nearest pyproject.toml with a ``[tool.xlalint]`` table, looking upward from ``start``."""
    p = Path(os.path.abspath(start))
    if not p.is_dir():
        p = p.parent
    for d in [p, *p.parents]:
        candidate = d / "pyproject.toml"
        if candidate.is_file() and _has_xlalint_table(candidate):
            return candidate
    return None


def load_config(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read config: {e}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    if path.name == "pyproject.toml" or "tool" in data:
        table = data.get("tool", {}).get("xlalint", {})
    else:  # a dedicated xlalint.toml
        table = data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.xlalint] must be a table")
    for key, value in table.items():
        if key not in KNOWN_KEYS:
            raise ConfigError(
                f"{path}: unknown key {key!r} in [tool.xlalint] (known: {', '.join(sorted(KNOWN_KEYS))})"
            )
        want = KNOWN_KEYS[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ConfigError(f"{path}: [tool.xlalint] {key} must be {'an' if want is int else 'a'} {want.__name__}, got {value!r}")
        if want is list:
            for item in value:
                if not isinstance(item, str):
                    raise ConfigError(f"{path}: [tool.xlalint] {key} must be a list of strings, got {item!r}")
    return table


def build_settings(
    config_path: Optional[Path],
    *,
    select: Optional[list] = None,
    ignore: Optional[list] = None,
    extend_select: Optional[list] = None,
    extend_ignore: Optional[list] = None,
    exclude: Optional[list] = None,
    extend_exclude: Optional[list] = None,
    per_file_ignores: Optional[list] = None,
    respect_gitignore: Optional[bool] = None,
) -> Settings:
    table = load_config(config_path) if config_path else {}
    where = f"{config_path} [tool.xlalint]" if config_path else "config"
    root = config_path.parent.resolve() if config_path else Path.cwd()

    enabled = expand_codes(table["select"], f"{where} select") if "select" in table else default_enabled()
    enabled |= expand_codes(table.get("extend-select", []), f"{where} extend-select")
    enabled -= expand_codes(table.get("ignore", []), f"{where} ignore")
    enabled -= expand_codes(table.get("extend-ignore", []), f"{where} extend-ignore")
    if select is not None:
        enabled = expand_codes(select, "--select")
    if extend_select:
        enabled |= expand_codes(extend_select, "--extend-select")
    if ignore:
        enabled -= expand_codes(ignore, "--ignore")
    if extend_ignore:
        enabled -= expand_codes(extend_ignore, "--extend-ignore")

    pfi = []
    for pattern, codes in table.get("per-file-ignores", {}).items():
        if isinstance(codes, str):
            codes = [c for c in codes.replace(",", " ").split()]
        if not isinstance(codes, list):
            raise ConfigError(f"{where} per-file-ignores: {pattern!r} must map to a list of codes")
        pfi.append((pattern, frozenset(expand_codes(codes, f"{where} per-file-ignores[{pattern!r}]"))))
    for item in per_file_ignores or []:
        pattern, sep, codes = item.partition(":")
        if not sep:
            raise ConfigError(f"--per-file-ignores: expected GLOB:CODES, got {item!r}")
        pfi.append((pattern, frozenset(expand_codes(codes.replace(",", " ").split(), "--per-file-ignores"))))

    excl = tuple(exclude) if exclude is not None else tuple(table.get("exclude", DEFAULT_EXCLUDE))
    extend = tuple(table.get("extend-exclude", ())) + tuple(extend_exclude or ())
    limits = {}
    for key in ("max-tokens", "max-expression-depth", "max-nesting-cost"):
        value = table.get(key, getattr(Settings, key.replace("-", "_")))
        if value <= 0:
            raise ConfigError(f"{where} {key} must be a positive number, got {value}")
        limits[key.replace("-", "_")] = value
    max_size = table.get("max-file-size", DEFAULT_MAX_FILE_SIZE)
    if max_size <= 0:
        raise ConfigError(f"{where} max-file-size must be a positive number of bytes, got {max_size}")
    return Settings(
        enabled=frozenset(enabled),
        exclude=excl,
        extend_exclude=extend,
        per_file_ignores=tuple(pfi),
        max_file_size=max_size,
        **limits,
        root=root,
        config_path=config_path,
        respect_gitignore=table.get("respect-gitignore", True) if respect_gitignore is None else respect_gitignore,
    )


class Resolver:
    """The settings of each file: those of the nearest pyproject.toml with a ``[tool.xlalint]`` table
    above it (as ruff does: argument order never changes a file's findings), the command line's options
    on top. With ``--config FILE`` or ``--isolated`` one settings object serves every file."""

    def __init__(self, overrides: dict, config: Optional[Path] = None, isolated: bool = False):
        self.overrides = overrides
        self.fixed: Optional[Settings] = None
        if isolated:
            self.fixed = build_settings(None, **overrides)
        elif config is not None:
            self.fixed = build_settings(config, **overrides)
        self._by_config: dict = {}
        self._by_dir: dict = {}

    def for_path(self, path: str) -> Settings:
        """The settings for ``path`` (a file, or a directory being walked: its own config counts)."""
        if self.fixed is not None:
            return self.fixed
        d = os.path.abspath(path)
        if not os.path.isdir(d):
            d = os.path.dirname(d)
        cfg = self._config_for_dir(d)
        s = self._by_config.get(cfg)
        if s is None:
            s = self._by_config[cfg] = build_settings(cfg, **self.overrides)
        return s

    def _config_for_dir(self, d: str) -> Optional[Path]:
        """find_config, remembering the answer for every directory on the way up (a walk asks once per
        directory, and each pyproject.toml is read once)."""
        visited = []
        cur = d
        while True:
            if cur in self._by_dir:
                found = self._by_dir[cur]
                break
            visited.append(cur)
            candidate = os.path.join(cur, "pyproject.toml")
            if os.path.isfile(candidate) and _has_xlalint_table(Path(candidate)):
                found = Path(candidate)
                break
            parent = os.path.dirname(cur)
            if parent == cur:
                found = None
                break
            cur = parent
        for v in visited:
            self._by_dir[v] = found
        return found
