"""Findings (issue #29, item 3): ranked by time to win back, each naming where and how much; rules are data.

Real traces: the bundled H200 GPT step (launch-bound: 5-6 µs kernels), the 4-rank DDP job with an injected
straggler (``../shared/traces/multirank``, skipped when absent); synthetic steps for each rule's edge.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import TRACES, write_trace

import kernscope
from kernscope.analyze.findings import FindingRules, find_roofline, find_stragglers
from kernscope.analyze.summary import analyze
from kernscope.cli import main
from kernscope.errors import KernscopeError
from kernscope.testing.synth import queued_start_trace

EXAMPLE = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
DDP = sorted((TRACES / "multirank").glob("ddp4_rank*.json.gz")) if (TRACES / "multirank").is_dir() else []


def _host_wait_us(gpu: pl.DataFrame) -> float:
    """GPU idle before records launched after the GPU ran dry, by a plain loop (the test's own arithmetic)."""
    rows = sorted(gpu.select("ts", "end", "launch_ts").iter_rows(), key=lambda r: r[0])
    busy_until, wait = rows[0][1], 0
    for ts, end, launch in rows[1:]:
        if ts > busy_until and launch is not None and launch > busy_until:
            wait += ts - busy_until
        busy_until = max(busy_until, end)
    return wait / 1000.0


def _longest_host_wait(gpu: pl.DataFrame) -> tuple[float, float, str | None]:
    """The longest of those gaps by the same loop: (its µs, its start from the first record's start in µs, the op that
    launched the record after it)."""
    rows = sorted(gpu.select("ts", "end", "launch_ts", pl.col("launcher").cast(pl.String)).iter_rows(), key=lambda r: r[0])
    busy_until, best = rows[0][1], (0, 0, None)
    for ts, end, launch, op in rows[1:]:
        if ts > busy_until and launch is not None and launch > busy_until and ts - busy_until > best[0]:
            best = (ts - busy_until, busy_until - rows[0][0], op)
        busy_until = max(busy_until, end)
    return best[0] / 1000.0, best[1] / 1000.0, best[2]


def test_bundled_trace_is_launch_bound_with_the_measured_wait():
    a = analyze(kernscope.load(EXAMPLE, cache=False))
    f = a.findings
    assert f["rule"][0] == "launch_bound" and f["win_back_us"].is_sorted(descending=True)
    for r in f.filter(pl.col("rule") == "launch_bound").iter_rows(named=True):
        g = a.gpu.filter((pl.col("step") == r["step"]) & (pl.col("device") == r["device"]))
        assert r["win_back_us"] == pytest.approx(_host_wait_us(g), abs=0.01)
        ev = json.loads(r["evidence"])
        assert ev["kernels"] == g.filter(pl.col("kind") == "kernel").height and ev["median_kernel_us"] < 10
        # the medians of the evidence, of this step's and device's records (made for the findings only)
        durs = sorted(g.filter(pl.col("kind") == "kernel")["dur"].to_list())
        leads = sorted((g["ts"] - g["launch_ts"]).drop_nulls().to_list())
        assert ev["median_kernel_us"] == pytest.approx(float(np.median(durs)) / 1000)
        assert ev["median_lead_us"] == pytest.approx(float(np.median(leads)) / 1000) and ev["median_lead_us"] > 0
        assert f"step {r['step']}, GPU {r['device']}" in r["text"]
        # where the host was the longest behind: that gap, where it began and the op after it
        gap_us, at_us, op = _longest_host_wait(g)
        assert ev["longest_gap_us"] == pytest.approx(gap_us) and ev["longest_gap_at_us"] == pytest.approx(at_us)
        assert ev["longest_gap_op"] == op and f"the longest gap {gap_us:,.0f} µs" in r["text"]
    sync = f.filter(pl.col("rule") == "blocking_sync")
    assert sync.height and set(sync["op"]) == {"aten::_local_scalar_dense"}  # loss.item() in each step
    assert all("call(s) from aten::_local_scalar_dense blocked" in t for t in sync["text"])


@pytest.mark.skipif(len(DDP) != 4, reason="../shared/traces/multirank not present")
def test_launch_bound_names_the_injected_sleep_as_its_longest_gap():
    """DDP rank 2 sleeps 8 ms on the host before its backward in every step: its launch_bound findings say so, the
    longest gap 8.2-8.3 ms before the backward's first kernel (aten::fill_ of the loss's gradient), where they only
    counted the step's 65-75 gaps."""
    f = analyze(kernscope.load(DDP[2], cache=False)).findings.filter(pl.col("rule") == "launch_bound")
    assert f["step"].sort().to_list() == [2, 3, 4, 5]
    for r in f.iter_rows(named=True):
        ev = json.loads(r["evidence"])
        assert 8_000 < ev["longest_gap_us"] < 8_500 and ev["longest_gap_op"] == "aten::fill_"
        assert "before GPU work launched by aten::fill_" in r["text"]


def test_launch_bound_counts_the_gpus_idle_not_the_steps(tmp_path):
    """Step 2's two kernels lie 790 µs apart, the second launched after the first ended, but step 1's long kernel ran
    on another stream until 490 µs before the second began: the GPU waited 310 µs for the launch, not 790 µs (HTA's
    A100 Triton rank read 157 ms of idle in steps whose gaps ran the step before's work, its V100 pair 19-24 ms)."""
    def k(name, corr, launch, ts, dur, stream):
        return [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": launch, "dur": 3.0,
                 "args": {"correlation": corr}},
                {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                 "args": {"correlation": corr, "device": 0, "stream": stream}}]
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1000.0},
          {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 1000.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5.0, "dur": 10.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1001.0, "dur": 10.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 1795.0, "dur": 10.0},
          *k("long_kernel", 1, 10.0, 20.0, 1480.0, 7), *k("add_kernel", 2, 1005.0, 1010.0, 10.0, 8),
          *k("relu_kernel", 3, 1800.0, 1810.0, 10.0, 8)]
    p = tmp_path / "behind.json"
    write_trace(p, ev)
    f = analyze(kernscope.load(p, cache=False)).findings.filter(pl.col("rule") == "launch_bound")
    assert f.height == 1 and f["step"][0] == 2
    r = f.row(0, named=True)
    ev_ = json.loads(r["evidence"])
    assert r["win_back_us"] == pytest.approx(310.0) and ev_["gaps"] == 1
    assert ev_["longest_gap_us"] == pytest.approx(310.0) and ev_["longest_gap_op"] == "aten::relu"
    assert ev_["longest_gap_at_us"] == pytest.approx(490.0)  # from step 2's first kernel's start (1010 µs) to 1500 µs
    assert r["text"].endswith("before GPU work launched by aten::relu")
    # launched outside every CPU op: the launch call is the launcher, as in every table
    write_trace(p, [e for e in ev if e["name"] != "aten::relu"])
    r = analyze(kernscope.load(p, cache=False)).findings.filter(pl.col("rule") == "launch_bound").row(0, named=True)
    assert json.loads(r["evidence"])["longest_gap_op"] == "cudaLaunchKernel"
    assert r["text"].endswith("before GPU work launched by cudaLaunchKernel")


def test_a_sync_outside_every_op_has_no_op_and_says_so():
    """The recorded DDP rank's torch.cuda.synchronize() runs outside every CPU op: the finding's op and its evidence's
    are null, as every table's op where there is none (they were the text '(no CPU op)', its text read
    'call(s) from (no CPU op)')."""
    rank0 = Path(__file__).parent / "data" / "ddp2_h200" / "rank0.pt.trace.json.gz"
    sync = analyze(kernscope.load(rank0, cache=False)).findings.filter(pl.col("rule") == "blocking_sync")
    assert sync["step"].sort().to_list() == [2, 3, 4] and sync["op"].null_count() == 3
    assert all(json.loads(e)["op"] is None and json.loads(e)["call"] == "cudaDeviceSynchronize" for e in sync["evidence"])
    assert all("1 cudaDeviceSynchronize call(s) outside any CPU op blocked the CPU" in t for t in sync["text"])


def _launch_bound_step(path: Path, n: int = 3000) -> None:
    """One step of ``n`` 2 µs kernels, each launched 8 µs after the previous one (the CPU is the bottleneck)."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": n * 8.0 + 50},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.0, "dur": n * 8.0 + 40}]
    for i in range(n):
        t = 2.0 + 8.0 * i
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t, "dur": 3.0,
                   "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": t + 4.0,
                   "dur": 2.0, "args": {"correlation": i + 1, "device": 0, "stream": 7}})
    write_trace(path, ev)


def test_thousands_of_tiny_kernels_rank_launch_bound_first(tmp_path):
    p = tmp_path / "lb.json"
    _launch_bound_step(p)
    f = analyze(kernscope.load(p, cache=False)).findings
    top = f.row(0, named=True)
    assert top["rule"] == "launch_bound" and top["step"] == 1
    assert top["win_back_us"] == pytest.approx(2999 * 6.0, rel=1e-6)  # 6 µs idle before each later kernel
    assert json.loads(top["evidence"])["share_pct"] == pytest.approx(100 * 2999 * 6 / (2999 * 8 + 2), rel=1e-4)


def _steps_trace(path: Path, durations_us: list[float], *, sync_us: float = 0.0, comm_us: float = 0.0,
                 gemms: int = 0, split_k: bool = False) -> None:
    ev, t, corr = [], 0.0, 0
    for k, d in enumerate(durations_us):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1, "ts": t, "dur": d})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 1, "dur": d - 2})
        gpu_t = t + 5
        tiny = [("ampere_sgemm_32x32_sliced1x4_nn", 3.0)] + ([("void cublasLt::splitKreduce_kernel<32, 16, int, float>", 1.5)]
                                                              if split_k else [])
        kernels = tiny * gemms + [("ampere_sgemm_128x64_nn", 40.0)]
        if comm_us:
            kernels.append(("ncclDevKernel_AllReduce_Sum_f32_RING_LL", comm_us))
        for name, dur in kernels:
            corr += 1
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2,
                       "dur": 1.0, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": gpu_t, "dur": dur,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
            gpu_t += dur
        if sync_us:
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": t + d - 3 - sync_us,
                       "dur": sync_us + 1})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1,
                       "ts": t + d - 2.5 - sync_us, "dur": sync_us})
        t += d + 1
    write_trace(path, ev)


def test_slow_step_sync_comm_and_tiny_gemms_are_named(tmp_path):
    p = tmp_path / "s.json"
    _steps_trace(p, [1000.0, 1000.0, 1000.0, 1500.0], sync_us=300.0, comm_us=200.0, gemms=40)
    f = analyze(kernscope.load(p, cache=False)).findings
    slow = f.filter(pl.col("rule") == "step_variance")
    assert slow["step"].to_list() == [3] and slow["win_back_us"][0] == pytest.approx(500.0)
    sync = f.filter(pl.col("rule") == "blocking_sync")
    assert sync.height == 4 and set(sync["op"]) == {"aten::item"} and sync["win_back_us"].to_list() == [300.0] * 4
    comm = f.filter(pl.col("rule") == "exposed_comm")
    assert comm.height == 4 and comm["win_back_us"].to_list() == pytest.approx([200.0] * 4)
    tiny = f.filter(pl.col("rule") == "tiny_gemm")
    assert tiny.height == 4 and set(tiny["kernel"]) == {"ampere_sgemm_32x32_sliced1x4_nn"}
    assert tiny["win_back_us"].to_list() == pytest.approx([40 * 2.0] * 4)  # 40 calls x the assumed 2 µs each
    one = analyze(kernscope.load(p, cache=False), step=3).findings
    assert set(one["step"]) == {3}  # --step: that step's findings only


def test_a_split_k_gemms_reduce_kernel_is_not_a_tiny_gemm_of_its_own(tmp_path):
    """Each tiny GEMM followed by cuBLASLt's split-K reduce (one per GEMM, categorized GEMM): the GEMMs are one finding
    per step, the reduce kernels none (a Hugging Face generate listed 124 reduces beside their 124 GEMMs)."""
    p = tmp_path / "k.json"
    _steps_trace(p, [1000.0, 1000.0, 1000.0], gemms=40, split_k=True)
    tiny = analyze(kernscope.load(p, cache=False)).findings.filter(pl.col("rule") == "tiny_gemm")
    assert tiny.height == 3 and set(tiny["kernel"]) == {"ampere_sgemm_32x32_sliced1x4_nn"}


def test_a_gpu_busy_with_work_in_no_step_is_not_idle_at_the_step_start(tmp_path):
    """The GPU runs a record that is in no step (no launch in the trace: unlinked) from the step's start, and the
    step's first kernel queues behind it: no ``step_start_idle`` (a real ROCm trace's first step read 30,082 µs "idle",
    179% of the step, behind 968 such records). Without that record the same step's kernel is queued behind nothing
    the trace holds."""
    def trace(with_busy: bool) -> Path:
        ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 3000.0},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
               "args": {"correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2000.0, "dur": 500.0,
               "args": {"correlation": 1, "device": 0, "stream": 7}}]
        if with_busy:
            ev.append({"ph": "X", "cat": "kernel", "name": "earlier", "pid": 0, "tid": 7, "ts": 5.0, "dur": 1995.0,
                       "args": {"correlation": 99, "device": 0, "stream": 7}})
        return write_trace(tmp_path / f"busy{with_busy}.json", ev)

    # (without it the kernel, launched at 10 µs, waits from its launch's return at 15 µs with nothing before it:
    # step_start_queued, the host's 15 µs no finding; since session 67, step_start_idle of 2,000 µs before)
    idle = analyze(kernscope.load(trace(False), cache=False)).findings.filter(pl.col("rule").str.starts_with("step_start"))
    assert idle["rule"].to_list() == ["step_start_queued"] and idle["win_back_us"].to_list() == pytest.approx([1985.0])
    t = kernscope.load(trace(True), cache=False)
    assert t.gpu.filter(pl.col("name") == "earlier")["step"].to_list() == [None]
    assert analyze(t).findings.filter(pl.col("rule").str.starts_with("step_start")).height == 0


def _queued_step(tmp_path, launch_dur: float, start: float, name: str) -> pl.DataFrame:
    """The idle-start findings of a step (0-3,000 µs) on one GPU whose one kernel, launched at 200 µs by a call of
    ``launch_dur`` µs, starts at ``start`` µs: nothing else in the trace."""
    queued_start_trace(tmp_path / name, launch_us=200.0, launch_dur_us=launch_dur, start_us=start)
    f = analyze(kernscope.load(tmp_path / name, cache=False)).findings
    return f.filter(pl.col("rule").str.starts_with("step_start")).sort("rule")


def test_a_first_kernel_queued_behind_nothing_the_trace_holds_is_not_the_hosts_idle(tmp_path):
    """The step's first kernel was launched at 200 µs (a 5 µs call) and ran at 2,000 µs, with nothing in the trace on
    any GPU before it: ``step_start_idle`` is the host's 205 µs to the call's return, and the 1,795 µs after it are
    ``step_start_queued`` (work from before the trace, or clocks apart), not "CPU work or data loading before the
    first launch" (TraceLens's ROCm vLLM decode trace read 8,371 µs, 348% of its step, so)."""
    f = _queued_step(tmp_path, 5.0, 2000.0, "queued.json")
    assert f["rule"].to_list() == ["step_start_idle", "step_start_queued"]
    idle, queued = (json.loads(e) for e in f["evidence"])
    assert idle["idle_us"] == pytest.approx(205.0) and f["win_back_us"][0] == pytest.approx(205.0)
    assert "until the call that launched its first GPU work returned" in f["text"][0]
    assert (queued["wait_us"], queued["launched_us"], queued["returned_us"]) == pytest.approx((1795.0, 200.0, 205.0))
    assert queued["share_pct"] == pytest.approx(100 * 1795 / 3000) and f["win_back_us"][1] == pytest.approx(1795.0)
    assert "clocks are apart" in f["text"][1] and f["title"][1] != f["title"][0]


@pytest.mark.parametrize("launch_dur,start,idle_us", [(1795.0, 2000.0, 2000.0), (5.0, 290.0, 290.0), (5.0, 120.0, None)])
def test_a_launch_that_ran_as_its_call_returned_or_soon_after_stays_the_hosts_idle(tmp_path, launch_dur, start, idle_us):
    """A first kernel that starts as its launch call returns (a slow call: a JAX step's first cuGraphLaunch took
    100-190 µs on an H200), or under 100 µs after, is ``step_start_idle`` to its start, as before session 67; no
    ``step_start_queued``. A step whose kernel starts at 120 µs has no idle-start finding (4% of the step, under 5%)."""
    f = _queued_step(tmp_path, launch_dur, start, f"slow{start}.json")
    assert "step_start_queued" not in f["rule"].to_list()
    if idle_us is None:
        assert f.height == 0
    else:
        assert f["rule"].to_list() == ["step_start_idle"] and json.loads(f["evidence"][0])["idle_us"] == pytest.approx(idle_us)
        assert "to its first GPU work" in f["text"][0]


def test_the_critical_path_says_its_launch_time_holds_the_queued_wait(tmp_path):
    """A queued kernel (1,500 µs) that ends after its step: the step's path is its call (200 µs of host), ``launch``
    from the call's start to the kernel's (1,800 µs) and the kernel; the path's note says 1,795 µs of that launch time
    is the wait ``step_start_queued`` names, not the launch's cost. Where the kernel ran as its call returned, no note."""
    queued_start_trace(tmp_path / "q.json", kernel_us=1500.0)
    a = analyze(kernscope.load(tmp_path / "q.json", cache=False))
    assert a.critical_path is not None
    assert a.critical_path.steps.select("cpu_us", "launch_us", "gpu_us").row(0) == pytest.approx((200.0, 1800.0, 1500.0))
    (note,) = [n for n in a.critical_path.notes if "step_start_queued" in n]
    assert note.startswith("1,795 µs of the launch time of step(s) 1 ")
    queued_start_trace(tmp_path / "slow.json", launch_dur_us=1795.0, kernel_us=1500.0)
    b = analyze(kernscope.load(tmp_path / "slow.json", cache=False))
    assert b.critical_path is not None and not [n for n in b.critical_path.notes if "step_start_queued" in n]


def test_a_queued_threshold_below_the_idle_ones_is_read(tmp_path):
    """``step_start_queued``'s own ``min_us`` decides, even below ``step_start_idle``'s and ``step_start_wait``'s: a
    kernel launched at 20 µs (a 5 µs call) that starts at 90 µs waited 65 µs, a finding at ``min_us = 50``, though
    the step's whole idle start (90 µs) is under the other rules' 100 µs, which alone chose the steps read."""
    (tmp_path / "low.toml").write_text("[step_start_queued]\nmin_us = 50.0\nmin_share_pct = 1.0\n")
    queued_start_trace(tmp_path / "low.json", launch_us=20.0, launch_dur_us=5.0, start_us=90.0)
    t = kernscope.load(tmp_path / "low.json", cache=False)
    f = analyze(t, finding_rules=FindingRules.load(tmp_path / "low.toml")).findings
    assert f.filter(pl.col("rule").str.starts_with("step_start"))["rule"].to_list() == ["step_start_queued"]
    assert json.loads(f.filter(pl.col("rule") == "step_start_queued")["evidence"][0])["wait_us"] == pytest.approx(65.0)
    assert analyze(t).findings.filter(pl.col("rule").str.starts_with("step_start")).height == 0  # (the defaults: none)


@pytest.mark.skipif(not (TRACES / "tracelens" / "rocm_vllm_decode_full_hipgraph.json.gz").exists(),
                    reason="../shared/traces/tracelens not present")
def test_rocm_vllm_decodes_first_copy_queued_behind_nothing_against_the_raw_json():
    """TraceLens's ROCm vLLM decode trace (one step: the 2.41 ms ``execute_...`` annotation) ran its first record, a
    copy launched 534 µs into the step, 8,371 µs after the step's start with no GPU record before it: the finding's
    times, from the raw JSON, are the host's to the launch call's return and the queue after it."""
    import gzip

    path = TRACES / "tracelens" / "rocm_vllm_decode_full_hipgraph.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    step = next(e for e in raw if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("execute_"))
    gpu = sorted((e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), key=lambda e: e["ts"])
    first = gpu[0]
    call = next(e for e in raw if e.get("cat") == "cuda_runtime" and e.get("ph") == "X"
                and e.get("args", {}).get("correlation") == first["args"]["correlation"])
    a = analyze(kernscope.load(path, cache=False))
    f = a.findings.filter(pl.col("rule").str.starts_with("step_start")).sort("rule")
    assert f["rule"].to_list() == ["step_start_idle", "step_start_queued"]
    idle, queued = (json.loads(e) for e in f["evidence"])
    returned = call["ts"] + call["dur"]
    assert idle["idle_us"] == pytest.approx(returned - step["ts"], abs=1e-3)
    assert queued["wait_us"] == pytest.approx(first["ts"] - returned, abs=1e-3)
    assert queued["launched_us"] == pytest.approx(call["ts"] - step["ts"], abs=1e-3)
    assert 500 < idle["idle_us"] < 600 and 7800 < queued["wait_us"] < 7900
    cp = a.critical_path
    assert cp is not None and any(n.startswith(f"{queued['wait_us']:,.0f} µs of the launch time of step(s) 0 ") for n in cp.notes)


def _idle_start_host(tmp_path, host: list[dict], name: str) -> dict:
    """The evidence of ``step_start_idle`` on a step (0-3,000 µs) whose one kernel runs at 2,000 µs, launched at
    1,900 µs on thread 1 after the host events ``host`` of that thread."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 3000.0},
          *({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, **e} for e in host),
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1900.0, "dur": 5.0,
           "args": {"correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 2000.0, "dur": 500.0,
           "args": {"correlation": 1, "device": 0, "stream": 7}}]
    f = analyze(kernscope.load(write_trace(tmp_path / name, ev), cache=False)).findings
    (row,) = f.filter(pl.col("rule") == "step_start_idle").iter_rows(named=True)
    return json.loads(row["evidence"])


@pytest.mark.parametrize("order", list(itertools.permutations(["detach", "aten::detach", "zeta"])))
def test_an_idle_starts_host_event_of_one_span_is_named_by_text_order(tmp_path, order):
    """Three host events with one span hold the idle start: the finding names the first in text order, whatever the
    file's order (it took the first of an unstable sort); a longer event overlapping less is not chosen, nor the step's
    own annotation, which holds all of it."""
    ev = [{"name": n, "ts": 100.0, "dur": 1500.0} for n in order] + [{"name": "long", "ts": 1500.0, "dur": 1000.0}]
    e = _idle_start_host(tmp_path, ev, "".join(order) + ".json")
    assert (e["host_op"], e["host_op_us"]) == ("aten::detach", pytest.approx(1500.0))


def test_an_idle_starts_annotation_names_it_before_the_op_of_its_span(tmp_path):
    """A user annotation with the span of a CPU op (the user's range around it) is named, not the op; of two ops
    overlapping the idle start equally the longer (the outer one) is named."""
    e = _idle_start_host(tmp_path, [{"name": "aten::mm", "ts": 100.0, "dur": 1500.0},
                                    {"name": "my_range", "ts": 100.0, "dur": 1500.0, "cat": "user_annotation"}], "ann.json")
    assert e["host_op"] == "my_range"
    e = _idle_start_host(tmp_path, [{"name": "inner", "ts": 1000.0, "dur": 1000.0},
                                    {"name": "outer", "ts": 1000.0, "dur": 1500.0}], "outer.json")
    assert (e["host_op"], e["host_op_us"]) == ("outer", pytest.approx(1000.0))


@pytest.mark.skipif(not DDP, reason="../shared/traces/multirank not present")
def test_one_step_has_the_findings_that_step_has_in_the_whole_trace():
    """``analyze --step N`` finds what the whole trace's analysis finds in step N: the GPU busy at step 2's start with
    step 1's work is not idle there (with step 2's rows alone it read 7,217 µs idle on the DDP job's rank 0)."""
    t = kernscope.load(DDP[0], cache=False)
    whole = analyze(t).findings
    for s in t.steps["step"].to_list():
        one = analyze(t, step=s).findings
        assert one.drop("evidence").equals(whole.filter(pl.col("step") == s).drop("evidence")), s
    assert not whole.filter((pl.col("step") == 2) & (pl.col("rule") == "step_start_idle")).height


def test_rules_are_data_a_user_file_moves_thresholds_and_bad_files_are_one_line(tmp_path, capsys):
    p = tmp_path / "lb.json"
    _launch_bound_step(p, 200)
    strict = tmp_path / "strict.toml"
    strict.write_text("[launch_bound]\nmin_share_pct = 99\n")
    assert main(["analyze", str(p), "--format", "json", "--no-cache", "--findings", str(strict)]) == 0
    assert [x["rule"] for x in json.loads(capsys.readouterr().out)["findings"]] == []
    assert main(["analyze", str(p), "--format", "json", "--no-cache"]) == 0
    assert [x["rule"] for x in json.loads(capsys.readouterr().out)["findings"]] == ["launch_bound"]
    for text, says in (("[nope]\nx = 1\n", "unknown findings rule [nope]"), ("[launch_bound]\nmin_us = 'a'\n", "must be float"),
                       ("[launch_bound]\nfoo = 1\n", "has no key 'foo'"), ("[launch_bound\n", "not valid TOML"),
                       # (a text naming a value the rule's findings do not have: found while the rule runs, on one of
                       # the analysis's threads)
                       ('[launch_bound]\ntext = "x {nope}"\n', "[launch_bound]: its text cannot be written (KeyError: 'nope')")):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        assert main(["analyze", str(p), "--findings", str(bad), "--no-cache"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0] and "bad.toml" in err[0]
    wording = tmp_path / "w.toml"
    wording.write_text('[launch_bound]\ntext = "GPU {device} starved {wait_us:.0f} us in step {step}"\n')
    assert FindingRules.load(wording).rules["launch_bound"]["text"].startswith("GPU {device}")
    assert main(["analyze", str(p), "--no-cache", "--findings", str(wording)]) == 0
    assert "GPU 0 starved" in capsys.readouterr().out


def test_terminal_html_and_sheets_show_the_findings(tmp_path, capsys):
    assert main(["analyze", str(EXAMPLE), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "Findings, by time to win back" in out and "1. up to" in out and "[launch_bound]" in out
    html = tmp_path / "r.html"
    assert main(["report", str(EXAMPLE), "-o", str(html), "-q", "--no-cache"]) == 0
    data = json.loads(html.read_text().split('id="ks-data">', 1)[1].split("</script>", 1)[0])
    assert [f["rule"] for f in data["headline"]["findings"]][:1] == ["launch_bound"]
    assert main(["report", str(EXAMPLE), "-o", str(tmp_path / "csv"), "-q", "--no-cache"]) == 0
    assert (tmp_path / "csv" / "findings.csv").read_text().startswith("rule,")


@pytest.mark.skipif(len(DDP) != 4, reason="../shared/traces/multirank not present")
def test_ddp_job_names_the_injected_straggler_first_in_every_step(capsys):
    assert main(["analyze", *map(str, DDP), "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    f = doc["findings"]
    assert f[0]["rule"] == "straggler" and f[0]["rank"] == 2
    per_step: dict = {}
    for x in f:
        per_step.setdefault(x["step"], x)  # ranked: the first finding of each step
    assert set(per_step) == {2, 3, 4, 5} and all(x["rank"] == 2 for x in per_step.values())
    assert all(x["win_back_us"] > 10_000 for x in per_step.values())  # rank 2 sleeps 8 ms; the others wait longer


def test_straggler_threshold_from_rules():
    s = pl.DataFrame({"step_number": [1], "rank": [3], "wait_us": [40.0], "max_wait_us": [60.0], "collectives": [2],
                      "last_in": [2]})
    assert find_stragglers(s).height == 0  # under the 50 µs default
    assert find_stragglers(s.with_columns(pl.lit(80.0).alias("wait_us")))["rank"].to_list() == [3]
    with pytest.raises(KernscopeError):
        FindingRules.load("/nonexistent/rules.toml")
    assert np.isfinite(FindingRules.builtin().rules["tiny_gemm"]["saving_per_kernel_us"])


def test_a_rule_text_that_cannot_be_written_names_the_rules_file(tmp_path):
    """A user's text naming a value the rule's findings do not have fails when a finding is written: the error names
    the rules file and the rule (straggler and far_from_roofline findings are made outside ``find``)."""
    bad = tmp_path / "words.toml"
    bad.write_text('[straggler]\ntext = "rank {rank} {nope}"\n[far_from_roofline]\ntext = "{op} {nope}"\n')
    rules = FindingRules.load(bad)
    s = pl.DataFrame({"step_number": [1], "rank": [3], "wait_us": [80.0], "max_wait_us": [90.0], "collectives": [2],
                      "last_in": [2]})
    with pytest.raises(KernscopeError, match=r"words\.toml: findings rule \[straggler\]: its text cannot be written"):
        find_stragglers(s, rules=rules)
    assert find_stragglers(s.with_columns(pl.lit(10.0).alias("wait_us")), rules=rules).height == 0  # (no finding)
    ops = pl.DataFrame({"name": ["aten::mm"], "dtype": ["bf16"], "count": [4], "kernel_time_us": [100.0],
                        "pct_of_peak": [5.0], "bound": ["compute"], "tflops_per_s": [1.0], "tb_per_s": [0.1]})
    with pytest.raises(KernscopeError, match=r"words\.toml: findings rule \[far_from_roofline\]"):
        find_roofline(ops, 2, rules=rules)
    assert find_roofline(ops, 2).height == 1  # (the built-in text)


def test_recompile_inside_a_step_on_a_real_torch_compile_trace():
    """tests/data/recompile_h100: torch.compile(dynamic=False) on an H100, step 2 with a new batch size
    (examples/record_recompile_traces.py): Dynamo and Inductor compile again inside step 2."""
    p = Path(__file__).parent / "data" / "recompile_h100" / "torch_compile_recompile.pt.trace.json.gz"
    raw = json.loads(__import__("gzip").decompress(p.read_bytes()))["traceEvents"]
    spans = [e for e in raw if e.get("ph") == "X" and e.get("name") in ("entire_frame_compile", "entire_backward_compile")]
    f = analyze(kernscope.load(p, cache=False)).findings
    r = f.filter(pl.col("rule") == "recompile")
    assert r["step"].to_list() == [2]
    ev = json.loads(r["evidence"][0])
    assert ev["compile_us"] == pytest.approx(sum(e["dur"] for e in spans), abs=0.01)
    assert ev["ids"] == "0/1" and "1 entire_frame_compile" in ev["spans"] and "1 entire_backward_compile" in ev["spans"]
    assert set(f.filter(pl.col("rule") == "step_variance")["step"]) >= {2}  # the slow step it explains
    # JAX on the same H100: jit(f) called with a new shape in step 2 of 4 (StepTraceAnnotation)
    jp = p.parent / "jax_recompile.xplane.pb.gz"
    t = kernscope.load(jp, cache=False)
    j = analyze(t).findings.filter(pl.col("rule") == "recompile")
    assert j["step"].to_list() == [2]
    s2 = t.steps.filter(pl.col("step") == 2).row(0, named=True)
    pjrt = t.events.filter((pl.col("name").cast(pl.String) == "PJRT_Client_Compile") & (pl.col("ts") >= s2["start"])
                           & (pl.col("ts") < s2["end"]))
    assert pjrt.height == 2 and j["win_back_us"][0] == pytest.approx(pjrt["dur"].sum() / 1000, abs=0.01)
    assert "torch.compile" not in j["text"][0]


def test_low_occupancy_flags_non_gemm_kernels_only(tmp_path, capsys):
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1000.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.0, "dur": 900.0}]
    kernels = [("vectorized_elementwise_kernel", 8, 600.0), ("ampere_sgemm_128x64_nn", 8, 300.0), ("reduce_kernel", 90, 100.0)]
    t = 5.0
    for i, (name, occ, dur) in enumerate(kernels):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2.0 + i, "dur": 1.0,
                   "args": {"correlation": i + 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t, "dur": dur,
                   "args": {"correlation": i + 1, "device": 0, "stream": 7, "est. achieved occupancy %": occ,
                            "registers per thread": 32}})
        t += dur
    p = tmp_path / "occ.json"
    write_trace(p, ev)
    f = analyze(kernscope.load(p, cache=False)).findings.filter(pl.col("rule") == "low_occupancy")
    assert f["kernel"].to_list() == ["vectorized_elementwise_kernel"]  # the GEMM runs one big block per SM by design
    assert f["win_back_us"][0] == pytest.approx(600.0 * 0.2)
    ev0 = json.loads(f["evidence"][0])
    assert ev0["occupancy_pct"] == 8 and ev0["registers"] == 32 and ev0["share_pct"] == pytest.approx(60.0)
    assert main(["analyze", str(p), "--format", "json", "--no-cache"]) == 0  # the CLI's projected load keeps the args
    assert [x["kernel"] for x in json.loads(capsys.readouterr().out)["findings"] if x["rule"] == "low_occupancy"] == [
        "vectorized_elementwise_kernel"]


@pytest.mark.parametrize("seed", range(4))
def test_low_occupancy_finds_what_it_found_without_its_prefilters(seed, monkeypatch):
    """The groups that cannot hold ``min_share_pct`` of their step are dropped before the grouping
    (``_may_hold_share``), and only the groups with a kernel at most the occupancy bound are read (``_groups_at_most``):
    the findings are those of the grouping of every rated kernel, on random steps, names, nulls and categories, for a
    kernel at exactly the share bound (kept: the bound is ``>=``), and for a group with one kernel under the occupancy
    bound whose duration-weighted occupancy is over it (not flagged)."""
    from kernscope.analyze import findings

    rng = np.random.default_rng(seed)
    n = 4000
    gpu = pl.DataFrame({
        "step": rng.integers(0, 25, n), "kind": rng.choice(["kernel", "memcpy"], n, p=[0.9, 0.1]),
        "name": rng.choice([f"k{i}" for i in range(14)], n), "category": rng.choice(["Elementwise", "GEMM"], n),
        "dur": rng.integers(1, 2000, n), "occupancy_pct": rng.uniform(0, 32, n), "registers": rng.integers(16, 128, n),
    }).with_columns(pl.when(pl.lit(pl.Series(rng.random(n) < 0.1))).then(None).otherwise(pl.col("occupancy_pct"))
                    .alias("occupancy_pct"))
    edge = pl.DataFrame({"step": [99, 99, 98, 98, 98], "kind": ["kernel"] * 5,
                         "name": ["at_the_bound", "k0", "one_low_row", "one_low_row", "k1"],
                         "category": ["Elementwise", "GEMM", "Elementwise", "Elementwise", "GEMM"],
                         "dur": [50, 950, 10, 500, 490], "occupancy_pct": [10.0, 10.0, 1.0, 31.0, 10.0],
                         "registers": [32] * 5})
    gpu = pl.concat([gpu, edge])
    cfg = FindingRules.builtin().rules["low_occupancy"] | {"min_share_pct": 5.0}
    got = findings.low_occupancy(gpu, cfg)
    monkeypatch.setattr(findings, "_may_hold_share", lambda rated, *_: rated)
    assert got == findings.low_occupancy(gpu, cfg)
    # (nor without the groups with a kernel at most the bound found first: every group read)
    monkeypatch.setattr(findings, "_groups_at_most", lambda rated, _bound: rated.select("step", "name").unique().collect())
    assert got == findings.low_occupancy(gpu, cfg)
    kernels = [r["kernel"] for r in got]
    assert "at_the_bound" in kernels and "one_low_row" not in kernels and len(got) > 5


def test_far_from_roofline_in_perf_and_report(tmp_path, capsys):
    assert main(["perf", str(EXAMPLE), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (f,) = [x for x in doc["findings"] if x["rule"] == "far_from_roofline"][:1]
    ev = f["evidence"]
    op = next(o for o in doc["ops"] if o["name"] == ev["op"] and o["pct_of_peak"] == pytest.approx(ev["pct_of_peak"]))
    assert ev["time_us"] == pytest.approx(op["kernel_time_us"] / 2)  # per step: the trace has 2
    assert f["win_back_us"] == pytest.approx(ev["time_us"] * (1 - ev["pct_of_peak"] / 70.0))
    html = tmp_path / "r.html"
    assert main(["report", str(EXAMPLE), "-o", str(html), "-q", "--no-cache"]) == 0
    rules = tmp_path / "r.toml"
    rules.write_text("[far_from_roofline]\nmax_pct_of_peak = 1.0\n")
    assert main(["perf", str(EXAMPLE), "--format", "json", "--no-cache", "--findings", str(rules)]) == 0
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_analyze_roofline_adds_the_perf_models_findings(capsys):
    """``analyze --roofline``: the far_from_roofline findings of ``perf``, ranked with the others (off by default:
    the perf model's second read of the file would exceed the diagnoses' 20% budget)."""
    assert main(["perf", str(EXAMPLE), "--format", "json", "--no-cache"]) == 0
    want = [x for x in json.loads(capsys.readouterr().out)["findings"] if x["rule"] == "far_from_roofline"]
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--no-cache"]) == 0
    plain = json.loads(capsys.readouterr().out)["findings"]
    assert not any(x["rule"] == "far_from_roofline" for x in plain)
    assert main(["analyze", str(EXAMPLE), "--format", "json", "--no-cache", "--roofline"]) == 0
    got = json.loads(capsys.readouterr().out)["findings"]
    roof = [x for x in got if x["rule"] == "far_from_roofline"]
    assert want and [(x["op"], x["win_back_us"]) for x in roof] == [(x["op"], x["win_back_us"]) for x in want]
    assert len(got) == len(plain) + len(roof)
    wins = [x["win_back_us"] for x in got]
    assert wins == sorted(wins, reverse=True)  # one ranking
    assert main(["analyze", str(EXAMPLE), "--roofline", "--no-cache"]) == 0
    kinds = len({(x["rule"], x["device"], x["rank"], x["op"], x["kernel"]) for x in got})
    assert f"Findings, by time to win back ({len(got)} in {kinds} kinds" in capsys.readouterr().out  # the terminal counts them too


def _pairs_with_and_without_holding(ops: pl.DataFrame, probe: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(pairs of the ops ``holding`` keeps, pairs of every op by the as-of join alone, ops kept)."""
    import unittest.mock

    from kernscope.analyze import attribute
    from kernscope.analyze.attribute import holding, op_gpu_pairs

    kept = holding(ops, probe)
    order = ["_g", "op_idx"]
    with unittest.mock.patch.object(attribute, "_held", lambda ops, gpu: None):  # the as-of join's pruning
        whole = op_gpu_pairs(ops, probe).sort(order)
    return op_gpu_pairs(kept, probe).sort(order), whole, kept.height


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ops_holding_a_launch_pair_as_all_ops_do(seed: int) -> None:
    """``attribute.holding`` keeps the ops that hold a launch of their thread (start and end included), in numpy
    before any op is copied: the pairs ``op_gpu_pairs`` makes of what it keeps are those it makes of every op, on
    random nested ops of three threads (zero-length ops, launches at ops' edges, an op of a thread with no launch)."""
    rng = np.random.default_rng(seed)
    n = 3000
    pid = rng.choice(["1", "2"], n)
    tid = rng.choice(["7", "9", "11"], n)
    ts = rng.integers(0, 10_000, n)
    end = ts + rng.choice([0, 1, 5, 50, 500], n)
    ops = pl.DataFrame({"idx": np.arange(n), "pid": pid, "tid": tid, "ts": ts, "end": end}).with_columns(
        pl.col("pid", "tid").cast(pl.Categorical))
    m = 200
    at = rng.integers(0, 10_000, m)
    at[:20] = ts[:20]  # launches on ops' starts and ends
    at[20:40] = end[20:40]
    probe = pl.DataFrame({"_g": np.arange(m, dtype=np.uint32), "launch_pid": rng.choice(["1", "2"], m),
                          "launch_tid": rng.choice(["7", "9"], m), "launch_ts": at, "dur": np.ones(m, dtype=np.int64)}
                         ).with_columns(pl.col("launch_pid", "launch_tid").cast(pl.Categorical))
    fast, whole, kept = _pairs_with_and_without_holding(ops, probe)
    assert fast.equals(whole) and whole.height > 100
    from kernscope.analyze.attribute import holding

    assert kept < n and holding(ops, probe).filter(pl.col("tid") == "11").height == 0  # (thread 11 has no launch)


@pytest.mark.skipif(not TRACES.exists(), reason="real traces not available")
@pytest.mark.parametrize("name", ["hta/a100_alexnet_cuda_sync.json.gz", "multirank/fsdp4_rank2.json.gz",
                                  "hta/event_sync_multi_stream.json.gz"])
def test_ops_holding_the_sync_calls_of_real_traces_pair_as_all_ops_do(name: str) -> None:
    """The blocking-sync finding's pairing of sync calls to their CPU ops, and the launches' pairing to every CPU op,
    on real traces: the same pairs with the ops that hold one only as with every op."""
    from kernscope.link.kinds import named

    t = kernscope.load(TRACES / name, cache=False)
    cpu = t.events.filter(pl.col("kind") == "cpu_op").select("idx", "pid", "tid", "ts", "end")
    rt = named(t.rows(("runtime", "driver"), ("idx", "pid", "tid", "ts", "dur", "name")), FindingRules.builtin().rules["blocking_sync"]["names"])
    syncs = rt.with_row_index("_g").select("_g", pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"),
                                          pl.col("ts").alias("launch_ts"), "dur")
    launches = t.gpu.with_row_index("_g").select("_g", "launch_pid", "launch_tid", "launch_ts", "dur")
    fast, whole, kept = _pairs_with_and_without_holding(cpu, syncs)
    assert fast.equals(whole)
    assert cpu.height < 100 or kept < cpu.height / 2  # (few ops hold a sync call)
    fast, whole, _ = _pairs_with_and_without_holding(cpu, launches)
    assert fast.equals(whole) and whole.height > 0


def _innermost_both_ways(ops: pl.DataFrame, probe: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``innermost_op_pairs``, ``op_gpu_pairs`` filtered to its innermost pairs), each sorted by GPU row."""
    from kernscope.analyze.attribute import innermost_op_pairs, op_gpu_pairs

    return (innermost_op_pairs(ops, probe).sort("_g"),
            op_gpu_pairs(ops, probe).filter(pl.col("innermost")).sort("_g"))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_innermost_pairs_by_level_in_numpy_equal_the_as_of_joins(seed: int) -> None:
    """The launchers' categories, the blocking-sync finding and the memory timeline read each GPU row's innermost
    enclosing op only: searched level by level in numpy, it equals what ``op_gpu_pairs``' as-of joins find, on random
    ops of three threads nested up to 8 deep (zero-length ops, partial overlaps, launches on ops' edges, null
    threads), and where the threads are not interned alike (the joins themselves answer)."""
    rng = np.random.default_rng(seed)
    n = 4000
    ts = rng.integers(0, 20_000, n)
    end = ts + rng.choice([0, 1, 5, 50, 500, 5000], n)
    pid = pl.Series(rng.choice(["1", "2", ""], n, p=[0.49, 0.49, 0.02]).tolist()).replace("", None)  # (a few null)
    ops = pl.DataFrame({"idx": np.arange(n) + 10, "pid": pid, "tid": rng.choice(["7", "9", "11"], n), "ts": ts,
                        "end": end}).with_columns(pl.col("pid", "tid").cast(pl.Categorical))
    m = 600
    at = rng.integers(0, 20_000, m)
    at[:50], at[50:100] = ts[:50], end[50:100]  # launches on ops' starts and ends
    probe = pl.DataFrame({"_g": np.arange(m, dtype=np.uint32),
                          "launch_pid": pl.Series(rng.choice(["1", "2", ""], m).tolist()).replace("", None),
                          "launch_tid": rng.choice(["7", "9"], m), "launch_ts": at,
                          "dur": rng.integers(1, 100, m)}).with_columns(pl.col("launch_pid", "launch_tid").cast(pl.Categorical))
    fast, ref = _innermost_both_ways(ops, probe)
    assert fast.equals(ref) and ref.height > 200 and ref["depth"].max() >= 3
    text = probe.with_columns(pl.col("launch_pid", "launch_tid").cast(pl.String))  # (not interned: the joins answer)
    fast, ref = _innermost_both_ways(ops.with_columns(pl.col("pid", "tid").cast(pl.String)), text)
    assert fast.equals(ref) and ref.height > 200


@pytest.mark.skipif(not TRACES.exists(), reason="real traces not available")
@pytest.mark.parametrize("name", ["hta/a100_alexnet_cuda_sync.json.gz", "multirank/fsdp4_rank2.json.gz",
                                  "hta/v100_2rank_nccl_rank1.json.gz", "tracelens/mi300x_xdit_sd35_rank0.json.gz"])
def test_innermost_pairs_of_real_traces_equal_the_as_of_joins(name: str) -> None:
    """Every GPU row's and every sync call's innermost CPU op, on real traces: the same by the levels in numpy as by
    ``op_gpu_pairs``' as-of joins."""
    from kernscope.link.kinds import named

    t = kernscope.load(TRACES / name, cache=False)
    cpu = t.events.filter(pl.col("kind") == "cpu_op").select("idx", "pid", "tid", "ts", "end")
    rt = named(t.rows(("runtime", "driver"), ("idx", "pid", "tid", "ts", "dur", "name")), FindingRules.builtin().rules["blocking_sync"]["names"])
    syncs = rt.with_row_index("_g").select("_g", pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"),
                                          pl.col("ts").alias("launch_ts"), "dur")
    launches = t.gpu.with_row_index("_g").select("_g", "launch_pid", "launch_tid", "launch_ts", "dur")
    for probe in (syncs, launches):
        fast, ref = _innermost_both_ways(cpu, probe)
        assert fast.equals(ref)
    assert ref.height > 0


def test_findings_gather_by_kind_over_steps(tmp_path, capsys):
    """The same rule in the same place over steps is one kind: its worst instance's words, how many steps, their total
    and median (a 3,300-step JAX profile's terminal listed five steps of one rule; now each kind once). Kinds keep the
    ranking of their worst instance; the JSON keeps every instance."""
    from kernscope.analyze.findings import by_kind

    p = tmp_path / "s.json"
    _steps_trace(p, [1000.0, 1000.0, 1000.0, 1500.0], sync_us=300.0, comm_us=200.0, gemms=40)
    a = analyze(kernscope.load(p, cache=False))
    k = a.findings_by_kind
    assert k.equals(by_kind(a.findings)) and k["occurrences"].sum() == a.findings.height
    for r in k.iter_rows(named=True):
        same = a.findings.filter((pl.col("rule") == r["rule"]) & pl.col("op").eq_missing(r["op"])
                                 & pl.col("kernel").eq_missing(r["kernel"]) & pl.col("device").eq_missing(r["device"]))
        assert r["occurrences"] == same.height and r["total_us"] == pytest.approx(same["win_back_us"].sum())
        assert r["worst_us"] == same["win_back_us"].max() and r["text"] == same.sort("win_back_us", descending=True)["text"][0]
    assert k["worst_us"].to_list() == sorted(k["worst_us"].to_list(), reverse=True)
    sync = k.filter(pl.col("rule") == "blocking_sync").row(0, named=True)
    assert sync["occurrences"] == 4 and sync["total_us"] == pytest.approx(1200.0) and sync["median_us"] == pytest.approx(300.0)
    assert main(["analyze", str(p), "--no-cache", "-q"]) == 0
    out = capsys.readouterr().out
    assert f"Findings, by time to win back ({a.findings.height} in {k.height} kinds" in out
    assert "in 4 steps: 1.200 ms in all, median 300.00 µs" in out
    assert by_kind(a.findings.clear()).columns == k.columns
    # one kind recurring: "(4 in 1 kind", not "1 kinds" (the DDP job's straggler over its 4 steps read so)
    from rich.console import Console

    from kernscope.render.console import render_findings
    one = Console(width=150, record=True)
    render_findings(k.filter(pl.col("rule") == "blocking_sync"), one)
    assert "Findings, by time to win back (4 in 1 kind)" in one.export_text()


@pytest.mark.parametrize("rel, step", [("src/kernscope/examples/h200_gpt_train_step.pt.trace.json.gz", 2),
                                       ("tests/data/parallel_h200/tp/rank0.pt.trace.json.gz", 3),
                                       ("tests/data/parallel_h200/ep/rank1.pt.trace.json.gz", 3)])
def test_a_step_alone_has_the_findings_of_the_whole_trace_evidence_too(rel, step):
    """``analyze --step N`` finds, with the same evidence to the last digit, what the whole trace finds in step N
    (launch_bound's median lead read 8.6775 alone and 8.677500000000001 in the whole trace: polars divides a one-row
    column exactly and a longer one by the reciprocal)."""
    t = kernscope.load(Path(__file__).resolve().parents[1] / rel, cache=False)
    cols = ["rule", "step", "device", "win_back_us", "text", "evidence"]
    whole = analyze(t).findings.filter(pl.col("step") == step).select(cols).sort("rule", "text")
    alone = analyze(t, step=step).findings.select(cols).sort("rule", "text")
    assert whole.height and alone.rows() == whole.rows()


def _capture_trace(tmp_path, name: str, prefix: str = "cuda", end: bool = True, tree: bool = False) -> Path:
    """A step (0-10,000 µs) whose thread 1 captures a graph from 1,000 to 3,000 µs (two launches inside, with no
    GPU record), instantiates it (500 µs) and replays it (one kernel); ``end``: the capture's end is in the trace."""
    rt = "cuda_runtime"
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10000.0},
          {"ph": "X", "cat": rt, "name": f"{prefix}StreamBeginCapture", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 5.0},
          {"ph": "X", "cat": rt, "name": f"{prefix}LaunchKernel", "pid": 1, "tid": 1, "ts": 1500.0, "dur": 5.0,
           "args": {"correlation": 1}},
          {"ph": "X", "cat": rt, "name": f"{prefix}LaunchKernel", "pid": 1, "tid": 1, "ts": 2000.0, "dur": 5.0,
           "args": {"correlation": 2}},
          {"ph": "X", "cat": rt, "name": f"{prefix}GraphInstantiateWithFlags", "pid": 1, "tid": 1, "ts": 3100.0,
           "dur": 500.0},
          {"ph": "X", "cat": rt, "name": f"{prefix}GraphLaunch", "pid": 1, "tid": 1, "ts": 4000.0, "dur": 5.0,
           "args": {"correlation": 3}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 4010.0, "dur": 100.0,
           "args": {"correlation": 3, "device": 0, "stream": 7}},
          # another thread's launch in the same time, not capturing: no GPU record, not a captured launch
          {"ph": "X", "cat": rt, "name": f"{prefix}LaunchKernel", "pid": 1, "tid": 2, "ts": 1600.0, "dur": 5.0,
           "args": {"correlation": 4}}]
    if end:
        ev.append({"ph": "X", "cat": rt, "name": f"{prefix}StreamEndCapture", "pid": 1, "tid": 1, "ts": 2995.0, "dur": 5.0})
    if tree:
        ev.append({"ph": "X", "cat": "cpu_op", "name": "CUDAGraphNode.record (dynamo_timed)", "pid": 1, "tid": 1,
                   "ts": 900.0, "dur": 2800.0})
    return write_trace(tmp_path / name, ev)


@pytest.mark.parametrize("prefix", ["cuda", "hip"])
def test_a_graph_captured_in_a_step_is_a_finding_and_its_launches_are_counted_as_captured(tmp_path, prefix):
    t = kernscope.load(_capture_trace(tmp_path, f"{prefix}.json", prefix), cache=False)
    assert t.unlinked["launches_in_graph_capture"] == 2 and t.unlinked["launches_without_gpu"] == 3  # (and thread 2's)
    (r,) = analyze(t).findings.filter(pl.col("rule") == "graph_capture").iter_rows(named=True)
    e = json.loads(r["evidence"])
    assert (e["graphs"], e["capture_us"], e["instantiate_us"], e["torch_compile"]) == (1, 2000.0, 500.0, False)
    assert r["win_back_us"] == 2500.0 and "capture a graph once, before the loop" in r["text"]


def test_a_capture_by_cuda_graph_trees_says_so_and_one_without_its_end_is_no_capture(tmp_path):
    (r,) = analyze(kernscope.load(_capture_trace(tmp_path, "tree.json", tree=True), cache=False)).findings.filter(
        pl.col("rule") == "graph_capture").iter_rows(named=True)
    assert json.loads(r["evidence"])["torch_compile"] is True and "CUDA graph trees record a graph" in r["text"]
    t = kernscope.load(_capture_trace(tmp_path, "open.json", end=False), cache=False)
    assert t.unlinked["launches_in_graph_capture"] == 0 and t.unlinked["launches_without_gpu"] == 3
    assert analyze(t).findings.filter(pl.col("rule") == "graph_capture").height == 0


def test_host_callbacks_in_a_step_are_summed_and_a_short_one_is_not_a_finding(tmp_path):
    """Two callbacks in step 1 (a pure_callback of 600 µs and an io_callback of 400 µs: 1,000 µs), one of 100 µs in
    step 2 (under the 500 µs threshold); a CPU op whose name only contains the word is not one."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": 10000.0 * s,
           "dur": 9000.0} for s in (1, 2)]
    ev += [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 2, "ts": ts, "dur": d} for n, ts, d in (
        ("pure_callback.3", 11000.0, 600.0), ("io_callback", 12000.0, 400.0), ("debug_callback.7", 21000.0, 100.0),
        ("my_debug_callback_helper", 13000.0, 5000.0))]
    (r,) = analyze(kernscope.load(write_trace(tmp_path / "cb.json", ev), cache=False)).findings.filter(
        pl.col("rule") == "host_callback").iter_rows(named=True)
    e = json.loads(r["evidence"])
    assert (r["step"], e["callback_us"], e["calls"], r["win_back_us"]) == (1, 1000.0, 2, 1000.0)
    assert e["spans"] == "1 io_callback, 1 pure_callback.3"  # (ties by name: one text whatever the grouping's order)


def _autotune_trace(tmp_path, name: str, fills: int, fill_us: float, device: str | None) -> Path:
    """One step: ``fills`` zero_ fills (``fill_us`` each) on stream 7, each followed by a launch of ``tuned`` (and, on
    stream 9, a fill followed by another kernel: a stream of its own)."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e6}]
    t, corr = 10.0, 0
    for i in range(fills):
        for kname, op, dur in (("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int> >(int)",
                                "aten::fill_", fill_us), ("tuned", None, 10.0)):
            corr += 1
            if op:
                ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t, "dur": 8.0})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel" if op else "cuLaunchKernelEx",
                       "pid": 1, "tid": 1, "ts": t + 1, "dur": 5.0, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": t + 20, "dur": dur,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
            t += dur + 30
    meta = {"deviceProperties": [{"id": 0, "name": device}]} if device else {}
    return write_trace(tmp_path / name, ev, **meta)


@pytest.mark.parametrize("fills,fill_us,device,found", [
    (12, 60.0, "NVIDIA H200", True), (9, 60.0, "NVIDIA H200", False), (12, 60.0, "Tesla V100-SXM2-16GB", False),
    (12, 200.0, "Tesla V100-SXM2-16GB", True), (12, 20.0, None, True), (12, 10.0, None, False)])
def test_autotune_flushes(tmp_path, fills, fill_us, device, found):
    """An H200 writes 128 MB in 27 µs: 12 fills of 60 µs are flushes, the kernel after each the one timed; 9 are not
    enough; on a V100 (0.9 TB/s: 142 µs for 128 MB) 60 µs fills are a smaller buffer's (a gradient zeroing). With no
    device the bound is max_tb_per_s, 10 TB/s: 12.8 µs for 128 MB."""
    f = analyze(kernscope.load(_autotune_trace(tmp_path, "a.json", fills, fill_us, device), cache=False)).findings
    rows = f.filter(pl.col("rule") == "autotune").to_dicts()
    assert len(rows) == found
    if found:
        e = json.loads(rows[0]["evidence"])
        assert (e["flushes"], e["kernels"], e["flush_us"], e["timed_us"]) == (fills, ["tuned"], fills * fill_us, fills * 10.0)
        assert rows[0]["win_back_us"] == fills * (fill_us + 10.0) and rows[0]["kernel"] == "tuned"


def test_far_from_roofline_counts_the_shortest_a_kernel_runs():
    """No kernel runs in less than ~1 µs (trivial ones took 0.67-1.3 µs on the H200 recordings). A JAX scan's 8-byte
    loop counter add, 1.28 µs a call, read "0% of its memory-bound roofline; at 70% it would take 0 µs" (20 µs to win
    back a step); Llama's greedy decode checks ``aten::any`` on a few bools 64 times a step, 3.4 µs a call: "at 70% it
    would take 0 µs" (217 µs). The target is now 1 µs a kernel at least, and ops whose kernels average under twice
    that are no finding (latency holds them, not the roofline)."""
    jax = kernscope.load(Path(__file__).parent / "data" / "jax_kernels_h200" / "partial" / "vm.xplane.pb.gz", cache=False)
    pm = kernscope.analyze.perf.perf_model(jax)
    scalar = pm.ops.filter((pl.col("name") == "loop_add_fusion") & (pl.col("dtype") == "int32")).row(0, named=True)
    assert scalar["bytes"] == 8 and scalar["mean_time_us"] < 2.0 and scalar["pct_of_peak"] < 1e-3
    roof = find_roofline(pm.ops, jax.steps.height)
    assert roof.height == 2 and "loop_add_fusion" not in roof["op"].to_list()
    llama = kernscope.load(Path(__file__).parent / "data" / "hf_h200" / "llama_generate_static.pt.trace.json.gz", cache=False)
    f = find_roofline(kernscope.analyze.perf.perf_model(llama).ops, llama.steps.height)
    anyop = f.filter(pl.col("op") == "aten::any").row(0, named=True)
    ev = json.loads(anyop["evidence"])
    per_step = ev["calls"] / ev["steps"]
    assert ev["target_us"] == pytest.approx(per_step * 1.0) and ev["target_us"] > ev["time_us"] * ev["pct_of_peak"] / 70
    assert anyop["win_back_us"] == pytest.approx(ev["time_us"] - per_step)
    assert anyop["text"].endswith("(1 µs a kernel at least)")


def test_rules_already_started_are_used_in_place_of_running_them_again():
    """``find(started=...)``: a rule's rows computed beforehand (``analyze`` starts ``step_start_idle`` before it
    categorizes the rows) stand in for running it, in the rules' order, with a pool or without."""
    from concurrent.futures import Future, ThreadPoolExecutor

    from kernscope.analyze.categories import Categorizer
    from kernscope.analyze.findings import find, idle_findings
    from kernscope.analyze.kernels import gpu_table, step_summary
    from kernscope.analyze.timeline import gpu_timeline

    t = kernscope.load(Path(__file__).parent / "data" / "jax" / "mlp" / "vm.xplane.pb", cache=False)
    g = gpu_table(t, Categorizer.builtin(), text_names=False, text_keys=False)
    steps, by_step = step_summary(t, g), gpu_timeline(g.filter(pl.col("step").is_not_null()), by="step")
    want = find(t, g, steps, by_step)
    assert "step_start_idle" in want["rule"].to_list()
    rules = FindingRules.builtin()
    early: Future[list[dict]] = Future()
    early.set_result(idle_findings(t, gpu_table(t, text_names=False, text_keys=False), rules))  # (uncategorized rows)
    assert find(t, g, steps, by_step, rules=rules, started={"step_start_idle": early}).equals(want)
    with ThreadPoolExecutor(2) as pool:
        assert find(t, g, steps, by_step, rules=rules, pool=pool, started={"step_start_idle": early}).equals(want)
    # what stands in is what is used: no rows of that rule where the stand-in has none
    none: Future[list[dict]] = Future()
    none.set_result([])
    got = find(t, g, steps, by_step, rules=rules, started={"step_start_idle": none})
    assert got.equals(want.filter(pl.col("rule") != "step_start_idle")) and got.height < want.height
