"""The compiled Kineto scanner (``load/_kineto.c`` through ``load/fastscan.py``): its tables equal the other
readers' on every real trace, with and without a projection, and on mutants of real traces; what it does not
handle it declines (the piece then takes the other readers), never reads differently."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import TRACES, needs_traces, real_traces, trace_id, write_trace
from polars.testing import assert_frame_equal

import kernscope
from kernscope.analyze.needs import analyze_projection
from kernscope.errors import TraceError
from kernscope.load import document, fastscan, kineto
from kernscope.load.argspec import ARG_FIELDS, LOADER_ARGS
from kernscope.load.kineto import parse_source
from kernscope.load.source import open_trace
from kernscope.testing import fuzz


@pytest.fixture(autouse=True)
def _built():
    if not fastscan.available():
        pytest.fail("the compiled scanner was not built (make install compiles src/kernscope/load/_kineto.c)")
DATA = Path(__file__).parent / "data" / "kineto"
STACKS = DATA / "h100_gpt_stack_shapes.pt.trace.json.gz"  # with_stack + record_shapes, H100 (examples/record_example_trace.py --full)
EXAMPLE = Path(__file__).parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


def _parse(path, monkeypatch, native: bool, projection=None):
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "0" if native else "1")
    src = open_trace(path)
    try:
        return parse_source(src, projection=projection)
    finally:
        src.close()


def _same(a, b) -> None:
    assert_frame_equal(a.events, b.events)
    assert_frame_equal(a.flows, b.flows)
    assert_frame_equal(a.meta_events, b.meta_events)
    assert a.metadata == b.metadata and a.projected_out == b.projected_out == 0


def test_test_data_trace_with_stacks_and_shapes_is_ours():
    """The with_stack + record_shapes trace recorded on an H100 by examples/record_example_trace.py --full."""
    d = json.loads(gzip.decompress(STACKS.read_bytes()))
    cats = [e.get("cat") for e in d["traceEvents"]]
    assert cats.count("python_function") > 3000 and sum("Input Dims" in e.get("args", {}) for e in d["traceEvents"]) > 4000


@pytest.mark.parametrize("path", [STACKS, EXAMPLE], ids=["h100_stack_shapes", "bundled_h200"])
def test_equal_tables_on_our_recordings(path, monkeypatch):
    _same(_parse(path, monkeypatch, True), _parse(path, monkeypatch, False))


@needs_traces
@pytest.mark.parametrize("path", real_traces(), ids=trace_id)
def test_equal_tables_on_every_real_trace(path, monkeypatch):
    _same(_parse(path, monkeypatch, True), _parse(path, monkeypatch, False))


def _check_projected(path, monkeypatch) -> None:
    """A projected native load = the full load without exactly the events the projection drops; unread args
    null; the skipped events counted; the earliest skipped start reported."""
    proj = analyze_projection(None)
    full, got = _parse(path, monkeypatch, True), _parse(path, monkeypatch, True, proj)
    unread = [f.column for f in ARG_FIELDS if f.column not in proj.args and f.column not in LOADER_ARGS]
    ev = full.events
    kept_idx = got.events["idx"].implode()
    assert_frame_equal(ev.filter(pl.col("idx").is_in(kept_idx)).drop(unread), got.events.drop(unread))
    assert got.events.select(pl.col(unread).null_count()).row(0) == (got.events.height,) * len(unread)
    gone = ev.filter(~pl.col("idx").is_in(kept_idx))
    name = gone["name"].cast(pl.String)
    by_phase = gone["ph"].cast(pl.String).is_in(list(proj.drop_phases))
    by_cat = (gone["ph"].cast(pl.String) == "X") & gone["cat"].cast(pl.String).is_in(list(proj.drop_cats))
    rx = proj.compiled()
    assert (by_phase | by_cat).all()
    assert not any(rx(n.encode()) for n in name.filter(by_cat & ~by_phase).to_list())
    flows_gone = full.flows.height - got.flows.height
    assert got.projected_out == gone.height + flows_gone
    x = gone.filter(by_cat & ~by_phase)
    if x.height:
        assert got.projected_first_ts == pytest.approx(x["ts"].min() / 1000.0)
    # every python_function event not wanted by name is gone (the numpy projection keeps some it cannot judge)
    left = got.events.filter((pl.col("cat").cast(pl.String) == "python_function") & (pl.col("ph").cast(pl.String) == "X"))
    assert all(rx(n.encode()) for n in left["name"].cast(pl.String).to_list())


def test_projection_drops_exactly_what_it_should_on_stacks(monkeypatch):
    _check_projected(STACKS, monkeypatch)


@needs_traces
@pytest.mark.parametrize("name", ["hta/v100_2rank_nccl_rank1.json.gz", "tracelens/b200_eager_trace.json.gz",
                                  "tracelens/mi300x_xdit_sd35_rank0.json.gz", "tracelens/rocm_vllm_piecewise_hipgraph.json.gz"])
def test_projection_drops_exactly_what_it_should(name, monkeypatch):
    _check_projected(TRACES / name, monkeypatch)


# -- what it reads, and what it declines ---------------------------------------------------------------------
def _events(text: str):
    got = fastscan.scan(text.encode())
    return None if got is None else got.table


def test_values_it_reads():
    t = _events('{"ph": "X", "cat": "kernel", "name": "caf\\u00e9 \\"k\\" \\ud83d\\ude00", "pid": 7, "tid": "stream 7", '
                '"ts": 1.5, "dur": -2.001, "id": 12, "args": {"correlation": 5, "bytes": "0x1f", "stream": "8", '
                '"device": "", "kind": "Memcpy", "Input Dims": [[1, 2], []], "name": "x"}},\n'
                '{"ph": "i", "ts": null}, {}')
    assert t is not None and t.height == 3
    r = t.row(0, named=True)
    assert r["name"] == 'café "k" 😀' and r["pid"] == "7" and r["tid"] == "stream 7" and r["flow_id"] == "12"
    assert (r["ts"], r["dur"], r["ts_missing"], r["dur_missing"]) == (1500, -2001, False, False)
    assert (r["correlation"], r["bytes"], r["stream"], r["gpu_kind"], r["meta_name"]) == (5, 31, 8, "Memcpy", "x")
    assert "device" not in t.columns  # an args column without a value in the piece is left out (the join makes it null)
    assert t.row(1, named=True)["ts_missing"] and t.row(2, named=True)["ph"] is None
    assert t.schema["ph"] == pl.Categorical and t.schema["flow_id"] == pl.String and t.schema["ts"] == pl.Int64


@pytest.mark.parametrize("text", [
    '{"ts": 1.2345}',  # 4 decimals: the readers round; they decide
    '{"ts": 1e3}',  # an exponent
    '{"ts": "5"}',  # a time as a string
    '{"args": {"correlation": 5.0}}',  # an integral float arg
    '{"args": {"correlation": "+7"}}',
    '{"args": {"correlation": 99999999999999999999}}',  # beyond int64
    '{"name": true}', '{"name": 1.5}', '{"args": []}',
    '{"ph": "X", "ph": "i"}', '{"args": {"stream": 1, "stream": 2}}',  # a tracked key twice
    '{"p\\u0068": "X"}',  # a key with an escape
    '{"name": "\\ud800"}',  # a lone surrogate in a read string
    '{"ph": "X",}', '{"ph": "X"},', '{"ph": "X"} {"ph": "i"}', '[{"ph": "X"}]', '{"ph": "X', '{"ph": "\x01"}',
    '{"a": [1, 2,]}', '{"a": 01}', '{"a": tru}', '{"a": "\\x"}',
    '{"a": ' + "[" * 1001 + "]" * 1001 + "}",
])
def test_it_declines(text):
    assert _events(text) is None


def test_invalid_utf8_is_declined():
    assert fastscan.scan(b'{"name": "a\xff"}') is None and fastscan.scan(b'{"x": "\xed\xa0\x80"}') is None
    assert fastscan.scan('{"name": "ü"}'.encode()) is not None


@pytest.mark.parametrize("layout", ["compact", "lines"])
@pytest.mark.parametrize("reader", ["scanner first", "other readers", "msgspec"])
def test_a_lone_surrogate_escape_reads_as_the_replacement_character(layout, reader, tmp_path, monkeypatch):
    """A name holding an escaped lone UTF-16 surrogate (valid JSON grammar, no character: Python's json writes one for
    a broken str) reads as U+FFFD whichever reader reads its piece; polars' reader made it a NUL, and msgspec refused
    it (the long fuzz run's seed 29 rejected a trace so). A pair is its character; an escaped backslash before
    ``ud800`` is text."""
    from kernscope.load import chunk

    names = {"k0": "\\ud800k0", "k1": "\\udc00", "k2": "\\ud83d\\ude00", "k3": "\\\\ud800", "k4": "a\\ud800\\ud800b"}
    want = {"k0": "\ufffdk0", "k1": "\ufffd", "k2": "\U0001f600", "k3": "\\ud800", "k4": "a\ufffd\ufffdb"}
    evs = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i + 0.5, "dur": 1.0,
            "args": {"correlation": i}} for i in range(40)]
    text = json.dumps({"traceEvents": evs}, indent=None if layout == "compact" else 2)
    for k, v in names.items():
        text = text.replace(f'"{k}"', f'"{v}"', 1)
    p = tmp_path / "t.json"
    p.write_text(text)
    if reader == "msgspec":  # the fallback of a piece polars' reader refuses for another reason
        monkeypatch.setattr(chunk, "_polars", lambda *a, **k: (_ for _ in ()).throw(ValueError("declined")))
        monkeypatch.setattr(chunk, "_read_lines", lambda *a, **k: (None, ValueError("declined")))
    got = _parse(p, monkeypatch, reader == "scanner first").events
    read = dict(zip(got["idx"].to_list(), got["name"].cast(pl.String).to_list()))
    assert {f"k{i}": read[i] for i in range(5)} == want
    assert read[5] == "k5" and len(read) == 40


def test_a_long_name_is_capped_as_the_readers_cap_it(tmp_path, monkeypatch):
    long = "k" * 5000
    p = write_trace(tmp_path / "t.json", [{"ph": "X", "cat": "kernel", "name": long, "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
                                           "args": {"correlation": 1}}] * 3)
    a, b = _parse(p, monkeypatch, True), _parse(p, monkeypatch, False)
    _same(a, b)
    assert len(a.events["name"].cast(pl.String)[0].encode()) < 4200


def test_declined_pieces_take_the_other_readers(tmp_path, monkeypatch):
    """Odd events in a trace of several pieces: their pieces are read by the other readers, the rest by the
    scanner; the same table as the other readers give alone."""
    evs: list[dict] = [{"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": i + 0.5, "dur": 1.0,
                        "args": {"correlation": i}} for i in range(20_000)]
    evs[700]["args"]["correlation"] = 700.0  # the readers take an integral float
    evs[1500]["ts"] = 1500.50049  # and round a 5th decimal
    p = write_trace(tmp_path / "t.json", evs)
    runs: list[tuple] = []
    real = fastscan._run

    def counted(*a, **kw):
        runs.append(real(*a, **kw))
        return runs[-1]

    monkeypatch.setattr(fastscan, "_run", counted)
    monkeypatch.setattr(document, "CHUNK_BYTES", 1 << 20)  # several pieces
    a = _parse(p, monkeypatch, True)
    assert sum(r[0] < 0 for r in runs) == 1 and sum(r[0] > 0 for r in runs) >= 2  # one piece declined, the others read
    _same(a, _parse(p, monkeypatch, False))
    assert a.events.filter(pl.col("name") == "k1500")["ts"].item() == 1_500_500
    assert a.events.filter(pl.col("name") == "k700")["correlation"].item() == 700


def test_args_a_piece_has_no_value_of_are_left_out_and_joined_as_nulls(tmp_path, monkeypatch):
    """The scanner leaves an args column out of a piece where no event has a value of it: the joined table equals the
    other readers' where the column has values in some pieces only (with a piece of the other readers between them),
    and a column no piece has a value of is one null literal, as theirs is."""
    evs: list[dict] = [{"ph": "X", "cat": "kernel", "name": f"k{i % 50}", "pid": 0, "tid": 7, "ts": i + 0.5,
                        "dur": 1.0, "args": {"correlation": i}} for i in range(12_000)]
    for i in range(9_000, 12_000):  # the last pieces only: a stream and a communicator's name
        evs[i]["args"].update({"stream": 7, "Process Group Name": "pg0"})
    evs[5_000]["args"]["correlation"] = 5000.0  # a middle piece goes to the other readers
    p = write_trace(tmp_path / "t.json", evs)
    monkeypatch.setattr(document, "CHUNK_BYTES", p.stat().st_size // 4)
    pieces: list = []
    real = fastscan.scan

    def kept(*a, **kw):
        pieces.append(real(*a, **kw))
        return pieces[-1]

    monkeypatch.setattr(kineto, "fastscan", kept)
    scanned, read = _parse(p, monkeypatch, True), _parse(p, monkeypatch, False)
    tables = sorted((x.table for x in pieces if x is not None), key=lambda t: t["ts"].min())  # (threads finish in any order)
    assert len(tables) >= 2 and len(tables) < len(pieces)  # a piece declined
    assert "stream" not in tables[0].columns and "stream" in tables[-1].columns
    assert "pg_name" not in tables[0].columns and "python_id" not in tables[-1].columns
    _same(scanned, read)
    ev = scanned.events
    assert ev.filter(pl.col("ts") < 9_000_000)["stream"].null_count() == 9_000 and ev["stream"].drop_nulls().to_list() == [7] * 3_000
    assert ev["pg_name"].cast(pl.String).drop_nulls().unique().to_list() == ["pg0"]
    assert ev["python_id"].null_count() == ev.height


def _mixed_phases(n: int) -> list[dict]:
    """Events of every phase a piece may split off (flow arrows, metadata, counters) among kernels, launches and Python
    events (those a projection drops)."""
    evs: list[dict] = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "host"}},
                       {"ph": "M", "name": "thread_sort_index", "pid": 0, "tid": 7, "args": {"sort_index": 3}}]
    for i in range(n):
        t = 10.0 * i
        evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 0, "tid": 7, "ts": t, "dur": 2.0,
                    "args": {"correlation": i, "external id": i}})
        evs.append({"ph": "s", "id": i, "pid": 0, "tid": 7, "ts": t, "cat": "ac2g", "name": "ac2g"})
        evs.append({"ph": "X", "cat": "python_function", "name": f"f{i % 7}", "pid": 0, "tid": 7, "ts": t, "dur": 1.0})
        evs.append({"ph": "X", "cat": "kernel", "name": f"k{i % 9}", "pid": 1, "tid": 3, "ts": t + 3, "dur": 4.0,
                    "args": {"correlation": i, "stream": 3, "device": 0}})
        evs.append({"ph": "f", "id": i, "pid": 1, "tid": 3, "ts": t + 3, "cat": "ac2g", "name": "ac2g", "bp": "e"})
        if i % 50 == 0:
            evs.append({"ph": "C", "name": "mem", "pid": 0, "ts": t, "args": {"bytes": i}})
            evs.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 3, "args": {"name": f"stream {i}"}})
    return evs


@pytest.mark.parametrize("projected", [False, True], ids=["whole", "projected"])
def test_a_split_scan_holds_every_row_of_a_whole_one_in_its_place(projected):
    """``scan(..., split=True)``: the events, flow arrows and metadata events are the rows of an unsplit scan of those
    phases (their columns, in order), each with its ordinal among the piece's events; counters are counted."""
    text = json.dumps(_mixed_phases(600))[1:-1].encode()
    proj = analyze_projection() if projected else None
    whole, split = (fastscan.scan(text, proj.args if proj else None, proj, split=s) for s in (False, True))
    assert whole is not None and split is not None and split.split is not None and whole.split is None
    w = whole.table.with_columns(pl.Series("idx", whole.ordinals if whole.ordinals is not None
                                           else np.arange(whole.table.height)))
    ph = w["ph"].cast(pl.String)
    events, flows, metas = split.table.with_columns(pl.Series("idx", split.ordinals)), split.split.flows_at(0), split.split.metas_at(0)
    assert events is not None and flows is not None and metas is not None
    assert_frame_equal(events, w.filter(~ph.is_in(["s", "f", "t", "M", "C"])).select(events.columns))
    assert_frame_equal(flows, w.filter(ph.is_in(["s", "f"])).select(flows.columns))
    assert_frame_equal(metas, w.filter(ph == "M").select(metas.columns))
    assert flows.height == 1200 and metas.height == 14 and split.split.counters == (ph == "C").sum() == 12
    assert split.split.rows + split.table.height == w.height and split.dropped == whole.dropped == (600 if projected else 0)
    assert "meta_name" in metas.columns and "correlation" not in flows.columns and "flow_id" not in metas.columns


@pytest.mark.parametrize("projected", [False, True], ids=["whole", "projected"])
def test_pieces_split_as_scanned_give_the_tables_of_pieces_split_after(projected, tmp_path, monkeypatch):
    """Counters, metadata and flow arrows split off in every piece by the scanner (in some pieces only, and one piece
    declined to the other readers in between): the tables, event positions and projected-out counts equal those of
    the same pieces scanned whole and split as they are taken (:func:`kineto.split_phases`), and without a projection
    the other readers'."""
    evs = _mixed_phases(3_000)
    mid = next(e for e in evs[len(evs) // 2:] if e["name"] == "cudaLaunchKernel")
    mid["args"]["correlation"] = float(mid["args"]["correlation"])  # (a float: a middle piece goes to the other readers)
    p = write_trace(tmp_path / "t.json", evs)
    monkeypatch.setattr(document, "CHUNK_BYTES", p.stat().st_size // 6)
    proj = analyze_projection() if projected else None
    scanned = _parse(p, monkeypatch, True, proj)
    real = fastscan.scan
    monkeypatch.setattr(kineto, "fastscan", lambda *a, **kw: real(*a, **{**kw, "split": False}))
    references = [_parse(p, monkeypatch, True, proj)] + ([] if projected else [_parse(p, monkeypatch, False)])
    for ref in references:
        assert_frame_equal(scanned.events, ref.events)
        assert_frame_equal(scanned.flows, ref.flows)
        assert_frame_equal(scanned.meta_events, ref.meta_events)
        assert scanned.projected_out == ref.projected_out
    assert scanned.readers == references[0].readers and scanned.readers.get("compiled scanner", 0) >= 4
    assert len(scanned.readers) == 2 and scanned.flows.height == 6_000 and scanned.meta_events.height == 62
    assert (scanned.projected_out > 2_000) if projected else scanned.projected_out == 0
    # (positions in the file's event array: counters and metadata counted)
    k = scanned.events.filter(pl.col("cat").cast(pl.String) == "kernel")
    assert k["idx"].head(3).to_list() == [5, 12, 17] and k["idx"][-1] == len(evs) - 2


@needs_traces
def test_mutants_read_alike(tmp_path, monkeypatch):
    """Mutants of real traces: the scanner-first load and the other readers give the same table, or the same
    one-line error."""
    sources = [TRACES / s for s in ("hta/a100_alexnet_cuda_sync.json.gz", "tracelens/rocm_vllm_decode_full_hipgraph.json.gz",
                                    "hta/mi250_rocm62_minitoy_train.json.gz")]
    r = random.Random(20261127)
    names = sorted(fuzz.MUTATORS)
    outcomes = {"same table": 0, "same error": 0}
    for i in range(90):
        data = gzip.decompress(sources[i % len(sources)].read_bytes())
        p = tmp_path / f"m{i}.json"
        p.write_bytes(fuzz.MUTATORS[names[i % len(names)]](r, data))
        got = []
        for native in (True, False):
            try:
                got.append(_parse(p, monkeypatch, native))
            except TraceError as e:
                got.append(str(e))
        if isinstance(got[0], str) or isinstance(got[1], str):
            assert got[0] == got[1], (names[i % len(names)], got)
            outcomes["same error"] += 1
        else:
            assert_frame_equal(got[0].events, got[1].events)
            assert_frame_equal(got[0].flows, got[1].flows)
            outcomes["same table"] += 1
    assert outcomes["same table"] > 10 and outcomes["same error"] > 10, outcomes


def test_rows_beyond_the_first_guess():
    """Tiny events (more than one per 48 bytes): the scan is redone with room for all."""
    text = ",".join(['{"ph":"i"}'] * 5000)
    t = fastscan.scan(text.encode())
    assert t is not None and t.table.height == 5000 and (t.table["ph"].cast(pl.String) == "i").all()
    assert np.array_equal(t.table["ts_missing"].to_numpy(), np.ones(5000, bool))


def test_a_dictionary_beyond_the_first_guess():
    """Distinct long names are most of the text (more than the first guess of the dictionary's bytes)."""
    names = [f"{i:06d}" + "n" * 300 for i in range(400)]
    t = fastscan.scan(",".join(f'{{"ph": "X", "name": "{n}"}}' for n in names).encode())
    assert t is not None and t.table["name"].cast(pl.String).to_list() == names


def test_dictionary_series_without_pyarrow_equals_the_strings():
    """The scanner's dictionary becomes a String Series by one decode and a split (a NUL in a string: pyarrow)."""
    import numpy as np

    from kernscope.load.fastscan import dictionary_series

    for strings in ([], [""], ["a", "", "é中😀", "x" * 5000, ""], ["with\x00nul", "b"]):
        enc = [s.encode() for s in strings]
        offsets = np.concatenate([[0], np.cumsum([0] + [len(e) for e in enc])]).astype(np.int64)
        got = dictionary_series(offsets, np.frombuffer(b"".join(enc), dtype=np.uint8))
        assert got.dtype == pl.String and got.to_list() == [None, *strings]


def test_strings_of_replaces_invalid_utf8_like_a_decode_of_each():
    """load.strings.strings_of (the XSpace's texts too): invalid bytes replaced within their own string only."""
    import numpy as np

    from kernscope.load.strings import strings_of

    for raw in ([b"ok", b"\xff\xfebad", b"\xe4\xb8", b"", b"\xe4\xb8\xad"], [b"a\x00b", b"\xff"]):
        offsets = np.cumsum([0] + [len(r) for r in raw]).astype(np.int64)
        got = strings_of(offsets, np.frombuffer(b"".join(raw), dtype=np.uint8)).to_list()
        assert got == [r.decode("utf-8", "replace") for r in raw]


@pytest.mark.parametrize("trace", [
    Path(__file__).parent / "data" / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz",  # many Python events
    Path(__file__).parent / "data" / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz",  # instant (memory) events
])
def test_events_the_scanner_drops_itself_give_the_tables_of_dropping_them_after(trace, tmp_path, monkeypatch):
    """Names judged unwanted in earlier pieces are dropped by the compiled scanner unparsed (no row, no args read):
    the tables, positions and counts equal those of parsing every event and dropping them afterwards."""
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(trace.read_bytes()))
    monkeypatch.setattr(document, "CHUNK_BYTES", 1 << 16)  # dozens of pieces: later ones know the names
    dropped_in_c: list[int] = []
    real = fastscan._run

    def counted(*a, **kw):
        out = real(*a, **kw)
        dropped_in_c.append(int(out[6][3]) if out[0] >= 0 else 0)
        return out

    monkeypatch.setattr(fastscan, "_run", counted)
    fast = kernscope.load(plain, cache=False, projection=analyze_projection())
    assert sum(dropped_in_c) > 1000  # the scanner dropped events itself
    monkeypatch.setattr(fastscan._Drops, "of", classmethod(lambda cls, projection, keep: fastscan._NO_DROPS))
    dropped_in_c.clear()
    after = kernscope.load(plain, cache=False, projection=analyze_projection())
    assert sum(dropped_in_c) == 0
    for name in ("events", "gpu", "flows", "steps"):
        assert getattr(fast, name).equals(getattr(after, name)), name
    assert fast.stats == after.stats and fast.stats.projected_out > 0


# -- dropped events matched to the layouts of earlier ones (Layout in _kineto.c) ----------------------------------
_PY = ('{{\n    "ph": "X", "cat": "python_function", "name": "{name}", "pid": 449, "tid": {tid},\n    "ts": {ts}, '
       '"dur": {dur},\n    "args": {{\n      "Python parent id": {parent}, "Python id": {id}, "Ev Idx": {id}\n    }}\n  }}')
_INSTANT = ('{{"ph": "i", "cat": "cpu_instant_event", "name": "{name}", "pid": 449, "tid": {tid}, "ts": {ts}, "s": "t", '
            '"args": {{"Total Reserved": {id}, "Device Name": "{name}"}}}}')
_OP = ('{{\n    "ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 449, "tid": {tid},\n    "ts": {ts}, "dur": {dur},\n'
       '    "args": {{\n      "External id": {id}, "Record function id": 0, "Input Dims": [[8, 8], [8, 8]]\n    }}\n  }}')
# Kineto's "Record Window End": the name before the phase, read before the event is known to be dropped
_NAME_FIRST = '{{\n    "name": "Record Window {id}", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": {ts}\n  }}'
_NAMES = ["model.py(12): forward", "torch/nn/modules/module.py(1751): _call_impl", "ProfilerStep#4", "x.py(3): <lambda>"]


def _layout_text(n: int = 60) -> str:
    evs = []
    for i in range(n):
        form = _OP if i % 7 == 3 else _INSTANT if i % 5 == 4 else _NAME_FIRST if i % 13 == 6 else _PY
        evs.append(form.format(name=_NAMES[i % len(_NAMES)], tid=449 + i % 2, ts=f"{1000 + 2.5 * i:.3f}", dur=f"{1.5 + i:.3f}",
                               parent="null" if i % 11 == 0 else i - 1, id=i))
    return ",\n  ".join(evs)


def _with_layouts_and_without(text: bytes, projected: bool = True):
    """The scanner's result on ``text`` with the analysis projection (every name of _NAMES judged already, so
    the scanner drops their events itself) or without one (every event read), through layouts and without:
    equal, or both declined."""
    proj = analyze_projection()
    keep = proj.compiled()
    for name in _NAMES:
        keep(name.encode())
    if projected:
        got = [fastscan.scan(text, proj.args, proj, keep, layouts=flag) for flag in (True, False)]
    else:
        got = [fastscan.scan(text, layouts=flag) for flag in (True, False)]
    # the piece's dictionary too: the same strings in the same order (those of dropped events included)
    lay = fastscan._layout(proj.args if projected else None)
    drops = fastscan._Drops.of(proj, keep) if projected else fastscan._NO_DROPS
    buf = np.frombuffer(text, dtype=np.uint8)
    runs = [fastscan._run(fastscan.scanner(), buf, lay, len(text) // 2 + 2, roomy=True, drops=drops, layouts=flag)
            for flag in (True, False)]
    assert runs[0][0] == runs[1][0]
    if runs[0][0] >= 0:
        (n, nbytes), (n2, nbytes2) = runs[0][6][:2], runs[1][6][:2]
        assert (n, nbytes) == (n2, nbytes2)
        assert np.array_equal(runs[0][4][: n + 1], runs[1][4][: n + 1]) and np.array_equal(runs[0][5][:nbytes], runs[1][5][:nbytes])
    if got[0] is None or got[1] is None:
        assert got[0] is got[1] is None
        return None
    a, b = got
    assert_frame_equal(a.table, b.table)
    assert (a.dropped, a.dropped_first_ts) == (b.dropped, b.dropped_first_ts)
    if a.ordinals is None or b.ordinals is None:
        assert a.ordinals is None and b.ordinals is None
    else:
        assert np.array_equal(a.ordinals, b.ordinals)
    assert b.via_layouts == b.rows_via_layouts == 0
    return a


def test_dropped_events_matched_to_a_layout_read_as_when_parsed():
    text = _layout_text().encode()
    got = _with_layouts_and_without(text)
    assert got is not None
    # 60 events: 9 cpu_op and 8 Python events named ProfilerStep#4 are kept; 43 dropped (30 Python events, 10
    # instant ones, 3 named before their phase), all but the first of each of the four layouts (Python events with
    # a null and with a numeric parent id, the two kinds of instant events) through a layout
    assert got.table.height == 17 and got.dropped == 43 and got.via_layouts == 39
    assert got.dropped_first_ts == 1000.0
    # the kept ones: the Python events named ProfilerStep#4 are kept by their name, so they make no layout (one of
    # them could be dropped); all cpu_op events but the first read through a layout
    assert got.rows_via_layouts == 8
    everything = _with_layouts_and_without(text, projected=False)
    assert everything is not None and everything.table.height == 60 and everything.dropped == 0
    # all but the first of each of the four layouts (read, a parent id null or not is a value of the same slot)
    assert everything.rows_via_layouts == 60 - 4


@pytest.mark.parametrize("old, new, outcome", [
    ('"ts": 1090.000', '"ts": null', "declined"),  # a dropped X event without a ts: the readers keep it
    ('"ts": 1090.000', '"ts": 1090.0001', "declined"),  # 4 decimals: the readers round
    ('"ts": 1090.000', '"ts": 1e3', "declined"),
    ('"Python id": 36', '"Python id": 036', "declined"),  # not JSON
    ('"Python id": 36', '"Python id": 3.', "declined"),
    ('"Python id": 36', '"Python id": -', "declined"),
    ('"Python id": 36', '"Python id": 3.6e+1', 43),
    ('"Python id": 36', '"Python id": "36"', 43),  # another token: parsed in full
    ('"Python id": 36', '"Python id":  36', 43),  # another byte outside the holes
    ('"name": "model.py(12): forward", "pid": 449, "tid": 449,\n    "ts": 1090.000',
     '"name": "new.py(1): f", "pid": 449, "tid": 449,\n    "ts": 1090.000', 43),  # a new name: a row, judged after
    ('"name": "model.py(12): forward", "pid": 449, "tid": 449,\n    "ts": 1090.000',
     '"name": "model.py(12): forwar\\u0064", "pid": 449, "tid": 449,\n    "ts": 1090.000', 43),  # escaped: parsed
    ('"name": "model.py(12): forward", "pid": 449, "tid": 449,\n    "ts": 1090.000',
     '"name": "model.py(12): forw\x01rd", "pid": 449, "tid": 449,\n    "ts": 1090.000', "declined"),
    ('"Device Name": "ProfilerStep#4"', '"Device Name": "Profiler\\q"', "declined"),  # a bad escape in a string hole
    ('"Device Name": "ProfilerStep#4"', '"Device Name": "Profiler\\u00e9"', 43),
    ('"tid": 449,\n    "ts": 1090.000', '"ts": 449,\n    "ts": 1090.000', "declined"),  # a tracked key twice
])
def test_a_changed_event_after_its_layout_reads_as_when_parsed(old, new, outcome):
    text = _layout_text()
    assert text.count(old) >= 1
    at = text.index(old, len(text) // 2)  # an event well after its layout was learned
    got = _with_layouts_and_without((text[:at] + new + text[at + len(old):]).encode())
    if outcome == "declined":
        assert got is None
    else:
        assert got is not None and got.dropped == outcome


def test_mutants_read_alike_through_layouts():
    """Random bytes changed, removed or added in events after their layouts were learned, and numbers swapped
    for other tokens: the result through layouts equals the result of parsing every dropped event in full."""
    base = _layout_text(40).encode()
    r = random.Random(20261127)
    tokens = [b"01", b"1.", b"-", b"1e", b"1.5e+3", b"-0", b"null", b"true", b'"x"', b"[1]", b"{}", b"1.2345",
              b"99999999999999999999", b"", b" 7"]
    interesting = b'"\\0.e-,}{[] \x01\xff\xc3n:'
    outcomes = {"declined": 0, "read": 0, "via layouts": 0, "rows via layouts": 0}
    for _ in range(300):
        data = bytearray(base)
        at = r.randrange(len(data) // 3, len(data))
        how = r.randrange(4)
        if how == 0:
            data[at] = interesting[r.randrange(len(interesting))]
        elif how == 1:
            del data[at]
        elif how == 2:
            data.insert(at, interesting[r.randrange(len(interesting))])
        else:
            digits = [m for m in range(at, len(data)) if 48 <= data[m] <= 57]
            if digits:
                m = digits[0]
                e = m
                while e < len(data) and 48 <= data[e] <= 57:
                    e += 1
                data[m:e] = tokens[r.randrange(len(tokens))]
        got = _with_layouts_and_without(bytes(data))
        outcomes["declined" if got is None else "read"] += 1
        outcomes["via layouts"] += 0 if got is None else int(got.via_layouts > 20)
        every = _with_layouts_and_without(bytes(data), projected=False)  # kept events' layouts, every event read
        outcomes["rows via layouts"] += 0 if every is None else int(every.rows_via_layouts > 20)
    assert outcomes["declined"] > 30 and outcomes["read"] > 100 and outcomes["via layouts"] > 100, outcomes
    assert outcomes["rows via layouts"] > 100, outcomes


def test_the_scanner_reads_larger_pieces_than_the_other_readers(tmp_path, monkeypatch):
    """The compiled scanner's pieces are ``CHUNK_BYTES`` (its per-piece cost is mostly fixed); the other readers', and
    a salvage's, are ``READER_CHUNK_BYTES`` (their peak grows with the piece): the same table either way."""
    evs: list[dict] = [{"ph": "X", "cat": "kernel", "name": f"k{i % 50}", "pid": 0, "tid": 7, "ts": i + 0.5,
                        "dur": 1.0, "args": {"correlation": i}} for i in range(12_000)]
    p = write_trace(tmp_path / "t.json", evs)
    size = p.stat().st_size
    monkeypatch.setattr(document, "CHUNK_BYTES", size // 3)
    monkeypatch.setattr(document, "READER_CHUNK_BYTES", size // 6)
    scanned = _parse(p, monkeypatch, True)
    read = _parse(p, monkeypatch, False)
    assert scanned.readers == {"compiled scanner": 3}, scanned.readers
    assert sum(read.readers.values()) == 6 and "compiled scanner" not in read.readers, read.readers
    _same(scanned, read)
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "0")
    src = open_trace(p)
    try:
        salvaged = parse_source(src, salvage=True)
    finally:
        src.close()
    assert sum(salvaged.readers.values()) == 6
    assert_frame_equal(salvaged.events, scanned.events)
