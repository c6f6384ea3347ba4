"""Cutting a streamed (gzip) document: finding the event array's start and the cuts between events look at each
byte of the stream a bounded number of times, and find what a search of the whole text finds."""

from __future__ import annotations

import gzip
import json
import random
import re

import pytest

from kernscope.errors import TraceError
from kernscope.load import document, source
from kernscope.load.document import Splitter, _head, _HeadFinder

_META = '"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "H100"}]'
HEADS = [
    b'{"traceEvents": [{"ph": "X"}]}',
    b'  \n\t\x0b\x0c {"x": 1, "traceEvents"  :  \n [{"ph": "X"}]}',
    b'[{"ph": "X"}]',
    b'\n\n   [{"ph": "X"}]',
    ("{" + _META + ', "traceEvents": [{"ph": "X"}]}').encode(),
    b'{"a": "q", "traceEvents" \n\n : \t [{"ph": "X"}]}',
    b'{"k": "traceEvents", "m": "\\"traceEvents\\"", "traceEvents": [{}]}',  # the word in strings first
    b'{"k": "' + b"x" * 3000 + b'", "traceEvents": [{}]}',  # a long value before the key
    b'{"k": "' + b" " * 3000 + b'"' + b" " * 500 + b', "traceEvents": [{}]}',  # blanks after a closing quote
    b'{"a": 1,, "traceEvents": [{}]}',  # the metadata before the key does not decode: None throughout
    b'{"traceEvents"' + b" " * 700 + b":" + b" " * 700 + b"[{}]}",  # a gap longer than a block
    b" " * 5000,  # blanks only
    b"xyz",  # not JSON
    b'   {"a": [1, 2, {"b": "traceEvents"}], "c": {"traceEvents": 1}, "traceEvents": [',
]


def _result(fn, text):
    try:
        return fn(text)
    except TraceError as e:
        return ("error", str(e))


@pytest.mark.parametrize("doc", HEADS, ids=range(len(HEADS)))
def test_the_head_of_a_growing_buffer_is_the_head_of_each_prefix(doc):
    """After each block the finder answers what a search of the whole buffer answers (the stream stops at its
    first answer), for blocks of 1 to 9 bytes and random sizes: every place a key, a quote or a gap can be cut."""
    rng = random.Random(7)
    splits = [[k] * (len(doc) // k + 1) for k in range(1, 10)] + [[rng.randint(1, 64) for _ in range(len(doc))]
                                                                  for _ in range(5)]
    for sizes in splits:
        finder, buf, pos = _HeadFinder("t.json"), bytearray(), 0
        for k in sizes:
            if pos >= len(doc):
                break
            buf += doc[pos : pos + k]
            pos += k
            want, got = _result(lambda t: _head(t, "t.json"), bytes(buf)), _result(finder, buf)
            assert got == want, (sizes[:3], pos)
            if want is not None:
                break


class _Counting:
    """A compiled pattern that adds up how many bytes each search may look at."""

    def __init__(self, rx: re.Pattern[bytes]) -> None:
        self.rx, self.looked = rx, 0

    def search(self, text, pos=0, endpos=None):
        end = len(text) if endpos is None else min(endpos, len(text))
        self.looked += max(0, end - pos)
        return self.rx.search(text, pos, end)


def test_a_long_head_is_searched_once(tmp_path, monkeypatch):
    """A 300 KB metadata value before the events, arriving in 1 KB blocks, is searched for the key about once
    (searching the whole buffer after each block was quadratic: 60 MB of it took 5.8 s)."""
    doc = b'{"k": "' + b"x" * 300_000 + b'", "traceEvents": [{"ph": "X"}]}'
    key = _Counting(document._EVENTS_KEY)
    monkeypatch.setattr(document, "_EVENTS_KEY", key)
    finder, buf, found = _HeadFinder("t.json"), bytearray(), None
    for i in range(0, len(doc), 1024):
        buf += doc[i : i + 1024]
        found = finder(buf)
        if found is not None:
            break
    assert found == ({"k": "x" * 300_000}, False, doc.index(b"[{") + 1)
    assert key.looked < 2 * len(doc)


def _ev(i: int) -> dict:
    return {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 5,
            "args": {"correlation": i, "device": 0, "stream": 7}}


def _separator(i: int, rng: random.Random) -> str:
    """Between events i and i + 1: a comma, or now and then blanks longer than a piece around it (a boundary that
    spans many blocks, cut anywhere in a block)."""
    if i % 97:
        return ","
    gap = " " * rng.randint(70_000, 90_000)
    return (gap + ",", "," + gap, gap[: len(gap) // 2] + "," + gap[len(gap) // 2 :])[i % 3]


@pytest.mark.parametrize("chunk", [100, 1 << 16])
def test_the_cuts_of_a_stream_search_each_byte_once(tmp_path, monkeypatch, chunk):
    """Events with long runs of blanks between some of them, gzipped and streamed in 1 KB blocks into pieces of one
    event (each gap then spans the first boundary past the piece's size) or of 64 KB: the cuts are the plain file's,
    and the boundary search looks at about each byte once (it searched the whole buffer again after each block: 320 MB
    of blanks took 19 s to refuse)."""
    rng = random.Random(3)
    events = [json.dumps(_ev(i)) for i in range(3000)]
    for i in range(50, 3000, 97):  # and a "}", blanks and a "{" with no comma between them, in a string: no boundary
        ev = _ev(i)
        ev["args"]["note"] = "k}" + " " * rng.randint(70_000, 90_000) + "{k"
        events[i] = json.dumps(ev)
    text = ('{"traceEvents": [' + "".join(e + _separator(i, rng) for i, e in enumerate(events[:-1])) + events[-1]
            + "]}").encode()
    plain, packed = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    packed.write_bytes(gzip.compress(text))
    monkeypatch.setattr(source, "BLOCK_BYTES", 1 << 10)
    cuts = {}
    for path in (plain, packed):
        boundary = _Counting(document._BOUNDARY)
        monkeypatch.setattr(document, "_BOUNDARY", boundary)
        src = source.open_trace(str(path))
        try:
            cuts[path] = [(p.offset, bytes(p.text), p.sep, p.final) for p in
                          Splitter(src, source.Limits(), chunk_bytes=chunk).pieces()]
        finally:
            src.close()
        monkeypatch.setattr(document, "_BOUNDARY", boundary.rx)
        if path == packed:
            assert boundary.looked < 2 * len(text)
    assert len(cuts[packed]) > 5 and cuts[packed] == cuts[plain]


def test_blank_runs_are_skipped_as_a_loop_per_byte_would():
    """The first and last non-blank bytes (JSON's blanks only) of every slice of texts with blank runs of every
    length around the doubling windows' sizes, against a loop per byte (which took 5 s over 30 MB of blanks)."""
    rng = random.Random(5)
    for _ in range(40):
        parts = [rng.choice([b"", b"x", b"}", b"\x0b", b"]"]) + bytes(rng.choice(b" \t\r\n") for _ in
                                                                   range(rng.choice([0, 1, 63, 64, 65, 127, 200, 700])))
                 for _ in range(rng.randint(1, 4))]
        b = b"".join(parts)
        last_before, first_from = [-1] * (len(b) + 1), [len(b)] * (len(b) + 1)  # by a loop per byte
        for i, c in enumerate(b):
            last_before[i + 1] = i if c not in b" \t\r\n" else last_before[i]
        for i in range(len(b) - 1, -1, -1):
            first_from[i] = i if b[i] not in b" \t\r\n" else first_from[i + 1]
        for start in range(0, len(b) + 1, 7):
            for stop in range(start, len(b) + 1, 11):
                assert document._last_nonblank(b, stop) == last_before[stop]
                assert document._first_nonblank(b, start, stop) == min(first_from[start], stop)


@pytest.mark.parametrize("gz", [False, True])
def test_blanks_around_the_arrays_end_are_read_through(tmp_path, gz):
    """3 MB of blanks before the event array's ``]`` and after it: the events and the metadata after them are read."""
    from kernscope.pipeline import load

    body = ",".join(json.dumps(_ev(i)) for i in range(50))
    text = ('{"traceEvents": [' + body + " " * 3_000_000 + "]" + " \n" * 1_500_000 + ', "deviceProperties": [] }').encode()
    p = tmp_path / ("t.json.gz" if gz else "t.json")
    p.write_bytes(gzip.compress(text) if gz else text)
    t = load(str(p), cache=False)
    assert t.gpu.height == 50 and t.metadata.get("deviceProperties") == []
