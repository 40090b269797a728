"""The fix text per CPU-fallback op: hand-kept knowledge that gen_fallback_ops.py writes into XLA007's table.

Each text is the cheapest lowered way to write the op (checked on the CPU XLA device: no fallback, the
same values); a name without one gets the rule's generic advice. A method shares the text of its
``torch.`` function.
"""

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
ALT_UPSAMPLE = "a 2-D `mode=\"bilinear\"` / `\"nearest\"` (lowered): `unsqueeze` a 1-D signal to `(N, C, 1, L)`"
ALT_EMBEDDING_BAG = "`F.embedding(ids, weight).sum(1)` / `.mean(1)` on fixed-size bags"
ALT_EIG = "`torch.linalg.eigh` when the matrix is symmetric (lowered)"
ALT_DET = "`sign, logabs = torch.linalg.slogdet(A); sign * logabs.exp()` (slogdet is lowered)"
ALT_LSTSQ = "`torch.linalg.pinv(A) @ b` (lowered)"
ALT_SOLVE = "`torch.linalg.inv_ex(A).inverse @ b` (lowered; `inv` itself reads its error check to the host)"
ALT_NONZERO_STATIC = "keep the mask instead of indices (`torch.where(mask, x, 0)`, `x * mask`), or `torch.topk(mask.int(), K)` for K positions (lowered)"
ALT_CUMMIN = "`-torch.cummax(-x, dim).values` (cummax is lowered)"
ALT_NANSUM = "`torch.where(torch.isnan(x), torch.zeros_like(x), x).sum()`"
ALT_NANMEAN = "`ok = ~torch.isnan(x); torch.where(ok, x, 0).sum() / ok.sum()`"
ALT_ISIN = "compare on the device: `(x.unsqueeze(-1) == values).any(-1)`"
ALT_ASSERT_ASYNC = "check every N steps (or only in debug runs): each call runs on the CPU"
ALT_POLAR = "`torch.view_as_complex(torch.stack([r * torch.cos(theta), r * torch.sin(theta)], -1))` (lowered)"
ALT_COMPLEX = "`torch.view_as_complex(torch.stack([real, imag], -1))` (lowered)"
ALT_ANGLE = "`torch.atan2(z.imag, z.real)`; of a real tensor: `torch.where(x < 0, math.pi, 0.0)`"
ALT_COV = "center and multiply: `xc = x - x.mean(1, keepdim=True); xc @ xc.T / (x.size(1) - 1)`"
ALT_COMBINATIONS = "build the index pairs once outside the step (`i, j = torch.triu_indices(n, n, 1)`) and index: `torch.stack([x[i], x[j]], -1)`"
ALT_FACTORY = "build it once outside the step (it depends only on its arguments) and reuse it"
ALT_TRIL = "build the indices once outside the step (they depend only on the size) and reuse them"
ALT_HUBER = "`delta * F.smooth_l1_loss(input, target, beta=delta)` (the same loss; smooth_l1_loss is lowered)"
ALT_LOGADDEXP = "`m = torch.maximum(a, b); m + torch.log1p(torch.exp(-(a - b).abs()))`"
ALT_UNFOLD = "index the windows with indices built once outside the step: `idx = torch.arange(0, n - size + 1, step)[:, None] + torch.arange(size)`, then `x.index_select(dim, idx.flatten())` and `view` the windows"
ALT_IM2COL = "`F.conv2d` with a fixed one-hot kernel (`groups=C`) gives the same patches, or reshape non-overlapping patches with `view`/`permute`"
ALT_HYPOT = "`torch.sqrt(a * a + b * b)`"
ALT_EXP2 = "`torch.exp(x * math.log(2))`"
ALT_SIGNBIT = "`x < 0` (differs only for -0.0 and NaN)"
ALT_FMAX = "`torch.maximum` / `torch.minimum`, with `torch.where(a.isnan(), b, ...)` where NaNs must be ignored"
ALT_COPYSIGN = "`a.abs() * torch.where(b < 0, -1.0, 1.0)` (differs only for -0.0)"
ALT_HEAVISIDE = "`torch.where(x == 0, values, (x > 0).to(x.dtype))`"
ALT_SINC = "`torch.where(x == 0, 1.0, torch.sin(math.pi * x) / (math.pi * x))`"
ALT_AMINMAX = "`x.amin(dim), x.amax(dim)` (two lowered reductions)"
ALT_CROSS = "the components by hand: `torch.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1], ...], -1)`"
ALT_VDOT = "`(a.conj() * b).sum()` (or `torch.dot` for real vectors)"
ALT_ADDMV = "`beta * input + alpha * (mat @ vec)` (lowered)"
ALT_ADDBMM = "`input + (batch1 @ batch2).sum(0)` (lowered)"
ALT_CHANNEL_SHUFFLE = "`x.view(n, g, c // g, h, w).transpose(1, 2).reshape(n, c, h, w)`"
ALT_ISPOSINF = "`x == float(\"inf\")`"
ALT_XLOG1PY = "`torch.where(x == 0, 0.0, x * torch.log1p(y))`"
ALT_ENTR = "`torch.where(x > 0, -x * x.log(), torch.where(x == 0, 0.0, -math.inf))`"

# public name -> the fix text; a method shares the text of its `torch.` function
ALTERNATIVES = {
    "torch.histc": ALT_HIST, "torch.histogram": ALT_HIST, "torch.bincount": ALT_COUNT,
    "torch.bucketize": ALT_BUCKETIZE, "torch.searchsorted": ALT_BUCKETIZE,
    "torch.median": ALT_MEDIAN, "torch.nanmedian": ALT_NANMEDIAN, "torch.mode": ALT_MODE,
    "torch.multinomial": ALT_MULTINOMIAL, "torch.logcumsumexp": ALT_LOGCUMSUMEXP,
    "torch.nn.functional.adaptive_max_pool1d": ALT_ADAPTIVE_MAX,
    "torch.nn.functional.adaptive_max_pool2d": ALT_ADAPTIVE_MAX,
    "torch.nn.functional.embedding_bag": ALT_EMBEDDING_BAG,
    "torch.linalg.eig": ALT_EIG, "torch.linalg.eigvals": ALT_EIG, "torch.linalg.det": ALT_DET, "torch.det": ALT_DET,
    "torch.linalg.lstsq": ALT_LSTSQ, "torch.linalg.solve": ALT_SOLVE, "torch.nonzero_static": ALT_NONZERO_STATIC,
    "torch.cummin": ALT_CUMMIN, "torch.nansum": ALT_NANSUM, "torch.nanmean": ALT_NANMEAN, "torch.isin": ALT_ISIN,
    "torch._assert_async": ALT_ASSERT_ASYNC, "torch.polar": ALT_POLAR,
    "torch.tril_indices": ALT_TRIL, "torch.triu_indices": ALT_TRIL, "torch.logspace": ALT_FACTORY,
    "torch.nn.functional.huber_loss": ALT_HUBER, "torch.logaddexp": ALT_LOGADDEXP,
    "torch.complex": ALT_COMPLEX, "torch.angle": ALT_ANGLE, "torch.cov": ALT_COV, "torch.corrcoef": ALT_COV,
    "torch.combinations": ALT_COMBINATIONS,
    "torch.unfold": ALT_UNFOLD, "torch.nn.functional.unfold": ALT_IM2COL,
    "torch.hypot": ALT_HYPOT, "torch.exp2": ALT_EXP2, "torch.special.exp2": ALT_EXP2, "torch.signbit": ALT_SIGNBIT,
    "torch.fmax": ALT_FMAX, "torch.fmin": ALT_FMAX, "torch.copysign": ALT_COPYSIGN,
    "torch.heaviside": ALT_HEAVISIDE, "torch.sinc": ALT_SINC, "torch.special.sinc": ALT_SINC,
    "torch.aminmax": ALT_AMINMAX, "torch.cross": ALT_CROSS, "torch.linalg.cross": ALT_CROSS,
    "torch.vdot": ALT_VDOT, "torch.linalg.vecdot": ALT_VDOT, "torch.addmv": ALT_ADDMV, "torch.addbmm": ALT_ADDBMM,
    "torch.nn.functional.channel_shuffle": ALT_CHANNEL_SHUFFLE, "torch.channel_shuffle": ALT_CHANNEL_SHUFFLE,
    "torch.isposinf": ALT_ISPOSINF, "torch.special.xlog1py": ALT_XLOG1PY,
    "torch.special.entr": ALT_ENTR,
}
# (name, when) -> the fix text where the condition has its own fix
ALTERNATIVES_WHEN = {
    ("torch.nn.functional.interpolate", ("mode", "bicubic")): ALT_BICUBIC,
    ("torch.nn.functional.upsample", ("mode", "bicubic")): ALT_BICUBIC,
    ("torch.nn.functional.interpolate", ("antialias", True)): ALT_ANTIALIAS,
    ("torch.nn.functional.interpolate", ("mode", "linear")): ALT_UPSAMPLE,
    ("torch.nn.functional.upsample", ("mode", "linear")): ALT_UPSAMPLE,
}
