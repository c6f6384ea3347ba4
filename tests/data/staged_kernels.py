"""Kernels for the staged (on-chip) profiler buffer: a loop with a record pair per iteration."""

import triton
import triton.language as tl

from kernscope.intra.device import Profiler, tid


@triton.jit
def loop_kernel(buf, x_ptr, out_ptr, n_iter, STAGE: tl.constexpr, CYCLES: tl.constexpr, BLOCK: tl.constexpr,
                ENABLE: tl.constexpr = True, SYNC: tl.constexpr = True, BUFFER_TYPE: tl.constexpr = None):
    """``n_iter`` iterations of load-accumulate, each one task 0 ("iter"); the program's sum at the end."""
    pid = tl.program_id(0)
    prof = Profiler.create(buf, 0, 1, is_leader=(tid(0) == 0), ENABLE_PROFILING=ENABLE, CYCLES=CYCLES, STAGE=STAGE,
                           SYNC=SYNC, BUFFER_TYPE=BUFFER_TYPE)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(n_iter):
        prof = prof.record(True, 0)
        acc += tl.load(x_ptr + (pid * n_iter + i) * BLOCK + offs)
        prof = prof.record(False, 0)
    tl.store(out_ptr + pid * BLOCK + offs, acc)
    prof.finalize()


@triton.jit
def two_groups_kernel(buf, x_ptr, out_ptr, n_iter, RING1: tl.constexpr, BLOCK: tl.constexpr):
    """Two profilers (groups 0 and 1) with shared-memory rings in one kernel: group 0 times the loads, group 1
    each whole iteration. ``RING1``: the second ring's RING_ID (0 collides with the first: ptxas refuses it)."""
    pid = tl.program_id(0)
    p0 = Profiler.create(buf, 0, 2, is_leader=(tid(0) == 0), STAGE=64, BUFFER_TYPE="shared_mem")
    p1 = Profiler.create(buf, 1, 2, is_leader=(tid(0) == 0), STAGE=64, BUFFER_TYPE="shared_mem", RING_ID=RING1)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(n_iter):
        p1 = p1.record(True, 1)
        p0 = p0.record(True, 0)
        v = tl.load(x_ptr + (pid * n_iter + i) * BLOCK + offs)
        p0 = p0.record(False, 0)
        acc += v * v
        p1 = p1.record(False, 1)
    tl.store(out_ptr + pid * BLOCK + offs, acc)
    p0.finalize()
    p1.finalize()
