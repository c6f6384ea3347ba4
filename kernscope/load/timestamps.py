"""Exact microsecond-text -> int64 nanosecond conversion.

Kineto writes times in microseconds with up to three decimals. A float64 holds those exactly
enough (error < 0.5 ns) while ``|ts| < 2**43`` µs (~100 days); absolute epoch timestamps with
decimals (~1.7e15 µs) do not fit, so those are parsed from their JSON text, vectorized.
"""

from __future__ import annotations

import numpy as np

#: Largest |ts| in µs whose float64 value still rounds to the exact nanosecond.
FLOAT_EXACT_LIMIT_US = float(2**43)
_POW10 = np.array([10**k for k in range(19)], dtype=np.int64)
_INT64_MAX_US = 9.2e15


def float_us_to_ns(us: np.ndarray) -> np.ndarray:
    """Convert float µs to int64 ns, rounding to the nearest ns (exact for |us| < 2**43)."""
    ip = np.floor(us)
    frac = us - ip
    return ip.astype(np.int64) * 1000 + np.rint(frac * 1000.0).astype(np.int64)


def needs_text_parse(us: np.ndarray) -> bool:
    """True when some value is too large for float64 to keep its nanosecond digits."""
    big = np.abs(us) >= FLOAT_EXACT_LIMIT_US
    if not big.any():
        return False
    v = us[big]
    return bool((v != np.floor(v)).any() or (np.abs(v) > 2**53).any())


def text_us_to_ns(texts: list[bytes]) -> np.ndarray:
    """Parse decimal µs strings (``b"1712195495519689.047"``) to exact int64 ns, vectorized.

    Rounds half up at the 4th decimal. Exponent notation falls back to float. Raises
    ``OverflowError`` if a value does not fit int64 nanoseconds.
    """
    n = len(texts)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    width = max(1, max(map(len, texts)))
    a = np.array(texts, dtype=f"S{width}")
    m = a.view(np.uint8).reshape(n, width)
    neg = m[:, 0] == ord("-")
    expo = ((m == ord("e")) | (m == ord("E"))).any(axis=1)
    isdot = m == ord(".")
    length = (m != 0).sum(axis=1)
    dotpos = np.where(isdot.any(axis=1), isdot.argmax(axis=1), length)
    digit = m.astype(np.int64) - 48
    valid = (m >= 48) & (m <= 57)
    j = np.arange(width)[None, :]
    dp = dotpos[:, None]
    power = np.where(j < dp, dp - 1 - j + 3, 3 - (j - dp))
    if ((valid & (power > 18)).any()):
        raise OverflowError("timestamp does not fit in int64 nanoseconds")
    use = valid & (power >= 0)
    ns = (np.where(use, digit, 0) * _POW10[np.clip(power, 0, 18)]).sum(axis=1)
    ns += (valid & (power == -1) & (digit >= 5)).any(axis=1)
    ns = np.where(neg, -ns, ns)
    if expo.any():
        for i in np.flatnonzero(expo):
            v = float(texts[i])
            if abs(v) > _INT64_MAX_US:
                raise OverflowError("timestamp does not fit in int64 nanoseconds")
            ns[i] = round(v * 1000.0)
    return ns.astype(np.int64)
