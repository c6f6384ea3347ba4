"""A run of events -> one event per line (NDJSON), so polars' line reader can parse a chunk.

polars' NDJSON reader reads only the keys of its schema, is faster per core than its JSON-array reader
when few keys are read, and is strict: every line must be exactly one JSON object (trailing text, a cut
object or a ``true`` where a number belongs is an error). Trace writers put an event over several lines
(Kineto: ``\\n  },\\n  {\\n``; ``json.dump(indent=4)``: one key per line) or all events on one line;
this module turns any of them into NDJSON with numpy (no Python object per event):

- every newline becomes a space (a raw newline never occurs inside a JSON string, so this changes
  whitespace only);
- every comma right after a ``}`` and followed, past whitespace, by a ``{`` becomes the line break
  (Kineto's ``\n  },\n  {\n`` is looked for first, from the newlines; then any such comma).

Why this cannot silently change the events: such a comma between two top-level events is exactly the
array separator. Anywhere else it is inside an event (between two objects of a nested array, or inside
a string), and a line break there cuts the event: the part before it is an unclosed object, or a string
with a raw newline in it, which is not valid JSON, so the strict reader rejects the chunk and the caller
parses it the usual way. Whatever the reader accepts is a run of lines, each one whole object, that were
separated by commas in the original text: exactly the original events, in order. The caller also
checks that it got one row per line.

With a :class:`~kernscope.load.project.Projection` that drops events, lines it drops are left out of
the text: only lines whose first keys read ``"ph": "X", "cat": "<cat>", "name": "...`` in this order
(any whitespace between the keys) or ``"ph": "<phase>",``, never the chunk's first or last line (their
neighbours are in other chunks),
and never a line holding an array of objects (:func:`_no_object_elements`); a ``ph: X`` line only when
its ``ts`` can be read from the text (:func:`~kernscope.load.project.dropped_starts`: the earliest of them
is reported, so a skipped event can never be the trace's time origin unnoticed). Like the projection, a
dropped line is not validated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .project import KEEP, Projection, dropped_starts, join_kept, judge, judge_kineto
from .projection import NameTest
from .scan import NEWLINE as _NL
from .scan import OPEN as _OPEN
from .scan import QUOTE as _QUOTE
from .scan import inner_open_ok, positions_within, solid

_SPACE, _COMMA, _CLOSE = 32, 44, 125
#: whitespace looked through after a separator's comma (indentation of pretty-printed traces)
MAX_INDENT = 40


@dataclass
class Lines:
    """NDJSON text of a chunk's events (those a projection keeps)."""

    text: bytes
    lines: int  #: lines in ``text`` (events kept)
    dropped: int = 0  #: events left out
    ordinals: np.ndarray | None = None  #: with drops: each kept line's ordinal among the chunk's events
    #: earliest ``ts`` (µs, read from the text) of the ``ph: X`` events left out; +inf when none
    dropped_first_ts: float = float("inf")
    #: bytes of the longest line (an upper bound for any string in it)
    longest: int | None = None
    #: False when no line looks like a metadata event (a hint: the reader's ``ph`` column decides)
    meta: bool = True


#: Kineto's own separator: the end of one event ("\n  },") and the start of the next ("\n  {\n")
KINETO_SEPARATOR = b"\n  },\n  {\n"
_KSEP = np.frombuffer(KINETO_SEPARATOR, dtype=np.uint8)
_K_COMMA, _K_OPEN = KINETO_SEPARATOR.index(b","), KINETO_SEPARATOR.index(b"{")


def _separators(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Commas right after a ``}`` and before a ``{`` (past whitespace): (comma positions, positions of
    the ``{`` after each, positions of every newline, whether they are Kineto's ``\n  },\n  {\n``).

    Kineto's layout is looked for first (from the newlines: fewer candidates than braces); any other
    layout from the ``}`` bytes."""
    nl = np.flatnonzero(a == _NL)
    cand = nl[nl + len(_KSEP) <= len(a)]
    cand = cand[a[cand + _K_COMMA] == _COMMA]
    ok = np.ones(len(cand), dtype=bool)
    for k in range(1, len(_KSEP)):  # byte 0 is the newline itself
        ok &= a[cand + k] == _KSEP[k]
    if ok.any():
        return cand[ok] + _K_COMMA, cand[ok] + _K_OPEN, nl, True
    closes = np.flatnonzero(a == _CLOSE)
    closes = closes[closes + 2 < len(a)]
    commas = closes[a[closes + 1] == _COMMA] + 1
    opens = solid(a, commas + 1, MAX_INDENT)
    good = opens >= 0
    good[good] = a[opens[good]] == _OPEN
    return commas[good], opens[good], nl, False


def _may_hold_metadata(a: np.ndarray, sep_open: np.ndarray) -> bool:
    """A hint: False when every line (the first starts at byte 0, the others at ``sep_open``) reads like
    ``{\n    "ph": "<p>`` with ``p`` other than ``M`` (Kineto writes a metadata event's ``name`` first).
    Three bytes a line are looked at; whatever the text, the reader's own ``ph`` column decides (a piece
    read without the metadata args where it finds an ``M`` is read again with them)."""
    heads = np.concatenate([[0], sep_open])
    if heads[-1] + 14 > len(a):
        return True
    return not bool(((a[heads + 7] == ord("p")) & (a[heads + 8] == ord("h")) & (a[heads + 13] != ord("M"))).all())


def _no_object_elements(a: np.ndarray, opens: np.ndarray, line_starts: np.ndarray, line_opens: np.ndarray,
                        drop: np.ndarray) -> np.ndarray:
    """For the inner lines 1 .. len(line_starts) marked in ``drop`` (line k starts at ``line_starts[k-1]``,
    its own ``{`` at ``line_opens[k-1]``; ``opens``: every ``{``): True where every other ``{`` in the line
    opens the value of a key (follows ``:``), i.e. the line holds no array of objects.

    In valid JSON a separator inside an event sits between two objects of an array nested in it (inside a
    string, the line after it cannot start with a key: the quote there would end the string), and the
    first such separator ends a line holding an object that follows ``[`` or ``,``; so in a valid file the
    lines that pass are whole events and a dropped line never hides a wrong cut. (In a damaged file, text
    inside skipped events is not validated, as unread columns are not.)"""
    line = np.searchsorted(line_starts, opens, side="right")  # line number of each "{"
    inner = (line >= 1) & (line <= len(drop))
    opens, line = opens[inner], line[inner]
    keep = drop[line - 1] & (opens != line_opens[line - 1])
    opens, line = opens[keep], line[keep]
    ok = np.ones(len(drop), dtype=bool)
    if len(opens):
        bad = ~inner_open_ok(a, opens, after=b":")
        ok[line[bad] - 1] = False
    return ok


def to_lines(text: bytes | memoryview, projection: Projection | None = None,
             rx: NameTest | None = None) -> Lines | None:
    """``text`` (a run of events, no brackets) as NDJSON, without the events ``projection`` drops; None
    when no separator is found (a single event: parse it as it is)."""
    a = np.frombuffer(text, dtype=np.uint8)
    sep, sep_open, nl, kineto = _separators(a)
    if len(sep) == 0:
        return None
    out = a.copy()
    out[nl] = _SPACE
    out[sep] = _NL
    lines = len(sep) + 1
    longest = int(max(sep[0], len(a) - sep[-1], np.diff(sep).max(initial=0)))
    meta = not kineto or _may_hold_metadata(a, sep_open)
    if projection is None or not projection.drops_events or lines < 3:
        return Lines(out.tobytes(), lines, longest=longest, meta=meta)
    # inner lines 1 .. lines-2: line k starts after comma k-1 and opens at sep_open[k-1]
    inner_open = sep_open[:-1]
    rx = rx or projection.compiled()
    if kineto:
        code = judge_kineto(a, inner_open, projection, rx)
    else:
        first_key = solid(a, inner_open + 1, MAX_INDENT)
        ok = first_key >= 0
        ok[ok] = a[first_key[ok]] == _QUOTE
        code = np.zeros(len(inner_open), dtype=np.int8)
        code[ok] = judge(a, first_key[ok] + 1, projection, rx)
    if not code.any():
        return Lines(out.tobytes(), lines, longest=longest, meta=meta)
    starts = sep + 1
    # the "{" of the lines that may be dropped (inner line k spans sep[k-1] + 1 .. sep[k], its comma)
    maybe = np.flatnonzero(code != KEEP)
    opens = positions_within(a, _OPEN, starts[maybe], starts[maybe + 1])
    code[~_no_object_elements(a, opens, starts, sep_open, code != KEEP)] = KEEP
    # a dropped X event whose start cannot be read from the text is kept (it may be the trace's earliest)
    code, first_ts = dropped_starts(a, nl, opens, inner_open, sep[1:], code)
    drop = code != KEEP
    if not drop.any():
        return Lines(out.tobytes(), lines, longest=longest, meta=meta)
    skip = np.concatenate([[False], drop, [False]])
    body = join_kept(out.data, np.concatenate([[0], starts]), skip)
    ordinals = np.flatnonzero(~skip)
    return Lines(body, len(ordinals), int(drop.sum()), ordinals, first_ts, longest, meta)
