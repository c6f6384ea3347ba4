"""A Hugging Face Llama (random weights) trained on an H200 with every profiler option users turn on
(``record_shapes``, ``with_stack``, ``profile_memory``, ``with_flops``, ``with_modules``):
``examples/record_hf_models.py`` -> ``tests/data/hf_h200``. Values checked against the raw JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from conftest import write_trace

from kernscope import load
from kernscope.analyze.memory import memory_timeline
from kernscope.analyze.perf import perf_model
from kernscope.analyze.summary import analyze
from kernscope.cli import main

DATA = Path(__file__).parent / "data" / "hf_h200"
TRACE = DATA / "llama_train.pt.trace.json.gz"


def _events() -> list[dict]:
    return json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]


def test_counts_and_kernel_time_against_the_raw_json():
    ev = _events()
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert len(kernels) == 1773 and sum(1 for e in ev if e.get("cat") == "python_function") == 7035
    trace = load(TRACE, cache=False)
    s = analyze(trace)
    assert s.kernels["count"].sum() == len(kernels)
    assert trace.gpu.height == len(kernels) + sum(1 for e in ev if e.get("cat") in ("gpu_memcpy", "gpu_memset"))
    assert s.steps.height == 3 and s.steps["kernel_count"].to_list() == [591, 591, 591]
    assert s.steps["kernel_time_us"].sum() == pytest.approx(sum(e["dur"] for e in kernels), abs=1e-3)


def test_foreach_optimizer_step_is_explained_not_left_uncovered():
    """AdamW's default (foreach) step is 15.9% of the GPU time; the profiler records no shapes for its tensor lists.
    It was listed among the ops outside the model with no word of why."""
    ev = _events()
    kernel_us: dict[int, float] = {}
    for e in ev:
        if e.get("cat") == "kernel":
            kernel_us[e["args"]["correlation"]] = kernel_us.get(e["args"]["correlation"], 0.0) + e["dur"]
    launches = [(e["ts"], e["tid"], e["args"]["correlation"]) for e in ev
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and e["args"].get("correlation") in kernel_us]
    ops = [(e["ts"], e["ts"] + e["dur"], e["tid"]) for e in ev
           if e.get("cat") == "cpu_op" and e["name"].startswith("aten::_foreach_")]
    inside = [{c for t, tid, c in launches if a <= t <= b and tid == op_tid} for a, b, op_tid in ops]
    # (the calls that launch GPU work: the optimizer's step counts are CPU tensors, added to on the host)
    calls = sum(1 for c in inside if c)
    foreach_us = sum(kernel_us[c] for c in set().union(*inside))
    perf = perf_model(load(TRACE, cache=False))
    miss = perf.missing.filter(perf.missing["name"].str.starts_with("aten::_foreach_"))
    assert set(miss["reason"].to_list()) == {"tensor-list shapes not recorded"}
    assert miss["count"].sum() == calls == 24
    assert miss["kernel_time_us"].sum() == pytest.approx(foreach_us, abs=1e-3)
    (note,) = [n for n in perf.notes if "tensor lists" in n]
    assert note.startswith(f"24 op calls ({foreach_us:,.1f} µs of GPU time)")
    assert not perf.uncovered["op_name"].str.starts_with("aten::_foreach_").any()


def test_memory_peak_against_the_raw_events():
    ev = _events()
    mem = [e["args"] for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    m = memory_timeline(load(TRACE, cache=False))
    assert m is not None
    row = m.devices.filter(m.devices["device_type"] == "cuda").row(0, named=True)
    assert row["peak_allocated"] == max(a["Total Allocated"] for a in mem)
    assert row["peak_reserved"] == max(a["Total Reserved"] for a in mem)


def test_findings_show_a_long_kernel_name_compact_in_the_terminal(tmp_path, capsys):
    """A finding about a demangled ATen kernel printed its whole name (640 characters on an HF generate() trace)."""
    name = ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<"
            "c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > >"
            "(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
            "at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::"
            "gpu_kernel_impl_nocast<at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::"
            "binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<c10::BFloat16, "
            "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)#1})")
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 2000}]
    for i in range(20):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10 + 90 * i,
                   "dur": 5, "args": {"correlation": i}})
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 20 + 90 * i, "dur": 80,
                   "args": {"correlation": i, "device": 0, "stream": 7, "est. achieved occupancy %": 2,
                            "registers per thread": 18}})
    path = write_trace(tmp_path / "t.json", ev)
    assert main(["analyze", str(path), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "[low_occupancy]" in out
    finding = out[out.index("[low_occupancy]"):]
    assert name not in finding and "elementwise_kernel<128,4,gpu_kernel_impl_nocast<BinaryFunctor<BFloat16," in finding


TRAINER = DATA / "llama_trainer.pt.trace.json.gz"


def test_a_trainer_with_gradient_accumulation_has_one_step_per_optimizer_step():
    """Hugging Face's ``Trainer`` (gradient accumulation 2), the profiler stepped by a ``TrainerCallback`` at each
    optimizer step: each ProfilerStep holds two forward and backward passes and one fused AdamW step; the steps'
    kernels against the raw JSON's windows."""
    ev = json.loads(gzip.decompress(TRAINER.read_bytes()))["traceEvents"]
    windows = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in ev
                     if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    assert [w[2] for w in windows] == ["ProfilerStep#3", "ProfilerStep#4", "ProfilerStep#5"]  # wait=2, warmup=1
    launch = {e["args"]["correlation"]: e["ts"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and "correlation" in e.get("args", {})}
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    per_step = [sum(1 for k in kernels if a <= launch.get(k["args"]["correlation"], -1) <= b) for a, b, _ in windows]
    s = analyze(load(TRAINER, cache=False))
    assert s.steps["kernel_count"].to_list() == per_step == [1138, 1138, 1138]
    opt = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::_fused_adamw_"]
    forwards = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::_log_softmax"]
    assert len(opt) == 6 and len(forwards) == 6  # (two param groups) per step; two micro-batches per step


def test_a_bf16_fused_adamw_counts_its_lists_at_two_bytes_an_element():
    """The profile records a tensor list's shapes, not its type, and the model assumed 4 bytes an element (and counted
    the list of step counts, one element per tensor, as a list of parameters): the bf16 model's fused AdamW read
    5.8 TB/s on an H200 (4.8 TB/s memory). Its kernel's name gives the type (``FusedAdamMathFunctor<c10::BFloat16,
    ...>``): 2 bytes an element, 2.5 TB/s."""
    ops = perf_model(load(TRAINER, cache=False)).ops.filter(pl.col("name") == "aten::_fused_adamw_").to_dicts()
    assert len(ops) == 6 and {o["dtype"] for o in ops} == {"bf16"}
    big = [o for o in ops if json.loads(o["params"])["params"] == 110_624_768]
    assert len(big) == 3
    for o in big:
        p = json.loads(o["params"])
        assert p["element"] == "bf16" and "assumed_bpe" not in p
        # params, grads, two states read and the 30 tensors' step counts; params and two states written
        assert p["tensor_lists"] == 5 and o["bytes"] == (4 * 110_624_768 + 30 + 3 * 110_624_768) * 2
        assert 2.5 < o["tb_per_s"] < 4.8


@pytest.mark.parametrize(("kernel", "element", "bpe"), [
    ("FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>", "fp32", 4),
    ("FusedAdamMathFunctor<c10::Half, 4, (at::native::ADAM_MODE)1, false>", "fp16", 2),
    ("triton_poi_fused_adamw_0", None, 4),  # (no type in the name: 4 bytes assumed, and said so)
])
def test_a_fused_optimizers_element_type_comes_from_its_kernel(tmp_path, kernel, element, bpe):
    lists = [[[1024, 1024], [1024]]] * 4
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::_fused_adamw_", "pid": 1, "tid": 1, "ts": 0.0, "dur": 50.0,
           "args": {"Input Dims": [*lists, [], [[], []]], "Input type": ["TensorList"] * 6,
                    "Concrete Inputs": [""] * 6}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
           "args": {"correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": f"void multi_tensor_apply_kernel<{kernel}>()", "pid": 0, "tid": 7,
           "ts": 20.0, "dur": 10.0, "args": {"correlation": 1, "device": 0, "stream": 7}}]
    (op,) = perf_model(load(write_trace(tmp_path / "adamw.json", ev), cache=False)).ops.to_dicts()
    p = json.loads(op["params"])
    p_elems = 1024 * 1024 + 1024
    assert op["bytes"] == (4 * p_elems + 2 + 3 * p_elems) * bpe  # four lists and two step counts read; three written
    assert p.get("element") == element and (("assumed_bpe" in p) == (element is None))


STATIC = DATA / "llama_generate_static.pt.trace.json.gz"


def test_static_cache_generate_replays_graphs_and_its_captures_are_named():
    """``generate`` with a static KV cache compiles its decoding forward with CUDA graphs (31 decode steps a call: 93
    graph launches in 3 profiled calls). CUDA graph trees were still recording in the first two profiled calls: the
    launches made during a capture have no GPU record (156 read "launches without gpu", unexplained); they are now
    counted as in a graph capture too, and a finding names each step's captures with their host time (from the raw
    JSON's cudaStreamBeginCapture/EndCapture and cudaGraphInstantiate calls)."""
    ev = json.loads(gzip.decompress(STATIC.read_bytes()))["traceEvents"]
    rt = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]
    begins = sorted((e["tid"], e["ts"]) for e in rt if e["name"] == "cudaStreamBeginCapture")
    ends = sorted((e["tid"], e["ts"] + e["dur"]) for e in rt if e["name"] == "cudaStreamEndCapture")
    windows = [(t, a, min(b for u, b in ends if u == t and b >= a)) for t, a in begins]
    gpu_corr = {e["args"].get("correlation") for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")}
    no_gpu = [e for e in rt if e.get("args", {}).get("correlation") is not None
              and any(w in e["name"].lower() for w in ("launchkernel", "graphlaunch", "memcpy", "memset"))
              and e["args"]["correlation"] not in gpu_corr]
    captured = [e for e in no_gpu if any(t == e["tid"] and a <= e["ts"] <= b for t, a, b in windows)]
    trace = load(STATIC, cache=False)
    assert trace.unlinked["launches_in_graph_capture"] == len(captured) == 156
    assert trace.unlinked["launches_without_gpu"] == len(no_gpu) == 156  # (all of them captured)
    assert sum(1 for e in rt if e["name"] == "cudaGraphLaunch") == 93
    steps = sorted((e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in ev
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    f = analyze(trace).findings.filter(pl.col("rule") == "graph_capture").sort("step")
    assert f["step"].to_list() == [1, 2]  # step 3 replayed only
    for r in f.iter_rows(named=True):
        a, b, _ = next(s for s in steps if s[2] == r["step"])
        mine = [w for w in windows if a <= w[1] < b]
        inst = sum(e["dur"] for e in rt if e["name"].startswith("cudaGraphInstantiate") and a <= e["ts"] < b)
        e = json.loads(r["evidence"])
        assert e["graphs"] == len(mine) == 1 and e["torch_compile"] is True
        assert e["capture_us"] == pytest.approx(sum(w[2] - w[1] for w in mine), abs=1e-3)
        assert e["instantiate_us"] == pytest.approx(inst, abs=1e-3)
        assert r["win_back_us"] == pytest.approx(e["capture_us"] + e["instantiate_us"])
        assert "CUDA graph trees record a graph" in r["text"]


COMPILED = DATA / "llama_train_compiled.pt.trace.json.gz"


def test_a_compiled_models_fused_kernels_are_modeled_and_none_passes_its_roof():
    """The Llama trained under torch.compile: Inductor's fused pointwise and reduction kernels (20% of the GPU time)
    had no model; now every kernel-named op is modeled, and no modeled op reads above its roofline: a fusion that
    gathers the loss's target logits from a 4096 x 32000 buffer read "810%" of the memory roof while each buffer
    counted in full; a buffer now counts no more elements than the kernel's iterations. The rest of the GPU time is
    the foreach optimizer's (no list shapes) and a scalar read."""
    ev = json.loads(gzip.decompress(COMPILED.read_bytes()))["traceEvents"]
    fused_ops = {e["name"] for e in ev if e.get("cat") == "cpu_op" and e["name"].startswith(("triton_poi", "triton_red",
                                                                                              "triton_per"))}
    pm = perf_model(load(COMPILED, cache=False))
    modeled = set(pm.ops.filter(pl.col("op_class").is_in(["FusedPointwise", "FusedReduce"]))["name"].to_list())
    assert fused_ops and modeled == fused_ops
    assert set(pm.missing["name"].to_list()) <= {n for n in pm.missing["name"].to_list() if n.startswith("aten::_foreach")}
    assert (pm.ops["pct_of_peak"].drop_nulls() <= 100.0).all()  # (a gather counted its whole table: 810% of it)
    c = pm.coverage
    assert c["gpu_time_us"] - c["modeled_us"] - c["missing_us"] == pytest.approx(4.928, abs=1e-3)  # (the loss's .item())
    assert pm.uncovered["op_name"].to_list() == ["aten::_local_scalar_dense"]
