"""The pre-parse guard: one cheap token scan that keeps pathological files away from libcst.

libcst's parser and the tree it builds cost more than linearly in the nesting of an expression:
``x = a+a+...`` with 4,000 terms takes 4 s, ``lambda: lambda: ...`` 2,000 deep 770 MB, ``a[0][0]...``
4,000 deep 23 s, and ten such statements in one file take ten times that. CPython refuses most of these
(its parser and compiler have depth limits), but a generated file, a minified blob or a hostile pull
request must not stall a run. So before libcst sees a file, one pass of a regular-expression tokenizer
measures, per statement, an upper bound of the depth of its syntax tree, and the file is answered at
once when it is over a limit:

- more than ``max-tokens`` tokens (a generated table): XLA901;
- more than 200 nested brackets: XLA900 ``too many nested parentheses`` (CPython's own limit and message);
- a statement nested deeper than ``max-expression-depth``, or deep statements whose summed cost
  (the square of each one's depth, which is how libcst's time and memory grow) is over
  ``max-nesting-cost``: XLA901 ``too complex to analyse (...)``.

The depth bound counts, within one expression, every token that nests the tree one level further:
binary and unary operators, ``not``, ``.``, a call or a subscript, ``lambda``, ``if``/``else``, ``await``,
``for`` in comprehensions, adjacent string literals; brackets add their own levels; ``,`` ``;`` ``=`` and
``:`` start a new expression; a run of ``elif`` nests its ``if`` one level per ``elif``. ``and``/``or`` and
comparisons do not count: they are flat in CPython's tree, and libcst parses a 10,000-operand ``and`` in
half a second. The bound is not below the depth of CPython's tree, so what passes the guard is also
shallow enough for CPython's compile check below.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import Optional

from xlalint.findings import Problem  # why a file is not given to the parser

# CPython's tokenizer refuses more than 200 nested brackets ("too many nested parentheses"), so no
# runnable file has more; libcst's native parser overflows the C stack (a segfault) at about 1,500.
MAX_BRACKET_DEPTH = 200

# libcst's tree costs about 3.5 KB of memory per token: a 200,000-token generated table needs 700 MB.
# Strings and comments count as one token each. 64,000 tokens (~10,000 lines of hand-written code; the
# largest hand-written file in torch has 55,000) keeps a lint under ~300 MB.
DEFAULT_MAX_TOKENS = 64_000
# The deepest statement of torch and torch_xla's 2,131 files measures 62 on this scale; libcst parses
# a 1,000-deep statement in about a second and under 250 MB (the worst kind: nested `lambda:`).
DEFAULT_MAX_EXPRESSION_DEPTH = 500
# The sum over the file's statements of depth squared (statements under depth 50 are free): libcst's
# time and memory for one statement grow with its depth squared. 2,000,000 is two 1,000-deep statements
# or eighty 150-deep ones: at most ~2 s and ~400 MB. The highest file of torch and torch_xla: see
# bench/RESULTS.md.
DEFAULT_MAX_NESTING_COST = 500_000
FREE_DEPTH = 20


@dataclass(frozen=True)
class Limits:
    max_tokens: Optional[int] = DEFAULT_MAX_TOKENS
    max_expression_depth: int = DEFAULT_MAX_EXPRESSION_DEPTH
    max_nesting_cost: int = DEFAULT_MAX_NESTING_COST


# Only the tokens that nest the tree, separate expressions or end a statement count (a name only when
# it is a keyword of interest or comes before `(`/`[`). Strings and comments are matched whole: nothing in
# them counts. Runs of blanks and the other names are matched too, in a group of their own (the scan
# skips them at once): left unmatched, the regular expression engine tried every alternative at each of
# their characters, which was most of the scan (on torch, 3.6 of 4.9 s; 2.0 s with them matched).
_TOKEN = re.compile(
    r"""
      ([ \t]++)
    | [rRbBuUfF]{0,2}(?:\"\"\"(?:[^\\]|\\.)*?\"\"\"|'''(?:[^\\]|\\.)*?'''
                      |"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    | \#[^\r\n]*
    | \r\n?|\n
    | \\(?:\r\n?|\n)
    | \b(?:not|and|or|if|elif|else|lambda|await|for)\b
    | \b[^\W\d]\w*+(?=[ \t]*[(\[])
    | ([^\W\d]\w*+)
    | \b\d[\w.]*(?:[eE][+-]\d+\w*)?
    | \.\.\.
    | \.\d[\w.]*(?:[eE][+-]\d+\w*)?
    | \*\*=?|//=?|<<=?|>>=?|->|:=|[-+*/%@&|^<>=!]=
    | [-+*/%@&|^~.()\[\]{},;:=]
    """,
    re.VERBOSE | re.DOTALL,
)
# Every token, for the max-tokens count of big files: a string or a comment is one.
_ALL_TOKENS = re.compile(
    r'[rbuRBUfF]{0,2}(?:"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')'
    r"|#[^\n]*|\w+|[^\s\w]"
)


def count_tokens(text: str, limit: int) -> int:
    """Roughly Python's token count (a string or comment is one), counting no further than ``limit + 1``."""
    n = 0
    for _ in _ALL_TOKENS.finditer(text):
        n += 1
        if n > limit:
            break
    return n

# one more level of the tree, inside one expression
_NESTING_OPS = frozenset(
    "+ - * / // % ** @ << >> & | ^ ~ . := not if else lambda await for".split()
)
# a new expression starts after these (within one bracket level)
_SEPARATORS = frozenset(", ; = += -= *= /= //= %= **= @= &= |= ^= <<= >>= -> :".split())
_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = frozenset(")]}")
# a `(` or `[` after one of these is not a call or a subscript
_KEYWORDS = frozenset(
    "False None True and as assert async await break class continue def del elif else except finally "
    "for from global if import in is lambda nonlocal not or pass raise return try while with yield "
    "".split()
) - {"False", "None", "True"}


def _position(text: str, offset: int) -> tuple:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def check(text: str, limits: Limits = Limits()) -> Optional[Problem]:
    """None when ``text`` may go to the parser, else the first limit it breaks."""
    if len(text) <= FREE_DEPTH:
        return None
    return _scan(text, limits, None)


def measure(text: str) -> dict:
    """The figures the limits apply to, with no limit: ``tokens``, ``depth`` (of the deepest statement),
    ``cost`` and ``brackets`` (the deepest bracket nesting). For bench/ and the tests."""
    stats: dict = {}
    _scan(text, Limits(None, 1 << 62, 1 << 62), stats)
    return stats


def _scan(text: str, limits: Limits, stats: Optional[dict]) -> Optional[Problem]:
    max_tokens = limits.max_tokens
    max_depth = limits.max_expression_depth
    max_cost = limits.max_nesting_cost
    max_brackets = MAX_BRACKET_DEPTH if stats is None else 1 << 62
    # files under 2 characters a token cannot pass the token limit: count only the big ones
    if stats is not None:
        stats["tokens"] = count_tokens(text, 1 << 62)
    elif max_tokens is not None and len(text) > 2 * max_tokens and count_tokens(text, max_tokens) > max_tokens:
        return Problem(
            "XLA901",
            f"skipped: more than {max_tokens:,} tokens (a generated table?); its syntax tree would take over "
            f"{max_tokens * 3.5 / 1000:.0f} MB of memory (raise `max-tokens` in [tool.xlalint] to lint it)",
        )
    level = 0  # bracket depth
    deepest_level = 0
    base = [0]  # per bracket level: the depth of the tree where this level's expression starts
    seg = [0]  # per bracket level: nesting tokens in the current expression
    lam = [0]  # per bracket level: `lambda`s whose `:` has not come yet
    inner = [0]  # per bracket level: the depth of the deepest bracketed atom in the current expression
    peak = [0]  # per bracket level: the deepest point inside it so far
    stmt_depth = 0  # deepest point of the current statement
    deepest = 0
    cost = 0
    elif_runs: dict = {}  # column of an `if` -> the number of `elif`s in its chain so far
    line_start = True
    prev = ""  # the previous significant token ("" at a statement start)
    line_offset = 0
    for m in _TOKEN.finditer(text):
        if m.lastindex:
            continue  # blanks, or a name that neither nests nor separates
        tok = m.group()
        c = tok[0]
        if c == "#":
            continue
        if c == "\\" and len(tok) > 1:
            continue  # a line continuation
        if c == "\n" or c == "\r":
            line_offset = m.end()
            if level == 0 and not line_start:
                # the end of a logical line
                if stmt_depth > FREE_DEPTH:
                    cost += stmt_depth * stmt_depth
                    if cost > max_cost:
                        return _too_complex(text, m.start(), f"deeply nested statements whose summed depth squared is over "
                                            f"{max_cost:,}", "max-nesting-cost")
                if stmt_depth > deepest:
                    deepest = stmt_depth
                stmt_depth = 0
                seg[0] = lam[0] = inner[0] = peak[0] = 0
                line_start = True
                prev = ""
            continue
        if line_start:
            line_start = False
            col = m.start() - line_offset
            if tok == "elif":
                n = elif_runs.get(col, 0) + 1
                elif_runs[col] = n
                if n > max_depth:
                    return _too_complex(text, m.start(), f"an `if` with over {max_depth:,} `elif`s", "max-expression-depth")
                if n > deepest:
                    deepest = n
            elif elif_runs:
                for k in [k for k in elif_runs if k >= col]:
                    del elif_runs[k]
            if tok == "if":
                elif_runs[col] = 0
        if len(tok) == 1 and c in _OPENERS:
            # a call or a subscript: after a name (the scan matches a name only before a bracket), a
            # closing bracket or a string
            if prev and (prev[-1] in ")]}\"'" or ((prev[0].isalpha() or prev[0] == "_") and prev not in _KEYWORDS)):
                seg[level] += 1
            level += 1
            if level > deepest_level:
                deepest_level = level
                if level > max_brackets:
                    line, col = _position(text, m.start())
                    return Problem("XLA900", "syntax error: too many nested parentheses", line, col)
            d = base[-1] + seg[level - 1] + inner[level - 1] + 1
            base.append(d)
            seg.append(0)
            lam.append(0)
            inner.append(0)
            peak.append(d)
        elif len(tok) == 1 and c in _CLOSERS:
            if level > 0:
                # the bracketed atom is as deep as its contents: what follows in the enclosing
                # expression (a call on it, an operator) nests above that
                depth_inside = peak.pop() - base.pop() + 1
                level -= 1
                seg.pop()
                lam.pop()
                inner.pop()
                if depth_inside > inner[level]:
                    inner[level] = depth_inside
            d = 0
        elif tok in _NESTING_OPS:
            seg[level] += 1
            if tok == "lambda":
                lam[level] += 1
            d = base[-1] + seg[level] + inner[level]
        elif tok in _SEPARATORS:
            if tok == ":" and lam[level]:
                lam[level] -= 1  # the body of a lambda nests inside it
            elif not (lam[level] and tok in (",", "=")):  # not a lambda's parameters
                seg[level] = inner[level] = 0
            d = 0
        elif tok[-1] in "\"'" and (c in "\"'" or len(tok) > 1):
            if prev and prev[-1] in "\"'":
                seg[level] += 1  # implicit concatenation
            d = base[-1] + seg[level] + inner[level]
        else:
            d = 0
        if d > peak[level]:
            peak[level] = d
        if d > stmt_depth:
            stmt_depth = d
            if d > max_depth:
                return _too_complex(text, m.start(), f"an expression nested over {max_depth:,} deep: a long operator, "
                                    "call or attribute chain, or nested lambdas", "max-expression-depth")
        prev = tok
    if stmt_depth > FREE_DEPTH:
        cost += stmt_depth * stmt_depth
        if cost > max_cost:
            return _too_complex(text, len(text), f"deeply nested statements whose summed depth squared is over "
                                f"{max_cost:,}", "max-nesting-cost")
    if stats is not None:
        stats.update(depth=max(deepest, stmt_depth), cost=cost, brackets=deepest_level)
    return None


def _too_complex(text: str, offset: int, why: str, key: str) -> Problem:
    line, col = _position(text, offset)
    return Problem("XLA901", f"too complex to analyse ({why}; raise `{key}` in [tool.xlalint] to lint it)", line, col)


def cpython_refuses(text: str, path: str = "<file>", flags: int = 0) -> Optional[Problem]:
    """CPython's own verdict: None when it compiles ``text``, else its error as a Problem.

    A full ``compile`` (no code runs), not only its parser: ``return`` outside a function, ``break``
    outside a loop, ``nonlocal`` at module level, duplicate arguments, more than 20 nested blocks are
    found by its later stages. Its message and location are CPython's. Warnings (invalid escapes) are
    silenced: a warning is not an error.
    """
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, path, "exec", flags, dont_inherit=True)
    except SyntaxError as e:  # IndentationError and TabError too
        line = e.lineno or 1
        col = max(e.offset or 1, 1)
        if _newer_construct(text, line):
            return _newer_grammar_refuses(text)
        return Problem("XLA900", f"syntax error: {e.msg}", line, col)
    except (RecursionError, MemoryError) as e:
        what = str(e) or type(e).__name__
        return Problem("XLA901", f"too complex to analyse (CPython cannot compile it either: {what})")
    except (ValueError, OverflowError) as e:  # pragma: no cover - decode_source rejects NUL bytes first
        return Problem("XLA900", f"syntax error: {e}")
    return None


# Python 3.12's type statements and type parameters (PEP 695): `type Batch = dict[str, Tensor]`,
# `def first[T](xs: list[T]) -> T:`, `class Cache[K, V]:`
_PEP695 = re.compile(r"^[ \t]*(?:type[ \t]+\w+[ \t]*(?:\[|=)|(?:async[ \t]+)?(?:def|class)[ \t]+\w+[ \t]*\[)")


def _newer_construct(text: str, line: int) -> bool:
    """CPython refused the line for a construct of a newer Python than the one running xlalint (a 3.12
    project linted by Python 3.11)."""
    lines = text.splitlines()
    return sys.version_info < (3, 12) and 0 < line <= len(lines) and _PEP695.match(lines[line - 1]) is not None


def _newer_grammar_refuses(text: str) -> Optional[Problem]:
    """libcst's verdict, which knows the newer grammar: None when it parses the file (valid code; the rest of
    such a file is checked by that parse alone), else where and what it refuses."""
    import libcst as cst

    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        msg = e.message.splitlines()[0] if e.message else "invalid syntax"
        return Problem("XLA900", f"syntax error: {msg}", e.raw_line, e.raw_column + 1)
    except Exception as e:  # noqa: BLE001 - the parser's own failures on pathological input
        return Problem("XLA900", f"syntax error: {type(e).__name__}: {e}")
    return None
