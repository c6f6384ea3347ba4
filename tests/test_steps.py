"""Steps beyond ProfilerStep: markers (presets and regexes), automatic windows from the kernel sequence,
phases, breakdown by annotation. Expected counts are read from the raw JSON independently."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES, needs_traces, raw_events, write_trace

import kernscope
from kernscope.cli import main
from kernscope.link import StepSpec


def _raw_period(names: list[str]) -> int:
    """Brute force: the period with the best match rate (>= 0.9), smallest within 1% of the best."""
    rates = {p: sum(a == b for a, b in zip(names, names[p:])) / (len(names) - p) for p in range(2, len(names) // 2 + 1)}
    ok = {p: r for p, r in rates.items() if r >= 0.9}
    best = max(ok.values())
    return min(p for p, r in ok.items() if r >= best - 0.01)


@needs_traces
@pytest.mark.parametrize("name,kind", [("tracelens/b200_eager_trace.json.gz", "prefill"),
                                       ("tracelens/rocm_vllm_decode_full_hipgraph.json.gz", "decode"),
                                       ("tracelens/rocm_vllm_piecewise_hipgraph.json.gz", "mixed")])
def test_vllm_traces_step_on_their_execute_ranges(name, kind):
    raw = raw_events(TRACES / name)
    marks = [e for e in raw if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("execute_")]
    t = kernscope.load(TRACES / name, cache=False)
    assert t.step_source == "marker:vllm"
    assert t.steps.height == len(marks) == 1
    assert t.steps["kind"].to_list() == [kind]
    kernels = t.gpu.filter(pl.col("kind") == "kernel")
    assert kernels.filter(pl.col("step") == 0).height == kernels.filter(pl.col("launch_ts").is_not_null()).height


@needs_traces
@pytest.mark.parametrize("name", ["tracelens/b200_eager_trace.json.gz", "tracelens/rocm_vllm_decode_full_hipgraph.json.gz",
                                  "tracelens/rocm_vllm_piecewise_hipgraph.json.gz"])
def test_auto_windows_are_the_repeating_unit(name):
    raw = raw_events(TRACES / name)
    ks = sorted((e for e in raw if e.get("cat") == "kernel"), key=lambda e: (e["ts"], e["dur"]))
    p = _raw_period([e["name"] for e in ks])
    t = kernscope.load(TRACES / name, cache=False, steps=StepSpec("auto"))
    assert t.step_source == "auto"
    per = t.gpu.filter(pl.col("kind") == "kernel").group_by("step").len()
    steady = t.steps.filter(pl.col("phase") == "steady")["step"]
    assert per.filter(pl.col("step").is_in(steady.implode()))["len"].unique().to_list() == [p]
    assert int(per["len"].sum()) == len(ks)  # every kernel in a window
    assert len(ks) // p - 2 <= steady.len() <= len(ks) // p
    assert set(t.steps["phase"].to_list()) <= {"warmup", "steady", "tail"}
    assert t.unlinked["gpu_outside_steps"] == 0


@needs_traces
def test_gpu_only_and_compiled_traces_get_windows():
    t = kernscope.load(TRACES / "tracelens/mi210_gpu_only.json.gz", cache=False)
    assert t.step_source == "auto" and t.steps.height == 1  # no repeating unit: the whole trace
    assert t.gpu.filter(pl.col("step") == 0).height == t.gpu.height
    t = kernscope.load(TRACES / "tracelens/torch_compile_triton.json.gz", cache=False)
    raw = raw_events(TRACES / "tracelens/torch_compile_triton.json.gz")
    calls = [e for e in raw if e.get("cat") == "user_annotation" and "CompiledFxGraph" in e["name"]]
    assert t.step_source == "marker:compiled" and t.steps.height == len(calls) == 1
    assert t.kernels.filter(pl.col("step") == 0).height == 12


ACTIVITIES = Path(__file__).resolve().parent / "data" / "activities_h200"


def test_auto_windows_start_where_the_host_drained_the_device():
    """One training loop on an H200 (examples/record_activity_traces.py), torch.cuda.synchronize() after each
    iteration: recorded with the CUDA activity alone (no CPU op, no ProfilerStep), the automatic windows are the
    iterations, each from the forward's first GEMM to the optimizer's kernel (the gap before the optimizer's kernel
    was as long as the one before the forward: the windows began there, 22 + 23 + 23 + 1 kernels). Recorded with
    both activities, automatic windows give the ProfilerStep steps' kernels exactly."""
    t = kernscope.load(ACTIVITIES / "cuda_only.pt.trace.json.gz", cache=False)
    assert t.step_source == "auto" and t.steps["phase"].to_list() == ["steady"] * 3
    k = t.kernels.sort("ts")
    assert k.group_by("step", maintain_order=True).len()["len"].to_list() == [23, 23, 23]
    firsts = k.group_by("step", maintain_order=True).agg(pl.col("name").first(), pl.col("name").last().alias("end"))
    assert all("tilesize32x32x8" in n for n in firsts["name"].cast(pl.String))
    assert all("multi_tensor_apply" in n for n in firsts["end"].cast(pl.String))
    both = ACTIVITIES / "cpu_cuda.pt.trace.json.gz"
    marked = kernscope.load(both, cache=False)
    auto = kernscope.load(both, cache=False, steps=StepSpec("auto"))
    assert marked.step_source == "ProfilerStep" and marked.steps.height == auto.steps.height == 3

    def per_step(tr):
        return tr.kernels.group_by("step").agg(pl.len(), pl.col("dur").sum()).sort("step").drop("step").rows()

    assert per_step(auto) == per_step(marked)


def _ev(name, ts, dur, cat="user_annotation", tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _kernel(name, ts, dur, corr, launch_ts):
    return [_ev("cudaLaunchKernel", launch_ts, 1, "cuda_runtime", correlation=corr),
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
             "args": {"correlation": corr, "device": 0, "stream": 7}}]


def _serving_trace(tmp_path):
    """An SGLang-like server: decode and extend steps, each with its own kernels."""
    ev, corr, t = [], 0, 0
    for i, kind in enumerate(["EXTEND", "DECODE", "DECODE", "EXTEND", "DECODE"]):
        ev.append(_ev(f"step[{kind}]", t, 100))
        for j in range(3 if kind == "DECODE" else 5):
            corr += 1
            ev += _kernel(f"k_{kind.lower()}_{j}", t + 10 + 10 * j, 5, corr, t + 5 + 10 * j)
        t += 200
    return write_trace(tmp_path / "sglang.json", ev)


def test_sglang_preset_and_kinds(tmp_path, capsys):
    p = _serving_trace(tmp_path)
    t = kernscope.load(p, cache=False)
    assert t.step_source == "marker:sglang"
    assert t.steps["kind"].to_list() == ["extend", "decode", "decode", "extend", "decode"]
    assert t.kernels.group_by("step").len().sort("step")["len"].to_list() == [5, 3, 3, 5, 3]
    assert main(["analyze", str(p), "--no-cache", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [s["kind"] for s in doc["steps"]] == ["extend", "decode", "decode", "extend", "decode"]
    assert {k: sum(s["kernel_count"] for s in doc["steps"] if s["kind"] == k) for k in ("decode", "extend")} == \
        {"decode": 9, "extend": 10}


def test_regex_marker_inside_profiler_steps_and_either_view(tmp_path):
    ev, corr = [], 0
    for s in range(3):
        base = s * 1000
        ev.append(_ev(f"ProfilerStep#{s}", base, 900))
        for mb in range(2):
            ev.append(_ev(f"microbatch {mb}", base + 10 + 400 * mb, 380))
            for j in range(2):
                corr += 1
                ev += _kernel("gemm", base + 20 + 400 * mb + 50 * j, 10, corr, base + 15 + 400 * mb + 50 * j)
    p = write_trace(tmp_path / "t.json", ev)
    a = kernscope.load(p, cache=False)
    assert a.step_source == "ProfilerStep" and a.steps.height == 3
    b = kernscope.load(p, cache=False, steps=StepSpec(r"^microbatch (?P<kind>\d)$"))
    assert b.step_source.startswith("marker:") and b.steps.height == 6 and b.steps["kind"].to_list() == ["0", "1"] * 3
    assert b.kernels.group_by("step").len()["len"].to_list() == [2] * 6


def test_marker_matching_nothing_lists_the_annotations(tmp_path, capsys):
    p = _serving_trace(tmp_path)
    rc = main(["analyze", str(p), "--no-cache", "--step-marker", "^nothing here$"])
    err = capsys.readouterr().err
    assert rc == 2 and "matches no annotation" in err and "'step[DECODE]' (3)" in err and len(err.strip().splitlines()) == 1


def test_profiler_step_phases_tell_warmup_from_steady(tmp_path):
    ev, corr = [], 0
    for s in range(5):
        base = s * 1000
        ev.append(_ev(f"ProfilerStep#{s}", base, 900))
        names = ["autotune_probe", "gemm", "gemm", "add"] if s == 0 else ["gemm", "gemm", "add"]
        for j, n in enumerate(names):
            corr += 1
            ev += _kernel(n, base + 20 + 50 * j, 10, corr, base + 15 + 50 * j)
    t = kernscope.load(write_trace(tmp_path / "t.json", ev), cache=False)
    assert t.steps["phase"].to_list() == ["warmup", "steady", "steady", "steady", "steady"]


def test_breakdown_by_nested_annotations(tmp_path, capsys):
    ev, corr = [], 0
    ev.append(_ev("forward", 0, 1000))
    ev.append(_ev("attention", 100, 300))
    ev.append(_ev("mlp", 500, 300))
    for n, lt, d in [("flash_fwd_kernel", 150, 40), ("flash_fwd_kernel", 200, 40), ("sm90_gemm", 550, 100), ("sm90_gemm", 600, 100),
                     ("elementwise_add", 900, 10)]:
        corr += 1
        ev += _kernel(n, lt + 5, d, corr, lt)
    corr += 1
    ev += _kernel("outside_kernel", 2005, 7, corr, 2000)
    p = write_trace(tmp_path / "t.json", ev)
    assert main(["analyze", str(p), "--no-cache", "--format", "json", "--by-annotation"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["path"]: r for r in doc["annotations"]}
    assert set(rows) == {"forward", "forward / attention", "forward / mlp"}
    assert rows["forward"]["kernel_count"] == 5 and rows["forward"]["kernel_time_us"] == 290.0  # inclusive
    assert rows["forward / attention"]["kernel_count"] == 2 and rows["forward / attention"]["kernel_time_us"] == 80.0
    assert rows["forward / mlp"]["kernel_time_us"] == 200.0 and rows["forward / mlp"]["depth"] == 1
    cats = {(c["path"], c["category"]) for c in doc["annotation_categories"]}
    assert ("forward / mlp", "GEMM") in cats and ("forward / attention", "Attention Forward") in cats
    assert any(r["path"] == "forward / mlp" and r["type"] == "busy_time" and r["time_us"] == 150.0
               for r in doc["annotation_timeline"])  # two overlapping 100 µs GEMMs: 150 µs busy
    # every range's timeline is busy for as long as its work's union, nested ranges too (a kernel is in every range
    # around its launch: clipped among its own copies, the outer ranges' copies read as zero length)
    busy = {r["path"]: r["time_us"] for r in doc["annotation_timeline"] if r["type"] == "busy_time"}
    assert busy == {p: r["busy_us"] for p, r in rows.items()} and busy["forward"] == 80.0 + 150.0 + 10.0
    assert main(["analyze", str(p), "--no-cache", "--by-annotation", "^mlp$", "--format", "json"]) == 0
    assert [r["path"] for r in json.loads(capsys.readouterr().out)["annotations"]] == ["mlp"]
    # the option before the trace: the trace's name is not taken as the regex (that missed the trace: exit 2)
    assert main(["analyze", "--by-annotation", str(p), "--no-cache", "--format", "json"]) == 0
    assert {r["path"] for r in json.loads(capsys.readouterr().out)["annotations"]} == set(rows)
    assert main(["analyze", "--by-annotation=^mlp$", str(p), "--no-cache", "--format", "json"]) == 0
    assert [r["path"] for r in json.loads(capsys.readouterr().out)["annotations"]] == ["mlp"]
    # no match: the line lists the user's ranges only (a profiler step listed beside "matches no annotation" read as a
    # contradiction) and says what is not counted
    assert main(["analyze", str(p), "--no-cache", "--by-annotation", "^nope$"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--by-annotation '^nope$' matches no user annotation" in err[0]
    assert "the most frequent are: 'attention' (1), 'forward' (1), 'mlp' (1)" in err[0]
    steps_only = write_trace(tmp_path / "s.json", [_ev("ProfilerStep#1", 0, 1000), *_kernel("k", 10, 5, 1, 5)])
    assert main(["analyze", str(steps_only), "--no-cache", "--by-annotation"]) == 2
    err = capsys.readouterr().err
    assert "--by-annotation finds no user annotation (profiler steps" in err and err.strip().endswith("are: none")


def test_marker_matching_nothing_lists_the_users_ranges_first(tmp_path, capsys):
    """A marker that matches nothing listed the most frequent names of all: on the DDP job's rank 'aten::as_strided'
    (1096), 'aten::empty_strided' (960) ... no step marker among them. The user's ranges come first, and numbered
    names read as one (ProfilerStep#N, not each step)."""
    ev = []
    for i in range(3):
        ev.append(_ev(f"ProfilerStep#{i}", 1000 * i, 900))
        ev.append(_ev("forward", 1000 * i + 10, 400))
        ev += [{"ph": "X", "cat": "cpu_op", "name": "aten::as_strided", "pid": 1, "tid": 1, "ts": 1000 * i + 20 + j,
                "dur": 0.5} for j in range(50)]
    p = write_trace(tmp_path / "t.json", ev)
    assert main(["analyze", str(p), "--no-cache", "--step-marker", "^decode$"]) == 2
    err = capsys.readouterr().err
    assert "the most frequent are: 'ProfilerStep#N' (3), 'forward' (3), 'aten::as_strided' (150)" in err, err


def test_a_cuda_only_recordings_launchers_are_called_runtime_calls(capsys):
    """A trace recorded with the CUDA activity alone has no CPU op: its launchers are the runtime calls, and the table
    says so (it read "GPU time by launching CPU op" over cudaLaunchKernel rows); with CPU + CUDA it reads as before."""
    assert main(["analyze", str(ACTIVITIES / "cuda_only.pt.trace.json.gz"), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "GPU time by launching runtime call (no CPU op in the trace: recorded without the CPU activity)" in out
    assert "GPU time by launching CPU op" not in out
    assert main(["analyze", str(ACTIVITIES / "cpu_cuda.pt.trace.json.gz"), "--no-cache"]) == 0
    assert "GPU time by launching CPU op" in capsys.readouterr().out
