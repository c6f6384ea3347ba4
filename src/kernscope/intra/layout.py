"""Profiler buffer layout, shared by the device side (Triton) and the CPU decoder.

The buffer is one int64 tensor:

- words 0..7, the global header: ``MAGIC``, ``VERSION``, total words, number of regions,
  ``num_groups``, mode flags, grid size, and the mask of sampled warps (warp sampling: bit w set = warp w of
  each program records, into its own region; the region's group is then the warp's rank in the mask);
- then one fixed-size *region* per (program, group): ``per = (total - 8) // n_regions`` words, rounded down
  to a multiple of 4 (32 bytes, one memory sector), so every region starts on a sector:

  - head: ``t0`` (%globaltimer ns at ``Profiler.create``) and the SM id;
  - ``cap = per - 6`` record words;
  - tail (the region's last 4 words): records attempted, ``c0`` (%clock64 at create), last %globaltimer and
    last %clock64 (cycle mode).

  With one record pair per program (``per`` = 8) a program's writes fill exactly one 32-byte sector (t0, SM,
  start, end); the tail is written only on a dropped record, in ring mode and in cycle mode. Measured on an
  H100 (``benchmarks/bench_record_stores.py``): four 8-byte writes spread over two sectors (layout version 1:
  header first, records after) cost a 256 MB copy of 65,536 programs +2.4%, the same writes filling one
  sector +1.2%: partly written sectors are what costs.

A record is one int64: ``VALID | (t - t0) << 17 | is_start << 16 | task_type`` where ``t`` is
%globaltimer (ns) or, in cycle mode, %clock64 (cycles), and ``VALID`` (bit 62) marks a written slot.
Full 64-bit timers are read, so the 32-bit wrap of the timer's low word every ~4.3 s cannot corrupt a
record; 45 bits of delta cover 9.7 hours.

The region's record counter is written only when it matters: on a record that does not fit (so the decoder
knows how many were dropped), and on every record in ring mode (to find the oldest). Otherwise a record costs
one store. Buffers of layout version 1 (header words first) are still decoded.

Staged mode (``Profiler.create(..., STAGE=N)``, Proton's on-chip buffer with finalize): records go to an
N-slot ring held on chip instead of global memory — in registers (default) or, with
``BUFFER_TYPE="shared_mem"``, in a static shared-memory array the profiler declares — so a record costs no
global store; ``prof.finalize()`` at the kernel's end writes the ring to the region in one vector store,
then the count, and the time that took (the *finalize time*, per CTA) as a start/end pair in slots N and
N+1. More than N records keep the newest N (a sliding window, as Proton's
circular buffer) and the decoder reports how many earlier ones were overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAGIC = 0x4B53_5052_4F46  # "KSPROF"
VERSION = 2
GLOBAL_HEADER_WORDS = 8
REGION_HEADER_WORDS = 6  #: head + tail words of a region (not records)
#: Words of buffer per requested record slot: one record word plus room for region headers
#: (a program records at least two records, so n_regions <= slots / 2).
WORDS_PER_SLOT = 4

H_MAGIC, H_VERSION, H_TOTAL, H_REGIONS, H_GROUPS, H_FLAGS, H_GRID, H_WARPS = range(8)
#: region word offsets (version 2): head from the region's start, tail (negative) from its end
R_T0, R_SMID, R_RECORDS = 0, 1, 2
R_COUNT, R_C0, R_TLAST, R_CLAST = -4, -3, -2, -1
REGION_ALIGN = 4  #: region size in words is a multiple of this (32 bytes)

FLAG_RING = 1
FLAG_CYCLES = 2
FLAG_WARPS = 4  #: warp sampling: regions are (program, sampled warp); H_WARPS holds the warp mask
#: staged buffer (``STAGE=N``): records are kept on chip (a ring of N slots per program) and written at
#: ``finalize()``; region slots 0..N-1 hold the ring, slots N and N+1 the finalize start/end, and the count
#: word the records attempted. N is stored in the flags word from bit STAGE_SHIFT.
FLAG_STAGED = 8
FLAG_SHARED = 16  #: staged in shared memory (``BUFFER_TYPE="shared_mem"``) rather than registers
STAGE_SHIFT = 8
SHARED_DEFAULT_SLOTS = 256  #: ``BUFFER_TYPE="shared_mem"`` without ``STAGE``: 2 KB of shared memory per program
STAGE_MAX = 1 << 12  #: most slots of a staged ring (a power of two)
#: warps a program can have (Triton's num_warps <= 32): the mask fits one word
MAX_WARPS = 32


VALID_BIT = 62
VALID = 1 << VALID_BIT
TASK_BITS = 16
START_BIT = 16
DELTA_SHIFT = 17
TASK_MASK = (1 << TASK_BITS) - 1


def buffer_words(max_num_profile_slots: int) -> int:
    """Total int64 words for a buffer that holds ``max_num_profile_slots`` records."""
    return GLOBAL_HEADER_WORDS + WORDS_PER_SLOT * max(1, int(max_num_profile_slots))


def warp_mask(warp_ids: Any) -> int:
    """Bit mask of ``warp_ids`` (an iterable of ints, or Triton constexprs of ints), checked: 0 <= id < 32, no
    repeats, at least one."""
    ids = [int(getattr(w, "value", w)) for w in getattr(warp_ids, "values", warp_ids)]
    if not ids or len(set(ids)) != len(ids) or any(not 0 <= w < MAX_WARPS for w in ids):
        raise ValueError(f"warp ids must be distinct integers in 0..{MAX_WARPS - 1}, got {ids}")
    return sum(1 << w for w in ids)


def warps_of(mask: int) -> list[int]:
    """The warp ids of a mask, ascending (the order of the groups of a warp-sampled buffer)."""
    return [w for w in range(MAX_WARPS) if mask >> w & 1]


@dataclass(frozen=True)
class RegionLayout:
    """Where the words of a region are, for one buffer layout version (negative offsets: from the region's end)."""

    version: int
    align: int
    t0: int
    smid: int
    first_record: int
    count: int
    c0: int
    tlast: int
    clast: int

    def region_words(self, total: int, n_regions: int) -> int:
        per = (total - GLOBAL_HEADER_WORDS) // n_regions
        return per - per % self.align


#: the layouts the decoder reads: 1 (round 1: six header words first), 2 (current)
LAYOUTS = {
    1: RegionLayout(1, 1, t0=1, smid=3, first_record=6, count=0, c0=2, tlast=4, clast=5),
    2: RegionLayout(2, REGION_ALIGN, t0=R_T0, smid=R_SMID, first_record=R_RECORDS, count=R_COUNT, c0=R_C0, tlast=R_TLAST,
                    clast=R_CLAST),
}
