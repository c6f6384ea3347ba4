"""GPU time by source line: kernels traced back to the lines of the user's code (JAX: from the HLO, ``hlo_source``;
PyTorch traces recorded with_stack: from the Python stack around each launch, ``--sources``).

The profile stores every compiled module's HloProto; each instruction's metadata names a frame of the module's stack
frame index (JAX since 0.4.3x) or a source file and line (older JAX). Recordings: ``tests/data/jax/transformer`` was
recorded by ``examples/record_jax_profiles.py`` at commit 986ab98, whose lines 73-102 are the model (``norm`` 74-76,
``layer`` 80-84 with cuDNN attention on line 82, ``loss_fn`` 87-91, the SGD update's lambda on 102);
``tests/data/precision_h200`` by ``examples/record_precision_traces.py`` at 8304604 (two jitted lambdas, lines 81
and 82, that share the module name ``jit__lambda``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import TRACES, cli

import kernscope
from kernscope.analyze.summary import analyze
from kernscope.load.hlo import instructions
from kernscope.load.protowire import as_array
from kernscope.load.protowire import varint_bytes as _varint

DATA = Path(__file__).parent / "data"
TRANSFORMER = DATA / "jax" / "transformer" / "vm.xplane.pb.gz"
PRECISION = DATA / "precision_h200" / "jax_precision.xplane.pb.gz"
TE = TRACES / "tracelens" / "jax" / "jax_te_fused_attn_934987a2fc2f.xplane.pb"
SCRIPT = "examples/record_jax_profiles.py"


run = cli  # (the CLI in this process: exit code, stdout, stderr)


def _line(source: str | None) -> int | None:
    return None if source is None else int(source.rsplit(":", 1)[1])


def test_the_transformers_kernels_come_from_the_lines_of_its_model():
    t = kernscope.load(TRANSFORMER, cache=False, projection="analyze")  # (what `kernscope analyze` reads)
    a = analyze(t)
    s = a.sources
    # every GPU row is counted once: the lines' time is all the GPU time, the rows without a line included
    assert s["count"].sum() == t.gpu.height == 1317
    assert s["total_us"].sum() == pytest.approx(a.categories["total_us"].sum(), rel=1e-12)
    assert s["pct"].sum() == pytest.approx(100.0)
    lines = s.drop_nulls("source")
    assert all(src.endswith(f"{SCRIPT}:{_line(src)}") for src in lines["source"])
    assert set(lines["source"].map_elements(_line, return_dtype=pl.Int64)) == {
        74, 75, 76, 80, 81, 82, 83, 84, 87, 88, 89, 90, 91, 102}
    by = {_line(r["source"]): r for r in lines.iter_rows(named=True)}
    assert by[82]["function"] == "transformer_setup.<locals>.layer"  # jax.nn.dot_product_attention(...)
    assert by[82]["top_kernel"].startswith("cudnn_generated_fort_native_sdpa")
    assert by[90]["function"] == "transformer_setup.<locals>.loss_fn" and by[90]["top_kernel"].startswith("triton_softmax")
    assert by[102]["function"] == "record.<locals>.train_step.<locals>.<lambda>"  # the SGD update
    g = t.gpu.with_columns(pl.col("name").cast(pl.String), pl.col("hlo_source").cast(pl.String))
    # each of cuDNN's attention kernels (forward, backward and its helpers) is the call on line 82
    attention = g.filter(pl.col("name").str.contains("cudnn"))
    assert attention.height == 48 and set(attention["hlo_source"].map_elements(_line, return_dtype=pl.Int64)) == {82}
    # cuBLAS's GEMMs in XLA's command buffers name no instruction: the module's schedule matched them (in an analyze
    # load too) to the matrix products of the MLP (84) and the head (89), where it leaves no doubt (36 of 90: not)
    gemms = g.filter(pl.col("name").str.starts_with("nvjet_"))
    assert gemms.height == 90 and gemms["hlo_source"].null_count() == 36
    assert gemms.group_by("hlo_source").len().drop_nulls().sort("hlo_source").rows() == [
        (f"{lines['source'][0].rsplit(':', 1)[0]}:84", 48), (f"{lines['source'][0].rsplit(':', 1)[0]}:89", 6)]
    # XLA's copies have no line: they are the row without a source
    assert g.filter(pl.col("kind") == "memcpy")["hlo_source"].null_count() == g.filter(pl.col("kind") == "memcpy").height
    none = s.filter(pl.col("source").is_null())
    assert none.height == 1 and none["count"].item() == 510
    one = analyze(t, step=1)  # (one step's rows: its 439 GPU records)
    assert one.sources["count"].sum() == 439 == one.steps.filter(pl.col("step") == 1)["gpu_event_count"].item()


def test_a_package_frame_gives_way_to_the_users_line():
    """Transformer Engine's fused attention is traced inside TE's own code (``site-packages/transformer_engine``): the
    line is the user's call of it, the innermost frame outside installed packages."""
    if not TE.exists():
        pytest.skip("TraceLens's JAX profiles not present")
    t = kernscope.load(TE, cache=False, projection="analyze")
    a = analyze(t)
    assert not any("site-packages" in s for s in a.sources["source"].drop_nulls())
    g = t.gpu.with_columns(pl.col("name").cast(pl.String))
    fmha = g.filter(pl.col("name").str.contains("Fmha"))
    assert fmha.height == 40 and set(fmha["hlo_source"].cast(pl.String)) == {"/workspace/12_te_fused_attn.py:77"}
    top = a.sources.row(0, named=True)
    assert top["source"] == "/workspace/12_te_fused_attn.py:77" and top["function"] == "_build_layer_stack_fn.<locals>.block"


def test_programs_that_share_a_module_name_keep_their_own_lines():
    """Two jitted lambdas compile to two programs named ``jit__lambda``: each kernel takes its own program's line (the
    program id of its events), in an analyze load as in a whole one. The analyze load keeps the program ids (the
    analysis does not read them; ``perf`` after ``analyze`` does, from its cache entry), as a whole load has them."""
    ids = {}
    for projection in ("analyze", None):
        t = kernscope.load(PRECISION, cache=False, projection=projection)
        got = {r[0]: r[1] for r in t.gpu.group_by("step").agg(
            pl.col("hlo_source").cast(pl.String).map_elements(_line, return_dtype=pl.Int64).unique()).iter_rows()}
        assert {k: sorted(v) for k, v in got.items()} == {0: [81], 1: [82]}, projection
        ids[projection] = t.gpu["program_id"]
    assert ids["analyze"].equals(ids[None]) and ids[None].n_unique() == 2


def test_terminal_json_sql_and_reports_show_the_lines(tmp_path):
    r = run("analyze", str(TRANSFORMER), "--no-cache")
    assert r.returncode == 0, r.stderr
    assert "GPU time by source line" in r.stdout and "record_jax_profiles.py:82" in r.stdout
    assert "(no source line)" in r.stdout
    d = json.loads(run("analyze", str(TRANSFORMER), "--no-cache", "--format", "json").stdout)
    assert [k for k in d["sources"][0]] == ["source", "function", "kernels", "top_kernel", "count", "total_us", "pct"]
    assert d["sources"][0]["source"] is None and d["sources"][0]["count"] == 510
    assert d["sources"][1]["source"].endswith(f"{SCRIPT}:88")  # lax.scan's loop over the layers
    q = run("sql", "SELECT source, function, total_us FROM analysis.sources WHERE source LIKE '%:82'", str(TRANSFORMER))
    assert q.returncode == 0 and "transformer_setup.<locals>.layer" in q.stdout, q.stderr
    for out in ("r.html", "csv/"):
        assert run("report", str(TRANSFORMER), "-o", str(tmp_path / out), "--no-cache").returncode == 0
    csv = pl.read_csv(tmp_path / "csv" / "source_summary.csv")
    assert csv["count"].sum() == 1317
    assert '"sources"' in (tmp_path / "r.html").read_text() and "GPU time by source line" in (tmp_path / "r.html").read_text()


def test_a_kineto_trace_has_no_source_table():
    bundled = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    r = run("analyze", str(bundled), "--no-cache")
    assert r.returncode == 0 and "by source line" not in r.stdout
    assert "sources" not in json.loads(run("analyze", str(bundled), "--no-cache", "--format", "json").stdout)
    a = analyze(kernscope.load(bundled, cache=False))
    assert a.sources.height == 0 and a.sources.columns[:2] == ["source", "function"]
    q = run("sql", "SELECT count(*) AS n FROM analysis.sources", str(bundled), "--format", "json")
    assert q.returncode == 0 and json.loads(q.stdout)["rows"] == [{"n": 0}], q.stdout


# -- the metadata forms, on hand-built programs ----------------------------------------------------
def _len(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _int(num: int, value: int) -> bytes:
    return _varint(num << 3) + _varint(value)


def _program(metadata: list[bytes], index: bytes = b"") -> bytes:
    """An HloProto of one module (id 7) of one computation whose instructions are ``fusion.i`` with ``metadata[i]``."""
    ins = b"".join(_len(2, _len(1, f"fusion.{i}".encode()) + _len(2, b"fusion") + _len(7, m)) for i, m in enumerate(metadata))
    module = _len(1, b"jit_f") + _len(3, _len(1, b"main") + ins + _int(5, 1)) + _int(5, 7) + (_len(17, index) if index else b"")
    return _len(1, module)


def _sources(proto: bytes) -> list[tuple[str | None, str | None]]:
    table, _ = instructions(as_array(proto), [(0, len(proto))])
    return [(r["source"], r["function"]) for r in table.sort("instruction").iter_rows(named=True)]


def test_older_metadata_gives_its_file_and_line():
    """Older JAX wrote ``source_file`` and ``source_line`` into each instruction's metadata (no function)."""
    got = _sources(_program([_len(2, b"jit(f)/add") + _len(3, b"/u/model.py") + _int(4, 12),
                             _len(2, b"jit(f)/mul") + _len(3, b"/u/model.py"),  # (no line)
                             _len(2, b"jit(f)/sub")]))  # (no source)
    assert got == [("/u/model.py:12", None), ("/u/model.py", None), (None, None)]


def test_stack_frames_give_the_innermost_frame_of_the_users_code():
    """A stack frame index: file names, function names, file locations (file, function, line) and frames (location,
    parent), ids from 1. A frame in an installed package gives way to its first caller outside packages; a stack all in
    packages keeps its innermost frame; a frame id that points nowhere gives no line."""
    files = [b"/u/train.py", b"/venv/lib/python3.12/site-packages/flax/linen/linear.py"]
    funcs = [b"loss_fn", b"Dense.__call__"]
    locs = [(1, 1, 40), (2, 2, 250)]  # (file, function, line)
    frames = [(1, 0), (2, 1), (2, 0)]  # (location, parent): 1 = train.py:40; 2 = flax called from 1; 3 = flax alone
    index = (b"".join(_len(1, f) for f in files) + b"".join(_len(2, f) for f in funcs)
             + b"".join(_len(3, _int(1, a) + _int(2, b) + _int(3, c)) for a, b, c in locs)
             + b"".join(_len(4, _int(1, a) + (_int(2, p) if p else b"")) for a, p in frames))
    got = _sources(_program([_len(2, b"jit(f)/dot_general") + _int(15, 1), _len(2, b"jit(f)/dot_general") + _int(15, 2),
                             _len(2, b"jit(f)/add") + _int(15, 3), _len(2, b"jit(f)/add") + _int(15, 9)], index))
    site = "/venv/lib/python3.12/site-packages/flax/linen/linear.py:250"
    assert got == [("/u/train.py:40", "loss_fn"), ("/u/train.py:40", "loss_fn"), (site, "Dense.__call__"), (None, None)]


def test_perf_names_each_ops_line_and_the_roofline_finding_says_where():
    r = run("perf", str(TRANSFORMER), "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    ops = {o["name"]: json.loads(o["params"]) for o in d["ops"]}
    assert ops["dot_product_attention_bwd.22"]["source"].endswith(f"{SCRIPT}:82")
    assert ops["input_reduce_fusion.8"]["source"].endswith(f"{SCRIPT}:76")  # norm's variance
    assert "source" not in ops["loop_broadcast_fusion.7"]  # (an op XLA added: no line)
    f = [x for x in d["findings"] if x["rule"] == "far_from_roofline"]
    assert f and f[0]["text"].startswith("dot_product_attention_bwd.22 at record_jax_profiles.py:82 (bf16, ")
    assert f[0]["evidence"]["source"].endswith(f"{SCRIPT}:82")
    wide = subprocess.run([sys.executable, "-m", "kernscope.cli", "perf", str(TRANSFORMER), "--no-cache"],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert "source line" in wide.stdout and f"{SCRIPT}:82" in wide.stdout


# -- PyTorch traces recorded with with_stack=True (--sources) ---------------------------------------
GPT_STACK = DATA / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz"  # examples/record_example_trace.py --full (f03e1d8)
QWEN = TRACES / "tracelens" / "h100_Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def test_user_frames_leave_the_framework_out():
    from kernscope.analyze.sources import user_frame

    assert user_frame("record_example_trace.py(36): forward") == ("record_example_trace.py:36", "forward")
    assert user_frame("transformers/models/qwen2/modeling_qwen2.py(56): forward") == (
        "transformers/models/qwen2/modeling_qwen2.py:56", "forward")  # (a model library's code is the model's)
    for framework in ("torch/nn/modules/module.py(1783): _call_impl", "typing.py(2154): cast", "<built-in function linear>",
                      "<frozen os>(680): __getitem__", "nn.Module: Linear_0", "triton/runtime/jit.py(330): run",
                      "/tmp/torchinductor_root/ab/cabc.py(900): call",
                      "/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py(88): sum"):
        assert user_frame(framework) is None, framework


def test_a_pytorch_traces_gpu_time_by_the_users_function():
    """The bundled-style GPT step recorded with stacks: the forward's kernels under ``Block.forward`` (defined on line 36
    of the script at f03e1d8) and ``GPT.forward`` (53), the optimizer's and the loss's under ``step`` (82). The
    backward, launched by autograd's thread (no Python stack there), counts for its forward ops' functions, marked:
    cuDNN's attention backward for ``Block.forward``, the log-softmax's for ``step``."""
    from kernscope.analyze.sources import SOURCE_COLUMNS, python_sources

    t = kernscope.load(GPT_STACK, cache=False)
    s = analyze(t, python_sources=True).sources
    assert s["count"].sum() == t.gpu.filter(pl.col("kind").is_in(["kernel", "memcpy", "memset"])).height
    got = {(r["source"], r["function"]): r["count"] for r in s.iter_rows(named=True)}
    assert got == {("record_example_trace.py:36", "forward (backward)"): 492, ("record_example_trace.py:82", "step"): 303,
                   ("record_example_trace.py:36", "forward"): 252, ("record_example_trace.py:53", "forward (backward)"): 123,
                   ("record_example_trace.py:82", "step (backward)"): 12, ("record_example_trace.py:53", "forward"): 30}
    rows = python_sources(t, t.gpu.select("launch_idx", "launch_tid", "name", "kind", "dur"))
    autograd = rows.filter(pl.col("launch_tid").cast(pl.String) == "474")  # autograd's thread: all backward, all found
    assert autograd.height == 627 and autograd[SOURCE_COLUMNS[1]].str.ends_with(" (backward)").all()
    # cuDNN's attention: forward and backward for the function that called it; in the CUDA graph the step replays
    # (an inference forward captured before), for ``step``, whose line launched the graph
    attention = rows.with_columns(pl.col("launch_idx").is_in(t.gpu.filter(pl.col("graph_launch"))["launch_idx"].implode())
                                  .alias("_graph")).filter(pl.col("name").cast(pl.String).str.contains("cudnn"))
    assert {(r[SOURCE_COLUMNS[0]], r[SOURCE_COLUMNS[1]], r["_graph"]) for r in attention.iter_rows(named=True)} == {
        ("record_example_trace.py:36", "forward", False), ("record_example_trace.py:36", "forward (backward)", False),
        ("record_example_trace.py:82", "step", True)}
    assert analyze(t).sources.height == 0  # (asked for only: an analyze load has no Python events)


def test_sources_option_reads_the_python_events_and_prints_what_a_full_read_prints(tmp_path):
    from kernscope.cli import main

    outs: list[bytes] = []
    for flag in ([], ["--read-all"]):
        out = tmp_path / f"{len(outs)}.json"
        assert main(["analyze", str(GPT_STACK), "--sources", "--no-cache", "-q", "--format", "json", "-o", str(out),
                     *flag]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    d = json.loads(outs[0])
    assert [(r["source"], r["function"]) for r in d["sources"]][:3] == [
        ("record_example_trace.py:36", "forward (backward)"), ("record_example_trace.py:82", "step"),
        ("record_example_trace.py:36", "forward")]
    plain = run("analyze", str(GPT_STACK), "--no-cache", "--format", "json")
    assert "sources" not in json.loads(plain.stdout)  # (without --sources: the Python events are not read)
    r = run("analyze", str(GPT_STACK), "--sources", "--no-cache")
    assert "GPU time by Python function of your code" in r.stdout and "record_example_trace.py:36" in r.stdout


def test_a_hugging_face_models_kernels_by_its_modeling_code():
    """TraceLens's Qwen 1.5 inference trace (H100, with stacks): the kernels under the model's own functions in
    ``transformers``; the GPU rows without a launch in the trace are the row without a line."""
    if not QWEN.exists():
        pytest.skip("TraceLens's traces not present")
    t = kernscope.load(QWEN, cache=False)
    s = analyze(t, python_sources=True).sources
    top = s.drop_nulls("source").row(0, named=True)
    assert top["source"] == "transformers/models/qwen2/modeling_qwen2.py:56" and top["count"] == 192
    assert s.filter(pl.col("source").is_null())["count"].item() == t.gpu.filter(pl.col("launch_idx").is_null()).height
    assert all(src.startswith("transformers/") for src in s["source"].drop_nulls())


def test_report_sources_writes_the_table_of_a_pytorch_trace(tmp_path):
    r = run("report", str(GPT_STACK), "--sources", "-o", str(tmp_path / "csv/"), "--no-cache")
    assert r.returncode == 0, r.stderr
    t = pl.read_csv(tmp_path / "csv" / "source_summary.csv")
    assert t["count"].sum() == 1212 and t["function"].to_list()[:2] == ["forward (backward)", "step"]
    assert run("report", str(GPT_STACK), "-o", str(tmp_path / "plain/"), "--no-cache").returncode == 0
    assert not (tmp_path / "plain" / "source_summary.csv").exists()  # (asked for only)
    html = run("report", str(GPT_STACK), "--sources", "-o", str(tmp_path / "r.html"), "--no-cache")
    assert html.returncode == 0 and "GPU time by Python function of your code" in (tmp_path / "r.html").read_text()


def test_sources_of_a_trace_without_python_stacks_says_why(tmp_path):
    """A trace recorded without ``with_stack``: no table, and one line on stderr says how to record one."""
    bundled = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    for cmd in (["analyze", str(bundled), "--sources", "--no-cache", "--format", "json"],
                ["report", str(bundled), "--sources", "--no-cache", "-o", str(tmp_path / "r.html")]):
        r = run(*cmd)
        assert r.returncode == 0 and "no launch in" in r.stderr and "with_stack=True" in r.stderr, (cmd, r.stderr)
    assert "sources" not in json.loads(run("analyze", str(bundled), "--sources", "--no-cache", "--format", "json").stdout)
    quiet = run("analyze", str(GPT_STACK), "--sources", "--no-cache", "--format", "json")
    assert "no launch in" not in quiet.stderr  # (a trace with stacks: nothing to say)


def _with_gpu(t: kernscope.Trace, gpu: pl.DataFrame) -> kernscope.Trace:
    import dataclasses

    return dataclasses.replace(t, gpu=gpu)


def test_diff_by_line_puts_a_slower_line_first_and_only_it_moves():
    """B is A with the kernels of one line (82, cuDNN's attention) twice as long: the diff's line table has that line
    first with the whole delta, every other line unchanged; the lines' times are each side's kernels, copies and sets."""
    from kernscope.analyze.diff import Side, diff

    t = kernscope.load(TRANSFORMER, cache=False, projection="analyze")
    line = pl.col("hlo_source").cast(pl.String).str.ends_with(f"{SCRIPT}:82")
    slow = _with_gpu(t, t.gpu.with_columns(pl.when(line).then(pl.col("dur") * 2).otherwise(pl.col("dur")).alias("dur"),
                                           pl.when(line).then(pl.col("ts") + pl.col("dur") * 2)
                                           .otherwise(pl.col("end")).alias("end")))
    d = diff(Side(t), Side(slow))
    s = d.sources
    moved = t.gpu.filter(line)
    assert s.row(0, named=True)["source"].endswith(f"{SCRIPT}:82") and s["delta_us"][0] == pytest.approx(
        moved["dur"].sum() / 1e3)
    assert s["a_count"][0] == s["b_count"][0] == moved.height == 48
    assert (s["delta_us"][1:] == 0).all() and (s["only"] == "").all()
    assert s["a_us"].sum() == pytest.approx(analyze(t).sources["total_us"].sum())  # (the rows analyze sums)
    assert s.filter(pl.col("source").is_null()).height == 1  # (the records without a line: one row, on both sides)


def test_diff_loose_matches_a_functions_lines_after_an_edit_moved_them():
    """B is A recorded after an edit above the model (every line 5 further down): exact lines are all on one side
    only; --match loose (file and function) matches them, and nothing moved."""
    from kernscope.analyze.diff import Side, diff

    t = kernscope.load(TRANSFORMER, cache=False, projection="analyze")
    src = pl.col("hlo_source").cast(pl.String)
    moved = src.str.replace(r":\d+$", "") + ":" + (src.str.extract(r":(\d+)$").cast(pl.Int64) + 5).cast(pl.String)
    edited = _with_gpu(t, t.gpu.with_columns(moved.cast(pl.Categorical).alias("hlo_source")))
    exact = diff(Side(t), Side(edited)).sources
    assert set(exact.drop_nulls("source")["only"]) == {"a", "b"}
    loose = diff(Side(t), Side(edited), match="loose").sources
    assert (loose["only"] == "").all() and (loose["delta_us"] == 0).all()
    assert {r["source"] for r in loose.drop_nulls("source").iter_rows(named=True)} == {
        s.rsplit(":", 1)[0] for s in exact["source"].drop_nulls()}
    by = {r["function"]: r["a_count"] for r in loose.iter_rows(named=True)}
    assert by["transformer_setup.<locals>.layer"] == sum(  # lines 80-84 as one row
        r["count"] for r in analyze(t).sources.drop_nulls("source").iter_rows(named=True)
        if r["function"] == "transformer_setup.<locals>.layer")


def test_diff_cli_sources_of_two_steps_terminal_json_xlsx(tmp_path):
    """``diff --sources`` of two steps of the GPT trace with stacks: by the user's function, each side's time the
    step's kernels, copies and sets; without --sources no table (no Python events read); a side without stacks: a
    note, no table."""
    import zipfile

    a = ["diff", str(GPT_STACK), str(GPT_STACK), "--step", "2", "--step-b", "4", "--no-cache"]
    r = run(*a, "--sources", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    rows = {(x["source"], x["function"]): x for x in d["sources"]}
    assert set(rows) == {("record_example_trace.py:36", "forward (backward)"), ("record_example_trace.py:82", "step"),
                         ("record_example_trace.py:36", "forward"), ("record_example_trace.py:53", "forward (backward)"),
                         ("record_example_trace.py:82", "step (backward)"), ("record_example_trace.py:53", "forward")}
    t = kernscope.load(GPT_STACK, cache=False)
    for side, step in (("a", 2), ("b", 4)):
        g = t.gpu.filter((pl.col("step") == step) & pl.col("kind").is_in(["kernel", "memcpy", "memset"]))
        assert sum(x[f"{side}_count"] for x in d["sources"]) == g.height
        assert sum(x[f"{side}_us"] for x in d["sources"]) == pytest.approx(g["dur"].sum() / 1e3, abs=1e-2)
    assert d["sources"][0]["function"] == "forward (backward)"  # (the largest |B - A|: 11.7 µs)
    assert "sources" not in json.loads(run(*a, "--format", "json").stdout)
    term = run(*a, "--sources")
    assert "GPU time by line of your code" in term.stdout and "record_example_trace.py:36" in term.stdout
    assert run(*a, "--sources", "-o", str(tmp_path / "d.xlsx")).returncode == 0
    assert "xl/worksheets/sheet4.xml" in zipfile.ZipFile(tmp_path / "d.xlsx").namelist()  # summary, categories, libraries, sources
    bundled = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    one = json.loads(run("diff", str(GPT_STACK), str(bundled), "--sources", "--no-cache", "--format", "json").stdout)
    assert "sources" not in one and any("only A has lines of the user's code" in n for n in one["notes"])


def test_sql_reads_a_pytorch_traces_lines_when_the_query_names_them():
    r = run("sql", "SELECT source, function, count FROM analysis.sources ORDER BY count DESC", str(GPT_STACK),
            "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["rows"]
    assert rows[0] == {"source": "record_example_trace.py:36", "function": "forward (backward)", "count": 492}
    assert sum(x["count"] for x in rows) == 1212


def test_report_with_a_diff_has_the_diff_by_line_where_both_sides_have_lines(tmp_path):
    a = ["report", str(GPT_STACK), "--diff", str(GPT_STACK), "--step", "2", "--step-b", "4", "--no-cache"]
    assert run(*a, "--sources", "-o", str(tmp_path / "with/")).returncode == 0
    t = pl.read_csv(tmp_path / "with" / "diff_sources.csv")
    assert t["a_count"].sum() == t["b_count"].sum() == 404 and t["function"][0] == "forward (backward)"
    assert run(*a, "-o", str(tmp_path / "without/")).returncode == 0
    assert not (tmp_path / "without" / "diff_sources.csv").exists()  # (no lines read: no empty sheet either)
    assert (tmp_path / "without" / "diff_kernels.csv").exists()
