"""One process driving two GPUs, and CUDA-graph trees: real H200 recordings (``examples/record_multigpu_traces.py``,
``tests/data/multigpu_h200``; docs/trace-engine.md, "Several devices in one trace").

- ``torch_mp``: a PyTorch MLP split over ``cuda:0`` and ``cuda:1`` (a two-stage pipeline in one process, the
  activations copied peer to peer): each GPU works about half of each step and waits the other half.
- ``jax_dp``: a JAX transformer trained data-parallel on both GPUs (XLA's NCCL all-reduces), with xprof's own Chrome
  JSON of the same profile (``jax_dp.trace.json.gz``) as an independent count.
- ``graphs``: an MLP under ``torch.compile(mode="reduce-overhead")``: its forward and backward replayed as CUDA graphs.
- ``torch_dp``: an MLP under ``torch.nn.DataParallel`` on both GPUs: NCCL broadcasts and reductions in one process.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

import kernscope
from kernscope.analyze.summary import analyze
from kernscope.cli import main

DATA = Path(__file__).parent / "data" / "multigpu_h200"
MP, DP, DP_JSON, GRAPHS = (DATA / n for n in ("torch_mp.pt.trace.json.gz", "jax_dp.xplane.pb.gz", "jax_dp.trace.json.gz",
                                              "graphs.pt.trace.json.gz"))
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _events(p: Path) -> list[dict]:
    with gzip.open(p) as f:
        return json.load(f)["traceEvents"]


def _union_us(spans: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals, one at a time (the oracle the timeline is checked against)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(spans):
        if cur_e is None or s > cur_e:
            total += 0.0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0.0 if cur_e is None else cur_e - cur_s)


def _device_of(e: dict) -> int:
    a = e["args"]
    return a["device"] if "device" in a else a["inDevice"]  # (a peer-to-peer copy names its devices: from, in, to)


def test_a_pipeline_over_two_gpus_reads_as_each_gpu_half_idle():
    """Each GPU's busy time is the union of its own records (checked against the raw JSON), over the span of both
    GPUs' work; the trace's timeline sums the two (device time), so its busy share is their mean: 49%. Before, the
    timeline was the union over both GPUs and read 97.8% busy, though each GPU waited for the other half the time."""
    raw = [e for e in _events(MP) if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    per_dev: dict[int, list[tuple[float, float]]] = {}
    for e in raw:
        per_dev.setdefault(_device_of(e), []).append((e["ts"], e["ts"] + e["dur"]))
    assert sorted(per_dev) == [0, 1]
    span = max(e["ts"] + e["dur"] for e in raw) - min(e["ts"] for e in raw)
    a = analyze(kernscope.load(MP, cache=False))
    by_dev = {(r["device"], r["type"]): r for r in a.timeline_by_device.iter_rows(named=True)}
    for d, spans in per_dev.items():
        assert by_dev[d, "busy_time"]["time_us"] == pytest.approx(_union_us(spans), abs=0.01)
        assert by_dev[d, "total_time"]["time_us"] == pytest.approx(span, abs=0.01)
        assert 40 < by_dev[d, "busy_time"]["percent"] < 60
    tl = {r["type"]: r for r in a.timeline.iter_rows(named=True)}
    assert tl["busy_time"]["time_us"] == pytest.approx(sum(_union_us(s) for s in per_dev.values()), abs=0.01)
    assert tl["total_time"]["time_us"] == pytest.approx(2 * span, abs=0.01)
    assert tl["busy_time"]["percent"] == pytest.approx((by_dev[0, "busy_time"]["percent"] + by_dev[1, "busy_time"]["percent"]) / 2)
    assert 45 < tl["busy_time"]["percent"] < 55
    # per step: each GPU's union of the step's records, summed; the step's span counted for each GPU
    g = a.gpu_interned
    for s in a.timeline_by_step["step"].unique().to_list():
        rows = g.filter(pl.col("step") == s)
        busy = sum(_union_us(list(zip((r["ts"] / 1e3 for r in part.iter_rows(named=True)),
                                      (r["end"] / 1e3 for r in part.iter_rows(named=True)), strict=True)))
                   for _, part in rows.group_by("device"))
        got = {r["type"]: r for r in a.timeline_by_step.filter(pl.col("step") == s).iter_rows(named=True)}
        assert got["busy_time"]["time_us"] == pytest.approx(busy, abs=0.01)
        assert got["total_time"]["time_us"] == pytest.approx(2 * (rows["end"].max() - rows["ts"].min()) / 1e3, abs=0.01)
        assert 45 < got["busy_time"]["percent"] < 55


def test_the_terminal_and_json_show_each_gpu(tmp_path, capsys):
    assert main(["analyze", str(MP), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "Steps (ProfilerStep; kernel and GPU time summed over 2 GPUs)" in out  # (23.3 ms of kernels in a 24 ms step)
    table = out[out.index("GPU timeline by device"):out.index("GPU time by category")]
    lines = [ln.split() for ln in table.splitlines()[2:] if ln.strip()]
    assert [ln[0] for ln in lines] == ["0", "1", "all"]
    assert [next(x for x in ln if x.endswith("%")) for ln in lines] == ["46.1%", "52.1%", "49.1%"]
    assert lines[2][:2] == ["all", "2"]
    assert main(["analyze", str(MP), "--no-cache", "--format", "json", "-o", str(tmp_path / "a.json")]) == 0
    doc = json.loads((tmp_path / "a.json").read_text())
    assert int(doc["schema_version"].split(".")[0]) >= 3  # 3.0: the timeline per GPU
    busy = {r["device"]: r["percent"] for r in doc["timeline_by_device"] if r["type"] == "busy_time"}
    assert sorted(busy) == [0, 1] and all(40 < v < 60 for v in busy.values())
    assert [r["percent"] for r in doc["timeline"] if r["type"] == "busy_time"] == [pytest.approx(49.14, abs=0.01)]


def test_the_second_stage_waits_on_the_first_not_on_the_cpu():
    """GPU 1's first kernel of a step was launched ~1 ms into the step and ran ~4.7 ms into it, when GPU 0's
    peer-to-peer copy ended: ``step_start_wait`` says so and names the copy; ``step_start_idle`` (CPU or data
    loading before the first launch) keeps only the time until the launch. Before, all 4.7 ms read as CPU time. A
    one-GPU trace has no such wait (no record of an idle GPU ends while it idles): its findings are unchanged."""
    ev = _events(MP)
    steps = sorted((e for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    launch_ts = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    gpu1 = sorted((e for e in ev if e.get("cat") in GPU_CATS and _device_of(e) == 1), key=lambda e: e["ts"])
    f = analyze(kernscope.load(MP, cache=False)).findings
    waits = f.filter(pl.col("rule") == "step_start_wait")
    assert waits["device"].to_list() == [1, 1, 1]
    for r, s in zip(waits.sort("step").iter_rows(named=True), steps, strict=True):
        first = next(e for e in gpu1 if e["ts"] >= s["ts"])
        ev_ = json.loads(r["evidence"])
        assert ev_["launched_us"] == pytest.approx(launch_ts[first["args"]["correlation"]] - s["ts"], abs=0.01)
        assert r["win_back_us"] == pytest.approx(first["ts"] - launch_ts[first["args"]["correlation"]], abs=0.01)
        assert r["win_back_us"] > 3000 and ev_["waited_for"] == "Memcpy PtoP (Device -> Device) on GPU 0, stream 7"
    idle = f.filter((pl.col("rule") == "step_start_idle") & (pl.col("device") == 1))
    assert (idle["win_back_us"] < 1500).all()


def test_jax_data_parallel_over_two_gpus():
    """XLA's NCCL all-reduces on both GPUs; the GPU records per device match xprof's own JSON of the profile; the
    exposed communication is each GPU's own (an all-reduce on one GPU is not hidden by compute on the other)
    summed; the JAX note's kernel share is the busiest GPU's (both GPUs' kernels summed read 125% of the steps)."""
    raw = [e for e in _events(DP_JSON) if e.get("ph") == "M" and e.get("name") == "process_name"]
    gpu_pid = {e["pid"]: int(e["args"]["name"].rsplit(":", 1)[1]) for e in raw if "/device:GPU:" in e["args"]["name"]}
    xs = [e for e in _events(DP_JSON) if e.get("ph") == "X" and e.get("pid") in gpu_pid]
    t = kernscope.load(DP, cache=False)
    assert t.devices == [0, 1] and t.platform == "cuda"
    assert dict(t.gpu.group_by("device").len().iter_rows()) == dict(Counter(gpu_pid[e["pid"]] for e in xs))
    a = analyze(t)
    comm = a.gpu_interned.filter(pl.col("category") == "Communication")
    assert comm.height == 36 and dict(comm.group_by("device").len().iter_rows()) == {0: 18, 1: 18}
    assert all("AllReduce" in str(n) for n in comm["name"].to_list())
    g = a.gpu_interned.with_columns((pl.col("ts") / 1e3).alias("s"), (pl.col("end") / 1e3).alias("e"))

    def union(rows: pl.DataFrame) -> float:
        return _union_us(list(zip(rows["s"].to_list(), rows["e"].to_list(), strict=True)))

    exposed = 0.0
    for _, part in g.group_by("device"):
        is_mem = part["kind"] == "memcpy"
        comp_comm = part.filter(~is_mem)
        comp = comp_comm.filter(pl.col("category") != "Communication")
        exposed += union(comp_comm) - union(comp)
    tl = {r["type"]: r["time_us"] for r in a.timeline.iter_rows(named=True)}
    assert tl["exposed_comm_time"] == pytest.approx(exposed, abs=0.01)
    assert tl["exposed_comm_time"] != pytest.approx(union(g.filter(pl.col("kind") != "memcpy")) - union(
        g.filter((pl.col("kind") != "memcpy") & (pl.col("category") != "Communication"))), abs=1.0)
    (note,) = [n for n in a.critical_path.notes if n.startswith("XLA records no event")]
    share = int(note.split("kernels ran ")[1].split("%")[0])
    assert 30 < share <= 100 and "busiest GPU" in note


def test_cuda_graph_trees_attribute_each_kernel_to_its_graph_launch():
    """Inductor's CUDA-graph trees replay the forward and the backward as graphs: every kernel of a graph shares its
    ``cudaGraphLaunch``'s correlation (counted from the raw JSON), is a graph launch's, and keeps the op around the
    launch (``CompiledFunction`` / ``CompiledFunctionBackward``, found in the raw JSON by nesting)."""
    ev = [e for e in _events(GRAPHS) if e.get("ph") == "X"]
    launches = [e for e in ev if e["name"] == "cudaGraphLaunch"]
    corr = {e["args"]["correlation"]: e for e in launches}
    in_graphs = [e for e in ev if e.get("cat") in GPU_CATS and e["args"].get("correlation") in corr]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]

    def op_of(launch: dict) -> str:
        around = [o for o in ops if o["tid"] == launch["tid"] and o["ts"] <= launch["ts"] and
                  o["ts"] + o["dur"] >= launch["ts"] + launch["dur"]]
        return min(around, key=lambda o: o["dur"])["name"]

    want = Counter(op_of(corr[e["args"]["correlation"]]) for e in in_graphs)
    assert want == {"CompiledFunction": 15, "CompiledFunctionBackward": 45}
    t = kernscope.load(GRAPHS, cache=False)
    g = t.gpu.filter(pl.col("graph_launch"))
    assert g.height == len(in_graphs) and set(g["launcher"].cast(pl.String)) == {"cudaGraphLaunch"}
    assert dict(g.group_by(pl.col("op_name").cast(pl.String)).len().iter_rows()) == want
    a = analyze(t)
    assert a.facts.graph_launches == len(launches) == 6
    assert a.facts.devices == [0] and a.timeline["type"].to_list()[3] == "busy_time"


def test_diff_counts_each_gpus_busy_time():
    """``diff``'s busy time is each GPU's union, summed: the pipeline's step 2 was busy 23.55 ms of device time (the
    union over both GPUs read 23.40 ms, the copies on one GPU hidden by kernels on the other)."""
    from kernscope.analyze.diff import Side, diff

    t = kernscope.load(MP, cache=False)
    d = diff(Side(t, 2), Side(t, 3))
    for side, step in (("a_busy_us", 2), ("b_busy_us", 3)):
        rows = t.gpu.filter(pl.col("step") == step)
        want = sum(_union_us(list(zip((part["ts"] / 1e3).to_list(), (part["end"] / 1e3).to_list(), strict=True)))
                   for _, part in rows.group_by("device"))
        assert d.total[side] == pytest.approx(want, abs=0.01)
    assert d.total["a_busy_us"] == pytest.approx(23547.2, abs=0.1)


def test_a_rank_with_two_gpus_reads_as_the_trace_does(tmp_path):
    """A job's rank with several GPUs (a JAX host's) counts device time as the one-trace timeline does: the same
    exposed communication, busy and idle time as ``analyze`` of that file (its summary took the union over the
    GPUs: 775 µs of exposed communication where each GPU's own add up to 2,759 µs), and its idle time split whole."""
    from kernscope.analyze.ranks import summarize_rank

    t = kernscope.load(DP, cache=False)
    r = summarize_rank(t, "host0.xplane.pb.gz")
    tl = {row["type"]: row["time_us"] for row in analyze(t).timeline.iter_rows(named=True)}
    o = r.overall
    assert o["exposed_comm_us"] == pytest.approx(tl["exposed_comm_time"], abs=0.01)
    assert o["busy_us"] == pytest.approx(tl["busy_time"], abs=0.01)
    assert o["idle_us"] == pytest.approx(tl["idle_time"], abs=0.01) and o["span_us"] == pytest.approx(tl["total_time"], abs=0.01)
    assert o["host_wait_us"] + o["kernel_wait_us"] + o["other_idle_us"] == pytest.approx(o["idle_us"], abs=0.01)
    for s in r.steps.iter_rows(named=True):
        assert s["host_wait_us"] + s["kernel_wait_us"] + s["other_idle_us"] == pytest.approx(s["idle_us"], abs=0.01)
        assert s["exposed_comm_us"] <= s["comm_us"] and 0 < s["busy_us"] < s["span_us"]


def test_memory_on_two_gpus_peaks_as_torch_counted_them(capsys):
    """``profile_memory=True`` around the two-GPU pipeline (``examples/record_profiler_options.py --which memory_mp``):
    each GPU's peak is ``torch.cuda.max_memory_allocated`` of that GPU, as the recording process read it
    (177,234,432 and 177,243,648 bytes); the CPU allocator's events (device -1) are shown as ``cpu``, not ``cpu:-1``."""
    from kernscope.analyze.memory import memory_timeline

    m = memory_timeline(kernscope.load(DATA / "memory_mp.pt.trace.json.gz", cache=False))
    assert m is not None
    peaks = {(r["device_type"], r["device"]): r["peak_allocated"] for r in m.devices.iter_rows(named=True)}
    assert peaks[("cuda", 0)] == 177_234_432 and peaks[("cuda", 1)] == 177_243_648
    assert main(["memory", str(DATA / "memory_mp.pt.trace.json.gz"), "--no-cache"]) == 0
    rows = [ln.split()[0] for ln in capsys.readouterr().out.split("Memory per device")[1].splitlines()[2:5]]
    assert rows == ["cpu", "cuda:0", "cuda:1"]


def test_the_pipelines_critical_path_runs_through_both_gpus():
    """Each step's path is the pipeline's chain: GPU 0's forward, its copy to GPU 1, GPU 1's forward and backward, the
    copy back and GPU 0's backward: ~23.4 ms of GPU time in a 24.1-24.2 ms step, ~60 µs of cross-GPU waits. It read
    11 ms of GPU time and 12.4 ms of 'stream wait' (GPU 0's backward waiting on its own forward's end)."""
    a = analyze(kernscope.load(MP, cache=False))
    cp = a.critical_path
    for r in cp.steps.iter_rows(named=True):
        assert r["gpu_us"] > 0.96 * r["length_us"] and r["stream_wait_us"] < 100.0
        names = cp.records.filter(pl.col("step") == r["step"])["name"].cast(pl.String).to_list()
        assert names.count("Memcpy PtoP (Device -> Device)") == 2
    kernels = a.gpu_interned.filter(pl.col("kind") == "kernel")
    assert cp.steps["gpu_us"].sum() > 0.98 * kernels.filter(pl.col("step").is_not_null())["dur"].sum() / 1e3


@pytest.mark.parametrize("path", [DP, DATA / "torch_dp.pt.trace.json.gz"], ids=["jax_dp", "torch_dp"])
def test_exposed_communication_is_found_per_gpu(path):
    """With two GPUs, ``exposed_comm`` names the GPU: each finding's time is that GPU's communication in the step that
    none of its own computation hid (checked against the rows), its share of the step's span of both GPUs' work.
    ``torch_dp``: ``torch.nn.DataParallel`` in one process (``record_multigpu_traces.py --which torch_dp``): NCCL
    broadcasts of the parameters and reductions of the gradients on both GPUs, 12 + 18 a GPU (counted in the JSON)."""
    a = analyze(kernscope.load(path, cache=False))
    found = a.findings.filter(pl.col("rule") == "exposed_comm")
    assert found.height >= 2 and found["device"].null_count() == 0
    if path.name.startswith("torch_dp"):
        raw = Counter(e["args"]["device"] for e in _events(path) if e.get("cat") == "kernel" and "nccl" in e["name"])
        comm = a.gpu_interned.filter(pl.col("category") == "Communication")
        assert raw == {0: 30, 1: 30} and dict(comm.group_by("device").len().iter_rows()) == raw
    every = a.gpu_interned.with_columns((pl.col("ts") / 1e3).alias("s"), (pl.col("end") / 1e3).alias("e"))
    g = every.filter(pl.col("kind") != "memcpy")  # (communication and computation: copies hide nothing)

    def union(rows: pl.DataFrame) -> float:
        return _union_us(list(zip(rows["s"].to_list(), rows["e"].to_list(), strict=True)))

    for f in found.iter_rows(named=True):
        rows = g.filter((pl.col("step") == f["step"]) & (pl.col("device") == f["device"]))
        want = union(rows) - union(rows.filter(pl.col("category") != "Communication"))
        assert f["win_back_us"] == pytest.approx(want, abs=0.01)
        assert f"step {f['step']}, GPU {f['device']}: " in f["text"]
        everyone = every.filter(pl.col("step") == f["step"])  # the step's span over both GPUs, copies included
        assert json.loads(f["evidence"])["span_us"] == pytest.approx(everyone["e"].max() - everyone["s"].min(), abs=0.01)


@pytest.mark.parametrize("path", [MP, DP], ids=["torch_mp", "jax_dp"])
def test_one_step_finds_what_the_whole_trace_finds_in_it(path):
    """``analyze --step N`` of a two-GPU trace finds what the whole analysis finds in step N, to the last bit of the
    time won back (the blocking-sync total of a step read 18,753.224 µs alone and 18,753.224000000002 µs in the whole:
    polars' grouped division)."""
    t = kernscope.load(path, cache=False)
    whole = analyze(t).findings
    for s in t.steps["step"].to_list():
        one = analyze(t, step=s).findings
        assert one.drop("evidence").equals(whole.filter(pl.col("step") == s).drop("evidence")), s


def test_a_copy_between_two_gpus_is_bound_by_the_link():
    """The perf model rated the pipeline's peer-to-peer copies (``Memcpy PtoP``, 380 GB/s over NVLink) against the
    H200's HBM, mixed in one row with the copies inside one GPU (21.7% of peak). They are now a row of their own,
    bound by the link, with no % of peak (the peaks table knows no link bandwidth); the copies inside GPU 1 keep the
    memory roof (77%)."""
    from kernscope.analyze.perf import perf_model

    raw = [e for e in _events(MP) if e.get("cat") == "gpu_memcpy"]
    peer = [e for e in raw if e["name"].startswith("Memcpy PtoP")]
    ops = perf_model(kernscope.load(MP, cache=False)).ops.filter(pl.col("name") == "aten::copy_")
    link = ops.filter(pl.col("bound") == "link")
    assert link.height == 1 and link["count"][0] == len(peer) == 6
    assert link["kernel_time_us"][0] == pytest.approx(sum(e["dur"] for e in peer), abs=0.01)
    assert link["pct_of_peak"][0] is None and link["peak_tb_per_s"][0] is None
    local = ops.filter(pl.col("bound") == "memory")
    assert local["count"].to_list() == [len(raw) - len(peer)] and 70 < local["pct_of_peak"][0] < 85


def test_launch_bound_says_whether_the_queue_was_short_or_ran_dry_between_bursts():
    """``launch_bound`` said "(a short launch queue)" whatever the launch lead: DataParallel's replica threads launch
    in bursts, a median 605 µs ahead, and the GPUs still idle 60% of a step between bursts. Over ``short_lead_us``
    (100 µs) it says the queue ran dry between bursts; the bundled GPT step's 8.7 µs lead stays a short queue."""
    from kernscope.analyze.findings import FindingRules

    assert FindingRules.builtin().rules["launch_bound"]["short_lead_us"] == 100.0
    dp = analyze(kernscope.load(DATA / "torch_dp.pt.trace.json.gz", cache=False)).findings.filter(pl.col("rule") == "launch_bound")
    assert dp.height and all(json.loads(e)["median_lead_us"] > 100 for e in dp["evidence"])
    assert all("(the queue ran dry between bursts of launches); the longest gap" in t for t in dp["text"])
    example = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    gpt = analyze(kernscope.load(example, cache=False)).findings.filter(pl.col("rule") == "launch_bound")
    assert gpt.height and all("(a short launch queue); the longest gap" in t for t in gpt["text"])
