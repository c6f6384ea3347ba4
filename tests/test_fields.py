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


def test_exact_ns_reader_agrees_with_the_text_converter():
    # epoch µs with decimals do not fit a float64 to the ns: read from the text with integers only
    import random

    import numpy as np
    import polars as pl

    from kernscope.load.chunk import us_text_to_ns
    from kernscope.load.fields import exact_ns_at

    r = random.Random(3)
    vals = ["1712195495000003.125", "0", "5", "-3.4567", "12.34565", "1.0005", "-0.0005", "9223372036854775",
            "00012", "3.14159265358979", "7.9999", "1e5", "1.", "-", "9223372036854776", "123456789012345678"]
    vals += [f"{r.randrange(10**15, 2 * 10**15)}.{r.randrange(1000):03d}" for _ in range(300)]
    vals += [f"-{r.randrange(10**6)}.{r.randrange(10**6):06d}" for _ in range(100)]
    text = b"".join(v.encode() + b", " for v in vals) + b" " * 32
    pos = np.cumsum([0] + [len(v) + 2 for v in vals[:-1]])
    ns, read = exact_ns_at(np.frombuffer(text, dtype=np.uint8), pos)
    ref, _, bad = us_text_to_ns(pl.Series(vals))
    # what it reads equals the converter; what it does not read (exponents, "1.", too long) goes there
    assert (ns[read] == ref.to_numpy()[read]).all()
    assert read.sum() == len(vals) - 5 and not read[11:16].any()
    assert not bad.to_numpy()[read].any()


def test_line_key_values_only_when_certain():
    from kernscope.load.fields import line_key_values

    lines = [b'{"ph": "X", "ts": 1.5, "dur": 2}', b'{"ph": "i", "s": "t"}', b'{"ts":  7, "args": {"x": 1}}']
    text = b"\n".join(lines)
    pos = line_key_values(text, b"ts", 3)
    assert pos is not None and [text[p:p + 3] for p in pos if p >= 0] == [b"1.5", b"7, "[:3]]
    assert pos[1] == -1
    nested = b"\n".join(lines + [b'{"ts": 1, "args": {"ts": 2}}'])
    assert line_key_values(nested, b"ts", 4) is None  # a line holds the key twice
    assert line_key_values(text.replace(b'"s": "t"', b'"s": "\\u0074"'), b"ts", 3) is None  # an escape
    # inside a string both quotes of "ts": are escaped, so the key's text never appears there
    in_string = text.replace(b'"s": "t"', b'"s": "x\\"ts\\": 9"')
    got = line_key_values(in_string, b"ts", 3)
    assert got is not None and got[1] == -1 and (got >= 0).sum() == 2
