"""Jobs of the parallelisms beyond data parallel, recorded on two H200s (``examples/record_parallel_jobs.py`` ->
``tests/data/parallel_h200``): a pipeline (point-to-point transfers), tensor parallelism (all-reduces of the
activations) and a mixture of experts (uneven all-to-all). Each value is checked against the raw JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from kernscope.analyze.ranks import RankTask
from kernscope.cli import main
from kernscope.engine import EngineSpec, analyze_job
from kernscope.files import expand_inputs, not_a_trace

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
