"""JAX profiles of hand-written kernels and rematerialization, recorded on an H200 (``examples/record_jax_kernels.py``
-> ``tests/data/jax_kernels_h200``): Pallas (Triton) kernels (a matrix product and Pallas's fused attention,
forward and backward) run by XLA in a command buffer, and a transformer block under ``jax.checkpoint``."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from kernscope import load
from kernscope.analyze.perf import perf_model
from kernscope.analyze.summary import analyze

DATA = Path(__file__).parent / "data" / "jax_kernels_h200"
INFO = json.loads((DATA / "record_info.json").read_text())


def test_the_recording():
    assert INFO["device_kind"] == "NVIDIA H200" and INFO["jax"] == "0.11.2"
    assert all(p["ok"] for p in INFO["profiles"].values())
    assert INFO["profiles"]["pallas"]["custom_calls"] == ["__gpu$xla.gpu.triton"]  # (the Pallas kernels)


def test_pallas_attention_kernels_are_attention():
    """Pallas's fused attention names its kernels mha_forward, mha_backward and mha_preprocess_backward: they read
    Other, 62.4% of the profile's GPU time."""
    trace = load(DATA / "pallas" / "vm.xplane.pb.gz", cache=False)
    s = analyze(trace)
    cats = dict(s.kernels.select("name", "category").iter_rows())
    counts = dict(s.kernels.select("name", "count").iter_rows())
    assert cats["mha_forward"] == "Attention Forward"
    assert cats["mha_backward"] == cats["mha_preprocess_backward"] == "Attention Backward"
    assert all(cats[k] == "GEMM" for k in cats if k.startswith("pallas_matmul"))
    # one forward, one backward and one preprocessing kernel per step; five matrix products a step: two forward and
    # three for the gradients (the input's gradient of the first is never used: XLA drops it)
    assert counts["mha_forward"] == counts["mha_backward"] == counts["mha_preprocess_backward"] == 3
    assert sum(v for k, v in counts.items() if k.startswith("pallas_matmul")) == 15
    assert "Other" not in s.categories["category"].to_list()
    att = s.categories.filter(pl.col("category").str.starts_with("Attention"))["total_us"].sum()
    assert att / s.categories["total_us"].sum() > 0.6


def test_pallas_kernels_are_linked_to_their_pallas_calls():
    """XLA names a Pallas kernel after the ``name`` in its custom call's config, not after the instruction: the kernels
    had no instruction, no JAX op and library Unknown, and the perf model listed all seven calls as one command buffer.
    The calls of one name are numbered in turn (``pallas_matmul``, ``__1``, ...); two calls of the same config
    (pallas_call.16 and .17, the two forward products) share a kernel. Each kernel's grid is its call's config's."""
    trace = load(DATA / "pallas" / "vm.xplane.pb.gz", cache=False)
    g = trace.gpu.filter(pl.col("kind") == "kernel")
    pallas = g.filter(pl.col("name").cast(pl.String).str.contains("^(pallas_matmul|mha_)"))
    by_name = {r["name"]: r for r in pallas.unique("name").iter_rows(named=True)}
    assert {k: (v["hlo_instruction"], v["grid_x"], v["grid_y"]) for k, v in by_name.items()} == {
        "pallas_matmul": ("pallas_call.16", 32, 4), "pallas_matmul__1": ("pallas_call.19", 4, 4),
        "pallas_matmul__2": ("pallas_call.18", 32, 4), "pallas_matmul__3": ("pallas_call.25", 4, 4),
        "mha_forward": ("pallas_call.0", 8, 4), "mha_preprocess_backward": ("pallas_call.20", 8, 4),
        "mha_backward": ("pallas_call.21", 4, 8)}
    assert set(pallas["hlo_desc"].cast(pl.String).to_list()) == {"hlo:custom-call:__gpu$xla.gpu.triton"}
    assert by_name["pallas_matmul"]["op_path"] == "jit(train_step)/jvp(pallas_matmul)/pallas_call"
    assert all(by_name[f"pallas_matmul__{i}"]["op_path"].startswith("jit(train_step)/transpose(jvp(pallas_matmul))")
               for i in (1, 2, 3))
    s = analyze(trace)
    libs = dict(s.kernels.select("name", "library").iter_rows())
    assert all(libs[k] == "Pallas" for k in by_name) and all(libs[k] == "XLA" for k in libs if k not in by_name)
    unc = perf_model(trace).uncovered
    assert unc["op_name"].to_list()[:2] == ["pallas_call.21", "pallas_call.0"]
    assert abs(unc["kernel_time_us"][0] - 336.8) < 0.01 and "command_buffer_1" not in unc["op_name"].to_list()


def test_mosaic_gpu_kernels_are_linked_to_their_calls():
    """A Pallas kernel of the Mosaic GPU backend (Mosaic GPU's flash attention, forward and backward, on an H200) runs
    as a ``mosaic_gpu_v2`` custom call and is named ``<its JAX name>_mosaic_gpu_kernel`` after the op path's name
    (``.../entry/mpmd_map``): it had no instruction and library Unknown, and the perf model listed it as the command
    buffer. The backward's two calls share one kernel name."""
    trace = load(DATA / "mosaic" / "vm.xplane.pb.gz", cache=False)
    assert INFO["profiles"]["mosaic"]["custom_calls"] == ["mosaic_gpu_v2"]
    g = trace.gpu.filter(pl.col("name").cast(pl.String).str.ends_with("_mosaic_gpu_kernel"))
    got = {r["name"]: (r["hlo_instruction"], r["hlo_desc"], r["op_path"]) for r in g.unique("name").iter_rows(named=True)}
    assert got == {
        "entry_mosaic_gpu_kernel": ("mpmd_map.7", "hlo:custom-call:mosaic_gpu_v2", "jit(train_step)/jvp()/entry/mpmd_map"),
        "anonymous_mosaic_gpu_kernel": ("mpmd_map.11", "hlo:custom-call:mosaic_gpu_v2",
                                        "jit(train_step)/transpose(jvp())/anonymous/mpmd_map")}
    assert g.group_by("name").len().sort("name")["len"].to_list() == [6, 3]  # 3 steps: two backward calls a step
    lib = analyze(trace).libraries
    assert lib.filter(pl.col("library") == "Pallas")["kernels"].to_list() == [2]
    assert "Unknown" not in lib["library"].to_list()
    unc = perf_model(trace).uncovered
    assert unc["op_name"].to_list()[:2] == ["mpmd_map.11", "mpmd_map.7"]


def test_rematerialized_block_categorized_and_modeled():
    trace = load(DATA / "remat" / "vm.xplane.pb.gz", cache=False)
    s = analyze(trace)
    assert s.steps.height == 3 and "Other" not in s.categories["category"].to_list()
    assert perf_model(trace).coverage["pct"] > 85


def test_low_occupancy_evidence_is_the_same_for_one_step_and_the_whole_profile():
    """``analyze --step 2`` gave fusion_143's share of the step as 11.52707323738993 and the whole profile
    11.527073237389931: polars' column divided one step's rows otherwise than all of them."""
    trace = load(DATA / "remat" / "vm.xplane.pb.gz", cache=False)
    whole = analyze(trace).findings.filter(pl.col("rule") == "low_occupancy")
    for step in trace.steps["step"].to_list():
        one = analyze(trace, step=step).findings.filter(pl.col("rule") == "low_occupancy")
        assert one.height and one["evidence"].to_list() == whole.filter(pl.col("step") == step)["evidence"].to_list()


def test_a_host_callback_in_the_step_is_a_finding():
    """``jax.debug.callback`` in the jitted step (its Python sleeps 2 ms on the host): XLA runs it as the HLO
    instruction ``debug_callback.1`` on a host thread while the device work after it waits. The GPU sat idle 96% of
    the steps, and nothing said why; a host_callback finding now names each step's callback and its time."""
    trace = load(DATA / "control" / "vm.xplane.pb.gz", cache=False)
    cb = (trace.rows(("cpu_op",), ("name", "ts", "end")).filter(pl.col("name").cast(pl.String) == "debug_callback.1")
          .sort("ts"))
    windows = trace.steps.sort("start").select("step", "start", "end").rows()
    assert cb.height == len(windows) == 3
    f = analyze(trace).findings.filter(pl.col("rule") == "host_callback").sort("step")
    assert f["step"].to_list() == [0, 1, 2]
    for (step, a, b), (ts, end), r in zip(windows, cb.select("ts", "end").rows(), f.iter_rows(named=True)):
        assert a <= ts < b
        e = json.loads(r["evidence"])
        assert e["callback_us"] == (end - ts) / 1000 and e["callback_us"] > 2000  # (the 2 ms sleep, and more)
        assert e["calls"] == 1 and e["spans"] == "1 debug_callback.1" and "jax.debug.print" in r["text"]
    assert INFO["profiles"]["control"]["custom_calls"] == ["xla_ffi_python_gpu_callback"]


def _partial_ops() -> dict[tuple[str, str, str], dict]:
    """The perf model's ops of the ``partial`` profile by (module, instruction, dtype)."""
    ops = perf_model(load(DATA / "partial" / "vm.xplane.pb.gz", cache=False)).ops
    return {(json.loads(r["params"])["module"], r["name"], r["dtype"]): r for r in ops.iter_rows(named=True)}


def test_ops_that_touch_part_of_a_buffer_move_what_xla_counts():
    """An op that reads or writes part of a buffer (a slice, dynamic slice or update, gather or scatter, alone or fused)
    had no byte count, so no rating: 30% of a real 207 MB transformer profile's modeled time. Each function of the
    ``partial`` profile compiles to one such fusion; its bytes are XLA's own cost analysis of the compiled module
    (``record_info.json``): an in-place update of a donated 64 MiB buffer moves the 4 MiB update twice (read, written)
    and the index, not the buffer."""
    ops = _partial_ops()
    fns = INFO["profiles"]["partial"]["functions"]
    got = {}
    for fn in ("dus_inplace", "dus_fused", "dynamic_slice", "slice_scale", "halves_add"):
        (row,) = [r for (m, _, _), r in ops.items() if m == f"jit_{fn}" and r["op_class"] == "XLA fusion"]
        got[fn] = (row["bytes"], fns[fn]["cost_analysis"]["bytes accessed"])
    assert all(ours == xla for ours, xla in got.values()), got
    assert got["dus_inplace"][0] == 2 * 256 * 4096 * 4 + 4  # (a 256-row update of a 4096 x 4096 f32 buffer, an index)
    assert got["halves_add"][0] == 3 * 2048 * 4096 * 4


def test_a_gather_reads_the_rows_it_gathers_and_a_scatter_adds_in_place():
    """Where XLA's cost analysis counts a whole operand, the model counts what the kernel touches. A gather of 2,048
    rows of an 8,192-row bf16 table reads those rows (4 MiB), not the table (16 MiB): XLA's count would put the kernel
    at the H200's DRAM peak. A scatter-add into a donated buffer updates its 2,048 rows in place: it reads them, the
    updates and the indices and writes the rows back (XLA counts the table read and written whole)."""
    ops = _partial_ops()
    fns = INFO["profiles"]["partial"]["functions"]
    gather = next(r for (m, _, _), r in ops.items() if m == "jit_gather_rows")
    rows = 2048 * 1024 * 2
    assert gather["bytes"] == rows + 2048 * 4 + rows  # rows read, the indices, the result written
    xla = fns["gather_rows"]["cost_analysis"]["bytes accessed"]
    assert xla / (gather["mean_time_us"] * 1e-6) / 1e12 > 0.95 * gather["peak_tb_per_s"] > gather["tb_per_s"] * 2
    scatter = next(r for (m, _, _), r in ops.items() if m == "jit_scatter_add")
    assert scatter["bytes"] == rows + 2048 * 4 + rows + rows
    assert fns["scatter_add"]["cost_analysis"]["bytes accessed"] > 2 * 8192 * 1024 * 2


def test_programs_that_share_a_module_name_are_told_apart():
    """JAX compiles ``jnp.copy`` once per shape, every program named ``jit_copy``; the kernels of each are the
    instructions of their own program (its id is the kernel's ``program_id``). Every kernel took the first module of
    its name, here a copy of an int32 scalar: 9 calls of 64 MiB and 16 MiB copies read "copy.1, int32, 8 bytes, 0.0 TB/s"."""
    ops = _partial_ops()
    copies = {dtype: (r["count"], r["bytes"]) for (m, name, dtype), r in ops.items() if m == "jit_copy"}
    # the two donated buffers copied before each call: the f32 4096 x 4096 one twice a step, the bf16 table once
    assert copies == {"fp32": (6, 2.0 * 4096 * 4096 * 4), "bf16": (3, 2.0 * 8192 * 1024 * 2)}
    g = load(DATA / "partial" / "vm.xplane.pb.gz", cache=False).gpu.filter(pl.col("hlo_module") == "jit_copy")
    assert g["program_id"].n_unique() == 2 and g["hlo_instruction"].cast(pl.String).unique().to_list() == ["copy.1"]


def test_a_recompiled_function_is_modeled_with_each_programs_shapes():
    """``jit(f)`` called with a new shape in step 2 of 4 (on an H100): two programs named ``jit_f``, each with its
    ``gemm_fusion_dot.1``. Every call was modeled with the first program's shapes (384 x 384 x 96 x 4 batches:
    113 M FLOPs), so the three calls of the 256-wide program read 3.4 times the FLOPs they did."""
    trace = load(Path(__file__).parent / "data" / "recompile_h100" / "jax_recompile.xplane.pb.gz", cache=False)
    g = trace.gpu.filter(pl.col("hlo_module") == "jit_f").filter(pl.col("hlo_instruction") == "gemm_fusion_dot.1")
    by_step = dict(g.select("step", "hlo_flops").iter_rows())
    assert by_step == {0: 2 * 4 * 256 * 256 * 64, 1: 2 * 4 * 256 * 256 * 64, 2: 2 * 4 * 384 * 384 * 96,
                       3: 2 * 4 * 256 * 256 * 64}
    ops = perf_model(trace).ops.filter(pl.col("name") == "gemm_fusion_dot.1")
    assert sorted(zip(ops["count"], ops["flops"])) == [(1, 2.0 * 4 * 384 * 384 * 96), (3, 2.0 * 4 * 256 * 256 * 64)]


def test_the_perf_table_names_each_ops_module_and_program(capsys, monkeypatch):
    """Ops of several modules (one jitted function each) read as several rows of one name (``loop_add_fusion`` twice,
    ``loop_dynamic_update_slice_fusion`` three times, ``copy.1`` twice): the table names each op after its module
    where the rows come from several, and the program where programs share a module's name; the JSON's params say
    both. A one-module profile's names stay as they were."""
    from kernscope.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    assert main(["perf", str(DATA / "partial" / "vm.xplane.pb.gz"), "--no-cache", "-q"]) == 0
    out = capsys.readouterr().out
    for label in ("jit_halves_add/loop_add_fusion ", "jit_dynamic_slice/loop_add_fusion ", "jit_copy/copy.1 #9295 ",
                  "jit_copy/copy.1 #13933 ", "jit_scan_stack/gemm_fusion_dot_general.1 "):
        assert label in out, label
    params = [json.loads(p) for p in perf_model(load(DATA / "partial" / "vm.xplane.pb.gz", cache=False)).ops["params"]]
    assert sorted(p["program"] for p in params if "program" in p) == [9295, 13933]
    assert main(["perf", str(DATA / "remat" / "vm.xplane.pb.gz"), "--no-cache", "-q"]) == 0
    out = capsys.readouterr().out
    assert "jit_train_step/" not in out and " #" not in out.split("Ops by GPU time")[1].split("\n\n")[0]
