"""paths -> one parse each -> one walk of the semantic model with every enabled rule -> findings.

Every front end (CLI, flake8 plugin, pre-commit, --verify) goes through ``lint_source``.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import threading
from typing import Iterable, Iterator, Optional

import libcst as cst

from xlalint import guard
from xlalint.findings import Finding
from xlalint.locate import Locator
from xlalint.rules import all_rules, rules_by_code
from xlalint.semantics.model import SemanticModel

SKIP_FILE = re.compile(rb"#\s*xlalint\s*:\s*skip-file\b", re.IGNORECASE)
NOQA = re.compile(
    r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
# Only files that mention one of these can hold a finding: the others are parsed for syntax only.
RELEVANT = (b"torch", b"xla", b"tensor", b"Tensor")


def _file_finding(code: str, path: str, message: str, line: int = 1, column: int = 1) -> Finding:
    rule = rules_by_code()[code]
    return Finding(path, line, column, code, line, column + 1, rule.name, message, rule.severity, "")


def decode_source(data: bytes) -> str:
    """Decode like Python does (PEP 263 cookie or BOM, else UTF-8); raise ValueError with a reason."""
    import io
    import tokenize

    if b"\x00" in data:
        raise ValueError("source code cannot contain null bytes", data.index(b"\x00"))
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        raise ValueError(str(e), 0) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise ValueError(f"not valid {encoding}: {e.reason} at byte {e.start}", e.start) from None
    except LookupError:
        raise ValueError(f"unknown encoding {encoding!r}", 0) from None


# libcst's parser recurses natively once per nesting level of any kind (`a and a and ...`, long `elif`
# chains): parse on a thread with a large stack so that such valid code cannot crash the interpreter.
PARSE_STACK_SIZE = 512 * 1024 * 1024


# The walk of the semantic model recurses once per nesting level too (a 10,000-operand `and` chain is
# valid Python): on the big stack it may go this deep.
WALK_RECURSION_LIMIT = 200_000


def _on_big_stack(fn, *args):
    """Run ``fn(*args)`` on a thread with a big stack: libcst's native parser and the model's walk
    recurse per nesting level, and a deep-but-valid file must not crash the interpreter."""
    result: list = []

    def work() -> None:
        try:
            result.append(fn(*args))
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            result.append(e)

    if sys.getrecursionlimit() < WALK_RECURSION_LIMIT:
        sys.setrecursionlimit(WALK_RECURSION_LIMIT)
    try:
        old = threading.stack_size(PARSE_STACK_SIZE)
    except (ValueError, RuntimeError):  # pragma: no cover - a platform without settable stacks
        return fn(*args)
    try:
        t = threading.Thread(target=work, name="xlalint-parse", daemon=True)
        t.start()
    finally:
        threading.stack_size(old)
    t.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def _line_col_of_offset(data: bytes, offset: int) -> tuple[int, int]:
    before = data[:offset]
    line = before.count(b"\n") + 1
    col = offset - (before.rfind(b"\n") + 1) + 1
    return line, col


# pathological input is answered by xlalint/guard.py before libcst sees it
DEFAULT_MAX_TOKENS = guard.DEFAULT_MAX_TOKENS


def lint_source(
    data,
    path: str,
    enabled: Optional[Iterable[str]] = None,
    *,
    honor_noqa: bool = True,
    max_tokens: Optional[int] = DEFAULT_MAX_TOKENS,
    limits: Optional[guard.Limits] = None,
) -> list[Finding]:
    """Lint one file's contents (bytes or str). Never raises for bad input: it becomes a finding.

    ``honor_noqa=False`` keeps the findings that ``# noqa`` comments suppress, for a host that
    applies its own (flake8).
    """
    codes = frozenset(enabled) if enabled is not None else frozenset(r.code for r in all_rules())
    if isinstance(data, str):
        raw = data.encode("utf-8", "surrogatepass")
        text = data
    else:
        raw = data
        text = None
    if SKIP_FILE.search(raw):
        return []
    if text is None:
        try:
            text = decode_source(raw)
        except ValueError as e:
            line, col = _line_col_of_offset(raw, e.args[1] if len(e.args) > 1 else 0)
            return _only_enabled([_file_finding("XLA900", path, f"cannot decode the file: {e.args[0]}", line, col)], codes)
    if text.startswith("\ufeff"):
        text = text[1:]
    # too big or too deep for libcst (guard.py), or refused by CPython's compile: one finding
    problem = guard.check(text, limits or guard.Limits(max_tokens=max_tokens))
    if problem is None:
        problem = _on_big_stack(guard.cpython_refuses, text, path)
    if problem is not None:
        return _only_enabled([_file_finding(problem.code, path, problem.message, problem.line, problem.column)], codes)
    return _on_big_stack(_analyse, text, raw, path, codes, honor_noqa)


def _analyse(text: str, raw: bytes, path: str, codes: frozenset, honor_noqa: bool) -> list[Finding]:
    """Parse once, walk once with every enabled rule, resolve, locate what is reported."""
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        msg = e.message.splitlines()[0] if e.message else "invalid syntax"
        line, col = e.raw_line, e.raw_column + 1
        better = _cpython_syntax_error(text)
        if better is not None:
            line, col, msg = better
        return _only_enabled([_file_finding("XLA900", path, f"syntax error: {msg}", line, col)], codes)
    except RecursionError:
        return _only_enabled([_file_finding("XLA900", path, "syntax error: too deeply nested to parse")], codes)
    except Exception as e:  # noqa: BLE001 - the parser's own failures on pathological input
        return _only_enabled([_file_finding("XLA900", path, f"cannot parse the file: {type(e).__name__}: {e}")], codes)
    if not any(k in raw for k in RELEVANT):
        return []
    rules = [r() for r in all_rules() if r.walks and r.code in codes]
    if not rules:
        return []
    model = SemanticModel(module, rules)
    try:
        model.run()
        for r in rules:
            r.finalize()
    except RecursionError:
        return [_file_finding("XLA901", path, "skipped: nested too deeply to analyse")]
    return _findings(model, module, text, path, honor_noqa)


def _cpython_syntax_error(text: str) -> Optional[tuple]:
    """CPython's line, column and message for a syntax error, or None if CPython parses the file.

    libcst points at the token after the error (often the next line) with a list of every token it
    expected; CPython says where and what (``expected ':'``, ``'(' was never closed``).
    """
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as e:
        if e.lineno:
            return e.lineno, max(e.offset or 1, 1), e.msg
    except (RecursionError, MemoryError, ValueError):
        pass
    return None


def _only_enabled(findings: list[Finding], codes) -> list[Finding]:
    return [f for f in findings if f.code in codes or f.code.startswith("XLA9")]


def _findings(model: SemanticModel, module: cst.Module, text: str, path: str, honor_noqa: bool = True) -> list[Finding]:
    kept = []
    for c in model.candidates:
        fr = c.frequency
        if c.when == "step":
            if fr is None or not fr.per_step or fr.after_sync:
                continue
        elif c.when == "step-any":
            if fr is None or not fr.per_step:
                continue
        elif c.when == "always" and (c.ctx.non_xla or c.ctx.error_path):
            continue  # wherever it is, but not on a path that never runs on XLA
        elif c.when == "custom" and (fr is None or not fr.per_step):
            continue
        kept.append(c)
    if not kept:
        return []
    locator = Locator(module)
    lines = text.splitlines()
    noqa = _noqa_map(lines) if honor_noqa else {}
    out = {}
    for c in kept:
        line, col, end_line, end_col = locator.span(c.node, c.top_index)
        if noqa:
            candidates_lines = {line}
            if c.stmt is not None:
                sl, _, el, _ = locator.span(c.stmt, c.top_index)
                if isinstance(c.stmt, (cst.If, cst.For, cst.While, cst.With, cst.FunctionDef, cst.ClassDef)):
                    el = end_line  # a compound statement: its header, not its whole body
                candidates_lines |= {sl, el}
            if _suppressed(noqa, candidates_lines, c.rule.code):
                continue
        when = c.frequency.describe() if c.frequency is not None else "every step"
        message = c.message.replace("{when}", when)
        f = Finding(path, line, col, c.rule.code, end_line, end_col, c.rule.name, message, c.rule.severity, c.fix)
        out[(line, col, c.rule.code)] = f
    return sorted(out.values())


def _noqa_map(lines: list[str]) -> dict:
    m = {}
    for i, line in enumerate(lines, 1):
        if "#" not in line or "noqa" not in line.lower():
            continue
        hit = NOQA.search(line)
        if hit:
            codes = hit.group("codes")
            m[i] = None if not codes else {c.upper() for c in re.split(r"[,\s]+", codes) if c}
    return m


def _suppressed(noqa: dict, lines: set, code: str) -> bool:
    for ln in lines:
        if ln in noqa:
            codes = noqa[ln]
            if codes is None or any(code.startswith(c) for c in codes):
                return True
    return False


# ------------------------------------------------------------------------------------------ files
def too_large(path: str, size: Optional[int], max_size: int) -> Finding:
    what = f"{size / 1e6:.1f} MB is" if size is not None else "the input is"
    return _file_finding(
        "XLA901", path,
        f"skipped: {what} over the max-file-size limit of {max_size / 1e6:.1f} MB"
        " (raise `max-file-size` in [tool.xlalint] to lint it)",
    )


def read_file(path: str, max_size: int) -> tuple[Optional[bytes], Optional[Finding]]:
    try:
        st = os.stat(path)
    except OSError as e:
        return None, _file_finding("XLA901", path, f"cannot read the file: {e.strerror or e}")
    if not stat.S_ISREG(st.st_mode):
        return None, _file_finding("XLA901", path, "not a regular file")
    if st.st_size > max_size:
        return None, too_large(path, st.st_size, max_size)
    try:
        with open(path, "rb") as fh:
            return fh.read(), None
    except OSError as e:
        return None, _file_finding("XLA901", path, f"cannot read the file: {e.strerror or e}")


def lint_file(path: str, settings=None) -> list[Finding]:
    from xlalint.config import DEFAULT_MAX_FILE_SIZE

    max_size = settings.max_file_size if settings is not None else DEFAULT_MAX_FILE_SIZE
    enabled = settings.codes_for(path) if settings is not None else None
    data, err = read_file(path, max_size)
    if err is not None:
        return [err]
    return lint_source(data, path, enabled, limits=settings.limits if settings is not None else None)


def iter_python_files(paths: Iterable[str], settings, warn=None) -> Iterator[str]:
    """Files to lint under ``paths``: explicit files always; directories walked for ``*.py``."""
    seen_dirs = set()
    for p in paths:
        if os.path.isdir(p):
            yield from _walk_dir(p, settings, seen_dirs, warn)
        else:
            yield p


def _walk_dir(root: str, settings, seen_dirs: set, warn) -> Iterator[str]:
    try:
        real = os.path.realpath(root)
    except OSError:
        real = root
    if real in seen_dirs:
        if warn:
            warn(f"{root}: skipped, the same directory as {real}, already linted (a symlink, or a symlink loop)")
        return
    seen_dirs.add(real)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as e:
        if warn:
            warn(f"{root}: cannot list directory: {e.strerror or e}")
        return
    for entry in entries:
        path = os.path.join(root, entry.name) if root not in (".",) else entry.name
        if settings is not None and settings.is_excluded(path):
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            yield from _walk_dir(path, settings, seen_dirs, warn)
        elif entry.name.endswith((".py", ".pyi")) and not entry.name.endswith(".pyi"):
            yield path


def lint_paths(paths: list[str], settings=None, warn=None) -> list[Finding]:
    """Lint files and directories; the findings sorted by path, line, column."""
    out = []
    for path in iter_python_files(paths, settings, warn):
        out.extend(lint_file(path, settings))
    return sorted(out)


