"""Event arguments read on first use: ``Input Dims``, ``Input type``, ``Concrete Inputs`` of chosen ops, the
sizes of ``[memory]`` events, kernels' grids and the hardware counters of CUPTI's profiler ranges.

The main parse skips these (they are large and most analyses never read them). The perf model asks for
the ops it needs by event index, and the file is read again: the op shapes by the compiled scanner, each value
kept as its JSON text (:func:`read_op_args`); the others, and the shapes where the scanner is not built or
declines, by msgspec, each piece decoded into structs that build only the args wanted.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import msgspec
import numpy as np
import polars as pl

from ..errors import TraceError
from .document import NeedsWholeDocument, Piece, Splitter, reader_chunk_bytes, tail_candidates
from .source import Limits, open_trace
from .structure import top_level_objects


class _OpArgs(msgspec.Struct, gc=False):
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input type")
    concrete: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Concrete Inputs")
    input_strides: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Strides")


class _Event(msgspec.Struct, gc=False):
    args: _OpArgs | None = None


class _MemArgs(msgspec.Struct, gc=False):
    """``[memory]`` instant events (``profile_memory=True``): sizes in bytes, after the event."""

    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")
    bytes: int | None = msgspec.field(default=None, name="Bytes")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    addr: int | None = msgspec.field(default=None, name="Addr")


class _MemEvent(msgspec.Struct, gc=False):
    args: _MemArgs | None = None


class _KernelArgs(msgspec.Struct, gc=False):
    """A kernel's launch shape: ``grid`` and ``block`` (Kineto writes ``[x, y, z]``)."""

    grid: list[int] | None = None
    block: list[int] | None = None


class _KernelEvent(msgspec.Struct, gc=False):
    args: _KernelArgs | None = None


SCHEMA = {"idx": pl.Int64, "input_dims": pl.String, "input_type": pl.String, "concrete_inputs": pl.String,
          "input_strides": pl.String}
MEMORY_SCHEMA = {"idx": pl.Int64, "total_allocated": pl.Int64, "total_reserved": pl.Int64, "bytes": pl.Int64,
                 "device": pl.Int64, "device_type": pl.Int64, "addr": pl.Int64}

#: merges of a piece with the next before giving up (a cut inside a string, as in the main parse)
_MAX_MERGES = 8


#: the op args :func:`read_op_args` reads, as (args key, column of :data:`SCHEMA`)
OP_TEXTS = (("Input Dims", "input_dims"), ("Input type", "input_type"), ("Concrete Inputs", "concrete_inputs"),
            ("Input Strides", "input_strides"))


def read_op_args(path: str | os.PathLike[str], wanted: Iterable[int]) -> pl.DataFrame:
    """``idx, input_dims, input_type, concrete_inputs, input_strides`` (JSON text, as the file writes it) of the
    events at ``wanted`` indices that have any of them.

    The compiled scanner reads the pieces of the event array on two threads, the four values as their text
    (:func:`.fastscan.scan`'s ``texts``: 4-5x msgspec's rate on a 206 MB trace with shapes). Where it is not built, or
    declines a piece, msgspec decodes every piece into structs that keep only these four raw values (everything else
    is skipped unbuilt, at several hundred MB/s), and only wanted events' values are turned into strings: the same
    table.
    """
    want = np.unique(np.fromiter((int(i) for i in wanted), dtype=np.int64))
    scanned = _scanned_texts(path, want, OP_TEXTS) if len(want) else None
    if scanned is not None:
        return scanned
    rows = _read_args(path, want.tolist(), _Event, lambda i, a: (i, _text(a.input_dims), _text(a.input_type),
                                                                 _text(a.concrete), _text(a.input_strides)))
    df = pl.DataFrame(rows, schema=SCHEMA, orient="row")
    return df.filter(pl.any_horizontal(pl.exclude("idx").is_not_null())) if df.height else df


def _scanned_texts(path: str | os.PathLike[str], want: np.ndarray, texts: tuple[tuple[str, str], ...]) -> pl.DataFrame | None:
    """``idx`` and the ``texts`` columns of the events at indices ``want`` (sorted, distinct) with any of them, read by
    the compiled scanner; None where it is not built or declines a piece (then :func:`_read_args` reads the file)."""
    from .fastscan import available, scan
    from .kineto import piece_bytes

    if not available():
        return None
    columns = [c for _, c in texts]
    schema = {"idx": pl.Int64, **{c: pl.String for c in columns}}
    source = open_trace(path)
    parts: list[pl.DataFrame] = []
    try:
        splitter = Splitter(source, Limits(), chunk_bytes=piece_bytes())
        bare = splitter.doc.bare_array

        def one(piece: Piece) -> pl.DataFrame | None:  # (the scanner releases the GIL: two pieces at once)
            if not piece.final:
                got = scan(piece.text, (), texts=texts, only_texts=True)
                return None if got is None else got.table
            for pos, _tail in tail_candidates(piece.text, bare, str(path)):
                head = bytes(piece.text[:pos]).rstrip()
                if not head.strip():
                    return pl.DataFrame(schema=schema)
                got = scan(head, (), texts=texts, only_texts=True)
                if got is not None:
                    return got.table
            return None

        before = 0
        with ThreadPoolExecutor(2, thread_name_prefix="kernscope-opargs") as pool:
            window: deque[tuple[Piece, Future[pl.DataFrame | None]]] = deque()
            pieces = splitter.pieces()
            for piece in pieces:
                window.append((piece, pool.submit(one, piece)))
                if len(window) < 3:
                    continue
                before = _take(window.popleft(), before, want, columns, parts, splitter, source)
                if before < 0:
                    return None
                if before > want[-1]:  # every event wanted is read: not the rest of the file
                    break
            while window and before <= want[-1]:
                before = _take(window.popleft(), before, want, columns, parts, splitter, source)
                if before < 0:
                    return None
    except NeedsWholeDocument:
        return None
    finally:
        source.close()
    out = pl.concat(parts, how="vertical") if parts else pl.DataFrame(schema=schema)
    return out.filter(pl.any_horizontal(pl.col(columns).is_not_null())) if out.height else out


def read_memory_args(path: str | os.PathLike[str], wanted: Iterable[int]) -> pl.DataFrame:
    """``idx, total_allocated, total_reserved, bytes, device, device_type, addr`` of the ``[memory]`` events at
    ``wanted`` indices (bytes; Kineto's Device Type: 0 CPU, 1 CUDA)."""
    rows = _read_args(path, wanted, _MemEvent, lambda i, a: (i, a.total_allocated, a.total_reserved, a.bytes,
                                                             a.device_id, a.device_type, a.addr))
    return pl.DataFrame(rows, schema=MEMORY_SCHEMA, orient="row")


class _CounterEvent(msgspec.Struct, gc=False):
    """A ``cuda_profiler_range`` event (CUPTI's range profiler): its args are the counters' values."""

    args: dict[str, Any] | None = None


def read_counter_args(path: str | os.PathLike[str], wanted: Iterable[int]) -> dict[int, dict[str, float]]:
    """The numeric args (hardware counters: ``dram__bytes_read.sum`` → bytes) of the events at ``wanted`` indices,
    by index; an arg that is not a finite number is left out."""
    def numbers(i: int, a: dict[str, Any]) -> tuple[int, dict[str, float]]:
        return i, {k: float(v) for k, v in a.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(float(v)) < float("inf")}

    return dict(_read_args(path, wanted, _CounterEvent, numbers))


KERNEL_SCHEMA = {"idx": pl.Int64, "grid_x": pl.Int64, "grid_y": pl.Int64, "grid_z": pl.Int64, "block_x": pl.Int64,
                 "block_y": pl.Int64, "block_z": pl.Int64}


def _xyz(v: list[int] | None) -> tuple[int | None, int | None, int | None]:
    if not v:
        return None, None, None
    w = [int(x) if isinstance(x, int) and 0 <= x < 1 << 31 else None for x in v[:3]] + [1, 1]
    return w[0], w[1], w[2]


def read_kernel_args(path: str | os.PathLike[str], wanted: Iterable[int]) -> pl.DataFrame:
    """``idx, grid_x/y/z, block_x/y/z`` of the kernel events at ``wanted`` indices (Kineto's ``grid`` and
    ``block`` args; null where the event has none, or a value outside [0, 2^31))."""
    rows = _read_args(path, wanted, _KernelEvent, lambda i, a: (i, *_xyz(a.grid), *_xyz(a.block)))
    return pl.DataFrame(rows, schema=KERNEL_SCHEMA, orient="row")


def _read_args(path: str | os.PathLike[str], wanted: Iterable[int], event: type[Any],
               row: Callable[[int, Any], tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """``row(idx, args)`` for the wanted events that have args: the file is read again piece by piece, each piece
    decoded into ``event`` structs (only their ``args`` fields are built)."""
    want = sorted(set(int(i) for i in wanted))
    if not want:
        return []
    decoders = (msgspec.json.Decoder(list[event]), msgspec.json.Decoder(event))  # type: ignore[valid-type]
    source = open_trace(path)
    rows: list[tuple[Any, ...]] = []
    try:
        splitter = Splitter(source, Limits(), chunk_bytes=reader_chunk_bytes())  # msgspec structs: the readers' pieces
        pieces = splitter.pieces()
        before = 0
        j = 0
        try:
            for piece in pieces:
                events, piece = _decode_piece(piece, pieces, splitter.doc.bare_array, str(path), decoders, event)
                end = before + len(events)
                while j < len(want) and want[j] < end:
                    args = events[want[j] - before].args
                    if args is not None:
                        rows.append(row(want[j], args))
                    j += 1
                before = end
                read_to = piece.offset + len(piece.text)
                splitter.recycle(piece)  # (its events are decoded: a streamed piece's buffer serves the next)
                # (a plain file's pages read so far leave the process, as in the main parse: else the whole file
                # counted in its memory at the end, +0.2 GB at the peak of perf of a 206 MB trace)
                source.release(read_to)
                if j >= len(want):
                    break
        except NeedsWholeDocument:
            raise TraceError(str(path), "cannot read event arguments from this document layout") from None
    finally:
        source.close()
    return rows


def _decode_piece(piece: Piece, rest: Iterator[Piece], bare: bool, path: str, decoders: tuple[Any, Any],
                  event: type[Any]) -> tuple[list[Any], Piece]:
    many, one = decoders
    for _ in range(_MAX_MERGES + 1):
        if piece.final:
            for pos, _tail in tail_candidates(piece.text, bare, path):
                head = bytes(piece.text[:pos]).rstrip()
                try:
                    return (many.decode(b"[" + head + b"]") if head.strip() else []), piece
                except (msgspec.DecodeError, msgspec.ValidationError):
                    continue
            break
        try:
            return many.decode(b"".join((b"[", piece.text, b"]"))), piece
        except (msgspec.DecodeError, msgspec.ValidationError):
            nxt = next(rest, None)
            if nxt is None:
                break
            piece = Piece(bytes(piece.text) + piece.sep + bytes(nxt.text), piece.offset, nxt.sep, nxt.final)
    # not valid JSON as a whole (a damaged file read with --salvage): find the objects by structure
    text = bytes(piece.text)
    if piece.final:
        cut = next((pos for pos, _ in tail_candidates(text, bare, path)), len(text))
        text = text[:cut]
    spans, _ = top_level_objects(text)
    out = []
    for a, b in spans:
        try:
            out.append(one.decode(text[a:b]))
        except (msgspec.DecodeError, msgspec.ValidationError):
            out.append(event())
    return out, piece


def _take(item: tuple[Piece, Future[pl.DataFrame | None]], before: int, want: np.ndarray, columns: list[str],
          parts: list[pl.DataFrame], splitter: Splitter, source: Any) -> int:
    """The wanted rows of one scanned piece (its events ``before``.. in the file) into ``parts``; the index of the
    next piece's first event, or -1 where the scanner declined the piece."""
    piece, fut = item
    table = fut.result()
    if table is None:
        return -1
    n = table.height
    lo, hi = np.searchsorted(want, [before, before + n])
    if hi > lo:
        rows = pl.Series(want[lo:hi] - before)
        parts.append(pl.DataFrame([pl.Series("idx", want[lo:hi]), *[table[c].gather(rows) for c in columns]]))
    read_to = piece.offset + len(piece.text)
    splitter.recycle(piece)  # (its events are read: a streamed piece's buffer serves the next)
    source.release(read_to)
    return before + n


def _text(raw: Any) -> str | None:
    b = bytes(raw)
    return b.decode() if b else None
