"""Run under TRITON_INTERPRET=1 (tests/test_bench_cpu.py): the split-K decoding, grouped GEMM and int4 GEMM Triton
kernels on CPU against torch, in fp32 (the interpreter's bf16 dot is not bf16 hardware's). Prints one line per
kernel: name, max abs error, scale of the result."""

import numpy as np
import torch
import triton.runtime.interpreter as interp

# Triton 3.6's interpreter turns a scalar argument into a one-element array and reads it with int(), which numpy
# 2.4 refuses for arrays of shape (1,): read the element instead (loops bounded by a kernel argument need it)
_patch = interp._patch_lang_tensor


def _patched(tensor, scope):
    _patch(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))


interp._patch_lang_tensor = _patched

from kernscope.bench.kernels import decode_attn, quant  # noqa: E402
from kernscope.bench.operators.gemms import pack_int4, unpack_int4  # noqa: E402

torch.manual_seed(0)
q, k, v = torch.randn(2, 4, 1, 64), torch.randn(2, 2, 300, 64), torch.randn(2, 2, 300, 64)
ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
for splits in (1, 4, 8):  # 8 chunks of 64 over 300 keys: the last three are empty
    got = decode_attn.decode_attention(q, k, v, splits=splits)
    print(f"decode_splits{splits}", float((got - ref).abs().max()), float(ref.abs().max()))

sizes = [16, 0, 48, 32]
offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
x, w = torch.randn(sum(sizes), 64), torch.randn(4, 48, 64).transpose(1, 2)
ref = torch.cat([x[a:b] @ w[g] for g, (a, b) in enumerate(zip([0, *offs[:-1].tolist()], offs.tolist()))])
got = quant.grouped_gemm(x, w, offs, quant.grouped_gemm_sizes(offs), config={"BM": 16, "BN": 32, "BK": 32})
print("grouped", float((got - ref).abs().max()), float(ref.abs().max()))

wq = torch.randint(-8, 8, (256, 64), dtype=torch.int8)
assert torch.equal(unpack_int4(pack_int4(wq)), wq)
scales = torch.rand(2, 64) * 0.1
x = torch.randn(32, 256)
ref = x @ (wq.float() * scales.repeat_interleave(128, 0))
got = quant.int4_gemm(x, pack_int4(wq), scales, 128, config={"BM": 16, "BN": 32, "BK": 64})
print("int4", float((got - ref).abs().max()), float(ref.abs().max()))

# backward passes (autograd Functions around the Triton kernels) against torch's autograd
from kernscope.bench.kernels import more  # noqa: E402

for gelu in (False, True):
    a, b = torch.randn(8, 300, requires_grad=True), torch.randn(8, 300, requires_grad=True)
    g = torch.randn(8, 300)
    act = torch.nn.functional.gelu(a, approximate="tanh") if gelu else torch.nn.functional.silu(a)
    ra, rb = torch.autograd.grad(act * b, (a, b), g)
    ga, gb = torch.autograd.grad(more.glu_autograd(a, b, gelu), (a, b), g)
    print("geglu_bwd" if gelu else "swiglu_bwd", float(max((ga - ra).abs().max(), (gb - rb).abs().max())), float(ra.abs().max()))
x = torch.randn(1, 2, 16, 32, requires_grad=True)
ang = torch.outer(torch.arange(16.0), 1.0 / (10000.0 ** (torch.arange(0, 32, 2) / 32)))
cos, sin = ang.cos().contiguous(), ang.sin().contiguous()
g = torch.randn(1, 2, 16, 32)
c2, s2 = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
(rx,) = torch.autograd.grad(x * c2 + torch.cat((-x[..., 16:], x[..., :16]), -1) * s2, (x,), g)
(gx,) = torch.autograd.grad(more.rope_autograd(x, cos, sin), (x,), g)
print("rope_bwd", float((gx - rx).abs().max()), float(rx.abs().max()))
ids = torch.tensor([3, 1, 3, 0, 3, 7])  # repeated ids: their gradients add up
w = torch.randn(10, 40, requires_grad=True)
g = torch.randn(6, 40)
(rw,) = torch.autograd.grad(torch.nn.functional.embedding(ids, w), (w,), g)
(gw,) = torch.autograd.grad(more.embedding_autograd(ids, w), (w,), g)
print("embedding_bwd", float((gw - rw).abs().max()), float(rw.abs().max()))
