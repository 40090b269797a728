"""One module, one parse, one walk of the semantic model with every enabled rule, exported as plain data.

What a file cannot give (bad bytes, a syntax error, too big or too deep) is one XLA900/XLA901 finding,
never an exception. An exception in a rule is one XLA902 finding naming the rule, and the module is
walked again without it (the one place rules run on a module: a failure costs that rule's findings in
that file, never the walk's speed); an exception anywhere else in the module's analysis is one XLA902
naming the phase. ``declare`` is the project pass's first look at a module, before any walk.
"""

from __future__ import annotations

import ast
import re
import warnings
from typing import Iterable, Optional

import libcst as cst

from xlalint.analysis.file_findings import (
    failing_rule, file_finding, file_result, internal_error, problem_finding, row, rule_words)
from xlalint.findings import ROW_FIELDS
from xlalint.parse import guard
from xlalint.parse.locate import Locator
from xlalint.parse.stack import on_big_stack
from xlalint.parse.tree import cpython_syntax_error, parse_module
from xlalint.rules import all_rules
from xlalint.semantics.model import SemanticModel
from xlalint.semantics.device_pins import mentions_cuda_needs, mentions_xla
from xlalint.semantics.project import declarations
from xlalint.sources import notebook as nb
from xlalint.sources.comments import ALL_CODES, FILE_DIRECTIVE_HINT, file_suppressions, noqa_map
from xlalint.sources.read import decode_source, position_of_offset

# Only files that mention one of these can hold a finding: the others are parsed for syntax only.
RELEVANT = (b"torch", b"xla", b"tensor", b"Tensor")
# a `global x` / `nonlocal x` statement somewhere: a function may rebind a module's or an outer function's name
# (semantics/constants.py then scans for the names declared)
_DECLARES_SCOPES = re.compile(r"^[ \t]*(?:global|nonlocal)[ \t]+[A-Za-z_]", re.MULTILINE)
RELEVANT_TEXT = tuple(k.decode("ascii") for k in RELEVANT)

# pathological input is answered by xlalint/parse/guard.py before libcst sees it
DEFAULT_MAX_TOKENS = guard.DEFAULT_MAX_TOKENS


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
    top_level_await: bool = False,
) -> dict:
    """One module, one parse, one walk: ``{"file": [finding rows]}`` for a file that cannot be analysed,
    else ``{"summary", "cands", "rules", "reads"}`` (plain data, see ``semantics.project``).

    ``facts``: the project's facts about the other modules (``project.Facts``), or None alone;
    ``decl``: this module's declarations (``project.declarations``): the lines of its calls, for messages,
    and where its functions start, for positions (computed here when missing in a project).
    ``notebook``: the contents are a Jupyter notebook's JSON (default: a ``.ipynb`` path); its code cells
    are analysed as one program and the result carries ``"cells"``, which ``decide`` uses to report
    lines by cell (xlalint/sources/notebook.py). ``parse``: a replacement for ``libcst.parse_module``
    that returns the same tree (the language server's incremental parse, xlalint/parse/incremental.py).
    ``checked``: ``declare`` found these contents fine (guard and CPython): not checked again."""
    try:
        return _analyse_module(data, path, enabled, module, is_package, facts, max_tokens, decl, notebook, parse,
                               limits, checked, top_level_await)
    except Exception as e:  # noqa: BLE001 - a bug of xlalint's: one XLA902, the run goes on
        return {"file": [row(internal_error(path, "the analysis of the module", e))]}


def _analyse_module(data, path: str, enabled, module: str, is_package: bool, facts, max_tokens, decl, notebook,
                    parse, limits, checked: bool, top_level_await: bool = False) -> dict:
    if notebook or (notebook is None and path.lower().endswith(".ipynb")):
        if notebook or not nb.is_program(data):
            return _analyse_notebook(data, path, enabled, module=module, is_package=is_package, facts=facts,
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
            line, col = position_of_offset(raw, e.args[1] if len(e.args) > 1 else 0)
            return file_result([file_finding("XLA900", path, f"cannot decode the file: {e.args[0]}", line, col)], codes)
    if FILE_DIRECTIVE_HINT.search(raw):
        off = file_suppressions(text)
        if off is ALL_CODES:
            return {"file": []}
        if off:
            codes = frozenset(c for c in codes if not any(c.startswith(o) for o in off))
    if text.startswith("\ufeff"):
        text = text[1:]
    databricks = nb.databricks_program(text)  # a Databricks notebook's source: its cells run under IPython
    if databricks is not None:
        text, top_level_await = databricks, True
    # too big or too deep for libcst (guard.py), or refused by CPython's compile: one finding
    problem = None if checked else guard.check(text, limits or guard.Limits(max_tokens=max_tokens))
    if problem is None and not checked:
        # a notebook's cells run under IPython's autoawait: `await` at a cell's top level is valid
        problem = on_big_stack(guard.cpython_refuses, text, path, ast.PyCF_ALLOW_TOP_LEVEL_AWAIT if top_level_await else 0)
    if problem is not None:
        return file_result([problem_finding(problem, path)], codes)
    view = facts.view(module) if facts is not None else None
    return on_big_stack(_analyse, text, path, codes, module, is_package, view, parse, decl)


def _analyse_notebook(data, path: str, enabled=None, **kwargs) -> dict:
    """``analyse_module`` for a notebook: its program analysed as a module, and ``"cells"`` for
    ``decide`` to report the findings by cell. An unreadable notebook is one XLA900."""
    try:
        program = nb.program_for(data)
        cells = program.table()
    except nb.NotebookError as e:
        return {"file": [row(file_finding("XLA900", path, str(e)))]}  # XLA9xx always reported
    except Exception as e:  # noqa: BLE001 - a bug of xlalint's: one XLA902
        return {"file": [row(internal_error(path, "reading the notebook's cells", e))]}
    if program.language not in ("python", "python2") or not program.text:
        return {"file": []}
    result = analyse_module(program.text, path, enabled, notebook=False, top_level_await=True, **kwargs)
    result["cells"] = cells
    _syntax_error_at_its_header(result, program.text, cells)
    if program.language == "python2":
        for r in result.get("file", ()):
            if r[_CODE] == "XLA900":  # `print x` is valid there: say why the cell does not parse
                r[_MESSAGE] += " (the notebook's kernel is Python 2; xlalint reads Python 3)"
    return result


# CPython's message for a block header with no body: the error is reported on the next line of code, which in a
# notebook may be another cell's (a body-less exercise `def` whose body is only comments)
_NO_BODY = re.compile(r"expected an indented block after .* on line (\d+)")
_LINE, _COLUMN = ROW_FIELDS.index("line"), ROW_FIELDS.index("column")
_END_LINE, _END_COLUMN = ROW_FIELDS.index("end_line"), ROW_FIELDS.index("end_column")
_MESSAGE, _CODE = ROW_FIELDS.index("message"), ROW_FIELDS.index("code")


def _syntax_error_at_its_header(result: dict, text: str, cells: list) -> None:
    """A notebook's syntax error of a block header without a body, reported in a later cell than the header's,
    is reported on the header: the cell to fix is the one that holds it."""
    for r in result.get("file", ()):
        m = _NO_BODY.search(r[_MESSAGE]) if r[_CODE] == "XLA900" else None
        if m is None:
            continue
        header = int(m.group(1))
        cell, cell_line = nb.locate(cells, header)
        if cell != nb.locate(cells, r[_LINE])[0]:
            lines = text.splitlines()
            col = len(lines[header - 1]) - len(lines[header - 1].lstrip()) + 1 if header <= len(lines) else 1
            r[_LINE], r[_COLUMN], r[_END_LINE], r[_END_COLUMN] = header, col, header, col + 1
            r[_MESSAGE] = r[_MESSAGE].replace(f" on line {header}", "")  # reported on it
        else:
            r[_MESSAGE] = r[_MESSAGE].replace(f" on line {header}", f" on line {cell_line}")  # the cell's line


def declare(data: bytes, path: str, module: str, is_package: bool, limits=None) -> Optional[dict]:
    """The project pass's first look at a module, before any walk (xlalint/run/project.py): the guard
    and CPython's compile once per file and run (not once per walk), and from CPython's tree the
    module's declarations (``project.declarations``), marked ``checked``. None when the file is not
    fine: its walk then reports why (a decode error, a syntax error, a file-level directive)."""
    try:
        text = decode_source(data)
    except ValueError:
        return None
    if FILE_DIRECTIVE_HINT.search(data) or text.startswith("\ufeff"):
        return None  # rare: the walk handles directives and BOMs as usual
    text = nb.databricks_program(text) or text
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
        tree = on_big_stack(compile_both)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    try:
        decl = declarations(tree, module, is_package)
    except Exception:  # noqa: BLE001 - the walk computes them again, and reports the error as XLA902
        return None
    if decl is not None:
        decl["checked"] = True
    return decl


def _analyse(text: str, path: str, codes: frozenset, module: str, is_package: bool, view,
             parse=None, decl: Optional[dict] = None) -> dict:
    """Parse once, walk once with every enabled rule, export what the project needs."""
    try:
        tree = (parse or parse_module)(text)
    except cst.ParserSyntaxError as e:
        msg = e.message.splitlines()[0] if e.message else "invalid syntax"
        line, col = e.raw_line, e.raw_column + 1
        better = cpython_syntax_error(text)
        if better is not None:
            line, col, msg = better
        return file_result([file_finding("XLA900", path, f"syntax error: {msg}", line, col)], codes)
    except RecursionError:
        return file_result([file_finding("XLA900", path, "syntax error: too deeply nested to parse")], codes)
    except Exception as e:  # noqa: BLE001 - the parser's own failures on pathological input
        return file_result([file_finding("XLA900", path, f"cannot parse the file: {type(e).__name__}: {e}")], codes)
    # Alone, a file that never mentions torch or a tensor cannot hold a finding; in a project, its values
    # may come from modules that do (a helper of train.py), so its rules run on the project's facts.
    relevant = view is not None or any(k in text for k in RELEVANT_TEXT)
    classes = [r for r in all_rules() if r.walks and r.code in codes] if relevant else []
    failed: list = []  # an XLA902 row for each rule that raised; the walk is done again without it
    while True:
        rules = [r() for r in classes]
        model = SemanticModel(tree, rules, module_name=module, is_package=is_package, facts=view,
                              is_notebook=path.lower().endswith(".ipynb"), names_xla=mentions_xla(text),
                              ipython_magics=nb.MAGIC_COMMENT in text,
                              cuda_needs=mentions_cuda_needs(text),
                              declares_scopes=_DECLARES_SCOPES.search(text) is not None)
        phase = "the semantic model's walk"
        try:
            try:
                model.run()
                for r in rules:
                    r.finalize()
            except RecursionError:
                return {"file": failed + [row(file_finding("XLA901", path, "skipped: nested too deeply to analyse"))]}
            phase = "the module's declarations"
            noqa = noqa_map(text.splitlines())  # marks what `# noqa` suppresses: decide() drops it, or not (flake8)
            if decl is None and view is not None:
                decl = declarations(text, module, is_package)
            decl = decl or {}
            phase = "the export of the module's summary"
            result = model.export(Locator(tree, getattr(parse, "locate_cache", None), text, decl.get("defs")), noqa,
                                  decl.get("calls"))
            result["reads"] = view.export() if view is not None else {}
        except Exception as e:  # noqa: BLE001 - a bug of xlalint's: one XLA902, the others' findings kept
            rule = failing_rule(e, rules)
            _release(model)
            if rule is None:
                return {"file": failed + [row(internal_error(path, phase, e))]}
            classes.remove(type(rule))
            failed.append(row(internal_error(path, rule_words(rule), e)))
            continue
        model.release()
        if failed:
            result["file"] = failed
        return result


def _release(model) -> None:
    """``model.release()`` after a walk that raised, whatever state it left."""
    try:
        model.release()
    except Exception:  # noqa: BLE001 - only breaking cycles; the collector frees the rest
        pass
