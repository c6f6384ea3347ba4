"""The critical path per step (issue #29, item 1): length equal to the step, segments that add up, every kernel on
it in full, and exact answers on steps built to have them."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import TRACES, needs_traces, real_traces, write_trace
from polars.testing import assert_frame_equal

import kernscope
from kernscope.analyze.categories import Categorizer
from kernscope.analyze.critical_path import SEGMENTS, critical_path
from kernscope.analyze.kernels import gpu_table
from kernscope.analyze.summary import analyze
from kernscope.cli import main
from kernscope.intervals import union_by

EXAMPLE = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
DATA = Path(__file__).parent / "data"
REAL = [EXAMPLE, DATA / "memory_h100" / "h100_gpt_memory.pt.trace.json.gz", DATA / "align_h100" / "train.pt.trace.json.gz",
        DATA / "recompile_h100" / "jax_recompile.xplane.pb.gz", DATA / "jax" / "transformer" / "vm.xplane.pb.gz",
        *[p for p in real_traces() if "rank0" in p.name or "h100_" in p.name][:4],
        *[p for p in real_traces() if p.name == "torch_compile_triton.json.gz"]]


def _path(p: Path):
    t = kernscope.load(p, cache=False)
    return t, critical_path(t, gpu_table(t, Categorizer.builtin()))


@pytest.mark.parametrize("p", REAL, ids=lambda p: p.name[:40])
def test_real_paths_cover_each_step_once_and_never_exceed_it(p):
    t, cp = _path(p)
    if not t.steps.height:
        pytest.skip("no steps")
    s = cp.steps
    assert s.height == t.steps.height
    assert (s["length_us"] - s["step_us"]).abs().max() < 1e-6  # the segments partition the step
    for seg in SEGMENTS:
        assert (s[f"{seg}_us"] >= 0).all(), seg
    # every kernel on the path in full: the path's GPU time (the step's own records, gpu_us, and those carried over
    # from before it, a part of carryover_us) equals its kernels' and categories' sums, and fits in the GPU's busy time
    # of the step's window
    per_step_k = cp.kernels.group_by("step").agg(pl.col("time_us").sum())
    per_step_c = cp.categories.group_by("step").agg(pl.col("time_us").sum())
    carried = cp.records.filter("carried").group_by("step").agg(pl.col("on_path_us").sum().alias("carried_us"))
    got = (s.join(per_step_k, on="step", how="left").join(per_step_c, on="step", how="left", suffix="_c")
           .join(carried, on="step", how="left").fill_null(0))
    assert ((got["gpu_us"] + got["carried_us"] - got["time_us"]).abs() < 1e-3).all()
    assert ((got["time_us"] - got["time_us_c"]).abs() < 1e-3).all()
    assert (got["carried_us"] <= got["carryover_us"] + 1e-3).all()
    # a record is carried over exactly when what places it in a step (its launch, else its start; its start where the
    # steps are GPU time ranges) lies before the start of the step whose path it is on
    key = pl.col("ts") if t.step_source == "auto" else pl.coalesce("launch_ts", "ts")
    origin = t.gpu.select(pl.col("name").cast(pl.String), "ts", "end", key.alias("_origin"))
    starts = t.steps.select("step", pl.col("start").alias("_start"))
    rec = (cp.records.with_columns(pl.col("name").cast(pl.String)).join(origin.unique(["name", "ts", "end"]),
                                                                         on=["name", "ts", "end"], how="left")
           .join(starts, on="step"))
    assert rec["_origin"].null_count() == 0
    assert (rec["carried"] == (rec["_origin"] < rec["_start"])).all()
    w = t.steps.sort("start").with_columns(pl.col("start").shift(-1).alias("_next"))
    for r in w.iter_rows(named=True):  # one per step
        hi = r["_next"] or (1 << 62)
        g = t.gpu.filter((pl.col("end") > r["start"]) & (pl.col("ts") < hi)).with_columns(
            pl.max_horizontal("ts", pl.lit(r["start"])).alias("ts"), pl.min_horizontal("end", pl.lit(hi)).alias("end"))
        busy = union_by(g, []) ["len"][0] / 1000 if g.height else 0.0
        assert s.filter(pl.col("step") == r["step"])["gpu_us"][0] <= busy + 1e-3
    # the host time on the path is split over ops and the gaps between them, each microsecond once: per step, the ops'
    # host time adds up to the path's cpu time (a stretch inside a single op counted it twice, a JAX step's module op
    # took 4,732 of a 4,700 µs step)
    host = cp.ops.group_by("step").agg(pl.col("host_us").sum())
    got = s.select("step", "cpu_us").join(host, on="step", how="left").fill_null(0)
    assert ((got["cpu_us"] - got["host_us"]).abs() < 1e-3).all(), got.filter((pl.col("cpu_us") - pl.col("host_us")).abs() >= 1e-3)


def _trace(path: Path, kernels: list[tuple[float, float, float, int]], *, sync: tuple[float, float] | None = None,
           step: tuple[float, float] = (0.0, 2000.0)) -> None:
    """One step; kernels as (launch ts, start, duration, stream) in µs; an optional cudaDeviceSynchronize (ts, dur)."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": step[0], "dur": step[1]}]
    for i, (launch, start, dur, stream) in enumerate(kernels):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": launch, "dur": 1.0,
                   "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"ampere_sgemm_128x64_nn_{i}", "pid": 0, "tid": stream, "ts": start,
                   "dur": dur, "args": {"correlation": i + 1, "device": 0, "stream": stream}})
    if sync:
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": sync[0],
                   "dur": sync[1]})
    write_trace(path, ev)


def test_gpu_bound_step_is_its_kernels(tmp_path):
    """10 kernels of 100 µs launched in 10 µs and queued back to back; the host then waits in a sync until 1,061 µs
    and works until the step's end at 2,000 µs."""
    p = tmp_path / "g.json"
    kernels = [(10.0 + i, 20.0 + 100.0 * i + 0.5 * i, 100.0, 7) for i in range(10)]  # 0.5 µs gaps on the stream
    _trace(p, kernels, sync=(30.0, 1031.0))
    _, cp = _path(p)
    r = cp.steps.row(0, named=True)
    assert r["step_us"] == pytest.approx(2000.0) and r["length_us"] == pytest.approx(2000.0)
    assert r["gpu_us"] == pytest.approx(1000.0)  # all ten kernels, in full
    assert r["queue_us"] == pytest.approx(4.5)  # nine 0.5 µs gaps behind the previous kernel
    assert r["launch_us"] == pytest.approx(10.0)  # first launch at 10 µs, its kernel starts at 20 µs
    last_end = 20.0 + 100.0 * 9 + 0.5 * 9 + 100.0
    assert r["sync_return_us"] == pytest.approx(1061.0 - last_end)
    assert r["cpu_us"] == pytest.approx(10.0 + (2000.0 - 1061.0))  # before the first launch, after the sync
    assert cp.kernels["count"].sum() == 10
    whatif = dict(zip(cp.whatif["change"], cp.whatif["saves_us"]))
    assert whatif["kernels of GEMM 2x faster"] == pytest.approx(500.0)
    sync = next(v for k, v in whatif.items() if "cudaDeviceSynchronize" in k)
    assert sync == pytest.approx(min(1031.0, 2000.0 - 1061.0))  # its wait vs the host work after it


def test_launch_bound_and_cross_stream_waits(tmp_path):
    p = tmp_path / "l.json"
    # launch-bound: each 2 µs kernel launched 8 µs after the previous one, then a kernel on stream 8 launched early
    # that waits for stream 7's last kernel (an event), then the host syncs on it
    kernels = [(10.0 + 8.0 * i, 14.0 + 8.0 * i, 2.0, 7) for i in range(50)]
    last_end = 14.0 + 8.0 * 49 + 2.0
    kernels.append((15.0, last_end + 3.0, 50.0, 8))
    _trace(p, kernels, sync=(420.0, last_end + 53.0 + 1.0 - 420.0), step=(0.0, 600.0))
    _, cp = _path(p)
    r = cp.steps.row(0, named=True)
    assert r["length_us"] == pytest.approx(600.0)
    assert r["stream_wait_us"] == pytest.approx(3.0)  # stream 8 waited for stream 7's last kernel
    assert r["gpu_us"] == pytest.approx(50.0 + 2.0)  # the waiting kernel and the one it waited for
    assert r["launch_us"] == pytest.approx(4.0)  # that one's launch → start
    assert r["sync_return_us"] == pytest.approx(1.0)
    assert r["cpu_us"] == pytest.approx(600.0 - 52.0 - 3.0 - 4.0 - 1.0)


def test_analyze_shows_the_path_and_its_what_ifs(capsys):
    assert main(["analyze", str(EXAMPLE), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "Critical path by step" in out and "What-ifs on the critical path" in out
    a = analyze(kernscope.load(EXAMPLE, cache=False), step=3)
    assert a.critical_path is not None and a.critical_path.steps["step"].to_list() == [3]


DDP = sorted((TRACES / "multirank").glob("ddp4_rank*.json.gz"))


@pytest.mark.skipif(len(DDP) != 4, reason="../shared/traces/multirank not present")
def test_ddp_job_paths_wait_for_the_straggler_and_it_waits_for_nobody():
    """Rank 2 sleeps 8 ms before its backward: the other ranks' paths spend milliseconds in all-reduces waiting
    for it to arrive; its own path waits for nobody."""
    from kernscope.analyze.ranks import combine, summarize_rank

    job = combine([summarize_rank(kernscope.load(p, cache=False), str(p)) for p in DDP])
    cp = job.critical_path
    assert cp.height == 16 and ((cp["length_us"] - cp["step_us"]).abs() < 1e-6).all()
    assert (cp["last_arriver_wait_us"] <= cp["gpu_us"] + cp["carryover_us"] + 1e-6).all()
    assert cp.filter(pl.col("rank") == 2)["last_arriver_wait_us"].max() == 0
    late = cp.filter((pl.col("rank") != 2) & pl.col("step").is_in([3, 4, 5]))
    assert late["last_arriver_wait_us"].min() > 5_000  # the 8 ms sleep, less what the path did meanwhile
    # the waiting ranks' steps 3 and 4 begin with the previous step's all-reduces still waiting for rank 2: their paths
    # are carried-over GPU work (9.6-12.3 ms; it read as 0, that work counted as the step's own gpu time), the
    # straggler's are not (33-106 µs)
    carried = cp.filter(pl.col("step").is_in([3, 4]))
    assert carried.filter(pl.col("rank") != 2)["carryover_us"].min() > 5_000
    assert cp.filter(pl.col("rank") == 2)["carryover_us"].max() < 500


def _host_bound_step(tmp_path, first_ops: list[dict]):
    """The critical path of a host-bound step: ``first_ops`` at its start, op B (400-700 µs) on the step's thread,
    then a kernel launched at 650 µs."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1000.0},
          *({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, **op} for op in first_ops),
          {"ph": "X", "cat": "cpu_op", "name": "B", "pid": 1, "tid": 1, "ts": 400.0, "dur": 300.0},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 650.0, "dur": 5.0,
           "args": {"correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 660.0, "dur": 10.0,
           "args": {"correlation": 1, "device": 0, "stream": 7}}]
    p = tmp_path / "h.json"
    write_trace(p, ev)
    return p, _path(p)[1]


def test_host_time_on_the_path_is_split_over_the_ops_it_overlaps(tmp_path):
    """A host-bound step: ops A (0-300 µs) and B (400-700 µs) on the step's thread, then a kernel; the path's host
    time (no sync) splits into A's 300, B's 300 and the rest between ops."""
    _, cp = _host_bound_step(tmp_path, [{"name": "A", "ts": 0.0, "dur": 300.0}, {"name": "inner", "ts": 10.0, "dur": 50.0}])
    got = dict(zip(cp.ops["op"], cp.ops["host_us"]))
    assert got == pytest.approx({"A": 300.0, "B": 300.0, "(between ops)": 400.0})  # the whole step is host time
    assert cp.steps["cpu_us"][0] == pytest.approx(1000.0)


def test_a_stretch_over_a_single_op_counts_it_once(tmp_path):
    """The path's host stretch overlaps one top-level op only (a JAX step: its module op, then untraced time): the op
    gets its time once and the rest is between ops (the op was counted from both ends of the stretch: twice)."""
    _, cp = _host_bound_step(tmp_path, [])
    got = dict(zip(cp.ops["op"], cp.ops["host_us"]))
    assert got == pytest.approx({"B": 300.0, "(between ops)": 700.0})
    assert sum(got.values()) == pytest.approx(cp.steps["cpu_us"][0])


@pytest.mark.parametrize("order", list(itertools.permutations(["detach", "aten::detach", "zeta"])))
def test_ops_of_one_span_name_the_first_in_text_order_whatever_the_files_order(tmp_path, order):
    """Three top-level ops with one span (a real A100 trace's ``aten::detach`` and ``detach``): the time goes to the
    first name in text order, whatever order the file lists them in (the names are interned in no text order: a
    rank of the codes inverted once named ``detach``)."""
    _, cp = _host_bound_step(tmp_path, [{"name": n, "ts": 0.0, "dur": 300.0} for n in order])
    got = dict(zip(cp.ops["op"], cp.ops["host_us"]))
    assert got == pytest.approx({"aten::detach": 300.0, "B": 300.0, "(between ops)": 400.0})


def test_an_annotation_of_an_ops_span_names_it(tmp_path):
    """A user annotation with the span of a CPU op (the user's range around it) names the time, before the op."""
    _, cp = _host_bound_step(tmp_path, [{"name": "aten::mm", "ts": 0.0, "dur": 300.0},
                                        {"name": "my_range", "ts": 0.0, "dur": 300.0, "cat": "user_annotation"}])
    assert dict(zip(cp.ops["op"], cp.ops["host_us"])) == pytest.approx({"my_range": 300.0, "B": 300.0,
                                                                         "(between ops)": 400.0})


def test_an_op_without_a_name_keeps_its_host_time_as_null(tmp_path):
    """An op of the step's thread without a name (a trace written without the key: the long fuzz run's drop_key
    mutant of a real trace) is a null op with its time, not an error (its name once became a numpy object and the
    column polars' Object type, which no cast takes)."""
    p, cp = _host_bound_step(tmp_path, [{"ts": 0.0, "dur": 300.0}])  # no name
    assert cp.ops.schema["op"] == pl.String
    got = dict(zip(cp.ops["op"], cp.ops["host_us"]))
    assert got == pytest.approx({None: 300.0, "B": 300.0, "(between ops)": 400.0})
    assert main(["analyze", str(p), "--no-cache", "--format", "json", "-o", str(tmp_path / "out.json")]) == 0


def test_xla_device_to_host_copies_are_synchronizing_calls():
    """JAX (XLA's CUPTI tracer) names its driver-level device-to-host copies ``MemcpyD2H``: the host waits in them,
    so the path jumps to the GPU there, and the blocking-sync finding counts them. Real H100 profile: step 2
    compiles (autotuning copies results back 75 times); steps 0, 1, 3 launch ~2 µs kernels 10–40 µs apart, so
    their path is host time, as it should be."""
    t = kernscope.load(DATA / "recompile_h100" / "jax_recompile.xplane.pb.gz", cache=False)
    a = analyze(t)
    steps = a.critical_path.steps.sort("step")
    assert steps.filter(pl.col("step") != 2)["gpu_us"].to_list() == [0.0, 0.0, 0.0]
    two = steps.filter(pl.col("step") == 2).row(0, named=True)
    assert two["gpu_us"] > 1000 and two["sync_return_us"] > 0 and two["length_us"] == pytest.approx(two["step_us"])
    st = t.steps.filter(pl.col("step") == 2).row(0, named=True)
    raw = t.events.filter((pl.col("name").cast(pl.String) == "MemcpyD2H") & (pl.col("ts") >= st["start"])
                          & (pl.col("ts") + pl.col("dur") <= st["end"]))
    (f,) = a.findings.filter(pl.col("rule") == "blocking_sync").to_dicts()
    assert f["step"] == 2 and "75 MemcpyD2H" in f["text"] and raw.height == 75
    assert f["win_back_us"] == pytest.approx(raw["dur"].sum() / 1000)


def test_jax_json_host_rows_without_thread_say_nothing(tmp_path, capsys):
    """A JAX JSON export's host stretches without a pid/tid matched no op as before, but polars warned on every
    comparison with None: three `kernscope: warning:` lines on stderr for one `analyze`."""
    from pathlib import Path

    from kernscope.cli import main

    trace = Path(__file__).parent / "data" / "jax" / "transformer" / "perfetto_trace.json.gz"
    assert main(["analyze", str(trace), "--no-cache", "--format", "json", "-o", str(tmp_path / "a.json")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_binary_lifting_equals_a_walk_of_each_chain() -> None:
    """The chains read by binary lifting (jump tables only as deep as the longest chain) equal a plain walk."""
    from kernscope.analyze.critical_path import _ancestors

    rng = np.random.default_rng(7)
    for n, chain_len in ((1, 1), (50, 3), (5000, 700), (3000, 2999)):
        root = n
        # forests: each node's predecessor is an earlier node or the root; one long chain among short ones
        pred = np.array([root if i % chain_len == 0 else int(rng.integers(max(0, i - chain_len), i))
                         for i in range(n)] + [root], dtype=np.int64)
        pred[1:min(n, chain_len)] = np.arange(0, min(n, chain_len) - 1)
        starts = np.array(sorted(set(rng.integers(0, n, size=min(n, 20)).tolist()) | {min(n, chain_len) - 1, root}),
                          dtype=np.int64)
        owner, node = _ancestors(pred, starts, root)
        want_owner, want_node = [], []
        for k, s in enumerate(starts.tolist()):
            while s != root:
                want_owner.append(k)
                want_node.append(s)
                s = int(pred[s])
        assert owner.tolist() == want_owner
        assert node.tolist() == want_node


def test_text_rank_orders_as_the_text_does() -> None:
    from kernscope.analyze.critical_path import _text_rank

    # categories made in an order unlike the text's, so the physical codes disagree with it
    df = pl.DataFrame({"s": ["zeta", "b", None, "alpha", "b", "Zulu"]}, schema={"s": pl.Categorical})
    got = df.select(_text_rank(pl.col("s")).alias("r"))["r"].to_list()
    assert got == [3, 2, None, 1, 2, 0]  # Zulu < alpha < b < zeta (byte order)
    by_rank = df.with_columns(_text_rank(pl.col("s")).alias("r")).sort("r", nulls_last=True)["s"].cast(pl.String)
    assert by_rank.to_list() == df["s"].cast(pl.String).sort(nulls_last=True).to_list()


@pytest.mark.parametrize("wide", [False, True], ids=["one-key", "too-wide-for-one-key"])
def test_node_order_is_the_rows_sorted_by_every_key_ties_included(wide: bool) -> None:
    """The records' node order (one argsort of lane and start, ties ordered apart) equals a stable sort of the rows by
    all seven keys, whatever order the rows come in: nodes get the same ids from any load of the trace."""
    from kernscope.analyze.critical_path import _node_order

    rng = np.random.default_rng(11)
    n = 4000

    def pick(values: list, p_null: float = 0.0) -> list:
        out = [values[i] for i in rng.integers(0, len(values), n)]
        return [None if rng.random() < p_null else v for v in out]

    # few distinct starts, so most rows tie on (device, stream, start); nulls in every key that may have them
    ts = rng.integers(0, 40, n) * (2**56 if wide else 1_000)
    gpu = pl.DataFrame({"device": pick([0, 1, 7], 0.05), "stream": pick([7, 13, 20], 0.05), "ts": ts,
                        "end": ts + rng.integers(0, 3, n), "correlation": pick([5, 9, 2], 0.3),
                        "name": pick(["sgemm", "Zeta", "b", "alpha"], 0.2), "launcher": pick(["aten::mm", "x"], 0.3)},
                       schema_overrides={"device": pl.Int64, "stream": pl.Int64, "ts": pl.Int64, "end": pl.Int64,
                                         "correlation": pl.Int64, "name": pl.Categorical, "launcher": pl.Categorical})
    keys = ["device", "stream", "ts", "end", "correlation", "name", "launcher"]
    want = (gpu.with_row_index("_row")
            .with_columns(pl.col("device", "stream").fill_null(-1), pl.col("name", "launcher").cast(pl.String))
            .sort(keys, nulls_last=True, maintain_order=True))
    order, lane, device, identity = _node_order(gpu)
    assert order.tolist() == want["_row"].to_list() and not identity
    # the lanes and devices as codes in key order: equal where the keys are, and rising with them
    dev_stream = want.select("device", "stream").rows()
    assert [lane[i] == lane[i + 1] for i in range(n - 1)] == [dev_stream[i] == dev_stream[i + 1] for i in range(n - 1)]
    assert (np.diff(lane) >= 0).all() and (np.diff(device) >= 0).all()
    assert [device[i] == device[i + 1] for i in range(n - 1)] == [dev_stream[i][0] == dev_stream[i + 1][0] for i in range(n - 1)]
    # another order of the same rows: the same records in the same node order (a row's key tuple, nulls as None)
    shuffled = gpu[rng.permutation(n).tolist()]
    again, _, _, _ = _node_order(shuffled)
    as_text = [pl.col("name", "launcher").cast(pl.String)]
    assert (shuffled[again.tolist()].with_columns(as_text).select(keys).rows()
            == gpu[order.tolist()].with_columns(as_text).select(keys).rows())
    # the rows in node order already (ties included): the identity, said, with the same lanes and devices
    in_order = gpu[order.tolist()]
    same, lane2, device2, identity = _node_order(in_order)
    assert identity and same.tolist() == list(range(n))
    assert lane2.tolist() == lane.tolist() and device2.tolist() == device.tolist()


@pytest.mark.parametrize("path", [Path(__file__).parent / "data" / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz",
                                  *[p for p in real_traces() if p.name in ("v100_2rank_nccl_rank1.json.gz",
                                                                           "a100_16rank_rank0_triton.json.gz")],
                                  Path(__file__).parent / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"],
                         ids=lambda p: p.name.split(".")[0])
def test_the_path_of_rows_in_node_order_read_in_place_equals_the_gathered_one(path, monkeypatch):
    """Where the records lie in node order already (a real JAX profile's do), the critical path reads their columns as
    they are instead of gathering them in node order. The same path on a trace's rows as loaded (gathered) and in
    node order (read in place), and in node order with the identity not taken (gathered again)."""
    from kernscope.analyze import critical_path as cp_mod

    t = kernscope.load(path, cache=False)
    g = gpu_table(t, Categorizer.builtin(), text_names=False, text_keys=False)
    order, _, _, identity = cp_mod._node_order(g)
    in_order = g[order.tolist()]
    assert cp_mod._node_order(in_order)[3]
    got = [cp_mod.critical_path(t, in_order)]
    if not identity:
        got.append(cp_mod.critical_path(t, g))
    real = cp_mod._node_order
    monkeypatch.setattr(cp_mod, "_node_order", lambda gpu: (*real(gpu)[:3], False))
    got.append(cp_mod.critical_path(t, in_order))
    assert got[0].steps.height > 0
    for other in got[1:]:
        for name in ("steps", "categories", "kernels", "whatif", "records", "ops"):
            assert getattr(got[0], name).equals(getattr(other, name)), name


def test_a_step_ending_on_the_gpu_ends_at_its_last_record_of_equal_ends_the_later(tmp_path):
    """The last step's GPU work ends after its CPU window: the path ends at the record that ends last. Two kernels end
    together on two streams (500 and 400 µs long, launched at 10 and 20 µs): the path ends at the later node (stream
    8's), and runs through that kernel, not the other."""
    p = tmp_path / "t.json"
    _trace(p, [(10.0, 2000.0, 500.0, 7), (20.0, 2100.0, 400.0, 8)])
    _, cp = _path(p)
    names = cp.kernels["name"].cast(pl.String).to_list()
    assert names == ["ampere_sgemm_128x64_nn_1"], names
    assert cp.steps.row(0, named=True)["gpu_us"] == pytest.approx(400.0)


def test_the_last_automatic_window_ends_at_its_last_record():
    """Automatic windows are GPU time ranges, the last ending 1 ns after its last record: the path ends at that record
    (the rule for a last step whose GPU work outlasts it), where the 1 ns left the path all host time. The H200
    CUDA-only recording: the last window's path holds the optimizer's kernel, launched after the GPU ran dry; the
    path still covers the window once. Earlier windows end where the next one's first kernel starts: host time."""
    t = kernscope.load(Path(__file__).resolve().parent / "data" / "activities_h200" / "cuda_only.pt.trace.json.gz",
                       cache=False)
    assert t.step_source == "auto"
    cp = critical_path(t, gpu_table(t, Categorizer.builtin()))
    last = cp.steps.row(-1, named=True)
    optimizer = t.kernels.filter(pl.col("step") == last["step"]).sort("ts")["dur"][-1] / 1000
    assert last["gpu_us"] == pytest.approx(optimizer) and last["launch_us"] > 0
    assert cp.kernels.filter(pl.col("step") == last["step"])["name"].cast(pl.String).str.contains("multi_tensor").all()
    for r in cp.steps.iter_rows(named=True):
        assert r["length_us"] == pytest.approx(r["step_us"]) == pytest.approx(sum(r[f"{s}_us"] for s in SEGMENTS))
    assert cp.steps["gpu_us"][:-1].to_list() == [0.0, 0.0]


@needs_traces
def test_a_gpu_only_trace_path_follows_its_kernels():
    """TraceLens's MI210 trace without CPU ops (one automatic window, the GPU busy 89% of it): the path was all host
    time; it now ends at the last kernel and follows the GPU work back (kernels over half of it)."""
    t = kernscope.load(TRACES / "tracelens/mi210_gpu_only.json.gz", cache=False)
    cp = critical_path(t, gpu_table(t, Categorizer.builtin()))
    r = cp.steps.row(0, named=True)
    assert r["length_us"] == pytest.approx(r["step_us"]) and r["gpu_us"] > 0.5 * r["step_us"]


@pytest.mark.parametrize("p", [*REAL, *[p for p in real_traces() if p.name in ("v100_2rank_nccl_rank1.json.gz",
                                                                           "a100_16rank_rank0_triton.json.gz")]],
                         ids=lambda p: p.name[:40])
def test_the_compiled_link_cut_equals_numpy(p, monkeypatch):
    """Each node's link to its predecessor is cut in two compiled passes (``native.node_windows``) or in numpy
    (``_windows_of`` and the gathers at the predecessors), and each step's last record found in one compiled pass
    (``native.group_last_max``) or by polars: the same path, tables cell for cell, on real traces (steps, JAX modules,
    ranks) and on a single step of each."""
    from kernscope.analyze import critical_path as cp_mod
    from kernscope.load import native

    if native.scanner() is None:
        pytest.fail("the compiled library was not built (make install compiles src/kernscope/load/_sweep.c)")
    t = kernscope.load(p, cache=False)
    g = gpu_table(t, Categorizer.builtin())
    calls: list[int] = []
    real = cp_mod.node_windows

    def counted(*a):
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(cp_mod, "node_windows", counted)
    first = t.steps["step"].head(1).to_list()
    compiled = [cp_mod.critical_path(t, g), *(cp_mod.critical_path(t, g, step=s) for s in first)]
    if compiled[0].steps.height == 0:
        pytest.skip("no steps with GPU work")
    assert calls
    monkeypatch.setattr(cp_mod, "node_windows", lambda *a: None)
    monkeypatch.setattr(cp_mod, "group_last_max", lambda *a: None)
    by_numpy = [cp_mod.critical_path(t, g), *(cp_mod.critical_path(t, g, step=s) for s in first)]
    for a, b in zip(compiled, by_numpy):
        for name in ("steps", "categories", "kernels", "whatif", "records", "ops"):
            assert getattr(a, name).equals(getattr(b, name)), name


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_link_cut_equals_numpy_on_random_nodes(seed, monkeypatch):
    """``_cut_links`` compiled and in numpy on random nodes whose times fall on the windows' starts and ends (ties),
    invalid times, step end points, windows that overlap, share a number, lack an end, and numbers in a narrow or a
    wide range (a table of first positions, or a binary search): the same links cut and the same predecessor times."""
    from kernscope.analyze import critical_path as cp_mod
    from kernscope.load import native

    if native.scanner() is None:
        pytest.fail("the compiled library was not built (make install compiles src/kernscope/load/_sweep.c)")
    rng = np.random.default_rng(seed)
    n, nw = 3_000, 12
    starts = np.sort(rng.integers(0, 200, nw)) * 10
    ends = starts + rng.integers(0, 400, nw)
    steps = rng.integers(0, 8, nw) * (1 if seed % 2 else 2**40)  # repeats; wide numbers on even seeds
    windows = pl.DataFrame({"start": starts, "T": pl.Series(ends).set(pl.Series(rng.random(nw) < 0.15), None),
                            "step": steps})
    edges = np.concatenate([starts, ends, starts - 1, ends + 1])
    time = np.where(rng.random(n) < 0.5, rng.choice(edges, n), rng.integers(-50, 2_500, n)).astype(np.int64)
    time_ok = rng.random(n) < 0.9
    end_of = rng.choice(steps, n).astype(np.int64)
    end_of_ok = rng.random(n) < 0.05
    pred0 = rng.integers(-1, n, n).astype(np.int64)
    has0 = (pred0 >= 0) & (rng.random(n) < 0.95)
    pred0[~has0] = rng.integers(0, n, int((~has0).sum()))  # (a pred where there is none: never read)
    got = []
    for compiled in (True, False):
        if not compiled:
            monkeypatch.setattr(cp_mod, "node_windows", lambda *a: None)
        pred = pred0.copy()
        pt, pt_ok = cp_mod._cut_links(time, time_ok, (end_of, end_of_ok), windows, pred, has0.copy())
        got.append((pred, pt, pt_ok))
    (p1, t1, o1), (p2, t2, o2) = got
    assert np.array_equal(p1, p2) and np.array_equal(o1, o2) and np.array_equal(t1, t2)
    assert 0 < int((p1 == -1).sum()) < n and o1.any()  # some links cut, some kept


@pytest.mark.parametrize("seed", range(4))
def test_each_steps_last_record_compiled_equals_polars(seed, monkeypatch):
    """Per step, the record that ends last, of equal ends the later one: compiled over a table of the step numbers,
    and polars' grouping, on random records with many equal ends, null steps and negative step numbers."""
    from kernscope.analyze import critical_path as cp_mod

    rng = np.random.default_rng(seed)
    n = 5_000
    step = pl.Series("step", rng.integers(-3, 40, n)).set(pl.Series(rng.random(n) < 0.1), None)
    end = rng.integers(0, 30, n).astype(np.int64)  # many ties
    got = cp_mod._last_records(step, end).sort("step")
    monkeypatch.setattr(cp_mod, "group_last_max", lambda *a: None)
    want = cp_mod._last_records(step, end).sort("step")
    assert got.equals(want) and got.height == 43


def test_a_jax_path_blind_to_the_gpu_says_so():
    """XLA records no event for the host waiting on the GPU, so a JAX step's path is host time back to its start even
    where its kernels ran most of it (the transformer profile: 5.7 of 5.7 ms host, kernels 3.2 ms a step). The path
    says so in a note; host-bound steps (the recompile profile's ~2 µs kernels) and Kineto traces get none."""
    t = kernscope.load(DATA / "jax" / "transformer" / "vm.xplane.pb.gz", cache=False)
    cp = analyze(t).critical_path
    assert cp.steps["gpu_us"].to_list() == [0.0, 0.0, 0.0]
    (note,) = cp.notes
    assert "XLA records no event for the host waiting on the GPU" in note and "in 3 of 3 steps" in note
    assert "kernels ran 54% of their time" in note
    for quiet in (DATA / "recompile_h100" / "jax_recompile.xplane.pb.gz",
                  DATA / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz"):
        assert analyze(kernscope.load(quiet, cache=False)).critical_path.notes == [], quiet


@pytest.mark.parametrize("walk_links", [4096, 3])
def test_chains_walked_equal_chains_lifted(monkeypatch, walk_links):
    """The path's chains are walked a link at a time (no table of a node each) up to WALK_LINKS links, by binary
    lifting beyond: both give every chain's nodes, chain after chain, each from its start back (random forests, a
    chain longer than the walk's limit in the second case)."""
    import numpy as np

    from kernscope.analyze import critical_path as cpm

    monkeypatch.setattr(cpm, "WALK_LINKS", walk_links)
    rng = np.random.default_rng(7)
    for n in (1, 10, 500):
        root = n
        pred = np.array([rng.integers(-1, i) if i else -1 for i in range(n)], dtype=np.int64)  # a forest: parents earlier
        pred = np.append(np.where(pred >= 0, pred, root), root)
        starts = np.append(rng.integers(0, n, size=5), root)  # (a start at the root: an empty chain)
        walked, lifted = cpm._ancestors(pred, starts, root), cpm._ancestors_lifted(pred, starts, root)
        assert np.array_equal(walked[0], lifted[0]) and np.array_equal(walked[1], lifted[1])
    line = np.append(np.arange(-1, 99), 100)  # one chain of 100 nodes: 99 -> 98 -> ... -> 0
    line[0] = 100
    owner, node = cpm._ancestors(line, np.array([99]), 100)
    assert node.tolist() == list(range(99, -1, -1)) and owner.tolist() == [0] * 100


@pytest.mark.parametrize("walk_links", [4096, 3])
def test_chains_compiled_equal_chains_in_numpy(monkeypatch, walk_links):
    """The chains' depths and nodes walked by the compiled library (``ks_chain_depths``, ``ks_chain_nodes``) equal
    the numpy walk's (``KERNSCOPE_NO_NATIVE=1``) on random forests, a chain over the walk's limit (None: lifted) and a
    cycle (``LinkCycle``); a link outside the table is left to numpy's walk, which says so."""
    import numpy as np

    from kernscope.analyze import critical_path as cpm
    from kernscope.load.native import chain_depths, chain_nodes, scanner

    if scanner() is None:
        pytest.skip("the compiled library is not built")
    monkeypatch.setattr(cpm, "WALK_LINKS", walk_links)
    rng = np.random.default_rng(11)

    def both(fn, *args):
        monkeypatch.delenv("KERNSCOPE_NO_NATIVE", raising=False)
        compiled = fn(*args)
        monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
        numpy_form = fn(*args)
        monkeypatch.delenv("KERNSCOPE_NO_NATIVE")
        return compiled, numpy_form

    deep = 0
    for n in (1, 10, 500, 3000):
        root = n
        pred = np.array([rng.integers(max(-1, i - 3), i) if i else -1 for i in range(n)], dtype=np.int64)  # long chains
        pred = np.append(np.where(pred >= 0, pred, root), root)
        starts = np.append(rng.integers(0, n, size=40), root)  # (a start at the root: an empty chain)
        (d_c, d_n) = both(cpm._depths, pred, starts, root)
        assert (d_c is None) == (d_n is None)
        if d_c is None:
            deep += 1
        else:
            assert d_c.dtype == np.int64 and np.array_equal(d_c, d_n)
        (a_c, a_n) = both(cpm._ancestors, pred, starts, root)
        assert np.array_equal(a_c[0], a_n[0]) and np.array_equal(a_c[1], a_n[1])
        lifted = cpm._ancestors_lifted(pred, starts, root)
        assert np.array_equal(a_c[1], lifted[1])
    assert deep == (3 if walk_links == 3 else 0)  # (the limit is met where it is low: every forest but the one node)
    cycle = np.array([1, 0, 3, 3], dtype=np.int64)  # 0 <-> 1 go round; 2 -> root 3
    assert chain_depths(cycle, 3, np.array([2, 0]), 100) is False
    assert chain_depths(cycle, 3, np.array([2]), 100).tolist() == [1]
    with pytest.raises(cpm.LinkCycle):
        cpm._ancestors(cycle, np.array([2, 0]), 3)
    outside = np.array([7, 2, 2], dtype=np.int64)
    assert chain_depths(outside, 2, np.array([0]), 100) is None
    assert chain_nodes(outside, np.array([0]), np.array([2])) is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top_level_ops_sort_only_their_ties_as_a_sort_of_every_row_would(seed):
    """A thread's top-level ops (the host time by op): rows that start together are ordered by span, kind and name
    (then row), and only the runs of ties are sorted by that key. The result equals a sort of every row by it, on
    random ops with many ties, equal spans, annotations, names out of text order and null names."""
    import numpy as np

    from kernscope.analyze import critical_path as cpm

    rng = np.random.default_rng(seed)
    n = 3000
    ts = np.sort(rng.integers(0, 4000, n)) + rng.integers(-3, 4, n) * (rng.random(n) < 0.05)  # nearly sorted, ties
    end = ts + rng.integers(0, 50, n) * (rng.random(n) < 0.9)
    ann = rng.random(n) < 0.2
    pool = ["zeta", "alpha", "mid", "Alpha", "beta", None]
    names = pl.Series("name", [pool[k] for k in rng.integers(0, len(pool), n)], dtype=pl.Categorical)
    rows = pl.DataFrame({"ts": ts, "end": end, "_ann": ann, "name": names})
    got = cpm._top_level(rows, np.zeros(0, np.int64), np.zeros(0, np.int64))
    # the reference: every row sorted by (ts, longer first, annotation first, name in text order, row)
    text = rows["name"].cast(pl.String).to_list()
    ref = sorted(range(n), key=lambda i: (ts[i], -end[i], not ann[i], text[i] is not None, text[i] or "", i))
    r_ts, r_end = ts[ref], end[ref]
    seen = np.maximum.accumulate(r_end)
    top = np.ones(n, bool)
    top[1:] = r_ts[1:] >= seen[:-1]
    want = [ref[i] for i in np.flatnonzero(top)]
    assert got["ts"].to_list() == ts[want].tolist() and got["end"].to_list() == end[want].tolist()
    assert got["name"].to_list() == [text[i] for i in want]
    assert int((ts[1:] == ts[:-1]).sum()) > 100  # (ties to order)


def test_untraced_waits_put_a_jax_steps_gpu_work_on_its_path(capsys):
    """--untraced-waits (off by default: a heuristic, and slower on large profiles): a JAX step's untraced host tail,
    while GPU work it launched ran, is a wait for that work, and the path follows it through the GPU. The transformer
    profile's kernels run 3.2 ms of each ~5.2-5.7 ms step: the path reads ~3.15 ms of GPU time a step instead of none,
    still covering each step once; the host-bound recompile profile and Kineto traces are unchanged."""
    t = kernscope.load(DATA / "jax" / "transformer" / "vm.xplane.pb.gz", cache=False)
    g = gpu_table(t, Categorizer.builtin())
    off, on = critical_path(t, g), critical_path(t, g, untraced_waits=True)
    assert off.steps["gpu_us"].to_list() == [0.0, 0.0, 0.0] and "--untraced-waits" in off.notes[0]
    s = on.steps
    assert (s["length_us"] - s["step_us"]).abs().max() < 1e-6
    assert s["gpu_us"].to_list() == pytest.approx([3156.369, 3150.804, 3154.921], abs=1e-3)
    assert (s["cpu_us"] < s["step_us"] / 2).all()
    (note,) = on.notes
    assert "in 3 of 3 steps the host showed no event from its last one until GPU work it had launched ended" in note
    # the path's kernels and categories add up to its GPU time, each step's kernels at most 10 rows and one of the rest
    per = on.kernels.group_by("step").agg(pl.col("time_us").sum(), pl.len().alias("rows"),
                                          pl.col("name").str.ends_with("other kernels)").sum().alias("rest"))
    got = s.join(per, on="step")
    assert ((got["gpu_us"] - got["time_us"]).abs() < 1e-3).all() and (got["rows"] <= 11).all() and (got["rest"] == 1).all()
    for same in (DATA / "recompile_h100" / "jax_recompile.xplane.pb.gz", EXAMPLE):
        tt = kernscope.load(same, cache=False)
        gg = gpu_table(tt, Categorizer.builtin())
        a, b = critical_path(tt, gg), critical_path(tt, gg, untraced_waits=True)
        assert a.steps.equals(b.steps) and a.kernels.equals(b.kernels) and a.notes == b.notes, same
    # the precision profile's steps each run a GEMM three times with block_until_ready: the host's traced work
    # resumes after the last GEMM's wait (buffer bookkeeping) within the step, and the gap before it ended (0.3 and
    # 2.6 ms) is that wait: the path ends through that GEMM (its 0.34 and 2.66 ms; until session 45 only a tail to
    # the step's end counted, and this path stayed host time)
    tp = kernscope.load(DATA / "precision_h200" / "jax_precision.xplane.pb.gz", cache=False)
    pp = critical_path(tp, gpu_table(tp, Categorizer.builtin()), untraced_waits=True)
    assert pp.steps["gpu_us"].round(0).to_list() == [338.0, 2660.0] and "in 2 of 2 steps the host showed" in pp.notes[0]
    # a wait inside a Python frame: the JAX job's step() holds dispatch and block_until_ready, and its frame ends
    # after the GPU work, XLA's buffer bookkeeping follows; the frame is no sign of work (only innermost events are)
    tj = kernscope.load(next((DATA / "jax_job_h200" / "process0").rglob("*.xplane.pb.gz")), cache=False)
    jj = critical_path(tj, gpu_table(tj, Categorizer.builtin()), untraced_waits=True)
    assert (jj.steps["gpu_us"] > 0.7 * jj.steps["step_us"]).all()  # the all-reduces that waited for process 1
    # a host-bound step's GPU work ending a few µs into a gap between two traced calls is no wait (the recompile
    # profile, above, unchanged); nor is a gap an event runs across
    # the command line's flag
    assert main(["analyze", str(DATA / "jax" / "transformer" / "vm.xplane.pb.gz"), "--untraced-waits", "--format", "json",
                 "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["gpu_us"] for r in doc["critical_path"]["steps"]] == pytest.approx(s["gpu_us"].to_list(), abs=1e-3)


def test_a_steps_kernels_on_the_path_are_its_ten_longest_and_the_rest_in_one_row(tmp_path):
    """critical_path.kernels: per step the 10 longest kernels on the path (of equal times by name) and one row
    '(N other kernels)' with their count and time, so that a profile of thousands of steps does not list every kernel
    of every step (304 k rows, 76 MB of JSON on a 207 MB JAX profile): the times still add up to the path's GPU time."""
    p = tmp_path / "k.json"
    # 14 kernels queued on one stream, each 10 µs longer than the one before, then the step's sync
    _trace(p, [(1.0 + i, 20.0 + sum(10.0 + 10 * j for j in range(i)) + i, 10.0 + 10 * i, 7) for i in range(14)],
           sync=(20.0, 1500.0))
    t, cp = _path(p)
    k = cp.kernels
    assert k.height == 11 and k["name"][-1] == "(4 other kernels)" and k["count"][-1] == 4
    assert k["category"][-1] is None and k["launcher"][-1] is None
    assert k["name"][:10].to_list() == [f"ampere_sgemm_128x64_nn_{i}" for i in range(13, 3, -1)]
    assert k["time_us"][-1] == pytest.approx(10 + 20 + 30 + 40) and k["time_us"].sum() == pytest.approx(cp.steps["gpu_us"][0])


def test_the_paths_of_steps_summarized_in_batches_equal_one_batch(monkeypatch):
    """The steps' paths are walked and summarized in batches of about PATH_BATCH nodes (a JAX profile's path holds
    every kernel of every step): batches of a few nodes give the tables of one batch."""
    from kernscope.analyze import critical_path as cpm

    for p in (EXAMPLE, DATA / "jax" / "transformer" / "vm.xplane.pb.gz"):
        t = kernscope.load(p, cache=False)
        g = gpu_table(t, Categorizer.builtin())
        whole = critical_path(t, g, untraced_waits=True)
        monkeypatch.setattr(cpm, "PATH_BATCH", 5)
        assert len(cpm._batches(cpm._depths(np.array([1, 1]), np.array([0, 0, 0]), 1), 3, 5)) == 1  # (short chains)
        parts = critical_path(t, g, untraced_waits=True)
        monkeypatch.undo()
        for name, a in whole.tables().items():  # (times equal to the last bits: µs made of the same integer ns)
            assert_frame_equal(a, parts.tables()[name], check_exact=False, rel_tol=1e-12, abs_tol=1e-9)
        assert_frame_equal(whole.records, parts.records)


@pytest.mark.parametrize("seed", range(4))
def test_batches_cover_every_start_once(seed):
    from kernscope.analyze.critical_path import _batches

    rng = np.random.default_rng(seed)
    depth = rng.integers(0, 50, size=rng.integers(1, 40))
    for budget in (1, 30, 10_000):
        got = _batches(depth, len(depth), budget)
        assert got[0][0] == 0 and got[-1][1] == len(depth) and all(a[1] == b[0] for a, b in zip(got, got[1:]))
        assert all(hi > lo for lo, hi in got)
        assert all(depth[lo:hi].sum() <= budget or hi - lo == 1 for lo, hi in got)
    assert _batches(None, 7, 5) == [(0, 7)] and _batches(depth, 0, 5) == [(0, 0)]


@pytest.mark.parametrize("p", [p for p in REAL if ".xplane" in p.name] + [
    DATA / "jax" / "mlp" / "vm.xplane.pb", DATA / "precision_h200" / "jax_precision.xplane.pb.gz",
    *[p for p in (TRACES / "tracelens" / "jax").glob("*.xplane.pb")]], ids=lambda p: p.name[:40])
def test_jax_paths_with_untraced_waits_still_cover_each_step_once(p):
    t = kernscope.load(p, cache=False)
    cp = critical_path(t, gpu_table(t, Categorizer.builtin()), untraced_waits=True)
    s = cp.steps
    assert s.height == t.steps.height and (s["length_us"] - s["step_us"]).abs().max() < 1e-6
    assert all((s[f"{seg}_us"] >= 0).all() for seg in SEGMENTS)
    per = cp.kernels.group_by("step").agg(pl.col("time_us").sum())
    got = s.join(per, on="step", how="left").fill_null(0)
    assert ((got["gpu_us"] - got["time_us"]).abs() < 1e-3).all()
    host = cp.ops.group_by("step").agg(pl.col("host_us").sum())
    got = s.select("step", "cpu_us").join(host, on="step", how="left").fill_null(0)
    assert ((got["cpu_us"] - got["host_us"]).abs() < 1e-3).all()


def _two_gpus(path: Path, second_launch: float) -> None:
    """One step (0-800 µs): GPU 0 runs a 300 µs kernel and a 30 µs copy (launched at 10 and 12 µs); GPU 1 runs a 400 µs
    kernel launched at ``second_launch`` that starts 10 µs after the copy ends (360 µs); the host syncs until 761 µs."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 800.0},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 20.0, "dur": 741.0}]
    for i, (launch, start, dur, dev, stream, name) in enumerate([
            (10.0, 20.0, 300.0, 0, 7, "ampere_sgemm_128x64_nn"), (12.0, 320.0, 30.0, 0, 7, "Memcpy PtoP (Device -> Device)"),
            (second_launch, 360.0, 400.0, 1, 15, "ampere_sgemm_64x64_nn")]):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync" if "Memcpy" in name else "cudaLaunchKernel",
                   "pid": 1, "tid": 1 if launch < 20 else 2, "ts": launch, "dur": 1.0, "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "gpu_memcpy" if "Memcpy" in name else "kernel", "name": name, "pid": dev, "tid": stream,
                   "ts": start, "dur": dur, "args": {"correlation": i + 1, "device": dev, "stream": stream}})
    write_trace(path, ev)


def test_a_gpu_waiting_for_another_gpus_copy_puts_that_gpus_work_on_the_path(tmp_path):
    """One process driving two GPUs: GPU 1's kernel, launched at 15 µs, starts 10 µs after GPU 0's copy ends. The path
    follows it to that copy and GPU 0's kernel before it (gpu 730 µs, a 10 µs stream wait); it read 345 µs of
    'launch' and GPU 0's work off the path (a pipeline recorded on two H200s: 12.4 ms of 'stream wait' and 11 of its
    23 ms of GEMMs). Where GPU 1's kernel was launched just before it ran (5 µs), its launch explains its start."""
    p = tmp_path / "two.json"
    _two_gpus(p, 15.0)
    r = _path(p)[1].steps.row(0, named=True)
    assert r["length_us"] == pytest.approx(800.0)
    assert r["gpu_us"] == pytest.approx(730.0) and r["stream_wait_us"] == pytest.approx(10.0)
    assert r["launch_us"] == pytest.approx(10.0) and r["queue_us"] == pytest.approx(0.0)
    assert r["sync_return_us"] == pytest.approx(1.0) and r["cpu_us"] == pytest.approx(10.0 + 39.0)
    _two_gpus(p, 355.0)
    r = _path(p)[1].steps.row(0, named=True)
    assert r["gpu_us"] == pytest.approx(400.0) and r["launch_us"] == pytest.approx(5.0) and r["stream_wait_us"] == 0.0


@pytest.mark.parametrize("rel, step", [("parallel_h200/ep/rank0.pt.trace.json.gz", 3), ("parallel_h200/tp/rank0.pt.trace.json.gz", 4)])
def test_a_step_alone_has_the_path_row_of_the_whole_trace_to_the_last_digit(rel, step):
    """``analyze --step N`` and the whole trace give the same row for step N (the step alone read 4741.123 µs and the
    whole 4741.1230000000005: polars divides a one-row column exactly and a longer one by the reciprocal)."""
    t = kernscope.load(DATA / rel, cache=False)
    whole, alone = analyze(t).critical_path, analyze(t, step=step).critical_path
    assert whole is not None and alone is not None
    assert alone.steps.rows() == whole.steps.filter(pl.col("step") == step).rows()


@pytest.mark.parametrize("p", [EXAMPLE, DATA / "jax" / "transformer" / "vm.xplane.pb.gz"], ids=lambda p: p.name[:30])
def test_a_path_started_before_the_categories_equals_the_categorized_ones(p):
    """``analyze`` starts the critical path on the rows not yet categorized and hands it their categories later: the
    path is the one the categorized rows give, table for table."""
    t, cp = _path(p)
    categorized = gpu_table(t, Categorizer.builtin(), text_names=False, text_keys=False)
    late = critical_path(t, gpu_table(t, text_names=False, text_keys=False), categories=lambda: categorized["category"])
    assert cp.steps.height == t.steps.height > 0
    for name in ("steps", "categories", "kernels", "whatif", "records", "ops"):
        assert_frame_equal(getattr(late, name), getattr(cp, name)), name
    assert late.notes == cp.notes
    with pytest.raises(ValueError, match="categories for"):
        critical_path(t, gpu_table(t), categories=lambda: categorized["category"].head(3))


def test_a_categorization_that_fails_fails_the_analysis_and_the_path_waiting_for_it(monkeypatch):
    """The critical path, started first, waits for the categories: where the categorization raises, ``analyze``
    raises that error (it does not wait for ever on the path's thread)."""
    t = kernscope.load(EXAMPLE, cache=False)

    class Broken(Exception):
        pass

    def broken(self, gpu, **kw):
        raise Broken("no categories")

    monkeypatch.setattr(Categorizer, "categorize", broken)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            analyze(t)
        except Broken as e:
            raised.append(e)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(60)
    assert not th.is_alive(), "analyze waits for ever for the path's thread"
    assert len(raised) == 1
