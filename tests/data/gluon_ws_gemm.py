"""A warp-specialized Hopper GEMM in Gluon (Triton 3.6's API): a one-warp producer partition issues TMA loads into a
ring of shared-memory stages, the default partition (one warpgroup) runs WGMMA on them, mbarriers hand each stage
over and back. ``PROFILE`` instruments it with kernscope's Profiler, one recorder per warp group (group 0: the
consumer's ``wait_data`` and ``mma`` per K step, group 1: the producer's ``wait_slot`` and ``tma`` per K step;
``CYCLES``: %clock64 records instead of %globaltimer);
``PROTON`` with Proton's scopes instead (the same names), for the overhead comparison. C = A @ B, fp16 in, fp32
accumulate, fp16 out; A (M, K) and B (K, N) row-major, M, N multiples of the tile.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernscope.intra import Profiler, tid

try:  # Proton's DSL (only for the PROTON variant)
    import triton.profiler.language as pl
except ImportError:  # pragma: no cover - a Triton without Proton
    pl = None

PRODUCER_WARPS = gl.constexpr(1)


@gluon.jit
def _consumer(a_bufs, b_bufs, ready, empty, c_desc, off_m, off_n, k_tiles, buf, STAGES: gl.constexpr,
              PROFILE: gl.constexpr, PROTON: gl.constexpr, CYCLES: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BN, 16])
    acc = gl.zeros((BM, BN), dtype=gl.float32, layout=layout)
    prof = Profiler.create(buf, 0, 2, is_leader=(tid(0) % (32 * num_warps) == 0), ENABLE_PROFILING=PROFILE, SYNC=False,
                           CYCLES=CYCLES)
    for i in range(k_tiles):
        s = i % STAGES
        phase = (i // STAGES) & 1
        prof = prof.enter("wait_data")
        if PROTON:
            pl.enter_scope("wait_data")
        mbarrier.wait(ready.index(s), phase)
        if PROTON:
            pl.exit_scope("wait_data")
        prof = prof.exit("wait_data")
        prof = prof.enter("mma")
        if PROTON:
            pl.enter_scope("mma")
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        if PROTON:
            pl.exit_scope("mma")
        prof = prof.exit("mma")
        mbarrier.arrive(empty.index(s), count=1)  # the stage is free for the producer's next load
    c_smem = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_type.shape, c_desc.layout)
    c_smem.store(acc.to(c_desc.dtype))
    fence_async_shared()  # the generic-proxy stores above must be visible to the TMA (async proxy) that reads them
    tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_smem)
    tma.store_wait(pendings=0)


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, k_tiles, buf, STAGES: gl.constexpr,
              PROFILE: gl.constexpr, PROTON: gl.constexpr, CYCLES: gl.constexpr):
    BK: gl.constexpr = a_desc.block_type.shape[1]
    prof = Profiler.create(buf, 1, 2, is_leader=(tid(0) % 32 == 0), ENABLE_PROFILING=PROFILE, SYNC=False,
                           CYCLES=CYCLES)
    for i in range(k_tiles):
        s = i % STAGES
        phase = (i // STAGES) & 1
        prof = prof.enter("wait_slot")
        if PROTON:
            pl.enter_scope("wait_slot")
        mbarrier.wait(empty.index(s), phase ^ 1)  # the first round finds every stage free
        if PROTON:
            pl.exit_scope("wait_slot")
        prof = prof.exit("wait_slot")
        prof = prof.enter("tma")
        if PROTON:
            pl.enter_scope("tma")
        mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(a_desc, [off_m, i * BK], ready.index(s), a_bufs.index(s))
        tma.async_copy_global_to_shared(b_desc, [i * BK, off_n], ready.index(s), b_bufs.index(s))
        if PROTON:
            pl.exit_scope("tma")
        prof = prof.exit("tma")


@gluon.jit
def ws_gemm_kernel(a_desc, b_desc, c_desc, buf, STAGES: gl.constexpr, PROFILE: gl.constexpr, PROTON: gl.constexpr,
                   CYCLES: gl.constexpr, num_warps: gl.constexpr):
    BM: gl.constexpr = c_desc.block_type.shape[0]
    BN: gl.constexpr = c_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    off_m = gl.program_id(0) * BM
    off_n = gl.program_id(1) * BN
    k_tiles = gl.cdiv(a_desc.shape[1], BK)
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [STAGES, BM, BK], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [STAGES, BK, BN], b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    gl.warp_specialize([
        (_consumer, (a_bufs, b_bufs, ready, empty, c_desc, off_m, off_n, k_tiles, buf, STAGES, PROFILE, PROTON, CYCLES,
                     num_warps)),
        (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, k_tiles, buf, STAGES, PROFILE, PROTON, CYCLES)),
    ], [PRODUCER_WARPS], [40])


def descriptors(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, bm: int = 128, bn: int = 128, bk: int = 64):
    """TMA descriptors of A (M, K), B (K, N) and C (M, N) for tiles (bm, bn, bk)."""
    dt = gl.float16
    la = gl.NVMMASharedLayout.get_default_for([bm, bk], dt)
    lb = gl.NVMMASharedLayout.get_default_for([bk, bn], dt)
    lc = gl.NVMMASharedLayout.get_default_for([bm, bn], dt)
    return (TensorDescriptor.from_tensor(a, [bm, bk], la), TensorDescriptor.from_tensor(b, [bk, bn], lb),
            TensorDescriptor.from_tensor(c, [bm, bn], lc))


def ws_gemm(a: torch.Tensor, b: torch.Tensor, buf: torch.Tensor | None = None, *, stages: int = 4, bm: int = 128,
            bn: int = 128, bk: int = 64, proton: bool = False, cycles: bool = False) -> torch.Tensor:
    """C = A @ B with the warp-specialized kernel; ``buf``: a kernscope profiler buffer (records per warp group;
    ``cycles``: %clock64 records), ``proton``: Proton's scopes instead (inside a ``proton.start(..., backend=
    "instrumentation")`` session)."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=torch.float16)
    da, db, dc = descriptors(a, b, c, bm, bn, bk)
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    ws_gemm_kernel[grid](da, db, dc, buf if buf is not None else c, STAGES=stages, PROFILE=buf is not None,
                         PROTON=proton, CYCLES=cycles, num_warps=4)
    return c
