"""What PyTorch Lightning's profiler writes, recorded on an H200 (``examples/record_lightning.py`` ->
``tests/data/lightning_h200``, the folder as Lightning leaves it): a trace per profiled action of one process
(``training_step``, ``validation_step``) and a text summary."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from kernscope import load
from kernscope.analyze.summary import analyze
from kernscope.cli import main

DATA = Path(__file__).parent / "data" / "lightning_h200"
TRAIN = DATA / "fit-mlp-[Strategy]SingleDeviceStrategy.training_step.1796059737475277129.pt.trace.json.gz"


def test_the_folder_is_named_as_one_process_actions_not_refused_as_rankless(capsys):
    """It was refused as "no rank ... (a folder of benchmark traces? add --bench)"."""
    assert main(["analyze", str(DATA), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--bench" not in err and err.count("error:") == 1
    assert ("2 traces of one process written by PyTorch Lightning's profiler, one per profiled action "
            "(training_step, validation_step), not the ranks of a job") in err
    assert f"kernscope analyze '{TRAIN}'" in err


def test_the_training_steps_trace_against_the_raw_json():
    """Lightning's profiler opens ProfilerStep#2 once before ProfilerStep#1 (0.27-26.2 ms) and again after it: the
    step was the hull of both, a 183 ms window over all of step 1. Each step is now its annotations' last run: step 2
    is the 7.4 ms after step 1, like steps 3 and 4."""
    ev = json.loads(gzip.decompress(TRAIN.read_bytes()))["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    ann = sorted((e["ts"], e["name"], e["dur"]) for e in ev
                 if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    assert [n for _, n, _ in ann] == ["ProfilerStep#2", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3",
                                      "ProfilerStep#4"]
    trace = load(TRAIN, cache=False)
    s = analyze(trace)
    assert s.steps["name"].to_list() == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    windows = [(r["start_us"], r["end_us"]) for r in s.steps.iter_rows(named=True)]
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:]))  # (the steps no longer overlap)
    assert [round(r["cpu_duration_us"], 3) for r in s.steps.iter_rows(named=True)] == [
        round(d, 3) for _, _, d in ann[1:]]
    assert s.kernels["count"].sum() == len(kernels) == 173
    assert s.steps["kernel_count"].to_list() == [45, 37, 37, 37]
    # the earlier run's GPU work is in no step, and said to be there (it was "gpu outside steps 35", unexplained)
    launch = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    a, b = ann[0][0], ann[0][0] + ann[0][2]
    early = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
             and a <= launch.get(e["args"].get("correlation"), -1) <= b]
    assert trace.unlinked["gpu_outside_steps"] == trace.unlinked["gpu_in_earlier_step_runs"] == len(early) == 35


def test_a_ranks_two_actions_are_named(tmp_path, capsys):
    """Under DDP each rank's traces carry its rank: a rank's training_step and validation_step traces read "rank 0
    appears twice" with no word of why; the message now says Lightning writes one per action."""
    job = tmp_path / "job"
    job.mkdir()
    ddp = Path(__file__).parent / "data" / "ddp2_h200"
    for rank in (0, 1):
        raw = (ddp / f"rank{rank}.pt.trace.json.gz").read_bytes()
        for action, t in (("training_step", "1796059737475277129"), ("validation_step", "1796059737520761757")):
            (job / f"fit-mlp-{rank}-[Strategy]DDPStrategy.{action}.{t}{rank}.pt.trace.json.gz").write_bytes(raw)
    assert main(["analyze", str(job), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert "rank 0 appears twice" in err and "PyTorch Lightning's profiler writes a trace per profiled action" in err
    assert "*training_step*" in err or "*validation_step*" in err


DDP = DATA / "ddp"


def test_a_ddp_fits_folder_is_a_job_of_two_ranks_against_the_raw_json(capsys):
    """Lightning's DDP strategy on two H200s (``record_lightning.py --devices 2``): each rank's profiler wrote one
    trace (named after ``validation_step``, holding the training steps too) into one folder; the folder reads as a
    job of 2 ranks, each rank's steps and all-reduces as its raw JSON has them."""
    assert main(["analyze", str(DDP), "--no-cache", "--format", "json"]) == 0
    job = json.loads(capsys.readouterr().out)
    assert job["world_size"] == 2 and [r["rank"] for r in job["ranks"]] == [0, 1]
    size = {"Float": 4, "Long": 8, "Int": 4, "Byte": 1}
    for r in job["ranks"]:
        ev = json.loads(gzip.decompress(Path(r["path"]).read_bytes()))["traceEvents"]
        assert f"fit-mlp-{r['rank']}-[Strategy]DDPStrategy." in r["path"]
        steps = {e["name"] for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")}
        assert r["steps"] == len(steps) == 18
        comms = [e["args"] for e in ev if e.get("cat") == "cpu_op" and e["name"] == "record_param_comms"]
        reduces = [a for a in comms if a["Collective name"] == "allreduce"]
        (allreduce,) = [c for c in job["collectives"] if c["type"] == "allreduce"]
        assert allreduce["instances"] == len(reduces) == 25
        assert allreduce["bytes"] == sum(a["In msg nelems"] * size[a["dtype"]] for a in reduces)
