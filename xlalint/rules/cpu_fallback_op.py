"""XLA007 cpu-fallback-op: a per-step call of an op that torch_xla runs on the CPU."""

from __future__ import annotations

import libcst as cst

from xlalint.rules import Rule
from xlalint.semantics import fallback_ops as FB
from xlalint.semantics import kinds as K
from xlalint.semantics import rule_tables as RT
from xlalint.semantics.syntax import dotted_name, keyword_arg, positional_args, string_value

FIX_NONE = (
    "no lowered equivalent is known: move it out of the step (every N steps, or after training), or "
    "write it with lowered ops"
)
_UNKNOWN = object()  # an argument that is not a literal
_MISSING = object()  # an argument that is not given and has no known default

# (name, when) pairs measured lowered, by name: `multinomial(p, 1)` is lowered although `multinomial` falls back.
# Ops whose fallback depends on the input's rank or size (adaptive max pooling to a size that does not divide
# the input's, 1-D `interpolate(mode="nearest")`) are not in the table at all: fallback_ops.CONDITIONAL.
_LOWERED_WHEN: dict = {}
for _name, _when in FB.LOWERED:
    if _when is not None:
        _LOWERED_WHEN.setdefault(_name, []).append(_when)


class CpuFallbackOp(Rule):
    code = "XLA007"
    name = "cpu-fallback-op"
    summary = "A per-step op that has no XLA lowering: torch_xla runs it on the CPU, cutting the graph and copying both ways."
    what_it_does = f"""
        Flags, in code that runs every step (also after the step's sync), calls of ops that the
        installed torch_xla runs on the CPU. The table is derived by `scripts/gen_fallback_ops.py`
        ({FB.MEASURED_ON}): the aten ops whose XLA kernel is torch_xla's CPU fallback (the dispatcher),
        mapped to the public names of `torch`, `Tensor`, `F`, `torch.linalg`, `torch.fft` and
        `torch.special` with torch's OpInfo samples, each confirmed on the device. Among them:
        `torch.histc`/`histogram`, `bincount`, `bucketize`, `searchsorted`, `median`, `nanmedian`, `mode`,
        `nansum`/`nanmean`, `isin`, `logcumsumexp`, `cummin`, `aminmax`, `lgamma`/`digamma`/`polygamma`,
        `logaddexp`, `hypot`, `exp2`, `sinc`, `signbit`, `copysign`, `fmax`/`fmin`, `cov`/`corrcoef`,
        `Tensor.unfold`, `torch.complex`/`polar`, `torch.fft.*`, `torch.stft`, `F.grid_sample`,
        `F.huber_loss`, `F.unfold`, `F.embedding_bag`, `F.ctc_loss`, `F.interpolate` with
        `mode="bicubic"`/`"linear"`/`"nearest-exact"` or `antialias=True`, `scatter_reduce` with
        `reduce="mean"` or `include_self=False`, `multinomial` without replacement and more than one
        sample, most of `torch.linalg` (`det`, `solve`, `lstsq`, `eig`, `qr`, `lu`, `cholesky`, ...) and
        of `torch.special`, `nonzero_static`, `tril_indices`/`triu_indices`/`logspace` on the device; also
        the call of an `nn` module whose forward is one of them (`nn.EmbeddingBag`, `nn.CTCLoss`,
        `nn.HuberLoss`, `nn.Unfold`, ...). The message names the op and its cheapest lowered
        alternative when there is one.
        Not flagged: lowered ops (`sort`, `topk`, `argsort`, `kthvalue`, `cumprod`, `cummax`,
        `quantile`, `randperm`, `svd`, `eigh`, `slogdet`, `inv`, `pinv`, `cdist`, `roll`,
        `view_as_complex`, bilinear and 2-D nearest `interpolate`, `multinomial(p, 1)` and with
        replacement); ops that fall back only for some input ranks or sizes, which the source rarely
        tells (adaptive max pooling to a size that does not divide the input's, 1-D/3-D nearest
        `interpolate`, `round(decimals=...)`: `fallback_ops.CONDITIONAL`); methods on values not known to be
        device tensors; calls on tensors known to be on the CPU; a variant whose deciding argument is
        not a literal (`mode=args.mode`). Ops with a data-dependent shape are XLA003's (`nonzero`,
        `unique`, `masked_select`, ...) and host reads XLA001's (`equal`, `allclose`).
    """
    why_slow = """
        An op without an XLA lowering runs through PyTorch's CPU kernel: torch_xla cuts the graph,
        runs it so far, copies the inputs to the host, runs the op there and uploads the result,
        which starts a new graph. Measured on torch_xla 2.9 (CPU device): one `aten::<op>` fallback
        counter, a device-to-host transfer and an extra graph execution per call, every step; on a TPU
        each copy also waits for the device.
    """
    example = """
        for x, y in loader:
            logits = model(x)
            bins = torch.bucketize(logits.sigmoid(), boundaries)   # XLA007 (aten::bucketize)
            hist = torch.histc(bins.float(), bins=10, min=0, max=9) # XLA007 (aten::histc)
            loss = loss_fn(logits, y) + hist.std()
    """
    use_instead = """
        for x, y in loader:
            logits = model(x)
            bins = (logits.sigmoid().unsqueeze(-1) > boundaries).sum(-1)   # lowered comparisons
            hist = F.one_hot(bins, 11).sum(0)                             # a fixed-size count
            loss = loss_fn(logits, y) + hist.float().std()
    """
    known_problems = """
        The table is for the torch and torch_xla it was generated on; regenerate it with
        `PJRT_DEVICE=CPU python scripts/gen_fallback_ops.py` when either changes (`--check` tells
        whether it is current). Measured forward, with the inputs requiring grad as in a training step.
        Fallbacks inside an XLA kernel
        that depend on numbers the table cannot express (`addmm` with `beta`/`alpha` other than 1,
        `max_pool2d` with a dilation, `norm` with `p=0`) and fallbacks that depend on shapes
        (`adaptive_avg_pool2d` to a size that does not divide the input) are not flagged; nor are
        backward-only fallbacks (`F.glu`'s backward).
        A torch function whose first argument is of unknown kind is taken to run on the device.
        Fix safety: the alternatives change the code, not just a name; none is applied automatically.
    """
    verify = """
        The op's fallback counter (`aten::histc`, `aten::bucketize.Tensor`, ... as in the message) moves
        at the line on most steps, with a host transfer and an extra graph execution.
    """
    VALID = [
        # a VAE's encode output holds a distribution: its `.mode()` is the distribution's (diffusers' dreambooth)
        "import torch\nimport torch_xla\nvae = build_vae().to(device)\nfor batch in loader:\n    latents = vae.encode(batch.to(device)).latent_dist.mode()\n    loss = unet(latents).sum()\n    loss.backward()\n    torch_xla.sync()\n",
        # global max pooling: the output size 1 divides any input size, and that is lowered; adaptive max
        # pooling to other sizes falls back only when the size does not divide the input's (CONDITIONAL)
        "import torch\nimport torch.nn.functional as F\nfor x in loader:\n    x = x.to('xla')\n    pooled = F.adaptive_max_pool2d(model(x), 1)\n    pooled.sum().backward()\n",
        "import torch\nimport torch.nn as nn\nclass Head(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.pool = nn.AdaptiveMaxPool2d(3)\n    def forward(self, x):\n        return self.pool(x).flatten(1)\n",
        # lowered ops never fire
        "import torch\nfor x in loader:\n    out = model(x)\n    a = torch.sort(out, dim=1).values\n    b = torch.topk(out, 3).values\n    c = torch.cumprod(out, 1)\n    d = torch.kthvalue(out, 2, dim=1).values\n    e = out.kthvalue(2, 1).values + out.topk(2).values.sum()\n    f = torch.multinomial(out.softmax(-1), 1)\n    g = torch.multinomial(out.softmax(-1), 4, replacement=True)\n    loss = a.sum() + b.sum() + c.sum() + d.sum() + e.sum() + f.sum() + g.sum()\n    loss.backward()\n",
        # bilinear / nearest interpolation; a mode that is not a literal stays unknown
        "import torch\nimport torch.nn.functional as F\nclass M(torch.nn.Module):\n    def forward(self, x):\n        a = F.interpolate(x, scale_factor=2, mode='bilinear')\n        b = F.interpolate(x, scale_factor=2)\n        return a, b, F.interpolate(x, scale_factor=2, mode=self.mode)\n",
        # once, outside the step loop; on known-CPU tensors
        "import torch\nedges = torch.histc(torch.rand(100), bins=10)\nfor x in loader:\n    out = model(x)\n    cpu = out.detach().cpu()\n    h = torch.histc(cpu, bins=10)\n    m = cpu.median(dim=0)\n    loss = out.sum()\n    loss.backward()\n",
        # a `.mode()` / `.median()` of something that is not known to be a tensor (statistics, pandas)
        "import torch\nfor x in loader:\n    s = stats.median()\n    m = df['col'].mode()\n    loss = model(x).sum()\n    loss.backward()\n",
        # tril_indices built on the CPU (no device)
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        idx = torch.tril_indices(4, 4)\n        return x\n",
        # lowered neighbours of fallback ops: smooth_l1_loss (huber_loss falls back), scatter_reduce with
        # "sum"/"amax" and include_self (its "mean" falls back), nearest interpolation of unknown rank
        "import torch\nimport torch.nn.functional as F\nfor x, y, idx in loader:\n    out = model(x)\n    a = F.smooth_l1_loss(out, y, beta=0.5)\n    b = torch.zeros(4, 8, device=out.device).scatter_reduce(0, idx, out, reduce='sum')\n    c = out.scatter_reduce(0, idx, out, 'amax', include_self=True)\n    d = F.interpolate(out, scale_factor=2)\n    loss = a + b.sum() + c.sum() + d.sum()\n    loss.backward()\n",
    ]
    INVALID = [
        "import torch\nfor x in loader:\n    out = model(x)\n    h = torch.histc(out, bins=10, min=0, max=1)\n    loss = out.sum() + h.sum()\n    loss.backward()\n",
        "import torch\nimport torch.nn.functional as F\nclass M(torch.nn.Module):\n    def forward(self, x, grid):\n        y = F.grid_sample(x, grid)\n        return F.interpolate(y, scale_factor=2, mode='bicubic')\n",
        "import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x.median(dim=1).values + torch.fft.rfft(x).abs()\n",
        "import torch\nimport torch.nn as nn\nclass Bag(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.emb = nn.EmbeddingBag(100, 8)\n    def forward(self, ids):\n        return self.emb(ids)\n",
        "import torch\nfor x in loader:\n    out = model(x)\n    idx = torch.multinomial(out.softmax(-1), 4)\n    b = torch.bucketize(out, boundaries)\n    loss = out.sum()\n    loss.backward()\n",
        # derived from the dispatcher: huber_loss (and its module), Tensor.unfold, lgamma
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\ncrit = nn.HuberLoss(delta=0.5)\nfor x, y in loader:\n    out = model(x)\n    frames = out.unfold(-1, 4, 2)\n    loss = F.huber_loss(out, y) + crit(out, y) + torch.lgamma(out.exp()).mean() + frames.sum()\n    loss.backward()\n",
    ]

    def __init__(self) -> None:
        super().__init__()
        self._modules: dict = {}  # ("name", func key, name) / ("attr", class key, attr) -> fallback function

    def on_Assign(self, node: cst.Assign) -> None:
        """``self.emb = nn.EmbeddingBag(...)``: calling it later runs the fallback function."""
        v = node.value
        if type(v) is not cst.Call:
            return
        fn = RT.FALLBACK_MODULES.get(self.model.qualname(v.func) or "")
        if fn not in FB.FALLBACK_FUNCTIONS:
            return
        for t in node.targets:
            key = self._module_key(t.target)
            if key is not None:
                self._modules[key] = (fn, dotted_name(v.func) or fn)

    def _module_key(self, e):
        f = self.model.step_context().func
        if type(e) is cst.Name:
            return ("name", e.value)
        if type(e) is cst.Attribute and type(e.value) is cst.Name and e.value.value == "self":
            while f is not None and f.class_key is None:
                f = f.parent
            if f is not None:
                return ("attr", f.class_key, e.attr.value)
        return None

    def on_Call(self, node: cst.Call) -> None:
        m = self.model
        func = node.func
        if self._modules and type(func) in (cst.Name, cst.Attribute):
            hit = self._modules.get(self._module_key(func))
            if hit is not None:
                fn, cls = hit
                self._check(node, fn, fn.rsplit(".", 1)[-1], FB.FALLBACK_FUNCTIONS[fn], method=False,
                            shown=f"{dotted_name(func)}(...)",
                            what=f" (an `{cls}`: its forward calls `{fn.rsplit('.', 1)[-1]}`)")
                return
        q = m.qualname(func)
        if q is not None:
            variants = FB.FALLBACK_FUNCTIONS.get(q)
            if variants is None:
                return
            short = q.rsplit(".", 1)[-1]
            if q in FB.DEVICE_FACTORIES:
                dev = keyword_arg(node, "device")
                if dev is None or string_value(dev) == "cpu":
                    return
            else:
                args = positional_args(node)
                first = args[0] if args else keyword_arg(node, "input")
                if first is not None and m.kind(first) in (K.CPU_TENSOR, K.CPU_TENSORS, K.NOT_TENSOR):
                    return
            self._check(node, q, short, variants, method=False, shown=dotted_name(func) or q)
            return
        if type(func) is cst.Attribute:
            meth = func.attr.value
            variants = FB.FALLBACK_METHODS.get(meth)
            if variants is None or m.kind(func.value) not in K.DEVICE_TENSORS:
                return
            self._check(node, "." + meth, meth, variants, method=True, shown=f".{meth}()")

    def _check(self, node, key, short, variants, method, shown, what: str = "") -> None:
        for when in _LOWERED_WHEN.get(key, ()):
            v = _arg(node, short, when[0], method)
            if v is _UNKNOWN or v == when[1]:
                return  # a lowered variant, or one we cannot tell apart from it
        hit = None
        for var in variants:
            when = var["when"]
            if when is None:
                hit = hit or var
                continue
            if _arg(node, short, when[0], method) == when[1]:
                hit = var
                break
        if hit is None:
            return
        ops = ", ".join(f"`{o}`" for o in hit["ops"])
        alt = hit["alternative"]
        fix = alt or FIX_NONE
        self.report(
            node,
            f"`{shown}`{what} has no XLA lowering on this torch_xla: it runs on the CPU ({ops}) {{when}}: the graph "
            "is cut, its inputs are copied to the host and the result back (1 extra execution and a "
            f"transfer each way per call). Fix: {fix}",
            fix=fix,
            when="step-any",
        )


def _arg(call: cst.Call, short: str, param: str, method: bool):
    """The literal value of ``param`` in ``call`` (keyword or positional), its default, or a marker."""
    node = keyword_arg(call, param)
    if node is None:
        sig = FB.CALL_SIGNATURES.get(short, ())
        if param in sig:
            pos = sig.index(param) - (1 if method else 0)
            args = positional_args(call)
            if 0 <= pos < len(args):
                node = args[pos]
    if node is None:
        return FB.CALL_DEFAULTS.get(short, {}).get(param, _MISSING)
    if type(node) is cst.Name and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if type(node) is cst.Integer:
        try:
            return int(node.value, 0)
        except ValueError:
            return _UNKNOWN
    s = string_value(node)
    return s if s is not None else _UNKNOWN
