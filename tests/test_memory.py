"""A walk leaves no reference cycle that holds syntax.

The cyclic collector is off during walks and what survives a walk is frozen (``run/memory.py``): a cycle a
walk leaves is never collected during the run, and a cycle that reaches libcst nodes keeps them for the
whole run. On torch + torch_xla such cycles (recursive closures of helpers, a class made per call, functions
a walk again dropped without ``release``) kept 3.7 million nodes and raised ``-j 1``'s peak from about 410 to
about 700 MB.
"""

from __future__ import annotations

import gc
import sys
import types
from pathlib import Path

import libcst as cst
import pytest

from xlalint.config import build_settings
from xlalint.run import memory, pool
from xlalint.run.project import lint_files
from xlalint.semantics.steps import FuncInfo

# every shape that once left such a cycle, in one project
_MODEL = '''import torch
from torch import nn


def default(val, d):
    return val if val is not None else d  # passthrough.spec_of_return


class Attention(nn.Module):
    def forward(self, x, cache):
        if cache.get(0) is not None:  # bindings._container_receivers
            x = x + 1
        return x


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.attn = Attention()  # module_calls._bindings of __init__
        self.width = default(width, 4)

    def forward(self, x, cache):
        return self.attn(x, cache)
'''

_TRAIN = '''import torch
import torch_xla.core.xla_model as xm
from model import Block


def twice(y):
    return y * 2


def step(block, x):
    def double(y):  # a nested function (calling one: a cycle): walked again with step, its first record dropped
        return twice(y)
    out = double(block(x, {}))
    return out


def train(loader, optimizer):
    block = Block(8)
    device = xm.xla_device()
    total = 0
    for x in loader:
        loss = step(block, x.to(device))  # step's parameter becomes a tensor: step is walked again
        loss.sum().backward()
        optimizer.step()
        total += loss.sum().item()  # its fix reads `total` at the return (host_read._returned_uses)
    return total / 10
'''


def _garbage() -> tuple:
    """(libcst nodes that only unreachable cycles hold, xlalint's functions in such cycles: recursive
    closures), collected here."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
    finally:
        gc.set_debug(0)
    nodes = sum(1 for o in gc.garbage if isinstance(o, cst.CSTNode))
    closures = sorted({o.__qualname__ for o in gc.garbage
                       if type(o) is types.FunctionType and o.__module__.startswith("xlalint.")})
    gc.garbage.clear()
    return nodes, closures


def test_a_walk_leaves_no_cycle_that_holds_syntax(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text("")
    (root / "model.py").write_text(_MODEL)
    (root / "train.py").write_text(_TRAIN)
    walks: list = []
    release, analyse_one = memory.release_memory, pool.analyse_one

    def counting(size: int = memory.TRIM_EVERY) -> None:
        if size < memory.TRIM_EVERY:  # after one walk, before what it left is frozen
            walks.append(_garbage())
        release(size)

    def one_walk(*args, **kwargs):
        gc.collect()  # what came before the walk (the declarations' closures: the collector was on then)
        return analyse_one(*args, **kwargs)

    monkeypatch.setattr(memory, "release_memory", counting)
    monkeypatch.setattr(pool, "analyse_one", one_walk)
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        found = lint_files([str(root / "model.py"), str(root / "train.py")], build_settings(None), jobs=1, cache=None)
    finally:
        memory.thaw()
        if not was_enabled:
            gc.disable()
    assert any(f.code == "XLA001" and Path(f.path).name == "train.py" for f in found)  # the walks ran
    assert len(walks) >= 2
    assert walks == [(0, [])] * len(walks), f"(libcst nodes, closures) kept by cycles after each walk: {walks}"


@pytest.mark.skipif(sys.version_info < (3, 10), reason="dataclass slots: Python 3.10 on")
def test_a_function_record_is_small():
    # the program of a project holds one per function (82,000 on torch + torch_xla): with slots, a record is
    # its object alone; as a dataclass with a __dict__ of more than 30 attributes (CPython 3.11 stops
    # sharing the keys there) it was 48 + 1,584 bytes
    f = FuncInfo(key="pkg.mod:f", name="f", class_key=None, node=None, parent=None)
    size = sys.getsizeof(f) + sys.getsizeof(getattr(f, "__dict__", {}))
    assert size < 600, size
    f.calls.append(("g", None))
    f.release()  # SemanticModel.release breaks cycles through it
    assert f.calls is None and f.parent is None
