"""Many ranks: per-rank tables, collectives across ranks, stragglers, the local and Dask engines, bad input."""

from __future__ import annotations

import gzip
import json
import os
import re
import zipfile
from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES, write_trace

from kernscope.analyze.ranks import RankTask
from kernscope.cli import main
from kernscope.engine import EngineSpec, analyze_job, expand_inputs, summarize_ranks
from kernscope.errors import KernscopeError

MULTI = TRACES / "multirank"
needs_multi = pytest.mark.skipif(not MULTI.is_dir(), reason="../shared/traces/multirank not present")
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def synth_rank(path: Path, rank: int, *, late_rank: int = 1, late_us: int = 500, world: int | None = 2, steps: int = 2,
               base: int = 1_000_000, info: bool = True, gpu: str = "NVIDIA H100 80GB HBM3") -> Path:
    """A small DDP-like rank: per step a compute kernel, then an all-reduce whose launch waits on the host for
    ``late_us`` on ``late_rank`` (so the others wait for it in their NCCL kernels)."""
    ev, corr = [], 1
    t = base
    for s in range(steps):
        t0 = t
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 10, "dur": 20,
                   "args": {"External id": corr}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 15, "dur": 5,
                   "args": {"External id": corr, "correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16bf16", "pid": 0, "tid": 7, "ts": t + 40, "dur": 300,
                   "args": {"correlation": corr, "stream": 7, "device": 0}})
        corr += 1
        lt = t + 100 + (late_us if rank == late_rank else 0)
        start = t + 100 + late_us + 10  # everyone finishes together once the late rank arrives
        my_start = lt + 10
        ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": lt - 2, "dur": 20,
                   "args": {"External id": corr, "Collective name": "allreduce", "In msg nelems": 1 << 20,
                            "Out msg nelems": 1 << 20, "dtype": "Float", "Process Group Name": "0", "Group size": world or 2}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": lt, "dur": 5,
                   "args": {"External id": corr, "correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": NCCL, "pid": 0, "tid": 21, "ts": my_start, "dur": start - my_start + 100,
                   "args": {"correlation": corr, "stream": 21, "device": 0}})
        corr += 1
        t = t + 1000 + late_us
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0,
                   "dur": t - t0 - 1, "args": {}})
    meta = {"distributedInfo": {"rank": rank, "world_size": world}} if info and world else {}
    return write_trace(path, ev, deviceProperties=[{"id": 0, "name": gpu}], **meta)


def test_synthetic_job_values(tmp_path):
    paths = [str(synth_rank(tmp_path / f"r{r}.json", r)) for r in range(2)]
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    assert j.ranks["rank"].to_list() == [0, 1]
    r0 = j.ranks.row(0, named=True)
    # per step: GEMM 40..340 us, rank 0's all-reduce 110..710 (it waits 500 us for rank 1, then 100 us transfer)
    assert r0["comm_us"] == 2 * 600 and r0["compute_us"] == 600 and r0["kernel_time_us"] == 2 * 600 + 600
    assert r0["overlap_pct"] == pytest.approx(100 * 2 * 230 / (2 * 600))
    assert r0["exposed_comm_us"] == pytest.approx(2 * (600 - 230))
    inst = j.instances
    assert inst.height == 2 and (inst["ranks"] == 2).all() and (inst["last_rank"] == 1).all()
    assert inst["skew_us"].to_list() == [500.0, 500.0] and inst["bytes"].to_list() == [4.0 * (1 << 20)] * 2
    assert inst["transfer_us"].to_list() == [100.0, 100.0]  # the last arriver did not wait
    assert inst["busbw_gb_s"][0] == pytest.approx(4 * (1 << 20) / 100e-6 / 1e9 * 2 * (2 - 1) / 2)
    s = j.stragglers
    assert s["step"].to_list() == ["ProfilerStep#0", "ProfilerStep#1"] and s["rank"].to_list() == [1, 1]
    assert s["wait_us"].to_list() == [500.0, 500.0]
    # idle per stream (HTA's idle time breakdown): rank 0's GEMM stream runs 2 x 300 µs over 1,800 µs, its NCCL
    # stream 2 x 600 over 2,100; each gap ends with a kernel launched after the stream went idle: host wait
    q = {r["stream"]: r for r in j.queues.filter(pl.col("rank") == 0).iter_rows(named=True)}
    assert (q[7]["span_us"], q[7]["busy_us"], q[7]["idle_us"], q[7]["host_wait_us"]) == (1800.0, 600.0, 1200.0, 1200.0)
    assert (q[21]["span_us"], q[21]["busy_us"], q[21]["idle_us"], q[21]["host_wait_us"]) == (2100.0, 1200.0, 900.0, 900.0)
    assert all(r["kernel_wait_us"] == r["other_idle_us"] == 0.0 for r in q.values())


def test_cli_json_csv_xlsx_and_rank_from_file_name(tmp_path, capsys):
    d = tmp_path / "job"
    d.mkdir()
    for r in range(3):
        synth_rank(d / f"trainer_rank{r}.json", r, world=3, info=False)
    assert main(["analyze", str(d), "--no-cache", "--format", "json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2]  # from the file names
    assert set(doc["ranks"][0]) >= {"rank", "path", "kernel_time_us", "compute_us", "comm_us", "exposed_comm_us", "idle_us",
                                    "overlap_pct"}
    assert {"rank", "step", "wall_us", "exposed_comm_us"} <= set(doc["rank_steps"][0])
    assert [(s["step"], s["rank"]) for s in doc["stragglers"]] == [("ProfilerStep#0", 1), ("ProfilerStep#1", 1)]
    assert doc["collectives"][0]["type"] == "allreduce" and doc["collectives"][0]["instances"] == 2
    assert main(["analyze", str(d / "trainer_rank*.json"), "--no-cache", "--workers", "1"]) == 0  # a glob
    assert "Stragglers" in capsys.readouterr().out
    # a row per step, to --top as every long table
    assert main(["analyze", str(d), "--no-cache", "--workers", "1", "--top", "1"]) == 0
    section = capsys.readouterr().out.split("Stragglers")[1].split("\n\n")[0].splitlines()
    assert section[2].split()[0] == "ProfilerStep#0" and [ln.strip() for ln in section[3:]] == ["… 1 more"]
    x = tmp_path / "job.xlsx"
    assert main(["report", str(d), "-o", str(x), "--no-cache", "-q", "--workers", "1"]) == 0
    names = zipfile.ZipFile(x).read("xl/workbook.xml").decode()
    assert all(f'name="{n}"' in names for n in ("ranks", "collectives", "stragglers"))


def test_bad_inputs(tmp_path, capsys):
    a, b = synth_rank(tmp_path / "a.json", 0), synth_rank(tmp_path / "b.json", 0)
    assert main(["analyze", str(a), str(b), "--no-cache", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "rank 0 appears twice" in err and "two jobs" not in err  # no rank in the names: no glob to suggest
    # a folder holding two jobs (ddp4_rank0 and fsdp4_rank0, as ../shared/traces/multirank): each job's glob
    two = tmp_path / "two"
    two.mkdir()
    for job in ("ddp4", "fsdp4"):
        synth_rank(two / f"{job}_rank0.json", 0)
    assert main(["analyze", str(two), "--no-cache", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert f"give one job's files: '{two / 'ddp4_rank'}*' or '{two / 'fsdp4_rank'}*'" in err and err.count("\n") == 1
    c = synth_rank(tmp_path / "c.json", 1, world=8)
    assert main(["analyze", str(a), str(c), "--no-cache", "--workers", "1"]) == 2
    assert "different jobs" in capsys.readouterr().err
    far = synth_rank(tmp_path / "far.json", 1, base=9_000_000_000)
    assert main(["analyze", str(a), str(far), "--no-cache", "--format", "json", "--workers", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stragglers"] == [] and "does not overlap in time" in doc["notes"][0]
    assert "separate runs" not in doc["notes"][0]  # same steps: perhaps hosts' clocks
    other = synth_rank(tmp_path / "other.json", 1, base=9_000_000_000, steps=4)
    assert main(["analyze", str(a), str(other), "--no-cache", "--format", "json", "--workers", "1"]) == 0
    note = json.loads(capsys.readouterr().out)["notes"][0]
    assert "separate runs" in note and "rank 0: steps 0-1; rank 1: steps 0-3" in note and "kernscope diff" in note
    v100 = synth_rank(tmp_path / "v100.json", 1, gpu="Tesla V100-SXM2-32GB")
    assert main(["analyze", str(a), str(v100), "--no-cache", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert "separate runs" in err and "Tesla V100-SXM2-32GB" in err and "NVIDIA H100" in err and len(err.splitlines()) == 1
    bad = tmp_path / "bad_rank1.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", "ts": ')
    ok1 = synth_rank(tmp_path / "ok.json", 2, world=3)
    a3 = synth_rank(tmp_path / "a3.json", 0, world=3)
    assert main(["analyze", str(a3), str(bad), str(ok1), "--no-cache", "--workers", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1 of 3 rank files failed" in err[0] and "bad_rank1.json" in err[0]
    assert main(["analyze", str(a3), str(bad), str(ok1), "--no-cache", "--strict", "--workers", "1"]) == 2
    with pytest.raises(KernscopeError, match="no file matches"):
        expand_inputs([str(tmp_path / "missing_*")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(KernscopeError, match="no trace files"):
        expand_inputs([str(tmp_path / "empty")])


def test_unreachable_scheduler_is_one_line():
    pytest.importorskip("distributed")
    with pytest.raises(KernscopeError, match="cannot reach the Dask scheduler"):
        summarize_ranks(["x.json"], RankTask(), EngineSpec("dask", "tcp://127.0.0.1:9", connect_timeout_s=1))


def test_a_small_job_runs_in_this_process_unless_workers_are_asked_for(tmp_path, monkeypatch):
    """Worker processes start in ~1 s each: a job one process summarizes in about SERIAL_JOB_S (estimated from the
    files' sizes) runs here, the same tables; given workers, or estimated longer, it gets its pool."""
    from kernscope import engine

    paths = [str(synth_rank(tmp_path / f"r{r}.json", r)) for r in range(2)]
    size = sum(os.path.getsize(p) for p in paths) / 1e6
    assert engine.serial_estimate_s(paths) == pytest.approx(0.4 + size * 0.0035)
    gz = synth_rank(tmp_path / "z.json.gz", 0)
    assert engine.serial_estimate_s([str(gz)]) == pytest.approx(0.2 + os.path.getsize(gz) / 1e6 * 15 * 0.0035)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "a.xplane.pb").write_bytes(b"x" * 2_000_000)  # a folder: the bytes of its files
    (tmp_path / "run" / "b.xplane.pb.gz").write_bytes(b"x" * 1_000_000)
    assert engine.serial_estimate_s([str(tmp_path / "run")]) == pytest.approx(0.2 + 2 * 0.010 + 1 * 0.050)
    assert engine.serial_estimate_s([str(tmp_path / "missing.json")]) is None
    in_pool: list[int] = []
    real = engine._local

    def pool(paths, task, workers, progress):
        in_pool.append(workers)
        return real(paths, task, workers, progress)

    monkeypatch.setattr(engine, "_local", pool)
    monkeypatch.setattr(engine, "usable_cores", lambda: 2)
    here = analyze_job(paths, RankTask(cache=False))
    assert in_pool == []
    asked = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=2))
    assert in_pool == [2]
    monkeypatch.setattr(engine, "SERIAL_JOB_S", 0.1)  # estimated longer than one process should take
    longer = analyze_job(paths, RankTask(cache=False))
    assert in_pool == [2, 2]
    for name in ("ranks", "rank_steps", "stragglers", "collectives"):
        assert getattr(here, name).equals(getattr(asked, name)) and getattr(here, name).equals(getattr(longer, name)), name


def test_local_processes_and_dask_local_cluster_agree(tmp_path):
    """The same job on the local process pool (2 processes) and on a real Dask LocalCluster (2 worker processes)."""
    pytest.importorskip("distributed")
    paths = [str(synth_rank(tmp_path / f"r{r}.json.gz", r, world=4, late_rank=2)) for r in range(4)]
    local = analyze_job(paths, RankTask(cache=False), EngineSpec("local", workers=2))
    dask = analyze_job(paths, RankTask(cache=False), EngineSpec("dask", workers=2))
    for name in ("ranks", "rank_steps", "instances", "stragglers", "collectives"):
        assert getattr(local, name).equals(getattr(dask, name)), name
    assert local.stragglers["rank"].to_list() == [2, 2]


# -- the real 4-rank jobs ----------------------------------------------------------------------------------
def _raw_nccl_per_step(ev: list[dict]) -> dict[str, float]:
    """NCCL kernel time per ProfilerStep from the raw JSON events: kernels starting inside the step's CPU window."""
    steps = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev
                   if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"))
    out = {}
    for i, (s, _e, name) in enumerate(steps):
        nxt = steps[i + 1][0] if i + 1 < len(steps) else float("inf")
        out[name] = sum(k["dur"] for k in ev if k.get("cat") == "kernel" and "nccl" in k["name"].lower() and s <= k["ts"] < nxt)
    return out


def _raw_overlap(events: list[dict]) -> float:
    """HTA's definition from the raw JSON events, brute force: |union(nccl) ∩ union(other kernels)| / |union(nccl)|."""
    ev = [e for e in events if e.get("cat") == "kernel"]

    def merge(iv):
        out: list = []
        for s, e in sorted(iv):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return out

    comm = merge((e["ts"], e["ts"] + e["dur"]) for e in ev if "nccl" in e["name"].lower())
    comp = merge((e["ts"], e["ts"] + e["dur"]) for e in ev if "nccl" not in e["name"].lower())
    i = j = 0
    both = 0.0
    while i < len(comm) and j < len(comp):
        lo, hi = max(comm[i][0], comp[j][0]), min(comm[i][1], comp[j][1])
        both += max(0.0, hi - lo)
        if comm[i][1] < comp[j][1]:
            i += 1
        else:
            j += 1
    return 100.0 * both / sum(e - s for s, e in comm)


@needs_multi
@pytest.mark.parametrize("job", ["ddp4", "fsdp4"])
def test_real_jobs_straggler_and_overlap(job):
    paths = sorted(str(p) for p in MULTI.glob(f"{job}_rank*.json.gz"))
    j = analyze_job(paths, RankTask(), EngineSpec(workers=2))
    raw, overlap = {}, {}
    for r, p in enumerate(paths):  # each rank's JSON read once (the standard library's reader: seconds a rank)
        events = json.load(gzip.open(p))["traceEvents"]
        raw[r], overlap[r] = _raw_nccl_per_step(events), _raw_overlap(events)
        del events
    for row in j.stragglers.iter_rows(named=True):
        least = min(raw, key=lambda r: raw[r][row["step"]])  # the rank that waited least is the one waited for
        assert row["rank"] == least == 2, (row, {r: raw[r][row["step"]] for r in raw})
        assert row["wait_us"] > 10_000  # others waited 10+ ms per step for it
    assert j.stragglers.height == 4
    for r, p in enumerate(paths):
        ours = j.ranks.filter(pl.col("rank") == r)["overlap_pct"][0]
        assert ours == pytest.approx(overlap[r], abs=1e-3)  # float µs in the brute force, exact ns here
    inst = j.instances
    assert (inst["ranks"] == 4).all() and not inst["size_mismatch"].any()
    assert set(inst["type"]) == ({"allreduce"} if job == "ddp4" else {"allgather", "reduce_scatter"})
    # idle per stream: the three kinds add up to the stream's idle time; the straggler's compute stream (7) waits
    # on its own host (the injected delay), not on other streams
    q = j.queues
    assert (q["host_wait_us"] + q["kernel_wait_us"] + q["other_idle_us"] - q["idle_us"]).abs().max() < 1e-6
    s7 = q.filter((pl.col("rank") == 2) & (pl.col("stream") == 7)).row(0, named=True)
    assert s7["host_wait_us"] > 0.8 * s7["idle_us"] > 0  # ddp4: 45.1 of 52.6 ms; fsdp4: 118.2 of 120.9 ms


@pytest.mark.parametrize("nelems, group", [(1 << 62, 2), (-1024, 2), (1 << 20, 0), (1 << 20, 1 << 62)])
def test_impossible_collective_sizes_are_unknown_and_noted(tmp_path, nelems, group):
    """#31: nelems near 2^62 wrapped Int64 (24 bytes, busbw 0.0), negative nelems gave negative GB/s, a group
    size of 0 or 2^62 changed the bus-bandwidth factor. Such values are unknown, with a note."""
    paths = []
    for r in range(2):
        p = synth_rank(tmp_path / f"rank{r}.json", r)
        doc = json.loads(p.read_text())
        for e in doc["traceEvents"]:
            if e.get("name") == "record_param_comms":
                e["args"].update({"In msg nelems": nelems, "Out msg nelems": nelems, "Group size": group})
        p.write_text(json.dumps(doc))
        paths.append(str(p))
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    assert any("impossible sizes" in n for n in j.notes), j.notes
    inst = j.instances
    assert inst.height == 2 and (inst["ranks"] == 2).all()
    if group == 2:  # the sizes are unknown: no bytes, no bandwidth
        assert inst["bytes"].null_count() == 2 and inst["busbw_gb_s"].null_count() == 2
    else:  # the group size is unknown: the job's 2 ranks stand in, bytes stay exact
        assert inst["expected_ranks"].to_list() == [2, 2] and inst["bytes"].to_list() == [4.0 * (1 << 20)] * 2
    assert (inst["busbw_gb_s"].drop_nulls() > 0).all()
    assert j.stragglers["wait_us"].to_list() == [500.0, 500.0]


def test_a_job_without_gpu_activity_says_why_per_rank_and_exits_3(tmp_path, capsys):
    """Ranks whose traces hold no GPU work (a profiler schedule exported after its last cycle: one synchronize each)
    printed a table of dashes with no word of why, exit 0; each rank's reason is now a note, and a job where no
    rank has GPU activity exits 3. A job where one rank has it keeps its results (exit 0) and notes the other."""
    for r in range(2):
        write_trace(tmp_path / f"rank{r}.json", [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 10, "dur": 5}],
            distributedInfo={"rank": r, "world_size": 2})
    assert main(["analyze", str(tmp_path), "--no-cache", "--format", "json"]) == 3
    out, err = capsys.readouterr()
    notes = json.loads(out)["notes"]
    assert [n.split(":")[0] for n in notes] == ["rank 0", "rank 1"] and all("launches no GPU work" in n for n in notes)
    assert "no rank of the job has GPU activity (2 ranks" in err
    synth_rank(tmp_path / "rank1.json", 1)
    assert main(["analyze", str(tmp_path), "--no-cache", "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert any(n.startswith("rank 0: no GPU activity") for n in notes) and not any(n.startswith("rank 1") for n in notes)


def test_step_strips_of_many_steps_fit_the_terminal(tmp_path, capsys, monkeypatch):
    """A job of 400 steps: the step-time strip (one character a step) did not fit 120 columns and was dropped
    ("not shown at this width: steps, min, max"); its cells now hold runs of consecutive steps, each the longest
    of its run, so the strip fits and a slow step still shows."""
    from kernscope.engine import EngineSpec, analyze_job
    from kernscope.render.ranks import heat_rows

    paths = [str(synth_rank(tmp_path / f"rank{r}.json", r, steps=400)) for r in range(2)]
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    _, rows, per = heat_rows(j, "wall_us", 100)
    assert per == 4 and all(len(r[1]) == 100 for r in rows)
    for width in (60, 120):
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["analyze", *paths, "--no-cache", "--workers", "1"]) == 0
        out = capsys.readouterr().out
        strips = [line for line in out.splitlines() if re.match(r"^\s+[01]\s+[▁▂▃▄▅▆▇█·]{8,}\s", line)]
        assert len(strips) == 4 and "a cell, the longest)" in out, out  # two ranks x step time, exposed comm
        assert max(len(line) for line in out.splitlines()) <= width


def test_the_api_runs_a_job_from_a_script_without_a_main_guard_or_from_stdin(tmp_path):
    """Python's spawn runs the caller's main script again in every worker: `analyze_job` from a script read on stdin
    failed every rank ("the worker analyzing it died (out of memory?)"), and a script without an `if __name__ ==
    "__main__":` guard would start the job again in each worker. The workers no longer import the caller's main."""
    import subprocess
    import sys

    paths = [str(synth_rank(tmp_path / f"rank{r}.json", r)) for r in range(2)]
    engines = ["EngineSpec(workers=2)"] + (["EngineSpec('dask', workers=2)"] if _has_dask() else [])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    for engine in engines:  # a process pool; a Dask LocalCluster, whose nannies spawn its workers
        script = ("from kernscope.engine import EngineSpec, analyze_job\n"
                  f"j = analyze_job({paths!r}, spec={engine})\n"
                  "print('straggler', j.stragglers['rank'].to_list(), 'failures', len(j.failures))\n")
        (tmp_path / "job.py").write_text(script)  # no main guard
        for argv, stdin in (([sys.executable, str(tmp_path / "job.py")], None), ([sys.executable, "-"], script)):
            r = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180)
            assert r.returncode == 0, r.stderr[-2000:]
            assert r.stdout.strip() == "straggler [1, 1] failures 0", (engine, argv, r.stdout, r.stderr[-2000:])


def _has_dask() -> bool:
    import importlib.util

    return importlib.util.find_spec("distributed") is not None


def test_the_cycles_of_one_process_are_named_not_taken_for_ranks(tmp_path, capsys):
    """torch.profiler.tensorboard_trace_handler writes a file per cycle of ``schedule(..., repeat=N)``, named
    ``{host}_{pid}.{time}.pt.trace.json`` (time in ns in torch 2.11, ms before): a folder of one process's cycles was refused as "no rank ... (a folder of
    benchmark traces? add --bench)"; it is named as the profiler's cycles, with the newest to analyze. Two cycles of a
    DDP job's ranks (a rank twice) are named so too."""
    data = Path(__file__).parent / "data"
    one = data / "cycles_h200"  # recorded by examples/record_profiler_options.py --which cycles (repeat=2, H200)
    assert main(["analyze", str(one), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "2 traces of one process (vm_735), the profiler's cycles" in err and "--bench" not in err
    assert f"kernscope analyze {one / 'vm_735.1796043740873354260.pt.trace.json.gz'}" in err
    ddp = tmp_path / "ddp"
    ddp.mkdir()
    for rank, pid in ((0, 11), (1, 12)):
        for ms in ("1764500000001", "1764500000502"):
            (ddp / f"vm_{pid}.{ms}.pt.trace.json.gz").write_bytes((data / "ddp2_h200" / f"rank{rank}.pt.trace.json.gz").read_bytes())
    assert main(["analyze", str(ddp), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "rank 0 appears twice" in err and "two cycles of one process's profiler" in err


@pytest.mark.parametrize("options", [["--engine", "dask"], ["--workers", "2", "--strict"], ["--scheduler", "tcp://h:1"]])
def test_a_jobs_options_given_for_one_trace_are_refused(tmp_path, capsys, options):
    """``--engine dask``, ``--scheduler``, ``--workers`` and ``--strict`` are a job's: given for one trace (or a folder of
    benchmark traces) they were ignored without a word; now one line and exit 2, nothing analyzed."""
    one = Path(__file__).parent / "data" / "activities_h200" / "cpu_cuda.pt.trace.json.gz"
    assert main(["analyze", str(one), "--no-cache", *options]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "of several traces (the ranks of one job), not of one trace's analysis" in captured.err
    assert main(["report", str(one), "-o", str(tmp_path / "r.html"), *options]) == 2 and not (tmp_path / "r.html").exists()
    assert "not of one trace's analysis" in capsys.readouterr().err


def test_a_job_whose_collectives_carry_seq_is_matched_by_it(tmp_path):
    """c10d's ``Seq`` on every collective: instances keyed by it, each in the step its first rank ran it in (the
    Seq path had never run on a real trace, and raised ColumnNotFoundError: 'step' until session 45)."""
    paths = []
    for r in range(2):
        p = synth_rank(tmp_path / f"r{r}.json", r)
        doc = json.loads(p.read_text())
        seqs = iter(range(7, 100))
        for e in doc["traceEvents"]:
            if e["name"] == "record_param_comms":
                e["args"]["Seq"] = next(seqs)
        p.write_text(json.dumps(doc))
        paths.append(str(p))
    j = analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1))
    inst = j.instances.sort("key")
    assert inst["key"].to_list() == [7, 8] and inst["step"].to_list() == [0, 1] and (inst["ranks"] == 2).all()
    assert inst["skew_us"].to_list() == [500.0, 500.0] and j.stragglers["rank"].to_list() == [1, 1]
    assert j.waits.filter(pl.col("rank") == 0)["wait_us"].to_list() == [500.0, 500.0]


def test_a_statement_that_is_not_a_query_of_a_job_is_refused_before_its_ranks_are_read(tmp_path, capsys, monkeypatch):
    """``kernscope sql "DROP ..." DIR``: one line naming the job's tables (:data:`JOB_TABLES`, the names
    ``JobAnalysis.tables`` gives), exit 2, and no rank read."""
    from kernscope import commands
    from kernscope.analyze.ranks.job import JOB_TABLES

    def no_job(*a, **k):
        raise AssertionError("the ranks were read")

    monkeypatch.setattr(commands.Session, "job", no_job)
    d = tmp_path / "job"
    d.mkdir()
    for r in range(2):
        synth_rank(d / f"rank{r}.json", r)
    assert main(["sql", "DROP TABLE job.ranks", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "only queries run here" in err[0] and "job.ranks, job.rank_steps" in err[0]
    paths = [str(synth_rank(tmp_path / f"r{r}.json", r)) for r in range(2)]
    assert list(analyze_job(paths, RankTask(cache=False), EngineSpec(workers=1)).tables()) == list(JOB_TABLES)
