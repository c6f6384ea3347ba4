"""Kineto / Chrome-trace JSON bytes -> columnar event table.

Pipeline: the top-level object is scanned once with msgspec into ``{key: Raw}`` (metadata is
decoded, ``traceEvents`` stays an undecoded slice); the event array is cut into chunks at event
boundaries and each chunk is decoded by typed msgspec Structs that read only the needed fields,
with the GC off, in parallel worker processes for large traces. Workers intern strings and return
numpy arrays; the parent merges symbol tables into polars ``Enum`` columns.
"""

from __future__ import annotations

import gc
import math
import os
import re
import warnings
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import polars as pl

from ..errors import TraceError
from ..model import RawTrace
from .argspec import ARG_FIELDS, EMPTY_ARGS, MISSING_INT, Args
from .timestamps import parse_us_joined


class Event(msgspec.Struct, gc=False):
    """One trace event; only these keys are read, everything else is skipped by the decoder."""

    ph: str = ""
    cat: str | None = None
    name: str | int | float | None = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: msgspec.Raw = msgspec.Raw(b"")  # raw JSON text, parsed exactly to ns in bulk
    dur: msgspec.Raw = msgspec.Raw(b"")
    id: int | str | None = MISSING_INT
    args: Args = EMPTY_ARGS  # type: ignore[valid-type]


_EVENTS = msgspec.json.Decoder(list[Event])
_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")

#: Traces larger than this (bytes of JSON) are decoded by several processes.
PARALLEL_MIN_BYTES = 24 << 20
#: Target size of one decoded chunk; bounds the Python objects alive at once per worker.
CHUNK_BYTES = 16 << 20

STRING_COLUMNS = ("ph", "cat", "name", "pid", "tid")


@contextmanager
def _gc_off() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _intern(values: list[Any]) -> tuple[list[Any], np.ndarray]:
    """Symbol table + int32 codes for a column (C-level loops: dict.fromkeys and map)."""
    table = {v: i for i, v in enumerate(dict.fromkeys(values))}
    codes = np.fromiter(map(table.__getitem__, values), dtype=np.int32, count=len(values))
    return list(table), codes


def _decode_chunk(buf: bytes | bytearray) -> dict[str, Any]:
    """Decode one JSON array of events into plain numpy/list columns (no polars: may run forked)."""
    with _gc_off():
        evs = _EVENTS.decode(buf)
        n = len(evs)
        out: dict[str, Any] = {"n": n}
        for col in STRING_COLUMNS:
            out[col] = _intern(list(map(attrgetter(col), evs)))
        for col in ("ts", "dur"):
            try:
                ns, missing = parse_us_joined(b"\n".join(map(attrgetter(col), evs)), n)
            except ValueError as e:
                where = str(e).split()[1] if str(e).startswith("entry ") else "?"
                raise msgspec.ValidationError(f"'{col}' must be a number - at `$[{where}].{col}`") from None
            out[col] = ns
            out[f"{col}_missing"] = missing
        out["flow_id"] = _pack_ints(evs, "id")
        args = list(map(attrgetter("args"), evs))
        meta_rows = None
        for f in ARG_FIELDS:
            if f.kind in ("int", "intstr"):
                out[f.column] = _pack_ints(args, f.column)
            elif f.kind == "any":  # only metadata events carry these: extract for those rows alone
                if meta_rows is None:
                    m_code = out["ph"][0].index("M") if "M" in out["ph"][0] else -1
                    meta_rows = np.flatnonzero(out["ph"][1] == m_code)
                get = attrgetter(f.column)
                out[f.column] = ("sparse", (meta_rows, [get(args[i]) for i in meta_rows.tolist()]), n)
            else:  # short strings from a small vocabulary: intern (cheap to send back from a worker)
                table, codes = _intern(list(map(attrgetter(f.column), args)))
                out[f.column] = ("intern", table, codes)
        del evs, args
    return out


def _pack_ints(args: list[Any], column: str) -> tuple[str, Any, Any]:
    """An integer args column as an int64 array (C loop); absent values are ``MISSING_INT``.

    Falls back to a list when some value is not an int (e.g. "0x1f" strings, or ints beyond int64).
    """
    get = attrgetter(column)
    try:
        return ("int", np.fromiter(map(get, args), dtype=np.int64, count=len(args)), None)
    except (TypeError, ValueError, OverflowError):
        return ("list", [None if v is None or v == MISSING_INT else v for v in map(get, args)], None)


def _unpack(packed: tuple[str, Any, Any]) -> pl.Series:
    tag, a, extra = packed
    if tag == "int":
        s = pl.Series(values=a, dtype=pl.Int64)
        missing = np.flatnonzero(a == MISSING_INT)
        out: pl.Series = s.scatter(missing, None) if len(missing) else s
        return out
    if tag == "intern":
        out = pl.Series(values=a, dtype=pl.String).gather(pl.Series(extra, dtype=pl.UInt32))
        return out
    if tag == "sparse":
        rows, vals = a
        full: list[Any] = [None] * extra
        for r, v in zip(rows.tolist(), vals):
            full[r] = v
        return pl.Series(values=full, strict=False)
    return pl.Series(values=a, strict=False)


_WORK_BUFFER: memoryview | None = None


def _worker_init(buf: memoryview) -> None:  # runs in forked workers only
    global _WORK_BUFFER
    _WORK_BUFFER = buf


def _worker_decode(span: tuple[int, int]) -> dict[str, Any]:
    assert _WORK_BUFFER is not None
    a, b = span
    buf = bytearray(b"[")
    buf += _WORK_BUFFER[a:b]
    buf += b"]"
    return _decode_chunk(buf)


def _split(body: memoryview, target: int) -> list[tuple[int, int]]:
    """Cut the inside of the event array into spans that each hold whole events."""
    n = len(body)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < n:
        cut = start + target
        if cut >= n:
            spans.append((start, n))
            break
        m = _BOUNDARY.search(body, cut)
        if m is None:
            spans.append((start, n))
            break
        spans.append((start, m.start() + 1))
        start = m.end() - 1
    return spans


def _to_int64(s: pl.Series, path: str, column: str, kind: str) -> pl.Series:
    s = s.rename(column)
    out: pl.Series
    if s.dtype == pl.Null or s.dtype.is_integer():
        out = s.cast(pl.Int64)
        return out
    if s.dtype == pl.String:
        hexed = s.str.starts_with("0x")
        as_hex = s.str.slice(2).str.to_integer(base=16, strict=False)
        as_dec = s.str.to_integer(base=10, strict=False)
        out = pl.select(pl.when(hexed).then(as_hex).otherwise(as_dec)).to_series().rename(column).cast(pl.Int64)
        return out
    if s.dtype.is_float():
        out = s.cast(pl.Int64, strict=False)
        return out
    raise TraceError(path, f"args field for {column!r} has an unexpected type ({s.dtype})")


def _concat(series: list[pl.Series]) -> pl.Series:
    """Concatenate per-chunk columns whose inferred types may differ (int in one, str in another)."""
    if len(series) == 1:
        return series[0]
    dtypes: set[pl.DataType] = {s.dtype for s in series} - {pl.Null()}
    if len(dtypes) > 1:
        series = [_stringify(s) for s in series]
        dtypes = {pl.String()}
    target = dtypes.pop() if dtypes else pl.Null()
    out: pl.Series = pl.concat([s.cast(target) for s in series], rechunk=True)
    return out


def _stringify(s: pl.Series) -> pl.Series:
    if s.dtype in (pl.String, pl.Null) or s.dtype.is_numeric() or s.dtype == pl.Boolean:
        out: pl.Series = s.cast(pl.String)
        return out
    return pl.Series(s.name, [None if v is None else str(v) for v in s.to_list()], dtype=pl.String)


def _assemble(parts: list[dict[str, Any]], path: str) -> pl.DataFrame:
    """Merge chunk outputs: unify symbol tables, concatenate arrays, build typed columns."""
    cols: dict[str, pl.Series] = {}
    for col in STRING_COLUMNS:
        merged: dict[str, int] = {}
        remapped = []
        for p in parts:
            table, codes = p[col]
            keys = ["" if v is None else str(v) for v in table]
            lut = np.fromiter((merged.setdefault(k, len(merged)) for k in keys), dtype=np.uint32, count=len(keys))
            remapped.append(lut[codes] if len(codes) else codes.astype(np.uint32))
        codes_all = np.concatenate(remapped) if remapped else np.zeros(0, np.uint32)
        del remapped
        for p in parts:
            p[col] = None
        dtype = pl.Enum(list(merged))
        cols[col] = pl.Series(col, list(merged), dtype=dtype).gather(pl.Series(codes_all, dtype=pl.UInt32))
    cols["ts"] = pl.Series("ts", np.concatenate([p["ts"] for p in parts]), dtype=pl.Int64)
    cols["dur"] = pl.Series("dur", np.concatenate([p["dur"] for p in parts]), dtype=pl.Int64)
    cols["ts_missing"] = pl.Series("ts_missing", np.concatenate([p["ts_missing"] for p in parts]))
    cols["dur_missing"] = pl.Series("dur_missing", np.concatenate([p["dur_missing"] for p in parts]))
    cols["flow_id"] = _concat([_unpack(p["flow_id"]) for p in parts]).cast(pl.String).rename("flow_id")
    for f in ARG_FIELDS:
        series = _concat([_unpack(p[f.column]) for p in parts])
        for p in parts:
            p[f.column] = None
        if f.kind in ("int", "intstr"):  # both accept "0x1f"/"12" strings and integral floats
            try:
                cols[f.column] = _to_int64(series, path, f.column, f.kind)
            except (OverflowError, pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError) as e:
                raise TraceError(path, f"args field {f.raw!r} has a value that does not fit int64 ({e})") from None
        elif f.kind == "str":
            cols[f.column] = series.cast(pl.String, strict=False).cast(pl.Categorical).rename(f.column)
        else:
            cols[f.column] = _stringify(series).rename(f.column)
    parts.clear()  # the chunk outputs are no longer needed: free them before linking
    return pl.DataFrame(cols)  # every column is contiguous (one chunk): filters, joins and sorts stay fast


def _decode_error(path: str, e: Exception) -> TraceError:
    msg = str(e)
    if "truncated" in msg.lower():
        return TraceError(path, f"truncated JSON ({msg}); the file may have been cut off mid-write, try --salvage")
    if "utf-8" in msg.lower() or isinstance(e, UnicodeDecodeError):
        return TraceError(path, f"invalid UTF-8 in JSON ({msg})")
    if isinstance(e, msgspec.ValidationError):
        return TraceError(path, f"malformed event field: {msg.replace('$[', '$.traceEvents[')}")
    return TraceError(path, f"not valid JSON ({msg})")


def decode_events(body: memoryview, path: str, *, workers: int | None = None) -> pl.DataFrame:
    """Decode the *inside* of a ``traceEvents`` array (without brackets) into an event table."""
    size = len(body)
    if workers is None:
        workers = min(os.cpu_count() or 1, 8)
    parts: list[dict[str, Any]] | None = None
    spans = _split(body, max(CHUNK_BYTES, math.ceil(size / (max(workers, 1) * 64)))) if size >= PARALLEL_MIN_BYTES else [(0, size)]
    if workers > 1 and len(spans) > 1:
        try:
            ctx = get_context("fork")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                with ProcessPoolExecutor(
                    max_workers=min(workers, len(spans)), mp_context=ctx, initializer=_worker_init, initargs=(body,)
                ) as ex:
                    parts = list(ex.map(_worker_decode, spans))
        except (msgspec.DecodeError, msgspec.ValidationError, OverflowError, UnicodeDecodeError):
            parts = None  # a cut landed inside a string, or bad data: redo serially for an exact message
    elif len(spans) > 1:  # one process, still chunk by chunk: bounded memory, cache-friendly
        try:
            parts = []
            for a, b in spans:
                buf = bytearray(b"[")
                buf += body[a:b]
                buf += b"]"
                parts.append(_decode_chunk(buf))
        except (msgspec.DecodeError, msgspec.ValidationError, OverflowError, UnicodeDecodeError):
            parts = None
    if parts is None:
        try:
            parts = [_decode_chunk(b"[" + bytes(body) + b"]")]
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
            raise _decode_error(path, e) from None
        except OverflowError as e:
            raise TraceError(path, str(e)) from None
    return _assemble(parts, path)


def _strip(mv: memoryview) -> memoryview:
    """Strip JSON whitespace from both ends of a memoryview without copying it."""
    lead = 0
    n = len(mv)
    while lead < n:
        chunk = bytes(mv[lead : lead + 4096])
        k = len(chunk) - len(chunk.lstrip())
        lead += k
        if k < len(chunk):
            break
    trail = n
    while trail > lead:
        chunk = bytes(mv[max(lead, trail - 4096) : trail])
        k = len(chunk) - len(chunk.rstrip())
        trail -= k
        if k < len(chunk):
            break
    return mv[lead:trail]


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')


def _fast_split(data: Any) -> tuple[memoryview, dict[str, Any]] | None:
    """Locate the event array and decode the metadata around it without scanning the events.

    Works for the usual layout (``traceEvents`` followed by scalar/array/object keys). Returns None
    when unsure; the caller then scans the whole document. The events themselves are validated by
    the chunk decoders.
    """
    mv = memoryview(data)
    head_probe = bytes(mv[: 1 << 22])
    m = _EVENTS_KEY.search(head_probe)
    if m is None:
        return None
    head = head_probe[: m.start()].rstrip()
    try:
        meta = _TOP.decode(head.rstrip(b",") + b"}") if head.startswith(b"{") else None
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if meta is None:
        return None
    tail_start = max(m.end(), len(mv) - (1 << 20))
    tail = bytes(mv[tail_start:])
    pos = len(tail)
    for _ in range(64):  # try closing brackets from the end
        pos = tail.rfind(b"]", 0, pos)
        if pos < 0:
            return None
        rest = tail[pos + 1 :].strip()
        if rest == b"}":
            extra: dict[str, Any] = {}
        elif rest.startswith(b","):
            try:
                extra = _TOP.decode(b"{" + rest[1:])
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
        else:
            continue
        out = {}
        for k, raw in {**meta, **extra}.items():
            try:
                out[k] = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                return None
        return _strip(mv[m.end() : tail_start + pos]), out
    return None


def parse_document(data: Any, path: str, *, workers: int | None = None) -> RawTrace:
    """Parse a whole Kineto/Chrome JSON document (object with ``traceEvents``, or a bare array)."""
    head = bytes(memoryview(data)[:4096]).lstrip()[:1]
    if head == b"[":
        body = _strip(memoryview(data))
        return RawTrace(decode_events(_strip(body[1:-1]), path, workers=workers), {})
    if head != b"{":
        raise TraceError(path, "not JSON: expected a JSON object with 'traceEvents' (or an event array)")
    fast = _fast_split(data) if len(data) >= PARALLEL_MIN_BYTES else None
    if fast is not None:
        try:
            return RawTrace(decode_events(fast[0], path, workers=workers), fast[1])
        except TraceError:
            pass  # let the full scan produce the precise message
    try:
        with _gc_off():
            top = _TOP.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
        raise _decode_error(path, e) from None
    if "traceEvents" not in top:
        raise TraceError(path, "JSON object has no 'traceEvents' key: not a PyTorch/Kineto trace")
    meta: dict[str, Any] = {}
    for k, raw in top.items():
        if k == "traceEvents":
            continue
        try:
            meta[k] = msgspec.json.decode(raw)
        except msgspec.DecodeError as e:
            raise _decode_error(path, e) from None
    ev = _strip(memoryview(top["traceEvents"]))
    if bytes(ev[:1]) != b"[":
        raise TraceError(path, "'traceEvents' is not an array")
    return RawTrace(decode_events(_strip(ev[1:-1]), path, workers=workers), meta)
