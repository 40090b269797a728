"""XLA008 python-iteration-over-tensor: Python walks a device tensor element by element every step."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import kinds as K
from xlalint.semantics import rule_tables as RT
from xlalint.semantics.syntax import child_nodes, dotted_name, names_in, positional_args, target_names

FIX_REDUCE = "reduce on the device: `t.max()` / `t.min()` / `t.sort().values` / `t.any()` / `t.all()` (one op, no host read)"
FIX_IN = "compare on the device: `(t == x).any()`, and keep the result a tensor (`torch.where`) instead of branching on it"
FIX_LOOP = (
    "vectorise the body over the whole tensor (`torch.where`, masks, `t.sum()`, `t.max()`), or read it "
    "once with `t.tolist()` after the step's sync / in `xm.add_step_closure`"
)


class PythonIterationOverTensor(Rule):
    code = "XLA008"
    name = "python-iteration-over-tensor"
    on_by_default = False  # precision on a read sample of transformers 85% (bench/RULES-PRECISION.md): opt in
    summary = "Python iterates a device tensor every step: one slice per element, and a graph cut for each element it compares."
    what_it_does = """
        Off by default (its precision on real code is below the other rules': a tuple of tensors
        inferred as one tensor is reported); enable it with `--extend-select XLA008` or
        `extend-select = ["XLA008"]`.
        Flags, in code that runs every step, Python-level iteration of a value known to be one device
        tensor: `for v in t:` / `for i, v in enumerate(t):` whose body reads an element (`if v > 0`,
        `float(v)`, `v.item()`, printed or formatted, an index), comprehensions `[f(v) for v in t]` (the finding spans the loop, so
        `--verify` counts what its body reads), and the builtins that compare elements on the host:
        `max(t)`, `min(t)`, `sorted(t)`, `any(t)`, `all(t)`, and `x in t` / `x not in t`.
        Not flagged: iterating a container of tensors (a batch, `nn.ModuleList`, `nn.ParameterList`,
        a Python list of tensors, `t.split(...)` / `t.unbind()` results and slices of them, `zip` of lists,
        an element spread as `**kwargs`, so a mapping), a comprehension that reads only each element's
        shape (`sum(len(c) for c in t)`) or feeds it to a tensor op or a module (`[net(h[None]) for h in t]`),
        `t.shape`, `range(t.size(0))`, `max(a, b)` of two values, a `for` loop whose body never needs
        an element's value in Python (`for v in t: out.append(v * 2)`: lazy slices), and `sum(t)`, `list(t)`,
        `tuple(t)`, `a, b = t` on their own: measured on torch_xla 2.9 they only slice the tensor
        lazily (no transfer, no recompile for a fixed length).
    """
    why_slow = """
        Iterating a tensor unbinds it into one lazy slice per element: every element becomes its own
        small graph input/output, traced every step. As soon as Python needs an element's value (a
        comparison in `max`/`sorted`, `if v > 0`, `v.item()`), the graph is cut and that element is
        copied to the host, once per element. Measured on the CPU device: `max(t)` of 6 elements runs 5
        transfers and compiles new graphs on most steps (the comparison outcomes decide the graph);
        `sorted(t)` 5-12 transfers per step; `x in t` one transfer and an extra execution per step.
    """
    example = """
        for x, y in loader:
            per_sample = loss_fn(model(x), y)          # reduction="none"
            worst = max(per_sample)                     # XLA008: one host read per element
            hard = 0
            for l in per_sample:                        # XLA008
                if l > threshold:                       # XLA002
                    hard += 1
            loss = per_sample.mean()
    """
    use_instead = """
        for x, y in loader:
            per_sample = loss_fn(model(x), y)
            worst = per_sample.max()                    # stays on the device
            hard = (per_sample > threshold).sum()       # a tensor: read it after the step, if at all
            loss = per_sample.mean()
    """
    known_problems = """
        A value is a tensor by inference; a model output that is really a tuple of tensors but is
        inferred as one tensor would be reported. A bare, unannotated function parameter is not taken
        to be a tensor here (`forward(self, x, lengths)`: `max(lengths)` of a list passed in is common
        and free), so `for v in x:` directly on a parameter is not reported unless it is annotated
        `torch.Tensor`. A loop over a fixed-size tensor whose body never
        reads an element on the host costs tracing time, not counters: `--verify` reports such a finding
        NOT CONFIRMED. Fix safety: vectorising the loop changes the code; no automatic fix.
    """
    verify = """
        `TransferFromDeviceTime` samples (and `aten::_local_scalar_dense`) within the flagged expression or
        loop on most steps, with the extra graph executions and the `UncachedCompile`s of the new graphs.
    """
    VALID = [
        # a batch's list of target dicts (DETR): the elements are used as dicts, so it is not a tensor
        "import torch\nfor samples, targets in loader:\n    out = model(samples)\n    targets = [{k: v.to(device) for k, v in t.items()} for t in targets]\n    for t in targets:\n        boxes = t['boxes']\n    loss = out.sum()\n    loss.backward()\n",
        # containers of tensors, modules, shapes, ranges, zip over lists, pairs
        "import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])\n        self.scales = nn.ParameterList([nn.Parameter(torch.ones(4)) for _ in range(3)])\n    def forward(self, x):\n        for layer, s in zip(self.layers, self.scales):\n            x = layer(x) * s\n        for p in self.scales:\n            x = x + p\n        for i in range(x.size(0)):\n            x = x + i\n        for d in x.shape:\n            x = x * 1\n        return x\n",
        "import torch\nfor x, y in loader:\n    out = model(x)\n    tensors = [out, out * 2]\n    for t in tensors:\n        out = out + t\n    for a, b in zip(out.split(2), tensors):\n        out = out + 1\n    m = max(out.max(), 0)\n    loss = out.sum()\n    loss.backward()\n",
        # measured free: slicing only
        "import torch\nfor x in loader:\n    out = model(x)\n    s = sum(out)\n    parts = list(out)\n    a, b = out[:2]\n    loss = s + parts[0].sum()\n    loss.backward()\n",
        # from torch's sources: a forward parameter that is a tuple (parameters are assumed tensors)
        "import torch\nclass FnWithKwargs(torch.nn.Module):\n    def forward(self, pos0, tuple0, *myargs):\n        out = pos0\n        for arg in tuple0:\n            out = out * arg\n        return out * max(myargs)\n",
        # from transformers: a module's output that is a list of (feature map, mask) pairs; a parameter
        # typed as a tensor or a tuple of them
        "import torch\nclass Backbone(torch.nn.Module):\n    def forward(self, pixel_values, pixel_mask):\n        out = self.conv_encoder(pixel_values, pixel_mask)\n        pos = []\n        for feature_map, mask in out:\n            pos.append(mask)\n        return pos\n",
        "import torch\nclass Head(torch.nn.Module):\n    def forward(self, x):\n        hidden, all_hidden, attn = self.encoder(x)\n        y_hat = self.head(hidden)\n        y_hat = tuple(item.view(-1, 4) for item in y_hat)\n        return [h[:, 1:] for h in all_hidden], y_hat\n",
        "import torch\nfrom typing import Union\nclass M(torch.nn.Module):\n    def forward(self, x, gate_logits: Union[torch.Tensor, tuple[torch.Tensor]], class_labels: list[torch.Tensor]):\n        n = sum(len(c) for c in class_labels)\n        for g in gate_logits:\n            x = x + g.sum()\n        return x\n",
        # transformers' Trainer: a string key tested in the model's outputs (a dict)
        "import torch\nclass Trainer:\n    def compute_loss(self, model, inputs):\n        outputs = model(**inputs)\n        if isinstance(outputs, dict) and 'loss' not in outputs:\n            raise ValueError('no loss')\n        return outputs['loss']\n",
        # transformers' decision pipeline: an item of the batch dict that is a list of (inputs, questions)
        # pairs; an element spread as keyword arguments is a mapping, never a tensor's element
        "import torch\nfor batch in loader:\n    out = model(batch['x'])\n    prompts = batch['prompts']\n    scores = [model.decide(**inputs, q=q) for inputs, q in prompts]\n    merged = [{**inputs} for inputs, q in prompts]\n    loss = out.sum()\n    loss.backward()\n",
        # transformers' ProphetNet: a slice of chunk()'s tuple is a tuple; Mask2Former: only each
        # element's length is read (a shape); SuperPoint: each element fed to a module (measured: lazy
        # slices, no transfer)
        "import torch\nnet = torch.nn.Linear(4, 4)\nfor x in loader:\n    ks = model(x).chunk(4, dim=2)\n    main, rest = ks[0], ks[1:]\n    out = torch.stack([torch.cat([main, k], 2) for k in rest], 1)\n    labels = out.argmax(-1)\n    n = sum(len(c) for c in labels)\n    sizes = [c.shape[0] * c.size(0) for c in labels]\n    dec = [net(h[None, ...]) for h in out]\n    loss = out.sum() + n\n    loss.backward()\n",
        # torch_xla's all_gather: `all(isinstance(v, torch.Tensor) for v in value)`, a type check
        "import torch\nfor x in loader:\n    out = model(x)\n    ok = all(isinstance(v, torch.Tensor) for v in out)\n    parts = [torch.cat([out, h[None]]) for h in out]\n    loss = torch.stack(parts).sum()\n    loss.backward()\n",
        # once, after training
        "import torch\nfor x in loader:\n    out = model(x)\n    loss = out.sum()\n    loss.backward()\nprint(max(out))\n",
        # a loop that only collects or adds the elements: lazy slices, no host read (measured)
        "import torch\nfor x, y in loader:\n    per_sample = loss_fn(model(x), y)\n    hard = []\n    for i, l in enumerate(per_sample):\n        hard.append(l * (i + 1))\n    total = 0\n    for v in per_sample:\n        total = total + v\n    loss = total + torch.stack(hard).sum()\n    loss.backward()\n",
    ]
    INVALID = [
        "import torch\nfor x, y in loader:\n    per_sample = loss_fn(model(x), y)\n    worst = max(per_sample)\n    loss = per_sample.mean()\n    loss.backward()\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        total = 0\n        for v in x.sum(-1):\n            if v > 0:\n                total = total + v\n        return total\n",
        "import torch\nfor x, y in loader:\n    out = model(x)\n    if 0 in y:\n        out = out * 2\n    loss = out.sum()\n    loss.backward()\n",
        # transformers' Emu3: a helper that returns a tensor but moves its argument to the host
        "import torch\nclass Mapping:\n    def convert(self, img):\n        return self.table[img.to('cpu')].to(img.device)\nmapping = Mapping()\nfor x in loader:\n    out = model(x)\n    toks = [mapping.convert(t).flatten() for t in out.argmax(-1)]\n    loss = out.sum()\n    loss.backward()\n",
        # a torch function that answers in Python (`torch.equal`: a bool) reads each element
        "import torch\nfor x in loader:\n    out = model(x)\n    same = [torch.equal(h, out[0]) for h in out]\n    loss = out.sum()\n    loss.backward()\n",
        "import torch\nfor x, y in loader:\n    out = model(x)\n    ranked = sorted(out.sum(-1))\n    flags = [v > 0 for v in out.sum(-1)]\n    loss = out.sum()\n    loss.backward()\n",
    ]

    def __init__(self) -> None:
        super().__init__()
        self._maybe_containers: dict = {}  # function key -> names that may hold a tuple/list of tensors

    def on_FunctionDef(self, node: cst.FunctionDef) -> None:
        p = node.params
        names = {x.name.value for x in (*p.posonly_params, *p.params, *p.kwonly_params) if not _plain_tensor(x.annotation)}
        self._maybe_containers[self.model.step_context().func.key] = names

    def on_Assign(self, node: cst.Assign) -> None:
        names = self._maybe_containers.setdefault(self.model.step_context().func.key, set())
        m = self.model
        from_module = type(node.value) is cst.Call and not _is_loss(m, node.value.func) and (
            m.kind(node.value.func) == K.MODULE
            or (type(node.value.func) is cst.Attribute and type(node.value.func.value) is cst.Name
                and node.value.func.value.value == "self")
        )
        used = None
        for t in node.targets:
            for tn in target_names(t.target):
                if from_module:
                    names.add(tn.value)  # a module's output: often a list or tuple of tensors
                elif type(t.target) is cst.Name and tn.value in names:
                    if used is None:
                        used = names_in(node.value)
                    if tn.value not in used:  # `y = tuple(f(i) for i in y)` reads the old value first
                        names.discard(tn.value)

    def _tensor(self, e) -> bool:
        """A device tensor for this rule: the model says so, and it is not a name that may well be a
        container: a parameter not annotated as a plain tensor (``forward(self, x, tuple0)``,
        ``gate_logits: Union[Tensor, tuple[Tensor]]``) or the output of a module call (``out =
        self.backbone(x)``, often a list of feature maps). Iterating a tuple or list is free."""
        if self.model.kind(e) not in K.DEVICE_TENSORS:
            return False
        if type(e) is cst.Name and e.value in self._maybe_containers.get(self.model.step_context().func.key, ()):
            return False
        return True

    def on_For(self, node: cst.For) -> None:
        it, target = node.iter, node.target
        if (type(it) is cst.Call and len(it.args) == 1 and type(it.func) is cst.Name
                and it.func.value in _ELEMENTWISE_WRAPPERS and self.model.is_builtin(it.func, it.func.value)):
            # `for i, v in enumerate(t)`, `for v in reversed(t)`: the same walk over the elements
            it = it.args[0].value
            if node.iter.func.value == "enumerate":
                if not (type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2):
                    return
                target = target.elements[1].value
        if self._tensor(it) and not _used_as_container(target, node.body) and _reads_element(target, node.body):
            self._flag(node, "`for ... in <tensor>:` iterates a device tensor element by element", FIX_LOOP)

    def _comp(self, node) -> None:
        comp = node.for_in
        while comp is not None:
            if self._tensor(comp.iter) and not _used_as_container(comp.target, node) and not _lazy_uses_only(self.model, comp.target, node):
                self._flag(node, "a comprehension iterates a device tensor element by element", FIX_LOOP)
                return
            comp = comp.inner_for_in

    on_ListComp = on_SetComp = on_DictComp = on_GeneratorExp = _comp

    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        func = node.func
        if type(func) is not cst.Name or func.value not in RT.COMPARING_BUILTINS:
            return
        args = positional_args(node)
        if len(args) != 1 or len(node.args) - len([a for a in node.args if a.keyword is not None]) != 1:
            return
        if not m.is_builtin(func, func.value) or not self._tensor(args[0]):
            return
        fn = func.value
        self._flag(node, f"`{fn}(tensor)` compares the elements of a device tensor in Python", FIX_REDUCE)

    def on_Comparison(self, node: cst.Comparison) -> None:
        for ct in node.comparisons:
            if type(node.left) in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString):
                return  # `"loss" in outputs`: a dict or a model output, never a tensor
            if type(ct.operator) in (cst.In, cst.NotIn) and self._tensor(ct.comparator):
                self._flag(node, "`x in tensor` tests membership with a host read", FIX_IN)
                return

    def _flag(self, node, what: str, fix: str) -> None:
        self.report(
            node,
            f"{what} {{when}}: every element Python reads is a graph cut and a device-to-host transfer, and "
            f"the outcomes decide the next graph (recompiles). Fix: {fix}",
            fix=fix,
        )


_ELEMENTWISE_WRAPPERS = frozenset({"enumerate", "reversed"})
# A loss module's output is one tensor (a per-sample loss with reduction="none"), not a tuple of outputs
_LOSS_WORDS = frozenset({"loss", "criterion", "lossfn", "loss_fn", "loss_func", "loss_function"})


def _is_loss(m, func) -> bool:
    q = m.qualname(func) or ""
    if q.startswith(("torch.nn.", "torch.nn.functional.")) and q.endswith(("Loss", "_loss", "loss")):
        return True
    name = (dotted_name(func) or "").rpartition(".")[2].lower()
    return name in _LOSS_WORDS or name.endswith(("_loss", "loss_fn", "criterion"))


_CONTAINER_METHODS = frozenset({"items", "keys", "values", "get", "append", "pop", "update"})
# What makes Python read an element's value on the host (measured: a loop whose body only collects or
# adds the elements slices the tensor lazily: no transfer, no recompile)
_HOST_CALLS = frozenset({"float", "int", "bool", "str", "print", "round", "format", "repr", "abs"})
_HOST_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})


def _reads_element(target, body) -> bool:
    """The loop's body needs an element's value in Python: tested by ``if``/``while``/``assert``/a
    conditional expression, converted (``float(v)``, ``v.item()``), formatted or printed, or used as an
    index."""
    names = {e.value for e in target_names(target)}
    if not names:
        return True
    stack = [body]
    while stack:
        n = stack.pop()
        test = None
        if type(n) in (cst.If, cst.While, cst.IfExp, cst.Assert):
            test = n.test
        elif type(n) is cst.Call:
            f = n.func
            if type(f) is cst.Name and f.value in _HOST_CALLS:
                test = n
            elif type(f) is cst.Attribute and f.attr.value in _HOST_METHODS:
                test = f.value
        elif type(n) is cst.FormattedStringExpression:
            test = n.expression
        elif type(n) is cst.Subscript:
            test = cst.Tuple([cst.Element(el.slice.value) for el in n.slice if type(el.slice) is cst.Index]) if any(
                type(el.slice) is cst.Index for el in n.slice) else None
        if test is not None and names_in(test) & names:
            return True
        stack.extend(child_nodes(n))
    return False


def _used_as_container(target, scope) -> bool:
    """The loop variable is used as a dict or list (``t.items()``, ``t["boxes"]``, ``f(**t)``): whatever is iterated is
    a list of containers (a batch's list of target dicts), not a tensor, whatever the inference said."""
    names = {e.value for e in target_names(target)}
    if not names:
        return False
    stack = [scope]
    while stack:
        n = stack.pop()
        if type(n) is cst.Attribute and n.attr.value in _CONTAINER_METHODS and type(n.value) is cst.Name and n.value.value in names:
            return True
        if (type(n) in (cst.Arg, cst.StarredDictElement) and (type(n) is not cst.Arg or n.star == "**")
                and type(n.value) is cst.Name and n.value.value in names):
            return True  # `f(**inputs)`, `{**inputs}`: a mapping, never a tensor's element
        if type(n) is cst.Subscript and type(n.value) is cst.Name and n.value.value in names:
            for el in n.slice:
                if type(el.slice) is cst.Index and type(el.slice.value) in (cst.SimpleString, cst.ConcatenatedString):
                    return True
        stack.extend(child_nodes(n))
    return False


_SHAPE_ATTRS = frozenset({"shape", "ndim", "dtype", "device"})
_SHAPE_METHODS = frozenset({"size", "dim", "numel", "nelement"})


def _lazy_uses_only(m, target, comp) -> bool:
    """The comprehension uses an element only in ways that need no value on the host: its shape or type
    (``len(c)``, ``c.shape[0]``, ``c.size(0)``, ``isinstance(c, torch.Tensor)``) or as the input of a tensor op or a module call
    (``torch.cat([main, k])``, ``self.decoder(h[None])``), which slice the tensor lazily (measured: no
    transfer). ``sum(len(c) for c in class_labels)``."""
    names = {e.value for e in target_names(target)}
    if not names:
        return False

    def element(e) -> bool:  # `k`, `h[None, ...]`, `[main, k]`
        while type(e) is cst.Subscript:
            if any(type(el.slice) is not cst.Slice and names_in(el.slice.value) & names for el in e.slice):
                return False
            e = e.value
        if type(e) in (cst.List, cst.Tuple):
            return all(element(el.value) for el in e.elements)
        return type(e) is cst.Name and e.value in names or not (names_in(e) & names)

    stack = [comp]
    while stack:
        n = stack.pop()
        if type(n) is cst.CompFor:
            stack.extend(x for x in (n.iter, *n.ifs, n.inner_for_in) if x is not None)
            continue  # its target binds the names, it does not read them
        if type(n) is cst.Name and n.value in names:
            return False
        if type(n) is cst.Call:
            f = n.func
            if type(f) is cst.Name and f.value in ("len", "isinstance", "type", "id") and n.args \
                    and element(n.args[0].value):
                stack.extend(a.value for a in n.args[1:])
                continue  # a shape, a type check: no value needed
            if type(f) is cst.Attribute and type(f.value) is cst.Name and f.value.value in names \
                    and f.attr.value in _SHAPE_METHODS:
                stack.extend(a.value for a in n.args)
                continue
            if ((m.kind(f) == K.MODULE or (m.qualname(f) or "").startswith("torch."))
                    and m.kind(n) in K.HOLDS_DEVICE_TENSOR and all(a.star == "" and element(a.value) for a in n.args)):
                continue  # a torch op or a module call that gives a tensor traces lazily (not `torch.equal`,
                # nor a project helper that returns a tensor but may read its argument: `.to("cpu")`)
        if type(n) is cst.Attribute and type(n.value) is cst.Name and n.value.value in names \
                and n.attr.value in _SHAPE_ATTRS:
            continue
        stack.extend(child_nodes(n))
    return True


def _plain_tensor(ann) -> bool:
    """``x: torch.Tensor`` / ``Tensor`` / ``torch.FloatTensor`` / ``Optional[torch.Tensor]``."""
    if ann is None:
        return False
    a = ann.annotation
    if type(a) is cst.Subscript and dotted_name(a.value) in ("Optional", "typing.Optional") and len(a.slice) == 1:
        idx = a.slice[0].slice
        a = idx.value if type(idx) is cst.Index else None
    name = dotted_name(a) if a is not None else None
    return bool(name) and name.rsplit(".", 1)[-1].endswith("Tensor")


