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
    def __init__(self, module: cst.Module):
        self.module = module
        self._offsets: list[int] | None = None  # lines before each top-level statement, as far as needed
        self._positions: dict[int, dict] = {}

    def _line_offset(self, index: int) -> int:
        """Lines before top-level statement ``index``: rendered up to it, never past it."""
        offsets = self._offsets
        if offsets is None:
            offsets = self._offsets = [sum(1 for _ in self.module.header)]
        m = self.module
        while len(offsets) <= index:
            i = len(offsets) - 1
            offsets.append(offsets[i] + m.code_for_node(m.body[i]).count("\n"))
        return offsets[index]

    def _statement_positions(self, index: int) -> dict:
        pos = self._positions.get(index)
        if pos is None:
            sub = self.module.with_changes(body=[self.module.body[index]], header=[], footer=[])
            pos = MetadataWrapper(sub, unsafe_skip_copy=True).resolve(PositionProvider)
            self._positions[index] = pos
        return pos

    def span(self, node, top_index: int) -> tuple[int, int, int, int]:
        """(line, column, end_line, end_column), 1-based, end exclusive, of ``node``."""
        pos = self._statement_positions(top_index).get(node)
        if pos is None:
            return (1, 1, 1, 1)
        off = self._line_offset(top_index)
        return (pos.start.line + off, pos.start.column + 1, pos.end.line + off, pos.end.column + 1)
