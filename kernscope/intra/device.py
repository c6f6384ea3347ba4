"""Device side of the intra-kernel profiler: ``@triton.jit`` helpers (needs triton).

Usage inside a kernel (the seed's API)::

    profiler = Profiler.create(profiler_buffer=buf, group_id=0, num_groups=1,
                               is_leader=(tid(0) == 0), ENABLE_PROFILING=True)
    profiler = profiler.record(is_start=True, task_type=0)
    ...
    profiler = profiler.record(is_start=False, task_type=0)

Each (program, group) owns a fixed region of the buffer (see :mod:`kernscope.intra.layout`), so
records never need atomics and are bounds-checked: when a region is full, further records are
counted but not written (or, with ``RING=True``, overwrite the oldest ones). ``ENABLE_PROFILING=False``
compiles every call away.
"""

# no "from __future__ import annotations": Triton aggregates check field types at runtime

import triton
import triton.language as tl

try:  # Triton >= 3.4
    from triton.language.core import _aggregate as aggregate
except ImportError:  # pragma: no cover
    aggregate = tl.core._aggregate  # type: ignore[attr-defined]

# Triton >= 3.5 wants the aggregate constructor marked as a constexpr function
_constexpr_function = getattr(triton, "constexpr_function", lambda f: f)

from .layout import DELTA_SHIFT, GLOBAL_HEADER_WORDS, REGION_HEADER_WORDS, START_BIT, VALID

_GH: tl.constexpr = tl.constexpr(GLOBAL_HEADER_WORDS)
_RH: tl.constexpr = tl.constexpr(REGION_HEADER_WORDS)
_SHIFT: tl.constexpr = tl.constexpr(DELTA_SHIFT)
_SBIT: tl.constexpr = tl.constexpr(START_BIT)
_VALID: tl.constexpr = tl.constexpr(VALID)


@triton.jit
def globaltimer():
    """Nanosecond global timer (%globaltimer), 64-bit: comparable across SMs, no 32-bit wrap."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def clock64():
    """SM cycle counter (%clock64); not synchronized across SMs."""
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def smid():
    """Id of the SM running this program (%smid)."""
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def tid(axis: tl.constexpr):
    """Thread index within the block along ``axis`` (0, 1 or 2): for ``is_leader=(tid(0) == 0)``."""
    if axis == 0:
        return tl.inline_asm_elementwise("mov.u32 $0, %tid.x;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)
    elif axis == 1:
        return tl.inline_asm_elementwise("mov.u32 $0, %tid.y;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)
    else:
        return tl.inline_asm_elementwise("mov.u32 $0, %tid.z;", "=r", [], dtype=tl.int32, is_pure=True, pack=1)


@aggregate
class Profiler:
    """Per-(program, group) recorder. ``record`` returns a new Profiler (Triton values are immutable)."""

    base: tl.tensor
    idx: tl.tensor
    cap: tl.tensor
    t0: tl.tensor
    is_leader: tl.tensor
    ENABLE_PROFILING: tl.constexpr
    RING: tl.constexpr
    CYCLES: tl.constexpr
    SYNC: tl.constexpr

    @_constexpr_function
    def __init__(self, base, idx, cap, t0, is_leader, ENABLE_PROFILING, RING, CYCLES, SYNC):
        self.base = base
        self.idx = idx
        self.cap = cap
        self.t0 = t0
        self.is_leader = is_leader
        self.ENABLE_PROFILING = tl.constexpr(ENABLE_PROFILING)
        self.RING = tl.constexpr(RING)
        self.CYCLES = tl.constexpr(CYCLES)
        self.SYNC = tl.constexpr(SYNC)

    @triton.jit
    def create(profiler_buffer, group_id, num_groups, is_leader, ENABLE_PROFILING: tl.constexpr = True,
               RING: tl.constexpr = False, CYCLES: tl.constexpr = False, SYNC: tl.constexpr = True):
        """Claim this program's region. Options beyond the seed API: ``RING`` keeps the newest records
        when the region fills; ``CYCLES`` records %clock64 (anchored to %globaltimer); ``SYNC=False``
        skips the block-wide barrier at each record (cheaper; an end record then marks when the
        leader's warp got there, not the whole block)."""
        nx = tl.num_programs(0)
        ny = tl.num_programs(1)
        nz = tl.num_programs(2)
        pid = tl.program_id(0) + tl.program_id(1) * nx + tl.program_id(2) * nx * ny
        if ENABLE_PROFILING:
            buf = profiler_buffer.to(tl.pointer_type(tl.int64))
            n_regions = (nx * ny * nz * num_groups).to(tl.int64)
            region = (pid * num_groups + group_id).to(tl.int64)
            total = tl.load(buf + 2)
            per = (total - _GH) // n_regions
            cap = per - _RH
            base = buf + _GH + region * per
            gt = globaltimer()
            if CYCLES:
                c0 = clock64()
                t0 = c0
            else:
                c0 = gt * 0
                t0 = gt
            lead = is_leader & (cap > 0)
            tl.store(base + 0, gt * 0, mask=lead)
            tl.store(base + 1, gt, mask=lead)
            tl.store(base + 2, c0, mask=lead)
            tl.store(base + 3, smid().to(tl.int64), mask=lead)
            first = lead & (region == 0)
            flags = (1 if RING else 0) | (2 if CYCLES else 0)
            tl.store(buf + 3, n_regions, mask=first)
            tl.store(buf + 4, gt * 0 + num_groups, mask=first)
            tl.store(buf + 5, gt * 0 + flags, mask=first)
            tl.store(buf + 6, (nx * ny * nz).to(tl.int64), mask=first)
            return Profiler(base, pid * 0, cap, t0, lead, ENABLE_PROFILING, RING, CYCLES, SYNC)
        else:
            return Profiler(profiler_buffer, pid * 0, pid * 0, pid * 0, is_leader, ENABLE_PROFILING, RING, CYCLES, SYNC)

    @triton.jit
    def record(self, is_start, task_type):
        """Record the start (``is_start=True``) or end of task ``task_type`` (0..65535)."""
        if self.ENABLE_PROFILING:
            if self.SYNC:
                tl.debug_barrier()  # the task boundary is after every thread of the block got here
            if self.CYCLES:
                t = clock64()
            else:
                t = globaltimer()
            word = _VALID | ((t - self.t0) << _SHIFT) | ((is_start * 1) << _SBIT) | task_type
            if self.RING:
                tl.store(self.base + _RH + self.idx % self.cap, word, mask=self.is_leader)
                tl.store(self.base + 0, (self.idx + 1).to(tl.int64), mask=self.is_leader)
            else:
                fits = self.idx < self.cap
                tl.store(self.base + _RH + self.idx, word, mask=self.is_leader & fits)
                # the counter is written only when a record is dropped (so the count of drops is known)
                tl.store(self.base + 0, (self.idx + 1).to(tl.int64), mask=self.is_leader & (self.idx >= self.cap))
            if self.CYCLES:
                tl.store(self.base + 4, globaltimer(), mask=self.is_leader)
                tl.store(self.base + 5, t, mask=self.is_leader)
            return Profiler(self.base, self.idx + 1, self.cap, self.t0, self.is_leader, self.ENABLE_PROFILING,
                            self.RING, self.CYCLES, self.SYNC)
        else:
            return self
