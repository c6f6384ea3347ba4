"""The parse's head start (kernscope.load.headstart): the pieces it scans are the parse's own, and the table a parse
makes with them equals the one it makes without (real traces, plain and projected), whatever the head start reached."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest
from conftest import TRACES, needs_traces

from kernscope.analyze.needs import analyze_projection
from kernscope.load import document, headstart
from kernscope.load.nativelib import scanner
from kernscope.load.scanslots import slots_of
from kernscope.load.source import Limits, TraceSource, open_trace
from kernscope.pipeline import load

pytestmark = pytest.mark.skipif(scanner() is None, reason="the compiled library was not built")

REAL = ["hta/v100_ns_resolution.pt.trace.json.gz", "hta/v100_2rank_nccl_rank1.json.gz",
        "tracelens/h100_google_owlv2-large-patch14-ensemble__1016001.json.gz"]


def _plain(tmp_path: Path, name: str) -> Path:
    out = tmp_path / (Path(name).name.removesuffix(".gz"))
    out.write_bytes(gzip.decompress((TRACES / name).read_bytes()))
    return out


def _begin(path: Path, projection: object, chunk: int) -> headstart.HeadStart | None:
    p = projection
    drops = p is not None and p.drops_events  # type: ignore[attr-defined]
    return headstart.HeadStart.begin(str(path), slots_of(p.args if p is not None else None),  # type: ignore[attr-defined]
                                     p.drop_phases if drops else (), p.drop_cats if drops else (), chunk)  # type: ignore[attr-defined]


@needs_traces
@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("projected", [True, False])
def test_a_parse_with_a_head_start_makes_the_same_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str,
                                                          projected: bool) -> None:
    path = _plain(tmp_path, name)
    chunk = 1 << 18  # small pieces: many of them
    monkeypatch.setattr(document, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(headstart, "HEAD_MIN_BYTES", 0)
    monkeypatch.setattr(headstart, "RACY_NS", 0)  # (a file just written: its change time is now)
    projection = analyze_projection(None) if projected else None
    want = load(path, cache=False, projection=projection)
    head = _begin(path, projection, chunk)
    assert head is not None
    head._thread.join()  # (every piece scanned ahead)
    scanned = head.scanned
    assert scanned >= os.path.getsize(path) // chunk - 2
    got = load(path, cache=False, projection=projection, head=head)
    for table in ("events", "gpu", "flows", "steps"):
        assert getattr(got, table).equals(getattr(want, table)), table
    assert got.stats.projected_out == want.stats.projected_out
    # the pieces it scanned are the splitter's: every one was taken
    readers = got.stats.readers if hasattr(got.stats, "readers") else None
    if readers is not None:
        assert readers.get(headstart.AHEAD) == scanned


@needs_traces
def test_a_head_start_stopped_early_leaves_the_rest_to_the_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _plain(tmp_path, REAL[0])
    monkeypatch.setattr(document, "CHUNK_BYTES", 1 << 18)
    monkeypatch.setattr(headstart, "HEAD_MIN_BYTES", 0)
    monkeypatch.setattr(headstart, "RACY_NS", 0)  # (a file just written: its change time is now)
    projection = analyze_projection(None)
    want = load(path, cache=False, projection=projection)
    head = _begin(path, projection, 1 << 18)
    assert head is not None
    got = load(path, cache=False, projection=projection, head=head)  # (claimed at once: it stops where it is)
    assert got.events.equals(want.events) and got.gpu.equals(want.gpu) and got.flows.equals(want.flows)


@needs_traces
def test_scans_that_are_not_the_parses_are_not_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _plain(tmp_path, REAL[1])
    monkeypatch.setattr(document, "CHUNK_BYTES", 1 << 18)
    monkeypatch.setattr(headstart, "HEAD_MIN_BYTES", 0)
    monkeypatch.setattr(headstart, "RACY_NS", 0)  # (a file just written: its change time is now)
    # another piece size, another projection's slots: the parse scans every piece itself
    for chunk, projection in ((1 << 17, analyze_projection(None)), (1 << 18, None)):
        head = _begin(path, projection, chunk)
        assert head is not None
        head._thread.join()
        got = load(path, cache=False, projection=analyze_projection(None), head=head)
        assert headstart.AHEAD not in got.stats.readers if hasattr(got.stats, "readers") else True
        assert head._closed  # (its outputs freed)
    # the file changed after the head start opened it: its identity differs, nothing is taken
    head = _begin(path, analyze_projection(None), 1 << 18)
    assert head is not None
    head._thread.join()
    os.utime(path, None)
    claim = head.claim(headstart.Spec(headstart.identity(str(path)), head.spec.slots, head.spec.drop_phases,
                                      head.spec.drop_cats, head.spec.chunk))
    assert claim is None and head._closed


def test_no_head_start_for_small_gzipped_or_fresh_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = b",".join(b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d, "dur": 1}' % i
                       for i in range(20_000))
    text = b'{"traceEvents": [' + events + b"]}"
    plain, gz = tmp_path / "t.json", tmp_path / "t.json.gz"
    plain.write_bytes(text)
    gz.write_bytes(gzip.compress(text))
    slots = slots_of(None)
    assert headstart.HeadStart.begin(str(plain), slots, (), (), 1 << 16) is None  # (under HEAD_MIN_BYTES)
    monkeypatch.setattr(headstart, "HEAD_MIN_BYTES", 0)
    assert headstart.HeadStart.begin(str(plain), slots, (), (), 1 << 16) is None  # (written just now: racy)
    monkeypatch.setattr(headstart, "RACY_NS", 0)
    assert headstart.HeadStart.begin(str(gz), slots, (), (), 1 << 16) is None  # (gzip: not a mapped text)
    head = headstart.HeadStart.begin(str(plain), slots, (), (), 1 << 16)
    assert head is not None
    head._thread.join()
    # its pieces are the splitter's (blanks of every kind Python's \s takes in the boundaries are another test's)
    pieces = list(document.Splitter(_source(plain), _limits(), chunk_bytes=1 << 16).pieces())
    assert [(p.offset, len(p.text)) for p in pieces[:-1]] == [(head._pieces[i].off, head._pieces[i].len)
                                                              for i in range(head.scanned)]
    head.close()


def test_pieces_cut_at_blanks_of_every_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seps = [b",", b" ,\n", b"\t,\r\n  ", b"\x0b,\x0c"]
    events = b"".join((b"," if i == 0 else seps[i % len(seps)]) + b'{"ph": "i", "name": "a}, {b", "ts": %d}' % i
                      for i in range(6000))[1:]
    plain = tmp_path / "t.json"
    plain.write_bytes(b'{"traceEvents": [' + events + b"]}")
    monkeypatch.setattr(headstart, "HEAD_MIN_BYTES", 0)
    monkeypatch.setattr(headstart, "RACY_NS", 0)  # (a file just written: its change time is now)
    head = headstart.HeadStart.begin(str(plain), slots_of(None), (), (), 4096)
    assert head is not None
    head._thread.join()
    pieces = list(document.Splitter(_source(plain), _limits(), chunk_bytes=4096).pieces())
    assert head.scanned == len(pieces) - 1 > 10
    assert [(p.offset, len(p.text)) for p in pieces[:-1]] == [(head._pieces[i].off, head._pieces[i].len)
                                                              for i in range(head.scanned)]
    head.close()


def _source(path: Path) -> TraceSource:
    return open_trace(str(path))


def _limits() -> Limits:
    return Limits()
