"""The gzip head start (kernscope.load.gzhead): the pieces it inflates and scans are the parse's own, the table a parse
makes with them equals the one it makes without (real traces, plain and projected), and where it stops (a piece
the scanner declines, a second gzip member, a damaged or truncated stream, a document it cannot begin) the parse reads
the file itself: the same tables, the same errors."""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import TRACES, needs_traces

from kernscope import replay
from kernscope.analyze.needs import analyze_projection
from kernscope.errors import TraceError
from kernscope.load import document, gzhead
from kernscope.load.nativelib import scanner
from kernscope.load.scanslots import slots_of
from kernscope.load.source import Limits, open_trace
from kernscope.pipeline import load

pytestmark = pytest.mark.skipif(scanner() is None or gzhead._zlib_functions() is None,
                                reason="the compiled library was not built, or zlib-ng's functions are not exported")

REAL = ["hta/v100_ns_resolution.pt.trace.json.gz", "hta/v100_2rank_nccl_rank1.json.gz",
        "tracelens/h100_google_owlv2-large-patch14-ensemble__1016001.json.gz"]
CHUNK = 1 << 18  # small pieces: many of them


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(document, "CHUNK_BYTES", CHUNK)
    monkeypatch.setattr(gzhead, "HEAD_MIN_BYTES", 0)
    monkeypatch.setattr(gzhead, "RACY_NS", 0)  # (a file just written: its change time is now)


def _begin(path: Path, projection: object = None, chunk: int = CHUNK) -> gzhead.GzHeadStart | None:
    p = projection
    drops = p is not None and p.drops_events  # type: ignore[attr-defined]
    return gzhead.GzHeadStart.begin(str(path), slots_of(p.args if p is not None else None),  # type: ignore[attr-defined]
                                    p.drop_phases if drops else (), p.drop_cats if drops else (), chunk)  # type: ignore[attr-defined]


def _same(got: object, want: object) -> None:
    for table in ("events", "gpu", "flows", "steps"):
        assert getattr(got, table).equals(getattr(want, table)), table
    assert got.metadata == want.metadata  # type: ignore[attr-defined]
    assert got.stats.projected_out == want.stats.projected_out  # type: ignore[attr-defined]


def _ahead(path: Path, **options: object) -> tuple[object, int]:
    """The trace loaded, and the pieces its parse took from a head start (its label in the load's timings)."""
    timings: list[tuple[str, float]] = []
    trace = load(path, cache=False, timings=timings, **options)  # type: ignore[arg-type]
    found = [re.search(r"\((\d+) scanned ahead\)", phase) for phase, _ in timings]
    return trace, next((int(m.group(1)) for m in found if m), 0)


def _events(n: int, name: bytes = b"k") -> bytes:
    return b",".join(b'{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %d, "dur": 1, '
                     b'"args": {"correlation": %d}}' % (name, i, i) for i in range(n))


@needs_traces
@pytest.mark.parametrize(("name", "projected", "wait"), [(REAL[0], True, True), (REAL[0], False, False),
                                                         (REAL[1], True, False), (REAL[2], False, True)])
def test_a_parse_with_a_gzip_head_start_makes_the_same_tables(monkeypatch: pytest.MonkeyPatch, name: str,
                                                               projected: bool, wait: bool) -> None:
    if wait:
        monkeypatch.setattr(gzhead, "AHEAD_PIECES", 1 << 20)  # (it may run ahead of a parse that has not begun)
    path = TRACES / name
    projection = analyze_projection(None) if projected else None
    want = load(path, cache=False, projection=projection)
    head = _begin(path, projection)
    assert head is not None
    if wait:  # (every piece inflated and scanned before the parse begins; else the parse takes them as they come)
        head._thread.join()
        assert head.state == gzhead.GZ_DONE
    got, ahead = _ahead(path, projection=projection, head=head)
    _same(got, want)
    pieces = list(document.Splitter(open_trace(str(path)), Limits(), chunk_bytes=CHUNK).pieces())
    assert ahead == len(pieces) - 1 > 10  # every piece but the last, scanned ahead
    assert [(p.offset, len(p.text)) for p in pieces] == [(head._pieces[i].off, head._pieces[i].len)
                                                         for i in range(head.scanned)]
    assert head._closed


@needs_traces
def test_a_trace_bigger_than_the_pieces_it_may_run_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    # it waits for the parse, two pieces ahead at most
    monkeypatch.setattr(gzhead, "AHEAD_PIECES", 2)
    path = TRACES / REAL[1]
    want = load(path, cache=False)
    head = _begin(path)
    assert head is not None
    time.sleep(0.2)
    assert head.scanned <= 3 and head.state == gzhead.GZ_RUNNING
    _same(load(path, cache=False, head=head), want)


@pytest.mark.parametrize("case", ["declined", "cut_in_a_string", "two_members", "truncated", "damaged", "late_array",
                                  "bare", "bom"])
def test_where_it_stops_the_parse_reads_the_file_itself(tmp_path: Path, case: str) -> None:
    body = _events(20_000)
    text = b'{"schemaVersion": 1, "traceEvents": [' + body + b'], "displayTimeUnit": "ms"}'
    if case == "declined":  # an event the scanner declines (a time with an exponent), mid-way
        text = text.replace(b'"ts": 9000,', b'"ts": 9e3,')
    elif case == "cut_in_a_string":  # boundaries inside strings: pieces cut there do not parse
        text = text.replace(b'"name": "k"', b'"name": "a}, {b"')
    elif case == "late_array":  # the array begins after the first 64 KB of text
        text = b'{"pad": "' + b"x" * 200_000 + b'", "traceEvents": [' + body + b"]}"
    elif case == "bare":
        text = b"[" + body + b"]"
    elif case == "bom":
        text = b"\xef\xbb\xbf" + text
    path = tmp_path / "t.json.gz"
    data = gzip.compress(text, 6)
    if case == "two_members":
        half = len(text) // 2
        data = gzip.compress(text[:half]) + gzip.compress(text[half:])
    elif case == "truncated":
        data = data[: len(data) * 2 // 3]
    elif case == "damaged":
        mid = len(data) * 2 // 3
        data = data[:mid] + bytes(b ^ 0x5A for b in data[mid : mid + 64]) + data[mid + 64 :]
    path.write_bytes(data)
    try:
        want = load(path, cache=False)
    except TraceError as e:
        head = _begin(path)
        assert head is not None
        with pytest.raises(TraceError) as got_error:
            load(path, cache=False, head=head)
        assert str(got_error.value) == str(e)  # (the same message: the parse read the file itself)
        assert head._closed and head.state in (gzhead.GZ_FAILED, gzhead.GZ_STOPPED)
        return
    assert case not in ("truncated", "damaged")
    head = _begin(path)
    assert head is not None
    head._thread.join()  # (the few pieces it may run ahead: all of them)
    done = case in ("bare", "bom")
    assert (head.state == gzhead.GZ_DONE) == done
    got, ahead = _ahead(path, head=head)
    _same(got, want)
    assert (ahead > 0) == done


def test_no_gzip_head_start_for_small_fresh_or_plain_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = b'{"traceEvents": [' + _events(20_000) + b"]}"
    plain, gz = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    gz.write_bytes(gzip.compress(text))
    slots = slots_of(None)
    assert gzhead.GzHeadStart.begin(str(plain), slots, (), (), CHUNK) is None  # (not gzip)
    monkeypatch.setattr(gzhead, "HEAD_MIN_BYTES", len(text) + 1)
    assert gzhead.GzHeadStart.begin(str(gz), slots, (), (), CHUNK) is None  # (inflates to less: its trailer says)
    monkeypatch.setattr(gzhead, "HEAD_MIN_BYTES", 0)
    monkeypatch.setattr(gzhead, "RACY_NS", 10**12)
    assert gzhead.GzHeadStart.begin(str(gz), slots, (), (), CHUNK) is None  # (written just now: racy)
    monkeypatch.setattr(gzhead, "RACY_NS", 0)
    head = gzhead.GzHeadStart.begin(str(gz), slots, (), (), CHUNK)
    assert head is not None
    # room for the pieces of MAX_RATIO times the file at least (a trace over 4 GiB: its trailer's size wraps)
    assert len(head._pieces) >= gzhead.MAX_RATIO * gz.stat().st_size // CHUNK > len(text) // CHUNK
    head.close()  # (stopped and freed without a parse)
    assert head._closed and head.state in (gzhead.GZ_DONE, gzhead.GZ_STOPPED)


def test_scans_that_are_not_the_parses_are_not_taken(tmp_path: Path) -> None:
    text = b'{"traceEvents": [' + _events(20_000) + b"]}"
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(text))
    want = load(gz, cache=False)
    for chunk, projection in ((CHUNK // 2, None), (CHUNK, analyze_projection(None))):  # another piece size, slots
        head = _begin(gz, projection, chunk)
        assert head is not None
        got, ahead = _ahead(gz, head=head)
        _same(got, want)
        assert ahead == 0 and head._closed
    head = _begin(gz)
    assert head is not None
    os.utime(gz, None)  # (changed after the head start opened it: its identity differs)
    _same(load(gz, cache=False, head=head), want)
    assert head._closed


def test_the_command_starts_one_for_a_large_gzipped_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = b'{"traceEvents": [' + _events(60_000) + b"]}"
    gz, small = tmp_path / "t.json.gz", tmp_path / "out.json.gz"
    gz.write_bytes(gzip.compress(text, 1))
    small.write_bytes(gzip.compress(b"{}"))
    monkeypatch.setattr(replay, "GZ_MIN_STORED", 1 << 10)
    head = replay._head_start(["analyze", str(gz), "-o", str(small)])
    assert isinstance(head, gzhead.GzHeadStart)
    head.close()
    for own in ("--salvage", "--sources", "--read-all", "--roofline"):  # (the parse reads otherwise: not its scans)
        assert replay._head_start(["analyze", str(gz), own]) is None, own
    monkeypatch.setenv("KERNSCOPE_NO_HEADSTART", "1")
    assert replay._head_start(["analyze", str(gz)]) is None


def test_it_needs_neither_numpy_nor_polars() -> None:
    # it runs while the command imports them: importing them itself would only wait for that
    code = ("import sys; import kernscope.load.gzhead; from kernscope.load import document; "
            "print(sorted(m for m in ('numpy', 'polars') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_pieces_cut_at_json_blanks_and_across_inflate_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # boundaries with every blank JSON takes; and one whose 300 KB of blanks span the 1 MB of text the thread inflates
    # first (it inflates 1 MB at a time): it sees that boundary begin, keeps its '}', and finds its '{' after the next
    # step. A 20 KB event before it puts a piece's cut there. The cuts must be the splitter's all the same
    monkeypatch.setattr(document, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(gzhead, "AHEAD_PIECES", 1 << 20)  # (it runs ahead of a parse that has not begun)
    seps = [b",", b" ,\n", b"\t,\r\n  ", b"\r,\t"]

    def run(first: int, n: int) -> bytes:
        return b"".join((b"," if i == first else seps[i % len(seps)])
                        + b'{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d, "dur": 1}'
                        % (i % 7, i) for i in range(first, first + n))[1:]

    head_text = b'{"traceEvents": [' + run(0, 10_000)
    assert 800_000 < len(head_text) < 1_000_000 - 20_000
    long_event = b',{"ph": "X", "cat": "kernel", "name": "long", "pid": 0, "tid": 7, "ts": 10000, "dur": 1, ' \
                 b'"args": {"note": "' + b"x" * 20_000 + b'"}}'
    text = head_text + long_event + b" " * 300_000 + b",\n" + run(10_001, 5000) + b"]}"
    assert len(head_text) + len(long_event) < 1 << 20 < len(head_text) + len(long_event) + 300_000
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text, 1))
    want = load(path, cache=False)
    head = _begin(path, chunk=4096)
    assert head is not None
    head._thread.join()
    assert head.state == gzhead.GZ_DONE
    pieces = list(document.Splitter(open_trace(str(path)), Limits(), chunk_bytes=4096).pieces())
    assert len(pieces) > 200 and any(p.offset + len(p.text) == len(head_text) + len(long_event) for p in pieces)
    assert [(p.offset, len(p.text)) for p in pieces] == [(head._pieces[i].off, head._pieces[i].len)
                                                         for i in range(head.scanned)]
    got, ahead = _ahead(path, head=head)
    _same(got, want)
    assert ahead == len(pieces) - 1
