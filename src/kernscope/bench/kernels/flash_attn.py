"""Flash attention (forward and backward) in Triton, written for kernscope.

FlashAttention-2 structure: the forward pass streams K/V blocks with an online softmax and keeps
the per-row log-sum-exp (base 2); the backward pass recomputes probabilities from it, with one
kernel accumulating dK/dV per key block and one accumulating dQ per query block (no atomics).
Shapes: q, k, v are (batch, heads, seq, head_dim), fp16 or bf16; head_dim 64 or 128.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _attn_fwd(Q, K, V, O, L, qk_scale, sz, sh, sm, sd, H, N_CTX,
         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    base = (off_hz // H).to(tl.int64) * sz + (off_hz % H).to(tl.int64) * sh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < N_CTX
    q = tl.load(Q + base + offs_m[:, None] * sm + offs_d[None, :] * sd, mask=row_ok[:, None], other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    hi = N_CTX
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX
        kt = tl.load(K + base + cols[None, :] * sm + offs_d[:, None] * sd, mask=col_ok[None, :], other=0.0)
        s = tl.dot(q, kt) * qk_scale
        ok = col_ok[None, :]
        if CAUSAL:
            ok = ok & (offs_m[:, None] >= cols[None, :])
        s = tl.where(ok, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * sm + offs_d[None, :] * sd, mask=col_ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(O + base + offs_m[:, None] * sm + offs_d[None, :] * sd, acc.to(O.dtype.element_ty), mask=row_ok[:, None])
    tl.store(L + off_hz.to(tl.int64) * N_CTX + offs_m, m_i + tl.log2(l_i), mask=row_ok)


@triton.jit
def _attn_bwd_dkdv(Q, K, V, DO, L, D, DK, DV, qk_scale, sm_scale, sz, sh, sm, sd, H, N_CTX,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    start_n = tl.program_id(0)
    off_hz = tl.program_id(1)
    base = (off_hz // H).to(tl.int64) * sz + (off_hz % H).to(tl.int64) * sh
    row_base = off_hz.to(tl.int64) * N_CTX
    cols = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    col_ok = cols < N_CTX
    k = tl.load(K + base + cols[:, None] * sm + offs_d[None, :] * sd, mask=col_ok[:, None], other=0.0)
    v = tl.load(V + base + cols[:, None] * sm + offs_d[None, :] * sd, mask=col_ok[:, None], other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    lo = 0
    if CAUSAL:
        lo = (start_n * BLOCK_N // BLOCK_M) * BLOCK_M
    for start_m in range(lo, N_CTX, BLOCK_M):
        rows = start_m + tl.arange(0, BLOCK_M)
        row_ok = rows < N_CTX
        q = tl.load(Q + base + rows[:, None] * sm + offs_d[None, :] * sd, mask=row_ok[:, None], other=0.0)
        do = tl.load(DO + base + rows[:, None] * sm + offs_d[None, :] * sd, mask=row_ok[:, None], other=0.0)
        lse = tl.load(L + row_base + rows, mask=row_ok, other=0.0)
        delta = tl.load(D + row_base + rows, mask=row_ok, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        ok = row_ok[:, None] & col_ok[None, :]
        if CAUSAL:
            ok = ok & (rows[:, None] >= cols[None, :])
        p = tl.where(ok, tl.exp2(s - lse[:, None]), 0.0)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    dk = dk * sm_scale
    tl.store(DK + base + cols[:, None] * sm + offs_d[None, :] * sd, dk.to(DK.dtype.element_ty), mask=col_ok[:, None])
    tl.store(DV + base + cols[:, None] * sm + offs_d[None, :] * sd, dv.to(DV.dtype.element_ty), mask=col_ok[:, None])


@triton.jit
def _attn_bwd_dq(Q, K, V, DO, L, D, DQ, qk_scale, sm_scale, sz, sh, sm, sd, H, N_CTX,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    base = (off_hz // H).to(tl.int64) * sz + (off_hz % H).to(tl.int64) * sh
    row_base = off_hz.to(tl.int64) * N_CTX
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n = tl.arange(0, BLOCK_N)
    row_ok = rows < N_CTX
    q = tl.load(Q + base + rows[:, None] * sm + offs_d[None, :] * sd, mask=row_ok[:, None], other=0.0)
    do = tl.load(DO + base + rows[:, None] * sm + offs_d[None, :] * sd, mask=row_ok[:, None], other=0.0)
    lse = tl.load(L + row_base + rows, mask=row_ok, other=0.0)
    delta = tl.load(D + row_base + rows, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    hi = N_CTX
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < N_CTX
        k = tl.load(K + base + cols[:, None] * sm + offs_d[None, :] * sd, mask=col_ok[:, None], other=0.0)
        v = tl.load(V + base + cols[:, None] * sm + offs_d[None, :] * sd, mask=col_ok[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        ok = row_ok[:, None] & col_ok[None, :]
        if CAUSAL:
            ok = ok & (rows[:, None] >= cols[None, :])
        p = tl.where(ok, tl.exp2(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    dq = dq * sm_scale
    tl.store(DQ + base + rows[:, None] * sm + offs_d[None, :] * sd, dq.to(DQ.dtype.element_ty), mask=row_ok[:, None])


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    if not (q.shape == k.shape == v.shape and q.dim() == 4):
        raise ValueError("q, k, v must have the same (batch, heads, seq, head_dim) shape")
    if q.shape[-1] not in (16, 32, 64, 128):
        raise ValueError("head_dim must be 16, 32, 64 or 128")


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale):
        _check(q, k, v)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        b, h, n, d = q.shape
        o = torch.empty_like(q)
        lse = torch.empty((b * h, n), device=q.device, dtype=torch.float32)
        bm, bn = 128, 64
        grid = (triton.cdiv(n, bm), b * h)
        _attn_fwd[grid](q, k, v, o, lse, sm_scale * LOG2E, q.stride(0), q.stride(1), q.stride(2), q.stride(3), h, n,
                   BLOCK_M=bm, BLOCK_N=bn, HEAD_DIM=d, CAUSAL=causal, num_warps=4 if d <= 64 else 8,
                   num_stages=3 if d <= 64 else 2)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = do.contiguous()
        b, h, n, d = q.shape
        delta = (do.float() * o.float()).sum(-1).reshape(b * h, n)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        args = (ctx.sm_scale * LOG2E, ctx.sm_scale, q.stride(0), q.stride(1), q.stride(2), q.stride(3), h, n)
        warps = 4 if d <= 64 else 8
        _attn_bwd_dkdv[(triton.cdiv(n, 64), b * h)](q, k, v, do, lse, delta, dk, dv, *args, BLOCK_M=64, BLOCK_N=64,
                                               HEAD_DIM=d, CAUSAL=ctx.causal, num_warps=warps, num_stages=2)
        _attn_bwd_dq[(triton.cdiv(n, 64), b * h)](q, k, v, do, lse, delta, dq, *args, BLOCK_M=64, BLOCK_N=64,
                                             HEAD_DIM=d, CAUSAL=ctx.causal, num_warps=warps, num_stages=2)
        return dq, dk, dv, None, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None) -> torch.Tensor:
    """softmax(q kᵀ · scale [+ causal mask]) v, differentiable."""
    return _FlashAttention.apply(q, k, v, causal, sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1]))
