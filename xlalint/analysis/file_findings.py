"""Findings about a file as a whole: it could not be read or parsed (XLA900, XLA901), or xlalint failed
on it (XLA902 internal-error).

An internal error is an exception in a rule or in a phase of xlalint (the walk, the project's facts, the
decision, a notebook's cells, a fix): it becomes one XLA902 at the file that names the rule or the phase
and the exception, and everything else of the run is still reported. Its traceback is printed on
standard error when asked (``--show-internal-errors``, or ``XLALINT_DEBUG=1``), at the moment it is
caught: a result with an internal error is never stored in the cache, so a run repeated with the flag
hits the error again and shows it.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Optional

from xlalint.findings import Finding, Problem, finding_row
from xlalint.rules import Rule, rules_by_code
from xlalint.semantics.steps import Candidate

INTERNAL_ERROR = "XLA902"
REPORT_AT = "https://github.com/xlalint/xlalint/issues"

# set by the command line's --show-internal-errors (XLALINT_DEBUG=1 in the environment does the same)
SHOW_TRACEBACKS = {"on": False}


def file_finding(code: str, path: str, message: str, line: int = 1, column: int = 1) -> Finding:
    """A finding about the file as a whole (XLA9xx), with its rule's name and severity."""
    rule = rules_by_code()[code]
    return Finding(path, line, column, code, line, column + 1, rule.name, message, rule.severity, "")


def problem_finding(problem: Problem, path: str) -> Finding:
    """Why ``path`` is not linted (``findings.Problem``), as the finding that reports it."""
    return file_finding(problem.code, path, problem.message, problem.line, problem.column)


def row(f: Finding) -> list:
    """A finding of a module's analysis without its path (what ``{"file": [rows]}`` holds)."""
    return list(finding_row(f))


def file_result(findings: list[Finding], codes) -> dict:
    """The analysis of a file that has only findings about itself: ``{"file": [rows]}`` (XLA9xx always)."""
    return {"file": [row(f) for f in findings if f.code in codes or f.code.startswith("XLA9")]}


# ---------------------------------------------------------------------------------------- XLA902
def showing_tracebacks() -> bool:
    return SHOW_TRACEBACKS["on"] or os.environ.get("XLALINT_DEBUG", "") not in ("", "0")


def rule_words(rule) -> str:
    """How an internal error names a rule: ``rule XLA009 (step-varying-python-int)``."""
    return f"rule {rule.code} ({rule.name})"


def internal_error(path: str, where: str, exc: BaseException, line: int = 1, column: int = 1) -> Finding:
    """The XLA902 finding for ``exc``, raised in ``where`` (a rule or a phase) while linting ``path``;
    its traceback goes to standard error when asked."""
    text = str(exc).strip().splitlines()
    summary = type(exc).__name__ + (f": {text[0]}" if text else "")
    if showing_tracebacks() and not getattr(exc, "_xlalint_shown", False):  # once, for all the files it costs
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        print(f"xlalint: internal error in {where} while linting {path}:\n{tb}", file=sys.stderr, end="")
        try:
            exc._xlalint_shown = True
        except AttributeError:
            pass
    return file_finding(
        INTERNAL_ERROR, path,
        f"internal error in {where}: {summary}. This is a bug in xlalint, not in this file: please report it "
        f"with the file at {REPORT_AT} (--show-internal-errors prints the traceback); the other rules' "
        "findings are reported as usual",
        line, column)


def has_internal_error(result: dict) -> bool:
    """A module's analysis that holds an XLA902 (never stored in the cache)."""
    return any(r[2] == INTERNAL_ERROR for r in result.get("file", ()))


def _raised_in(exc: BaseException) -> list:
    """The frames an exception went through below the one that caught it (whose own locals, loop
    variables of earlier work, say nothing of where it was raised)."""
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames[1:]


def failing_rule(exc: BaseException, rules: list) -> Optional[Rule]:
    """Which of ``rules`` an exception was raised in: the innermost frame of its traceback that runs a
    rule's code (a function of its module), or that holds a rule (a method's ``self``, the handler the
    walk was calling, a candidate the model was exporting); None when no rule was involved (the walk
    itself failed)."""
    by_module = {type(r).__module__: r for r in rules}
    frames = _raised_in(exc)
    for frame in reversed(frames):
        rule = by_module.get(frame.f_globals.get("__name__"))
        if rule is not None:
            return rule
        for value in frame.f_locals.values():
            for held in (value, getattr(value, "__self__", None), value.rule if isinstance(value, Candidate) else None):
                if isinstance(held, Rule) and any(held is r for r in rules):
                    return held
    return None


def failing_module(exc: BaseException, names: dict):
    """The module a project-wide step raised on: the innermost frame of the traceback holding one of
    ``names`` (module name -> what to return for it) in a local variable; None when none does."""
    frames = _raised_in(exc)
    for frame in reversed(frames):
        for value in frame.f_locals.values():
            if type(value) is str and value in names:
                return names[value]
    return None
