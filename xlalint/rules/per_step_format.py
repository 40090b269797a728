"""XLA006 per-step-format: a device tensor formatted (printed, logged) every step."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import kinds as K
from xlalint.semantics import tables as T
from xlalint.semantics.syntax import dotted_name, last_name, positional_args

FIX = "log every N steps from `xm.add_step_closure(fn, args=(loss,))`, or accumulate with `.detach()` and print after the loop"

METER_FIX = "feed the meter Python numbers read off the step (`meter.update(loss.item())` inside `xm.add_step_closure`), or keep its sums on the device and print it after the loop"
COST = "its value is copied to the host: 1 extra graph execution + 1 device-to-host transfer each time (the graph is cut and run early)"

_PROGRESS_METHODS = frozenset({"set_postfix", "set_description", "set_postfix_str", "write"})


class PerStepFormat(Rule):
    code = "XLA006"
    name = "per-step-format"
    summary = "A device tensor is formatted for logging every step: each one is a host transfer."
    what_it_does = """
        Flags formatting of device tensors in code that runs every step: `print(loss)`,
        `f"{loss}"`, `f"{loss:.4f}"`, `"%f" % loss`, `"{}".format(loss)`, `str(t)`, `repr(t)`,
        `logger.info("...", loss)` / `logging.*` with tensor arguments, tqdm's `set_postfix(loss=t)`,
        dicts, lists and tuples that hold a device tensor. Formatting an object of a project class runs
        its `__format__` / `__str__` / `__repr__` where it is formatted: a meter whose `update()` is fed
        device tensors formats tensors in its `__str__` (also `fmt.format(**self.__dict__)`), and the
        finding sits there, "every N steps (called from train.py:51 in the step loop)".
        Formatting `.shape`, `.dtype` or Python numbers is not flagged, nor formatting inside
        `xm.add_step_closure`, after the step's sync, or outside the step loop. A `.item()` that is
        formatted is reported once, as XLA001.
    """
    why_slow = """
        Turning a tensor into text needs its value on the host: torch_xla runs the pending graph early
        and copies the tensor back (measured: 1 extra execution and 1 device-to-host transfer per
        step for `print(loss)` or `f"{loss:.4f}"`).
    """
    known_problems = """
        A meter's attributes are known per class, not per object: when one caller feeds a meter class
        device tensors and another feeds it values of unknown kind, the finding in `__str__` names the
        path of whichever formatting site runs most often. A class fed Python numbers anywhere
        (`.item()`) is left alone.
    """
    example = """
        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            ...
            print(f"step {step} loss {loss:.4f}")   # XLA006
    """
    use_instead = """
        def log(step, loss):
            print(f"step {step} loss {loss.item():.4f}")   # runs after the step, off the critical path

        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            ...
            if step % 50 == 0:
                xm.add_step_closure(log, args=(step, loss))
    """
    verify = "Transfer samples (`TransferFromDeviceTime`) at the formatting line on most steps."
    VALID = [
        # a `debug` record's %-args are formatted only when DEBUG is on (ChatTTS's decode loop)
        "import torch, logging\nlogger = logging.getLogger()\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    logger.debug('loss %s', loss)\n",
        # a block that ends the program runs at most once (DETR's non-finite loss check)
        "import math, sys, torch\nfor x, y in loader:\n    loss_dict = criterion(model(x), y)\n    losses = sum(loss_dict.values())\n    value = losses.item()\n    if not math.isfinite(value):\n        print(loss_dict)\n        sys.exit(1)\n    losses.backward()\n",
        # the same meter fed Python floats (`.item()` is XLA001's finding, once)
        "import torch\nclass Meter:\n    def __init__(self):\n        self.sum = 0.0\n        self.n = 0\n    def update(self, v):\n        self.sum += v\n        self.n += 1\n    def __str__(self):\n        return f'{self.sum / self.n:.4f}'\nmeter = Meter()\nfor step, x in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n    meter.update(loss.item())\n    if step % 10 == 0:\n        print(f'loss {meter}')\n",
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    print(x.shape, loss.dtype)\n",
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    print(f'{loss.item():.3f}')\n",
        # an error message runs only when something is wrong
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        if x.dim() != 2:\n            raise ValueError(f'expected 2-D input, got {x}')\n        return x\n",
    ]
    INVALID = [
        # a meter fed the loss tensor, printed every 10 steps: the f-string in __str__ is the finding
        "import torch\nclass Meter:\n    def __init__(self):\n        self.sum = 0.0\n        self.n = 0\n    def update(self, v):\n        self.sum += v\n        self.n += 1\n    def __str__(self):\n        return f'{self.sum / self.n:.4f}'\nmeter = Meter()\nfor step, x in enumerate(loader):\n    loss = model(x).sum()\n    loss.backward()\n    meter.update(loss.detach())\n    if step % 10 == 0:\n        print(f'loss {meter}')\n",
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    print(loss)\n",
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    s = f'{loss:.4f}'\n",
        "import torch, logging\nlogger = logging.getLogger()\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()\n    logger.info('loss %s', loss)\n",
    ]

    def _formats(self, exprs, dunders=None) -> None:
        """These values are turned into text here: an object of a project class runs its formatting
        method (``print(meter)`` calls ``AverageMeter.__str__``)."""
        for e in exprs:
            if dunders is None:
                self.model.note_formatting(e)
            else:
                self.model.note_formatting(e, dunders)

    def _own_attributes_hold_tensor(self) -> bool:
        m = self.model
        cls = m.current_class()
        attrs = m.classes.get(cls, {}).get("attrs", {}) if cls is not None else {}
        m.note_reads_all_attributes()
        return any(k in K.HOLDS_DEVICE_TENSOR for k in attrs.values())

    def _flag(self, node, what: str) -> None:
        tensor = self._tensor_in(node)
        named = f"the device tensor `{self.text(tensor, 24)}`" if tensor is not None else "a device tensor"
        if tensor is not None and self.model.kind(tensor) not in K.DEVICE_TENSORS:
            named = f"`{self.text(tensor, 24)}`, which holds device tensors,"
        f = self.model.func
        if f.class_key is not None and f.name in T.FORMAT_DUNDERS:
            # a meter's __str__: it runs where the object is printed, as often as that line
            cls = f.class_key.rsplit(".", 1)[-1]
            article = "an" if cls[:1].lower() in "aeiou" else "a"
            self.report(node, f"`{self.text(node)}` in `{cls}.{f.name}` formats {named} each time {article} `{cls}` is printed, {{when}}",
                        fix=METER_FIX, cost=COST)
            return
        self.report(node, f"`{self.text(node)}` formats {named} {{when}}", fix=FIX, cost=COST)

    def _tensor_in(self, node):
        """The first tensor the formatting reads, to name it in the headline."""
        m = self.model
        if type(node) is cst.FormattedString:
            items = [p.expression for p in node.parts if type(p) is cst.FormattedStringExpression]
        elif type(node) is cst.BinaryOperation:
            right = node.right
            items = [e.value for e in right.elements] if type(right) is cst.Tuple else [right]
        elif type(node) is cst.Call:
            items = []
            for a in node.args:
                v = a.value
                items.extend(p.expression for p in v.parts if type(p) is cst.FormattedStringExpression) if type(v) is cst.FormattedString else items.append(v)
        else:
            return None
        return next((v for v in items if m.holds_tensor(v)), None)

    def on_FormattedString(self, node: cst.FormattedString) -> None:
        m = self.model
        exprs = [p.expression for p in node.parts if type(p) is cst.FormattedStringExpression]
        for e in exprs:  # f"{meter}" runs the meter's __format__ / __str__ here
            m.note_formatting(e, T.FORMAT_DUNDERS)
        if any(m.holds_tensor(e) for e in exprs):
            self._flag(node, "this f-string")

    def on_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator) is cst.Modulo and type(node.left) in (cst.SimpleString, cst.ConcatenatedString):
            right = node.right
            items = [e.value for e in right.elements] if type(right) is cst.Tuple else [right]
            for v in items:
                self.model.note_formatting(v)
            if any(self.model.holds_tensor(v) for v in items):
                self._flag(node, "`%` formatting")

    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        func = node.func
        args = [a.value for a in node.args if not a.star]
        q = m.qualname(func)
        if type(func) is cst.Name and q is None:
            name = func.value
            if name == "print" and m.is_builtin(func, "print"):
                self._formats(args)
                if any(m.holds_tensor(a) for a in args):
                    self._flag(node, "`print(...)`")
            elif name in ("str", "repr", "format") and m.is_builtin(func, name):
                pos = positional_args(node)
                if pos:
                    self._formats(pos[:1], ("__repr__",) if name == "repr" else T.FORMAT_DUNDERS if name == "format" else None)
                if pos and m.holds_tensor(pos[0]):
                    self._flag(node, f"`{name}(tensor)`")
            return
        if q in T.PRINT_FUNCTIONS:
            self._formats(args)
            if any(m.holds_tensor(a) for a in args):
                self._flag(node, f"`{q.rsplit('.', 1)[-1]}(...)`")
            return
        if type(func) is not cst.Attribute:
            return
        meth = func.attr.value
        recv = func.value
        if meth == "format" and type(recv) in (cst.SimpleString, cst.ConcatenatedString):
            self._formats(args, T.FORMAT_DUNDERS)
            if any(m.holds_tensor(a) for a in args):
                self._flag(node, "`str.format`")
            return
        if meth == "format" and any(a.star == "**" and _own_attributes(a.value) for a in node.args):
            # `fmtstr.format(**self.__dict__)` (the pytorch/examples AverageMeter): every attribute
            if self._own_attributes_hold_tensor():
                self._flag(node, "`str.format`")
            return
        if meth in T.LOG_METHODS and _is_logger(m, recv):
            # the message is args[0] (a str); tensors passed as %-args are formatted by logging, and only when
            # the record is emitted: a `debug` record is not at the default level (WARNING, or the INFO most
            # programs set), so its %-args stay unformatted (ChatTTS's `logger.debug("end: %d", end_idx)`)
            lazy = args[1:] if meth != "debug" else []
            self._formats(lazy)
            if any(m.holds_tensor(a) for a in [*args[:1], *lazy]):
                self._flag(node, f"`{dotted_name(func) or meth}(...)`")
            return
        if meth == "print" and last_name(recv) in ("accelerator", "accel"):
            self._formats(args)
            if any(m.holds_tensor(a) for a in args):
                self._flag(node, "`accelerator.print(...)`")
            return
        if meth in _PROGRESS_METHODS and K.instance_class(m.kind(recv)) is None and (last_name(recv) or "").lower() in ("pbar", "progress", "progress_bar", "bar", "tqdm", "t", "iterator", "epoch_iterator", "loop"):
            self._formats(args)
            if any(m.holds_tensor(a) for a in args):
                self._flag(node, f"`{meth}(...)`")


def _own_attributes(node) -> bool:
    """``self.__dict__`` or ``vars(self)``."""
    if type(node) is cst.Attribute and node.attr.value == "__dict__":
        return type(node.value) is cst.Name and node.value.value == "self"
    if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "vars":
        return len(node.args) == 1 and type(node.args[0].value) is cst.Name and node.args[0].value.value == "self"
    return False


def _is_logger(m, recv) -> bool:
    if K.instance_class(m.kind(recv)) is not None:
        return False  # an object of a project class (`self.logger = MetricsLogger(...)`): its own method runs
    q = m.qualname(recv)
    if q is not None:
        return q == "logging" or q.startswith("logging.") or q.endswith(("logger", "log"))
    name = (last_name(recv) or "").lower()
    if type(recv) is cst.Call:
        return (m.qualname(recv.func) or "") in ("logging.getLogger",)
    return name in ("logger", "log", "logging", "_logger", "_log", "lgr") or name.endswith("_logger")
