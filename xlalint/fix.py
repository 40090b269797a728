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

from xlalint.analysis.file_findings import internal_error
from xlalint.analysis.source import lint_source
from xlalint.report.text import fixable
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


def apply_edits(text: str, edits: list) -> tuple:
    """``text`` with the non-overlapping ``edits`` applied (later ones that overlap are left for the
    next round); returns (new text, number applied)."""
    starts = _offsets(text)

    def offset(line: int, col: int) -> int:
        return starts[min(line, len(starts)) - 1] + col - 1

    spans = sorted(((offset(l, c), offset(el, ec), content) for (l, c, el, ec, content) in edits))
    out, pos, applied = [], 0, 0
    for start, end, content in spans:
        if start < pos:
            continue  # overlaps the previous edit
        out.append(text[pos:start])
        out.append(content)
        pos = end
        applied += 1
    out.append(text[pos:])
    return "".join(out), applied


def fix_source(text: str, path: str, findings: list, settings, unsafe: bool) -> tuple:
    """(fixed text, fixes applied, findings left) for one file."""
    applied = 0
    codes = settings.codes_for(path)
    for _ in range(MAX_ROUNDS):
        edits = [e for f in findings if fixable(f, unsafe) for e in f.edits]
        if not edits:
            break
        new, n = apply_edits(text, edits)
        if new == text:
            break
        text, applied = new, applied + n
        findings = lint_source(text, path, codes, limits=settings.limits)
    return text, applied, findings


def run(findings: list, sources: dict, resolver, args, out, warn) -> tuple:
    """Fix (or diff) every file with a fixable finding; (the findings left, exit status for --diff, the
    paths rewritten). Between rounds a file is linted alone; the caller lints the rewritten files again
    as part of their project for the report. An exception while fixing a file leaves it as it was, with
    an XLA902 (internal-error) finding; the other files are fixed."""
    unsafe = bool(args.unsafe_fixes)
    by_path: dict = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    left, fixed, diffs, changed = [], 0, 0, set()
    for path, fs in by_path.items():
        if not any(fixable(f, unsafe) for f in fs):
            left.extend(fs)
            continue
        try:
            remaining, n, diff, wrote = _fix_file(path, fs, sources, resolver, unsafe, args, out, warn)
        except Exception as e:  # noqa: BLE001 - a bug of xlalint's: one XLA902, the other files fixed
            left.extend(fs)
            left.append(internal_error(path, "fixing the file", e))
            continue
        left.extend(remaining)
        fixed += n
        diffs += diff
        if wrote:
            changed.add(path)
    args.fixed_count = fixed
    if args.diff:
        print(f"Would fix {fixed} finding{'s' if fixed != 1 else ''}." if fixed else "No fixes would be applied.", file=sys.stderr)
        return sorted(left), 1 if diffs else 0, changed
    return sorted(left), 0, changed


def _fix_file(path: str, fs: list, sources: dict, resolver, unsafe: bool, args, out, warn) -> tuple:
    """(the findings left, fixes applied, diffs printed, the file rewritten) for one file."""
    if path in sources and not args.diff:
        warn(f"{path}: --fix does not rewrite standard input; use --diff to see the fixes")
        return fs, 0, 0, False
    if path.lower().endswith(".ipynb") and path not in sources:
        n = _fix_notebook(path, resolver.for_path(path), unsafe, args, out, warn)
        return fs, n, 1 if n and args.diff else 0, bool(n) and not args.diff
    data = sources.get(path)
    if data is None:
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as e:
            warn(f"{path}: cannot read it to fix it: {e.strerror or e}")
            return fs, 0, 0, False
    try:
        encoding = _encoding(data)
        text = data.decode(encoding)
    except (ValueError, LookupError, SyntaxError) as e:
        warn(f"{path}: cannot decode it to fix it: {e}")
        return fs, 0, 0, False
    new, n, remaining = fix_source(text, path, fs, resolver.for_path(path), unsafe)
    if new == text:
        return fs, 0, 0, False
    if args.diff:
        out.writelines(difflib.unified_diff(
            text.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=path, tofile=path))
        if not new.endswith(("\n", "\r")):
            out.write("\n\\ No newline at end of file\n")
        return fs, n, 1, False
    try:
        with open(path, "wb") as fh:
            fh.write(new.encode(encoding))
    except OSError as e:
        warn(f"{path}: cannot write the fixes: {e.strerror or e}")
        return fs, 0, 0, False
    return remaining, n, 0, True


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
