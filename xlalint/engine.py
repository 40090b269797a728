"""paths -> one parse each -> one walk of the semantic model with every enabled rule -> findings.

Every front end (CLI, flake8 plugin, pre-commit, --verify) goes through ``lint_source``.
"""

from __future__ import annotations

import os
import queue
import re
import stat
import sys
import threading
from typing import Iterable, Iterator, Optional

import libcst as cst

from xlalint import guard
from xlalint.findings import Finding, finding_row
from xlalint.locate import Locator
from xlalint.rules import all_rules, rules_by_code
from xlalint.semantics.model import SemanticModel

# File-level suppressions, in a real comment (never in a string): `# xlalint: skip-file`, and as in
# ruff `# xlalint: noqa` (every code) or `# xlalint: noqa: XLA001, XLA006` (those codes, in the file).
FILE_DIRECTIVE_HINT = re.compile(rb"xlalint\s*:\s*(?:skip-file|noqa)", re.IGNORECASE)
FILE_DIRECTIVE = re.compile(
    r"#\s*xlalint\s*:\s*(?:(?P<skip>skip-file)\b|noqa(?![\w-])(?:\s*:\s*(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?)",
    re.IGNORECASE,
)
NOQA = re.compile(
    r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE
)
# Only files that mention one of these can hold a finding: the others are parsed for syntax only.
RELEVANT = (b"torch", b"xla", b"tensor", b"Tensor")
RELEVANT_TEXT = tuple(k.decode("ascii") for k in RELEVANT)


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
    recurse per nesting level, and a deep-but-valid file must not crash the interpreter.

    The thread is started once per process and kept (``_BigStack``): a new thread for each call (two
    per file) cost 5-10% of a parse, its stack's pages faulted in anew every time. Callers take turns;
    a call made on that thread (a nested one) runs where it is."""
    if sys.getrecursionlimit() < WALK_RECURSION_LIMIT:
        sys.setrecursionlimit(WALK_RECURSION_LIMIT)
    if threading.current_thread() is _BIG_STACK.thread:
        return fn(*args)
    with _BIG_STACK.lock:
        worker = _BIG_STACK.running()
        if worker is None:  # pragma: no cover - a platform without settable stacks
            return fn(*args)
        reply: queue.SimpleQueue = queue.SimpleQueue()
        worker.put((fn, args, reply))
        ok, value = reply.get()
    if not ok:
        raise value
    return value


class _BigStack:
    """The process's one thread with a big stack (``_on_big_stack``), started on first use and again
    in a forked child (a fork copies no thread but the one that forked)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: Optional[threading.Thread] = None
        self.requests: Optional[queue.SimpleQueue] = None
        self.pid = -1

    def running(self) -> Optional[queue.SimpleQueue]:
        """The request queue of a live big-stack thread, started if need be; None if none can be."""
        if self.thread is not None and self.pid == os.getpid() and self.thread.is_alive():
            return self.requests
        try:
            old = threading.stack_size(PARSE_STACK_SIZE)
        except (ValueError, RuntimeError):  # pragma: no cover - a platform without settable stacks
            return None
        requests: queue.SimpleQueue = queue.SimpleQueue()
        try:
            t = threading.Thread(target=_serve, args=(requests,), name="xlalint-parse", daemon=True)
            t.start()
        finally:
            threading.stack_size(old)
        self.thread, self.requests, self.pid = t, requests, os.getpid()
        return requests

    def after_fork(self) -> None:
        self.__init__()


def _serve(requests: queue.SimpleQueue) -> None:
    while True:
        fn, args, reply = requests.get()
        try:
            value = (True, fn(*args))
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            value = (False, e)
        reply.put(value)
        del fn, args, reply, value  # nothing of a request outlives it


_BIG_STACK = _BigStack()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_BIG_STACK.after_fork)


_VALIDATE = cst.CSTNode.__post_init__
_PARSE_LOCK = threading.Lock()


def _unchecked(self) -> None:
    pass


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module``, without libcst checking each node its parser builds: every node's
    constructor validates it (``CSTNode.__post_init__``: ``self._validate()``, a fifth of the parse),
    and the parser's nodes are valid by construction (libcst's own comment there says validation at
    parse time could go). The check is skipped only while this parse runs, and only while the
    constructor is libcst's own, doing nothing else; CPython has compiled the text first anyway."""
    if cst.CSTNode.__post_init__ is not _VALIDATE or _VALIDATE.__code__.co_names != ("_validate",):
        return cst.parse_module(text)
    with _PARSE_LOCK:
        cst.CSTNode.__post_init__ = _unchecked
        try:
            return cst.parse_module(text)
        finally:
            cst.CSTNode.__post_init__ = _VALIDATE


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
    notebook: Optional[bool] = None,
    parse=None,
    limits: Optional[guard.Limits] = None,
) -> list[Finding]:
    """Lint one file's contents (bytes or str) on its own, as a project of one module. Never raises for
    bad input: it becomes a finding. (``lint_project`` sees the modules around it.)

    ``honor_noqa=False`` keeps the findings that ``# noqa`` comments suppress, for a host that
    applies its own (flake8). ``notebook`` and ``parse``: see ``analyse_module``.
    """
    name = os.path.splitext(os.path.basename(path))[0] or "__main__"
    result = analyse_module(data, path, enabled, module=name, max_tokens=max_tokens,
                            notebook=notebook, parse=parse, limits=limits)
    return decide({path: result}, [path], root=os.path.dirname(os.path.abspath(path)), honor_noqa=honor_noqa)


def analyse_module(
    data,
    path: str,
    enabled: Optional[Iterable[str]] = None,
    *,
    module: str = "__main__",
    is_package: bool = False,
    facts=None,
    max_tokens: Optional[int] = DEFAULT_MAX_TOKENS,
    decl: Optional[dict] = None,
    notebook: Optional[bool] = None,
    parse=None,
    limits: Optional[guard.Limits] = None,
    checked: bool = False,
) -> dict:
    """One module, one parse, one walk: ``{"file": [finding rows]}`` for a file that cannot be analysed,
    else ``{"summary", "cands", "rules", "reads"}`` (plain data, see ``semantics.project``).

    ``facts``: the project's facts about the other modules (``project.Facts``), or None alone;
    ``decl``: this module's declarations (``project.declarations``): the lines of its calls, for messages,
    and where its functions start, for positions (computed here when missing in a project).
    ``notebook``: the contents are a Jupyter notebook's JSON (default: a ``.ipynb`` path); its code cells
    are analysed as one program and the result carries ``"cells"``, which ``decide`` uses to report
    lines by cell (xlalint/notebook.py). ``parse``: a replacement for ``libcst.parse_module`` that
    returns the same tree (the language server's incremental parse, xlalint/incremental.py).
    ``checked``: ``declare`` found these contents fine (guard and CPython): not checked again."""
    if notebook or (notebook is None and path.lower().endswith(".ipynb")):
        from xlalint import notebook as nb

        if notebook or not nb.is_program(data):
            return nb.analyse_notebook(data, path, enabled, module=module, is_package=is_package, facts=facts,
                                       max_tokens=max_tokens, limits=limits)
    codes = frozenset(enabled) if enabled is not None else frozenset(r.code for r in all_rules())
    if isinstance(data, str):
        raw = data.encode("utf-8", "surrogatepass")
        text = data
    else:
        raw = data
        text = None
    if text is None:
        try:
            text = decode_source(raw)
        except ValueError as e:
            if FILE_DIRECTIVE_HINT.search(raw) and file_suppressions(raw.decode("utf-8", "replace")) is ALL_CODES:
                return {"file": []}
            line, col = _line_col_of_offset(raw, e.args[1] if len(e.args) > 1 else 0)
            return _file_result([_file_finding("XLA900", path, f"cannot decode the file: {e.args[0]}", line, col)], codes)
    if FILE_DIRECTIVE_HINT.search(raw):
        off = file_suppressions(text)
        if off is ALL_CODES:
            return {"file": []}
        if off:
            codes = frozenset(c for c in codes if not any(c.startswith(o) for o in off))
    if text.startswith("\ufeff"):
        text = text[1:]
    # too big or too deep for libcst (guard.py), or refused by CPython's compile: one finding
    problem = None if checked else guard.check(text, limits or guard.Limits(max_tokens=max_tokens))
    if problem is None and not checked:
        problem = _on_big_stack(guard.cpython_refuses, text, path)
    if problem is not None:
        return _file_result([_file_finding(problem.code, path, problem.message, problem.line, problem.column)], codes)
    view = facts.view(module) if facts is not None else None
    return _on_big_stack(_analyse, text, path, codes, module, is_package, view, parse, decl)


def declare(data: bytes, path: str, module: str, is_package: bool, limits=None) -> Optional[dict]:
    """The project pass's first look at a module, before any walk (xlalint/parallel.py): the guard and
    CPython's compile once per file and run (not once per walk), and from CPython's tree the module's
    declarations (``project.declarations``), marked ``checked``. None when the file is not fine: its
    walk then reports why (a decode error, a syntax error, a file-level directive)."""
    import ast
    import warnings

    from xlalint.semantics.project import declarations

    try:
        text = decode_source(data)
    except ValueError:
        return None
    if FILE_DIRECTIVE_HINT.search(data) or text.startswith("\ufeff"):
        return None  # rare: the walk handles directives and BOMs as usual
    if guard.check(text, limits or guard.Limits()) is not None:
        return None

    def compile_both():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
            # CPython's later stages (`return` outside a def), from the text: turning the Python tree
            # back into CPython's costs more than parsing again (on torch, 6.8 -> 4.0 s)
            compile(text, path, "exec", dont_inherit=True)
        return tree

    try:
        tree = _on_big_stack(compile_both)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    decl = declarations(tree, module, is_package)
    if decl is not None:
        decl["checked"] = True
    return decl


def _file_result(findings: list[Finding], codes) -> dict:
    return {"file": [_row(f) for f in _only_enabled(findings, codes)]}


def _row(f: Finding) -> list:
    return list(finding_row(f))


def _analyse(text: str, path: str, codes: frozenset, module: str, is_package: bool, view,
             parse=None, decl: Optional[dict] = None) -> dict:
    """Parse once, walk once with every enabled rule, export what the project needs."""
    try:
        tree = (parse or parse_module)(text)
    except cst.ParserSyntaxError as e:
        msg = e.message.splitlines()[0] if e.message else "invalid syntax"
        line, col = e.raw_line, e.raw_column + 1
        better = _cpython_syntax_error(text)
        if better is not None:
            line, col, msg = better
        return _file_result([_file_finding("XLA900", path, f"syntax error: {msg}", line, col)], codes)
    except RecursionError:
        return _file_result([_file_finding("XLA900", path, "syntax error: too deeply nested to parse")], codes)
    except Exception as e:  # noqa: BLE001 - the parser's own failures on pathological input
        return _file_result([_file_finding("XLA900", path, f"cannot parse the file: {type(e).__name__}: {e}")], codes)
    # Alone, a file that never mentions torch or a tensor cannot hold a finding; in a project, its values
    # may come from modules that do (a helper of train.py), so its rules run on the project's facts.
    relevant = view is not None or any(k in text for k in RELEVANT_TEXT)
    rules = [r() for r in all_rules() if r.walks and r.code in codes] if relevant else []
    model = SemanticModel(tree, rules, module_name=module, is_package=is_package, facts=view,
                          is_notebook=path.lower().endswith(".ipynb"))
    try:
        model.run()
        for r in rules:
            r.finalize()
    except RecursionError:
        return {"file": [_row(_file_finding("XLA901", path, "skipped: nested too deeply to analyse"))]}
    noqa = _noqa_map(text.splitlines())  # marks what `# noqa` suppresses: decide() drops it, or not (flake8)
    if decl is None and view is not None:
        from xlalint.semantics.project import declarations

        decl = declarations(text, module, is_package)
    decl = decl or {}
    result = model.export(Locator(tree, getattr(parse, "locate_cache", None), text, decl.get("defs")), noqa, decl.get("calls"))
    result["reads"] = view.export() if view is not None else {}
    model.release()
    return result


def decide(results: dict, asked: Iterable[str], root: str, index=None, honor_noqa: bool = True) -> list[Finding]:
    """The findings of the ``asked`` files, from every module's analysis (``results``: path -> what
    ``analyse_module`` gave), decided over the whole program's call graph: how often each candidate
    runs, and through which path. ``honor_noqa=False`` keeps what ``# noqa`` comments suppress, for a
    host that applies its own (flake8)."""
    from xlalint.semantics import hot_loops
    from xlalint.semantics.project import Facts, Program, ProjectIndex
    from xlalint.semantics.steps import Frequency

    if index is None:
        index = ProjectIndex(root, results)
    summaries, paths, cands = {}, {}, {}
    for path, r in results.items():
        if "summary" in r:
            mod = r["summary"]["module"]
            summaries[mod] = r["summary"]
            paths[mod] = _display(path, root)
    program = Program(Facts(index, summaries), paths)
    for path, r in results.items():
        if "summary" in r:
            mod = r["summary"]["module"]
            ctxs = program.ctxs[mod]
            cands[mod] = [_Found(c, ctxs[c[8]]) for c in r["cands"]]
    by_code = rules_by_code()
    for code in sorted({c for r in results.values() for c in r.get("rules", {})}):
        data = {r["summary"]["module"]: r["rules"][code] for r in results.values() if code in r.get("rules", {})}
        by_code[code].resolve_project(program, data, cands)
    out = []
    steps = program.steps
    for path in asked:
        r = results.get(path)
        if r is None:
            continue
        out.extend(Finding(path, *row) for row in r.get("file", ()))
        if "summary" not in r:
            continue
        mod = r["summary"]["module"]
        seen = {}
        for c in cands[mod]:
            if c.quiet and honor_noqa:
                continue
            if c.when in ("step", "step-any"):
                fr = steps.frequency(c.ctx)
                if not fr.per_step or (c.when == "step" and fr.after_sync):
                    continue
            elif c.when == "custom":
                fr = c.frequency if isinstance(c.frequency, Frequency) else (
                    Frequency(*c.frequency) if c.frequency else None)
                if fr is None or not fr.per_step:
                    continue
            else:
                fr = None
            when = fr.describe(mod) if fr is not None else "every step"
            rule = by_code[c.code]
            headline = c.message.replace("{when}", when)
            cost = c.cost.replace("{when}", when)
            fix = hot_loops.fix_for(c.code, fr.hot if fr is not None else None, c.fix)  # the loop's own fix
            # the one-line message (concise, flake8, SARIF, GitHub) is the parts joined
            message = f"{headline}: {cost}. Fix: {fix}" if cost else headline
            f = Finding(path, c.line, c.col, c.code, c.end_line, c.end_col, rule.name, message, rule.severity,
                        fix, headline if cost else "", cost, tuple(tuple(e) for e in c.edits),
                        c.applicability, c.fix_title)
            seen[(c.line, c.col, c.code)] = f
        out.extend(seen.values())
    cells = {p: results[p]["cells"] for p in asked if "cells" in results.get(p, {})}
    if cells:  # notebooks: lines of their program -> lines of their cells (xlalint/notebook.py)
        from xlalint.notebook import map_findings

        out = [f for f in out if f.path not in cells] + [g for p, t in cells.items() for g in map_findings([f for f in out if f.path == p], t)]
    return sorted(out)


class _Found:
    """A candidate in the project view: where it is, what it says, and the context that decides it."""

    __slots__ = ("code", "line", "col", "end_line", "end_col", "message", "fix", "when", "ctx", "frequency",
                 "cost", "edit", "edits", "applicability", "fix_title", "quiet")

    def __init__(self, row: list, ctx):
        (self.code, self.line, self.col, self.end_line, self.end_col, self.message, self.fix, self.when,
         _ctx_i, self.frequency, self.cost, self.edits, self.applicability, self.fix_title, self.quiet) = row
        self.ctx = ctx
        self.edit = None  # set_parts() in a project-wide decision: no tree here, so no edit


def _display(path: str, root: str) -> str:
    """A path as messages show it: relative to the working directory when under it, else to the project
    root (an editor's server runs elsewhere)."""
    for base in (os.getcwd(), root):
        try:
            rel = os.path.relpath(os.path.abspath(path), base)
        except ValueError:
            continue
        if not rel.startswith(".."):
            return rel
    return path


ALL_CODES = object()


def file_suppressions(text: str):
    """The file-level directives in the comments of ``text``: ALL_CODES (skip the file), a set of
    code prefixes to turn off in it, or None. Only comments count (``tokenize``): the same words in a
    string do nothing. A file that does not tokenize to the end keeps the comments before the error."""
    import io
    import tokenize

    off: set = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            m = FILE_DIRECTIVE.search(tok.string)
            if m is None:
                continue
            if m.group("skip") or not m.group("codes"):
                return ALL_CODES
            off.update(c.upper() for c in re.split(r"[,\s]+", m.group("codes")) if c)
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass
    return off or None


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
    if path.lower().endswith(".ipynb"):  # outputs (images) are not code: the cap is on the code
        from xlalint.notebook import MAX_NOTEBOOK_BYTES

        max_size = max(max_size, MAX_NOTEBOOK_BYTES)
    if st.st_size > max_size:
        return None, too_large(path, st.st_size, max_size)
    try:
        with open(path, "rb") as fh:
            return fh.read(), None
    except OSError as e:
        return None, _file_finding("XLA901", path, f"cannot read the file: {e.strerror or e}")


def _settings_for(settings, path: str):
    """``settings`` is one Settings for every file, or a config.Resolver (the nearest config per file)."""
    return settings.for_path(path) if hasattr(settings, "for_path") else settings


def iter_python_files(paths: Iterable[str], settings, warn=None) -> Iterator[str]:
    """Files to lint under ``paths``: explicit files always; directories walked for ``*.py`` and
    ``*.ipynb``, skipping what the excludes (of the nearest config) and, in a git work tree, .gitignore say."""
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
    here = _settings_for(settings, root) if settings is not None else None
    gitignore = here is not None and getattr(here, "respect_gitignore", False)
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if not is_dir and not entry.name.endswith((".py", ".ipynb")):
            continue  # before the excludes: most of a tree's files are not Python
        path = os.path.join(root, entry.name) if root not in (".",) else entry.name
        if here is not None and here.is_excluded(path):
            continue
        if gitignore:
            from xlalint.gitignore import is_ignored

            if is_ignored(path, is_dir):
                continue
        if is_dir:
            yield from _walk_dir(path, settings, seen_dirs, warn)
        else:
            yield path


def lint_paths(paths: list[str], settings=None, warn=None) -> list[Finding]:
    """Lint files and directories, each file as part of its project; the findings sorted."""
    from xlalint import parallel

    return parallel.lint_files(list(iter_python_files(paths, settings, warn)), settings, jobs=1, cache=None, warn=warn)
