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

from . import layout as L


@_constexpr_function
def _scope_id(name):
    """Compile time: scope name -> task id; the same function as ``kernscope.intra.scopes.scope_id`` (a CPU
    test checks they agree), written out here because Triton only follows constexpr functions."""
    h = 0x811C9DC5
    for b in str(getattr(name, "value", name)).encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return 32768 | ((h ^ (h >> 15)) & 32767)

@_constexpr_function
def _warp_mask(warp_ids):
    """Compile time: WARP_IDS (None, or a tuple of warp ids) -> bit mask (0: no warp sampling). The same rules
    as ``kernscope.intra.layout.warp_mask`` (a CPU test checks they agree), written out for Triton."""
    ids = warp_ids.value if isinstance(warp_ids, tl.constexpr) else warp_ids
    if ids is None:
        return 0
    if isinstance(ids, tl.tuple):  # a tuple literal inside a kernel
        ids = ids.values
    ws = [int(w.value) if isinstance(w, tl.constexpr) else int(w) for w in ids]
    if not ws or len(set(ws)) != len(ws) or min(ws) < 0 or max(ws) >= 32:
        raise ValueError(f"WARP_IDS must be distinct integers in 0..31, got {ws}")
    m = 0
    for w in ws:
        m |= 1 << w
    return m


@_constexpr_function
def _shared(buffer_type):
    """Compile time: BUFFER_TYPE -> True for a shared-memory ring, False for registers or global records."""
    b = getattr(buffer_type, "value", buffer_type)
    if b not in (None, "global", "registers", "shared_mem"):
        raise ValueError(f'BUFFER_TYPE must be "global", "registers" or "shared_mem", got {b!r}')
    return b == "shared_mem"


@_constexpr_function
def _stage_slots(stage, ring, warp_ids, buffer_type=None):
    """Compile time: STAGE (0, or a power of two 2..STAGE_MAX) checked against the other options;
    ``BUFFER_TYPE="shared_mem"`` without STAGE takes SHARED_DEFAULT_SLOTS."""
    n = int(getattr(stage, "value", stage) or 0)
    b = getattr(buffer_type, "value", buffer_type)
    if n == 0 and b == "shared_mem":
        n = L.SHARED_DEFAULT_SLOTS
    if n == 0 and b == "registers":
        raise ValueError('BUFFER_TYPE="registers" needs STAGE (the ring\'s slots)')
    if n != 0 and b == "global":
        raise ValueError('BUFFER_TYPE="global" stores records as they come: drop STAGE')
    if n == 0:
        return 0
    if n < 2 or n > L.STAGE_MAX or n & (n - 1):
        raise ValueError(f"STAGE must be a power of two in 2..{L.STAGE_MAX} (slots of the on-chip ring), got {n}")
    if getattr(warp_ids, "value", warp_ids) is not None:
        raise ValueError("STAGE (on-chip staging) and WARP_IDS (warp sampling) cannot be combined")
    if getattr(ring, "value", ring):
        raise ValueError("STAGE is already a ring (the newest STAGE records are kept): drop RING=True")
    return n


@_constexpr_function
def _smem_ring_decl(n, ring_id=0):
    """PTX declaring shared-memory ring number ``ring_id`` (n int64 slots, kernel scope) and taking its address."""
    n = int(getattr(n, "value", n))
    rid = int(getattr(ring_id, "value", ring_id))
    if rid < 0:
        raise ValueError(f"RING_ID must be a non-negative integer, got {rid}")
    name = f"__kernscope_ring{rid}" if rid else "__kernscope_ring"
    return f".shared .align 16 .b64 {name}[{n}];\n\tmov.u32 $0, {name};"


@_constexpr_function
def _bits(mask):
    return bin(int(getattr(mask, "value", mask))).count("1")


# Every offset and flag bit comes from layout.py (the decoder and the CPU model use the same names).
_GH: tl.constexpr = tl.constexpr(L.GLOBAL_HEADER_WORDS)
_RH: tl.constexpr = tl.constexpr(L.REGION_HEADER_WORDS)
_H_TOTAL: tl.constexpr = tl.constexpr(L.H_TOTAL)
_H_REGIONS: tl.constexpr = tl.constexpr(L.H_REGIONS)
_H_GROUPS: tl.constexpr = tl.constexpr(L.H_GROUPS)
_H_FLAGS: tl.constexpr = tl.constexpr(L.H_FLAGS)
_H_GRID: tl.constexpr = tl.constexpr(L.H_GRID)
_H_WARPS: tl.constexpr = tl.constexpr(L.H_WARPS)
_R_COUNT: tl.constexpr = tl.constexpr(L.R_COUNT)
_R_T0: tl.constexpr = tl.constexpr(L.R_T0)
_R_C0: tl.constexpr = tl.constexpr(L.R_C0)
_R_SMID: tl.constexpr = tl.constexpr(L.R_SMID)
_R_TLAST: tl.constexpr = tl.constexpr(L.R_TLAST)
_R_CLAST: tl.constexpr = tl.constexpr(L.R_CLAST)
_R_RECORDS: tl.constexpr = tl.constexpr(L.R_RECORDS)
_ALIGN: tl.constexpr = tl.constexpr(L.REGION_ALIGN)
_FLAG_RING: tl.constexpr = tl.constexpr(L.FLAG_RING)
_FLAG_CYCLES: tl.constexpr = tl.constexpr(L.FLAG_CYCLES)
_FLAG_WARPS: tl.constexpr = tl.constexpr(L.FLAG_WARPS)
_FLAG_STAGED: tl.constexpr = tl.constexpr(L.FLAG_STAGED)
_FLAG_SHARED: tl.constexpr = tl.constexpr(L.FLAG_SHARED)
_STAGE_SHIFT: tl.constexpr = tl.constexpr(L.STAGE_SHIFT)
_SHIFT: tl.constexpr = tl.constexpr(L.DELTA_SHIFT)
_SBIT: tl.constexpr = tl.constexpr(L.START_BIT)
_VALID: tl.constexpr = tl.constexpr(L.VALID)


@triton.jit
def globaltimer():
    """Nanosecond global timer (%globaltimer), 64-bit: comparable across SMs, no 32-bit wrap."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def clock64():
    """SM cycle counter (%clock64); not synchronized across SMs."""
    return tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _clock64_after(v):
    """%clock64 read only once ``v`` (a float32 scalar) is available. ``v == v`` is false only for NaN, so the
    compiler cannot fold the predicate, and both predicated reads wait for it: the timer waits for ``v``."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.eq.f32 p, $1, $1; @p mov.u64 $0, %clock64; @!p mov.u64 $0, %clock64; }",
        "=l,r", [v], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _globaltimer_after(v):
    """%globaltimer read only once ``v`` (a float32 scalar) is available (see :func:`_clock64_after`)."""
    return tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.eq.f32 p, $1, $1; @p mov.u64 $0, %globaltimer; @!p mov.u64 $0, %globaltimer; }",
        "=l,r", [v], dtype=tl.int64, is_pure=False, pack=1)


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


@triton.jit
def _put(ptr, value, mask, PER_THREAD: tl.constexpr):
    """Store ``value`` at ``ptr`` where ``mask``. Triton issues a store of a scalar from one thread of the block;
    warp sampling needs one store per sampled warp, so there the store is a predicated PTX store executed by
    every thread whose ``mask`` is set (the leader lane of each sampled warp)."""
    if PER_THREAD:
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.ne.s32 p, $3, 0; @p st.global.b64 [$1], $2; mov.b32 $0, 0; }",
            "=r,l,l,r", [ptr.to(tl.int64, bitcast=True), value.to(tl.int64), mask.to(tl.int32)],
            dtype=tl.int32, is_pure=False, pack=1)
    else:
        tl.store(ptr, value, mask=mask)


@triton.jit
def _st_shared(addr, value, mask):
    """Store int64 ``value`` at shared address ``addr`` (32-bit) where ``mask`` (the recording thread)."""
    tl.inline_asm_elementwise(
        "{ .reg .pred p; setp.ne.s32 p, $3, 0; @p st.shared.b64 [$1], $2; mov.b32 $0, 0; }",
        "=r,r,l,r", [addr.to(tl.int32), value.to(tl.int64), mask.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _ld_shared(addr):
    """Load int64 from shared addresses ``addr`` (a tensor of 32-bit addresses: each thread its elements)."""
    return tl.inline_asm_elementwise("ld.shared.b64 $0, [$1];", "=l,r", [addr.to(tl.int32)], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _popc(x):
    """Number of set bits of an int64 (%popc)."""
    return tl.inline_asm_elementwise("popc.b64 $0, $1;", "=r,l", [x], dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _region_base(buf, total, region, nreg):
    """(base pointer, capacity) of a region; the region ends at ``base + _RH + capacity`` (its tail words are
    addressed from there). Kept out of the hot start path: ``total`` comes from a global load issued in
    ``create``, and using it early would stall the warp on that load."""
    per = (total - _GH) // nreg
    per = per - per % _ALIGN  # regions start on a 32-byte sector
    return buf + _GH + region * per, per - _RH


@aggregate
class Profiler:
    """Per-(program, group) recorder. ``record`` returns a new Profiler (Triton values are immutable).

    A start record is held in a register (``pending``) and written when the next record comes, so the
    start of a task never waits for memory; an end record writes the held start and itself.
    """

    buf: tl.tensor
    total: tl.tensor
    region: tl.tensor
    nreg: tl.tensor
    idx: tl.tensor
    origin: tl.tensor  # record-clock value at create (%globaltimer ns, or %clock64 in cycle mode): deltas start here
    gt_start: tl.tensor  # %globaltimer at create (ns): the region's R_T0
    sm: tl.tensor
    pending: tl.tensor
    hdr: tl.tensor
    is_leader: tl.tensor
    stage: tl.tensor  # STAGE > 0: the on-chip ring ([STAGE] int64 in registers, or the shared ring's address)
    ENABLE_PROFILING: tl.constexpr
    RING: tl.constexpr
    CYCLES: tl.constexpr
    SYNC: tl.constexpr
    WMASK: tl.constexpr  # warp sampling: mask of the recording warps (0: one recorder per program and group)
    STAGE: tl.constexpr  # slots of the on-chip ring (0: records go straight to global memory)
    SMEM: tl.constexpr  # the ring is in shared memory (BUFFER_TYPE="shared_mem"), else in registers

    @_constexpr_function
    def __init__(self, buf, total, region, nreg, idx, origin, gt_start, sm, pending, hdr, is_leader, stage,
                 ENABLE_PROFILING, RING, CYCLES, SYNC, WMASK, STAGE, SMEM=False):
        self.buf = buf
        self.total = total
        self.region = region
        self.nreg = nreg
        self.idx = idx
        self.origin = origin
        self.gt_start = gt_start
        self.sm = sm
        self.pending = pending
        self.hdr = hdr
        self.is_leader = is_leader
        self.stage = stage
        self.ENABLE_PROFILING = tl.constexpr(ENABLE_PROFILING)
        self.RING = tl.constexpr(RING)
        self.CYCLES = tl.constexpr(CYCLES)
        self.SYNC = tl.constexpr(SYNC)
        self.WMASK = tl.constexpr(WMASK)
        self.STAGE = tl.constexpr(STAGE)
        self.SMEM = tl.constexpr(SMEM)

    @triton.jit
    def create(profiler_buffer, group_id, num_groups, is_leader, ENABLE_PROFILING: tl.constexpr = True,
               RING: tl.constexpr = False, CYCLES: tl.constexpr = False, SYNC: tl.constexpr = True,
               WARP_IDS: tl.constexpr = None, STAGE: tl.constexpr = 0, BUFFER_TYPE: tl.constexpr = None,
               RING_ID: tl.constexpr = 0):
        """Claim this program's region. Options beyond the seed API: ``RING`` keeps the newest records
        when the region fills; ``CYCLES`` records %clock64 (anchored to %globaltimer); ``SYNC=False``
        skips the block-wide barrier at each record (cheaper; an end record then marks when the
        leader's warp got there, not the whole block).

        ``WARP_IDS`` (warp sampling, e.g. ``(0, 1, 2, 3)``): instead of one leader per program and group, lane 0
        of each listed warp records into a region of its own (``group`` = the warp id after decoding), so
        every record marks when *that warp* got there (no block barrier). ``group_id``, ``num_groups`` and
        ``is_leader`` are then ignored.

        ``STAGE`` (a power of two, e.g. 16): keep records on chip, in a ring of ``STAGE`` slots, instead of
        storing each one; ``profiler.finalize()`` must be called at the kernel's end to write them (and the
        per-CTA finalize time). The region needs ``STAGE + 2`` slots. More records than slots keep the newest.
        ``BUFFER_TYPE``: where the ring lives — ``"registers"`` (the default with ``STAGE``) or ``"shared_mem"``
        (Proton's option: a static shared array of ``STAGE`` int64, 256 when ``STAGE`` is not given). Several
        shared-memory profilers in one kernel (e.g. one per group) each need their own ``RING_ID`` (0, 1, ...)."""
        nx = tl.num_programs(0)
        ny = tl.num_programs(1)
        nz = tl.num_programs(2)
        pid = tl.program_id(0) + tl.program_id(1) * nx + tl.program_id(2) * nx * ny
        WMASK: tl.constexpr = _warp_mask(WARP_IDS)
        NSTAGE: tl.constexpr = _stage_slots(STAGE, RING, WARP_IDS, BUFFER_TYPE)
        SMEM: tl.constexpr = _shared(BUFFER_TYPE)
        if ENABLE_PROFILING:
            buf = profiler_buffer.to(tl.pointer_type(tl.int64))
            if WMASK != 0:
                NW: tl.constexpr = _bits(WMASK)
                t = tid(0)
                warp = (t >> 5).to(tl.int64)
                wm = pid.to(tl.int64) * 0 + WMASK
                leader = (((wm >> warp) & 1) == 1) & ((t & 31) == 0)
                slot = _popc(wm & ((warp * 0 + 1 << warp) - 1)).to(tl.int64)
                nreg = (nx * ny * nz).to(tl.int64) * NW
                region = pid.to(tl.int64) * NW + slot
                groups = NW
            else:
                leader = is_leader
                nreg = (nx * ny * nz * num_groups).to(tl.int64)
                region = (pid * num_groups + group_id).to(tl.int64)
                groups = num_groups
            total = tl.load(buf + _H_TOTAL)  # consumed only when a record is written (see _region_base)
            gt = globaltimer()
            if CYCLES:
                origin = clock64()
            else:
                origin = gt
            first = leader & (region == 0)
            flags = ((_FLAG_RING if RING else 0) | (_FLAG_CYCLES if CYCLES else 0) | (_FLAG_WARPS if WMASK != 0 else 0)
                     | ((_FLAG_STAGED | (NSTAGE << _STAGE_SHIFT)) if NSTAGE != 0 else 0) | (_FLAG_SHARED if SMEM else 0))
            _put(buf + _H_REGIONS, nreg, first, WMASK != 0)
            _put(buf + _H_GROUPS, gt * 0 + groups, first, WMASK != 0)
            _put(buf + _H_FLAGS, gt * 0 + flags, first, WMASK != 0)
            _put(buf + _H_GRID, (nx * ny * nz).to(tl.int64), first, WMASK != 0)
            if WMASK != 0:
                _put(buf + _H_WARPS, gt * 0 + WMASK, first, True)
            if SMEM:
                stage = tl.inline_asm_elementwise(_smem_ring_decl(NSTAGE, RING_ID), "=r", [], dtype=tl.int32,
                                                  is_pure=False, pack=1)
            elif NSTAGE != 0:
                stage = tl.zeros([NSTAGE], dtype=tl.int64)
            else:
                stage = gt * 0
            return Profiler(buf, total, region, nreg, pid * 0, origin, gt, smid().to(tl.int64), gt * 0, pid * 0,
                            leader, stage, ENABLE_PROFILING, RING, CYCLES, SYNC, WMASK, NSTAGE, SMEM)
        else:
            z = pid * 0
            return Profiler(profiler_buffer, z, z, z, z, z, z, z, z, z, is_leader, z, ENABLE_PROFILING, RING, CYCLES,
                            SYNC, WMASK, NSTAGE, SMEM)

    @triton.jit
    def _header(self, base, cap, t, gt):
        lead = self.is_leader & (cap > 0)
        per_thread: tl.constexpr = self.WMASK != 0
        _put(base + _R_T0, self.gt_start, lead, per_thread)
        if self.CYCLES:
            end = base + _RH + cap  # tail words: negative offsets from the region's end
            _put(end + _R_C0, self.origin, lead, per_thread)  # %clock64 at create
            _put(end + _R_TLAST, gt, lead, per_thread)  # latest (globaltimer, clock64) anchor, read together
            _put(end + _R_CLAST, t, lead, per_thread)
        _put(base + _R_SMID, self.sm, lead, per_thread)

    @triton.jit
    def _now(self, after=None):
        """(record clock, %globaltimer): the record clock is %globaltimer, or %clock64 in cycle mode with the
        %globaltimer anchor read together (not later: no bias). ``after``: read only once that value arrived."""
        if self.CYCLES:
            if after is None:
                t = clock64()
            else:
                t = _clock64_after(after.to(tl.float32))
            gt = globaltimer()
        else:
            if after is None:
                t = globaltimer()
            else:
                t = _globaltimer_after(after.to(tl.float32))
            gt = t
        return t, gt

    @triton.jit
    def record(self, is_start, task_type, after=None):
        """Record the start (``is_start=True``) or end of task ``task_type`` (0..65535).

        ``after`` (scheduling-safe): a scalar the record must wait for, e.g. a loaded value — the timer is read
        only once that value has arrived, so an end record times the operation's completion, not its issue."""
        if self.ENABLE_PROFILING:
            per_thread: tl.constexpr = self.WMASK != 0
            if self.SYNC and not per_thread:
                tl.debug_barrier()  # the task boundary is after every thread of the block got here
            t, gt = self._now(after)
            word = _VALID | ((t - self.origin) << _SHIFT) | ((is_start * 1) << _SBIT) | task_type
            hdr = self.hdr
            stage = self.stage
            pending = self.pending
            if self.SMEM:  # shared memory: the recording thread writes its ring slot
                _st_shared(self.stage + (self.idx % self.STAGE) * 8, word, self.is_leader)
            elif self.STAGE != 0:  # registers: the record goes into its ring slot, no memory traffic
                slots = tl.arange(0, self.STAGE)
                stage = tl.where(slots == (self.idx % self.STAGE), word, self.stage)
            elif self.RING:
                base, cap = _region_base(self.buf, self.total, self.region, self.nreg)
                lead = self.is_leader & (cap > 0)
                _put(base + _R_RECORDS + self.idx % tl.maximum(cap, 1), word, lead, per_thread)
                _put(base + _RH + cap + _R_COUNT, (self.idx + 1).to(tl.int64), lead, per_thread)
                self._header(base, cap, t, gt)
            else:
                if self.pending != 0:  # a held start (nested tasks): write it now
                    base, cap = _region_base(self.buf, self.total, self.region, self.nreg)
                    prev = self.idx - 1
                    _put(base + _R_RECORDS + prev, self.pending, self.is_leader & (prev < cap), per_thread)
                if is_start * 1 == 0:  # an end: write it (and the header, once)
                    base, cap = _region_base(self.buf, self.total, self.region, self.nreg)
                    _put(base + _R_RECORDS + self.idx, word, self.is_leader & (self.idx < cap), per_thread)
                    # the counter is written only when a record is dropped (so the count of drops is known)
                    _put(base + _RH + cap + _R_COUNT, (self.idx + 1).to(tl.int64), self.is_leader & (self.idx >= cap),
                         per_thread)
                    if self.CYCLES or self.hdr == 0:
                        self._header(base, cap, t, gt)
                    hdr = self.hdr * 0 + 1
                pending = word * (is_start * 1)
            return Profiler(self.buf, self.total, self.region, self.nreg, self.idx + 1, self.origin, self.gt_start, self.sm,
                            pending, hdr, self.is_leader, stage, self.ENABLE_PROFILING, self.RING, self.CYCLES, self.SYNC,
                            self.WMASK, self.STAGE, self.SMEM)
        else:
            return self

    @triton.jit
    def finalize(self):
        """Staged mode (``STAGE``): write the on-chip ring to this program's region in one vector store, then the
        record count and the finalize time (timer before the store and after it, as a start/end pair in slots
        STAGE and STAGE + 1). Call it once, at the end of the kernel. Without ``STAGE`` it does nothing."""
        if self.ENABLE_PROFILING and self.STAGE != 0:
            if self.SYNC or self.SMEM:  # shared memory: every thread reads what the recording thread wrote
                tl.debug_barrier()
            ta, gta = self._now()
            base, cap = _region_base(self.buf, self.total, self.region, self.nreg)
            slots = tl.arange(0, self.STAGE)
            n = tl.minimum(self.idx, self.STAGE)
            if self.SMEM:
                ring = _ld_shared(self.stage + slots * 8)  # each thread reads its slots of the shared ring
            else:
                ring = self.stage
            # every thread stores the ring slots it holds (Triton stores each element once)
            tl.store(base + _R_RECORDS + slots, ring, mask=(slots < n) & (slots < cap))
            lead = self.is_leader & (cap > 0)
            _put(base + _RH + cap + _R_COUNT, self.idx.to(tl.int64), lead, False)
            self._header(base, cap, ta, gta)
            if self.CYCLES:
                tb = clock64()
            else:
                tb = globaltimer()
            fin = self.STAGE
            _put(base + _R_RECORDS + fin, _VALID | ((ta - self.origin) << _SHIFT) | (1 << _SBIT),
                 self.is_leader & (fin + 1 < cap), False)
            _put(base + _R_RECORDS + fin + 1, _VALID | ((tb - self.origin) << _SHIFT),
                 self.is_leader & (fin + 1 < cap), False)

    @triton.jit
    def enter(self, name: tl.constexpr):
        """Start the named scope ``name`` (a string literal; nesting allowed)."""
        return self.record(True, _scope_id(name))

    @triton.jit
    def exit(self, name: tl.constexpr, after=None):
        """End the named scope ``name``; an exit without its enter is reported by the decoder. ``after``: a scalar
        the exit waits for (see :meth:`record`)."""
        return self.record(False, _scope_id(name), after)


@triton.jit
def calibration_kernel(profiler_buffer, pairs, CYCLES: tl.constexpr = True):
    """``pairs`` empty scopes back to back per program: their durations are the cost of one record pair.
    Timed in SM cycles by default: %globaltimer ticks too coarsely (tens of ns or more) to see one pair."""
    prof = Profiler.create(profiler_buffer, 0, 1, is_leader=(tid(0) == 0), CYCLES=CYCLES)
    for _ in range(pairs):
        prof = prof.record(True, 0)
        prof = prof.record(False, 0)
