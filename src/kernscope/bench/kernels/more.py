"""Triton kernels of the operators added for TritonBench users: GLU gates (SwiGLU, GeGLU), embedding lookup,
rotary position embedding, row sum, row variance and mean (welford)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _glu_kernel(a_ptr, b_ptr, out_ptr, n, GELU: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if GELU:  # tanh approximation, as F.gelu(approximate="tanh")
        inner = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        act = 0.5 * a * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))
    else:  # SiLU
        act = a / (1.0 + tl.exp(-a))
    tl.store(out_ptr + offs, (act * b).to(out_ptr.dtype.element_ty), mask=mask)


def glu(a: torch.Tensor, b: torch.Tensor, gelu: bool) -> torch.Tensor:
    """``act(a) * b`` elementwise (act: SiLU, or GELU with the tanh approximation), fp32 math."""
    out = torch.empty_like(a)
    n = a.numel()
    BLOCK = 2048
    _glu_kernel[(triton.cdiv(n, BLOCK),)](a, b, out, n, GELU=gelu, BLOCK=BLOCK, num_warps=8)
    return out


@triton.jit
def _embedding_kernel(ids_ptr, w_ptr, out_ptr, dim, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    idx = tl.load(ids_ptr + row).to(tl.int64)
    for start in range(0, dim, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < dim
        v = tl.load(w_ptr + idx * dim + cols, mask=mask)
        tl.store(out_ptr + row.to(tl.int64) * dim + cols, v, mask=mask)


def embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``weight[ids]``: one program per token copies its row."""
    flat = ids.reshape(-1)
    dim = weight.shape[1]
    out = torch.empty((flat.numel(), dim), device=weight.device, dtype=weight.dtype)
    BLOCK = min(triton.next_power_of_2(dim), 4096)
    _embedding_kernel[(flat.numel(),)](flat, weight, out, dim, BLOCK=BLOCK, num_warps=4)
    return out.reshape(*ids.shape, dim)


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, seq, HALF: tl.constexpr):
    row = tl.program_id(0)  # one (batch, head, position) row of D = 2 * HALF values
    pos = row % seq
    cols = tl.arange(0, HALF)
    base = row.to(tl.int64) * (2 * HALF)
    x1 = tl.load(x_ptr + base + cols).to(tl.float32)
    x2 = tl.load(x_ptr + base + HALF + cols).to(tl.float32)
    c = tl.load(cos_ptr + pos * HALF + cols).to(tl.float32)
    s = tl.load(sin_ptr + pos * HALF + cols).to(tl.float32)
    tl.store(out_ptr + base + cols, (x1 * c - x2 * s).to(out_ptr.dtype.element_ty))
    tl.store(out_ptr + base + HALF + cols, (x2 * c + x1 * s).to(out_ptr.dtype.element_ty))


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding of a contiguous (B, H, S, D) tensor, rotate-half convention (Llama/NeoX);
    ``cos``/``sin``: (S, D/2)."""
    out = torch.empty_like(x)
    b, h, s, d = x.shape
    _rope_kernel[(b * h * s,)](x, cos, sin, out, s, HALF=d // 2, num_warps=1 if d <= 128 else 2)
    return out


@triton.jit
def _row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    base = row.to(tl.int64) * n_cols
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over the last dimension of a contiguous 2-D tensor, fp32 accumulation."""
    m, n = x.shape
    out = torch.empty(m, device=x.device, dtype=x.dtype)
    BLOCK = min(triton.next_power_of_2(n), 4096)
    _row_sum_kernel[(m,)](x, out, n, BLOCK=BLOCK, num_warps=8 if BLOCK >= 2048 else 4)
    return out


@triton.jit
def _var_mean_kernel(x_ptr, var_ptr, mean_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row.to(tl.int64) * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols  # two passes over the row in registers: exact like Welford's update
    tl.store(var_ptr + row, var.to(var_ptr.dtype.element_ty))
    tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))


def var_mean(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(population variance, mean) of each row of a contiguous 2-D tensor (rows up to 65,536 values), fp32 math,
    as ``torch.var_mean(x, -1, correction=0)``."""
    m, n = x.shape
    var = torch.empty(m, device=x.device, dtype=x.dtype)
    mean = torch.empty(m, device=x.device, dtype=x.dtype)
    BLOCK = triton.next_power_of_2(n)
    _var_mean_kernel[(m,)](x, var, mean, n, BLOCK=BLOCK, num_warps=4 if BLOCK <= 2048 else 8 if BLOCK <= 8192 else 16)
    return var, mean


# -- backward passes (TritonBench runs these operators fwd and bwd) ---------------------------------------------
@triton.jit
def _glu_bwd_kernel(a_ptr, b_ptr, g_ptr, da_ptr, db_ptr, n, GELU: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if GELU:  # d/da of 0.5 a (1 + tanh(u)), u = c (a + 0.044715 a^3)
        u = 0.7978845608028654 * (a + 0.044715 * a * a * a)
        t = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0
        act = 0.5 * a * (1.0 + t)
        dact = 0.5 * (1.0 + t) + 0.5 * a * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3 * 0.044715 * a * a)
    else:  # d/da of a sigmoid(a) = sigmoid(a) (1 + a (1 - sigmoid(a)))
        sg = 1.0 / (1.0 + tl.exp(-a))
        act = a * sg
        dact = sg * (1.0 + a * (1.0 - sg))
    tl.store(da_ptr + offs, (g * b * dact).to(da_ptr.dtype.element_ty), mask=mask)
    tl.store(db_ptr + offs, (g * act).to(db_ptr.dtype.element_ty), mask=mask)


class _Glu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, gelu):
        ctx.save_for_backward(a, b)
        ctx.gelu = gelu
        return glu(a, b, gelu)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        da, db = torch.empty_like(a), torch.empty_like(b)
        n = a.numel()
        BLOCK = 2048
        _glu_bwd_kernel[(triton.cdiv(n, BLOCK),)](a, b, g.contiguous(), da, db, n, GELU=ctx.gelu, BLOCK=BLOCK, num_warps=8)
        return da, db, None


def glu_autograd(a: torch.Tensor, b: torch.Tensor, gelu: bool) -> torch.Tensor:
    """:func:`glu` with a Triton backward (one pass: both gradients, fp32 math)."""
    out: torch.Tensor = _Glu.apply(a, b, gelu)
    return out


class _Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cos, sin):
        ctx.save_for_backward(cos, sin)
        return rope(x, cos, sin)

    @staticmethod
    def backward(ctx, g):
        cos, sin = ctx.saved_tensors
        return rope(g.contiguous(), cos, -sin), None, None  # the rotation's transpose: the same kernel, angle negated


def rope_autograd(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """:func:`rope` with a Triton backward (the rotation by the opposite angle)."""
    out: torch.Tensor = _Rope.apply(x, cos, sin)
    return out


@triton.jit
def _embedding_bwd_kernel(ids_ptr, g_ptr, dw_ptr, dim, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    idx = tl.load(ids_ptr + row).to(tl.int64)
    for start in range(0, dim, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < dim
        g = tl.load(g_ptr + row.to(tl.int64) * dim + cols, mask=mask, other=0.0).to(tl.float32)
        tl.atomic_add(dw_ptr + idx * dim + cols, g, mask=mask)


class _Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids, weight):
        ctx.save_for_backward(ids)
        ctx.shape = weight.shape
        ctx.dtype = weight.dtype
        return embedding(ids, weight)

    @staticmethod
    def backward(ctx, g):
        (ids,) = ctx.saved_tensors
        flat = ids.reshape(-1)
        dim = ctx.shape[1]
        dw = torch.zeros(ctx.shape, device=g.device, dtype=torch.float32)  # fp32 sums: repeated ids add up exactly
        BLOCK = min(triton.next_power_of_2(dim), 4096)
        _embedding_bwd_kernel[(flat.numel(),)](flat, g.reshape(-1, dim).contiguous(), dw, dim, BLOCK=BLOCK, num_warps=4)
        return None, dw.to(ctx.dtype)


def embedding_autograd(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """:func:`embedding` with a Triton backward (each token's gradient row added to its weight row, fp32 atomics)."""
    out: torch.Tensor = _Embedding.apply(ids, weight)
    return out
