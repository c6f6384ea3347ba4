"""A tiled Triton GEMM (bf16/fp16, and fp8 e4m3 inputs on GPUs that support them), fp32 accumulation."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def _configs():
    out = []
    for bm, bn, bk, st, w in [(128, 256, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 128, 3, 8), (64, 128, 64, 4, 4),
                              (256, 128, 64, 3, 8)]:
        out.append(triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_stages=st, num_warps=w))
    return out


@triton.autotune(configs=_configs(), key=["M", "N", "K"])
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, scale_a_ptr, scale_b_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                   HAS_BIAS: tl.constexpr, HAS_SCALE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                   GROUP: tl.constexpr):
    pid = tl.program_id(0)
    n_m = tl.cdiv(M, BM)
    n_n = tl.cdiv(N, BN)
    per_group = GROUP * n_n
    g = pid // per_group
    first_m = g * GROUP
    size_m = min(n_m - first_m, GROUP)
    pm = first_m + ((pid % per_group) % size_m)
    pn = (pid % per_group) // size_m
    rm = (pm * BM + tl.arange(0, BM)) % M
    rn = (pn * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(tl.cdiv(K, BK)):
        kk = k * BK + rk
        x = tl.load(a, mask=kk[None, :] < K, other=0.0)
        y = tl.load(b, mask=kk[:, None] < K, other=0.0)
        acc = tl.dot(x, y, acc)
        a += BK * sak
        b += BK * sbk
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    if HAS_SCALE:  # fp8 GEMM's epilogue: the per-tensor scales of A and B (fp32 scalars)
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    if HAS_BIAS:  # addmm's epilogue: the bias row added to the fp32 accumulator
        acc += tl.load(bias_ptr + cn, mask=cn < N, other=0.0).to(tl.float32)[None, :]
    c = c_ptr + cm[:, None] * scm + cn[None, :] * scn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype | None = None,
           bias: torch.Tensor | None = None, scale_a: torch.Tensor | None = None,
           scale_b: torch.Tensor | None = None) -> torch.Tensor:
    """``a @ b`` (times ``scale_a * scale_b``, fp32 scalars, then + ``bias``, a length-N row: both fused in the
    epilogue: fp8 GEMM, addmm), fp32 accumulation."""
    m, k = a.shape
    k2, n = b.shape
    assert k == k2
    c = torch.empty((m, n), device=a.device, dtype=out_dtype or a.dtype)
    grid = lambda META: (triton.cdiv(m, META["BM"]) * triton.cdiv(n, META["BN"]),)  # noqa: E731
    scaled = scale_a is not None and scale_b is not None
    _matmul_kernel[grid](a, b, c, bias if bias is not None else c, scale_a if scaled else c, scale_b if scaled else c,
                         m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                         HAS_BIAS=bias is not None, HAS_SCALE=scaled)
    return c
