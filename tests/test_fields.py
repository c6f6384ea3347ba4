"""Reading an event's ``ts`` from its JSON text (kernscope.load.fields): what a projection uses to know
whether an event it skips could be the trace's earliest."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kernscope.load.fields import numbers_at, start_times


def _events(text: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, newlines, opens, each top-level event's "{" and end) of a JSON array's text."""
    a = np.frombuffer(text, dtype=np.uint8)
    depth, starts, ends, in_str, esc = 0, [], [], False, False
    for i, c in enumerate(text):  # a reference scanner (test only)
        ch = chr(c)
        if in_str:
            esc, in_str = (not esc and ch == "\\"), in_str and not (ch == '"' and not esc)
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            if depth == 1 and ch == "{":
                starts.append(i)
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 1 and ch == "}":
                ends.append(i)
    return (a, np.flatnonzero(a == 10), np.flatnonzero(a == ord("{")), np.array(starts, dtype=np.int64),
            np.array(ends, dtype=np.int64))


def _read(text: str) -> tuple[list[float], list[bool]]:
    a, nl, opens, s, e = _events(text.encode())
    ts, ok = start_times(a, nl, opens, s, e)
    return ts.tolist(), ok.tolist()


KINETO = """[
  {
    "ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1,
    "ts": 4820440140198.081, "dur": 2.5,
    "args": {
      "Python parent id": 1, "Python id": 2
    }
  },
  {
    "ph": "X", "cat": "cpu_op", "name": "g", "pid": 1, "tid": 1,
    "ts": 12, "dur": 1,
    "args": {
      "External id": 3
    }
  }
]"""


def test_kineto_layout():
    ts, ok = _read(KINETO)
    assert ok == [True, True] and ts == [4820440140198.081, 12.0]


def test_one_key_per_line_layout():
    evs = [{"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": 7.25, "dur": 1,
            "args": {"Python id": 1}},
           {"ph": "X", "cat": "cpu_op", "name": "g", "pid": 1, "tid": 1, "ts": -3, "dur": 1e3}]
    ts, ok = _read(json.dumps(evs, indent=4))
    assert ok == [True, True] and ts == [7.25, -3.0]


def test_not_read_where_it_is_not_certain():
    # (1) all on one line: no line start proves the key is outside a string
    # (2) "ts" only inside args (nested object): not the event's start
    # (3) a string where a number belongs; (4) the key inside a string value that spans no line start
    evs = [
        '{"ph": "X", "cat": "python_function", "name": "f", "ts": 1, "dur": 1}',
        '{\n  "ph": "X", "name": "g",\n  "args": {\n    "ts": 5\n  }\n}',
        '{\n  "ph": "X", "name": "h",\n  "ts": "5", "dur": 1\n}',
        '{\n  "ph": "X", "name": "i \\"ts\\": 5",\n  "dur": 1\n}',
    ]
    ts, ok = _read("[\n" + ",\n".join(evs) + "\n]")
    assert ok == [False, False, False, False]


def test_a_second_ts_line_in_the_event_is_not_guessed():
    # two line starts read "ts" at the event's own level (a duplicate key): neither is taken
    ev = '{\n  "ph": "X", "name": "f",\n  "ts": 1,\n  "ts": 2,\n  "dur": 1\n}'
    ts, ok = _read("[\n" + ev + ",\n" + ev.replace('"f"', '"g"') + "\n]")
    assert ok == [False, False]


@pytest.mark.parametrize("text, value, read", [
    (b"12,", 12.0, True), (b"-4.5}", -4.5, True), (b"1e3 ", 1000.0, True), (b"7\n", 7.0, True),
    (b'"7",', 0.0, False), (b"1.2.3,", 0.0, False), (b"12x", 0.0, False), (b"9" * 30 + b",", 0.0, False),
    (b"true,", 0.0, False),
])
def test_numbers(text, value, read):
    a = np.frombuffer(text + b" " * 40, dtype=np.uint8)
    v, ok = numbers_at(a, np.array([0]))
    assert bool(ok[0]) is read and (not read or v[0] == value)


def test_positions_within_ranges(monkeypatch):
    import numpy as np

    from kernscope.load import scan

    text = b"{a}{b}xx{c}{d}{e}" * 3
    a = np.frombuffer(text, dtype=np.uint8)
    everywhere = np.flatnonzero(a == ord("{"))
    lo, hi = np.array([0, 3, 14, 20]), np.array([3, 6, 17, 34])  # the first two touch: one run
    got = scan.positions_within(a, ord("{"), lo, hi)
    inside = [p for p in everywhere if any(s <= p < e for s, e in zip(lo, hi))]
    assert got.tolist() == inside
    assert scan.positions_within(a, ord("{"), lo[:0], hi[:0]).tolist() == []
    many = np.arange(0, len(a) - 1, 2)
    monkeypatch.setattr(scan, "MAX_RUNS", 3)  # beyond MAX_RUNS runs: one pass over the whole text (a superset)
    assert scan.positions_within(a, ord("{"), many, many + 1).tolist() == everywhere.tolist()
