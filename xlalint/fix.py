"""``--fix``, ``--unsafe-fixes`` and ``--diff``, with ruff's meanings.

A rule's fix is a libcst transformation of the tree it linted (a node and its replacement), carried by
the finding as text edits (so it survives the cache and the process pool, and JSON shows it). Here the
edits are applied to the file's text, the file is linted again, and what is still fixable is applied
again, until nothing changes (at most ``MAX_ROUNDS`` rounds): the result is what one more ``--fix``
would leave alone. ``--fix`` writes the files and reports what is left; ``--diff`` writes nothing and
prints a unified diff (exit 1 if there is one, 0 if not). Safe fixes keep what the program computes;
unsafe ones (``--unsafe-fixes``) change a type or drop data, so a person should read them.
"""

from __future__ import annotations

import difflib
import re
import sys

from typing import NamedTuple, Optional

from xlalint.analysis.file_findings import internal_error
from xlalint.analysis.source import lint_source
from xlalint.report import printable
from xlalint.report.text import fixable, places
from xlalint.sources import notebook

MAX_ROUNDS = 10
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _offsets(text: str) -> list:
    """The offset of the start of each line (1-based line n starts at offsets[n - 1])."""
    starts, pos = [], 0
    for m in _LINES.finditer(text):
        starts.append(pos)
        pos = m.end()
    starts.append(pos)
    return starts


def apply_edits(text: str, groups: list) -> tuple:
    """``text`` with ``groups`` of edits applied, each group (the edits of one finding) whole or not at
    all: a group that overlaps one applied before it is left for the next round. Returns (new text,
    number of groups applied)."""
    starts = _offsets(text)

    def offset(line: int, col: int) -> int:
        return starts[min(line, len(starts)) - 1] + col - 1

    spans = sorted(sorted((offset(l, c), offset(el, ec), content) for (l, c, el, ec, content) in g) for g in groups if g)
    taken: list = []
    applied = 0
    for group in spans:
        if all(end <= s or start >= e for start, end, _ in group for s, e, _ in taken):
            taken.extend(group)
            applied += 1
    out, pos = [], 0
    for start, end, content in sorted(taken):
        out.append(text[pos:start])
        out.append(content)
        pos = end
    out.append(text[pos:])
    return "".join(out), applied


def fix_source(text: str, path: str, findings: list, settings, unsafe: bool) -> tuple:
    """(fixed text, fixes applied, findings left) for one file."""
    applied = 0
    codes = settings.codes_for(path)
    for _ in range(MAX_ROUNDS):
        groups = [f.edits for f in findings if fixable(f, unsafe)]
        if not groups:
            break
        new, n = apply_edits(text, groups)
        if new == text:
            break
        text, applied = new, applied + n
        findings = lint_source(text, path, codes, limits=settings.limits)
    return text, applied, findings


def line_map(old: str, new: str) -> dict:
    """Old line -> new line (1-based) for the lines an edit kept or replaced (a replaced block maps to
    the first line of what replaced it); a line that is not in the map did not move."""
    import difflib

    a, b = old.splitlines(), new.splitlines()
    out = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        for i in range(i1, i2):
            out[i + 1] = j1 + 1 + (i - i1 if tag == "equal" else 0)
    return out


def account(before: list, after: list, maps: dict) -> tuple:
    """(fixed, introduced): the findings of ``before`` that ``after`` no longer has, and those of
    ``after`` that were not in ``before`` (what the fixes introduced). A finding is the same one when its
    file, cell, code and line (moved as the fixes moved it: ``maps``, path -> ``line_map``) agree."""
    def key(f, line):
        return f.path, getattr(f, "cell", None), f.code, line

    waiting: dict = {}
    for f in before:
        m = maps.get(f.path) if getattr(f, "cell", None) is None else None
        waiting.setdefault(key(f, m.get(f.line, f.line) if m else f.line), []).append(f)
    introduced = []
    for f in after:
        same = waiting.get(key(f, f.line))
        if same:
            same.pop()
        else:
            introduced.append(f)
    return sorted(g for group in waiting.values() for g in group), introduced


class _FileFix(NamedTuple):
    """What fixing (or diffing) one file did."""

    left: list  # its findings after the fixes (with --diff or when nothing changed: the findings before)
    diffed: int = 0  # 1 when a diff was printed
    wrote: bool = False  # the file was rewritten
    line_map: Optional[dict] = None  # a rewritten .py file's line_map
    would_fix: int = 0  # with --diff: the findings the diff would fix ...
    would_add: tuple = ()  # ... and those it would introduce


def run(findings: list, sources: dict, resolver, args, out, warn) -> tuple:
    """Fix (or diff) every file with a fixable finding; (the findings left, exit status for --diff, the
    paths rewritten, each rewritten file's ``line_map``). Between rounds a file is linted alone; the
    caller lints the rewritten files again as part of their project for the report, and ``account``s
    for them. With --diff, what the diff would fix and introduce (each file linted alone) goes to
    standard error. An exception while fixing a file leaves it as it was, with an XLA902 (internal-error)
    finding; the other files are fixed."""
    unsafe = bool(args.unsafe_fixes)
    by_path: dict = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    left, diffs, changed, maps = [], 0, set(), {}
    would_fix, would_add = 0, []  # with --diff
    for path, fs in by_path.items():
        if not any(fixable(f, unsafe) for f in fs):
            left.extend(fs)
            continue
        try:
            r = _fix_file(path, fs, sources, resolver, unsafe, args, out, warn)
        except Exception as e:  # noqa: BLE001 - a bug of xlalint's: one XLA902, the other files fixed
            left.extend(fs)
            left.append(internal_error(path, "fixing the file", e))
            continue
        left.extend(r.left)
        diffs += r.diffed
        would_fix += r.would_fix
        would_add.extend(r.would_add)
        if r.wrote:
            changed.add(path)
        if r.line_map is not None:
            maps[path] = r.line_map
    if args.diff:
        n = would_fix
        line = f"Would fix {n} finding{'s' if n != 1 else ''}" if n else "No fixes would be applied"
        if would_add:
            line += f", and introduce {len(would_add)}: {places(would_add)}"
        print(printable(line) + ".", file=sys.stderr)
        return sorted(left), 1 if diffs else 0, changed, maps
    return sorted(left), 0, changed, maps


def _fix_file(path: str, fs: list, sources: dict, resolver, unsafe: bool, args, out, warn) -> _FileFix:
    """Fix (or diff) one file."""
    untouched = _FileFix(fs)
    if path in sources and not args.diff:
        warn(f"{path}: --fix does not rewrite standard input; use --diff to see the fixes")
        return untouched
    if path.lower().endswith(".ipynb") and path not in sources:
        n = _fix_notebook(path, resolver.for_path(path), unsafe, args, out, warn)
        return _FileFix(fs, 1 if n and args.diff else 0, bool(n) and not args.diff, None, n)
    data = sources.get(path)
    if data is None:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            warn(f"{path}: cannot read it to fix it: {e.strerror or e}")
            return untouched
    try:
        encoding = _encoding(data)
        text = data.decode(encoding)
    except (ValueError, LookupError, SyntaxError) as e:
        warn(f"{path}: cannot decode it to fix it: {e}")
        return untouched
    new, _, remaining = fix_source(text, path, fs, resolver.for_path(path), unsafe)
    if new == text:
        return untouched
    if args.diff:
        out.writelines(difflib.unified_diff(
            text.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=path, tofile=path))
        if not new.endswith(("\n", "\r")):
            out.write("\n\\ No newline at end of file\n")
        gone, added = account(fs, remaining, {path: line_map(text, new)})
        return _FileFix(fs, 1, False, None, len(gone), tuple(added))
    try:
        with open(path, "wb") as fh:
            fh.write(new.encode(encoding))
    except OSError as e:
        warn(f"{path}: cannot write the fixes: {e.strerror or e}")
        return untouched
    return _FileFix(remaining, 0, True, line_map(text, new))


def _fix_notebook(path: str, settings, unsafe: bool, args, out, warn) -> int:
    """A notebook's code cells fixed as the one program they are linted as (xlalint/sources/notebook.py), the
    cells written back in place (outputs and metadata kept); with --diff, the program's diff. Returns
    the number of fixes."""
    codes = settings.codes_for(path)
    count = [0]

    def fix_program(program: str) -> str:
        findings = lint_source(program, path, codes, limits=settings.limits)
        new, n, _ = fix_source(program, path, findings, settings, unsafe)
        count[0] = n
        return new

    try:
        if args.diff:
            with open(path, "rb") as fh:
                program = notebook.program_for(fh.read()).text
            new = fix_program(program)
            out.writelines(difflib.unified_diff(program.splitlines(keepends=True), new.splitlines(keepends=True),
                                                fromfile=f"{path} (code cells)", tofile=f"{path} (code cells)"))
        else:
            notebook.fix_notebook(path, fix_program)
    except (OSError, ValueError, notebook.NotebookError) as e:
        warn(f"{path}: cannot fix the notebook: {e}")
        return 0
    return count[0]


def _encoding(data: bytes) -> str:
    import io
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding
