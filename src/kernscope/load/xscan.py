"""The events of XLine messages and their wanted stats as flat numpy columns: the compiled scanner, or numpy.

Both readers give the same :class:`LineScan` (``tests/test_jax.py`` compares them on every real profile):
the compiled one (``_xspace.c`` through :mod:`.native`) walks every byte once and writes each wanted
stat straight into its column; the numpy one walks each line's events with :func:`.protowire.walk` and
their fields with :func:`.protowire.fields_of`, then places the stats.
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cores import usable_cores
from .native import ptr as _ptr
from .native import scanner
from .protowire import WireError, fields_of, walk

if TYPE_CHECKING:
    from .xstats import Lookup

#: stat value kinds (``col_kind``): the XStat value field number minus one; 0: no stat
K_NONE, K_DOUBLE, K_U64, K_I64, K_STR, K_BYTES, K_REF = range(7)

FieldOf = Callable[[np.ndarray, np.ndarray], np.ndarray]


#: a cell's state (``LineScan.state``): no stat, a value, text still to be read (the stat is in the odd list),
#: a stat whose value cannot be one (a non-finite double for an int, bytes, a ref to no name)
S_NONE, S_VALUE, S_TEXT, S_NULL = range(4)
#: a field's kind (``FieldSpec.kinds``): an int64, a float64, or a string (an int32 row of the stat metadata)
F_INT, F_FLOAT, F_STR = range(3)
#: what ``field_of`` and the flat table give for a known stat whose field this scan leaves out
#: (``FieldSpec.unread``): the stat is neither kept nor counted as unknown, and the field has no cells
F_UNREAD = -2
_VALUE_TYPES = {F_INT: np.int64, F_FLOAT: np.float64, F_STR: np.int32}


@dataclass(frozen=True)
class FieldSpec:
    """Which stats become which columns: ``field_of(plane, metadata id)`` -> field (int8; -1: an unknown stat,
    :data:`F_UNREAD`: a field in ``unread``), the same map as a flat table for the compiled scanner
    (``lut[plane * width + id]``; None: numpy reads), and each field's kind (``F_*``). The fields in ``unread``
    (indices) get no cells: their ``LineScan.value`` and ``state`` are empty arrays."""

    field_of: FieldOf
    lut: np.ndarray | None
    width: int
    kinds: np.ndarray  #: int8 per field
    unread: frozenset[int] = frozenset()


@dataclass
class LineScan:
    """Per line: id, timestamp (ns), name span. Per event: its line, metadata id, name (the row of its event
    metadata, -1: none), start and duration (ns: the line's timestamp plus the offset in ps, rounded; the end
    rounded the same way), flags (0 or 1: 1 for an aggregated event, with ``num_occurrences``). Per field and event,
    the last such stat of the event: ``state`` (``S_*``) and ``value`` (int64, float64, or for a string the
    int32 row of the stat metadata a ref names; empty for a field the spec leaves unread). Stats to be read as
    text (inline strings, numbers written as text, numbers where a string is wanted) are listed in ``odd_*``, in
    stat order (the last of an event's field wins; only cells still in ``S_TEXT`` take it): the event, field, value
    kind (``K_*``) and raw value (a string's offset: its length is the varint before it, see
    :func:`lengths_before`)."""

    ln_id: np.ndarray
    ln_ts: np.ndarray
    ln_name_off: np.ndarray
    ln_name_len: np.ndarray
    ev_line: np.ndarray
    ev_md: np.ndarray
    ev_name: np.ndarray
    ev_ts: np.ndarray
    ev_dur: np.ndarray
    ev_flags: np.ndarray
    value: list[np.ndarray]
    state: list[np.ndarray]
    odd_ev: np.ndarray
    odd_field: np.ndarray
    odd_kind: np.ndarray
    odd_val: np.ndarray
    native: bool
    kept: int = 0  #: stats read into the columns
    unknown: int = 0  #: stats not read (no wanted field)


def scan_lines(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray, spec: FieldSpec,
               refs: Lookup, names: Lookup, *, native: bool | None = None, workers: int | None = None,
               progress: Callable[[int, int], None] | None = None, header: np.ndarray | None = None,
               release: int = 0) -> LineScan:
    """Scan the lines at ``line_off``/``line_len`` (int64) of ``buf``, in planes ``line_plane``; keep the stats
    ``spec`` maps to a field, typed by the field's kind (refs resolved to rows of ``refs``, the stat metadata);
    name each event by its row in ``names`` (the event metadata). ``native``: force a reader (None: the compiled
    one when available and ``spec`` has its flat table). ``workers``: the compiled scanner's threads at most
    (None: one per usable core; the parse's ``workers`` option, as for Kineto traces). ``progress``: called with
    (bytes of lines scanned, bytes of all lines) as the scan goes (every :data:`PROGRESS_BYTES` on each thread of
    the compiled scanner; once, at its end, for the other), from the scanning threads. ``header``: each line's id,
    timestamp_ns and name span ((lines, 4) int64, :class:`TimeCuts`'s ``hdr``) where the spans are runs of the lines'
    events, not whole lines (a time window's): the events are timed by it, and it is each line's header in the
    output (the compiled scanner only). ``release`` > 0 only where ``buf`` is a read-only mapping of the file: the
    compiled scanner gives back the pages it has walked every ``release`` bytes of a line, and at each line's end, in
    each of its walks (as :func:`line_index` does; read again from the page cache where touched again: a line's name,
    an odd stat's text)."""
    lib = scanner() if native in (None, True) and spec.lut is not None else None
    if (native or header is not None) and lib is None:
        raise RuntimeError("the compiled XSpace scanner is not available")
    line_off = np.ascontiguousarray(line_off, dtype=np.int64)
    line_len = np.ascontiguousarray(line_len, dtype=np.int64)
    line_plane = np.ascontiguousarray(line_plane, dtype=np.int64)
    if lib is None:
        out = _scan_numpy(buf, line_off, line_len, line_plane, spec, refs, names)
        if progress is not None:
            total = int(line_len.sum())
            progress(total, total)
        return out
    return _scan_native(lib, buf, line_off, line_len, line_plane, spec, refs, names, workers, progress, header, release)


@dataclass(frozen=True)
class TimeCuts:
    """Where each line's events cross some times (``ks_time_cuts``), so that the events of a time window are one run
    of bytes per line. ``times``: each line's cuts (``(lines, cuts)`` int64 ns, ascending along a line; the lines may
    be cut at different times); window k of a line is ``[times[line, k - 1], times[line, k])``, the first from the
    beginning and the last to the end (``cuts + 1`` windows). Per line and cut (``(lines, cuts + 1)`` int64; the last
    column: the line's end): ``at``, the offset of the line's first event that starts at or after the cut;
    ``before``, the line's events before ``at`` (aggregated ones too). ``hdr``: each line's id, timestamp_ns and
    name span. ``span``: each line's first and last event start (ns; ``(lines, 2)``; int64's max and min for a line
    without a timed event)."""

    times: np.ndarray
    at: np.ndarray
    before: np.ndarray
    hdr: np.ndarray
    span: np.ndarray

    def window(self, k: int, line_off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Window ``k``'s run of each line: (offsets, lengths), int64 (``line_off``: the lines' own offsets)."""
        lo = np.ascontiguousarray(line_off if k == 0 else self.at[:, k - 1], dtype=np.int64)
        return lo, np.ascontiguousarray(self.at[:, k] - lo)


def time_cuts(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, times: np.ndarray) -> TimeCuts | None:
    """The lines' events cut at ``times`` (ns: one list for every line, or a ``(lines, cuts)`` array of each line's;
    sorted along a line here): None where the compiled scanner is missing, or where a line's events do not start in
    time order (then a window is not a run of bytes; XLA writes them in order)."""
    lib = scanner()
    if lib is None:
        return None
    n = line_off.size
    t = np.asarray(times, dtype=np.int64)
    if t.ndim == 1:
        t = np.broadcast_to(t, (n, t.size))
    if t.shape[0] != n:
        raise ValueError(f"cut times for {t.shape[0]:,} lines, the profile has {n:,}")
    t = np.ascontiguousarray(np.sort(t, axis=1))
    w = t.shape[1] + 1
    offs, lens = np.ascontiguousarray(line_off, dtype=np.int64), np.ascontiguousarray(line_len, dtype=np.int64)
    at, before = np.zeros(n * w, np.int64), np.zeros(max(n * w, 1), np.int64)
    hdr, order, span = np.zeros(4 * n, np.int64), np.zeros(n, np.uint8), np.zeros(2 * n, np.int64)
    if n and lib.ks_time_cuts(_ptr(buf), ctypes.c_int64(buf.size), _ptr(offs), _ptr(lens), ctypes.c_int64(n), _ptr(t),
                              ctypes.c_int64(w - 1), _ptr(None), _ptr(at), _ptr(before), _ptr(hdr), _ptr(order),
                              _ptr(span)) < 0:
        raise WireError("a field of an event line does not fit in it", int(before[0]))
    if not order.all():
        return None
    return TimeCuts(t, at.reshape(n, w), before[: n * w].reshape(n, w), hdr.reshape(n, 4), span.reshape(n, 2))


class _Tally:
    """The bytes scanned by every thread together, handed to ``progress`` (one thread at a time)."""

    def __init__(self, total: int, progress: Callable[[int, int], None] | None) -> None:
        self.total, self.progress, self.done = total, progress, 0
        self._lock = threading.Lock()

    def add(self, nbytes: int) -> None:
        if self.progress is None:
            return
        with self._lock:
            self.done += nbytes
            self.progress(self.done, self.total)


#: first guess of the odd list's size per byte of line (few in real profiles; it grows, doubling, when full)
ODD_PER_BYTE = 1 / 4096
MIN_ODD = 64
#: lines are scanned in parts of at least this many bytes, one part per usable core (at most MAX_PARTS)
PART_BYTES = 8 << 20
MAX_PARTS = 8
#: a part's thread says how far it got about every this many bytes of lines (a call of the scanner each)
PROGRESS_BYTES = 32 << 20
#: a scan of a file's mapping (:func:`scan_lines`'s ``release``, ``xplane.decode(..., release_pages=True)``) gives back
#: the pages behind it every this many bytes of a line
RELEASE_BYTES = 4 << 20


def _fields_of(cap: int, kinds: np.ndarray, unread: frozenset[int]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    # states start at 0 (no stat): zeroed pages cost nothing until written, and a field no event has stays so; a
    # field left unread has no cells (its stats were ~80 bytes an event, most of them written, in a real profile)
    sizes = [0 if i in unread else cap for i in range(kinds.size)]
    return ([np.zeros(n, _VALUE_TYPES[int(k)]) for n, k in zip(sizes, kinds)],
            [np.zeros(n, np.uint8) for n in sizes])


def _grown(a: np.ndarray, n: int, cap: int) -> np.ndarray:
    out = np.zeros(cap, a.dtype)
    out[:n] = a[:n]
    return out


def _parts(line_len: np.ndarray, workers: int | None = None) -> list[int]:
    """Line numbers that split the lines into parts of about equal bytes, one per usable core (at most ``workers``)."""
    size = int(line_len.sum())
    cores = usable_cores()
    cores = min(cores, workers) if workers else cores
    k = max(1, min(MAX_PARTS, cores, size // PART_BYTES, line_len.size))
    if k == 1:
        return [0, line_len.size]
    cut = np.searchsorted(np.cumsum(line_len), [size * i // k for i in range(1, k)], side="right")
    return sorted({0, *cut.tolist(), line_len.size})


def _scan_native(lib: Any, buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray,
                 spec: FieldSpec, refs: Lookup, names: Lookup, workers: int | None = None,
                 progress: Callable[[int, int], None] | None = None, header: np.ndarray | None = None,
                 release: int = 0) -> LineScan:
    """The compiled scanner: the lines' events counted first (their outputs then have their exact size), the
    lines scanned in parts on threads (the scanner runs without the GIL), each part's events written in place.
    ``header``: see :func:`scan_lines`."""
    assert spec.lut is not None
    release = max(release, 0)
    cut = _cut_long_lines(lib, buf, line_off, line_len, release)
    if header is not None:  # every line (or run of one) timed by its line's given header, which the output reports
        cut = _with_header(cut, np.ascontiguousarray(header, dtype=np.int64), line_off, line_len)
    plane_of_line = line_plane
    if cut is not None:  # the long lines' runs of fields scanned as lines of their own, put back together below
        line_off, line_len, line_plane = cut.off, cut.len, line_plane[cut.parent]
    n = line_off.size
    per_line = _count_events(lib, buf, line_off, line_len, None if cut is None else cut.events, release)
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_line[:n], out=first[1:])
    ne = int(first[n])
    kinds = np.ascontiguousarray(spec.kinds, dtype=np.int8)
    out = _Out([np.empty(n, np.int64) for _ in range(4)],
               [np.empty(ne, t) for t in (np.int64, np.int64, np.int64, np.int64, np.int64, np.uint8)], *_fields_of(ne, kinds, spec.unread))
    ends = np.zeros(n + 1, dtype=np.int64)  # the bytes of the lines before each line
    np.cumsum(line_len, out=ends[1:])
    scan = _Scan(lib, buf, line_off, line_len, line_plane, first, np.ascontiguousarray(spec.lut, dtype=np.int8), spec.width,
                 refs.flat_table(), names.flat_table(), kinds, out, ends, _Tally(int(ends[n]), progress),
                 None if cut is None else (cut.parent, cut.run_ts, cut.run_fixed), release)
    bounds = _parts(line_len, workers)
    pairs = list(zip(bounds[:-1], bounds[1:]))
    if len(pairs) == 1:
        found = [scan.part(*pairs[0])]
    else:
        with ThreadPoolExecutor(len(pairs)) as pool:
            found = list(pool.map(lambda lr: scan.part(*lr), pairs))
    odd = [np.concatenate([f[0][k] for f in found]) for k in range(4)]
    ev = out.ev
    # (the scanner wrote each event's whole line and its name row as int64, and the runs of a cut line with that
    # line's timestamp: converting and joining them here took 0.45 s of one core at 975 MB)
    ev_line, ev_name = ev[0], ev[2]
    far = np.flatnonzero(ev_name == -2)  # metadata ids past the flat table
    if far.size:
        ev_name[far] = names.rows(plane_of_line[ev_line[far]], ev[1][far])
    ln = out.ln if cut is None else cut.joined(out.ln)
    return LineScan(ln_id=ln[0], ln_ts=ln[1], ln_name_off=ln[2], ln_name_len=ln[3], ev_line=ev_line,
                    ev_md=ev[1], ev_name=ev_name, ev_ts=ev[3], ev_dur=ev[4], ev_flags=ev[5], value=out.val, state=out.state,
                    odd_ev=odd[0], odd_field=odd[1].astype(np.int64), odd_kind=odd[2], odd_val=odd[3],
                    native=True, kept=sum(f[1] for f in found), unknown=sum(f[2] for f in found))


#: lines longer than this are scanned in runs of their fields of about this many bytes, on as many threads as
#: there are parts (a real 975 MB profile's GPU stream is one 881 MB line: scanned whole it kept one of two cores
#: busy for 91% of the scan)
SEGMENT_BYTES = 16 << 20


@dataclass
class _Cut:
    """Long lines cut into runs of their fields (:func:`_cut_long_lines`), each scanned as a line of its own: the
    runs' spans, the line each belongs to, and each cut line's header (id, timestamp_ns, name span) as a scan of
    the whole line reads it. The scanner writes each run's events with the line it belongs to and, for the runs of
    a cut line, that line's timestamp (``run_ts`` where ``run_fixed``): a run alone may not hold it."""

    off: np.ndarray
    len: np.ndarray
    parent: np.ndarray
    cut: np.ndarray  #: bool per line: cut
    hdr: np.ndarray  #: (lines, 4) int64; rows of lines not cut unused
    events: np.ndarray  #: each run's events, counted as the long lines were cut; -1 for the runs of short lines
    run_ts: np.ndarray  #: int64 per run: its line's timestamp_ns where the line is cut (else unused)
    run_fixed: np.ndarray  #: uint8 per run: 1 where its line is cut (the scanner then times events by ``run_ts``)

    def joined(self, ln: list[np.ndarray]) -> list[np.ndarray]:
        """The per-line outputs of the runs as the whole lines' (each run's first for lines not cut, the header for
        cut ones)."""
        first_run = np.flatnonzero(np.append(True, self.parent[1:] != self.parent[:-1]))
        whole = [a[first_run] for a in ln]
        for k in range(4):
            whole[k][self.cut] = self.hdr[self.cut, k]
        return whole


@dataclass(frozen=True)
class TimeIndex:
    """A sparse index of each line's events in time (``ks_line_index``): every ``stride``-th timed event of a line as a
    row (``line``, ``off``: its field's offset, ``start``: ns, ``count``: the line's events before it, ``reach``: the
    latest end of the line's timed events before it, ns, int64 min where none), ordered by line and start; and each
    line's header, span and events (``hdr``, ``span``, ``total``). :meth:`cuts` finds where the
    lines cross some times walking only the bytes between two rows of each line, and gives what :func:`time_cuts`
    gives."""

    buf: np.ndarray
    line_off: np.ndarray
    line_len: np.ndarray
    line: np.ndarray
    off: np.ndarray
    start: np.ndarray
    count: np.ndarray
    reach: np.ndarray
    hdr: np.ndarray
    span: np.ndarray
    total: np.ndarray

    def cuts(self, times: np.ndarray) -> TimeCuts:
        """The lines cut at ``times`` (ns, one list for every line), as :func:`time_cuts` cuts them."""
        lib = scanner()
        assert lib is not None
        t = np.sort(np.asarray(times, dtype=np.int64))
        n, m = self.line_off.size, t.size
        at = np.empty((n, m + 1), np.int64)
        before = np.empty((n, m + 1), np.int64)
        at[:, m], before[:, m] = self.line_off + self.line_len, self.total
        if m and n:
            # for each (line, cut): the run from the line's last row that starts before the cut to its next row (or
            # the line's start and end where there is none), walked by ks_time_cuts with the line's timestamp
            li = np.repeat(np.arange(n, dtype=np.int64), m)
            tt = np.tile(t, n)
            first = np.searchsorted(self.line, np.arange(n + 1))  # each line's first row
            # rows of line l are [first[l], first[l + 1]): the last one with start < t, by a search within the line
            row = np.empty(li.size, np.int64)
            for lnum in range(n):
                a, b = first[lnum], first[lnum + 1]
                row[lnum * m:(lnum + 1) * m] = a + np.searchsorted(self.start[a:b], t, side="left") - 1
            lo_row, ends = row, first[li + 1]
            has = lo_row >= first[li]
            lo = np.where(has, self.off[np.maximum(lo_row, 0)], self.line_off[li])
            nxt = lo_row + 1
            hi = np.where(nxt < ends, self.off[np.minimum(nxt, self.off.size - 1)], self.line_off[li] + self.line_len[li])
            base = np.where(has, self.count[np.maximum(lo_row, 0)], 0)
            sub_at, sub_before = np.zeros(2 * li.size, np.int64), np.zeros(2 * li.size, np.int64)
            order, span = np.zeros(li.size, np.uint8), np.zeros(2 * li.size, np.int64)
            ts = np.ascontiguousarray(self.hdr[li, 1])
            lo, size = np.ascontiguousarray(lo), np.ascontiguousarray(hi - lo)
            tc = np.ascontiguousarray(tt)
            if lib.ks_time_cuts(_ptr(self.buf), ctypes.c_int64(self.buf.size), _ptr(lo), _ptr(size),
                                ctypes.c_int64(li.size), _ptr(tc), ctypes.c_int64(1), _ptr(ts), _ptr(sub_at),
                                _ptr(sub_before), _ptr(None), _ptr(order), _ptr(span)) < 0:
                raise WireError("a field of an event line does not fit in it", int(sub_before[0]))
            at[:, :m] = sub_at.reshape(li.size, 2)[:, 0].reshape(n, m)
            before[:, :m] = (base + sub_before.reshape(li.size, 2)[:, 0]).reshape(n, m)
        return TimeCuts(np.broadcast_to(t, (n, m)).copy(), at, before, self.hdr, self.span)


#: a line's every this many timed events is a row of its :class:`TimeIndex`
INDEX_STRIDE = 512
#: :func:`kernscope.load.xplan.plan_near`'s index: a row every this many timed events of a line (a line's events read
#: beyond a neighborhood's are two rows' at most); here, where a head start (:mod:`.xhead`) makes it too
NEAR_STRIDE = 128
#: an XSpace's planes (field 1), an XPlane's lines (field 3), and the XPlane fields read a run at a time: its event
#: metadata, stat metadata and stats (``xplane.proto``; :mod:`kernscope.load.xplane` reads the planes whole by them)
SPACE_PLANES, PLANE_LINES, PLANE_RUNS = 1, 3, (4, 5, 6)


def line_index(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, stride: int = INDEX_STRIDE, *,
               release: int = 0) -> TimeIndex | None:
    """The lines' :class:`TimeIndex` (one walk of their bytes): None where the compiled scanner is missing, or where a
    line's events do not start in time order. ``release`` > 0 only where ``buf`` is a read-only mapping of the file
    (``mmap.ACCESS_READ``): the pages walked are given back every ``release`` bytes (``MADV_DONTNEED``: on other
    memory that would zero them), so that the walk holds that much of the file at a time."""
    lib = scanner()
    if lib is None:
        return None
    n = line_off.size
    offs, lens = np.ascontiguousarray(line_off, dtype=np.int64), np.ascontiguousarray(line_len, dtype=np.int64)
    cap = int(lens.sum()) // (2 * stride) + n + 1  # (an event takes at least 2 bytes)
    rows = [np.empty(cap, np.int64) for _ in range(5)]
    hdr, order, span, total = np.zeros(4 * n, np.int64), np.zeros(n, np.uint8), np.zeros(2 * n, np.int64), np.zeros(max(n, 1), np.int64)
    k = lib.ks_line_index(_ptr(buf), ctypes.c_int64(buf.size), _ptr(offs), _ptr(lens), ctypes.c_int64(n),
                          ctypes.c_int64(stride), ctypes.c_int64(cap), ctypes.c_int64(max(release, 0)),
                          *(_ptr(r) for r in rows), _ptr(hdr), _ptr(order),
                          _ptr(span), _ptr(total))
    if k == -1:
        raise WireError("a field of an event line does not fit in it", int(total[0]))
    if k < 0:
        raise RuntimeError("the XSpace scanner found more index rows than a line's bytes allow")
    if not order.all():
        return None
    line, off, start, count, reach = (r[:k] for r in rows)
    return TimeIndex(buf, offs, lens, line, off, start, count, reach, hdr.reshape(n, 4), span.reshape(n, 2), total[:n])


def xspace_lines(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where every plane's lines lie in the XSpace ``buf`` (offset, length; int64, planes and lines in file order):
    the lines :func:`line_index` walks, found without the planes' metadata (and without polars). Raises
    :class:`~kernscope.load.protowire.WireError` where a message does not fit in its bytes."""
    space = walk(buf, 0, buf.size, what="XSpace")
    planes = space.of(SPACE_PLANES, 2)
    off, size = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for o, s in zip(planes.off.tolist(), planes.size.tolist()):
        lines = walk(buf, o, o + s, runs=PLANE_RUNS, what="XPlane").of(PLANE_LINES, 2)
        off.append(lines.off)
        size.append(lines.size)
    return np.concatenate(off).astype(np.int64), np.concatenate(size).astype(np.int64)


def _with_header(cut: _Cut | None, header: np.ndarray, line_off: np.ndarray, line_len: np.ndarray) -> _Cut:
    """``cut`` (None: each line one run of its own) with every line's header given: its runs timed by the header's
    timestamp, and the header each line's output."""
    n = line_off.size
    if cut is None:
        parent = np.arange(n, dtype=np.int64)
        return _Cut(line_off, line_len, parent, np.ones(n, dtype=bool), header, np.full(n, -1, np.int64),
                    np.ascontiguousarray(header[:, 1]), np.ones(n, np.uint8))
    return dataclasses.replace(cut, cut=np.ones(n, dtype=bool), hdr=header,
                               run_ts=np.ascontiguousarray(header[cut.parent, 1]),
                               run_fixed=np.ones(cut.parent.size, np.uint8))


def _count_events(lib: Any, buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray,
                  known: np.ndarray | None, release: int = 0) -> np.ndarray:
    """Each line's events (``ks_count_events``; and a last 0), but for those ``known`` (>= 0: the cut lines' runs,
    counted as they were cut)."""
    n = line_off.size
    todo = None if known is None else np.flatnonzero(known < 0)
    if todo is not None and todo.size < n:
        line_off, line_len = np.ascontiguousarray(line_off[todo]), np.ascontiguousarray(line_len[todo])
    m = line_off.size
    counts = np.zeros(m + 1, dtype=np.int64)
    if m and lib.ks_count_events(_ptr(buf), ctypes.c_int64(buf.size), _ptr(line_off), _ptr(line_len),
                                 ctypes.c_int64(m), _ptr(counts), ctypes.c_int64(release)) < 0:
        raise WireError("a field of an event line does not fit in it", int(counts[m]))
    if m == n:
        return counts
    assert known is not None and todo is not None
    out = np.append(known, 0)
    out[todo] = counts[:m]
    return out


def _cut_long_lines(lib: Any, buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, release: int = 0
                    ) -> _Cut | None:
    """The lines of more than :data:`SEGMENT_BYTES` cut at field boundaries (``ks_cut_lines``), or None when no line
    is that long."""
    seg = SEGMENT_BYTES
    long = line_len > seg
    if not long.any():
        return None
    n = line_off.size
    cap = int(line_len[long].sum() // seg) + 1
    cut_line, cut_at, hdr = np.empty(cap, np.int64), np.empty(cap, np.int64), np.zeros(4 * n, np.int64)
    head_events, cut_events = np.full(n, -1, np.int64), np.empty(cap, np.int64)
    offs, lens = np.ascontiguousarray(line_off, dtype=np.int64), np.ascontiguousarray(line_len, dtype=np.int64)
    nc = int(lib.ks_cut_lines(_ptr(buf), ctypes.c_int64(buf.size), _ptr(offs), _ptr(lens), ctypes.c_int64(n),
                              ctypes.c_int64(seg), ctypes.c_int64(cap), _ptr(cut_line), _ptr(cut_at), _ptr(hdr),
                              _ptr(head_events), _ptr(cut_events), ctypes.c_int64(release)))
    if nc == -1:
        raise WireError("a field of an event line does not fit in it", int(cut_at[0]))
    if nc < 0:
        raise RuntimeError("the XSpace scanner found more cuts than a line's bytes allow")
    if nc == 0:
        return None
    parent = np.concatenate([np.arange(n, dtype=np.int64), cut_line[:nc]])
    start = np.concatenate([offs, cut_at[:nc]])
    order = np.lexsort((start, parent))
    parent, start = parent[order], start[order]
    events = np.concatenate([head_events, cut_events[:nc]])[order]
    end = np.append(start[1:], 0)
    last = np.append(parent[1:] != parent[:-1], True)
    end[last] = offs[parent[last]] + lens[parent[last]]
    cut = np.zeros(n, dtype=bool)
    cut[cut_line[:nc]] = True
    header = hdr.reshape(n, 4)
    return _Cut(start, end - start, parent, cut, header, events, np.ascontiguousarray(header[parent, 1]),
                cut[parent].view(np.uint8))


@dataclass
class _Out:
    ln: list[np.ndarray]
    ev: list[np.ndarray]
    val: list[np.ndarray]
    state: list[np.ndarray]


@dataclass
class _Scan:
    """One scan's inputs and outputs; :meth:`part` scans some lines into their place (one thread each)."""

    lib: Any
    buf: np.ndarray
    line_off: np.ndarray
    line_len: np.ndarray
    line_plane: np.ndarray
    first: np.ndarray  #: each line's first event (and the total after the last)
    lut: np.ndarray
    width: int
    refs: tuple[np.ndarray, int]
    names: tuple[np.ndarray, int]
    kinds: np.ndarray
    out: _Out
    ends: np.ndarray  #: the bytes of the lines before each line (and of all after the last)
    tally: _Tally
    #: a cut's runs (:class:`_Cut`): each run's line, its line's timestamp, whether that timestamp is used
    runs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    release: int = 0  #: see :func:`scan_lines`

    def part(self, l0: int, l1: int) -> tuple[list[np.ndarray], int, int]:
        """Lines ``l0`` to ``l1`` (their events' outputs are exactly theirs): (odd list, stats kept, stats not read).
        The scanner is called on about :data:`PROGRESS_BYTES` of lines at a time, each call's lines told to the
        tally."""
        nf = self.kinds.size
        size = int(self.ends[l1] - self.ends[l0])
        cap_odd = max(MIN_ODD, int(size * ODD_PER_BYTE))
        odd = [np.empty(cap_odd, t) for t in (np.int64, np.int8, np.uint8, np.uint64)]
        counts = np.zeros(6, dtype=np.int64)
        (ref_tab, ref_width), (md_tab, md_width) = self.refs, self.names
        line, no, kept, unknown = l0, 0, 0, 0
        o = self.out
        # where each call stops: the first line past each further PROGRESS_BYTES (at least one line a call)
        stops = np.searchsorted(self.ends, self.ends[l0] + PROGRESS_BYTES * np.arange(1, size // PROGRESS_BYTES + 1),
                                side="right") - 1
        stops = [int(x) for x in np.unique(np.clip(stops, l0 + 1, l1))] + [l1]
        stop, told = stops.pop(0), l0
        while True:
            ne = int(self.first[line])
            vp = (ctypes.c_void_p * nf)(*(a[ne:].ctypes.data for a in o.val))
            sp = (ctypes.c_void_p * nf)(*(a[ne:].ctypes.data for a in o.state))
            rc = self.lib.ks_scan_events(
                _ptr(self.buf), ctypes.c_int64(self.buf.size), _ptr(self.line_off[line:]), _ptr(self.line_len[line:]),
                _ptr(self.line_plane[line:]), ctypes.c_int64(stop - line), ctypes.c_int64(line), ctypes.c_int64(ne),
                _ptr(self.lut), ctypes.c_int64(self.width), ctypes.c_int64(self.lut.size),
                _ptr(ref_tab), ctypes.c_int64(ref_width), ctypes.c_int64(ref_tab.size),
                _ptr(md_tab), ctypes.c_int64(md_width), ctypes.c_int64(md_tab.size),
                _ptr(self.kinds), ctypes.c_int64(nf), ctypes.c_int64(int(self.first[stop]) - ne), ctypes.c_int64(cap_odd - no),
                *((_ptr(None),) * 3 if self.runs is None else (_ptr(a[line:]) for a in self.runs)),
                *(_ptr(a[line:]) for a in o.ln), *(_ptr(a[ne:]) for a in o.ev), vp, sp, *(_ptr(a[no:]) for a in odd),
                _ptr(counts), ctypes.c_int64(self.release))
            if rc < 0:
                raise WireError("a field of an event line does not fit in it", int(counts[3]))
            line, no = line + int(counts[0]), no + int(counts[5])
            kept, unknown = kept + int(counts[2]), unknown + int(counts[4])
            if rc == 0:
                self.tally.add(int(self.ends[line] - self.ends[told]))
                told = line
                if line >= l1:
                    return [a[:no] for a in odd], kept, unknown
                stop = stops.pop(0)
                continue
            # the odd list was full: grow it and go on from the line that did not fit (its cells are written again)
            need = int(self.line_len[line]) // 2 + 1  # a stat takes at least 2 bytes
            if cap_odd - no >= need:
                raise RuntimeError("the XSpace scanner found more events than it counted")
            cap_odd = max(cap_odd * 2, no + need)
            odd = [_grown(a, no, cap_odd) for a in odd]


def typed(fkind: int, kind: np.ndarray, raw: np.ndarray, plane: np.ndarray, refs: Lookup) -> tuple[np.ndarray, np.ndarray]:
    """Stats of one field (their value kinds ``K_*`` and raw values as the scanner reads them) as the field's
    typed ``value`` and ``state`` (what the compiled scanner writes): numbers of the field's type, refs to
    rows of ``refs`` (the stat metadata of ``plane``), text left for later (``S_TEXT``)."""
    is_int = (kind == K_U64) | (kind == K_I64)
    is_dbl = kind == K_DOUBLE
    text = (kind == K_STR) | (kind == K_REF)
    state = np.where(kind == K_NONE, S_NONE, S_NULL).astype(np.uint8)
    if fkind == F_STR:
        value = np.zeros(kind.size, np.int32)
        ref = np.flatnonzero(kind == K_REF)
        rows = refs.rows(plane[ref], raw[ref].view(np.int64)) if ref.size else np.zeros(0, np.int64)
        value[ref] = np.maximum(rows, 0).astype(np.int32)
        state[ref] = np.where(rows >= 0, S_VALUE, S_NULL)
        state[(kind == K_STR) | is_int | is_dbl] = S_TEXT
        return value, state
    d = raw.view(np.float64)
    if fkind == F_FLOAT:
        value = np.where(is_dbl, d, raw.view(np.int64).astype(np.float64))
        state[is_dbl | is_int] = S_VALUE
    else:
        with np.errstate(invalid="ignore"):
            okd = is_dbl & np.isfinite(d) & (np.abs(d) < 2.0**63)
            value = np.where(okd, np.where(okd, d, 0).astype(np.int64), raw.view(np.int64))
        state[is_int | okd] = S_VALUE
    state[text] = S_TEXT
    return value, state


def _scan_numpy(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray,
                spec: FieldSpec, refs: Lookup, names: Lookup) -> LineScan:
    cells = _cells_numpy(buf, line_off, line_len, line_plane, spec.field_of, spec.kinds.size, spec.unread)
    ts = cells.ln_ts[cells.ev_line]
    start = ts + (cells.ev_offset + 500) // 1000
    end = ts + (cells.ev_offset + cells.ev_dur + 500) // 1000
    plane = line_plane[cells.ev_line]
    value, state, odd = [], [], []
    for i, fk in enumerate(spec.kinds.tolist()):
        if i in spec.unread:
            value.append(np.zeros(0, _VALUE_TYPES[fk]))
            state.append(np.zeros(0, np.uint8))
            continue
        v, st = typed(fk, cells.col_kind[i], cells.col_val[i], plane, refs)
        value.append(v)
        state.append(st)
        ev = np.flatnonzero(st == S_TEXT)
        odd.append((ev, np.full(ev.size, i, np.int64), cells.col_kind[i][ev], cells.col_val[i][ev]))
    o = ([np.concatenate([x[k] for x in odd]) for k in range(4)] if odd
         else [np.zeros(0, t) for t in (np.int64, np.int64, np.uint8, np.uint64)])
    return LineScan(cells.ln_id, cells.ln_ts, cells.ln_name_off, cells.ln_name_len, cells.ev_line, cells.ev_md,
                    names.rows(plane, cells.ev_md), start, end - start, cells.ev_flags, value, state, odd_ev=o[0],
                    odd_field=o[1], odd_kind=o[2], odd_val=o[3], native=False, kept=cells.kept, unknown=cells.unknown)


#: the numpy reader (no compiled scanner) reads the events' fields this many events at a time: all at once, the real
#: 207 MB profile's 1.87 M events peaked at 8.1 GB (39x the file)
NUMPY_BATCH_EVENTS = 1 << 18


@dataclass
class _Cells:
    """The numpy reader's scan: per field and event the last stat's kind and raw value."""

    ln_id: np.ndarray
    ln_ts: np.ndarray
    ln_name_off: np.ndarray
    ln_name_len: np.ndarray
    ev_line: np.ndarray
    ev_md: np.ndarray
    ev_offset: np.ndarray
    ev_dur: np.ndarray
    ev_flags: np.ndarray
    col_val: list[np.ndarray]
    col_kind: list[np.ndarray]
    kept: int
    unknown: int


def last_value(n: int, msg: np.ndarray, values: np.ndarray, default: int = 0) -> np.ndarray:
    """Per message, the value of its last row (rows of a message come in file order)."""
    out = np.full(n, default, dtype=values.dtype)
    if msg.size:
        last = np.append(msg[1:] != msg[:-1], True) if np.all(msg[1:] >= msg[:-1]) else _last_rows(msg)
        out[msg[last]] = values[last]
    return out


def _last_rows(msg: np.ndarray) -> np.ndarray:
    """A mask of the last row of each message (rows of a message in file order, messages interleaved)."""
    order = np.argsort(msg, kind="stable")
    m = msg[order]
    keep = np.append(m[1:] != m[:-1], True)
    mask = np.zeros(msg.size, dtype=bool)
    mask[order[keep]] = True
    return mask


def _cells_numpy(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray,
                 field_of: FieldOf, nfields: int, unread: frozenset[int] = frozenset()) -> _Cells:
    n = line_off.size
    ln = {k: np.zeros(n, np.int64) for k in ("id", "ts", "name_off", "name_len")}
    ev_off, ev_len, ev_line = [], [], []
    for i, (o, s) in enumerate(zip(line_off.tolist(), line_len.tolist())):
        f = walk(buf, o, o + s, runs=(4,), what="XLine")
        ev = f.of(4, 2)
        ev_off.append(ev.off)
        ev_len.append(ev.size)
        ev_line.append(np.full(len(ev), i, dtype=np.int64))
        for key, field in (("id", 1), ("ts", 3)):
            x = f.of(field, 0)
            if len(x):
                ln[key][i] = int(x.value[-1:].view(np.int64)[0])
        name, disp = f.of(2, 2), f.of(11, 2)
        pick = name if len(name) and (name.size[-1] > 0 or not len(disp)) else disp
        ln["name_off"][i], ln["name_len"][i] = (int(pick.off[-1]), int(pick.size[-1])) if len(pick) else (-1, 0)
    off = np.concatenate(ev_off) if ev_off else np.zeros(0, np.int64)
    size = np.concatenate(ev_len) if ev_len else np.zeros(0, np.int64)
    del ev_off, ev_len
    ne = off.size
    ev_line_all = np.concatenate(ev_line) if ev_line else np.zeros(0, np.int64)
    cols = {key: np.zeros(ne, np.int64) for key in ("md", "offset", "dur")}
    flags = np.zeros(ne, np.uint8)
    val = [np.zeros(0 if i in unread else ne, np.uint64) for i in range(nfields)]
    kinds = [np.zeros(0 if i in unread else ne, np.uint8) for i in range(nfields)]
    n_kept = n_unknown = 0
    for b0 in range(0, ne, NUMPY_BATCH_EVENTS):  # the events' fields a batch at a time: ~50 bytes each per field
        b1 = min(ne, b0 + NUMPY_BATCH_EVENTS)
        f = fields_of(buf, off[b0:b1], off[b0:b1] + size[b0:b1], what="XEvent")
        for key, field in (("md", 1), ("offset", 2), ("dur", 3)):
            x = f.of(field, 0)
            cols[key][b0:b1] = last_value(b1 - b0, x.msg, x.value.view(np.int64))
        flags[b0 + f.of(5, 0).msg] = 1
        st = f.of(4, 2)
        del f
        st = st.select(np.lexsort((st.off, st.msg)))  # by event, then in file order
        md, kind, value = decode_stats(buf, st.off, st.size)
        event = st.msg.astype(np.int64) + b0
        st_field = field_of(line_plane[ev_line_all[event]], md).astype(np.int64)
        n_kept += int(np.count_nonzero(st_field >= 0))
        n_unknown += int(np.count_nonzero(st_field == -1))  # (a field left unread: not kept, not unknown)
        for i in range(nfields):
            m = np.flatnonzero(st_field == i)
            if m.size == 0:
                continue
            rows = event[m]
            last = np.append(rows[1:] != rows[:-1], True)  # events in order: an event's last stat of this field
            m, rows = m[last], rows[last]
            val[i][rows] = value[m]
            kinds[i][rows] = kind[m]
    return _Cells(ln["id"], ln["ts"], ln["name_off"], ln["name_len"], ev_line_all, cols["md"], cols["offset"], cols["dur"],
                  flags, val, kinds, n_kept, n_unknown)


def lengths_before(buf: np.ndarray, off: np.ndarray) -> np.ndarray:
    """The lengths of length-prefixed payloads at ``off``: the varint just before each (its earlier bytes
    have the high bit set; the tag before it, a field of wire type 2 below 16, does not)."""
    start = off.astype(np.int64) - 1
    for _ in range(9):
        more = (start > 0) & (buf[np.maximum(start - 1, 0)] >= 0x80)
        if not more.any():
            break
        start = np.where(more, start - 1, start)
    out = np.zeros(off.size, dtype=np.int64)
    for k in range(10):  # a small varint reader (a payload's length is below 2^35)
        pos = start + k
        live = pos < off
        out |= np.where(live, (buf[np.minimum(pos, buf.size - 1)] & 0x7F).astype(np.int64) << (7 * k), 0)
    return out


def decode_stats(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, ...]:
    """XStat messages at ``off``/``size``: metadata id, kind, value (a string's offset)."""
    sf = fields_of(buf, off, off + size, what="XStat")
    nst = off.size
    md = sf.of(1, 0)
    wire_of = np.where(sf.field == 2, 1, np.where(np.isin(sf.field, (5, 6)), 2, 0))
    vals = sf.select((sf.field >= 2) & (sf.field <= 7) & (sf.wire == wire_of))
    kind = last_value(nst, vals.msg, (vals.field - 1).astype(np.uint8))  # field 2..7 -> K_DOUBLE..K_REF
    is_span = np.isin(vals.field, (5, 6))
    return (last_value(nst, md.msg, md.value.view(np.int64)), kind,
            last_value(nst, vals.msg, np.where(is_span, vals.off.astype(np.uint64), vals.value)))
