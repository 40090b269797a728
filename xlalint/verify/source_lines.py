"""What the user's source says around a line, read from its syntax tree (parsed once per file): the loop
whose body holds it, the conditions it sits under, whether it calls ``.backward(``."""

from __future__ import annotations

import ast

_AST_CACHE: dict = {}


def _tree(path: str):
    tree = _AST_CACHE.get(path)
    if tree is None:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                tree = ast.parse(fh.read(), filename=path)
        except (OSError, SyntaxError, ValueError):
            tree = ast.Module(body=[], type_ignores=[])
        _AST_CACHE[path] = tree
    return tree


def enclosing_loop(path: str, line: int):
    """(first, last) line of the innermost for/while loop whose body holds ``line``, or None."""
    best = None
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            end = getattr(node, "end_lineno", node.lineno) or node.lineno
            if node.lineno < line <= end and (best is None or node.lineno > best[0]):
                best = (node.lineno, end)
    return best


def enclosing_condition_lines(path: str, line: int) -> list:
    """Lines of the tests of the ``if``/``while``/ternaries whose body holds ``line`` (innermost last)."""
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            test = node.test
            end = getattr(node, "end_lineno", node.lineno) or node.lineno
            if node.lineno <= line <= end and not (test.lineno <= line <= (test.end_lineno or test.lineno)):
                out.extend(range(test.lineno, (test.end_lineno or test.lineno) + 1))
    return out


def is_backward_call(path: str, line: int) -> bool:
    import linecache

    return ".backward(" in linecache.getline(path, line)
