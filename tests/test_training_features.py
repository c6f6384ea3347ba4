"""Training features users profile with, recorded on an H200 (``examples/record_training_features.py`` ->
``tests/data/features_h200``): torch.compile's CUDA graph trees (``mode="reduce-overhead"``), fp16 autocast with a
GradScaler, activation checkpointing and batches copied from pinned memory, and a side stream joined by
``wait_stream`` with the profiler's CUDA sync events. Each value is checked against the raw JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from kernscope import load
from kernscope.analyze.perf import perf_model
from kernscope.analyze.summary import analyze

DATA = Path(__file__).parent / "data" / "features_h200"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _events(name: str) -> list[dict]:
    return json.loads(gzip.decompress((DATA / f"{name}.pt.trace.json.gz").read_bytes()))["traceEvents"]


def _union(spans: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _launchers(ev: list[dict]) -> dict[int, str]:
    return {e["args"]["correlation"]: e["name"] for e in ev
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}


def test_graph_replays_counted_and_the_perf_model_says_why_it_cannot_model_them():
    ev = _events("reduce_overhead")
    launch = _launchers(ev)
    replayed = [e for e in ev if e.get("cat") in GPU_CATS and launch.get(e["args"].get("correlation")) == "cudaGraphLaunch"]
    assert len(replayed) == 222 and sum(1 for e in ev if e.get("name") == "cudaGraphLaunch") == 6
    trace = load(DATA / "reduce_overhead.pt.trace.json.gz", cache=False)
    assert trace.gpu["graph_launch"].sum() == 222
    s = analyze(trace)
    by = s.kernels.filter(s.kernels["launcher"] == "cudaGraphLaunch")
    assert by["count"].sum() == 222
    assert by["total_us"].sum() == pytest.approx(sum(e["dur"] for e in replayed), abs=1e-6)
    perf = perf_model(trace)
    graph_us = sum(e["dur"] for e in replayed)
    gpu_us = sum(e["dur"] for e in ev if e.get("cat") in GPU_CATS)
    (note,) = [n for n in perf.notes if "graph replays" in n]
    assert f"{graph_us:,.1f} µs" in note and f"({100 * graph_us / gpu_us:.0f}%)" in note and "captured" in note
    assert perf.coverage["pct"] < 10


def test_a_copy_from_pinned_host_memory_is_bound_by_the_link_not_rated_on_the_memory():
    """It read 2.3% of the H200's HBM bandwidth: a 54 GB/s PCIe copy rated as a copy inside the GPU."""
    ev = _events("amp_checkpoint")
    htod = [e for e in ev if e.get("cat") == "gpu_memcpy" and e["name"].startswith("Memcpy HtoD")]
    assert len(htod) == 3 and all(e["args"]["bytes"] == 2048 * 1024 * 4 for e in htod)
    perf = perf_model(load(DATA / "amp_checkpoint.pt.trace.json.gz", cache=False))
    link = perf.ops.filter(perf.ops["bound"] == "link")
    assert link["pct_of_peak"].null_count() == link.height == 2  # (``.to``'s _to_copy holds the copy_: nested)
    (row,) = link.filter(~link["nested"]).iter_rows(named=True)
    assert row["name"] == "aten::copy_" and row["count"] == 3
    assert row["kernel_time_us"] == pytest.approx(sum(e["dur"] for e in htod), abs=1e-6)
    # (bytes read and written, as for any copy: twice what crossed the link)
    assert row["tb_per_s"] == pytest.approx(2 * 3 * 2048 * 1024 * 4 / (sum(e["dur"] for e in htod) * 1e-6) / 1e12)
    others = perf.ops.filter((perf.ops["name"] == "aten::copy_") & (perf.ops["bound"] != "link"))
    assert others.height and others["pct_of_peak"].is_not_null().all()


def test_grad_scaler_kernels_are_the_optimizer_step():
    """GradScaler's scale update read Other; its non-finite check (a multi_tensor_apply kernel) was already Optimizer."""
    s = analyze(load(DATA / "amp_checkpoint.pt.trace.json.gz", cache=False))
    cats = dict(s.kernels.select("launcher", "category").iter_rows())
    assert cats["aten::_amp_update_scale_"] == "Optimizer"
    assert cats["aten::_amp_foreach_non_finite_check_and_unscale_"] == "Optimizer"
    assert "Other" not in s.categories["category"].to_list()


def test_side_stream_overlap_and_sync_events():
    """The profiler's CUDA sync events (Stream Wait Event, Stream Sync, Context Sync) are not GPU work: the GPU event
    count and busy time are the kernels', memcpys' and memsets'; the two streams' GEMMs overlap, and each step's
    critical path waits on the side stream (the join)."""
    ev = _events("streams")
    syncs = [e for e in ev if e.get("cat") == "cuda_sync"]
    assert {e["name"] for e in syncs} == {"Stream Wait Event", "Stream Sync", "Context Sync"}
    gpu = [e for e in ev if e.get("cat") in GPU_CATS]
    trace = load(DATA / "streams.pt.trace.json.gz", cache=False)
    assert trace.gpu.height == len(gpu) == 36
    gemms = [e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("nvjet")]
    assert len({e["args"]["stream"] for e in gemms}) == 2
    s = analyze(trace)
    timeline = dict(s.timeline.select("type", "time_us").iter_rows())
    union = _union([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
    assert timeline["busy_time"] == pytest.approx(union, abs=1e-3)
    assert union < sum(e["dur"] for e in gpu) - 400  # the streams overlapped
    cp = s.critical_path
    assert cp is not None and cp.steps.height == 3 and (cp.steps["stream_wait_us"] > 100).all()


def test_an_input_bound_steps_idle_start_names_the_data_loader():
    """The step's GPU waited ~99 ms for its first kernel while the host was in the DataLoader's ``__next__`` (its
    workers slower than the GPU): the finding said "CPU work or data loading" and no more. It now names the host event
    that held most of the idle start, with its time, and for a DataLoader says what to do."""
    ev = _events("dataloader")
    nexts = sorted((e["ts"], e["dur"]) for e in ev if e.get("name", "").startswith("enumerate(DataLoader)#"))
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in ev
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    s = analyze(load(DATA / "dataloader.pt.trace.json.gz", cache=False))
    idle = s.findings.filter(s.findings["rule"] == "step_start_idle")
    assert idle["step"].to_list() == [1, 3, 2]  # (by time to win back; step 2's batch was ready: 227 µs in aten::to)
    short = idle.filter(idle["step"] == 2).row(0, named=True)
    assert json.loads(short["evidence"])["host_op"] == "aten::to" and "input pipeline" not in short["text"]
    for r in idle.filter(idle["step"] != 2).iter_rows(named=True):
        e = json.loads(r["evidence"])
        a, b, _ = next(x for x in steps if x[2] == r["step"])
        (ts, dur), = [n for n in nexts if a <= n[0] < b]
        assert e["host_op"] == "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
        assert e["host_op_us"] == pytest.approx(dur, abs=1e-3)  # (it ended before the first kernel started)
        assert e["host_op_us"] >= 0.5 * e["idle_us"] and "waiting for the input pipeline" in r["text"]
    cpu_bound = analyze(load(DATA / "amp_checkpoint.pt.trace.json.gz", cache=False)).findings
    assert not any("DataLoader" in t for t in cpu_bound["text"])


def test_the_critical_paths_host_split_names_the_data_loader():
    """The path's host time by top-level op read 102 ms "(between ops)" on step 1: the DataLoader's __next__ is a user
    annotation. User annotations are ops now, except the step's own (ProfilerStep#N holds the whole step)."""
    ev = _events("dataloader")
    nexts = {round(e["dur"], 3) for e in ev if e.get("name", "").startswith("enumerate(DataLoader)#")}
    cp = analyze(load(DATA / "dataloader.pt.trace.json.gz", cache=False)).critical_path
    assert cp is not None
    ops = cp.ops
    dl = ops.filter(ops["op"] == "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__")
    assert dl["step"].to_list() == [1, 2, 3] and {round(v, 3) for v in dl["host_us"]} == nexts  # (each whole on the path)
    assert not ops["op"].str.starts_with("ProfilerStep#").any()
    assert "Optimizer.step#SGD.step" in ops["op"].to_list()
    host = dict(ops.group_by("step").agg(pl.col("host_us").sum()).iter_rows())
    assert all(host[r["step"]] == pytest.approx(r["cpu_us"], abs=0.01) for r in cp.steps.iter_rows(named=True))


def test_autotuning_in_the_first_profiled_step_is_a_finding():
    """A ``@triton.autotune`` kernel (4 configs) profiled from its first call: Triton's do_bench fills a 256 MiB buffer
    before each timed run to clear the L2 cache. Step 0 held 189 such fills (75% of the profile's GPU time, read as
    Memory) and 263 launches of the kernel; no finding said why. The ``autotune`` finding counts the fills (by their
    duration: no shapes needed) and names the kernel timed after them, with every launch of it in the step."""
    ev = _events("first_call_autotune")
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    fills = [e for e in kernels if "FillFunctor<int>" in e["name"]]
    assert len(fills) == 189 and all(e["dur"] >= 50 for e in fills)  # 256 MB at the H200's 4.8 TB/s: 53 µs
    zero = {tuple(e["args"]["Input Dims"][0]) for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::zero_"}
    assert zero == {(64 << 20,)}  # Triton's cache: 256 MiB of int32
    a = analyze(load(DATA / "first_call_autotune.pt.trace.json.gz", cache=False))
    (f,) = a.findings.filter(pl.col("rule") == "autotune").to_dicts()
    e = json.loads(f["evidence"])
    assert f["step"] == 0 and e["flushes"] == 189 and e["kernels"] == ["scale_add"]
    assert e["flush_us"] == pytest.approx(sum(x["dur"] for x in fills), abs=0.01)
    launches = sorted((x for x in kernels if x["name"] == "scale_add"), key=lambda x: x["ts"])
    step0 = a.steps.filter(pl.col("step") == 0).row(0, named=True)
    in_step0 = launches[:-2]  # (steps 1 and 2 launch it once each)
    assert len(launches) == 263 and len(in_step0) == 261 and step0["kernel_count"] == 189 + 261
    assert f["win_back_us"] == pytest.approx(e["flush_us"] + sum(x["dur"] for x in in_step0), abs=0.01)
    assert "189 L2-cache flushes" in f["text"] and "261 launches of scale_add" in f["text"]
    assert a.findings.filter((pl.col("rule") == "autotune") & (pl.col("step") > 0)).height == 0
