"""SARIF 2.1.0, for GitHub code scanning (``github/codeql-action/upload-sarif``) and other viewers.

One run: the tool with every rule (so ``ruleIndex`` is stable whatever was found), then one result per
finding with a location relative to the project root (``uriBaseId`` ``%SRCROOT%``). Columns are
Unicode code points, 1-based, end exclusive: exactly xlalint's own, declared with ``columnKind``.

``partialFingerprints`` lets code scanning follow a finding from commit to commit: a hash of the code,
the path, the stripped text of the line and the finding's index among identical ones, never the line
number, so code added above a finding does not turn it into a "new" alert.
"""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
from pathlib import Path
from typing import Optional
from urllib.parse import quote

from xlalint import __version__
from xlalint.rules import all_rules

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
REPO_URL = "https://github.com/xlalint/xlalint"
FINGERPRINT_KEY = "xlalintFingerprint/v1"
LEVELS = {"error": "error", "warning": "warning"}  # anything else is a "note"
CODE_SECTIONS = {"Example", "Use instead"}


def help_uri(rule) -> str:
    """Where a rule's documentation lives: its module, which carries every section of it."""
    module = rule.__module__.replace(".", "/")
    return f"{REPO_URL}/blob/main/{module}.py"


def _text(s: str) -> str:
    return textwrap.dedent(s).strip()


def rule_markdown(rule) -> str:
    """A rule's documentation as Markdown: SARIF's help, the language server's hover."""
    parts = [f"**{rule.code} ({rule.name})**: {_text(rule.summary)}"]
    for title, text in (
        ("What it does", rule.what_it_does),
        ("Why is this slow on XLA?", rule.why_slow),
        ("Known problems", rule.known_problems),
        ("Example", rule.example),
        ("Use instead", rule.use_instead),
        ("How --verify confirms it", rule.verify),
    ):
        if text.strip():
            body = f"```python\n{_text(text)}\n```" if title in CODE_SECTIONS else _text(text)
            parts.append(f"## {title}\n{body}")
    return "\n\n".join(parts) + "\n"


def _rule_descriptor(rule) -> dict:
    full = _text(rule.what_it_does) or _text(rule.summary)
    d = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": _text(rule.summary)},
        "fullDescription": {"text": " ".join(full.split())},
        "help": {"text": rule.explain(), "markdown": rule_markdown(rule)},
        "helpUri": help_uri(rule),
        "defaultConfiguration": {"level": LEVELS.get(rule.severity, "note")},
    }
    if rule.walks:  # code scanning filters by tag; the XLA9xx rules are about the file, not speed
        d["properties"] = {"tags": ["performance", "pytorch-xla"]}
    return d


def _root_uri(root: Path) -> str:
    uri = root.resolve().as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _location(path: str, root: Optional[Path]) -> dict:
    """A URI relative to ``%SRCROOT%`` for files under the root; an absolute file URI otherwise."""
    if root is not None:
        try:
            rel = Path(os.path.abspath(path)).relative_to(root.resolve())
            return {"uri": quote(rel.as_posix()), "uriBaseId": "%SRCROOT%"}
        except ValueError:
            pass
    p = Path(path)
    if p.is_absolute():
        return {"uri": p.as_uri()}
    return {"uri": quote(p.as_posix())}


class _Lines:
    """The text of each reported line, read once per file (only to fingerprint it)."""

    def __init__(self) -> None:
        self._files: dict = {}

    def get(self, path: str, line: int) -> str:
        if path not in self._files:
            try:
                with open(path, "rb") as fh:
                    self._files[path] = fh.read().decode("utf-8-sig", "replace").splitlines()
            except OSError:  # standard input, or a file gone since: the hash still has code + path
                self._files[path] = []
        lines = self._files[path]
        return lines[line - 1] if 0 < line <= len(lines) else ""


def render(findings, out, *, color: bool = False, root=None) -> None:
    rules = list(all_rules())
    index = {r.code: i for i, r in enumerate(rules)}
    root = Path(root) if root is not None else None
    lines = _Lines()
    cells = None
    seen: dict = {}
    results = []
    for f in findings:
        location = _location(f.path, root)
        region = {"startLine": f.line, "startColumn": f.column, "endLine": f.end_line, "endColumn": f.end_column}
        if f.cell is not None:  # a notebook: the region is the line of the .ipynb file that holds the cell's line
            if cells is None:
                from xlalint.sources.notebook import FileLines

                cells = FileLines()
            file_line = cells.line(f.path, f.cell, f.line)
            region = {"startLine": file_line} if file_line else {}
            text = lines.get(f.path, file_line).strip() if file_line else f"cell {f.cell}"
        else:
            text = lines.get(f.path, f.line).strip()
        key = (f.code, location["uri"], text)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        digest = hashlib.sha256("\0".join((f.code, location["uri"], text, str(occurrence))).encode("utf-8"))
        result = {"ruleId": f.code}
        if f.code in index:
            result["ruleIndex"] = index[f.code]
        result.update({
            "level": LEVELS.get(f.severity, "note"),
            "message": {"text": f.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": location,
                    **({"region": region} if region else {}),
                },
            }],
            "partialFingerprints": {FINGERPRINT_KEY: digest.hexdigest()},
        })
        if f.cell is not None:
            result["properties"] = {"cell": f.cell, "cellLine": f.line, "cellColumn": f.column,
                                    "cellEndLine": f.end_line, "cellEndColumn": f.end_column}
        results.append(result)
    run = {
        "tool": {
            "driver": {
                "name": "xlalint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": REPO_URL,
                "rules": [_rule_descriptor(r) for r in rules],
            },
        },
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    if root is not None:
        run["originalUriBaseIds"] = {"%SRCROOT%": {"uri": _root_uri(root)}}
    json.dump({"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}, out, indent=2)
    out.write("\n")
