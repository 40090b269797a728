"""Reporters: thin views of one sorted list of findings. ``FORMATS`` maps --format names to them."""

from __future__ import annotations

import importlib

FORMATS = {
    "text": "xlalint.report.text",
    "json": "xlalint.report.json_format",
    "sarif": "xlalint.report.sarif",
    "github": "xlalint.report.github",
}


def get_reporter(name: str):
    """The module for format ``name``; it has ``render(findings, out, *, color=False, root=None)``."""
    return importlib.import_module(FORMATS[name])
