"""A real JAX profile (XSpace protobuf) grown to a chosen size, its bytes kept as recorded (for benchmarks and tests
that need a profile of many lines; :mod:`.replicate` does the same for Kineto traces).

Every line is repeated: the same event bytes under a new line id, the line's start shifted by the profile's span each
time, so the copies follow each other in time. Correlation ids repeat across copies (each copy's kernels link to the
first copy's launches), and the metadata (HLO programs) is not repeated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..load.protowire import _py_varint, fields_of, padded, walk
from ..load.protowire import varint_bytes as _varint


def _field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def replicate_xspace(data: bytes, copies: int) -> bytes:
    """The XSpace with every line repeated ``copies`` times: the same event bytes under a new line id, the
    line's start shifted by the profile's span each time (so the copies follow each other in time)."""
    buf = padded(data)
    space = walk(buf, 0, len(data))
    lines_of: dict[int, list[tuple[dict, int, int]]] = {}
    span_ns = 0
    for i, (f, o, s) in enumerate(zip(space.field.tolist(), space.off.tolist(), space.size.tolist())):
        if f != 1:
            continue
        pf = walk(buf, o, o + s, runs=(4, 5, 6))
        lines = []
        for lo, ls in zip(pf.of(3, 2).off.tolist(), pf.of(3, 2).size.tolist()):
            lf = walk(buf, lo, lo + ls, runs=(4,))
            ev = lf.of(4, 2)
            head = {fn: (v if w != 2 else data[off:off + sz]) for fn, w, v, off, sz in
                    zip(lf.field.tolist(), lf.wire.tolist(), lf.value.tolist(), lf.off.tolist(), lf.size.tolist()) if fn != 4}
            first = int(ev.off[0]) - 1 - len(_varint(int(ev.size[0]))) if len(ev) else lo
            last = int(ev.off[-1] + ev.size[-1]) if len(ev) else lo
            lines.append((head, first, last))
            if len(ev):
                ef = fields_of(buf, ev.off, ev.off + ev.size)
                off = np.zeros(len(ev), dtype=np.int64)
                dur = np.zeros(len(ev), dtype=np.int64)
                off[ef.of(2, 0).msg] = ef.of(2, 0).value.view(np.int64)
                dur[ef.of(3, 0).msg] = ef.of(3, 0).value.view(np.int64)
                span_ns = max(span_ns, int(head.get(3, 0)) + int((off + dur).max()) // 1000)
        lines_of[i] = lines
    span_ns += 1000  # 1 µs between copies
    out = bytearray()
    for i, (f, w, v, o, s) in enumerate(zip(space.field.tolist(), space.wire.tolist(), space.value.tolist(),
                                           space.off.tolist(), space.size.tolist())):
        if f != 1:
            out += _varint(f << 3 | w) + (_varint(s) + data[o:o + s] if w == 2 else _varint(int(v)))
            continue
        pf = walk(buf, o, o + s, runs=(4, 5, 6))
        plane = bytearray()
        lines_done = False
        for pfn, pw, pv, po, ps in zip(pf.field.tolist(), pf.wire.tolist(), pf.value.tolist(), pf.off.tolist(), pf.size.tolist()):
            if pfn != 3:
                plane += _varint(pfn << 3 | pw) + (_varint(ps) + data[po:po + ps] if pw == 2 else _varint(int(pv)))
            elif not lines_done:  # every copy of every line where the lines were (field order kept)
                lines_done = True
                plane += _lines(data, lines_of[i], copies, span_ns)
        out += _field(1, bytes(plane))
    return bytes(out)


def _lines(data: bytes, lines: list, copies: int, span_ns: int) -> bytes:
    """``copies`` copies of every line (header re-encoded, event bytes as they are)."""
    plane = bytearray()
    for k in range(copies):
        for head, first, last in lines:
            line = bytearray()
            for fn, val in sorted(head.items()):
                if isinstance(val, bytes):
                    line += _field(fn, val)
                elif fn in (1, 10):  # id, display id: a new thread/stream per copy
                    line += _varint(fn << 3) + _varint(int(val) + k * 1_000_003)
                elif fn == 3:  # timestamp_ns
                    line += _varint(fn << 3) + _varint(int(val) + k * span_ns)
                else:
                    line += _varint(fn << 3) + _varint(int(val))
            line += data[first:last]
            plane += _field(3, bytes(line))
    return bytes(plane)


def _msg(data: bytes, start: int = 0, end: int | None = None) -> list[tuple[int, int, Any]]:
    """A message's fields in order: (field, wire type, value: an int, or a length-delimited field's bytes)."""
    out: list[tuple[int, int, Any]] = []
    p, end = start, len(data) if end is None else end
    while p < end:
        tag, p = _read_varint(data, p)
        f, w = tag >> 3, tag & 7
        if w == 0:
            v, p = _read_varint(data, p)
            out.append((f, w, v))
        elif w == 2:
            n, p = _read_varint(data, p)
            out.append((f, w, data[p:p + n]))
            p += n
        elif w == 1:
            out.append((f, w, data[p:p + 8]))
            p += 8
        elif w == 5:
            out.append((f, w, data[p:p + 4]))
            p += 4
        else:
            raise ValueError(f"wire type {w} at byte {p}")
    return out


def _read_varint(data: bytes, p: int) -> tuple[int, int]:
    return _py_varint(memoryview(data), p, len(data), "a varint runs past the end", p)


def _enc(fields: list[tuple[int, int, Any]]) -> bytes:
    out = bytearray()
    for f, w, v in fields:
        out += _varint(f << 3 | w)
        if w == 0:
            out += _varint(int(v) & (1 << 64) - 1)
        elif w == 2:
            out += _varint(len(v)) + v
        else:
            out += v
    return bytes(out)


def extend_xspace(data: bytes, copies: int) -> bytes:
    """The profile run ``copies`` times as long, as a longer recording of the same loop is: every line's events
    repeated after themselves in the same line (offsets shifted by the profile's span each time), the correlation ids
    and step numbers (``correlation_id``, ``step_num`` stats) continued, the line's duration grown. Unlike
    :func:`replicate_xspace`, a GPU stream stays one line, launches link to their own copy's kernels and every step
    has a number of its own. The metadata and the plane stats are not repeated. For benchmarks (a Python loop per
    event: about a minute per 200 MB)."""
    space = _msg(data)
    planes = [_msg(v) for f, w, v in space if f == 1 and w == 2]
    span_ps, top_corr, top_step = 0, 0, 0
    wanted: list[dict[int, str]] = []
    for plane in planes:
        names: dict[int, str] = {}
        for f, w, v in plane:
            if f == 5 and w == 2:  # stat metadata entry: key 1, value 2 (XStatMetadata: id 1, name 2)
                entry = dict((ef, ev) for ef, _, ev in _msg(v))
                md = dict((mf, mv) for mf, _, mv in _msg(entry.get(2, b"")))
                name = md.get(2, b"")
                if name in (b"correlation_id", b"step_num"):
                    names[int(entry.get(1, md.get(1, 0)))] = name.decode()
        wanted.append(names)
        for f, _, v in plane:
            if f != 3:
                continue
            line = _msg(v)
            ts = next((int(x) for lf, _, x in line if lf == 3), 0)
            for lf, _, ev in line:
                if lf != 4:
                    continue
                e = _msg(ev)
                off = next((int(x) for ef, ew, x in e if ef == 2 and ew == 0), 0)
                dur = next((int(x) for ef, ew, x in e if ef == 3 and ew == 0), 0)
                span_ps = max(span_ps, ts * 1000 + off + dur)
                for ef, ew, st in e:
                    if ef == 4 and ew == 2:
                        s = _msg(st)
                        kind = names.get(next((int(x) for sf, _, x in s if sf == 1), -1))
                        val = next((int(x) for sf, sw, x in s if sf in (3, 4) and sw == 0), None)
                        if kind == "correlation_id" and val is not None:
                            top_corr = max(top_corr, val)
                        elif kind == "step_num" and val is not None:
                            top_step = max(top_step, val)
    base_ps = min((next((int(x) for lf, _, x in _msg(v) if lf == 3), 0) * 1000
                   for plane in planes for f, _, v in plane if f == 3), default=0)
    span_ps = span_ps - base_ps + 1_000_000  # (1 µs between copies)
    out: list[tuple[int, int, Any]] = []
    planes_iter = iter(zip(planes, wanted))
    for f, w, v in space:
        if not (f == 1 and w == 2):
            out.append((f, w, v))
            continue
        plane, names = next(planes_iter)
        new_plane: list[tuple[int, int, Any]] = []
        for pf, pw, pv in plane:
            if pf != 3:
                new_plane.append((pf, pw, pv))
                continue
            line = _msg(pv)
            head = [(lf, lw, (int(lv) + (copies - 1) * span_ps if lf == 9 else lv)) for lf, lw, lv in line if lf != 4]
            events = [_msg(ev) for lf, _, ev in line if lf == 4]
            body = bytearray()
            for k in range(copies):
                for e in events:
                    ne: list[tuple[int, int, Any]] = []
                    for ef, ew, ev in e:
                        if ef == 2 and ew == 0:
                            ev = int(ev) + k * span_ps
                        elif ef == 4 and ew == 2 and k:
                            s = _msg(ev)
                            kind = names.get(next((int(x) for sf, _, x in s if sf == 1), -1))
                            if kind is not None:
                                step = top_corr + 1 if kind == "correlation_id" else top_step + 1
                                ev = _enc([(sf, sw, int(x) + k * step if sf in (3, 4) and sw == 0 else x)
                                           for sf, sw, x in s])
                        ne.append((ef, ew, ev))
                    body += _enc([(4, 2, _enc(ne))])
            new_plane.append((3, 2, _enc(head) + bytes(body)))
        out.append((1, 2, _enc(new_plane)))
    return _enc(out)


def host_plane(space: list[tuple[int, int, Any]]) -> int:
    """The index in ``space`` (an XSpace's fields, :func:`_msg`) of its host plane (``/host:CPU``)."""
    return next(i for i, (f, w, v) in enumerate(space) if f == 1 and w == 2
                and any(pf == 2 and pv == b"/host:CPU" for pf, _, pv in _msg(v)))


def with_gpu_lag(data: bytes, lag_ns: int) -> bytes:
    """The profile with every GPU plane's lines (``/device:GPU:*``) ``lag_ns`` later: each launch's GPU rows start that
    much later, as where the host's dispatch runs ahead of its GPU and never waits for it."""
    out = []
    for f, w, v in _msg(data):
        if f == 1 and w == 2:
            plane = _msg(v)
            if next((pv for pf, _, pv in plane if pf == 2), b"").startswith(b"/device:GPU"):
                v = _enc([(pf, pw, _enc([(lf, lw, lv + lag_ns if lf == 3 and lw == 0 else lv) for lf, lw, lv in _msg(pv)]))
                          if pf == 3 and pw == 2 else (pf, pw, pv) for pf, pw, pv in plane])
        out.append((f, w, v))
    return _enc(out)


def with_host_thread(data: bytes, tid: int, every_ns: int, dur_ns: int, name: str = "Iterator::Prefetch", *,
                     around: str | None = None) -> bytes:
    """The profile with one more line on its host plane (``/host:CPU``): thread ``tid`` running a range named ``name``
    of ``dur_ns`` every ``every_ns`` from the profile's first event to its last end, as a data loader's thread does
    (tf.data's iterators write such ranges). ``tid`` may be an existing line's id: a second line of that thread. The
    name is a new event metadata entry of the plane. ``around``: the name of one more range, the line's first event,
    from the first event to the last end, around the others (an epoch's range, a loop's Python frame)."""
    space = _msg(data)
    host = host_plane(space)
    first_ps, last_ps = None, 0
    for f, w, v in space:
        for pf, _, pv in _msg(v) if f == 1 and w == 2 else []:
            if pf != 3:
                continue
            line = _msg(pv)
            ts_ps = next((int(x) for lf, _, x in line if lf == 3), 0) * 1000
            for lf, _, ev in line:
                e = dict((ef, int(x)) for ef, ew, x in _msg(ev) if ew == 0) if lf == 4 else None
                if e is not None and 2 in e:  # (a timed event: an aggregated one has no offset)
                    first_ps = ts_ps + e[2] if first_ps is None else min(first_ps, ts_ps + e[2])
                    last_ps = max(last_ps, ts_ps + e[2] + e.get(3, 0))
    if first_ps is None:
        raise ValueError("the profile has no timed event")
    plane = _msg(space[host][2])
    md = 1 + max((int(dict((ef, x) for ef, _, x in _msg(v))[1]) for f, _, v in plane if f == 4), default=0)
    start_ns = first_ps // 1000
    events = [(4, 2, _enc([(1, 0, md), (2, 0, t), (3, 0, dur_ns * 1000)]))
              for t in range(0, last_ps - start_ns * 1000, every_ns * 1000)]
    if around is not None:
        events.insert(0, (4, 2, _enc([(1, 0, md + 1), (2, 0, 0), (3, 0, last_ps - start_ns * 1000)])))
    line = [(1, 0, tid), (10, 0, tid), (2, 2, name.encode() + b" thread"), (3, 0, start_ns),
            (9, 0, last_ps - start_ns * 1000), *events]
    at = 1 + max(i for i, (f, _, _) in enumerate(plane) if f == 3)
    plane.insert(at, (3, 2, _enc(line)))
    plane.append((4, 2, _enc([(1, 0, md), (2, 2, _enc([(1, 0, md), (2, 2, name.encode())]))])))
    if around is not None:
        plane.append((4, 2, _enc([(1, 0, md + 1), (2, 2, _enc([(1, 0, md + 1), (2, 2, around.encode())]))])))
    space[host] = (1, 2, _enc(plane))
    return _enc(space)
