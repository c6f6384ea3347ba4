"""Benchmark harness on the CPU: bookkeeping, tables, CSV/JSON, traces and their analysis (no GPU)."""

from __future__ import annotations

import json

import polars as pl
import pytest

torch = pytest.importorskip("torch")

from kernscope.bench.api import Operator, OperatorRegistry, impl  # noqa: E402
from kernscope.bench.operators import builtin_registry  # noqa: E402
from kernscope.bench.runner import run, trace_path  # noqa: E402
from kernscope.bench.timing import summarize  # noqa: E402
from kernscope.cli import main  # noqa: E402
from kernscope.errors import KernscopeError  # noqa: E402

FAST = ["--warmup", "2", "--rep", "5", "--device", "cpu"]

USER_OPS = '''
import torch
from kernscope.bench.api import Input, Operator, impl

class MyScale(Operator):
    name = "my_scale"
    x_label = ("N",)
    default_dtype = "float32"

    def inputs(self):
        for n in (1024, 4096):
            yield Input((n,), (torch.randn(n),))

    @impl(baseline=True)
    def eager(self, x):
        return lambda: x * 2

    @impl
    def broken(self, x):
        def f():
            raise RuntimeError("kaboom")
        return f

    @impl
    def wrong(self, x):
        return lambda: x * 3
'''


def test_registry_is_an_object_and_validates():
    a, b = builtin_registry(), builtin_registry()
    assert a is not b and a.names() == b.names()
    assert {"vector_add", "softmax", "layer_norm", "rms_norm", "gemm", "cross_entropy", "flash_attention"} <= set(a.names())
    reg = OperatorRegistry()

    class Two(Operator):
        name = "two"

        @impl(baseline=True)
        def a(self):
            return lambda: None

        @impl(baseline=True)
        def b(self):
            return lambda: None

    with pytest.raises(KernscopeError, match="more than one baseline"):
        reg.operator(Two)
    with pytest.raises(KernscopeError, match="unknown operator"):
        reg.get("nope")


def test_robust_statistics_keep_raw_samples():
    t = summarize([1.0, 1.01, 0.99, 1.0, 1.02, 9.0])
    assert t.median_ms == pytest.approx(1.005)
    assert t.outliers == 1 and len(t.samples_ms) == 6 and t.max_ms == 9.0
    assert t.mean_ms < 1.1  # the outlier does not drag the robust mean
    assert t.spread < 0.05


def _not_json(word):
    raise AssertionError(f"{word} is not JSON")


def test_vector_add_table_csv_json_and_traces(tmp_path, capsys):
    out = tmp_path / "traces"
    args = ["bench", "--op", "vector_add", "--num-inputs", "2", "--metrics", "latency,gbps,speedup,accuracy,kineto_trace",
            "--output-dir", str(out), "--csv", str(tmp_path / "r.csv"), "--json", str(tmp_path / "r.json"), *FAST]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "torch_add-latency" in text and "torch_add-kineto_trace" in text
    assert "Kineto traces analyzed by kernscope" in text and "ProfilerStep#5" in text
    p0 = trace_path(out, "vector_add", "torch_add", 0)
    assert p0.exists() and f"Kineto traces under {out}" in text
    assert "vector_add/torch_add/input_0.json.gz" in text and str(p0) not in text  # relative to --output-dir
    df = pl.read_csv(tmp_path / "r.csv")
    assert df.height == 2 and set(df["impl"]) == {"torch_add"}
    assert (df["speedup"] == 1.0).all() and df["accuracy"].all()
    # strict JSON (no NaN: jq and a browser refuse it): what no clock was read for is null (it was NaN)
    doc = json.loads((tmp_path / "r.json").read_text(), parse_constant=_not_json)
    r0 = doc["results"][0]
    assert r0["timing"]["sm_mhz_median"] is None and r0["timing"]["at_ref_clock_ms"] is None
    assert doc["output_dir"] == str(out) and r0["trace"] == str(p0)  # JSON keeps the full paths
    assert r0["timing"]["n"] >= 5 and len(r0["timing"]["samples_ms"]) == r0["timing"]["n"]
    assert r0["analysis"]["step"] == "ProfilerStep#5"
    assert [k["name"] for k in r0["analysis"]["flush_kernels"]] == ["aten::zero_"]
    assert [k["name"] for k in r0["analysis"]["compute_kernels"]] == ["aten::add"]
    assert doc["skipped"] == {"triton_add": "needs a CUDA device"}
    assert main(["analyze", "--bench", str(out), "--format", "json", "--no-cache"]) == 0  # the folder, as a whole
    cells = json.loads(capsys.readouterr().out)["cells"]
    assert [(c["op"], c["impl"], c["input"]) for c in cells] == [("vector_add", "torch_add", 0), ("vector_add", "torch_add", 1)]
    assert all(c["compute_kernels"] == ["aten::add"] and c["step"] == "ProfilerStep#5" for c in cells)
    # same paths on a rerun: no files pile up
    assert main(args) == 0
    assert sorted(p.name for p in (out / "vector_add" / "torch_add").iterdir()) == ["input_0.json.gz", "input_1.json.gz"]


def test_input_id_only_skip_and_modes(tmp_path):
    reg = builtin_registry()
    r = run(reg.get("flash_attention"), device="cpu", mode="bwd", input_id=1, metrics=["latency", "accuracy"],
            warmup=1, rep=3, output_dir=tmp_path)
    assert [c.input_id for c in r.cells] == [1]
    assert r.cells[0].metrics["accuracy"] is True and r.cells[0].metrics["latency"] > 0
    r = run(reg.get("rms_norm"), device="cpu", only=["torch_rms_norm", "torch_fused_rms_norm"], skip=["torch_fused_rms_norm"],
            metrics=["latency"], warmup=1, rep=3, num_inputs=1)
    assert r.impls == ["torch_rms_norm"]
    with pytest.raises(KernscopeError, match="unknown impl"):
        run(reg.get("gemm"), device="cpu", only=["nope"])
    with pytest.raises(KernscopeError, match="unknown metric"):
        run(reg.get("gemm"), device="cpu", metrics=["latency", "vibes"])
    # backward of an op with an input it does not use (rms_norm's bias): that input's gradient is zero, and the
    # accuracy check compares it (it failed with AttributeError on the missing .grad)
    r = run(reg.get("rms_norm"), device="cpu", mode="bwd", num_inputs=1, metrics=["latency", "accuracy"], warmup=1, rep=3,
            only=["torch_rms_norm", "torch_fused_rms_norm"])
    assert [c.metrics["accuracy"] for c in r.cells] == [True, True] and not any(c.error for c in r.cells)
    # an inference operator has no backward: one error saying so (it failed on the baseline's first input)
    with pytest.raises(KernscopeError, match=r"fp8_gemm has no bwd mode: none of its implementations has one \(modes: fwd\)"):
        run(reg.get("fp8_gemm"), device="cpu", mode="bwd", metrics=["latency"])
    # an input id the operator does not have on this device: an error naming the ids (it was an empty table, exit 0)
    with pytest.raises(KernscopeError, match=r"softmax: no input 2 on cpu \(its inputs there: ids 0-1\)"):
        run(reg.get("softmax"), device="cpu", input_id=2, metrics=["latency"], warmup=1, rep=3)


def test_all_builtin_operators_run_on_cpu():
    reg = builtin_registry()
    for name in reg.names():
        r = run(reg.get(name), device="cpu", num_inputs=1, metrics=["latency", "accuracy"], warmup=1, rep=3)
        cpu_impls = [c for c in r.cells]
        assert cpu_impls, name
        for c in cpu_impls:
            assert c.error is None, (name, c.impl, c.error)
            assert c.metrics["accuracy"] is True, (name, c.impl)
            assert c.metrics["latency"] > 0


def test_user_operator_module_keep_going_and_failure(tmp_path, capsys):
    mod = tmp_path / "my_ops.py"
    mod.write_text(USER_OPS)
    base = ["bench", "--op-module", str(mod), "--op", "my_scale", "--metrics", "latency,accuracy", *FAST]
    assert main(base + ["--keep-going"]) == 0
    out = capsys.readouterr().out
    assert "error: RuntimeError: kaboom" in out
    assert "wrong-accuracy" in out and "✗" in out
    assert main(base) == 2
    assert "my_scale.broken failed on input 0" in capsys.readouterr().err
    assert main(["bench", "--op-module", str(mod), "--list-ops"]) == 0
    assert "my_scale" in capsys.readouterr().out


def test_analyze_bench_trace_json(tmp_path, capsys):
    r = run(builtin_registry().get("softmax"), device="cpu", num_inputs=1, metrics=["latency", "kineto_trace"],
            warmup=1, rep=3, output_dir=tmp_path)
    p = r.cells[0].trace
    assert p is not None
    assert main(["analyze", p, "--format", "json", "--no-cache"]) == 0  # auto-detected as a benchmark trace
    b = json.loads(capsys.readouterr().out)["benchmark"]
    assert b["step"] == "ProfilerStep#5"
    assert b["flush_kernels"][0]["name"] == "aten::zero_"
    assert b["compute_kernels"][0]["name"] == "aten::softmax"
    assert b["kernel_time_us"] == pytest.approx(b["compute_kernels"][0]["dur_us"])
    # without the benchmark view a trace recorded on the CPU has no GPU time to show: said, exit 3
    assert main(["analyze", p, "--format", "json", "--no-bench", "--no-cache"]) == 3
    out, err = capsys.readouterr()
    assert "benchmark" not in json.loads(out) and "no GPU activity" in err


def test_cudagraph_needs_cuda():
    with pytest.raises(KernscopeError, match="vector_add.torch_add failed"):
        run(builtin_registry().get("vector_add"), device="cpu", num_inputs=1, cudagraph=True, warmup=1, rep=3)


def test_tritonbench_style_trace_without_annotation(tmp_path, capsys):
    """A TritonBench-like trace (no kernscope annotation): the flush is the leading fill launched by
    ``aten::zero_`` in the profiled step; a warm-up kernel still running in the step is not counted."""
    from conftest import write_trace

    def op(name, ts, dur, ext):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {"External id": ext}}

    def launch(ts, corr, ext):
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts, "dur": 2,
                "args": {"correlation": corr, "External id": ext}}

    def kern(name, ts, dur, corr):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"correlation": corr, "stream": 7, "device": 0}}

    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<int>, at::detail::Array<char*, 1>)"
    ev = [
        # warm-up iteration 4 (its compute kernel is still running when step 5 starts)
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        op("aten::zero_", 5, 10, 1), launch(6, 101, 1), kern(fill, 10, 20, 101),
        op("aten::mm", 20, 10, 2), launch(21, 102, 2), kern("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 40, 90, 102),
        # profiled iteration
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#5", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
        op("aten::zero_", 105, 10, 3), launch(106, 103, 3), kern(fill, 131, 20, 103),
        op("aten::mm", 120, 10, 4), launch(121, 104, 4), kern("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 152, 90, 104),
    ]
    p = write_trace(tmp_path / "tritonbench_like.json", ev)
    assert main(["analyze", str(p), "--format", "json", "--no-cache"]) == 0
    b = json.loads(capsys.readouterr().out)["benchmark"]
    assert b["step"] == "ProfilerStep#5"
    assert [k["category"] for k in b["flush_kernels"]] == ["Memory"] and "FillFunctor" in b["flush_kernels"][0]["name"]
    assert [k["category"] for k in b["compute_kernels"]] == ["GEMM"]
    assert b["kernel_time_us"] == pytest.approx(90.0)
    assert b["warmup_kernels_in_window"] == 1  # step 4's GEMM ran 40..130 µs, into step 5's window


def test_tritonbench_names_select_our_impls_and_results_carry_the_typed_name(tmp_path, capsys, monkeypatch):
    """#27.1: the first seed's command as written (TritonBench's impl names) runs; the table shows the names typed."""
    from kernscope.bench import runner

    reg = builtin_registry()
    fa = reg.get("flash_attention")
    got = runner.resolve_impls(fa(device="cpu"), ["flash_v3", "cudnn", "triton_tutorial_flash_v2", "aten", "sdpa_math"])
    assert [(s.name, s.method) for s in got] == [("flash_v3", "flash_v3"), ("cudnn", "sdpa_cudnn"),
                                                 ("triton_tutorial_flash_v2", "triton_flash"), ("aten", "sdpa_math")]
    for op, alias, method in [("gemm", "aten_matmul", "torch_matmul"), ("gemm", "triton_tutorial_matmul", "triton_matmul"),
                              ("rms_norm", "llama_rms", "torch_rms_norm"), ("cross_entropy", "cross_entropy_loss", "torch_cross_entropy"),
                              ("flash_attention", "sdpa", "sdpa_flash")]:
        (s,) = runner.resolve_impls(reg.get(op)(device="cpu"), [alias])
        assert (s.name, s.method) == (alias, method)
    with pytest.raises(KernscopeError, match=r"available \(aliases\): sdpa_math \(aten\), sdpa_flash \(sdpa\)"):
        runner.resolve_impls(fa(device="cpu"), ["flash_v9"])
    # a package that is absent: one line naming it and the nearest impl; the others run under the typed name
    monkeypatch.setattr(runner, "module_available", lambda m: False)
    r = run(fa, device="cpu", only=["flash_v3", "aten"], metrics=["latency", "accuracy"], warmup=1, rep=3, num_inputs=1)
    assert r.impls == ["aten"] and [c.impl for c in r.cells] == ["aten"] and r.cells[0].metrics["accuracy"] is True
    assert r.skipped["flash_v3"].startswith("needs the flash_attn_interface or fa3.hopper.flash_attn_interface package")
    assert "nearest available: sdpa_cudnn" in r.skipped["flash_v3"]
    assert main(["bench", "--op", "flash_attention", "--num-inputs", "1", "--metrics", "latency", "--only",
                 "flash_v3,cudnn,triton_tutorial_flash_v2,aten", *FAST]) == 0
    out = capsys.readouterr()
    assert "skipped flash_v3: needs the flash_attn_interface" in out.err and "skipped cudnn: needs a CUDA device" in out.err
    assert "aten-latency" in out.out and "sdpa_math" not in out.out  # the table says the name typed
    assert main(["bench", "--op", "flash_attention", "--list-impls"]) == 0
    listing = capsys.readouterr().out
    assert "(alias cudnn)" in listing and "flash_v3" in listing and "not installed" in listing
    assert main(["bench", "--op", "softmax", "--num-inputs", "1", "--metrics", "latency,accuracy", "--only",
                 "naive_softmax,torch_softmax", "--format", "json", *FAST]) == 0
    cells = json.loads(capsys.readouterr().out)["results"]
    assert {c["impl"]: c["metrics"]["accuracy"] for c in cells} == {"naive_softmax": True, "torch_softmax": True}


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_the_input_column_is_never_cut(width):
    """#27.2 / #30: the results table keeps every input whole (its header wraps instead) at every width."""

    from kernscope.render.formats import Options, text

    r = run(builtin_registry().get("flash_attention"), device="cpu", only=["aten", "sdpa_math"], num_inputs=2,
            metrics=["latency", "speedup", "accuracy"], warmup=1, rep=3)
    lines = text(r, "table", Options(width=width)).splitlines()
    assert max(len(line) for line in lines) <= width
    for c in r.cells:
        shown = "(" + ", ".join(str(v) for v in c.x) + ")"
        assert any(line.startswith(shown) for line in lines), (width, shown)


def test_new_operators_triton_kernels_in_the_interpreter(monkeypatch):
    """The GLU, RoPE and var_mean Triton kernels, run by Triton's CPU interpreter, equal the torch baselines' math
    (the looped kernels, embedding, sum and the GEMM, are checked on the GPU: the interpreter cannot run loops
    bounded by a runtime value here)."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import importlib

    import kernscope.bench.kernels.more as more

    more = importlib.reload(more)  # the decorators read TRITON_INTERPRET when the module is imported
    torch.manual_seed(0)
    a, b = torch.randn(8, 300), torch.randn(8, 300)
    assert torch.allclose(more.glu(a, b, gelu=False), torch.nn.functional.silu(a) * b, atol=1e-5)
    assert torch.allclose(more.glu(a, b, gelu=True), torch.nn.functional.gelu(a, approximate="tanh") * b, atol=1e-5)
    rope_op = builtin_registry().get("rope")(device="cpu", dtype="float32")
    inp = next(iter(rope_op.inputs()))
    ref = rope_op.torch_rope(*inp.args)()  # type: ignore[attr-defined]  # the rope operator's own implementation
    assert torch.allclose(more.rope(*inp.args), ref, atol=1e-5)
    monkeypatch.delenv("TRITON_INTERPRET")
    importlib.reload(more)
    # var_mean uses tl.sum, which the interpreter patches only when triton is imported under it: a fresh process
    import os
    import subprocess
    import sys

    code = ("import torch; from kernscope.bench.kernels.more import var_mean; x = 2.0 + torch.randn(16, 3000); "
            "v, m = var_mean(x); rv, rm = torch.var_mean(x, dim=-1, correction=0); "
            "assert torch.allclose(v, rv, atol=1e-5) and torch.allclose(m, rm, atol=1e-5), (v - rv).abs().max()")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_gemm_family_and_decoding_kernels_in_the_interpreter():
    """#27.3: the split-K decoding (empty chunks too), grouped GEMM (an empty group too) and int4 GEMM Triton kernels,
    and the backward passes of the GLU, RoPE and embedding kernels (repeated ids too), run by Triton's CPU
    interpreter in a fresh process, equal torch's results and autograd's gradients (fp32)."""
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent / "data" / "interpret_new_kernels.py"
    done = subprocess.run([sys.executable, str(script)], env={**os.environ, "TRITON_INTERPRET": "1"},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    got = {line.split()[0]: (float(line.split()[1]), float(line.split()[2])) for line in done.stdout.splitlines()}
    assert set(got) == {"decode_splits1", "decode_splits4", "decode_splits8", "grouped", "int4", "swiglu_bwd", "geglu_bwd",
                        "rope_bwd", "embedding_bwd"}
    for name, (err, scale) in got.items():
        assert scale > 0.1 and err <= 1e-5 * max(1.0, scale), (name, err, scale)


def test_new_gemm_family_inputs_and_counts():
    """The fp8 inputs hold the scaled values (per-tensor scale from the absolute maximum), int4 packing round-trips,
    the grouped inputs' groups are multiples of 16 and sum to M, and FLOPs/bytes are the perf model's."""
    from kernscope.bench.operators.gemms import FP8Gemm, GroupedGemm, Int4Gemm, pack_int4, unpack_int4

    op = FP8Gemm(device="cpu")
    inp = next(iter(op.inputs()))
    a8, b8, sa, sb = inp.args
    assert a8.dtype == torch.float8_e4m3fn and b8.stride() == (1, b8.shape[0])  # B column-major
    assert float(a8.float().abs().max()) == 448.0 and op.flops(inp) == 2 * 64 * 96 * 128 and op.bytes(inp) == 64 * 128 + 128 * 96 + 2 * 64 * 96
    q = torch.randint(-8, 8, (256, 8), dtype=torch.int8)
    assert torch.equal(unpack_int4(pack_int4(q)), q)
    i4 = Int4Gemm(device="cpu")
    x, packed, scale = next(iter(i4.inputs())).args
    assert packed.dtype == torch.uint8 and packed.shape == (128, 64) and scale.shape == (2, 64)
    gg = GroupedGemm(device="cpu")
    inp = next(iter(gg.inputs()))
    counts = torch.diff(inp.args[2].long(), prepend=torch.zeros(1, dtype=torch.long))
    assert int(counts.sum()) == 96 and (counts % 16 == 0).all() and len(set(counts.tolist())) > 1


def test_a_table_too_wide_is_stacked_per_implementation_not_cut():
    """#27.2: when the TritonBench-shaped table cannot show every <impl>-<metric> column, one table per
    implementation is printed, each with the input column and every metric, numbers whole."""


    from kernscope.render.formats import Options, text

    r = run(builtin_registry().get("rms_norm"), device="cpu", only=["torch_rms_norm", "torch_fused_rms_norm"],
            num_inputs=2, metrics=["latency", "gbps", "speedup", "accuracy"], warmup=1, rep=3)
    for width in (80, 120):
        shown = text(r, "table", Options(width=width))
        lines = shown.splitlines()
        assert "not shown at this width" not in shown and max(len(line) for line in lines) <= width
        assert sum(line.startswith("torch_rms_norm · ") for line in lines) == 1
        assert sum(line.startswith("torch_fused_rms_norm · ") for line in lines) == 1
        assert sum("accuracy" in line and "latency (ms)" in line for line in lines) == 2  # every metric, per impl
        for c in r.cells:
            assert f"{c.metrics['gbps']:.2f}" in shown
    wide = text(r, "table", Options(width=250))  # wide enough: the one wide table
    assert "torch_fused_rms_norm-accuracy" in wide


def test_recording_a_trace_keeps_libkineto_log_lines_off_stderr(tmp_path, capfd):
    """torch 2.12+'s libkineto writes 'USDT:<date> <pid>:<tid> SyncActivityProfilerHandler.cpp:52] profiler_start' (and
    _stop) to stderr at every start and stop of the profiler: a benchmark's progress was interleaved with them. They
    are dropped; what else the impl writes to stderr during the recording comes back, in order."""
    import os

    from kernscope.bench.traces import record_trace

    def fn():
        os.write(2, b"USDT:2026-11-30 09:08:10 31059:31059 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"the impl's own line\n")
        return 1

    p = record_trace(fn, device="cpu", flusher=None, path=tmp_path / "t.json.gz")
    err = capfd.readouterr().err
    assert p.exists() and "USDT:" not in err and "STAGE:" not in err
    assert err.count("the impl's own line\n") == 6  # the warm-up steps and the profiled one
    # torch 2.11's warning about a schedule's cycles (the harness records one cycle; it read 'kernscope: warning:
    # Warning: Profiler clears events at the end of each cycle...' on the H200) is dropped, others are not
    import warnings

    def warns():
        warnings.warn("Warning: Profiler clears events at the end of each cycle.Only events from the current cycle "
                      "will be reported.", UserWarning, stacklevel=1)
        warnings.warn("the impl's own warning", UserWarning, stacklevel=1)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        record_trace(warns, device="cpu", flusher=None, path=tmp_path / "w.json.gz")
    assert {str(w.message) for w in seen} == {"the impl's own warning"}
