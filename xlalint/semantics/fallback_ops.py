"""CPU-fallback ops on the installed torch_xla: XLA007's table. GENERATED, do not edit.

Written by scripts/gen_fallback_ops.py (torch 2.9.0+cu128, torch_xla 2.9.0, PJRT_DEVICE=CPU): the ops the dispatcher sends
to torch_xla's CPU fallback, mapped to public names with torch's OpInfo samples, each name confirmed on
the device (``probe`` is a call that fell back, ``met.executed_fallback_ops()`` listed ``ops``). ``when``
is a keyword and value the call must have to fall back (None: always). ``alternative`` is the cheapest
lowered way to write it (hand-kept in the script; empty: none known).
"""

MEASURED_ON = 'torch 2.9.0+cu128, torch_xla 2.9.0'

#    664  aten ops whose XLA kernel is the CPU fallback (the dispatcher)
#   1282  public names in those namespaces (torch.overrides: functions and Tensor methods)
#   1006  of them with samples (OpInfo functions, methods, in-place, aliases)
#     19  names kept out (XLA003's, XLA001's, sparse layouts, ...)
#    163  fallback ops a public name's samples reach (CPU trace)
#    267  names whose trace reaches a fallback op: measured
#    137  fallback ops that ran on the CPU for a name of the table
#    251  names confirmed falling back
#      5  of them only with an argument (when)
#      8  names that fall back for inputs no argument tells apart (CONDITIONAL)
#      8  names measured lowered

ALT_ADDBMM = '`input + (batch1 @ batch2).sum(0)` (lowered)'
ALT_ADDMV = '`beta * input + alpha * (mat @ vec)` (lowered)'
ALT_AMINMAX = '`x.amin(dim), x.amax(dim)` (two lowered reductions)'
ALT_ANGLE = '`torch.atan2(z.imag, z.real)`; of a real tensor: `torch.where(x < 0, math.pi, 0.0)`'
ALT_ANTIALIAS = 'drop `antialias=True` (lowered), or blur with a fixed `conv2d` kernel first'
ALT_ASSERT_ASYNC = 'check every N steps (or only in debug runs): each call runs on the CPU'
ALT_BICUBIC = '`mode="bilinear"` (lowered), or a fixed convolution kernel'
ALT_BUCKETIZE = 'compare against the boundaries on the device and count: `(x.unsqueeze(-1) > boundaries).sum(-1)`'
ALT_CHANNEL_SHUFFLE = '`x.view(n, g, c // g, h, w).transpose(1, 2).reshape(n, c, h, w)`'
ALT_COMBINATIONS = 'build the index pairs once outside the step (`i, j = torch.triu_indices(n, n, 1)`) and index: `torch.stack([x[i], x[j]], -1)`'
ALT_COMPLEX = '`torch.view_as_complex(torch.stack([real, imag], -1))` (lowered)'
ALT_COPYSIGN = '`a.abs() * torch.where(b < 0, -1.0, 1.0)` (differs only for -0.0)'
ALT_COUNT = 'a fixed-size count on the device: `F.one_hot(x, K).sum(0)` or `torch.zeros(K, device=x.device).scatter_add_(0, x, torch.ones_like(x))`'
ALT_COV = 'center and multiply: `xc = x - x.mean(1, keepdim=True); xc @ xc.T / (x.size(1) - 1)`'
ALT_CROSS = 'the components by hand: `torch.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1], ...], -1)`'
ALT_CUMMIN = '`-torch.cummax(-x, dim).values` (cummax is lowered)'
ALT_DET = '`sign, logabs = torch.linalg.slogdet(A); sign * logabs.exp()` (slogdet is lowered)'
ALT_EIG = '`torch.linalg.eigh` when the matrix is symmetric (lowered)'
ALT_EMBEDDING_BAG = '`F.embedding(ids, weight).sum(1)` / `.mean(1)` on fixed-size bags'
ALT_ENTR = '`torch.where(x > 0, -x * x.log(), torch.where(x == 0, 0.0, -math.inf))`'
ALT_EXP2 = '`torch.exp(x * math.log(2))`'
ALT_FACTORY = 'build it once outside the step (it depends only on its arguments) and reuse it'
ALT_FMAX = '`torch.maximum` / `torch.minimum`, with `torch.where(a.isnan(), b, ...)` where NaNs must be ignored'
ALT_HEAVISIDE = '`torch.where(x == 0, values, (x > 0).to(x.dtype))`'
ALT_HIST = 'bin on the device and count: `F.one_hot(((x - lo) / (hi - lo) * bins).long().clamp(0, bins - 1), bins).sum(0)`'
ALT_HUBER = '`delta * F.smooth_l1_loss(input, target, beta=delta)` (the same loss; smooth_l1_loss is lowered)'
ALT_HYPOT = '`torch.sqrt(a * a + b * b)`'
ALT_IM2COL = '`F.conv2d` with a fixed one-hot kernel (`groups=C`) gives the same patches, or reshape non-overlapping patches with `view`/`permute`'
ALT_ISIN = 'compare on the device: `(x.unsqueeze(-1) == values).any(-1)`'
ALT_ISPOSINF = '`x == float("inf")`'
ALT_LOGADDEXP = '`m = torch.maximum(a, b); m + torch.log1p(torch.exp(-(a - b).abs()))`'
ALT_LOGCUMSUMEXP = 'subtract the max: `m = x.amax(dim, keepdim=True); (x - m).exp().cumsum(dim).log() + m`'
ALT_LSTSQ = '`torch.linalg.pinv(A) @ b` (lowered)'
ALT_MEDIAN = '`torch.kthvalue(x, (x.size(dim) + 1) // 2, dim)` (lowered; the same lower median)'
ALT_MODE = 'count with `F.one_hot(x, K).sum(dim)` and take `argmax`'
ALT_MULTINOMIAL = 'the Gumbel-max trick on the device: `(probs.log() - torch.empty_like(probs).exponential_().log()).argmax(-1)` (one sample per row)'
ALT_NANMEAN = '`ok = ~torch.isnan(x); torch.where(ok, x, 0).sum() / ok.sum()`'
ALT_NANMEDIAN = '`torch.sort(x, dim)` (NaNs sort last) and take the middle of the non-NaN count with `gather`'
ALT_NANSUM = '`torch.where(torch.isnan(x), torch.zeros_like(x), x).sum()`'
ALT_NONZERO_STATIC = 'keep the mask instead of indices (`torch.where(mask, x, 0)`, `x * mask`), or `torch.topk(mask.int(), K)` for K positions (lowered)'
ALT_POLAR = '`torch.view_as_complex(torch.stack([r * torch.cos(theta), r * torch.sin(theta)], -1))` (lowered)'
ALT_SIGNBIT = '`x < 0` (differs only for -0.0 and NaN)'
ALT_SINC = '`torch.where(x == 0, 1.0, torch.sin(math.pi * x) / (math.pi * x))`'
ALT_SOLVE = '`torch.linalg.inv_ex(A).inverse @ b` (lowered; `inv` itself reads its error check to the host)'
ALT_TRIL = 'build the indices once outside the step (they depend only on the size) and reuse them'
ALT_UNFOLD = 'index the windows with indices built once outside the step: `idx = torch.arange(0, n - size + 1, step)[:, None] + torch.arange(size)`, then `x.index_select(dim, idx.flatten())` and `view` the windows'
ALT_UPSAMPLE = 'a 2-D `mode="bilinear"` / `"nearest"` (lowered): `unsqueeze` a 1-D signal to `(N, C, 1, L)`'
ALT_VDOT = '`(a.conj() * b).sum()` (or `torch.dot` for real vectors)'
ALT_XLOG1PY = '`torch.where(x == 0, 0.0, x * torch.log1p(y))`'

# qualified function name -> [{when, ops, alternative, probe}]
FALLBACK_FUNCTIONS = {
    'torch._assert_async': [{'when': None, 'ops': ['aten::_assert_async'], 'alternative': ALT_ASSERT_ASYNC, 'probe': 'torch._assert_async(bool[])'}],
    'torch.addbmm': [{'when': None, 'ops': ['aten::addbmm'], 'alternative': ALT_ADDBMM, 'probe': 'torch.addbmm(float32[5, 10], float32[5, 5, 5], float32[5, 5, 10], beta=1, alpha=1)'}],
    'torch.addmv': [{'when': None, 'ops': ['aten::addmv'], 'alternative': ALT_ADDMV, 'probe': 'torch.addmv(float32[5], float32[5, 10], float32[10], beta=1, alpha=1)'}],
    'torch.aminmax': [{'when': None, 'ops': ['aten::aminmax'], 'alternative': ALT_AMINMAX, 'probe': 'torch.aminmax(float32[5, 5, 5])'}],
    'torch.angle': [{'when': None, 'ops': ['aten::angle'], 'alternative': ALT_ANGLE, 'probe': 'torch.angle(float32[20, 20])'}],
    'torch.bincount': [{'when': None, 'ops': ['aten::bincount'], 'alternative': ALT_COUNT, 'probe': 'torch.bincount(int64[10], weights=None, minlength=0)'}],
    'torch.binomial': [{'when': None, 'ops': ['aten::binomial'], 'alternative': '', 'probe': 'torch.binomial(float32[4, 8], float32[4, 8])'}],
    'torch.bucketize': [{'when': None, 'ops': ['aten::bucketize.Tensor'], 'alternative': ALT_BUCKETIZE, 'probe': 'torch.bucketize(float32[5, 5, 5], float32[5], out_int32=False, right=False)'}],
    'torch.channel_shuffle': [{'when': None, 'ops': ['aten::channel_shuffle'], 'alternative': ALT_CHANNEL_SHUFFLE, 'probe': 'torch.channel_shuffle(float32[2, 4, 3, 3], 2)'}],
    'torch.cholesky_inverse': [{'when': None, 'ops': ['aten::cholesky_inverse'], 'alternative': '', 'probe': 'torch.cholesky_inverse(float32[2, 5, 5])'}],
    'torch.cholesky_solve': [{'when': None, 'ops': ['aten::_cholesky_solve_helper'], 'alternative': '', 'probe': 'torch.cholesky_solve(float32[2, 5, 5], float32[2, 5, 5])'}],
    'torch.combinations': [{'when': None, 'ops': ['aten::masked_select'], 'alternative': ALT_COMBINATIONS, 'probe': 'torch.combinations(float32[4], r=1, with_replacement=False)'}],
    'torch.complex': [{'when': None, 'ops': ['aten::complex.out'], 'alternative': ALT_COMPLEX, 'probe': 'torch.complex(float32[5, 10, 5], float32[10, 5])'}],
    'torch.copysign': [{'when': None, 'ops': ['aten::copysign.Tensor'], 'alternative': ALT_COPYSIGN, 'probe': 'torch.copysign(float32[5, 10, 5], float32[10, 5])'}],
    'torch.corrcoef': [{'when': None, 'ops': ['aten::equal'], 'alternative': ALT_COV, 'probe': 'torch.corrcoef(float32[3, 2])'}],
    'torch.cov': [{'when': None, 'ops': ['aten::equal'], 'alternative': ALT_COV, 'probe': 'torch.cov(float32[2])'}],
    'torch.cross': [{'when': None, 'ops': ['aten::linalg_cross'], 'alternative': ALT_CROSS, 'probe': 'torch.cross(float32[5, 3, 5], float32[5, 3, 5], dim=1)'}],
    'torch.cummin': [{'when': None, 'ops': ['aten::_cummin_helper'], 'alternative': ALT_CUMMIN, 'probe': 'torch.cummin(float32[5, 5, 5], 0)'}],
    'torch.det': [{'when': None, 'ops': ['aten::_linalg_det'], 'alternative': ALT_DET, 'probe': 'torch.det(float32[3, 5, 5])'}],
    'torch.digamma': [{'when': None, 'ops': ['aten::digamma'], 'alternative': '', 'probe': 'torch.digamma(float32[20])'}],
    'torch.exp2': [{'when': None, 'ops': ['aten::exp2'], 'alternative': ALT_EXP2, 'probe': 'torch.exp2(float32[20])'}],
    'torch.fft.fft': [{'when': None, 'ops': ['aten::_fft_r2c'], 'alternative': '', 'probe': "torch.fft.fft(float32[5, 6, 7], n=10, dim=1, norm='ortho')"}],
    'torch.fft.fft2': [{'when': None, 'ops': ['aten::_fft_c2c'], 'alternative': '', 'probe': "torch.fft.fft2(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.fftn': [{'when': None, 'ops': ['aten::_fft_c2c'], 'alternative': '', 'probe': "torch.fft.fftn(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.hfft': [{'when': None, 'ops': ['aten::_fft_c2r'], 'alternative': '', 'probe': "torch.fft.hfft(float32[5, 6, 7], n=10, dim=1, norm='ortho')"}],
    'torch.fft.hfft2': [{'when': None, 'ops': ['aten::_fft_c2c', 'aten::_fft_c2r'], 'alternative': '', 'probe': "torch.fft.hfft2(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.hfftn': [{'when': None, 'ops': ['aten::_fft_c2c', 'aten::_fft_c2r'], 'alternative': '', 'probe': "torch.fft.hfftn(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.ifft': [{'when': None, 'ops': ['aten::_fft_r2c'], 'alternative': '', 'probe': "torch.fft.ifft(float32[5, 6, 7], n=10, dim=1, norm='ortho')"}],
    'torch.fft.ifft2': [{'when': None, 'ops': ['aten::_fft_c2c'], 'alternative': '', 'probe': "torch.fft.ifft2(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.ifftn': [{'when': None, 'ops': ['aten::_fft_c2c'], 'alternative': '', 'probe': "torch.fft.ifftn(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.ihfft': [{'when': None, 'ops': ['aten::_fft_r2c'], 'alternative': '', 'probe': "torch.fft.ihfft(float32[5, 6, 7], n=10, dim=1, norm='ortho')"}],
    'torch.fft.ihfft2': [{'when': None, 'ops': ['aten::_fft_c2c', 'aten::_fft_r2c', 'aten::conj_physical.out'], 'alternative': '', 'probe': "torch.fft.ihfft2(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.ihfftn': [{'when': None, 'ops': ['aten::_fft_c2c', 'aten::_fft_r2c', 'aten::conj_physical.out'], 'alternative': '', 'probe': "torch.fft.ihfftn(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.irfft': [{'when': None, 'ops': ['aten::_fft_c2r'], 'alternative': '', 'probe': "torch.fft.irfft(float32[5, 6, 7], n=10, dim=1, norm='ortho')"}],
    'torch.fft.irfft2': [{'when': None, 'ops': ['aten::_fft_c2r'], 'alternative': '', 'probe': "torch.fft.irfft2(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.irfftn': [{'when': None, 'ops': ['aten::_fft_c2r'], 'alternative': '', 'probe': "torch.fft.irfftn(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.rfft': [{'when': None, 'ops': ['aten::_fft_r2c'], 'alternative': '', 'probe': "torch.fft.rfft(float32[5, 6, 7], n=10, dim=1, norm='ortho')"}],
    'torch.fft.rfft2': [{'when': None, 'ops': ['aten::_fft_r2c'], 'alternative': '', 'probe': "torch.fft.rfft2(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fft.rfftn': [{'when': None, 'ops': ['aten::_fft_r2c'], 'alternative': '', 'probe': "torch.fft.rfftn(float32[5, 6, 7], s=(3, 10), dim=(1, 2), norm='ortho')"}],
    'torch.fmax': [{'when': None, 'ops': ['aten::fmax'], 'alternative': ALT_FMAX, 'probe': 'torch.fmax(float32[5, 10, 5], float32[10, 5])'}],
    'torch.fmin': [{'when': None, 'ops': ['aten::fmin'], 'alternative': ALT_FMAX, 'probe': 'torch.fmin(float32[5, 10, 5], float32[10, 5])'}],
    'torch.frexp': [{'when': None, 'ops': ['aten::frexp.Tensor_out'], 'alternative': '', 'probe': 'torch.frexp(float32[20])'}],
    'torch.gcd': [{'when': None, 'ops': ['aten::gcd'], 'alternative': '', 'probe': 'torch.gcd(int64[5, 10, 5], int64[10, 5])'}],
    'torch.geqrf': [{'when': None, 'ops': ['aten::geqrf'], 'alternative': '', 'probe': 'torch.geqrf(float32[2, 5, 5])'}],
    'torch.grid_sampler_2d': [{'when': None, 'ops': ['aten::grid_sampler_2d'], 'alternative': '', 'probe': 'torch.grid_sampler_2d(float32[2, 3, 5, 20], float32[2, 13, 10, 2], 0, 0, False)'}],
    'torch.grid_sampler_3d': [{'when': None, 'ops': ['aten::grid_sampler_3d'], 'alternative': '', 'probe': 'torch.grid_sampler_3d(float32[20, 21, 22, 23, 24], float32[20, 12, 11, 10, 3], 0, 0, False)'}],
    'torch.heaviside': [{'when': None, 'ops': ['aten::heaviside'], 'alternative': ALT_HEAVISIDE, 'probe': 'torch.heaviside(float32[5, 10, 5], float32[10, 5])'}],
    'torch.histc': [{'when': None, 'ops': ['aten::histc'], 'alternative': ALT_HIST, 'probe': 'torch.histc(float32[5], min=0, max=0)'}],
    'torch.histogram': [{'when': None, 'ops': ['aten::histogram.bin_ct', 'aten::histogram.bins_tensor'], 'alternative': ALT_HIST, 'probe': 'torch.histogram(float32[5], 1, weight=None, density=False)'}],
    'torch.histogramdd': [{'when': None, 'ops': ['aten::_histogramdd_bin_edges', 'aten::_histogramdd_from_bin_cts', 'aten::_histogramdd_from_bin_tensors'], 'alternative': '', 'probe': 'torch.histogramdd(float32[5, 5], (1, 1, 1, 1, ... (5)), weight=None, density=False)'}],
    'torch.hypot': [{'when': None, 'ops': ['aten::hypot'], 'alternative': ALT_HYPOT, 'probe': 'torch.hypot(float32[5, 10, 5], float32[10, 5])'}],
    'torch.i0': [{'when': None, 'ops': ['aten::i0'], 'alternative': '', 'probe': 'torch.i0(float32[5])'}],
    'torch.igamma': [{'when': None, 'ops': ['aten::igamma'], 'alternative': '', 'probe': 'torch.igamma(float32[5, 10, 5], float32[10, 5])'}],
    'torch.igammac': [{'when': None, 'ops': ['aten::igammac'], 'alternative': '', 'probe': 'torch.igammac(float32[5, 10, 5], float32[10, 5])'}],
    'torch.index_reduce': [{'when': None, 'ops': ['aten::index_reduce'], 'alternative': '', 'probe': "torch.index_reduce(float32[5, 5, 5], 1, int64[10], float32[5, 10, 5], 'mean', include_self=True)"}],
    'torch.isin': [{'when': None, 'ops': ['aten::isin.Tensor_Tensor'], 'alternative': ALT_ISIN, 'probe': 'torch.isin(float32[20], float32[5])'}],
    'torch.isposinf': [{'when': None, 'ops': ['aten::isposinf'], 'alternative': ALT_ISPOSINF, 'probe': 'torch.isposinf(float32[20, 20])'}],
    'torch.lcm': [{'when': None, 'ops': ['aten::lcm'], 'alternative': '', 'probe': 'torch.lcm(int64[5, 10, 5], int64[10, 5])'}],
    'torch.lgamma': [{'when': None, 'ops': ['aten::lgamma'], 'alternative': '', 'probe': 'torch.lgamma(float32[20])'}],
    'torch.linalg.cholesky': [{'when': None, 'ops': ['aten::linalg_cholesky_ex'], 'alternative': '', 'probe': 'torch.linalg.cholesky(float32[2, 5, 5], upper=True)'}],
    'torch.linalg.cholesky_ex': [{'when': None, 'ops': ['aten::linalg_cholesky_ex'], 'alternative': '', 'probe': 'torch.linalg.cholesky_ex(float32[2, 5, 5], upper=True)'}],
    'torch.linalg.cross': [{'when': None, 'ops': ['aten::linalg_cross'], 'alternative': ALT_CROSS, 'probe': 'torch.linalg.cross(float32[5, 3, 5], float32[5, 3, 5], dim=1)'}],
    'torch.linalg.det': [{'when': None, 'ops': ['aten::_linalg_det'], 'alternative': ALT_DET, 'probe': 'torch.linalg.det(float32[3, 5, 5])'}],
    'torch.linalg.eig': [{'when': None, 'ops': ['aten::linalg_eig'], 'alternative': ALT_EIG, 'probe': 'torch.linalg.eig(float32[2, 5, 5])'}],
    'torch.linalg.eigvals': [{'when': None, 'ops': ['aten::linalg_eig'], 'alternative': ALT_EIG, 'probe': 'torch.linalg.eigvals(float32[2, 5, 5])'}],
    'torch.linalg.householder_product': [{'when': None, 'ops': ['aten::linalg_householder_product'], 'alternative': '', 'probe': 'torch.linalg.householder_product(float32[2, 1, 6, 5], float32[2, 1, 5])'}],
    'torch.linalg.ldl_factor': [{'when': None, 'ops': ['aten::linalg_ldl_factor_ex'], 'alternative': '', 'probe': 'torch.linalg.ldl_factor(float32[2, 5, 5], hermitian=False)'}],
    'torch.linalg.ldl_factor_ex': [{'when': None, 'ops': ['aten::linalg_ldl_factor_ex'], 'alternative': '', 'probe': 'torch.linalg.ldl_factor_ex(float32[2, 5, 5], hermitian=False)'}],
    'torch.linalg.ldl_solve': [{'when': None, 'ops': ['aten::linalg_ldl_solve'], 'alternative': '', 'probe': 'torch.linalg.ldl_solve(float32[2, 5, 5], int32[2, 5], float32[5, 5], hermitian=False)'}],
    'torch.linalg.lstsq': [{'when': None, 'ops': ['aten::linalg_lstsq.out'], 'alternative': ALT_LSTSQ, 'probe': "torch.linalg.lstsq(float32[4, 3], float32[4, 3], driver='gels')"}],
    'torch.linalg.lu': [{'when': None, 'ops': ['aten::linalg_lu'], 'alternative': '', 'probe': 'torch.linalg.lu(float32[3, 7, 5], pivot=True)'}],
    'torch.linalg.lu_factor': [{'when': None, 'ops': ['aten::linalg_lu_factor_ex'], 'alternative': '', 'probe': 'torch.linalg.lu_factor(float32[3, 7, 5], pivot=True)'}],
    'torch.linalg.lu_factor_ex': [{'when': None, 'ops': ['aten::linalg_lu_factor_ex'], 'alternative': '', 'probe': 'torch.linalg.lu_factor_ex(float32[3, 7, 5], pivot=True)'}],
    'torch.linalg.lu_solve': [{'when': None, 'ops': ['aten::linalg_lu_solve'], 'alternative': '', 'probe': 'torch.linalg.lu_solve(float32[3, 3], int32[3], float32[3, 4], adjoint=True, left=True)'}],
    'torch.linalg.matrix_exp': [{'when': None, 'ops': ['aten::linalg_matrix_exp'], 'alternative': '', 'probe': 'torch.linalg.matrix_exp(float32[5, 5, 5])'}],
    'torch.linalg.qr': [{'when': None, 'ops': ['aten::linalg_qr'], 'alternative': '', 'probe': 'torch.linalg.qr(float32[2, 5, 5])'}],
    'torch.linalg.solve': [{'when': None, 'ops': ['aten::_linalg_solve_ex'], 'alternative': ALT_SOLVE, 'probe': 'torch.linalg.solve(float32[2, 2, 5, 5], float32[2, 2, 5])'}],
    'torch.linalg.solve_ex': [{'when': None, 'ops': ['aten::_linalg_solve_ex'], 'alternative': '', 'probe': 'torch.linalg.solve_ex(float32[2, 2, 5, 5], float32[2, 2, 5])'}],
    'torch.linalg.solve_triangular': [{'when': None, 'ops': ['aten::linalg_solve_triangular'], 'alternative': '', 'probe': 'torch.linalg.solve_triangular(float32[3, 3], float32[3, 1], upper=True, left=True, unitriangular=True)'}],
    'torch.linalg.tensorsolve': [{'when': None, 'ops': ['aten::_linalg_solve_ex'], 'alternative': '', 'probe': 'torch.linalg.tensorsolve(float32[3, 4, 4, 3], float32[3, 4], dims=None)'}],
    'torch.logaddexp': [{'when': None, 'ops': ['aten::logaddexp'], 'alternative': ALT_LOGADDEXP, 'probe': 'torch.logaddexp(float32[5, 10, 5], float32[10, 5])'}],
    'torch.logaddexp2': [{'when': None, 'ops': ['aten::logaddexp2'], 'alternative': '', 'probe': 'torch.logaddexp2(float32[5, 5], float32[5, 5])'}],
    'torch.logcumsumexp': [{'when': None, 'ops': ['aten::_logcumsumexp'], 'alternative': ALT_LOGCUMSUMEXP, 'probe': 'torch.logcumsumexp(float32[5, 5, 5], 0)'}],
    'torch.logspace': [{'when': None, 'ops': ['aten::logspace.out'], 'alternative': ALT_FACTORY, 'probe': "torch.logspace(0, -3, 0, dtype=torch.float32, device='xla')"}],
    'torch.lu': [{'when': None, 'ops': ['aten::linalg_lu_factor_ex'], 'alternative': '', 'probe': 'torch.lu(float32[7, 5], True, True)'}],
    'torch.lu_solve': [{'when': None, 'ops': ['aten::linalg_lu_solve'], 'alternative': '', 'probe': 'torch.lu_solve(float32[2, 3, 4], float32[2, 3, 3], int32[2, 3])'}],
    'torch.lu_unpack': [{'when': None, 'ops': ['aten::lu_unpack'], 'alternative': '', 'probe': 'torch.lu_unpack(float32[3, 7, 5], int32[3, 5])'}],
    'torch.matrix_exp': [{'when': None, 'ops': ['aten::linalg_matrix_exp'], 'alternative': '', 'probe': 'torch.matrix_exp(float32[5, 5, 5])'}],
    'torch.median': [{'when': None, 'ops': ['aten::median', 'aten::median.dim_values'], 'alternative': ALT_MEDIAN, 'probe': 'torch.median(float32[3, 5])'}],
    'torch.mode': [{'when': None, 'ops': ['aten::mode'], 'alternative': ALT_MODE, 'probe': 'torch.mode(float32[3000])'}],
    'torch.multinomial': [{'when': None, 'ops': ['aten::multinomial'], 'alternative': ALT_MULTINOMIAL, 'probe': 'torch.multinomial(float32[4, 10], 3)'}],
    'torch.mvlgamma': [{'when': None, 'ops': ['aten::lgamma'], 'alternative': '', 'probe': 'torch.mvlgamma(float32[5, 5], 1)'}],
    'torch.nanmean': [{'when': None, 'ops': ['aten::nansum'], 'alternative': ALT_NANMEAN, 'probe': 'torch.nanmean(float32[3, 5])'}],
    'torch.nanmedian': [{'when': None, 'ops': ['aten::nanmedian', 'aten::nanmedian.dim_values'], 'alternative': ALT_NANMEDIAN, 'probe': 'torch.nanmedian(float32[3, 5])'}],
    'torch.nansum': [{'when': None, 'ops': ['aten::nansum'], 'alternative': ALT_NANSUM, 'probe': 'torch.nansum(float32[3, 5])'}],
    'torch.nextafter': [{'when': None, 'ops': ['aten::nextafter'], 'alternative': '', 'probe': 'torch.nextafter(float32[5, 10, 5], float32[10, 5])'}],
    'torch.nn.functional.adaptive_max_pool3d': [{'when': None, 'ops': ['aten::adaptive_max_pool3d'], 'alternative': '', 'probe': 'torch.nn.functional.adaptive_max_pool3d(float32[3, 3, 4, 4, 6], (2, 3, None), True)'}],
    'torch.nn.functional.channel_shuffle': [{'when': None, 'ops': ['aten::channel_shuffle'], 'alternative': ALT_CHANNEL_SHUFFLE, 'probe': 'torch.nn.functional.channel_shuffle(float32[2, 6, 8, 8], 3)'}],
    'torch.nn.functional.ctc_loss': [{'when': None, 'ops': ['aten::_ctc_loss', 'aten::_ctc_loss.Tensor'], 'alternative': '', 'probe': "torch.nn.functional.ctc_loss(float32[50, 16, 20], int64[16, 30], [50, 50, 50, 50, ... (16)], [24, 29, 27, 23, ... (16)], reduction='none', zero_infinity=True)"}],
    'torch.nn.functional.embedding_bag': [{'when': None, 'ops': ['aten::_embedding_bag'], 'alternative': ALT_EMBEDDING_BAG, 'probe': "torch.nn.functional.embedding_bag(float32[10, 5], int64[5], offsets=int64[2], mode='sum', per_sample_weights=float32[5])"}],
    'torch.nn.functional.fractional_max_pool2d': [{'when': None, 'ops': ['aten::fractional_max_pool2d'], 'alternative': '', 'probe': 'torch.nn.functional.fractional_max_pool2d(float32[1, 3, 9, 9], 3, output_size=2, return_indices=False)'}],
    'torch.nn.functional.fractional_max_pool3d': [{'when': None, 'ops': ['aten::fractional_max_pool3d'], 'alternative': '', 'probe': 'torch.nn.functional.fractional_max_pool3d(float32[2, 3, 5, 5, 5], (2, 2, 2), output_size=2, return_indices=False)'}],
    'torch.nn.functional.grid_sample': [{'when': None, 'ops': ['aten::grid_sampler_2d'], 'alternative': '', 'probe': "torch.nn.functional.grid_sample(float32[2, 3, 5, 5], float32[2, 5, 5, 2], mode='bilinear', padding_mode='zeros', align_corners=False)"}],
    'torch.nn.functional.huber_loss': [{'when': None, 'ops': ['aten::huber_loss'], 'alternative': ALT_HUBER, 'probe': "torch.nn.functional.huber_loss(float32[5, 5, 5], float32[5, 5, 5], reduction='none', delta=8.7)"}],
    'torch.nn.functional.interpolate': [{'when': ('antialias', True), 'ops': ['aten::_upsample_bicubic2d_aa', 'aten::_upsample_bilinear2d_aa'], 'alternative': ALT_ANTIALIAS, 'probe': "torch.nn.functional.interpolate(float32[2, 3, 9, 9], size=(5, 5), mode='bilinear', antialias=True, align_corners=False)"}, {'when': ('mode', 'bicubic'), 'ops': ['aten::_upsample_bicubic2d_aa', 'aten::upsample_bicubic2d'], 'alternative': ALT_BICUBIC, 'probe': "torch.nn.functional.interpolate(float32[2, 3, 9, 9], size=(5, 5), mode='bicubic', antialias=False, align_corners=False)"}, {'when': ('mode', 'linear'), 'ops': ['aten::upsample_linear1d'], 'alternative': ALT_UPSAMPLE, 'probe': "torch.nn.functional.interpolate(float32[2, 3, 4], (3), scale_factor=None, mode='linear', align_corners=True)"}, {'when': ('mode', 'nearest-exact'), 'ops': ['aten::_upsample_nearest_exact1d', 'aten::_upsample_nearest_exact2d'], 'alternative': '', 'probe': "torch.nn.functional.interpolate(float32[2, 3, 4, 5], (3, 4), scale_factor=None, mode='nearest-exact', align_corners=None)"}],
    'torch.nn.functional.multi_margin_loss': [{'when': None, 'ops': ['aten::multi_margin_loss'], 'alternative': '', 'probe': 'torch.nn.functional.multi_margin_loss(float32[5, 10], int64[5], margin=1)'}],
    'torch.nn.functional.multilabel_margin_loss': [{'when': None, 'ops': ['aten::multilabel_margin_loss_forward'], 'alternative': '', 'probe': 'torch.nn.functional.multilabel_margin_loss(float32[10, 5], int64[10, 5])'}],
    'torch.nn.functional.unfold': [{'when': None, 'ops': ['aten::im2col'], 'alternative': ALT_IM2COL, 'probe': 'torch.nn.functional.unfold(float32[2, 3, 5, 5], 2, 1, 0, 1)'}],
    'torch.nn.functional.upsample': [{'when': ('mode', 'bicubic'), 'ops': ['aten::upsample_bicubic2d'], 'alternative': ALT_BICUBIC, 'probe': "torch.nn.functional.upsample(float32[2, 3, 8, 8], scale_factor=2, mode='bicubic')"}, {'when': ('mode', 'linear'), 'ops': ['aten::upsample_linear1d'], 'alternative': ALT_UPSAMPLE, 'probe': "torch.nn.functional.upsample(float32[2, 3, 8], scale_factor=2, mode='linear')"}],
    'torch.nonzero_static': [{'when': None, 'ops': ['aten::nonzero_static'], 'alternative': ALT_NONZERO_STATIC, 'probe': 'torch.nonzero_static(float32[5], size=0)'}],
    'torch.orgqr': [{'when': None, 'ops': ['aten::linalg_householder_product'], 'alternative': '', 'probe': 'torch.orgqr(float32[2, 1, 6, 5], float32[2, 1, 5])'}],
    'torch.ormqr': [{'when': None, 'ops': ['aten::ormqr'], 'alternative': '', 'probe': 'torch.ormqr(float32[5, 5], float32[5], float32[5, 5], left=True, transpose=True)'}],
    'torch.pca_lowrank': [{'when': None, 'ops': ['aten::linalg_qr'], 'alternative': '', 'probe': 'torch.pca_lowrank(float32[2, 4, 2], float32[2, 3, 2], q=2, center=False)'}],
    'torch.poisson': [{'when': None, 'ops': ['aten::poisson'], 'alternative': '', 'probe': 'torch.poisson(float32[4, 8])'}],
    'torch.polar': [{'when': None, 'ops': ['aten::polar.out'], 'alternative': ALT_POLAR, 'probe': 'torch.polar(float32[5, 10, 5], float32[10, 5])'}],
    'torch.polygamma': [{'when': None, 'ops': ['aten::polygamma'], 'alternative': '', 'probe': 'torch.polygamma(float32[5, 5], 1)'}],
    'torch.qr': [{'when': None, 'ops': ['aten::linalg_qr'], 'alternative': '', 'probe': 'torch.qr(float32[2, 5, 5])'}],
    'torch.renorm': [{'when': None, 'ops': ['aten::renorm'], 'alternative': '', 'probe': 'torch.renorm(float32[5, 5, 5], 2, 1, 0.5)'}],
    'torch.scatter_reduce': [{'when': ('include_self', False), 'ops': ['aten::scatter_reduce.two'], 'alternative': '', 'probe': "torch.scatter_reduce(float32[10, 5], 0, int64[5, 5], float32[5, 5], 'sum', include_self=False)"}, {'when': ('reduce', 'mean'), 'ops': ['aten::scatter_reduce.two'], 'alternative': '', 'probe': "torch.scatter_reduce(float32[10, 5], 0, int64[5, 5], float32[5, 5], 'mean', include_self=True)"}],
    'torch.searchsorted': [{'when': None, 'ops': ['aten::searchsorted.Tensor'], 'alternative': ALT_BUCKETIZE, 'probe': 'torch.searchsorted(float32[10], float32[], out_int32=False, right=False)'}],
    'torch.signbit': [{'when': None, 'ops': ['aten::signbit'], 'alternative': ALT_SIGNBIT, 'probe': 'torch.signbit(float32[20, 20])'}],
    'torch.sinc': [{'when': None, 'ops': ['aten::sinc'], 'alternative': ALT_SINC, 'probe': 'torch.sinc(float32[20])'}],
    'torch.special.airy_ai': [{'when': None, 'ops': ['aten::special_airy_ai'], 'alternative': '', 'probe': 'torch.special.airy_ai(float32[20])'}],
    'torch.special.bessel_j0': [{'when': None, 'ops': ['aten::special_bessel_j0'], 'alternative': '', 'probe': 'torch.special.bessel_j0(float32[20])'}],
    'torch.special.bessel_j1': [{'when': None, 'ops': ['aten::special_bessel_j1'], 'alternative': '', 'probe': 'torch.special.bessel_j1(float32[20])'}],
    'torch.special.bessel_y0': [{'when': None, 'ops': ['aten::special_bessel_y0'], 'alternative': '', 'probe': 'torch.special.bessel_y0(float32[20])'}],
    'torch.special.bessel_y1': [{'when': None, 'ops': ['aten::special_bessel_y1'], 'alternative': '', 'probe': 'torch.special.bessel_y1(float32[20])'}],
    'torch.special.chebyshev_polynomial_t': [{'when': None, 'ops': ['aten::special_chebyshev_polynomial_t'], 'alternative': '', 'probe': 'torch.special.chebyshev_polynomial_t(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.chebyshev_polynomial_u': [{'when': None, 'ops': ['aten::special_chebyshev_polynomial_u'], 'alternative': '', 'probe': 'torch.special.chebyshev_polynomial_u(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.chebyshev_polynomial_v': [{'when': None, 'ops': ['aten::special_chebyshev_polynomial_v'], 'alternative': '', 'probe': 'torch.special.chebyshev_polynomial_v(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.chebyshev_polynomial_w': [{'when': None, 'ops': ['aten::special_chebyshev_polynomial_w'], 'alternative': '', 'probe': 'torch.special.chebyshev_polynomial_w(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.digamma': [{'when': None, 'ops': ['aten::digamma'], 'alternative': '', 'probe': 'torch.special.digamma(float32[20])'}],
    'torch.special.entr': [{'when': None, 'ops': ['aten::special_entr'], 'alternative': ALT_ENTR, 'probe': 'torch.special.entr(float32[20])'}],
    'torch.special.erfcx': [{'when': None, 'ops': ['aten::special_erfcx'], 'alternative': '', 'probe': 'torch.special.erfcx(float32[20])'}],
    'torch.special.exp2': [{'when': None, 'ops': ['aten::exp2'], 'alternative': ALT_EXP2, 'probe': 'torch.special.exp2(float32[20])'}],
    'torch.special.gammainc': [{'when': None, 'ops': ['aten::igamma'], 'alternative': '', 'probe': 'torch.special.gammainc(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.gammaincc': [{'when': None, 'ops': ['aten::igammac'], 'alternative': '', 'probe': 'torch.special.gammaincc(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.gammaln': [{'when': None, 'ops': ['aten::lgamma'], 'alternative': '', 'probe': 'torch.special.gammaln(float32[20])'}],
    'torch.special.hermite_polynomial_h': [{'when': None, 'ops': ['aten::special_hermite_polynomial_h'], 'alternative': '', 'probe': 'torch.special.hermite_polynomial_h(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.hermite_polynomial_he': [{'when': None, 'ops': ['aten::special_hermite_polynomial_he'], 'alternative': '', 'probe': 'torch.special.hermite_polynomial_he(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.i0': [{'when': None, 'ops': ['aten::i0'], 'alternative': '', 'probe': 'torch.special.i0(float32[5])'}],
    'torch.special.i0e': [{'when': None, 'ops': ['aten::special_i0e'], 'alternative': '', 'probe': 'torch.special.i0e(float32[5])'}],
    'torch.special.i1': [{'when': None, 'ops': ['aten::special_i1'], 'alternative': '', 'probe': 'torch.special.i1(float32[5])'}],
    'torch.special.i1e': [{'when': None, 'ops': ['aten::special_i1e'], 'alternative': '', 'probe': 'torch.special.i1e(float32[5])'}],
    'torch.special.laguerre_polynomial_l': [{'when': None, 'ops': ['aten::special_laguerre_polynomial_l'], 'alternative': '', 'probe': 'torch.special.laguerre_polynomial_l(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.legendre_polynomial_p': [{'when': None, 'ops': ['aten::special_legendre_polynomial_p'], 'alternative': '', 'probe': 'torch.special.legendre_polynomial_p(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.log_ndtr': [{'when': None, 'ops': ['aten::special_log_ndtr'], 'alternative': '', 'probe': 'torch.special.log_ndtr(float32[20])'}],
    'torch.special.modified_bessel_i0': [{'when': None, 'ops': ['aten::special_modified_bessel_i0'], 'alternative': '', 'probe': 'torch.special.modified_bessel_i0(float32[20])'}],
    'torch.special.modified_bessel_i1': [{'when': None, 'ops': ['aten::special_modified_bessel_i1'], 'alternative': '', 'probe': 'torch.special.modified_bessel_i1(float32[20])'}],
    'torch.special.modified_bessel_k0': [{'when': None, 'ops': ['aten::special_modified_bessel_k0'], 'alternative': '', 'probe': 'torch.special.modified_bessel_k0(float32[20])'}],
    'torch.special.modified_bessel_k1': [{'when': None, 'ops': ['aten::special_modified_bessel_k1'], 'alternative': '', 'probe': 'torch.special.modified_bessel_k1(float32[20])'}],
    'torch.special.multigammaln': [{'when': None, 'ops': ['aten::lgamma'], 'alternative': '', 'probe': 'torch.special.multigammaln(float32[5, 5], 1)'}],
    'torch.special.ndtri': [{'when': None, 'ops': ['aten::special_ndtri'], 'alternative': '', 'probe': 'torch.special.ndtri(float32[20])'}],
    'torch.special.polygamma': [{'when': None, 'ops': ['aten::polygamma'], 'alternative': '', 'probe': 'torch.special.polygamma(float32[5, 5], 1)'}],
    'torch.special.psi': [{'when': None, 'ops': ['aten::digamma'], 'alternative': '', 'probe': 'torch.special.psi(float32[20])'}],
    'torch.special.round': [{'when': None, 'ops': ['aten::round.decimals'], 'alternative': '', 'probe': 'torch.special.round(float32[20, 20])'}],
    'torch.special.scaled_modified_bessel_k0': [{'when': None, 'ops': ['aten::special_scaled_modified_bessel_k0'], 'alternative': '', 'probe': 'torch.special.scaled_modified_bessel_k0(float32[20])'}],
    'torch.special.scaled_modified_bessel_k1': [{'when': None, 'ops': ['aten::special_scaled_modified_bessel_k1'], 'alternative': '', 'probe': 'torch.special.scaled_modified_bessel_k1(float32[20])'}],
    'torch.special.shifted_chebyshev_polynomial_t': [{'when': None, 'ops': ['aten::special_shifted_chebyshev_polynomial_t'], 'alternative': '', 'probe': 'torch.special.shifted_chebyshev_polynomial_t(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.shifted_chebyshev_polynomial_u': [{'when': None, 'ops': ['aten::special_shifted_chebyshev_polynomial_u'], 'alternative': '', 'probe': 'torch.special.shifted_chebyshev_polynomial_u(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.shifted_chebyshev_polynomial_v': [{'when': None, 'ops': ['aten::special_shifted_chebyshev_polynomial_v'], 'alternative': '', 'probe': 'torch.special.shifted_chebyshev_polynomial_v(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.shifted_chebyshev_polynomial_w': [{'when': None, 'ops': ['aten::special_shifted_chebyshev_polynomial_w'], 'alternative': '', 'probe': 'torch.special.shifted_chebyshev_polynomial_w(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.sinc': [{'when': None, 'ops': ['aten::sinc'], 'alternative': ALT_SINC, 'probe': 'torch.special.sinc(float32[20])'}],
    'torch.special.spherical_bessel_j0': [{'when': None, 'ops': ['aten::special_spherical_bessel_j0'], 'alternative': '', 'probe': 'torch.special.spherical_bessel_j0(float32[20])'}],
    'torch.special.xlog1py': [{'when': None, 'ops': ['aten::special_xlog1py'], 'alternative': ALT_XLOG1PY, 'probe': 'torch.special.xlog1py(float32[5, 10, 5], float32[10, 5])'}],
    'torch.special.zeta': [{'when': None, 'ops': ['aten::special_zeta'], 'alternative': '', 'probe': 'torch.special.zeta(float32[5, 10, 5], float32[10, 5])'}],
    'torch.stft': [{'when': None, 'ops': ['aten::_fft_r2c'], 'alternative': '', 'probe': 'torch.stft(float32[10, 100], n_fft=16, hop_length=4, center=False, return_complex=True)'}],
    'torch.svd_lowrank': [{'when': None, 'ops': ['aten::linalg_qr'], 'alternative': '', 'probe': 'torch.svd_lowrank(float32[2, 4, 2], float32[2, 3, 2], q=2, M=None)'}],
    'torch.tril_indices': [{'when': None, 'ops': ['aten::tril_indices'], 'alternative': ALT_TRIL, 'probe': "torch.tril_indices(0, 0, dtype=torch.int64, device='xla')"}],
    'torch.triu_indices': [{'when': None, 'ops': ['aten::triu_indices'], 'alternative': ALT_TRIL, 'probe': "torch.triu_indices(0, 0, dtype=torch.int64, device='xla')"}],
    'torch.unfold_copy': [{'when': None, 'ops': ['aten::unfold_copy'], 'alternative': '', 'probe': 'torch.unfold_copy(float32[5, 5, 5, 5], 0, 3, 1)'}],
    'torch.vdot': [{'when': None, 'ops': ['aten::vdot'], 'alternative': ALT_VDOT, 'probe': 'torch.vdot(float32[5], float32[5])'}],
}

# tensor method name -> [{when, ops, alternative, probe}]
FALLBACK_METHODS = {
    'addbmm': [{'when': None, 'ops': ['aten::addbmm'], 'alternative': ALT_ADDBMM, 'probe': 'float32[5, 10].addbmm(float32[5, 5, 5], float32[5, 5, 10], beta=1, alpha=1)'}],
    'addbmm_': [{'when': None, 'ops': ['aten::addbmm'], 'alternative': ALT_ADDBMM, 'probe': 'float32[5, 10].addbmm_(float32[5, 5, 5], float32[5, 5, 10], beta=1, alpha=1)'}],
    'addmv': [{'when': None, 'ops': ['aten::addmv'], 'alternative': ALT_ADDMV, 'probe': 'float32[5].addmv(float32[5, 10], float32[10], beta=1, alpha=1)'}],
    'addmv_': [{'when': None, 'ops': ['aten::addmv'], 'alternative': ALT_ADDMV, 'probe': 'float32[5].addmv_(float32[5, 10], float32[10], beta=1, alpha=1)'}],
    'aminmax': [{'when': None, 'ops': ['aten::aminmax'], 'alternative': ALT_AMINMAX, 'probe': 'float32[5, 5, 5].aminmax()'}],
    'angle': [{'when': None, 'ops': ['aten::angle'], 'alternative': ALT_ANGLE, 'probe': 'float32[20, 20].angle()'}],
    'bincount': [{'when': None, 'ops': ['aten::bincount'], 'alternative': ALT_COUNT, 'probe': 'int64[10].bincount(weights=None, minlength=0)'}],
    'cauchy_': [{'when': None, 'ops': ['aten::cauchy_'], 'alternative': '', 'probe': 'float32[5, 5, 5].cauchy_(-2, 1)'}],
    'cholesky_inverse': [{'when': None, 'ops': ['aten::cholesky_inverse'], 'alternative': '', 'probe': 'float32[2, 5, 5].cholesky_inverse()'}],
    'cholesky_solve': [{'when': None, 'ops': ['aten::_cholesky_solve_helper'], 'alternative': '', 'probe': 'float32[2, 5, 5].cholesky_solve(float32[2, 5, 5])'}],
    'copysign': [{'when': None, 'ops': ['aten::copysign.Tensor'], 'alternative': ALT_COPYSIGN, 'probe': 'float32[5, 10, 5].copysign(float32[10, 5])'}],
    'copysign_': [{'when': None, 'ops': ['aten::copysign.Tensor'], 'alternative': ALT_COPYSIGN, 'probe': 'float32[5, 10, 5].copysign_(float32[10, 5])'}],
    'corrcoef': [{'when': None, 'ops': ['aten::equal'], 'alternative': ALT_COV, 'probe': 'float32[3, 2].corrcoef()'}],
    'cov': [{'when': None, 'ops': ['aten::equal'], 'alternative': ALT_COV, 'probe': 'float32[2].cov()'}],
    'cross': [{'when': None, 'ops': ['aten::linalg_cross'], 'alternative': ALT_CROSS, 'probe': 'float32[5, 3, 5].cross(float32[5, 3, 5], dim=1)'}],
    'cummin': [{'when': None, 'ops': ['aten::_cummin_helper'], 'alternative': ALT_CUMMIN, 'probe': 'float32[5, 5, 5].cummin(0)'}],
    'det': [{'when': None, 'ops': ['aten::_linalg_det'], 'alternative': ALT_DET, 'probe': 'float32[3, 5, 5].det()'}],
    'digamma': [{'when': None, 'ops': ['aten::digamma'], 'alternative': '', 'probe': 'float32[20].digamma()'}],
    'digamma_': [{'when': None, 'ops': ['aten::digamma'], 'alternative': '', 'probe': 'float32[20].digamma_()'}],
    'exp2': [{'when': None, 'ops': ['aten::exp2'], 'alternative': ALT_EXP2, 'probe': 'float32[20].exp2()'}],
    'exp2_': [{'when': None, 'ops': ['aten::exp2'], 'alternative': ALT_EXP2, 'probe': 'float32[20].exp2_()'}],
    'fmax': [{'when': None, 'ops': ['aten::fmax'], 'alternative': ALT_FMAX, 'probe': 'float32[5, 10, 5].fmax(float32[10, 5])'}],
    'fmin': [{'when': None, 'ops': ['aten::fmin'], 'alternative': ALT_FMAX, 'probe': 'float32[5, 10, 5].fmin(float32[10, 5])'}],
    'frexp': [{'when': None, 'ops': ['aten::frexp.Tensor_out'], 'alternative': '', 'probe': 'float32[20].frexp()'}],
    'gcd': [{'when': None, 'ops': ['aten::gcd'], 'alternative': '', 'probe': 'int64[5, 10, 5].gcd(int64[10, 5])'}],
    'gcd_': [{'when': None, 'ops': ['aten::gcd'], 'alternative': '', 'probe': 'int64[5, 10, 5].gcd_(int64[10, 5])'}],
    'geometric_': [{'when': None, 'ops': ['aten::geometric_'], 'alternative': '', 'probe': 'float32[5, 5, 5].geometric_(0.8)'}],
    'geqrf': [{'when': None, 'ops': ['aten::geqrf'], 'alternative': '', 'probe': 'float32[2, 5, 5].geqrf()'}],
    'heaviside': [{'when': None, 'ops': ['aten::heaviside'], 'alternative': ALT_HEAVISIDE, 'probe': 'float32[5, 10, 5].heaviside(float32[10, 5])'}],
    'heaviside_': [{'when': None, 'ops': ['aten::heaviside'], 'alternative': ALT_HEAVISIDE, 'probe': 'float32[5, 10, 5].heaviside_(float32[10, 5])'}],
    'histc': [{'when': None, 'ops': ['aten::histc'], 'alternative': ALT_HIST, 'probe': 'float32[5].histc(min=0, max=0)'}],
    'histogram': [{'when': None, 'ops': ['aten::histogram.bin_ct', 'aten::histogram.bins_tensor'], 'alternative': ALT_HIST, 'probe': 'float32[5].histogram(1, weight=None, density=False)'}],
    'hypot': [{'when': None, 'ops': ['aten::hypot'], 'alternative': ALT_HYPOT, 'probe': 'float32[5, 10, 5].hypot(float32[10, 5])'}],
    'hypot_': [{'when': None, 'ops': ['aten::hypot'], 'alternative': ALT_HYPOT, 'probe': 'float32[5, 10, 5].hypot_(float32[10, 5])'}],
    'i0': [{'when': None, 'ops': ['aten::i0'], 'alternative': '', 'probe': 'float32[5].i0()'}],
    'i0_': [{'when': None, 'ops': ['aten::i0'], 'alternative': '', 'probe': 'float32[5].i0_()'}],
    'igamma': [{'when': None, 'ops': ['aten::igamma'], 'alternative': '', 'probe': 'float32[5, 10, 5].igamma(float32[10, 5])'}],
    'igamma_': [{'when': None, 'ops': ['aten::igamma'], 'alternative': '', 'probe': 'float32[5, 10, 5].igamma_(float32[10, 5])'}],
    'igammac': [{'when': None, 'ops': ['aten::igammac'], 'alternative': '', 'probe': 'float32[5, 10, 5].igammac(float32[10, 5])'}],
    'igammac_': [{'when': None, 'ops': ['aten::igammac'], 'alternative': '', 'probe': 'float32[5, 10, 5].igammac_(float32[10, 5])'}],
    'index_reduce': [{'when': None, 'ops': ['aten::index_reduce'], 'alternative': '', 'probe': "float32[5, 5, 5].index_reduce(1, int64[10], float32[5, 10, 5], 'mean', include_self=True)"}],
    'index_reduce_': [{'when': None, 'ops': ['aten::index_reduce'], 'alternative': '', 'probe': "float32[5, 5, 5].index_reduce_(1, int64[10], float32[5, 10, 5], 'mean', include_self=True)"}],
    'isposinf': [{'when': None, 'ops': ['aten::isposinf'], 'alternative': ALT_ISPOSINF, 'probe': 'float32[20, 20].isposinf()'}],
    'lcm': [{'when': None, 'ops': ['aten::lcm'], 'alternative': '', 'probe': 'int64[5, 10, 5].lcm(int64[10, 5])'}],
    'lcm_': [{'when': None, 'ops': ['aten::lcm'], 'alternative': '', 'probe': 'int64[5, 10, 5].lcm_(int64[10, 5])'}],
    'lgamma': [{'when': None, 'ops': ['aten::lgamma'], 'alternative': '', 'probe': 'float32[20].lgamma()'}],
    'lgamma_': [{'when': None, 'ops': ['aten::lgamma'], 'alternative': '', 'probe': 'float32[20].lgamma_()'}],
    'log_normal_': [{'when': None, 'ops': ['aten::log_normal_'], 'alternative': '', 'probe': 'float32[5, 5, 5].log_normal_(0, 0.5)'}],
    'logaddexp': [{'when': None, 'ops': ['aten::logaddexp'], 'alternative': ALT_LOGADDEXP, 'probe': 'float32[5, 10, 5].logaddexp(float32[10, 5])'}],
    'logaddexp2': [{'when': None, 'ops': ['aten::logaddexp2'], 'alternative': '', 'probe': 'float32[5, 5].logaddexp2(float32[5, 5])'}],
    'logcumsumexp': [{'when': None, 'ops': ['aten::_logcumsumexp'], 'alternative': ALT_LOGCUMSUMEXP, 'probe': 'float32[5, 5, 5].logcumsumexp(0)'}],
    'lu': [{'when': None, 'ops': ['aten::linalg_lu_factor_ex'], 'alternative': '', 'probe': 'float32[7, 5].lu(True, True)'}],
    'lu_solve': [{'when': None, 'ops': ['aten::linalg_lu_solve'], 'alternative': '', 'probe': 'float32[2, 3, 4].lu_solve(float32[2, 3, 3], int32[2, 3])'}],
    'matrix_exp': [{'when': None, 'ops': ['aten::linalg_matrix_exp'], 'alternative': '', 'probe': 'float32[5, 5, 5].matrix_exp()'}],
    'median': [{'when': None, 'ops': ['aten::median', 'aten::median.dim_values'], 'alternative': ALT_MEDIAN, 'probe': 'float32[3, 5].median()'}],
    'mode': [{'when': None, 'ops': ['aten::mode'], 'alternative': ALT_MODE, 'probe': 'float32[3000].mode()'}],
    'multinomial': [{'when': None, 'ops': ['aten::multinomial'], 'alternative': ALT_MULTINOMIAL, 'probe': 'float32[4, 10].multinomial(3)'}],
    'mvlgamma': [{'when': None, 'ops': ['aten::lgamma'], 'alternative': '', 'probe': 'float32[5, 5].mvlgamma(1)'}],
    'mvlgamma_': [{'when': None, 'ops': ['aten::lgamma'], 'alternative': '', 'probe': 'float32[5, 5].mvlgamma_(1)'}],
    'nanmean': [{'when': None, 'ops': ['aten::nansum'], 'alternative': ALT_NANMEAN, 'probe': 'float32[3, 5].nanmean()'}],
    'nanmedian': [{'when': None, 'ops': ['aten::nanmedian', 'aten::nanmedian.dim_values'], 'alternative': ALT_NANMEDIAN, 'probe': 'float32[3, 5].nanmedian()'}],
    'nansum': [{'when': None, 'ops': ['aten::nansum'], 'alternative': ALT_NANSUM, 'probe': 'float32[3, 5].nansum()'}],
    'nextafter': [{'when': None, 'ops': ['aten::nextafter'], 'alternative': '', 'probe': 'float32[5, 10, 5].nextafter(float32[10, 5])'}],
    'nextafter_': [{'when': None, 'ops': ['aten::nextafter'], 'alternative': '', 'probe': 'float32[5, 10, 5].nextafter_(float32[10, 5])'}],
    'nonzero_static': [{'when': None, 'ops': ['aten::nonzero_static'], 'alternative': ALT_NONZERO_STATIC, 'probe': 'float32[5].nonzero_static(size=0)'}],
    'orgqr': [{'when': None, 'ops': ['aten::linalg_householder_product'], 'alternative': '', 'probe': 'float32[2, 1, 6, 5].orgqr(float32[2, 1, 5])'}],
    'ormqr': [{'when': None, 'ops': ['aten::ormqr'], 'alternative': '', 'probe': 'float32[5, 5].ormqr(float32[5], float32[5, 5], left=True, transpose=True)'}],
    'polygamma': [{'when': None, 'ops': ['aten::polygamma'], 'alternative': '', 'probe': 'float32[5, 5].polygamma(1)'}],
    'qr': [{'when': None, 'ops': ['aten::linalg_qr'], 'alternative': '', 'probe': 'float32[2, 5, 5].qr()'}],
    'renorm': [{'when': None, 'ops': ['aten::renorm'], 'alternative': '', 'probe': 'float32[5, 5, 5].renorm(2, 1, 0.5)'}],
    'renorm_': [{'when': None, 'ops': ['aten::renorm'], 'alternative': '', 'probe': 'float32[5, 5, 5].renorm_(2, 1, 0.5)'}],
    'scatter_reduce': [{'when': ('include_self', False), 'ops': ['aten::scatter_reduce.two'], 'alternative': '', 'probe': "float32[10, 5].scatter_reduce(0, int64[5, 5], float32[5, 5], 'sum', include_self=False)"}, {'when': ('reduce', 'mean'), 'ops': ['aten::scatter_reduce.two'], 'alternative': '', 'probe': "float32[10, 5].scatter_reduce(0, int64[5, 5], float32[5, 5], 'mean', include_self=True)"}],
    'scatter_reduce_': [{'when': ('include_self', False), 'ops': ['aten::scatter_reduce.two'], 'alternative': '', 'probe': "float32[10, 5].scatter_reduce_(0, int64[5, 5], float32[5, 5], 'sum', include_self=False)"}, {'when': ('reduce', 'mean'), 'ops': ['aten::scatter_reduce.two'], 'alternative': '', 'probe': "float32[10, 5].scatter_reduce_(0, int64[5, 5], float32[5, 5], 'mean', include_self=True)"}],
    'signbit': [{'when': None, 'ops': ['aten::signbit'], 'alternative': ALT_SIGNBIT, 'probe': 'float32[20, 20].signbit()'}],
    'sinc': [{'when': None, 'ops': ['aten::sinc'], 'alternative': ALT_SINC, 'probe': 'float32[20].sinc()'}],
    'sinc_': [{'when': None, 'ops': ['aten::sinc'], 'alternative': ALT_SINC, 'probe': 'float32[20].sinc_()'}],
    'stft': [{'when': None, 'ops': ['aten::_fft_r2c'], 'alternative': '', 'probe': 'float32[10, 100].stft(n_fft=16, hop_length=4, center=False, return_complex=True)'}],
    'unfold': [{'when': None, 'ops': ['aten::unfold_copy'], 'alternative': ALT_UNFOLD, 'probe': 'float32[5, 5, 5, 5].unfold(0, 3, 1)'}],
    'vdot': [{'when': None, 'ops': ['aten::vdot'], 'alternative': ALT_VDOT, 'probe': 'float32[5].vdot(float32[5])'}],
}

# measured lowered (no fallback): (name, when); XLA007 never fires on these
LOWERED = [('.__getitem__', None),
 ('.multinomial', ('num_samples', 1)),
 ('.multinomial', ('replacement', True)),
 ('.nanquantile', None),
 ('.quantile', None),
 ('torch.multinomial', ('num_samples', 1)),
 ('torch.multinomial', ('replacement', True)),
 ('torch.nanquantile', None),
 ('torch.nn.functional.scaled_dot_product_attention', None),
 ('torch.quantile', None),
 ('torch.unravel_index', None),
 ('torch.view_as_complex', None)]

# fall back for some inputs only, told apart by no literal argument (the input's rank, dtype or
# size): (name, a call that fell back, a call that did not); XLA007 stays silent on these
CONDITIONAL = [('.round', 'float32[20].round(decimals=0)', 'float32[20, 20].round()'),
 ('.round_', 'float32[20].round_(decimals=0)', 'float32[20, 20].round_()'),
 ('torch.linalg.vecdot',
  'torch.linalg.vecdot(float32[5], float32[5])',
  'torch.linalg.vecdot(float32[1, 3], float32[1, 3])'),
 ('torch.nn.functional.adaptive_max_pool1d',
  'torch.nn.functional.adaptive_max_pool1d(float32[2, 8, 10], 4)',
  'torch.nn.functional.adaptive_max_pool1d(float32[3, 4, 4], 1, True)'),
 ('torch.nn.functional.adaptive_max_pool2d',
  'torch.nn.functional.adaptive_max_pool2d(float32[2, 3, 10, 10], 4)',
  'torch.nn.functional.adaptive_max_pool2d(float32[2, 4, 4, 4], (1, 1), True)'),
 ('torch.nn.functional.interpolate',
  "torch.nn.functional.interpolate(float32[2, 3, 4], (3), scale_factor=None, mode='nearest', "
  'align_corners=None)',
  "torch.nn.functional.interpolate(float32[2, 3, 4, 4], (3, 3), scale_factor=None, mode='nearest', "
  'align_corners=None)'),
 ('torch.nn.functional.upsample_nearest',
  'torch.nn.functional.upsample_nearest(float32[2, 3, 4, 4, 4], size=(3, 3, 3))',
  'torch.nn.functional.upsample_nearest(float32[2, 3, 4, 4], size=(3, 3))'),
 ('torch.round', 'torch.round(float32[20], decimals=0)', 'torch.round(float32[20, 20])')]

# the parameter order of the calls a ``when`` reads (a method's receiver is the first), and the
# defaults of those parameters: ``interpolate(x, None, 2, "bicubic")`` matches like ``mode="bicubic"``
CALL_SIGNATURES = {'interpolate': ('input',
                 'size',
                 'scale_factor',
                 'mode',
                 'align_corners',
                 'recompute_scale_factor',
                 'antialias'),
 'multinomial': ('input', 'num_samples', 'replacement', 'out'),
 'scatter_reduce': ('input', 'dim', 'index', 'src', 'reduce', 'include_self'),
 'upsample': ('input', 'size', 'scale_factor', 'mode', 'align_corners')}

CALL_DEFAULTS = {'interpolate': {'antialias': False, 'mode': 'nearest'},
 'multinomial': {'replacement': False},
 'scatter_reduce': {'include_self': True},
 'upsample': {'mode': 'nearest'}}

# factories: they fall back only when asked to build on the device (``device=``)
DEVICE_FACTORIES = frozenset(['torch.logspace', 'torch.tril_indices', 'torch.triu_indices'])
