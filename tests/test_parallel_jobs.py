"""Jobs of the parallelisms beyond data parallel, recorded on two H200s (``examples/record_parallel_jobs.py`` ->
``tests/data/parallel_h200``): a pipeline (point-to-point transfers), tensor parallelism (all-reduces of the
activations) and a mixture of experts (uneven all-to-all). Each value is checked against the raw JSON."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from conftest import write_trace

from kernscope.analyze.ranks import RankTask
from kernscope.analyze.ranks.job import _one_clock
from kernscope.analyze.ranks.summary import RankResult
from kernscope.analyze.ranks.worker import summarize_file
from kernscope.cli import main
from kernscope.engine import EngineSpec, analyze_job
from kernscope.errors import KernscopeError
from kernscope.files import expand_inputs, not_a_trace, resolve_run_dir

DATA = Path(__file__).parent / "data" / "parallel_h200"
BPE = {"BFloat16": 2, "Float": 4}


def _events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _job(name: str):
    paths = expand_inputs([str(DATA / name)])
    assert [Path(p).name for p in paths] == ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]
    return analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))


def _raw_comm_kernels(ev: list[dict]) -> list[dict]:
    """The rank's NCCL kernels in the profiled steps, in launch order, each with its launch time and step."""
    launch = {e["args"]["correlation"]: e["ts"] for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in ev
                   if str(e.get("name", "")).startswith("ProfilerStep#"))
    out = []
    for e in ev:
        if e.get("cat") == "kernel" and e["name"].startswith("nccl") and e["args"]["correlation"] in launch:
            lt = launch[e["args"]["correlation"]]
            step = next((s for a, b, s in steps if a <= lt <= b), None)
            if step is not None:
                out.append({**e, "launch": lt, "step": step})
    return sorted(out, key=lambda k: k["launch"])


def _raw_batches(ev: list[dict], kernels: list[dict]) -> list[int]:
    """Per SendRecv kernel of a pipeline rank: the larger of the bytes its batch's send and recv ops moved (the ops
    issued since the previous NCCL launch)."""
    ops = sorted((e["ts"], e["args"]["Collective name"], e["args"]["In msg nelems"] * BPE[e["args"]["dtype"]])
                 for e in ev if e.get("name") == "record_param_comms" and e["args"].get("Collective name") in ("send", "recv"))
    out, prev = [], float("-inf")
    for k in kernels:
        sent = sum(b for t, c, b in ops if prev < t <= k["launch"] and c == "send")
        got = sum(b for t, c, b in ops if prev < t <= k["launch"] and c == "recv")
        out.append(max(sent, got))
        prev = k["launch"]
    return out


def test_a_folder_skips_the_json_beside_the_traces_and_says_so(capsys):
    assert not_a_trace(str(DATA / "pp" / "record_info_rank0.json"))
    assert not not_a_trace(str(DATA / "pp" / "rank0.pt.trace.json.gz"))
    notes: list[str] = []
    assert [Path(p).name for p in expand_inputs([str(DATA / "pp")], notes)] == ["rank0.pt.trace.json.gz",
                                                                                "rank1.pt.trace.json.gz"]
    assert notes == [f"{DATA / 'pp'}: skipped 2 JSON file(s) that are not traces (no 'traceEvents'): "
                     "record_info_rank0.json, record_info_rank1.json"]
    # a file named on its own is still read, and refused as what it is
    assert main(["analyze", str(DATA / "pp" / "record_info_rank0.json")]) == 2
    assert "no 'traceEvents' key" in capsys.readouterr().err


def test_a_folder_of_json_that_is_no_trace_is_one_line(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"lr": 0.001}')
    (tmp_path / "report.json.gz").write_bytes(gzip.compress(b'{"schema_version": "3.1", "kernels": []}'))
    (tmp_path / "broken.json").write_text('{"traceEvents": [')  # names traceEvents: the load says what is wrong
    (tmp_path / "array.json").write_text('[{"ph": "X"}]')  # Chrome's array form is a trace
    assert [Path(p).name for p in expand_inputs([str(tmp_path)])] == ["array.json", "broken.json"]
    (tmp_path / "broken.json").unlink()
    (tmp_path / "array.json").unlink()
    assert main(["analyze", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no trace files" in err and "skipped 2 JSON file(s)" in err
    assert "config.json, report.json.gz" in err


def test_pipeline_transfers_pair_the_two_ranks_with_their_bytes():
    j = _job("pp")
    inst = j.instances.sort("start_ns")
    raw = {r: _raw_comm_kernels(_events(DATA / "pp" / f"rank{r}.pt.trace.json.gz")) for r in (0, 1)}
    # 1F1B over 8 micro-batches on 2 stages: per step 9 batches a rank (send, 7 x send + recv, recv), one kernel each
    assert [len(raw[r]) for r in (0, 1)] == [27, 27]
    assert inst.height == 27 and set(inst["type"]) == {"sendrecv"} and set(inst["pg"]) == {"0 (ranks 0-1)"}
    assert (inst["ranks"] == 2).all() and (inst["expected_ranks"] == 2).all()
    # bytes: the larger side of each batch, the same on both ranks (2 MiB of bf16 activations or gradients)
    sizes = {r: _raw_batches(_events(DATA / "pp" / f"rank{r}.pt.trace.json.gz"), raw[r]) for r in (0, 1)}
    want_bytes = [float(max(a, b)) for a, b in zip(sizes[0], sizes[1])]
    assert want_bytes == [2.0 * (1 << 20)] * 27
    # the i-th transfer of a step on one rank is the i-th on the other: skew and wait from the raw kernel starts
    per_step: dict[int, list[tuple[dict, dict]]] = defaultdict(list)
    for a, b in zip(raw[0], raw[1]):
        assert a["step"] == b["step"]
        per_step[a["step"]].append((a, b))
    got = {(r["step"], r["key"]): r for r in inst.iter_rows(named=True)}
    for step, pairs in per_step.items():
        for i, (a, b) in enumerate(pairs):
            r = got[(step, i)]
            assert r["skew_us"] == pytest.approx(abs(a["ts"] - b["ts"]), abs=1e-3)
            assert r["last_rank"] == (0 if a["ts"] > b["ts"] else 1)
            assert r["bytes"] == want_bytes[i]
    assert not [n for n in j.notes if "fewer ranks" in n]
    # the last stage (rank 1, launch-bound) holds the first back at every step's transfers
    s = j.stragglers
    assert s["rank"].to_list() == [1, 1, 1] and s["p2p"].to_list() == s["collectives"].to_list() == [9, 9, 9]
    f = j.findings.row(0, named=True)
    assert f["rule"] == "straggler" and "of 9 point-to-point transfers (where a pipeline stage waits" in f["text"]
    summary = j.collectives.row(0, named=True)
    assert summary["pg"] == "0 (ranks 0-1)" and summary["bytes"] == 27 * 2.0 * (1 << 20)


def test_tensor_parallel_all_reduces_match_the_raw_json():
    j = _job("tp")
    inst = j.instances
    raw = {r: _raw_comm_kernels(_events(DATA / "tp" / f"rank{r}.pt.trace.json.gz")) for r in (0, 1)}
    # per step 4 forward and 3 backward all-reduces (the first layer's input needs no gradient)
    assert [len(raw[r]) for r in (0, 1)] == [21, 21]
    assert inst.height == 21 and set(inst["type"]) == {"allreduce"} and set(inst["pg"]) == {"0"}
    nelems = {k["args"]["In msg nelems"] for r in (0, 1) for k in raw[r]}
    assert nelems == {2048 * 4096} and inst["bytes"].to_list() == [2.0 * 2048 * 4096] * 21
    assert inst["algo"].unique().to_list() == ["RING"]
    skews = sorted(abs(a["ts"] - b["ts"]) for a, b in zip(raw[0], raw[1]))
    assert sorted(inst["skew_us"].to_list()) == pytest.approx(skews, abs=1e-3)
    assert j.stragglers["p2p"].to_list() == [0, 0, 0] and "collectives;" in j.findings["text"][0]


def test_expert_parallel_uneven_all_to_all():
    j = _job("ep")
    inst = j.instances
    raw = {r: _raw_comm_kernels(_events(DATA / "ep" / f"rank{r}.pt.trace.json.gz")) for r in (0, 1)}
    assert [len(raw[r]) for r in (0, 1)] == [9, 9]
    assert inst.height == 9 and set(inst["type"]) == {"alltoall"}
    # the splits are uneven: rank 0 sends 512 + 1536 tokens and gets 512 + 512 back, rank 1 sends 512 + 1536 and
    # gets 1536 + 1536; an instance's bytes are the larger rank's input
    want = sorted(max(a["args"]["In msg nelems"], b["args"]["In msg nelems"]) * 2.0 for a, b in zip(raw[0], raw[1]))
    assert sorted(inst["bytes"].to_list()) == want and set(want) == {2.0 * 8388608, 2.0 * 12582912}
    assert (inst["size_mismatch"] == [a["args"]["In msg nelems"] != b["args"]["In msg nelems"]
                                      for a, b in sorted(zip(raw[0], raw[1]), key=lambda p: p[0]["ts"])]).all()


def _pipeline_rank(path: Path, rank: int, stages: int, late_us: int, ops: bool = True) -> Path:
    """A synthetic pipeline stage: per step, each transfer with a neighbour is a batch (send and recv ops, then one
    SendRecv kernel launched under ``nccl:coalesced``), first with the previous stage, then with the next. The last
    stage is ``late_us`` late to every transfer."""
    ev, corr, t = [], 1, 1_000_000
    for s in range(2):
        t0 = t
        for peer in (rank - 1, rank + 1):
            if not 0 <= peer < stages:
                continue
            at = t0 + 1000 * min(rank, peer) + (late_us if rank == stages - 1 else 0)
            for i, coll in enumerate(("send", "recv") if ops else ()):
                ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": at + i,
                           "dur": 1, "args": {"Collective name": coll, "Rank": peer, "In msg nelems": 1 << 20,
                                              "dtype": "BFloat16", "Process Group Name": "0", "Group size": stages}})
            ev.append({"ph": "X", "cat": "user_annotation", "name": "nccl:coalesced", "pid": 1, "tid": 1, "ts": at + 3,
                       "dur": 10, "args": {}})
            ev.append({"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "pid": 1, "tid": 1, "ts": at + 4,
                       "dur": 5, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
                       "pid": 0, "tid": 17, "ts": at + 20, "dur": 50, "args": {"correlation": corr, "stream": 17, "device": 0}})
            corr += 1
        t = t0 + 3000
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0,
                   "dur": 2999, "args": {}})
    return write_trace(path, ev, deviceProperties=[{"id": 0, "name": "NVIDIA H200"}],
                       distributedInfo={"rank": rank, "world_size": stages})


def test_a_middle_stage_transfers_with_each_neighbour_apart(tmp_path):
    """Three stages: rank 1 sends to and receives from both others, ranks 0 and 2 never meet. Each transfer is an
    instance of its pair (matched by position among that pair's transfers), not of every rank's i-th kernel."""
    paths = [str(_pipeline_rank(tmp_path / f"rank{r}.json", r, 3, late_us=300)) for r in range(3)]
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    inst = j.instances.sort("pg", "step", "key")
    assert inst["pg"].to_list() == ["0 (ranks 0-1)"] * 2 + ["0 (ranks 1-2)"] * 2
    assert (inst["ranks"] == 2).all() and (inst["expected_ranks"] == 2).all()
    assert inst["bytes"].to_list() == [2.0 * (1 << 20)] * 4
    # ranks 0 and 1 arrive together; rank 2 is 300 µs late to its transfers with rank 1
    assert inst["skew_us"].to_list() == [0.0, 0.0, 300.0, 300.0] and inst["last_rank"].to_list()[2:] == [2, 2]
    assert not [n for n in j.notes if "fewer ranks" in n]
    assert j.stragglers["rank"].to_list() == [2, 2]
    w = j.waits.filter(pl.col("wait_us") > 0)
    assert w["rank"].to_list() == [1, 1] and w["wait_us"].to_list() == [300.0, 300.0]


JAX_JOB = Path(__file__).parent / "data" / "jax_job_h200"


def _xprof_nccl_per_step(export: Path) -> list[float]:
    """A process's NCCL kernel time (µs) per step, from xprof's own JSON export of its profile (``/device:GPU:0``'s
    kernels, by start, within the ``train`` step windows of the host)."""
    ev = json.loads(gzip.decompress(export.read_bytes()))["traceEvents"]
    gpu = next(e["pid"] for e in ev if e.get("ph") == "M" and e.get("name") == "process_name"
               and e["args"]["name"] == "/device:GPU:0")
    steps = sorted(e["ts"] for e in ev if e.get("ph") == "X" and e.get("name") == "train")
    out = [0.0] * len(steps)
    for e in ev:
        if e.get("ph") == "X" and e["pid"] == gpu and e["name"].startswith("ncclDevKernel"):
            out[max(i for i, t in enumerate(steps) if t <= e["ts"])] += e["dur"]
    return out


def test_a_jax_job_of_two_processes(capsys):
    """``examples/record_jax_job.py`` on two H200s: two processes joined by jax.distributed, process 1 sleeping 20 ms
    before each step. Each wrote ``<host>.xplane.pb`` (gzipped here) and xprof's JSON export into its own folder."""
    notes: list[str] = []
    paths = expand_inputs([str(JAX_JOB)], notes)
    assert [Path(p).relative_to(JAX_JOB).parts[0] for p in paths] == ["process0", "process1"]
    assert all(p.endswith("vm.xplane.pb.gz") for p in paths)
    assert notes[0].startswith(f"{JAX_JOB}: reading the XSpace of each of 2 JAX profile run(s), not the JSON export(s)")
    assert notes[1].endswith("process0/record_info.json, process1/record_info.json")
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    # each process's rank and the world size from its XSpace's GPU clique (AcquireGpuClique: rank 0 and 1 of
    # "devices=2:[0,1]; local_participants=1"), not the files' order
    assert j.world_size == 2 and j.ranks["rank"].to_list() == [0, 1]
    assert [Path(p).relative_to(JAX_JOB).parts[0] for p in j.ranks["path"]] == ["process0", "process1"]
    assert not [n for n in j.notes if "file-name order" in n]
    # the late process is every step's straggler; the wait it caused is what the other process's NCCL kernels spent
    # beyond its own (the last arriver's kernels only transfer), from xprof's JSON
    exports = {r: next((JAX_JOB / f"process{r}").rglob("vm.trace.json.gz")) for r in (0, 1)}
    nccl = {r: _xprof_nccl_per_step(exports[r]) for r in (0, 1)}
    s = j.stragglers
    assert s["rank"].to_list() == [1, 1, 1, 1] and s["collectives"].to_list() == [6, 6, 6, 6]
    want = [a - b for a, b in zip(nccl[0], nccl[1])]
    assert s["wait_us"].to_list() == pytest.approx(want, rel=0.03)
    assert all(15_000 < w < 20_000 for w in want)  # the 20 ms sleep, less what process 0 did meanwhile
    # each XSpace's times are relative to its own profile's start (354.6 µs apart here); on one clock the two
    # kernels of every all-reduce end together, as they must (before, rank 1's first began after rank 0's ended)
    ranks = _one_clock([r for p in paths if isinstance(r := summarize_file(p, RankTask(cache=False)), RankResult)])
    assert len(ranks) == 2
    assert ranks[1].clock_start_ns - ranks[0].clock_start_ns == -354_563
    ends = [r.collectives.sort("step", "ordinal")["end"].to_numpy() for r in ranks]
    assert abs(ends[0] - ends[1]).max() < 50_000  # ns
    # bytes from the HLO: all-reduce.20 (in the layers' scan: 4 a step) reduces one layer's four bf16 matrices
    inst = j.instances
    layer = 2 * (512 * 1536 + 512 * 512 + 512 * 2048 + 2048 * 512)
    assert inst.height == 24 and (inst["ranks"] == 2).all()
    assert inst.filter(pl.col("bytes") == layer).height == 16
    assert inst["bytes"].null_count() == inst["busbw_gb_s"].null_count() == 0 and (inst["busbw_gb_s"] > 0).all()
    # the ranks' critical paths take XLA's untraced waits: rank 0's runs through the all-reduces that waited for
    # rank 1, as long as the waits rank 1 caused; rank 1's path is its host (the 20 ms sleep)
    cp = j.critical_path.sort("rank", "step")
    r0, r1 = cp.filter(pl.col("rank") == 0), cp.filter(pl.col("rank") == 1)
    assert r0["last_arriver_wait_us"].to_list() == pytest.approx(s["wait_us"].to_list(), rel=0.01)
    assert (r1["cpu_us"] > 0.75 * r1["length_us"]).all() and (r1["last_arriver_wait_us"] < 100).all()
    assert any("JAX ranks' critical paths take the host's untraced gap" in n for n in j.notes)
    assert main(["analyze", str(JAX_JOB), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "default  allreduce         24  162.07 MiB" in out


def test_a_transfer_of_no_known_size_is_no_size(tmp_path, capsys):
    """Without the send and recv ops (a trace recorded without them), a transfer's peer and size are unknown: the
    ranks' i-th transfers of a step are one instance, and its size is shown unknown, not 0."""
    paths = [str(_pipeline_rank(tmp_path / f"rank{r}.json", r, 2, late_us=300, ops=False)) for r in range(2)]
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    assert j.instances["pg"].to_list() == ["default", "default"] and j.instances["bytes"].null_count() == 2
    assert j.collectives["bytes"].to_list() == [None]
    assert main(["analyze", str(tmp_path), "--no-cache"]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("default"))
    assert row.split()[:4] == ["default", "sendrecv", "2", "-"]


def test_a_run_folder_reads_its_gzipped_xspace():
    """A JAX run folder holding ``vm.xplane.pb.gz`` beside xprof's JSON exports: the XSpace is read (until session 45
    only ``*.xplane.pb`` counted, and the folder read ``perfetto_trace.json.gz``, calling it the richest file)."""
    run = Path(__file__).parent / "data" / "jax" / "transformer"
    found, note = resolve_run_dir(str(run))  # type: ignore[misc]
    assert [Path(f).name for f in found] == ["vm.xplane.pb.gz"]
    assert note.endswith("reading vm.xplane.pb.gz (the richest file of this JAX run; also there: perfetto_trace.json.gz, "
                         "vm.trace.json.gz)")


def test_perf_memory_and_diff_take_a_jax_run_folder(tmp_path, capsys):
    """A JAX run folder names one trace for ``perf``, ``memory`` and ``diff`` as for ``analyze`` (they had said
    "is a directory, not a trace file"); a run of several hosts is refused in one line."""
    one = JAX_JOB / "process1"
    xspace = next(one.rglob("*.xplane.pb.gz"))
    assert main(["perf", str(one), "--no-cache", "--format", "json"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["trace"] == str(xspace) and "reading vm.xplane.pb.gz" in got.err
    assert main(["memory", str(one), "--no-cache", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["trace"] == str(xspace)
    assert main(["diff", str(JAX_JOB / "process0"), str(one), "--no-cache", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["b"]["path"] == str(xspace)
    run = tmp_path / "run"
    run.mkdir()
    for host in ("a", "b"):
        (run / f"{host}.xplane.pb.gz").write_bytes(xspace.read_bytes())
    assert main(["perf", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a JAX run of 2 hosts (a.xplane.pb.gz, b.xplane.pb.gz): name one host's file" in err


def test_compiled_ddp_and_a_second_process_group():
    """DDP under torch.compile, and an all-gather of the loss on a second group over the same ranks: each group's
    collectives are matched in their own group; the all-reduces carry every fp32 gradient once a step."""
    j = _job("ddpc")
    c = {(r["pg"], r["type"]): r for r in j.collectives.iter_rows(named=True)}
    assert set(c) == {("0", "allreduce"), ("1", "allgather")}
    grads = 4 * (4096 * 4096 + 4096) * 4  # four Linear(4096, 4096), fp32 gradients
    assert c[("0", "allreduce")]["instances"] == 15 and c[("0", "allreduce")]["bytes"] == 3 * grads
    assert c[("1", "allgather")]["instances"] == 3 and c[("1", "allgather")]["bytes"] == 3 * 2 * 4.0  # 2 ranks x 1 fp32
    assert (j.instances["ranks"] == 2).all() and not [n for n in j.notes if "fewer ranks" in n]
    raw = {r: _raw_comm_kernels(_events(DATA / "ddpc" / f"rank{r}.pt.trace.json.gz")) for r in (0, 1)}
    assert [len(raw[r]) for r in (0, 1)] == [18, 18]


def test_ddp_gradient_accumulation_reduces_once_a_step_after_its_last_micro_batch():
    """DDP with 4 micro-batches a step, the first 3 under ``no_sync()``: each step's all-reduces carry every fp32
    gradient once (5 buckets), all launched after the step's last forward began; the rest of the step is no
    communication."""
    j = _job("ddpacc")
    (c,) = j.collectives.iter_rows(named=True)
    grads = 4 * (4096 * 4096 + 4096) * 4
    assert (c["type"], c["instances"], c["bytes"]) == ("allreduce", 15, 3 * grads)
    for r in (0, 1):
        ev = _events(DATA / "ddpacc" / f"rank{r}.pt.trace.json.gz")
        kernels = _raw_comm_kernels(ev)
        forwards = sorted(e["ts"] for e in ev if e.get("cat") == "user_annotation"
                          and e["name"] == "DistributedDataParallel.forward")
        assert len(kernels) == 15 and len(forwards) == 12  # 3 profiled steps, 4 micro-batches each
        for step, last_forward in zip(sorted({k["step"] for k in kernels}), forwards[3::4]):
            assert all(k["launch"] > last_forward for k in kernels if k["step"] == step)


def test_fsdp2_with_compiled_blocks():
    """FSDP2 (fully_shard) over four blocks each compiled first: per block and step two all-gathers of its bf16
    parameters (forward, backward) and one reduce-scatter of its fp32 gradients, each matched across the ranks with
    the sizes c10d recorded (the all-gather's output, the reduce-scatter's input: the whole block)."""
    j = _job("fsdpc")
    c = {(r["pg"], r["type"]): r for r in j.collectives.iter_rows(named=True)}
    assert set(c) == {("0", "allgather"), ("0", "reduce_scatter")}
    raw = [e["args"] for e in _events(DATA / "fsdpc" / "rank0.pt.trace.json.gz") if e.get("name") == "record_param_comms"]
    ag = [a for a in raw if a["Collective name"] == "_allgather_base"]
    rs = [a for a in raw if a["Collective name"] == "_reduce_scatter_base"]
    block = 4096 * 4096 + 4096
    assert len(ag) == 24 and all(a["Out msg nelems"] == block and a["dtype"] == "BFloat16" for a in ag)
    assert len(rs) == 12 and all(a["In msg nelems"] == block and a["dtype"] == "Float" for a in rs)
    assert c[("0", "allgather")]["instances"] == 24 and c[("0", "allgather")]["bytes"] == 24 * block * 2
    assert c[("0", "reduce_scatter")]["instances"] == 12 and c[("0", "reduce_scatter")]["bytes"] == 12 * block * 4
    assert (j.instances["ranks"] == 2).all()
    kernels = {r: _raw_comm_kernels(_events(DATA / "fsdpc" / f"rank{r}.pt.trace.json.gz")) for r in (0, 1)}
    assert [len(kernels[r]) for r in (0, 1)] == [36, 36]


def test_one_ranks_exposed_communication_says_it_includes_the_wait():
    """One rank's trace analyzed alone: its communication kernels ran while it waited for the other stage (74.7 ms of
    rank 0's 91.7 ms of kernel time), and the finding says so; a one-process trace's finding does not."""
    from kernscope.analyze.summary import analyze

    one = analyze(kernscope_load(DATA / "pp" / "rank0.pt.trace.json.gz")).findings.filter(pl.col("rule") == "exposed_comm")
    assert one.height == 3 and all("this is one of 2 ranks, and a communication kernel runs while it waits" in t
                                   for t in one["text"])
    dp = analyze(kernscope_load(Path(__file__).parent / "data" / "multigpu_h200" / "torch_dp.pt.trace.json.gz"))
    texts = dp.findings.filter(pl.col("rule") == "exposed_comm")["text"].to_list()
    assert texts and not any("ranks" in t for t in texts)


def test_one_ranks_communication_what_if_says_it_includes_the_wait():
    """The critical path's "Communication 2x faster" on one pipeline rank analyzed alone (up to 15.4 ms a step) counted
    its wait for the other stage as transfer; the what-if and a note now say so. A one-process trace's does not."""
    from kernscope.analyze.summary import analyze

    cp = analyze(kernscope_load(DATA / "pp" / "rank0.pt.trace.json.gz")).critical_path
    comm = cp.whatif.filter(pl.col("change").str.starts_with("kernels of Communication"))
    assert comm.height == 3 and set(comm["change"]) == {
        "kernels of Communication 2x faster (their time includes waits for the other ranks)"}
    assert any(n.startswith("this trace is one rank of a job of 2") for n in cp.notes)
    dp = analyze(kernscope_load(Path(__file__).parent / "data" / "multigpu_h200" / "torch_dp.pt.trace.json.gz")).critical_path
    assert "kernels of Communication 2x faster" in dp.whatif["change"].to_list()
    assert not any("one rank of a job" in n for n in dp.notes)


def kernscope_load(path: Path):
    import kernscope

    return kernscope.load(path, cache=False)


def test_collectives_keep_their_seq_matching_beside_point_to_point_transfers(tmp_path):
    """Collectives with c10d's Seq are matched by it even where the job also has point-to-point transfers, which have
    no Seq and are matched by position (until session 45 one transfer turned the whole job to positions)."""
    paths = []
    for rank in (0, 1):
        p = _pipeline_rank(tmp_path / f"rank{rank}.json", rank, 2, late_us=0)
        doc = json.loads(p.read_text())
        ev, corr = doc["traceEvents"], 1000
        for step, t0 in enumerate((1_000_000, 1_003_000)):
            at = t0 + 2000
            ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": at, "dur": 20,
                       "args": {"Collective name": "allreduce", "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20,
                                "dtype": "Float", "Process Group Name": "0", "Group size": 2, "Seq": 101 + step}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": at + 5,
                       "dur": 5, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "pid": 0,
                       "tid": 21, "ts": at + 30 + 10 * rank, "dur": 100, "args": {"correlation": corr, "stream": 21,
                                                                                  "device": 0}})
            corr += 1
        p.write_text(json.dumps(doc))
        paths.append(str(p))
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    ar = j.instances.filter(pl.col("type") == "allreduce").sort("key")
    assert ar["key"].to_list() == [101, 102] and (ar["ranks"] == 2).all() and ar["skew_us"].to_list() == [10.0, 10.0]
    p2p = j.instances.filter(pl.col("type") == "sendrecv")
    assert p2p.height == 2 and set(p2p["pg"]) == {"0 (ranks 0-1)"} and p2p["key"].to_list() == [0, 0]


def test_a_peer_that_is_no_rank_is_no_pair(tmp_path):
    """A send or recv whose peer ("Rank") is no rank id (negative, or 2^31 and more: corrupt) names no pair: its
    transfers are matched by position in their group, not labeled '0 (ranks -7-0)'."""
    paths = []
    for rank in (0, 1):
        p = _pipeline_rank(tmp_path / f"rank{rank}.json", rank, 2, late_us=0)
        doc = json.loads(p.read_text())
        for e in doc["traceEvents"]:
            if e["name"] == "record_param_comms":
                e["args"]["Rank"] = -7 if rank == 0 else 1 << 40
        p.write_text(json.dumps(doc))
        paths.append(str(p))
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    assert set(j.instances["pg"]) == {"0"} and (j.instances["ranks"] == 2).all()
    assert j.instances["bytes"].to_list() == [2.0 * (1 << 20)] * j.instances.height


def test_a_jax_ring_exchange_is_point_to_point_with_its_hlo_size():
    """The JAX job again with a ring exchange after each step (``record_jax_job.py --ring``: ``ppermute`` of a
    1024 x 4096 fp32 block a process, XLA's collective-permute run as NCCL SendRecv kernels): one transfer a step,
    its size from the HLO (16 MiB), matched by position (XLA records no peer)."""
    ring = Path(__file__).parent / "data" / "jax_job_h200_ring"
    j = analyze_job(expand_inputs([str(ring)]), RankTask(cache=False), EngineSpec(workers=1))
    p2p = j.instances.filter(pl.col("type") == "sendrecv")
    assert p2p.height == 4 and p2p["bytes"].to_list() == [1024 * 4096 * 4.0] * 4 and (p2p["ranks"] == 2).all()
    ar = j.instances.filter(pl.col("type") == "allreduce")["bytes"]
    assert ar.null_count() == 0 and (ar > 0).all()
    assert j.stragglers["rank"].to_list() == [1, 1, 1, 1] and j.stragglers["p2p"].to_list() == [1, 1, 1, 1]


@pytest.mark.parametrize("width", [60, 80])
def test_a_narrow_terminal_keeps_the_pair_of_a_transfer_whole(width, monkeypatch, capsys):
    """The collectives table's group is shown whole at any width (at 80 columns it read '0 (ra…-1)'); the numbers a
    narrow terminal cannot hold are left out and named below the table."""
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["analyze", str(DATA / "pp"), "--no-cache"]) == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("0 (ranks"))
    assert row.split()[:5] == ["0", "(ranks", "0-1)", "sendrecv", "27"] and max(map(len, out.splitlines())) <= width


def test_a_jax_processs_rank_is_its_cliques_not_its_files_place(tmp_path):
    """Two processes' XSpaces in folders named against their order (process 1's in a/, process 0's in b/), as
    host names can sort: each keeps the rank its GPU clique gives (until session 45, file order made process 1 rank 0
    and the straggler's label wrong); folders that are not jax.profiler's dated runs are a job's processes."""
    for folder, proc in (("a", 1), ("b", 0)):
        (tmp_path / folder).mkdir()
        src = next((JAX_JOB / f"process{proc}").rglob("vm.xplane.pb.gz"))
        (tmp_path / folder / "vm.xplane.pb.gz").write_bytes(src.read_bytes())
    paths = expand_inputs([str(tmp_path)])
    assert [Path(p).parent.name for p in paths] == ["a", "b"]
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    assert dict(zip(j.ranks["rank"].to_list(), [Path(p).parent.name for p in j.ranks["path"]])) == {0: "b", 1: "a"}
    assert j.stragglers["rank"].to_list() == [1, 1, 1, 1]
    # a log folder of two dated runs is two profiling sessions: name one
    (tmp_path / "2026_01_01_00_00_00").mkdir()
    (tmp_path / "2026_01_02_00_00_00").mkdir()
    for run in ("2026_01_01_00_00_00", "2026_01_02_00_00_00"):
        (tmp_path / run / "vm.xplane.pb.gz").write_bytes((tmp_path / "a" / "vm.xplane.pb.gz").read_bytes())
    for folder in ("a", "b"):
        (tmp_path / folder / "vm.xplane.pb.gz").unlink()
    with pytest.raises(KernscopeError, match="holds 2 JAX profile runs"):
        expand_inputs([str(tmp_path)])


@pytest.mark.parametrize("job", ["parallel_h200/pp", "jax_job_h200", "jax_job_h200_ring"])
def test_the_jobs_json_validates_against_its_schema(job, capsys):
    import jsonschema

    assert main(["analyze", str(Path(__file__).parent / "data" / job), "--no-cache", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "schema" / "job.schema.json").read_text())
    jsonschema.validate(doc, schema)
    assert doc["world_size"] == 2 and all("p2p" in s for s in doc["stragglers"])


def test_kernscopes_own_json_beside_the_traces_is_skipped_at_any_size(tmp_path, monkeypatch):
    """``kernscope analyze DIR --format json -o DIR/report.json``, then ``kernscope analyze DIR``: the report is
    skipped, however large (a JAX profile's runs to 22 MB, past what is read whole to look for traceEvents)."""
    import kernscope.files as files

    for r in (0, 1):
        (tmp_path / f"rank{r}.pt.trace.json.gz").write_bytes((DATA / "pp" / f"rank{r}.pt.trace.json.gz").read_bytes())
    assert main(["analyze", str(tmp_path), "--no-cache", "--format", "json", "-o", str(tmp_path / "report.json")]) == 0
    monkeypatch.setattr(files, "SNIFF_MAX_BYTES", 1000)  # (the report is larger: only its start tells)
    notes: list[str] = []
    assert [Path(p).name for p in expand_inputs([str(tmp_path)], notes)] == ["rank0.pt.trace.json.gz",
                                                                             "rank1.pt.trace.json.gz"]
    assert notes[0].endswith("not traces (no 'traceEvents'): report.json")


def test_jax_fsdp_all_gathers_and_reduce_scatters_take_their_size_from_the_hlo_and_the_clique():
    """The JAX job with its parameters sharded over the two processes (``record_jax_job.py --fsdp``): XLA all-gathers
    them and reduce-scatters their gradients. Such a message is n/(n+1) of the bytes its instruction moves, n the
    GPU clique's size (2 here, the profile's only clique): once a step the embedding, the head and the positions are
    gathered whole, (8192 x 512 + 512 x 8192 + 512 x 512) bf16, and their gradients reduce-scattered."""
    fsdp = Path(__file__).parent / "data" / "jax_job_h200_fsdp"
    j = analyze_job(expand_inputs([str(fsdp)]), RankTask(cache=False), EngineSpec(workers=1))
    whole = 2.0 * (8192 * 512 + 512 * 8192 + 512 * 512)
    for kind in ("allgather", "reduce_scatter"):
        inst = j.instances.filter(pl.col("type") == kind)
        assert inst["bytes"].null_count() == 0 and inst.filter(pl.col("bytes") == whole)["step"].to_list() == [0, 1, 2, 3]
    c = {r["type"]: r for r in j.collectives.iter_rows(named=True)}
    assert c["allgather"]["instances"] == 84 and c["reduce_scatter"]["instances"] == 68
    assert c["allgather"]["busbw_gb_s"] > 50 and j.stragglers["rank"].to_list() == [1, 1, 1, 1]


def test_a_jax_process_driving_two_gpus_is_one_rank_of_one():
    """One process driving both GPUs (``record_multigpu_traces.py --which jax_dp``): its clique has two local
    participants with ranks 0 and 1, the process's own devices: rank 0 of a world of one process."""
    from kernscope.analyze.ranks.summary import XLA_CLIQUE, rank_of, xla_rank

    t = kernscope_load_ranked(Path(__file__).parent / "data" / "multigpu_h200" / "jax_dp.xplane.pb.gz")
    assert xla_rank(t) == (0, 1) and rank_of(t, "jax_dp.xplane.pb.gz") == (0, XLA_CLIQUE)


def kernscope_load_ranked(path: Path):
    from kernscope.pipeline import load

    return load(path, cache=False, projection=RankTask(cache=False).load_projection())
