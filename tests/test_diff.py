"""kernscope diff: totals, categories, kernels, ops, loose matching, steps, and HTA's TraceDiff numbers."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES, write_trace

from kernscope import load
from kernscope.analyze.diff import Side, diff, loose_name
from kernscope.cli import main
from kernscope.render.diff import verdict_text

GEMM_A = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
GEMM_B = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)"
ADD8 = ADD.replace("<4,", "<8,")


def _trace(path, kernels, device="NVIDIA H100 80GB HBM3", steps=1):
    """kernels: (op name, kernel name, duration µs) launched in order, repeated in each of ``steps`` steps."""
    ev, t, corr = [], 1000, 1
    for s in range(steps):
        t0 = t
        for op, k, dur in kernels:
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t, "dur": 30,
                       "args": {"External id": corr}})
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5,
                       "dur": 10, "args": {"External id": corr, "correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": k, "pid": 0, "tid": 7, "ts": t + 20, "dur": dur,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})
            t += 40 + dur
            corr += 1
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t0 - 1,
                   "dur": t - t0 + 2, "args": {}})
        t += 100
    return write_trace(path, ev, deviceProperties=[{"id": 0, "name": device}])


def test_diff_exact_values(tmp_path):
    a = _trace(tmp_path / "a.json", [("aten::mm", GEMM_A, 100), ("aten::add", ADD, 10), ("aten::add", ADD, 10)])
    b = _trace(tmp_path / "b.json", [("aten::mm", GEMM_A, 150), ("aten::add", ADD, 10), ("aten::mul", "mul_kernel", 5)])
    d = diff(Side(load(a, cache=False)), Side(load(b, cache=False)))
    assert d.total["a_us"] == 120 and d.total["b_us"] == 165 and d.total["delta_us"] == 45
    assert d.total["delta_pct"] == pytest.approx(37.5)
    k = {(r["name"], r["launcher"]): r for r in d.kernels.iter_rows(named=True)}
    assert k[(GEMM_A, "aten::mm")]["delta_us"] == 50 and k[(GEMM_A, "aten::mm")]["only"] == ""
    assert k[(ADD, "aten::add")]["a_count"] == 2 and k[(ADD, "aten::add")]["b_count"] == 1
    assert k[("mul_kernel", "aten::mul")]["only"] == "b" and k[("mul_kernel", "aten::mul")]["a_us"] == 0
    assert d.kernels["delta_us"].abs().to_list() == sorted(d.kernels["delta_us"].abs().to_list(), reverse=True)
    cats = {r["category"]: r["delta_us"] for r in d.categories.iter_rows(named=True)}
    assert cats["GEMM"] == 50 and cats["Elementwise"] == -5  # mul_kernel is elementwise too
    assert verdict_text(d).startswith("B is 45.0 µs (37.5%) slower than A in GPU time; GEMM +50.0 µs")
    ops = {r["name"]: r for r in d.ops.iter_rows(named=True)}
    assert ops["aten::add"]["a_count"] == 2 and ops["aten::add"]["a_gpu_us"] == 20 and ops["aten::mul"]["only"] == "b"
    same = diff(Side(load(a, cache=False)), Side(load(a, cache=False)))
    assert same.total["delta_us"] == 0 and verdict_text(same).startswith("B and A take the same GPU time")
    assert (same.kernels["delta_us"] == 0).all()


def test_loose_matching(tmp_path):
    assert loose_name(GEMM_A) == loose_name(GEMM_B)
    assert loose_name(ADD) == loose_name(ADD8) == "at::native::vectorized_elementwise_kernel<…>"
    assert loose_name("triton_red_fused_add_mean_12") == loose_name("triton_red_fused_add_mean_3")
    assert loose_name("ampere_sgemm_128x64_nn") != loose_name("volta_sgemm_128x64_nn")
    a = _trace(tmp_path / "a.json", [("aten::mm", GEMM_A, 100), ("aten::add", ADD, 10)])
    b = _trace(tmp_path / "b.json", [("aten::mm", GEMM_B, 80), ("aten::add", ADD8, 10)])
    ta, tb = load(a, cache=False), load(b, cache=False)
    exact = diff(Side(ta), Side(tb))
    assert set(exact.kernels["only"].to_list()) == {"a", "b"} and exact.kernels.height == 4
    loose = diff(Side(ta), Side(tb), match="loose")
    assert loose.kernels.height == 2 and set(loose.kernels["only"].to_list()) == {""}
    gemm = loose.kernels.filter(loose.kernels["launcher"] == "aten::mm").row(0, named=True)
    assert gemm["delta_us"] == -20 and gemm["variants"] == 1


def test_step_given_twice_is_a_steps_and_bs(tmp_path, capsys):
    """``A A --step 0 --step 2`` compares step 0 with step 2, as ``--step 0 --step-b 2`` does (it kept the last
    ``--step`` alone and compared step 2 with itself); a third ``--step``, or two beside ``--step-b``, is refused."""
    a = _trace(tmp_path / "a.json", [("aten::mm", GEMM_A, 100)], steps=3)
    assert main(["diff", str(a), str(a), "--step", "0", "--step", "2", "--no-cache", "--format", "json"]) == 0
    twice = json.loads(capsys.readouterr().out)
    assert (twice["a"]["step"], twice["b"]["step"]) == (0, 2)
    assert main(["diff", str(a), str(a), "--step", "0", "--step-b", "2", "--no-cache", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == twice
    for extra in (["--step", "1"], ["--step-b", "1"]):
        assert main(["diff", str(a), str(a), "--step", "0", "--step", "2", *extra, "--no-cache"]) == 2
        err = capsys.readouterr().err
        assert "--step" in err and "give A's step and B's" in err and "Traceback" not in err


def test_cli_two_steps_of_one_trace_json_and_devices(tmp_path, capsys):
    a = _trace(tmp_path / "a.json", [("aten::mm", GEMM_A, 100)], steps=3)
    assert main(["diff", str(a), str(a), "--step", "0", "--step-b", "2", "--no-cache", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) >= {"a", "b", "total", "categories", "kernels", "ops", "verdict"}
    assert doc["a"]["step"] == 0 and doc["b"]["step"] == 2 and doc["total"]["delta_us"] == 0
    assert set(doc["kernels"][0]) >= {"name", "launcher", "a_count", "b_count", "a_us", "b_us", "delta_us"}
    assert set(doc["categories"][0]) == {"category", "a_count", "b_count", "a_us", "b_us", "delta_us"}
    v = _trace(tmp_path / "v.json", [("aten::mm", "volta_sgemm_128x64_nn", 300)], device="Tesla V100-SXM2-16GB", steps=2)
    assert main(["diff", str(a), str(v), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "different devices" in out and "A has 3 steps and B 2" in out and "slower than A" in out
    assert main(["diff", str(a), str(v), "--step", "7", "--no-cache"]) == 2
    assert "no step 7" in capsys.readouterr().err
    x = tmp_path / "d.xlsx"
    assert main(["diff", str(a), str(v), "--no-cache", "-q", "-o", str(x)]) == 0
    wb = zipfile.ZipFile(x).read("xl/workbook.xml").decode()
    assert all(f'name="{s}"' in wb for s in ("diff_summary", "diff_categories", "diff_kernels", "diff_ops"))


HTA_A = TRACES / "hta" / "a100_8rank_rank3_control.json.gz"
HTA_B = TRACES / "hta" / "v100_2rank_rank1_test.json.gz"


@pytest.mark.skipif(not (HTA_A.exists() and HTA_B.exists()), reason="HTA trace-diff pair not present (../shared/traces)")
def test_matches_hta_tracediff_on_its_own_pair():
    """HTA's TraceDiff.compare_traces on ProfilerStep#1009 of each (GPU kernels): 197 kernel names, kernel time
    61,702 µs (control) and 122,197 µs (test); benchmarks/diff_vs_hta.py compares every name."""
    d = diff(Side(load(HTA_A), 1009), Side(load(HTA_B), 1009))
    assert d.kernels["name"].n_unique() == 197
    assert float(d.kernels["a_us"].sum()) == pytest.approx(61_702.0)
    assert float(d.kernels["b_us"].sum()) == pytest.approx(122_197.0)
    assert "different devices" in d.notes[0]


def test_diff_of_two_ranks_compares_compute_and_waiting_not_gpu_time(tmp_path):
    """Rank 1 arrives 500 µs late at every all-reduce, so rank 0 waits in its NCCL kernel: by GPU time rank 1 is
    'faster'. The verdict names them as ranks of one job, compares compute, and names rank 1 as the later one."""
    from test_ranks import synth_rank

    r0, r1 = synth_rank(tmp_path / "rank0.json", 0), synth_rank(tmp_path / "rank1.json", 1)
    d = diff(Side(load(str(r0), cache=False)), Side(load(str(r1), cache=False)))
    comm = d.categories.filter(d.categories["category"] == "Communication").row(0, named=True)
    assert comm["delta_us"] == pytest.approx(-1000.0)  # 2 steps x 500 µs less waiting on rank 1
    v = verdict_text(d)
    assert v.startswith("A and B are ranks 0 and 1 of one job") and "faster" not in v
    assert "compute (kernels other than communication) the same (600.0 µs, +0.0%)" in v
    assert "communication -1.0 ms" in v and "B waits less, so of the two rank 1 (B) arrives later" in v
    # the same files without rank information: no rank verdict, but the waiting is still separated
    s0 = synth_rank(tmp_path / "a.json", 0, info=False)
    s1 = synth_rank(tmp_path / "b.json", 1, info=False)
    v2 = verdict_text(diff(Side(load(str(s0), cache=False)), Side(load(str(s1), cache=False))))
    assert v2.startswith("B is 1.0 ms") and "faster than A in GPU time: compute" in v2
    assert "so a side that waits less is not faster" in v2


@pytest.mark.skipif(not (TRACES / "multirank" / "ddp4_rank2.json.gz").exists(), reason="needs ../shared/traces")
def test_diff_of_real_ranks_names_the_straggler_not_a_faster_rank():
    """DDP job with an injected straggler (rank 2, per `analyze` of the job): by GPU time rank 2 is 64 ms 'faster'
    than rank 0 because it waits less in NCCL; the verdict says it arrives later."""
    a = load(str(TRACES / "multirank" / "ddp4_rank0.json.gz"))
    b = load(str(TRACES / "multirank" / "ddp4_rank2.json.gz"))
    d = diff(Side(a), Side(b))
    comm = d.categories.filter(d.categories["category"] == "Communication").row(0, named=True)
    assert comm["a_us"] > 4 * comm["b_us"]  # rank 0 waits for rank 2
    assert verdict_text(d).startswith("A and B are ranks 0 and 2 of one job")
    assert "rank 2 (B) arrives later" in verdict_text(d) and "faster" not in verdict_text(d)


def test_diff_rows_have_one_order():
    """Rows that tie on |B - A| and name (one kernel from two launchers) came out in either order from run to run
    (polars' group-by order); the launcher breaks the tie, so every row's place is fixed by its keys."""
    from pathlib import Path

    import polars as pl

    from kernscope.analyze.diff import Side, diff

    example = Path(__file__).resolve().parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    t = load(str(example), cache=False)
    k = diff(Side(t, 2), Side(t, 3)).kernels
    assert k.select("name", "launcher").is_unique().all()
    again = k.sort([pl.col("delta_us").abs(), "name", "launcher"], descending=[True, False, False])
    assert k.equals(again)
    assert k.filter(pl.col("name").is_duplicated()).height  # the example has such ties: the test can fail


def test_verdict_with_equal_communication_names_no_waiting_side():
    """Equal communication time on both sides read "communication -0.0 µs (... a side that waits less ...)" (the
    same trace diffed with itself) and, for two ranks, named one of them as arriving later. It reads "the same"."""
    from kernscope.render.diff import verdict

    cats = pl.DataFrame({"category": ["Communication", "GEMM"], "a_us": [79_064.0, 91_005.0],
                         "b_us": [79_064.0, 91_005.0], "delta_us": [0.0, 0.0]})
    total = {"a_us": 170_069.0, "b_us": 170_069.0, "delta_us": 0.0, "delta_pct": 0.0}
    v = verdict(total, cats)
    assert v == ("B and A take the same GPU time (170.1 ms, +0.0%): compute (kernels other than communication) the "
                 "same (91.0 ms, +0.0%); communication the same (79.1 ms, +0.0%)")
    r = verdict(total, cats, ranks=(0, 3))
    assert r.startswith("A and B are ranks 0 and 3 of one job") and r.endswith("communication the same (79.1 ms, +0.0%)")
    assert "arrives later" not in r and "-0.0" not in r


def test_diff_by_library_on_real_recordings(tmp_path, capsys):
    """``diff.libraries``: who wrote the kernels of each side. Inductor's max-autotune against cuDNN attention and cuBLAS
    on an H200 (``tests/data/inductor_h200``): Triton's GPU time goes, cuDNN's and cuBLAS's come; each side's column is
    that side's ``analysis.libraries``."""
    from kernscope.analyze.summary import analyze

    data = Path(__file__).parent / "data" / "inductor_h200"
    pa, pb = data / "mm_autotune.pt.trace.json.gz", data / "sdpa.pt.trace.json.gz"
    ta, tb = load(pa, cache=False), load(pb, cache=False)
    d = diff(Side(ta), Side(tb))
    lib = {r["library"]: r for r in d.libraries.iter_rows(named=True)}
    for side, t in (("a", ta), ("b", tb)):
        mine = {r["library"]: r for r in analyze(t).libraries.iter_rows(named=True)}
        assert {k for k, r in lib.items() if r[f"{side}_count"]} == set(mine)
        for k, r in mine.items():
            assert lib[k][f"{side}_count"] == r["count"] and lib[k][f"{side}_us"] == pytest.approx(r["total_us"], rel=1e-12)
    assert lib["Triton"]["delta_us"] < -3000 and lib["cuDNN"]["a_count"] == 0 and lib["cuDNN"]["delta_us"] > 400
    assert sum(r["delta_us"] for r in lib.values()) == pytest.approx(d.total["delta_us"], rel=1e-9)
    assert d.libraries["delta_us"].abs().to_list() == sorted(d.libraries["delta_us"].abs().to_list(), reverse=True)
    assert main(["diff", str(pa), str(pb), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["library"] for r in doc["libraries"]][:2] == ["Triton", "cuDNN"]
    assert main(["diff", str(pa), str(pb), "--no-cache"]) == 0
    assert "By library (who wrote the kernel)" in capsys.readouterr().out
    assert main(["diff", str(pa), str(pb), "-o", str(tmp_path / "d.xlsx"), "--no-cache"]) == 0
    with zipfile.ZipFile(tmp_path / "d.xlsx") as z:
        assert "diff_libraries" in z.read("xl/workbook.xml").decode()
