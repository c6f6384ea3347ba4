"""The CUDA libraries PyTorch and XLA call beyond GEMM and attention, recorded on an H200 (CUDA 13):
``examples/record_library_kernels.py`` -> ``tests/data/libraries_h200`` (cuFFT, cuSOLVER and MAGMA, cuSPARSE and
cuSPARSELt, cub, ATen's jiterator, int4 weight-only GEMM) and ``examples/record_jax_kernels.py --which libraries`` ->
``tests/data/jax_kernels_h200/libraries`` (XLA's fft, cuSOLVER custom calls, sort, convolution, scatter).

Before, cuFFT's kernels read library Triton (launched through the driver API) and category Convolution or Other; the
solvers read Other and library Unknown (94% of the linalg recording's GPU time); cuSPARSELt read cuBLAS; XLA's own
fusions read library Unknown. Counts and times are checked against the raw JSON."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import polars as pl
import pytest

from kernscope import load
from kernscope.analyze.categories import Categorizer
from kernscope.analyze.findings import find_roofline
from kernscope.analyze.perf import perf_model
from kernscope.analyze.summary import analyze, gpu_table

DATA = Path(__file__).parent / "data" / "libraries_h200"
JAX = Path(__file__).parent / "data" / "jax_kernels_h200" / "libraries" / "vm.xplane.pb.gz"
INFO = json.loads((DATA / "record_info.json").read_text())["scenarios"]
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _raw(name: str) -> list[dict]:
    """The recording's GPU records, from the raw JSON."""
    ev = json.loads(gzip.decompress((DATA / f"{name}.pt.trace.json.gz").read_bytes()))["traceEvents"]
    return [e for e in ev if e.get("cat") in GPU_CATS]


def _gpu(path: Path) -> pl.DataFrame:
    return gpu_table(load(path, cache=False), Categorizer.builtin())


def _share(g: pl.DataFrame, column: str) -> dict[str, float]:
    """Each value's share (%) of the GPU time."""
    total = g["dur"].sum()
    return {k: 100 * v / total for k, v in g.group_by(column).agg(pl.col("dur").sum()).iter_rows()}


def test_the_recording_holds_every_scenario():
    assert all(s["ok"] for s in INFO.values()), INFO
    jax_info = json.loads((JAX.parents[1] / "record_info.json").read_text())["profiles"]["libraries"]
    assert jax_info["ok"] and "cusolver_potrf_ffi" in jax_info["custom_calls"]


def test_cufft_kernels_are_fft_from_cufft():
    """torch.fft and torch.stft run cuFFT's ``regular_fft``/``vector_fft`` kernels (through the driver API): every one
    is FFT from cuFFT (they read Triton, and Convolution or Other), and their time equals the raw JSON's."""
    raw = [e for e in _raw("fft") if e.get("cat") == "kernel" and re.search(r"(regular|vector)_fft", e["name"])]
    assert len(raw) == 30  # 10 a step: rfft2, irfft2 and stft, forward and backward
    g = _gpu(DATA / "fft.pt.trace.json.gz")
    fft = g.filter((pl.col("category") == "FFT") & (pl.col("decided_by") == "name"))
    assert fft.height == len(raw) and set(fft["library"]) == {"cuFFT"}
    assert fft["dur"].sum() / 1e3 == pytest.approx(sum(e["dur"] for e in raw), abs=1e-6)
    # ATen's helpers inside the FFT ops (a copy, a fill of the Hermitian half) are the op's FFT work
    helpers = g.filter((pl.col("category") == "FFT") & (pl.col("decided_by") == "op"))
    assert helpers.height == 9 and set(helpers["library"]) == {"ATen"}
    assert {op.split("::")[1][:5] for op in helpers["decided_op"].cast(pl.String)} == {"_fft_", "stft"}
    assert "Triton" not in set(g["library"])  # eager PyTorch: no Triton kernel ran
    # ATen's jiterator kernels (compiled at run time, launched through the driver API): elementwise, ATen's
    jit = g.filter(pl.col("name").str.contains(r"_vectorized\d+_kernel$"))
    assert set(jit["name"]) == {"sgn_kernel_vectorized2_kernel", "abs_kernel_vectorized2_kernel"}
    assert set(jit["category"]) == {"Elementwise"} and set(jit["library"]) == {"ATen"}
    assert "Other" not in set(g["category"]) and "Unknown" not in set(g["library"])


def test_solvers_are_linear_algebra_by_name_or_op():
    """cholesky, qr, eigh, svd, solve, inv and lu_factor: 94% of the GPU time is the solvers' kernels (cuSOLVER's,
    MAGMA's, cuBLAS's triangular solves), by their names or, for helpers with plain names, by their torch.linalg op;
    the GEMMs inside them stay GEMM. Nothing is Other (94% was)."""
    g = _gpu(DATA / "linalg.pt.trace.json.gz")
    cats, libs = _share(g, "category"), _share(g, "library")
    assert "Other" not in cats
    assert cats["Linear Algebra"] == pytest.approx(93.6, abs=0.1) and cats["GEMM"] == pytest.approx(5.8, abs=0.1)
    assert libs["cuSOLVER"] == pytest.approx(89.1, abs=0.1) and libs["MAGMA"] == pytest.approx(3.6, abs=0.1)
    assert libs["Unknown"] < 0.2  # cuSOLVER's merge_ker and scale_max: names too plain to claim
    by_op = g.filter(pl.col("decided_by") == "op")
    assert set(by_op["category"]) == {"Linear Algebra"}
    # (the fills, copies and masks of the linalg ops: the innermost op a rule names decides, not aten::fill_)
    assert {op.split("::")[1].split("_ex")[0].lstrip("_") for op in by_op["decided_op"].cast(pl.String)} == {
        "linalg_eigh", "linalg_svd", "linalg_cholesky", "linalg_inv", "linalg_lu_factor", "linalg_lu_solve",
        "linalg_qr", "linalg_solve", "linalg_solve_triangular"}
    svd = g.filter(pl.col("name").str.starts_with("void gesvdbj_batch_32x16"))
    raw = [e for e in _raw("linalg") if e["name"].startswith("void gesvdbj_batch_32x16")]
    assert svd.height == len(raw) == 930 and set(svd["library"]) == {"cuSOLVER"}
    assert set(g.filter(pl.col("name").str.contains("sgetf2_fused_batched"))["library"]) == {"MAGMA"}


def test_sparse_gemms_name_their_library():
    """A CSR product (cuSPARSE: it read Unknown) and a 2:4 semi-structured linear (cuSPARSELt: it read cuBLAS)."""
    g = _gpu(DATA / "sparse.pt.trace.json.gz")
    lt = g.filter(pl.col("library") == "cuSPARSELt")
    assert lt.height == 3 and set(lt["category"]) == {"GEMM"} and set(lt["op_name"].cast(pl.String)) == {"aten::_cslt_sparse_mm"}
    sp = g.filter(pl.col("library") == "cuSPARSE")
    assert sp.height == 9 and all(n.startswith("void cusparse::") for n in sp["name"])
    assert set(sp["category"]) == {"GEMM"}
    csrmm = sp.filter(pl.col("name").str.contains("csrmm_alg2"))
    assert set(csrmm["decided_by"]) == {"name"}  # a sparse GEMM by its own name, not only by aten::addmm


def test_sort_histogram_and_compaction_are_named():
    """cub's stream compaction (nonzero, unique: DeviceSelectSweepKernel, DeviceCompactInitKernel) is Sort/Scan and
    histc/bincount's histogram kernel a Reduction; they read Other. What stays Other is an assert and randperm's
    duplicate-key fix-up (0.4%)."""
    g = _gpu(DATA / "sort_random.pt.trace.json.gz")
    select = g.filter(pl.col("name").str.contains("DeviceSelectSweepKernel|DeviceCompactInitKernel"))
    assert select.height == 12 and set(select["category"]) == {"Sort/Scan"}
    hist = g.filter(pl.col("name").str.contains("kernelHistogram1D"))
    assert hist.height == 6 and set(hist["category"]) == {"Reduction"}
    other = g.filter(pl.col("category") == "Other")
    assert set(other["op_name"].cast(pl.String)) == {"aten::_assert_async", "aten::randperm"}
    assert _share(g, "category")["Other"] < 0.5


def test_grid_sample_reads_as_data_movement_beside_upsample():
    g = _gpu(DATA / "vision.pt.trace.json.gz")
    grid = g.filter(pl.col("name").str.contains("grid_sampler_2d"))
    assert grid.height == 6 and set(grid["category"]) == {"Memory"}  # forward and backward; they read Other
    assert "Other" not in set(g["category"]) and "Unknown" not in set(g["library"])


def test_int4_weight_only_gemm_is_modeled():
    """``aten::_weight_int4pack_mm`` (torchao's int4 inference; the tinygemm kernel) had no model: the recording was
    0% covered. 2 x M x N x K FLOPs; bytes: the bf16 activations and output, the packed weight (N x K / 2) and a
    scale and zero point per group of 128 along K."""
    s = INFO["int4"]
    pm = perf_model(load(DATA / "int4.pt.trace.json.gz", cache=False))
    (op,) = pm.ops.to_dicts()
    assert op["name"] == "aten::_weight_int4pack_mm" and op["op_class"] == "GEMM" and op["dtype"] == "bf16"
    assert op["flops"] == s["flops_per_call"] == 2 * s["m"] * s["n"] * s["k"]
    m, n, k, group = s["m"], s["n"], s["k"], s["group_size"]
    assert op["bytes"] == m * k * 2 + n * k // 2 + (k // group) * n * 2 * 2 + m * n * 2
    assert op["count"] == 3 * s["calls_per_step"]
    raw_us = sum(e["dur"] for e in _raw("int4") if e.get("cat") == "kernel")
    assert op["kernel_time_us"] == pytest.approx(raw_us, abs=1e-6)
    assert pm.coverage["pct"] == pytest.approx(100.0)
    assert op["bound"] == "memory"  # 16 rows of activations: the weight's bytes dominate


def test_jax_libraries_fft_solvers_and_xla_kernels():
    """A JAX step calling fft2/ifft2, cholesky, qr, eigh, solve, sort, top_k, cumsum, a scatter-add and a
    convolution: cuFFT's kernels under XLA's fft instruction are FFT from cuFFT; the cuSOLVER custom calls' kernels
    Linear Algebra (by name, or by the custom call's target for helpers), jaxlib's own kernels (LU pivots, the
    Householder product of a QR) jaxlib's; XLA's fusions and sorts XLA's (they read library Unknown)."""
    g = _gpu(JAX)
    fft = g.filter(pl.col("name").str.contains(r"(regular|vector)_fft"))
    assert fft.height == 24 and set(fft["category"]) == {"FFT"} and set(fft["library"]) == {"cuFFT"}
    cats, libs = _share(g, "category"), _share(g, "library")
    assert "Other" not in cats and cats["Linear Algebra"] > 90
    assert libs["cuSOLVER"] > 65 and libs["jaxlib"] > 20 and libs["Unknown"] < 0.2
    xla = g.filter(pl.col("library") == "XLA")
    assert xla.height > 0 and all(re.match(r"(loop|input|wrapped|fusion|gemm_fusion|sort)_?|stream_executor::", n)
                                  for n in xla["name"])
    helpers = g.filter(pl.col("name").str.contains("MakeBatchPointers"))
    assert set(helpers["category"]) == {"Linear Algebra"} and set(helpers["decided_by"]) == {"hlo"}
    # XLA runs the sort as 28 passes, kernels sort_29_1, sort_29_1__1, ... sort_29_1__27: all the instruction sort.29.1
    # (only the first had it; the perf model listed the other 27 under the command buffer)
    trace = load(JAX, cache=False)
    passes = trace.gpu.filter(pl.col("name").cast(pl.String).str.starts_with("sort_29_1"))
    assert passes["name"].n_unique() == 28 and set(passes["hlo_instruction"].cast(pl.String)) == {"sort.29.1"}
    unc = perf_model(trace).uncovered
    assert unc.filter(pl.col("op_name") == "sort.29.1")["count"].to_list() == [84]


@pytest.mark.parametrize("name", ["fft", "linalg", "sparse", "sort_random", "vision", "int4"])
def test_every_recording_analyzes_with_kernel_counts_of_the_raw_json(name):
    a = analyze(load(DATA / f"{name}.pt.trace.json.gz", cache=False))
    raw = [e for e in _raw(name) if e.get("cat") == "kernel"]
    assert a.categories.filter(pl.col("category") != "Memory")["count"].sum() + \
        a.gpu.filter((pl.col("category") == "Memory") & (pl.col("kind") == "kernel")).height == len(raw)


def _perf(name: str):  # noqa: ANN202
    return perf_model(load(DATA / f"{name}.pt.trace.json.gz", cache=False))


def test_sparse_gemms_are_not_rated_as_dense_ones():
    """A CSR matrix (1% nonzero) times a dense one runs as ``aten::addmm``: it was rated as a dense 4096 x 4096 x 256
    GEMM at "266 TFLOP/s, 53.8% of peak" (its FLOPs depend on the nonzeros, which the profile does not record: the
    sparse operand has a shape but no strides); it now gets no model, with that reason. The 2:4 semi-structured linear
    was rated as its dense ``aten::mm`` at "95% of peak": cuSPARSELt's ``_cslt_sparse_mm`` is modeled, the products it
    does (half the dense ones) against the dense peak: 47.5%."""
    pm = _perf("sparse")
    missing = pm.missing.to_dicts()
    assert [(m["name"], m["count"]) for m in missing] == [("aten::addmm", 3)]
    assert "sparse operand" in missing[0]["reason"]
    ops = {o["name"]: o for o in pm.ops.to_dicts()}
    lt = ops["aten::_cslt_sparse_mm"]
    assert not lt["nested"] and ops["aten::mm"]["nested"]  # the dense mm around it is not what ran
    assert lt["flops"] == 2 * 4096 * 4096 * 4096 / 2
    assert lt["bytes"] == (4096 * 2304 + 4096 * 4096 + 4096 * 4096) * 2  # compressed A (values and metadata), B, out
    assert lt["pct_of_peak"] == pytest.approx(47.5, abs=0.1) and json.loads(lt["params"])["sparsity"] == "2:4"
    assert pm.coverage["pct"] == pytest.approx(82.1, abs=0.1)


def test_ffts_are_modeled_and_overlapping_frames_read_once():
    """torch.fft and torch.stft's ``aten::_fft_r2c/c2c/c2r``: 5 n log2 n FLOPs a complex transform (half for a real
    input or output), the input read and the output written once; they had no model (34% of the step outside it).
    stft's backward copies its 8 x 1001 frames of 400 samples, 160 apart (an overlapping view): 1.28 M distinct
    elements were counted as 3.2 M, and the copy read 110% of the H200's memory bandwidth."""
    pm = _perf("fft")
    ops = [o for o in pm.ops.to_dicts() if o["op_class"] == "FFT"]
    by = {(o["name"], o["input_dims"]): o for o in ops}  # (rfft2's forward and irfft2's backward: one r2c signature each)
    r2c = by[("aten::_fft_r2c", "[[16, 512, 512], [], [], []]")]  # rfft2 over the last two dimensions, onesided
    n = 512 * 512
    assert r2c["flops"] == pytest.approx(16 * 2.5 * n * 18) and r2c["bytes"] == 16 * n * 4 + 16 * 512 * 257 * 8
    c2c = by[("aten::_fft_c2c", "[[8, 1001, 400], [], [], []]")]  # stft's 400-point transforms of 8 x 1001 frames
    assert c2c["flops"] == pytest.approx(8 * 1001 * 5 * 400 * math.log2(400)) and c2c["bytes"] == 2 * 8 * 1001 * 400 * 8
    c2r = by[("aten::_fft_c2r", "[[16, 512, 257], [], [], []]")]
    assert c2r["flops"] == pytest.approx(16 * 2.5 * n * 18) and c2r["bytes"] == 16 * 512 * 257 * 8 + 16 * n * 4
    assert all(o["bound"] == "memory" for o in ops) and sum(o["count"] for o in ops) == 6 * 3  # 6 transforms a step
    frames = [o for o in pm.ops.to_dicts() if o["name"] == "aten::copy_" and o["input_dims"].startswith("[[8, 1001, 400]")
              and json.loads(o["input_type"])[1] == "long int"]
    (copy,) = frames
    assert copy["bytes"] == 8 * 1001 * 400 * 8 + (7 * 160400 + 1000 * 160 + 399 + 1) * 8
    assert copy["pct_of_peak"] < 100


def test_xla_generated_kernels_by_their_hlo_instruction_and_bare_names_by_their_number():
    """A bare op name is XLA's by name only with its number (``copy_3``); a user's Triton kernel may be named
    ``transpose``. In a JAX profile a kernel of an HLO instruction that is not a custom call is XLA's whatever its
    name; a custom call keeps its library, but for a Pallas kernel's (its Triton or Mosaic GPU call), whose name says
    nothing: ``Pallas``."""
    from kernscope.analyze.launcher_categories import xla_generated

    c = Categorizer.builtin()
    assert c.library("copy_3", "kernel", "") == "XLA" and c.library("sort_29_1__20", "kernel", "") == "XLA"
    assert c.library("transpose", "kernel", "cuLaunchKernel") == "Triton"
    rows = pl.DataFrame({"name": ["copy", "transpose", "mha_forward", "nvjet_tst_128x64", "triton_mm", "matmul_kernel"],
                         "kind": ["kernel"] * 6,
                         "library": ["Unknown", "Triton", "Unknown", "cuBLAS", "Triton", "Unknown"],
                         "hlo_desc": ["hlo:copy", "hlo:fusion:kInput:transpose", "hlo:custom-call:__gpu$xla.gpu.triton",
                                      "hlo:custom-call:__cublas$lt$matmul", "hlo:custom-call:__gpu$xla.gpu.triton",
                                      "hlo:custom-call:mosaic_gpu"]},
                        schema_overrides={"kind": pl.Categorical, "library": pl.Categorical, "hlo_desc": pl.Categorical})
    assert (xla_generated(rows)["library"].cast(pl.String).to_list()
            == ["XLA", "XLA", "Pallas", "cuBLAS", "Pallas", "Pallas"])
    kineto = rows.with_columns(pl.lit(None, dtype=pl.Categorical).alias("hlo_desc"))
    assert (xla_generated(kineto)["library"].cast(pl.String).to_list()
            == ["Unknown", "Triton", "Unknown", "cuBLAS", "Triton", "Unknown"])


def test_jax_custom_calls_get_work_only_where_it_is_known():
    """XLA's custom calls had 0 FLOPs unless cuBLAS's: a batched QR read "0% of its memory-bound roofline, at 70% it
    would take 2 µs" (a far-from-roofline finding on 7.3 ms a step), cuDNN's convolutions and attention backward were
    rated on the bandwidth roof. Now cuDNN's (and MIOpen's) convolutions do 2 x |y| x |w| / (output features) FLOPs and
    cuDNN's fused attention the SDPA model's, on the matrix roof; the other library calls (cuSOLVER, Transformer
    Engine's until session 49, Pallas) are outside the model; a library call's result tuple counts its output, not its
    workspace."""
    pm = perf_model(load(JAX, cache=False))
    ops = {o["name"]: o for o in pm.ops.to_dicts()}
    conv = ops["cudnn-conv.1"]  # x 8x16x128x128 by w 32x16x3x3, SAME: y 8x32x128x128
    assert conv["op_class"] == "CONV" and conv["flops"] == 2 * (8 * 32 * 128 * 128) * (32 * 16 * 9) / 32
    assert conv["bytes"] == (8 * 16 * 128 * 128 + 32 * 16 * 9 + 8 * 32 * 128 * 128) * 4  # (no workspace)
    assert ops["cudnn-conv-bw-filter.1"]["flops"] == conv["flops"]  # dw from x and dy: the same products
    assert conv["peak_precision"] == "tf32"  # cuDNN's tf32 kernel: the matrix roof of its precision
    # its two kernels (the TF32 convolution and a 0.8 µs helper) are one row: as two, each counted the convolution's
    # FLOPs, and the helper read "1,470 TFLOP/s, 639% of its roofline"
    assert [o["name"] for o in pm.ops.to_dicts()].count("cudnn-conv.1") == 1
    assert conv["count"] == 3 and abs(conv["kernel_time_us"] - 88.671) < 1e-6 and conv["pct_of_peak"] < 100
    assert "XLA custom-call" not in set(pm.ops["op_class"])
    # XLA's fft instruction (fft2/ifft2 of 8 x 256 x 256 complex): 5 n log2 n per transform, as the PyTorch model's
    # (it had 0 FLOPs: "0.00 TFLOP/s"); its type and lengths are fields 31 and 32 of the instruction
    ffts = [o for o in pm.ops.to_dicts() if o["op_class"] == "XLA fft"]
    assert len(ffts) == 4 and all(o["flops"] == 8 * 5 * 65536 * 16 for o in ffts)
    assert {json.loads(o["input_dims"])["fft"] for o in ffts} == {"FFT", "IFFT"}
    assert all(o["bytes"] == 2 * 8 * 65536 * 8 and o["bound"] == "memory" for o in ffts)
    left = set(pm.uncovered["op_name"])
    assert {"geqrf.0", "householder_product.0", "eigh.0", "lu.0", "cholesky.0", "triangular-solve"} <= left
    assert find_roofline(pm.ops, 3).filter(pl.col("op").is_in(["geqrf.0", "householder_product.0", "eigh.0"])).height == 0
    dp = perf_model(load(Path(__file__).parent / "data" / "multigpu_h200" / "jax_dp.xplane.pb.gz", cache=False))
    gemm = {o["name"]: o for o in dp.ops.to_dicts() if o["name"].startswith("custom-call")}
    p = json.loads(gemm["custom-call.1"]["input_dims"])
    (m, k), (_, n) = p["lhs"], p["out"]
    assert gemm["custom-call.1"]["bytes"] == (m * k + k * n + m * n) * 2  # bf16 A, B, C; the workspace was counted
    assert all(o["bound"] == "compute" for o in gemm.values())
    # cuDNN's fused attention backward (jax.nn.dot_product_attention, causal): from the score matrix of its config
    # (16 x 8 heads x 512 x 512) and the head dimension (64): 2.5 x 2 x scores x (64 + 64), halved by the causal mask;
    # it read "0.00 TFLOP/s, 39% of peak, memory-bound"
    (attn,) = [o for o in dp.ops.to_dicts() if o["name"] == "dot_product_attention_bwd.8"]
    assert attn["op_class"] == "SDPA_bwd" and attn["flops"] == 2.5 * 2 * (16 * 8 * 512 * 512) * (64 + 64) / 2
    assert json.loads(attn["input_dims"]) == {"scores": [16, 8, 512, 512], "d_qk": 64, "d_v": 64, "causal": True}
    # its bytes: Q, K, V, O, dO and the softmax statistics read, dQ, dK and dV written (session 49: only dQ, the result
    # tuple's first element, was counted; it read "compute-bound, 24% of peak" at 212 FLOP/B)
    t, stats = 16 * 512 * 8 * 64 * 2, 16 * 8 * 512 * 4
    assert attn["bytes"] == 5 * t + stats + 3 * t
    assert attn["bound"] == "memory" and 30 < attn["pct_of_peak"] < 33
    (fwd,) = [o for o in dp.ops.to_dicts() if o["name"] == "dot_product_attention_fwd.5"]
    assert fwd["bytes"] == 3 * t + t + stats  # (O and the statistics written; the workspace is not)


@pytest.mark.parametrize("name", ["fft", "linalg", "sparse", "sort_random", "vision", "int4"])
def test_gpu_time_by_library_adds_up_to_the_raw_json(name):
    """``analysis.libraries``: GPU time by who wrote the kernel (no table said it; ``kernscope sql`` over
    analysis.kernels had to). Its times and counts add up to the raw JSON's GPU records, its ``kernels`` are the
    distinct kernel names of each library."""
    a = analyze(load(DATA / f"{name}.pt.trace.json.gz", cache=False))
    lib, raw = a.libraries, _raw(name)
    assert lib["count"].sum() == len(raw)
    assert math.isclose(lib["total_us"].sum(), sum(e["dur"] for e in raw), rel_tol=1e-9)
    assert math.isclose(lib["pct"].sum(), 100.0, rel_tol=1e-9)
    g = a.gpu.filter(pl.col("kind") == "kernel")
    names = dict(g.group_by("library").agg(pl.col("name").n_unique()).iter_rows())
    assert {k: v for k, v in lib.select("library", "kernels").iter_rows() if v} == names
    assert lib["total_us"].to_list() == sorted(lib["total_us"].to_list(), reverse=True)
    expect = {"fft": "cuFFT", "linalg": "cuSOLVER", "sparse": "cuSPARSELt", "sort_random": "cub", "int4": "ATen"}
    if name in expect:
        assert expect[name] in lib["library"].to_list()
    if name == "linalg":  # the solvers: 94% of the step (they read Unknown before session 48)
        share = dict(lib.select("library", "pct").iter_rows())
        assert share["cuSOLVER"] + share.get("MAGMA", 0) + share["cuBLAS"] > 90 and share.get("Unknown", 0) < 1


def test_gpu_time_by_library_on_jax_profiles_and_every_output(tmp_path, capsys):
    """A JAX step's libraries (XLA's fusions, cuSOLVER's calls, Pallas's kernels) in the table, the terminal, the JSON
    (with its schema), SQL and the Excel report; a step's libraries add up to the step."""
    from kernscope.cli import main

    pallas = analyze(load(JAX.parent.parent / "pallas" / "vm.xplane.pb.gz", cache=False)).libraries
    assert dict(pallas.select("library", "kernels").iter_rows()) == {"Pallas": 7, "XLA": 9}
    assert math.isclose(pallas.filter(pl.col("library") == "Pallas")["total_us"][0], 636.319, abs_tol=1e-3)
    a = analyze(load(JAX, cache=False))
    share = dict(a.libraries.select("library", "pct").iter_rows())
    assert share["cuSOLVER"] > 69 and share["XLA"] > 3 and share["cuFFT"] > 0.2 and share["Unknown"] < 0.2
    for step in a.trace.steps["step"].to_list():
        one = analyze(a.trace, step=step)
        assert math.isclose(one.libraries["total_us"].sum(), one.categories["total_us"].sum(), rel_tol=1e-12)
    assert main(["analyze", str(JAX), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["library"] for r in doc["libraries"]][:2] == ["cuSOLVER", "jaxlib"]
    assert set(doc["libraries"][0]) == {"library", "kernels", "count", "total_us", "pct"}
    assert main(["analyze", str(JAX), "--no-cache"]) == 0
    assert "GPU time by library" in capsys.readouterr().out
    assert main(["sql", "SELECT library FROM analysis.libraries WHERE kernels = 0", str(JAX), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["library", "CUDA Runtime"]  # (memcpy and memset: no kernel)
    assert main(["report", str(JAX), "-o", str(tmp_path / "r.xlsx"), "--no-cache"]) == 0
    import zipfile
    with zipfile.ZipFile(tmp_path / "r.xlsx") as z:
        assert "library_summary" in z.read("xl/workbook.xml").decode()
    assert main(["report", str(JAX), "-o", str(tmp_path / "r.html"), "--no-cache"]) == 0
    assert "GPU time by library (who wrote the kernel)" in (tmp_path / "r.html").read_text()
