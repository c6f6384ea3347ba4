"""A real JAX profile (XSpace protobuf) grown to a chosen size, its bytes kept as recorded (for benchmarks and tests
that need a profile of many lines; :mod:`.replicate` does the same for Kineto traces).

Every line is repeated: the same event bytes under a new line id, the line's start shifted by the profile's span each
time, so the copies follow each other in time. Correlation ids repeat across copies (each copy's kernels link to the
first copy's launches), and the metadata (HLO programs) is not repeated.
"""

from __future__ import annotations

import numpy as np

from ..load.protowire import fields_of, padded, walk
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
