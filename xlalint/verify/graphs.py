"""Read the graph dumps torch_xla writes with ``XLA_SAVE_TENSORS_FILE`` + ``XLA_SAVE_TENSORS_FMT=text`` and find
which located IR node made a recompiled graph differ from the graph compiled before it at the same cut.

With ``XLA_IR_DEBUG=1`` every node carries ``location=func@file.py:LINE`` (the base name of the file only),
and every dump starts with the Python frames that cut the graph (full paths).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field

_HEADER = "[ScheduleSyncTensorsGraph]"
_FRAME_RE = re.compile(r"^\s+(\S.*?) \((.*):(\d+)\)\s*$")
_NODE_RE = re.compile(r"^\s*%(\d+) = (\S+) (\S+)\((.*?)\)(.*)$")
_LOC_RE = re.compile(r"location=([^,]*?)@([^,@]+):(\d+)")
_OPERAND_RE = re.compile(r"%(\d+)")
_HASH_RE = re.compile(r"^Graph Hash: (\w+)", re.M)


@dataclass
class Node:
    id: int
    shape: str
    op: str
    operands: tuple
    func: str
    file: str  # base name, as torch_xla prints it
    line: int
    signature: str  # shape + op + operands + attributes, without the location


@dataclass
class Graph:
    offset: int  # byte offset of the dump in the (concatenated) dump files
    frames: list  # [(func, path, line)] innermost first, as torch_xla prints them
    hash: str
    nodes: list = field(default_factory=list)
    step: int = -1


def read_dump(paths: list) -> bytes:
    chunks = []
    for p in paths:
        try:
            with open(p, "rb") as fh:
                chunks.append(fh.read())
        except OSError:
            pass
    return b"".join(chunks)


def parse(data: bytes) -> list:
    """Every dumped graph, in order, with its byte offset (the child records the dump size at each step)."""
    graphs = []
    header = _HEADER.encode()
    pos = data.find(header)
    while pos != -1:
        nxt = data.find(header, pos + len(header))
        end = nxt if nxt != -1 else len(data)
        block = data[pos:end].decode(errors="replace")
        graphs.append(_parse_block(block, pos))
        pos = nxt
    return graphs


def _parse_block(block: str, offset: int) -> Graph:
    frames = []
    nodes = []
    in_frames = False
    in_ir = False
    for raw in block.splitlines():
        if raw.startswith("TensorsGraphInfo:"):
            in_frames = True
            continue
        if in_frames:
            m = _FRAME_RE.match(raw)
            if m:
                frames.append((m.group(1), m.group(2), int(m.group(3))))
                continue
            in_frames = False
        if raw.startswith("IR {"):
            in_ir = True
            continue
        if in_ir:
            if raw.startswith("}"):
                in_ir = False
                continue
            m = _NODE_RE.match(raw)
            if not m:
                continue
            nid, shape, op, args, rest = m.groups()
            loc = _LOC_RE.search(rest)
            attrs = _LOC_RE.sub("", rest)
            attrs = re.sub(r",\s*ROOT=\d+", "", attrs)
            func, file, line = (loc.group(1), loc.group(2), int(loc.group(3))) if loc else ("", "", 0)
            nodes.append(
                Node(
                    id=int(nid),
                    shape=shape,
                    op=op,
                    operands=tuple(int(x) for x in _OPERAND_RE.findall(args)),
                    func=func,
                    file=file,
                    line=line,
                    signature=f"{shape} {op}({_OPERAND_RE.sub('%', args)}){attrs}",
                )
            )
    h = _HASH_RE.search(block)
    return Graph(offset=offset, frames=frames, hash=h.group(1) if h else "", nodes=nodes)


def pretty_shape(shape: str) -> str:
    """``f32[8,37]{1,0}`` -> ``f32[8, 37]``."""
    shape = re.sub(r"\{[\d,]*\}", "", shape)
    return shape.replace(",", ", ")


@dataclass
class Change:
    """One IR node that made the new graph differ, with the line that created it."""

    kind: str  # "input-shape" | "node-shape" | "node-attributes" | "structure"
    op: str
    file: str  # base name from the IR location
    func: str
    line: int
    before: str
    after: str

    def describe(self) -> str:
        where = f"{self.file}:{self.line}" if self.file else "an unknown location"
        if self.kind == "input-shape":
            change = f"{pretty_shape(self.before)} -> {pretty_shape(self.after)}"
            return f"input shape changed: {change} (an input first used at {where})"
        if self.kind == "node-shape":
            return f"{self.op} at {where} changed shape: {pretty_shape(self.before)} -> {pretty_shape(self.after)}"
        if self.kind == "structure":
            what = self.after if self.before == "absent" else self.before
            return f"the graph changed structure: nodes created at {where} {what}"
        return f"{self.op} at {where} changed: {self.before} -> {self.after}"


def diff(old: Graph, new: Graph) -> list:
    """The nodes of ``new`` that differ from ``old`` while all their operands are the same.

    Those are where the difference starts; everything downstream only inherits it.
    """
    if len(old.nodes) == len(new.nodes) and all(a.op == b.op for a, b in zip(old.nodes, new.nodes)):
        changes = []
        for a, b in zip(old.nodes, new.nodes):
            if a.signature == b.signature:
                continue
            if any(
                i < len(old.nodes) and old.nodes[i].signature != new.nodes[i].signature for i in b.operands
            ):
                continue  # inherited from an operand that changed
            if not b.operands and b.op == "xla::device_data":
                kind = "input-shape" if a.shape != b.shape else "node-attributes"
            else:
                kind = "node-shape" if a.shape != b.shape else "node-attributes"
            before, after = (a.shape, b.shape) if a.shape != b.shape else (a.signature, b.signature)
            changes.append(Change(kind, b.op, b.file, b.func, b.line, before, after))
        return changes
    # Different structure (a data-dependent branch, an op that only runs sometimes): the located nodes that
    # were added or removed. Inputs and constants only follow the ops that use them: skip those.
    key_old = [(n.op, n.file, n.line) for n in old.nodes]
    key_new = [(n.op, n.file, n.line) for n in new.nodes]
    sm = difflib.SequenceMatcher(a=key_old, b=key_new, autojunk=False)
    added: dict = {}
    removed: dict = {}
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        for n in new.nodes[j1:j2]:
            if n.op not in _FOLLOWERS:
                added.setdefault((n.file, n.func, n.line), []).append(n.op)
        for n in old.nodes[i1:i2]:
            if n.op not in _FOLLOWERS:
                removed.setdefault((n.file, n.func, n.line), []).append(n.op)
    changes = []
    for (file, func, line), ops in added.items():
        changes.append(Change("structure", ops[0], file, func, line, "absent", "added: " + ", ".join(sorted(set(ops)))))
    for (file, func, line), ops in removed.items():
        if (file, func, line) not in added:
            what = "removed: " + ", ".join(sorted(set(ops)))
            changes.append(Change("structure", ops[0], file, func, line, what, "absent"))
    return changes[:_MAX_CHANGES]


_FOLLOWERS = {"xla::device_data", "prim::Constant", "aten::expand"}
_MAX_CHANGES = 6


def cut_site(graph: Graph, is_user) -> tuple:
    """The innermost user frame that cut the graph (the ``sync()`` or the ``.item()``), or ()."""
    for func, path, line in graph.frames:
        if is_user(path):
            return (os.path.realpath(path), line)
    return ()


def user_frames(graph: Graph, is_user) -> tuple:
    return tuple((os.path.realpath(p), ln) for _, p, ln in graph.frames if is_user(p))
