"""Memory-bound Triton kernels: vector add, row softmax, LayerNorm / RMSNorm forward, cross entropy."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    BLOCK = 1024
    _add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, stride_x, stride_o, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_o + cols, (num / den).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    m, n = x.shape
    out = torch.empty_like(x)
    BLOCK = triton.next_power_of_2(n)
    warps = 4 if BLOCK <= 2048 else 8 if BLOCK <= 8192 else 16
    _softmax_kernel[(m,)](x, out, x.stride(0), out.stride(0), n, BLOCK=BLOCK, num_warps=warps)
    return out


@triton.jit
def _norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, stride, n_cols, eps, RMS: tl.constexpr, HAS_BIAS: tl.constexpr,
                 BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    if RMS:
        xc = x
    else:
        mean = tl.sum(x, axis=0) / n_cols
        xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = xc * rstd * w
    if HAS_BIAS:
        y += tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _norm(x, w, b, eps, rms):
    x2 = x.reshape(-1, x.shape[-1])
    out = torch.empty_like(x2)
    n = x2.shape[1]
    BLOCK = triton.next_power_of_2(n)
    warps = 4 if BLOCK <= 2048 else 8 if BLOCK <= 8192 else 16
    _norm_kernel[(x2.shape[0],)](x2, w, b if b is not None else w, out, x2.stride(0), n, eps, RMS=rms,
                                 HAS_BIAS=b is not None, BLOCK=BLOCK, num_warps=warps)
    return out.reshape(x.shape)


def layer_norm(x, w, b, eps=1e-5):
    return _norm(x, w, b, eps, rms=False)


def rms_norm(x, w, eps=1e-6):
    return _norm(x, w, None, eps, rms=True)


@triton.jit
def _cross_entropy_kernel(logits_ptr, target_ptr, loss_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row * stride
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):  # online logsumexp over the vocabulary
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    t = tl.load(target_ptr + row)
    xt = tl.load(base + t).to(tl.float32)
    tl.store(loss_ptr + row, tl.log(s) + m - xt)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    m, n = logits.shape
    loss = torch.empty(m, dtype=torch.float32, device=logits.device)
    _cross_entropy_kernel[(m,)](logits, target, loss, logits.stride(0), n, BLOCK=4096, num_warps=8)
    return loss.mean()
