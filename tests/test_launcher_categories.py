"""Categories that use the launching op (second signal) and category quality on real traces."""

from __future__ import annotations

import re

import polars as pl
import pytest
from conftest import needs_traces, real_traces, trace_id, write_trace

from kernscope import load
from kernscope.analyze.categories import Categorizer
from kernscope.analyze.kernels import gpu_table
from kernscope.analyze.summary import analyze


def _op_trace(tmp_path):
    """Kernels with telling names and with local names, inside semantic ops; one graph launch."""
    ev, t, corr = [], 100, 1

    def launch(ops, kernel, graph=False):
        nonlocal t, corr
        for depth, op in enumerate(ops):
            ev.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t + depth, "dur": 50 - 2 * depth,
                       "args": {"External id": corr}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch" if graph else "cudaLaunchKernel", "pid": 1,
                   "tid": 1, "ts": t + 20, "dur": 5, "args": {"External id": corr, "correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": t + 30, "dur": 10,
                   "args": {"correlation": corr, "device": 0, "stream": 7}})
        t += 100
        corr += 1

    launch(["aten::embedding_dense_backward", "aten::fill_"], "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)")
    launch(["aten::embedding_dense_backward"], "void at_cuda_detail::cub::detail::DeviceHelperInitKernel<int>(int)")
    launch(["aten::_cudnn_attention_backward"], "void cudnn::fusion::convert_dq_to_16bits<true>(void const*)")
    launch(["aten::_cudnn_attention_backward"], "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_26")
    launch(["aten::linear", "aten::addmm"], "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64")
    launch(["aten::layer_norm"], "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(int)")
    launch(["aten::add"], "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)")
    launch(["vllm::unified_attention"], "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int)",
           graph=True)
    launch(["aten::linear"], "void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda, bfloat16_copy_kernel_cuda>(int)")
    return write_trace(tmp_path / "ops.json", ev)


def test_launching_op_decides_for_generic_names(tmp_path):
    g = gpu_table(load(_op_trace(tmp_path), cache=False), Categorizer.builtin())
    rows = [(r["category"], r["decided_by"]) for r in g.sort("ts").iter_rows(named=True)]
    assert rows == [
        ("Embedding/Indexing", "op"),  # a fill inside embedding backward (innermost named op, not aten::fill_)
        ("Embedding/Indexing", "op"),  # an Other-named cub kernel
        ("Attention Backward", "name"),  # cuDNN's dQ conversion helper: a name rule knows it
        ("Attention Backward", "name"),  # the name already says it
        ("GEMM", "name"),  # specific names are never overridden
        ("Normalization", "op"),  # a reduction inside layer_norm
        ("Elementwise", "name"),  # no rule names aten::add: the name stands
        ("Attention Forward", "graph"),  # decided by the op around a graph launch
        ("Memory", "name"),  # a dtype cast under an autocast linear stays a copy ([launcher].keep)
    ]
    a = analyze(load(tmp_path / "ops.json", cache=False))
    assert "decided_by" in a.gpu.columns
    cats = dict(zip(a.categories["category"], a.categories["count"]))
    assert cats["Embedding/Indexing"] == 2 and cats["Attention Backward"] == 2 and cats["Memory"] == 1


def test_memcpy_and_user_rules(tmp_path):
    c = Categorizer.builtin().with_rules({"launcher": {"generic": ["Other"]}})
    g = gpu_table(load(_op_trace(tmp_path), cache=False), c)
    assert g.sort("ts")["decided_by"].to_list()[:3] == ["name", "op", "name"]  # only Other may be replaced now
    c2 = Categorizer.builtin().with_rules({"op_category": [{"value": "MyOp", "pattern": "^aten::add$"}]})
    g2 = gpu_table(load(_op_trace(tmp_path), cache=False), c2)
    assert g2.sort("ts")["category"].to_list()[6] == "MyOp"


@needs_traces
@pytest.mark.parametrize("path", real_traces(), ids=trace_id)
def test_other_is_at_most_one_percent_of_kernel_time(path):
    g = gpu_table(load(path), Categorizer.builtin())
    k = g.filter(pl.col("kind") == "kernel")
    if k.height == 0:
        pytest.skip("no kernels")
    other = float(k.filter(pl.col("category") == "Other")["dur"].sum() or 0)
    assert other <= 0.01 * float(k["dur"].sum())


#: Kernel families and the category an expert gives them (first match wins); checked on every distinct
#: kernel name of the real traces, by name alone.
EXPERT = [
    (r"^Memcpy|^Memset", "Memory"),
    (r"^nccl|rccl", "Communication"),
    (r"flash_bwd|flash_bprop|compute_dot_do_o|fmha_bwd|attn_bwd", "Attention Backward"),
    (r"flash_fwd|fmha.*Kernel|unified_attention|paged_attention|fmha_fwd|attn_fwd", "Attention Forward"),
    (r"igemm_(fwd|bwd|wrw)|implicit_gemm|scudnn|grouped_conv|conv_fwd|ImplicitGemmConvolution|winograd", "Convolution"),
    (r"^(Cijk_|nvjet|ampere_sgemm|volta_sgemm|sm90_xmma_gemm|ampere_gcgemm|ampere_bf16_s16816gemm)|gemv", "GEMM"),
    (r"split_embedding|embedding_backward|indexSelect|index_elementwise_kernel|sum_and_scatter|compute_grad_weight|krn_partial", "Embedding/Indexing"),
    (r"layer_norm|LayerNorm|rms_norm|Rmsnorm|GammaBetaBackward|batch_norm|groupnorm|triton_(red|per)_fused.*native_layer_norm", "Normalization"),
    (r"softmax_warp|SoftMax", "Softmax"),
    (r"multi_tensor_apply", "Optimizer"),
    (r"max_pool|avg_pool|adaptive_average_pool", "Pooling"),
    (r"radix_sort|DeviceRadixSort|DeviceScan", "Sort/Scan"),
    (r"CatArrayBatchedCopy|direct_copy_kernel|FillFunctor|batched_transpose", "Memory"),
    (r"nll_loss|cross_entropy", "Loss"),
    (r"hfp8|quantiz", "Quantization"),
    (r"reduce_kernel<.*(sum_functor|MeanOps|MaxOps|NormTwoOps|ArgMaxOps)", "Reduction"),
    (r"elementwise_kernel.*(CUDAFunctor_add|BinaryFunctor|MulFunctor|sigmoid|silu|Gelu|exp_kernel|neg_kernel|rsqrt|tanh|where_kernel|masked_fill)", "Elementwise"),
]


@needs_traces
def test_expert_families_on_real_traces():
    c = Categorizer.builtin()
    names: set[tuple[str, str]] = set()
    for p in real_traces():  # (the GPU rows alone: no parse-cache entry, nothing the analysis does not read)
        g = load(p, cache=False, projection="analyze").gpu
        names |= set(g.select(pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String)).unique().iter_rows())
    checked, wrong = 0, []
    for name, kind in sorted(names):
        for rx, want in EXPERT:
            if re.search(rx, name):
                checked += 1
                got = c.category(name, kind)
                if got != want:
                    wrong.append((name[:90], got, want))
                break
    assert checked >= 500
    assert len(wrong) <= 0.03 * checked, wrong[:20]


def test_op_categories_asked_again_are_those_of_the_rules():
    """An op name's [[op_category]] category, asked again (a JAX profile's time windows ask for the same names), is
    the one the rules give it, none included, in the order asked, repeats and all; a new categorizer (user rules)
    does not take the built-in one's answers."""
    names = ["aten::embedding_dense_backward", "aten::add", "hlo:reduce:reduce", "aten::embedding_dense_backward",
             "no such op", "aten::_softmax"]
    builtin = Categorizer.builtin()
    fresh = Categorizer.builtin().with_rules({"op_category": []})  # (the same rules, nothing remembered)
    first = builtin.op_categories(names[:3])
    again = builtin.op_categories(names)
    want = fresh.op_categories(names)
    assert again.equals(want) and first.equals(want.head(3))
    assert want["category"][0] is not None and want["category"][4] is None  # (a rule names the first, none the fifth)
    assert again["name"].to_list() == names
    mine = builtin.with_rules({"op_category": [{"pattern": "^aten::add$", "value": "Elementwise-mine"}]})
    assert mine.op_categories(["aten::add"])["category"].to_list() == ["Elementwise-mine"]
