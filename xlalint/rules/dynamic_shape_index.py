"""XLA003 dynamic-shape-index: an op whose output shape depends on tensor values, every step."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.syntax import keyword_arg, positional_args

COST = (
    "torch_xla runs `{op}` on the CPU (a graph cut + a device-to-host transfer each time) and compiles "
    "a new graph whenever {changes}"
)
CHANGES_SELECTED = "the number of selected elements changes (measured: a recompile on almost every step)"
CHANGES_DISTINCT = "the number of distinct values changes"

# What to write instead, per case.
FIX_MASK_REDUCE = "keep the full shape and weight by the mask: `(x * mask).sum()` or `torch.where(mask, x, 0).sum()` (divide by `mask.sum()` for a mean)"
FIX_MASK_LOSS = "keep the full shape: compute the loss per element (`reduction=\"none\"`, or `ignore_index=`) and weight it by the mask: `(loss * mask).sum() / mask.sum()`"
FIX_MASK_GET = "keep the full shape and carry the mask along: `torch.where(mask, x, fill)` / `x * mask`, reducing with the mask later"
FIX_MASK_SET = "`x = torch.where(mask, v, x)` or `x.masked_fill_(mask, v)` (same shape, no data-dependent indices)"
FIX_NONZERO = "`torch.nonzero_static(x, size=K, fill_value=-1)` with a fixed bound K (no recompile), or avoid indices altogether with `torch.where(cond, a, b)` / a mask"
FIX_MASKED_SELECT = "keep the full shape: `torch.where(mask, x, 0)` / `x * mask`, reducing with the mask"
FIX_UNIQUE = (
    "a fixed-size count over the known value range: `torch.zeros(K, device=d).scatter_add_(0, x, torch.ones_like(x))` "
    "or `F.one_hot(x, K).sum(0)` (`torch.bincount` keeps a fixed size only with `minlength=K` and is a CPU fallback itself)"
)
FIX_SLICE_BOUND = (
    "keep a fixed length and mask the rest (`x * (torch.arange(L, device=x.device) < n)`, an attention mask), "
    "or read the bound once per batch and round it up to one of a few bucket lengths (a multiple of 64)"
)
COST_SLICE_BOUND = (
    "Python reads the bound to the host (`__index__`: 1 extra graph execution + 1 device-to-host transfer each "
    "time) and the result's shape follows its value: a new graph whenever it changes"
)
FIX_REPEAT = "pass `output_size=` (a fixed total length) or build the result with a fixed-size gather/mask"


class DynamicShapeIndex(Rule):
    code = "XLA003"
    name = "dynamic-shape-index"
    summary = "A per-step op whose output shape depends on tensor values: a CPU fallback and a recompile every step."
    what_it_does = """
        Flags, in code that runs every step (also after the step's sync: a dynamic shape recompiles
        there too), the ops whose output size depends on the data: indexing with a boolean tensor
        (`x[mask]`, `x[x > 0]`, `x[:, keep]`), assigning through one (`x[mask] = v`),
        `torch.nonzero` / `.nonzero()`, `torch.argwhere`, one-argument `torch.where(cond)`,
        `masked_select`, `torch.unique` / `unique_consecutive`, and `repeat_interleave` with tensor
        repeats and no `output_size=`. A mask is a tensor known to hold booleans: a comparison,
        `.bool()`, `.eq()`/`.lt()`/`.isnan()`, `torch.logical_*`, `~mask`, `a & b`, a view of one
        (`mask[:, 0]`, `mask.unsqueeze(-1)`), a mask a helper returns or an attribute holds (in this
        module or another), or a tensor named `*mask` or `dones`/`terminals` (RL batches). Chains count (`x[1:][mask] = v`), and so does a
        helper's parameter that its callers give a mask. A device tensor used as a slice bound
        (`x[:, :lengths.max()]`, `x[:, :n]` with `n = mask.sum()`) is one finding too: the bound is read
        to the host and the result's shape follows its value; so is one used as a size
        (`torch.arange(lengths.max(), device=d)`, `torch.zeros(mask.sum(), k)`).
        Not flagged: integer and slice indexing (`x[idx]`, `x[:, :4]`, `x[:, :x.size(1)]`, `x[rows, cols]`
        with integer tensors, `x[mask.long()]`), `index_select`, three-argument `torch.where(c, a, b)`,
        `masked_fill`, `x * mask`, `nonzero_static(..., size=K)`, the same ops on NumPy arrays and on
        tensors known to be on the CPU, and a slice bound that is a bare parameter of unknown type
        (`forward(self, x, n=None)`: as often an int).
    """
    why_slow = """
        XLA compiles graphs for fixed shapes. `x[mask]` has as many rows as `mask` has `True`s, which
        only the data knows: torch_xla cuts the graph, copies the mask to the host, runs
        `aten::nonzero` (or `aten::masked_select`, `aten::_unique2`) on the CPU, and the graph after
        it has a new shape. Measured on torch_xla 2.9: `x[x > 0]`, `torch.nonzero`, one-argument
        `torch.where` and `masked_select` compile a new graph on every step (plus a transfer and a
        CPU fallback); `torch.unique` whenever the number of distinct values changes.
        `nonzero_static` still falls back to the CPU but stops the recompiles.
    """
    example = """
        logits = model(tokens)
        active = labels != IGNORE_INDEX
        loss = F.cross_entropy(logits[active], labels[active])   # XLA003 (twice)
        targets[targets == IGNORE_INDEX] = 0                      # XLA003
    """
    use_instead = """
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        targets = torch.where(targets == IGNORE_INDEX, 0, targets)
    """
    known_problems = """
        Whether an index holds booleans is inferred: a tensor named `*mask` (or `dones`, `terminals`)
        is taken to be a boolean mask. A mask that is all `True` by construction still has a data-dependent shape for XLA.
        Selecting a tensor's elements once outside the step loop is not reported.
    """
    verify = """
        The CPU-fallback counters `aten::nonzero` / `aten::masked_select` / `aten::_unique2` /
        `aten::unique_consecutive` / `aten::repeat_interleave.Tensor` move at the line on most steps, and
        `UncachedCompile` keeps rising after warm-up (one new graph per new selected size).
    """
    VALID = [
        # a size returned beside a tensor by a method, unpacked from a name that holds the call (fairseq's
        # Emformer: `results = self.pre_attention_ops(...)`, `rc_length, ... = results`): a Python int
        "import torch\nimport torch.nn as nn\nclass Layer(nn.Module):\n    def pre(self, x, rc):\n        rc_length = rc.size(0)\n        return rc_length, torch.cat([rc, x], dim=0)\n    def forward(self, x, rc):\n        results = self.pre(x, rc)\n        rc_length, both = results\n        return both[0:rc_length]\n",
        # integer, slice and integer-tensor indexing; three-argument where; masked_fill; mask products
        "import torch\nfor x, y in loader:\n    out = model(x)\n    a = out[:, :4]\n    b = out[y]\n    c = torch.where(y > 0, out, 0)\n    d = out.masked_fill(y == 0, 0.0)\n    e = out * (y > 0)\n    f = out.index_select(0, y)\n    loss = (a.sum() + b.sum() + c.sum() + d.sum() + e.sum())\n    loss.backward()\n",
        # nonzero_static has a fixed size
        "import torch\nfor x in loader:\n    idx = torch.nonzero_static(x > 0, size=8, fill_value=-1)\n    loss = model(x).sum()\n    loss.backward()\n",
        # outside the step loop: once
        "import torch\nlabels = torch.randint(0, 3, (100,))\nkeep = labels[labels != 0]\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n",
        # known-CPU tensors
        "import torch\nfor x in loader:\n    cpu = x.cpu()\n    nz = cpu.nonzero()\n    loss = model(x).sum()\n    loss.backward()\n",
        # numpy's nonzero on an unknown value
        "import torch\nimport numpy as np\nfor x in loader:\n    arr = np.asarray(stats)\n    nz = arr.nonzero()\n    loss = model(x).sum()\n    loss.backward()\n",
        # a mask turned into integers, a NumPy mask, slice bounds that are Python ints or a bare parameter
        "import torch\nimport numpy as np\nclass M(torch.nn.Module):\n    def forward(self, x, n=None):\n        a = x[(x > 0).to(torch.long)]\n        arr = np.arange(4)\n        b = arr[arr > 1]\n        return a, b, x[:, : x.size(1)], x[:, :n], x[:, :8]\n",
        # sizes from shapes, Python ints and bare parameters
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, h, n=None):\n        return torch.arange(h.size(1), device=h.device), torch.zeros(n, 4), torch.ones(8, 4)\n",
        # repeat_interleave with a Python int or a fixed output size
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, reps):\n        a = x.repeat_interleave(2, dim=0)\n        return a, torch.repeat_interleave(x, reps, dim=0, output_size=64)\n",
    ]
    INVALID = [
        "import torch\nfor x, y in loader:\n    out = model(x)\n    loss = out[y != -100].sum()\n    loss.backward()\n",
        "import torch\nfor x, y in loader:\n    out = model(x)\n    y[y == -100] = 0\n    loss = out.sum()\n    loss.backward()\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        idx = torch.nonzero(x > 0)\n        return x.masked_select(x > 1), torch.where(x > 0)\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, labels: torch.Tensor):\n        classes = torch.unique(labels)\n        return x.repeat_interleave(labels, dim=0)\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, hidden, attention_mask):\n        return hidden[attention_mask.bool()]\n",
        # a mask returned by a helper defined before the forward that calls it
        "import torch\ndef real(ids):\n    return ids.ne(0)\nclass M(torch.nn.Module):\n    def forward(self, h, ids):\n        keep = real(ids)\n        return h[keep]\n",
        # a device tensor as a slice bound
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, h, lengths):\n        n = lengths.max()\n        return h[:, :n]\n",
        # a terminal mask unpacked from a batch (RL)
        "import torch\ndef td(net, batch):\n    states, rewards, dones, nxt = batch\n    v = net(nxt).max(1)[0]\n    v[dones] = 0.0\n    return (net(states).sum() - rewards - v).pow(2).mean()\nfor batch in loader:\n    td(net, batch).backward()\n    opt.step()\n",
        # the same, the batch annotated as a tuple of tensors (Lightning's DQN template)
        "import torch\nclass Q(torch.nn.Module):\n    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]):\n        s, done = batch\n        v = self.net(s).max(1)[0]\n        v[done] = 0.0\n        return v.sum()\n    def forward(self, batch):\n        return self.loss(batch)\n",
        # a device tensor as a size
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, h, lengths):\n        steps = torch.arange(lengths.max(), device=h.device)\n        return steps[None, :] < lengths[:, None]\n",
        # a chain: a view of a mask
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, h, ids):\n        m = ids > 0\n        h[1:][m[1:]] = 0\n        return h\n",
    ]

    def __init__(self) -> None:
        super().__init__()
        self._assigned: set = set()  # (id(function), name) bound by an assignment or a loop in it
        self._stores: set = set()  # Subscript nodes assigned to
        self._reduced: set = set()  # Subscript nodes whose result is reduced right away
        self._loss_args: set = set()  # Subscript nodes passed to a loss

    # --------------------------------------------------------------- indexing
    def on_Assign(self, node: cst.Assign) -> None:
        for t in node.targets:
            if type(t.target) is cst.Subscript:
                self._stores.add(id(t.target))
            self._note_names(t.target)

    def on_AugAssign(self, node: cst.AugAssign) -> None:
        if type(node.target) is cst.Subscript:
            self._stores.add(id(node.target))
        self._note_names(node.target)

    def on_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._note_names(node.target)

    def on_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._note_names(node.target)

    def on_For(self, node: cst.For) -> None:
        self._note_names(node.target)

    def _note_names(self, target) -> None:
        if type(target) is cst.Name:
            self._assigned.add((id(self.model.func), target.value))
        elif type(target) in (cst.Tuple, cst.List):
            for el in target.elements:
                self._note_names(el.value)
        elif type(target) is cst.StarredElement:
            self._note_names(target.value)

    def on_Subscript(self, node: cst.Subscript) -> None:
        m = self.model
        mask = None
        for el in node.slice:
            s = el.slice
            if type(s) is cst.Index and s.star is None and m.is_bool_tensor(s.value):
                mask = s.value
                break
        if mask is None:
            self._slice_bounds(node)
            return
        if m.kind(node.value) in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR):
            return
        if id(node) in self._stores:
            self._flag(node, f"`{self.text(node)}` writes through a boolean mask (indices that depend on the data)", "aten::nonzero", FIX_MASK_SET)
        elif id(node) in self._reduced:
            self._flag(node, f"`{self.text(node)}` indexes with a boolean mask: a data-dependent shape", "aten::nonzero", FIX_MASK_REDUCE)
        elif id(node) in self._loss_args:
            self._flag(node, f"`{self.text(node)}` indexes with a boolean mask: a data-dependent shape", "aten::nonzero", FIX_MASK_LOSS)
        else:
            self._flag(node, f"`{self.text(node)}` indexes with a boolean mask: a data-dependent shape", "aten::nonzero", FIX_MASK_GET)

    def _slice_bounds(self, node: cst.Subscript) -> None:
        """``x[:, :n]`` with ``n`` a device tensor (``lengths.max()``, ``mask.sum()``): one finding for the
        host read and the data-dependent shape it gives."""
        m = self.model
        if m.kind(node.value) not in K.DEVICE_TENSORS:
            return
        for el in node.slice:
            s = el.slice
            if type(s) is not cst.Slice:
                continue
            for bound in (s.lower, s.upper, s.step):
                if bound is not None and m.kind(bound) in K.DEVICE_TENSORS and not self._assumed_param(bound):
                    self.report(
                        node,
                        f"`{self.text(node)}` slices at `{self.text(bound, 24)}`, a device tensor: a host read and a data-dependent shape, {{when}}",
                        fix=FIX_SLICE_BOUND, when="step-any", cost=COST_SLICE_BOUND,
                    )
                    return

    def _size_args(self, node: cst.Call, args: list, positions) -> None:
        """``torch.arange(lengths.max(), device=d)``, ``torch.zeros(n, d)`` with ``n`` a device tensor."""
        m = self.model
        sizes = [a for i, a in enumerate(args) if positions is None or i in positions]
        for a in list(sizes):
            if type(a) in (cst.Tuple, cst.List):
                sizes += [el.value for el in a.elements]
        for a in sizes:
            if m.kind(a) in K.DEVICE_TENSORS and not self._assumed_param(a):
                self.report(
                    node,
                    f"`{self.text(node)}` takes a size from `{self.text(a, 24)}`, a device tensor: a host read and a data-dependent shape, {{when}}",
                    fix=FIX_SLICE_BOUND, when="step-any", cost=COST_SLICE_BOUND.replace("the bound", "the size"),
                )
                return

    def _assumed_param(self, bound) -> bool:
        """A bare parameter that is a tensor only by assumption (``forward(self, x, n=None)``): an int as often;
        so is arithmetic on such parameters, literals and values not known to be device tensors (``arange(j - i, j)``
        in ``forward(self, i, j)``, ``edges[:, :, : nodes * self.n_edge_types]``)."""
        t = type(bound)
        if t is cst.BinaryOperation:
            return self._assumed_or_literal(bound.left) and self._assumed_or_literal(bound.right) and (
                self._assumed_param(bound.left) or self._assumed_param(bound.right))
        if t is cst.UnaryOperation:
            return self._assumed_param(bound.expression)
        if t is not cst.Name:
            return False
        f = self.model.func
        name = bound.value
        if f is None or type(f.node) is not cst.FunctionDef or (id(f), name) in self._assigned or name in f.seeds:
            return False
        params = f.node.params
        for p in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
            if p.name.value == name:
                return p.annotation is None
        return False

    def _assumed_or_literal(self, e) -> bool:
        """A literal, an assumed parameter, or a value not known to be a device tensor (``nodes * self.n_edge_types``
        in ``forward(self, ..., nodes)``: a config int beside the parameter)."""
        return type(e) in (cst.Integer, cst.Float) or self._assumed_param(e) or self.model.kind(e) not in K.DEVICE_TENSORS

    # --------------------------------------------------------------- calls
    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        func = node.func
        self._note_consumers(node)
        q = m.qualname(func)
        if q is not None and q.startswith("torch."):
            fn = q.rsplit(".", 1)[-1]
            args = positional_args(node)
            first = args[0] if args else keyword_arg(node, "input")
            if q in T.SIZE_ARG_TORCH_FUNCTIONS:
                self._size_args(node, args, T.SIZE_ARG_TORCH_FUNCTIONS[q])
            elif q in T.DYNAMIC_SHAPE_FUNCTIONS:
                if first is None or not self._maybe_device(first):
                    return
                self._flag_function(node, fn)
            elif q == "torch.where":
                if len(node.args) == 1 and args and self._maybe_device(args[0]):
                    self._flag(node, f"`{self.text(node)}` (one argument) returns the indices of the `True`s: a data-dependent shape", "aten::nonzero", FIX_NONZERO)
            elif q == "torch.repeat_interleave":
                reps = args[1] if len(args) > 1 else keyword_arg(node, "repeats")
                if len(args) == 1 and reps is None:
                    reps = args[0]  # torch.repeat_interleave(repeats)
                if reps is not None and m.is_tensor(reps) and keyword_arg(node, "output_size") is None:
                    self._flag(node, f"`{self.text(node)}` repeats by a tensor: a data-dependent length", "aten::repeat_interleave.Tensor", FIX_REPEAT)
            return
        if type(func) is not cst.Attribute:
            return
        meth = func.attr.value
        recv = func.value
        if meth in T.DYNAMIC_SHAPE_METHODS:
            k = m.kind(recv)
            if k in K.DEVICE_TENSORS or (k is K.UNKNOWN and meth in T.TORCH_ONLY_DYNAMIC_SHAPE_METHODS and m.imports_torch):
                self._flag_function(node, meth)
        elif meth == "repeat_interleave":
            args = positional_args(node)
            reps = args[0] if args else keyword_arg(node, "repeats")
            if (
                reps is not None
                and m.is_tensor(reps)
                and m.kind(recv) not in (K.CPU_TENSOR, K.NOT_TENSOR)
                and keyword_arg(node, "output_size") is None
            ):
                self._flag(node, f"`{self.text(node)}` repeats by a tensor: a data-dependent length", "aten::repeat_interleave.Tensor", FIX_REPEAT)

    def _maybe_device(self, expr) -> bool:
        """An argument of a torch function: a tensor unless known to be on the CPU (or not one)."""
        return self.model.kind(expr) not in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR)

    def _note_consumers(self, node: cst.Call) -> None:
        """Remember masked subscripts that are reduced or fed to a loss: the fix differs."""
        func = node.func
        if type(func) is cst.Attribute and func.attr.value in T.MASK_REDUCTION_METHODS and type(func.value) is cst.Subscript:
            self._reduced.add(id(func.value))
        name = ""
        if type(func) is cst.Attribute:
            name = func.attr.value
        elif type(func) is cst.Name:
            name = func.value
        if name and name.lower().endswith(T.LOSS_NAME_SUFFIXES):
            for a in node.args:
                if type(a.value) is cst.Subscript:
                    self._loss_args.add(id(a.value))

    def _flag_function(self, node: cst.Call, fn: str) -> None:
        if fn in ("nonzero", "argwhere"):
            self._flag(node, f"`{self.text(node)}` returns one row per non-zero element: a data-dependent shape", "aten::nonzero", FIX_NONZERO)
        elif fn == "masked_select":
            self._flag(node, f"`{self.text(node)}` has a data-dependent shape", "aten::masked_select", FIX_MASKED_SELECT)
        elif fn == "unique":
            self._flag(node, f"`{self.text(node)}` returns one entry per distinct value: a data-dependent shape", "aten::_unique2", FIX_UNIQUE,
                       CHANGES_DISTINCT)
        elif fn == "unique_consecutive":
            self._flag(node, f"`{self.text(node)}` returns one entry per run of equal values: a data-dependent shape",
                       "aten::unique_consecutive", FIX_UNIQUE, "the number of runs changes")

    def _flag(self, node, what: str, op: str, fix: str, changes: str = CHANGES_SELECTED) -> None:
        cost = COST.format(op=op, changes=changes)
        self.report(node, f"{what}, {{when}}", fix=fix, when="step-any", cost=cost)
