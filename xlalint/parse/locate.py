"""Source positions, computed only for the few nodes that are reported.

libcst's PositionProvider renders the whole module with position tracking: about four times the cost
of the parse. A file with findings usually has a handful of them, so positions are computed as locally
as possible:

* a node inside a function is positioned within that function alone: the function is rendered on its
  own, and CPython's tree of the same text (``ast.parse``, a small fraction of libcst's parse) says on
  which line and at which indentation its ``def`` starts. The rendering is checked against the source
  lines before it is trusted (else the next way is used);
* otherwise the top-level statements are rendered once as plain code to learn where each starts, and the
  position provider runs only over the statement that holds the node.
"""

from __future__ import annotations

import ast
import re

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

_NEWLINE = re.compile(r"\r\n|\r|\n")
_MATCH = getattr(ast, "Match", None)


def statement_blocks(st) -> list:
    """The statement lists of a CPython compound statement, in order (none for a simple one): ``body``,
    ``orelse``, ``finalbody`` and those of its ``except`` handlers and ``match`` cases."""
    if type(getattr(st, "body", None)) is not list and type(st) is not _MATCH:
        return []  # a simple statement (most of them): every compound one but `match` has a body
    out = [getattr(st, f, None) for f in ("body", "orelse", "finalbody")]
    out += [h.body for h in getattr(st, "handlers", ())] + [c.body for c in getattr(st, "cases", ())]
    return [b for b in out if isinstance(b, list)]


def def_keys(tree: ast.Module) -> dict:
    """Every function of a CPython tree under the key the semantic model gives it (``f``, ``Cls.meth``,
    ``f.<locals>.g``): key -> [(line of its ``def``, its column), ...], more than one when functions share
    the key (a property and its setter, ``@overload``s, definitions under ``if``/``else``)."""
    out: dict = {}

    def visit(stmts, func_key, class_key):
        for st in stmts:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if func_key is None:
                    key = f"{class_key}.{st.name}" if class_key else st.name
                else:
                    key = f"{func_key}.<locals>.{st.name}"
                out.setdefault(key, []).append((st.lineno, st.col_offset))
                visit(st.body, key, class_key if func_key is None else None)
            elif isinstance(st, ast.ClassDef):
                visit(st.body, func_key, f"{class_key}.{st.name}" if class_key else st.name)
            else:
                for sub in statement_blocks(st):
                    visit(sub, func_key, class_key)

    visit(tree.body, None, None)
    return out


def render_with_positions(sub: cst.Module) -> tuple:
    """(PositionProvider's position of every node of ``sub``, the code of ``sub``), from one rendering.
    ``MetadataWrapper.resolve(PositionProvider)`` gives the same positions, but also walks the whole tree
    once more for the batched providers it has none of (on torch, as long as the rendering itself), and
    the code would be a third pass."""
    try:
        provider = PositionProvider()
        state = PositionProvidingCodegenState(default_indent=sub.default_indent, default_newline=sub.default_newline,
                                              provider=provider)
        sub._codegen(state)
        return provider._computed, "".join(state.tokens)
    except (AttributeError, TypeError):  # another libcst's internals: its public way
        return MetadataWrapper(sub, unsafe_skip_copy=True).resolve(PositionProvider), sub.code


class Locator:
    def __init__(self, module: cst.Module, cache: dict | None = None, text: str | None = None,
                 defs: dict | None = None):
        self.module = module
        self._text = text  # the source the module was parsed from: positions within a function need it
        self._lines: list[str] | None = None
        self._defs: dict | None = defs  # def_keys of the text (the project's declarations have them)
        self._in_def: dict = {}  # id(def node) -> (its positions, line delta, indent, rendered lines) or None
        self._offsets: list[int] | None = None  # lines before each top-level statement, as far as needed
        self._positions: dict[int, dict] = {}
        # ``cache``: {statement node: (its positions or None, its line count or None)}, kept by the
        # language server's incremental parse across lints (the same node renders the same way)
        self._cache = cache
        if cache is not None:
            config = (module.default_indent, module.default_newline)
            if cache.get("config") != config:
                cache.clear()
                cache["config"] = config

    def _line_offset(self, index: int) -> int:
        """Lines before top-level statement ``index``: rendered up to it, never past it."""
        offsets = self._offsets
        if offsets is None:
            offsets = self._offsets = [sum(1 for _ in self.module.header)]
        m = self.module
        cache = self._cache
        while len(offsets) <= index:
            i = len(offsets) - 1
            stmt = m.body[i]
            hit = cache.get(stmt) if cache is not None else None
            n = hit[1] if hit is not None and hit[1] is not None else None
            if n is None:
                n = m.code_for_node(stmt).count("\n")
                if cache is not None:
                    cache[stmt] = (hit[0] if hit else None, n)
            offsets.append(offsets[i] + n)
        return offsets[index]

    def _statement_positions(self, index: int) -> dict:
        pos = self._positions.get(index)
        if pos is None:
            stmt = self.module.body[index]
            cache = self._cache
            hit = cache.get(stmt) if cache is not None else None
            pos = hit[0] if hit is not None else None
            if pos is None:
                pos = render_with_positions(self.module.with_changes(body=[stmt], header=[], footer=[]))[0]
                if cache is not None:
                    cache[stmt] = (pos, hit[1] if hit else None)
            self._positions[index] = pos
        return pos

    def _def_anchor(self, fdef, key: str):
        """How ``fdef`` (the function the model keys ``key``), rendered alone, maps onto the source."""
        got = self._in_def.get(id(fdef), False)
        if got is not False:
            return got
        self._in_def[id(fdef)] = None
        if self._defs is None:
            try:
                tree = ast.parse(self._text)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._defs = {}
                return None
            self._defs = def_keys(tree)
        if self._lines is None:
            self._lines = _NEWLINE.split(self._text)
        wheres = self._defs.get(key)
        if not wheres or type(fdef) is not cst.FunctionDef:
            return None
        src = self._lines
        pos, code = render_with_positions(self.module.with_changes(body=[fdef], header=[], footer=[]))
        rendered = _NEWLINE.split(code)
        name = pos.get(fdef.name)
        if name is None:
            return None
        last = len(rendered) - 1 if rendered[-1] == "" else len(rendered)
        fits = []
        for lineno, col in wheres:
            indent = src[lineno - 1][:col] if lineno <= len(src) else "x"
            if indent.strip(" \t\f"):
                continue
            delta = lineno - name.start.line
            # trust the mapping only if the rendering is the source, shifted by the def's indentation:
            # its `def` line and its last line
            if all(1 <= ln + delta <= len(src) and src[ln + delta - 1] in (indent + rendered[ln - 1], rendered[ln - 1])
                   for ln in (name.start.line, last)):
                fits.append((pos, delta, indent, rendered))
        if len(fits) != 1:  # functions sharing a key that render alike: the statement's way decides
            return None
        anchor = self._in_def[id(fdef)] = fits[0]
        return anchor

    def _column(self, anchor, line: int, column: int) -> int | None:
        """The source column of rendered (line, column): shifted by the def's indentation unless the line
        is kept verbatim (a continuation line inside brackets, a multi-line string)."""
        _, delta, indent, rendered = anchor
        src, r = self._lines[line + delta - 1] if 1 <= line + delta <= len(self._lines) else None, rendered[line - 1]
        if src == indent + r:
            return column + len(indent)
        if src == r:
            return column
        return None

    def span(self, node, top_index: int, within=None) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), 1-based, end exclusive, of ``node``; ``within``: the
        function that holds it, as (its def node, the model's key for it), when known."""
        if within is not None and self._text is not None:
            anchor = self._def_anchor(*within)
            pos = anchor[0].get(node) if anchor is not None else None
            if pos is not None:
                col = self._column(anchor, pos.start.line, pos.start.column)
                end_col = self._column(anchor, pos.end.line, pos.end.column)
                if col is not None and end_col is not None:
                    delta = anchor[1]
                    return (pos.start.line + delta, col + 1, pos.end.line + delta, end_col + 1)
        pos = self._statement_positions(top_index).get(node)
        if pos is None:
            return (1, 1, 1, 1)
        off = self._line_offset(top_index)
        return (pos.start.line + off, pos.start.column + 1, pos.end.line + off, pos.end.column + 1)
