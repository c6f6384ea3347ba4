"""Format variants, parallel decode, cache, steps-by-launch and the call tree on generated traces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from conftest import write_trace

import kernscope
from kernscope.load import document
from kernscope.load.chunk import _float_us_to_ns, us_text_to_ns
from kernscope.testing.synth import make_trace


def _kernel(ts, dur, corr, name="k", stream=7, device=0, **extra):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream, "device": device, **extra}}


def _launch(ts, dur, corr, ext, name="cudaLaunchKernel", pid=1, tid=1):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "External id": ext}}


def _op(ts, dur, ext, name="aten::mm", pid=1, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": {"External id": ext}}


def _step(n, ts, dur, pid=1, tid=1):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": pid, "tid": tid, "ts": ts, "dur": dur}


def test_exact_us_text_to_ns():
    texts = ["1712195495519689.047", "-1.5", "", "12", "0.0005", "1e3", "7", "9999999999999999", "abc", "null"]
    ns, miss, bad = us_text_to_ns(pl.Series(texts))
    assert ns.to_list()[:7] == [1712195495519689047, -1500, 0, 12000, 1, 1000000, 7000]
    assert miss.to_list() == [False, False, True, False, False, False, False, False, False, True]
    assert bad.to_list() == [False] * 7 + [True, True, False]  # 1e16 µs does not fit int64 ns


def test_float_path_equals_exact_text_below_2_pow_43():
    """The fast path reads µs as float64; below 2^43 µs it must give exactly the text's ns."""
    import random

    rnd = random.Random(7)
    vals = [rnd.randrange(0, 2**43 * 1000) for _ in range(200_000)] + [2**43 * 1000 - 1, 0, 1, 999, 4_398_046_511_103_999]
    texts = [f"{v // 1000}.{v % 1000:03d}" for v in vals]
    got = _float_us_to_ns(pl.Series(texts).cast(pl.Float64))
    assert got.to_list() == vals


def test_absolute_fractional_timestamps_are_exact(tmp_path):
    # written as text: a Python float could not even hold these values
    text = """{"traceEvents": [
      {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1712195495519689.047, "dur": 10.001,
       "args": {"External id": 1}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1712195495519690.001,
       "dur": 2.5, "args": {"External id": 1, "correlation": 5}},
      {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1712195495519699.999, "dur": 3.333,
       "args": {"correlation": 5, "stream": 7, "device": 0}}]}"""
    p = tmp_path / "a.json"
    p.write_text(text)
    t = kernscope.load(p, cache=False)
    assert t.kernels["ts"].item() == 1712195495519699999
    assert t.kernels["dur"].item() == 3333
    assert t.kernels["op_name"].item() == "aten::mm"


def test_rocm_string_streams_and_string_pids(tmp_path):
    ev = [
        {"ph": "X", "cat": "kernel", "name": "Cijk_Alik_Bljk_HHS_BH_MT128x128x32", "pid": 2, "tid": "stream 0x1",
         "ts": 10, "dur": 5, "args": {"correlation": 9, "stream": "0x1", "device": 2, "kind": "Dispatch Kernel"}},
        _launch(1, 2, 9, 3, name="hipExtModuleLaunchKernel"),
        {"ph": "i", "s": "g", "name": "Iteration Start", "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": 1},
        {"ph": "M", "name": "process_name", "pid": "Spans", "tid": "", "args": {"name": "Spans"}},
    ]
    t = kernscope.load(write_trace(tmp_path / "r.json", ev), cache=False)
    k = t.kernels.row(0, named=True)
    assert (k["stream"], k["device"], k["launch_name"]) == (1, 2, "hipExtModuleLaunchKernel")
    assert t.process_names == {"Spans": "Spans"}
    assert t.platform == "rocm"


def test_bare_event_array_and_any_key_order(tmp_path):
    ev = [_launch(1, 1, 3, 1), _kernel(5, 2, 3)]
    p = tmp_path / "arr.json"
    p.write_text(json.dumps(ev))
    assert kernscope.load(p, cache=False).kernels.height == 1
    p2 = tmp_path / "order.json"
    p2.write_text(json.dumps({"traceEvents": ev, "baseTimeNanoseconds": 1700000000000000000,
                              "distributedInfo": {"rank": 3, "world_size": 4}}))
    t = kernscope.load(p2, cache=False)
    assert (t.rank, t.world_size, t.base_time_ns) == (3, 4, 1700000000000000000)


def test_kernel_belongs_to_the_step_of_its_launch(tmp_path):
    ev = [
        _step(1, 0, 100), _step(2, 100, 100),
        _op(10, 80, 1), _launch(90, 5, 11, 1), _kernel(150, 30, 11),  # launched in 1, runs in 2
        _op(120, 50, 2), _launch(130, 5, 12, 2), _kernel(185, 10, 12),
    ]
    t = kernscope.load(write_trace(tmp_path / "s.json", ev), cache=False)
    steps = dict(zip(t.kernels["correlation"].to_list(), t.kernels["step"].to_list()))
    assert steps == {11: 1, 12: 2}


def test_graph_launch_many_kernels(tmp_path):
    ev = [_op(0, 50, 1, name="CUDAGraph::replay"), _launch(5, 10, 77, 1, name="cudaGraphLaunch")]
    ev += [_kernel(20 + 10 * i, 5, 77, name=f"k{i}") for i in range(5)]
    t = kernscope.load(write_trace(tmp_path / "g.json", ev), cache=False)
    assert t.kernels.height == 5 and t.kernels["graph_launch"].all()
    assert set(t.kernels["launcher"].to_list()) == {"cudaGraphLaunch"}
    assert set(t.kernels["op_name"].to_list()) == {"CUDAGraph::replay"}


def test_unlinked_are_counted_not_dropped(tmp_path):
    ev = [_launch(50, 1, 5, 1), _kernel(60, 1, 5), _kernel(0, 1, 2), _launch(70, 1, 6, 9),
          {"ph": "s", "id": 6, "pid": 1, "tid": 1, "ts": 70, "cat": "ac2g", "name": "ac2g"}]
    t = kernscope.load(write_trace(tmp_path / "u.json", ev), cache=False)
    assert t.kernels.height == 2
    assert t.unlinked["gpu_without_launch"] == 1
    assert t.unlinked["gpu_launched_before_window"] == 1
    assert t.unlinked["launches_without_gpu"] == 1
    assert t.unlinked["launches_without_op"] == 1
    assert t.unlinked["flows_without_end"] == 1


@pytest.mark.parametrize("on_a_thread", [False, True], ids=["inline", "on a thread"])
def test_flows_without_end_count_each_started_flow_with_no_end_of_its_category_and_id(tmp_path, monkeypatch, on_a_thread):
    """A flow is its (category, id): counted once however often it starts, not when any of its ends ("f", or a step
    "t") is there, and an end of another category or id does not end it; a flow without an id is one flow too."""
    def flow(ph, fid, cat="ac2g", ts=70):
        return {"ph": ph, "pid": 1, "tid": 1, "ts": ts, "cat": cat, "name": cat, **({} if fid is None else {"id": fid})}

    ev = [_launch(50, 1, 5, 1), _kernel(60, 1, 5)]
    ev += [flow("s", 1), flow("f", 1)]  # ended
    ev += [flow("s", 2), flow("s", 2, ts=71)]  # two starts, no end: one flow
    ev += [flow("s", 3), flow("t", 3)]  # a step ends it
    ev += [flow("s", 4), flow("f", 4, cat="fwdbwd")]  # an end of another category: not its own
    ev += [flow("s", 5, cat="fwdbwd"), flow("f", 6, cat="fwdbwd")]  # an end of another id
    ev += [flow("s", None), flow("s", None, ts=72)]  # no id: one flow, no end
    ev += [flow("s", None, cat="fwdbwd"), flow("f", None, cat="fwdbwd")]  # no id, ended
    ev += [flow("f", 7)]  # an end with no start
    # (a large trace's count and facts are made on a thread of their own, beside the GPU rows' link: both ways here)
    from kernscope.link import build

    monkeypatch.setattr(build, "ON_A_THREAD", 0 if on_a_thread else 10**9)
    t = kernscope.load(write_trace(tmp_path / "f.json", ev), cache=False)
    assert t.unlinked["flows_without_end"] == 4  # ids 2, 4, 5 and the flow without an id
    assert t.stats.event_counts == {"runtime": 1, "kernel": 1} and t.stats.platform == "cuda"


def test_link_reads_the_flows_and_facts_on_a_thread_as_it_does_inline(monkeypatch):
    """The bundled example linked with the flow arrows' count and the trace's facts made on a thread beside the GPU
    rows' link (what a trace of 20,000 flow arrows gets) and inline: the same facts, counts and GPU table."""
    from kernscope.link import build

    example = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    got = []
    for threshold in (0, 10**9):
        monkeypatch.setattr(build, "ON_A_THREAD", threshold)
        got.append(kernscope.load(example, cache=False))
    threaded, inline = got
    assert threaded.stats == inline.stats and threaded.unlinked == inline.unlinked
    assert threaded.gpu.equals(inline.gpu) and threaded.stats.event_counts["kernel"] == 728


def test_launcher_falls_back_to_nesting_without_external_id(tmp_path):
    ev = [_op(0, 100, 1, name="aten::linear"), _op(10, 50, 2, name="aten::addmm"),
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
           "args": {"correlation": 3}}, _kernel(40, 5, 3)]
    t = kernscope.load(write_trace(tmp_path / "n.json", ev), cache=False)
    assert t.kernels["op_name"].item() == "aten::addmm"


def test_call_tree_tolerates_boundary_bleed(tmp_path):
    ev = [_op(0, 100, 1, name="parent"), _op(50, 50.4, 2, name="child_bleeds"), _op(100.2, 10, 3, name="sibling"),
          _op(99.5, 0.3, 4, name="short_last_child")]
    t = kernscope.load(write_trace(tmp_path / "t.json", ev), cache=False)
    tree = t.call_tree.join(t.events.select("idx", pl.col("name").cast(pl.String)), on="idx")
    parents = {r["name"]: r["parent_idx"] for r in tree.iter_rows(named=True)}
    idx = {r["name"]: r["idx"] for r in tree.iter_rows(named=True)}
    assert parents["parent"] is None
    assert parents["child_bleeds"] == idx["parent"]
    assert parents["sibling"] is None
    assert parents["short_last_child"] == idx["child_bleeds"]


def test_python_function_tree_by_python_ids(tmp_path):
    ev = [{"ph": "X", "cat": "python_function", "name": "train.py(10): step", "pid": 1, "tid": 1, "ts": 0, "dur": 100,
           "args": {"Python id": 1, "Python parent id": 0}},
          {"ph": "X", "cat": "python_function", "name": "nn.Module: Linear", "pid": 1, "tid": 1, "ts": 10, "dur": 50,
           "args": {"Python id": 2, "Python parent id": 1}}]
    from kernscope.link.ops import python_parents

    t = kernscope.load(write_trace(tmp_path / "py.json", ev), cache=False)
    linked = python_parents(t.events)  # computed on demand, not while linking
    child = linked.filter(pl.col("name").cast(pl.String) == "nn.Module: Linear").row(0, named=True)
    parent = linked.filter(pl.col("name").cast(pl.String) == "train.py(10): step").row(0, named=True)
    assert child["py_parent_idx"] == parent["idx"]


def test_parallel_decode_equals_serial(tmp_path, monkeypatch):
    p = tmp_path / "big.json"
    st = make_trace(p, 3_000_000)
    monkeypatch.setattr(document, "CHUNK_BYTES", 1 << 18)
    par = kernscope.load(p, cache=False, workers=2)
    ser = kernscope.load(p, cache=False, workers=1)
    assert par.events.height == ser.events.height
    assert par.events.height + par.flows.height == st.events
    assert par.kernels.height == ser.kernels.height == st.kernels
    assert int(par.kernels["dur"].sum()) == st.kernel_ns
    assert par.events.select("ts", "dur", pl.col("name").cast(pl.String)).equals(
        ser.events.select("ts", "dur", pl.col("name").cast(pl.String)))
    assert par.gpu["graph_launch"].sum() == 4 * st.graph_launches


def test_gzip_and_plain_are_identical(tmp_path):
    make_trace(tmp_path / "x.json", 400_000, seed=3)
    make_trace(tmp_path / "x.json.gz", 400_000, seed=3)
    a = kernscope.load(tmp_path / "x.json", cache=False)
    b = kernscope.load(tmp_path / "x.json.gz", cache=False)
    assert a.gpu.select("ts", "dur", "correlation").equals(b.gpu.select("ts", "dur", "correlation"))


def test_cache_roundtrip_and_invalidation(tmp_path):
    p = tmp_path / "c.json"
    make_trace(p, 300_000)
    a = kernscope.load(p)
    assert not a.from_cache
    b = kernscope.load(p)
    assert b.from_cache
    assert a.gpu.equals(b.gpu) and a.steps.equals(b.steps) and a.unlinked == b.unlinked
    make_trace(p, 200_000, seed=9)  # rewritten: new size/mtime -> new key
    c = kernscope.load(p)
    assert not c.from_cache and c.gpu.height != a.gpu.height


def test_cache_dir_unwritable_is_not_fatal(tmp_path, monkeypatch):
    p = write_trace(tmp_path / "w.json", [_launch(1, 1, 3, 1), _kernel(5, 2, 3)])
    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", "/proc/kernscope-no-such-dir")
    with pytest.warns(UserWarning, match="cache directory /proc/kernscope-no-such-dir cannot be used: .* running without a cache"):
        assert kernscope.load(p).kernels.height == 1
    # a file where a folder above it should be: named (the reason read "File exists")
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("KERNSCOPE_CACHE_DIR", str(tmp_path / "afile" / "cache" / "k"))
    with pytest.warns(UserWarning, match=re.escape(f"cannot create it ({tmp_path / 'afile'} is not a folder); running without")):
        assert kernscope.load(p).kernels.height == 1


def test_launches_one_per_correlation_the_earliest_then_the_first_in_the_file():
    """``launches``: a runtime or driver call per correlation, the earliest (of equal starts the first in the file),
    in order of start; ``among`` keeps only those correlations (the GPU rows'), the same rows otherwise."""
    import polars as pl

    from kernscope.link.correlation import launches

    rows = [  # (kind, correlation, name, ts)
        ("runtime", 1, "late", 30), ("runtime", 1, "early", 10),  # the earliest wins
        ("driver", 2, "first", 20), ("runtime", 2, "second", 20),  # equal starts: the first in the file
        ("cpu_op", 3, "op", 5), ("runtime", 3, "call", 40),  # not a runtime call: not a launch
        ("runtime", None, "no correlation", 1), ("runtime", 4, "other", 50),
    ]
    ev = pl.DataFrame({"kind": [r[0] for r in rows], "correlation": [r[1] for r in rows],
                       "idx": list(range(len(rows))), "name": [r[2] for r in rows], "ts": [r[3] for r in rows],
                       "dur": [1] * len(rows), "pid": ["1"] * len(rows), "tid": ["1"] * len(rows),
                       "external_id": [None] * len(rows)}, schema_overrides={"external_id": pl.Int64})
    got = launches(ev)
    assert got.select("correlation", "launch_name").rows() == [(1, "early"), (2, "first"), (3, "call"), (4, "other")]
    some = launches(ev, among=pl.Series([2, 4, 9]))
    assert some.equals(got.filter(pl.col("correlation").is_in([2, 4])))
