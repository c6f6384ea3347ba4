"""Exact microsecond-text -> int64 nanosecond conversion, vectorized over a whole chunk.

Kineto writes times as JSON numbers in µs with up to three decimals. Absolute epoch times with
decimals (``1712195495519689.047``) do not survive a float64, so ``ts``/``dur`` are kept as their raw
JSON text and parsed here: all numbers of a chunk are joined with newlines and converted with numpy
operations over the bytes (no Python work per number).
"""

from __future__ import annotations

import numpy as np

_POW10 = np.array([10**k for k in range(19)], dtype=np.int64)
_SEP = ord("\n")
#: Integer µs digits that still fit int64 ns (9.2e15 µs).
_INT_DIGITS = 16


def parse_us_joined(buf: bytes, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Parse ``n`` newline-separated decimal µs numbers to exact int64 ns.

    Empty entries are reported in the ``missing`` mask (value 0). Digits past the third decimal
    round half up. Exponent notation is converted through float (exact for realistic values).

    Returns:
        (ns, missing)

    Raises:
        OverflowError: a value does not fit int64 nanoseconds.
        ValueError: an entry is not a number.
    """
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    a = np.frombuffer(buf + b"\n", dtype=np.uint8)
    seps = np.flatnonzero(a == _SEP)
    if len(seps) != n:
        raise ValueError("number count mismatch")
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = seps[:-1] + 1
    ends = seps
    missing: np.ndarray = np.asarray(ends == starts)
    # first '.' of each number (or its end)
    dots = np.flatnonzero(a == ord("."))
    k = np.searchsorted(dots, starts)
    cand = dots[np.minimum(k, len(dots) - 1)] if len(dots) else np.full(n, len(a))
    dot = np.where((k < len(dots)) & (cand < ends), cand, ends)
    neg = (a[starts] == ord("-")) & ~missing
    istart = starts + neg
    if (dot - istart > _INT_DIGITS).any():
        raise OverflowError("a timestamp does not fit in int64 nanoseconds")
    # integer part: right-aligned digit matrix times powers of ten
    src = dot[:, None] - _INT_DIGITS + np.arange(_INT_DIGITS)[None, :]
    m = np.where(src >= istart[:, None], a[np.clip(src, 0, None)], 48).astype(np.int64) - 48
    ip = m @ _POW10[_INT_DIGITS - 1 :: -1]
    # three decimals plus a rounding digit
    fsrc = dot[:, None] + 1 + np.arange(4)[None, :]
    fm = np.where(fsrc < ends[:, None], a[np.minimum(fsrc, len(a) - 1)], 48).astype(np.int64) - 48
    ns = ip * 1000 + fm[:, 0] * 100 + fm[:, 1] * 10 + fm[:, 2] + (fm[:, 3] >= 5)
    ns = np.where(neg, -ns, ns)
    ns[missing] = 0
    # anything that is not a plain decimal (exponent, garbage): exact float fallback, per row
    other = np.flatnonzero(~(((a >= 48) & (a <= 57)) | (a == ord(".")) | (a == _SEP) | (a == ord("-"))))
    fallback = np.unique(np.searchsorted(ends, other)) if len(other) else np.zeros(0, np.int64)
    bad_digits: np.ndarray = np.asarray(((m < 0) | (m > 9)).any(axis=1))
    bad_digits[fallback] = False
    if bad_digits.any():
        raise ValueError(f"entry {int(np.flatnonzero(bad_digits)[0])} is not a number")
    if len(fallback):
        lines = buf.split(b"\n")
        for i in fallback:
            try:
                v = float(lines[i])
            except ValueError:
                raise ValueError(f"entry {int(i)} is not a number") from None
            if not np.isfinite(v) or abs(v) > 9.2e15:
                raise OverflowError("a timestamp does not fit in int64 nanoseconds")
            ns[i] = round(v * 1000.0)
    return ns.astype(np.int64), missing
