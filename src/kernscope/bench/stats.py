"""How sure a number is: confidence intervals for a median and for a ratio of medians.

The median's interval is the distribution-free order-statistic interval; a ratio's (a speedup) is a
percentile bootstrap (resample both sample sets with replacement, take the ratio of medians, keep the 2.5%
and 97.5% quantiles), seeded so a result file reproduces, computed in chunks (bounded memory).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOOTSTRAP = 1000
LEVEL = 0.95
_CHUNK = 200


def _medians(x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    out = np.empty(n)
    for i in range(0, n, _CHUNK):
        k = min(_CHUNK, n - i)
        idx = rng.integers(0, len(x), size=(k, len(x)))
        out[i:i + k] = np.median(x[idx], axis=1)
    return out


#: resampled sets are thinned to this many samples (the interval gets slightly wider, never narrower)
MAX_RESAMPLED = 2000


def median_ci(samples: Sequence[float], *, level: float = LEVEL) -> tuple[float, float]:
    """(low, high) of the median's confidence interval: the distribution-free order-statistic interval
    (ranks n/2 ± z·√n/2 of the sorted samples, the binomial approximation), exact enough and O(n log n).
    Fewer than 6 samples: (min, max)."""
    x = np.sort(np.asarray(samples, dtype=float))
    n = len(x)
    if n == 0:
        return (float("nan"), float("nan"))
    if n < 6:
        return (float(x[0]), float(x[-1]))
    z = {0.90: 1.6449, 0.95: 1.96, 0.99: 2.5758}.get(level, 1.96)
    lo = int(np.floor(n / 2 - z * np.sqrt(n) / 2))
    hi = int(np.ceil(n / 2 + z * np.sqrt(n) / 2))
    return float(x[max(lo, 0)]), float(x[min(hi, n - 1)])


def _thin(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return x if len(x) <= MAX_RESAMPLED else rng.choice(x, MAX_RESAMPLED, replace=False)


def ratio_ci(num: Sequence[float], den: Sequence[float], *, n: int = BOOTSTRAP, level: float = LEVEL,
             seed: int = 0) -> tuple[float, float]:
    """(low, high) of median(num) / median(den), both resampled independently (e.g. a speedup)."""
    rng = np.random.default_rng(seed)
    a, b = _thin(np.asarray(num, dtype=float), rng), _thin(np.asarray(den, dtype=float), rng)
    if len(a) == 0 or len(b) == 0:
        return (float("nan"), float("nan"))
    r = _medians(a, n, rng) / _medians(b, n, rng)
    q = (1.0 - level) / 2
    return float(np.quantile(r, q)), float(np.quantile(r, 1 - q))


def within_noise(ci: tuple[float, float], value: float = 1.0) -> bool:
    """The interval contains ``value`` (a speedup interval containing 1.0: no measurable difference)."""
    lo, hi = ci
    return bool(lo <= value <= hi)
