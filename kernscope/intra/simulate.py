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
    MAGIC,
    R_C0,
    R_CLAST,
    R_COUNT,
    R_SMID,
    R_T0,
    R_TLAST,
    REGION_HEADER_WORDS,
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


def empty_buffer(max_num_profile_slots: int) -> np.ndarray:
    b = np.zeros(buffer_words(max_num_profile_slots), dtype=np.int64)
    b[H_MAGIC], b[H_VERSION], b[H_TOTAL] = MAGIC, VERSION, len(b)
    return b


def fill_buffer(buf: np.ndarray, regions: Sequence[Region], *, num_groups: int = 1, ring: bool = False, cycles: bool = False,
                warp_ids: Sequence[int] | None = None) -> np.ndarray:
    """Write ``regions`` (index = program * num_groups + group) into ``buf`` as the device would. With
    ``warp_ids`` (warp sampling) the groups are the sampled warps in ascending order: region = program *
    len(warp_ids) + rank of the warp."""
    n = len(regions)
    total = int(buf[H_TOTAL])
    per = (total - GLOBAL_HEADER_WORDS) // n
    cap = per - REGION_HEADER_WORDS
    if warp_ids is not None:
        num_groups = len(warp_ids)
        buf[H_WARPS] = warp_mask(warp_ids)
    buf[H_REGIONS], buf[H_GROUPS], buf[H_GRID] = n, num_groups, n // num_groups
    buf[H_FLAGS] = (FLAG_RING if ring else 0) | (FLAG_CYCLES if cycles else 0) | (FLAG_WARPS if warp_ids is not None else 0)
    for r, reg in enumerate(regions):
        base = GLOBAL_HEADER_WORDS + r * per
        buf[base + R_T0], buf[base + R_SMID] = reg.t0, reg.sm
        buf[base + R_C0] = reg.c0
        count = 0
        for t, is_start, task in reg.records:
            if cycles:
                c = reg.c0 + int(round((t - reg.t0) * reg.cycles_per_ns))
                word = VALID | ((c - reg.c0) << DELTA_SHIFT) | (int(is_start) << START_BIT) | task
                buf[base + R_TLAST], buf[base + R_CLAST] = t, c
            else:
                word = VALID | ((t - reg.t0) << DELTA_SHIFT) | (int(is_start) << START_BIT) | task
            slot = count % cap if ring else count
            if ring or count < cap:
                buf[base + REGION_HEADER_WORDS + slot] = word
            count += 1  # noqa: SIM113 - the device's counter, not a loop index
            if ring or count > cap:  # as on the device: the counter is stored on drops (and always in ring mode)
                buf[base + R_COUNT] = count
    return buf
