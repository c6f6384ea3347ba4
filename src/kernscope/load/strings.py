"""Byte buffers -> string Series, without a Python object per string and without pyarrow (whose import and first
use cost 0.1-0.17 s of a cold run): the Kineto scanner's dictionaries and the XSpace's texts."""

from __future__ import annotations

import numpy as np
import polars as pl


def strings_of(offsets: np.ndarray, data: np.ndarray) -> pl.Series:
    """The strings ``data[offsets[i]:offsets[i + 1]]`` (``offsets[0]`` is 0) as a String Series, invalid UTF-8
    replaced: joined with NULs, decoded once and split by polars. Where a string holds a NUL itself, each is
    decoded on its own (rare)."""
    n = offsets.size - 1
    if n <= 0:
        return pl.Series([], dtype=pl.String)
    if (data == 0).any():
        raw = data.tobytes()
        return pl.Series([raw[a:b].decode("utf-8", "replace") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())],
                         dtype=pl.String)
    joined = np.insert(data, offsets[1:n], 0).tobytes().decode("utf-8", "replace")
    out: pl.Series = pl.Series([joined], dtype=pl.String).str.split("\x00").explode()
    return out
