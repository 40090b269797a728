"""One file's contents on their own, as a project of one module: the findings of standard input, of an
editor's unsaved buffer, of ``--fix``'s rounds. (``run.project.lint_project`` sees the modules around
a file on disk.)"""

from __future__ import annotations

import os
from typing import Iterable, Optional

from xlalint.analysis import decision
from xlalint.analysis.module import DEFAULT_MAX_TOKENS, analyse_module
from xlalint.findings import Finding
from xlalint.parse import guard


def lint_source(
    data,
    path: str,
    enabled: Optional[Iterable[str]] = None,
    *,
    honor_noqa: bool = True,
    max_tokens: Optional[int] = DEFAULT_MAX_TOKENS,
    notebook: Optional[bool] = None,
    parse=None,
    limits: Optional[guard.Limits] = None,
) -> list[Finding]:
    """Lint one file's contents (bytes or str) on its own, as a project of one module. Never raises for
    bad input: it becomes a finding.

    ``honor_noqa=False`` keeps the findings that ``# noqa`` comments suppress, for a host that
    applies its own (flake8). ``notebook`` and ``parse``: see ``analyse_module``.
    """
    name = os.path.splitext(os.path.basename(path))[0] or "__main__"
    result = analyse_module(data, path, enabled, module=name, max_tokens=max_tokens,
                            notebook=notebook, parse=parse, limits=limits)
    return decision.decide({path: result}, [path], root=os.path.dirname(os.path.abspath(path)), honor_noqa=honor_noqa)
