"""The events and stats of XLine messages as flat numpy columns: the compiled scanner, or numpy.

Both readers give the same :class:`LineScan` (``tests/test_jax.py`` compares them on real profiles):
the compiled one (``_xspace.c`` through :mod:`.native`) walks every byte once; the numpy one walks each
line's events with :func:`.protowire.walk` and their fields with :func:`.protowire.fields_of`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .native import scanner
from .protowire import WireError, fields_of, walk

#: stat value kinds (``st_kind``): the XStat value field number minus one
K_NONE, K_DOUBLE, K_U64, K_I64, K_STR, K_BYTES, K_REF = range(7)


@dataclass
class LineScan:
    """Per line: id, timestamp (ns), name span. Per event: its line, metadata id, offset and duration (ps),
    flags (bit 0: an aggregated event with ``num_occurrences``). Per stat kept (one the ``lut`` names): its
    event, field, kind (``K_*``), value (uint64: raw bits of a double; an int; a ref id) or the span of a
    string/bytes value."""

    ln_id: np.ndarray
    ln_ts: np.ndarray
    ln_name_off: np.ndarray
    ln_name_len: np.ndarray
    ev_line: np.ndarray
    ev_md: np.ndarray
    ev_offset: np.ndarray
    ev_dur: np.ndarray
    ev_flags: np.ndarray
    st_event: np.ndarray
    st_field: np.ndarray  #: int8: the wanted field (``lut``) of each stat kept
    st_kind: np.ndarray
    st_val: np.ndarray
    st_off: np.ndarray
    st_len: np.ndarray
    native: bool
    unknown: int = 0  #: stats not kept (no wanted field)


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


FieldOf = Callable[[np.ndarray, np.ndarray], np.ndarray]


def scan_lines(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray, field_of: FieldOf,
               lut: np.ndarray | None, width: int, *, native: bool | None = None) -> LineScan:
    """Scan the lines at ``line_off``/``line_len`` (int64) of ``buf``, in planes ``line_plane``; keep the stats
    that ``field_of(plane, metadata id)`` maps to a field (int8; -1: not read). ``lut`` is the same map as a
    flat table (``plane * width + id``) for the compiled scanner, or None (then numpy reads). ``native``:
    force a reader (None: the compiled one when available)."""
    lib = scanner() if native in (None, True) and lut is not None else None
    if native and lib is None:
        raise RuntimeError("the compiled XSpace scanner is not available")
    line_off = np.ascontiguousarray(line_off, dtype=np.int64)
    line_len = np.ascontiguousarray(line_len, dtype=np.int64)
    line_plane = np.ascontiguousarray(line_plane, dtype=np.int64)
    if lib is None:
        return _scan_numpy(buf, line_off, line_len, line_plane, field_of)
    assert lut is not None
    lut = np.ascontiguousarray(lut, dtype=np.int8)
    n = line_off.size
    counts = np.zeros(5, dtype=np.int64)
    null = ctypes.c_void_p(0)
    args = [_ptr(buf), ctypes.c_int64(buf.size), _ptr(line_off), _ptr(line_len), ctypes.c_int64(n), _ptr(line_plane),
            _ptr(lut), ctypes.c_int64(width), ctypes.c_int64(lut.size)]
    if lib.ks_scan_lines(*args, *([null] * 15), _ptr(counts)) != 0:
        raise WireError("a field does not fit its message (truncated or not this format)", int(counts[3]))
    ne, ns = int(counts[1]), int(counts[2])
    s = LineScan(
        np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
        np.empty(ne, np.int32), np.empty(ne, np.int64), np.empty(ne, np.int64), np.empty(ne, np.int64), np.empty(ne, np.uint8),
        np.empty(ns, np.int64), np.empty(ns, np.int8), np.empty(ns, np.uint8), np.empty(ns, np.uint64), np.empty(ns, np.int64),
        np.empty(ns, np.int64), True,
    )
    outs = [s.ln_id, s.ln_ts, s.ln_name_off, s.ln_name_len, s.ev_line, s.ev_md, s.ev_offset, s.ev_dur, s.ev_flags,
            s.st_event, s.st_field, s.st_kind, s.st_val, s.st_off, s.st_len]
    if lib.ks_scan_lines(*args, *(_ptr(a) for a in outs), _ptr(counts)) != 0:
        raise WireError("a field does not fit its message (truncated or not this format)", int(counts[3]))
    s.ev_line = s.ev_line.astype(np.int64)
    s.unknown = int(counts[4])
    return s


def _last(n: int, msg: np.ndarray, values: np.ndarray, default: int = 0) -> np.ndarray:
    """Per message, the value of its last row (rows of a message come in file order)."""
    out = np.full(n, default, dtype=values.dtype)
    out[msg] = values  # numpy assigns in order: the last row of a message wins
    return out


def _scan_numpy(buf: np.ndarray, line_off: np.ndarray, line_len: np.ndarray, line_plane: np.ndarray,
                field_of: FieldOf) -> LineScan:
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
    st = st.select(np.lexsort((st.off, st.msg)))  # by event, then in file order (as the compiled scanner)
    md, kind, val, soff, slen = decode_stats(buf, st.off, st.size)
    ev_line_all = np.concatenate(ev_line) if ev_line else np.zeros(0, np.int64)
    st_event = st.msg.astype(np.int64)
    st_field = field_of(line_plane[ev_line_all[st_event]], md).astype(np.int8)
    keep = np.flatnonzero(st_field >= 0)
    return LineScan(
        ln["id"], ln["ts"], ln["name_off"], ln["name_len"], ev_line_all, cols["md"], cols["offset"], cols["dur"], flags,
        st_event[keep], st_field[keep], kind[keep], val[keep], soff[keep], slen[keep], False, int(md.size - keep.size),
    )


def decode_stats(buf: np.ndarray, off: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, ...]:
    """XStat messages at ``off``/``size``: metadata id, kind, value, string/bytes span (as :class:`LineScan`)."""
    sf = fields_of(buf, off, off + size, what="XStat")
    nst = off.size
    md = sf.of(1, 0)
    wire_of = np.where(sf.field == 2, 1, np.where(np.isin(sf.field, (5, 6)), 2, 0))
    vals = sf.select((sf.field >= 2) & (sf.field <= 7) & (sf.wire == wire_of))
    kind = _last(nst, vals.msg, (vals.field - 1).astype(np.uint8))  # field 2..7 -> K_DOUBLE..K_REF
    is_span = np.isin(vals.field, (5, 6))
    return (_last(nst, md.msg, md.value.view(np.int64)), kind, _last(nst, vals.msg, np.where(is_span, np.uint64(0), vals.value)),
            _last(nst, vals.msg, np.where(is_span, vals.off, 0)), _last(nst, vals.msg, np.where(is_span, vals.size, 0)))
