"""A small training loop with one Triton kernel in it, profiled by PyTorch's profiler (Kineto), on a GPU.

    kernscope intra run --kernel bias_gelu -o OUT -- python tests/data/train_with_triton.py OUT/train.pt.trace.json

The Kineto trace holds every step's kernels (cuBLAS GEMMs, the Triton ``bias_gelu``, the optimizer); run
under ``kernscope intra run`` the same launches of ``bias_gelu`` are profiled inside, so
``kernscope intra align`` can place each one's records under its kernel on the GPU timeline.
"""

from __future__ import annotations

import sys

import torch
import triton
import triton.language as tl
from torch.profiler import ProfilerActivity, profile, schedule


@triton.jit
def bias_gelu(x_ptr, b_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    h = x + b
    y = 0.5 * h * (1.0 + tl.math.erf(h * 0.7071067811865476))
    tl.store(out_ptr + row * n_cols + offs, y, mask=mask)


def main(out: str, steps: int = 4) -> None:
    torch.manual_seed(0)
    d, rows = 2048, 4096
    w1 = torch.randn(d, d, device="cuda", requires_grad=True)
    b1 = torch.zeros(d, device="cuda")
    w2 = torch.randn(d, d, device="cuda", requires_grad=True)
    opt = torch.optim.SGD([w1, w2], lr=1e-4)
    x = torch.randn(rows, d, device="cuda")

    def step() -> None:
        h = x @ w1
        g = torch.empty_like(h)
        bias_gelu[(rows,)](h, b1, g, d, BLOCK=d)
        loss = (g.detach().requires_grad_() @ w2).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=steps)) as prof:
        for _ in range(2 + steps):
            step()
            prof.step()
    torch.cuda.synchronize()
    prof.export_chrome_trace(out)
    print("wrote", out)


if __name__ == "__main__":
    main(sys.argv[1])
