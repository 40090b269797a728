"""Reporters: thin views of one sorted list of findings. ``FORMATS`` maps --format names to them."""

from __future__ import annotations

import importlib

FORMATS = {
    "full": "xlalint.report.text",
    "concise": "xlalint.report.text",
    "text": "xlalint.report.text",  # the old name of concise
    "json": "xlalint.report.json_format",
    "sarif": "xlalint.report.sarif",
    "github": "xlalint.report.github",
}


def get_reporter(name: str):
    """The module for format ``name``; it has ``render(findings, out, *, color=False, root=None)``."""
    return importlib.import_module(FORMATS[name])
