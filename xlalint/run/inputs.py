"""What one run reads: each file's bytes, from the disk or from text that stands for it (an editor's
buffer, flake8's lines), and what the run learns of each file before its walk (its declarations, its
parse function). One ``Inputs`` per project run; the pool's workers inherit it."""

from __future__ import annotations

from typing import Optional

from xlalint.config import DEFAULT_MAX_FILE_SIZE
from xlalint.findings import Problem
from xlalint.rules import all_rules
from xlalint.sources.notebook import databricks_program, program_text
from xlalint.sources.read import read_file


class Inputs:
    """``settings``: one Settings for the run (None: the defaults, every rule); ``sources``: path -> text
    standing for the file on disk; ``parse``: path -> a parse function for that file (the language
    server's incremental parse). ``decls``: path -> its declarations, filled by the run."""

    def __init__(self, settings, sources: Optional[dict] = None, parse: Optional[dict] = None) -> None:
        self.settings = settings
        self.sources = dict(sources or {})
        self.parse = dict(parse or {})
        self.decls: dict = {}

    @property
    def max_size(self) -> int:
        return self.settings.max_file_size if self.settings is not None else DEFAULT_MAX_FILE_SIZE

    @property
    def limits(self):
        return self.settings.limits if self.settings is not None else None

    def codes(self, path: str) -> frozenset:
        """The codes enabled for ``path`` (every code without settings)."""
        if self.settings is not None:
            return self.settings.codes_for(path)
        return frozenset(r.code for r in all_rules())

    def read(self, path: str) -> tuple[Optional[bytes], Optional[Problem]]:
        """(bytes, None), or (None, why the file cannot be linted)."""
        text = self.sources.get(path)
        if text is not None:
            return text.encode("utf-8", "surrogatepass"), None
        return read_file(path, self.max_size)

    def read_text(self, path: str) -> Optional[str]:
        """The text whose imports connect the file to the others: a notebook's code cells, else its bytes
        decoded leniently; None when it cannot be read."""
        data, err = self.read(path)
        if err is None and path.lower().endswith(".ipynb"):
            return program_text(data)
        if err is not None:
            return None
        text = data.decode("utf-8", "replace")
        return databricks_program(text) or text
