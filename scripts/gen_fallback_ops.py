"""Measure which torch ops fall back to the CPU on the installed torch_xla; write XLA007's table.

    PJRT_DEVICE=CPU python scripts/gen_fallback_ops.py [--check]

Each candidate below is a small call on tensors on the XLA device. The script runs it, syncs, and
reads ``torch_xla.debug.metrics.executed_fallback_ops()`` (with the counters cleared before each
candidate): a candidate whose call moved an ``aten::`` fallback is written to
``xlalint/semantics/fallback_ops.py`` with the op that fell back; the others are recorded as lowered,
and XLA007 never fires on them. Regenerate when torch_xla changes; ``--check`` exits 1 when the
committed table differs from a fresh measurement (nothing is written).

The candidates, and the cheapest lowered alternative for each (hand-kept knowledge: the script only
measures whether the call falls back), are the data below. Ops that XLA003 already reports for their
data-dependent shape (``nonzero``, ``masked_select``, ``unique``, ``unique_consecutive``,
``repeat_interleave`` with tensor repeats) and host reads that XLA001 reports (``torch.equal``,
``torch.allclose``) are left out: one finding per cause.
"""

from __future__ import annotations

import argparse
import os
import pprint
import sys
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "xlalint" / "semantics" / "fallback_ops.py"

ALT_BUCKETIZE = "compare against the boundaries on the device and count: `(x.unsqueeze(-1) > boundaries).sum(-1)`"
ALT_COUNT = "a fixed-size count on the device: `F.one_hot(x, K).sum(0)` or `torch.zeros(K, device=x.device).scatter_add_(0, x, torch.ones_like(x))`"
ALT_HIST = "bin on the device and count: `F.one_hot(((x - lo) / (hi - lo) * bins).long().clamp(0, bins - 1), bins).sum(0)`"
ALT_MEDIAN = "`torch.kthvalue(x, (x.size(dim) + 1) // 2, dim)` (lowered; the same lower median)"
ALT_NANMEDIAN = "`torch.sort(x, dim)` (NaNs sort last) and take the middle of the non-NaN count with `gather`"
ALT_MODE = "count with `F.one_hot(x, K).sum(dim)` and take `argmax`"
ALT_MULTINOMIAL = "the Gumbel-max trick on the device: `(probs.log() - torch.empty_like(probs).exponential_().log()).argmax(-1)` (one sample per row)"
ALT_LOGCUMSUMEXP = "subtract the max: `m = x.amax(dim, keepdim=True); (x - m).exp().cumsum(dim).log() + m`"
ALT_ADAPTIVE_MAX = "`F.max_pool2d` with a kernel and stride that divide the input (`kernel_size=H // out_h`)"
ALT_BICUBIC = "`mode=\"bilinear\"` (lowered), or a fixed convolution kernel"
ALT_ANTIALIAS = "drop `antialias=True` (lowered), or blur with a fixed `conv2d` kernel first"
ALT_EMBEDDING_BAG = "`F.embedding(ids, weight).sum(1)` / `.mean(1)` on fixed-size bags"
ALT_EIG = "`torch.linalg.eigh` when the matrix is symmetric (lowered)"
ALT_DET = "`sign, logabs = torch.linalg.slogdet(A); sign * logabs.exp()` (slogdet is lowered)"
ALT_LSTSQ = "`torch.linalg.pinv(A) @ b` (lowered)"
ALT_SOLVE = "`torch.linalg.inv(A) @ b` (lowered)"
ALT_NONZERO_STATIC = "keep the mask instead of indices (`torch.where(mask, x, 0)`, `x * mask`), or `torch.topk(mask.int(), K)` for K positions (lowered)"
ALT_CUMMIN = "`-torch.cummax(-x, dim).values` (cummax is lowered)"
ALT_NANSUM = "`torch.where(torch.isnan(x), torch.zeros_like(x), x).sum()`"
ALT_NANMEAN = "`ok = ~torch.isnan(x); torch.where(ok, x, 0).sum() / ok.sum()`"
ALT_ISIN = "compare on the device: `(x.unsqueeze(-1) == values).any(-1)`"
ALT_ASSERT_ASYNC = "check every N steps (or only in debug runs): each call runs on the CPU"
ALT_POLAR = "`torch.complex(r * torch.cos(theta), r * torch.sin(theta))`"
ALT_TRIL = "build the indices once outside the step (they depend only on the size) and reuse them"

# (qualified name or ".method", code run with x (f32 [8, 16] in [0, 1)), i (i64 [32] in 0..9), s (sorted f32 [5]),
#  p (probabilities [4, 10]), img (f32 [2, 3, 9, 9]), m (f32 [6, 6]), when (keyword, value) or None, alternative)
CANDIDATES = [
    ("torch.histc", "torch.histc(x, bins=10, min=0.0, max=1.0)", None, ALT_HIST),
    (".histc", "x.histc(bins=10, min=0.0, max=1.0)", None, ALT_HIST),
    ("torch.bincount", "torch.bincount(i, minlength=10)", None, ALT_COUNT),
    (".bincount", "i.bincount(minlength=10)", None, ALT_COUNT),
    ("torch.bucketize", "torch.bucketize(x, s)", None, ALT_BUCKETIZE),
    ("torch.searchsorted", "torch.searchsorted(s, x)", None, ALT_BUCKETIZE),
    ("torch.median", "torch.median(x, dim=1)", None, ALT_MEDIAN),
    (".median", "x.median(dim=1)", None, ALT_MEDIAN),
    ("torch.nanmedian", "torch.nanmedian(x, dim=1)", None, ALT_NANMEDIAN),
    (".nanmedian", "x.nanmedian(dim=1)", None, ALT_NANMEDIAN),
    ("torch.mode", "torch.mode(i)", None, ALT_MODE),
    (".mode", "i.mode()", None, ALT_MODE),
    ("torch.multinomial", "torch.multinomial(p, 3)", None, ALT_MULTINOMIAL),
    ("torch.multinomial", "torch.multinomial(p, 3, replacement=True)", ("replacement", True), ALT_MULTINOMIAL),
    ("torch.multinomial", "torch.multinomial(p, num_samples=1)", ("num_samples", 1), ALT_MULTINOMIAL),
    (".multinomial", "p.multinomial(3)", None, ALT_MULTINOMIAL),
    (".multinomial", "p.multinomial(num_samples=1)", ("num_samples", 1), ALT_MULTINOMIAL),
    (".multinomial", "p.multinomial(3, replacement=True)", ("replacement", True), ALT_MULTINOMIAL),
    ("torch.logcumsumexp", "torch.logcumsumexp(x, 1)", None, ALT_LOGCUMSUMEXP),
    (".logcumsumexp", "x.logcumsumexp(1)", None, ALT_LOGCUMSUMEXP),
    ("torch.fft.fft", "torch.fft.fft(x)", None, ""),
    ("torch.fft.ifft", "torch.fft.ifft(x)", None, ""),
    ("torch.fft.rfft", "torch.fft.rfft(x)", None, ""),
    ("torch.fft.irfft", "torch.fft.irfft(x)", None, ""),
    ("torch.fft.fft2", "torch.fft.fft2(x)", None, ""),
    ("torch.fft.ifft2", "torch.fft.ifft2(x)", None, ""),
    ("torch.fft.rfft2", "torch.fft.rfft2(x)", None, ""),
    ("torch.fft.irfft2", "torch.fft.irfft2(x)", None, ""),
    ("torch.fft.fftn", "torch.fft.fftn(x)", None, ""),
    ("torch.fft.ifftn", "torch.fft.ifftn(x)", None, ""),
    ("torch.fft.rfftn", "torch.fft.rfftn(x)", None, ""),
    ("torch.fft.irfftn", "torch.fft.irfftn(x)", None, ""),
    ("torch.fft.hfft", "torch.fft.hfft(x)", None, ""),
    ("torch.fft.ihfft", "torch.fft.ihfft(x)", None, ""),
    ("torch.stft", "torch.stft(x, n_fft=8, return_complex=True)", None, ""),
    ("torch.nn.functional.grid_sample", "F.grid_sample(img, torch.zeros(2, 4, 4, 2, device=d), align_corners=False)", None, ""),
    ("torch.nn.functional.adaptive_max_pool2d", "F.adaptive_max_pool2d(img, 4)", None, ALT_ADAPTIVE_MAX),
    ("torch.nn.functional.adaptive_max_pool1d", "F.adaptive_max_pool1d(x.unsqueeze(0), 5)", None, ALT_ADAPTIVE_MAX),
    ("torch.nn.functional.interpolate", "F.interpolate(img, size=(12, 12), mode='bicubic', align_corners=False)", ("mode", "bicubic"), ALT_BICUBIC),
    ("torch.nn.functional.interpolate", "F.interpolate(img, size=(5, 5), mode='bilinear', antialias=True, align_corners=False)", ("antialias", True), ALT_ANTIALIAS),
    ("torch.nn.functional.interpolate", "F.interpolate(img, size=(12, 12), mode='bilinear', align_corners=False)", ("mode", "bilinear"), ""),
    ("torch.nn.functional.upsample", "F.upsample(img, size=(12, 12), mode='bicubic', align_corners=False)", ("mode", "bicubic"), ALT_BICUBIC),
    ("torch.nn.functional.interpolate", "F.interpolate(img, size=(12, 12), mode='nearest')", ("mode", "nearest"), ""),
    ("torch.nn.functional.embedding_bag", "F.embedding_bag(i.view(8, 4), torch.randn(10, 3, device=d, requires_grad=True))", None, ALT_EMBEDDING_BAG),
    ("torch.nn.functional.ctc_loss", "F.ctc_loss(torch.randn(12, 2, 5, device=d).log_softmax(2), torch.randint(1, 5, (2, 4), device=d), torch.full((2,), 12, device=d, dtype=torch.long), torch.full((2,), 4, device=d, dtype=torch.long))", None, ""),
    ("torch.linalg.eig", "torch.linalg.eig(m)", None, ALT_EIG),
    ("torch.linalg.eigvals", "torch.linalg.eigvals(m)", None, ALT_EIG),
    ("torch.linalg.det", "torch.linalg.det(m)", None, ALT_DET),
    ("torch.det", "torch.det(m)", None, ALT_DET),
    ("torch.linalg.slogdet", "torch.linalg.slogdet(m)", None, ""),
    ("torch.linalg.lstsq", "torch.linalg.lstsq(m, x[:6, :2])", None, ALT_LSTSQ),
    ("torch.tril_indices", "torch.tril_indices(6, 6, device=d)", None, ALT_TRIL),
    ("torch.triu_indices", "torch.triu_indices(6, 6, device=d)", None, ALT_TRIL),
    ("torch.nonzero_static", "torch.nonzero_static(x > 0.5, size=8)", None, ALT_NONZERO_STATIC),
    (".nonzero_static", "(x > 0.5).nonzero_static(size=8)", None, ALT_NONZERO_STATIC),
    ("torch.cdist", "torch.cdist(x, x)", None, ""),
    ("torch.kthvalue", "torch.kthvalue(x, 3, dim=1)", None, ""),
    (".kthvalue", "x.kthvalue(3, dim=1)", None, ""),
    ("torch.sort", "torch.sort(x, dim=1)", None, ""),
    ("torch.argsort", "torch.argsort(x, dim=1)", None, ""),
    ("torch.topk", "torch.topk(x, 3)", None, ""),
    (".topk", "x.topk(3)", None, ""),
    ("torch.cumprod", "torch.cumprod(x, 1)", None, ""),
    ("torch.cumsum", "torch.cumsum(x, 1)", None, ""),
    ("torch.cummax", "torch.cummax(x, 1)", None, ""),
    ("torch.cummin", "torch.cummin(x, 1)", None, ALT_CUMMIN),
    (".cummin", "x.cummin(1)", None, ALT_CUMMIN),
    ("torch.quantile", "torch.quantile(x, 0.5, dim=1)", None, ""),
    ("torch.randperm", "torch.randperm(10, device=d)", None, ""),
    ("torch.linalg.svd", "torch.linalg.svd(m)", None, ""),
    ("torch.linalg.eigh", "torch.linalg.eigh(m @ m.T)", None, ""),
    ("torch.linalg.inv", "torch.linalg.inv(m + 6 * torch.eye(6, device=d))", None, ""),
    ("torch.linalg.solve", "torch.linalg.solve(m + 6 * torch.eye(6, device=d), x[:6, :2])", None, ALT_SOLVE),
    ("torch.cholesky_solve", "torch.cholesky_solve(x[:6, :2], torch.linalg.cholesky(m @ m.T + torch.eye(6, device=d)))", None, ""),
    ("torch.linalg.cholesky", "torch.linalg.cholesky(m @ m.T + torch.eye(6, device=d))", None, ""),
    ("torch.linalg.pinv", "torch.linalg.pinv(m)", None, ""),
    ("torch.roll", "torch.roll(x, 2, 1)", None, ""),
    ("torch.nn.functional.pad", "F.pad(img, (1, 1, 1, 1), mode='reflect')", ("mode", "reflect"), ""),
    ("torch.nn.functional.adaptive_avg_pool2d", "F.adaptive_avg_pool2d(img, 3)", None, ""),
    ("torch.nn.functional.one_hot", "F.one_hot(i, 10)", None, ""),
    ("torch.nn.functional.embedding", "F.embedding(i, torch.randn(10, 3, device=d))", None, ""),
    ("torch.nn.functional.max_pool2d", "F.max_pool2d(img, 3)", None, ""),
    # issue 33 item 9: ops that trainers call and that the first table missed
    ("torch.nansum", "torch.nansum(x)", None, ALT_NANSUM),
    (".nansum", "x.nansum()", None, ALT_NANSUM),
    ("torch.nanmean", "torch.nanmean(x)", None, ALT_NANMEAN),
    (".nanmean", "x.nanmean()", None, ALT_NANMEAN),
    ("torch.isin", "torch.isin(i, i[:4])", None, ALT_ISIN),
    ("torch._assert_async", "torch._assert_async(x.sum() > -1)", None, ALT_ASSERT_ASYNC),
    ("torch.polar", "torch.polar(x, x)", None, ALT_POLAR),
]


def measure() -> tuple[list, list, str]:
    import torch
    import torch.nn.functional as F
    import torch_xla
    import torch_xla.debug.metrics as met

    d = torch_xla.device()
    g = torch.Generator().manual_seed(0)
    env = {
        "torch": torch, "F": F, "d": d,
        "x": torch.rand(8, 16, generator=g).to(d),
        "i": torch.randint(0, 10, (32,), generator=g).to(d),
        "s": torch.linspace(0.1, 0.9, 5).to(d),
        "p": torch.rand(4, 10, generator=g).softmax(-1).to(d),
        "img": torch.rand(2, 3, 9, 9, generator=g).to(d),
        "m": torch.rand(6, 6, generator=g).to(d),
    }
    torch_xla.sync()
    fallbacks, lowered = [], []
    for name, code, when, alt in CANDIDATES:
        met.clear_all()
        before = set(met.executed_fallback_ops())
        try:
            out = eval(code, env)  # noqa: S307 - the candidates above, nothing else
            torch_xla.sync()
            keep = out  # keep the results alive until the graph ran
        except Exception as e:  # noqa: BLE001 - an op this version does not support at all
            print(f"  {name}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", file=sys.stderr)
            continue
        del keep
        ops = sorted(set(met.executed_fallback_ops()) - before) or sorted(
            k for k in met.counter_names() if k.startswith("aten::") and met.counter_value(k)
        )
        ops = [o for o in ops if "_local_scalar_dense" not in o and "_to_copy" not in o and "_copy_from" not in o]
        row = {"name": name, "when": when, "probe": code}
        if ops:
            row.update(ops=ops, alternative=alt)
            fallbacks.append(row)
        else:
            lowered.append(row)
        print(f"  {'FALLBACK' if ops else 'lowered '} {name} {when or ''} {' '.join(ops)}", file=sys.stderr)
    return fallbacks, lowered, f"torch {torch.__version__}, torch_xla {torch_xla.__version__}"


def render(fallbacks: list, lowered: list, versions: str) -> str:
    functions: dict = {}
    methods: dict = {}
    for row in fallbacks:
        table = methods if row["name"].startswith(".") else functions
        table.setdefault(row["name"].lstrip("."), []).append(
            {"when": row["when"], "ops": row["ops"], "alternative": row["alternative"], "probe": row["probe"]}
        )
    lowered_names = sorted({(r["name"], r["when"]) for r in lowered}, key=str)
    return (
        '"""CPU-fallback ops on the installed torch_xla: XLA007\'s table. GENERATED, do not edit.\n\n'
        f"Written by scripts/gen_fallback_ops.py ({versions}, PJRT_DEVICE=CPU): each entry's probe call fell\n"
        "back to the CPU (``met.executed_fallback_ops()`` listed ``ops``). ``when`` is a keyword and value the\n"
        "call must have to fall back (None: always). ``alternative`` is the cheapest lowered way to write it.\n"
        '"""\n\n'
        f"MEASURED_ON = {versions!r}\n\n"
        "# qualified function name -> [{when, ops, alternative, probe}]\n"
        f"FALLBACK_FUNCTIONS = {pprint.pformat(functions, width=110, sort_dicts=True)}\n\n"
        "# tensor method name -> [{when, ops, alternative, probe}]\n"
        f"FALLBACK_METHODS = {pprint.pformat(methods, width=110, sort_dicts=True)}\n\n"
        "# measured lowered (no fallback): (name, when); XLA007 never fires on these\n"
        f"LOWERED = {pprint.pformat(lowered_names, width=110)}\n"
    )


def _tables(text: str) -> list:
    """The measured content, without the version line (a local build suffix like +cu128 is no change)."""
    return [ln for ln in text.splitlines() if not ln.startswith(("Written by", "MEASURED_ON"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed table, write nothing")
    args = ap.parse_args()
    text = render(*measure())
    if args.check:
        same = OUT.exists() and _tables(OUT.read_text(encoding="utf-8")) == _tables(text)
        print("fallback_ops.py is up to date" if same else "fallback_ops.py differs from a fresh measurement")
        return 0 if same else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
