"""A user program for ``kernscope intra run``: it imports kernels from a library module and launches them."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import libkernels  # noqa: E402

x = torch.randn(1 << 20, device="cuda")
y = torch.randn(1 << 20, device="cuda")
out = torch.empty_like(x)
for _ in range(3):
    libkernels.add_kernel[(1024,)](x, y, out, x.numel(), BLOCK_SIZE=1024)
assert torch.allclose(out, x + y)
m = torch.randn(256, 4096, device="cuda")
r = torch.empty(256, device="cuda")
libkernels.sum_rows[(256,)](m, r, 4096, 4096)
assert torch.allclose(r, m.sum(1), rtol=1e-3, atol=1e-2)
print("program done")
