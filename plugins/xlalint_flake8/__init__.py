"""flake8 adapter for xlalint: ``flake8 --select XLA`` runs the rules the ``xlalint`` CLI runs.

A thin view of ``xlalint.run.project.lint_project`` (``xlalint.analysis.source.lint_source`` for stdin); nothing about the rules lives here. What is flake8's
stays flake8's:

- selection (``--select``/``--ignore``/``--extend-ignore``): every rule on by default in xlalint is run,
  and flake8 filters the codes; ``select``/``ignore`` in ``[tool.xlalint]`` do not apply here;
- ``# noqa``: the engine is asked for the unsuppressed findings and flake8 applies its own noqa;
- syntax errors: flake8 reports E999 before any tree plugin runs; a file that ``ast`` accepts but
  libcst cannot parse gives no finding here (``xlalint`` itself reports it as XLA900);
- an internal error of xlalint's (a bug) is one XLA902 for the file, with every other finding;
- file discovery and excludes.

What is xlalint's still applies: ``[tool.xlalint]`` per-file-ignores (and rule options), read once per
process from the pyproject.toml the CLI would find for the same command line.
"""

from __future__ import annotations

import os

import ast
import dataclasses
from typing import Iterator, Optional

from xlalint import __version__
from xlalint.analysis.file_findings import INTERNAL_ERROR, internal_error
from xlalint.analysis.module import RELEVANT_TEXT
from xlalint.analysis.source import lint_source
from xlalint.config import ConfigError, Settings, all_codes, build_settings, default_enabled, find_config
from xlalint.report import printable


class XlaLintChecker:
    """A flake8 tree plugin. flake8 builds the ``ast`` anyway; the engine parses with libcst."""

    name = "xlalint"
    version = __version__

    # resolved once per process (flake8 forks its workers after ``parse_options``)
    _settings: Optional[Settings] = None

    def __init__(self, tree: ast.AST, filename: str, lines: list) -> None:
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, option_manager) -> None:
        off = sorted(set(all_codes()) - default_enabled())
        if off:
            option_manager.extend_default_ignore(off)

    @classmethod
    def parse_options(cls, option_manager, options, filenames) -> None:
        """Find ``[tool.xlalint]`` like the CLI does: the nearest one above the first path given."""
        first = filenames[0] if filenames and filenames[0] != "-" else "."
        cls._settings = cls._load(first)

    @classmethod
    def _load(cls, start: str) -> Settings:
        try:
            settings = build_settings(find_config(start))
        except ConfigError as e:
            from flake8.exceptions import ExecutionError

            raise ExecutionError(f"xlalint: {e}") from None
        # selection is flake8's: every code, not the config's select/ignore; the rules that are off by
        # default are in flake8's default ignore list (add_options), so `--extend-select` turns them on
        return dataclasses.replace(settings, enabled=frozenset(all_codes()))

    def run(self) -> Iterator[tuple]:
        source = "".join(self.lines)
        cls = type(self)
        if cls._settings is None:  # used without flake8's option parsing (an API caller)
            cls._settings = cls._load(".")
        codes = cls._settings.codes_for(self.filename)
        if not codes:
            return
        # over max-file-size the CLI only reports XLA901 (generated code): nothing to say here either
        limit = cls._settings.max_file_size
        if len(source) * 4 > limit and len(source.encode("utf-8", "surrogatepass")) > limit:
            return
        try:
            found = _lint(self.filename, source, codes, cls._settings)
        except Exception as e:  # noqa: BLE001 - a bug of xlalint's: one XLA902, flake8's run goes on
            found = [internal_error(self.filename, "xlalint's flake8 plugin", e)]
        for f in found:
            if f.code.startswith("XLA9") and f.code != INTERNAL_ERROR:  # not linted: flake8 reports its own E999
                continue
            # flake8 wants a 0-based column and prints it + 1: the same number as xlalint's 1-based one
            # escaped as the CLI prints it: a message quotes the source, and flake8 prints it to a terminal
            yield f.line, f.column - 1, f"{f.code} {printable(f.message)}", cls


def _lint(filename: str, source: str, codes, settings) -> list:
    """As part of its project when the file is on disk (flake8 checks one file at a time, but a helper's
    findings depend on its callers), through xlalint's cache; else the text alone (stdin)."""
    if filename in ("-", "stdin") or not os.path.isfile(filename):
        if not any(k in source for k in RELEVANT_TEXT):
            return []
        return lint_source(source, filename, codes, honor_noqa=False, limits=settings.limits)
    from xlalint.run.cache import Cache
    from xlalint.run.files import project_files, project_tops, root_for
    from xlalint.run.project import lint_project

    if _CACHE.get("settings") is not settings:  # once per process, as the files are discovered
        _CACHE.update(settings=settings, cache=Cache.open(None, settings, lambda _msg: None))
    cache = _CACHE["cache"]
    # a plain folder (no pyproject.toml, setup.py or .git) is one project when flake8 runs in it
    root = root_for(filename, [os.getcwd()])
    # flake8 asks for each file of a tree in turn: the first one decides them all (and stores them in
    # the cache), the others read theirs back; the project's files are discovered once per process
    where = (root, tuple(project_tops(root, [filename])))
    files = _FILES.get(where)
    if files is None:
        files = _FILES[where] = project_files(root, [filename], settings)
    return lint_project(root, [filename], settings, cache=cache, files=files,
                        sources={filename: source}, honor_noqa=False)


_FILES: dict = {}  # (project root, where its files are) -> its files, for this process
_CACHE: dict = {}  # the settings -> the cache they open, for this process
