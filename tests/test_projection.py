"""Load projection (kernscope.load.project): the ranks job skips CPU ops it does not read, unparsed.

What must hold: the rank summary is identical with and without it on every real trace; the events that
remain are exactly the file's events (same positions, names, times); nothing but whole, unwanted
cpu_op / python_function events is ever cut, however the text is laid out.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

import polars as pl
import pytest
from conftest import needs_traces, real_traces, scanned_once, trace_id
from polars.testing import assert_frame_equal

from kernscope.analyze.ranks import RankTask, summarize_file
from kernscope.analyze.ranks.summary import RankResult, summarize_rank
from kernscope.errors import TraceError
from kernscope.load.chunk import parse_chunk
from kernscope.load.project import project
from kernscope.load.projection import Projection
from kernscope.pipeline import load


@pytest.fixture(autouse=True, params=["numpy projection", "compiled scanner"])
def _reader(request, monkeypatch):
    """Every test here runs twice: with the numpy projection of the JSON text (the compiled scanner off) and with
    the scanner's projection, as users get it."""
    if request.param == "numpy projection" and request.node.originalname == "test_rank_summary_identical_and_events_exact" and zlib.crc32(request.node.name.encode()) % 2:
        pytest.skip("half the real traces run this with the fallback reader (test_fastscan compares both readers' "
                    "tables on all of them); every trace runs it with the compiled scanner")
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1" if request.param == "numpy projection" else "0")

_PROJ = RankTask().load_projection()
assert _PROJ is not None
PROJ: Projection = _PROJ


def _same_result(a: RankResult, b: RankResult) -> None:
    for name in ("steps", "collectives", "queues"):
        assert_frame_equal(getattr(a, name), getattr(b, name))
    for name in ("overall", "launch", "rank", "world_size", "device_names", "gpu_start_ns", "gpu_end_ns", "pg_config"):
        assert getattr(a, name) == getattr(b, name), name


#: each trace's whole load as the tests below compare with it, kept from the numpy projection's run of it for the
#: compiled scanner's (the numpy projection's run comes first; an entry is taken, not kept, by the second)
_WHOLE: dict[str, tuple[RankResult, pl.DataFrame, int, int]] = {}


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[RankResult, pl.DataFrame, int, int]:
    """The rank summary, events (``idx, name, kind, ts, dur``), event count and flow count of the whole load of
    ``path``, read by the compiled scanner once a trace."""

    def read(p: Path) -> tuple[RankResult, pl.DataFrame, int, int]:
        full = load(p, cache=False)
        events = full.events.select("idx", "name", "kind", "ts", "dur").with_columns(pl.col("name", "kind").cast(pl.String))
        return summarize_rank(full, str(p)), events, full.stats.events, full.flows.height

    out: tuple[RankResult, pl.DataFrame, int, int] = scanned_once(_WHOLE, path, monkeypatch, read)
    return out


@needs_traces
@pytest.mark.parametrize("path", real_traces(), ids=trace_id)
def test_rank_summary_identical_and_events_exact(path, monkeypatch):
    whole, f, n_events, n_flows = _whole(path, monkeypatch)
    proj = load(path, cache=False, projection=PROJ)
    _same_result(whole, summarize_rank(proj, str(path)))
    # what remains is the file's own events: same positions, names and times
    cols = ["idx", "name", "kind", "ts", "dur"]
    p = proj.events.select(cols).with_columns(pl.col("name", "kind").cast(pl.String))
    assert p["idx"].is_unique().all()
    assert_frame_equal(p.join(f, on="idx", how="left", suffix="_f").select(
        (pl.col("name") == pl.col("name_f")).all(), (pl.col("ts") == pl.col("ts_f")).all(),
        (pl.col("dur") == pl.col("dur_f")).all()), pl.DataFrame({"name": [True], "ts": [True], "dur": [True]}))
    # only CPU ops / Python functions the ranks job does not read are gone; everything else is there
    gone = f.join(p, on="idx", how="anti")
    assert gone.filter(~pl.col("kind").is_in(["cpu_op", "python_function"])).height == 0
    assert gone.filter(pl.col("name").str.contains(PROJ.keep)).height == 0
    assert proj.stats.events == n_events
    flows_gone = n_flows - proj.flows.height  # flow arrows are dropped too (linking uses correlation ids)
    assert flows_gone >= 0
    assert proj.stats.projected_out == gone.height + flows_gone


@needs_traces
def test_ddp_rank_cuts_most_cpu_ops():
    path = next((p for p in real_traces() if p.name == "ddp4_rank0.json.gz"), None)
    if path is None:
        pytest.skip("../shared/traces/multirank not present")
    raw = json.loads(gzip.open(path).read())["traceEvents"]
    ops = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    comm = [e for e in ops if "record_param_comms" in e["name"] or "nccl" in e["name"] or "c10d" in e["name"]]
    proj = load(path, cache=False, projection=PROJ)
    # all but the first and last event of each piece, of those not wanted
    assert proj.stats.projected_out >= 0.99 * (len(ops) - len(comm) - 4)
    kept = proj.events.filter(pl.col("kind") == "cpu_op")["name"].cast(pl.String).to_list()
    assert sum(1 for n in kept if n == "record_param_comms") == sum(1 for e in ops if e["name"] == "record_param_comms")


# -- hostile and unusual layouts, on the chunk text itself -------------------------------------------------------
def _ev(cat: str, name: str, ts: float, extra: str = "", *, pid: int = 1, tid: int = 1, dur: float = 1.0,
        args: str = '"External id": 1') -> str:
    """One event in Kineto's own layout."""
    return (f'  {{\n    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": {pid}, "tid": {tid},\n'
            f'    "ts": {ts}, "dur": {dur},\n    "args": {{\n      {args}{extra}\n    }}\n  }}')


def _chunk(events: list[str]) -> bytes:
    return ("\n" + ",\n".join(events)).encode()


def _names(text: bytes) -> list[str]:
    df, bad = parse_chunk(b"[" + text.strip() + b"]")
    assert not bad
    return df["name"].cast(pl.String).to_list()


def test_kineto_layout_drops_only_unwanted_ops():
    evs = [_ev("cpu_op", "aten::first", 1), _ev("cpu_op", "aten::mm", 2), _ev("kernel", "gemm", 3),
           _ev("cpu_op", "record_param_comms", 4), _ev("python_function", "model.py(12): forward", 5),
           _ev("cpu_op", "ProfilerStep#3", 6), _ev("cpu_op", "aten::add", 7), _ev("cpu_op", "aten::last", 8)]
    text = _chunk(evs)
    out = project(text, PROJ)
    assert out is not None
    assert _names(out.text) == ["aten::first", "gemm", "record_param_comms", "ProfilerStep#3", "aten::last"]
    assert out.dropped == 3
    assert out.kept_ordinals.tolist() == [0, 2, 3, 5, 7]
    assert out.dropped_first_ts == 2.0  # aten::mm: the earliest start among the events cut out


def test_an_event_whose_start_cannot_be_read_is_not_cut():
    # "ts" as a string: the cut could hide the trace's earliest start, so the event stays (and is parsed)
    evs = [_ev("cpu_op", "aten::first", 1), _ev("cpu_op", "aten::mm", 2).replace('"ts": 2,', '"ts": "2",'),
           _ev("cpu_op", "aten::add", 3), _ev("cpu_op", "aten::last", 8)]
    out = project(_chunk(evs), PROJ)
    assert out is not None and out.kept_ordinals.tolist() == [0, 1, 3] and out.dropped_first_ts == 3.0


def test_two_events_in_one_range_are_not_cut():
    # a cpu_op that closes mid-line and a kernel after it on the same line: the range holds two events
    sneaky = ('  {\n    "ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 2, "dur": 1,'
              ' "args": {}}, {"ph": "X", "cat": "kernel", "name": "hidden_gemm", "pid": 1, "tid": 7, "ts": 3, "dur": 1,'
              ' "args": {\n    }\n  }')
    evs = [_ev("cpu_op", "a", 1), sneaky, _ev("cpu_op", "aten::add", 4), _ev("cpu_op", "z", 5)]
    out = project(_chunk(evs), PROJ)
    kept = _names(out.text) if out is not None else _names(_chunk(evs))
    assert "hidden_gemm" in kept and "aten::mm" in kept
    assert "aten::add" not in kept


@pytest.mark.parametrize("name", ['aten::\\"quoted\\"', "x" * 200, "f{x}(y)"])
def test_names_that_cannot_be_judged_stay(name):
    evs = [_ev("cpu_op", "a", 1), _ev("cpu_op", name, 2), _ev("cpu_op", "z", 3)]
    out = project(_chunk(evs), PROJ)
    assert out is None  # nothing certain to drop


def test_other_layouts_are_parsed_whole():
    minified = b",".join(json.dumps({"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1, "ts": i,
                                     "dur": 1}).encode() for i in range(50))
    assert project(minified, PROJ) is None
    crlf = _chunk([_ev("cpu_op", f"aten::op{i}", i) for i in range(10)]).replace(b"\n", b"\r\n")
    assert project(crlf, PROJ) is None


def _kineto_file(path: Path, events: list[str]) -> Path:
    path.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + ",\n".join(events) + "\n  ]\n}\n")
    return path


def _train_like(n_steps: int = 3) -> list[str]:
    evs = []
    t = 0.0
    for s in range(n_steps):
        evs.append(_ev("user_annotation", f"ProfilerStep#{s}", t, dur=90.0, args=f'"External id": {1000 + s}'))
        for k in range(8):
            evs.append(_ev("cpu_op", f"aten::op{k}", t + 1 + k))
            evs.append(_ev("cuda_runtime", "cudaLaunchKernel", t + 1.2 + k, dur=0.5,
                           args=f'"correlation": {s * 100 + k}, "External id": 1'))
            evs.append(_ev("kernel", f"gemm_{k}", t + 20 + 4 * k, pid=0, tid=7, dur=3.0,
                           args=f'"correlation": {s * 100 + k}, "device": 0, "stream": 7'))
        t += 100.0
    return evs


def test_a_projected_load_reads_a_stored_whole_load_and_a_whole_load_never_a_projected_one(tmp_path):
    """The parse cache keeps a projected load's entry apart from the whole load's: a whole load never reads a projected
    entry (it lacks events), and a projected load reads its own. Where only the whole load's is stored, a projected load
    reads that one instead of parsing again: it holds every event, and the rank summary is the projected parse's."""
    p = _kineto_file(tmp_path / "rank0.json", _train_like())
    proj = load(p, projection=PROJ)
    whole = load(p)
    assert proj.stats.projected_out > 0 and not proj.from_cache
    assert whole.stats.projected_out == 0 and not whole.from_cache  # (parsed: the projected entry lacks events)
    again = load(p, projection=PROJ)
    assert again.from_cache and again.stats.projected_out == proj.stats.projected_out
    # another file, loaded whole first: a projected load reads the whole load's entry
    evs = _train_like()
    evs.insert(3, _ev("cpu_op", "aten::zeros", 12.0, dur=2.0))
    q = _kineto_file(tmp_path / "rank1.json", evs)
    whole_q = load(q)
    read = load(q, projection=PROJ)
    assert read.from_cache and read.stats.projected_out == 0 and read.events.height == whole_q.events.height
    assert read.stats.events == load(q, cache=False, projection=PROJ).stats.events  # (the skipped ones counted there)
    _same_result(summarize_rank(read, str(q)), summarize_rank(load(q, cache=False, projection=PROJ), str(q)))


def test_rank_task_results_equal_and_marker_ops_kept(tmp_path):
    evs = _train_like()
    # a step marker on CPU ops (no ProfilerStep): the ops it names must survive the projection
    evs = [e.replace('"cat": "user_annotation", "name": "ProfilerStep#', '"cat": "cpu_op", "name": "my_iter_') for e in evs]
    p = _kineto_file(tmp_path / "rank0.json", evs)
    a = summarize_file(str(p), RankTask(cache=False, step_marker=r"^my_iter_\d+$", projection=False))
    b = summarize_file(str(p), RankTask(cache=False, step_marker=r"^my_iter_\d+$", projection=True))
    assert isinstance(a, RankResult) and isinstance(b, RankResult)
    assert a.steps.height == 3
    _same_result(a, b)


def test_a_skipped_cpu_op_that_starts_first_gives_the_whole_result(tmp_path):
    # the rank projection skips CPU ops; one that starts before everything else is the trace's time origin:
    # the load is read in full and the rank summary equals the whole load's (times relative to that origin)
    evs = _train_like()
    evs.insert(2, _ev("cpu_op", "aten::empty", -250.0, dur=1.0))
    p = _kineto_file(tmp_path / "rank0.json", evs)
    whole = load(p, cache=False)
    proj = load(p, cache=False, projection=PROJ)
    assert proj.t0 == whole.t0 == -250_000 and proj.stats.projected_out == 0
    _same_result(summarize_rank(whole, str(p)), summarize_rank(proj, str(p)))
    # the same op starting later is skipped as usual
    evs[2] = _ev("cpu_op", "aten::empty", 30.0, dur=1.0)
    p = _kineto_file(tmp_path / "rank1.json", evs)
    later = load(p, cache=False, projection=PROJ)
    assert later.stats.projected_out > 0 and later.t0 == load(p, cache=False).t0 == 0


def test_errors_in_read_events_are_reported_as_always(tmp_path):
    evs = _train_like()
    bad = next(i for i, e in enumerate(evs) if '"cat": "kernel"' in e and i > 10)
    evs[bad] = evs[bad].replace('"dur": 3.0', '"dur": "soon"')
    p = _kineto_file(tmp_path / "rank0.json", evs)
    with pytest.raises(TraceError) as whole:
        load(p, cache=False)
    with pytest.raises(TraceError) as proj:
        load(p, cache=False, projection=PROJ)
    assert str(proj.value) == str(whole.value)
    assert f"$.traceEvents[{bad}]" in str(whole.value)


@needs_traces
def test_mutants_projected_equal_whole_or_fail_cleanly(tmp_path):
    """Seeded mutants of a real rank trace: whatever a mutant does, the projected load either gives exactly the
    whole load's rank summary, or fails with a clear error (never a traceback, never a different answer).
    A mutant the whole load rejects may load projected when the damage is inside an event it skips."""
    import random

    from kernscope.errors import KernscopeError
    from kernscope.testing import fuzz

    path = next((p for p in real_traces() if p.name == "ddp4_rank1.json.gz"), None)
    if path is None:
        pytest.skip("../shared/traces/multirank not present")
    data = gzip.decompress(path.read_bytes())
    # half the mutants with each reader (the fixture's parameter), other seeds: the same total as before
    readers = os.environ.get("KERNSCOPE_NO_NATIVE") == "1"
    r = random.Random(20261126 + readers)
    names = sorted(fuzz.MUTATORS)
    same = both_fail = skipped_damage = 0
    for i in range(10):  # per reader (two loads each of a 9 MB trace); benchmarks/fuzz_long.py runs thousands
        m = fuzz.MUTATORS[names[i % len(names)]](r, data)
        p = tmp_path / f"m{i}.json"
        p.write_bytes(m)
        results: list[RankResult | None] = []
        for proj in (None, PROJ):
            try:
                results.append(summarize_rank(load(p, cache=False, projection=proj), str(p)))
            except KernscopeError as e:
                assert str(p) in str(e) and "\n" not in str(e).strip(), str(e)
                results.append(None)
        whole, projected = results
        if whole is not None:
            assert projected is not None, f"mutant {i} ({names[i % len(names)]}): whole load fine, projected failed"
            _same_result(whole, projected)
            same += 1
        elif projected is None:
            both_fail += 1
        else:
            skipped_damage += 1
    assert same > 0 and both_fail > 0, (same, both_fail, skipped_damage)


@needs_traces
def test_cli_read_all_gives_the_same_job(capsys):
    files = sorted(str(p) for p in real_traces() if p.name.startswith("fsdp4_rank"))
    if len(files) < 2:
        pytest.skip("../shared/traces/multirank not present")
    from kernscope.cli import main

    outs = []
    for extra in ([], ["--read-all"]):
        assert main(["analyze", *files, "--format", "json", "--no-cache", "-q", *extra]) == 0
        outs.append(json.loads(capsys.readouterr().out))
    assert outs[0] == outs[1]
    assert outs[0]["world_size"] == 4 and len(outs[0]["ranks"]) == 4 and outs[0]["stragglers"]


def _names_text(names: list[str]) -> tuple[bytes, list[int]]:
    text = b"".join(b'"name": "' + n.encode() + b'", "pid": 1,\n' for n in names) + b" " * 128
    starts, pos = [], 0
    for n in names:
        starts.append(pos + len(b'"name": "'))
        pos += len(b'"name": "' + n.encode() + b'", "pid": 1,\n')
    return text, starts


@pytest.mark.parametrize("collide", [False, True])
def test_names_are_judged_whole_and_exactly(monkeypatch, collide):
    # names are compared as 64-bit words with the bytes from the closing quote on zeroed; equal names share
    # one regex test, different names never do (even when their hashes collide: then an exact unique runs)
    import numpy as np

    from kernscope.load import project as P
    from kernscope.load.projection import NameTest

    if collide:
        monkeypatch.setattr(P, "_MIX", np.zeros_like(P._MIX))  # every row hashes to 0
    names = ["", "a", "abcdefgh", "abcdefgh", "abcdefghi", "abcdefgX", "ProfilerStep#7", "x" * 95, "x" * 96,
             r"esc\"aped", "train_step(1): f", "train_step(1): f" + "g" * 8]
    text, starts = _names_text(names)
    a = np.frombuffer(text, dtype=np.uint8)
    seen: list[str] = []
    rx = NameTest("ProfilerStep|^abcdefgX$")
    def test(b):
        seen.append(b.decode())
        return rx(b)

    out = P.unwanted_names(a, np.array(starts), test)  # type: ignore[arg-type]  # a spy standing in for the NameTest
    # a 96-byte name has no closing quote in the window, an escaped one is not read: both are kept
    expected = [n != "ProfilerStep#7" and n != "abcdefgX" and len(n) < 96 and "\\" not in n for n in names]
    assert out.tolist() == expected
    whole = {n for n in names if len(n) < 96 and "\\" not in n}
    assert len(seen) == len(set(seen)) and whole <= set(seen)  # each distinct name tested once


def test_public_load_takes_the_analyze_projection(tmp_path):
    """#26.3: ``kernscope.load(path, projection="analyze")`` is the command line's fast load for library users: the
    Python frames and instants the analysis never reads are skipped, and the analysis is the same."""
    import kernscope
    from kernscope.analyze.summary import analyze

    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000}]
    for i in range(100):
        ev.append({"ph": "X", "cat": "python_function", "name": f"model.py(10): forward_{i}", "pid": 1, "tid": 1,
                   "ts": 1 + i * 10, "dur": 8})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 2 + i * 10, "dur": 5,
                   "args": {"External id": i + 1}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 3 + i * 10,
                   "dur": 2, "args": {"External id": i + 1, "correlation": 50 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 20 + i * 10, "dur": 6,
                   "args": {"correlation": 50 + i, "device": 0, "stream": 7}})
        ev.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 4 + i * 10, "s": "t",
                   "args": {"Bytes": 1024}})
    def kineto(e: dict) -> str:  # Kineto's own layout of one event
        head = ", ".join(f'"{k}": {json.dumps(e[k])}' for k in ("ph", "cat", "name", "pid", "tid"))
        times = ", ".join(f'"{k}": {json.dumps(e[k])}' for k in ("ts", "dur", "s") if k in e)
        args = f',\n    "args": {json.dumps(e["args"])}' if "args" in e else ""
        return f"  {{\n    {head},\n    {times}{args}\n  }}"

    path = tmp_path / "t.json"
    path.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + ",\n".join(kineto(e) for e in ev) + "\n]}\n")
    whole = kernscope.load(path, cache=False)
    fast = kernscope.load(path, cache=False, projection="analyze")
    assert whole.events.filter(pl.col("cat") == "python_function").height == 100
    skipped = pl.col("cat").is_in(["python_function", "cpu_instant_event"])
    # a piece's first and last events are always parsed: nearly all, not all, are skipped
    assert fast.events.filter(skipped).height <= 10 and fast.stats.projected_out >= 190
    gone = whole.events.join(fast.events, on="idx", how="anti")
    assert gone.height == fast.stats.projected_out and gone.filter(~skipped).height == 0
    assert fast.gpu.height == whole.gpu.height == 100
    a, b = analyze(whole), analyze(fast)
    assert_frame_equal(a.kernels, b.kernels) and a.steps.equals(b.steps)
    with pytest.raises(kernscope.KernscopeError, match="unknown projection 'fast'"):
        kernscope.load(path, projection="fast")  # type: ignore[arg-type]  # the refusal is what is tested
    assert kernscope.Projection is type(PROJ)


def test_a_projection_the_format_does_not_take_stores_a_whole_load(tmp_path):
    """A PyTorch trace loaded with an XSpace-only projection (``report``'s, ``memory``'s) is loaded whole, and stored as
    the whole load it is: a whole load and a projected one read that entry (before, a report left an entry only that
    same projection read, and ``analyze`` after it parsed the file again)."""
    from kernscope.analyze.needs import analyze_projection, report_projection

    p = _kineto_file(tmp_path / "rank0.json", _train_like())
    first = load(p, projection=report_projection())
    assert not first.from_cache and first.stats.projected_out == 0
    whole = load(p)
    assert whole.from_cache and whole.events.height == first.events.height
    narrow = load(p, projection=analyze_projection())
    assert narrow.from_cache and narrow.events.height == first.events.height
