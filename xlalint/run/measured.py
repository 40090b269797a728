"""What the last ``xlalint --verify`` run measured in a file, kept for the language server's hover.

``--verify`` (``xlalint/verify/remember.py``) writes one entry per file of the program it ran, in the
project's cache directory: ``<project root>/.xlalint_cache/verify/<hash of the file's real path>.json``,
rewritten by each run (the last run of a file is the one kept, also when it measured nothing there). An
entry holds the hash of the file's text as it ran, when the run was made and what it ran, and per line
what was measured there: each finding's verdict, evidence and cost per step, each miss's kind, message
and cost, with the line's own text.

``measured_hover`` compares the stored hash with the editor's text of the file:
- the same text: the figures are shown as measured;
- another text: a finding or miss whose line still reads the same (it may have moved) keeps its figures,
  said to be "measured on an earlier version of this file" (an edit elsewhere, a comment added above,
  leaves them useful; what the user just changed may have moved them, and the hover says so); a line
  that was itself edited shows nothing, since what was measured there was other code.

The entries live outside the findings cache's versioned directory: a measurement depends on the program
and its run, not on xlalint's version or settings. An entry that cannot be read or is of another format is
ignored; nothing here raises for a bad entry.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Optional

from xlalint.run.cache import CACHE_DIR_NAME, make_cache_dir
from xlalint.semantics.project import find_root

FORMAT = 1
SUBDIR = "verify"
KINDS = ("finding", "miss")


def content_hash(text: str) -> str:
    """The hash of a file's text (as the editor holds it; the writer decodes the file's bytes)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def entry_path(path: str, cache_dir=None) -> Path:
    """Where the last run's measurements of ``path`` are kept: under ``cache_dir`` when given, else in
    ``.xlalint_cache`` at the file's project root (the directory with its pyproject.toml, setup.py,
    setup.cfg or .git: the same for the CLI and the editor, whatever their working directories)."""
    real = os.path.realpath(path)
    base = Path(cache_dir) if cache_dir is not None else Path(find_root(real)) / CACHE_DIR_NAME
    name = hashlib.blake2b(real.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return base / SUBDIR / f"{name}.json"


def save(path: str, text: str, *, when: float, target: str, lines: list, cache_dir=None) -> Path:
    """Keep ``lines`` as what the run of ``target`` at ``when`` (seconds since the epoch) measured in
    ``path``, whose text ran as ``text``. Each line is a dict with ``kind`` ("finding" or "miss") and
    ``line``; the line's own text is added here. Returns the entry's path; raises OSError."""
    rows = text.splitlines()
    lines = [dict(e, source=rows[e["line"] - 1].strip() if 0 < e["line"] <= len(rows) else "") for e in lines]
    target_file = entry_path(path, cache_dir)
    make_cache_dir(target_file.parent, target_file.parent.parent)
    entry = {"format": FORMAT, "path": os.path.realpath(path), "hash": content_hash(text), "when": when,
             "target": target, "lines": lines}
    fd, tmp = tempfile.mkstemp(dir=target_file.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(entry, fh, indent=1)
        os.replace(tmp, target_file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target_file


def load(path: str, cache_dir=None) -> Optional[dict]:
    """The last run's measurements of ``path``, or None (none stored, unreadable, another format)."""
    try:
        with open(entry_path(path, cache_dir), encoding="utf-8") as fh:
            entry = json.load(fh)
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return entry if _valid(entry, os.path.realpath(path)) else None


def _valid(entry, real: str) -> bool:
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or entry.get("path") != real:
        return False
    if not isinstance(entry.get("hash"), str) or not isinstance(entry.get("when"), (int, float)):
        return False
    lines = entry.get("lines")
    return isinstance(lines, list) and all(
        isinstance(e, dict) and e.get("kind") in KINDS and isinstance(e.get("line"), int)
        and isinstance(e.get("source"), str) for e in lines)


def measured_hover(path: str, text: str, line: int, column: int, findings: list, cache_dir=None) -> Optional[str]:
    """Markdown: what the last ``--verify`` run of ``path`` measured at the findings under the cursor
    (``findings``: ``(code, line)`` of each, ``line`` where it starts), or, with none, at the miss on the
    cursor's line ``line`` when the cursor (1-based ``column``) is on the line's code. None when nothing
    was measured there, nothing is stored, or the stored line was edited since (see the module's doc).
    ``text`` is the editor's text of the file."""
    entry = load(path, cache_dir)
    if entry is None:
        return None
    rows = text.splitlines()
    same = entry["hash"] == content_hash(text)

    def at(candidates: list, n: int) -> list:
        if same:
            return [e for e in candidates if e["line"] == n]
        here = rows[n - 1].strip() if 0 < n <= len(rows) else ""
        moved = [e for e in candidates if here and e["source"] == here]
        return moved if len(moved) <= 1 else [e for e in moved if e["line"] == n]

    parts = []
    for code, start in dict.fromkeys(findings):
        for e in at([e for e in entry["lines"] if e["kind"] == "finding" and e.get("code") == code], start):
            parts.append(_finding_text(e, same))
    if not findings and 0 < line <= len(rows):
        row = rows[line - 1]
        code_at = len(row) - len(row.lstrip())
        if code_at < column <= len(row.rstrip()) + 1:
            parts += [_miss_text(e) for e in at([e for e in entry["lines"] if e["kind"] == "miss"], line)]
    if not parts:
        return None
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry["when"]))
    target = str(entry.get("target") or "").split("::")[0]
    ran = "" if not target or os.path.realpath(target) == entry["path"] else f", running {os.path.basename(target)}"
    earlier = "" if same else ", on an earlier version of this file; this line reads the same"
    head = f"**Measured by `xlalint --verify`** ({when}{ran}{earlier}): "
    if len(parts) == 1:
        return head + parts[0]
    return head.rstrip() + "\n" + "".join(f"\n- {p}" for p in parts)


def _finding_text(e: dict, same: bool) -> str:
    """``XLA005 CONFIRMED; costs 5,762 ms per step ...`` or ``XLA001 NOT CONFIRMED: <the evidence>``;
    ``same``: the text is the one that ran (else the lines named are the measured version's)."""
    head = f"{e.get('code')} {e.get('verdict') or 'measured'}"
    cost = e.get("cost")
    if not cost:
        evidence = e.get("evidence")
        return f"{head}: {evidence}" if evidence else head
    others = [n for n in e.get("with") or () if isinstance(n, int)]
    if len(others) > 1:
        listed = ", ".join(map(str, others[:-1])) + f" and {others[-1]}"
        cost += f" (shared by the {e.get('code')} findings {'at' if same else 'that were at'} lines {listed}: the same events)"
    return f"{head}; {cost}"


def _miss_text(e: dict) -> str:
    """``no rule flags this line, yet the run measured a miss (cpu fallback): <message>; costs ...``."""
    text = f"no rule flags this line, yet the run measured a miss ({e.get('miss') or 'unexplained events'})"
    if e.get("message"):
        text += f": {e['message']}"
    if e.get("cost"):
        text += f"; {e['cost']}"
    return text
