"""The parse route (#25): candidate readers of Kineto event text, side by side on the same pieces of a real
trace, one core each, and what an unread event costs.

    python benchmarks/bench_readers.py TRACE.json [--pieces 12] [--rounds 3]

TRACE: a Kineto JSON (a replica from ``bench_load.py --keep``). The first ``--pieces`` 8 MB pieces (event-
aligned) are read by each candidate into the columns the default analysis reads (ph, cat, name, pid, tid,
ts, dur, id and the link args); the best of ``--rounds`` is reported in MB/s of JSON per core:

- ``kernscope C scanner``: ``load/fastscan.scan`` (the piece's event table, analyze projection applied);
- ``polars line reader``: today's fallback, ``load/lines.to_lines`` + ``chunk.parse_lines`` (the same table);
- ``pyarrow read_json``: pyarrow's NDJSON reader with an explicit schema (on the lines ``to_lines`` makes,
  conversion not counted), to an Arrow table (times as float µs, strings not interned);
- ``msgspec structs``: ``msgspec.json.decode`` into typed structs (a Python object per event), then columns;
- ``fastsimdjson fields``: ``fastsimdjson.loads_many(lines, fields=[...])`` (a tuple per event), then columns;
- ``pysimdjson``: ``simdjson.Parser`` over the array, walking every event (a Python object per event).

Packages that are not installed are skipped (``pip install fastsimdjson pysimdjson``). Then the cost of an
unread event: the scanner's time on a text of only ``python_function`` events (the analysis drops them) and
on one of only ``cpu_op`` events (it reads them), per event: ``fastscan.scan`` whole (the piece's table made,
the events of names judged in earlier pieces dropped by the scanner) and the compiled scanner alone (its call
on each piece, the projection's drops given). ``--unread-only`` measures only that; the two groups alternate
in each round.
"""

from __future__ import annotations

import argparse
import io
import re
import time
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.json as paj

from kernscope.analyze.needs import analyze_projection
from kernscope.load import fastscan
from kernscope.load.chunk import parse_lines
from kernscope.load.lines import to_lines

PIECE = 8 << 20
ARGS = {"correlation": pa.int64(), "External id": pa.int64(), "device": pa.int64(), "stream": pa.int64()}
POINTERS = ["/ph", "/cat", "/name", "/pid", "/tid", "/ts", "/dur", "/id", *(f"/args/{k}" for k in ARGS)]


def split(text: bytes, pos: int = 0, n: int | None = None) -> list[bytes]:
    """``text`` (a run of events from ``pos``) in event-aligned pieces of about PIECE bytes (at most ``n``)."""
    out: list[bytes] = []
    while pos < len(text) and (n is None or len(out) < n):
        while pos < len(text) and text[pos] in b" \n\r\t,":
            pos += 1
        cut = text.find(b"},\n  {", pos + PIECE)
        if cut < 0:
            if n is None:  # the whole text was asked for: its last piece too
                out.append(text[pos:])
            break
        out.append(text[pos : cut + 1])
        pos = cut + 3
    return out


def pieces(path: str, n: int) -> list[bytes]:
    data = open(path, "rb").read()
    return split(data, data.index(b"[", data.index(b'"traceEvents"')) + 1, n)


class Ev(msgspec.Struct, gc=False):
    ph: str | None = None
    cat: str | None = None
    name: str | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: float | None = None
    dur: float | None = None
    id: int | str | None = None
    args: dict[str, Any] | None = None


def candidates() -> dict[str, Callable[[bytes], int]]:
    proj = analyze_projection(None)
    keep = proj.compiled()
    out: dict[str, Callable[[bytes], int]] = {}

    def c_scanner(p: bytes) -> int:
        return _scan_count(p, proj, keep)

    def polars_lines(p: bytes) -> int:
        nd = to_lines(p, None, None)
        assert nd is not None
        df, _ = parse_lines(nd.text, nd.lines, proj.args, None, nd.longest, nd.meta)
        return df.height

    # pid/tid/id as integers: pyarrow refuses a number in a string column (a trace where some are strings,
    # ROCm's or "Spans", fails here: one more reason it is not our route)
    schema = pa.schema([("ph", pa.string()), ("cat", pa.string()), ("name", pa.string()), ("pid", pa.int64()),
                        ("tid", pa.int64()), ("ts", pa.float64()), ("dur", pa.float64()), ("id", pa.int64()),
                        ("args", pa.struct([(k, t) for k, t in ARGS.items()]))])
    opts = paj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    ropts = paj.ReadOptions(use_threads=False, block_size=PIECE + (1 << 20))

    def pyarrow_json(lines: bytes) -> int:
        return paj.read_json(io.BytesIO(lines), read_options=ropts, parse_options=opts).num_rows

    dec = msgspec.json.Decoder(list[Ev])

    def msgspec_structs(p: bytes) -> int:
        evs = dec.decode(b"[" + p + b"]")
        cols = {f: [getattr(e, f) for e in evs] for f in ("ph", "cat", "name", "ts", "dur")}
        return pl.DataFrame({k: pl.Series(v, strict=False) for k, v in cols.items()}).height

    out["kernscope C scanner"] = c_scanner
    out["polars line reader"] = polars_lines
    out["pyarrow read_json (NDJSON)"] = pyarrow_json
    out["msgspec structs"] = msgspec_structs
    try:
        import fastsimdjson

        def fast_fields(lines: bytes) -> int:
            rows = fastsimdjson.loads_many(lines, fields=POINTERS)
            cols = list(zip(*rows))
            return pl.DataFrame({p.strip("/"): pl.Series(c, dtype=pl.String if p in ("/pid", "/tid", "/id") else None, strict=False)
                                 for p, c in zip(POINTERS, cols)}).height

        out["fastsimdjson fields (NDJSON)"] = fast_fields
    except ImportError:
        pass
    try:
        import simdjson

        parser = simdjson.Parser()

        def pysimd(p: bytes) -> int:
            doc = parser.parse(b"[" + p + b"]")
            rows = [(e.get("ph"), e.get("cat"), e.get("name"), e.get("ts"), e.get("dur")) for e in doc]
            del doc
            return len(rows)

        out["pysimdjson (walk)"] = pysimd
    except ImportError:
        pass
    return out


def best(f: Callable[[bytes], int], texts: list[bytes], rounds: int) -> tuple[float, int]:
    t_best, n = float("inf"), 0
    for _ in range(rounds):
        t = time.perf_counter()
        n = sum(f(p) for p in texts)
        t_best = min(t_best, time.perf_counter() - t)
    return t_best, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--pieces", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--unread-only", action="store_true", help="only what an unread event costs")
    a = ap.parse_args()
    ps = pieces(a.trace, a.pieces)
    mb = sum(len(p) for p in ps) / 1e6
    if a.unread_only:
        unread(ps, a.rounds)
        return
    nd = []
    for p in ps:
        lines = to_lines(p, None, None)
        assert lines is not None
        nd.append(lines.text)
    print(f"{len(ps)} pieces, {mb:.1f} MB of {a.trace}; one core each (best of {a.rounds})")
    for name, f in candidates().items():
        texts = nd if "NDJSON" in name else ps
        try:
            t, n = best(f, texts, a.rounds)
        except Exception as e:  # noqa: BLE001 - a candidate that cannot read this trace says why
            print(f"  {name:30s} fails: {type(e).__name__}: {str(e)[:100]}")
            continue
        print(f"  {name:30s} {t:7.3f} s  {mb / t:7.1f} MB/s  {n:,} events")
    unread(ps, a.rounds)


def unread(ps: list[bytes], rounds: int) -> None:
    """What an unread event costs: the scanner on only python_function events, and on only cpu_op events."""
    joined = b",\n  ".join(ps)
    starts = [m.start() for m in re.finditer(rb"\{\n    \"ph\": ", joined)]
    ends = starts[1:] + [len(joined)]
    evs = [joined[s:e].rstrip().rstrip(b",") for s, e in zip(starts, ends)]
    py = [e for e in evs if b'"cat": "python_function"' in e[:60]]
    op = [e for e in evs if b'"cat": "cpu_op"' in e[:60]]
    proj = analyze_projection(None)
    keep = proj.compiled()
    groups = {label: (group, split(b",\n  ".join(group))) for label, group in
              (("python_function (dropped)", py), ("cpu_op (read)", op)) if group}
    for _, text_pieces in groups.values():  # the names judged, as in a load's later pieces
        for p in text_pieces:
            _scan_count(p, proj, keep)
    whole = {label: float("inf") for label in groups}
    alone = dict(whole)
    drops = fastscan._Drops.of(proj, keep)
    lay = fastscan._layout(proj.args)
    lib = fastscan.scanner()
    for _ in range(rounds):
        for label, (group, text_pieces) in groups.items():
            t, n = best(lambda p: _scan_count(p, proj, keep), text_pieces, 1)
            assert n == len(group)
            whole[label] = min(whole[label], t)
            bufs = [np.frombuffer(p, dtype=np.uint8) for p in text_pieces]
            t0 = time.perf_counter()
            for b in bufs:
                assert fastscan._run(lib, b, lay, len(group) + 64, drops=drops)[0] >= 0
            alone[label] = min(alone[label], time.perf_counter() - t0)
    for label, (group, text_pieces) in groups.items():
        size = sum(len(x) for x in text_pieces)
        print(f"  unread-event cost: {label:26s} {len(group):,} events, {size / len(group):.0f} bytes each, "
              f"{whole[label] / len(group) * 1e9:.0f} ns an event (the scanner alone {alone[label] / len(group) * 1e9:.0f} ns)")
    if len(groups) == 2:
        (py_label, op_label) = groups
        print(f"  dropped / read: {whole[py_label] / len(groups[py_label][0]) / (whole[op_label] / len(groups[op_label][0])):.3f} "
              f"(the scanner alone {alone[py_label] / len(groups[py_label][0]) / (alone[op_label] / len(groups[op_label][0])):.3f})")


def _scan_count(p: bytes, proj: Any, keep: Any) -> int:
    """Events in ``p`` (read or dropped) by the scanner."""
    got = fastscan.scan(p, proj.args, proj, keep)
    assert got is not None, "the scanner declined a piece"
    return got.table.height + got.dropped


if __name__ == "__main__":
    main()
