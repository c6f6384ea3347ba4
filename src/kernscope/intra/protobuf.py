"""A minimal protobuf wire-format encoder (vectorized with numpy) and decoder.

kernscope writes Perfetto traces itself: no ``protobuf`` runtime, no tg4perfetto. Rows of
packets that share one shape are encoded together: every field is a column (a constant byte
string or an array of varints / nested messages), so a million packets cost a few numpy passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

WT_VARINT = 0
WT_I64 = 1
WT_LEN = 2


def tag(field: int, wire_type: int) -> bytes:
    return varint_bytes((field << 3) | wire_type)


def varint_bytes(v: int) -> bytes:
    v = int(v)
    if v < 0:
        v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(field: int, v: int) -> bytes:
    return tag(field, WT_VARINT) + varint_bytes(v)


def field_bytes(field: int, payload: bytes) -> bytes:
    return tag(field, WT_LEN) + varint_bytes(len(payload)) + payload


def field_string(field: int, s: str) -> bytes:
    return field_bytes(field, s.encode())


# -- vectorized rows ------------------------------------------------------------------------------
@dataclass
class Rows:
    """``n`` encoded byte strings as a padded matrix: row i is ``mat[i][mask[i]]``.

    Keeping rows padded makes concatenation a horizontal stack; one boolean gather at the end
    (``tobytes``) lays every row out back to back, in order.
    """

    mat: np.ndarray  # uint8 (n, w)
    mask: np.ndarray  # bool (n, w)
    lens: np.ndarray | None = None  # per-row byte counts, when known

    @property
    def n(self) -> int:
        return self.mat.shape[0]

    @property
    def lengths(self) -> np.ndarray:
        if self.lens is None:
            self.lens = self.mask.sum(axis=1, dtype=np.int64)
        return self.lens

    def tobytes(self) -> bytes:
        return self.mat[self.mask].tobytes()

    def keep(self, rows: np.ndarray) -> "Rows":
        """Empty the rows where ``rows`` is False."""
        return Rows(self.mat, self.mask & rows[:, None], np.where(rows, self.lengths, 0))


Column = bytes | Rows


def varints(values: np.ndarray) -> Rows:
    """Varint-encode every value of a uint64/int64 array (negative -> two's complement, 10 bytes)."""
    v = np.asarray(values).astype(np.uint64)
    n = len(v)
    nbytes = np.ones(n, dtype=np.int64)
    x = v >> np.uint64(7)
    while x.any():
        nbytes += x != 0
        x = x >> np.uint64(7)
    width = int(nbytes.max()) if n else 1
    shifts = (np.arange(width, dtype=np.uint64) * np.uint64(7))[None, :]
    groups = ((v[:, None] >> shifts) & np.uint64(0x7F)).astype(np.uint8)
    cont = np.arange(width)[None, :] < (nbytes[:, None] - 1)
    groups |= cont.astype(np.uint8) << np.uint8(7)
    return Rows(groups, np.arange(width)[None, :] < nbytes[:, None], nbytes)


def const_rows(data: bytes, keep: np.ndarray) -> Rows:
    """The constant ``data`` on rows where ``keep`` is True, nothing elsewhere."""
    n, k = len(keep), len(data)
    mat = np.broadcast_to(np.frombuffer(data, dtype=np.uint8), (n, k))
    return Rows(mat, np.broadcast_to(keep[:, None], (n, k)), np.where(keep, k, 0))


def concat_rows(n: int, columns: list[Column]) -> Rows:
    """Row-wise concatenation of columns (constants repeat on every row)."""
    mats, masks = [], []
    for c in columns:
        if isinstance(c, bytes):
            if not c:
                continue
            mats.append(np.broadcast_to(np.frombuffer(c, dtype=np.uint8), (n, len(c))))
            masks.append(np.ones((n, len(c)), dtype=bool))
        else:
            if c.n != n:
                raise ValueError("column length mismatch")
            mats.append(c.mat)
            masks.append(c.mask)
    if not mats:
        return Rows(np.zeros((n, 0), np.uint8), np.zeros((n, 0), bool), np.zeros(n, np.int64))
    lens = np.zeros(n, dtype=np.int64)
    for c in columns:
        lens += len(c) if isinstance(c, bytes) else c.lengths
    return Rows(np.hstack(mats), np.hstack(masks), lens)


def column_lengths(columns: list[Column], n: int) -> np.ndarray:
    """Per-row byte count of the concatenation of ``columns`` (without building it)."""
    lens = np.zeros(n, dtype=np.int64)
    for c in columns:
        lens += len(c) if isinstance(c, bytes) else c.lengths
    return lens


# -- decoder --------------------------------------------------------------------------------------
def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise ValueError("varint too long")


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """Yield (field number, wire type, value) of one message; LEN values are bytes."""
    pos = 0
    n = len(buf)
    v: Any
    while pos < n:
        key, pos = read_varint(buf, pos)
        field, wt = key >> 3, key & 7
        if wt == WT_VARINT:
            v, pos = read_varint(buf, pos)
        elif wt == WT_I64:
            v = int.from_bytes(buf[pos : pos + 8], "little")
            pos += 8
        elif wt == WT_LEN:
            ln, pos = read_varint(buf, pos)
            if pos + ln > n:
                raise ValueError("truncated length-delimited field")
            v = buf[pos : pos + ln]
            pos += ln
        elif wt == 5:
            v = int.from_bytes(buf[pos : pos + 4], "little")
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        yield field, wt, v
