"""A CPU model of what the device side writes, for tests and demos without a GPU.

:func:`fill_buffer` applies exactly the device's rules (fixed region per program and group, bounds
check, drop counting, ring mode, cycle anchors) to records given on the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .layout import (
    DELTA_SHIFT,
    FLAG_CYCLES,
    FLAG_RING,
    FLAG_SHARED,
    FLAG_STAGED,
    FLAG_WARPS,
    GLOBAL_HEADER_WORDS,
    H_FLAGS,
    H_GRID,
    H_GROUPS,
    H_MAGIC,
    H_REGIONS,
    H_TOTAL,
    H_VERSION,
    H_WARPS,
    LAYOUTS,
    MAGIC,
    REGION_HEADER_WORDS,
    STAGE_SHIFT,
    START_BIT,
    VALID,
    VERSION,
    buffer_words,
    warp_mask,
)


@dataclass
class Region:
    """Records of one (program, group): (time, is_start, task_type) in program order."""

    records: Sequence[tuple[int, bool, int]]
    t0: int
    sm: int = 0
    c0: int = 0
    cycles_per_ns: float = 1.8
    extra: dict = field(default_factory=dict)
    finalize: tuple[int, int] | None = None  #: staged mode: (start, end) of finalize() (same clock as ``records``)


def empty_buffer(max_num_profile_slots: int, version: int = VERSION) -> np.ndarray:
    """A reset buffer, as ``alloc_profiler_buffer`` makes it (``version``: the layout to write)."""
    b = np.zeros(buffer_words(max_num_profile_slots), dtype=np.int64)
    b[H_MAGIC], b[H_VERSION], b[H_TOTAL] = MAGIC, version, len(b)
    return b


def fill_buffer(buf: np.ndarray, regions: Sequence[Region], *, num_groups: int = 1, ring: bool = False, cycles: bool = False,
                warp_ids: Sequence[int] | None = None, stage: int = 0, shared: bool = False) -> np.ndarray:
    """Write ``regions`` (index = program * num_groups + group) into ``buf`` as the device would. With
    ``warp_ids`` (warp sampling) the groups are the sampled warps in ascending order: region = program *
    len(warp_ids) + rank of the warp. ``stage`` (staged mode): records go to a ring of ``stage`` slots and
    ``finalize()`` writes it, the count and the region's ``finalize`` pair."""
    n = len(regions)
    total = int(buf[H_TOTAL])
    lay = LAYOUTS[int(buf[H_VERSION])]
    per = lay.region_words(total, n)
    cap = per - REGION_HEADER_WORDS
    if warp_ids is not None:
        num_groups = len(warp_ids)
        buf[H_WARPS] = warp_mask(warp_ids)
    buf[H_REGIONS], buf[H_GROUPS], buf[H_GRID] = n, num_groups, n // num_groups
    buf[H_FLAGS] = ((FLAG_RING if ring else 0) | (FLAG_CYCLES if cycles else 0) | (FLAG_WARPS if warp_ids is not None else 0)
                    | ((FLAG_STAGED | stage << STAGE_SHIFT) if stage else 0) | (FLAG_SHARED if stage and shared else 0))
    for r, reg in enumerate(regions):
        base = GLOBAL_HEADER_WORDS + r * per
        end = base + per  # the tail's offsets are negative: from the region's end

        def at(off: int, base: int = base, end: int = end) -> int:
            return (base if off >= 0 else end) + off

        buf[at(lay.t0)], buf[at(lay.smid)] = reg.t0, reg.sm
        buf[at(lay.c0)] = reg.c0
        count = 0

        def clock_of(t: int, reg: Region = reg) -> int:
            """%clock64 at globaltimer ``t`` (cycle mode)."""
            return reg.c0 + int(round((t - reg.t0) * reg.cycles_per_ns))

        def word_of(t: int, is_start: bool, task: int, reg: Region = reg) -> int:
            delta = clock_of(t) - reg.c0 if cycles else t - reg.t0
            return VALID | (delta << DELTA_SHIFT) | (int(is_start) << START_BIT) | task

        for t, is_start, task in reg.records:
            word = word_of(t, is_start, task)
            if cycles:
                buf[at(lay.tlast)], buf[at(lay.clast)] = t, clock_of(t)
            if stage:  # on chip: the ring slot; nothing reaches memory before finalize
                buf[base + lay.first_record + count % stage] = word
                count += 1
                continue
            slot = count % cap if ring else count
            if ring or count < cap:
                buf[base + lay.first_record + slot] = word
            count += 1
            if ring or count > cap:  # as on the device: the counter is stored on drops (and always in ring mode)
                buf[at(lay.count)] = count
        if stage:
            buf[at(lay.count)] = count
            if reg.finalize is not None and stage + 1 < cap:
                a, b = reg.finalize
                buf[base + lay.first_record + stage] = word_of(a, True, 0)
                buf[base + lay.first_record + stage + 1] = word_of(b, False, 0)
                if cycles:
                    buf[at(lay.tlast)], buf[at(lay.clast)] = a, clock_of(a)
    return buf
