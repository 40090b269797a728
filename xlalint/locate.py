"""Source positions, computed only for the few nodes that are reported.

libcst's PositionProvider renders the whole module with position tracking: about four times the cost
of the parse. A file with findings usually has a handful of them, in one or two top-level statements, so
we render the top-level statements once as plain code to learn where each starts (cheap), and run the
position provider only over the statements that hold a reported node.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


class Locator:
    def __init__(self, module: cst.Module, cache: dict | None = None):
        self.module = module
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
                sub = self.module.with_changes(body=[stmt], header=[], footer=[])
                pos = MetadataWrapper(sub, unsafe_skip_copy=True).resolve(PositionProvider)
                if cache is not None:
                    cache[stmt] = (pos, hit[1] if hit else None)
            self._positions[index] = pos
        return pos

    def span(self, node, top_index: int) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), 1-based, end exclusive, of ``node``."""
        pos = self._statement_positions(top_index).get(node)
        if pos is None:
            return (1, 1, 1, 1)
        off = self._line_offset(top_index)
        return (pos.start.line + off, pos.start.column + 1, pos.end.line + off, pos.end.column + 1)
