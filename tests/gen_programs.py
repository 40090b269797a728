"""A hypothesis strategy for realistic torch_xla training programs with anti-patterns placed at random.

``programs()`` draws a program shape (a top-level loop over a loader, a ``train()`` function, a step
function called from the loop, a ``Trainer`` class, a decode loop) and places snippets in it: the
anti-patterns each rule must report, and look-alikes that must stay silent (the same call on a value
that is not a device tensor, after the step's sync, after the loop, in a step closure). The draw is a
``Program``: the source and the exact ``(line, code)`` set the linter must report. ``fixture_text``
writes it in the fixtures' format (``# expect:`` marks), for ``make fuzz``'s counterexamples.

Every snippet uses only names every shape defines in the place it runs: ``model``, ``optimizer``,
``x``, ``y``, ``out`` (the model's output), ``loss`` (a scalar tensor) and ``step`` (an int).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hypothesis import strategies as st

# (code or None, lines): the first line carries the finding; "{i}" is the body indentation unit
ANTI = {
    "item": ("XLA001", ["lv = loss.item()"]),
    "float": ("XLA001", ["lf = float(loss)"]),
    "cpu": ("XLA001", ["lc = out.cpu()"]),
    # (not `y.tolist()` of the labels as uploaded: reading back data no graph computed is a copy, measured)
    "tolist": ("XLA001", ["ll = out.argmax(-1).tolist()"]),
    "if_loss": ("XLA002", ["if loss > 100.0:", "    skipped = True"]),
    "while_any": ("XLA002", ["while torch.isnan(loss).any():", "    break"]),
    "mask_index": ("XLA003", ["pos = out[out > 0]"]),
    "nonzero": ("XLA003", ["nz = torch.nonzero(y)"]),
    "print_loss": ("XLA006", ["print(loss)"]),
    "fstring": ("XLA006", ['print(f"loss {loss}")']),
    "format_out": ("XLA006", ['msg = "{}".format(out)']),
    "assert_loss": ("XLA002", ["assert loss > 0"]),
    "tensor_of": ("XLA001", ["pair = torch.tensor([loss, loss])"]),
    "numpy": ("XLA001", ["arr = out.detach().cpu().numpy()"]),
    "unique": ("XLA003", ["labels = torch.unique(y)"]),
    # (a forward in eval mode between them: `eval()` bracketing only a checkpoint write compiles nothing)
    "eval": ("XLA004", ["model.eval()", "ev = model(x)", "model.train()"]),
}
# the same shapes on values that are not device tensors, or with no host read: never reported
LOOKALIKE = {
    "len": ["n = len(x)"],
    "int_cond": ["if step > 3:", "    started = True"],
    "print_step": ['print("step", step)'],
    "fstring_step": ['print(f"step {step}")'],
    "detach": ["kept = loss.detach()"],
    "slice": ["first = out[:, 0]"],
    "shape": ["rows = out.shape[0]"],
    "size_cond": ["if x.size(0) > 1:", "    big = True"],
    "closure": ["xm.add_step_closure(lambda: print(loss.item()))"],
    "int_item": ["k = int(step)"],
    "list_cpu": ["names = [str(s) for s in range(2)]"],
    "cpu_tensor": ["host = torch.randn(3)", "hv = host.sum().item()"],
    "assert_msg": ['assert step >= 0, f"bad loss {loss}"'],
    "non_xla": ['if device.type != "xla":', "    lv = loss.item()"],
    "raise_msg": ["if step < 0:", '    raise ValueError(f"loss {loss}")'],
    "numel": ["count = out.numel()"],
    "dim_cond": ["if out.dim() == 2:", "    flat = False"],
}
SHAPES = ("plain", "function", "step_fn", "trainer", "decode")
# where a snippet goes: the loop body, under `if step % N == 0:`, under `with torch.no_grad():` (still
# every step), in a helper called from the loop, in the step function, or at the end of an epoch (inside
# the epoch loop, after the step loop: once per epoch, never reported)
PLACES = ("body", "periodic", "no_grad", "helper", "periodic_helper", "step_fn", "epoch_end")


@dataclass
class Program:
    shape: str
    source: str
    expected: set = field(default_factory=set)  # {(line, code)}
    placed: list = field(default_factory=list)  # [(kind, name, place, line)] for the report

    def fixture_text(self) -> str:
        """The program with ``# expect:`` marks, in the fixtures' format."""
        lines = self.source.splitlines()
        by_line: dict = {}
        for line, code in sorted(self.expected):
            by_line.setdefault(line, []).append(code)
        for line, codes in by_line.items():
            lines[line - 1] += f"  # expect: {', '.join(codes)}"
        return "\n".join(lines) + "\n"


class _Builder:
    def __init__(self):
        self.lines: list = []  # (text, code or None)

    def add(self, text: str, code=None, indent: int = 0):
        self.lines.append(("    " * indent + text if text else "", code))

    def block(self, snippet_lines, code, indent):
        for k, text in enumerate(snippet_lines):
            self.add(text, code if k == 0 else None, indent)

    def program(self, shape, placed) -> Program:
        src = "\n".join(t for t, _ in self.lines) + "\n"
        expected = {(i, c) for i, (_, c) in enumerate(self.lines, 1) if c}
        return Program(shape, src, expected, placed)


HEADER = [
    '"""Generated by tests/gen_programs.py."""',
    "import torch",
    "import torch.nn as nn",
    "import torch_xla",
    "import torch_xla.core.xla_model as xm",
    "from torch.utils.data import DataLoader, TensorDataset",
    "",
    "device = torch_xla.device()",
    "",
]


@st.composite
def _snippets(draw):
    """A list of (kind, name, place) to put in one program: 1 to 5 of them."""
    n = draw(st.integers(1, 5))
    out = []
    for _ in range(n):
        if draw(st.booleans()):
            out.append(("anti", draw(st.sampled_from(sorted(ANTI))), draw(st.sampled_from(PLACES))))
        else:
            out.append(("look", draw(st.sampled_from(sorted(LOOKALIKE))), draw(st.sampled_from(PLACES))))
    return out


def _lines_of(kind, name):
    if kind == "anti":
        code, lines = ANTI[name]
        return code, lines
    return None, LOOKALIKE[name]


@st.composite
def programs(draw, shapes=SHAPES, exclude=()):
    """A Program. ``exclude`` leaves out (kind, name, place) triples (known bugs, see the tests)."""
    shape = draw(st.sampled_from(shapes))
    snippets = [s for s in draw(_snippets()) if s not in exclude]
    if shape == "decode":
        # a generation loop has no loss or backward: only the snippets about `out`, `x`, `step`
        snippets = [s for s in snippets if s[2] in ("body", "periodic", "no_grad", "helper", "periodic_helper")
                    and not any("loss" in t or "y." in t or "(y)" in t for t in _lines_of(s[0], s[1])[1])]
    if shape != "step_fn":
        snippets = [(k, n, "body" if p == "step_fn" else p) for k, n, p in snippets]
    if shape not in ("plain", "function"):
        snippets = [(k, n, p) for k, n, p in snippets if p != "epoch_end"]
    epochs = any(p == "epoch_end" for _, _, p in snippets) or (shape in ("plain", "function") and draw(st.booleans()))
    period = draw(st.sampled_from([2, 4, 10]))
    sync = draw(st.sampled_from(["torch_xla.sync()", "xm.mark_step()"]))
    opt_step = draw(st.sampled_from(["optimizer.step()", "xm.optimizer_step(optimizer)"]))
    trailing = draw(st.sampled_from(["none", "after_sync", "after_loop"]))
    b = _Builder()
    for h in HEADER:
        b.add(h)
    helpers = [s for s in snippets if s[2] in ("helper", "periodic_helper")]
    placed = []
    # helpers, defined before use, each with one snippet
    for k, (kind, name, _) in enumerate(helpers):
        b.add(f"def helper_{k}(model, x, y, out, loss, step):")
        code, lines = _lines_of(kind, name)
        start = len(b.lines) + 1
        b.block(lines, code, 1)
        placed.append((kind, name, helpers[k][2], start))
        b.add("return None", None, 1)
        b.add("")
        b.add("")

    def body(indent, with_loss=True):
        """The snippets placed in the loop body, then the step's sync."""
        for kind, name, place in snippets:
            code, lines = _lines_of(kind, name)
            if place == "body":
                placed.append((kind, name, place, len(b.lines) + 1))
                b.block(lines, code, indent)
            elif place in ("periodic", "no_grad"):
                b.add(f"if step % {period} == 0:" if place == "periodic" else "with torch.no_grad():", None, indent)
                placed.append((kind, name, place, len(b.lines) + 1))
                b.block(lines, code, indent + 1)
        for k, (_, _, place) in enumerate(helpers):
            if place == "periodic_helper":  # an `evaluate()` every N steps
                b.add(f"if (step + 1) % {period} == 0:", None, indent)
                b.add(f"helper_{k}(model, x, y, out, loss, step)", None, indent + 1)
            else:
                b.add(f"helper_{k}(model, x, y, out, loss, step)", None, indent)
        b.add(sync, None, indent)
        if trailing == "after_sync" and with_loss:
            b.add("seen = loss.item()", None, indent)  # after the step's sync: a copy, not a cut

    def step_fn_snippets(indent):
        for kind, name, place in snippets:
            if place == "step_fn":
                code, lines = _lines_of(kind, name)
                placed.append((kind, name, place, len(b.lines) + 1))
                b.block(lines, code, indent)

    def setup(indent):
        b.add("model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)", None, indent)
        b.add("optimizer = torch.optim.SGD(model.parameters(), lr=0.1)", None, indent)
        b.add("data = TensorDataset(torch.randn(64, 8), torch.randint(0, 4, (64,)))", None, indent)
        b.add("loader = DataLoader(data, batch_size=16, drop_last=True)", None, indent)

    def forward(indent):
        b.add("x, y = x.to(device), y.to(device)", None, indent)
        b.add("optimizer.zero_grad()", None, indent)
        b.add("out = model(x)", None, indent)
        b.add("loss = nn.functional.cross_entropy(out, y)", None, indent)
        b.add("loss.backward()", None, indent)
        b.add(opt_step, None, indent)

    def epoch_end(indent):
        for kind, name, place in snippets:
            if place == "epoch_end":
                _, lines = _lines_of(kind, name)
                placed.append((kind, name, place, len(b.lines) + 1))
                b.block(lines, None, indent)  # once per epoch: never reported

    if shape == "plain":
        setup(0)
        e = 1 if epochs else 0
        if epochs:
            b.add("for epoch in range(2):")
        b.add("for step, (x, y) in enumerate(loader):", None, e)
        forward(1 + e)
        body(1 + e)
        if epochs:
            epoch_end(1)
        if trailing == "after_loop":
            b.add("final = loss.item()")  # once, after training
    elif shape == "function":
        b.add("def train(model, optimizer, loader):")
        e = 1 if epochs else 0
        if epochs:
            b.add("for epoch in range(2):", None, 1)
        b.add("for step, (x, y) in enumerate(loader):", None, 1 + e)
        forward(2 + e)
        body(2 + e)
        if epochs:
            epoch_end(2)
        if trailing == "after_loop":
            b.add("final = loss.item()", None, 1)
        b.add("return model", None, 1)
        b.add("")
        b.add("")
        b.add('if __name__ == "__main__":')
        setup(1)
        b.add("train(model, optimizer, loader)", None, 1)
    elif shape == "step_fn":
        b.add("def train_step(model, optimizer, x, y, step):")
        forward(1)
        step_fn_snippets(1)
        b.add("return loss, out", None, 1)
        b.add("")
        b.add("")
        setup(0)
        b.add("for step, (x, y) in enumerate(loader):")
        b.add("x, y = x.to(device), y.to(device)", None, 1)
        b.add("loss, out = train_step(model, optimizer, x, y, step)", None, 1)
        body(1)
        if trailing == "after_loop":
            b.add("final = loss.item()")
    elif shape == "trainer":
        b.add("class Trainer:")
        b.add("def __init__(self, model, optimizer, loader):", None, 1)
        b.add("self.model = model", None, 2)
        b.add("self.optimizer = optimizer", None, 2)
        b.add("self.loader = loader", None, 2)
        b.add("")
        b.add("def fit(self):", None, 1)
        b.add("model, optimizer = self.model, self.optimizer", None, 2)
        b.add("for step, (x, y) in enumerate(self.loader):", None, 2)
        forward(3)
        body(3)
        if trailing == "after_loop":
            b.add("final = loss.item()", None, 2)
        b.add("")
        b.add("")
        b.add('if __name__ == "__main__":')
        setup(1)
        b.add("Trainer(model, optimizer, loader).fit()", None, 1)
    else:  # decode: a generation loop, synced every token
        b.add("model = nn.Sequential(nn.Embedding(16, 8), nn.Linear(8, 16)).to(device)")
        b.add("x = torch.zeros(1, 1, dtype=torch.long, device=device)")
        b.add("y = x")
        b.add("loss = torch.zeros((), device=device)")
        b.add("for step in range(8):")
        b.add("out = model(x)[:, -1, :]", None, 1)
        b.add("nxt = out.argmax(dim=-1, keepdim=True)", None, 1)
        b.add("x = torch.cat([x, nxt], dim=1)", "XLA009", 1)  # grows every token: one graph per length
        body(1, with_loss=False)
    prog = b.program(shape, placed)
    # the names people use: the rules must not depend on `model` and `loader` being called so
    for old, new in (("model", draw(st.sampled_from(["model", "net", "encoder"]))),
                     ("loader", draw(st.sampled_from(["loader", "train_loader", "batches"]))),
                     ("optimizer", draw(st.sampled_from(["optimizer", "opt", "sgd"])))):
        if new != old:
            prog.source = re.sub(rf"\b{old}\b", new, prog.source)
    return prog
