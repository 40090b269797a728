"""Text output, as ruff prints it.

``full`` (the default): a headline that names the expression, its place, the source lines in a
numbered gutter with carets under the expression, then what it costs and how to fix it::

    XLA001 `loss.item()` reads one value to the host every step
      --> train.py:20:21
       |
    19 |         optimizer.step()
    20 |         total += loss.item()
       |                  ^^^^^^^^^^^
       |
    cost: 1 extra graph execution + 1 device-to-host transfer each time (the graph is cut and run early)
    help: accumulate on the device (`total += loss.detach()`) and read once after the loop
    fix (unsafe, `--fix --unsafe-fixes`): replace with `loss.detach()`; `total` becomes a device tensor, ...

``concise``: one line per finding, ``path:line:col: CODE [*] message`` (flake8's and ruff's ``concise``).
``[*]`` marks a finding that ``--fix`` repairs (with ``--unsafe-fixes``, the unsafe ones too).
Colour only on a terminal, never with NO_COLOR, always with FORCE_COLOR (``--color`` decides first).
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter

from xlalint.report import printable

BOLD, RED, CYAN, BLUE, RESET, DIM = "\033[1m", "\033[31m", "\033[36m", "\033[34m", "\033[0m", "\033[2m"
CONTEXT = 2  # source lines shown above and below the reported one, as in ruff
MAX_SPAN_LINES = 4
MAX_SOURCE_BYTES = 16 * 1024 * 1024


def fixable(f, unsafe: bool) -> bool:
    return bool(f.edits) and (f.applicability == "safe" or unsafe)


class _Sources:
    def __init__(self, given: dict):
        self._given = given or {}
        self._lines: dict = {}

    def lines(self, path: str) -> list:
        if path not in self._lines:
            data = self._given.get(path)
            if data is None:
                data = b""
                try:
                    # only a regular file of a sane size: never block on a FIFO or read a huge one again
                    st = os.stat(path)
                    if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_SOURCE_BYTES:
                        with open(path, "rb") as fh:
                            data = fh.read()
                except OSError:
                    pass
            text = data.decode("utf-8-sig", "replace") if isinstance(data, bytes) else data
            self._lines[path] = text.splitlines()
        return self._lines[path]


def _c(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{RESET}" if color else text


def render(findings, out, *, color: bool = False, root=None, full: bool = False, sources=None, unsafe: bool = False) -> None:
    if not full:
        for f in findings:
            mark = "[*] " if fixable(f, unsafe) else ""
            cell = getattr(f, "cell", None)
            path, message = printable(f.path), printable(f.message)
            if cell is not None:  # a notebook: notebook.ipynb:cell 4:12:5
                path = f"{path}{CYAN}:{RESET}cell {cell}" if color else f"{path}:cell {cell}"
            if color:
                out.write(f"{BOLD}{path}{RESET}{CYAN}:{RESET}{f.line}{CYAN}:{RESET}{f.column}{CYAN}:{RESET} "
                          f"{BOLD}{RED}{f.code}{RESET} {mark}{message}\n")
            else:
                out.write(f"{path}:{f.line}:{f.column}: {f.code} {mark}{message}\n")
        return
    src = _Sources(sources)
    for f in findings:
        out.write(render_full(f, src.lines(f.path), color=color, unsafe=unsafe))
        out.write("\n")


def _split_legacy(message: str, fix: str) -> tuple:
    """A message without parts (a file-level finding, or a rule not yet split): headline and help."""
    if fix and f". Fix: {fix}" in message:
        return message.split(f". Fix: {fix}")[0], fix
    return message, fix


def _place(f) -> str:
    cell = getattr(f, "cell", None)
    path = printable(f.path)
    return f"{path}:cell {cell}:{f.line}:{f.column}" if cell is not None else f"{path}:{f.line}:{f.column}"


def _shown(source: str) -> str:
    """A source line as the code frame shows it: non-printable characters escaped (``\\x1b``), tabs
    expanded to 4 columns. The carets are placed by the width of the same rendering of the line's start."""
    return printable(source, keep="\t").expandtabs(4)


def render_full(f, lines: list, *, color: bool = False, unsafe: bool = False) -> str:
    if f.headline:
        headline, cost, help_ = f.headline, f.cost, f.fix
    else:
        (headline, help_), cost = _split_legacy(f.message, f.fix), ""
    headline, cost, help_ = printable(headline), printable(cost), printable(help_)
    mark = "[*] " if fixable(f, unsafe) else ""
    out = [f"{_c(f.code, BOLD + RED, color)} {mark}{_c(headline, BOLD, color)}"]
    if getattr(f, "cell", None) is not None:  # a notebook cell: its lines are not the file's lines
        lines = []
    first = max(1, f.line - CONTEXT)
    span_end = min(f.end_line if f.end_line >= f.line else f.line, f.line + MAX_SPAN_LINES - 1)
    last = min(len(lines), span_end + CONTEXT)
    if f.line > len(lines):  # no source (gone, or standard input not kept): the place alone
        width = 1
        out.append(" " * width + f"{_c('-->', BLUE, color)} {_place(f)}")
    else:
        # trim blank context lines at either edge, as ruff does
        while first < f.line and not lines[first - 1].strip():
            first += 1
        while last > span_end and not lines[last - 1].strip():
            last -= 1
        width = len(str(last))
        bar = " " * (width + 1) + _c("|", BLUE, color)
        out.append(" " * width + f"{_c('-->', BLUE, color)} {_place(f)}")
        out.append(bar)
        for n in range(first, last + 1):
            text = _shown(lines[n - 1])
            out.append(f"{_c(str(n).rjust(width), BLUE, color)} {_c('|', BLUE, color)} {text}".rstrip())
            if f.line <= n <= span_end:
                raw = lines[n - 1]
                start = f.column - 1 if n == f.line else len(raw) - len(raw.lstrip())
                end = f.end_column - 1 if n == f.end_line else len(raw.rstrip())
                start_d = len(_shown(raw[:start]))
                end_d = max(len(_shown(raw[:end])), start_d + 1)
                out.append(f"{bar} {' ' * start_d}{_c('^' * (end_d - start_d), BOLD + RED, color)}")
        out.append(bar)
    if cost:
        out.append(f"{_c('cost', BOLD, color)}: {cost}")
    if help_:
        out.append(f"{_c('help', BOLD, color)}: {help_}")
    if f.edits:
        how = "safe, `--fix`" if f.applicability == "safe" else "unsafe, `--fix --unsafe-fixes`"
        out.append(f"{_c('fix', BOLD, color)} ({how}): {printable(f.fix_title)}")
    return "\n".join(out) + "\n"


def render_statistics(findings, out, *, color: bool = False, unsafe: bool = False) -> None:
    counts = Counter((f.code, f.name) for f in findings)
    fixes = Counter(f.code for f in findings if fixable(f, unsafe))
    for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        mark = "[*]" if fixes[code] else "   "
        out.write(f"{n:>5}\t{code}\t{mark} {name}\n")


def render_statistics_json(findings, out, *, unsafe: bool = False) -> None:
    """ruff's ``--statistics --output-format json``: code, name, count, fixable, fixable_count."""
    counts = Counter((f.code, f.name) for f in findings)
    fixes = Counter(f.code for f in findings if fixable(f, unsafe))
    rows = [
        {"code": code, "name": name, "count": n, "fixable": fixes[code] > 0, "fixable_count": fixes[code]}
        for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    json.dump(rows, out, indent=2)
    out.write("\n")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _hidden(n: int) -> str:
    return f"{n} hidden fix{'es' if n != 1 else ''}"


def places(findings: list, most: int = 5) -> str:
    """``path:line:col: CODE`` of each finding, the first ``most`` of them, then how many more."""
    shown = [f"{f.path}{f':cell {f.cell}' if getattr(f, 'cell', None) is not None else ''}:{f.line}:{f.column}: {f.code}"
             for f in sorted(findings)[:most]]
    more = len(findings) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def render_summary(findings, n_files: int, out, *, color: bool = False, missing=(), unsafe: bool = False, fixed: int = 0,
                   introduced=()) -> None:
    """The closing lines. After --fix: how many findings there were, how many were fixed and how many
    of those remain; a finding the fixes introduced (a line they changed that now fires another rule)
    is named on a line of its own, so that the counts add up: found = fixed + remaining, and the list
    above holds the remaining and the introduced ones."""
    checked = f"{_plural(n_files, 'file')} checked"
    if missing:
        # never "All checks passed" when a path was not there: it was not checked
        lost = f"{_plural(len(missing), 'path')} not found"
        found = f"Found {_plural(len(findings), 'finding')}" if findings else "No findings"
        out.write(f"{found} in {checked}; {lost} (see the errors below).\n")
    elif fixed or introduced:
        remaining = len(findings) - len(introduced)
        out.write(f"Found {_plural(remaining + fixed, 'finding')} ({fixed} fixed, {remaining} remaining) in {checked}.\n")
    elif findings:
        out.write(f"Found {_plural(len(findings), 'finding')} in {checked}.\n")
    else:
        out.write(f"All checks passed ({checked}).\n")
    if introduced and not missing:
        n = len(introduced)
        out.write(printable(f"The fixes introduced {_plural(n, 'new finding')}, listed above: {places(list(introduced))}.") + "\n")
    n_fix = sum(1 for f in findings if fixable(f, unsafe))
    hidden = sum(1 for f in findings if f.edits and not fixable(f, unsafe))
    if n_fix:
        tail = f" ({_hidden(hidden)} can be enabled with the `--unsafe-fixes` option)" if hidden else ""
        out.write(f"[*] {n_fix} fixable with the `--fix` option{tail}.\n")
    elif hidden:
        out.write(f"No fixes available ({_hidden(hidden)} can be enabled with the `--unsafe-fixes` option).\n")
