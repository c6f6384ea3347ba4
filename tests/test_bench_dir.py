"""analyze --bench DIR: folders of per-(input, impl) traces, kernscope's and TritonBench's layouts."""

from __future__ import annotations

import json
import os

import pytest
from conftest import write_trace

from kernscope.cli import main

FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >(int)"
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"


def bench_trace(path, n, kernel_us, impl):
    """Warm-up step 4 and profiled step 5: a flush (aten::zero_) then one GEMM of n x n x n (aten::mm with shapes,
    or a Triton kernel with no modeled op)."""
    ev, corr = [], 100
    for step, t0 in ((4, 0), (5, 1000)):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 1, "ts": t0,
                   "dur": 900})
        for i, (op, kname, dur, args) in enumerate((
            ("aten::zero_", FILL, 20, {}),
            ("aten::mm" if impl == "aten" else "triton_matmul", GEMM if impl == "aten" else "matmul_kernel_0d1d2d", kernel_us,
             {"Input Dims": [[n, n], [n, n]], "Input type": ["c10::BFloat16"] * 2, "Concrete Inputs": ["", ""]}
             if impl == "aten" else {}),
        )):
            ts = t0 + 10 + 30 * i
            corr += 1
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": ts, "dur": 20,
                       "args": {"External id": corr, **args}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts + 5,
                       "dur": 5, "args": {"External id": corr, "correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": kname, "pid": 0, "tid": 7, "ts": t0 + 100 + 200 * i, "dur": dur,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_trace(path, ev, deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}])


TIMES = {("aten", 0): 40.0, ("triton", 0): 50.0, ("aten", 1): 300.0, ("triton", 1): 250.0}
SIZES = {0: 1024, 1: 2048}


def _bench_folder(root, layout: str):
    """The cells of :data:`TIMES` under ``root`` in ``layout`` (kernscope bench's or TritonBench's)."""
    for (impl, i), us in TIMES.items():
        if layout == "kernscope":
            p = root / "gemm" / impl / f"input_{i}.json.gz"
        else:
            p = root / "gemm" / "kineto_traces" / f"{impl}_{i}" / f"host_123.{1700000000 + i}.pt.trace.json.gz"
        bench_trace(p, SIZES[i], us, impl)
    return root


@pytest.mark.parametrize("layout", ["kernscope", "tritonbench"])
def test_bench_dir_both_layouts(tmp_path, capsys, layout):
    root = _bench_folder(tmp_path / "out", layout)
    assert main(["analyze", "--bench", str(root), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cells = {(c["impl"], c["input"]): c for c in doc["cells"]}
    assert set(cells) == set(TIMES) and doc["layout"] == layout
    for (impl, i), us in TIMES.items():
        c = cells[(impl, i)]
        assert c["op"] == "gemm" and c["step"] == "ProfilerStep#5" and c["path"].endswith(".json.gz")
        assert c["flush_kernels"] == [FILL] and len(c["compute_kernels"]) == 1
        assert c["kernel_time_us"] == us
        flops = 2.0 * SIZES[i] ** 3
        assert c["flops"] == flops and c["flops_from"] == "aten"  # the Triton impl is rated with the problem's FLOPs
        assert c["tflops_per_s"] == pytest.approx(flops / (us * 1e-6) / 1e12, rel=1e-3)
        assert c["bound"] == "compute" and c["pct_of_peak"] == pytest.approx(100 * c["tflops_per_s"] / 989.4, rel=1e-3)
    assert cells[("aten", 0)]["fastest"] and not cells[("triton", 0)]["fastest"]
    assert cells[("triton", 1)]["fastest"] and cells[("aten", 1)]["vs_fastest"] == pytest.approx(1.2)
    assert main(["analyze", "--bench", str(root), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "* aten" in text and "* triton" in text and "1.25x" in text
    assert main(["analyze", "--bench", str(root), "--format", "csv", "--no-cache"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("op,input,impl,path")
    assert main(["report", str(root), "--bench", "-o", str(tmp_path / "csv"), "--no-cache", "-q"]) == 0
    rows = (tmp_path / "csv" / "cells.csv").read_text().splitlines()
    assert len(rows) == 1 + len(TIMES) and FILL in rows[1]  # lists flattened into one cell


def test_bench_dir_bad_input(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["analyze", "--bench", str(tmp_path / "empty"), "--no-cache"]) == 2
    assert "no benchmark traces found" in capsys.readouterr().err
    assert main(["analyze", str(tmp_path / "empty"), "--no-cache"]) == 2
    assert "no trace files" in capsys.readouterr().err
    root = tmp_path / "b"
    for impl in ("aten", "triton"):
        bench_trace(root / "gemm" / impl / "input_0.json.gz", 256, 10.0, impl)
    assert main(["analyze", str(root), "--no-cache", "--no-bench"]) == 2  # taken for a job's ranks, on request
    assert "add --bench" in capsys.readouterr().err


@pytest.mark.parametrize("layout", ["kernscope", "tritonbench"])
def test_a_folder_of_benchmark_traces_only_is_found_without_bench(tmp_path, capsys, layout):
    """``kernscope analyze kernscope-bench`` (the folder ``kernscope bench`` just wrote) was refused as a job without
    ranks until session 68, "add --bench"; a folder that holds benchmark traces only is now one by default, in either
    layout (TritonBench's with an earlier run's trace beside a cell's newest); a folder with any other trace is not."""
    root = _bench_folder(tmp_path / "out", layout)
    if layout == "tritonbench":  # an earlier run's trace of a cell, older than its newest
        old = bench_trace(root / "gemm" / "kineto_traces" / "aten_0" / "host_123.1600000000.pt.trace.json.gz", 64, 1.0, "aten")
        os.utime(old, (1, 1))
    assert main(["analyze", "--bench", str(root), "--format", "json", "--no-cache"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(root), "--format", "json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out) == said and len(said["cells"]) == len(TIMES)
    assert main(["analyze", str(root), "--no-cache", "--workers", "1"]) == 2  # a job's option, for a benchmark folder
    assert "not of a folder of benchmark traces" in capsys.readouterr().err
    bench_trace(root / "rank0.json.gz", 256, 10.0, "aten")  # another trace in the folder: not a benchmark folder
    assert main(["analyze", str(root), "--no-cache", "-q"]) == 2  # (taken for a job, refused as one in one line)
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and ("add --bench" in err if layout == "kernscope" else "traces of one process" in err)
