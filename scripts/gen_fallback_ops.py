"""Derive XLA007's CPU-fallback table from the dispatcher, confirm it on the device, write it.

    PJRT_DEVICE=CPU python scripts/gen_fallback_ops.py [--check | --audit]

1. The dispatcher names the ops that run on the CPU: an aten op whose computed kernel for the ``XLA``
   key is torch_xla's boxed CPU fallback (``_dispatch_dump_table``: ``[backend fallback]``; so
   ``_dispatch_has_kernel_for_dispatch_key(op, "XLA")`` is False and no CompositeImplicitAutograd or
   CompositeExplicitAutograd[NonFunctional] kernel stands in for it). A composite op is not itself a
   fallback: the dispatcher runs its composite kernel on the XLA key, and that kernel's ops decide.
2. Public names are mapped to aten ops with torch's OpInfo database (``op_db``: each public op's
   names, aliases, method and in-place variants and sample inputs). Every sample of every name in
   ``torch.*``, ``Tensor.*``, ``torch.nn.functional.*``, ``torch.linalg.*``, ``torch.fft.*`` and
   ``torch.special.*`` runs on CPU tensors under a dispatch tracer that opens the composite kernels the
   XLA key would run (CompositeImplicitAutograd decomposes before the tracer; a CompositeExplicit
   kernel is entered by hand); a name whose ops include a fallback op from step 1 is a candidate.
3. Each candidate is measured on the XLA device with the same samples (floating samples with
   ``requires_grad`` where the op is differentiable, as in a training step): counters cleared, call,
   ``sync()``, ``met.executed_fallback_ops()``. A sample falls back when an op of step 1 ran on the CPU.
   When only some samples fall back, the literal arguments that tell them apart become ``when``
   (fallback only with that argument) or a lowered ``(name, when)`` (fallback unless); when no literal
   argument tells them apart (the input's rank or dtype decides), the name goes to ``CONDITIONAL`` and
   XLA007 stays silent on it.

Kept out, one finding per cause: ops with a data-dependent shape (XLA003: ``nonzero``, ``unique``,
``masked_select``, ``repeat_interleave``, ...) and host reads (XLA001: ``equal``, ``allclose``), both read
from xlalint's own tables; and what nobody calls in a training step (``EXCLUDED`` below says why).
``KERNEL_FALLBACKS`` are the few names whose XLA kernel itself calls the fallback for some arguments
(read in torch_xla's aten_xla_type.cpp; the dispatcher cannot see inside a kernel): measured the same
way. ``--audit`` measures every OpInfo name, candidate or not, and lists the fallbacks step 2 did not
predict (kernel-internal ones, some only on the CPU device); it writes nothing.

The alternatives (the fix text per op) are hand-kept knowledge in ``fallback_alternatives.py``; a name
without one gets the rule's generic advice. Nothing is downloaded (torch's OpInfo module wants the test
package ``expecttest`` for a base class only: a stand-in is used when it is missing). Takes 1.5 to 2
minutes on 2 shared CPU cores (``--audit``: about 5; on torch_xla 2.9 some of its samples crash the process:
``XLALINT_AUDIT_SKIP=torch.roll,.roll,torch.nn.functional.nll_loss``). Regenerate when torch or
torch_xla changes; ``--check`` exits 1 when the committed table differs from a fresh measurement
(nothing is written).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import pprint
import sys
import time
import types
import unittest
import warnings
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "xlalint" / "semantics" / "fallback_ops.py"
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "scripts"))
import fallback_alternatives as A  # noqa: E402 - after the path
from xlalint.semantics import tables as T  # noqa: E402

NAMESPACES = ("nn.functional.", "linalg.", "fft.", "special.")
# Names kept out, with the reason (XLA003's and XLA001's are added from xlalint's tables below).
EXCLUDED = {
    "to_sparse": "a sparse layout (not supported on XLA as a whole: the layout is the problem, not one op)",
    "hash_tensor": "a debugging checksum, not a training op",
}
# Names whose XLA kernel itself calls the CPU fallback for some arguments (the dispatcher shows a kernel;
# read in torch_xla 2.9's aten_xla_type.cpp), measured like the rest: name -> extra samples beyond the
# OpInfo ones, (make the input, args, kwargs), where OpInfo lacks the arguments that decide.
_probs = lambda torch: torch.rand(4, 10).softmax(-1)  # noqa: E731
_image = lambda *shape: lambda torch: torch.rand(*shape, requires_grad=True)  # noqa: E731
KERNEL_FALLBACKS = {
    # falls back when a generator is given or (not replacement and num_samples != 1)
    "multinomial": [(_probs, (1,), {}), (_probs, (1,), {"replacement": False}), (_probs, (3,), {}),
                    (_probs, (3,), {"replacement": True}), (_probs, (3,), {"replacement": False})],
    # falls back when the output size does not divide the input size, which the source rarely tells:
    # measured so, these land in CONDITIONAL (XLA007 stays silent)
    "nn.functional.adaptive_max_pool1d": [(_image(2, 8, n), (k,), {}) for n, k in ((8, 4), (8, 3), (9, 3), (10, 4))],
    "nn.functional.adaptive_max_pool2d": [(_image(2, 3, n, n), (k,), {}) for n, k in ((8, 4), (8, 3), (9, 3), (10, 4))],
    # falls back for reduce="mean" and for include_self=False (OpInfo samples every reduce)
    "scatter_reduce": [],
    # calls masked_select, whose kernel falls back; mvlgamma's kernel calls lgamma (a fallback op)
    "combinations": [],
    "mvlgamma": [],
    "special.multigammaln": [],
}
# Public names (or arguments) the OpInfo database has no samples for; measured the same way. The others
# it has none for (printed as "no samples") are quantized, sparse, ROCm (miopen), CUDA-stream or
# SyncBatchNorm-internal (batch_norm_stats, ...) calls: not XLA training code.
EXTRA_SAMPLES = {
    "_assert_async": [(lambda torch: torch.tensor(True), (), {})],
    "poisson": [(lambda torch: torch.rand(4, 8) * 5, (), {})],
    "binomial": [(lambda torch: (torch.full((4, 8), 10.0), torch.full((4, 8), 0.3)), (), {})],
    "channel_shuffle": [(_image(2, 4, 3, 3), (2,), {})],
    # antialiasing is sampled only in OpInfo's reference inputs (345x456 images): a small image here
    "nn.functional.interpolate": [(_image(2, 3, 9, 9), (), {"size": (5, 5), "mode": m, "antialias": aa,
                                                            "align_corners": False})
                                  for m in ("bilinear", "bicubic") for aa in (True, False)],
    # the deprecated wrapper of interpolate
    "nn.functional.upsample": [(_image(2, 3, 8, 8), (), {"scale_factor": 2, "mode": m}) for m in ("nearest", "bilinear", "bicubic")]
    + [(_image(2, 3, 8), (), {"scale_factor": 2, "mode": "linear"})],
}

KERNEL_QUALS = frozenset({"torch." + k for k in KERNEL_FALLBACKS}
                         | {"." + k + tail for k in KERNEL_FALLBACKS if "." not in k for tail in ("", "_")})
SKIP_OPS = ("_local_scalar_dense", "_to_copy", "_copy_from")  # transfers, not CPU kernels


def _no_expecttest():
    """torch's OpInfo module imports ``expecttest`` for its test base class only; a stand-in is enough."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stub


def dispatcher_table() -> dict:
    """aten op (``name.overload``) -> what the XLA key runs: kernel, fallback or a composite key's name."""
    import torch
    import torch_xla  # noqa: F401 - registers the XLA kernels and the fallback

    C = torch._C
    out = {}
    for op in C._dispatch_get_all_op_names():
        if not op.startswith("aten::"):
            continue
        line = next((ln for ln in C._dispatch_dump_table(op).splitlines() if ln.startswith("XLA:")), "")
        if line.endswith("[backend fallback]"):
            assert not C._dispatch_has_kernel_for_dispatch_key(op, "XLA"), op
            out[op] = "fallback"
        elif line.endswith("[kernel]"):
            out[op] = "kernel"
        elif line.endswith("[default backend kernel]"):
            out[op] = "CompositeExplicitAutogradNonFunctional" if "NonFunctional" in line else "CompositeExplicitAutograd"
        elif line.endswith("[math kernel]"):
            out[op] = "CompositeImplicitAutograd"
    return out


def _op_name(func) -> str:
    return func._schema.name + ("" if func._overloadname == "default" else "." + func._overloadname)


@contextlib.contextmanager
def traced(table: dict):
    """Record the aten ops a call dispatches, entering the composite kernels the XLA key would run."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Tracer(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops, self.open = set(), []

        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            name = _op_name(func)
            self.ops.add(name)
            key = table.get(name, "")
            if key.startswith("CompositeExplicit") and name not in self.open:
                self.open.append(name)
                try:
                    with self:
                        return func._op_dk(getattr(torch._C.DispatchKey, key), *args, **(kwargs or {}))
                finally:
                    self.open.pop()
            return func(*args, **(kwargs or {}))

    with Tracer() as t:
        yield t.ops


class Name:
    """A public name, its callable, the signature its literal arguments are read with, and its samples."""

    def __init__(self, qual, fn, sig, samples, method, opinfo):
        self.qual, self.fn, self.sig, self.samples, self.method, self.opinfo = qual, fn, sig, samples, method, opinfo


def _resolve(name: str):
    import torch

    obj = torch
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _public(name: str) -> bool:
    name = name.removeprefix("torch.")
    short = name.rsplit(".", 1)[-1]
    if short.startswith("_") or "." in name and not name.startswith(NAMESPACES):
        return False
    return _resolve(name) is not None


def _signature(fn, overrides):
    target = overrides.get(fn, fn)
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


def _samples(o, torch):
    """Up to 10 samples in float32 (with grad where differentiable, as a training step has), else int64/bool;
    samples of more than one element first (ops short-cut empty and one-element inputs)."""
    dtype = next((d for d in (torch.float32, torch.int64, torch.bool) if o.supports_dtype(d, "cpu")), None)
    if dtype is None:
        return []
    grad = dtype.is_floating_point and o.supports_autograd
    torch.manual_seed(0)
    try:
        samples = list(o.sample_inputs("cpu", dtype, requires_grad=grad))
    except Exception:  # noqa: BLE001 - a sample function that needs CUDA, or fails on this build
        return []
    return sorted(samples, key=lambda s: _size(s) <= 1)[:10]


def public_names(op_db, torch) -> list:
    """Every public function / method / in-place / alias name of the OpInfo database in our namespaces."""
    from torch.overrides import get_testing_overrides

    overrides = get_testing_overrides()
    names, seen = [], set()
    for o in op_db:
        samples = None
        variants = [(o.name, o.op, o.method_variant, o.inplace_variant)]
        variants += [(a.name, a.op, a.method_variant, a.inplace_variant) for a in o.aliases]
        for vname, op, method, inplace in variants:
            vname = vname.removeprefix("torch.")
            cands = []
            if _public(vname) and op is not None:
                # the OpInfo may wrap the public function to adapt its samples: call the wrapper, read
                # literal arguments only when the wrapper is the public function itself
                sig = _signature(op, overrides) if op is _resolve(vname) else None
                cands.append(("torch." + vname, op, sig, False))
            for m in (method, inplace):
                if m is not None and getattr(torch.Tensor, getattr(m, "__name__", ""), None) is m:
                    cands.append(("." + m.__name__, m, _signature(getattr(torch.Tensor, m.__name__), overrides), True))
            for qual, fn, sig, is_method in cands:
                key = (qual, o.name, o.variant_test_name, fn)
                if key in seen:
                    continue
                seen.add(key)
                if samples is None:
                    samples = _samples(o, torch)
                names.append(Name(qual, fn, sig, samples, is_method, o))
    return names


def extra_names(torch) -> list:
    """The extra samples of KERNEL_FALLBACKS and EXTRA_SAMPLES, as names of their own (no OpInfo)."""
    from torch.overrides import get_testing_overrides

    overrides = get_testing_overrides()
    out = []
    for short, rows in list(KERNEL_FALLBACKS.items()) + list(EXTRA_SAMPLES.items()):
        if not rows:
            continue
        fn = _resolve(short)
        samples = []
        for make, args, kwargs in rows:
            torch.manual_seed(0)
            made = make(torch)  # the input, or (the input, the first arguments)
            first, *more = made if isinstance(made, tuple) else (made,)
            samples.append(types.SimpleNamespace(input=first, args=(*more, *args), kwargs=kwargs))
        out.append(Name("torch." + short, fn, _signature(fn, overrides), samples, False, None))
        meth = getattr(torch.Tensor, short, None)
        if meth is not None:
            out.append(Name("." + short, meth, _signature(meth, overrides), samples, True, None))
    return out


def _call(name: Name, s, move):
    kwargs = {k: move(v) for k, v in s.kwargs.items()}
    if "device" in kwargs:  # a factory (``tril_indices``): build on the device measured
        kwargs["device"] = move.device
    inplace = name.method and name.qual.endswith("_") and not name.qual.endswith("__")
    return name.fn(move(s.input, inplace), *[move(a, inplace) for a in s.args], **kwargs)


def _mover(torch, device):
    """Copy a sample's tensors to ``device`` (None: a CPU copy), keeping ``requires_grad`` unless in place."""
    def move(v, inplace=False):
        if isinstance(v, torch.Tensor):
            t = v.detach().to(device) if device is not None else v.detach().clone()
            grad = v.requires_grad and not inplace
            return t.requires_grad_(grad) if t.is_floating_point() or t.is_complex() else t
        if isinstance(v, (list, tuple)):
            return type(v)(move(x, inplace) for x in v)
        return v
    move.device = device if device is not None else "cpu"
    return move


def predict(names: list, table: dict, torch) -> dict:
    """name -> per sample, the fallback ops of step 1 that the sample's call dispatches (CPU trace)."""
    fallback = {op for op, k in table.items() if k == "fallback"}
    move = _mover(torch, None)
    out = {}
    for n in names:
        per = []
        for s in n.samples:
            with traced(table) as ops:
                try:
                    _call(n, s, move)
                except Exception:  # noqa: BLE001 - a sample this build rejects
                    pass
            per.append(sorted(_functional(ops) & fallback))
        out[id(n)] = per
    return out


def _functional(ops: set) -> set:
    """The ops as the XLA key sees them: functionalization turns ``foo_`` into ``foo`` and a view ``foo``
    into ``foo_copy`` before the backend (``x.unfold(...)`` runs ``aten::unfold_copy``)."""
    out = set(ops)
    for op in ops:
        base, dot, overload = op.partition(".")
        if base.endswith("_") and not base.endswith("__"):
            out.add(base[:-1] + dot + overload)
        out.add(base + "_copy" + dot + overload)
    return out


def measure(names: list, which, skip=frozenset()) -> dict:
    """id(name) -> per sample, the ``aten::`` ops that ran on the CPU (None: the call failed on XLA)."""
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met

    move = _mover(torch, torch_xla.device())
    torch_xla.sync()
    out = {}
    for n in names:
        if not which(n) or n.qual in skip:
            continue
        if skip:
            print(f"  measuring {n.qual}", file=sys.stderr, flush=True)
        per = []
        for s in n.samples:
            met.clear_all()
            try:
                keep = _call(n, s, move)
                torch_xla.sync()
            except Exception:  # noqa: BLE001 - an op or sample this torch_xla does not support at all
                per.append(None)
                continue
            ops = sorted(met.executed_fallback_ops()) or sorted(
                k for k in met.counter_names() if k.startswith("aten::") and met.counter_value(k))
            del keep
            per.append([o for o in ops if not any(x in o for x in SKIP_OPS)])
        out[id(n)] = per
    return out


LITERALS = (bool, int, str, type(None))


def features(n: Name, s) -> dict:
    """The literal arguments of a sample's call, by parameter name, defaults included."""
    if n.sig is None:
        return {}
    try:
        b = n.sig.bind(s.input, *s.args, **s.kwargs)
    except TypeError:
        return {}
    b.apply_defaults()
    out = {}
    for k, v in b.arguments.items():
        if k == "out":
            continue
        if isinstance(v, LITERALS):
            out[k] = v
        elif isinstance(v, dict):  # **kwargs
            out.update({kk: vv for kk, vv in v.items() if isinstance(vv, LITERALS)})
    return out


def _cover(pos: list, neg: list, kinds: tuple) -> list:
    """Fewest (param, value) pairs of a value of ``kinds``, none seen in ``neg``, that cover most of ``pos``.

    Greedy, the pair held by most of the samples left first; samples no pair covers stay uncovered.
    """
    banned = {kv for f in neg for kv in f.items()}
    left = list(range(len(pos)))
    chosen = []
    while left:
        counts: dict = {}
        for i in left:
            for kv in pos[i].items():
                if kv not in banned and isinstance(kv[1], kinds):
                    counts[kv] = counts.get(kv, 0) + 1
        if not counts:
            break
        best = max(counts, key=lambda kv: (counts[kv], str(kv)))
        chosen.append(best)
        left = [i for i in left if pos[i].get(best[0], object()) != best[1]]
    return sorted(chosen, key=str)


def _show(n: Name, s) -> str:
    """The sample's call as text: tensors as dtype[shape], floats to 3 digits, long lists shortened."""
    def one(v):
        if hasattr(v, "shape") and hasattr(v, "dtype"):
            return f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}"
        if isinstance(v, float):
            return f"{v:.3g}"
        if isinstance(v, (list, tuple)):
            items = [one(x) for x in v[:4]] + ([f"... ({len(v)})"] if len(v) > 4 else [])
            return ("[%s]" if isinstance(v, list) else "(%s)") % ", ".join(items)
        return repr(v)
    args = [one(a) for a in s.args] + [f"{k}={one(v) if k != 'device' else repr('xla')}" for k, v in s.kwargs.items()]
    if n.method:
        return f"{one(s.input)}{n.qual}({', '.join(args)})"
    return f"{n.qual}({', '.join([one(s.input)] + args)})"


def _excluded(qual: str) -> str | None:
    short = qual.lstrip(".").removeprefix("torch.")
    base = short.rstrip("_")
    if "torch." + base in T.DYNAMIC_SHAPE_FUNCTIONS or base in T.DYNAMIC_SHAPE_METHODS or base == "repeat_interleave":
        return "XLA003 reports it (a data-dependent shape)"
    if "torch." + base in T.HOST_READ_TORCH_FUNCTIONS or base in ("equal", "allclose"):
        return "XLA001 reports it (a host read)"
    return EXCLUDED.get(base)


def _size(s) -> int:
    return getattr(s.input, "numel", lambda: 2)()


def decide(names: list, measured: dict, table: dict) -> tuple:
    """Group the samples by public name and decide: always, when, unless, conditional, lowered.

    A sample falls back when an op the dispatcher sends to the fallback ran on the CPU (for a kernel
    fallback, any op). A lowered sample of at most one element says nothing (ops short-cut them).
    """
    fallback_ops = {op for op, k in table.items() if k == "fallback"}
    by_qual: dict = {}
    for n in names:
        for s, ops in zip(n.samples, measured.get(id(n), ())):
            if ops is None:
                continue
            falls = any(o in fallback_ops for o in ops) or (n.qual in KERNEL_QUALS and bool(ops))
            if falls or _size(s) > 1:
                by_qual.setdefault(n.qual, []).append((features(n, s), falls, ops, _show(n, s), _size(s)))
    rows, lowered, conditional = [], [], []
    for qual, samples in sorted(by_qual.items()):
        fb = sorted((x for x in samples if x[1]), key=lambda x: -x[4])  # the largest call first
        lw = [x for x in samples if not x[1]]
        if not fb:
            lowered.append((qual, None))
            continue
        if not lw:
            rows.append((qual, None, sorted({o for x in fb for o in x[2]}), fb[0][3]))
            continue
        # mixed: read the literal arguments where the call's signature is known (not through a wrapper)
        fb_f, lw_f = [x for x in fb if x[0]], [x for x in lw if x[0]]
        # "falls back with mode='bicubic'": a categorical value (str, bool) seen only in falling samples
        when = _cover([x[0] for x in fb_f], [x[0] for x in lw_f], (str, bool))
        for kv in when:
            # shown: a call that has this argument and as few of the other deciding ones as possible
            hits = sorted((x for x in fb_f if x[0].get(kv[0], object()) == kv[1]),
                          key=lambda x: (sum(x[0].get(k, object()) == v for k, v in when), -x[4]))
            rows.append((qual, kv, sorted({o for x in hits for o in x[2]}), hits[0][3]))
        rest = [x for x in fb if not any(x[0].get(k, object()) == v for k, v in when)]
        if when and rest:
            conditional.append((qual, rest[0][3], lw[0][3]))
        if when:
            continue
        # "falls back unless num_samples=1 or replacement=True": values seen only in lowered samples
        unless = _cover([x[0] for x in lw_f], [x[0] for x in fb_f], LITERALS)
        covered = [x for x in lw_f if any(x[0].get(k, object()) == v for k, v in unless)]
        if unless and len(lw_f) < len(lw):  # lowered calls through an OpInfo wrapper: check them by hand
            print(f"  {qual}: lowered unless {unless}; not read: {[x[3] for x in lw if not x[0]]}", file=sys.stderr)
        if unless and fb_f and len(covered) == len(lw_f):
            rows.append((qual, None, sorted({o for x in fb for o in x[2]}), fb[0][3]))
            lowered.extend((qual, kv) for kv in unless)
            continue
        conditional.append((qual, fb[0][3], lw[0][3]))
    return rows, lowered, conditional


def _alternative(qual: str, when) -> str:
    fn = qual if not qual.startswith(".") else "torch" + qual.rstrip("_") if not qual.endswith("__") else qual
    return A.ALTERNATIVES_WHEN.get((qual, when)) or A.ALTERNATIVES.get(qual) or A.ALTERNATIVES.get(fn) or ""


def _signatures(names: list, rows: list, lowered: list) -> tuple:
    """short name -> parameter order, and -> the defaults of the parameters a ``when`` reads (for the rule)."""
    params = {r[1][0] for r in rows if r[1]} | {w[0] for _, w in lowered if w}
    quals = {r[0] for r in rows if r[1]} | {q for q, w in lowered if w}
    order, defaults = {}, {}
    for n in names:
        if n.qual not in quals or n.sig is None or n.method:
            continue
        short = n.qual.rsplit(".", 1)[-1]
        order[short] = tuple(n.sig.parameters)
        defaults[short] = {k: p.default for k, p in n.sig.parameters.items()
                           if k in params and isinstance(p.default, LITERALS) and p.default is not p.empty}
    return order, defaults


def _coverage(names: list, fallback: set, torch) -> tuple:
    """The public names of our namespaces (torch.overrides), and those without samples whose aten op of
    the same name is a fallback op (candidates nobody measured: printed for a hand-written sample)."""
    from torch.overrides import get_overridable_functions

    prefixes = {torch: "torch.", torch.functional: "torch.", torch.Tensor: ".", torch.nn.functional: "torch.nn.functional.",
                torch.linalg: "torch.linalg.", torch.fft: "torch.fft.", torch.special: "torch.special."}
    public = set()
    for ns, fns in get_overridable_functions().items():
        if ns not in prefixes:
            continue
        home = torch if ns is torch.functional else ns
        attrs = {id(getattr(home, a, None)): a for a in dir(home) if not a.startswith("_")}  # the public name
        public.update(prefixes[ns] + attrs[id(fn)] for fn in fns if id(fn) in attrs and callable(fn))
    sampled = {n.qual for n in names}
    aten = {op.removeprefix("aten::").split(".")[0] for op in fallback}
    unsampled = sorted(q for q in public - sampled if not _excluded(q) and (
        q.rsplit(".", 1)[-1].rstrip("_") in aten or q.removeprefix("torch.").replace(".", "_") in aten))
    return public, unsampled


def run(audit: bool = False) -> dict:
    warnings.filterwarnings("ignore")
    _no_expecttest()
    import torch
    import torch_xla
    from torch.testing._internal.common_methods_invocations import op_db

    t0 = time.time()
    table = dispatcher_table()
    fallback = {op for op, k in table.items() if k == "fallback"}
    names = public_names(op_db, torch) + extra_names(torch)
    excluded = sorted({(n.qual, _excluded(n.qual)) for n in names if _excluded(n.qual)})
    names = [n for n in names if not _excluded(n.qual)]
    predicted = predict(names, table, torch)
    # a name is measured on all its samples (of every OpInfo variant) once one of them is a candidate,
    # so that its lowered samples tell the condition
    quals = {n.qual for n in names if any(predicted[id(n)]) or n.opinfo is None or n.qual in KERNEL_QUALS}
    # --audit: some integer samples crash the process (SIGFPE); name them in XLALINT_AUDIT_SKIP to go on
    skip = frozenset(os.environ.get("XLALINT_AUDIT_SKIP", "").split(",")) | {""} if audit else frozenset()
    measured = measure(names, (lambda n: True) if audit else (lambda n: n.qual in quals), skip)
    rows, lowered, conditional = decide(names, measured, table)
    public, unsampled = _coverage(names, fallback, torch)
    reached = {o for n in names for ops in predicted[id(n)] for o in ops}
    confirmed = {o for r in rows for o in r[2]} & fallback
    stats = [
        (len(fallback), "aten ops whose XLA kernel is the CPU fallback (the dispatcher)"),
        (len(public), "public names in those namespaces (torch.overrides: functions and Tensor methods)"),
        (len({n.qual for n in names} & public), "of them with samples (OpInfo functions, methods, in-place, aliases)"),
        (len(excluded), "names kept out (XLA003's, XLA001's, sparse layouts, ...)"),
        (len(reached), "fallback ops a public name's samples reach (CPU trace)"),
        (len(quals), "names whose trace reaches a fallback op: measured"),
        (len(confirmed), "fallback ops that ran on the CPU for a name of the table"),
        (len({r[0] for r in rows}), "names confirmed falling back"),
        (len({r[0] for r in rows if r[1] is not None}), "of them only with an argument (when)"),
        (len(conditional), "names that fall back for inputs no argument tells apart (CONDITIONAL)"),
        (len({q for q, w in lowered if w is None}), "names measured lowered"),
    ]
    print(f"  {time.time() - t0:.0f} s", file=sys.stderr)
    for qual, why in excluded:
        print(f"  kept out: {qual}: {why}", file=sys.stderr)
    for qual in unsampled:
        print(f"  no samples: {qual} (its aten namesake falls back; not measured)", file=sys.stderr)
    if audit:
        ran: dict = {}
        seen: dict = {}
        for n in names:
            ran.setdefault(n.qual, set()).update(o for ops in measured.get(id(n), ()) for o in ops or ())
            seen.setdefault(n.qual, set()).update(o for ops in predicted[id(n)] for o in ops)
        for qual in sorted(ran):
            kernel, unseen = sorted(ran[qual] - fallback), sorted((ran[qual] & fallback) - seen[qual])
            if kernel or unseen:
                print(f"  {qual}: kernel-internal fallbacks {kernel}, fallback ops the trace missed {unseen}",
                      file=sys.stderr)
    signatures, defaults = _signatures(names, rows, lowered)
    # factories (their samples pass ``device=``): they fall back only when they build on the device
    factories = {n.qual for n in names if any("device" in s.kwargs for s in n.samples)} & {r[0] for r in rows}
    return {"rows": rows, "lowered": lowered, "conditional": conditional, "signatures": signatures,
            "defaults": defaults, "factories": sorted(factories), "stats": stats,
            "versions": f"torch {torch.__version__}, torch_xla {torch_xla.__version__}"}


def _table_text(table: dict, alt_names: dict) -> str:
    """A name's variants on one line each, the fix texts by their constant's name."""
    lines = []
    for name in sorted(table):
        items = ", ".join(
            "{'when': %r, 'ops': %r, 'alternative': %s, 'probe': %r}"
            % (v["when"], v["ops"], alt_names.get(v["alternative"], repr(v["alternative"])), v["probe"])
            for v in table[name])
        lines.append(f"    {name!r}: [{items}],")
    return "{\n" + "\n".join(lines) + "\n}"


def render(r: dict) -> str:
    functions: dict = {}
    methods: dict = {}
    for qual, when, ops, probe in r["rows"]:
        table = methods if qual.startswith(".") else functions
        table.setdefault(qual.lstrip("."), []).append(
            {"when": when, "ops": ops, "alternative": _alternative(qual, when), "probe": probe})
    used = {v["alternative"] for t in (functions, methods) for vs in t.values() for v in vs} - {""}
    alt_names = {text: name for name, text in sorted(vars(A).items()) if name.startswith("ALT_") and text in used}
    alts = "".join(f"{name} = {text!r}\n" for text, name in sorted(alt_names.items(), key=lambda kv: kv[1]))
    stats = "".join(f"#   {n:>4}  {what}\n" for n, what in r["stats"])
    lines = lambda v: pprint.pformat(v, width=110)  # noqa: E731
    return (
        '"""CPU-fallback ops on the installed torch_xla: XLA007\'s table. GENERATED, do not edit.\n\n'
        f"Written by scripts/gen_fallback_ops.py ({r['versions']}, PJRT_DEVICE=CPU): the ops the dispatcher sends\n"
        "to torch_xla's CPU fallback, mapped to public names with torch's OpInfo samples, each name confirmed on\n"
        "the device (``probe`` is a call that fell back, ``met.executed_fallback_ops()`` listed ``ops``). ``when``\n"
        "is a keyword and value the call must have to fall back (None: always). ``alternative`` is the cheapest\n"
        "lowered way to write it (hand-kept in the script; empty: none known).\n"
        '"""\n\n'
        f"MEASURED_ON = {r['versions']!r}\n\n"
        f"{stats}\n"
        f"{alts}\n"
        "# qualified function name -> [{when, ops, alternative, probe}]\n"
        f"FALLBACK_FUNCTIONS = {_table_text(functions, alt_names)}\n\n"
        "# tensor method name -> [{when, ops, alternative, probe}]\n"
        f"FALLBACK_METHODS = {_table_text(methods, alt_names)}\n\n"
        "# measured lowered (no fallback): (name, when); XLA007 never fires on these\n"
        f"LOWERED = {lines(sorted(set(r['lowered']), key=str))}\n\n"
        "# fall back for some inputs only, told apart by no literal argument (the input's rank, dtype or\n"
        "# size): (name, a call that fell back, a call that did not); XLA007 stays silent on these\n"
        f"CONDITIONAL = {lines(sorted(r['conditional']))}\n\n"
        "# the parameter order of the calls a ``when`` reads (a method's receiver is the first), and the\n"
        "# defaults of those parameters: ``interpolate(x, None, 2, \"bicubic\")`` matches like ``mode=\"bicubic\"``\n"
        f"CALL_SIGNATURES = {lines(r['signatures'])}\n\n"
        f"CALL_DEFAULTS = {lines(r['defaults'])}\n\n"
        "# factories: they fall back only when asked to build on the device (``device=``)\n"
        f"DEVICE_FACTORIES = frozenset({lines(r['factories'])})\n"
    )


def _tables(text: str) -> list:
    """The measured content, without the version line (a local build suffix like +cu128 is no change)."""
    return [ln for ln in text.splitlines() if not ln.startswith(("Written by", "MEASURED_ON"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed table, write nothing")
    ap.add_argument("--audit", action="store_true", help="measure every name; list fallbacks not predicted")
    args = ap.parse_args()
    if args.audit:
        run(audit=True)
        return 0
    text = render(run())
    if args.check:
        same = OUT.exists() and _tables(OUT.read_text(encoding="utf-8")) == _tables(text)
        print("fallback_ops.py is up to date" if same else "fallback_ops.py differs from a fresh measurement")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
