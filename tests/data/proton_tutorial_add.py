"""A program in the style of Proton's TTGIR-override tutorial: it starts its own Proton instrumentation session
(``--increase-accuracy``: clock32 + time_shift) around one vector-add launch; for ``intra override --no-session``."""

import argparse

import torch
import triton
import triton.language as tl
import triton.profiler as proton
from triton.profiler.mode import Default


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


ap = argparse.ArgumentParser()
ap.add_argument("--increase-accuracy", action="store_true")
args = ap.parse_args()
x = torch.rand(98432, device="cuda")
y = torch.rand(98432, device="cuda")
out = torch.empty_like(x)
if args.increase_accuracy:
    proton.start("add", data="trace", backend="instrumentation", mode=Default(optimizations="clock32,time_shift"))
else:
    proton.start("add", data="trace", backend="instrumentation")
add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK_SIZE=1024)
proton.finalize()
torch.testing.assert_close(out, x + y)
