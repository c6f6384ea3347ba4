"""Low-precision and grouped GEMMs that inference and mixture-of-experts code calls, recorded on an H200
(``examples/record_lowp_kernels.py`` -> ``tests/data/lowp_h200``): ``torch._grouped_mm`` (an MoE layer's experts,
forward and backward), ``torch._int_mm`` (int8), ``torch._scaled_mm`` with row-wise scales (fp8) and decode attention
with grouped-query heads. FLOPs are checked against the sizes in ``record_info.json``, times against the raw JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kernscope import load
from kernscope.analyze.perf import REGISTRY, Call, perf_model
from kernscope.analyze.summary import analyze
from kernscope.cli import main

DATA = Path(__file__).parent / "data" / "lowp_h200"
INFO = json.loads((DATA / "record_info.json").read_text())["scenarios"]


def _kernel_us(name: str, launcher: str) -> list[float]:
    """Durations (µs) of the GPU records launched under the CPU op ``launcher`` (by the op's span on its thread and
    the launch's correlation), from the raw JSON."""
    ev = json.loads(gzip.decompress((DATA / f"{name}.pt.trace.json.gz").read_bytes()))["traceEvents"]
    ops = [(e["tid"], e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "cpu_op" and e["name"] == launcher]
    corr = {e["args"]["correlation"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
            and "correlation" in e.get("args", {})
            and any(t == e["tid"] and a <= e["ts"] <= b for t, a, b in ops)}
    return [float(e["dur"]) for e in ev if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")
            and e.get("args", {}).get("correlation") in corr]


def _ops(name: str) -> list[dict]:
    """The perf model's ops (``flops`` and ``bytes`` per call), the outermost of nested ones left out."""
    return [o for o in perf_model(load(DATA / f"{name}.pt.trace.json.gz", cache=False)).ops.to_dicts() if not o["nested"]]


def test_the_recording_holds_every_scenario():
    assert all(s["ok"] for s in INFO.values()), INFO


def test_grouped_mm_is_modeled_in_each_of_its_layouts():
    """The MoE layer's three grouped GEMMs (the forward, 2-D tokens by 3-D experts; the input's gradient, the same
    with the experts' weights transposed; the weights' gradient, 2-D by 2-D grouped along the tokens) each do
    2 x tokens x hidden x width FLOPs: the perf model had none (50.5% of the profile's GPU time outside it)."""
    s = INFO["grouped_mm"]
    flops = s["forward_flops"]
    assert flops == 2 * sum(s["tokens_per_expert"]) * s["hidden"] * s["width"]
    grouped = [o for o in _ops("grouped_mm") if o["name"] == "aten::_grouped_mm"]
    assert len(grouped) == 3 and all(o["count"] == 3 and o["op_class"] == "GEMM" and o["dtype"] == "bf16"
                                     for o in grouped)
    assert {o["flops"] for o in grouped} == {flops}
    total_us = sum(_kernel_us("grouped_mm", "aten::_grouped_mm"))
    assert sum(o["kernel_time_us"] for o in grouped) == pytest.approx(total_us, abs=0.01)
    for o in grouped:
        assert o["tflops_per_s"] == pytest.approx(3 * flops / (o["kernel_time_us"] * 1e-6) / 1e12, rel=1e-9)
        assert 40 < o["pct_of_peak"] < 70 and o["bound"] == "compute"
    pm = perf_model(load(DATA / "grouped_mm.pt.trace.json.gz", cache=False))
    assert pm.coverage["pct"] == pytest.approx(100.0)


def test_int8_matmul_is_rated_against_the_int8_peak_and_found_far_from_it(capsys):
    """``torch._int_mm`` ran an sm80 WMMA kernel at 126 TOPS on the H200, 6% of its int8 peak: the perf model had no
    model for it (0% coverage); it is now a GEMM of int8 operands and int32 output, and a far-from-roofline finding."""
    s = INFO["int8"]
    (op,) = _ops("int8")
    durs = _kernel_us("int8", "aten::_int_mm")
    assert len(durs) == 12 and op["count"] == 12 and op["dtype"] == "int8"
    assert op["tflops_per_s"] == pytest.approx(s["flops_per_call"] * 12 / (sum(durs) * 1e-6) / 1e12, rel=1e-6)
    n = s["m"]
    assert op["flops"] == s["flops_per_call"] and op["bytes"] == 2 * n * n + 4 * n * n  # int8 A, B read; int32 C
    assert op["peak_tflops"] > 1900 and op["pct_of_peak"] < 10
    assert main(["perf", str(DATA / "int8.pt.trace.json.gz"), "--no-cache"]) == 0
    assert "aten::_int_mm (int8, 12 calls" in capsys.readouterr().out


def test_fp8_rowwise_scaled_mm_counts_its_scales_and_rates_against_fp8():
    s = INFO["fp8_rowwise"]
    (op,) = _ops("fp8_rowwise")
    durs = _kernel_us("fp8_rowwise", "aten::_scaled_mm")  # (with cuBLAS's workspace memsets, as the op's time)
    assert len(durs) == 24 and op["count"] == 12 and op["dtype"] == "fp8" and op["peak_tflops"] > 1900
    assert op["tflops_per_s"] == pytest.approx(s["flops_per_call"] * 12 / (sum(durs) * 1e-6) / 1e12, rel=1e-6)
    m, n, k = s["m"], s["n"], s["k"]
    assert op["bytes"] == m * k + k * n + 2 * m * n  # fp8 in, bf16 out


def test_decode_attention_with_grouped_query_heads_is_memory_bound_on_the_kv_cache():
    """One query token against a 4,096-token cache: FLOPs 4 x B x Hq x Lk x D, bytes dominated by the KV cache (read
    once, at the KV heads' count), bound by memory, categorized Attention Forward."""
    s = INFO["decode_attention"]
    (op,) = _ops("decode_attention")
    b, hq, lk, d = s["batch"], s["q_heads"], s["kv_len"], s["head_dim"]
    assert op["name"] == "aten::_cudnn_attention_forward" and op["count"] == 24 and op["bound"] == "memory"
    assert op["flops"] == 4 * b * hq * lk * d
    q_and_out = 2 * b * hq * d * 2
    assert op["bytes"] == s["kv_bytes_per_call"] + q_and_out
    assert op["tb_per_s"] == pytest.approx(op["bytes"] * 24 / (sum(_kernel_us("decode_attention",
                                                                              "aten::_cudnn_attention_forward")) * 1e6))
    cats = analyze(load(DATA / "decode_attention.pt.trace.json.gz", cache=False)).categories
    assert cats["category"].to_list() == ["Attention Forward"]


# -- the grouped GEMM's layouts on made-up shapes ------------------------------------------------------------------
def _work(name: str, dims: list, types: list[str], concrete: list[str] | None = None):
    return REGISTRY.attempt(Call(name, tuple(dims), tuple(types), tuple(concrete or ["" for _ in dims])))


BF = "c10::BFloat16"


@pytest.mark.parametrize(("dims", "out_elems"), [
    ([[96, 64], [4, 64, 32], [4]], 96 * 32),  # 2-D by 3-D: the rows in groups
    ([[4, 96, 64], [64, 32], [4]], 96 * 32),  # 3-D by 2-D: the columns in groups (N = 32 in all)
    ([[96, 64], [64, 32], [4]], 4 * 96 * 32),  # 2-D by 2-D: the inner dimension in groups
])
def test_grouped_mm_layouts_flops_and_bytes(dims, out_elems):
    w, why = _work("aten::_grouped_mm", [*dims, [], []], [BF, BF, "int", "", ""])
    assert why is None and w is not None
    assert w.flops == 2 * 96 * 64 * 32 and w.params["groups"] == 4
    a, b = dims[0], dims[1]
    assert w.bytes == 2 * (a[0] * a[1] * (a[2] if len(a) == 3 else 1) + b[0] * b[1] * (b[2] if len(b) == 3 else 1)
                           + out_elems)


def test_grouped_mm_batched_and_the_shapes_it_refuses():
    w, _ = _work("aten::_grouped_mm", [[4, 8, 16], [4, 16, 32], [], [], []], [BF, BF, "", "", ""])
    assert w is not None and w.flops == 4 * 2 * 8 * 16 * 32
    assert _work("aten::_grouped_mm", [[96, 64], [64, 32], [], [], []], [BF, BF, "", "", ""])[1] == (
        "a grouped inner dimension without offsets")
    assert _work("aten::_grouped_mm", [[96, 64], [4, 48, 32], [4], [], []], [BF, BF, "int", "", ""])[1] == (
        "inner dimensions differ")
    assert _work("aten::_grouped_mm", [[4, 8, 16], [3, 16, 32], [], [], []], [BF, BF, "", "", ""])[1] == (
        "group counts differ")


def test_scaled_grouped_mm_reads_its_offsets_and_output_type():
    """fp8 operands with per-row scales and the output type told (``out_dtype`` 15: bf16; 6: fp32)."""
    f8 = "c10::Float8_e4m3fn"
    dims = [[96, 64], [4, 64, 32], [96], [4, 32], [4], [], [], [], []]
    types = [f8, f8, "float", "float", "int", "", "", "", "Scalar"]
    for code, bpe in (("15", 2), ("6", 4), ("", 2)):
        w, why = _work("aten::_scaled_grouped_mm", dims, types, ["", "", "", "", "", "", "", code, "False"])
        assert why is None and w is not None and w.flops == 2 * 96 * 64 * 32 and w.dtype == f8
        assert w.bytes == 96 * 64 + 4 * 64 * 32 + 96 * 32 * bpe
