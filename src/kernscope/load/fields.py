"""Read the ``ts`` of events straight from their JSON text (numpy, no parse): the start of each event a
projection skips, so a load can tell whether a skipped event may be the trace's earliest.

Only a layout where the answer is certain is read; elsewhere the value is "not read" and the caller
keeps (parses) the event. The key is looked for at the start of a line (past indentation): a raw newline
never occurs inside a JSON string, so a line start is outside strings and a ``"ts":`` there is a key. It
is taken when no ``{`` lies between the event's own ``{`` and the key (so it is a member of the event
itself, not of a nested object) and it is the only such line start in the event. Kineto writes it at the
start of the event's second line (``{``, the ph/cat/name/pid/tid line, then ``"ts": ..., "dur": ...``),
which is checked first; any other layout (one key per line) is searched line by line.

Values are read as float64 µs (:func:`numbers_at`, any JSON number form): good to well under a µs,
which is all the caller needs (it widens its test by a µs).

Second use, exact values: the line reader's NDJSON text, where an epoch time with decimals does not fit a
float64 to the ns. :func:`line_key_values` finds each line's ``"ts":`` (a key's text cannot occur inside
a JSON string: both its quotes would be escaped) and :func:`exact_ns_at` reads the plain decimal forms
with integer arithmetic; anything else is left to the caller's decoder.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .scan import KEY_GAP, NEWLINE, QUOTE, at, count_between, solid

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


#: integer digits of the largest µs value whose ns fit int64 (9.2e15)
MAX_INT_DIGITS = 16


def exact_ns_at(a: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 ns from the JSON number of µs starting at each position: (ns, read), no float on the way.

    Read: an optional ``-``, 1-16 integer digits, optionally ``.`` and digits, then ``,``, ``}``, ``]`` or
    whitespace, and at most 9.2e15 µs; the fourth decimal rounds half away from zero (like
    :func:`kernscope.load.chunk.us_text_to_ns`). Anything else (an exponent, a longer number) is not read."""
    n = len(pos)
    ns = np.zeros(n, dtype=np.int64)
    read = np.zeros(n, dtype=bool)
    idx = np.flatnonzero((pos >= 0) & (pos + NUMBER_WIDTH <= len(a)))
    if len(idx) == 0:
        return ns, read
    win = sliding_window_view(a, NUMBER_WIDTH)[pos[idx]]
    neg = win[:, 0] == ord("-")
    body = np.where(neg[:, None], np.roll(win, -1, axis=1), win)  # the sign dropped (its byte ends the window)
    digit = _DIGIT[body]
    rows = np.arange(len(idx))
    int_len = np.argmin(digit, axis=1)  # the first byte that is not a digit
    cols = np.arange(NUMBER_WIDTH)[None, :]
    has_frac = body[rows, int_len] == ord(".")
    frac_at = int_len + 1
    end = np.where(has_frac, np.argmin(digit | (cols < frac_at[:, None]), axis=1), int_len)
    good = (int_len >= 1) & (int_len <= MAX_INT_DIGITS) & ~digit[rows, end] & (~has_frac | (end > frac_at))
    good &= _AFTER[body[rows, end]]
    d = body.astype(np.int64) - ord("0")
    ip = np.zeros(len(idx), dtype=np.int64)
    for k in range(MAX_INT_DIGITS):  # Horner over the integer digits (rows with fewer stop adding)
        ip = np.where(k < int_len, ip * 10 + d[:, k], ip)
    good &= ip <= (2**63 - 1) // 1000
    frac = np.zeros(len(idx), dtype=np.int64)
    for k in range(4):  # the first four decimals, padded with zeros
        at_k = frac_at + k
        there = has_frac & (at_k < end)
        dk = np.where(there, d[rows, np.minimum(at_k, NUMBER_WIDTH - 1)], 0)
        frac = frac * 10 + dk
    value = ip * 1000 + frac // 10 + (frac % 10 >= 5)
    ns[idx] = np.where(neg, -value, value)
    read[idx] = good
    ns[~read] = 0
    return ns, read


def _pairs(a: np.ndarray, pair: bytes) -> np.ndarray:
    """Sorted positions where ``a`` holds the two bytes ``pair`` (compared as 16-bit words at even and odd
    offsets: half the comparisons of a byte-wise search)."""
    word = np.frombuffer(pair, dtype="<u2")[0]
    found = []
    for off in (0, 1):
        m = (len(a) - off) // 2
        if m > 0:
            found.append(np.flatnonzero(a[off:off + 2 * m].view("<u2") == word) * 2 + off)
    return np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)


def line_key_values(text: bytes, key: bytes, n_lines: int) -> np.ndarray | None:
    """For NDJSON text (one object per line, lines split by the only newlines): the position of the value
    of each line's ``"key":`` (-1 where the line has none). A line holding the key twice as a member of the
    object itself (a duplicate key) gives its first occurrence, as polars' reader does (the first occurrence of
    a duplicate key wins, everywhere). None when that cannot be told for certain: a second occurrence inside a
    nested object, or text that could hide or fake one (a ``\\u`` escape anywhere, or a backslash just before a
    candidate's quote)."""
    if b"\\" in text and b"\\u" in text:  # (one byte first: a fast search)
        return None
    a = np.frombuffer(text, dtype=np.uint8)
    pattern = b'"' + key + b'":'
    cand = _pairs(a, pattern[:2])
    cand = cand[cand >= 1]
    hit = cand[at(a, cand, pattern, probes=(len(pattern) - 2,))]
    if (a[hit - 1] == ord("\\")).any():
        return None
    nl = np.flatnonzero(a == NEWLINE)
    line = np.searchsorted(nl, hit)
    if len(line) and line.max() >= n_lines:
        return None
    if len(line) and np.bincount(line, minlength=n_lines).max() > 1:
        # duplicates: keep each line's first hit when every hit on the line is a member of the line's own object
        # (no '{' between the line's opening brace and the hit)
        braces = np.flatnonzero(a == ord("{"))
        start = np.where(line > 0, nl[np.maximum(line - 1, 0)] + 1, 0)  # each hit's line start
        if (count_between(braces, start, hit) > 0).any():
            return None
        first = np.ones(len(hit), dtype=bool)
        first[1:] = line[1:] != line[:-1]
        hit, line = hit[first], line[first]
    value = solid(a, hit + len(pattern), KEY_GAP)
    out = np.full(n_lines, -1, dtype=np.int64)
    out[line] = value
    return out


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
