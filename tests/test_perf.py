"""Perf model and roofline: closed forms, op-time attribution, device peaks, TraceLens's reference sheets."""

from __future__ import annotations

import ast
import json
import math
import zipfile
from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES, write_trace

from kernscope import load
from kernscope.analyze.perf import REGISTRY, Call, gemm_flops, match_device, parse_peak, perf_model, sdpa_bwd_flops, sdpa_flops
from kernscope.analyze.perf.formulas import sdpa_bytes
from kernscope.cli import main
from kernscope.errors import KernscopeError
from kernscope.intervals import nesting_depth

REFERENCE = TRACES / "tracelens" / "reference"
REF_NAMES = sorted(p.name for p in REFERENCE.iterdir()) if REFERENCE.is_dir() else []
SHEETS = ("GEMM", "CONV_fwd", "SDPA_fwd", "UnaryElementwise", "BinaryElementwise", "Normalization", "Reduce_fwd")


def work(name, dims, types, concrete=None):
    return REGISTRY.work(Call(name, tuple(dims), tuple(types), tuple(concrete or [""] * len(dims))))


# -- closed forms ---------------------------------------------------------------------------------------
def test_gemm_family():
    mm = work("aten::mm", [[8944, 1024], [1024, 2816]], ["c10::BFloat16"] * 2)
    assert mm.flops == 2 * 8944 * 1024 * 2816 and mm.bytes == (8944 * 1024 + 1024 * 2816 + 8944 * 2816) * 2
    addmm = work("aten::addmm", [[1024], [8944, 1024], [1024, 1024], [], []], ["c10::BFloat16"] * 3 + ["Scalar"] * 2)
    assert addmm.flops == 2 * 8944 * 1024 * 1024 + 8944 * 1024  # the bias add counts
    assert addmm.bytes == (8944 * 1024 + 1024 * 1024 + 8944 * 1024 + 1024) * 2
    bmm = work("aten::bmm", [[16, 5185, 64], [16, 64, 5185]], ["c10::BFloat16"] * 2)
    assert bmm.flops == gemm_flops(5185, 5185, 64, 16) == 16 * 2 * 5185 * 5185 * 64
    mat = work("aten::matmul", [[8, 512, 512], [512, 8192]], ["float", "float"])
    assert (mat.params["M"], mat.params["N"], mat.params["K"], mat.params["B"]) == (4096, 8192, 512, 1)
    lin = work("aten::linear", [[8, 512, 512], [1536, 512], [1536]], ["float"] * 3)
    assert lin.flops == 2 * 4096 * 1536 * 512 + 4096 * 1536 and lin.op_class == "GEMM" and lin.unit == "matrix"
    fp8 = work("aten::_scaled_mm", [[4096, 4096], [4096, 4096], [], [], [], [], [], []],
               ["c10::Float8_e4m3fn"] * 2 + ["float"] * 2 + [""] * 4, ["", "", "", "", "", "", "15", "False"])
    assert fp8.bytes == 4096 * 4096 * (1 + 1 + 2)  # fp8 in, bf16 out
    # weight-only quantized GEMMs: int8 weight N x K with a scale per column; int4 packed as int32 tiles (N x K / 2 bytes)
    w8 = work("aten::_weight_int8pack_mm", [[16, 4096], [11008, 4096], [11008]], ["c10::BFloat16", "signed char", "c10::BFloat16"])
    assert w8.flops == 2 * 16 * 11008 * 4096 and w8.dtype == "c10::BFloat16" and w8.unit == "matrix"
    assert w8.bytes == 16 * 4096 * 2 + 11008 * 4096 + 11008 * 2 + 16 * 11008 * 2
    w4 = work("aten::_weight_int4pack_mm", [[16, 4096], [512, 32, 32, 4], [], [32, 4096, 2]],
              ["c10::BFloat16", "int", "Scalar", "c10::BFloat16"], ["", "", "128", ""])
    assert w4.flops == 2 * 16 * 4096 * 4096 and w4.bytes == 16 * 4096 * 2 + 4096 * 4096 // 2 + 32 * 4096 * 2 * 2 + 16 * 4096 * 2
    assert work("aten::_weight_int4pack_mm", [[16, 4096], [512, 32, 32, 4], [], [32, 4096]],
                ["c10::BFloat16", "int", "Scalar", "c10::BFloat16"]) is None  # not groups x N x 2
    assert work("aten::_weight_int8pack_mm", [[16, 4096], [11008, 2048], [11008]], ["c10::BFloat16", "signed char", "c10::BFloat16"]) is None
    # a sparse operand (a shape, no strides) has no dense model; 2:4 semi-structured GEMMs do half the products
    dense = ((4096, 256), (4096, 4096), (4096, 256), (), ())
    t5 = ("float",) * 3 + ("Scalar",) * 2
    assert REGISTRY.attempt(Call("aten::addmm", dense, t5, ("",) * 5, ([256, 1], [], [256, 1], [], [])))[1].startswith("a sparse operand")
    assert REGISTRY.work(Call("aten::addmm", dense, t5, ("",) * 5, ([256, 1], [4096, 1], [256, 1], [], []))).flops == 2 * 4096 * 4096 * 256 + 4096 * 256
    semi = work("aten::_sparse_semi_structured_mm", [[4096, 2048], [4096, 256], [4096, 1024]], ["c10::Half", "short int", "c10::Half"])
    assert semi.flops == 4096 * 1024 * 4096 and semi.bytes == (4096 * 2048 + 4096 * 1024 + 4096 * 1024) * 2
    lin24 = work("aten::_sparse_semi_structured_linear", [[8, 512, 4096], [11008, 2048], [11008, 256]],
                 ["c10::BFloat16", "c10::BFloat16", "short int"])
    assert lin24.flops == 4096 * 11008 * 4096 and lin24.params["M"] == 4096 and lin24.params["sparsity"] == "2:4"


def test_fft_transforms():
    c2c = work("aten::_fft_c2c", [[8, 1001, 400], [], [], []], ["c10::complex<float>", "ScalarList", "Scalar", "Scalar"],
               ["", "[2]", "0", "False"])
    assert c2c.flops == pytest.approx(8008 * 5 * 400 * math.log2(400)) and c2c.bytes == 2 * 8008 * 400 * 8
    assert c2c.op_class == "FFT" and c2c.unit == "vector" and c2c.params == {"n": 400, "batch": 8008, "kind": "c2c"}
    full = work("aten::_fft_r2c", [[4, 64, 64], [], [], []], ["float", "ScalarList", "Scalar", "Scalar"], ["", "[-2, -1]", "0", "False"])
    assert full.params["n"] == 4096 and full.bytes == 4 * 4096 * 4 + 4 * 4096 * 8  # two-sided: every frequency written
    assert work("aten::_fft_c2r", [[4, 64, 33], [], [], []], ["c10::complex<float>", "ScalarList", "Scalar", "Scalar"],
                ["", "[1, 2]", "0", ""]) is None  # no last_dim_size
    assert work("aten::_fft_c2c", [[4, 64], [], [], []], ["c10::complex<float>", "ScalarList", "Scalar", "Scalar"],
                ["", "[5]", "0", "True"]) is None  # a dimension the tensor does not have


def test_attention_forward_backward_causal_and_gqa():
    f = sdpa_flops(4, 48, 1024, 1024, 64, 64, False)
    assert f == 4 * 4 * 48 * 1024 * 1024 * 64 and sdpa_flops(4, 48, 1024, 1024, 64, 64, True) == f / 2
    assert sdpa_bwd_flops(4, 48, 1024, 1024, 48, 64, 64, False) == 2.5 * f  # 5 matmuls incl. the recompute
    gqa = sdpa_bwd_flops(1, 32, 512, 512, 8, 128, 128, False)
    assert gqa == 2.5 * sdpa_flops(1, 32, 512, 512, 128, 128, False) + 512 * 256 * 3  # head reduction, 4 to 1
    q = [16, 16, 559, 64]
    w = work("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], ["c10::BFloat16"] * 3 + ["Scalar"] * 4,
             ["", "", "", "0.", "True", "False", "0.125"])
    assert w.flops == 10_239_377_408 and w.bytes == 4 * 16 * 16 * 559 * 64 * 2 and w.params["causal"]
    # the flash kernel's own op has (B, N, H, d) layout: same answer
    k = [16, 559, 16, 64]
    w2 = work("aten::_flash_attention_forward", [k, k, k] + [[]] * 12, ["c10::BFloat16"] * 3 + [""] * 12,
              ["", "", "", "", "", "559", "559", "0.", "True", "False", "", "", "", "", ""])
    assert (w2.flops, w2.bytes) == (w.flops, w.bytes)
    # cuDNN backward: is_causal is argument 14
    g = [8, 8, 512, 64]
    b = work("aten::_scaled_dot_product_cudnn_attention_backward", [g] * 5 + [[8, 8, 512, 1]] + [[]] * 10,
             ["c10::BFloat16"] * 5 + ["float"] + [""] * 10, [""] * 11 + ["512", "512", "0.", "True", ""])
    assert b.op_class == "SDPA_bwd" and b.flops == sdpa_bwd_flops(8, 8, 512, 512, 8, 64, 64, True)
    assert sdpa_bytes(8, 8, 512, 512, 8, 64, 64, 2) < b.bytes
    bad = work("aten::_scaled_dot_product_flash_attention", [[2, 2, 8, 16], [2, 2, 4, 16], [2, 2, 4, 16], [], [], [], []],
               ["float"] * 3 + ["Scalar"] * 4, ["", "", "", "0.", "True", "False", ""])
    assert bad is None  # causal with N_Q != N_KV has no agreed count: no number rather than a wrong one


def test_convolution_shapes_and_bias():
    w = work("aten::convolution", [[1, 3, 1008, 1008], [1024, 3, 14, 14], [], [], [], [], [], [], []],
             ["c10::BFloat16"] * 2 + [""] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
             ["", "", "", "[14, 14]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"])
    assert w.params["output_shape"] == (1, 1024, 72, 72) and w.flops == 6_242_697_216
    same = work("aten::conv2d", [[2, 8, 32, 32], [16, 8, 3, 3], [16], [], [], [], []],
                ["float"] * 3 + ["ScalarList", "", "ScalarList", "Scalar"], ["", "", "", "[1, 1]", "'same'", "[1, 1]", "1"])
    assert same.params["output_shape"] == (2, 16, 32, 32) and same.flops == 2 * 16 * 32 * 32 * 2 * 8 * 9 + 2 * 16 * 32 * 32
    dw = work("aten::convolution", [[1, 32, 10, 10], [32, 1, 3, 3], [], [], [], [], [], [], []],
              ["float"] * 2 + [""] * 7, ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "32"])
    assert dw.params["output_shape"] == (1, 32, 5, 5) and dw.flops == 32 * 25 * 2 * 9  # depthwise: groups = C
    bwd = work("aten::convolution_backward", [[1, 16, 8, 8], [1, 8, 8, 8], [16, 8, 3, 3]] + [[]] * 8,
               ["float"] * 3 + [""] * 8, ["", "", "", "[16]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
                                          "[False, True, True]"])
    assert bwd.flops == 16 * 64 * 2 * 72 + 16 * 64  # no input gradient asked: weight gradient + bias gradient


def test_elementwise_norm_reduce_softmax():
    mul = work("aten::mul", [[16, 16, 559, 64], [1, 1, 559, 64]], ["c10::BFloat16"] * 2)
    assert mul.op_class == "BinaryElementwise" and mul.bytes == (16 * 16 * 559 * 64 * 2 + 559 * 64) * 2
    scalar = work("aten::add", [[16, 559, 1], [], []], ["float", "double", "Scalar"], ["", "", "1"])
    assert scalar.bytes == 8944 * 4 * 2 + 8  # a 0-d tensor operand is one element read
    cmp = work("aten::eq", [[64, 64], [64, 64]], ["float", "float"])
    assert cmp.bytes == 64 * 64 * (4 + 4 + 1)  # a comparison writes bool
    inplace = work("aten::add_", [[128, 768, 14, 14], [1, 768, 1, 1], []], ["c10::BFloat16"] * 2 + ["Scalar"], ["", "", "1"])
    assert inplace.bytes == (2 * 128 * 768 * 196 + 768) * 2
    copy = work("aten::copy_", [[8, 512], [8, 512], []], ["c10::BFloat16", "float", "Scalar"])
    assert copy.flops == 0 and copy.bytes == 8 * 512 * 6 and copy.op_class == "Copy"
    ln = work("aten::layer_norm", [[1, 5185, 1024], [], [1024], [1024], [], []],
              ["c10::BFloat16", "ScalarList", "c10::BFloat16", "c10::BFloat16", "Scalar", "Scalar"],
              ["", "[1024]", "", "", "1e-05", "True"])
    assert ln.flops == 26_553_344 and ln.bytes == 21_250_048
    rms = work("aten::rms_norm", [[4, 1024], [], [1024], []], ["float", "ScalarList", "float", "Scalar"], ["", "[1024]", "", ""])
    assert rms.flops == 4 * (2 * 1024 + 2) + 4 * 1024 * 2
    mean = work("aten::mean", [[16, 559, 1024], [], [], []], ["float", "ScalarList", "Scalar", ""], ["", "[-1]", "True", ""])
    assert mean.params["output_elems"] == 16 * 559 and mean.bytes == (16 * 559 * 1024 + 16 * 559) * 4
    full = work("aten::sum", [[10, 10]], ["float"], [""])
    assert full.params["output_elems"] == 1
    mx = work("aten::max", [[1, 5184, 1], [], []], ["float", "Scalar", "Scalar"], ["", "-1", "False"])
    assert mx.bytes == 5184 * 4 + 5184 * 4 + 5184 * 8  # values and int64 indices
    assert work("aten::max", [[4], [4]], ["int", "int"]).op_class == "BinaryElementwise"
    sm = work("aten::_softmax", [[16, 5185, 5185], [], []], ["c10::BFloat16", "Scalar", "Scalar"], ["", "-1", "False"])
    assert sm.flops == 3 * 16 * 5185 * 5185 and sm.bytes == 2 * 16 * 5185 * 5185 * 2
    emb = work("aten::embedding", [[8192, 512], [8, 512], [], [], []], ["float", "long int"] + ["Scalar"] * 3)
    assert emb.flops == 0 and emb.bytes == 4096 * 512 * 4 * 2 + 4096 * 8


def test_models_refuse_garbage():
    for dims, types in [([[1, 2]], ["float"]), ([["x"], [1]], ["float", "float"]), ([], []), ([[2, 3], [4, 5]], ["float", "float"])]:
        assert work("aten::mm", dims, types) is None
    assert work("aten::not_an_op", [[1]], ["float"]) is None
    assert work("aten::_fused_adamw_", [[]] * 6, ["TensorList"] * 6) is None  # PyTorch records no list shapes
    opt = work("aten::_fused_adamw_", [[[10, 10], [10]]] * 5 + [[[]]] + [[]] * 9, ["TensorList"] * 6 + ["Scalar"] * 9)
    assert opt.params["params"] == 110 and opt.op_class == "Optimizer"


# -- attribution ---------------------------------------------------------------------------------------------
def _ops_trace(tmp_path: Path, shapes: bool = True, device: str = "NVIDIA H100 80GB HBM3") -> Path:
    dims = {"Input Dims": [[64, 128], [256, 128], [256]], "Input type": ["float"] * 3, "Concrete Inputs": ["", "", ""]}
    mm = {"Input Dims": [[256], [64, 128], [128, 256], [], []], "Input type": ["float"] * 3 + ["Scalar"] * 2,
          "Concrete Inputs": ["", "", "", "1", "1"]}
    ev = []

    def op(name, ts, dur, ext, args):
        a = {"External id": ext, **(args if shapes else {})}
        ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": a})

    for i, t0 in enumerate((1000, 2000)):
        op("aten::linear", t0, 100, 10 + i, dims)
        op("aten::addmm", t0 + 10, 80, 20 + i, mm)
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t0 + 20,
                   "dur": 5, "args": {"External id": 20 + i, "correlation": 100 + i}})
        ev.append({"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": t0 + 50, "dur": 40,
                   "args": {"correlation": 100 + i, "device": 0, "stream": 7}})
    # a kernel of no modeled op
    op("aten::index", 3000, 50, 40, {})
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 3010, "dur": 5,
               "args": {"External id": 40, "correlation": 200}})
    ev.append({"ph": "X", "cat": "kernel", "name": "index_kernel", "pid": 0, "tid": 7, "ts": 3100, "dur": 10,
               "args": {"correlation": 200, "device": 0, "stream": 7}})
    return write_trace(tmp_path / "ops.json", ev, deviceProperties=[{"id": 0, "name": device}])


def test_attribution_nested_ops_not_double_counted(tmp_path):
    pm = perf_model(load(_ops_trace(tmp_path), cache=False))
    by = {r["name"]: r for r in pm.ops.iter_rows(named=True)}
    assert by["aten::linear"]["nested"] and not by["aten::addmm"]["nested"]
    assert by["aten::addmm"]["count"] == 2 and by["aten::addmm"]["kernel_time_us"] == 80.0
    assert by["aten::linear"]["kernel_time_us"] == 80.0  # the same kernels: the outer row is marked, not added
    assert pm.coverage["modeled_us"] == 80.0 and pm.coverage["gpu_time_us"] == 90.0
    assert pm.uncovered.row(0, named=True) == {"op_name": "aten::index", "count": 1, "kernel_time_us": 10.0}
    f = 2 * 64 * 256 * 128 + 64 * 256
    assert by["aten::addmm"]["flops"] == f and by["aten::addmm"]["tflops_per_s"] == pytest.approx(f * 2 / 80e-6 / 1e12)
    assert by["aten::addmm"]["bound"] in ("compute", "memory") and by["aten::addmm"]["pct_of_peak"] > 0


def _gemm_trace(tmp_path: Path, calls: list[tuple[str, str, float]]) -> Path:
    """fp32 GEMMs on an H100, each (how, kernel name, kernel µs): ``"plain"`` an ``aten::mm`` of float inputs,
    4096 x 4096 by 4096 x (4096 - its place in ``calls``); ``"autocast"`` an fp32 ``aten::linear`` of 4096³ holding a
    cast and a bf16 ``aten::addmm`` (what autocast records)."""
    lin = {"Input Dims": [[4096, 4096], [4096, 4096], [4096]], "Input type": ["float"] * 3, "Concrete Inputs": [""] * 3}
    bf = {"Input Dims": [[4096], [4096, 4096], [4096, 4096], [], []], "Input type": ["c10::BFloat16"] * 3 + ["Scalar"] * 2,
          "Concrete Inputs": ["", "", "", "1", "1"]}
    ev: list[dict] = []
    t = 1000.0
    for k, (how, kernel, us) in enumerate(calls):
        def op(name: str, ts: float, dur: float, args: dict) -> None:
            ev.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                       "args": {"External id": 100 * k + len(ev), **args}})

        def launch(name: str, ts: float, start: float, dur: float, corr: int) -> None:
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 2,
                       "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": start, "dur": dur,
                       "args": {"correlation": corr, "device": 0, "stream": 7}})

        if how == "plain":
            op("aten::mm", t, 20, {"Input Dims": [[4096, 4096], [4096, 4096 - k]], "Input type": ["float", "float"],
                                   "Concrete Inputs": ["", ""]})
            launch(kernel, t + 5, t + 30, us, 10 * k + 1)
        else:
            op("aten::linear", t, 40, lin)
            op("aten::_to_copy", t + 2, 10, {"Input Dims": [[4096, 4096], [], [], [], [], [], []],
                                              "Input type": ["float"] + ["Scalar"] * 6, "Concrete Inputs": ["", "15"] + [""] * 5})
            launch("void at::native::unrolled_elementwise_kernel<bfloat16_copy_kernel_cuda>", t + 4, t + 30, 20.0, 10 * k + 1)
            op("aten::addmm", t + 20, 15, bf)
            launch(kernel, t + 25, t + 60, us, 10 * k + 2)
        t += 5000.0
    return write_trace(tmp_path / "gemms.json", ev, deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}])


def test_gemms_are_rated_against_the_peak_of_the_precision_they_ran_in(tmp_path, capsys):
    """The roof of a GEMM is that of the precision its kernels ran in: an fp32 ``aten::linear`` under autocast holds a
    bf16 ``aten::addmm`` (rated against the fp32 peak it read 990% on a real DDP trace); an fp32 GEMM whose kernel is
    a TF32 one by name, or that ran faster than the fp32 peak allows, used TF32 tensor cores; an fp32 GEMM on SIMT
    kernels at an fp32 speed keeps the fp32 peak."""
    flops = 2 * 4096**3
    pm = perf_model(load(_gemm_trace(tmp_path, [
        ("autocast", "nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT", 300.0),
        ("plain", "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16", 1000.0),
        ("plain", "ampere_sgemm_128x128_nn", 500.0)]), cache=False))
    dev = pm.device
    by = {(r["name"], r["input_type"]): r for r in pm.ops.iter_rows(named=True)}
    outer, inner = by[("aten::linear", '["float", "float", "float"]')], by[("aten::addmm", json.dumps(["c10::BFloat16"] * 3 + ["Scalar"] * 2))]
    assert outer["nested"] and outer["dtype"] == "fp32" and outer["peak_precision"] == inner["peak_precision"] == "bf16"
    assert outer["peak_tflops"] == inner["peak_tflops"] == dev.matrix["bf16"]
    assert outer["pct_of_peak"] < 100 and inner["pct_of_peak"] == pytest.approx(100 * (flops + 4096 * 4096) / 300e-6 / 1e12 / dev.matrix["bf16"])
    mm = {r["kernel_time_us"]: r for r in pm.ops.filter(pl.col("name") == "aten::mm").iter_rows(named=True)}
    assert mm[1000.0]["count"] == 1 and mm[1000.0]["peak_precision"] == "tf32" and mm[1000.0]["peak_tflops"] == dev.matrix["tf32"]
    fast = 2 * 4096 * 4096 * 4094 / 500e-6 / 1e12  # 275 TFLOP/s: over the fp32 peak (67), within TF32's
    assert fast > dev.matrix["fp32"] and mm[500.0]["peak_precision"] == "tf32"
    assert mm[500.0]["pct_of_peak"] == pytest.approx(100 * fast / dev.matrix["tf32"])
    assert main(["perf", str(tmp_path / "gemms.json"), "--no-cache", "--all", "-q"]) == 0
    shown = capsys.readouterr().out
    assert "fp32→bf16" in shown and shown.count("fp32→tf32") == 2  # the terminal names what the rows are rated as
    slow = perf_model(load(_gemm_trace(tmp_path, [("plain", "ampere_sgemm_128x128_nn", 5000.0)]), cache=False))
    row = slow.ops.row(0, named=True)  # (its place 0: 4096³)
    assert row["peak_precision"] == "fp32" and row["pct_of_peak"] == pytest.approx(100 * flops / 5000e-6 / 1e12 / dev.matrix["fp32"])


def test_an_out_tensor_is_written_not_read():
    """``mul(self, other, out=)``: the out= tensor is the output (written once), not a third operand read (a real
    trace's ``aten::mul`` read 128-136% of the H200's bandwidth so)."""
    n = 50304 * 768
    out = work("aten::mul", [[50304, 768], [], [50304, 768]], ["float", "double", "float"])
    assert out.op_class == "BinaryElementwise" and out.bytes == n * 4 * 2 + 8 and out.flops == n
    where = work("aten::where", [[64], [64], [64]], ["bool", "float", "float"])
    assert where.op_class == "TernaryElementwise" and where.bytes == 64 * (1 + 4 + 4) + 64 * 4
    where_out = work("aten::where", [[64], [64], [64], [64]], ["bool", "float", "float", "float"])
    assert where_out.bytes == where.bytes


def test_an_overlapping_view_is_read_once_per_distinct_element():
    """Frames of 400 samples 160 apart (stft's, unfold's) hold the elements their strides span, not their size; a
    gapped view (every other element) holds its size."""
    frames = Call("aten::copy_", ((8, 1001, 400), (8, 1001, 400)), ("float", "float"), ("", ""),
                  ([400400, 400, 1], [160400, 160, 1]))
    assert frames.distinct(1) == 7 * 160400 + 1000 * 160 + 399 + 1 and frames.distinct(0) == 8 * 1001 * 400
    gapped = Call("aten::copy_", ((100,), (100,)), ("float", "float"), ("", ""), ([1], [2]))
    assert gapped.distinct(1) == 100
    assert REGISTRY.work(frames).bytes == (8 * 1001 * 400 + frames.distinct(1)) * 4


def test_an_expanded_operand_is_read_once_per_distinct_element():
    """An operand ``expand``ed along a dimension (stride 0 in ``Input Strides``) repeats its elements: each is read
    once (the tied-embedding ``gather`` of GPT's loss read 145% of the H200's bandwidth when its expanded index
    counted 8192 x 768 int64 reads instead of 8192). Without strides the shape's size counts, as before."""
    n = 8192 * 768
    dims, types = [[50304, 768], [], [8192, 768], [], [8192, 768]], ["float", "Scalar", "long int", "Scalar", "float"]
    flat = REGISTRY.work(Call("aten::gather", tuple(dims), tuple(types), ("", "0", "", "False", "")))
    tied = REGISTRY.work(Call("aten::gather", tuple(dims), tuple(types), ("", "0", "", "False", ""),
                              ([768, 1], [], [1, 0], [], [768, 1])))
    assert flat.bytes == 2 * n * 4 + n * 8 and tied.bytes == 2 * n * 4 + 8192 * 8
    mul = REGISTRY.work(Call("aten::mul", ((1, 5184, 1024), (1, 5184, 1024)), ("c10::BFloat16",) * 2, ("", ""),
                             ([5309440, 1024, 1], [5309440, 0, 1])))
    assert mul.bytes == (5184 * 1024 + 1024 + 5184 * 1024) * 2 and mul.params["distinct"] == [5184 * 1024, 1024]


def test_nesting_depth_vectorized():
    ops = pl.DataFrame({"pid": [1, 1, 1, 1, 2], "tid": [1, 1, 1, 1, 1], "ts": [0, 10, 20, 100, 5],
                        "end": [90, 50, 30, 120, 6]})
    assert nesting_depth(ops).to_list() == [0, 1, 2, 0, 0]


def test_missing_shapes_and_unknown_device(tmp_path, capsys):
    pm = perf_model(load(_ops_trace(tmp_path, shapes=False, device="Mystery GPU 9000"), cache=False))
    assert pm.ops.height == 0 and pm.device is None
    assert pm.missing.to_dicts() == [{"name": "aten::addmm", "reason": "no shapes recorded", "count": 2, "kernel_time_us": 80.0}]
    assert any("record_shapes=True" in n for n in pm.notes) and any("--peak" in n for n in pm.notes)
    rc = main(["perf", str(tmp_path / "ops.json"), "--no-cache", "--format", "json"])
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert rc == 0 and doc["device"] == {"name": "Mystery GPU 9000", "peaks": None}
    assert "record_shapes" in out.err and out.err.count("\n") == 2  # one line per note
    rc = main(["perf", str(tmp_path / "ops.json"), "--no-cache", "--peak", "bf16=100,fp32=10,bw=1", "--format", "json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["device"]["peaks"]["hbm_tb_s"] == 1.0


# -- devices --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,expect", [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"), ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"), ("NVIDIA H200", "NVIDIA H200 SXM"),
    ("NVIDIA B200", "NVIDIA B200 (HGX, 1000 W)"), ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM 80GB"),
    ("Tesla V100-SXM2-16GB", "NVIDIA V100 SXM2"), ("AMD Instinct MI300X VF", "AMD Instinct MI300X"),
    ("AMD Instinct MI210", "AMD Instinct MI210"), ("AMD Instinct MI250X", "AMD Instinct MI250X (one GCD)"),
])
def test_device_table(name, expect):
    assert match_device({"name": name}).name == expect


def test_device_fingerprint_and_memory_variant():
    a100 = match_device({"name": "NVIDIA A100-PG509-200", "totalGlobalMem": 85e9})
    assert a100.hbm_tb_s == 2.039
    assert match_device({"name": "NVIDIA A100-PG509-200", "totalGlobalMem": 42e9}).hbm_tb_s == 1.555
    gcd = match_device({"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "numSms": 104})
    assert gcd is not None and gcd.matrix["bf16"] == 181.0
    assert match_device({"name": "AMD Radeon Graphics", "computeMajor": 11, "computeMinor": 0, "numSms": 48}) is None
    assert gcd.name.endswith("(recognised from 'AMD Radeon Graphics': compute 9.0, 104 CUs)")
    nameless = match_device({"computeMajor": 9, "computeMinor": 4, "numSms": 304})  # a JAX profile of an MI300X
    assert nameless.name == "AMD Instinct MI300X (recognised by compute 9.4, 304 CUs; no device name recorded)"


def test_parse_peak():
    h = parse_peak("h100")
    assert h.matrix["bf16"] == 989.4 and h.source == "override"
    p = parse_peak("bf16=500, bw=2", match_device({"name": "NVIDIA H100 80GB HBM3"}))
    assert p.matrix["bf16"] == 500 and p.hbm_tb_s == 2 and p.matrix["fp8"] == 1978.9 and p.source == "table+override"
    for bad in ("", "nonsense", "bf16=", "bf16=-1", "foo=3"):
        with pytest.raises(KernscopeError):
            parse_peak(bad)


# -- TraceLens's reference sheets -----------------------------------------------------------------------
def _key(r: dict) -> tuple:
    return (r["name"], json.dumps(ast.literal_eval(r["Input Dims_first"])), json.dumps(ast.literal_eval(r["Input type_first"])),
            json.dumps(ast.literal_eval(r["Concrete Inputs_first"])))


@pytest.mark.skipif(not REF_NAMES, reason="TraceLens reference outputs not present (../shared/traces)")
@pytest.mark.parametrize("name", REF_NAMES)
def test_flops_and_bytes_match_tracelens(name):
    """Every row of TraceLens's per-class sheets with GPU time: FLOPs and bytes equal ours, or differ exactly by
    one of the documented causes (docs/perf.md): copies count 0 FLOPs here; reductions count every output
    element (TraceLens counts 1 when the dim is given); a convolution's bias is counted here."""
    pm = perf_model(load(TRACES / "tracelens" / f"{name}.json.gz"))
    ours = {(r["name"], r["input_dims"], r["input_type"], r["concrete_inputs"]): r for r in pm.ops.iter_rows(named=True)}
    same = explained = 0
    ref_time: dict[tuple, list[float]] = {}
    for sheet in SHEETS:
        f = REFERENCE / name / f"{sheet}.csv"
        if not f.exists():
            continue
        for r in pl.read_csv(f, infer_schema=False).iter_rows(named=True):
            if float(r["Kernel Time (µs)_sum"]) == 0:  # a CPU-side op: kernscope lists ops that ran GPU work
                continue
            k = _key(r)
            o = ours[k]
            t = ref_time.setdefault(k, [0.0, 0])
            t[0] += float(r["Kernel Time (µs)_sum"])
            t[1] += int(r["name_count"])
            flops = float(r["GFLOPS_first"]) * 1e9
            moved = float(r["Data Moved (MB)_first"]) * 2**20 if r["Data Moved (MB)_first"] else None
            if o["flops"] == pytest.approx(flops, rel=1e-12) and moved is not None and o["bytes"] == pytest.approx(moved, rel=1e-12):
                same += 1
                continue
            params = json.loads(o["params"])
            bpe = {"c10::BFloat16": 2, "c10::Half": 2, "float": 4, "long int": 8, "int": 4, "bool": 1}
            types = json.loads(o["input_type"])
            # an expanded operand (stride 0) is read once per distinct element here
            repeated = sum((int(pl.Series(sh, dtype=pl.Int64).product()) - d) * bpe[types[i]]
                           for i, (sh, d) in enumerate(zip(params.get("shapes", []), params.get("distinct", []))))
            if o["op_class"] == "Copy":
                assert o["flops"] == 0 and (moved is None or o["bytes"] == pytest.approx(moved - repeated, rel=1e-12)), k
            elif o["op_class"] == "Reduce_fwd":
                bpe = (o["bytes"] - moved) / (params["output_elems"] - 1)
                assert o["flops"] == flops and bpe in (2.0, 4.0), k
            elif "distinct" in params:
                assert o["flops"] == flops and moved - o["bytes"] == repeated, k
            elif o["op_class"] == "CONV_fwd":
                out = params["output_shape"]
                assert params["bias"] and o["flops"] - flops == pytest.approx(float(pl.Series(out).product()))
                assert o["bytes"] - moved == out[1] * 2, k
            else:
                raise AssertionError(f"{k}: flops {o['flops']} vs {flops}, bytes {o['bytes']} vs {moved}")
            explained += 1
    assert same >= 9 and same > 2 * (explained // 3)
    for k, (time_us, n) in ref_time.items():  # kernel time per signature, where both group the same calls
        if ours[k]["count"] == n:
            assert ours[k]["kernel_time_us"] == pytest.approx(time_us, abs=0.01), k


def test_perf_xlsx_and_csv(tmp_path, capsys):
    tr = _ops_trace(tmp_path)
    out = tmp_path / "perf.xlsx"
    assert main(["perf", str(tr), "--no-cache", "-o", str(out), "-q"]) == 0
    names = zipfile.ZipFile(out).read("xl/workbook.xml").decode()
    for sheet in ("GEMM", "unified_perf_summary", "perf_by_class", "perf_device", "definitions"):
        assert f'name="{sheet}"' in names
    assert main(["perf", str(tr), "--no-cache", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    # every output lists the table's rows: the op containing another modeled op (aten::linear around
    # aten::addmm) only with --all
    assert lines[0].startswith("name,op_class,dtype,input_dims") and len(lines) == 2 and "aten::addmm" in lines[1]
    assert main(["perf", str(tr), "--no-cache", "--format", "csv", "--all"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and any(x.startswith("aten::linear") for x in lines)
    assert main(["perf", str(tr), "--no-cache", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in doc["ops"]] == ["aten::addmm"] and doc["nested_ops_hidden"] == 1
    assert main(["perf", str(tr), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "addmm" in text and "% of peak" in text and "aten::linear" not in text


def test_bench_harness_counts_what_the_perf_model_counts():
    """One implementation: the harness's tflops numerator is the perf model's FLOPs for the same call."""
    from kernscope.bench.api import Input
    from kernscope.bench.operators import FlashAttention, Gemm

    g = Gemm(device="cpu", dtype="bfloat16")
    inp = Input((4096, 8192, 1024), ())
    assert g.flops(inp) == work("aten::mm", [[4096, 1024], [1024, 8192]], ["c10::BFloat16"] * 2).flops
    g.mode = "bwd"
    assert g.flops(inp) == 2 * 2 * 4096 * 8192 * 1024
    fa = FlashAttention(device="cpu", dtype="bfloat16")
    x = Input((4, 48, 1024, 64, True), ())
    q = [4, 48, 1024, 64]
    call = work("aten::_scaled_dot_product_flash_attention", [q, q, q, [], [], [], []], ["c10::BFloat16"] * 3 + [""] * 4,
                ["", "", "", "0.", "True", "False", ""])
    assert fa.flops(x) == call.flops
    fa.mode = "bwd"
    bwd = work("aten::_scaled_dot_product_flash_attention_backward", [q] * 5 + [[4, 48, 1024]] + [[]] * 9,
               ["c10::BFloat16"] * 5 + ["float"] + [""] * 9, [""] * 11 + ["True", "", "", ""])
    assert fa.flops(x) == bwd.flops == 2.5 * call.flops


@pytest.mark.parametrize("k", [-128, 1 << 62])
def test_shapes_outside_physical_bounds_get_no_model(tmp_path, k):
    """#31: negative dims gave -2,748.8 TFLOP/s, dims near 2^62 3.97e47% of peak. Such a shape is 'no model',
    with its reason, never a number."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000, "dur": 100,
           "args": {"External id": 1, "Input Dims": [[64, k], [k, 256]], "Input type": ["float", "float"],
                    "Concrete Inputs": ["", ""]}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 1010, "dur": 5,
           "args": {"External id": 1, "correlation": 7}},
          {"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 1050, "dur": 40,
           "args": {"correlation": 7, "device": 0, "stream": 7}}]
    p = write_trace(tmp_path / "bad_dims.json", ev, deviceProperties=[{"id": 0, "name": "NVIDIA H100 80GB HBM3"}])
    pm = perf_model(load(p, cache=False))
    assert pm.ops.height == 0
    assert pm.missing.rows() == [("aten::mm", "shapes outside physical bounds", 1, 40.0)]


def test_a_bug_in_a_model_raises_and_unusable_shapes_are_counted(tmp_path):
    """#26.5: only NoModel means "no model" (with the model's reason, counted in the notes); any other exception
    from a model is a bug and propagates instead of reading as "no model"."""
    from kernscope.analyze.perf.formulas import NoModel, Registry

    trace = load(_ops_trace(tmp_path), cache=False)
    buggy = Registry()

    @buggy.register("aten::addmm", op_class="GEMM")
    def _broken(call):
        return call.shape(1)[7]  # an index bug: IndexError

    with pytest.raises(IndexError):
        perf_model(trace, registry=buggy)
    picky = Registry()

    @picky.register("aten::addmm", op_class="GEMM")
    def _refuses(call):
        raise NoModel("bias of another rank")

    pm = perf_model(trace, registry=picky)
    assert pm.ops.height == 0 and pm.missing.row(0, named=True)["reason"] == "bias of another rank"
    assert "2 op calls (80.0 µs of GPU time) have shapes no model could use: bias of another rank (2)" in pm.notes
    assert picky.attempt(Call("aten::mm", ((1, 2),), ("float",), ("",))) == (None, "no model for this op")


def test_the_commonest_unusable_reasons_are_in_one_order():
    """The note on op calls no model could use names the three commonest reasons; of equal counts the first in the
    reason's text (a real trace's two broadcast failures of one count came out in either order from run to run)."""
    from kernscope.analyze.perf.roofline import commonest_reasons

    reasons = [f"shapes (({k}, 8), (8,)) do not broadcast" for k in (512, 256, 384, 128)]
    rows = [(r, 2) for r in reasons] + [("argument 0 has no element type", 9), ("argument 0 has no element type", 1),
                                         ("tensor-list shapes not recorded", 35)]
    missing = pl.DataFrame(rows, schema={"reason": pl.String, "count": pl.Int64}, orient="row")
    for _ in range(5):
        assert commonest_reasons(missing.sample(fraction=1.0, shuffle=True)) == [
            ("tensor-list shapes not recorded", 35), ("argument 0 has no element type", 10),
            ("shapes ((128, 8), (8,)) do not broadcast", 2)]
    assert commonest_reasons(missing, n=5)[3:] == [("shapes ((256, 8), (8,)) do not broadcast", 2),
                                                   ("shapes ((384, 8), (8,)) do not broadcast", 2)]


PRECISION = Path(__file__).parent / "data" / "precision_h200"


def test_real_h200_gemms_are_rated_in_the_precision_they_ran_in():
    """Recorded on an H200 by ``examples/record_precision_traces.py`` (one step per case, 3 calls each): fp32
    ``torch.mm`` with TF32 off runs cuBLAS's ``..._f32f32_f32f32_..._ffma`` kernels (fp32 peak), with TF32 on its
    ``..._f32f32_tf32f32_...`` kernels (TF32 peak); an fp32 ``linear`` under autocast holds a bf16 GEMM; ``mul(out=)``
    and a gather with an expanded index are memory-bound. Every rate is under its roof."""
    t = load(PRECISION / "precision.pt.trace.json.gz", cache=False)
    dev = perf_model(t).device
    got = {}
    for s in range(4):
        for r in perf_model(t, step=s).ops.iter_rows(named=True):
            got[(s, r["name"], r["dtype"])] = r
    assert all(r["pct_of_peak"] <= 100 for r in got.values())
    fp32, tf32 = got[(0, "aten::mm", "fp32")], got[(1, "aten::mm", "fp32")]
    assert fp32["peak_precision"] == "fp32" and fp32["peak_tflops"] == dev.matrix["fp32"] and 40 < fp32["tflops_per_s"] < 67
    assert tf32["peak_precision"] == "tf32" and tf32["peak_tflops"] == dev.matrix["tf32"] and tf32["tflops_per_s"] > 300
    outer, inner = got[(2, "aten::linear", "fp32")], got[(2, "aten::mm", "bf16")]
    assert outer["nested"] and outer["peak_precision"] == inner["peak_precision"] == "bf16" and outer["pct_of_peak"] < inner["pct_of_peak"]
    mul, gather = got[(3, "aten::mul", "fp32")], got[(3, "aten::gather", "fp32")]
    assert mul["bytes"] == 2 * 64 * 2**20 * 4 + 8 and mul["op_class"] == "BinaryElementwise"  # (0.5: a 0-d double)
    assert gather["bytes"] == 2 * 8192 * 768 * 4 + 8192 * 8  # the index expanded over 768 columns: read once


def test_real_h200_jax_dots_at_default_and_highest_precision_are_two_rows():
    """JAX's f32 dot at the default precision runs a TF32 cuBLAS kernel, at ``Precision.HIGHEST`` an fp32 one: two
    programs of one name (``jit__lambda``) and one instruction (``custom-call.1``), so two rows of 3 calls each, each
    against its own roof (one row of 3 "calls" rated on TF32's peak at 9% before)."""
    pm = perf_model(load(PRECISION / "jax_precision.xplane.pb.gz", cache=False))
    rows = {r["peak_precision"]: r for r in pm.ops.iter_rows(named=True)}
    assert set(rows) == {"fp32", "tf32"} and [rows[p]["count"] for p in ("fp32", "tf32")] == [3, 3]
    assert rows["tf32"]["tflops_per_s"] > 300 and rows["fp32"]["tflops_per_s"] < 67
    assert all(50 < r["pct_of_peak"] <= 100 for r in rows.values())
    # the TF32 program's memset (cuBLAS's, 2 µs) is its program's: it was grouped with the other program's fp32 GEMM
    # by its name (not TF32's), the fp32 row's shortest call 0.7 µs
    assert rows["fp32"]["min_time_us"] > 2000


def test_casts_name_their_types(capsys):
    """The DDP job's rank (bf16 autocast, fp32 parameters): a copy_ of bf16 into fp32 and one of fp32 into fp32, both
    4096x4096, read as two identical rows ("copy_ Copy fp32 4096x4096, 4096x4096", 38.5% and 64.4% of peak). A cast
    says its types, from→to, in the table (params "from"/"to" in JSON)."""
    import json
    from pathlib import Path

    from kernscope.cli import main

    rank0 = Path(__file__).parent / "data" / "ddp2_h200" / "rank0.pt.trace.json.gz"
    assert main(["perf", str(rank0), "--no-cache", "-q", "--format", "json"]) == 0
    ops = json.loads(capsys.readouterr().out)["ops"]
    big = [o for o in ops if o["name"] == "aten::copy_" and o["input_dims"].startswith("[[4096, 4096]")]
    got = sorted((o["dtype"], json.loads(o["params"]).get("from", "")) for o in big)
    assert got == [("bf16", "fp32"), ("fp32", ""), ("fp32", "bf16")]
    assert main(["perf", str(rank0), "--no-cache", "-q"]) == 0
    out = capsys.readouterr().out
    assert "bf16→fp32" in out and "fp32→bf16" in out


def test_flops_equal_the_profilers_own_counts():
    """torch.profiler's ``with_flops`` counts (``key_averages(group_by_input_shape=True)``, written beside the trace
    by ``examples/record_profiler_options.py --which flops`` on an H200: the exported trace carries none) against the
    perf model's, per op and input shapes: every op PyTorch counts is modeled, with the same FLOPs per call, except
    that the perf model also counts a bias's adds (``addmm``: M x N, ``conv2d`` with bias: N x Cout x H x W), which
    PyTorch leaves out."""
    data = Path(__file__).parent / "data" / "flops_h200"
    torch_counts = json.loads((data / "flops.torch_flops.json").read_text())
    ops = perf_model(load(data / "flops.pt.trace.json.gz", cache=False)).ops
    ours = {(r["name"], r["input_dims"]): r for r in ops.iter_rows(named=True)}
    assert len(torch_counts) == 15
    for t in torch_counts:
        dims = t["input_shapes"]
        got = next(r for (name, d), r in ours.items() if name == t["name"] and json.loads(d)[:len(dims)] == dims)
        assert got["count"] == t["count"], t
        want = t["flops"] / t["count"]
        if t["name"] == "aten::addmm":
            want += dims[1][0] * dims[2][1]
        if t["name"] == "aten::conv2d" and dims[2]:
            n, _, h, w = dims[0]
            want += n * dims[1][0] * h * w  # (stride 1, padding 1: the output is H x W)
        assert got["flops"] == want, (t["name"], dims, got["flops"], want)


def test_a_0d_operand_does_not_set_an_elementwise_ops_type_where_promotion_ignores_it():
    """torch.fft's normalization multiplies by a 0-d double (``aten::mul(0-d double, float x, out=)``): the output was
    taken as 8 bytes an element and the row as fp64, so it read "7.6 TB/s, 159% of its roofline" on an H200 (the
    libraries recording). A 0-d tensor of the same or a lower type category than the tensor takes no part in the
    result's type; of a higher one (an integer tensor times a 0-d float) it still decides."""
    n = 16 * 512 * 512
    w = work("aten::mul", [[], [16, 512, 512], [16, 512, 512]], ["double", "float", "float"])
    assert w.bytes == 8 + n * 4 + n * 4 and w.dtype == "float"
    half = work("aten::mul", [[], [4096]], ["float", "c10::BFloat16"])
    assert half.bytes == 4 + 4096 * 2 + 4096 * 2 and half.dtype == "c10::BFloat16"
    ints = work("aten::mul", [[], [4096]], ["float", "long int"])
    assert ints.bytes == 4 + 4096 * 8 + 4096 * 4 and ints.dtype == "float"  # (the result is floating: the 0-d decides)
    pm = perf_model(load(Path(__file__).parent / "data" / "libraries_h200" / "fft.pt.trace.json.gz", cache=False))
    (row,) = [o for o in pm.ops.to_dicts() if o["name"] == "aten::mul" and o["input_dims"].startswith("[[], [16, 512, 512]")]
    assert row["dtype"] == "fp32" and row["bytes"] == 8 + 2 * n * 4 and row["tb_per_s"] < 5.2


def test_cli_perf_lists_the_ops_it_could_not_model_to_top(capsys):
    """The terminal's table of ops the model could not use keeps to --top, the longest first, with '… N more' (as
    every long table); the JSON holds them all."""
    import kernscope

    example = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    assert main(["perf", str(example), "--format", "json", "--no-cache"]) == 0
    missing = json.loads(capsys.readouterr().out)["missing"]
    assert len(missing) >= 2 and missing[0]["kernel_time_us"] >= missing[1]["kernel_time_us"]
    assert main(["perf", str(example), "--no-cache", "--top", "1"]) == 0
    section = capsys.readouterr().out.split("Ops the model could not use")[1].split("\n\n")[0].splitlines()
    assert section[2].split()[0] == missing[0]["name"]
    assert [ln.strip() for ln in section[3:]] == [f"… {len(missing) - 1} more"]


def test_op_args_read_again_leave_the_files_pages_behind_as_they_go(tmp_path, monkeypatch):
    """The perf model's second read of the ops' shapes (``opargs``) gives each piece's pages of a plain file back to
    the system once read, as the main parse does (kept mapped, the whole file counted in the process's memory: perf
    of a 206 MB trace peaked at 458 MB instead of 266); the values read are the same in small pieces."""
    import gzip
    import importlib

    import kernscope
    from kernscope.load.source import TraceSource

    opargs = importlib.import_module("kernscope.load.opargs")
    example = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(example.read_bytes()))
    ops = kernscope.load(plain, cache=False).events.filter(pl.col("kind") == "cpu_op")["idx"]
    wanted = ops.gather_every(7).to_list() + [ops[-1]]
    whole = opargs.read_op_args(plain, wanted)
    released: list[int] = []
    real = TraceSource.release

    def release(self, upto):
        released.append(upto)
        real(self, upto)

    monkeypatch.setattr(TraceSource, "release", release)
    # in pieces of 64 KB: the compiled scanner's (kineto.piece_bytes) and msgspec's where it is not built
    kineto = importlib.import_module("kernscope.load.kineto")
    fastscan = importlib.import_module("kernscope.load.fastscan")
    monkeypatch.setattr(kineto, "piece_bytes", lambda: 64 << 10)
    monkeypatch.setattr(opargs, "reader_chunk_bytes", lambda: 64 << 10)
    size = plain.stat().st_size
    for native in (True, False):
        monkeypatch.setattr(fastscan, "available", lambda native=native: native)
        released.clear()
        small = opargs.read_op_args(plain, wanted)
        assert small.equals(whole) and small["input_dims"].null_count() < small.height
        assert len(released) > 10 and released == sorted(released) and released[-1] > size // 2  # (to the last op wanted)
        released.clear()  # ops of the file's first pieces: the rest is not read
        assert opargs.read_op_args(plain, wanted[:3]).equals(whole.filter(pl.col("idx").is_in(wanted[:3])))
        assert released and max(released) < size // 4


def _op_args_both_ways(path: Path | str, wanted: list[int]) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    """``read_op_args``' two readers: the compiled scanner's table (None: declined) and msgspec's."""
    import importlib

    import numpy as np

    opargs = importlib.import_module("kernscope.load.opargs")
    want = np.unique(np.array(wanted, dtype=np.int64))
    scanned = opargs._scanned_texts(path, want, opargs.OP_TEXTS)
    rows = opargs._read_args(path, want.tolist(), opargs._Event, lambda i, a: (
        i, opargs._text(a.input_dims), opargs._text(a.input_type), opargs._text(a.concrete), opargs._text(a.input_strides)))
    plain = pl.DataFrame(rows, schema=opargs.SCHEMA, orient="row")
    return scanned, plain.filter(pl.any_horizontal(pl.exclude("idx").is_not_null()))


@pytest.mark.parametrize("path", [
    Path(__file__).parent / "data" / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz",
    Path(__file__).parent.parent / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz",
    TRACES / "hta" / "a100_8rank_rank3_control.json.gz",
    TRACES / "tracelens" / "mi300_google_owlv2-large-patch14-ensemble__1016001.json.gz",
], ids=["h100_gpt_stack_shapes", "bundled_h200", "hta_a100", "tracelens_mi300_owlv2"])
def test_op_shapes_read_by_the_compiled_scanner_equal_msgspecs(path):
    """The perf model's op shapes, read as their JSON text by the compiled scanner, are msgspec's raw values: every CPU
    op of real traces recorded with shapes, text for text (and the count of ops with shapes in the raw JSON)."""
    import gzip

    from kernscope.load.fastscan import available

    if not path.is_file():
        pytest.skip("../shared/traces not present")
    if not available():
        pytest.skip("the compiled scanner is not built")
    ops = load(path, cache=False, projection="analyze").events.filter(pl.col("kind") == "cpu_op")["idx"].to_list()
    scanned, plain = _op_args_both_ways(path, ops)
    assert scanned is not None and scanned.equals(plain)
    raw = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    shaped = [e for e in raw if e.get("cat") == "cpu_op" and "Input Dims" in (e.get("args") or {})]
    assert scanned.height == len(shaped) > 1000


def test_op_shapes_as_written_escapes_nulls_and_a_long_value(tmp_path):
    """Values as the file writes them (escapes, spaces, ``null``, nested arrays), an op without args or without shapes
    (no row), the document's keys after the events; a value over 4 KB: the scanner declines its piece and msgspec reads
    the file, the same table."""
    evs = [
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "args": {"Input Dims": '
        '[[8, 8], [8, 8]], "Input type": ["float", "c10::Half"], "Concrete Inputs": ["", "a\\"b\\u00e9"]}}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 3, "dur": 1}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 4, "dur": 1, "args": {"External id": 9}}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::view", "pid": 1, "tid": 1, "ts": 5, "dur": 1, "args": {"Input Dims": null,'
        ' "Input Strides": [ [1] ,[]], "Input type": []}}',
    ]
    from kernscope.load.fastscan import available

    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [\n' + ",\n".join(evs) + '\n], "displayTimeUnit": "ms"}')
    scanned, plain = _op_args_both_ways(p, [0, 1, 2, 3])
    assert (scanned is not None and scanned.equals(plain)) if available() else scanned is None
    assert plain.to_dicts() == [
        {"idx": 0, "input_dims": "[[8, 8], [8, 8]]", "input_type": '["float", "c10::Half"]',
         "concrete_inputs": '["", "a\\"b\\u00e9"]', "input_strides": None},
        {"idx": 3, "input_dims": "null", "input_type": "[]", "concrete_inputs": None, "input_strides": "[ [1] ,[]]"}]
    long = evs[0].replace('"Input Dims": [[8, 8], [8, 8]]', '"Input Dims": [' + ", ".join(["[8, 8]"] * 800) + "]")
    q = tmp_path / "long.json"
    q.write_text('{"traceEvents": [\n' + ",\n".join([long, *evs[1:]]) + "\n]}")
    scanned, plain = _op_args_both_ways(q, [0, 3])
    assert scanned is None and plain["input_dims"][0].startswith("[[8, 8], ") and plain.height == 2
    from kernscope.load.opargs import read_op_args

    assert read_op_args(q, [0, 3]).equals(plain)
