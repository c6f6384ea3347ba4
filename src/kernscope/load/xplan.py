"""How to read a JAX profile a time window at a time, exactly (the first stage of a streamed analysis).

A window (:class:`~kernscope.load.xplane.Window`) holds, of each line, the events that start in it. Decoded one after
another, the windows of a :func:`plan` put together are the whole profile's table in every column
(``tests/test_jax_windows.py``), because the plan cuts only at **quiet points**: a moment at which

- no event of any line (host thread or GPU stream) is running: it started before and ends after; but for a host
  range that holds whole steps (an epoch's annotation, the Python tracer's frame of the training loop: the first step
  annotation starting at or after it ends within it), which counts as running up to its first step's start only
  (:meth:`_Quiet._running_long`; its window is its first step's, and no analysis of a step reads it), and for the
  Python tracer's frames of a line that holds no step annotation and no event with a correlation id (a data loader's
  thread, waiting on its full queue across every step's end), which no analysis of a step reads either (the windows
  check that their threads launch nothing in any window: :func:`kernscope.analyze.windows._held_across`);
- no launched GPU work is pending: every GPU row whose launch (the host event of its correlation id) is before the
  moment also starts before it.

Then no event (but such a range or frame), launch, call-tree branch or command buffer's run of kernels spans two
windows; where the profile has step annotations (``StepTraceAnnotation``: events with a ``step_num``), no step does
either, since an annotation runs through its step. The plan also reads the one thing of a row that the whole profile
decides, the HLO op and module names the events name (a host event so named is an op), and gives it to every window's
decode (:attr:`~kernscope.load.xplane.Shared.hlo_names`); and the start of the first step after each cut
(:attr:`Plan.step_after`: the end of the span of a window's last step, as the whole profile's analysis takes it).

Finding the quiet points reads every event's time, duration, correlation id, step number and HLO names: a scan of the
events' bytes that keeps 5 columns of the decode's ~30, a time chunk at a time. A profile without a quiet point (a
range open across the whole run that holds no whole step, a GPU always behind its host) has no plan and is read whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import mmap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ..intervals import first_held
from .native import scanner
from .protowire import WireError, as_array
from .xplane import Shared, _Base, _hlo_names, _stat_cells, damaged, lines_and_metadata, plane_devices, prepare
from .xscan import NEAR_STRIDE, FieldSpec, TimeCuts, TimeIndex, line_index, scan_lines
from .xstats import FIELD_KINDS, STAT_FIELDS, field_lut, field_table

if TYPE_CHECKING:
    from .xhead import XHeadStart

#: the stats a plan reads (the correlation id: the pending launches; the HLO op and module: the names)
_READ = ("correlation", "hlo_op", "hlo_module", "step_num")
#: the stats :func:`plan_near` reads (the HLO names are each window's own)
_NEAR_READ = ("correlation", "step_num")


@dataclass(frozen=True)
class Plan:
    """A profile's windows (:func:`plan`): decode window k with ``decode(data, path, window=Window(plan.cuts, k),
    shared=plan.shared)``, for k in ``range(plan.windows)``."""

    cuts: TimeCuts
    shared: Shared
    #: per cut, the start of the first step annotation at or after it (ns; -1: none, or the profile has no step
    #: annotations): where the span of the last step before the cut ends
    step_after: np.ndarray
    #: True (:func:`plan`): every cut is a quiet point and ``shared`` holds the whole profile's HLO names. False
    #: (:func:`plan_near`): no event runs across a cut, but a GPU row launched in one window may start in another,
    #: and each window's decode takes its own HLO names: the caller checks both once the windows are decoded
    #: (:class:`Ledger`), and decodes again where they differ from the whole profile's
    checked: bool = True

    @property
    def windows(self) -> int:
        return int(self.cuts.times.shape[1]) + 1


@dataclass(frozen=True)
class Count:
    """How many windows a plan cuts the profile into: ``windows``, or more where it has over ``events`` events a window
    (then one window per ``events`` events, up to ``most``; ``events`` 0: ``windows``). A window's tables and their
    analysis grow with its events, not its bytes: a profile of short host ranges holds more of them a byte."""

    windows: int
    events: int = 0
    most: int = 0

    def of(self, events: int) -> int:
        """The windows for a profile of ``events`` events."""
        if self.events <= 0:
            return self.windows
        return max(self.windows, min(self.most, -(-events // self.events)))


def plan(data: bytes | bytearray | memoryview | mmap.mmap, path: str, windows: int | Count, *,
         workers: int | None = None, release_pages: bool = False, base: _Base | None = None) -> Plan | None:
    """Up to ``windows`` windows (a :class:`Count`: as many as it gives for the profile's events) of about equal
    events, cut at the quiet points nearest the events' quantiles (two targets that find the same point make one
    window fewer). None where the profile cannot be read so: fewer than two windows asked, no compiled scanner, no
    quiet point inside the profile, or a line's events out of time order.

    ``release_pages``: ``data`` is a read-only mapping of the file (``mmap.ACCESS_READ``), whose pages the plan gives
    back as it walks them (the page cache keeps them), so that it holds a chunk of the file at a time rather than all
    of it; on memory of another kind that would zero them. ``base``: the profile's :func:`lines_and_metadata`, where
    read already (:func:`names_steps`)."""
    return _planned(_plan, data, path, windows, workers, release_pages, base)


#: a plan's way (:func:`_plan`, :func:`_near`): of the lines and metadata, and the rest of what every window reads
#: alike (given when the plan is made: read meanwhile)
_How = Callable[[np.ndarray, Count, int | None, _Base, Callable[[], Shared], "_Release | None"], "Plan | None"]


def _planned(how: _How, data: bytes | bytearray | memoryview | mmap.mmap, path: str, windows: int | Count,
             workers: int | None, release_pages: bool, base: _Base | None = None) -> Plan | None:
    """``how``'s plan of the profile (:func:`_plan`, :func:`_near`), bad bytes said as a :class:`TraceError`."""
    count = windows if isinstance(windows, Count) else Count(windows)
    if count.windows < 2 or scanner() is None:
        return None
    buf = as_array(data)
    release = _Release(data) if release_pages and isinstance(data, mmap.mmap) else None
    base = base if base is not None else lines_and_metadata(data, path)
    try:
        # the modules' HLO programs and the planes' stats (Python: 0.08 s of a 210 MB profile) are read on a thread
        # while the plan walks the lines (in C, without the GIL: 0.1 s there), not before it
        with ThreadPoolExecutor(1, thread_name_prefix="kernscope-plan") as pool:
            shared = pool.submit(prepare, data, path, base)
            return how(buf, count, workers, base, shared.result, release)
    except WireError as e:
        raise damaged(path, e) from None


def plan_near(data: bytes | bytearray | memoryview | mmap.mmap, path: str, windows: int | Count, *,
              workers: int | None = None, release_pages: bool = False, head: XHeadStart | None = None,
              base: _Base | None = None) -> Plan | None:
    """:func:`plan`'s windows, found from the line index and the events near each target alone (a few thousand
    events a target, where :func:`plan` reads every event's stats): each cut is the quiet point nearest one of the
    events' quantiles (by the index) among the host starts near it at which

    - no event of any line runs (exactly: the index gives each line's latest end before the events read);
    - no GPU row launched before it starts after it, of the events read; a row whose launch was not read counts as
      pending from the launch read of the next lower correlation id (the runtime numbers its calls in order), or from
      before them all where none lower was read;
    - a step annotation starts after it, among the events read (the plan's :attr:`Plan.step_after`).

    A launch read whose row starts after every event read is not seen (the cut is nearest the middle of the events
    read, hundreds of steps of a GPU's lag from their end), nor is a launch before them all whose row starts after them
    all; and each window's HLO names are its own: the plan is not ``checked``, and its caller checks both once the
    windows are decoded (:class:`Ledger`).
    None where :func:`plan` returns None, where no target finds such a point near it (:func:`plan` may still
    find one far from the targets), and where it would read more than :data:`NEAR_MOST_SHARE` of the events' bytes.
    ``release_pages``: as :func:`plan`'s. ``head``: the lines' index made on a thread while the command imported
    (:mod:`.xhead`), taken where it is this file's (closed in any case). ``base``: as :func:`plan`'s."""
    try:
        taken = None if head is None else functools.partial(head.take, path)
        return _planned(functools.partial(_near, head=taken), data, path, windows, workers, release_pages, base)
    finally:
        if head is not None:
            head.close()


#: :func:`plan_near` first reads the events between the index rows (of every line, in time order) this many rows each
#: side of a target; four times as many where no quiet point is found there, up to :data:`NEAR_MOST_ROWS`
NEAR_ROWS = 32
NEAR_MOST_ROWS = 512
#: :func:`plan_near` gives up (None) once it has read this share of the lines' bytes (a profile of many lines, each
#: read a few rows beyond the neighborhood, or one whose quiet points are far apart): :func:`plan` reads them all once
NEAR_MOST_SHARE = 0.25


def _near(buf: np.ndarray, count: Count, workers: int | None, base: _Base, shared: Callable[[], Shared],
          release: _Release | None = None, *,
          head: Callable[[np.ndarray, np.ndarray, np.ndarray, int], TimeIndex | None] | None = None) -> Plan | None:
    reader = _reader(base, _NEAR_READ)
    # (the index a head start made while the command imported, where it is of these lines: :mod:`.xhead`)
    index = head(buf, base.line_off, base.line_len, NEAR_STRIDE) if head is not None else None
    if index is None:
        index = line_index(buf, base.line_off, base.line_len, NEAR_STRIDE,
                           release=RELEASE_BYTES if release is not None else 0)
    if reader is None or index is None or index.line.size == 0:
        return None
    timed_lines = index.span[:, 0] <= index.span[:, 1]
    if not timed_lines.any():
        return None
    windows = count.of(int(index.total.sum()))
    n = base.line_off.size
    first_row = np.searchsorted(index.line, np.arange(n + 1))  # each line's first index row (and the end)
    # each row stands for its line's events up to the next row: the targets are the quantiles of their sum in time
    last = np.append(index.line[1:] != index.line[:-1], True)
    weight = np.where(last, index.total[index.line] - index.count, np.append(index.count[1:], 0) - index.count)
    order = np.argsort(index.start, kind="stable")
    starts = index.start[order]
    done = np.cumsum(weight[order])
    at = np.unique(np.searchsorted(done, done[-1] * np.arange(1, windows) / windows))
    first = int(index.span[timed_lines, 0].min())
    near = _Near(buf, base, reader, index, first_row, _gpu_lines(base), first, workers, release,
                 int(NEAR_MOST_SHARE * base.line_len.sum()))
    found: dict[int, int] = {}
    for q in at.tolist():
        rows = NEAR_ROWS
        while True:
            if near.read > near.most:
                return None
            point = near.point(int(starts[min(q, starts.size - 1)]), int(starts[max(q - rows, 0)]),
                               int(starts[min(q + rows, starts.size - 1)]))
            whole = q - rows <= 0 and q + rows >= starts.size - 1
            if point is not None or whole or rows >= NEAR_MOST_ROWS:
                break
            rows *= 4
        if point is not None:
            found[point[0]] = point[1]
    if not found:
        return None
    times = np.array(sorted(found), dtype=np.int64)
    after = np.array([found[t] for t in times.tolist()], dtype=np.int64)
    return Plan(index.cuts(times), shared(), after, checked=False)


@dataclass
class _Near:
    """The quiet points near a time (:func:`plan_near`), from the events between some index rows of every line."""

    buf: np.ndarray
    base: _Base
    reader: _Reader
    index: TimeIndex
    first_row: np.ndarray
    gpu_line: np.ndarray
    first: int
    workers: int | None
    release: _Release | None
    most: int  #: the bytes of events to read at most
    read: int = 0  #: the bytes of events read so far
    frame_md: np.ndarray = dataclasses.field(init=False)  #: :func:`frames_of` the profile's metadata

    def __post_init__(self) -> None:
        self.frame_md = frames_of(self.base)

    def point(self, target: int, lo: int, hi: int) -> tuple[int, int] | None:
        """The quiet point in ``(lo, hi]`` (ns) nearest ``target`` (the earlier of two as near) with a step annotation
        starting at or after it by ``hi``, and that start; None where there is none. Reads, of each line, the events
        from its last index row at or before ``lo`` to its first after ``hi``: every event that starts in ``[lo,
        hi]``, and the line's latest end before them from the index."""
        ix, base = self.index, self.base
        n = base.line_off.size
        own = self.first_row[:-1]
        rows = np.diff(self.first_row)
        up_lo = np.minimum(np.bincount(ix.line[ix.start <= lo], minlength=n)[:n], rows)  # rows at or before lo, a line
        up_hi = np.minimum(np.bincount(ix.line[ix.start <= hi], minlength=n)[:n], rows)
        has_lo = up_lo > 0
        row_lo = np.where(has_lo, own + up_lo - 1, 0)
        row_hi = own + up_hi
        off = np.where(has_lo, ix.off[row_lo], base.line_off)
        end = np.where(up_hi < rows, ix.off[np.minimum(row_hi, ix.off.size - 1)], base.line_off + base.line_len)
        # each line's latest end before the events read; a host line's that runs past them all is taken for a range
        # holding whole steps (:meth:`_Quiet._running_long`: it started before them, so the first step after its
        # start is at the latest the first read after ``lo``), whose windows' decodes check it (an event across a cut
        # that holds no step or is one sends the windows to :func:`plan`)
        reach = np.where(has_lo, ix.reach[row_lo], np.iinfo(np.int64).min)
        holder = has_lo & ~self.gpu_line & (reach > hi)
        seed = int(reach[~holder].max()) if (~holder).any() else int(np.iinfo(np.int64).min)
        off = np.ascontiguousarray(off, dtype=np.int64)
        size = np.ascontiguousarray(end - off, dtype=np.int64)
        self.read += int(size.sum())
        r = self.reader
        scan = scan_lines(self.buf, off, size, base.line_plane, r.spec, base.stat_lookup, base.md_lookup,
                          workers=self.workers, header=ix.hdr)
        cols, _, _ = _stat_cells(self.buf, base, scan, r.fields, r.skip, set())
        timed = ~scan.ev_flags.view(np.bool_)
        step = cols["step_num"].is_not_null().to_numpy()
        quiet = _Quiet(self.gpu_line, self.first, open_ended=True)
        quiet.running = seed
        quiet.add(scan.ev_line[timed], scan.ev_ts[timed], scan.ev_dur[timed],
                  cols["correlation"].filter(pl.Series(timed)), step[timed], self.frame_md[scan.ev_name[timed]])
        del scan, cols
        if self.release is not None:
            self.release(off, size)
        points, _ = quiet.result()
        points = points[(points > lo) & (points <= hi)]
        steps = np.unique(np.concatenate(quiet.step_starts)) if quiet.step_starts else np.zeros(0, np.int64)
        steps = steps[steps <= hi]
        if holder.any():  # (after the first step read that starts after lo: the held step's start or later)
            later = steps[steps > lo]
            points = points[points > later[0]] if later.size else points[:0]
        nxt = np.searchsorted(steps, points, side="left")
        ok = nxt < steps.size
        points, nxt = points[ok], nxt[ok]
        if points.size == 0:
            return None
        best = int(np.argmin(np.abs(points - target)))  # (the first of the nearest: the earlier)
        return int(points[best]), int(steps[nxt[best]])


def names_steps(base: _Base) -> bool:
    """Whether a plane of the profile (its :func:`lines_and_metadata`) names a ``step_num`` stat: the one a
    ``StepTraceAnnotation`` writes, without which a profile has no step annotations to cut between (found before a
    plan's walk of the lines: a plan of a 202.6 MB profile without them read its bytes twice, ~0.8 s, to find none)."""
    return "step_num" in set(base.stat_names.to_list())


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


def _gpu_lines(base: _Base) -> np.ndarray:
    """Per line, whether it is a GPU stream (its plane a GPU's)."""
    if not base.line_plane.size:
        return np.zeros(0, dtype=bool)
    out: np.ndarray = plane_devices(base.planes)[base.line_plane] >= 0
    return out


@dataclass(frozen=True)
class _Reader:
    """How a plan scans events: some stats only (:data:`_READ`, :data:`_NEAR_READ`)."""

    spec: FieldSpec
    fields: np.ndarray
    skip: set[str]


def _reader(base: _Base, read: tuple[str, ...] = _READ) -> _Reader | None:
    skip = {f.column for f in STAT_FIELDS if f.column not in read}
    unread = frozenset(i for i, f in enumerate(STAT_FIELDS) if f.column in skip)
    fields = field_table(base.stat_names, unread)
    flat = field_lut(base.smd["plane"].to_numpy(), base.smd["id"].to_numpy(), base.stat_names, unread)
    if flat is None:
        return None

    def field_of(plane: np.ndarray, ids: np.ndarray) -> np.ndarray:
        out: np.ndarray = fields[base.stat_lookup.rows(plane, ids)]
        return out

    return _Reader(FieldSpec(field_of, flat[0], flat[1], FIELD_KINDS, unread), fields, skip)


def _plan(buf: np.ndarray, count: Count, workers: int | None, base: _Base, shared: Callable[[], Shared],
          release: _Release | None = None) -> Plan | None:
    reader = _reader(base)
    # one walk of the lines' bytes: where their events lie in time (the chunks' and the windows' cuts are found from
    # it walking a few hundred events a line each), their headers, spans and time order
    index = line_index(buf, base.line_off, base.line_len, release=RELEASE_BYTES if release is not None else 0)
    if reader is None or index is None:
        return None
    spec, fields, skip = reader.spec, reader.fields, reader.skip
    timed_lines = index.span[:, 0] <= index.span[:, 1]
    if not timed_lines.any():
        return None
    windows = count.of(int(index.total.sum()))
    lo, hi = int(index.span[timed_lines, 0].min()), int(index.span[timed_lines, 1].max())
    chunks = max(1, min(64, int(base.line_len.sum()) // CHUNK_BYTES))
    cuts = index.cuts(np.unique(np.linspace(lo, hi + 1, chunks + 1)[1:-1].astype(np.int64)))
    finder = _Quiet(_gpu_lines(base), lo)
    frame_md = frames_of(base)
    names: set[str] = set()
    for k in range(cuts.times.shape[1] + 1):  # each chunk's events scanned, its quiet candidates found, then dropped
        off, size = cuts.window(k, base.line_off)
        scan = scan_lines(buf, off, size, base.line_plane, spec, base.stat_lookup, base.md_lookup, workers=workers,
                          header=cuts.hdr)
        cols, strings, _ = _stat_cells(buf, base, scan, fields, skip, {"hlo_op", "hlo_module"})
        names |= _hlo_names(strings)
        timed = ~scan.ev_flags.view(np.bool_)  # (aggregated events have no time)
        step = cols["step_num"].is_not_null().to_numpy()  # (a StepTraceAnnotation)
        frame = frame_md[scan.ev_name]  # (a Python frame)
        if timed.all():  # (no copies where every event is timed)
            finder.add(scan.ev_line, scan.ev_ts, scan.ev_dur, cols["correlation"], step, frame)
        else:
            finder.add(scan.ev_line[timed], scan.ev_ts[timed], scan.ev_dur[timed],
                       cols["correlation"].filter(pl.Series(timed)), step[timed], frame[timed])
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
    return Plan(index.cuts(times), dataclasses.replace(shared(), hlo_names=frozenset(names)), step_after.astype(np.int64))


def frames_of(base: _Base) -> np.ndarray:
    """Per row of the profile's event metadata, and one more (False: an event without metadata, row -1), whether its
    events are the Python tracer's frames (names starting ``$``, as the decode reads them: ``python_function``)."""
    names = base.emd["name"]
    return np.append(names.str.starts_with("$").fill_null(False).to_numpy(), False)


class _Quiet:
    """Finds the quiet points (module docstring) of events given chunk by chunk in time order (:meth:`add`): a chunk's
    events all start after the previous chunk's, by line (non-decreasing) and start within a line. ``gpu_line``: per
    line, whether it is a GPU stream; ``first``: the first event's start (a cut there or before leaves a window
    empty)."""

    def __init__(self, gpu_line: np.ndarray, first: int, *, open_ended: bool = False) -> None:
        self.gpu_line = gpu_line
        self.first = first
        #: the events given are some of the profile's (:func:`plan_near`): a GPU row without a launch among them is
        #: pending up to its start (its launch is before them all)
        self.open_ended = open_ended
        self.ordered = True
        self.events = 0  #: the events given so far
        self.running = int(np.iinfo(np.int64).min)  #: the latest end of the events given so far (ns)
        self.idle: list[np.ndarray] = []  #: host starts at which nothing runs, chunk by chunk
        self.idle_before: list[np.ndarray] = []  #: the events that start before each
        self.step_starts: list[np.ndarray] = []  #: the step annotations' starts, chunk by chunk
        self.step_ends: list[np.ndarray] = []  #: and their ends, in the same order
        #: the long events (over a quarter of their chunk's time: an epoch's range, the Python tracer's frame of the
        #: training loop, a step), chunk by chunk: start, end, whether a step annotation or a GPU row. The candidates
        #: are found without them, then kept where none runs (:meth:`result`, a range holding whole steps aside)
        self.long: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.launches: list[pl.DataFrame] = []  #: (correlation, the earliest launch)
        self.rows: list[pl.DataFrame] = []  #: (correlation, the earliest and the latest GPU row start)
        #: the Python tracer's frames (host events), chunk by chunk: line, start, end. The candidates are found without
        #: them; :meth:`result` then keeps those where none runs of a line that a step's analysis reads (:attr:`busy`)
        self.frames: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        #: per line, whether it holds a step annotation or an event with a correlation id (a launch, a runtime call):
        #: a line a step's analysis reads. Another line's frames (a data loader's thread waiting on its full queue,
        #: across every step's end) are read by no analysis (:func:`kernscope.analyze.windows._held_across`)
        self.busy = np.zeros(len(gpu_line), dtype=bool)

    def add(self, line: np.ndarray, ts: np.ndarray, dur: np.ndarray, correlation: pl.Series,
            step: np.ndarray | None = None, frame: np.ndarray | None = None) -> None:
        """A chunk's events: line, start and duration (ns), correlation id (null: none), and whether each is a step
        annotation (``step``, a ``StepTraceAnnotation``: None, none is) or a Python frame (``frame``: None, none
        is)."""
        is_gpu = self.gpu_line[line] if line.size else np.zeros(0, dtype=bool)
        if ts.size > 1:  # (each line's events in time order: the quiet points need it)
            back = np.diff(ts) < 0
            if (back & (line[1:] == line[:-1])).any():
                self.ordered = False
        # something runs at a moment where an event that started before it (on any line, in this chunk or one before)
        # ends after it: the events in time order (each line's are: a merge of sorted runs), the latest end so far
        order = np.argsort(ts, kind="stable")
        starts = ts[order]
        ends = ts + dur
        py = frame & ~is_gpu if frame is not None and frame.any() else None
        if py is not None:  # (as the long ones: they end where they start here, and :meth:`result` keeps them)
            held = py & (dur > 0)
            self.frames.append((line[held], ts[held], ends[held]))
            ends = np.where(py, ts, ends)
        if ts.size > 1:  # (the long events end where they start here: :meth:`result` keeps them)
            long = dur > max((int(starts[-1]) - int(starts[0])) // 4, 1)
            if py is not None:
                long &= ~py
            if long.any():
                fixed = is_gpu[long] | (step[long] if step is not None else False)
                self.long.append((ts[long], ends[long], fixed))
                ends = np.where(long, ts, ends)
        latest = np.maximum.accumulate(ends[order]) if ts.size else np.zeros(0, np.int64)
        host = starts[~is_gpu[order]]
        cand = host[np.append(True, host[1:] != host[:-1])] if host.size else host
        cand = cand[cand > self.first]
        before = np.searchsorted(starts, cand, side="left")  # the events of the chunk that start before each
        ok = np.where(before > 0, np.maximum(latest[np.maximum(before - 1, 0)], self.running), self.running) <= cand
        if latest.size:
            self.running = max(self.running, int(latest[-1]))
        if step is not None:
            host_step = step & ~is_gpu
            self.step_starts.append(ts[host_step])
            self.step_ends.append((ts + dur)[host_step])
            self.busy[line[host_step]] = True
        self.idle.append(cand[ok])
        self.idle_before.append(self.events + before[ok])
        self.events += int(ts.size)
        has = correlation.is_not_null().to_numpy()
        if has.any():
            corr = correlation.fill_null(-1).cast(pl.Int64).to_numpy()
            host_c, gpu_c = has & ~is_gpu, has & is_gpu
            self.busy[line[host_c]] = True
            self.launches.append(pl.DataFrame({"c": corr[host_c], "t": ts[host_c]}).group_by("c").agg(pl.col("t").min()))
            self.rows.append(pl.DataFrame({"c": corr[gpu_c], "t": ts[gpu_c]}).group_by("c").agg(
                pl.col("t").min().alias("first"), pl.col("t").max().alias("end")))

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """The quiet points (ns, sorted, distinct) and the events that start before each; empty where a line's events
        are out of time order."""
        empty = np.zeros(0, np.int64)
        if not self.ordered or not self.idle:
            return empty, empty
        idle, before = np.concatenate(self.idle), np.concatenate(self.idle_before)
        long = list(self.long)
        if self.frames:  # (the frames of a line a step's analysis reads run as any event there, or hold whole steps)
            line, ts, end = (np.concatenate(x) for x in zip(*self.frames))
            read = self.busy[line]
            if read.any():
                long.append((ts[read], end[read], np.zeros(int(read.sum()), dtype=bool)))
        if long:
            keep = ~self._running_long(idle, long)
            idle, before = idle[keep], before[keep]
        if self.rows and (self.launches or self.open_ended):
            # pending: a GPU row launched before the moment that starts at or after it; per correlation id, the
            # moments in (its launch, its latest row's start]. And a row that starts before its launch (a damaged or
            # reused id: the whole profile's link still pairs them) keeps the moments in (its start, the launch's]:
            # a cut there left the row without its launch in its window (a fuzzed profile whose Memset took a later
            # launch's id, benchmarks/fuzz_long.py --jax seed 88)
            schema = {"c": pl.Int64, "t": pl.Int64}
            launch = pl.concat(self.launches or [pl.DataFrame(schema=schema)]).group_by("c").agg(pl.col("t").min())
            rows = (pl.concat(self.rows) if self.rows else pl.DataFrame(schema={"c": pl.Int64, "first": pl.Int64, "end": pl.Int64})
                    ).group_by("c").agg(pl.col("first").min(), pl.col("end").max())
            if self.open_ended:
                # each row's launch as of its id, backward: its own where read; else the launch read of the next lower
                # id, since the runtime numbers its calls in the order they are made (CUPTI's correlation ids), so the
                # row is pending from there up to its start, and from before them all where none lower was read. (A
                # row of a GPU line read far past the target, launched after the host's events read, is then pending
                # after them, not across the neighborhood: tests/data/jax_loader_h100's copy stream, whose index rows
                # are far apart. Where the ids are not in that order, the windows' :class:`Ledger` finds the split.)
                spans = rows.sort("c").join_asof(launch.sort("c"), on="c", strategy="backward").with_columns(
                    pl.col("t").fill_null(np.iinfo(np.int64).min))
            else:
                spans = launch.join(rows, on="c", how="inner")
            spans = spans.select(pl.min_horizontal("t", "first").alias("lo"), pl.max_horizontal("t", "end").alias("hi"))
            spans = spans.filter(pl.col("lo") < pl.col("hi"))
            lo = np.sort(spans["lo"].to_numpy())
            hi = np.sort(spans["hi"].to_numpy())
            pending = np.searchsorted(lo, idle, side="left") - np.searchsorted(hi, idle, side="left")
            keep = pending == 0
            idle, before = idle[keep], before[keep]
        return idle, before


    def _running_long(self, at: np.ndarray, long: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
        """Per moment of ``at`` (ns), whether an event of ``long`` (start, end, whether a step annotation or a GPU row,
        chunk by chunk: :attr:`long` and the frames :meth:`result` adds) runs at it: starts before it and ends after
        it. But for a range that holds whole steps (a host event, not a step annotation, that holds the first step
        annotation starting at or after it, start to end: an epoch's range, the Python tracer's frame of the training
        loop): that one runs from its start up to its first step's start only, since a cut after it leaves the range
        in the window of that step. No analysis of a step takes such a range for one of its ops
        (:func:`~kernscope.analyze.critical_path._top_level`, its rule), nor reads it after its first step: the
        windows' analyses are the whole profile's (``tests/test_jax_windowed_analysis.py``, which checks it, and
        :mod:`kernscope.analyze.windows`, which checks the ranges across its cuts when it reads them)."""
        ts = np.concatenate([x[0] for x in long])
        end = np.concatenate([x[1] for x in long])
        fixed = np.concatenate([x[2] for x in long])  # (a step annotation or a GPU row: runs start to end)
        s_start = np.concatenate(self.step_starts) if self.step_starts else np.zeros(0, np.int64)
        s_end = np.concatenate(self.step_ends) if self.step_ends else np.zeros(0, np.int64)
        last = end - 1  # (the last moment it runs at: one that ends at a moment runs no longer)
        if s_start.size:
            order = np.argsort(s_start, kind="stable")
            s_start, s_end = s_start[order], s_end[order]
            first, holds = first_held(ts, end, s_start, s_end)
            last = np.where(holds & ~fixed, s_start[first], last)  # (up to and at its first step's start)
        runs = last > ts
        ts, last = np.sort(ts[runs]), np.sort(last[runs])
        return (np.searchsorted(ts, at, side="left") - np.searchsorted(last, at, side="left")) > 0


def quiet_points(line: np.ndarray, ts: np.ndarray, dur: np.ndarray, correlation: pl.Series,
                 gpu_line: np.ndarray, step: np.ndarray | None = None,
                 frame: np.ndarray | None = None) -> np.ndarray | None:
    """The host events' starts (ns, sorted, distinct; after the first event's) at which no event is running and no
    launched GPU row is pending (module docstring), of the events given by their line (non-decreasing), start and
    duration (ns) and correlation id (null: none); ``gpu_line``: per line, whether it is a GPU stream; ``step`` and
    ``frame``: per event, whether it is a step annotation, a Python frame (None: none is). None where a line's
    events are out of time order."""
    q = _Quiet(gpu_line, int(ts.min()) if ts.size else 0)
    q.add(line, ts, dur, correlation, step, frame)
    return q.result()[0] if q.ordered else None


class Ledger:
    """What a plan that is not ``checked`` (:func:`plan_near`) leaves to check once its windows are decoded
    (:meth:`add` each window's table and HLO names, from any thread, each window once):

    - :meth:`split`: a correlation id in two windows (a launch in one, a GPU row in another, as a launch before every
      event the plan read whose row starts after them all would be; or an id used twice). The windows then differ
      from the whole profile's: the caller reads the profile by :func:`plan`'s windows, or whole.
    - :meth:`stale`: the windows to decode again with the whole profile's HLO names (:meth:`names`): those with a host
      event named by another window's HLO names only, which their own decode made an annotation, not an op.

    It keeps, a window, its correlation ids as runs of consecutive ids (XLA numbers its launches in turn: a window's
    ids are a run or a few) and the distinct names of its annotations."""

    def __init__(self) -> None:
        self._runs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._names: dict[int, frozenset[str]] = {}
        self._annotations: dict[int, frozenset[str]] = {}

    def add(self, window: int, events: pl.DataFrame, hlo_names: frozenset[str]) -> None:
        """Window ``window``'s decoded event table (``correlation``, ``cat`` and ``name`` read) and its own HLO op and
        module names (``decode(..., named=...)``)."""
        ids = events.get_column("correlation").drop_nulls().unique().sort().cast(pl.Int64).to_numpy()
        brk = np.flatnonzero(np.diff(ids) != 1) if ids.size else np.zeros(0, np.int64)
        starts = ids[np.concatenate(([0], brk + 1))] if ids.size else ids
        ends = ids[np.concatenate((brk, [ids.size - 1]))] if ids.size else ids
        notes = events.lazy().filter(pl.col("cat") == "user_annotation").select(pl.col("name").cast(pl.String).unique())
        self._runs[window] = (starts, ends)
        self._names[window] = hlo_names
        self._annotations[window] = frozenset(notes.collect().to_series().to_list())

    def split(self) -> bool:
        """Whether a correlation id is in two windows (or twice in the ledger)."""
        if not self._runs:
            return False
        starts = np.concatenate([r[0] for r in self._runs.values()])
        ends = np.concatenate([r[1] for r in self._runs.values()])
        if starts.size < 2:
            return False
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
        return bool((starts[1:] <= np.maximum.accumulate(ends)[:-1]).any())

    def names(self) -> frozenset[str]:
        """The HLO op and module names of every window added (the whole profile's, once all are)."""
        return frozenset().union(*self._names.values())

    def stale(self) -> list[int]:
        """The windows whose annotations a name of :meth:`names` makes ops (in window order)."""
        every = self.names()
        return sorted(k for k, notes in self._annotations.items() if notes & (every - self._names[k]))
