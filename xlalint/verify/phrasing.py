"""How the evidence is worded: counts with their noun ("3 host transfers"), evenly spaced steps
(" (every 4 steps)"), and the call path of an event (" via train.py:35"). Used by the judges and the misses."""

from __future__ import annotations

import os


def plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def period(steps: list) -> str:
    """" (every 4 steps)" when the steps are evenly spaced more than one apart, else ""."""
    steps = sorted(steps)
    if len(steps) < 2:
        return ""
    gaps = {b - a for a, b in zip(steps, steps[1:])}
    if len(gaps) == 1:
        k = gaps.pop()
        if k > 1:
            return f" (every {k} steps)"
    return ""


def via_text(run, path: str, line: int) -> str:
    """" via train.py:35" (the user callers of the events at this line; the most frequent path)."""
    paths = run.callers(path, line)
    if not paths or not paths[0]:
        return ""
    text = " via " + " <- ".join(f"{os.path.basename(p)}:{ln}" for p, ln in paths[0])
    if len(paths) > 1:
        text += f" (and {len(paths) - 1} other call path{'s' if len(paths) > 2 else ''})"
    return text
