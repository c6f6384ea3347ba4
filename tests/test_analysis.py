"""Summaries, GPU timeline (against TraceLens's answers), CLI JSON/CSV/table and the report."""

from __future__ import annotations

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import TRACES, needs_traces, write_trace

import kernscope
from kernscope.analyze.categories import Categorizer
from kernscope.analyze.kernels import gpu_table
from kernscope.analyze.summary import analyze
from kernscope.analyze.timeline import gpu_timeline, step_timelines, timeline_rows
from kernscope.cli import main
from kernscope.intervals import union_ns
from kernscope.testing.synth import make_trace

C = Categorizer.builtin()
REF = TRACES / "tracelens" / "reference"


def _k(ts, dur, corr, name="gemm_kernel", stream=7, device=0):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream, "device": device}}


def _l(ts, corr, ext=None, name="cudaLaunchKernel"):
    a = {"correlation": corr}
    if ext is not None:
        a["External id"] = ext
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1, "args": a}


def test_union_of_concurrent_streams_not_double_counted():
    s = np.array([0, 5, 20, 21], dtype=np.int64)
    e = np.array([10, 12, 25, 22], dtype=np.int64)
    assert union_ns(s, e) == 12 + 5


def test_timeline_definitions(tmp_path):
    ev = [
        _l(0, 1), _k(0, 10, 1, name="ampere_sgemm_128x64_tn"),               # compute 0-10
        _l(0, 2), _k(5, 10, 2, name="ncclKernel_AllReduce_RING_LL_Sum_float", stream=20),  # comm 5-15 (5 exposed)
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 9, "ts": 14, "dur": 6,
         "args": {"correlation": 3, "stream": 9, "device": 0}}, _l(0, 3, name="cudaMemcpyAsync"),  # memcpy 14-20
        _l(0, 4), _k(30, 10, 4, name="ampere_sgemm_128x64_tn"),               # compute 30-40; idle 20-30
    ]
    t = kernscope.load(write_trace(tmp_path / "tl.json", ev), cache=False)
    tl = {r["type"]: r["time_us"] for r in gpu_timeline(gpu_table(t, C), by=None).iter_rows(named=True)}
    assert tl == {"computation_time": 20, "exposed_comm_time": 5, "exposed_memcpy_time": 5, "busy_time": 30,
                  "other_work_time": 0, "idle_time": 10, "total_time": 40, "total_comm_time": 10, "total_memcpy_time": 6}


def _behind_host(tmp_path, devices=(0, 0, 0, 0)):
    """Two profiler steps on a GPU behind its host (µs): step 1 launches K1 [100, 150) and K1b [200, 210) on stream
    7; step 2 launches K2 [160, 180) and K2b [215, 225) on stream 8, K2b at 190, after step 2's GPU work went idle at
    180. Each step's span holds the other's work."""
    step = lambda n, ts, dur: {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                               "ts": ts, "dur": dur, "args": {}}
    ev = [step(1, 0, 50), step(2, 50, 200),
          _l(1, 1), _k(100, 50, 1, device=devices[0]), _l(2, 2), _k(200, 10, 2, device=devices[1]),
          _l(60, 3), _k(160, 20, 3, stream=8, device=devices[2]), _l(190, 4), _k(215, 10, 4, stream=8, device=devices[3])]
    return write_trace(tmp_path / "behind.json", ev)


def test_a_steps_span_holding_another_steps_work_is_not_idle(tmp_path, capsys):
    """A GPU behind its host runs one step's work inside another's span: that time is ``other_work_time``, not idle,
    in the timeline by step, in ``analyze --step N`` and in a job's rank steps (whose gaps count only their idle
    rest: step 2's gap before K2b, launched late, is 35 µs of which 10 µs ran step 1's K1b). The whole trace's
    timeline has no other work."""
    from kernscope.analyze.ranks import summarize_rank

    path = _behind_host(tmp_path)
    t = kernscope.load(path, cache=False)
    a = analyze(t)
    by_step = {(r["step"], r["type"]): r["time_us"] for r in a.timeline_by_step.iter_rows(named=True)}
    # step 1: span 100-210, own busy 60, step 2's K2 20; step 2: span 160-225, own busy 30, step 1's K1b 10
    for n, (total, busy, other) in {1: (110, 60, 20), 2: (65, 30, 10)}.items():
        assert (by_step[n, "total_time"], by_step[n, "busy_time"], by_step[n, "other_work_time"],
                by_step[n, "idle_time"]) == (total, busy, other, total - busy - other)
        one = {r["type"]: r["time_us"] for r in analyze(t, step=n).timeline.iter_rows(named=True)}
        assert (one["total_time"], one["busy_time"], one["other_work_time"], one["idle_time"]) == (
            total, busy, other, total - busy - other)
    whole = {r["type"]: r["time_us"] for r in a.timeline.iter_rows(named=True)}
    assert (whole["total_time"], whole["busy_time"], whole["other_work_time"], whole["idle_time"]) == (125, 90, 0, 35)
    steps = {r["step"]: r for r in summarize_rank(t, "behind.json").steps.iter_rows(named=True)}
    assert {n: (r["span_us"], r["busy_us"], r["other_work_us"], r["idle_us"]) for n, r in steps.items()} == {
        1: (110, 60, 20, 30), 2: (65, 30, 10, 25)}
    # step 1's gap 150-200 (K1b launched long before it: other idle), step 2's 180-215 (K2b launched at 190: host)
    assert {n: (r["host_wait_us"], r["kernel_wait_us"], r["other_idle_us"]) for n, r in steps.items()} == {
        1: (0, 0, 30), 2: (25, 0, 0)}
    # the terminal shows the line where there is other work: with --step, not for the whole trace
    for args, shown in ((["--step", "1"], True), ([], False)):
        assert main(["analyze", str(path), "--no-cache", *args]) == 0
        assert ("other work time" in capsys.readouterr().out) is shown


@pytest.mark.parametrize("seed", range(6))
def test_other_work_and_idle_by_step_match_a_per_microsecond_count(tmp_path, seed):
    """Random GPU work of three steps on two devices and three streams (one of them NCCL's), each step's work anywhere
    in time: per step, busy, other work, idle and exposed communication (not hidden by any computation on its GPU,
    the step's or another's) equal a count of microseconds over each device (each device over the step's span on all
    devices; a device without the step's work idle or running others' all along), in the timeline by step, by
    (step, device) and in the rank summary's steps."""
    from kernscope.analyze.ranks import summarize_rank

    rng = np.random.default_rng(seed)
    ev, corr, kernels = [], 0, []
    for n in range(3):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
                   "ts": 1000 * n, "dur": 1000, "args": {}})
    for device in (0, 1):
        for stream in (7, 8, 9):
            at = int(rng.integers(0, 40))
            for _ in range(int(rng.integers(2, 9))):
                corr += 1
                dur, n = int(rng.integers(1, 30)), int(rng.integers(0, 3))
                name = "ncclKernel_AllReduce_RING_LL_Sum_float" if stream == 9 else "gemm_kernel"
                ev += [_l(1000 * n + corr, corr), _k(3000 + at, dur, corr, name=name, stream=stream, device=device)]
                kernels.append((n, device, 3000 + at, 3000 + at + dur, stream == 9))
                at += dur + int(rng.integers(0, 40))
    t = kernscope.load(write_trace(tmp_path / "r.json", ev), cache=False)
    a = analyze(t)
    by_step = {(r["step"], r["type"]): r["time_us"] for r in a.timeline_by_step.iter_rows(named=True)}
    rows = timeline_rows(gpu_table(t, C), keys=("device", "step"))
    per_dev = {(r["step"], r["device"], r["type"]): r["time_us"] for r in step_timelines(rows, rows)[1].iter_rows(named=True)}
    rank = {r["step"]: r for r in summarize_rank(t, "r.json").steps.iter_rows(named=True)}
    mask = lambda rows: np.isin(np.arange(3000, 3400), [u for _, _, s, e, _ in rows for u in range(s, e)])
    for n in sorted({k[0] for k in kernels}):
        mine = [k for k in kernels if k[0] == n]
        lo, hi = min(k[2] for k in mine), max(k[3] for k in mine)
        window = (np.arange(3000, 3400) >= lo) & (np.arange(3000, 3400) < hi)
        busy = other = exposed = 0
        for d in (0, 1):
            own = mask([k for k in mine if k[1] == d]) & window
            others = mask([k for k in kernels if k[1] == d and k[0] != n]) & window & ~own
            unhidden = mask([k for k in mine if k[1] == d and k[4]]) & ~mask([k for k in kernels if k[1] == d and not k[4]])
            busy, other, exposed = busy + int(own.sum()), other + int(others.sum()), exposed + int(unhidden.sum())
            if (n, d, "busy_time") in per_dev:
                assert (per_dev[n, d, "busy_time"], per_dev[n, d, "other_work_time"],
                        per_dev[n, d, "exposed_comm_time"]) == (own.sum(), others.sum(), unhidden.sum())
        total = 2 * (hi - lo)
        assert (by_step[n, "total_time"], by_step[n, "busy_time"], by_step[n, "other_work_time"],
                by_step[n, "idle_time"], by_step[n, "exposed_comm_time"]) == (total, busy, other, total - busy - other,
                                                                             exposed)
        alone = {r["type"]: r["time_us"] for r in analyze(t, step=n).timeline.iter_rows(named=True)}
        assert {k: alone[k] for k in ("busy_time", "other_work_time", "exposed_comm_time")} == {
            "busy_time": busy, "other_work_time": other, "exposed_comm_time": exposed}
        r = rank[n]
        assert r["exposed_comm_us"] == exposed
        assert (r["span_us"], r["busy_us"], r["other_work_us"], r["idle_us"]) == (total, busy, other, total - busy - other)
        assert r["host_wait_us"] + r["kernel_wait_us"] + r["other_idle_us"] == pytest.approx(r["idle_us"])


@needs_traces
@pytest.mark.parametrize("name, other_ms, exposed_ms", [("a100_16rank_rank0_triton.json.gz", 316.4, 160.718),
                                                        ("v100_2rank_rank1_test.json.gz", 175.5, 70.011)])
def test_public_traces_behind_their_host_have_other_steps_work_in_their_steps(name, other_ms, exposed_ms):
    """HTA's A100 Triton and V100 test ranks run their GPUs behind the host: every step's span holds another step's
    work (its sum as trace-engine.md gives it), every step's types add up to its span, and so do every annotation's
    (each over the span of all its instances); a step's exposed communication (summed as trace-engine.md gives it)
    is what no computation hid, another step's included."""
    path = TRACES / "hta" / name
    if not path.exists():
        pytest.skip(f"{name} not present")
    a = analyze(kernscope.load(path), by_annotation="")
    steps = a.timeline_by_step.pivot(on="type", index="step", values="time_us")
    assert (steps["other_work_time"] > 0).all() and steps["other_work_time"].sum() / 1e3 == pytest.approx(other_ms, abs=0.05)
    assert steps["exposed_comm_time"].sum() / 1e3 == pytest.approx(exposed_ms, abs=0.0005)
    ann = a.annotations.timeline.pivot(on="type", index="path", values="time_us")
    for t in (steps, ann):
        assert (t["other_work_time"] >= 0).all() and (t["idle_time"] >= 0).all()
        assert (t["busy_time"] + t["other_work_time"] + t["idle_time"] - t["total_time"]).abs().max() < 1e-6


def test_same_stream_overrun_is_clipped_and_counted(tmp_path):
    ev = [_l(0, 1), _k(0, 15, 1), _l(0, 2), _k(10, 10, 2)]  # first reports end 15 > next start 10
    t = kernscope.load(write_trace(tmp_path / "c.json", ev), cache=False)
    tl = gpu_timeline(gpu_table(t, C), by=None)
    row = tl.filter(pl.col("type") == "busy_time").row(0, named=True)
    assert row["time_us"] == 20 and row["clipped_kernels"] == 1


@needs_traces
@pytest.mark.parametrize("name", sorted(p.name for p in REF.iterdir()) if REF.is_dir() else [])
def test_timeline_matches_tracelens_reference(name):
    """Linked-only timeline equals TraceLens's gpu_timeline.csv (TraceLens ignores work launched before
    the trace window; kernscope's default view counts it, see docs/trace-analysis.md)."""
    t = kernscope.load(TRACES / "tracelens" / f"{name}.json.gz")
    ours = {r["type"]: r["time_us"] / 1000 for r in gpu_timeline(gpu_table(t, C), by=None, linked_only=True).iter_rows(named=True)}
    ref = pl.read_csv(REF / name / "gpu_timeline.csv")
    for r in ref.iter_rows(named=True):
        # TraceLens stores float32-rounded ms (e.g. 31.903115234375): compare at that precision
        assert ours[r["type"]] == pytest.approx(r["time ms"], rel=1e-6, abs=5e-5), r["type"]


@needs_traces
def test_kernel_sums_match_tracelens_kernel_summary():
    name = "h100_gaunernst_bert-small-uncased__1016001"
    t = kernscope.load(TRACES / "tracelens" / f"{name}.json.gz")
    ref = pl.read_csv(REF / name / "kernel_summary.csv")
    ours = t.kernels.group_by(pl.col("name").cast(pl.String)).agg((pl.col("dur").sum() / 1000).alias("us"), pl.len())
    ref_k = ref.group_by("Kernel name").agg(pl.col("Kernel duration (µs)_sum").sum(), pl.col("Kernel duration (µs)_count").sum())
    m = ours.join(ref_k, left_on="name", right_on="Kernel name")
    assert m.height == ref_k.height
    assert (m["len"] == m["Kernel duration (µs)_count"]).all()
    assert np.allclose(m["us"].to_numpy(), m["Kernel duration (µs)_sum"].to_numpy(), atol=0.01)


def test_analyze_json_schema_and_values(tmp_path, capsys):
    p = tmp_path / "t.json"
    st = make_trace(p, 300_000)
    assert main(["analyze", str(p), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"trace", "steps", "kernels", "categories", "unlinked", "timeline"}
    assert set(doc["trace"]) >= {"path", "events", "devices", "rank", "world_size"}
    assert doc["trace"]["rank"] == 0 and doc["trace"]["world_size"] == 8 and doc["trace"]["devices"] == [0]
    s0 = doc["steps"][0]
    assert set(s0) >= {"name", "start_us", "end_us", "kernel_count", "kernel_time_us"}
    assert sum(s["kernel_count"] for s in doc["steps"]) == st.kernels
    assert sum(s["kernel_time_us"] for s in doc["steps"]) == pytest.approx(st.kernel_ns / 1000, rel=1e-9)
    k0 = doc["kernels"][0]
    assert set(k0) >= {"name", "launcher", "count", "total_us", "mean_us", "min_us", "max_us", "pct", "category", "library"}
    assert {c["category"] for c in doc["categories"]} >= {"GEMM", "Communication", "Attention Forward"}
    assert sum(c["pct"] for c in doc["categories"]) == pytest.approx(100.0, abs=1e-3)  # 4-decimal rounding
    assert doc["unlinked"]["gpu_without_launch"] == 0


def test_analyze_step_filter_and_top(tmp_path, capsys):
    p = tmp_path / "t.json"
    make_trace(p, 300_000)
    assert main(["analyze", str(p), "--format", "json", "--step", "2", "--top", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    step2 = next(s for s in doc["steps"] if s["step"] == 2)
    assert len(doc["kernels"]) == 3
    assert doc["step"] == 2
    t = kernscope.load(p)
    a = analyze(t, step=2)
    assert a.kernels["count"].sum() == step2["kernel_count"]


def test_table_csv_and_output_file(tmp_path, capsys):
    p = tmp_path / "t.json"
    make_trace(p, 200_000)
    assert main(["analyze", str(p)]) == 0
    out = capsys.readouterr().out
    assert "GPU time by category" in out and "ProfilerStep#1" in out
    assert main(["analyze", str(p), "--format", "csv", "-o", str(tmp_path / "k.csv")]) == 0
    df = pl.read_csv(tmp_path / "k.csv")
    assert {"name", "launcher", "count", "total_us", "category"} <= set(df.columns)


def test_graph_launch_grouped_view(tmp_path):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "CUDAGraph::replay", "pid": 1, "tid": 1, "ts": 0, "dur": 50, "args": {"External id": 1}},
          _l(5, 9, 1, name="cudaGraphLaunch"),
          _k(10, 22, 9, name="nvjet_tst_320x128_64x3_1x2_h_bz_coopB_TNT"),
          _k(40, 15, 9, name="kernel_mha"),
          _k(60, 8, 9, name="void tensorrt_llm::common::scaleMatrix<__nv_bfloat16>(__nv_bfloat16*, float const*, long, long)")]
    t = kernscope.load(write_trace(tmp_path / "g.json", ev), cache=False)
    a = analyze(t)
    lc = {r["category"]: round(r["pct_of_launcher"], 1) for r in a.launcher_categories.iter_rows(named=True)}
    assert lc == {"GEMM": 48.9, "Attention Forward": 33.3, "Memory": 17.8}  # the seed's example


def test_report_xlsx_and_csv_dir(tmp_path):
    p = tmp_path / "t.json"
    make_trace(p, 200_000)
    x = tmp_path / "r.xlsx"
    assert main(["report", str(p), "-o", str(x)]) == 0
    with zipfile.ZipFile(x) as z:
        wb = z.read("xl/workbook.xml").decode()
    for sheet in ("gpu_timeline", "kernel_summary", "category_summary", "ops_summary", "ops_summary_by_category", "steps"):
        assert f'name="{sheet}"' in wb
    d = tmp_path / "csvs"
    assert main(["report", str(p), "-o", str(d) + "/"]) == 0
    assert {f.name for f in d.iterdir()} >= {"gpu_timeline.csv", "kernel_summary.csv", "category_summary.csv", "ops_summary.csv",
                                              "ops_summary_by_category.csv", "steps.csv"}
    k = pl.read_csv(d / "kernel_summary.csv")
    assert {"launcher", "category", "name", "stream", "count", "total_us", "pct", "pct_wall"} <= set(k.columns)


def test_tied_rows_are_ordered_the_same_whatever_the_input_order():
    # a launcher whose two categories have the same GPU time (a duplicated kernel, found by a mutant):
    # the table's order must not depend on the order the rows arrive in
    from kernscope.analyze.kernels import launcher_category_summary

    rows = {"launcher": ["aten::conv", "aten::conv", "aten::mm"], "category": ["Other", "GEMM", "GEMM"],
            "dur": [323_000, 323_000, 5_000]}
    table = pl.DataFrame(rows)
    want = launcher_category_summary(table)
    assert want["category"].to_list() == ["GEMM", "Other", "GEMM"]
    for perm in ([1, 0, 2], [2, 1, 0], [2, 0, 1]):
        assert launcher_category_summary(table[perm]).equals(want)


@needs_traces
@pytest.mark.parametrize("name", ["hta/v100_2rank_rank1_test.json.gz", "hta/a100_16rank_rank0_triton.json.gz"])
def test_every_launch_gets_the_innermost_op(name):
    # no other op that encloses the launch on its thread lies inside the chosen one; of ops with the same
    # window (µs timestamps round a parent and its child alike) the later event, the child, is the inner one.
    # HTA's V100 trace: no launch's External id matches an op (every launch goes by enclosing op); the A100
    # one had 336 GPU rows given to reducer::mark_variable_ready instead of the aten::mul inside it
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{name} not in ../shared/traces")
    t = kernscope.load(path, cache=False)
    ev = t.events
    g = t.gpu.filter(pl.col("op_idx").is_not_null()).select("launch_idx", "op_idx").unique()
    launches = g.join(ev.select(pl.col("idx").alias("launch_idx"), pl.col("pid").alias("lp"), pl.col("tid").alias("lt"),
                                pl.col("ts").alias("ls")), on="launch_idx")
    chosen = launches.join(ev.select(pl.col("idx").alias("op_idx"), pl.col("ts").alias("cs"), pl.col("end").alias("ce")),
                           on="op_idx")
    ops = ev.filter(pl.col("kind") == "cpu_op").select(pl.col("idx").alias("other"), pl.col("pid").alias("op"),
                                                       pl.col("tid").alias("ot"), pl.col("ts").alias("os"),
                                                       pl.col("end").alias("oe"))
    same_window = (pl.col("os") == pl.col("cs")) & (pl.col("oe") == pl.col("ce"))
    inner = (chosen.join_where(ops, pl.col("os") <= pl.col("ls"), pl.col("oe") >= pl.col("ls"))
             .filter((pl.col("op") == pl.col("lp")) & (pl.col("ot") == pl.col("lt")) & (pl.col("other") != pl.col("op_idx"))
                     & (pl.col("os") >= pl.col("cs")) & (pl.col("oe") <= pl.col("ce"))
                     & (~same_window | (pl.col("other") > pl.col("op_idx")))))
    assert chosen.height > 1000 and inner.height == 0


def test_of_two_ops_starting_together_the_shorter_launches(tmp_path):
    # a launch whose External id matches no op gets the innermost enclosing op on its thread; of a parent and
    # a child that start in the same µs the child (it ends first) is the innermost, whatever the file's order
    def op(name, ts, dur, ext):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"External id": ext}}

    events = []
    for i in range(6):
        t0 = 100 * i
        pair = [op("aten::linear", t0, 50, 1000 + 2 * i), op("aten::addmm", t0, 20, 1001 + 2 * i)]
        events += pair if i % 2 else pair[::-1]
        events.append(_l(t0 + 5, 10 + i, ext=9000 + i))
        events.append(_k(t0 + 10, 4, 10 + i))
    t = kernscope.load(write_trace(tmp_path / "t.json", events), cache=False)
    assert t.gpu["op_name"].cast(pl.String).to_list() == ["aten::addmm"] * 6



def _launches_and_ops(rng, threads=3, n_ops=400, n_launches=300):
    """Random CPU ops of a few threads (nested, overlapping, equal windows, zero-length, µs-like coarse times so
    that starts and ends tie often) and launches among them, some at an op's exact start or end, some outside all."""
    ts = rng.integers(0, 200, n_ops) * 5
    ops = pl.DataFrame({"_fb": rng.permutation(n_ops).astype(np.int64) + 10_000,
                        "_lp": pl.Series(rng.integers(0, 2, n_ops).astype(str), dtype=pl.Categorical),
                        "_lt": pl.Series(rng.integers(0, threads, n_ops).astype(str), dtype=pl.Categorical),
                        "_os": ts, "_oe": ts + rng.integers(0, 8, n_ops) * rng.integers(0, 30, n_ops)})
    edge = rng.choice(np.concatenate([ops["_os"].to_numpy(), ops["_oe"].to_numpy()]), n_launches)
    lts = np.where(rng.random(n_launches) < 0.4, edge, rng.integers(-20, 1300, n_launches))
    launches = pl.DataFrame({"launch_idx": np.arange(n_launches, dtype=np.int64),
                             "_lp": pl.Series(rng.integers(0, 2, n_launches).astype(str), dtype=pl.Categorical),
                             "_lt": pl.Series(rng.integers(0, threads + 1, n_launches).astype(str), dtype=pl.Categorical),
                             "_ls": lts.astype(np.int64)})
    return launches, ops


def test_the_sweep_finds_the_innermost_op_the_range_join_finds():
    """link.ops: the compiled sweep (load/_sweep.c) and the range join it replaces choose the same op for every
    launch: the latest start, of equal starts the earliest end, then the later event; none where none encloses."""
    from kernscope.link.ops import joined_innermost, swept_innermost

    rng = np.random.default_rng(2026)
    found = 0
    for _ in range(40):
        launches, ops = _launches_and_ops(rng)
        swept = swept_innermost(launches, ops)
        assert swept is not None  # the library is built (make install)
        joined = joined_innermost(launches, ops)
        assert swept.sort("launch_idx").equals(joined.sort("launch_idx"))
        # threads named by text, not categories: numbered by a join instead of their codes, the same ops
        text = [t.with_columns(pl.col("_lp", "_lt").cast(pl.String)) for t in (launches, ops)]
        by_text = swept_innermost(*text)
        assert by_text is not None and by_text.sort("launch_idx").equals(swept.sort("launch_idx"))
        # the ops and launches in a file's order (each thread's in time order, the threads interleaved): taken as
        # they come, not sorted, the same ops
        in_file = swept_innermost(launches.sort("_ls", "launch_idx"), ops.sort("_os", pl.col("_oe"), "_fb",
                                                                                descending=[False, True, False]))
        assert in_file is not None and in_file.sort("launch_idx").equals(swept.sort("launch_idx"))
        found += swept.height
    assert 3000 < found < 40 * 300  # most launches have an enclosing op, not all


@pytest.mark.parametrize("order", ["sorted", "ties", "shuffled"])
def test_rows_in_thread_order_are_those_of_a_sort(order):
    """link.ops: the sweep's rows by thread, then time (the latest end first), then event: grouped by thread where each
    thread's rows are in that order already, only the runs that start together sorted where just those are not, sorted
    by numpy otherwise; the order of polars' sort of the same keys, int64's extremes included."""
    from kernscope.link.ops import _thread_ordered

    rng = np.random.default_rng(7)
    n = 5000
    big = np.iinfo(np.int64)
    starts = rng.integers(0, 50, n) * 10
    ends = np.where(rng.random(n) < 0.01, big.min, np.where(rng.random(n) < 0.01, big.max, starts + rng.integers(0, 40, n)))
    table = pl.DataFrame({"_g": rng.integers(0, 4, n), "_os": starts, "_oe": ends, "_fb": rng.permutation(n)},
                         schema=dict.fromkeys(("_g", "_os", "_oe", "_fb"), pl.Int64))
    by = ["_os", "_oe", "_fb"]
    shuffled = table.sample(fraction=1.0, shuffle=True, seed=1)
    # sorted: in the sweep's order (taken as grouped); ties: by start only, the ops that start together in any order
    # (only those runs sorted); shuffled: sorted whole
    table = {"sorted": table.sort(by, descending=[False, True, False]), "ties": shuffled.sort("_os", maintain_order=True),
             "shuffled": shuffled}[order]
    got = _thread_ordered(table, [False, False, True, False])
    want = table.sort(["_g", *by], descending=[False, False, True, False])
    for c in table.columns:
        assert np.array_equal(got[c], want[c].to_numpy()), c


def test_launch_rows_are_found_in_file_order_or_joined():
    """link.ops: the launches' (and ops') event rows, found by binary search in a table in file order (``idx`` increasing) and
    by a join in any other order: the same rows; an ``idx`` that is not there is not found."""
    from kernscope.link.ops import rows_by_idx

    rng = np.random.default_rng(11)
    idx = np.sort(rng.choice(10_000, 3_000, replace=False)).astype(np.int64)
    events = pl.DataFrame({"idx": idx, "ts": rng.integers(0, 1 << 40, idx.size)})
    wanted = pl.Series(np.concatenate([rng.choice(idx, 500, replace=False), [-5, 10_001, int(idx[0]) + 1]]))
    in_order = rows_by_idx(events, wanted)
    shuffled = rows_by_idx(events.sample(fraction=1.0, shuffle=True, seed=3), wanted)
    assert in_order.sort("idx").equals(shuffled.sort("idx"))
    assert set(in_order["idx"].to_list()) == set(wanted.to_list()) & set(idx.tolist())


def _python_nest(monkeypatch, order_idx, starts, ends, groups, *, bleed):
    from kernscope.link.tree import _nest

    with monkeypatch.context() as m:
        m.setenv("KERNSCOPE_NO_NATIVE", "1")
        return _nest(order_idx, starts, ends, groups, bleed)


def test_the_compiled_call_tree_nests_as_the_python_loop(monkeypatch):
    """link.tree: the compiled stack (load/_sweep.c ks_nest) gives every event the parent and depth the Python loop
    gives: random threads of nested, overlapping, tied and zero-length events (coarse times, so that ends tie and
    overrun their parent by less and by more than the bleed), negative and zero bleeds, times at int64's ends."""
    from kernscope.link.tree import _nest

    rng = np.random.default_rng(2026)
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    nested = 0
    for trial in range(60):
        n = int(rng.integers(1, 600))
        groups = np.sort(rng.integers(0, 4, n)).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # hash-like
        starts = rng.integers(0, 300, n).astype(np.int64) * 5
        ends = starts + rng.integers(0, 8, n) * rng.integers(0, 40, n)
        if trial % 10 == 9:  # times where te + bleed overflows int64
            starts[: n // 2] = hi - rng.integers(0, 50, n // 2)
            ends[: n // 2] = hi
            starts[n // 2:] = lo
            ends[n // 2:] = lo + rng.integers(0, 50, n - n // 2)
        order = np.lexsort((-ends, starts, groups))  # as call_tree sorts: (group, start, -end)
        arrays = (rng.permutation(n).astype(np.int64)[order], starts[order], ends[order], groups[order])
        for bleed in (1000, 7, 0, -3, hi, lo):
            parent, depth = _nest(*arrays, bleed)
            want_parent, want_depth = _python_nest(monkeypatch, *arrays, bleed=bleed)
            assert np.array_equal(parent, want_parent) and np.array_equal(depth, want_depth), (trial, bleed)
            assert depth.dtype == np.int32 and parent.dtype == np.int64
            nested += int((parent >= 0).sum())
    assert nested > 10_000  # most events have a parent: the trees are not flat


@needs_traces
@pytest.mark.parametrize("name", ["hta/v100_2rank_nccl_rank1.json.gz", "hta/a100_16rank_rank0_triton.json.gz"])
def test_the_call_tree_of_a_real_trace_is_the_same_without_the_library(name, monkeypatch):
    from kernscope.link.tree import call_tree

    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{name} not in ../shared/traces")
    events = kernscope.load(path, cache=False).events
    tree = call_tree(events)
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    assert tree.equals(call_tree(events))
    assert tree.height > 50_000 and tree["parent_idx"].null_count() < tree.height and tree["depth"].max() >= 5


def test_without_the_library_the_range_join_links(monkeypatch):
    from kernscope.link import ops as link_ops

    launches, ops = _launches_and_ops(np.random.default_rng(7))
    want = link_ops.swept_innermost(launches, ops)
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    assert link_ops.swept_innermost(launches, ops) is None
    gpu = pl.DataFrame({"launch_idx": launches["launch_idx"], "op_idx": pl.Series([None] * launches.height, dtype=pl.Int64)})
    events = pl.concat([
        launches.select(pl.col("launch_idx").alias("idx"), pl.col("_lp").alias("pid"), pl.col("_lt").alias("tid"),
                        pl.col("_ls").alias("ts"), pl.col("_ls").alias("end"), pl.lit("cuda_runtime").alias("kind")),
        ops.select(pl.col("_fb").alias("idx"), pl.col("_lp").alias("pid"), pl.col("_lt").alias("tid"),
                   pl.col("_os").alias("ts"), pl.col("_oe").alias("end"), pl.lit("cpu_op").alias("kind"))])
    got = link_ops.fallback_ops(gpu, events).drop_nulls("op_idx")
    assert want is not None and got.height == want.height > 100
    assert got.sort("launch_idx")["op_idx"].equals(want.sort("launch_idx")["_fb"], check_names=False)


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled sweep", "numpy"])
def test_unions_of_several_subsets_from_one_sort_equal_each_alone(compiled):
    """intervals.union_many (the timeline's five unions) against a plain interval walk of each subset and group:
    touching intervals merge, an end before its start is empty, an empty subset is 0, a subset equal to an earlier
    one has its lengths; with the compiled sweep (one pass for up to 8 subsets: here 6 distinct and 11 in all, so
    two passes) and with numpy's merges; rows in order and out of it."""
    from kernscope.intervals import union_many
    from kernscope.load import native

    if compiled and native.scanner() is None:
        pytest.fail("the compiled library was not built (make install compiles src/kernscope/load/_sweep.c)")
    sweep = native.union_lengths if compiled else None
    rng = np.random.default_rng(5)

    def walk(s, e):
        total, cur_s, cur_e = 0, None, None
        for a, b in sorted(zip(s, e)):
            b = max(a, b)
            if cur_e is not None and a <= cur_e:
                cur_e = max(cur_e, b)
                continue
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = a, b
        return total + (cur_e - cur_s if cur_e is not None else 0)

    for _ in range(200):
        n = int(rng.integers(1, 40))
        g, s = rng.integers(0, 3, n), rng.integers(0, 300, n)
        e = s + rng.integers(-3, 40, n)
        some = rng.random(n) < 0.5
        # subsets equal to earlier ones (merged once: a trace without communication has two such pairs)
        masks = {"some": some, "all": np.ones(n, bool), "none": np.zeros(n, bool), "some again": some.copy(),
                 "all again": np.ones(n, bool), "other": rng.random(n) < 0.5,
                 **{f"more {i}": rng.random(n) < 0.3 for i in range(5)}}
        if _ % 2:  # rows in (group, start) order: read in place
            at = np.lexsort((s, g))
            g, s, e = g[at], s[at], e[at]
            masks = {k: m[at] for k, m in masks.items()}
        got = union_many(pl.DataFrame({"g": g, "ts": s, "end": e}), ["g"], masks, sweep=sweep)
        for name, m in masks.items():
            for k, v in zip(got["g"].to_list(), got[name].to_list()):
                sel = m & (g == k)
                assert v == walk(s[sel].tolist(), e[sel].tolist()), (name, k)
        whole = union_many(pl.DataFrame({"ts": s, "end": e}), [], {"all": np.ones(n, bool), "some": some}, sweep=sweep)
        assert whole.row(0) == (walk(s.tolist(), e.tolist()), walk(s[some].tolist(), e[some].tolist()))


@pytest.mark.parametrize(("rows", "events", "side"), [(None, None, True), (0, None, True), (None, 0, True), (0, 0, False)],
                         ids=["two threads", "many GPU rows", "many events", "in order"])
@pytest.mark.parametrize("step", [None, 0])
@pytest.mark.parametrize("trace", ["h200 (GPU rows outside steps)", "jax (every GPU row in a step)"])
def test_analyses_run_beside_each_other_give_what_each_gives_alone(trace, step, rows, events, side, monkeypatch):
    """``analyze`` runs its analyses on two threads (in order, in its own, above ``SIDE_BY_SIDE_MAX_ROWS`` GPU rows
    and ``SIDE_BY_SIDE_MAX_EVENTS`` events), the findings' rules too, and clips the rows once for the timelines by
    step and by device where every GPU row is in a step: each table equals the one its function gives when called
    alone (for the whole trace and for one step)."""
    from concurrent.futures import ThreadPoolExecutor

    from kernscope.analyze import summary
    from kernscope.analyze.facts import trace_facts
    from kernscope.analyze.findings import find

    threads: list[int] = []

    def pool(n: int, thread_name_prefix: str = "") -> ThreadPoolExecutor:
        threads.append(n)
        return ThreadPoolExecutor(n, thread_name_prefix=thread_name_prefix)

    monkeypatch.setattr(summary, "ThreadPoolExecutor", pool)
    if rows is not None:  # (a trace over a bound)
        monkeypatch.setattr(summary, "SIDE_BY_SIDE_MAX_ROWS", rows)
    if events is not None:
        monkeypatch.setattr(summary, "SIDE_BY_SIDE_MAX_EVENTS", events)
    from kernscope.analyze.critical_path import critical_path
    from kernscope.analyze.kernels import kernel_summary, step_category_summary, step_summary
    from kernscope.analyze.timeline import gpu_timeline

    examples = Path(kernscope.__file__).parent / "examples"
    path = (examples / "h200_gpt_train_step.pt.trace.json.gz" if trace.startswith("h200")
            else Path(__file__).parent / "data" / "jax" / "mlp" / "vm.xplane.pb")
    t = kernscope.load(path, cache=False)
    if trace.startswith("h200"):  # (its rows are all in steps: the first 50 as if launched before the first step)
        t = dataclasses.replace(t, gpu=t.gpu.with_columns(
            pl.when(pl.int_range(pl.len()) >= 50).then(pl.col("step")).alias("step")))
    assert bool(t.gpu["step"].null_count()) == trace.startswith("h200")  # (both ways of making the timelines' rows)
    step = None if step is None else int(t.steps["step"][1])
    a = analyze(t, step=step)
    all_gpu = gpu_table(t, Categorizer.builtin(), text_names=False, text_keys=False)
    g = all_gpu if step is None else all_gpu.filter(pl.col("step") == step)
    cp = critical_path(t, all_gpu, step=step)
    assert a.critical_path is not None and a.critical_path.steps.height == (1 if step is not None else t.steps.height)
    for got, want in ((a.critical_path.steps, cp.steps), (a.critical_path.kernels, cp.kernels),
                      (a.critical_path.ops, cp.ops), (a.critical_path.whatif, cp.whatif)):
        assert got.equals(want)
    by = ("launcher", "category", "name", "device", "stream", "decided_by", "decided_op")
    assert a.kernels_by_stream.equals(kernel_summary(g, by=by).with_columns(pl.col("name").cast(pl.String)))
    assert a.timeline_by_device.equals(gpu_timeline(g, by="device"))
    assert a.timeline.equals(gpu_timeline(g, by="device").drop("device"))
    by_step = gpu_timeline(all_gpu.filter(pl.col("step").is_not_null()), by="step")
    assert a.timeline_by_step.equals(by_step) and by_step.height
    steps = step_summary(t, all_gpu)
    assert a.steps.equals(steps)
    assert a.step_categories.equals(step_category_summary(t, all_gpu))
    assert a.findings.equals(find(t, g, steps, by_step, step=step))
    # (the idle-start rule runs before the rows are categorized, on the uncategorized rows: the JAX profile has its
    # findings, so the comparison above covers them)
    assert trace.startswith("h200") or "step_start_idle" in a.findings["rule"].to_list()
    assert a.facts == trace_facts(t)
    assert threads == ([2] if side else [])


def test_text_keys_stay_interned_in_the_analysis_and_are_text_in_its_results():
    """``gpu_table(..., text_keys=False)`` keeps kind, category, library, decided_by and decided_op interned (the same
    values as text); the analysis works on those, and what it gives (its GPU rows, the summaries) has them as text."""
    from kernscope.analyze.kernels import TEXT_KEYS

    t = kernscope.load(Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz", cache=False)
    text = gpu_table(t, Categorizer.builtin())
    interned = gpu_table(t, Categorizer.builtin(), text_keys=False)
    for c in TEXT_KEYS:
        assert text.schema[c] == pl.String and interned.schema[c] != pl.String, c
        assert interned[c].cast(pl.String).equals(text[c]), c
    assert set(text["decided_by"].unique().to_list()) >= {"name", "op"}  # the refinement ran on interned values
    a = analyze(t)
    # the GPU rows as text are made on first use only (the default analysis and its renderers do not read them)
    assert "gpu" not in vars(a)
    for c in TEXT_KEYS:
        assert a.gpu_interned.schema[c] != pl.String, c
        assert a.gpu.schema[c] == pl.String, c
    assert a.gpu is a.gpu  # made once
    assert a.gpu.schema == a.gpu_interned.with_columns(pl.col(TEXT_KEYS).cast(pl.String)).schema
    assert a.gpu.select(TEXT_KEYS).schema == text.select(TEXT_KEYS).schema  # (equals does not compare the types)
    assert a.gpu.select(TEXT_KEYS).equals(text.select(TEXT_KEYS)) and a.gpu.drop(TEXT_KEYS).equals(a.gpu_interned.drop(TEXT_KEYS))
    for table in (a.kernels, a.kernels_by_stream, a.categories, a.ops_by_category, a.launcher_categories):
        for c in TEXT_KEYS:
            if c in table.columns:
                assert table.schema[c] == pl.String, c


@pytest.mark.parametrize("which", ["bundled Kineto trace", "JAX profile"])
def test_summaries_rolled_up_from_one_grouping_equal_each_grouped_from_the_rows(which):
    """``analyze`` groups the GPU rows once by every summary's keys and rolls the groups up: each summary equals a
    plain group-by of the rows (count, total, mean, min and max exactly: a group's mean is its integer sum over its
    count, as polars' grouped mean is), and a step's summaries its rows' alone."""
    root = Path(kernscope.__file__).parent
    path = (root / "examples" / "h200_gpt_train_step.pt.trace.json.gz" if which == "bundled Kineto trace"
            else Path(__file__).parent / "data" / "jax" / "transformer" / "vm.xplane.pb.gz")
    trace = kernscope.load(path, cache=False)
    steps = trace.steps["step"].to_list()
    for step in (None, steps[-1]):
        a = analyze(trace, step=step)
        rows = a.gpu  # the step's rows, keys as text (names interned)
        decided = ["decided_by", "decided_op"]

        def plain(t, by):
            wall = rows.select(pl.col("end").max() - pl.col("ts").min()).item()
            total = t["dur"].sum()
            return (t.group_by(by).agg(pl.len().alias("count"), (pl.col("dur").sum() / 1000).alias("total_us"),
                                       (pl.col("dur").mean() / 1000).alias("mean_us"),
                                       (pl.col("dur").min() / 1000).alias("min_us"), (pl.col("dur").max() / 1000).alias("max_us"))
                    .with_columns((pl.col("total_us") * 1000.0 * 100.0 / total).alias("pct"),
                                  (pl.col("total_us") * 1000.0 * 100.0 / wall).alias("pct_wall")))

        def same(got, want, by):
            # (keys as text on both sides, rows in key order: the summaries' own order is tested elsewhere)
            def norm(t):
                return t.select(want.columns).with_columns(pl.col(by).cast(pl.String)).sort(by, nulls_last=True)
            return norm(got).equals(norm(want), null_equal=True)

        kernels = rows.filter(pl.col("kind") == "kernel")
        for got, t, by in ((a.kernels, kernels, ["name", "launcher", "category", "library", *decided]),
                           (a.kernels_by_stream, kernels, ["launcher", "category", "name", "device", "stream", *decided]),
                           (a.categories, rows, ["category"]), (a.ops, rows, ["launcher"]),
                           (a.ops_by_category, rows, ["category", "library"])):
            assert got.height > 0 and same(got, plain(t, by), by), by
        lc = plain(rows, ["launcher", "category"]).drop("pct_wall")
        assert same(a.launcher_categories, lc, ["launcher", "category"])


def test_report_step_bars_hold_each_steps_category_totals():
    """The HTML report's per-step category bars: every step's µs per category as ``step_categories`` has them (0
    where a step has none), steps in order, categories sorted; of a name two steps share, the later step's."""
    import importlib

    grid = importlib.import_module("kernscope.render.report")._step_category_grid
    t = kernscope.load(Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz", cache=False)
    sc = analyze(t).step_categories
    names, cats, values = grid(sc)
    assert names == sc["name"].unique(maintain_order=True).to_list() and len(names) == t.steps.height > 1
    assert cats == sorted(sc["category"].unique().to_list())
    want = {(r["name"], r["category"]): r["total_us"] for r in sc.iter_rows(named=True)}
    assert {(n, c): v for n, row in zip(names, values) for c, v in zip(cats, row) if v} == \
        {k: v for k, v in want.items() if v}
    assert sum(v == 0.0 for row in values for v in row) == len(names) * len(cats) - sum(1 for v in want.values() if v)
    shared = pl.DataFrame({"step": [1, 1, 2, 3], "name": ["a", "a", "b", "a"], "category": ["GEMM", "Other", "GEMM", "GEMM"],
                           "total_us": [1.0, 2.0, 3.0, 4.0]})
    assert grid(shared) == (["a", "b"], ["GEMM", "Other"], [[4.0, 2.0], [3.0, 0.0]])
    assert grid(shared.clear()) == ([], [], [])


@pytest.mark.parametrize("ids", ["growing", "reused", "out of order"])
def test_each_correlation_is_launched_by_its_earliest_call(ids):
    """link.correlation.launches: one launch per correlation id, the earliest call that carries it; ids that grow with
    time (as profilers number them) are taken as they are, ids reused or numbered out of time order are made unique."""
    from kernscope.link.correlation import launches

    corr = {"growing": [1, 2, 3, 4], "reused": [1, 2, 1, 3], "out of order": [4, 2, 3, 1]}[ids]
    n = len(corr)
    table = pl.DataFrame({"idx": list(range(n)), "kind": ["runtime"] * n, "correlation": corr,
                          "ts": [100 * i + 10 for i in range(n)], "name": [f"cudaLaunchKernel_{i}" for i in range(n)],
                          "dur": [5] * n, "pid": ["1"] * n, "tid": ["2"] * n, "external_id": [None] * n},
                         schema_overrides={"external_id": pl.Int64, "correlation": pl.Int64})
    got = launches(table)
    first: dict[int, int] = {}
    for i, c in enumerate(corr):
        first.setdefault(c, i)
    want = sorted(first.values())
    assert got["launch_idx"].to_list() == want
    assert got["correlation"].to_list() == [corr[i] for i in want]


@pytest.mark.parametrize("kinds, rows", [
    (["cpu_op", "kernel", "memcpy", "memset", "runtime"], [1, 2, 3]),  # one run: a slice of the event table
    (["kernel", "kernel", "cpu_op"], [0, 1]),
    (["cpu_op", "kernel", "kernel"], [1, 2]),
    # a run under half of the rows, which polars 2.2.0's filter copies (a JAX profile's GPU rows often are)
    (["cpu_op"] * 5 + ["kernel", "memcpy", "kernel"] + ["runtime"] * 6, [5, 6, 7]),
    (["kernel", "runtime", "kernel", "memcpy"], [0, 2, 3]),  # not a run: filtered
    ([None, "kernel", None], [1]),
    (["cpu_op", None], []),
    ([], []),
])
def test_gpu_rows_that_are_one_run_of_the_events_are_its_slice(kinds, rows):
    """link.correlation.gpu_events: the GPU rows (kernel, memcpy, memset; a null kind is none), in the event table's
    order; where they are one run of its rows (a JAX profile's), that run's columns are the event table's buffers (one
    copy in memory, which the parse cache's shared GPU columns rely on), in one chunk."""
    import numpy as np

    from kernscope.link.correlation import gpu_events

    n = len(kinds)
    events = pl.DataFrame({"kind": pl.Series(kinds, dtype=pl.String), "ts": np.arange(n, dtype=np.int64) * 10,
                           "idx": np.arange(n, dtype=np.int64)})
    got = gpu_events(events)
    assert got["idx"].to_list() == rows
    assert got["ts"].to_list() == [10 * r for r in rows]
    contiguous = bool(rows) and rows == list(range(rows[0], rows[0] + len(rows)))
    if contiguous:
        assert got["ts"].n_chunks() == 1
        assert np.shares_memory(got["ts"].to_numpy(), events["ts"].to_numpy())


def test_gpu_rows_whose_idx_look_like_a_run_but_are_not_one_are_filtered():
    """link.correlation.gpu_events decides the run by the rows' kinds, not their ids: where the ids repeat (as no
    loader writes them, but a table may hold), GPU rows whose ids count up by one are not taken for the rows between
    them."""
    from kernscope.link.correlation import gpu_events

    events = pl.DataFrame({"kind": ["kernel", "cpu_op", "kernel", "cpu_op"], "idx": [0, 1, 1, 2], "ts": [10, 20, 30, 40]})
    got = gpu_events(events)
    assert got["ts"].to_list() == [10, 30]
    assert got["kind"].to_list() == ["kernel", "kernel"]


def test_a_launch_whose_external_id_two_ops_carry_takes_the_one_around_it(tmp_path):
    """link.correlation.launcher_ops: where two CPU ops of the launch's process carry its External id, the op whose
    window holds the launch is its op (then the latest start, the shorter, the later event); where one does, that one."""
    def op(name, ts, dur, ext):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"External id": ext}}

    events = [op("aten::before", 0, 10, 7), op("aten::around", 100, 50, 7), op("aten::later", 200, 10, 7),
              _l(120, 11, ext=7), _k(130, 4, 11),
              op("aten::only", 300, 50, 8), _l(320, 12, ext=8), _k(330, 4, 12)]
    t = kernscope.load(write_trace(tmp_path / "t.json", events), cache=False)
    assert t.gpu.sort("ts")["op_name"].cast(pl.String).to_list() == ["aten::around", "aten::only"]
