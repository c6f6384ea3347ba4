"""The line reader (kernscope.load.lines + chunk.parse_lines) and the load projection of `kernscope analyze`.

What must hold: on Kineto's layout the line reader gives exactly the table the JSON-array reader gives;
text it cannot be sure of is refused (and then parsed the usual way, with the usual errors); the
analyze projection (unread args columns, instant and Python events) changes no analysis result on any
real trace, and keeps every remaining event exact.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from conftest import needs_traces, real_traces, scanned_once, trace_id
from polars.testing import assert_frame_equal

import kernscope
from kernscope.analyze.needs import ANALYZE_ARGS, analyze_projection
from kernscope.analyze.summary import analyze
from kernscope.cli import main
from kernscope.errors import TraceError
from kernscope.load.argspec import ARG_FIELDS
from kernscope.load.chunk import EVENT_SCHEMA, ChunkError, parse_chunk, parse_lines
from kernscope.load.document import Splitter
from kernscope.load.lines import to_lines
from kernscope.load.projection import Projection
from kernscope.load.source import Limits, open_trace
from kernscope.model import literal_nulls
from kernscope.pipeline import load
from kernscope.render.formats import text


@pytest.fixture(autouse=True, params=["line reader", "compiled scanner"])
def _reader(request, monkeypatch):
    """Every test here runs twice: with the line reader and numpy projection these tests are about (the compiled
    scanner off), and with the scanner first, as users get it (not those that call the line reader itself)."""
    if request.param == "compiled scanner" and request.node.originalname.startswith("test_line_reader_"):
        pytest.skip("calls the line reader itself: the scanner has no part in it")
    if request.param == "line reader" and request.node.originalname == "test_analysis_identical_and_events_exact" and zlib.crc32(request.node.name.encode()) % 2:
        pytest.skip("half the real traces run this with the fallback reader (test_fastscan compares both readers' "
                    "tables on all of them); every trace runs it with the compiled scanner")
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1" if request.param == "line reader" else "0")

_PROJ = analyze_projection(None)
assert _PROJ is not None
PROJ: Projection = _PROJ
assert PROJ is not None


def _ev(cat: str, name: str, ts: float | str, *, ph: str = "X", pid: int = 1, tid: int = 1, dur: float = 1.0,
        args: str = '"External id": 1') -> str:
    """One event in Kineto's own layout."""
    return (f'  {{\n    "ph": "{ph}", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid},\n'
            f'    "ts": {ts}, "dur": {dur},\n    "args": {{\n      {args}\n    }}\n  }}')


def _run(events: list[str]) -> bytes:
    """A chunk's text as the splitter gives it: events, no brackets, from the first "{"."""
    return ",\n".join(events).strip().encode()


def _kineto_file(path: Path, events: list[str]) -> Path:
    path.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + ",\n".join(events) + "\n  ]\n}\n")
    return path


def _read(text: bytes, args=None):
    nd = to_lines(text)
    assert nd is not None
    return parse_lines(nd.text, nd.lines, args)


def _train(n_steps: int = 2) -> list[str]:
    evs, t = [], 0.0
    for s in range(n_steps):
        evs.append(_ev("user_annotation", f"ProfilerStep#{s}", t, dur=90.0, args=f'"External id": {1000 + s}'))
        for k in range(6):
            evs.append(_ev("python_function", f"model.py({k}): forward", t + 0.5 + k, dur=0.4,
                           args=f'"Python parent id": {k}, "Python id": {k + 1}, "Python thread": 0'))
            evs.append(_ev("cpu_op", f"aten::op{k}", t + 1 + k, args=f'"External id": {s * 100 + k}, "Input Dims": [[2, 3], []]'))
            evs.append(_ev("cuda_runtime", "cudaLaunchKernel", t + 1.2 + k, dur=0.5,
                           args=f'"correlation": {s * 100 + k}, "External id": {s * 100 + k}'))
            evs.append(_ev("cpu_instant_event", "[memory]", t + 1.3 + k, ph="i", args='"Bytes": 512, "Addr": 1'))
            evs.append(_ev("kernel", f"gemm_{k}", t + 20 + 4 * k, pid=0, tid=7, dur=3.0,
                           args=f'"correlation": {s * 100 + k}, "device": 0, "stream": 7'))
        t += 100.0
    return evs


# -- the reader itself ----------------------------------------------------------------------------------------
def test_kineto_layout_becomes_one_event_per_line():
    text = _run(_train(1))
    nd = to_lines(text)
    assert nd is not None and nd.lines == len(_train(1)) == nd.text.count(b"\n") + 1
    assert [json.loads(line)["name"] for line in nd.text.split(b"\n")][:3] == ["ProfilerStep#0", "model.py(0): forward", "aten::op0"]


def test_same_table_as_the_array_reader():
    text = _run(_train(2))
    lines, bad_l = _read(text)
    whole, bad_w = parse_chunk(b"[" + text + b"]")
    assert not bad_l and not bad_w
    assert_frame_equal(lines, whole)


def _layouts() -> dict[str, bytes]:
    evs = [json.loads(e) for e in _train(1)]
    indent4 = json.dumps({"traceEvents": evs}, indent=4).encode()  # json.dump(indent=4): one key per line
    inner = indent4[indent4.index(b"[") + 1:indent4.rindex(b"]")].strip()
    return {
        "kineto": _run(_train(1)),
        "crlf": _run(_train(1)).replace(b"\n", b"\r\n"),
        "one line": json.dumps(evs).encode()[1:-1],
        "indent 4": inner,
    }


@pytest.mark.parametrize("layout", list(_layouts()))
def test_every_layout_reads_like_the_array_reader(layout):
    text = _layouts()[layout]
    lines, bad_l = _read(text)
    whole, bad_w = parse_chunk(b"[" + text + b"]")
    assert not bad_l and not bad_w and lines.height == len(_train(1))
    assert_frame_equal(lines, whole)


def test_a_single_event_is_not_lines():
    assert to_lines(_run([_ev("cpu_op", "a", 1)])) is None


def test_a_separator_inside_a_string_is_refused():
    evs = [{"ph": "X", "cat": "cpu_op", "name": n, "ts": i, "dur": 1} for i, n in enumerate(["a", "x}, {y", "z"])]
    text = json.dumps(evs).encode()[1:-1]
    with pytest.raises(ChunkError):
        _read(text)


def test_a_separator_inside_an_event_is_refused():
    # an event whose args hold an array of objects laid out like Kineto's top level: the cut is inside it
    nested = _ev("cpu_op", "aten::weird", 2, args='"External id": 1, "x": [{"a": 1\n  },\n  {\n    "b": 2}]')
    text = _run([_ev("cpu_op", "a", 1), nested, _ev("cpu_op", "z", 3)])
    with pytest.raises(ChunkError):
        _read(text)


def test_refused_text_loads_exactly_through_the_array_reader(tmp_path):
    nested = _ev("cpu_op", "aten::weird", 2, args='"External id": 1, "x": [{"a": 1\n  },\n  {\n    "b": 2}]')
    evs = _train(1)
    evs.insert(5, nested)
    p = _kineto_file(tmp_path / "t.json", evs)
    t = load(p, cache=False)
    raw = json.loads(p.read_text())["traceEvents"]
    assert t.stats.events == len(raw)
    assert t.events.filter(pl.col("name").cast(pl.String) == "aten::weird")["idx"].to_list() == [5]


def test_a_boolean_time_is_refused_and_reported_as_always(tmp_path):
    evs = _train(1)
    assert '"cat": "kernel"' in evs[5]
    evs[5] = evs[5].replace('"dur": 3.0', '"dur": true')
    text = _run(evs)
    with pytest.raises(ChunkError):
        _read(text)
    with pytest.raises(TraceError, match=r"\$\.traceEvents\[5\]"):
        load(_kineto_file(tmp_path / "t.json", evs), cache=False)


def test_an_empty_event_between_separators():
    text = _run([_ev("cpu_op", "a", 1), "  {\n  }", _ev("cpu_op", "z", 3)])
    df, bad = _read(text)
    assert df.height == 3 and df["name"].cast(pl.String).to_list() == ["a", None, "z"] and not bad


def test_epoch_times_stay_exact():
    # absolute µs beyond 2^43 are re-read from the text: the line reader hands over an array's text for that
    evs = [_ev("cpu_op", f"op{i}", f"170000000012345{6 + i}.789", dur=0.001) for i in range(3)]
    df, bad = _read(_run(evs))
    assert not bad
    assert df["ts"].to_list() == [1_700_000_000_123_456_789 + 1000 * i for i in range(3)]
    assert df["dur"].to_list() == [1, 1, 1]


def test_epoch_times_are_read_from_the_lines_with_numpy_and_equal_the_decoders(monkeypatch):
    # the exact times come from the NDJSON text (numpy) when every value can be read for certain; the
    # msgspec decoder gives the same table, and is used where they cannot (here: a nested "ts" in args)
    from kernscope.load import chunk

    evs = [_ev("cpu_op", f"op{i}", f"1712195495{i:06d}.{(i * 137) % 1000:03d}", dur=0.5 + i) for i in range(40)]
    evs.append(_ev("instant", "mark", "1712195495000041.5").replace('"dur": 1.0,', ""))
    text = _run(evs)
    calls = []
    real = chunk._times_from_text

    def counted(*a):
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(chunk, "_times_from_text", counted)
    fast, bad = _read(text)
    assert not bad and not calls  # numpy read them
    whole, _ = parse_chunk(b"[" + text + b"]")
    assert_frame_equal(fast, whole)
    assert fast["ts"][7] == 1712195495000007 * 1000 + (7 * 137) % 1000
    nested = text.replace(b'"External id": 1', b'"External id": 1, "ts": 3', 1)
    slow, _ = _read(nested)
    assert calls  # the text decoder read them
    assert_frame_equal(slow, parse_chunk(b"[" + nested + b"]")[0])


def test_separator_text_inside_a_string_loads_exactly(tmp_path):
    evs = [_ev("cpu_op", "a", 1), _ev("cpu_op", 'x},   {     \\"y', 2), _ev("cpu_op", "z", 3)]
    t = load(_kineto_file(tmp_path / "t.json", evs), cache=False)
    assert t.events["name"].cast(pl.String).to_list() == ["a", 'x},   {     "y', "z"]


def test_unread_args_are_null_and_unchecked():
    evs = _train(1)
    evs[1] = evs[1].replace('"Python id": 1', '"Python id": "not a number"')  # unread by analyze: not an error
    df, bad = _read(_run(evs), ANALYZE_ARGS)
    assert not bad
    # a piece leaves unread columns out (the load adds each as one null literal: the next test)
    assert "python_id" not in df.columns and "external_id" in df.columns
    assert df["correlation"].drop_nulls().len() > 0


def test_unread_and_empty_args_columns_take_no_memory():
    # a null column materialized is 8 bytes a row (4 MB of a 200 MB trace's table, 22 of them unread by
    # analyze); they are one literal each, typed as the schema says, null everywhere
    example = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    t = load(example, cache=False, projection=PROJ)
    unread = [f.column for f in ARG_FIELDS if f.column in t.events.columns and f.column not in ANALYZE_ARGS]
    assert len(unread) == 22 and t.events.height > 5000
    assert t.events.select(pl.col(unread).is_null().all()).row(0) == (True,) * len(unread)
    assert dict(t.events.select(unread).schema) == {c: EVENT_SCHEMA[c] for c in unread}
    assert t.events.select(unread).estimated_size() < 1000
    full = load(example, cache=False)  # a full read: args no event carries (no communication here) likewise
    empty = ["collective", "pg_name", "comm_rank", "in_msg_nelems"]
    assert full.events.select(pl.col(empty).is_null().all()).row(0) == (True,) * len(empty)
    assert full.events.select(empty).estimated_size() < 1000
    assert full.events.select(pl.col("correlation").is_not_null().sum()).item() > 0  # values are kept


def test_literal_nulls_same_frame_without_null_buffers():
    n = 50_000
    cats = pl.Series("c", ["a", None] * (n // 2), dtype=pl.Categorical)
    df = pl.DataFrame({
        "ts": pl.Series(range(n), dtype=pl.Int64),
        "x": pl.Series([None] * n, dtype=pl.Int64),  # a buffer of nulls, as a gather of nulls makes
        "name": pl.Series([None] * n, dtype=pl.String).cast(pl.Categorical),
        "kind": pl.Series([None] * n, dtype=pl.String).cast(pl.Enum(["kernel", "memcpy"])),
        "c": cats,  # partly null: kept as it is
    }).with_columns(pl.lit(None, dtype=pl.Float64).alias("lit"))
    assert df.select("x").estimated_size() >= 8 * n
    out = literal_nulls(df)
    assert_frame_equal(out, df)  # the same columns, types and values
    assert out.select("x", "name", "kind", "lit").estimated_size() < 1000
    assert out.select("ts", "c").estimated_size() == df.select("ts", "c").estimated_size()
    assert out.filter(pl.col("ts") % 3 == 0).select("x", "name").estimated_size() < 1000  # a filter copies nothing
    # read without materializing a literal column (which would keep its buffer in the frame)
    assert df.select("lit").estimated_size() < 1000
    for empty in (df.clear(), pl.DataFrame()):
        assert_frame_equal(literal_nulls(empty), empty)


def test_jax_gpu_table_null_columns_take_no_memory():
    # gathered and filtered from nulls, a JAX profile's launch_external_id and step_num were buffers of nulls (16
    # bytes a GPU row, 0.11 GB of a 975 MB profile's table, copied by each filter and sort of it)
    t = load(Path(__file__).parent / "data" / "jax" / "mlp" / "vm.xplane.pb", cache=False)
    for table, must, many in ((t.gpu, {"launch_external_id", "step_num", "bytes", "collective"}, 20),
                              (t.events, {"bytes", "external_id"}, 10)):
        empty = [c for c, k in zip(table.columns, table.select(pl.all().null_count()).row(0)) if k == table.height]
        assert must <= set(empty) and len(empty) >= many
        assert table.select(empty).estimated_size() < 1000


# -- dropping lines ---------------------------------------------------------------------------------------------
def test_drops_python_and_instant_lines_with_exact_ordinals():
    evs = _train(1)
    nd = to_lines(_run(evs), PROJ)
    assert nd is not None
    names = [json.loads(line)["name"] for line in nd.text.split(b"\n")]
    kinds = [json.loads(e)["cat"] for e in evs]
    expect = [i for i, k in enumerate(kinds) if k not in ("python_function", "cpu_instant_event") or i in (0, len(evs) - 1)]
    assert nd.ordinals.tolist() == expect
    assert names == [json.loads(evs[i])["name"] for i in expect]
    assert nd.dropped == len(evs) - len(expect)


def test_marker_names_are_kept():
    evs = [_ev("cpu_op", "a", 1), _ev("python_function", "train_step 3", 2), _ev("python_function", "forward", 3),
           _ev("cpu_op", "z", 4)]
    proj = analyze_projection("megatron")
    nd = to_lines(_run(evs), proj)
    assert nd is not None and nd.ordinals.tolist() == [0, 1, 3]


def test_a_line_holding_an_array_of_objects_is_never_dropped():
    # a Python event whose args nest Kineto's own layout: both halves look like Python events; dropping
    # them would hide the wrong cut, so the line holding the array is kept (and refused by the reader)
    nested = _ev("python_function", "f", 2, args='"Python id": 1, "x": [{"a": 1\n  },\n  {\n    "ph": "X", '
                                                   '"cat": "python_function", "name": "g",\n    "ts": 5, "b": 2}]')
    evs = [_ev("cpu_op", "a", 1), nested, _ev("cpu_op", "z", 3)]
    nd = to_lines(_run(evs), PROJ)
    assert nd is not None
    assert 1 in nd.ordinals.tolist()  # the first half is kept
    with pytest.raises(ChunkError):
        parse_lines(nd.text, nd.lines, PROJ.args)


def test_kept_lines_with_bad_values_are_reported_at_their_place(tmp_path):
    evs = _train(1)
    bad = next(i for i, e in enumerate(evs) if '"cat": "kernel"' in e and i > 10)
    evs[bad] = evs[bad].replace('"dur": 3.0', '"dur": "soon"')
    p = _kineto_file(tmp_path / "t.json", evs)
    with pytest.raises(TraceError) as whole:
        load(p, cache=False)
    with pytest.raises(TraceError) as proj:
        load(p, cache=False, projection=PROJ)
    assert str(proj.value) == str(whole.value) and f"$.traceEvents[{bad}]" in str(whole.value)


# -- real traces: same analysis, exact events ------------------------------------------------------------------
@dataclass(frozen=True)
class _Whole:
    """What the analysis test compares of a trace's whole load."""

    table: str  #: the analysis as a table
    csv: str  #: and as CSV
    events: int  #: stats.events
    rows: pl.DataFrame  #: its events (idx, name, kind, ts, dur, the args the analysis reads), names as text
    gpu: pl.DataFrame
    flows: pl.DataFrame


#: each trace's whole load, kept from the line reader's run of it for the compiled scanner's (the line reader's runs
#: come first; an entry is taken, not kept, by the second)
_WHOLE: dict[str, _Whole] = {}


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> _Whole:
    """The whole load of ``path`` as the analysis test compares it, read by the compiled scanner once a trace."""

    def read(p: Path) -> _Whole:
        full = load(p, cache=False)
        a = analyze(full, benchmark=None)
        rows = (full.events.select("idx", "name", "kind", "ts", "dur", *ANALYZE_ARGS)
                .with_columns(pl.col("name", "kind").cast(pl.String)))
        return _Whole(text(a), text(a, "csv"), full.stats.events, rows, full.gpu, full.flows)

    out: _Whole = scanned_once(_WHOLE, path, monkeypatch, read)
    return out


@needs_traces
@pytest.mark.parametrize("path", real_traces(), ids=trace_id)
def test_analysis_identical_and_events_exact(path, monkeypatch):
    whole = _whole(path, monkeypatch)
    proj = load(path, cache=False, projection=PROJ)
    a_proj = analyze(proj, benchmark=None)
    assert text(a_proj) == whole.table
    assert text(a_proj, "csv") == whole.csv
    assert proj.stats.events == whole.events
    cols = ["idx", "name", "kind", "ts", "dur", *ANALYZE_ARGS]
    f = whole.rows
    p = proj.events.select(cols).with_columns(pl.col("name", "kind").cast(pl.String))
    assert_frame_equal(p, f.join(p.select("idx"), on="idx", how="semi"))
    gone = f.join(p, on="idx", how="anti")
    assert set(gone["kind"].unique().to_list()) <= {"python_function", "instant"}
    assert proj.stats.projected_out == gone.height
    # the GPU table: identical but for the args the projection does not read, which are null
    unread = [f.column for f in ARG_FIELDS if f.column in whole.gpu.columns and f.column not in ANALYZE_ARGS]
    assert_frame_equal(proj.gpu.drop(unread), whole.gpu.drop(unread))
    assert proj.gpu.select(pl.col(unread).is_null().all()).row(0) == (True,) * len(unread)
    assert_frame_equal(proj.flows, whole.flows)


@needs_traces
@pytest.mark.parametrize("path", [p for p in real_traces() if p.stat().st_size > 2_000_000][:6], ids=trace_id)
def test_line_reader_equals_array_reader_on_every_piece(path):
    src = open_trace(path)
    try:
        n = 0
        for piece in Splitter(src, Limits(), chunk_bytes=1 << 20).pieces():
            if piece.final:
                break
            text = bytes(piece.text)
            nd = to_lines(text)
            if nd is None:
                continue
            a, bad_a = parse_lines(nd.text, nd.lines)
            b, bad_b = parse_chunk(b"[" + text + b"]")
            assert_frame_equal(a, b)
            assert not bad_a and not bad_b
            # the one-call finish (the load passes the longest line) gives the same table
            fast, bad_f = parse_lines(nd.text, nd.lines, longest=nd.longest)
            assert_frame_equal(fast, b)
            assert not bad_f
            n += 1
        assert n > 0
    finally:
        src.close()


@needs_traces
def test_cli_analyze_default_and_read_all_agree(tmp_path):
    path = max((p for p in real_traces() if "gpt" in p.name or "owlv2" in p.name), key=lambda p: p.stat().st_size,
               default=None)
    if path is None:
        pytest.skip("no GPT/owlv2 trace in ../shared/traces")
    out = {}
    for flag in ([], ["--read-all"]):
        o = tmp_path / f"a{len(flag)}.json"
        assert main(["analyze", str(path), "--format", "json", "-o", str(o), "-q", "--no-cache", *flag]) == 0
        out[len(flag)] = json.loads(o.read_text())
    assert out[0] == out[1]
    assert math.isclose(out[0]["trace"]["kernel_time_us"], out[1]["trace"]["kernel_time_us"])


def test_integer_epoch_times_are_read_as_integers_and_a_fraction_later_stays_exact(tmp_path):
    # older Kineto: integer epoch µs (> 2^43); after the first chunk the reader takes ts as integers,
    # and a chunk where one is not an integer is read the float way, exactly
    evs = [_ev("cpu_op", f"op{i}", str(1_669_783_687_464_181 + 10 * i), dur=5) for i in range(40_000)]
    evs[35_000] = evs[35_000].replace('"ts": 1669783687814181', '"ts": 1669783687814181.25')
    p = _kineto_file(tmp_path / "t.json", evs)
    t = load(p, cache=False, workers=1)
    ts = t.events.sort("idx")["ts"].to_list()
    assert ts[0] == 1_669_783_687_464_181_000 and ts[-1] == 1_669_783_687_464_181_000 + 10_000 * 39_999
    assert ts[35_000] == 1_669_783_687_814_181_250
    assert t.events["dur"].unique().to_list() == [5000]


@pytest.mark.parametrize("layout", ["kineto", "indent 4"])
def test_drops_are_the_same_in_every_layout(layout):
    kin = to_lines(_layouts()["kineto"], PROJ)
    other = to_lines(_layouts()[layout], PROJ)
    assert kin is not None and other is not None and kin.dropped > 0
    assert other.ordinals.tolist() == kin.ordinals.tolist()
    a, _ = parse_lines(other.text, other.lines, PROJ.args)
    b, _ = parse_lines(kin.text, kin.lines, PROJ.args)
    assert_frame_equal(a, b)
    assert other.dropped_first_ts == kin.dropped_first_ts == 0.5  # the first Python event's start


def test_kineto_header_test_judges_like_the_general_one():
    # in Kineto's layout an event's first keys are compared at once (judge_kineto); anywhere else keys are
    # found past whitespace (judge). On Kineto text both drop the same events; an event whose header is
    # written otherwise is kept by the first (never dropped wrongly)
    import numpy as np

    from kernscope.load.project import judge, judge_kineto
    from kernscope.load.scan import solid

    text = _layouts()["kineto"]
    a = np.frombuffer(text, dtype=np.uint8)
    opens = np.flatnonzero(a == ord("{"))
    opens = opens[(opens > 0) & (a[np.minimum(opens + 1, len(a) - 1)] == ord("\n"))]  # each event's own "{"
    rx = PROJ.compiled()
    fast = judge_kineto(a, opens, PROJ, rx)
    general = judge(a, solid(a, opens + 1, 40) + 1, PROJ, rx)
    assert fast.tolist() == general.tolist() and (fast > 0).sum() >= 3
    odd = text.replace(b'{\n    "ph": "X", "cat": "python_function"', b'{\n     "ph": "X", "cat": "python_function"', 1)
    kept = to_lines(odd, PROJ)
    assert kept is not None and kept.dropped == to_lines(text, PROJ).dropped - 1


def test_one_line_files_drop_only_instant_events():
    # no newline between the keys: a skipped X event's start cannot be read (it could be the earliest
    # event, the origin of every relative time), so Python events are parsed; instants never count
    evs = _train(1)
    nd = to_lines(_layouts()["one line"], PROJ)
    assert nd is not None
    dropped = set(range(len(evs))) - set(nd.ordinals.tolist())
    assert dropped and all('"ph": "i"' in evs[i] for i in dropped)
    assert nd.dropped_first_ts == float("inf")


def test_a_skipped_python_event_that_starts_first_is_read_in_full(tmp_path):
    # the earliest event of the trace is a Python function the projection skips: the origin of relative
    # times would move, so the trace is read again in full and the analysis equals --read-all's
    evs = _train(2)
    evs.insert(3, _ev("python_function", "launcher.py(1): main", -500.0, dur=900.0,
                      args='"Python parent id": 0, "Python id": 99, "Python thread": 0'))
    p = _kineto_file(tmp_path / "t.json", evs)
    projected = load(p, cache=False, projection=PROJ)
    full = load(p, cache=False)
    assert projected.stats.projected_out == 0 and projected.t0 == full.t0 == -500_000
    assert text(analyze(projected)) == text(analyze(full))


@needs_traces
@pytest.mark.parametrize("name", ["h100_gaunernst_bert-small-uncased__1016001.json.gz", "ddp4_rank1.json.gz"])
def test_mutants_analyze_projection_equals_full_load_or_fails_cleanly(tmp_path, name):
    """Seeded mutants (one-key-per-line TraceLens layout, Kineto layout): the analyze projection's result is
    the full load's whenever the full load succeeds; otherwise one clear error, or a load when the damage
    is only inside skipped events (never a traceback)."""
    import gzip
    import random

    from kernscope.errors import KernscopeError
    from kernscope.testing import fuzz

    path = next((p for p in real_traces() if p.name == name), None)
    if path is None:
        pytest.skip(f"{name} not present in ../shared/traces")
    data = gzip.decompress(path.read_bytes())
    raw = json.loads(data)["traceEvents"]
    assert any(e.get("cat") == "python_function" or e.get("ph") == "i" for e in raw)  # something to skip
    # half the mutants with each reader (the fixture's parameter), other seeds: the same total as before
    readers = os.environ.get("KERNSCOPE_NO_NATIVE") == "1"
    r = random.Random(20261127 + readers)
    names = sorted(fuzz.MUTATORS)
    same = both_fail = 0
    for i in range(15 if len(data) < 4_000_000 else 8):  # fewer of the 9 MB rank trace's (each two loads)
        m = fuzz.MUTATORS[names[i % len(names)]](r, data)
        p = tmp_path / f"m{i}.json"
        p.write_bytes(m)
        out: list[str | None] = []
        for proj in (None, PROJ):
            try:
                out.append(text(analyze(load(p, cache=False, projection=proj), benchmark=None)))
            except KernscopeError as e:
                assert str(p) in str(e) and "\n" not in str(e).strip(), str(e)
                out.append(None)
        if out[0] is not None:
            assert out[1] == out[0], f"mutant {i} ({names[i % len(names)]})"
            same += 1
        elif out[1] is None:
            both_fail += 1
    assert same > 0 and both_fail > 0, (same, both_fail)


def test_args_that_are_not_plain_integers_are_read_as_text_and_remembered():
    from kernscope.load.chunk import ReadHints

    evs = [_ev("kernel", f"k{i}", i, pid=0, tid=7, args=f'"correlation": "0x{16 + i:x}", "device": 0')
           for i in range(3)]
    hints = ReadHints()
    df, bad = parse_lines(*_lines_of(evs), hints=hints)
    assert not bad and df["correlation"].to_list() == [16, 17, 18]
    assert hints.typed is False  # the next pieces go to the text read directly
    df2, _ = parse_lines(*_lines_of(evs), hints=hints)
    assert df2["correlation"].to_list() == [16, 17, 18]


def test_the_one_call_finish_equals_the_general_one():
    from kernscope.load.chunk import MAX_NAME_BYTES, ReadHints

    long_name = "k" * (MAX_NAME_BYTES + 10)
    cases = {
        "plain": [_ev("kernel", f"k{i}", 10.5 + i, pid=0, tid=7, args=f'"correlation": {i}, "device": 0')
                  for i in range(4)],
        "a name too long to keep": [_ev("kernel", long_name, 1.25, args='"correlation": 1'),
                                    _ev("kernel", "short", 2.5, args='"correlation": 2')],
        "epoch µs": [_ev("cpu_op", f"op{i}", 1_700_000_000_000_000 + i, args=f'"External id": {i}') for i in range(3)],
        "no dur": [_ev("kernel", "k", 1.0).replace('"dur": 1.0,', ""), _ev("kernel", "k", 2.0)],
        "hex args": [_ev("kernel", "k", 1.0, args='"correlation": "0x1f"'), _ev("kernel", "k", 2.0, args='"correlation": 3')],
    }
    for what, evs in cases.items():
        nd = to_lines(_run(evs))
        assert nd is not None and nd.longest >= max(len(e.strip()) for e in evs), what
        for args in (None, ANALYZE_ARGS):
            general = parse_lines(nd.text, nd.lines, args, ReadHints())
            fast = parse_lines(nd.text, nd.lines, args, ReadHints(), longest=nd.longest)
            assert_frame_equal(fast[0], general[0])
            assert not fast[1] and not general[1], what
            if args is not None:  # unread args are left out of a piece
                assert "python_id" not in fast[0].columns
    capped = parse_lines(*_lines_of(cases["a name too long to keep"]), longest=MAX_NAME_BYTES + 500)[0]
    assert capped["name"].cast(pl.String).str.len_bytes().max() < MAX_NAME_BYTES


def _lines_of(evs: list[str]) -> tuple[bytes, int]:
    nd = to_lines(_run(evs))
    assert nd is not None
    return nd.text, nd.lines


def _meta_ev(name: str, value: str, pid: int = 1) -> str:
    return (f'  {{\n    "name": "{name}", "ph": "M", "ts": 0, "pid": {pid}, "tid": 0,\n'
            f'    "args": {{\n      "name": "{value}"\n    }}\n  }}')


def test_pieces_without_metadata_events_skip_their_args():
    # in Kineto's layout every line starts with its phase: a piece whose phases are all other than "M" is
    # read without the metadata args (name, sort_index), which it leaves out (null in every row with them)
    evs = _train(1)
    nd = to_lines(_run(evs), PROJ)
    assert nd is not None and nd.meta is False
    for args in (None, ANALYZE_ARGS):
        a, _ = parse_lines(nd.text, nd.lines, args, longest=nd.longest, meta=False)
        b, _ = parse_lines(nd.text, nd.lines, args, longest=nd.longest, meta=True)
        assert "meta_name" not in a.columns and "sort_index" not in a.columns
        assert b.select(pl.col("meta_name", "sort_index").null_count()).row(0) == (b.height, b.height)
        assert_frame_equal(a, b.drop("meta_name", "sort_index"))
    # Kineto writes metadata events with "name" first: the line does not start with its phase
    with_meta = evs[:2] + [_meta_ev("process_name", "python3")] + evs[2:]
    nd = to_lines(_run(with_meta), PROJ)
    assert nd is not None and nd.meta is True
    df, _ = parse_lines(nd.text, nd.lines, PROJ.args, longest=nd.longest, meta=nd.meta)
    assert df.filter(pl.col("ph") == "M")["meta_name"].to_list() == ["python3"]
    # other layouts are not judged: always read with them
    assert to_lines(_layouts()["indent 4"], PROJ).meta is True


def test_a_phase_written_twice_is_read_as_the_text_check_saw_it():
    # polars keeps the first value of a duplicate key, the one at the line's start that the text check
    # reads; the metadata args of events that are not metadata events are never used (only "M" rows'
    # are), so the tables agree on everything else (and, should a reader keep the last value, an "M" it
    # finds makes parse_lines read the text again with those args)
    evs = _train(1)
    sneaky = ('  {\n    "ph": "X", "name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 0,\n'
              '    "args": {\n      "name": "worker"\n    }\n  }')
    nd = to_lines(_run(evs[:2] + [sneaky] + evs[2:]))
    assert nd is not None and nd.meta is False
    a, _ = parse_lines(nd.text, nd.lines, longest=nd.longest, meta=False)
    b, _ = parse_lines(nd.text, nd.lines, longest=nd.longest, meta=True)
    assert a["ph"][2] == "X" and not (a["ph"] == "M").any()
    assert_frame_equal(a.drop("meta_name", "sort_index", strict=False), b.drop("meta_name", "sort_index"))


def test_a_load_reads_metadata_names_from_every_piece(tmp_path):
    # process and thread names come from metadata events; pieces without them skip their args
    evs = _train(3)
    names = [_meta_ev("process_name", "trainer", pid=1), _meta_ev("thread_name", "main thread", pid=1)]
    p = _kineto_file(tmp_path / "t.json", evs + names)
    t = load(p, cache=False, projection=PROJ)
    full = load(p, cache=False)
    assert t.process_names == full.process_names and full.process_names
    assert t.thread_names == full.thread_names
