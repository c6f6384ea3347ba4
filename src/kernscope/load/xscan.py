"""The events of XLine messages and their wanted stats as flat numpy columns: the compiled scanner, or numpy.

Both readers give the same :class:`LineScan` (``tests/test_jax.py`` compares them on every real profile):
the compiled one (``_xspace.c`` through :mod:`.native`) walks every byte once and writes each wanted
stat straight into its column; the numpy one walks each line's events with :func:`.protowire.walk` and
their fields with :func:`.protowire.fields_of`, then places the stats.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .native import scanner
from .protowire import WireError, fields_of, walk

#: stat value kinds (``col_kind``): the XStat value field number minus one; 0: no stat
K_NONE, K_DOUBLE, K_U64, K_I64, K_STR, K_BYTES, K_REF = range(7)

FieldOf = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass
class LineScan:
    """Per line: id, timestamp (ns), name span. Per event: its line, metadata id, offset and duration (ps),
    flags (bit 0: an aggregated event with ``num_occurrences``). Per wanted field and event, the last such
    stat of the event: its kind (``K_*``, 0: none) and value (uint64: raw bits of a double; an int; a ref
    id; a string's offset: its length is the varint before it, see :func:`lengths_before`)."""

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
    native: bool
    kept: int = 0  #: stats read into the columns
    unknown: int = 0  #: stats not read (no wanted field)


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def scan_lines(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray, field_of: FieldOf,
               lut: np.ndarray | None, width: int, nfields: int, *, native: bool | None = None) -> LineScan:
    """Scan the lines at ``line_off``/``line_len`` (int64) of ``buf``, in planes ``line_plane``; keep the stats
    that ``field_of(plane, metadata id)`` maps to a field (int8, below ``nfields``; -1: not read). ``lut`` is
    the same map as a flat table (``plane * width + id``) for the compiled scanner, or None (then numpy
    reads). ``native``: force a reader (None: the compiled one when available)."""
    lib = scanner() if native in (None, True) and lut is not None else None
    if native and lib is None:
        raise RuntimeError("the compiled XSpace scanner is not available")
    line_off = np.ascontiguousarray(line_off, dtype=np.int64)
    line_len = np.ascontiguousarray(line_len, dtype=np.int64)
    line_plane = np.ascontiguousarray(line_plane, dtype=np.int64)
    if lib is None:
        return _scan_numpy(buf, line_off, line_len, line_plane, field_of, nfields)
    assert lut is not None
    return _scan_native(lib, buf, line_off, line_len, line_plane, np.ascontiguousarray(lut, dtype=np.int8), width, nfields)


#: first guess of the outputs' size, per byte of line: events (one per ~100 bytes in real profiles); the
#: outputs grow (doubling) when a profile holds more
EVENTS_PER_BYTE = 1 / 48


def _columns_of(cap: int, nfields: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    # kinds start at 0 (no stat): zeroed pages cost nothing until written
    return [np.empty(cap, np.uint64) for _ in range(nfields)], [np.zeros(cap, np.uint8) for _ in range(nfields)]


def _scan_native(lib: Any, buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray,
                 lut: np.ndarray, width: int, nf: int) -> LineScan:
    """The compiled scanner, line by line into outputs that grow when a line does not fit."""
    n = line_off.size
    ln = [np.empty(n, np.int64) for _ in range(4)]
    ev_types = (np.int32, np.int64, np.int64, np.int64, np.uint8)
    cap = max(1024, int(int(line_len.sum()) * EVENTS_PER_BYTE))
    ev = [np.empty(cap, t) for t in ev_types]
    val, kind = _columns_of(cap, nf)
    counts = np.zeros(5, dtype=np.int64)
    line0 = ne = kept = unknown = 0
    u64p, u8p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint8)
    while True:
        vp = (u64p * nf)(*(ctypes.cast(_ptr(a[ne:]), u64p) for a in val))
        kp = (u8p * nf)(*(ctypes.cast(_ptr(a[ne:]), u8p) for a in kind))
        rc = lib.ks_scan_lines(
            _ptr(buf), ctypes.c_int64(buf.size), _ptr(line_off[line0:]), _ptr(line_len[line0:]), ctypes.c_int64(n - line0),
            _ptr(line_plane[line0:]), _ptr(lut), ctypes.c_int64(width), ctypes.c_int64(lut.size),
            ctypes.c_int64(min(cap - ne, 2**31 - 1)), *(_ptr(a[line0:]) for a in ln), *(_ptr(a[ne:]) for a in ev),
            vp, kp, ctypes.c_int64(nf), _ptr(counts))
        if rc < 0:
            raise WireError("a field of an event line does not fit in it", int(counts[3]))
        done, got = int(counts[0]), int(counts[1])
        ev[0][ne:ne + got] += line0  # line numbers were counted from this call's first line
        line0, ne, kept, unknown = line0 + done, ne + got, kept + int(counts[2]), unknown + int(counts[4])
        if rc == 0:
            break
        cap *= 2  # a line did not fit: grow and go on from it (the cells it wrote are written again)
        ev = [np.concatenate([a[:ne], np.empty(cap - ne, a.dtype)]) for a in ev]
        v2, k2 = _columns_of(cap, nf)
        for old, new in ((val, v2), (kind, k2)):
            for a, b in zip(old, new):
                b[:ne] = a[:ne]
        val, kind = v2, k2
    return LineScan(ln_id=ln[0], ln_ts=ln[1], ln_name_off=ln[2], ln_name_len=ln[3], ev_line=ev[0][:ne].astype(np.int64),
                    ev_md=ev[1][:ne], ev_offset=ev[2][:ne], ev_dur=ev[3][:ne], ev_flags=ev[4][:ne],
                    col_val=[a[:ne] for a in val], col_kind=[a[:ne] for a in kind], native=True, kept=kept, unknown=unknown)


def _last(n: int, msg: np.ndarray, values: np.ndarray, default: int = 0) -> np.ndarray:
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


def _scan_numpy(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray,
                field_of: FieldOf, nfields: int) -> LineScan:
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
    ne = off.size
    f = fields_of(buf, off, off + size, what="XEvent")
    cols = {}
    for key, field in (("md", 1), ("offset", 2), ("dur", 3)):
        x = f.of(field, 0)
        cols[key] = _last(ne, x.msg, x.value.view(np.int64))
    flags = np.zeros(ne, np.uint8)
    flags[f.of(5, 0).msg] = 1
    st = f.of(4, 2)
    st = st.select(np.lexsort((st.off, st.msg)))  # by event, then in file order
    md, kind, value = decode_stats(buf, st.off, st.size)
    ev_line_all = np.concatenate(ev_line) if ev_line else np.zeros(0, np.int64)
    event = st.msg.astype(np.int64)
    st_field = field_of(line_plane[ev_line_all[event]], md).astype(np.int64)
    n_kept = int(np.count_nonzero(st_field >= 0))
    val, kinds = _columns_of(ne, nfields)
    for i in range(nfields):
        m = np.flatnonzero(st_field == i)
        if m.size == 0:
            continue
        rows = event[m]
        last = np.append(rows[1:] != rows[:-1], True)  # events in order: an event's last stat of this field
        m, rows = m[last], rows[last]
        val[i][rows] = value[m]
        kinds[i][rows] = kind[m]
    return LineScan(ln["id"], ln["ts"], ln["name_off"], ln["name_len"], ev_line_all, cols["md"], cols["offset"], cols["dur"],
                    flags, val, kinds, False, n_kept, int(st_field.size - n_kept))


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
    kind = _last(nst, vals.msg, (vals.field - 1).astype(np.uint8))  # field 2..7 -> K_DOUBLE..K_REF
    is_span = np.isin(vals.field, (5, 6))
    return (_last(nst, md.msg, md.value.view(np.int64)), kind,
            _last(nst, vals.msg, np.where(is_span, vals.off.astype(np.uint64), vals.value)))
