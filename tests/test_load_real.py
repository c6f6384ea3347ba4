"""Every real trace in ../shared/traces: counts and sums against the raw JSON, links, graph launches."""

from __future__ import annotations

from collections import Counter

import polars as pl
import pytest
from conftest import needs_traces, raw_events, real_traces, trace_id, us_to_ns

import kernscope

pytestmark = needs_traces

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


@pytest.fixture(scope="module", params=real_traces(), ids=trace_id)
def pair(request):
    path = request.param
    return path, raw_events(path), kernscope.load(path, cache=False)


def test_kernel_count_and_time_match_raw_json(pair):
    path, raw, t = pair
    raw_k = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel"]
    assert t.kernels.height == len(raw_k)
    assert int(t.kernels["dur"].sum() or 0) == sum(us_to_ns(e["dur"]) for e in raw_k)
    raw_gpu = Counter(GPU_CATS[e["cat"]] for e in raw if e.get("ph") == "X" and e.get("cat") in GPU_CATS)
    got = Counter({str(k): n for k, n in t.gpu.group_by("kind").len().iter_rows()})
    assert got == raw_gpu


def test_process_and_thread_names_match_raw_json(pair):
    # metadata events (their args are read only in the pieces that may hold one)
    path, raw, t = pair
    meta = [e for e in raw if e.get("ph") == "M" and e.get("args", {}).get("name") is not None]
    procs = {str(e["pid"]): str(e["args"]["name"]) for e in meta if e.get("name") == "process_name"}
    threads = {f'{e["pid"]}:{e["tid"]}': str(e["args"]["name"]) for e in meta if e.get("name") == "thread_name"}
    assert t.process_names == procs
    assert t.thread_names == threads


def test_timestamps_are_exact_ns(pair):
    path, raw, t = pair
    raw_k = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "kernel"][:200]
    want = sorted(us_to_ns(e["ts"]) for e in raw_k)
    got = set(t.kernels["ts"].to_list())
    assert all(w in got for w in want)


def test_every_kernel_with_a_launch_in_the_trace_is_linked(pair):
    path, raw, t = pair
    launch_corr = {
        e["args"]["correlation"]
        for e in raw
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    g = t.gpu
    expected_linked = g.filter(pl.col("correlation").is_in(list(launch_corr)))
    assert expected_linked["launch_idx"].null_count() == 0
    # nothing silently dropped: unlinked GPU events are counted
    assert t.unlinked["gpu_without_launch"] == g.height - expected_linked.height


def test_graph_launch_kernels_attach_to_their_launch(pair):
    path, raw, t = pair
    graph_corr = {
        e["args"]["correlation"]
        for e in raw
        if e.get("ph") == "X" and "GraphLaunch" in str(e.get("name")) and "correlation" in e.get("args", {})
    }
    if not graph_corr:
        pytest.skip("no graph launches in this trace")
    gk = t.gpu.filter(pl.col("correlation").is_in(list(graph_corr)))
    assert gk.height > 0
    assert gk["graph_launch"].all()
    assert gk["launch_name"].cast(str).str.contains("GraphLaunch").all()
    # several kernels per launch happen: the join is many-to-one
    per_launch = gk.group_by("launch_idx").len()
    assert per_launch.height == len({c for c in gk["correlation"].to_list()})


def test_steps_match_profiler_step_annotations(pair):
    path, raw, t = pair
    names = {e["name"] for e in raw if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
             and e.get("cat") != "gpu_user_annotation"}
    if names:
        assert t.step_source == "ProfilerStep" and set(t.steps["name"].to_list()) == names
    else:  # other windows (markers or automatic): tests/test_steps.py checks them trace by trace
        assert t.step_source != "ProfilerStep"


def test_metadata(pair):
    path, raw, t = pair
    assert t.events.height > 0
    if t.metadata.get("distributedInfo", {}).get("rank") is not None:
        assert t.rank == t.metadata["distributedInfo"]["rank"]


def test_known_values():
    by_name = {p.name: p for p in real_traces()}
    t = kernscope.load(by_name["rocm_vllm_piecewise_hipgraph.json.gz"])
    assert t.platform == "rocm"
    g = t.gpu.filter(pl.col("graph_launch"))
    assert g.height == 361 and g["launch_idx"].n_unique() == 25
    t = kernscope.load(by_name["a100_16rank_rank0_triton.json.gz"])
    assert (t.rank, t.world_size) == (0, 16)
    assert t.unlinked["gpu_launched_before_window"] == 872
    assert t.gpu.filter(pl.col("graph_launch"))["launch_idx"].n_unique() == 70
