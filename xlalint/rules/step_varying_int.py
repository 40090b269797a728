"""XLA009 step-varying-python-int: a Python int that changes every step shapes or indexes a device tensor."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import kinds as K
from xlalint.semantics import rule_tables as RT
from xlalint.semantics.model import keyword_arg, positional_args
from xlalint.semantics.step_values import StepValues, _code

FIX_INDEX = (
    "make the index data, not a constant: `x.index_select(0, idx)` / `x[idx]` with "
    "`idx = torch.tensor([i]).to(device)` (uploaded each step, the graph stays the same)"
)
FIX_SLICE = (
    "slice to a fixed size and mask the rest (`x[:, :MAX] * (torch.arange(MAX, device=d) < n_t)` with the "
    "length as a device tensor), or round it up to a few buckets (`n = -(-n // 64) * 64`: one graph per bucket)"
)
FIX_SHAPE = (
    "use a fixed size (pad to a bucket: one graph per bucket instead of one per value) and keep what varies "
    "as data (a mask or an index tensor)"
)


class StepVaryingPythonInt(Rule):
    code = "XLA009"
    name = "step-varying-python-int"
    summary = "A Python int that changes every step is used as an index, slice bound or shape: a new graph to compile every step."
    what_it_does = """
        Flags, in a step loop, a Python int that changes from step to step used on a device tensor:
        as an index (`out[step]`, `x[:, i]`), a slice bound (`x[:, :n]`, `x[start:start + k]`), a
        `view`/`reshape`/`expand`/`repeat`/`narrow`/`select`/`new_zeros` argument, or the size of a
        `torch.arange`/`zeros`/`ones`/`empty`/`full`/`rand*` made on the device. The int varies when it is
        the loop counter (`for step in range(n)`, `for i, b in enumerate(loader)`, `global_step += 1`),
        derived from one (`n = step * 2 + 8`, `step % 100`), or an item of a Python list indexed by one
        (`lengths[step]`).
        Not flagged: literals and config values never rebound in the loop, sizes from `x.size(0)` /
        `x.shape`, and values from a small bucket set, which compile once per value and then hit the
        cache: `step % K` with a literal K <= 16 (K graphs), `min(step, K)` (K + 1 graphs, then one),
        an item of a literal list of at most 16 ints (`sizes[step % 3]` with `sizes = [64, 128, 256]`:
        3 graphs). `step % K` with a larger K is reported with its number of graphs. Inner loops that do
        not train (`for i in range(4):` inside the step) repeat the same indices every step: not flagged.
    """
    why_slow = """
        torch_xla traces Python ints into the graph as constants: `x[:, :n]` with `n = 37` is a
        different graph from `n = 38`, and every new graph is compiled (~250-330 ms on the CPU device,
        longer on a TPU) before it runs. Measured on torch_xla 2.9: `out[i]`, `x[:, :n]` and
        `torch.arange(n)` with an int that changes per step recompile on every step.
    """
    example = """
        lengths = [sample_len(i) for i in range(num_steps)]
        for step, (x, y) in enumerate(loader):
            n = lengths[step]
            out = model(x[:, :n])          # XLA009: a new graph for every new n
            pos = torch.arange(n, device=device)   # XLA009
            loss = loss_fn(out, y) + out[step % 8].sum()   # ok: 8 values, 8 graphs then cached
    """
    use_instead = """
        MAX = 64
        for step, (x, y) in enumerate(loader):
            n_t = torch.tensor(lengths[step]).to(device)        # data, not a constant
            mask = torch.arange(MAX, device=device) < n_t        # fixed shape
            out = model(x[:, :MAX] * mask)
            loss = loss_fn(out, y)
    """
    known_problems = """
        Only values derived in the function that runs the loop are followed: a counter passed to a
        helper as an argument is not. An int that changes per step but takes only a few values for
        reasons the source does not show (a schedule that is constant after warm-up) is reported.
        Fix safety: the fixes change shapes or introduce masks; none is applied automatically.
    """
    verify = """
        `UncachedCompile` keeps rising after warm-up (a new graph on most steps), with the root cause
        (the node whose shape or constant changed, from the IR dumps) at this line.
    """
    VALID = [
        # constants, config values, sizes of a fixed-shape input, bucketed values
        "import torch\nsizes = [64, 128, 256]\nfor step, (x, y) in enumerate(loader):\n    out = model(x)\n    a = out[:, :cfg.max_len]\n    b = out[: x.size(0)]\n    c = out[step % 4]\n    d = out[:, : sizes[step % 3]]\n    e = out[min(step, 3)]\n    loss = a.sum() + b.sum() + c.sum() + d.sum() + e.sum()\n    loss.backward()\n",
        # an inner loop over a fixed range repeats the same indices every step
        "import torch\nfor x, y in loader:\n    out = model(x)\n    total = 0\n    for i in range(4):\n        total = total + out[:, i].sum()\n    total.backward()\n",
        # the counter used on a Python list / for logging, and once
        "import torch\nhistory = []\nfor step, (x, y) in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n    history.append(step)\n    names = labels[step]\n    if step == 0:\n        first = loss[step]\n",
        # a CPU factory: no graph
        "import torch\nfor step, x in enumerate(loader):\n    idx = torch.arange(step)\n    loss = model(x).sum()\n    loss.backward()\n",
    ]
    INVALID = [
        "import torch\nfor step in range(100):\n    x = torch.randn(8, 64, device=device)\n    n = step % 50 + 10\n    out = model(x[:, :n])\n    loss = out.sum()\n    loss.backward()\n    optimizer.step()\n",
        "import torch\nlengths = [int(l) for l in raw_lengths]\nfor step, (x, y) in enumerate(loader):\n    n = lengths[step]\n    pos = torch.arange(n, device=x.device)\n    loss = model(x).sum() + pos.sum()\n    loss.backward()\n",
        "import torch\nglobal_step = 0\nfor x, y in loader:\n    out = model(x)\n    global_step += 1\n    loss = out[global_step].sum() + out.view(global_step, -1).sum()\n    loss.backward()\n",
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sv = None
        self._found: list = []  # (candidate, Varying, role, code)

    def _values(self) -> StepValues:
        if self.sv is None:
            self.sv = StepValues(self.model)
        return self.sv

    # ------------------------------------------------------------------ bindings
    def on_For(self, node: cst.For) -> None:
        self._values().on_for(node)

    def on_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            self._values().on_assign(t.target, node.value)

    def on_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._values().on_assign(node.target, node.value)

    def on_AugAssign(self, node: cst.AugAssign) -> None:
        self._values().on_aug_assign(node)

    # ------------------------------------------------------------------ uses
    def on_Subscript(self, node: cst.Subscript) -> None:
        if self.model.kind(node.value) not in K.DEVICE_TENSORS:
            return
        sv = self._values()
        for el in node.slice:
            s = el.slice
            if isinstance(s, cst.Index):
                v = sv.varying(s.value)
                if v is not None:
                    return self._flag(node, v, "an index", FIX_INDEX)
            elif isinstance(s, cst.Slice):
                for part in (s.lower, s.upper, s.step):
                    v = sv.varying(part) if part is not None else None
                    if v is not None:
                        return self._flag(node, v, "a slice bound", FIX_SLICE)

    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        func = node.func
        q = m.qualname(func)
        if q is not None:
            if q in RT.SHAPE_FACTORIES:
                if keyword_arg(node, "device") is None and m.kind(node) not in K.DEVICE_TENSORS:
                    return  # made on the CPU: no graph
                v = self._varying_arg(node, positional_args(node))
                if v is not None:
                    self._flag(node, v, "a size", FIX_SHAPE)
            return
        if isinstance(func, cst.Attribute) and func.attr.value in RT.SHAPE_METHODS:
            if m.kind(func.value) not in K.DEVICE_TENSORS:
                return
            v = self._varying_arg(node, positional_args(node))
            if v is not None:
                role = "an index" if func.attr.value == "select" else "a shape"
                self._flag(node, v, role, FIX_INDEX if role == "an index" else FIX_SHAPE)

    def _varying_arg(self, node, args):
        sv = self._values()
        for a in args:
            items = [e.value for e in a.elements] if isinstance(a, (cst.Tuple, cst.List)) else [a]
            for it in items:
                v = sv.varying(it)
                if v is not None:
                    return v
        return None

    def _flag(self, node, v, role: str, fix: str) -> None:
        self.report(node, "", fix=fix, when="custom")
        self._found.append((self.model.candidates[-1], v, role, _code(node)))

    def finalize(self) -> None:
        m = self.model
        for cand, v, role, code in self._found:
            loop = next((lp for lp in cand.ctx.loops if lp.node is v.loop), None)
            if loop is None or not m.is_step_loop(loop):
                continue  # the value does not change from step to step where it is used
            fr = m.frequency(cand.ctx)
            if not fr.per_step:
                continue
            cand.frequency = fr
            shown = code if len(code) <= 60 else code[:57] + "..."
            cand.message = (
                f"`{shown}` uses `{v.name}` ({v.origin}), a Python int that changes every step, as {role}: "
                "it is baked into the graph as a constant, so each new value is a new graph to compile "
                f"{{when}} (measured: a recompile on every step). Fix: {cand.fix}"
            )
