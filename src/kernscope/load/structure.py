"""The top-level structure of a run of JSON values, found with numpy (no parsing, no Python per byte).

Used by salvage: the spans of the complete top-level objects in a run of events, however many nested
objects they contain, and the bytes that belong to no complete object (junk, or an event cut off).
Strings are found from unescaped quotes (a quote after an odd run of backslashes is escaped); depth is
the running count of brackets outside strings.
"""

from __future__ import annotations

import numpy as np

_Q, _BS = ord('"'), ord("\\")
_OPEN = (ord("{"), ord("["))
_CLOSE = (ord("}"), ord("]"))


def top_level_objects(text: bytes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(spans of complete depth-0 ``{...}`` objects, spans of non-blank bytes outside them)."""
    b = np.frombuffer(text, dtype=np.uint8)
    n = len(b)
    if n == 0:
        return [], []
    idx = np.arange(n)
    # escaped quotes: preceded by an odd number of consecutive backslashes
    is_bs = b == _BS
    last_non_bs = np.maximum.accumulate(np.where(~is_bs, idx, -1))
    quotes = np.flatnonzero(b == _Q)
    run = quotes - 1 - last_non_bs[np.maximum(quotes - 1, 0)]
    run[quotes == 0] = 0
    real = quotes[run % 2 == 0]
    # inside a string: between an odd-numbered real quote and the next one
    toggles = np.zeros(n + 1, dtype=np.int8)
    np.add.at(toggles, real, 1)
    in_str = (np.cumsum(toggles[:n]) % 2 == 1) & ~np.isin(idx, real)  # the closing quote itself is outside
    in_str[real] = False
    opens = ((b == _OPEN[0]) | (b == _OPEN[1])) & ~in_str
    closes = ((b == _CLOSE[0]) | (b == _CLOSE[1])) & ~in_str
    step = opens.astype(np.int32) - closes.astype(np.int32)
    depth_after = np.cumsum(step)
    depth_before = depth_after - step
    starts = np.flatnonzero(opens & (depth_before == 0) & (b == _OPEN[0]))
    ends = np.flatnonzero(closes & (depth_after == 0) & (b == _CLOSE[0]))
    spans: list[tuple[int, int]] = []
    j = 0
    e_list = ends.tolist()
    for s in starts.tolist():
        while j < len(e_list) and e_list[j] < s:
            j += 1
        if j >= len(e_list):
            break
        # a complete object: no depth drop below its level in between (depth stays > 0 until its end)
        e = e_list[j]
        if (depth_after[s:e] > 0).all():
            spans.append((s, e + 1))
            j += 1
    # bytes outside every complete object that are not blanks or separators
    covered = np.zeros(n + 1, dtype=np.int32)
    for s, e in spans:
        covered[s] += 1
        covered[e] -= 1
    outside = np.cumsum(covered[:n]) == 0
    blank = (b == 32) | (b == 9) | (b == 10) | (b == 13) | (b == ord(","))
    junk_spans: list[tuple[int, int]] = []
    if (outside & ~blank).any():  # each maximal run outside the objects that holds more than blanks
        d = np.diff(np.concatenate([[0], outside.astype(np.int8), [0]]))
        for a, e in zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()):
            if not blank[a:e].all():
                junk_spans.append((a, e))
    return spans, junk_spans
