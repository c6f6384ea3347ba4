"""Projection: skip, before parsing, the events an analysis will not read (like reading only the needed
columns of a Parquet file).

A multi-rank analysis reads GPU activity, runtime launches, annotations and the communication ops; in a
training trace most bytes are other CPU ops (60% of a DDP rank trace) and Python stack events. Parsing
is the cost of a load, so those events are cut out of each chunk of JSON text before it reaches the
parser, on Kineto's own layout and only where that layout is certain:

- an event starts with ``{`` after a newline and two spaces, and a key at the start of the next line (a raw
  newline never occurs inside a JSON string, so this ``{`` is structural); a dropped one begins
  ``"ph": "X", "cat": "<cat>", "name": "``;
- a dropped event reaches up to the next event start, and what lies between must be exactly one object:
  it must end with ``\\n  },\\n  `` (Kineto's closing line), and every other ``{`` inside it must open a
  value (follow a ``:`` or ``[``), never a next array element (after a ``,``);
- its ``cat`` is one of :attr:`Projection.drop_cats` and its whole name (read from the text, no escapes)
  does not match :attr:`Projection.keep`, and its ``ts`` can be read from the text (:mod:`.fields`: a
  skipped event must not be the trace's earliest, which the caller checks); or its ``ph`` (the first
  key) is one of :attr:`Projection.drop_phases`.

Anything else (another writer's layout, escapes in a name, a name longer than :data:`NAME_WINDOW` bytes,
the first and last event of a chunk) is kept and parsed as usual, so a projection only ever removes
events that are certainly whole, certainly of a dropped category and certainly not wanted. Dropped events
are not validated (like unread columns). The result is checked by the caller: when the kept text does not
parse, the chunk is parsed whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .fields import start_times
from .projection import NameTest, Projection
from .scan import BACKSLASH, NEWLINE, OPEN, QUOTE, at, count_between, inner_open_ok, then_key

__all__ = ["Projection", "Projected", "dropped_starts", "judge", "judge_kineto", "project"]

#: names longer than this (bytes) are never dropped (the decision needs the whole name)
NAME_WINDOW = 96
_HEAD = b'\n  {\n    "'  #: an event start in Kineto's layout (its first key follows)
_TAIL = np.frombuffer(b"\n  },\n  ", dtype=np.uint8)


@dataclass
class Projected:
    """The kept text and, per kept event that was found as an event start, its ordinal in the chunk."""

    text: bytes
    dropped: int  #: events removed
    kept_ordinals: np.ndarray  #: ordinals (among the starts found) of the kept events, in order
    #: earliest ``ts`` (µs, read from the text) of the ``ph: X`` events removed; +inf when none
    dropped_first_ts: float = float("inf")


def _odd_multipliers(n: int) -> np.ndarray:
    """``n`` fixed odd 64-bit multipliers (splitmix64 of 1..n; numpy.random costs 5 ms of import)."""
    with np.errstate(over="ignore"):
        z = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = (z ^ (z >> np.uint64(31))) | np.uint64(1)
    return out


_MIX = _odd_multipliers(NAME_WINDOW // 8)


def _distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of a (n, NAME_WINDOW // 8) uint64 array and each row's index among them.

    Rows are grouped by a 64-bit hash (fast), and every row is then compared word for word with its
    group's first row; should two different rows share a hash, an exact ``np.unique`` is used instead."""
    if len(rows) == 0:
        return rows, np.zeros(0, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = (rows * _MIX).sum(axis=1, dtype=np.uint64)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if (rows == rows[first[inv]]).all():
        return rows[first], inv
    _, first, inv = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    return rows[first], inv.ravel()


def join_kept(text: bytes | memoryview, starts: np.ndarray, drop: np.ndarray) -> bytes:
    """``text`` without the units marked in ``drop`` (unit k spans ``starts[k]`` up to the next start or the
    end), adjacent kept units copied as one run."""
    keep = (~drop).view(np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], keep, [0]])))
    ends = np.append(starts[1:], len(text))
    mv = memoryview(text)
    return b"".join([mv[s:e] for s, e in zip(starts[edges[0::2]].tolist(), ends[edges[1::2] - 1].tolist())])


#: :func:`judge` codes: parse the event, drop it by its category and name, drop it by its phase
KEEP, BY_CAT, BY_PHASE = 0, 1, 2


def judge(a: np.ndarray, body: np.ndarray, projection: Projection, rx: NameTest) -> np.ndarray:
    """For events whose first key's text starts at ``body`` (just after its opening quote, ``ph": ...``):
    :data:`KEEP`, :data:`BY_CAT` or :data:`BY_PHASE` (int8) by ``projection``. The keys must come in
    Kineto's order (``ph``, ``cat``, ``name``), written ``"key": "value",`` with any whitespace between
    them (one line, or one key per line). A name is judged only when it is read whole from the text
    (closing quote within :data:`NAME_WINDOW` bytes, no escapes); otherwise the event is kept."""
    code = np.zeros(len(body), dtype=np.int8)
    if projection.drop_cats:
        x = at(a, body, b'ph": "X",')
        after_ph = body[x] + len(b'ph": "X",')
    for cat in projection.drop_cats:
        c_hit, after_cat = then_key(a, after_ph, f'cat": "{cat}",'.encode())
        n_hit, name_at = then_key(a, after_cat, b'name": "')
        hit = x[c_hit[n_hit]]
        code[hit[unwanted_names(a, name_at, rx)]] = BY_CAT
    for ph in projection.drop_phases:
        code[at(a, body, f'ph": "{ph}",'.encode())] = BY_PHASE
    return code


def judge_kineto(a: np.ndarray, opens: np.ndarray, projection: Projection, rx: NameTest) -> np.ndarray:
    """:func:`judge` for events in Kineto's own layout, from the position of each event's ``{``: the
    event starts exactly ``{\n    "ph": "X", "cat": "<cat>", "name": "`` (or ``{\n    "ph": "<phase>",``).
    One comparison per event instead of a walk over whitespace; an event written otherwise is kept."""
    code = np.zeros(len(opens), dtype=np.int8)
    ph_at = len(b'{\n    "ph": "')
    for cat in projection.drop_cats:
        head = f'{{\n    "ph": "X", "cat": "{cat}", "name": "'.encode()
        hit = at(a, opens, head, probes=(ph_at, ph_at + len(b'X", "cat": "')))  # the phase, the category's first letter
        code[hit[unwanted_names(a, opens[hit] + len(head), rx)]] = BY_CAT
    for ph in projection.drop_phases:
        code[at(a, opens, f'{{\n    "ph": "{ph}",'.encode(), probes=(ph_at,))] = BY_PHASE
    return code


def unwanted_names(a: np.ndarray, name_at: np.ndarray, rx: NameTest) -> np.ndarray:
    """For names whose text starts at ``name_at`` (after the opening quote): True where the name is read
    whole (closing quote within :data:`NAME_WINDOW` bytes, no escapes) and ``rx`` does not want it."""
    out = np.zeros(len(name_at), dtype=bool)
    fits = np.flatnonzero(name_at + NAME_WINDOW <= len(a))
    if len(fits) == 0:
        return out
    names = sliding_window_view(a, NAME_WINDOW)[name_at[fits]]  # a contiguous (n, NAME_WINDOW) copy
    rows = np.arange(len(fits))
    quote = names == QUOTE
    end = quote.argmax(axis=1)  # the closing quote (0 when there is none: then not whole)
    backslash = names == BACKSLASH
    first_bs = backslash.argmax(axis=1)
    whole = quote[rows, end] & ~(backslash[rows, first_bs] & (first_bs < end))
    # each name as little-endian 64-bit words, the bytes from its closing quote on zeroed
    words = names.view("<u8")
    k = np.arange(NAME_WINDOW // 8)[None, :]
    full_words = (end // 8)[:, None]
    partial = (np.uint64(1) << (8 * (end % 8)).astype(np.uint64)) - np.uint64(1)
    words = words & np.where(k < full_words, np.uint64(2**64 - 1),
                             np.where(k == full_words, partial[:, None], np.uint64(0)))
    uniq, inv = _distinct_rows(words)
    wanted = np.fromiter((rx(u.tobytes().rstrip(b"\0")) for u in uniq), dtype=bool, count=len(uniq))
    out[fits] = whole & ~wanted[inv]
    return out


def dropped_starts(a: np.ndarray, nl: np.ndarray, opens: np.ndarray, event_open: np.ndarray,
                   event_end: np.ndarray, code: np.ndarray) -> tuple[np.ndarray, float]:
    """Of the events ``code`` drops by category (``ph: X`` events: they count for the trace's earliest
    start; instant events, dropped by phase, do not): keep those whose ``ts`` cannot be read from the text
    (:mod:`.fields`). Returns (the codes, the earliest ``ts`` in µs of the events still dropped by
    category; +inf when none)."""
    cat = np.flatnonzero(code == BY_CAT)
    if len(cat) == 0:
        return code, float("inf")
    ts, ok = start_times(a, nl, opens, event_open[cat], event_end[cat])
    code = code.copy()
    code[cat[~ok]] = KEEP
    return code, float(ts[ok].min()) if ok.any() else float("inf")


def project(text: bytes | memoryview, projection: Projection, rx: NameTest | None = None) -> Projected | None:
    """Cut the events ``projection`` drops out of ``text`` (a run of events, no brackets).

    Returns None when nothing is dropped (parse ``text`` as it is)."""
    a = np.frombuffer(text, dtype=np.uint8)
    n = len(a)
    if n < 64:
        return None
    opens = np.flatnonzero(a == OPEN)
    cand = opens[opens >= 3] - 3
    starts = cand[at(a, cand, _HEAD)] + 3  # position of each event's "{"
    if len(starts) < 3:
        return None
    # a chunk starts at its first event's "{", with no newline before it: that event is not among the starts
    ordinal_shift = int(a[0] == OPEN)
    body = starts + (len(_HEAD) - 3)
    code = judge(a, body, projection, rx or projection.compiled())
    code[0] = code[-1] = KEEP  # the chunk's edges stay: their neighbours are not in this chunk
    drop = code != KEEP
    if not drop.any():
        return None
    nxt = np.append(starts[1:], n)
    ds, de = starts[drop], nxt[drop]
    # each dropped range must be exactly one object: Kineto's closing line, and no inner "{" after a ","
    tail_ok = (sliding_window_view(a, len(_TAIL))[de - len(_TAIL)] == _TAIL).all(axis=1)
    inner = opens[np.isin(opens, starts, invert=True)]
    bad_inner = inner[~inner_open_ok(a, inner)] if len(inner) else inner
    one_object = tail_ok & (count_between(bad_inner, ds, de) == 0)
    code[np.flatnonzero(drop)[~one_object]] = KEEP  # keep the ranges that may hold more than one event
    code, first_ts = dropped_starts(a, np.flatnonzero(a == NEWLINE), opens, starts, nxt, code)
    drop = code != KEEP
    if not drop.any():
        return None
    unit_start = np.concatenate([[0], starts])  # the text before the first start is unit 0
    out = join_kept(text, unit_start, np.concatenate([[False], drop]))
    kept = np.flatnonzero(~drop) + ordinal_shift
    if ordinal_shift:
        kept = np.concatenate([[0], kept])
    return Projected(out, int(drop.sum()), kept, first_ts)
