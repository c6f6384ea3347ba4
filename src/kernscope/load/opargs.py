"""Event arguments read on first use: ``Input Dims``, ``Input type``, ``Concrete Inputs`` of chosen ops, the
sizes of ``[memory]`` events, kernels' grids and the hardware counters of CUPTI's profiler ranges.

The main parse skips these (they are large and most analyses never read them). The perf model asks for
the ops it needs by event index; the file is read again, each piece is cut into its events by
structure (no full decode), and only the wanted events' args are decoded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec
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


def read_op_args(path: str | os.PathLike[str], wanted: Iterable[int]) -> pl.DataFrame:
    """``idx, input_dims, input_type, concrete_inputs, input_strides`` (JSON text) of the events at ``wanted`` indices.

    Each piece of the event array is decoded by msgspec into structs that keep only these four raw
    values (everything else is skipped unbuilt, at several hundred MB/s); only wanted events' values
    are turned into strings.
    """
    rows = _read_args(path, wanted, _Event, lambda i, a: (i, _text(a.input_dims), _text(a.input_type), _text(a.concrete),
                                                          _text(a.input_strides)))
    return pl.DataFrame(rows, schema=SCHEMA, orient="row")


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


def _text(raw: Any) -> str | None:
    b = bytes(raw)
    return b.decode() if b else None
