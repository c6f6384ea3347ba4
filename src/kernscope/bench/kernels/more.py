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
