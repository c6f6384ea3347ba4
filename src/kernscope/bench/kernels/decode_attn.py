"""Split-K decoding attention in Triton: one query token per sequence against a long KV cache (grouped-query
heads), as flash-decoding splits it: the KV length is cut into chunks, each program attends every query head of
one KV head to one chunk (the group's queries as the rows of one tensor-core tile, so each KV tile is read once;
online softmax in fp32), and a second kernel merges the chunks' partial results by their log-sum-exp."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _decode_split_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, S, H, HKV, CHUNK, sqb, sqh, skb, skh, sks, svb, svh, svs,
                         scale, D: tl.constexpr, QG: tl.constexpr, BS: tl.constexpr, SPLITS: tl.constexpr):
    bk = tl.program_id(0)  # (batch, KV head)
    sp = tl.program_id(1)  # which chunk of the KV length
    b = bk // HKV
    kvh = bk % HKV
    group = H // HKV  # grouped-query attention: these query heads share the KV head
    r = tl.arange(0, QG)  # the group's query heads as tile rows (rows past the group: zeros, never stored)
    d = tl.arange(0, D)
    h = kvh * group + r
    q = tl.load(q_ptr + b.to(tl.int64) * sqb + h[:, None] * sqh + d[None, :], mask=r[:, None] < group, other=0.0)
    kbase = k_ptr + b.to(tl.int64) * skb + kvh.to(tl.int64) * skh
    vbase = v_ptr + b.to(tl.int64) * svb + kvh.to(tl.int64) * svh
    qk_scale = scale * 1.4426950408889634  # scores in base 2
    m = tl.full((QG,), float("-inf"), tl.float32)
    l = tl.zeros((QG,), tl.float32)
    acc = tl.zeros((QG, D), tl.float32)
    lo = sp * CHUNK
    hi = tl.minimum(lo + CHUNK, S)
    for s0 in range(0, CHUNK, BS):
        rs = lo + s0 + tl.arange(0, BS)
        ok = rs < hi
        k = tl.load(kbase + rs[:, None].to(tl.int64) * sks + d[None, :], mask=ok[:, None], other=0.0)
        x = tl.where(ok[None, :], tl.dot(q, tl.trans(k)) * qk_scale, float("-inf"))
        m_new = tl.maximum(m, tl.max(x, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # nothing seen yet: exp2(-inf) = 0, never -inf - -inf
        p = tl.exp2(x - m_use[:, None])
        alpha = tl.exp2(m - m_use)
        v = tl.load(vbase + rs[:, None].to(tl.int64) * svs + d[None, :], mask=ok[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        l = l * alpha + tl.sum(p, 1)
        m = m_new
    out = (b.to(tl.int64) * H + h) * SPLITS + sp
    has = l > 0  # a chunk past the KV length (the chunks round up) holds nothing: weight 0 in the merge
    rows = r < group
    tl.store(o_ptr + out[:, None] * D + d[None, :], tl.where(has[:, None], acc / tl.where(has, l, 1.0)[:, None], 0.0),
             mask=rows[:, None])
    tl.store(lse_ptr + out, tl.where(has, m + tl.log2(tl.where(has, l, 1.0)), float("-inf")), mask=rows)


@triton.jit
def _decode_merge_kernel(o_ptr, lse_ptr, out_ptr, D: tl.constexpr, SPLITS: tl.constexpr):
    bh = tl.program_id(0)
    d = tl.arange(0, D)
    sp = tl.arange(0, SPLITS)
    lse = tl.load(lse_ptr + bh.to(tl.int64) * SPLITS + sp)
    w = tl.exp2(lse - tl.max(lse, 0))
    o = tl.load(o_ptr + (bh.to(tl.int64) * SPLITS + sp)[:, None] * D + d[None, :])
    tl.store(out_ptr + bh.to(tl.int64) * D + d, (tl.sum(o * w[:, None], 0) / tl.sum(w, 0)).to(out_ptr.dtype.element_ty))


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, splits: int | None = None) -> torch.Tensor:
    """Attention of ``q`` (B, H, 1, D) over ``k``, ``v`` (B, HKV, S, D) (HKV divides H; last dimensions contiguous),
    softmax scale 1/sqrt(D): (B, H, 1, D). ``splits``: chunks of the KV length [default: about four programs per SM,
    chunks of at least 256 keys]."""
    b, h, one, dim = q.shape
    _, hkv, s, _ = k.shape
    assert one == 1 and h % hkv == 0 and dim in (64, 128, 256)
    assert q.stride(-1) == k.stride(-1) == v.stride(-1) == 1
    if splits is None:
        sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 8
        splits = max(1, min(triton.next_power_of_2(max(1, 4 * sms // (b * hkv))), triton.next_power_of_2(triton.cdiv(s, 256)), 128))
    splits = triton.next_power_of_2(splits)
    chunk = triton.cdiv(triton.cdiv(s, splits), 64) * 64
    partial = torch.empty((b * h, splits, dim), device=q.device, dtype=torch.float32)
    lse = torch.empty((b * h, splits), device=q.device, dtype=torch.float32)
    out = torch.empty_like(q)
    qg = max(16, triton.next_power_of_2(h // hkv))  # the tile's rows: tensor-core dots need 16
    _decode_split_kernel[(b * hkv, splits)](q, k, v, partial, lse, s, h, hkv, chunk, q.stride(0), q.stride(1), k.stride(0),
                                            k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
                                            1.0 / math.sqrt(dim), D=dim, QG=qg, BS=64, SPLITS=splits, num_warps=4,
                                            num_stages=3)
    _decode_merge_kernel[(b * h,)](partial, lse, out, D=dim, SPLITS=splits, num_warps=4)
    return out
