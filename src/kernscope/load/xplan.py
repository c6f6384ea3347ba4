"""How to read a JAX profile a time window at a time, exactly (the first stage of a streamed analysis).

A window (:class:`~kernscope.load.xplane.Window`) holds, of each line, the events that start in it. Decoded one after
another, the windows of a :func:`plan` put together are the whole profile's table in every column
(``tests/test_jax_windows.py``), because the plan cuts only at **quiet points**: a moment at which

- no event of any line (host thread or GPU stream) is running: it started before and ends after;
- no launched GPU work is pending: every GPU row whose launch (the host event of its correlation id) is before the
  moment also starts before it.

Then no event, launch, call-tree branch or command buffer's run of kernels spans two windows. The plan also reads the
one thing of a row that the whole profile decides, the HLO op and module names the events name (a host event so
named is an op), and gives it to every window's decode (:attr:`~kernscope.load.xplane.Shared.hlo_names`).

Finding the quiet points reads every event's time, duration, correlation id and HLO names: a scan of the events'
bytes that keeps 4 columns of the decode's ~30. A profile without a quiet point (a range open across the whole run, a
GPU always behind its host) has no plan and is read whole.
"""

from __future__ import annotations

import dataclasses
import mmap
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..errors import TraceError
from .native import scanner
from .protowire import WireError, as_array
from .xplane import Shared, _device_of, _hlo_names, _stat_cells, prepare
from .xscan import FieldSpec, TimeCuts, scan_lines, time_cuts
from .xstats import FIELD_KINDS, STAT_FIELDS, field_lut, field_table

#: the stats a plan reads (the correlation id: the pending launches; the HLO op and module: the names)
_READ = ("correlation", "hlo_op", "hlo_module")


@dataclass(frozen=True)
class Plan:
    """A profile's windows (:func:`plan`): decode window k with ``decode(data, path, window=Window(plan.cuts, k),
    shared=plan.shared)``, for k in ``range(plan.windows)``."""

    cuts: TimeCuts
    shared: Shared

    @property
    def windows(self) -> int:
        return int(self.cuts.times.shape[1]) + 1


def plan(data: bytes | bytearray | memoryview | mmap.mmap, path: str, windows: int, *,
         workers: int | None = None) -> Plan | None:
    """Up to ``windows`` windows of about equal events, cut at the quiet points nearest the events' quantiles (two
    targets that find the same point make one window fewer). None where the profile cannot be read so: fewer than two
    windows asked, no compiled scanner, no quiet point inside the profile, or a line's events out of time order."""
    if windows < 2 or scanner() is None:
        return None
    buf = as_array(data)
    try:
        return _plan(buf, windows, workers, prepare(data, path))
    except WireError as e:
        where = "" if "at byte" in str(e) else f" (at byte {e.offset:,})"
        raise TraceError(path, f"not a valid XSpace protobuf: {e}{where}; the file is truncated or damaged") from None


def _plan(buf: np.ndarray, windows: int, workers: int | None, shared: Shared) -> Plan | None:
    base = shared.base
    skip = {f.column for f in STAT_FIELDS if f.column not in _READ}
    unread = frozenset(i for i, f in enumerate(STAT_FIELDS) if f.column in skip)
    fields = field_table(base.stat_names, unread)
    flat = field_lut(base.smd["plane"].to_numpy(), base.smd["id"].to_numpy(), base.stat_names, unread)
    if flat is None:
        return None

    def field_of(plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
        out: np.ndarray = fields[base.stat_lookup.rows(plane, ids)]
        return out

    spec = FieldSpec(field_of, flat[0], flat[1], FIELD_KINDS, unread)
    scan = scan_lines(buf, base.line_off, base.line_len, base.line_plane, spec, base.stat_lookup, base.md_lookup,
                      workers=workers)
    cols, strings, _ = _stat_cells(buf, base, scan, fields, skip, {"hlo_op", "hlo_module"})
    names = _hlo_names(strings)
    timed = ~scan.ev_flags.view(np.bool_)  # (aggregated events have no time)
    device = np.array([-1 if _device_of(p.name) is None else _device_of(p.name) for p in base.planes], dtype=np.int64)
    gpu_line = device[base.line_plane] >= 0 if base.line_plane.size else np.zeros(0, dtype=bool)
    quiet = _Quiet(scan.ev_line[timed], scan.ev_ts[timed], scan.ev_dur[timed], cols["correlation"].filter(pl.Series(timed)),
                   gpu_line)
    if not quiet.ordered:
        return None
    targets = np.quantile(scan.ev_ts[timed], np.arange(1, windows) / windows)
    del scan, cols, strings
    found = [quiet.nearest(float(t)) for t in targets]
    times = np.unique(np.array([t for t in found if t is not None], dtype=np.int64))
    if times.size == 0:
        return None
    cuts = time_cuts(buf, base.line_off, base.line_len, times)
    if cuts is None:
        return None
    return Plan(cuts, dataclasses.replace(shared, hlo_names=names))


class _Quiet:
    """Tests moments for quietness (module docstring) over the events given by their line (non-decreasing), start and
    duration (ns) and correlation id (null: none); ``gpu_line``: per line, whether it is a GPU stream."""

    def __init__(self, line: np.ndarray, ts: np.ndarray, dur: np.ndarray, correlation: pl.Series,
                 gpu_line: np.ndarray) -> None:
        is_gpu = gpu_line[line] if line.size else np.zeros(0, dtype=bool)
        #: the first event's start: a cut there or before it would leave a window empty
        self.first = int(ts.min()) if ts.size else 0
        # (kind="stable": a merge of sorted runs, each line's; the default sort took 3x as long)
        self.host_starts = np.sort(ts[~is_gpu], kind="stable")  #: the candidates: host events' starts
        bounds = np.flatnonzero(np.diff(line)) + 1
        #: per line: its events' starts and the latest end so far (its events start in time order)
        self.lines: list[tuple[np.ndarray, np.ndarray]] = []
        self.ordered = True
        for a, b in zip(np.concatenate([[0], bounds]).tolist(), np.concatenate([bounds, [line.size]]).tolist()):
            s = ts[a:b]
            if s.size > 1 and (np.diff(s) < 0).any():
                self.ordered = False
            self.lines.append((s, np.maximum.accumulate(s + dur[a:b])))
        # each GPU row's launch (the earliest host event of its correlation id): pending over (launch, start]
        has = correlation.is_not_null().to_numpy()
        corr = correlation.fill_null(-1).to_numpy()
        launches = (pl.DataFrame({"c": corr[has & ~is_gpu], "launch": ts[has & ~is_gpu]})
                    .group_by("c").agg(pl.col("launch").min()))
        rows = (pl.DataFrame({"c": corr[has & is_gpu], "start": ts[has & is_gpu]}).join(launches, on="c", how="inner")
                .filter(pl.col("launch") < pl.col("start")))
        self.launch = np.sort(rows["launch"].to_numpy(), kind="stable")
        self.start = np.sort(rows["start"].to_numpy(), kind="stable")

    def test(self, t: np.ndarray) -> np.ndarray:
        """Whether each moment of ``t`` (ns, sorted) is quiet."""
        ok = np.ones(t.size, dtype=bool)
        for s, running in self.lines:
            i = np.searchsorted(s, t, side="left")  # the line's events that start before each moment
            ok &= (i == 0) | (running[np.maximum(i - 1, 0)] <= t)
        # pending rows: launched before t, starting at or after it (launch < t <= start)
        pending = np.searchsorted(self.launch, t, side="left") - np.searchsorted(self.start, t, side="left")
        out: np.ndarray = ok & (pending == 0)
        return out

    def all(self) -> np.ndarray:
        """Every quiet point (ns, sorted, distinct)."""
        t = np.unique(self.host_starts)
        t = t[t > self.first]
        out: np.ndarray = t[self.test(t)]
        return out

    def nearest(self, target: float, reach: int = 1024) -> int | None:
        """The quiet point nearest ``target`` (ns), searched among the host starts around it, ``reach`` of them on each
        side and twice as many each time none is quiet; None where no host start is."""
        hs = self.host_starts
        at = int(np.searchsorted(hs, target))
        while True:
            lo, hi = max(at - reach, 0), min(at + reach, hs.size)
            t = np.unique(hs[lo:hi])
            t = t[t > self.first]
            q = t[self.test(t)]
            if q.size:
                return int(q[np.argmin(np.abs(q - target))])
            if lo == 0 and hi == hs.size:
                return None
            reach *= 2


def quiet_points(line: np.ndarray, ts: np.ndarray, dur: np.ndarray, correlation: pl.Series,
                 gpu_line: np.ndarray) -> np.ndarray | None:
    """The host events' starts (ns, sorted, distinct; after the first event's) at which no event is running and no
    launched GPU row is pending (module docstring), of the events given by their line (non-decreasing), start and
    duration (ns) and correlation id (null: none); ``gpu_line``: per line, whether it is a GPU stream. None where a
    line's events are out of time order."""
    q = _Quiet(line, ts, dur, correlation, gpu_line)
    return q.all() if q.ordered else None
