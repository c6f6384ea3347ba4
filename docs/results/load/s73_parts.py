"""Session 73: what a quarter of a real JAX profile costs, cut from the profile itself (not a shorter recording).

    python docs/results/load/s73_parts.py PROFILE.xplane.pb OUT_DIR [--parts 4] [--rounds 3] [--reuse]

Writes PARTS profiles: each holds every plane, line header and metadata of PROFILE, and of each line the events
that start in its part of the profile's time (cut at the step starts nearest the quantiles of the GPU rows' starts,
so that a part holds whole steps as the host annotated them). Then runs cold ``kernscope analyze --no-cache --format
json`` on the whole profile and on each part, interleaved, and prints wall time and peak RSS (/usr/bin/time).
``--reuse``: time the parts OUT_DIR already holds (none written).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

import kernscope
from kernscope.load.protowire import Fields, fields_of, padded, walk
from kernscope.load.protowire import varint_bytes as _varint


def _field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _rows(f: Fields) -> zip:
    return zip(f.field.tolist(), f.wire.tolist(), f.value.tolist(), f.off.tolist(), f.size.tolist())


def _copy(data: bytes, num: int, wire: int, value: int, off: int, size: int) -> bytes:
    """A field as it was: its tag and its varint value or length-prefixed payload."""
    return _varint(num << 3 | wire) + (_varint(size) + data[off:off + size] if wire == 2 else _varint(int(value)))


def _to_all(outs: list[bytearray], field: bytes) -> None:
    for out in outs:
        out += field


def split(data: bytes, cuts_ps: list[int]) -> list[bytes]:
    """The profile cut at the times ``cuts_ps`` (ascending; ps as the decode reads an event's start: its line's
    timestamp_ns * 1000 + its offset_ps): len(cuts_ps) + 1 profiles."""
    buf = padded(data)
    space = walk(buf, 0, len(data))
    k = len(cuts_ps) + 1
    outs = [bytearray() for _ in range(k)]
    for f, w, v, o, s in _rows(space):
        if f != 1:  # (the space's own fields: into every part)
            _to_all(outs, _copy(data, f, w, v, o, s))
            continue
        pf = walk(buf, o, o + s, runs=(4, 5, 6))
        planes = [bytearray() for _ in range(k)]
        for pfn, pw, pv, po, ps in _rows(pf):
            if pfn != 3:  # (a plane's fields but its lines: its metadata, into every part)
                _to_all(planes, _copy(data, pfn, pw, pv, po, ps))
                continue
            lf = walk(buf, po, po + ps, runs=(4,))
            head = b"".join(_copy(data, *r) for r in _rows(lf) if r[0] != 4)
            ts_ns = int(lf.value[lf.field == 3][0]) if (lf.field == 3).any() else 0
            ev = lf.select(lf.field == 4)
            part = np.zeros(len(ev.off), dtype=np.int64)
            if len(ev.off):
                ef = fields_of(buf, ev.off, ev.off + ev.size)
                off = np.zeros(len(ev.off), dtype=np.int64)
                at = ef.select(ef.field == 2)
                off[at.msg] = at.value.view(np.int64)
                part = np.searchsorted(np.asarray(cuts_ps, dtype=np.int64), ts_ns * 1000 + off, side="right")
            starts = (ev.off - 1 - np.array([len(_varint(int(x))) for x in ev.size.tolist()], dtype=np.int64)
                      if len(ev.off) else ev.off)
            for p in range(k):
                line = bytearray(head)  # (the line's header fields before its events)
                for a, b in zip(starts[part == p].tolist(), (ev.off + ev.size)[part == p].tolist()):
                    line += data[a:b]
                planes[p] += _field(3, bytes(line))
        for out, plane in zip(outs, planes):
            out += _field(1, bytes(plane))
    return [bytes(o) for o in outs]


def cuts_for(path: str, parts: int) -> list[int]:
    """Step starts (ps) nearest the quantiles of the GPU rows' starts."""
    t = kernscope.load(path, cache=False, projection="analyze")
    gpu_ts = np.sort(t.gpu["ts"].to_numpy())
    starts = np.sort(t.steps["start"].to_numpy())
    out = []
    for q in range(1, parts):
        want = gpu_ts[len(gpu_ts) * q // parts]
        out.append(int(starts[np.argmin(np.abs(starts - want))]))
    # (the decode's ns are each line's timestamp_ns plus its events' offset_ps / 1000: the cuts in the same frame)
    return [c * 1000 for c in out]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("out")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reuse", action="store_true", help="time the parts OUT_DIR already holds")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / f"part{i}.xplane.pb" for i in range(a.parts)]
    if not a.reuse:
        data = Path(a.profile).read_bytes()
        for f, part in zip(files, split(data, cuts_for(a.profile, a.parts))):
            f.write_bytes(part)
            print(f"{f}: {len(part):,} bytes", flush=True)
    for r in range(a.rounds):
        for f in [Path(a.profile), *files]:
            p = subprocess.run(["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "kernscope", "analyze", str(f),
                                "--no-cache", "--format", "json", "-o", str(out / (f.stem + ".json"))],
                               capture_output=True, text=True)
            wall, kb = p.stderr.strip().splitlines()[-1].split()
            print(f"round {r} {f.name:28s} {float(wall):5.2f} s {int(kb) / 1024:6.0f} MiB rc={p.returncode}", flush=True)


if __name__ == "__main__":
    main()
