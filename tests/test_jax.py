"""JAX / XLA profiles: the XSpace decoder, the JSON exports, run directories, steps, linking, categories.

Fixtures in tests/data/jax are real profiles recorded on an H100 with examples/record_jax_profiles.py
(JAX 0.11.2): a bf16 MLP and a small transformer (cuDNN attention, lax.scan), 3 training steps each, with
the counts JAX's own reader (jax.profiler.ProfileData) gave for every line in reference.json.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import TRACES, cli

import kernscope
from kernscope.analyze.categories import Categorizer
from kernscope.analyze.kernels import gpu_table
from kernscope.analyze.summary import analyze
from kernscope.errors import TraceError
from kernscope.load import parse
from kernscope.load.protowire import Fields, WireError, fields_of, padded, walk
from kernscope.load.protowire import varint_bytes as _varint
from kernscope.load.xplane import decode, is_xspace
from kernscope.load.xstats import KERNEL_DETAIL_COLUMNS, Strings, kernel_details

DATA = Path(__file__).parent / "data" / "jax"
REF = json.loads((DATA / "reference.json").read_text())["runs"]
MLP = DATA / "mlp" / "vm.xplane.pb"
TRANSFORMER = DATA / "transformer" / "vm.xplane.pb.gz"
TRACELENS_JAX = TRACES / "tracelens" / "jax"


def xspace_bytes(p: Path) -> bytes:
    b = p.read_bytes()
    return gzip.decompress(b) if b[:2] == b"\x1f\x8b" else b


run = cli  # (the CLI in this process: exit code, stdout, stderr)


# -- the wire reader ---------------------------------------------------------------------------
def _field(num: int, payload: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def test_walk_follows_long_runs_exactly():
    # 5,000 events of varying sizes, with bytes equal to the tag (0x22) inside the payloads
    rng = np.random.default_rng(0)
    events = [bytes([0x22]) * int(rng.integers(0, 40)) + _varint(int(rng.integers(0, 1 << 40))) for _ in range(5000)]
    msg = _field(2, b"line") + b"".join(_field(4, e) for e in events) + _field(11, b"tail")
    buf = padded(msg)
    f = walk(buf, 0, len(msg), runs=(4,))
    ev = f.of(4, 2)
    assert len(ev) == 5000
    assert [buf[o:o + s].tobytes() for o, s in zip(ev.off.tolist(), ev.size.tolist())] == events
    assert f.field.tolist()[0] == 2 and f.field.tolist()[-1] == 11


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
def test_fields_of_many_messages_and_value_types(native, monkeypatch):
    from kernscope.load import native as lib

    if native and lib.scanner() is None:
        pytest.fail("the compiled reader was not built (make install compiles src/kernscope/load/_xspace.c)")
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "0" if native else "1")
    m1 = _varint(1 << 3 | 0) + _varint(300) + _varint(2 << 3 | 1) + np.float64(2.5).tobytes() + _field(5, b"abc")
    m2 = _varint(3 << 3 | 0) + _varint(2**64 - 1) + _varint(4 << 3 | 5) + (7).to_bytes(4, "little")
    data = m1 + m2
    f: Fields = fields_of(padded(data), np.array([0, len(m1)]), np.array([len(m1), len(data)]))
    # message by message, each message's fields in file order; both readers alike
    assert list(zip(f.msg.tolist(), f.field.tolist())) == [(0, 1), (0, 2), (0, 5), (1, 3), (1, 4)]
    assert f.wire.tolist() == [0, 1, 2, 0, 5] and f.size.tolist() == [0, 0, 3, 0, 0]
    # a value's offset is where its bytes start (after the tag)
    assert f.off.tolist()[:2] == [1, 4] and f.off.tolist()[3] == len(m1) + 1
    f0, f1 = f.select(f.msg == 0), f.select(f.msg == 1)
    assert int(f0.value[0]) == 300 and f0.value[1:2].view(np.float64)[0] == 2.5
    assert int(f1.value[0]) == 2**64 - 1 and int(f1.value[1]) == 7
    assert bytes(padded(data)[f0.off[2]:f0.off[2] + f0.size[2]]) == b"abc"


@pytest.mark.parametrize("native", ["0", "1"], ids=["compiled", "numpy"])
def test_truncated_message_names_the_byte(native, monkeypatch):
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", native)
    msg = _field(4, b"x" * 50)
    with pytest.raises(WireError) as e:
        fields_of(padded(msg[:30]), np.array([0]), np.array([30]))
    assert e.value.offset == 0


def _xspace_files() -> list[Path]:
    files = [MLP, TRANSFORMER]
    if TRACELENS_JAX.is_dir():
        files += sorted(TRACELENS_JAX.glob("*.xplane.pb"))
    return files


def _lines_and_spec(path: Path, unread: frozenset[int] = frozenset()):
    """A profile's event lines (offsets, lengths, planes), its stat and event metadata lookups and the field spec
    the decode would make (``unread``: field indices left out)."""
    data = xspace_bytes(path)
    buf = padded(data)
    space = walk(buf, 0, len(data))
    offs, lens = [], []
    for o, s in zip(space.of(1, 2).off.tolist(), space.of(1, 2).size.tolist()):
        lines = walk(buf, o, o + s, runs=(4, 5, 6)).of(3, 2)
        offs.append(lines.off)
        lens.append(lines.size)
    lo, ll = np.concatenate(offs), np.concatenate(lens)
    lp = np.concatenate([np.full(x.size, i) for i, x in enumerate(offs)])
    from kernscope.load.xplane import _event_metadata, _planes, _stat_metadata
    from kernscope.load.xscan import FieldSpec
    from kernscope.load.xstats import FIELD_KINDS, Lookup, field_lut, field_table

    planes, _ = _planes(buf, len(data), str(path))
    t = _stat_metadata(buf, planes)
    lookup = Lookup(t["plane"].to_numpy(), t["id"].to_numpy())
    table = field_table(t["stat"], unread)
    flat = field_lut(t["plane"].to_numpy(), t["id"].to_numpy(), t["stat"], unread)
    assert flat is not None  # this profile's stat ids fit a flat table
    lut, width = flat
    emd, _ = _event_metadata(buf, planes)
    names = Lookup(emd["plane"].to_numpy(), emd["md"].to_numpy())

    def field_of(plane, ids):
        return table[lookup.rows(plane, ids)]

    return data, buf, (lo, ll, lp), FieldSpec(field_of, lut, width, FIELD_KINDS, unread), lookup, names


@pytest.mark.parametrize("path", _xspace_files(), ids=lambda p: p.name[:30])
def test_compiled_scanner_equals_the_numpy_reader(path, monkeypatch):
    """The C scanner (built by the install) and the numpy reader give the same columns and the same trace."""
    from kernscope.load import native
    from kernscope.load.xscan import S_NONE, scan_lines

    if native.scanner() is None:
        pytest.fail("the compiled scanner was not built (make install compiles src/kernscope/load/_xspace.c)")
    data, buf, (lo, ll, lp), spec, lookup, names = _lines_and_spec(path)
    a = scan_lines(buf, lo, ll, lp, spec, lookup, names, native=True)
    b = scan_lines(buf, lo, ll, lp, spec, lookup, names, native=False)
    # the lines in as many parts as there are (one thread each), the odd list too small at first (it grows)
    from kernscope.load import xscan

    monkeypatch.setattr(xscan, "PART_BYTES", 1)
    monkeypatch.setattr(xscan, "MAX_PARTS", 64)
    monkeypatch.setattr(xscan, "MIN_ODD", 1)
    monkeypatch.setattr(xscan, "usable_cores", lambda: 64)
    c = scan_lines(buf, lo, ll, lp, spec, lookup, names, native=True)
    monkeypatch.undo()
    assert a.native and not b.native
    assert a.unknown == b.unknown > 0 and a.kept == b.kept == c.kept > 0
    assert (a.ev_name >= 0).all() and a.ev_dur.min() >= 0
    for col in a.__dataclass_fields__:
        if col == "value":
            for x, y, z, st in zip(a.value, b.value, c.value, a.state):
                has = st != S_NONE  # cells without a stat hold anything
                assert np.array_equal(x[has], y[has]) and np.array_equal(z[has], y[has]), col
        elif col == "state":
            for x, y, z in zip(a.state, b.state, c.state):
                assert np.array_equal(x, y) and np.array_equal(z, y), col
        elif col not in ("native", "kept", "unknown"):
            assert np.array_equal(getattr(a, col), getattr(b, col)), col
            assert np.array_equal(getattr(c, col), getattr(b, col)), col
    fast = decode(data, str(path))
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    slow = decode(data, str(path))
    assert fast.events.equals(slow.events) and fast.metadata == slow.metadata


@pytest.mark.parametrize("path", _xspace_files(), ids=lambda p: p.name[:30])
def test_fields_left_unread_get_no_cells_and_are_not_counted_unknown(path):
    """A scan that leaves fields out (``analyze`` reads 6 of 16) gives them empty cells; every other field's cells
    are those of the whole scan, its stats are not counted as unknown, and both readers agree."""
    from kernscope.load.xscan import scan_lines
    from kernscope.load.xstats import STAT_FIELDS

    unread = frozenset(i for i, f in enumerate(STAT_FIELDS) if f.column in
                       {"op_path", "program_id", "cuda_graph_id", "memcpy_details", "bytes_allocated", "allocator_name"})
    _, buf, (lo, ll, lp), whole_spec, lookup, names = _lines_and_spec(path)
    whole = scan_lines(buf, lo, ll, lp, whole_spec, lookup, names, native=True)
    _, buf, (lo, ll, lp), spec, lookup, names = _lines_and_spec(path, unread)
    left_out = sum(int(np.count_nonzero(whole.state[i])) for i in unread)  # (a cell holds an event's last stat)
    for native in (True, False):
        part = scan_lines(buf, lo, ll, lp, spec, lookup, names, native=native)
        assert part.unknown == whole.unknown > 0
        assert part.kept <= whole.kept - left_out and part.kept > 0
        for i in range(len(STAT_FIELDS)):
            if i in unread:
                assert part.value[i].size == part.state[i].size == 0
            else:
                assert np.array_equal(part.state[i], whole.state[i])
                has = whole.state[i] != 0
                assert np.array_equal(part.value[i][has], whole.value[i][has])
        assert not np.isin(part.odd_field, list(unread)).any()
    assert left_out > 0 or path != TRANSFORMER  # (the transformer profile has program ids: the test leaves some out)


def test_compiled_scanner_reports_the_offset_of_damage():
    from kernscope.load.xscan import scan_lines

    data = MLP.read_bytes()
    buf = padded(data)
    space = walk(buf, 0, len(data))
    gpu = next((o, s) for o, s in zip(space.of(1, 2).off.tolist(), space.of(1, 2).size.tolist())
               if b"/device:GPU" in data[o:o + 40])
    line = walk(buf, gpu[0], gpu[0] + gpu[1], runs=(4, 5, 6)).of(3, 2)
    lo, ll = line.off[:1].copy(), line.size[:1].copy()
    bad = buf.copy()
    bad[lo[0] + ll[0] // 2: lo[0] + ll[0] // 2 + 8] = 0xFF  # a run of unterminated varints mid-line
    from kernscope.load.xscan import FieldSpec
    from kernscope.load.xstats import FIELD_KINDS, Lookup

    spec = FieldSpec(lambda p, i: np.full(i.size, -1, np.int8), np.full(64, -1, dtype=np.int8), 64, FIELD_KINDS)
    none = Lookup(np.zeros(1, np.int64), np.zeros(1, np.int64))
    for native in (True, False):
        with pytest.raises(WireError) as e:
            scan_lines(bad, lo, ll, np.zeros(1, np.int64), spec, none, none, native=native)
        assert lo[0] <= e.value.offset < lo[0] + ll[0]


# -- decoding real profiles --------------------------------------------------------------------
@pytest.mark.parametrize("name,path", [("mlp", MLP), ("transformer", TRANSFORMER)])
def test_every_line_matches_jax_own_reader(name, path):
    """Events per line and their summed durations equal what jax.profiler.ProfileData read on the GPU machine."""
    raw = decode(xspace_bytes(path), str(path))
    ref = next(v for k, v in REF.items() if k == name)
    ev = raw.events
    assert ev.height == ref["events"]
    names = {(str(r[2]), str(r[3])): str(r[4]) for r in raw.meta_events.filter(pl.col("name") == "thread_name").iter_rows()}
    got = ev.group_by(pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String)).agg(pl.len(), pl.col("dur").sum())
    by_line = {names[(p, t)]: (n, d) for p, t, n, d in got.iter_rows()}
    for plane, lines in ref["planes"].items():
        for line, want in lines.items():
            n, d = by_line[line]
            assert n == want["events"], (plane, line)
            # ns rounded from ps per event: within half a ns per event of JAX's float sum
            assert abs(d - want["dur_ns"]) <= n / 2 + 1, (plane, line, d, want["dur_ns"])


def test_gpu_rows_are_linked_typed_and_carry_xla_columns():
    t = kernscope.load(MLP, cache=False)
    g = t.gpu
    assert g.height == 90 and (g["kind"] == "kernel").all()
    # every kernel of this profile runs in an XLA command buffer: a CUDA graph launch links them all
    assert g["launch_idx"].null_count() == 0
    assert g["graph_launch"].all() and g["cuda_graph_id"].null_count() == 0
    assert set(g["launch_name"].cast(pl.String).unique()) == {"cuGraphLaunch (CudaGraph:12)"}
    assert set(g["launcher"].cast(pl.String).unique()) == {"command_buffer_1"}
    assert set(g["hlo_module"].cast(pl.String).unique()) == {"jit_train_step"}
    row = g.filter(pl.col("name") == "gemm_fusion_dot_general_11").row(0, named=True)
    assert (row["grid_x"], row["grid_y"], row["grid_z"], row["block_x"], row["registers"], row["dynamic_shared"]) == \
        (128, 1, 1, 128, 154, 98328)
    assert row["occupancy_pct"] == 12.5
    assert row["hlo_instruction"] == "gemm_fusion_dot_general.11" and row["hlo_desc"].startswith("hlo:fusion:kCustom:")
    assert t.device_properties[0]["name"] == "NVIDIA H100 80GB HBM3" and t.device_properties[0]["numSms"] == 132
    assert t.platform == "cuda" and t.metadata["jax_version"] == "0.11.2"
    assert t.base_time_ns == 1795719179966125275


def test_kernel_details_parsed_once_per_text_and_gathered_per_event():
    texts = ["fusion.1",  # a stat name, not a kernel's details: no value
             "regs:154 static_shared:0 dynamic_shared:98328 grid:128,1,1 block:128,1,1 occ_pct:12.5",
             "grid:64,2,1 block:256,1,1 private_mem:0 group_mem:49280 occ_pct:0",  # AMD: group_mem is shared
             "regs:32"]
    value = np.array([1, 2, 3, 7, 1, 0, 3, 2], dtype=np.int32)  # 7: a cell of an event without the stat
    missing = np.array([False, False, False, True, False, False, False, True])
    details = Strings(value, missing, pl.Series(texts))
    got = kernel_details(details)
    assert list(got) == list(KERNEL_DETAIL_COLUMNS) and all(got[c].name == c for c in got)
    want = {"grid_x": [128, 64, None, None, 128, None, None, None], "grid_y": [1, 2, None, None, 1, None, None, None],
            "block_x": [128, 256, None, None, 128, None, None, None], "registers": [154, None, 32, None, 154, None, 32, None],
            "static_shared": [0, None, None, None, 0, None, None, None],
            "dynamic_shared": [98328, 49280, None, None, 98328, None, None, None]}
    for c, v in want.items():
        assert got[c].to_list() == v, c
    # only some columns asked; the texts used give registers alone: the others are nulls of every event
    only = kernel_details(Strings(value, missing | (value != 3), pl.Series(texts)), ["grid_x", "registers"])
    assert only["registers"].to_list() == [None, None, 32, None, None, None, 32, None]
    assert only["grid_x"].dtype == pl.Int64 and only["grid_x"].len() == 8 and only["grid_x"].null_count() == 8
    # no text at all
    none = kernel_details(Strings(value, np.ones(8, dtype=bool), pl.Series(texts)), ["block_z"])
    assert none["block_z"].len() == 8 and none["block_z"].null_count() == 8


def test_a_stat_no_event_has_is_a_null_column_of_its_type():
    # (read without a gather of every event: the scan wrote none of its cells)
    t = kernscope.load(MLP, cache=False)
    assert t.events.schema["memcpy_details"] == pl.Categorical
    assert t.events["memcpy_details"].null_count() == t.events.height
    for col in ("kernel_details", "bytes_allocated"):  # stats some events have: kept
        assert 0 < t.events[col].drop_nulls().len() < t.events.height


@pytest.mark.parametrize("path,kernels_per_step", [(MLP, 30), (TRANSFORMER, 288)])
def test_steps_from_step_trace_annotation(path, kernels_per_step):
    t = kernscope.load(path, cache=False)
    assert t.step_source == "StepTraceAnnotation"
    assert t.steps["name"].to_list() == ["train#0", "train#1", "train#2"]
    assert t.steps["step"].to_list() == [0, 1, 2]
    per = t.kernels.group_by("step").len().sort("step")
    assert per["step"].to_list() == [0, 1, 2] and per["len"].to_list() == [kernels_per_step] * 3


def test_module_executions_are_steps_without_annotations():
    t = kernscope.load(MLP, cache=False)
    from kernscope.link.steps import module_steps

    ev = t.events.with_columns(pl.lit(None, dtype=pl.Int64).alias("step_num"))
    s = module_steps(ev)
    assert s.height == 3 and s["name"].to_list() == [f"jit_train_step:XLA GPU module#{i}" for i in range(3)]


def test_json_exports_load_and_agree_with_the_xspace():
    x = kernscope.load(TRANSFORMER, cache=False)
    for name in ("perfetto_trace.json.gz", "vm.trace.json.gz"):
        j = kernscope.load(DATA / "transformer" / name, cache=False)
        assert j.metadata["jax_json"]["empty_events_dropped"] == 1
        for kind in ("kernel", "memcpy", "memset"):
            a, b = x.gpu.filter(pl.col("kind") == kind), j.gpu.filter(pl.col("kind") == kind)
            assert a.height == b.height, kind
            # the JSON holds µs with 3 decimals: each duration within a ns of the XSpace's
            assert abs(int(a["dur"].sum()) - int(b["dur"].sum())) <= a.height, kind
        assert sorted(j.kernels["name"].cast(pl.String).unique()) == sorted(x.kernels["name"].cast(pl.String).unique())


def test_run_directory_picks_the_xspace_and_says_so(tmp_path):
    run_dir = tmp_path / "logs" / "plugins" / "profile" / "2026_11_26"
    run_dir.mkdir(parents=True)
    shutil.copy(MLP, run_dir / "vm.xplane.pb")
    for n in ("perfetto_trace.json.gz", "vm.trace.json.gz"):
        shutil.copy(DATA / "mlp" / n, run_dir / n)
    for target in (run_dir, tmp_path / "logs"):
        r = run("analyze", str(target), "--format", "json", "--no-cache")
        assert r.returncode == 0, r.stderr
        assert "reading vm.xplane.pb" in r.stderr and "perfetto_trace.json.gz" in r.stderr
        out = json.loads(r.stdout)
        assert out["trace"]["path"].endswith("vm.xplane.pb")
        assert out["trace"]["gpu_events"] == 90 and out["trace"]["step_source"] == "StepTraceAnnotation"
        assert {k["decided_by"] for k in out["kernels"]} <= {"name", "hlo"}


# -- categories --------------------------------------------------------------------------------
#: an expert's category for every distinct kernel of the transformer profile (cuDNN attention, cuBLAS, XLA fusions)
EXPECTED = {
    "loop_add_fusion": "Elementwise", "loop_multiply_fusion": "Elementwise", "loop_negate_fusion": "Elementwise",
    "loop_subtract_fusion": "Elementwise", "loop_convert_multiply_fusion": "Elementwise",
    "loop_broadcast_fusion": "Memory", "loop_slice_fusion": "Memory", "memcpy128": "Memory", "Memset 0": "Memory",
    "input_reduce_fusion": "Reduction", "input_scatter_fusion": "Embedding/Indexing", "triton_softmax_8": "Softmax",
    "gemm_fusion_dot_44": "GEMM", "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT": "GEMM", "fusion_84": "Reduction",
}


def test_transformer_categories():
    a = analyze(kernscope.load(TRANSFORMER, cache=False))
    cats = dict(a.gpu.group_by("name").agg(pl.col("category").first()).iter_rows())
    for name, want in EXPECTED.items():
        assert cats[name] == want, name
    attn = {n: c for n, c in cats.items() if "sdpa" in n or "cudnn::fusion" in n}
    assert any("bprop" in n for n in attn) and all(c == ("Attention Backward" if ("bprop" in n or "cudnn::fusion" in n)
                                                         else "Attention Forward") for n, c in attn.items())
    other = a.gpu.filter(pl.col("category") == "Other")["dur"].sum()
    assert other <= 0.01 * a.gpu["dur"].sum()
    # one category per kernel row, and the HLO decided where the name said little
    assert a.kernels.select(pl.struct("name", "launcher").n_unique()).item() == a.kernels.height
    f84 = a.kernels.filter(pl.col("name") == "fusion_84").row(0, named=True)
    assert (f84["decided_by"], f84["decided_op"]) == ("hlo", "fusion.84")


def test_cast_under_autocast_linear_is_memory_not_gemm():
    """bfloat16_copy_kernel launched by aten::copy_ inside aten::linear (autocast) is a copy, not GEMM work."""
    ex = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    t = kernscope.load(ex, cache=False)
    copies = pl.col("name").str.contains("bfloat16_copy")
    g = gpu_table(t, Categorizer.builtin()).filter(copies)
    assert g.height > 0 and (g["category"] == "Memory").all() and (g["decided_by"] == "name").all()
    # without the [launcher].keep rule the enclosing linear would make some of them GEMM (the defect)
    loose = Categorizer.builtin().with_rules({"launcher": {"keep": "^$"}})
    assert (gpu_table(t, loose).filter(copies)["category"] == "GEMM").any()


# -- TraceLens's public JAX data (an MI300 xplane with TraceLens's own report) ----------------------
def test_tracelens_mi300_conv_kernels_per_gpu_match_their_report():
    """TraceLens's reference CSVs list, per GPU, 5 launches of each of the model's 5 kernels. Their durations
    are of another capture (none of their per-launch times occurs in this file: docs/jax.md), so the test
    checks the structure: every GPU runs each kernel 5 times in the 5 module executions, on one stream."""
    p = TRACELENS_JAX / "mi300_jax_conv_minimal_tw003.xplane.pb"
    if not p.exists():
        pytest.skip(f"{p} not present (../shared/traces)")
    ref = pl.read_csv(TRACELENS_JAX / "reference_conv_minimal" / "kernel_launchers_summary.csv")
    t = kernscope.load(p, cache=False)
    assert t.platform == "rocm" and sorted(t.devices) == list(range(8))
    k = t.kernels.with_columns(pl.col("name").cast(pl.String).str.replace(r"\.kd$", ""))
    per = k.group_by("device", "name").len()
    for name, count in ref.select("name", "Count").iter_rows():
        got = per.filter((pl.col("name") == name) | (pl.col("name").str.starts_with(name) & (len(name) > 200)))
        assert got.height == 8 and (got["len"] == count).all(), name
    # the 5 executions run on the 8 GPUs at once: 5 module windows, each with 5 kernels per GPU
    assert t.step_source == "XLA module"


def test_tracelens_te_fused_attention_categories():
    p = TRACELENS_JAX / "jax_te_fused_attn_934987a2fc2f.xplane.pb"
    if not p.exists():
        pytest.skip(f"{p} not present (../shared/traces)")
    a = analyze(kernscope.load(p, cache=False))
    cats = dict(a.gpu.group_by(pl.col("name")).agg(pl.col("category").first()).iter_rows())
    fwd = [n for n in cats if "FmhaFwd" in n]
    bwd = [n for n in cats if "FmhaBwd" in n]
    assert fwd and bwd and all(cats[n] == "Attention Forward" for n in fwd) and all(cats[n] == "Attention Backward" for n in bwd)
    assert all(cats[n] == "GEMM" for n in cats if n.startswith(("gemm_fusion_dot", "Cijk_")))
    assert all(cats[n] == "Reduction" for n in cats if "reduce_fusion" in n)
    assert a.gpu.filter(pl.col("category") == "Other")["dur"].sum() <= 0.01 * a.gpu["dur"].sum()


def test_library_kernels_of_command_buffers_run_the_custom_calls_the_schedule_says():
    """cuBLAS's GEMMs and cuDNN's attention inside XLA's command buffers name no instruction (their ``hlo_op`` is the
    buffer): the perf model left them out (the transformer profile: 62.0% covered). Between two kernels XLA named, the
    library kernels ran the custom calls scheduled between those kernels' instructions, of the library that writes
    such a kernel (``kernscope.load.hlo_align``)."""
    from kernscope.analyze.perf import perf_model

    t = kernscope.load(TRANSFORMER, cache=False)
    g = t.gpu.filter(pl.col("hlo_op").cast(pl.String).str.starts_with("command_buffer")
                     & pl.col("hlo_desc").cast(pl.String).str.starts_with("hlo:custom-call"))
    got = {r[0]: (r[1], r[2], sorted(r[3])) for r in g.group_by("hlo_instruction").agg(
        pl.col("hlo_desc").first(), pl.len(), pl.col("name").cast(pl.String).unique()).iter_rows()}
    # four layers a step under lax.scan (a call a layer), three steps; the first and last layer's GEMMs outside the scan
    assert {k: v[1] for k, v in got.items()} == {
        "custom-call.1": 3, "custom-call.2": 12, "custom-call.3": 12, "custom-call.6": 12, "custom-call.7": 3,
        "custom-call.8": 12, "dot_product_attention_bwd.22": 36, "dot_product_attention_fwd.13": 12}
    for instruction, (desc, _, names) in got.items():  # each kernel is its call's library's
        if "cublas" in desc:
            assert all(n.startswith("nvjet_") for n in names), instruction
        else:
            assert all("cudnn" in n for n in names) and ("Backward" in desc) == any("bprop" in n for n in names)
    assert len(got["dot_product_attention_bwd.22"][2]) == 3  # (the backward and its two helpers: one call)
    pm = perf_model(t)
    assert pm.coverage["pct"] == pytest.approx(78.78, abs=0.01)  # (was 62.0)
    # what is left is mostly XLA's copies: the notes say so (16% of the GPU time)
    assert any(n.startswith("1,601.0 µs of GPU time (16%) are XLA's copies and memsets") for n in pm.notes)
    ops = {o["name"]: o for o in pm.ops.to_dicts()}
    assert ops["custom-call.8"]["count"] == 12 and ops["dot_product_attention_bwd.22"]["count"] == 12
    assert all(0 < ops[k]["pct_of_peak"] < 100 for k in got)
    # an analyze load (its source lines read, no HLO costs) matches them too, as the whole load does, and its analysis
    # is the same as without the match: the categories decide these kernels by their names
    from kernscope.analyze.needs import analyze_projection
    from kernscope.load import xplane

    a = kernscope.load(TRANSFORMER, cache=False, projection=analyze_projection())
    in_buffer = (pl.col("hlo_op").cast(pl.String).str.starts_with("command_buffer")
                 & pl.col("hlo_desc").cast(pl.String).str.starts_with("hlo:custom-call"))
    assert a.gpu.filter(in_buffer).height == t.gpu.filter(in_buffer).height == 102
    assert a.gpu["hlo_instruction"].equals(t.gpu["hlo_instruction"]) and a.gpu["hlo_desc"].equals(t.gpu["hlo_desc"])
    real = xplane.LIBRARY_MATCH_COLUMNS
    try:  # (no column makes the load match: the library kernels without their instruction, as before the match)
        xplane.LIBRARY_MATCH_COLUMNS = ()
        unmatched = kernscope.load(TRANSFORMER, cache=False, projection=analyze_projection())
    finally:
        xplane.LIBRARY_MATCH_COLUMNS = real
    assert unmatched.gpu.filter(in_buffer).height == 0
    assert analyze(a).categories.equals(analyze(unmatched).categories)
    assert analyze(a).kernels.equals(analyze(unmatched).kernels)


def test_a_run_of_library_kernels_is_matched_only_without_doubt():
    from kernscope.load.hlo_align import resolve

    gemm, fwd, bwd = (1, "__cublas$lt$matmul"), (2, "__cudnn$fmhaSoftmax"), (3, "__cudnn$fmhaSoftmaxBackward")
    nvjet, cudnn_bprop = "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_TNT", "cudnn_generated_fort_native_sdpa_sm90_flash_bprop"
    assert resolve([nvjet], [gemm]) == [1]
    assert resolve([nvjet, "void cublasLt::splitKreduce_kernel<32, 16>"], [gemm]) == [1, 1]  # (a GEMM's two kernels)
    assert resolve([nvjet], [fwd, gemm]) == [1]  # (the attention call cannot have written a GEMM kernel)
    assert resolve(["void cudnn::fusion::compute_dot_do_o_specialized<true, 64>", cudnn_bprop], [bwd]) == [3, 3]
    assert resolve([nvjet, nvjet], [gemm, (4, "__cublas$lt$matmul")]) == [1, 4]  # (as many as calls: in turn)
    assert resolve([nvjet], [gemm, (4, "__cublas$lt$matmul")]) == [None]  # (which of two GEMMs: not known)
    assert resolve([nvjet], [(5, "cusolver_getrf_ffi")]) == [None] and resolve([nvjet], []) == [None]
    assert resolve(["loop_add_fusion_3"], [gemm]) == [None]  # (not a library kernel's name)


def test_transformer_engine_fused_attention_is_modeled_from_its_call_attributes():
    """Transformer Engine's JAX fused attention (``te_fused_attn_forward_ffi``/``_backward_ffi``, CK's kernels on the
    MI300X of TraceLens's profile) was outside the perf model: 55.6% of the GPU time. Its config gives batch 2, 16
    heads (16 KV groups), 2048 queries and keys, head dims 128, a causal mask (type 2): the SDPA conventions give
    2 x 2 x 16 x 2048^2 x 256 / 2 FLOPs forward, 2.5 times that backward."""
    from kernscope.analyze.perf import perf_model
    from kernscope.load.hlo_work import TE_ATTENTION, Instr, _te_attention_flops

    p = TRACELENS_JAX / "jax_te_fused_attn_934987a2fc2f.xplane.pb"
    if not p.exists():
        pytest.skip(f"{p} not present (../shared/traces)")
    pm = perf_model(kernscope.load(p, cache=False))
    assert pm.coverage["pct"] == pytest.approx(100.0)
    ops = {o["name"]: o for o in pm.ops.to_dicts()}
    fwd = 2 * 16 * 2 * 2048 * 2048 * (128 + 128) / 2
    for name in ("te_fused_attn_forward_ffi.10", "te_fused_attn_forward_ffi.15"):
        assert ops[name]["op_class"] == "SDPA_fwd" and ops[name]["flops"] == fwd and ops[name]["dtype"] == "bf16"
    for name in ("te_fused_attn_backward_ffi.12", "te_fused_attn_backward_ffi.18"):
        assert ops[name]["op_class"] == "SDPA_bwd" and ops[name]["flops"] == 2.5 * fwd
    assert 100 < ops["te_fused_attn_forward_ffi.10"]["tflops_per_s"] < 1307  # (MI300X: 1307 TFLOP/s dense bf16)
    # what the config does not bound is left unknown: a padding mask, a packed (THD) layout, a sliding window
    base = ("{attn_heads = 16 : i64, input_batch = 2 : i64, kv_max_seqlen = 2048 : i64, mask_type = %d : i64, "
            "num_gqa_groups = 16 : i64, q_max_seqlen = 2048 : i64, qk_head_dim = 128 : i64, qkv_layout = %d : i64, "
            "v_head_dim = 128 : i64, window_size_left = %d : i64, window_size_right = %d : i64}")

    def flops(mask: int, layout: int = 5, left: int = -1, right: int = -1) -> float | None:
        ins = Instr("c", "custom-call", None, [], [], (), base % (mask, layout, left, right), b"", TE_ATTENTION[0], None)
        return _te_attention_flops(ins, backward=False)[0]

    assert flops(2) == fwd and flops(0) == 2 * fwd and flops(4) == fwd
    assert flops(1) is None and flops(3) is None and flops(2, layout=10) is None and flops(0, left=128, right=0) is None


# -- bad input ---------------------------------------------------------------------------------
def test_truncated_xspace_is_one_line_with_the_offset(tmp_path):
    bad = tmp_path / "cut.xplane.pb"
    data = MLP.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError) as e:
        kernscope.load(bad, cache=False)
    assert "not a valid XSpace protobuf" in str(e.value) and "at byte" in str(e.value)
    r = run("analyze", str(bad), "-o", str(tmp_path / "out.json"), "--format", "json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(bad) in r.stderr and not (tmp_path / "out.json").exists()
    assert "--salvage" not in r.stderr
    # --salvage asked for: the same one line, saying salvage is for JSON traces (a plane's names follow its events)
    r = run("analyze", str(bad), "--salvage", "-o", str(tmp_path / "out.json"), "--format", "json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not a valid XSpace protobuf" in r.stderr
    assert "--salvage recovers the events of JSON traces only" in r.stderr and not (tmp_path / "out.json").exists()


def test_garbled_and_foreign_bytes(tmp_path):
    g = tmp_path / "garbled.xplane.pb"
    data = bytearray(MLP.read_bytes())
    rng = np.random.default_rng(1)
    for i in rng.integers(100, len(data), 2000):
        data[int(i)] = int(rng.integers(0, 256))
    g.write_bytes(bytes(data))
    r = run("analyze", str(g), "--no-cache")
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    assert not is_xspace(b"\x00\x01garbage") and is_xspace(MLP.read_bytes()[:64])


def test_xspace_without_gpu_plane_says_so(tmp_path):
    # keep only the host planes of a real profile
    data = MLP.read_bytes()
    buf = padded(data)
    space = walk(buf, 0, len(data))
    keep = b""
    planes = space.of(1, 2)
    for o, s in zip(planes.off.tolist(), planes.size.tolist()):
        plane = data[o:o + s]
        if b"/device:GPU" not in plane[:64]:
            keep += _field(1, plane)
    p = tmp_path / "host_only.xplane.pb"
    p.write_bytes(keep)
    with pytest.raises(TraceError) as e:
        kernscope.load(p, cache=False)
    assert "no GPU plane" in str(e.value) and "/host:CPU" in str(e.value)


def test_unknown_stats_are_counted():
    raw = decode(MLP.read_bytes(), str(MLP))
    assert raw.metadata["xplane"]["unknown_stats"] > 0
    assert raw.metadata["xplane"]["aggregated_events"] == 0


def test_parse_detects_the_format():
    assert parse(MLP).metadata["trace_format"] == "xplane"
    assert parse(TRANSFORMER).metadata["trace_format"] == "xplane"


def test_a_plain_profile_leaves_the_process_once_its_events_are_read(tmp_path, monkeypatch):
    """A plain (mapped) XSpace file's pages are dropped from the process once the events (and the lines' names beside
    them) are read, and the rest of the decode, which reads the metadata, gives what a decode of the bytes in memory
    gives."""
    from kernscope.load.source import TraceSource

    plain = tmp_path / "vm.xplane.pb"
    plain.write_bytes(xspace_bytes(TRANSFORMER))
    released: list[int] = []
    real = TraceSource.release

    def spy(self: TraceSource, upto: int) -> None:
        released.append(upto)
        real(self, upto)

    monkeypatch.setattr(TraceSource, "release", spy)
    got = parse(plain)
    assert released == [plain.stat().st_size]
    want = decode(plain.read_bytes(), str(plain))
    assert got.events.equals(want.events)
    assert got.meta_events.equals(want.meta_events)
    threads = got.meta_events.filter(pl.col("name") == "thread_name")["meta_name"].to_list()
    assert threads and all(threads)  # the lines' names, read before the pages went


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
def test_a_plain_profile_says_how_far_its_events_were_read(tmp_path, monkeypatch, native):
    """A plain profile's load reports its progress in file bytes as the scanner reads the events' lines (the
    compiled one every ``PROGRESS_BYTES`` on each thread, here 64 KB; the numpy one at its end), rising to the file's
    size; the scanner called a run of lines at a time reads what it reads in one call per part."""
    from kernscope.load import xscan
    from kernscope.load.formats import ParseOptions
    from kernscope.load.formats import parse as parse_any
    from kernscope.load.source import open_trace
    from kernscope.testing.xspace import replicate_xspace

    plain = tmp_path / "vm.xplane.pb"
    plain.write_bytes(replicate_xspace(xspace_bytes(TRANSFORMER), 30))  # 120 lines, ~5.7 MB
    size = plain.stat().st_size
    if not native:
        monkeypatch.setattr(xscan, "scanner", lambda: None)
    monkeypatch.setattr(xscan, "PROGRESS_BYTES", 64 << 10)
    seen: list[tuple[int, int]] = []
    src = open_trace(plain)
    try:
        got = parse_any(src, ParseOptions(progress=lambda done, total: seen.append((done, total))))
    finally:
        src.close()
    assert {t for _, t in seen} == {size}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == size and all(0 <= d <= size for d in done)
    assert len(done) >= (30 if native else 1)  # (lines of 168 KB and less: about one a call)
    monkeypatch.setattr(xscan, "PROGRESS_BYTES", 1 << 40)
    assert got.events.equals(parse(plain).events)
    # gzipped: its compressed bytes as it is inflated, up to the file's size
    packed = tmp_path / "vm.xplane.pb.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1))
    seen.clear()
    src = open_trace(packed)
    try:
        parse_any(src, ParseOptions(progress=lambda done, total: seen.append((done, total))))
    finally:
        src.close()
    done = [d for d, _ in seen]
    assert {t for _, t in seen} == {packed.stat().st_size} and done == sorted(done) and done[-1] == packed.stat().st_size
    assert len(done) > 2


# -- ranks, diff ----------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ["local", "dask"])
def test_host_files_are_ranks_in_file_order(tmp_path, engine):
    (tmp_path / "hostA.xplane.pb").write_bytes(MLP.read_bytes())
    (tmp_path / "hostB.xplane.pb").write_bytes(xspace_bytes(TRANSFORMER))
    r = run("analyze", str(tmp_path / "hostA.xplane.pb"), str(tmp_path / "hostB.xplane.pb"), "--format", "json",
            "--no-cache", "--engine", engine)
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)
    assert [(x["rank"], round(x["kernel_time_us"], 3)) for x in job["ranks"]] == [(0, 985.104), (1, 8651.705)]
    assert any("numbered in file-name order" in n for n in job["notes"])


def test_diff_of_jax_and_pytorch_says_names_differ():
    ex = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    r = run("diff", str(MLP), str(ex), "--format", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert any("JAX/XLA profile and B a PyTorch" in n for n in d["notes"])
    r = run("diff", str(MLP), str(TRANSFORMER), "--format", "json", "--no-cache")
    assert not any("PyTorch" in n for n in json.loads(r.stdout)["notes"])


def test_reports_of_a_jax_profile(tmp_path):
    for out in ("r.html", "r.xlsx", "csv/"):
        r = run("report", str(TRANSFORMER), "-o", str(tmp_path / out), "--no-cache")
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "r.html").stat().st_size > 10_000 and (tmp_path / "r.xlsx").stat().st_size > 10_000
    kernels = pl.read_csv(tmp_path / "csv" / "kernel_summary.csv")
    assert int(kernels["count"].sum()) == 864 and set(kernels["decided_by"]) <= {"name", "hlo"}


# -- perf model from the HLO ----------------------------------------------------------------------
def test_perf_model_from_hlo_shapes():
    from kernscope.analyze.perf.roofline import perf_model

    pm = perf_model(kernscope.load(TRANSFORMER, cache=False))
    ops = pm.ops
    g = ops.filter(pl.col("name") == "gemm_fusion_dot.44").row(0, named=True)
    params = json.loads(g["input_dims"])
    m, k = params["lhs"]
    n = params["out"][1]
    # the qkv projection of the recorded model: 8 x 512 tokens, d = 512 -> 3d = 1536
    assert params["out"][0] == m and g["flops"] == 2 * m * n * k == 2 * 4096 * 1536 * 512
    assert g["op_class"] == "GEMM" and g["dtype"] == "bf16" and g["count"] == 12 and g["bound"] == "compute"
    assert abs(g["tflops_per_s"] - g["flops"] * g["count"] / (g["kernel_time_us"] * 1e-6) / 1e12) < 1e-6
    # rates follow from the counts (a whole-buffer fusion may pass the DRAM roof a little: its operands can still sit
    # in the 50 MB L2)
    rated = ops.filter(pl.col("tb_per_s").is_not_null())
    expect = rated["bytes"] * rated["count"] / (rated["kernel_time_us"] * 1e-6) / 1e12
    assert ((rated["tb_per_s"] - expect).abs() < 1e-9).all() and (rated["pct_of_peak"] < 150.0).all()
    # a fusion that updates part of a buffer in place (the scan's stacked activations, 4 x 8 x 512 x 2048 bf16: 64 MiB)
    # moves what it touches: it reads two 8 x 512 x 2048 operands and the index and writes the 16 MiB update, not the
    # stack (its bytes were unknown, and so 30% of the real 207 MB profile's modeled time had no rating)
    assert ops.filter(pl.col("name") == "loop_dynamic_update_slice_fusion.8")["bytes"].to_list() == [3 * 2**24 + 4]
    # a gather fused over a subtract over the 8 x 512 x 8192 f32 logits (128 MiB): the kernel computes and reads the
    # 4,096 gathered elements of them, beside four 8 x 512 operands read and two written (16 KiB each); its FLOPs are
    # a negate, a divide, a log, an index add and the gathered subtract per element (the whole subtract was 33.5 M)
    ds = ops.filter(pl.col("name") == "loop_divide_select_fusion").row(0, named=True)
    assert (ds["bytes"], ds["flops"], ds["bound"]) == (6 * 4096 * 4, 5 * 4096, "memory")
    # the copies inside command buffers and the library kernels the schedule leaves in doubt name no instruction
    assert 50.0 < pm.coverage["pct"] < 100.0
    assert pm.uncovered["op_name"].str.starts_with("command_buffer").all()


#: an expert's category for every distinct kernel of the four JAX profiles (two recorded here on an H100, TraceLens's
#: two MI300 ones), judged from the kernel's name, library and the HLO it runs; first match wins
EXPERT = [
    (r"^(nvjet|Cijk_|gemm_fusion_dot)", "GEMM"),
    (r"sdpa.*bprop|FmhaBwd|compute_dot_do_o|convert_dq_to_16bits", "Attention Backward"),
    (r"sdpa.*fprop|FmhaFwd|populate_rng_state", "Attention Forward"),  # TE's RNG setup belongs to the fused attention
    (r"Im3d2Col", "Convolution"),
    (r"triton_softmax", "Softmax"),
    (r"^(memcpy|Memset|__amd_rocclr)|transpose_fusion|broadcast_fusion|^loop_slice_fusion|^wrapped_convert", "Memory"),
    (r"^loop_dynamic_update_slice_fusion_(15|21|22|23)$", "Memory"),  # slices copied into the scan's stacked buffers
    (r"^loop_dynamic_update_slice_fusion(_[145])?$", "Reduction"),  # a reduce written into a slice (weight gradients)
    (r"^loop_dynamic_update_slice_fusion_", "Elementwise"),  # scale/shift/rsqrt pieces written into a slice
    (r"^fusion_(214|224|225)$", "Normalization"),  # reduce + rsqrt: layer norm (forward and backward)
    (r"^fusion_84$|^loop_subtract_fusion_5$|reduce|^input_concatenate_fusion", "Reduction"),
    (r"scatter|^loop_add_fusion_5$|^loop_select_fusion$", "Embedding/Indexing"),  # embedding lookup, take_along_axis
    (r"^loop_divide_select_fusion$", "Loss"),  # log_softmax backward of the cross entropy
    (r"^fusion_46$|^loop_(add|subtract|multiply|negate|convert|convert_multiply)_fusion", "Elementwise"),
]


def test_expert_categories_on_every_jax_kernel():
    import re

    paths = [MLP, TRANSFORMER] + sorted(TRACELENS_JAX.glob("*.xplane.pb"))
    if len(paths) < 4:
        pytest.skip("TraceLens's JAX profiles not present (../shared/traces)")
    got: dict[str, str] = {}
    other_ns = total_ns = 0
    for p in paths:
        a = analyze(kernscope.load(p, cache=False))
        k = a.gpu.filter(pl.col("kind") == "kernel")
        got.update(dict(k.group_by("name").agg(pl.col("category").first()).iter_rows()))
        other_ns += int(k.filter(pl.col("category") == "Other")["dur"].sum() or 0)
        total_ns += int(k["dur"].sum())
    want = {n: next(c for rx, c in EXPERT if re.search(rx, n)) for n in got}
    wrong = {n: (got[n], want[n]) for n in got if got[n] != want[n]}
    assert len(got) > 100
    assert (len(got) - len(wrong)) / len(got) >= 0.97, wrong
    assert other_ns <= 0.01 * total_ns


def test_api_load_takes_a_run_directory(tmp_path):
    run_dir = tmp_path / "plugins" / "profile" / "run1"
    run_dir.mkdir(parents=True)
    shutil.copy(MLP, run_dir / "vm.xplane.pb")
    assert kernscope.load(tmp_path, cache=False).path.endswith("vm.xplane.pb")
    assert kernscope.load(run_dir, cache=False).gpu.height == 90
    shutil.copy(MLP, run_dir / "other.xplane.pb")
    with pytest.raises(kernscope.KernscopeError, match="2 hosts"):
        kernscope.load(run_dir, cache=False)


def test_hlo_columns_equal_through_the_sorting_fallback(monkeypatch):
    """The HLO columns reach each GPU row by the number of its (module, kernel, op), found in a flat table of
    ranked codes; where that table would be too large, by sorting: both give the same table."""
    import importlib

    xplane = importlib.import_module("kernscope.load.xplane")
    fast = parse(TRANSFORMER).events
    monkeypatch.setattr(xplane, "_FLAT_KEYS", 0.0)
    slow = parse(TRANSFORMER).events
    cols = ["name", "hlo_instruction", "hlo_desc", "hlo_flops", "hlo_bytes", "hlo_dtype", "hlo_op_class", "hlo_params", "op_path"]
    a, b = (t.select(pl.col(c).cast(pl.String) if t.schema[c] == pl.Categorical else pl.col(c) for c in cols) for t in (fast, slow))
    assert a.equals(b)
    gpu = fast.filter(pl.col("cat").cast(pl.String) == "kernel")
    assert gpu["hlo_instruction"].null_count() < gpu.height and gpu["hlo_flops"].drop_nulls().sum() > 0


def test_distinct_rows_numbers_combinations_both_ways(monkeypatch):
    import importlib

    xplane = importlib.import_module("kernscope.load.xplane")
    a = np.array([5, 5, 0, 9, 5, 0, 7])
    b = np.array([1, 2, 1, 1, 1, 1, 3])
    mask = np.array([True, True, True, True, True, True, False])
    # the values' own flat table, a flat table of ranks (values too spread for the first), a sort of the combined
    # keys, and (codes too wide to rank by a table, or negative) a sort of rows
    for flat, scale, shift in ((float(1 << 24), 1, 0), (100.0, 1000, 0), (0.0, 1, 0), (float(1 << 24), 1 << 30, 0),
                               (0.0, 1, -8)):
        monkeypatch.setattr(xplane, "_FLAT_KEYS", flat)
        number, first = xplane.distinct_rows([a * scale + shift, b.astype(np.int32)], mask)  # (any integer type)
        assert number[6] == -1 and number.max() + 1 == first.size == 4  # (5,1) (5,2) (0,1) (9,1)
        assert number[0] == number[4] and number[2] == number[5] and len({*number[[0, 1, 2, 3]].tolist()}) == 4
        assert all(a[first[n]] == a[r] and b[first[n]] == b[r] for r, n in enumerate(number.tolist()) if n >= 0)
        # numbered in the order of the combinations: (0,1) (5,1) (5,2) (9,1)
        assert number[:6].tolist() == [1, 2, 0, 3, 1, 0]


def test_distinct_rows_by_value_equal_the_ranked_form(monkeypatch):
    """The values' own flat table (every row keyed in place) numbers random codes (nulls as -1, a mask) as the
    ranked form does; a row of each number has that number's codes; a mask of no row numbers nothing."""
    import importlib

    xplane = importlib.import_module("kernscope.load.xplane")
    rng = np.random.default_rng(8)
    for trial in range(20):
        n = int(rng.integers(1, 3000))
        codes = [rng.integers(-1, int(rng.integers(1, 60)), n) for _ in range(3)]
        mask = rng.random(n) < (0.0 if trial == 0 else 0.7)
        got = xplane._distinct_rows_by_value(codes, mask)
        assert got is not None
        monkeypatch.setattr(xplane, "_distinct_rows_by_value", lambda codes, mask: None)
        monkeypatch.setattr(xplane, "native_distinct_rows", lambda *a: None)
        want = xplane.distinct_rows(codes, mask)
        monkeypatch.undo()
        assert np.array_equal(got[0], want[0]) and got[0].dtype == np.int32 and got[1].size == want[1].size
        for k, row in enumerate(got[1].tolist()):
            assert got[0][row] == k


def test_distinct_rows_compiled_equal_numpy(monkeypatch):
    """The compiled passes (:func:`kernscope.load.native.distinct_rows`) number random codes as numpy does: int32 and
    int64 columns read as they are, rows marked missing reading -1 (their cells hold anything), a mask or none, one to
    four columns; the same numbers and the same row of each (the last); codes too spread for a flat table are left
    to the numpy forms."""
    import importlib

    from kernscope.load import native

    if native.scanner() is None:
        pytest.skip("the compiled library is not built")
    xplane = importlib.import_module("kernscope.load.xplane")
    rng = np.random.default_rng(36)
    for trial in range(40):
        n = int(rng.integers(1, 4000))
        k = int(rng.integers(1, 5))
        codes = [rng.integers(-1, int(rng.integers(1, 40)), n).astype(np.int32 if rng.random() < 0.5 else np.int64)
                 for _ in range(k)]
        missing = [None if rng.random() < 0.4 else rng.random(n) < 0.3 for _ in range(k)]
        cells: list[np.ndarray] = [np.where(m, rng.integers(-5, 99, n), c).astype(c.dtype) if m is not None else c
                                   for c, m in zip(codes, missing)]  # (what a missing row's cell holds is not read)
        mask = None if trial % 5 == 0 else rng.random(n) < (0.0 if trial == 1 else 0.6)
        got = native.distinct_rows(cells, missing, mask, float(1 << 24))
        assert got is not None
        want_codes = [np.where(m, -1, c) if m is not None else c for c, m in zip(codes, missing)]
        want = xplane._distinct_rows_by_value(want_codes, np.ones(n, dtype=bool) if mask is None else mask)
        assert want is not None
        assert np.array_equal(got[0], want[0]) and got[0].dtype == np.int32
        assert np.array_equal(got[1], want[1]) and got[1].dtype == np.int64
        monkeypatch.setattr(xplane, "native_distinct_rows", lambda *a: None)
        assert all(np.array_equal(a, b) for a, b in zip(xplane.distinct_rows(cells, mask if mask is not None else
                                                                             np.ones(n, dtype=bool), missing), got))
        monkeypatch.undo()
    wide: list[np.ndarray] = [np.array([0, 1 << 20, 5], dtype=np.int64), np.array([0, 1 << 10, 3], dtype=np.int32)]
    assert native.distinct_rows(wide, [None, None], None, float(1 << 24)) is None  # (2**30 combinations)
    assert native.distinct_rows([np.array([1.5])], [None], None, float(1 << 24)) is None  # (not integers)


def test_metadata_stats_go_to_every_event_of_their_rows_and_only_theirs():
    """``xplane._owned`` (a metadata entry's stats, given to each of its events): against a plain walk, with rows
    that own no stat, events of no row (-1) and stats listed out of order."""
    import importlib

    xplane = importlib.import_module("kernscope.load.xplane")
    rng = np.random.default_rng(3)
    for _ in range(100):
        n_rows = int(rng.integers(1, 12))
        stat_row = rng.integers(-1, n_rows, int(rng.integers(0, 20)))
        stat = rng.permutation(stat_row.size)
        ev_row = rng.integers(-1, n_rows, int(rng.integers(0, 50)))
        events, stats = xplane._owned(stat_row, stat, ev_row, n_rows)
        want = [(e, int(k)) for e, r in enumerate(ev_row.tolist()) if r >= 0
                for k in sorted(stat[stat_row == r].tolist())]
        assert list(zip(events.tolist(), stats.tolist())) == want


# -- every form a stat may take, in a made-up profile (both readers) -----------------------------
def _stat(md: int, kind: str, value, field: int = 4) -> bytes:
    """An XStat as field ``field`` of its owner (XEvent.stats 4, XEventMetadata.stats 5)."""
    body = _varint(1 << 3) + _varint(md)
    if kind == "double":
        body += _varint(2 << 3 | 1) + np.float64(value).tobytes()
    elif kind in ("u64", "i64", "ref"):
        body += _varint({"u64": 3, "i64": 4, "ref": 7}[kind] << 3) + _varint(value)
    elif kind in ("str", "bytes"):
        body += _field(5 if kind == "str" else 6, value)
    return _field(field, body)


def _event(md: int, offset_ps: int, dur_ps: int, *stats: bytes) -> bytes:
    return _field(4, _varint(1 << 3) + _varint(md) + _varint(2 << 3) + _varint(offset_ps) + _varint(3 << 3) + _varint(dur_ps)
                  + b"".join(stats))


def _entry(key: int, value: bytes) -> bytes:
    return _varint(1 << 3) + _varint(key) + _field(2, value)


FAR = 2**48  # an id past any flat table (XLA's ids are small; the readers must still find it)


def _odd_profile() -> bytes:
    names = {1: "correlation_id", 2: "hlo_op", 3: "theoretical_occupancy_pct", 4: "step_num", 5: "kernel_details",
             6: "fusion.1", 7: "hlo_module", 8: "jit_step", FAR: "far_name"}
    smd = b"".join(_field(5, _entry(i, _varint(1 << 3) + _varint(i) + _field(2, n.encode()))) for i, n in names.items())
    md_stat = _stat(7, "ref", 8, field=5)  # the module of all events of this metadata
    emd = (_field(4, _entry(1, _varint(1 << 3) + _varint(1) + _field(2, b"kern_a") + md_stat))
           + _field(4, _entry(FAR, _varint(1 << 3) + _varint(FAR) + _field(2, b"kern_far"))))
    events = [
        _event(1, 1500, 2499, _stat(1, "u64", 7), _stat(2, "ref", 6), _stat(3, "double", 12.5),
               _stat(5, "str", b"regs:32 static_shared:0 dynamic_shared:64 grid:1,2,3 block:4,5,6"), _stat(4, "str", b" 42 ")),
        _event(1, 0, 0, _stat(1, "i64", 2**64 - 5), _stat(1, "str", b"9"), _stat(2, "u64", 17), _stat(3, "u64", 50),
               _stat(4, "double", 3.0), _stat(7, "str", b"own_module")),
        _event(FAR, 10_000, 1000, _stat(2, "ref", FAR), _stat(1, "double", float("nan")), _stat(4, "ref", 6),
               _stat(5, "bytes", b"\x00\x01"), _stat(3, "str", b"not a number")),
        _event(1, 20_000, 1000, _stat(1, "str", b"12"), _stat(1, "u64", 13), _stat(99, "u64", 1)),
    ]
    line = _varint(1 << 3) + _varint(5) + _field(2, b"stream 5") + _varint(3 << 3) + _varint(1000) + b"".join(events)
    plane = _varint(1 << 3) + _varint(1) + _field(2, b"/device:GPU:0") + _field(3, line) + emd + smd
    return _field(1, plane)


@pytest.mark.parametrize("native", ["0", "1", "tiny"], ids=["compiled", "numpy", "compiled-growing"])
def test_every_form_of_a_stat_reads_the_same(native, monkeypatch):
    """Refs (near and far ids), numbers as text, numbers where a string is wanted, inline strings, bytes, a NaN,
    a later stat of a field replacing an earlier one, metadata stats filling only where an event has none."""
    from kernscope.load import xscan

    if native == "tiny":  # an odd list of one stat at first: it grows
        monkeypatch.setattr(xscan, "MIN_ODD", 1)
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1" if native == "1" else "0")
    ev = decode(_odd_profile(), "odd.xplane.pb").events.sort("ts")
    got = {c: ev[c].cast(pl.String).to_list() if ev[c].dtype == pl.Categorical else ev[c].to_list()
           for c in ("name", "ts", "dur", "correlation", "hlo_op", "occupancy_pct", "step_num", "hlo_module",
                     "registers", "grid_y", "block_z", "dynamic_shared")}
    assert got == {
        "name": ["kern_a", "kern_a", "kern_far", "kern_a"],
        "ts": [1000, 1002, 1010, 1020],  # the line's ns + the offset's ps rounded; the end rounded the same way
        "dur": [0, 2, 1, 1],
        "correlation": [9, 7, None, 13],  # a later stat wins; a NaN for an int: null
        "hlo_op": ["17", "fusion.1", "far_name", None],
        "occupancy_pct": [50.0, 12.5, None, None],
        "step_num": [3, 42, None, None],  # text parsed; a ref to a name that is no number: null
        "hlo_module": ["own_module", "jit_step", None, "jit_step"],  # the metadata's where the event has none
        "registers": [None, 32, None, None], "grid_y": [None, 2, None, None], "block_z": [None, 6, None, None],
        "dynamic_shared": [None, 64, None, None],
    }
    assert decode(_odd_profile(), "odd.xplane.pb").metadata["xplane"]["unknown_stats"] == 1


def test_load_leaves_the_cycle_collector_as_it_was():
    import gc

    kernscope.load(MLP, cache=False)
    assert gc.isenabled()
    gc.disable()
    try:
        kernscope.load(MLP, cache=False)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_scanner_parts_follow_the_workers_option(monkeypatch):
    """The XSpace scanner splits the lines per usable core, at most the parse's ``workers`` (a rank worker of a
    multi-rank job passes its share of the cores), and never into parts smaller than PART_BYTES."""
    from kernscope.load import xscan

    monkeypatch.setattr(xscan, "usable_cores", lambda: 8)
    lines = np.full(64, xscan.PART_BYTES // 4, dtype=np.int64)  # 16 parts' worth of bytes
    assert len(xscan._parts(lines)) - 1 == 8
    assert len(xscan._parts(lines, workers=2)) - 1 == 2
    assert xscan._parts(lines, workers=1) == [0, 64]
    assert xscan._parts(lines[:3]) == [0, 3]  # under one part's bytes: one part


def test_packed_varints_of_many_fields_at_once():
    """hlo._packed_lists (operand and called-computation ids) equals the plain reader, fields of one message
    appended in order; a payload that ends inside a varint takes the plain reader's way (it drops it)."""
    from kernscope.load.hlo import _packed_lists

    vals = [[1, 300, 2**40, 0], [5], [2**64 - 1, 127, 128]]
    data = b"".join(_field(7, b"".join(_varint(v) for v in vs)) for vs in vals)
    buf = padded(data)
    f = fields_of(buf, np.array([0]), np.array([len(data)]))
    f = Fields(np.array([0, 1, 0]), f.field, f.wire, f.value, f.off, f.size)
    assert _packed_lists(buf, f) == {0: [1, 300, 2**40, 0, 2**64 - 1, 127, 128], 1: [5]}
    cut = _field(7, _varint(5) + b"\x80")  # the last varint never ends
    g = fields_of(padded(cut), np.array([0]), np.array([len(cut)]))
    assert _packed_lists(padded(cut), g) == {0: [5]}


_XSPACES = sorted([*(Path(__file__).parent / "data").rglob("*.xplane.pb*"), *TRACES.glob("tracelens/jax/*.xplane.pb")])


@pytest.mark.parametrize("roofline", [False, True], ids=["analyze", "roofline"])
@pytest.mark.parametrize("p", _XSPACES, ids=lambda p: f"{p.parent.name}/{p.name}"[:50])
def test_analyze_projection_of_a_jax_profile_prints_what_a_full_read_prints(p, roofline, tmp_path):
    """``kernscope analyze`` loads a JAX profile with its own columns it never reads null (HLO costs, launch
    dimensions, memory stats: most of a large profile's table); the JSON it prints is byte-identical to a full read's
    (``--read-all``), with and without ``--roofline`` (which reads the HLO costs)."""
    from kernscope.cli import main

    extra = ["--roofline"] if roofline else []
    outs: list[bytes] = []
    for flag in ([], ["--read-all"]):
        out = tmp_path / f"{len(outs)}.json"
        assert main(["analyze", str(p), "--no-cache", "-q", "--format", "json", "-o", str(out), *extra, *flag]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_projected_jax_load_reads_only_the_columns_the_analysis_reads():
    """The analyze projection leaves null exactly the profile's own columns it does not list (and the HLO costs
    are read with ``--roofline``'s projection); what it lists is read as in a full load, the library kernels of command
    buffers too (their custom calls matched by the schedule, ``hlo_align``, where the source lines or costs are read)."""
    from kernscope.analyze.needs import ANALYZE_XLA_STATS, ROOFLINE_XLA_STATS, analyze_projection
    from kernscope.load.xplane import XLA_COLUMNS

    p = Path(__file__).parent / "data" / "jax" / "transformer" / "vm.xplane.pb.gz"
    whole = kernscope.load(p, cache=False)
    full = whole.events
    for roofline in (False, True):
        proj = analyze_projection(roofline=roofline)
        assert proj is not None
        projected = kernscope.load(p, cache=False, projection=proj)
        # the stats of the fields left unread are not counted as unknown ones
        assert projected.metadata["xplane"] == whole.metadata["xplane"]
        ev = projected.events
        read = set(ANALYZE_XLA_STATS) | (set(ROOFLINE_XLA_STATS) if roofline else set())
        assert ev.columns == full.columns and ev.height == full.height
        matched = (full["hlo_op"].cast(pl.String).str.starts_with("command_buffer")
                   & full["hlo_desc"].cast(pl.String).str.starts_with("hlo:custom-call")).fill_null(False)
        assert matched.sum() == 102
        for c in ev.columns:
            if c in XLA_COLUMNS and c not in read:
                assert ev[c].null_count() == ev.height, c
            else:
                assert ev[c].equals(full[c]), c
        # the columns made null held values in the full load (the projection is not a no-op)
        assert any(full[c].null_count() < full.height for c in XLA_COLUMNS - read if c in full.columns)


# -- a plane's own stats (XPlane.stats): every stat read once, not a scan of all per stat ------------------------
def _plane_stats_one_by_one(buf: np.ndarray, plane, smd: pl.DataFrame) -> dict:
    """The reference: each stat read on its own (its last metadata id names it; its value is its last field of the
    first kind it has of str, i64, u64, double, ref)."""
    names = smd.filter(pl.col("plane") == plane.index)
    by_id = dict(zip(names["id"].to_list(), names["stat"].to_list()))
    out: dict = {}
    for o, s in zip(plane.stats.off.tolist(), plane.stats.size.tolist()):
        f = fields_of(buf, np.array([o]), np.array([o + s]))
        md = f.of(1, 0)
        name = by_id.get(int(md.value[-1]) if len(md) else 0)
        if name is None:
            continue
        for field, wire in ((5, 2), (4, 0), (3, 0), (2, 1), (7, 0)):
            x = f.of(field, wire)
            if not len(x):
                continue
            if field == 5:
                out[name] = buf[int(x.off[-1]): int(x.off[-1] + x.size[-1])].tobytes().decode()
            elif field == 2:
                out[name] = float(x.value[-1:].view(np.float64)[0])
            elif field == 7:
                out[name] = by_id.get(int(x.value[-1]))
            else:
                out[name] = int(x.value[-1:].view(np.int64)[0])
            break
    return out


def _plane_with_stats() -> bytes:
    names = {0: "zero", 1: "a", 2: "b", 3: "c", 4: "d", 5: "e", FAR: "far", 7: "count", 2**64 - 3: "negative",
             10: "dup", 11: "dup"}  # (two metadata of one name)
    smd = b"".join(_field(5, _entry(i, _varint(1 << 3) + _varint(i) + _field(2, n.encode()))) for i, n in names.items())
    stats = [
        _stat(1, "str", b"text", field=6),
        _stat(2, "i64", 5, field=6) + _stat(2, "i64", 2**64 - 7, field=6),  # two stats of one name: the later
        _field(6, _varint(1 << 3) + _varint(3) + _varint(3 << 3) + _varint(11) + _field(5, b"str wins")),  # by kind
        _field(6, _varint(1 << 3) + _varint(4) + _varint(2 << 3 | 1) + np.float64(2.5).tobytes()
               + _varint(2 << 3 | 1) + np.float64(4.5).tobytes()),  # two values of a kind: the last
        _stat(5, "ref", 1, field=6),  # a ref: the name of the stat metadata it points to
        _stat(10, "u64", 1, field=6),  # a name of two metadata ids: its place here, its value the last (below)
        _stat(6, "u64", 1, field=6),  # no metadata of that id: not read
        _stat(2**64 - 3, "u64", 1, field=6),  # a negative id (an int64 as a varint): not matched, as one by one
        _field(6, _varint(3 << 3) + _varint(99)),  # no metadata id: the metadata of id 0
        _stat(FAR, "bytes", b"\x00", field=6) + _stat(FAR, "u64", 8, field=6),
        *(_stat(7, "u64", i, field=6) for i in range(3000)),  # many stats of one name (a long profile's)
        _stat(1, "str", b"again", field=6),  # a name again, last: its value, at its first place
        _stat(11, "u64", 2, field=6) + _stat(10, "u64", 3, field=6),
        _stat(FAR, "bytes", b"\x01", field=6),  # a later stat of a name without a value of a kind read: no change
    ]
    plane = _varint(1 << 3) + _varint(3) + _field(2, b"/host:__ScopeRangeCallStack__") + smd + b"".join(stats)
    return _field(1, plane)


def test_plane_stats_read_every_stat_once():
    """A plane's stats by name, as a reading of each stat on its own gives them (a real 3,300-step profile carries
    42,960 of them in ``/host:__ScopeRangeCallStack__``: read one by one, 3.4 s of its 4 s decode); on a made-up plane
    of every form, and on every plane of the real profiles."""
    import importlib

    xplane = importlib.import_module("kernscope.load.xplane")

    def both(data: bytes, path: str) -> list[tuple[dict, dict]]:
        buf = padded(data)
        planes, _ = xplane._planes(buf, len(data), path)
        smd = xplane._stat_metadata(buf, planes)
        return [(xplane._plane_stats(buf, p, smd), _plane_stats_one_by_one(buf, p, smd)) for p in planes]

    [(got, want)] = both(_plane_with_stats(), "stats.xplane.pb")
    assert got == want == {"a": "again", "b": -7, "c": "str wins", "d": 4.5, "e": "a", "zero": 99, "far": 8,
                           "count": 2999, "dup": 3}
    assert list(got) == list(want)  # in the order of each name's first stat (the metadata's keys keep it)
    compared = 0
    for p in _xspace_files():
        for got, want in both(xspace_bytes(p), str(p)):
            assert got == want and list(got) == list(want)
            compared += len(want)
    assert compared >= 40  # the real profiles' planes have stats (process ids, device properties, ...)


# -- one long line scanned in runs of its fields, on several threads ---------------------------------------------
def _late_header_profile() -> bytes:
    """A GPU line of 300 events whose header comes after them: an empty name, two timestamps (the last counts), a
    display name, an id; and a second line of the usual layout."""
    names = {1: "correlation_id", 2: "hlo_op"}
    smd = b"".join(_field(5, _entry(i, _varint(1 << 3) + _varint(i) + _field(2, n.encode()))) for i, n in names.items())
    emd = b"".join(_field(4, _entry(i, _varint(1 << 3) + _varint(i) + _field(2, f"kern_{i}".encode()))) for i in (1, 2, 3))
    each = [_event(1 + i % 3, 1000 * i + 499 * (i % 2), 2500 + i, _stat(1, "u64", i), _stat(2, "str", b"op%d" % (i % 7)))
            for i in range(300)]
    events = b"".join(each)
    late = (events + _field(2, b"") + _varint(3 << 3) + _varint(5) + _varint(3 << 3) + _varint(2**40 + 7)
            + _field(11, b"late stream") + _varint(1 << 3) + _varint(9))
    usual = _varint(1 << 3) + _varint(4) + _field(2, b"stream 4") + _varint(3 << 3) + _varint(123) + b"".join(each[:100])
    plane = (_varint(1 << 3) + _varint(1) + _field(2, b"/device:GPU:0") + _field(3, late) + _field(3, usual) + emd + smd)
    return _field(1, plane)


def _source_bytes(source: str) -> bytes:
    """The made-up late-header profile, or the real profile whose name starts so (the test is skipped where the
    compiled scanner, which the tests compare with, was not built)."""
    from kernscope.load import native

    if native.scanner() is None:
        pytest.skip("the compiled scanner was not built")
    if source == "late header":
        return _late_header_profile()
    return xspace_bytes(next(p for p in _xspace_files() if p.name[:30] == source))


def _decoded_tables(data: bytes) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The event and metadata tables of a decode, categoricals as text (comparable across decodes)."""
    raw = decode(data, "x.xplane.pb")
    return (raw.events.with_columns(pl.col(pl.Categorical).cast(pl.String)),
            raw.meta_events.with_columns(pl.col(pl.Categorical).cast(pl.String)))


@pytest.mark.parametrize("source", ["late header", *(p.name[:30] for p in _xspace_files())])
def test_long_lines_cut_into_runs_read_the_same(source, monkeypatch):
    """A line longer than SEGMENT_BYTES is scanned in runs of its fields cut at field boundaries, as lines of their
    own on the scanner's threads (a real 975 MB profile's GPU stream is one 881 MB line), then put back together:
    the events and the lines' names are those of a scan of whole lines, whatever the header's place in the line."""
    from kernscope.load import xscan

    data = _source_bytes(source)
    whole = _decoded_tables(data)
    cuts = []
    real_cut = xscan._cut_long_lines

    def spy(*a):
        found = real_cut(*a)
        cuts.append(0 if found is None else int(found.cut.sum()))
        return found

    monkeypatch.setattr(xscan, "_cut_long_lines", spy)
    monkeypatch.setattr(xscan, "SEGMENT_BYTES", 64)
    runs = _decoded_tables(data)
    assert cuts and cuts[0] >= 1  # some line was cut
    for a, b in zip(runs, whole):
        assert a.equals(b)
    if source == "late header":
        ev = whole[0].sort("ts")
        assert ev.height == 400 and ev["ts"][0] == 123  # the usual line's first event
        late = ev.filter(pl.col("tid") != ev["tid"][0])
        assert late["ts"].min() == 2**40 + 7 and late["tid"].unique().to_list() == ["9"]
        assert "late stream" in whole[1]["meta_name"].to_list()


@pytest.mark.parametrize("source", ["late header", *(p.name[:30] for p in _xspace_files())])
def test_numpy_reader_in_small_batches_reads_the_same(source, monkeypatch):
    """The numpy reader (no compiled scanner) reads the events' fields a batch at a time (all at once, a real 207 MB
    profile peaked at 8.1 GB): batches of 7 events give the tables of the compiled scanner."""
    from kernscope.load import xscan

    data = _source_bytes(source)
    compiled = _decoded_tables(data)
    batches = []
    real_fields_of = xscan.fields_of

    def spy(buf, starts, ends, what="message"):
        if what == "XEvent":
            batches.append(len(starts))
        return real_fields_of(buf, starts, ends, what)

    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    monkeypatch.setattr(xscan, "NUMPY_BATCH_EVENTS", 7)
    monkeypatch.setattr(xscan, "fields_of", spy)
    numpy_read = _decoded_tables(data)
    assert len(batches) > 1 and max(batches) <= 7  # read in batches
    for a, b in zip(numpy_read, compiled):
        assert a.equals(b)


@pytest.mark.parametrize("path", _xspace_files(), ids=lambda p: p.name[:30])
def test_hlo_categories_by_compiled_numbering_equal_the_join(path, monkeypatch):
    """JAX kernels whose name gives a generic category take their HLO instruction's (``decided_by`` = ``hlo``): the
    rows' descriptions numbered in compiled passes, each number's category gathered, give the categorized GPU table
    of the join on the descriptions' codes, cell for cell, on every real profile."""
    from kernscope.analyze import launcher_categories as lc
    from kernscope.analyze.categories import Categorizer
    from kernscope.analyze.kernels import gpu_table

    t = kernscope.load(path, cache=False)
    cat = Categorizer.builtin()
    compiled = gpu_table(t, cat, text_names=False, text_keys=False)
    monkeypatch.setattr(lc, "numbered", lambda *a, **k: None)
    joined = gpu_table(t, cat, text_names=False, text_keys=False)
    assert compiled.equals(joined)
    if path in (MLP, TRANSFORMER):
        assert (compiled["decided_by"].cast(pl.String) == "hlo").sum() > 0  # some kernels decided by their HLO


def test_nested_jax_annotations_have_their_gpu_time_in_every_timeline():
    """``--by-annotation`` on a JAX profile, whose annotations nest six deep over the same kernels: each range's
    timeline is busy as long as its kernels' union (the outer ones read 0 µs busy, their copies of a kernel clipped
    against each other); the breakdown sums per innermost range and unions once per distinct set of rows (a 207 MB
    profile took 22 s and 12.6 GB, now ~2.7 s and 1.5 GB)."""
    from kernscope.analyze.summary import analyze

    a = analyze(kernscope.load(DATA / "transformer" / "vm.xplane.pb.gz", cache=False), by_annotation="")
    assert a.annotations is not None
    r = a.annotations.ranges
    tl = a.annotations.timeline.filter(pl.col("type") == "busy_time").select("path", pl.col("time_us").alias("tl"))
    j = r.join(tl, on="path", how="left").filter(pl.col("kernel_count") > 0)
    assert j.height >= 6 and j["depth"].max() >= 5
    assert ((j["tl"] - j["busy_us"]).abs() < 1e-6).all() and (j["tl"] > 0).all()
    train = j.filter(pl.col("path") == "train").row(0, named=True)
    assert j.filter(pl.col("path").str.starts_with("train / "))["busy_us"].max() <= train["busy_us"] + 1e-6


def _instr(i: int, opcode: str, dims: tuple[int, ...] | None, operands=(), called=(), dtype="float"):
    from kernscope.load.hlo_work import Instr, Shape

    ins = Instr(f"i{i}", opcode, None, list(operands), list(called))
    if dims is not None:
        ins.__dict__["shape"] = Shape(dtype, dims, 4.0 * (1 if not dims else __import__("math").prod(dims)))
    return ins


def test_elementwise_and_reduction_fusions_count_their_flops():
    """A fusion's FLOPs are its dots' and, without a dot, a FLOP per result element of each arithmetic instruction
    and per input element of each reduction (as the PyTorch model's elementwise ops); a reduction's scalar computation
    is not counted again, pure data movement stays 0. They were 0 for every non-GEMM fusion: the transformer's
    'XLA fusion' class read 0.00 TFLOP/s over 663 calls."""
    from kernscope.load.hlo_work import Shape, work

    # fusion 10 calls computation 1: p0, p1 [4, 8] -> add -> exponential -> reduce (to_apply: computation 2) -> [4]
    m = {0: _instr(0, "parameter", (4, 8)), 1: _instr(1, "parameter", (4, 8)), 2: _instr(2, "add", (4, 8), [0, 1]),
         3: _instr(3, "exponential", (4, 8), [2]), 4: _instr(4, "constant", ()),
         5: _instr(5, "reduce", (4,), [3, 4], called=[2]),
         6: _instr(6, "parameter", ()), 7: _instr(7, "parameter", ()), 8: _instr(8, "add", (), [6, 7]),  # the reducer
         20: _instr(20, "parameter", (4, 8)), 21: _instr(21, "parameter", (4, 8)),
         10: _instr(10, "fusion", (4,), [20, 21], called=[1]),
         30: _instr(30, "parameter", (8,)), 31: _instr(31, "broadcast", (4, 8), [30]),
         11: _instr(11, "fusion", (4, 8), [30], called=[3])}
    comps = {1: [0, 1, 2, 3, 4, 5], 2: [6, 7, 8], 3: [30, 31]}
    w = work(m, comps, 10)
    assert w["flops"] == 32 + 32 + 32 and w["op_class"] == "XLA fusion" and w["bytes"] == 4 * (32 + 32 + 4)
    assert work(m, comps, 11)["flops"] == 0.0  # a broadcast moves data only
    # a multi-output fusion's result is a tuple: its type is its first element's
    m[12] = _instr(12, "fusion", None, [20], called=[1])
    m[12].__dict__["shape"] = Shape("", (), 8.0, Shape("c10::bfloat16", (4,), 8.0))
    assert work(m, comps, 12)["dtype"] == "c10::bfloat16"


def test_partial_bytes_of_fused_slices_updates_and_scatters():
    """What a fusion that touches part of a buffer moves (``hlo_work.partial_bytes``), on a hand-built computation:
    a parameter read only through a slice reads the slice; one read whole and through a slice, the whole (once);
    an in-place dynamic update slice of a parameter writes the update and reads nothing of the buffer; an in-place
    scatter reads and writes the updated region; an unused parameter is not read."""
    from kernscope.load.hlo_work import partial_bytes

    def param(i, k, dims):
        ins = _instr(i, "parameter", dims)
        ins.parameter = k
        return ins

    # fusion 10 (operands 20, 21, 22, 23, 24): p0 [64, 8] sliced to [16, 8]; p1 [16, 8] added to the slice and to
    # a slice of itself; the sum updates p2 [128, 8] in place at index p3; p4 is never read
    m = {0: param(0, 0, (64, 8)), 1: param(1, 1, (16, 8)), 2: param(2, 2, (128, 8)), 3: param(3, 3, ()),
         9: param(9, 4, (1000,)),
         4: _instr(4, "slice", (16, 8), [0]), 5: _instr(5, "slice", (4, 8), [1]), 6: _instr(6, "add", (16, 8), [4, 1]),
         7: _instr(7, "pad", (16, 8), [5, 3]), 8: _instr(8, "add", (16, 8), [6, 7]),
         11: _instr(11, "dynamic-update-slice", (128, 8), [2, 8, 3, 3]),
         20: _instr(20, "parameter", (64, 8)), 21: _instr(21, "parameter", (16, 8)), 22: _instr(22, "parameter", (128, 8)),
         23: _instr(23, "parameter", ()), 24: _instr(24, "parameter", (1000,)),
         10: _instr(10, "fusion", (128, 8), [20, 21, 22, 23, 24], called=[1])}
    comps, roots = {1: [0, 1, 2, 3, 9, 4, 5, 6, 7, 8, 11]}, {1: 11}
    # reads: 16 x 8 of p0, p1 whole (once), the index; writes the 16 x 8 update
    assert partial_bytes(m, comps, roots, 10) == 4 * (16 * 8 + 16 * 8 + 1 + 16 * 8)
    # a scatter alone, into its first operand (the table [100, 8]) with indices [10] and updates [10, 8]
    m.update({30: _instr(30, "parameter", (100, 8)), 31: _instr(31, "parameter", (10,)), 32: _instr(32, "parameter", (10, 8)),
              33: _instr(33, "scatter", (100, 8), [30, 31, 32])})
    assert partial_bytes(m, comps, roots, 33) == 4 * (10 * 8 + 10 + 10 * 8 + 10 * 8)
    assert partial_bytes(m, comps, {}, 10) is None  # (no root known)


def test_the_transformers_fusions_have_flops_and_keep_their_bandwidth_rating():
    from kernscope.analyze.perf.roofline import perf_model

    pm = perf_model(kernscope.load(TRANSFORMER, cache=False))
    ops = pm.ops.filter(pl.col("op_class") == "XLA fusion")
    assert ops.filter(pl.col("flops") > 0).height >= 40 and ops.filter(pl.col("name") == "loop_add_fusion")["flops"][0] > 0
    assert (ops.filter(pl.col("name").str.starts_with("loop_broadcast_fusion"))["flops"] == 0).all()
    # low arithmetic intensity: rated on the bandwidth as before (the % of peak is the bandwidth's share)
    rated = ops.filter(pl.col("pct_of_peak").is_not_null())
    assert (rated["bound"] == "memory").all()
    assert ((rated["pct_of_peak"] - 100 * rated["tb_per_s"] / rated["peak_tb_per_s"]).abs() < 1e-6).all()
    fusion = pm.classes.filter(pl.col("op_class") == "XLA fusion").row(0, named=True)
    assert fusion["tflops_per_s"] > 0.5 and fusion["calls"] == 663


def test_perf_reads_a_jax_profile_without_the_columns_the_model_never_reads(capsys):
    """``kernscope perf`` reads of a JAX profile only the columns of the HLO cost model and the steps
    (:func:`~kernscope.analyze.needs.perf_projection`, as ``analyze --roofline``; the launch details and memory stats
    stay null): the real 207 MB profile's perf peaked at 1.18 GB, now 0.73 GB. The model is the same as from a whole
    load, and so is a Kineto trace's without its Python events."""
    from kernscope.analyze.needs import perf_projection
    from kernscope.analyze.perf.roofline import perf_model
    from kernscope.cli import main
    from kernscope.pipeline import load

    assert main(["perf", str(TRANSFORMER), "--format", "json", "--no-cache", "-q"]) == 0
    got = json.loads(capsys.readouterr().out)["ops"]
    whole = perf_model(kernscope.load(TRANSFORMER, cache=False)).ops
    keys = ("name", "count", "kernel_time_us", "flops", "bytes", "pct_of_peak")
    want = [tuple(pytest.approx(r[k], rel=1e-4, abs=1e-4) if isinstance(r[k], float) else r[k] for k in keys)
            for r in whole.iter_rows(named=True)]  # (the JSON's numbers are rounded)
    assert [tuple(o[k] for k in keys) for o in got] == want
    projected = load(TRANSFORMER, cache=False, projection=perf_projection())
    assert projected.gpu["grid_x"].null_count() == projected.gpu.height
    assert kernscope.load(TRANSFORMER, cache=False).gpu["grid_x"].null_count() < projected.gpu.height
    # a Kineto trace: without its Python events and unread args (the model reads the ops' shapes by a read of its own)
    gpt = Path(__file__).parent / "data" / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz"
    full, part = kernscope.load(gpt, cache=False), load(gpt, cache=False, projection=perf_projection())
    assert part.events.height < full.events.height
    assert perf_model(part).ops.equals(perf_model(full).ops) and perf_model(part).ops.height > 20


def test_memory_and_report_read_a_jax_profile_without_the_columns_they_never_read():
    """``kernscope memory`` reads of a JAX profile the allocator events' and the steps' columns, ``report`` those and
    what its analysis and perf model read (the kernel launch details stay null where no intra-kernel records are
    placed): the 207 MB profile's ``memory`` went from 0.92 to 0.61 GB, ``report`` from 1.16-1.33 to 1.02-1.15 GB. The
    tables are those of a whole load."""
    from kernscope.analyze.memory import memory_timeline
    from kernscope.analyze.needs import memory_projection, report_projection
    from kernscope.analyze.perf.roofline import perf_model
    from kernscope.pipeline import load

    whole = kernscope.load(TRANSFORMER, cache=False)
    m_whole = memory_timeline(whole)
    assert m_whole is not None and m_whole.events.height == 78 and m_whole.steps.height == 3
    for projection in (memory_projection(), report_projection()):
        t = load(TRANSFORMER, cache=False, projection=projection)
        assert t.gpu["grid_x"].null_count() == t.gpu.height
        m = memory_timeline(t)
        assert m is not None
        for name in ("events", "devices", "ops", "steps"):
            assert getattr(m, name).equals(getattr(m_whole, name)), name
    t = load(TRANSFORMER, cache=False, projection=report_projection())
    a, b = analyze(t), analyze(whole)
    assert a.kernels.equals(b.kernels) and a.findings.equals(b.findings) and a.steps.equals(b.steps)
    assert perf_model(t).ops.equals(perf_model(whole).ops)


def test_diff_reads_jax_profiles_without_the_columns_it_never_reads():
    """``kernscope diff`` (and a report's other side) reads what ``analyze`` reads (``diff_projection``): of a JAX
    profile its categorized GPU rows', CPU ops' and steps' columns (the 207 MB profile against the transformer's,
    1.20-1.22 GB -> 0.93 GB), of a Kineto trace no Python events and unread args (a 206 MB GPT replica with stacks
    against itself, 280-290 -> 210-222 MB). The tables are those of whole loads."""
    from kernscope.analyze.diff import Side, diff
    from kernscope.analyze.needs import diff_projection
    from kernscope.pipeline import load

    mlp = DATA / "mlp" / "vm.xplane.pb"
    whole = diff(Side(kernscope.load(TRANSFORMER, cache=False), None), Side(kernscope.load(mlp, cache=False), None))
    t = load(TRANSFORMER, cache=False, projection=diff_projection())
    assert t.gpu["grid_x"].null_count() == t.gpu.height
    got = diff(Side(t, None), Side(load(mlp, cache=False, projection=diff_projection()), None))
    for name, table in whole.tables().items():
        assert got.tables()[name].equals(table), name
    assert whole.kernels.height > 10
    # a Kineto trace: what ``analyze`` reads (its projection: Python events and unread args skipped)
    gpt = Path(__file__).parent / "data" / "kineto" / "h100_gpt_stack_shapes.pt.trace.json.gz"
    whole = diff(Side(kernscope.load(gpt, cache=False), 2), Side(kernscope.load(gpt, cache=False), 3))
    t = load(gpt, cache=False, projection=diff_projection())
    assert t.events.height < kernscope.load(gpt, cache=False).events.height
    got = diff(Side(t, 2), Side(t, 3))
    for name, table in whole.tables().items():
        assert got.tables()[name].equals(table), name


# -- the HLO costs added to a load that skipped them (``perf`` after ``analyze``) ------------------------------------
_PROFILES = sorted(p for p in (Path(__file__).parent / "data").rglob("*.xplane.pb*"))


def test_costs_read_from_the_hlo_equal_a_load_reading_them_on_every_profile():
    """``xplane.with_costs`` on ``analyze``'s load gives the event and GPU tables of ``perf``'s load, cell for cell, on
    every JAX profile here where it can tell the costs (it declines where a kernel ran in a program that shares its
    module's name with an earlier one: four of them; the data loader's profile stages each batch's two halves, two
    ``jit_stage`` programs)."""
    from kernscope.analyze.needs import analyze_projection
    from kernscope.load.projection import COST_STATS
    from kernscope.load.xplane import HLO_COST_COLUMNS, with_costs

    assert set(COST_STATS) == set(HLO_COST_COLUMNS)  # (the projections' names of the columns with_costs fills)
    declined = []
    for p in _PROFILES:
        narrow = kernscope.load(p, cache=False, projection=analyze_projection())
        wide = kernscope.load(p, cache=False, projection=analyze_projection(roofline=True))
        assert all(narrow.gpu[c].null_count() == narrow.gpu.height for c in HLO_COST_COLUMNS)
        data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        got = with_costs(narrow.events, narrow.gpu, data, str(p))
        if got is None:
            declined.append(p.parent.name if p.name.startswith("vm.") else p.name)
            continue
        events, g = got
        assert events.equals(wide.events) and g.equals(wide.gpu), p
        assert g["hlo_flops"].null_count() < g.height, p  # (costs were read: the comparison is not of nulls)
    assert sorted(declined) == ["jax_loader_h100", "jax_precision.xplane.pb.gz", "jax_recompile.xplane.pb.gz", "partial"]
    assert len(_PROFILES) - len(declined) >= 14


def test_the_work_model_makes_each_instruction_as_read_and_keeps_every_modules_ids_and_computations():
    """The HLO work model's modules make an instruction when it is first read (``Works.of`` reads the kernels'
    instructions and what they name): on every profile here each module holds every id of its instructions (of an id
    twice, the later instruction), each computation its ids in the instructions' order, as one pass over the
    instructions in order gives them; an instruction read is its row's (name, opcode), made once; a fused
    computation's instructions are marked fused."""
    from kernscope.load.xplane import profile_hlo

    checked = with_fusions = 0
    for p in _PROFILES:
        data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
        hlo, works = profile_hlo(data, str(p))
        if works._build is None:
            continue
        modules, comps, fused, ids, ins_module, ins_comp, _ = works._build()
        rows: dict[int, dict[int, int]] = {}
        by_comp: dict[int, dict[int, list[int]]] = {}
        for i, (m, c, x) in enumerate(zip(ins_module.tolist(), ins_comp.tolist(), ids.tolist())):
            rows.setdefault(m, {})[x] = i
            by_comp.setdefault(m, {}).setdefault(c, []).append(x)
        assert {m: dict(ins._rows) for m, ins in modules.items()} == rows, p
        assert comps == by_comp, p
        assert {m: len(ins._made) for m, ins in modules.items()} == {m: 0 for m in modules}  # (nothing made yet)
        named = dict(zip(hlo["row"].to_list(), hlo["instruction"].to_list()))
        opcodes = dict(zip(hlo["row"].to_list(), hlo["opcode"].to_list()))
        for m, x in list(((m, x) for m, r in rows.items() for x in r))[::97]:
            ins = modules[m][x]
            i = rows[m][x]
            assert x in modules[m] and modules[m][x] is ins  # (made once)
            if i in named:
                assert (ins.name, ins.opcode) == (named[i], opcodes[i]), (p, i)
        assert -12345 not in modules[next(iter(modules))]
        calls = {(m, c) for m, r in rows.items() for x in r if modules[m][x].opcode == "fusion" for c in modules[m][x].called}
        assert fused == calls, p
        with_fusions += bool(fused)
        checked += 1
    assert checked >= 14 and with_fusions >= 10


def test_cost_rows_find_each_kernels_instruction_and_decline_a_second_program_of_a_name():
    """``cost_rows``: a GPU row's instruction row by its module and name (of each instruction one row, whatever its
    kernels), null without an instruction; None where a row with an instruction ran in a program that is not the first
    of its module's name (a library kernel there took the first program's call: only a parse tells)."""
    from kernscope.load.xplane import cost_rows

    hlo = pl.DataFrame({"hlo_module": ["jit_f", "jit_f", "jit_f", "jit_g", "jit_f"],
                        "program": [7, 7, 7, 9, 8],
                        "instruction": ["dot.1", "sort.2", "sort.2", "dot.1", "dot.1"],
                        "row": [0, 1, 1, 2, 3]})
    cat = pl.Categorical()
    gpu = pl.DataFrame({"hlo_module": ["jit_f", "jit_g", "jit_f", None, "jit_f", "jit_x"],
                        "program_id": [7, 9, None, None, 7, 1],
                        "hlo_instruction": ["sort.2", "dot.1", "dot.1", None, None, "add.3"]},
                       schema={"hlo_module": cat, "program_id": pl.Int64, "hlo_instruction": cat})
    assert cost_rows(gpu, hlo).to_list() == [1, 2, 0, None, None, None]
    second = gpu.with_columns(pl.Series("program_id", [7, 9, 8, None, 7, 1]))  # (jit_f's program 8: not its first)
    assert cost_rows(second, hlo) is None
    unknown = gpu.with_columns(pl.Series("program_id", [7, 9, 42, None, 8, 1]))  # (42: no program: the first, 7)
    assert cost_rows(unknown, hlo).to_list() == [1, 2, 0, None, None, None]
