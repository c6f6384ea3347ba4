"""Profiler buffer (numpy int64 array) -> task DataFrame. CPU only: no torch, no GPU.

Output columns: block, group, sm, task_type, task, start_ns, end_ns, duration_ns (int64 ns on the
GPU's %globaltimer clock); rows ordered by (block, group), then by record order within the block.
Records are paired per (block, group, task): the i-th start with the i-th end. Records lost to a full
region (``dropped``), cut by ring wrap-around, or unpaired are counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..errors import KernscopeError
from .layout import (
    DELTA_SHIFT,
    FLAG_CYCLES,
    FLAG_RING,
    FLAG_SHARED,
    FLAG_STAGED,
    FLAG_WARPS,
    GLOBAL_HEADER_WORDS,
    H_FLAGS,
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
    TASK_MASK,
    VALID,
    RegionLayout,
    warps_of,
)

SCHEMA = {
    "block": pl.Int64,
    "group": pl.Int64,
    "sm": pl.Int64,
    "task_type": pl.Int64,
    "task": pl.Categorical,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "duration_ns": pl.Int64,
}


@dataclass
class Decoded:
    """A decoded profiler buffer."""

    tasks: pl.DataFrame  #: one row per paired task interval
    regions: int = 0  #: (program, group) regions that recorded anything
    records: int = 0  #: records read from the buffer
    dropped: int = 0  #: records that did not fit their region (never written out of bounds)
    ring_overwritten: int = 0  #: records overwritten in ring mode (oldest first)
    unpaired: int = 0  #: starts without an end or ends without a start
    capacity_per_region: int = 0
    ring: bool = False
    cycles: bool = False
    task_names: list[str] | dict[int, str] = field(default_factory=list)
    #: per task/scope name with unmatched records: (name, enters without exit, exits without enter)
    unbalanced: list[tuple[str, int, int]] = field(default_factory=list)
    #: cycle mode: the SM clock measured from each region's (globaltimer, clock64) anchors, median (GHz)
    clock_ghz: float | None = None
    #: how ``clock_ghz`` was measured (cycle mode): per region, pooled over short regions, or unknown
    clock_source: str | None = None
    #: warp sampling: the sampled warps (the ``group`` column holds the warp id); None otherwise
    warps: list[int] | None = None
    #: warp sampling: sampled warps with no record in any program (e.g. an id beyond the kernel's num_warps)
    silent_warps: list[int] = field(default_factory=list)
    #: staged mode: slots of the on-chip ring (0: records were stored as they came)
    stage_slots: int = 0
    #: staged mode: where the ring was held ("registers" or "shared_mem"); None when not staged
    stage_memory: str | None = None
    #: staged mode: per program and group, the time ``finalize()`` took to write the ring out (ns)
    finalize: pl.DataFrame | None = None


Names = Sequence[str] | Mapping[int, str]


def task_name(names: Names, t: int) -> str:
    """The name of task id ``t``: from a list (task types 0, 1, ...) or a {id: name} map (scopes)."""
    if isinstance(names, Mapping):
        got = names.get(t)
        if got is not None:
            return got
    elif 0 <= t < len(names):
        return names[t]
    return f"scope#{t}" if t >= 1 << 15 else f"task_{t}"


#: anchors at least this far apart (ns) measure the SM clock well despite %globaltimer's coarse ticks
MIN_SPAN_NS = 20_000


def _freq_ghz(t0: np.ndarray, c0: np.ndarray, tl: np.ndarray, cl: np.ndarray, sm: np.ndarray,
              hint_ghz: float | None = None) -> tuple[np.ndarray, str]:
    """SM clock (cycles per ns) per region from its (globaltimer, clock64) anchors, and how it was found.

    1. A region whose anchors are >= 20 µs apart has its own rate; the others take the median of those.
    2. Else per SM over the whole kernel: the SM's earliest create anchor and latest record anchor (clock64
       is one counter per SM, so anchors of different regions on one SM pair up); SMs spanning >= 20 µs.
    3. Else ``hint_ghz`` (the device's current SM clock, given by the host: the kernel is too short to measure
       it), else all regions' spans pooled (rough: %globaltimer ticks coarsely against spans this short),
       else 1 GHz (cycles reported as ns, as Proton does)."""
    dt = (tl - t0).astype(np.float64)
    dc = (cl - c0).astype(np.float64)
    good = dt >= MIN_SPAN_NS
    f = np.where(good, dc / np.where(good, dt, 1), np.nan)
    if np.isfinite(f).any():
        return np.where(np.isfinite(f), f, np.nanmedian(f)), "per region (anchors >= 20 us apart)"
    if len(sm):
        # per SM: the region holding its earliest create anchor and the one holding its latest record anchor
        by_t0 = np.lexsort((t0, sm))
        by_tl = np.lexsort((-tl, sm))
        first = np.ones(len(sm), bool)
        first[1:] = sm[by_t0][1:] != sm[by_t0][:-1]
        i_lo, i_hi = by_t0[first], by_tl[first]  # the same SMs in the same order in both sorts
        span, cyc = (tl[i_hi] - t0[i_lo]).astype(np.float64), (cl[i_hi] - c0[i_lo]).astype(np.float64)
        ok = (span >= MIN_SPAN_NS) & (cyc > 0)
        if ok.any():
            rate = np.where(ok, cyc / np.where(ok, span, 1), np.nan)
            per_sm = np.where(np.isfinite(rate), rate, np.nanmedian(rate))
            out = np.empty(len(sm))
            out[by_t0] = per_sm[np.cumsum(first) - 1]
            return out, f"per SM over the kernel ({int(ok.sum())} SMs with anchors >= 20 us apart)"
    if hint_ghz:
        return np.full(len(dt), float(hint_ghz)), (f"the device's SM clock from the host ({hint_ghz * 1e3:.0f} MHz): "
                                                   f"the kernel is too short to measure it")
    pos = (dt > 0) & (dc > 0)
    if pos.any():
        pooled = float(dc[pos].sum() / dt[pos].sum())
        return np.full(len(dt), pooled), (f"pooled over {int(pos.sum())} short regions ({dt[pos].sum() / 1e3:.1f} us; "
                                          f"rough: %globaltimer ticks coarsely)")
    return np.ones(len(dt)), "unknown: 1 GHz assumed (cycles shown as ns)"


@dataclass(frozen=True)
class _Header:
    """The global header of a buffer, and its regions as a (n_regions, words per region) view."""

    regions: np.ndarray
    cap: int
    groups: int
    ring: bool
    cycles: bool
    warps: list[int] | None = None  #: warp sampling: warp id of each group
    lay: RegionLayout = LAYOUTS[2]  #: where a region's words are (by the buffer's layout version)
    stage: int = 0  #: staged mode: ring slots (records in slots 0..stage-1, finalize pair after them)
    shared: bool = False  #: staged mode: the ring was in shared memory


def _read_header(b: np.ndarray) -> _Header | None:
    """Check the global header; None when no kernel wrote to the buffer."""
    if b.size < GLOBAL_HEADER_WORDS:
        raise KernscopeError("profiler buffer is smaller than its header")
    if int(b[H_MAGIC]) != MAGIC:
        raise KernscopeError("not a kernscope profiler buffer (bad magic): was it allocated with alloc_profiler_buffer?")
    lay = LAYOUTS.get(int(b[H_VERSION]))
    if lay is None:
        raise KernscopeError(f"profiler buffer version {int(b[H_VERSION])} is not supported "
                             f"(this kernscope reads {', '.join(map(str, sorted(LAYOUTS)))})")
    total = int(b[H_TOTAL])
    n_regions = int(b[H_REGIONS])
    flags = int(b[H_FLAGS])
    if n_regions <= 0:
        return None
    if total > b.size or total < GLOBAL_HEADER_WORDS:
        raise KernscopeError(f"profiler buffer header says {total} words but the buffer has {b.size}")
    per = lay.region_words(total, n_regions)
    cap = per - REGION_HEADER_WORDS
    if cap <= 0:
        raise KernscopeError(f"profiler buffer too small: {n_regions} regions leave no room for records")
    regions = b[GLOBAL_HEADER_WORDS : GLOBAL_HEADER_WORDS + per * n_regions].reshape(n_regions, per)
    groups = max(1, int(b[H_GROUPS]))
    warps = None
    if flags & FLAG_WARPS:
        warps = warps_of(int(b[H_WARPS]))
        if len(warps) != groups:
            raise KernscopeError(f"profiler buffer header: warp mask {int(b[H_WARPS]):#x} does not match its {groups} groups")
    stage = (flags >> STAGE_SHIFT) & 0xFFFF if flags & FLAG_STAGED else 0
    if flags & FLAG_STAGED and cap < stage + 2:
        raise KernscopeError(f"profiler buffer too small for STAGE={stage}: a region holds {cap} records but the staged "
                             f"ring needs {stage + 2} (its slots and the finalize pair); allocate at least "
                             f"{stage + 2} slots per program")
    return _Header(regions, cap, groups, bool(flags & FLAG_RING), bool(flags & FLAG_CYCLES), warps, lay, stage,
                   bool(flags & FLAG_SHARED))


def _written(recs: np.ndarray, cap: int) -> np.ndarray:
    """Records written per region (a written record is never 0: it carries the valid bit)."""
    if cap <= 32:  # many small regions: column-wise is far faster than a per-row reduction
        written = np.zeros(recs.shape[0], dtype=np.int64)
        for j in range(cap):
            written += recs[:, j] != 0
        return written
    return np.count_nonzero(recs, axis=1)


def _labels(names: Names, tt: np.ndarray) -> pl.Series:
    """Task name of every row (one Python call per distinct task id)."""
    uniq = np.unique(tt)
    lut = pl.Series("task", [task_name(names, int(i)) for i in uniq], dtype=pl.Categorical)
    return lut.gather(np.searchsorted(uniq, tt)) if len(tt) else pl.Series("task", [], dtype=pl.Categorical)


def _fast_uniform(h: _Header, out: Decoded, active: np.ndarray, k0: int) -> Decoded | None:
    """The common shape: every region recorded ``k0`` records, alternating start, end of one task at a
    time, in globaltimer mode. Works on (regions, k0) columns directly; None when the shape differs."""
    regions = h.regions
    sel = slice(None) if len(active) == regions.shape[0] else active  # a slice avoids a gather copy
    r0 = h.lay.first_record
    block = regions[sel, r0 : r0 + k0]
    sw, ew = block[:, 0::2], block[:, 1::2]
    bit = 1 << START_BIT
    if not (int(np.bitwise_and.reduce(sw, axis=None)) & bit and not int(np.bitwise_or.reduce(ew, axis=None)) & bit
            and not int(np.bitwise_or.reduce(sw ^ ew, axis=None)) & TASK_MASK):
        return None
    out.records = int(block.size)
    t0r = regions[sel, h.lay.t0][:, None]
    s_ns = (t0r + ((sw & ~VALID) >> DELTA_SHIFT)).reshape(-1)
    e_ns = (t0r + ((ew & ~VALID) >> DELTA_SHIFT)).reshape(-1)
    tt = (sw & TASK_MASK).reshape(-1)
    return _finish(out, np.repeat(active, k0 // 2), s_ns, e_ns, tt, h.groups, regions[:, h.lay.smid], h.warps)


def _gather(h: _Header, active: np.ndarray, kept: np.ndarray, count: np.ndarray,
            ring: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(region of each record, record words) in write order; ring regions (of ``ring`` slots, else the region's
    capacity in ring mode) start at their oldest record."""
    slots = ring or (h.cap if h.ring else 0)
    k = kept[active]
    if not slots and bool((k == k[0]).all()):  # plain 2-D slice
        k0 = int(k[0])
        r0 = h.lay.first_record
        return np.repeat(active, k0), h.regions[active, r0 : r0 + k0].reshape(-1)
    reg = np.repeat(active, k)
    j = np.arange(k.sum()) - np.repeat(np.cumsum(k) - k, k)  # 0..k-1 within region
    if slots:
        first = np.where(count[active] > slots, count[active] % slots, 0)
        slot = (np.repeat(first, k) + j) % slots
    else:
        slot = j
    return reg, h.regions[reg, h.lay.first_record + slot]


def _times(h: _Header, reg: np.ndarray, words: np.ndarray, f: np.ndarray | None) -> np.ndarray:
    """Record times (ns, %globaltimer clock); cycle records are converted with each region's clock rate ``f``
    (GHz, indexed by region)."""
    delta = (words & ~VALID) >> DELTA_SHIFT
    t0 = h.regions[reg, h.lay.t0]
    if not h.cycles or f is None:
        return t0 + delta
    return t0 + np.rint(delta / f[reg]).astype(np.int64)


def _lifo_levels(st: np.ndarray, first: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For records sorted by group (write order within): each record's nesting level and whether it can pair.

    The depth walk of a group goes +1 at a start and -1 at an end, with a floor at 0 (an end with nothing
    open does not pull the later ones down): depth_after = s - min(0, running min of s), s the group's
    cumulative sum. A start's level is its depth after; an end's is its depth before (0: nothing to close).
    """
    step = np.where(st, 1, -1)
    s = np.cumsum(step)
    start_of = np.maximum.accumulate(np.where(first, np.arange(len(st)), 0))
    s = s - (s[start_of] - step[start_of])  # cumulative sum within the group
    big = len(st) + 2
    low = np.minimum.accumulate(s - group * big) + group * big  # running minimum within the group
    after = s - np.minimum(low, 0)
    before = np.empty_like(after)
    before[1:] = after[:-1]
    before[first] = 0  # each group starts with nothing open
    return np.where(st, after, before), st | (before > 0)


def _pair(out: Decoded, h: _Header, reg: np.ndarray, t: np.ndarray, is_start: np.ndarray, task: np.ndarray) -> Decoded:
    """General pairing per (region, task), last in first out: an end closes the latest open start of its task
    (nested scopes of one name pair correctly). An end with nothing open, or a start never closed, is
    unbalanced: counted per task, never paired with a wrong partner."""
    key = reg.astype(np.int64) * (TASK_MASK + 1) + task
    order = np.argsort(key, kind="stable")  # by (region, task); write order kept within
    k, st = key[order], is_start[order]
    first = np.ones(len(k), bool)
    first[1:] = k[1:] != k[:-1]
    group = np.cumsum(first) - 1
    level, can = _lifo_levels(st, first, group)
    # at one (group, level), starts and ends alternate in write order: the i-th start closes with the i-th end
    rows = np.flatnonzero(can)
    gl = group[rows] * (len(k) + 2) + level[rows]
    rows = rows[np.argsort(gl, kind="stable")]
    gl = np.sort(gl, kind="stable")
    nth = np.arange(len(rows)) - np.searchsorted(gl, gl, side="left")
    s_rows, e_rows = rows[st[rows]], rows[~st[rows]]
    s_key, e_key = gl[st[rows]], gl[~st[rows]]
    s_nth, e_nth = nth[st[rows]], nth[~st[rows]]
    # within a (group, level) the sequence is S E S E ...: the i-th start is at position 2i, its end at 2i + 1
    s_i, e_i = s_nth // 2, e_nth // 2
    ps_key = s_key * (len(k) + 1) + s_i
    pe_key = e_key * (len(k) + 1) + e_i
    both = np.intersect1d(ps_key, pe_key, assume_unique=True)
    ps = order[s_rows[np.isin(ps_key, both)]]
    pe = order[e_rows[np.isin(pe_key, both)]]
    # ps and pe come in the same (group, level, i) order
    out.unpaired = int(len(t) - 2 * len(ps))
    if out.unpaired:
        lone = np.ones(len(t), bool)
        lone[ps] = False
        lone[pe] = False
        table: dict[int, list[int]] = {}
        for i, c in zip(*np.unique(task[lone & is_start], return_counts=True)):
            table.setdefault(int(i), [0, 0])[0] = int(c)
        for i, c in zip(*np.unique(task[lone & ~is_start], return_counts=True)):
            table.setdefault(int(i), [0, 0])[1] = int(c)
        out.unbalanced = [(task_name(out.task_names, i), a, b) for i, (a, b) in sorted(table.items())]
    o = np.lexsort((t[ps], reg[ps]))  # rows by region, then start time
    ps, pe = ps[o], pe[o]
    return _finish(out, reg[ps], t[ps], t[pe], task[ps], h.groups, h.regions[:, h.lay.smid], h.warps)


def decode_buffer(buf: np.ndarray, task_names: Names = (), clock_hint_ghz: float | None = None) -> Decoded:
    """Decode a profiler buffer. ``buf`` is the int64 buffer (``tensor.cpu().numpy()``); ``task_names``: names
    of task types 0, 1, ... (a list) or of task ids (a dict, e.g. :func:`kernscope.intra.scopes.scope_table`);
    ``clock_hint_ghz``: the SM clock to convert cycle records with when the kernel is too short to measure it
    (:func:`kernscope.intra.host.decode_profiler_buffer` passes the device's current clock)."""
    b = np.asarray(buf).view(np.int64).ravel()
    names: list[str] | dict[int, str] = dict(task_names) if isinstance(task_names, Mapping) else list(task_names)
    h = _read_header(b)
    if h is None:
        flags = int(b[H_FLAGS])
        return Decoded(pl.DataFrame(schema=SCHEMA), task_names=names, ring=bool(flags & FLAG_RING),
                       cycles=bool(flags & FLAG_CYCLES))
    lay = h.lay
    if h.stage:
        return _decode_staged(h, names, clock_hint_ghz)
    written = _written(h.regions[:, lay.first_record : lay.first_record + h.cap], h.cap)
    count = np.maximum(h.regions[:, lay.count], written)  # the counter is stored only on drops / in ring mode
    kept = np.minimum(count, h.cap)
    over = int(np.maximum(count - h.cap, 0).sum())
    active = np.flatnonzero(count > 0)
    out = Decoded(pl.DataFrame(schema=SCHEMA), regions=len(active), dropped=0 if h.ring else over,
                  ring_overwritten=over if h.ring else 0, capacity_per_region=h.cap, ring=h.ring, cycles=h.cycles,
                  task_names=names, warps=h.warps)
    if h.warps is not None:  # a sampled warp the kernel does not have (or that never records) is said, not hidden
        recorded = (count > 0).reshape(-1, h.groups).any(axis=0)
        out.silent_warps = [w for w, r in zip(h.warps, recorded) if not r]
    if len(active) == 0:
        return out
    k0 = int(kept[active[0]])
    if not h.ring and not h.cycles and k0 > 0 and k0 % 2 == 0 and bool((kept[active] == k0).all()):
        fast = _fast_uniform(h, out, active, k0)
        if fast is not None:
            return fast
    reg, words = _gather(h, active, kept, count)
    out.records = int(words.size)
    f_all = _region_clocks(h, out, active, clock_hint_ghz)
    is_start = ((words >> START_BIT) & 1).astype(bool)
    task = words & TASK_MASK
    t = _times(h, reg, words, f_all)
    if not h.ring and len(words) % 2 == 0:
        # every region holds start, end, start, end, ... of one task at a time: pairs are (even, odd) positions
        ev, od = slice(0, None, 2), slice(1, None, 2)
        k = kept[active]
        if (k % 2 == 0).all() and is_start[ev].all() and not is_start[od].any() and (task[ev] == task[od]).all():
            out.unpaired = 0
            return _finish(out, reg[ev], t[ev], t[od], task[ev], h.groups, h.regions[:, h.lay.smid], h.warps)
    return _pair(out, h, reg, t, is_start, task)


def _region_clocks(h: _Header, out: Decoded, active: np.ndarray, clock_hint_ghz: float | None) -> np.ndarray | None:
    """Cycle mode: each region's SM clock (GHz, indexed by region; see :func:`_freq_ghz`), recorded in ``out``;
    None in globaltimer mode."""
    if not h.cycles:
        return None
    r, lay = h.regions, h.lay
    f, out.clock_source = _freq_ghz(r[active, lay.t0], r[active, lay.c0], r[active, lay.tlast], r[active, lay.clast],
                                    r[active, lay.smid], clock_hint_ghz)
    out.clock_ghz = float(np.median(f))
    f_all = np.ones(len(r))
    f_all[active] = f
    return f_all


FINALIZE_SCHEMA = {"block": pl.Int64, "group": pl.Int64, "sm": pl.Int64, "finalize_ns": pl.Int64}


def _decode_staged(h: _Header, names: list[str] | dict[int, str], clock_hint_ghz: float | None) -> Decoded:
    """Staged mode: each region holds a ring of ``h.stage`` records (the newest, when more were made), written by
    ``finalize()`` with the count, and the finalize start/end in the two slots after the ring."""
    lay, n = h.lay, h.stage
    count = h.regions[:, lay.count]
    active = np.flatnonzero(count > 0)
    kept = np.minimum(count, n)
    over = int(np.maximum(count - n, 0).sum())
    out = Decoded(pl.DataFrame(schema=SCHEMA), regions=len(active), ring_overwritten=over, capacity_per_region=n,
                  ring=True, cycles=h.cycles, task_names=names, stage_slots=n,
                  stage_memory="shared_mem" if h.shared else "registers",
                  finalize=pl.DataFrame(schema=FINALIZE_SCHEMA))
    if len(active) == 0:
        return out
    reg, words = _gather(h, active, kept, count, ring=n)
    out.records = int(words.size)
    f_all = _region_clocks(h, out, active, clock_hint_ghz)
    fin_s = h.regions[active, lay.first_record + n]
    fin_e = h.regions[active, lay.first_record + n + 1]
    ok = (fin_s != 0) & (fin_e != 0)
    fa = active[ok]
    if len(fa):
        ts = _times(h, fa, fin_s[ok], f_all)
        te = _times(h, fa, fin_e[ok], f_all)
        block, grp = _block_group(fa, h.groups, h.warps)
        out.finalize = pl.DataFrame({"block": block, "group": grp, "sm": h.regions[fa, lay.smid], "finalize_ns": te - ts},
                                    schema=FINALIZE_SCHEMA)
    is_start = ((words >> START_BIT) & 1).astype(bool)
    task = words & TASK_MASK
    t = _times(h, reg, words, f_all)
    return _pair(out, h, reg, t, is_start, task)


def _block_group(r: np.ndarray, groups: int, warps: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Region numbers -> (block, group); with warp sampling the group is the warp id."""
    block, group = (r, np.zeros(len(r), dtype=np.int64)) if groups <= 1 else (r // groups, r % groups)
    return block, (np.asarray(warps, dtype=np.int64)[group] if warps is not None else group)


def _finish(out: Decoded, r: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, tt: np.ndarray, groups: int,
            smid: np.ndarray, warps: list[int] | None = None) -> Decoded:
    """Build the task table; rows come out by region (block, group), then in record order. With warp sampling
    the group is the warp id."""
    block, group = _block_group(r, groups, warps)
    if warps is not None:
        out.warps = list(warps)
    out.tasks = pl.DataFrame(
        {
            "block": block,
            "group": group,
            "sm": smid[r],
            "task_type": tt,
            "task": _labels(out.task_names, tt),
            "start_ns": start_ns,
            "end_ns": end_ns,
            "duration_ns": end_ns - start_ns,
        },
        schema=SCHEMA,
    )
    return out
