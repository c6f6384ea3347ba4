"""GPU tests (H100): run on the device machine with ``pytest -m gpu tests/test_gpu.py``."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
if not torch.cuda.is_available():  # pragma: no cover - CI has no GPU
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

import polars as pl  # noqa: E402
import triton.language as tl  # noqa: E402

# The seed's example, with only the import line changed:
from kernscope.intra import (  # noqa: E402
    Profiler,
    ProfilerBuffer,
    alloc_profiler_buffer,
    export_to_perfetto_trace,
    reset_profiler_buffer,
    set_export_trace_off,
    set_export_trace_on,
    tid,
)

pytestmark = pytest.mark.gpu


@triton.jit
def copy_1d_tilewise_kernel(profiler_buf, src_ptr, dst_ptr, grid_barrier, N, BLOCK_SIZE: tl.constexpr = 1024,
                            ENABLE_PROFILING: tl.constexpr = True, RING: tl.constexpr = False):
    pid = tl.program_id(0)
    num_pids = tl.num_programs(0)
    profiler = Profiler.create(profiler_buffer=profiler_buf, group_id=0, num_groups=1, is_leader=(tid(0) == 0),
                               ENABLE_PROFILING=ENABLE_PROFILING, RING=RING)
    num_tiles = tl.cdiv(N, BLOCK_SIZE)
    for tile in range(pid, num_tiles, num_pids):
        offs = tile * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        task = tl.where((tile + 1) * BLOCK_SIZE <= N, 0, 1)  # 0: perfect tile, 1: partial tile
        profiler = profiler.record(is_start=True, task_type=task)
        x = tl.load(src_ptr + offs, mask=offs < N)
        tl.store(dst_ptr + offs, x, mask=offs < N)
        profiler = profiler.record(is_start=False, task_type=task)


def _run(buf, n=1_000_003, grid=264, **kw):
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    barrier = torch.zeros(1, dtype=torch.int32, device="cuda")
    copy_1d_tilewise_kernel[(grid,)](buf, src, dst, barrier, n, **kw)
    torch.cuda.synchronize()
    assert torch.equal(src, dst)
    return n, grid


def test_seed_example_end_to_end(tmp_path):
    n_sms = torch.cuda.get_device_properties(0).multi_processor_count
    with ProfilerBuffer(max_num_profile_slots=1_000_000, trace_file=str(tmp_path / "copy"),
                        task_names=["perfect", "non-perfect"]) as profile_buf:
        n, grid = _run(profile_buf)
    from kernscope.intra.host import decode_profiler_buffer

    d = decode_profiler_buffer(profile_buf, ["perfect", "non-perfect"])
    tiles = -(-n // 1024)
    assert d.dropped == 0 and d.unpaired == 0
    assert d.tasks.height == tiles  # every tile's start and end paired
    assert (d.tasks["duration_ns"] > 0).all()
    assert d.tasks.filter(pl.col("task") == "non-perfect").height == 1
    assert d.tasks["sm"].min() >= 0 and d.tasks["sm"].max() < n_sms
    assert d.tasks["block"].n_unique() == grid
    assert (tmp_path / "copy.perfetto-trace").stat().st_size > 1000
    # the Perfetto file decodes back to the same slices
    from kernscope.intra.export import read_perfetto

    back = read_perfetto((tmp_path / "copy.perfetto-trace").read_bytes())
    assert back.height == tiles


def test_separate_interfaces_and_export_switch(tmp_path):
    buf = alloc_profiler_buffer(max_num_profile_slots=100_000)
    reset_profiler_buffer(buf)
    _run(buf)
    p = export_to_perfetto_trace(profiler_buffer=buf, task_names=["perfect", "non-perfect"], file_name=str(tmp_path / "sep"))
    assert p.endswith(".perfetto-trace")
    set_export_trace_off()
    try:
        with ProfilerBuffer(1000, str(tmp_path / "off"), ["a", "b"]) as b2:
            _run(b2, n=4096, grid=4)
        assert not (tmp_path / "off.perfetto-trace").exists()
    finally:
        set_export_trace_on()


def test_overflow_is_counted_and_bounded():
    from kernscope.intra.layout import buffer_words

    words = buffer_words(264 * 2)  # regions of 8 words: 2 records each, and each block runs ~4 tiles
    big = torch.full((words + 4096,), 7, dtype=torch.int64, device="cuda")
    buf = big[:words]
    reset_profiler_buffer(buf)
    _run(buf)
    from kernscope.intra.host import decode_profiler_buffer

    d = decode_profiler_buffer(buf, ["perfect", "non-perfect"])
    assert d.dropped > 0
    assert (big[words:] == 7).all()  # nothing written past the buffer
    with pytest.warns(UserWarning, match="dropped"):
        export_to_perfetto_trace(buf, ["perfect", "non-perfect"], "/tmp/kernscope_overflow")


def test_ring_mode_keeps_latest():
    buf = alloc_profiler_buffer(max_num_profile_slots=264 * 2)
    _run(buf, RING=True)
    from kernscope.intra.host import decode_profiler_buffer

    d = decode_profiler_buffer(buf, ["perfect", "non-perfect"])
    assert d.ring and d.ring_overwritten > 0 and d.dropped == 0
    assert (d.tasks["duration_ns"] > 0).all()
    # the partial tile is the very last one: ring mode keeps it
    assert d.tasks.filter(pl.col("task") == "non-perfect").height == 1


def test_disabled_profiling_compiles_away():
    src = torch.randn(4096, device="cuda")
    dst = torch.empty_like(src)
    buf = alloc_profiler_buffer(1000)
    k_off = copy_1d_tilewise_kernel[(4,)](buf, src, dst, buf, 4096, ENABLE_PROFILING=False)
    k_on = copy_1d_tilewise_kernel[(4,)](buf, src, dst, buf, 4096, ENABLE_PROFILING=True)
    ptx_off, ptx_on = k_off.asm["ptx"], k_on.asm["ptx"]
    assert "globaltimer" not in ptx_off and "globaltimer" in ptx_on
    assert "bar.sync" not in ptx_off.split(".entry")[1] or ptx_off.count("bar.sync") < ptx_on.count("bar.sync")


def test_bench_vector_add_trace_analysis(tmp_path):
    from kernscope.bench.operators import builtin_registry
    from kernscope.bench.runner import run

    r = run(builtin_registry().get("vector_add"), device="cuda", only=["torch_add", "triton_add"], num_inputs=1,
            metrics=["latency", "gbps", "speedup", "accuracy", "kineto_trace"], output_dir=str(tmp_path), warmup=5, rep=20)
    for c in r.cells:
        assert c.error is None and c.metrics["accuracy"] is True
        v = c.analysis.view
        assert v.step.startswith("ProfilerStep#")
        assert len(v.flush_kernels) == 1 and len(v.compute_kernels) == 1
        assert v.kernel_time_us > 0
    names = {c.impl: c.analysis.view.compute_kernels[0].name for c in r.cells}
    assert "_add_kernel" in names["triton_add"]


# -- part 2: named scopes, cycles, time shift, unmodified kernels ---------------------------------------------------
@triton.jit
def scoped_kernel(x, out, cols, buf, BLOCK: tl.constexpr, CYCLES: tl.constexpr = False, BROKEN: tl.constexpr = False,
                  WARPS: tl.constexpr = None):
    prof = Profiler.create(buf, 0, 1, is_leader=(tid(0) == 0), CYCLES=CYCLES, WARP_IDS=WARPS)
    prof = prof.enter("kernel")
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    prof = prof.enter("row_loop")
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * cols + offs, mask=offs < cols, other=0.0)
    prof = prof.exit("row_loop")
    prof = prof.enter("store")
    tl.store(out + row, tl.sum(acc))
    if not BROKEN:
        prof = prof.exit("store")
    prof = prof.exit("kernel")


def _scoped(slots=264 * 8 + 64, **kw):
    from kernscope.intra.host import decode_profiler_buffer

    x = torch.randn(264, 65536, device="cuda")
    out = torch.empty(264, device="cuda")
    buf = alloc_profiler_buffer(slots)
    scoped_kernel[(264,)](x, out, 65536, buf, BLOCK=1024, **kw)
    torch.cuda.synchronize()
    assert torch.allclose(out, x.sum(1), rtol=1e-3, atol=1e-1)
    return decode_profiler_buffer(buf, kernels=[scoped_kernel])


def test_named_scopes_nest_and_are_named():
    from kernscope.intra.stats import scope_tree

    d = _scoped()
    t = d.tasks
    assert set(t["task"].cast(pl.String)) == {"kernel", "row_loop", "store"} and d.unpaired == 0
    tree = {r["path"]: r for r in scope_tree(t).iter_rows(named=True)}
    assert set(tree) == {"kernel", "kernel/row_loop", "kernel/store"} and tree["kernel"]["count"] == 264
    assert tree["kernel/row_loop"]["mean_ns"] < tree["kernel"]["mean_ns"]  # nested inside


def test_unbalanced_scope_is_reported_not_paired():
    d = _scoped(BROKEN=True)
    assert ("store", 264, 0) in d.unbalanced
    assert "store" not in set(d.tasks["task"].cast(pl.String))


def test_cycle_mode_agrees_with_globaltimer():
    ns = _scoped().tasks.filter(pl.col("task") == "row_loop")["duration_ns"].median()
    cyc = _scoped(CYCLES=True)
    c = cyc.tasks.filter(pl.col("task") == "row_loop")["duration_ns"].median()
    assert cyc.clock_ghz and 0.5 < cyc.clock_ghz < 3.0
    assert abs(c - ns) / ns < 0.15, (c, ns)


def test_time_shift_calibration():
    from kernscope.intra.host import calibrate_record_cost

    cost = calibrate_record_cost()
    assert 0 < cost < 2000, cost  # one record pair costs well under 2 µs


def test_instrument_a_library_kernel_and_intra_run(tmp_path):
    import sys
    from pathlib import Path

    from kernscope.cli import main
    from kernscope.intra import instrument

    sys.path.insert(0, str(Path(__file__).parent / "data"))
    import libkernels

    ik = instrument(libkernels.sum_rows)
    m = torch.randn(128, 8192, device="cuda")
    r = torch.empty(128, device="cuda")
    ik[(128,)](m, r, 8192, 8192)
    assert torch.allclose(r, m.sum(1), rtol=1e-3, atol=1e-2)
    t = ik.tasks()
    assert set(t["task"].cast(pl.String)) == {"sum_rows", next(s for s in ik.scopes if s.startswith("loop@"))}
    assert t.height == 2 * 128
    prog = Path(__file__).parent / "data" / "run_libkernel.py"
    assert main(["intra", "run", "--kernel", "add_kernel", "--kernel", "sum_rows", "-o", str(tmp_path), "--format", "json",
                 "--", "python", str(prog)]) == 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert "add_kernel.perfetto-trace" in files and "sum_rows.hatchet" in files


def _scopes(capsys) -> dict[str, dict]:
    import json

    out = capsys.readouterr().out
    return {s["name"]: s for s in json.loads(out[out.index("{"):])["scopes"]}


def test_intra_override_protons_ttgir_workflow(tmp_path, capsys):
    """Proton's three override steps as one command, on a program that launches library kernels it imports."""
    from pathlib import Path

    from kernscope.cli import main

    data = Path(__file__).parent / "data"
    src = (data / "libkernels.py").read_text().splitlines()
    loop = "loop@L" + str(next(i + 1 for i, x in enumerate(src) if "for start in range(0, n_cols, BLOCK)" in x))
    assert main(["intra", "override", "-o", str(tmp_path / "a"), "--format", "json", "--", "python",
                 str(data / "run_libkernel.py")]) == 0
    s = _scopes(capsys)
    assert {"add_kernel", "sum_rows", loop} <= set(s)
    assert all(s[k]["count"] > 0 and s[k]["mean_ns"] > 0 for k in ("add_kernel", "sum_rows", loop))
    assert s[loop]["mean_ns"] <= s["sum_rows"]["mean_ns"]  # the loop lies inside the kernel's body scope
    assert (tmp_path / "a" / "proton.chrome_trace").is_file()
    edited = list((tmp_path / "a" / "ttgir_dump").rglob("*.ttgir"))
    assert len(edited) == 2 and all("proton.record start" in p.read_text() for p in edited)
    # one kernel, Proton's accuracy options passed through
    assert main(["intra", "override", "--kernel", "sum_rows", "--mode", "default:optimizations=clock32,time_shift",
                 "-o", str(tmp_path / "b"), "--format", "json", "--", "python", str(data / "run_libkernel.py")]) == 0
    s = _scopes(capsys)
    assert "add_kernel" not in s and {"sum_rows", loop} <= set(s)


def test_intra_override_script_with_its_own_session(tmp_path, capsys, monkeypatch):
    """The tutorial's own program (it starts Proton itself, --increase-accuracy): --no-session."""
    from pathlib import Path

    from kernscope.cli import main

    monkeypatch.chdir(tmp_path)
    prog = Path(__file__).parent / "data" / "proton_tutorial_add.py"
    assert main(["intra", "override", "--no-session", "--regions", "body", "-o", str(tmp_path / "w"), "--format", "json",
                 "--", "python", str(prog), "--increase-accuracy"]) == 0
    s = _scopes(capsys)
    assert s["add_kernel"]["count"] > 0 and (tmp_path / "add.chrome_trace").is_file()


def test_warp_sampling_records_every_chosen_warp(tmp_path, capsys):
    """Proton's selective warp sampling: lane 0 of each chosen warp records on its own (scoped_kernel: 4 warps)."""
    import json
    import sys
    from pathlib import Path

    from kernscope.cli import main
    from kernscope.intra.stats import scope_tree

    d = _scoped(slots=264 * 4 * 8 + 64, WARPS=(0, 1, 2, 3))
    t = d.tasks
    assert d.warps == [0, 1, 2, 3] and d.unpaired == 0 and d.dropped == 0
    per = t.group_by("block", "group").agg(pl.len().alias("n"), pl.col("sm").first())
    assert per.height == 264 * 4 and (per["n"] == 3).all()  # kernel, row_loop, store per warp
    assert t.group_by("block").agg(pl.col("sm").n_unique().alias("k"))["k"].max() == 1  # a block's warps share its SM
    tree = {r["path"]: r for r in scope_tree(t).iter_rows(named=True)}
    assert tree["kernel"]["count"] == 264 * 4 and tree["kernel/row_loop"]["mean_ns"] < tree["kernel"]["mean_ns"]
    # warps record when *they* get there: their row-loop ends differ within a block (no block barrier)
    ends = t.filter(pl.col("task") == "row_loop").group_by("block").agg((pl.col("end_ns").max() - pl.col("end_ns").min()).alias("spread"))
    print("warp spread of row_loop ends (ns): median", ends["spread"].median(), "max", ends["spread"].max())
    two = _scoped(slots=264 * 2 * 8 + 64, WARPS=(1, 3)).tasks
    assert sorted(set(two["group"].to_list())) == [1, 3] and two.height == 264 * 2 * 3
    # unmodified kernels: intra run --warps
    prog = Path(__file__).parent / "data" / "run_libkernel.py"
    sys.path.insert(0, str(prog.parent))
    assert main(["intra", "run", "--kernel", "sum_rows", "--warps", "0,1,2,3", "-o", str(tmp_path), "--format", "json",
                 "--", "python", str(prog)]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out[out.index("{"):])
    scopes = {s["name"]: s for s in doc["kernels"][0]["scopes"]}
    assert scopes["sum_rows"]["count"] == 256 * 4  # 256 programs x 4 warps


def test_named_scopes_in_a_gluon_kernel():
    """The Profiler API inside a Gluon kernel, run and decoded (Triton with Gluon only)."""
    import sys
    from pathlib import Path

    pytest.importorskip("triton.experimental.gluon")
    from kernscope.intra.host import decode_profiler_buffer

    sys.path.insert(0, str(Path(__file__).parent / "data"))
    import gluon_kernels

    n, grid = 512, 264
    x = torch.randn(grid * n, device="cuda")
    y = torch.empty_like(x)
    buf = alloc_profiler_buffer(grid * 4 + 64)
    gluon_kernels.scaled_copy[(grid,)](x, y, buf, N=n, num_warps=4)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2)
    d = decode_profiler_buffer(buf, kernels=[gluon_kernels.scaled_copy])
    t = d.tasks
    assert set(t["task"].cast(pl.String)) == {"load", "store"} and d.unpaired == 0 and d.dropped == 0
    assert t.height == grid * 2 and t["block"].n_unique() == grid and (t["duration_ns"] >= 0).all()


@triton.jit
def _one_load(x, out, buf, STRIDE: tl.constexpr, AFTER: tl.constexpr):
    pid = tl.program_id(0)
    prof = Profiler.create(buf, 0, 1, is_leader=(tid(0) == 0), CYCLES=True, SYNC=False)
    prof = prof.record(True, 0)
    v = tl.load(x + pid * STRIDE)
    if AFTER:
        prof = prof.record(False, 0, after=v)
    else:
        prof = prof.record(False, 0)
    tl.store(out + pid, v)


def test_scheduling_safe_end_record_times_a_single_load():
    """record(..., after=v) waits for the loaded value: a load from HBM reads several hundred cycles and more
    than an L2 hit; without it the end record times only the load's issue, the same for both."""
    from kernscope.intra.host import decode_profiler_buffer

    programs, stride = 1024, 1024
    x = torch.randn(programs * stride, device="cuda")
    out = torch.empty(programs, device="cuda")
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    buf = alloc_profiler_buffer(programs * 2 + 64)

    def scope(after: bool, warm: bool) -> float:
        flush.zero_()
        if warm:
            _one_load[(programs,)](x, out, buf, STRIDE=stride, AFTER=after)
        reset_profiler_buffer(buf)
        _one_load[(programs,)](x, out, buf, STRIDE=stride, AFTER=after)
        torch.cuda.synchronize()
        d = decode_profiler_buffer(buf)
        assert d.tasks.height == programs and torch.equal(out, x[::stride])
        return float(d.tasks["duration_ns"].median()) * (d.clock_ghz or 1.0)  # type: ignore[arg-type]  # cycles

    hbm, l2 = scope(True, False), scope(True, True)
    issue_hbm, issue_l2 = scope(False, False), scope(False, True)
    print(f"single load: after=v HBM {hbm:.0f} / L2 {l2:.0f} cycles; without: {issue_hbm:.0f} / {issue_l2:.0f}")
    assert hbm > 300 and hbm > 1.5 * l2 and l2 > 1.5 * issue_l2
    assert abs(issue_hbm - issue_l2) < 0.25 * issue_l2  # without `after`, the memory level does not show


def _staged(stage: int, n_iter: int, programs: int = 132, cycles: bool = False, slots: int | None = None,
            buffer_type: str | None = None):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "data"))
    import staged_kernels as sk

    from kernscope.intra.host import decode_profiler_buffer

    block = 256
    x = torch.randn(programs * n_iter * block, device="cuda")
    out = torch.empty(programs * block, device="cuda")
    buf = alloc_profiler_buffer(slots or programs * max(stage + 2, 2 * n_iter))
    sk.loop_kernel[(programs,)](buf, x, out, n_iter, STAGE=stage, CYCLES=cycles, BLOCK=block, BUFFER_TYPE=buffer_type)
    torch.cuda.synchronize()
    assert torch.allclose(out, x.view(programs, n_iter, block).sum(1).view(-1), rtol=1e-4, atol=1e-3)
    return decode_profiler_buffer(buf, ["iter"])


def test_staged_buffer_holds_records_on_chip_and_times_finalize():
    """STAGE=N: records in an on-chip ring written at finalize(); every record kept when they fit, the newest N
    (a sliding window) when they do not, and each CTA's finalize time recorded."""
    whole = _staged(128, 40)  # 80 records fit in 128 slots
    plain = _staged(0, 40)
    assert whole.stage_slots == 128 and whole.ring_overwritten == 0 and whole.unpaired == 0
    assert whole.tasks.height == plain.tasks.height == 132 * 40
    assert (whole.tasks["duration_ns"] >= 0).all()
    fin = whole.finalize
    assert fin is not None and fin.height == 132 and (fin["finalize_ns"] > 0).all() and fin["finalize_ns"].max() < 100_000
    # per program, the staged iterations are as long as the directly stored ones (same work, same clock)
    a, b = float(whole.tasks["duration_ns"].median()), float(plain.tasks["duration_ns"].median())
    assert 0.5 < a / b < 2.0, (a, b)
    print(f"staged: iteration median {a:.0f} ns vs {b:.0f} ns stored directly; finalize mean "
          f"{fin['finalize_ns'].mean():.0f} ns, max {fin['finalize_ns'].max()} ns per CTA")
    # more records than slots: the newest 16 records (8 iterations) per program, the rest counted
    with pytest.warns(UserWarning, match="overwritten"):
        export_to_perfetto_trace(_alloc_and_run_ring(), ["iter"], "/tmp/kernscope_staged")
    ring = _staged(16, 40)
    assert ring.ring_overwritten == 132 * (80 - 16) and ring.unpaired == 0
    assert ring.tasks.height == 132 * 8
    last = ring.tasks.group_by("block").agg(pl.col("start_ns").min())
    first_plain = plain.tasks.group_by("block").agg(pl.col("start_ns").min())
    assert last.join(first_plain, on="block").select((pl.col("start_ns") > pl.col("start_ns_right")).all()).item()
    # cycle mode: the ring is converted with a measured clock
    cyc = _staged(128, 40, cycles=True)
    assert cyc.tasks.height == 132 * 40 and cyc.clock_ghz is not None and 0.8 < cyc.clock_ghz < 2.2
    # a buffer too small for the ring is one clear error
    with pytest.raises(Exception, match="too small for STAGE=128"):
        _staged(128, 4, slots=132 * 8)
    # the ring in shared memory (Proton's buffer_type="shared_mem"): the same records, window and finalize
    sh = _staged(128, 40, buffer_type="shared_mem")
    assert sh.stage_memory == "shared_mem" and sh.tasks.height == 132 * 40 and sh.unpaired == 0
    assert sh.finalize is not None and sh.finalize.height == 132 and (sh.finalize["finalize_ns"] > 0).all()
    shr = _staged(16, 40, buffer_type="shared_mem")
    assert shr.ring_overwritten == 132 * 64 and shr.tasks.height == 132 * 8 and shr.unpaired == 0
    a_sh = float(sh.tasks["duration_ns"].median())
    assert 0.5 < a_sh / b < 2.0, (a_sh, b)
    print(f"shared-memory ring: iteration median {a_sh:.0f} ns; finalize mean {sh.finalize['finalize_ns'].mean():.0f} ns")


def _alloc_and_run_ring():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "data"))
    import staged_kernels as sk

    programs, n_iter, block = 132, 40, 256
    x = torch.randn(programs * n_iter * block, device="cuda")
    out = torch.empty(programs * block, device="cuda")
    buf = alloc_profiler_buffer(programs * 18)
    sk.loop_kernel[(programs,)](buf, x, out, n_iter, STAGE=16, CYCLES=False, BLOCK=block)
    torch.cuda.synchronize()
    return buf


def test_two_groups_with_shared_memory_rings():
    """Two profilers in one kernel, each with its own shared-memory ring (RING_ID): each group's records land in
    its own regions; the load scope sits inside the iteration scope of the same program."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "data"))
    import staged_kernels as sk

    from kernscope.intra.host import decode_profiler_buffer

    programs, n_iter, block = 132, 20, 128
    x = torch.randn(programs * n_iter * block, device="cuda")
    out = torch.empty(programs * block, device="cuda")
    buf = alloc_profiler_buffer(programs * 2 * 80)
    sk.two_groups_kernel[(programs,)](buf, x, out, n_iter, RING1=1, BLOCK=block)
    torch.cuda.synchronize()
    assert torch.allclose(out, (x.view(programs, n_iter, block) ** 2).sum(1).view(-1), rtol=1e-4, atol=1e-3)
    d = decode_profiler_buffer(buf, ["load", "iteration"])
    assert d.stage_memory == "shared_mem" and d.unpaired == 0 and d.ring_overwritten == 0
    t = d.tasks
    assert t.filter(pl.col("group") == 0)["task"].cast(pl.String).unique().to_list() == ["load"]
    assert t.filter(pl.col("group") == 1)["task"].cast(pl.String).unique().to_list() == ["iteration"]
    assert t.height == programs * n_iter * 2
    assert d.finalize is not None and d.finalize.height == programs * 2
    per = t.group_by("group").agg(pl.col("duration_ns").median()).sort("group")["duration_ns"].to_list()
    assert per[0] <= per[1], per  # a load inside its iteration


def test_intra_run_records_align_under_their_kineto_kernels(tmp_path, capsys):
    """#28.4: a training loop profiled by Kineto while its Triton kernel is profiled inside (intra run, in a
    subprocess as a user runs it); every placed record lies inside its kernel's slice, residual <= 1 µs, and the
    SM clock is recorded next to the records."""
    import gzip
    import json
    import subprocess
    import sys
    from pathlib import Path

    from kernscope.cli import main

    script = Path(__file__).parent / "data" / "train_with_triton.py"
    host = tmp_path / "train.pt.trace.json"
    subprocess.run([sys.executable, "-m", "kernscope", "intra", "run", "--kernel", "bias_gelu", "-o", str(tmp_path),
                    "--", sys.executable, str(script), str(host)], check=True, capture_output=True)
    rec = tmp_path / "bias_gelu.perfetto-trace"
    side = json.loads((tmp_path / "bias_gelu.perfetto-trace.clock.json").read_text())
    assert 0.5 < side["sm_clock_ghz"] < 3.0 and "recorded with the run" in side["source"]
    out = tmp_path / "merged.json.gz"
    assert main(["intra", "align", str(host), str(rec), "-o", str(out), "--format", "json"]) == 0
    (a,) = json.loads(capsys.readouterr().out)["alignments"]
    matched = [r for r in a["launches"] if r["gpu_idx"] is not None]
    assert len(matched) == 4 and all(r["outside"] == 0 for r in matched)
    assert max(abs(r["fit_residual_ns"]) for r in matched) <= 1_000
    print("align on GPU: residuals", [r["fit_residual_ns"] for r in matched], "start gaps",
          [r["start_gap_ns"] for r in matched], "end gaps", [r["end_gap_ns"] for r in matched], "drift", a["drift_ppm"])
    merged = json.loads(gzip.decompress(out.read_bytes()))
    assert sum(1 for e in merged["traceEvents"] if e.get("cat") == "intra_kernel") == sum(r["records"] for r in matched)


@pytest.mark.gpu
def test_the_seeds_bench_command_as_written(tmp_path, capsys):
    """#27.1: the first seed's command with TritonBench's impl names: cudnn and triton_tutorial_flash_v2 run under
    the names typed (accuracy checked, a trace each, analyzed); flash_v3 runs where its package is installed, else
    one line names the package and the nearest impl."""
    from kernscope.bench.runner import module_available
    from kernscope.cli import main

    out = tmp_path / "traces"
    assert main(["bench", "--op", "flash_attention", "--num-inputs", "2", "--metrics", "latency,accuracy,kineto_trace",
                 "--only", "flash_v3,cudnn,triton_tutorial_flash_v2", "--output-dir", str(out),
                 "--json", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    doc = json.loads((tmp_path / "r.json").read_text())
    has_fa3 = module_available("flash_attn_interface") or module_available("fa3.hopper.flash_attn_interface")
    want = ["flash_v3", "cudnn", "triton_tutorial_flash_v2"] if has_fa3 else ["cudnn", "triton_tutorial_flash_v2"]
    assert doc["impls"] == want
    if not has_fa3:
        assert "skipped flash_v3: needs the flash_attn_interface" in err and "nearest available: sdpa_cudnn" in err
    for c in doc["results"]:
        assert c["metrics"]["accuracy"] is True, c["impl"]
        assert c["analysis"]["compute_kernels"], c["impl"]  # its trace, analyzed
    assert {p.name for p in (out / "flash_attention").iterdir()} == set(want)  # trace folders by the names typed


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["swiglu", "geglu", "embedding", "rope", "sum", "addmm", "welford", "fp8_gemm", "bf16xint4_gemm",
                                "grouped_gemm", "decoding_attention"])
def test_new_operators_accuracy_and_a_traced_cell(op, tmp_path):
    """#27.3: each new operator's Triton implementation matches its torch baseline on the first two inputs, and its
    Kineto trace is analyzed with the Triton kernel as the profiled step's compute kernel."""
    from kernscope.bench.operators import builtin_registry
    from kernscope.bench.runner import run

    r = run(builtin_registry().get(op), device="cuda", num_inputs=2,
            metrics=["latency", "gbps", "speedup", "accuracy", "kineto_trace"], output_dir=str(tmp_path), warmup=5, rep=20)
    names = {c.impl for c in r.cells}
    assert len(names) >= 2 and {n.split("_", 1)[0] for n in names} == {"torch", "triton"}, names
    for c in r.cells:
        assert c.error is None and c.metrics["accuracy"] is True, (c.impl, c.error)
        assert c.metrics["gbps"] > 0 and c.analysis.view.compute_kernels
    triton_kernels = {k.name for c in r.cells if c.impl.startswith("triton_") for k in c.analysis.view.compute_kernels}
    assert all(n.startswith("_") and n.endswith("_kernel") for n in triton_kernels), triton_kernels


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["swiglu", "geglu", "embedding", "rope"])
def test_triton_backward_passes_match_autograd(op):
    """#27.3: the Triton backward of each operator TritonBench runs fwd and bwd gives the torch baseline's gradients."""
    from kernscope.bench.operators import builtin_registry
    from kernscope.bench.runner import run

    r = run(builtin_registry().get(op), device="cuda", mode="bwd", num_inputs=2, metrics=["latency", "accuracy", "speedup"],
            warmup=5, rep=20)
    assert {c.impl.split("_", 1)[0] for c in r.cells} == {"torch", "triton"}
    for c in r.cells:
        assert c.error is None and c.metrics["accuracy"] is True, (c.impl, c.error, c.metrics.get("max_abs_err"))


@pytest.mark.gpu
def test_warp_specialized_gluon_gemm_records_per_warp_group(tmp_path, capsys):
    """#28.5: a Hopper warp-specialized Gluon GEMM (TMA producer warp, WGMMA consumer warpgroup, mbarrier ring) with
    kernscope's scopes in each partition: the product is right with and without them, every CTA's two groups recorded
    every K step, and intra stats shows the producer's loads overlapping the consumer's MMAs per CTA."""
    import sys
    from pathlib import Path

    pytest.importorskip("triton.experimental.gluon")
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("needs a Hopper GPU (sm_90)")
    from kernscope.cli import main
    from kernscope.intra.host import decode_profiler_buffer
    from kernscope.intra.stats import group_overlap

    sys.path.insert(0, str(Path(__file__).parent / "data"))
    import gluon_ws_gemm as W

    m, n, k = 1024, 1024, 2048
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    assert torch.allclose(W.ws_gemm(a, b).float(), ref, rtol=1e-2, atol=0.5)
    ctas, steps = (m // 128) * (n // 128), k // 64
    buf = alloc_profiler_buffer(ctas * 2 * (4 * steps + 8) + 64)
    assert torch.allclose(W.ws_gemm(a, b, buf).float(), ref, rtol=1e-2, atol=0.5)
    torch.cuda.synchronize()
    d = decode_profiler_buffer(buf, kernels=[W._consumer, W._producer])
    t = d.tasks
    assert d.dropped == 0 and d.unpaired == 0
    per = t.group_by("group", "task").len().with_columns(pl.col("task").cast(pl.String)).sort("group", "task").rows()
    assert per == [(0, "mma", ctas * steps), (0, "wait_data", ctas * steps), (1, "tma", ctas * steps),
                   (1, "wait_slot", ctas * steps)]
    totals, per_cta = group_overlap(t)
    assert per_cta["block"].n_unique() == ctas and totals.height == 4
    # the producer runs ahead: it waits for a free stage while the consumer's MMAs run (a compute-bound pipeline),
    # and the consumer seldom waits for data
    ms = totals.filter((pl.col("task_a") == "mma") & (pl.col("task_b") == "wait_slot")).row(0, named=True)
    assert ms["blocks"] == ctas and ms["pct_of_a"] > 50, ms
    busy = dict(t.group_by("task").agg(pl.col("duration_ns").sum()).with_columns(pl.col("task").cast(pl.String)).rows())
    assert busy["wait_data"] < busy["mma"], busy
    from kernscope.intra.host import export_to_perfetto_trace

    path = export_to_perfetto_trace(buf, (), str(tmp_path / "ws"), kernels=[W._consumer, W._producer])
    assert main(["intra", "stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert "warp groups: time two groups' tasks run at once" in out
    print(totals)
