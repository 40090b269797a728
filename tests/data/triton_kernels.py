import torch
import triton
import triton.language as tl
import torch_xla


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def fused_add(x, y):
    out = torch.empty_like(x)
    n = out.numel()
    grid = (triton.cdiv(n, 1024),)
    _add_kernel[grid](x, y, out, n, BLOCK=1024)
    if out.isnan().any():
        raise ValueError("nan")
    return out


def reference_add(x, y):
    out = x + y
    if out.isnan().any():
        print("nan")
    return out


def train(model, loader, opt, use_triton):
    device = torch_xla.device()
    for x in loader:
        h = model(x.to(device))
        if use_triton:
            h = fused_add(h, h)
        else:
            h = reference_add(h, h)
        loss = h.sum()
        loss.backward()
        opt.step()
        torch_xla.sync()
