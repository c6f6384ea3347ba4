"""Read the ``ts`` of events straight from their JSON text (numpy, no parse): the start of each event a
projection skips, so a load can tell whether a skipped event may be the trace's earliest.

Only a layout where the answer is certain is read; elsewhere the value is "not read" and the caller
keeps (parses) the event. The key is looked for at the start of a line (past indentation): a raw newline
never occurs inside a JSON string, so a line start is outside strings and a ``"ts":`` there is a key. It
is taken when no ``{`` lies between the event's own ``{`` and the key (so it is a member of the event
itself, not of a nested object) and it is the only such line start in the event. Kineto writes it at the
start of the event's second line (``{``, the ph/cat/name/pid/tid line, then ``"ts": ..., "dur": ...``),
which is checked first; any other layout (one key per line) is searched line by line.

Values are read as float64 µs: good to well under a µs, which is all the caller needs (it widens its
test by a µs).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .scan import KEY_GAP, QUOTE, at, count_between, solid

#: the longest number read (bytes)
NUMBER_WIDTH = 24
_NUM = np.zeros(256, dtype=bool)
_NUM[list(b"0123456789.-+eE")] = True
_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[list(b"0123456789")] = True
#: what may follow a number (anything else: the number is not read)
_AFTER = np.zeros(256, dtype=bool)
_AFTER[list(b",}] \t\r\n")] = True
_KEY = b'ts": '
#: Kineto's ts line, at the start of the event's second line
_K_TS = b'\n    "ts": '


def numbers_at(a: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The JSON number starting at each position, as float64: (value, read). Not read: anything that is
    not a plain JSON number followed by ``,``, ``}``, ``]`` or whitespace, or longer than
    :data:`NUMBER_WIDTH` bytes."""
    n = len(pos)
    value = np.zeros(n)
    ok = (pos >= 0) & (pos + NUMBER_WIDTH <= len(a))
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return value, ok
    win = sliding_window_view(a, NUMBER_WIDTH)[pos[idx]]
    allowed = _NUM[win]
    length = np.argmin(allowed, axis=1)  # the first byte that is not part of a number (0: none in the window)
    first = win[:, 0]
    good = (length > 0) & (_DIGIT[first] | (first == ord("-")))
    good[good] = _AFTER[a[pos[idx[good]] + length[good]]]
    idx, win, length = idx[good], win[good], length[good]
    text = win * (np.arange(NUMBER_WIDTH, dtype=np.uint8)[None, :] < length[:, None].astype(np.uint8))
    ok[:] = False
    try:
        value[idx] = np.ascontiguousarray(text).view(f"S{NUMBER_WIDTH}").ravel().astype(np.float64)
    except ValueError:  # e.g. "1.2.3" or "1e": nothing of this batch is read
        return value, ok
    ok[idx] = True
    return value, ok


def _key_by_lines(a: np.ndarray, nl: np.ndarray, j0: np.ndarray, j1: np.ndarray) -> np.ndarray:
    """Any layout: for each event (its newlines are ``nl[j0] .. nl[j1-1]``) the line starts that read
    ``"ts": ``, as (event number, value position) pairs."""
    counts = j1 - j0
    total = int(counts.sum())
    if total == 0:
        return np.zeros((2, 0), dtype=np.int64)
    first = np.cumsum(counts) - counts
    jj = np.repeat(j0 - first, counts) + np.arange(total)
    owner = np.repeat(np.arange(len(j0)), counts)
    q = solid(a, nl[jj] + 1, KEY_GAP)
    q, keep = np.unique(q, return_index=True)  # a key after blank lines is reached from each of them
    owner = owner[keep]
    good = np.flatnonzero(q >= 0)
    good = good[a[q[good]] == QUOTE]
    hit = good[at(a, q[good] + 1, _KEY)]
    return np.stack([owner[hit], q[hit] + 1 + len(_KEY)])


def start_times(a: np.ndarray, nl: np.ndarray, opens: np.ndarray, event_open: np.ndarray,
                event_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ts`` (µs, float64) of the events spanning ``event_open`` (their ``{``) .. ``event_end``, and
    whether it was read (``nl``: every newline, ``opens``: every ``{``, both sorted)."""
    n = len(event_open)
    value_at = np.full(n, -1, dtype=np.int64)
    j0 = np.searchsorted(nl, event_open)  # each event's first newline
    fast = np.flatnonzero(j0 + 1 < len(nl))
    fast = fast[nl[j0[fast] + 1] < event_end[fast]]
    fast = fast[at(a, nl[j0[fast] + 1], _K_TS)]
    value_at[fast] = nl[j0[fast] + 1] + len(_K_TS)
    slow = np.flatnonzero(value_at < 0)
    if len(slow):
        owner, pos = _key_by_lines(a, nl, j0[slow], np.searchsorted(nl, event_end[slow]))
        member = count_between(opens, event_open[slow][owner], pos - len(b'"ts": ')) == 0
        owner, pos = owner[member], pos[member]
        once = np.bincount(owner, minlength=len(slow))[owner] == 1
        value_at[slow[owner[once]]] = pos[once]
    rows = np.flatnonzero(value_at >= 0)
    rows = rows[count_between(opens, event_open[rows], value_at[rows] - len(b'"ts": ')) == 0]
    ts = np.zeros(n)
    ok = np.zeros(n, dtype=bool)
    value, read = numbers_at(a, value_at[rows])
    ts[rows[read]] = value[read]
    ok[rows[read]] = True
    return ts, ok
