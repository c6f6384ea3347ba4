"""Kernels torch.compile generates from templates, recorded on an H200 (``examples/record_inductor_kernels.py`` ->
``tests/data/inductor_h200``): FlexAttention forward and backward, max-autotune's Triton matrix products and
convolution, compiled SDPA (cuDNN's attention) and an fp8 ``_scaled_mm``. Categories are checked against what
generated each kernel (``record_info.json``: the words in each generated kernel's source), FLOPs against the models'
sizes, times against the raw JSON."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from kernscope import load
from kernscope.analyze.categories import Categorizer
from kernscope.analyze.perf import REGISTRY, Call, perf_model
from kernscope.analyze.summary import analyze
from kernscope.cli import main

DATA = Path(__file__).parent / "data" / "inductor_h200"
INFO = json.loads((DATA / "record_info.json").read_text())


def _events(name: str) -> list[dict]:
    return json.loads(gzip.decompress((DATA / f"{name}.pt.trace.json.gz").read_bytes()))["traceEvents"]


def _raw_kernels(name: str, cats: tuple[str, ...] = ("kernel",)) -> dict[str, list[float]]:
    """Kernel name -> durations (µs) of its GPU kernels (``cats``: the events' categories) in the trace, all of it
    profiled steps."""
    out: dict[str, list[float]] = defaultdict(list)
    for e in _events(name):
        if e.get("cat") in cats:
            out[e["name"]].append(float(e["dur"]))
    return out


def _source_says(kernel: str) -> str:
    """What generated a kernel, by the words in its generated source (record_info.json)."""
    words = set(INFO["generated_kernels"][kernel]["words"])  # (flex_attention_backward_0: the node it came from)
    if any(w.startswith("flex_attention_backward") for w in words):
        return "Attention Backward"
    if any(w.startswith("flex_attention") for w in words):
        return "Attention Forward"
    if "convolution" in words and kernel.startswith("triton_tem_"):
        return "Convolution"
    if "BLOCK_K" in words and kernel.startswith("triton_tem_"):  # a matrix-product template
        return "GEMM"
    raise AssertionError(f"no rule for {kernel}: {sorted(words)}")


def test_the_recording_holds_every_scenario():
    assert all(s["ok"] for s in INFO["scenarios"].values()), INFO["scenarios"]
    assert INFO["gpu"] == "NVIDIA H200" and INFO["torch"].startswith("2.11")


@pytest.mark.parametrize("scenario", ["flex", "mm_autotune", "conv_autotune"])
def test_template_kernels_take_the_category_of_what_generated_them(scenario):
    """FlexAttention's backward kernels (the template and its preprocessing reduction) had read "Attention Forward":
    the Inductor table's "flex_attention" token matched the start of "flex_attention_backward" (54.5% of the flex
    profile's GPU time, filed under the wrong pass)."""
    trace = load(DATA / f"{scenario}.pt.trace.json.gz", cache=False)
    kernels = analyze(trace).kernels  # (the table users read: one row per kernel, launcher and category)
    got = dict(kernels.select("name", "category").iter_rows())
    assert kernels["name"].n_unique() == kernels.height
    raw = _raw_kernels(scenario)
    generated = [k for k in raw if k.startswith("triton_") and k in INFO["generated_kernels"]
                 and (k.startswith("triton_tem_") or "flex_attention" in k)]
    assert generated, scenario
    for k in generated:
        assert got[k] == _source_says(k), k
    if scenario == "flex":
        assert sorted(generated) == ["triton_per_fused_flex_attention_backward_0",
                                     "triton_tem_fused_flex_attention_0", "triton_tem_fused_flex_attention_backward_1"]


def test_template_names_never_read_as_data_movement():
    """A template is a matrix product, a convolution or attention whatever it fused (zeros, a copy): older Inductor
    names FlexAttention's backward ``triton_tem_fused_zeros_1``, which read "Memory". A name with no fused op says
    nothing of data movement either."""
    c = Categorizer.builtin()
    assert c.category("triton_tem_fused_zeros_1") == "GEMM"
    assert c.category("triton_tem_fused_0") == "GEMM"
    assert c.category("triton_poi_fused_0") == "Elementwise"
    assert c.category("triton_poi_fused_cat_0") == "Memory"  # (still: a fused op that only moves data)
    assert c.category("triton_red_fused__scaled_dot_product_efficient_attention_backward_3") == "Attention Backward"


def test_autotuned_matrix_products_are_modeled_from_their_buffers():
    """max-autotune's Triton GEMMs (74% of the profile's GPU time) had no model: their CPU op is named like the
    kernel. Each now gets 2 * M * N * K from the three matrices among its buffers: every one of the five multiplies
    4096 x 2048 by 2048 x 8192 (or its transposes), whatever the order and orientation of its arguments."""
    perf = perf_model(load(DATA / "mm_autotune.pt.trace.json.gz", cache=False))
    tem = perf.ops.filter(perf.ops["name"].str.starts_with("triton_tem_"))
    raw = _raw_kernels("mm_autotune")
    assert sorted(tem["name"].to_list()) == sorted(k for k in raw if k.startswith("triton_tem_"))
    for r in tem.iter_rows(named=True):
        assert r["flops"] == 2 * 4096 * 2048 * 8192, r["name"]
        assert r["op_class"] == "GEMM" and r["dtype"] == "bf16" and r["count"] == len(raw[r["name"]]) == 3
        assert r["kernel_time_us"] == pytest.approx(sum(raw[r["name"]]), rel=1e-9)
        assert r["tflops_per_s"] == pytest.approx(r["flops"] * 3 / (sum(raw[r["name"]]) * 1e-6) / 1e12, rel=1e-9)
    addmm = tem.filter(tem["name"] == "triton_tem_fused_addmm_t_0").row(0, named=True)
    assert addmm["bytes"] == (8192 + 4096 * 2048 + 8192 * 2048 + 4096 * 8192) * 2  # the bias read too
    gemm_us = sum(sum(v) for k, v in raw.items() if k.startswith("triton_tem_"))
    assert gemm_us / sum(sum(v) for v in raw.values()) > 0.7
    assert perf.coverage["pct"] > 85  # (was 14.7%)


def test_the_autotuned_convolution_is_modeled_from_its_buffers():
    perf = perf_model(load(DATA / "conv_autotune.pt.trace.json.gz", cache=False))
    r = perf.ops.filter(perf.ops["name"] == "triton_tem_fused_convolution_0").row(0, named=True)
    assert r["op_class"] == "CONV_fwd" and r["count"] == 3
    assert r["flops"] == 2 * (32 * 128 * 56 * 56) * (64 * 3 * 3)
    assert r["bytes"] == (32 * 64 * 56 * 56 + 128 * 64 * 9 + 32 * 128 * 56 * 56) * 2


def test_flex_attention_is_named_as_unmodeled_with_the_reason():
    """Its FLOPs depend on the block mask, whose contents the profile does not record: no number is made up."""
    perf = perf_model(load(DATA / "flex.pt.trace.json.gz", cache=False))
    # (the backward's preprocessing reduction, triton_per_fused_flex_attention_backward_0, is a fused reduction)
    assert perf.ops.filter(pl.col("name").str.contains("flex"))["name"].to_list() == [
        "triton_per_fused_flex_attention_backward_0"]
    miss = {r["name"]: r for r in perf.missing.iter_rows(named=True)}
    assert set(miss) == {"triton_tem_fused_flex_attention_0", "triton_tem_fused_flex_attention_backward_1"}
    assert all("block mask" in r["reason"] and r["count"] == 3 for r in miss.values())
    raw = _raw_kernels("flex")
    assert sum(r["kernel_time_us"] for r in miss.values()) == pytest.approx(
        sum(sum(raw[k]) for k in miss), rel=1e-9)


def test_fp8_scaled_mm_against_the_fp8_peak(capsys):
    assert main(["perf", str(DATA / "fp8.pt.trace.json.gz"), "--format", "json", "--no-cache"]) == 0
    out = json.loads(capsys.readouterr().out)
    ops = out["analysis"]["ops"] if "analysis" in out else out["ops"]
    (op,) = ops
    raw = _raw_kernels("fp8", ("kernel", "gpu_memset"))  # (cuBLAS clears a workspace inside each call: its time too)
    assert [len(v) for v in raw.values()] == [12, 12]
    durs = [d for v in raw.values() for d in v]
    assert op["count"] == 12 and op["dtype"] == "fp8"
    assert op["tflops_per_s"] == pytest.approx(2 * 8192 ** 3 * 12 / (sum(durs) * 1e-6) / 1e12, rel=1e-6)
    assert op["peak_tflops"] > 1900  # rated against the fp8 peak (1,979), not bf16's 989


# -- the buffer-matching models on shapes made up to trap them ----------------------------------------------------
def _work(name: str, dims: list, types: list[str] | None = None):
    types = types or ["c10::BFloat16" if d else "Scalar" for d in dims]
    return REGISTRY.attempt(Call(name, tuple(dims), tuple(types), tuple("" for _ in dims)))


def test_matrix_product_buffers_in_any_order_orientation_and_batch():
    mm = 2 * 64 * 128 * 256
    for dims in ([[64, 128], [128, 256], [64, 256]], [[64, 256], [64, 128], [256, 128]],  # output first, B transposed
                 [[256], [64, 128], [256, 128], [64, 256], [64, 256]]):  # a bias and an epilogue input of M x N
        w, why = _work("triton_tem_fused_addmm_relu_0", dims)
        assert why is None and w.flops == mm and w.params["MNK"] == 64 * 128 * 256, dims
    w, _ = _work("triton_tem_fused_bmm_3", [[8, 64, 128], [8, 128, 256], [8, 64, 256]])
    assert w.flops == 8 * mm and w.params["B"] == 8
    w, _ = _work("triton_tem_fused_mm_0", [[64, 64], [64, 64], [64, 64]])  # square: every role fits, one answer
    assert w.flops == 2 * 64 ** 3


def test_matrix_product_buffers_that_do_not_fit_get_no_model():
    w, why = _work("triton_tem_fused_mm_0", [[64, 128], [100, 256], [64, 256]])
    assert w is None and "matrix product" in why
    w, why = _work("triton_tem_fused_mm_0", [[2, 3], [3, 5], [2, 5], [5, 7], [2, 7]])  # 2x3x5 and 2x5x7 both fit
    assert w is None and "several" in why
    w, why = _work("triton_tem_fused_bmm_0", [[8, 64, 128], [4, 128, 256], [8, 64, 256]])  # batches differ
    assert w is None


def test_convolution_buffers_input_and_output_told_apart():
    # C_in == C_out and a stride of 2: input and output could trade places; the output is the smaller one
    w, why = _work("triton_tem_fused_convolution_0", [[8, 64, 32, 32], [64, 64, 3, 3], [8, 64, 16, 16]])
    assert why is None and w.flops == 2 * (8 * 64 * 16 * 16) * (64 * 9) and w.params["output_shape"] == (8, 64, 16, 16)
    w, _ = _work("triton_tem_fused_convolution_relu_1", [[8, 32, 16, 16], [8, 64, 16, 16], [64, 8, 3, 3]])  # groups 4
    assert w.flops == 2 * (8 * 64 * 16 * 16) * (8 * 9) and w.params["groups"] == 4
    w, why = _work("triton_tem_fused_convolution_0", [[8, 64, 32, 32], [3, 3]])
    assert w is None and "convolution" in why


def test_names_the_patterns_take_and_leave():
    assert REGISTRY.select(["triton_tem_fused_mm_t_0", "triton_tem_fused_addmm_relu_0", "triton_tem_fused_bmm_1",
                            "triton_tem_fused_convolution_0", "triton_tem_fused_flex_attention_backward_1",
                            "triton_poi_fused_mm_0", "triton_tem_fused_mmx_0", "triton_tem_fused_0", "aten::mm",
                            "my_mm", "triton_xyz_fused_add_0"]) == sorted([
        "triton_tem_fused_mm_t_0", "triton_tem_fused_addmm_relu_0", "triton_tem_fused_bmm_1",
        "triton_tem_fused_convolution_0", "triton_tem_fused_flex_attention_backward_1", "aten::mm",
        "triton_poi_fused_mm_0"])  # (a pointwise kernel whatever the ops it fused)
    assert REGISTRY.op_class("triton_tem_fused_gelu_gelu_backward_mm_t_5") == "GEMM"
    assert REGISTRY.op_class("aten::mm") == "GEMM" and REGISTRY.op_class("triton_poi_fused_add_0") == "FusedPointwise"
    assert REGISTRY.op_class("triton_red_fused_sum_2") == REGISTRY.op_class("triton_per_fused__softmax_1") == "FusedReduce"


def test_inductor_fused_kernels_are_modeled_from_their_buffers():
    """max-autotune's MLP also runs Inductor's pointwise and reduction fusions (GELU and its backward, the bias
    gradients' sums): 11% of its GPU time had no model. Each is now rated against memory, its buffers counted once,
    no more of their elements than the kernel's iterations (an estimate, said in a note)."""
    perf = perf_model(load(DATA / "mm_autotune.pt.trace.json.gz", cache=False))
    assert perf.coverage["pct"] == pytest.approx(100.0)
    ops = {o["name"]: o for o in perf.ops.to_dicts()}
    raw = _raw_kernels("mm_autotune")
    red = ops["triton_red_fused_sum_2"]  # a bf16 4096 x 2048 gradient summed into fp32 partial sums (1 x 2048 x 32)
    assert red["op_class"] == "FusedReduce" and red["bound"] == "memory"
    assert red["bytes"] == 4096 * 2048 * 2 + 2048 * 32 * 4 and red["flops"] == 4096 * 2048  # (its iterations)
    gelu = ops["triton_poi_fused_gelu_1"]  # 4096 x 8192 bf16 in and out
    assert gelu["op_class"] == "FusedPointwise" and gelu["bytes"] == 2 * 4096 * 8192 * 2
    assert gelu["kernel_time_us"] == pytest.approx(sum(raw["triton_poi_fused_gelu_1"]), rel=1e-9)
    assert gelu["tb_per_s"] == pytest.approx(gelu["bytes"] * gelu["count"] / (gelu["kernel_time_us"] * 1e6), rel=1e-3)
    (note,) = [n for n in perf.notes if "Inductor's fused" in n]
    fused = perf.ops.filter(pl.col("op_class").is_in(["FusedPointwise", "FusedReduce"]))
    assert f"{int(fused['count'].sum()):,} calls" in note and "an estimate" in note
