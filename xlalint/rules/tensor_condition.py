"""XLA002 tensor-condition: Python control flow on a device tensor's value."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import kinds as K
from xlalint.semantics import syntax
from xlalint.semantics.guards import xla_polarity

FIX = "keep the decision on the device with `torch.where(cond, a, b)` / multiplying by a mask, or move the check out of the step (every N steps, or in `xm.add_step_closure`)"

COST = (
    "Python needs the bool now: 1 extra graph execution + 1 device-to-host transfer each time (the graph is "
    "cut and run early), and a branch that flips compiles another graph"
)

FIX_ELEMENTS = (
    "reduce on the device and test once: `if done.all():` / `if finished.any():` (one transfer), or keep the "
    "decision on the device and test it every K iterations"
)
COST_ELEMENTS = (
    "Python iterates the tensor and truth-tests each element: one device-to-host transfer per element read "
    "(each cuts the graph), every time"
)

# Methods whose truth value only makes sense on a tensor: flagged even when the receiver is unknown.
_UNAMBIGUOUS = frozenset({"any", "all", "isnan", "isinf", "isfinite"})


class TensorCondition(Rule):
    code = "XLA002"
    name = "tensor-condition"
    summary = "Python branches on a device tensor every step: the graph is cut to read the condition."
    what_it_does = """
        Flags a tensor-valued test, in code that runs every step, in `if`, `elif`, `while`, a
        ternary, `assert`, a comprehension `if`, and the operands of `and`/`or`/`not` that Python
        truth-tests: `if mask.any():`, `if loss > 0:`, `while not done.all():`,
        `if torch.isnan(loss):`. Tests on Python values are not flagged (`if self.training:`,
        `if x is None:`, `if x.dim() == 3:`, `if len(batch):`), nor `torch.where(c, a, b)`.
    """
    why_slow = """
        Python needs a bool now, so torch_xla compiles and runs the graph built so far and copies the
        condition to the host (1 extra execution + 1 transfer per step). If the branch taken changes
        from step to step, each combination of branches is a different graph: a new compile.
        A `while` on a tensor does this once per iteration.
    """
    example = """
        loss = criterion(model(x), y)
        if torch.isnan(loss):     # XLA002
            continue
        loss.backward()
    """
    use_instead = """
        loss = criterion(model(x), y)
        loss = torch.where(torch.isnan(loss), torch.zeros_like(loss), loss)  # stays on the device
        loss.backward()
    """
    verify = "Transfer samples (`TransferFromDeviceTime`, `aten::_local_scalar_dense`) at the condition's line on most steps."
    VALID = [
        # a Python attribute somebody set on a parameter (tested with hasattr), and dtypes compared
        "import torch\nimport torch_xla\nfor x, y in loader:\n    loss = model(x).sum()\n    loss.backward()\n    for p in model.parameters():\n        if hasattr(p, 'shared') and p.shared:\n            continue\n        if x.dtype == torch.get_autocast_gpu_dtype():\n            p.grad.mul_(2)\n    opt.step()\n    torch_xla.sync()\n",
        # a backend flag and a method that returns an int are Python values (torch's own functional code)
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, input, mask):\n        if input.is_xpu or mask.dense_dim() > 0:\n            return input\n        return input * 2\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, mask=None):\n        if self.training and mask is not None:\n            x = x * mask\n        if x.dim() == 3:\n            x = x.sum(0)\n        return x\n",
        "import torch\nfor x in loader:\n    out = torch.where(x > 0, x, 0)\n    loss = model(out).sum()\n    loss.backward()\n",
        # iterating a dict batch gives its keys (`batch[k]` in the body says so): CenterNet's trainer
        "import torch\nfor batch in loader:\n    for k in batch:\n        if k != 'meta':\n            batch[k] = batch[k].to(device)\n    loss = model(batch).sum()\n    loss.backward()\n",
        # a parameter annotated `int | None`, whatever its callers pass (encodec's last_frame_pad_length)
        "import torch\nclass M(torch.nn.Module):\n    def decode(self, codes, pad: int | None = 0):\n        if pad > 0:\n            codes = codes[..., :-pad]\n        return codes\n    def forward(self, x):\n        return self.decode(x, x.sum())\n",
        # autograd.Function.forward takes whatever the caller passes: its arguments are not assumed tensors
        "import torch\nclass Checkpoint(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, run_function, preserve_rng_state, *args):\n        if preserve_rng_state:\n            ctx.state = torch.get_rng_state()\n        return run_function(*args)\n",
        "import torch\nfrom torch.autograd.function import Function\nclass SyncBatchNorm(Function):\n    def forward(self, input, weight, process_group):\n        if process_group._get_backend_name() != 'gloo':\n            input = input * weight\n        return input\n",
    ]
    INVALID = [
        "import torch\nfor x, y in loader:\n    loss = model(x).sum()\n    if loss > 0:\n        loss.backward()\n    optimizer.step()\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x, pad_mask):\n        if pad_mask.any():\n            x = x.masked_fill(pad_mask, 0)\n        return x\n",
    ]

    def __init__(self) -> None:
        super().__init__()
        self._done: set = set()
        self._gated: dict = {}  # id of an `and`'s operand that runs less often than the test -> its finding

    def before_rewalk(self) -> None:
        self._done.clear()
        self._gated.clear()

    def on_GatedOperand(self, node) -> None:
        # the walk reached the operand with the frequency it runs at (`i == 0 and finish.any()`: the first pass)
        found = self._gated.pop(id(node), None)
        if found is not None:
            self._report(*found)

    def on_If(self, node: cst.If) -> None:
        self._truth(node.test, "`if`")

    def on_While(self, node: cst.While) -> None:
        self._truth(node.test, "`while` (once per iteration)")

    def on_IfExp(self, node: cst.IfExp) -> None:
        self._truth(node.test, "a conditional expression")

    def on_Assert(self, node: cst.Assert) -> None:
        self._truth(node.test, "`assert`")

    def on_CompIf(self, node: cst.CompIf) -> None:
        self._truth(node.test, "a comprehension's `if`")

    def on_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        if type(node.operator) is cst.Not and id(node) not in self._done:
            self._truth(node, "`not`")

    def on_BooleanOperation(self, node: cst.BooleanOperation) -> None:
        # outside a test, `a or b` still truth-tests `a`
        if id(node) not in self._done:
            self._done.add(id(node))
            op = "`and`" if type(node.operator) is cst.And else "`or`"
            self._truth(node.left, op)

    def _truth(self, e, by: str) -> None:
        """``e`` is truth-tested by Python: one finding for the whole test, at its first tensor operand."""
        hit = self._first_tensor_operand(e)
        if hit is None:
            return
        gated = self._gated_operand(e, hit)
        if gated is not None:
            self._gated[id(gated)] = (hit, by)  # reported when the walk gets there (on_GatedOperand)
            return
        self._report(hit, by)

    def _gated_operand(self, e, hit):
        """The operand of an ``and`` chain ``e`` that holds ``hit`` and that an earlier operand lets run less
        often than the test (``self.model.operand_gate``), else None."""
        while type(e) is cst.BooleanOperation and type(e.operator) is cst.And:
            if syntax.contains(e.right, hit):
                return e.right if self.model.operand_gate(e.left) is not None else None
            e = e.left
        return None

    def _report(self, hit, by: str) -> None:
        if self._elementwise(hit):
            self.report(hit, f"`{self.text(hit)}` reads the elements of a device tensor in Python, tested by {by} "
                             f"{{when}}", fix=FIX_ELEMENTS, cost=COST_ELEMENTS)
        else:
            self.report(hit, f"`{self.text(hit)}` is a device tensor tested by {by} {{when}}", fix=FIX, cost=COST)

    def _elementwise(self, e) -> bool:
        """``all(done)`` / ``any(finished)`` of one device tensor: Python truth-tests its elements one by
        one (a transfer each, until the answer is known). Not a name that may hold a container (a
        ``forward`` parameter taken for a tensor by its name alone: ``any(lengths)`` of a list)."""
        if type(e) is not cst.Call or type(e.func) is not cst.Name or e.func.value not in ("all", "any"):
            return False
        if len(e.args) != 1 or e.args[0].keyword is not None or e.args[0].star:
            return False
        m = self.model
        arg = e.args[0].value
        if not m.is_builtin(e.func, e.func.value) or m.kind(arg) not in K.DEVICE_TENSORS:
            return False
        return not (type(arg) is cst.Name and arg.value in m.func.guessed)

    def _first_tensor_operand(self, e):
        self._done.add(id(e))
        if type(e) is cst.BooleanOperation:
            left = self._first_tensor_operand(e.left)
            polarity = xla_polarity(e.left, self.model.func.polarities)
            if polarity == ("xla" if type(e.operator) is cst.Or else "non-xla"):
                return left  # `is_xla_tensor(x) or m.any()`: on XLA the right operand is never evaluated
            right = self._first_tensor_operand(e.right)
            return left if left is not None else right
        if type(e) is cst.UnaryOperation and type(e.operator) is cst.Not:
            return self._first_tensor_operand(e.expression)
        m = self.model
        k = m.kind(e)
        if k in K.DEVICE_TENSORS or (k is K.UNKNOWN and _unambiguous(m, e)) or self._elementwise(e):
            return e
        return None


def _unambiguous(m, e) -> bool:
    """``x.any()`` / ``torch.isnan(x)`` with an unknown ``x``: only tensors answer these."""
    if type(e) is cst.Call:
        if type(e.func) is cst.Attribute and e.func.attr.value in ("any", "all") and not e.args:
            rk = m.kind(e.func.value)
            return rk is K.UNKNOWN and m.imports_torch and m.qualname(e.func.value) is None
        q = m.qualname(e.func) or ""
        if q in ("torch.isnan", "torch.isinf", "torch.any", "torch.all", "torch.isfinite"):
            return True
    return False
