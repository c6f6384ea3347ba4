"""Protocol-buffer wire format, read column-wise with numpy (no generated code, no protobuf package).

A protobuf message is a run of fields ``tag (varint: field << 3 | wire type)`` + value: a varint (type 0),
8 bytes (1), a length-prefixed payload (2: strings, bytes, sub-messages) or 4 bytes (5). Two readers:

- :func:`fields_of`: the fields of **many messages at once** (one numpy step per field position, over
  every message still open), for millions of small messages such as trace events and their stats;
- :func:`walk`: the fields of **one long message** in order. A long run of one repeated
  length-prefixed field (the events of a line) is followed by jump pointers: every byte position that
  could start such a field gets its successor (position + tag + length prefix + length), 256-step
  jumps are composed with numpy, and the run is walked 256 fields at a time, so a run of n fields costs
  O(n) vectorized work and n/256 Python steps.

Both raise :class:`WireError` with the byte offset of the first field that does not fit its message
(a truncated or garbled file). ``buf`` is a ``uint8`` array over the file's bytes (no copy: reads past
its end are clipped to its last byte, and a value so read ends past its message, which is an error).
"""

from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass
from typing import Any

import numpy as np

from .native import scanner

#: zero bytes the readers need past the end of the data
PAD = 16
#: fields of one run walked per Python step (the jump length)
JUMP = 256
_U7 = np.uint64(0x7F)


class WireError(ValueError):
    """Bytes that are not a valid message; ``offset`` is the byte where the problem was found."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass(frozen=True)
class Fields:
    """Fields found, one row each: the message they belong to (an index into the messages given, or 0
    for :func:`walk`), field number, wire type, and for wire types 0/1/5 the value (``uint64``; the
    raw bits of fixed64 and fixed32) or for type 2 the payload's offset and size in ``buf``."""

    msg: np.ndarray  #: int64
    field: np.ndarray  #: int64
    wire: np.ndarray  #: int64
    value: np.ndarray  #: uint64 (0 for wire type 2)
    off: np.ndarray  #: int64 payload offset (wire type 2), else the value's offset
    size: np.ndarray  #: int64 payload size (wire type 2), else 0

    def select(self, mask: np.ndarray) -> "Fields":
        return Fields(self.msg[mask], self.field[mask], self.wire[mask], self.value[mask], self.off[mask], self.size[mask])

    def of(self, field: int, wire: int | None = None) -> "Fields":
        m = self.field == field
        if wire is not None:
            m &= self.wire == wire
        return self.select(m)

    def __len__(self) -> int:
        return int(self.msg.size)


def as_array(data: bytes | bytearray | memoryview | mmap.mmap) -> np.ndarray:
    """``data`` as a ``uint8`` array, without a copy (the readers clip what they read past its end)."""
    return np.frombuffer(data, dtype=np.uint8) if len(data) else np.zeros(1, dtype=np.uint8)[:0]


def padded(data: bytes | bytearray | memoryview | mmap.mmap) -> np.ndarray:
    """``data`` as a ``uint8`` array with :data:`PAD` zero bytes after it (a copy; for tests and tools)."""
    out = np.zeros(len(data) + PAD, dtype=np.uint8)
    out[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    return out


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at ``pos`` (int64): values (uint64) and sizes in bytes (1..10; 11 marks a
    varint with no end within 10 bytes)."""
    last = buf.size - 1  # reads past the end are clipped to the last byte: such a varint ends past the message
    b = buf[np.minimum(pos, last)]
    val = (b & 0x7F).astype(np.uint64)
    size = np.ones(pos.shape, dtype=np.int64)
    todo = np.flatnonzero(b >= 0x80)
    k = 1
    while todo.size and k < 10:
        b = buf[np.minimum(pos[todo] + k, last)]
        val[todo] |= (b & _U7).astype(np.uint64) << np.uint64(7 * k)
        size[todo] += 1
        todo = todo[b >= 0x80]
        k += 1
    if todo.size:
        size[todo] = 11
    return val, size


def _fixed(buf: np.ndarray, pos: np.ndarray, n: int) -> np.ndarray:
    """Little-endian unsigned integers of ``n`` bytes at ``pos`` (uint64)."""
    out = np.zeros(pos.shape, dtype=np.uint64)
    for k in range(n):
        out |= buf[np.minimum(pos + k, buf.size - 1)].astype(np.uint64) << np.uint64(8 * k)
    return out


def _step(buf: np.ndarray, cur: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
    """One field at each cursor: (field, wire, value, off, size, next cursor, bad mask)."""
    tag, tsz = varints(buf, cur)
    field = (tag >> np.uint64(3)).astype(np.int64)
    wire = (tag & np.uint64(7)).astype(np.int64)
    p = cur + tsz
    value = np.zeros(cur.shape, dtype=np.uint64)
    size = np.zeros(cur.shape, dtype=np.int64)
    nxt = p.copy()
    bad = (tsz > 10) | (field == 0) | ~np.isin(wire, (0, 1, 2, 5))
    w0 = np.flatnonzero(wire == 0)
    if w0.size:
        v, s = varints(buf, p[w0])
        value[w0] = v
        nxt[w0] = p[w0] + s
        bad[w0] |= s > 10
    w2 = np.flatnonzero(wire == 2)
    if w2.size:
        v, s = varints(buf, p[w2])
        big = (s > 10) | (v > np.uint64(2**40))
        n = np.where(big, 0, v).astype(np.int64)
        p[w2] = p[w2] + s
        size[w2] = n
        nxt[w2] = p[w2] + n
        bad[w2] |= big
    for wt, width in ((1, 8), (5, 4)):
        wx = np.flatnonzero(wire == wt)
        if wx.size:
            value[wx] = _fixed(buf, p[wx], width)
            nxt[wx] = p[wx] + width
    bad |= nxt > end
    return field, wire, value, p, size, nxt, bad


def fields_of(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, what: str = "message") -> Fields:
    """Every field of the messages ``buf[starts[i]:ends[i]]``, all messages at once: message by message, each
    message's fields in file order (``msg`` says whose each is). The compiled reader (``ks_fields`` in
    ``_xspace.c``) lists them where it was built; else, and to word an error, numpy reads.

    Raises :class:`WireError` at the first field (by offset) that runs past its message's end.
    """
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    ends = np.ascontiguousarray(ends, dtype=np.int64)
    lib = scanner()
    if lib is not None:
        found = _fields_native(lib, buf, starts, ends)
        if found is not None:
            return found
    f = _fields_numpy(buf, starts, ends, what)
    order = np.argsort(f.msg, kind="stable")  # message by message, as the compiled reader gives them
    return f.select(order)


def _fields_native(lib: Any, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields | None:
    """:func:`fields_of` by the compiled reader: a count, then the rows; None where the data is bad (numpy then
    reads, and words the error)."""
    info = np.zeros(1, dtype=np.int64)
    b = np.ascontiguousarray(buf)
    args = (ctypes.c_void_p(b.ctypes.data), ctypes.c_int64(b.size), ctypes.c_void_p(starts.ctypes.data),
            ctypes.c_void_p(ends.ctypes.data), ctypes.c_int64(starts.size))
    n = int(lib.ks_count_fields(*args, ctypes.c_void_p(info.ctypes.data)))
    if n < 0:
        return None
    cols = [np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.uint64),
            np.empty(n, np.int64), np.empty(n, np.int64)]
    got = int(lib.ks_fields(*args, ctypes.c_int64(n), *(ctypes.c_void_p(c.ctypes.data) for c in cols),
                            ctypes.c_void_p(info.ctypes.data)))
    return Fields(*cols) if got == n else None


def _fields_numpy(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, what: str) -> Fields:
    """:func:`fields_of` with numpy: rows position by position (every message's first field, then every second
    field, ...)."""
    parts: list[tuple[np.ndarray, ...]] = []
    live = np.flatnonzero(starts < ends)
    cur = starts[live]
    while live.size:
        end = ends[live]
        field, wire, value, off, size, nxt, bad = _step(buf, cur, end)
        if bad.any():
            i = np.flatnonzero(bad)
            first = i[np.argmin(cur[i])]
            raise WireError(f"a field of a {what} does not fit in it", int(cur[first]))
        parts.append((live, field, wire, value, off, size))
        keep = nxt < end
        live, cur = live[keep], nxt[keep]
    if not parts:
        e64 = np.zeros(0, dtype=np.int64)
        return Fields(e64, e64, e64, np.zeros(0, dtype=np.uint64), e64, e64)
    # in the order read: the k-th field of every message, then the (k+1)-th: a message's fields keep their
    # file order (a later field of a message always has a larger row number)
    return Fields(*(np.concatenate([p[k] for p in parts]) for k in range(6)))


#: bytes of a run examined at first (doubled while the run goes on): a short run in a long message
#: (a plane's metadata before or after its lines) costs its own length, not the message's
RUN_WINDOW = 1 << 16


def _run(buf: np.ndarray, start: int, end: int, tag: bytes) -> tuple[np.ndarray, np.ndarray, int]:
    """The consecutive fields with tag bytes ``tag`` from ``start`` (which holds one): payload offsets
    and sizes, and the position after the run."""
    offs: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    window = RUN_WINDOW
    while True:
        stop = min(end, start + window)
        o, s, after = _run_window(buf, start, stop, end, tag)
        offs.append(o)
        sizes.append(s)
        t = len(tag)
        if after >= stop and after < end and bytes(buf[after : after + t]) == tag:
            start, window = after, window * 2  # the run goes on past this window
            continue
        return np.concatenate(offs), np.concatenate(sizes), after


def _run_window(buf: np.ndarray, start: int, stop: int, end: int, tag: bytes) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`_run` over the fields that start in ``[start, stop)`` (the message ends at ``end``)."""
    t = len(tag)
    view = buf[start:stop]
    cand = np.flatnonzero(view == tag[0]).astype(np.int64) + start
    for k in range(1, t):
        cand = cand[cand + k < end]
        cand = cand[buf[cand + k] == tag[k]]
    n = cand.size
    length, lsz = varints(buf, cand + t)
    ok = (lsz <= 10) & (length <= np.uint64(end))
    payload = cand + t + lsz
    nxt_pos = np.where(ok, payload + length.astype(np.int64), end + 1)
    succ = np.searchsorted(cand, nxt_pos)
    succ = np.where((succ < n) & (cand[np.minimum(succ, n - 1)] == nxt_pos), succ, n)
    succ = np.append(succ, n)  # the sentinel points to itself
    jump = succ
    for _ in range(JUMP.bit_length() - 1):
        jump = jump[jump]
    coarse = []
    i = 0
    while i != n:
        coarse.append(i)
        i = int(jump[i])
    rows = np.empty((JUMP, len(coarse)), dtype=np.int64)
    c = np.asarray(coarse, dtype=np.int64)
    for k in range(JUMP):
        rows[k] = c
        c = succ[c]
    members = rows.T.reshape(-1)
    members = members[members != n]
    last = members[-1]
    after = int(nxt_pos[last])
    if after > end:
        raise WireError("a field runs past the end of its message", int(cand[last]))
    return payload[members], length[members].astype(np.int64), after


def varint_bytes(v: int) -> bytes:
    """``v`` (an unsigned 64-bit value; negative ones as two's complement) as a varint."""
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        if v < 0x80:
            out.append(v)
            return bytes(out)
        out.append(v & 0x7F | 0x80)
        v >>= 7


def packed_varints(data: bytes | memoryview) -> list[int]:
    """The values of a packed repeated varint field's payload (few values: plain Python)."""
    vals, v, shift = [], 0, 0
    for b in data:
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            vals.append(v)
            v, shift = 0, 0
    return vals


def _tag_bytes(field: int, wire: int) -> bytes:
    return varint_bytes(field << 3 | wire)


def _py_varint(mv: memoryview, p: int, end: int, bad: str, at: int) -> tuple[int, int]:
    v = shift = 0
    while p < end and shift < 70:
        b = mv[p]
        p += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v & 0xFFFFFFFFFFFFFFFF, p
        shift += 7
    raise WireError(bad, at)


def walk(buf: np.ndarray, start: int, end: int, runs: tuple[int, ...] = (), what: str = "message") -> Fields:
    """The fields of the one message ``buf[start:end]``, in order. Repeated length-prefixed fields whose
    numbers are in ``runs`` are read a run at a time with jump pointers (see the module docstring); the
    compiled reader, where built, reads the whole message (and numpy words an error)."""
    lib = scanner()
    if lib is not None:
        found = _fields_native(lib, buf, np.array([start], dtype=np.int64), np.array([end], dtype=np.int64))
        if found is not None:
            return found
    rows: list[tuple[int, int, int, int, int]] = []
    run_parts: list[tuple[int, np.ndarray, np.ndarray]] = []
    run_tags = {f: _tag_bytes(f, 2) for f in runs}
    mv = buf.data  # (a memoryview of the bytes: plain Python ints per byte, one field costs ~1 µs, a numpy step ~40)
    bad = f"a field of the {what} does not fit in it"
    p = start
    while p < end:
        at = p
        tag, p = _py_varint(mv, p, end, bad, at)
        f, w = tag >> 3, tag & 7
        if f == 0:
            raise WireError(bad, at)
        if w == 0:
            v, p = _py_varint(mv, p, end, bad, at)
            rows.append((f, 0, v, at, 0))
        elif w == 2:
            if f in run_tags:
                offs, sizes, after = _run(buf, at, end, run_tags[f])
                run_parts.append((f, offs, sizes))
                p = after
                continue
            n, p = _py_varint(mv, p, end, bad, at)
            if n > end - p:
                raise WireError(f"a field of the {what} at byte {at:,} holds {n:,} bytes but the {what} ends "
                                f"{end - p:,} bytes later", at)
            rows.append((f, 2, 0, p, n))
            p += n
        elif w in (1, 5):
            width = 8 if w == 1 else 4
            if p + width > end:
                raise WireError(bad, at)
            rows.append((f, w, int.from_bytes(mv[p:p + width], "little"), p, 0))
            p += width
        else:
            raise WireError(bad, at)
    n_single = len(rows)
    arr = np.array(rows, dtype=np.uint64).reshape(n_single, 5) if rows else np.zeros((0, 5), dtype=np.uint64)
    fld = [arr[:, 0].astype(np.int64)]
    wir = [arr[:, 1].astype(np.int64)]
    val = [arr[:, 2]]
    off_ = [arr[:, 3].astype(np.int64)]
    siz = [arr[:, 4].astype(np.int64)]
    for f, offs, sizes in run_parts:
        fld.append(np.full(offs.size, f, dtype=np.int64))
        wir.append(np.full(offs.size, 2, dtype=np.int64))
        val.append(np.zeros(offs.size, dtype=np.uint64))
        off_.append(offs)
        siz.append(sizes)
    offs_all = np.concatenate(off_)
    order = np.argsort(offs_all, kind="stable")
    return Fields(np.zeros(offs_all.size, dtype=np.int64), np.concatenate(fld)[order], np.concatenate(wir)[order],
                  np.concatenate(val)[order], offs_all[order], np.concatenate(siz)[order])
