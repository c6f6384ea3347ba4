"""How to read a JAX profile a time window at a time, exactly (the first stage of a streamed analysis).

A window (:class:`~kernscope.load.xplane.Window`) holds, of each line, the events that start in it. Decoded one after
another, the windows of a :func:`plan` put together are the whole profile's table in every column
(``tests/test_jax_windows.py``), because the plan cuts only at **quiet points**: a moment at which

- no event of any line (host thread or GPU stream) is running: it started before and ends after;
- no launched GPU work is pending: every GPU row whose launch (the host event of its correlation id) is before the
  moment also starts before it.

Then no event, launch, call-tree branch or command buffer's run of kernels spans two windows; where the profile has
step annotations (``StepTraceAnnotation``: events with a ``step_num``), no step does either, since an annotation runs
through its step. The plan also reads the one thing of a row that the whole profile decides, the HLO op and module
names the events name (a host event so named is an op), and gives it to every window's decode
(:attr:`~kernscope.load.xplane.Shared.hlo_names`); and the start of the first step after each cut
(:attr:`Plan.step_after`: the end of the span of a window's last step, as the whole profile's analysis takes it).

Finding the quiet points reads every event's time, duration, correlation id, step number and HLO names: a scan of the
events' bytes that keeps 5 columns of the decode's ~30, a time chunk at a time. A profile without a quiet point (a
range open across the whole run, a GPU always behind its host) has no plan and is read whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..errors import TraceError
from .native import scanner
from .protowire import WireError, as_array
from .xplane import Shared, _device_of, _hlo_names, _stat_cells, prepare
from .xscan import FieldSpec, TimeCuts, line_index, scan_lines
from .xstats import FIELD_KINDS, STAT_FIELDS, field_lut, field_table

#: the stats a plan reads (the correlation id: the pending launches; the HLO op and module: the names)
_READ = ("correlation", "hlo_op", "hlo_module", "step_num")


@dataclass(frozen=True)
class Plan:
    """A profile's windows (:func:`plan`): decode window k with ``decode(data, path, window=Window(plan.cuts, k),
    shared=plan.shared)``, for k in ``range(plan.windows)``."""

    cuts: TimeCuts
    shared: Shared
    #: per cut, the start of the first step annotation at or after it (ns; -1: none, or the profile has no step
    #: annotations): where the span of the last step before the cut ends
    step_after: np.ndarray

    @property
    def windows(self) -> int:
        return int(self.cuts.times.shape[1]) + 1


def plan(data: bytes | bytearray | memoryview | mmap.mmap, path: str, windows: int, *,
         workers: int | None = None, release_pages: bool = False) -> Plan | None:
    """Up to ``windows`` windows of about equal events, cut at the quiet points nearest the events' quantiles (two
    targets that find the same point make one window fewer). None where the profile cannot be read so: fewer than two
    windows asked, no compiled scanner, no quiet point inside the profile, or a line's events out of time order.

    ``release_pages``: ``data`` is a read-only mapping of the file (``mmap.ACCESS_READ``), whose pages the plan gives
    back as it walks them (the page cache keeps them), so that it holds a chunk of the file at a time rather than all
    of it; on memory of another kind that would zero them."""
    if windows < 2 or scanner() is None:
        return None
    buf = as_array(data)
    release = _Release(data) if release_pages and isinstance(data, mmap.mmap) else None
    try:
        return _plan(buf, windows, workers, prepare(data, path), release)
    except WireError as e:
        where = "" if "at byte" in str(e) else f" (at byte {e.offset:,})"
        raise TraceError(path, f"not a valid XSpace protobuf: {e}{where}; the file is truncated or damaged") from None


#: the plan reads the events in time chunks of about this many bytes each (its memory is one chunk's)
CHUNK_BYTES = 32 << 20
#: with ``release_pages``, the walk of the lines gives back the pages behind it every this many bytes
RELEASE_BYTES = 8 << 20


class _Release:
    """Gives back the pages of byte ranges of a read-only file mapping (``MADV_DONTNEED``), whole pages inside each
    range, ranges of under 64 KB left (their pages go with the mapping's at the end)."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data = data

    def __call__(self, off: np.ndarray, size: np.ndarray) -> None:
        page = mmap.PAGESIZE
        lo = -(-off // page) * page
        hi = (off + size) // page * page
        big = hi - lo >= 1 << 16
        with contextlib.suppress(AttributeError, OSError, ValueError):  # (no madvise: the pages stay)
            for a, b in zip(lo[big].tolist(), hi[big].tolist()):
                self.data.madvise(mmap.MADV_DONTNEED, a, b - a)


def _plan(buf: np.ndarray, windows: int, workers: int | None, shared: Shared,
          release: _Release | None = None) -> Plan | None:
    base = shared.base
    skip = {f.column for f in STAT_FIELDS if f.column not in _READ}
    unread = frozenset(i for i, f in enumerate(STAT_FIELDS) if f.column in skip)
    fields = field_table(base.stat_names, unread)
    flat = field_lut(base.smd["plane"].to_numpy(), base.smd["id"].to_numpy(), base.stat_names, unread)
    # one walk of the lines' bytes: where their events lie in time (the chunks' and the windows' cuts are found from
    # it walking a few hundred events a line each), their headers, spans and time order
    index = line_index(buf, base.line_off, base.line_len, release=RELEASE_BYTES if release is not None else 0)
    if flat is None or index is None:
        return None

    def field_of(plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
        out: np.ndarray = fields[base.stat_lookup.rows(plane, ids)]
        return out

    spec = FieldSpec(field_of, flat[0], flat[1], FIELD_KINDS, unread)
    timed_lines = index.span[:, 0] <= index.span[:, 1]
    if not timed_lines.any():
        return None
    lo, hi = int(index.span[timed_lines, 0].min()), int(index.span[timed_lines, 1].max())
    chunks = max(1, min(64, int(base.line_len.sum()) // CHUNK_BYTES))
    cuts = index.cuts(np.unique(np.linspace(lo, hi + 1, chunks + 1)[1:-1].astype(np.int64)))
    device = np.array([-1 if _device_of(p.name) is None else _device_of(p.name) for p in base.planes], dtype=np.int64)
    finder = _Quiet(device[base.line_plane] >= 0 if base.line_plane.size else np.zeros(0, dtype=bool), lo)
    names: set[str] = set()
    for k in range(cuts.times.shape[1] + 1):  # each chunk's events scanned, its quiet candidates found, then dropped
        off, size = cuts.window(k, base.line_off)
        scan = scan_lines(buf, off, size, base.line_plane, spec, base.stat_lookup, base.md_lookup, workers=workers,
                          header=cuts.hdr)
        cols, strings, _ = _stat_cells(buf, base, scan, fields, skip, {"hlo_op", "hlo_module"})
        names |= _hlo_names(strings)
        timed = ~scan.ev_flags.view(np.bool_)  # (aggregated events have no time)
        step = cols["step_num"].is_not_null().to_numpy()  # (a StepTraceAnnotation)
        if timed.all():  # (no copies where every event is timed)
            finder.add(scan.ev_line, scan.ev_ts, scan.ev_dur, cols["correlation"], step)
        else:
            finder.add(scan.ev_line[timed], scan.ev_ts[timed], scan.ev_dur[timed],
                       cols["correlation"].filter(pl.Series(timed)), step[timed])
        del scan, cols, strings
        if release is not None:
            release(off, size)
    quiet, before = finder.result()
    if quiet.size == 0:
        return None
    # the quiet points nearest the events' quantiles, by the events before each
    targets = finder.events * np.arange(1, windows) / windows
    at = np.clip(np.searchsorted(before, targets), 1, max(quiet.size - 1, 1))
    lower = np.minimum(at - 1, quiet.size - 1)
    upper = np.minimum(at, quiet.size - 1)
    near = np.where(np.abs(before[lower] - targets) <= np.abs(before[upper] - targets), lower, upper)
    times = np.unique(quiet[near])
    steps = np.unique(np.concatenate(finder.step_starts)) if finder.step_starts else np.zeros(0, np.int64)
    step_after = np.full(times.size, -1, np.int64)
    if steps.size:
        at = np.searchsorted(steps, times, side="left")
        step_after = np.where(at < steps.size, steps[np.minimum(at, steps.size - 1)], -1)
    return Plan(index.cuts(times), dataclasses.replace(shared, hlo_names=frozenset(names)), step_after.astype(np.int64))


class _Quiet:
    """Finds the quiet points (module docstring) of events given chunk by chunk in time order (:meth:`add`): a chunk's
    events all start after the previous chunk's, by line (non-decreasing) and start within a line. ``gpu_line``: per
    line, whether it is a GPU stream; ``first``: the first event's start (a cut there or before leaves a window
    empty)."""

    def __init__(self, gpu_line: np.ndarray, first: int) -> None:
        self.gpu_line = gpu_line
        self.first = first
        self.ordered = True
        self.events = 0  #: the events given so far
        self.running = int(np.iinfo(np.int64).min)  #: the latest end of the events given so far (ns)
        self.idle: list[np.ndarray] = []  #: host starts at which nothing runs, chunk by chunk
        self.idle_before: list[np.ndarray] = []  #: the events that start before each
        self.step_starts: list[np.ndarray] = []  #: the step annotations' starts, chunk by chunk
        self.launches: list[pl.DataFrame] = []  #: (correlation, the earliest launch)
        self.rows: list[pl.DataFrame] = []  #: (correlation, the latest GPU row start)

    def add(self, line: np.ndarray, ts: np.ndarray, dur: np.ndarray, correlation: pl.Series,
            step: np.ndarray | None = None) -> None:
        """A chunk's events: line, start and duration (ns), correlation id (null: none), and whether each is a step
        annotation (``step``, a ``StepTraceAnnotation``: None, none is)."""
        is_gpu = self.gpu_line[line] if line.size else np.zeros(0, dtype=bool)
        if ts.size > 1:  # (each line's events in time order: the quiet points need it)
            back = np.diff(ts) < 0
            if (back & (line[1:] == line[:-1])).any():
                self.ordered = False
        # something runs at a moment where an event that started before it (on any line, in this chunk or one before)
        # ends after it: the events in time order (each line's are: a merge of sorted runs), the latest end so far
        order = np.argsort(ts, kind="stable")
        starts = ts[order]
        latest = np.maximum.accumulate((ts + dur)[order]) if ts.size else np.zeros(0, np.int64)
        host = starts[~is_gpu[order]]
        cand = host[np.append(True, host[1:] != host[:-1])] if host.size else host
        cand = cand[cand > self.first]
        before = np.searchsorted(starts, cand, side="left")  # the events of the chunk that start before each
        ok = np.where(before > 0, np.maximum(latest[np.maximum(before - 1, 0)], self.running), self.running) <= cand
        if latest.size:
            self.running = max(self.running, int(latest[-1]))
        if step is not None:
            self.step_starts.append(np.unique(ts[step & ~is_gpu]))
        self.idle.append(cand[ok])
        self.idle_before.append(self.events + before[ok])
        self.events += int(ts.size)
        has = correlation.is_not_null().to_numpy()
        if has.any():
            corr = correlation.fill_null(-1).to_numpy()
            host_c, gpu_c = has & ~is_gpu, has & is_gpu
            self.launches.append(pl.DataFrame({"c": corr[host_c], "t": ts[host_c]}).group_by("c").agg(pl.col("t").min()))
            self.rows.append(pl.DataFrame({"c": corr[gpu_c], "t": ts[gpu_c]}).group_by("c").agg(pl.col("t").max()))

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The quiet points (ns, sorted, distinct) and the events that start before each; empty where a line's events
        are out of time order."""
        empty = np.zeros(0, np.int64)
        if not self.ordered or not self.idle:
            return empty, empty
        idle, before = np.concatenate(self.idle), np.concatenate(self.idle_before)
        if self.launches and self.rows:
            # pending: a GPU row launched before the moment that starts at or after it; per correlation id, the
            # moments in (its launch, its latest row's start]
            launch = pl.concat(self.launches).group_by("c").agg(pl.col("t").min())
            latest = pl.concat(self.rows).group_by("c").agg(pl.col("t").max().alias("end"))
            spans = launch.join(latest, on="c", how="inner").filter(pl.col("t") < pl.col("end"))
            lo = np.sort(spans["t"].to_numpy())
            hi = np.sort(spans["end"].to_numpy())
            pending = np.searchsorted(lo, idle, side="left") - np.searchsorted(hi, idle, side="left")
            keep = pending == 0
            idle, before = idle[keep], before[keep]
        return idle, before


def quiet_points(line: np.ndarray, ts: np.ndarray, dur: np.ndarray, correlation: pl.Series,
                 gpu_line: np.ndarray) -> np.ndarray | None:
    """The host events' starts (ns, sorted, distinct; after the first event's) at which no event is running and no
    launched GPU row is pending (module docstring), of the events given by their line (non-decreasing), start and
    duration (ns) and correlation id (null: none); ``gpu_line``: per line, whether it is a GPU stream. None where a
    line's events are out of time order."""
    q = _Quiet(gpu_line, int(ts.min()) if ts.size else 0)
    q.add(line, ts, dur, correlation)
    return q.result()[0] if q.ordered else None
