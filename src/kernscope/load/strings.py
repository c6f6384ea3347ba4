"""Byte buffers -> string Series, without a Python object per string and without pyarrow (whose import and first
use cost 0.1-0.17 s of a cold run): the Kineto scanner's dictionaries and the XSpace's texts."""

from __future__ import annotations

import numpy as np
import polars as pl

#: up to this many strings, Python's split of the decoded text and one list -> Series beat polars' split and
#: explode (226 strings: 0.06 ms against 0.4; they cross near 10,000)
SMALL = 8192


def strings_of(offsets: np.ndarray, data: np.ndarray, null_first: bool = False) -> pl.Series:
    """The strings ``data[offsets[i]:offsets[i + 1]]`` (``offsets[0]`` is 0) as a String Series, invalid UTF-8
    replaced (after a null when ``null_first``): joined with NULs, decoded once and split. Where a string holds a
    NUL itself, each is decoded on its own (rare)."""
    n = offsets.size - 1
    head: list[str | None] = [None] if null_first else []
    if n <= 0:
        return pl.Series(head, dtype=pl.String)
    if (data == 0).any():
        raw = data.tobytes()
        return pl.Series(head + [raw[a:b].decode("utf-8", "replace") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())],
                         dtype=pl.String)
    joined = np.insert(data, offsets[1:n], 0).tobytes().decode("utf-8", "replace")
    if n <= SMALL:
        return pl.Series(head + joined.split("\x00"), dtype=pl.String)
    out: pl.Series = pl.Series([joined], dtype=pl.String).str.split("\x00").explode()
    return pl.concat([pl.Series(head, dtype=pl.String), out]) if null_first else out
