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


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``x``, ties given their average rank."""
    order = np.argsort(x, kind="mergesort")
    s = x[order]
    first = np.r_[True, s[1:] != s[:-1]]
    group = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    ends = np.r_[starts[1:], len(s)]
    avg = (starts + ends + 1) / 2.0  # ranks start..end-1 (0-based) -> average of start+1..end
    out = np.empty(len(x))
    out[order] = avg[group]
    return out


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U of ``a``, two-sided p) of the Mann-Whitney U test: do samples of ``a`` tend to be larger or smaller than
    those of ``b``? Normal approximation with tie and continuity corrections (the sample sets here have tens to
    thousands of samples). U counts the pairs where ``a`` is larger, ties as half."""
    import math

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return float("nan"), float("nan")
    both = np.concatenate([x, y])
    r = _ranks(both)
    u = float(r[:n1].sum() - n1 * (n1 + 1) / 2)
    n = n1 + n2
    _, counts = np.unique(both, return_counts=True)
    ties = float((counts ** 3 - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return u, 1.0
    z = (abs(u - n1 * n2 / 2.0) - 0.5) / math.sqrt(var)
    return u, float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))


def cliffs_delta(a: Sequence[float], b: Sequence[float]) -> float:
    """Cliff's delta, P(a > b) − P(a < b), from −1 to 1: the effect size that goes with the U test."""
    u, _ = mann_whitney(a, b)
    n = len(a) * len(b)
    return float(2.0 * u / n - 1.0) if n else float("nan")


def effect_label(delta: float) -> str:
    """Romano et al.'s thresholds for |Cliff's delta|: negligible < 0.147 ≤ small < 0.33 ≤ medium < 0.474 ≤ large."""
    d = abs(delta)
    return "negligible" if d < 0.147 else "small" if d < 0.33 else "medium" if d < 0.474 else "large"


def skewed(samples: Sequence[float]) -> bool:
    """Pearson's median skewness 3 (mean − median) / sd above 0.5: a long tail (stalls, clock dips), where a
    rank test fits better than a bootstrap of medians."""
    x = np.asarray(samples, dtype=float)
    if len(x) < 3:
        return False
    sd = float(x.std(ddof=1))
    return bool(sd > 0 and abs(3.0 * (float(x.mean()) - float(np.median(x))) / sd) > 0.5)


def verdict(a: Sequence[float], b: Sequence[float], *, alpha: float = 1.0 - LEVEL,
            ci: tuple[float, float] | None = None) -> dict[str, object]:
    """Is ``b`` faster or slower than ``a`` (times: smaller is faster)? ``ratio`` = median(b) / median(a) with its
    bootstrap interval; the test that fits the samples (``mann-whitney`` when either set is skewed, else
    ``bootstrap``: the ratio's interval excluding 1) and Cliff's delta of ``b`` vs ``a``. ``verdict``: "faster",
    "slower", or "within noise" when the test finds no difference or the effect is negligible. ``ci``: the ratio's
    interval when the caller has bootstrapped it already."""
    ratio = float(np.median(np.asarray(b, dtype=float)) / np.median(np.asarray(a, dtype=float)))
    ci = ci if ci is not None else ratio_ci(b, a)
    u, p = mann_whitney(b, a)
    delta = float(2.0 * u / (len(a) * len(b)) - 1.0)  # Cliff's delta from the same U (one ranking)
    test = "mann-whitney" if skewed(a) or skewed(b) else "bootstrap"
    significant = p < alpha if test == "mann-whitney" else not within_noise(ci)
    effect = effect_label(delta)
    word = "within noise" if not significant or effect == "negligible" else "faster" if ratio < 1 else "slower"
    return {"ratio": ratio, "ratio_ci": [ci[0], ci[1]], "test": test, "p_value": p, "cliffs_delta": delta,
            "effect": effect, "verdict": word}
