"""Byte scanners over JSON text held in a numpy uint8 array (no parse): the vectorized probes the
projection (:mod:`.project`), the line reader (:mod:`.lines`) and the field reader (:mod:`.fields`) share."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

NEWLINE, OPEN, QUOTE, BACKSLASH = 10, 123, 34, 92
WS = np.array([32, 10, 13, 9], dtype=np.uint8)
#: byte -> is JSON whitespace (a table lookup is much cheaper than np.isin on every probe)
IS_WS = np.zeros(256, dtype=bool)
IS_WS[WS] = True
#: whitespace looked through between two keys (one key per line: a newline and the indentation)
KEY_GAP = 40
#: at most this many whitespace bytes are looked through before an inner ``{``
WS_LOOKBACK = 6


def at(a: np.ndarray, pos: np.ndarray, pattern: bytes, room: int = 0, probes: tuple[int, ...] = (6, 18)) -> np.ndarray:
    """Indices into ``pos`` where ``a`` holds ``pattern`` (with ``room`` more bytes after it inside ``a``).

    ``probes``: offsets in ``pattern`` compared first, alone (where most positions differ: in Kineto's
    ``ph": "X", "cat": "...`` text, bytes 6 and 18 are the phase and the category's first letter)."""
    pat = np.frombuffer(pattern, dtype=np.uint8)
    fits = np.flatnonzero(pos + len(pat) + room <= len(a))
    # a few single bytes first (cheap gathers), then the whole pattern
    for k in sorted({*(min(p, len(pat) - 1) for p in probes), len(pat) - 1}):
        fits = fits[a[pos[fits] + k] == pat[k]]
    found: np.ndarray = fits[(sliding_window_view(a, len(pat))[pos[fits]] == pat).all(axis=1)]
    return found


def inner_open_ok(a: np.ndarray, opens: np.ndarray, after: bytes = b":[") -> np.ndarray:
    """For each ``{`` position: True when the previous non-blank byte (within a few) is one of ``after``."""
    wanted = np.zeros(256, dtype=bool)
    wanted[list(after)] = True
    prev = solid(a, opens - 1, WS_LOOKBACK - 1, step=-1)
    ok: np.ndarray = prev >= 0
    ok[ok] = wanted[a[prev[ok]]]
    return ok


def solid(a: np.ndarray, pos: np.ndarray, limit: int, step: int = 1) -> np.ndarray:
    """For each position: the first of it, ``pos + step``, ``pos + 2*step`` ... (at most ``limit`` steps)
    that holds a non-whitespace byte; -1 where there is none inside ``a``."""
    out = np.full(len(pos), -1, dtype=np.int64)
    todo = np.arange(len(pos))
    n = len(a)
    for k in range(limit + 1):
        if len(todo) == 0:
            break
        p = pos[todo] + k * step
        inside = (p >= 0) & (p < n)
        todo, p = todo[inside], p[inside]
        found = ~IS_WS[a[p]]
        out[todo[found]] = p[found]
        todo = todo[~found]
    return out


def then_key(a: np.ndarray, pos: np.ndarray, key_value: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Past whitespace from each position: a quote and ``key_value`` (e.g. ``cat": "x",``)? (indices into
    ``pos`` that match, position right after the match for each)."""
    q = solid(a, pos, KEY_GAP)
    ok = np.flatnonzero(q >= 0)
    ok = ok[a[q[ok]] == QUOTE]
    hit = ok[at(a, q[ok] + 1, key_value)]
    return hit, q[hit] + 1 + len(key_value)


def count_between(positions: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each pair: how many of the sorted ``positions`` lie strictly between ``lo`` and ``hi``."""
    counts: np.ndarray = np.searchsorted(positions, hi, side="left") - np.searchsorted(positions, lo, side="right")
    return counts


#: above this many runs of text, one pass over the whole text is cheaper than a slice per run
MAX_RUNS = 64


def positions_within(a: np.ndarray, byte: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Sorted positions of ``byte`` that include every one inside the ranges ``[lo, hi)`` (sorted, not
    overlapping; ranges that touch are scanned as one run). With more than :data:`MAX_RUNS` runs the whole
    text is scanned (positions outside the ranges are then included too)."""
    if len(lo) == 0:
        return np.zeros(0, dtype=np.int64)
    brk = np.flatnonzero(lo[1:] != hi[:-1])
    run_lo = np.concatenate([lo[:1], lo[brk + 1]])
    run_hi = np.concatenate([hi[brk], hi[-1:]])
    if len(run_lo) > MAX_RUNS:
        return np.flatnonzero(a == byte)
    return np.concatenate([np.flatnonzero(a[s:e] == byte) + s for s, e in zip(run_lo.tolist(), run_hi.tolist())])
