"""Triton kernels of the GEMM family added for TritonBench users: the weight-only int4 GEMM (bf16 activations times
int4 weights, dequantized in registers) and the grouped GEMM of MoE experts (one launch for every expert)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def _int4_configs():
    return [triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_stages=st, num_warps=w)
            for bm, bn, bk, st, w in [(128, 128, 64, 3, 8), (64, 128, 128, 3, 4), (128, 256, 64, 3, 8), (16, 128, 128, 4, 4),
                                      (32, 64, 128, 4, 4)]]


@triton.autotune(configs=_int4_configs(), key=["M", "N", "K"])
@triton.jit
def _int4_gemm_kernel(x_ptr, w_ptr, s_ptr, c_ptr, M, N, K, sxm, sxk, swk, swn, ssg, ssn, scm, scn,
                      GROUP_K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = X @ dequant(W): W packed two int4 values a byte along K (low nibble: row 2i, high: row 2i+1, each stored
    as value + 8), one bf16 scale per GROUP_K rows and column. Each K tile is one scale group's part (GROUP_K % BK
    == 0): the tile's dot product is scaled once, in fp32."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    rk2 = tl.arange(0, BK // 2)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        x = tl.load(x_ptr + rm[:, None] * sxm + (k0 + rk)[None, :] * sxk, mask=rm[:, None] < M, other=0.0)
        p = tl.load(w_ptr + (k0 // 2 + rk2)[:, None] * swk + rn[None, :] * swn, mask=rn[None, :] < N, other=0)
        lo = (p & 0xF).to(tl.int8) - 8
        hi = ((p >> 4) & 0xF).to(tl.int8) - 8
        w = tl.reshape(tl.permute(tl.join(lo, hi), (0, 2, 1)), (BK, BN)).to(x.dtype)  # rows 2i (lo), 2i + 1 (hi)
        s = tl.load(s_ptr + (k0 // GROUP_K) * ssg + rn * ssn, mask=rn < N, other=0.0).to(tl.float32)
        acc += tl.dot(x, w).to(tl.float32) * s[None, :]
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def _launch(kernel, grid, args, config: dict | None, **meta) -> None:
    """The autotuned ``kernel``, or with ``config`` (tile sizes) its plain kernel: Triton's CPU interpreter cannot
    time configs, so the CPU tests pass one."""
    if config is None:
        kernel[grid](*args, **meta)
    else:
        kernel.fn[grid](*args, **meta, **config)


def int4_gemm(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, group: int,
              config: dict | None = None) -> torch.Tensor:
    """``x @ dequant(packed, scales)``: x (M, K) bf16/fp16, packed (K / 2, N) uint8, scales (K / group, N).
    ``config``: fixed tile sizes (``BM``, ``BN``, ``BK``) instead of autotuning."""
    m, k = x.shape
    n = packed.shape[1]
    assert packed.shape[0] * 2 == k and k % group == 0 and group % 128 == 0
    c = torch.empty((m, n), device=x.device, dtype=x.dtype)
    grid = lambda META: (triton.cdiv(m, META["BM"]), triton.cdiv(n, META["BN"]))  # noqa: E731
    _launch(_int4_gemm_kernel, grid, (x, packed, scales, c, m, n, k, x.stride(0), x.stride(1), packed.stride(0),
                                      packed.stride(1), scales.stride(0), scales.stride(1), c.stride(0), c.stride(1)),
            config, GROUP_K=group)
    return c


def _grouped_configs():
    return [triton.Config({"BM": bm, "BN": bn, "BK": bk}, num_stages=st, num_warps=w)
            for bm, bn, bk, st, w in [(128, 128, 64, 4, 4), (128, 256, 64, 3, 8), (64, 128, 64, 4, 4), (128, 64, 64, 4, 4)]]


@triton.autotune(configs=_grouped_configs(), key=["N", "K", "G"])
@triton.jit
def _grouped_gemm_kernel(x_ptr, w_ptr, c_ptr, offs_ptr, N, K, G, sxm, sxk, swg, swk, swn, scm, scn,
                         G_POW2: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Rows ``offs[g-1]:offs[g]`` of X times W[g] for every group g, in one launch: programs walk the tiles of every
    group in turn (a program's group: how many groups' tiles end at or before its tile; empty groups own none)."""
    pid = tl.program_id(0)
    n_n = tl.cdiv(N, BN)
    gi = tl.arange(0, G_POW2)
    ends = tl.load(offs_ptr + gi, mask=gi < G, other=0)  # cumulative rows: group g is rows [ends[g-1], ends[g])
    starts = tl.where(gi > 0, tl.load(offs_ptr + gi - 1, mask=(gi > 0) & (gi < G), other=0), 0)
    tiles = tl.where(gi < G, tl.cdiv(ends - starts, BM) * n_n, 0)
    last = tl.cumsum(tiles, 0)  # tiles of groups 0..g
    g = tl.sum((last <= pid).to(tl.int32), 0)
    if g < G:
        first_tile = tl.sum(tl.where(gi == g, last - tiles, 0), 0)
        row0 = tl.sum(tl.where(gi == g, starts, 0), 0)
        row1 = tl.sum(tl.where(gi == g, ends, 0), 0)
        t = pid - first_tile
        pm = t // n_n
        pn = t % n_n
        rm = row0 + pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        xp = x_ptr + rm[:, None].to(tl.int64) * sxm + rk[None, :] * sxk
        wp = w_ptr + g.to(tl.int64) * swg + rk[:, None] * swk + rn[None, :] * swn
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            x = tl.load(xp, mask=(rm[:, None] < row1) & ((k0 + rk)[None, :] < K), other=0.0)
            w = tl.load(wp, mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(x, w, acc)
            xp += BK * sxk
            wp += BK * swk
        tl.store(c_ptr + rm[:, None].to(tl.int64) * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
                 mask=(rm[:, None] < row1) & (rn[None, :] < N))


def grouped_gemm_sizes(offs: torch.Tensor) -> list[int]:
    """Each group's rows (from the cumulative ``offs``), on the host: read once per input, outside the timing, so
    the launch's grid fits the tile the autotuner picks."""
    ends = offs.cpu().to(torch.int64).tolist()
    return [b - a for a, b in zip([0, *ends[:-1]], ends)]


def grouped_gemm(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor, sizes: list[int],
                 config: dict | None = None) -> torch.Tensor:
    """``x[offs[g-1]:offs[g]] @ w[g]`` for every group g (x (M, K), w (G, K, N), offs (G,) int32 cumulative row
    counts; ``sizes``: :func:`grouped_gemm_sizes`), one launch. ``config``: fixed tile sizes instead of autotuning."""
    m, k = x.shape
    g, k2, n = w.shape
    assert k == k2 and offs.numel() == g == len(sizes)
    c = torch.empty((m, n), device=x.device, dtype=x.dtype)
    grid = lambda META: (sum(triton.cdiv(s, META["BM"]) for s in sizes) * triton.cdiv(n, META["BN"]),)  # noqa: E731
    _launch(_grouped_gemm_kernel, grid, (x, w, c, offs, n, k, g, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                         w.stride(2), c.stride(0), c.stride(1)), config, G_POW2=triton.next_power_of_2(g))
    return c
