"""Intra-kernel part 2 on the CPU: named scopes, LIFO pairing, op-measure trees, hatchet files, Proton's traces,
instrumenting unmodified kernels (source rewriting; compiled for sm_90 when triton is installed)."""

from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kernscope.cli import main
from kernscope.errors import KernscopeError
from kernscope.intra.decode import decode_buffer
from kernscope.intra.hatchet import hatchet_to_tree, tree_to_hatchet
from kernscope.intra.rewrite import instrumented_source
from kernscope.intra.scopes import SCOPE_BASE, merge_names, names_in_source, scope_id, scope_table
from kernscope.intra.simulate import Region, empty_buffer, fill_buffer
from kernscope.intra.stats import scope_tree, shift_durations

DATA = Path(__file__).parent / "data"
B, L, C = scope_id("body"), scope_id("load"), scope_id("compute")


def _scoped_buffer(n=6, extra=()):
    regs = [Region([(t0 + x, s, k) for x, s, k in [(0, True, B), (10, True, L), (30, False, L), (40, True, C), (70, False, C),
                                                  (100, False, B), *extra]], t0=t0, sm=i % 3)
            for i, t0 in enumerate(range(1000, 1000 + 50 * n, 50))]
    return fill_buffer(empty_buffer(200), regs)


def test_scope_ids_are_stable_and_collisions_reported():
    assert SCOPE_BASE <= scope_id("load") < 2 * SCOPE_BASE and scope_id("load") == scope_id("load") != scope_id("store")
    src = 'prof = prof.enter("a b")\nprof = prof.exit(name="a b")\nprof = p.enter(\'x\')'
    assert names_in_source(src) == ["a b", "x"]
    ids: dict[int, str] = {}
    clash = None
    for i in range(2000):  # 15-bit ids: a birthday collision among 2,000 names is certain
        n = f"scope{i}"
        if scope_id(n) in ids:
            clash = (ids[scope_id(n)], n)
            break
        ids[scope_id(n)] = n
    assert clash is not None
    with pytest.raises(KernscopeError, match="same id"):
        scope_table(names=clash)
    assert merge_names(["t0", "t1"], names=["x"]) if False else merge_names(["t0", "t1"], scopes=["x"]) == {
        0: "t0", 1: "t1", scope_id("x"): "x"}
    assert merge_names(["t0"]) == ["t0"]


def test_device_hash_equals_host_hash():
    pytest.importorskip("triton")
    from kernscope.intra import device

    for n in ("kernel", "load", "wgmma_wait", "ü-scope", ""):
        assert device._scope_id.fn(n) == scope_id(n)


def _brute(recs):
    stacks: dict[int, list[int]] = {}
    pairs, lone = [], 0
    for t, s, k in recs:
        if s:
            stacks.setdefault(k, []).append(t)
        elif stacks.get(k):
            pairs.append((k, stacks[k].pop(), t))
        else:
            lone += 1
    return pairs, lone + sum(len(v) for v in stacks.values())


def test_lifo_pairing_matches_a_stack_on_random_records():
    rng = random.Random(7)
    for _ in range(200):
        regs, want, lone = [], [], 0
        for r in range(rng.randint(1, 4)):
            t, recs = 0, []
            for _ in range(rng.randint(0, 14)):
                t += rng.randint(1, 5)
                recs.append((t, rng.random() < 0.55, rng.choice([0, 1, B])))
            regs.append(Region(recs, t0=0, sm=r))
            p, lo = _brute(recs)
            want += [(r, *x) for x in p]
            lone += lo
        d = decode_buffer(fill_buffer(empty_buffer(200), regs))
        got = sorted(zip(d.tasks["block"], d.tasks["task_type"], d.tasks["start_ns"], d.tasks["end_ns"]))
        assert got == sorted(want) and d.unpaired == lone


def test_unbalanced_scopes_named_and_nested_same_name():
    d = decode_buffer(_scoped_buffer(extra=[(120, False, L)]), scope_table(names=["body", "load", "compute"]))
    assert d.unbalanced == [("load", 0, 6)] and d.unpaired == 6
    same = fill_buffer(empty_buffer(50), [Region([(0, True, B), (5, True, B), (9, False, B), (20, False, B)], t0=0)])
    t = decode_buffer(same, {B: "body"}).tasks.sort("start_ns")
    assert t.select("start_ns", "end_ns").rows() == [(0, 20), (5, 9)]  # the inner pair closes first


def test_scope_tree_and_hatchet_roundtrip(tmp_path, capsys):
    d = decode_buffer(_scoped_buffer(), scope_table(names=["body", "load", "compute"]))
    tree = scope_tree(d.tasks, clock_ghz=1.5)
    rows = {r["path"]: r for r in tree.iter_rows(named=True)}
    assert set(rows) == {"body", "body/load", "body/compute"}
    assert rows["body/load"]["count"] == 6 and rows["body/load"]["mean_ns"] == 20 and rows["body/load"]["units"] == 6
    assert rows["body"]["normalized_cycles"] == pytest.approx(150.0) and rows["body"]["total_cycles"] == pytest.approx(900.0)
    lit = tree_to_hatchet(tree, kernel="k")
    back = hatchet_to_tree(json.loads(json.dumps(lit)))
    b = {r["path"]: r for r in back.iter_rows(named=True)}
    # Proton's shape: ROOT -> kernel -> scopes, per-scope totals, no metrics on the two top frames
    assert lit[0]["frame"]["name"] == "ROOT" and lit[0]["metrics"] == {} and lit[0]["children"][0]["metrics"] == {}
    assert b["ROOT/k/body/load"]["count"] == 6 and b["ROOT/k/body"]["normalized_cycles"] == pytest.approx(150.0)
    assert b["ROOT/k/body"]["time (ns)"] == 600.0 and b["ROOT/k/body/load"]["mean_time (ns)"] == 20.0
    assert not any(c.endswith("(inc)") for c in back.columns)
    # a hatchet file in the exclusive convention (metrics on the root) gets subtree sums, as hatchet makes them
    exc = [{"frame": {"name": "main"}, "metrics": {"time (ns)": 1.0, "count": 0, "min_time (ns)": 0.0},
            "children": [{"frame": {"name": "f"}, "metrics": {"time (ns)": 2.0, "count": 3}, "children": [
                {"frame": {"name": "g"}, "metrics": {"time (ns)": 4.0, "count": 1}, "children": []}]},
                {"frame": {"name": "f"}, "metrics": {"time (ns)": 8.0, "count": 1}, "children": []}]}, {}]
    e = hatchet_to_tree(exc).select("path", "time (ns) (inc)", "count (inc)").rows()
    assert e == [("main", 15.0, 5.0), ("main/f", 6.0, 4.0), ("main/f/g", 4.0, 1.0), ("main/f", 8.0, 1.0)]
    np.savez(tmp_path / "s.npz", buffer=_scoped_buffer(), task_names=np.array(["body", "load", "compute"]),
             task_ids=np.array([B, L, C]))
    h = tmp_path / "s.hatchet"
    assert main(["intra", "stats", str(tmp_path / "s.npz"), "--hatchet", str(h), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["path"] for s in doc["scopes"]} == {"body", "body/load", "body/compute"}
    assert main(["intra", "view", str(h), "-m", "normalized_cycles"]) == 0
    out = capsys.readouterr().out
    assert "body" in out and "load" in out
    assert main(["intra", "view", str(h), "-m", "nope"]) == 2
    assert "unknown metric" in capsys.readouterr().err


def test_proton_viewer_reads_our_hatchet_with_our_totals(tmp_path):
    """Triton's own viewer (proton-viewer, with llnl-hatchet) shows kernscope's inclusive numbers."""
    pytest.importorskip("hatchet")
    viewer = pytest.importorskip("triton.profiler.viewer")
    buf = _scoped_buffer()
    tree = scope_tree(decode_buffer(buf, scope_table(names=["body", "load", "compute"])).tasks, clock_ghz=1.5)
    h = tmp_path / "k.hatchet"
    h.write_text(json.dumps(tree_to_hatchet(tree, kernel="k")))
    for metric, want in (("time/ns", {"body": 600, "load": 120, "compute": 180}),
                         ("cycles", {"body": 900, "load": 180, "compute": 270}),
                         ("normalized_cycles", {"body": 150, "load": 30, "compute": 45}),
                         ("count", {"body": 6, "load": 6, "compute": 6})):
        gf, shown = viewer.parse([metric], str(h))
        by_name = dict(zip(gf.dataframe["name"], gf.dataframe[shown[0]], strict=True))
        assert {k: v for k, v in by_name.items() if k in want} == pytest.approx(want), metric
        assert np.isnan(by_name["ROOT"]) and np.isnan(by_name["k"])  # as for Proton's own files


def _proton_trace(path: Path, gz: bool = False) -> Path:
    """A trace in the shape Proton's instrumentation backend writes (pid "<kernel> Core<N> CTA<m>", tid "warp k",
    ts/dur in µs at 1 GHz, the CTA's finalize time in args)."""
    ev = []
    for cta in range(4):
        base = 1000.0 + cta * 0.5
        for warp in (0, 1):
            pid, tid = f"rows_kernel Core{cta % 2} CTA{cta}", f"warp {warp}"
            ev.append({"ph": "X", "name": "kernel", "cat": "scope", "pid": pid, "tid": tid, "ts": base, "dur": 8.0,
                       "args": {"Finalization Time (ns)": 1200 + cta}})
            ev.append({"ph": "X", "name": "row_loop", "cat": "scope", "pid": pid, "tid": tid, "ts": base + 0.5, "dur": 6.0})
            ev.append({"ph": "X", "name": "store", "cat": "scope", "pid": pid, "tid": tid, "ts": base + 6.8, "dur": 0.4})
    text = json.dumps({"traceEvents": ev, "displayTimeUnit": "ns"})
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_proton_chrome_trace_reads_into_tasks(tmp_path, capsys):
    for gz in (False, True):
        p = _proton_trace(tmp_path / ("t.chrome_trace" + (".gz" if gz else "")), gz)
        assert main(["intra", "stats", str(p), "--format", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        scopes = {s["path"]: s for s in doc["scopes"]}
        # Proton's µs at its 1 GHz convention are cycles: the tree has cycles, and no time without a clock
        assert scopes["kernel/row_loop"]["count"] == 8 and scopes["kernel/row_loop"]["mean_cycles"] == 6000
        assert scopes["kernel/row_loop"]["mean_ns"] is None and doc["summary"]["time_unit"] == "cycles"
        assert scopes["kernel"]["units"] == 8  # 4 CTAs x 2 warps
        assert doc["summary"]["source"] == "proton" and doc["summary"]["finalize_ctas"] == 4
        tasks = {t["task"]: t for t in doc["tasks"]}
        assert set(tasks) == {"kernel", "row_loop", "store"}
    out = tmp_path / "p.perfetto-trace"
    assert main(["intra", "export", str(p), "-o", str(out)]) == 0 and out.stat().st_size > 100
    assert main(["intra", "stats", str(p), "--html", str(tmp_path / "p.html")]) == 0
    assert main(["intra", "view", str(p), "-m", "cycles"]) == 0
    bad = tmp_path / "bad.chrome_trace"
    bad.write_text('{"traceEvents": [{"ph": "X", "pid": "k Core1 CTA2", "tid": "warp 0", "ts": "x"}]}')
    capsys.readouterr()
    assert main(["intra", "stats", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.chrome_trace" in err[0]


def test_time_shift_subtracts_and_clamps():
    t = decode_buffer(_scoped_buffer(), {B: "body", L: "load", C: "compute"}).tasks
    s = shift_durations(t, 25)
    assert s.filter(pl.col("task") == "load")["duration_ns"].to_list() == [0] * 6
    assert s.filter(pl.col("task") == "body")["duration_ns"].to_list() == [75] * 6
    assert (s["end_ns"] - s["start_ns"] == s["duration_ns"]).all()


def test_cycle_mode_reports_the_measured_clock():
    buf = fill_buffer(empty_buffer(50), [Region([(1_000_000, True, 0), (1_050_000, False, 0)], t0=1_000_000, c0=9,
                                                 cycles_per_ns=1.755)], cycles=True)
    assert decode_buffer(buf).clock_ghz == pytest.approx(1.755, rel=1e-3)


def test_cycle_mode_short_regions_take_the_clock_per_sm(tmp_path, capsys):
    """Regions shorter than 20 µs: the clock comes from each SM's span over the kernel (clock64 is one counter
    per SM, so the earliest create and the latest record of an SM pair up), not a silent 1 GHz."""
    regions = [Region([(10_000 * i, True, 0), (10_000 * i + 2_000 + 10 * i, False, 0)], t0=10_000 * i,
                      c0=7 + int(10_000 * i * 1.6), cycles_per_ns=1.6) for i in range(8)]  # one SM's counter
    buf = fill_buffer(empty_buffer(64), regions, cycles=True)
    d = decode_buffer(buf, ["work"])
    assert d.clock_ghz == pytest.approx(1.6, rel=1e-3) and d.clock_source.startswith("per SM over the kernel (1 SMs")
    assert d.tasks.sort("start_ns")["duration_ns"].to_list() == [2_000 + 10 * i for i in range(8)]
    np.savez(tmp_path / "c.npz", buffer=buf, task_names=np.array(["work"]))
    assert main(["intra", "stats", str(tmp_path / "c.npz"), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["clock_ghz"] == pytest.approx(1.6, rel=1e-3) and "per SM" in doc["summary"]["clock_source"]
    tree = {r["path"]: r for r in doc["scopes"]}
    assert tree["work"]["total_cycles"] == pytest.approx(1.6 * sum(2_000 + 10 * i for i in range(8)), rel=1e-3)


def test_cycle_mode_kernel_too_short_to_measure_its_clock():
    """Every SM busy < 20 µs (as a kernel of single loads is): the host's clock if given, else pooled spans."""
    regions = [Region([(1_000 + 50 * i, True, 0), (1_000 + 50 * i + 40, False, 0)], t0=1_000 + 50 * i, c0=11 * i,
                      sm=i, cycles_per_ns=1.755) for i in range(16)]
    buf = fill_buffer(empty_buffer(64), regions, cycles=True)
    hinted = decode_buffer(buf, ["load"], clock_hint_ghz=1.755)
    assert hinted.clock_ghz == pytest.approx(1.755) and hinted.clock_source.startswith("the device's SM clock from the host")
    assert hinted.tasks["duration_ns"].to_list() == [40] * 16
    pooled = decode_buffer(buf, ["load"])
    assert pooled.clock_ghz == pytest.approx(1.755, rel=0.01) and pooled.clock_source.startswith("pooled over 16 short regions")


KERNELS = (DATA / "libkernels.py").read_text()


def test_instrumented_source_for_several_kernels():
    add = KERNELS[KERNELS.index("def add_kernel"):KERNELS.index("@triton.jit", KERNELS.index("def add_kernel"))]
    rw = instrumented_source(add, first_line=7)
    assert rw.scopes == ("add_kernel",) and "_ks_prof_buf" in rw.source.splitlines()[0]
    rows = KERNELS[KERNELS.index("def sum_rows"):]
    rw2 = instrumented_source(rows, first_line=20)
    assert rw2.scopes[0] == "sum_rows" and rw2.scopes[1].startswith("loop@L")
    assert "def sum_rows(x_ptr, out_ptr, n_cols, stride, _ks_prof_buf, BLOCK: tl.constexpr=128)" in rw2.source
    rw3 = instrumented_source(add, regions=(), lines=[(11, 13, "loads")], first_line=7)
    assert rw3.scopes == ("loads",) and rw3.source.count(".enter(") == 1
    with pytest.raises(KernscopeError, match="no top-level loop"):
        instrumented_source(add, regions=("loops",), first_line=7)
    with pytest.raises(KernscopeError, match="returns early"):
        instrumented_source("def k(x):\n    if x:\n        return\n    y = 1\n")
    with pytest.raises(KernscopeError, match="within lines"):
        instrumented_source(add, regions=(), lines=[(900, 901, "nowhere")], first_line=7)


def test_instrumented_kernels_compile_for_sm90():
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernscope.intra import instrument

    sys.path.insert(0, str(DATA))
    import libkernels

    for k, sig, cx in [
        (libkernels.add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32", "n_elements": "i32",
                                 "BLOCK_SIZE": "constexpr", "_ks_prof_buf": "*i64"}, {"BLOCK_SIZE": 1024}),
        (libkernels.sum_rows, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride": "i32",
                               "_ks_prof_buf": "*i64", "BLOCK": "constexpr"}, {"BLOCK": 128}),
    ]:
        ik = instrument(k)
        c = triton.compile(ASTSource(fn=ik.jit, signature=sig, constexprs=cx), target=GPUTarget("cuda", 90, 32))
        assert c.asm["ptx"].count("globaltimer") == 1 + 2 * len(ik.scopes)
    with pytest.raises(KernscopeError, match="not a @triton.jit"):
        instrument(lambda x: x)


def test_intra_run_hooks_kernels_without_breaking_device_calls(tmp_path, monkeypatch):
    pytest.importorskip("triton")
    from kernscope.intra.run import run_script

    script = tmp_path / "prog.py"
    script.write_text(
        "import triton, triton.language as tl\n"
        "@triton.jit\n"
        "def helper(x):\n    return x * 2\n"
        "@triton.jit\n"
        "def main_kernel(p, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.arange(0, BLOCK)\n    tl.store(p + offs, helper(tl.load(p + offs)))\n"
        "KERNELS = (helper, main_kernel)\n"
        "import os\n"
        "if os.environ.get('KS_TEST_COMPILE'):\n"
        "    from triton.backends.compiler import GPUTarget\n"
        "    from triton.compiler import ASTSource\n"
        "    import triton.runtime.jit as rj\n"
        "    assert type(main_kernel) is rj.JITFunction and rj.JITFunction.run._kernscope_hook\n"
        "    src = ASTSource(fn=main_kernel, signature={'p': '*fp32', 'n': 'i32', 'BLOCK': 'constexpr'},\n"
        "                    constexprs={'BLOCK': 64})\n"
        "    ttir = triton.compile(src, target=GPUTarget('cuda', 90, 32)).asm['ttir']\n"
        "    open(os.environ['KS_TEST_COMPILE'], 'w').write(str(ttir))\n")
    res = run_script(["python", str(script)])
    assert res.defined == ["helper", "main_kernel"] and res.kernels == {}  # nothing launched on the CPU
    with pytest.raises(KernscopeError, match="no @triton.jit kernel named nope"):
        run_script([str(script)], kernels=["nope"])
    # under the hook, a hooked kernel calling a hooked helper still compiles (to PTX for sm_90)
    out = tmp_path / "main_kernel.ttir"
    monkeypatch.setenv("KS_TEST_COMPILE", str(out))
    res = run_script([str(script)])
    assert res.defined == ["helper", "main_kernel"]
    ttir = out.read_text()
    assert "tt.func public @main_kernel" in ttir and "tt.store" in ttir


def test_intra_run_dispatch_on_the_cpu(tmp_path, monkeypatch):
    """The launch hook's decisions, without a GPU: Triton's own launch path is replaced by a recorder."""
    pytest.importorskip("triton")
    import triton.runtime.jit as rj

    from kernscope.intra import rewrite
    from kernscope.intra.run import run_script

    calls: list[tuple[str, str]] = []

    def fake_orig_run(self, *args, grid, warmup, **kwargs):
        calls.append(("triton", self.fn.__name__ + ("[instrumented]" if getattr(self, "_ks_instrumented", False) else "")))

    def fake_profiled(self, grid, args, kwargs):
        calls.append(("profiled", self.rewrite.name))
        self.jit.run(*args, grid=grid, warmup=False, **kwargs)  # the instrumented copy goes straight to Triton
        self.launches += 1

    monkeypatch.setattr(rj.JITFunction, "run", fake_orig_run)
    monkeypatch.setattr(rewrite.InstrumentedKernel, "_profiled", fake_profiled)
    lib = tmp_path / "prelib.py"
    lib.write_text("import triton\n@triton.jit\ndef pre_kernel(p, n):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import prelib  # imported before the run: its kernel is hooked all the same

    script = tmp_path / "prog2.py"
    script.write_text(
        "import triton, prelib\n"
        "@triton.jit\ndef a_kernel(p, n):\n    pass\n"
        "@triton.jit\ndef other(p, n):\n    pass\n"
        "for _ in range(3):\n"
        "    a_kernel.run(1, 2, grid=(1,), warmup=False)\n"
        "    prelib.pre_kernel.run(1, 2, grid=(1,), warmup=False)\n"
        "    other.run(1, 2, grid=(1,), warmup=False)\n"
        "a_kernel.run(1, 2, grid=(1,), warmup=True)\n")
    res = run_script(["python", str(script)], kernels=["a_kernel", "pre_kernel"], max_launches=2)
    assert rj.JITFunction.run is fake_orig_run  # unhooked afterwards
    assert set(res.kernels) == {"a_kernel", "pre_kernel"} and res.defined == ["a_kernel", "other"]
    assert calls.count(("profiled", "a_kernel")) == 2 and calls.count(("profiled", "pre_kernel")) == 2
    assert calls.count(("triton", "a_kernel[instrumented]")) == 2  # no re-entry into the hook
    assert calls.count(("triton", "a_kernel")) == 2  # the third launch (over max_launches) and the warm-up
    assert calls.count(("triton", "other")) == 3 and prelib.pre_kernel is not None


PROTON_H100 = DATA / "proton_h100"  # recorded on an H100 by examples/record_proton_files.py --small


def test_real_proton_trace_reads_with_values_from_the_raw_json():
    from kernscope.intra.io import load_tasks

    path = PROTON_H100 / "proton_trace.chrome_trace"
    raw = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]
    loaded = load_tasks(str(path))
    t = loaded.tasks
    assert loaded.source == "proton" and t.height == len(raw) == 192
    for name in ("kernel", "row_loop", "store"):
        mine = t.filter(pl.col("task") == name)
        want = [e for e in raw if e["name"] == name]
        assert mine.height == len(want) == 64  # 16 CTAs x 4 warps
        # ts/dur are µs at Proton's 1 GHz: durations are cycles
        assert mine["duration_ns"].sum() == pytest.approx(sum(e["dur"] for e in want) * 1000, abs=len(want))
    assert t["block"].n_unique() == 16 and t.group_by("block", "group").len()["len"].unique().to_list() == [3]
    assert loaded.finalize is not None and loaded.finalize["finalize_ns"].to_list() == [128] * 16
    paths = {r["path"] for r in scope_tree(t).iter_rows(named=True)}
    assert paths == {"kernel", "kernel/row_loop", "kernel/store"}  # nesting from the two Perfetto lines of a warp


def test_real_proton_hatchet_and_ours_in_the_same_viewer(tmp_path, capsys):
    from kernscope.intra.hatchet import read_hatchet

    raw = json.loads((PROTON_H100 / "proton_ops.hatchet").read_text())
    kernel = raw[0]["children"][0]["children"][0]
    want = {kernel["frame"]["name"]: kernel["metrics"]["cycles"],
            **{c["frame"]["name"]: c["metrics"]["cycles"] for c in kernel["children"]}}
    tree = read_hatchet(str(PROTON_H100 / "proton_ops.hatchet"))
    got = {r["name"]: r["cycles"] for r in tree.iter_rows(named=True) if r["cycles"] is not None}
    assert got == want and set(want) == {"kernel", "row_loop", "store"}
    assert main(["intra", "view", str(PROTON_H100 / "proton_ops.hatchet"), "-m", "cycles"]) == 0
    out = capsys.readouterr().out
    assert f"{int(want['row_loop']):,}" in out and "rows_proton" in out
    # kernscope's buffer of the same kernel, same scopes: same tree shape in our hatchet
    h = tmp_path / "ks.hatchet"
    assert main(["intra", "stats", str(PROTON_H100 / "kernscope.npz"), "--hatchet", str(h), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["path"] for s in doc["scopes"]} == {"kernel", "kernel/row_loop", "kernel/store"}
    assert all(s["count"] == 16 for s in doc["scopes"]) and doc["summary"]["clock_source"]
    ours = read_hatchet(str(h))
    assert {r["name"] for r in ours.iter_rows(named=True) if r["depth"] >= 2} == {"kernel", "row_loop", "store"}


def test_scopes_compile_inside_a_gluon_kernel():
    """The same Profiler API inside a Gluon kernel (Triton's lower-level DSL), where the installed Triton has Gluon."""
    pytest.importorskip("triton")
    gluon_rt = pytest.importorskip("triton.experimental.gluon._runtime")
    import triton
    from triton.backends.compiler import GPUTarget

    sys.path.insert(0, str(DATA))
    import gluon_kernels

    src = gluon_rt.GluonASTSource(fn=gluon_kernels.scaled_copy, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "buf": "*i64",
                                                                         "N": "constexpr"}, constexprs={"N": 512})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert ptx.count("globaltimer") == 1 + 4  # create, then two scopes' enter and exit
    from kernscope.intra.scopes import scope_id, scope_table

    assert scope_table(kernels=[gluon_kernels.scaled_copy]) == {scope_id("load"): "load", scope_id("store"): "store"}


def test_scheduling_safe_record_waits_for_its_value_in_the_machine_code():
    """record(..., after=v): the timer read is predicated on a comparison of v, so ptxas cannot hoist it above
    the load that produces v (checked in the SASS of a kernel compiled for sm_90)."""
    triton = pytest.importorskip("triton")
    import os
    import subprocess

    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import bench_single_load as b

    sig = {"x": "*fp32", "out": "*fp32", "buf": "*i64", "STRIDE": "constexpr", "SYNC": "constexpr", "AFTER": "constexpr"}
    c = triton.compile(ASTSource(fn=b.one_load, signature=sig, constexprs={"STRIDE": 1024, "SYNC": False, "AFTER": True}),
                       target=GPUTarget("cuda", 90, 32))
    assert "setp.eq.f32" in c.asm["ptx"]
    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    if not os.path.exists(nvdisasm):
        pytest.skip("no nvdisasm in this triton")
    cubin = Path(os.environ.get("TMPDIR", "/tmp")) / f"ks_sched_{os.getpid()}.cubin"
    cubin.write_bytes(c.asm["cubin"])
    try:
        sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    finally:
        cubin.unlink()
    lines = [ln for ln in sass.splitlines() if "LDG.E " in ln or "FSETP" in ln or "SR_CLOCKLO" in ln]
    load = next(i for i, ln in enumerate(lines) if "LDG.E " in ln)
    setp = next(i for i, ln in enumerate(lines) if "FSETP" in ln)
    assert load < setp < max(i for i, ln in enumerate(lines) if "SR_CLOCKLO" in ln)  # load, compare, then the timer


def test_cycle_mode_per_sm_clock_with_several_sms():
    """Short regions on two SMs running at different clocks: each SM's span gives its own rate."""
    regions = []
    for sm, rate in ((3, 1.5), (7, 1.9)):
        for i in range(6):
            t0 = 10_000 * i
            regions.append(Region([(t0, True, 0), (t0 + 1_000, False, 0)], t0=t0, c0=int(t0 * rate), sm=sm,
                                  cycles_per_ns=rate))
    d = decode_buffer(fill_buffer(empty_buffer(64), regions, cycles=True), ["w"])
    assert d.clock_source.startswith("per SM over the kernel (2 SMs")
    assert d.tasks["duration_ns"].to_list() == [1_000] * 12  # each SM's cycles converted with its own clock


def test_view_of_proton_hatchet_falls_back_to_what_the_file_has(capsys):
    """Proton's instrumentation hatchet has cycles only: the default metric, ``-m time/us`` (the README's) and
    ``-m count`` show its cycles with a note; ``--clock-ghz`` turns them into time; % of top is the share of
    the shallowest scope with a value (the kernel), not '-' because ROOT is empty."""
    path = str(PROTON_H100 / "proton_ops.hatchet")
    raw = json.loads((PROTON_H100 / "proton_ops.hatchet").read_text())
    kernel = raw[0]["children"][0]["children"][0]
    cyc = {c["frame"]["name"]: c["metrics"]["cycles"] for c in kernel["children"]}
    top = kernel["metrics"]["cycles"]

    def rows(out: str) -> dict[str, list[str]]:
        return {cells[0]: cells[1:] for line in out.splitlines()
                if len(cells := [c.strip() for c in line.split("│")]) == 3}

    assert main(["intra", "view", path]) == 0
    cap = capsys.readouterr()
    got = rows(cap.out)
    assert "cycles" in cap.out and cap.err == ""
    assert got["row_loop"] == [f"{cyc['row_loop']:,}", f"{100 * cyc['row_loop'] / top:.1f}%"]
    assert got["kernel"] == [f"{top:,}", "100.0%"] and got["ROOT"] == ["-", "-"]
    for m in ("time/us", "count"):
        assert main(["intra", "view", path, "-m", m]) == 0
        cap = capsys.readouterr()
        assert rows(cap.out)["store"][0] == f"{cyc['store']:,}" and "showing cycles" in cap.err
    assert main(["intra", "view", path, "-m", "time/us", "-q"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["intra", "view", path, "-m", "time/ns", "--clock-ghz", "2"]) == 0
    cap = capsys.readouterr()
    assert rows(cap.out)["row_loop"][0] == f"{cyc['row_loop'] / 2:,.0f}" and "--clock-ghz 2" in cap.err
    assert main(["intra", "view", path, "-m", "bogus"]) == 2
    assert "unknown metric 'bogus'" in capsys.readouterr().err


def test_pick_metric_without_any_known_metric_names_what_the_file_has():
    from kernscope.errors import KernscopeError
    from kernscope.intra.hatchet import hatchet_to_tree, pick_metric

    tree = hatchet_to_tree([{"frame": {"name": "ROOT"}, "metrics": {},
                             "children": [{"frame": {"name": "k"}, "metrics": {"bytes": 4}, "children": []}]}])
    with pytest.raises(KernscopeError, match="it has: bytes"):
        pick_metric(tree, None, None, "x.hatchet")
    timed = hatchet_to_tree([{"frame": {"name": "ROOT"}, "metrics": {"time (ns)": 0.0, "count": 0},
                              "children": [{"frame": {"name": "k"}, "metrics": {"time (ns)": 5.0, "count": 2},
                                            "children": []}]}])
    c = pick_metric(timed, None, None, "t.hatchet")
    assert (c.metric, c.column, c.note) == ("time/ns", "time (ns) (inc)", None)


def test_quiet_on_every_intra_command_that_writes_notices(tmp_path, capsys):
    out = tmp_path / "k.json"
    assert main(["intra", "export", str(PROTON_H100 / "kernscope.npz"), "-o", str(out), "-q"]) == 0
    assert out.exists() and capsys.readouterr().err == ""
    assert main(["intra", "stats", str(PROTON_H100 / "kernscope.npz"), "-q", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["tasks"] > 0


@pytest.mark.parametrize("bad, says", [({"dur": -5.0}, "negative duration"), ({"ts": 1e300}, "does not fit"),
                                       ({"dur": "7"}, "not a finite number")])
def test_proton_trace_with_impossible_times_is_one_line(tmp_path, capsys, bad, says):
    """#31: a Proton trace with a negative duration gave a negative mean (the Kineto loader rejects them);
    1e300 or a string was an internal error. One line naming the event, exit 2."""
    ev = [{"ph": "X", "pid": "k Core0 CTA0", "tid": "warp 0", "name": "loop", "ts": 1.0, "dur": 2.0},
          {"ph": "X", "pid": "k Core0 CTA0", "tid": "warp 0", "name": "loop", "ts": 4.0, "dur": 2.0, **bad}]
    p = tmp_path / "bad.chrome_trace"
    p.write_text(json.dumps({"traceEvents": ev}))
    assert main(["intra", "stats", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "$.traceEvents[1]" in err and says in err and str(p) in err


def test_intra_gzip_bomb_stops_at_the_budget(tmp_path, capsys, monkeypatch):
    """#31: a 1 MB .gz Proton trace took 2.2 GB; the decompressed text is bounded by what its parsed JSON could
    take of the memory budget (made 1 MB here)."""
    import gzip

    import kernscope.intra.io as io_mod

    monkeypatch.setattr(io_mod, "text_budget", lambda: 1 << 20)
    p = tmp_path / "bomb.chrome_trace.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (20 << 20) + b"]}"))
    assert p.stat().st_size < 100_000
    assert main(["intra", "stats", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "decompressed content exceeds" in err and str(p) in err


@pytest.mark.parametrize("doc, says", [
    ("deep", "deeper than 1,000 levels"),
    ([{"frame": {"name": "ROOT"}, "metrics": {}, "children": {"a": 1}}], "not a list"),
    ([{"frame": "ROOT", "metrics": {}, "children": []}], "frame is str"),
    ([{"frame": {"name": "ROOT"}, "metrics": [1, 2], "children": []}], "not an object"),
    ([{"frame": {"name": "ROOT"}, "metrics": {"time (ns)": 10**30}, "children": []}], "does not fit in 64 bits"),
])
def test_hostile_hatchet_files_are_one_line(tmp_path, capsys, doc, says):
    """#31: hatchet files with a non-list children, a string frame, list metrics, huge metrics or a deep tree
    were tracebacks or GBs of memory; each is one line, exit 2."""
    p = tmp_path / "h.hatchet"
    if doc == "deep":  # written as text: the encoder cannot nest this deep either
        n = 1100
        p.write_text("[" + '{"frame": {"name": "n"}, "metrics": {}, "children": [' * n
                     + '{"frame": {"name": "leaf"}, "metrics": {"time (ns)": 1.0}, "children": []}' + "]}" * n + "]")
    else:
        p.write_text(json.dumps(doc))
    assert main(["intra", "view", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err


def test_intra_run_reports_the_programs_own_error_as_its_own(tmp_path, capsys):
    """A program that raises is not kernscope's internal error: its traceback as Python prints it (from its own
    frames), exit 1, the JSON says the error, and what it defined is kept."""
    pytest.importorskip("triton")
    from kernscope.cli import main
    from kernscope.intra.run import run_script

    script = tmp_path / "prog.py"
    script.write_text("import triton\n@triton.jit\ndef k(p):\n    pass\nprint('program output')\n"
                      "def f():\n    return undefined_name\nf()\n")
    res = run_script(["python", str(script)])
    err = capsys.readouterr().err
    assert res.exit_code == 1 and res.error == "NameError: name 'undefined_name' is not defined" and res.defined == ["k"]
    assert err.startswith("Traceback (most recent call last):") and f'File "{script}", line 8' in err
    assert "runpy" not in err and "kernscope" not in err
    assert main(["intra", "run", "--format", "json", "-o", str(tmp_path / "out"), "python", str(script)]) == 1
    assert not (tmp_path / "out").exists()  # nothing profiled, nothing written: no empty folder
    out, err = capsys.readouterr()
    doc = json.loads(out)  # (the program's own print went to stderr: stdout is the JSON alone)
    assert "program output" in err
    assert doc["exit_code"] == 1 and doc["error"].startswith("NameError") and doc["kernels"] == []
    assert err.strip().splitlines()[-1] == (f"kernscope: {script}: the program raised NameError: name 'undefined_name' "
                                            "is not defined (its traceback above); the kernels it launched before are "
                                            "profiled")
    assert "internal error" not in err


def test_proton_session_that_cannot_start_is_one_line(tmp_path, monkeypatch, capsys):
    """No GPU driver (or no Proton backend): the child runner of ``intra override`` says so in one line, exit 2,
    instead of Proton's traceback."""
    pytest.importorskip("triton")
    import triton.profiler

    from kernscope.intra import proton_session

    def no_driver(*a, **k):
        raise RuntimeError("0 active drivers ([]). There should only be one.\nmore")

    monkeypatch.setattr(triton.profiler, "start", no_driver)
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit(0)\n")
    assert proton_session.main(["--name", str(tmp_path / "p"), "--", str(script)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kernscope: Proton could not start its session (RuntimeError: 0 active drivers ([]). There should "
                   "only be one.); intra override needs a GPU and triton with Proton"]


def test_stats_of_a_hatchet_tree_points_to_view(capsys):
    """``intra stats`` reads traces of intra-kernel events; given a hatchet scope tree (Proton's or ours) it says so
    and names the command that shows one, in one line, exit 2."""
    assert main(["intra", "stats", str(PROTON_H100 / "proton_ops.hatchet")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith("a hatchet scope tree, not a trace of intra-kernel events: "
                                             "`kernscope intra view` shows it"), err


@pytest.mark.parametrize("doc, says", [
    ({"programs": 16, "cols": 4096, "scopes": []}, "a JSON object without a traceEvents list (keys: programs, cols, scopes)"),
    ({"traceEvents": [{"ph": "X", "name": "k", "ts": 0, "dur": 1, "pid": 0, "tid": 0}]}, "event 0 ('k') has no block"),
])
def test_json_that_is_no_intra_trace_says_what_it_is(tmp_path, capsys, doc, says):
    """A JSON file of something else (the compare.json beside the Proton samples) or X events without kernscope's
    args read "not a kernscope intra-kernel buffer or trace (KeyError: 'traceEvents')": a Python error name for a
    message. One line saying what the file is, exit 2."""
    p = tmp_path / "other.json"
    p.write_text(json.dumps(doc))
    assert main(["intra", "stats", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err and "KeyError" not in err


def test_each_command_names_the_command_that_reads_a_file(tmp_path, capsys):
    """A file for another command got a message about what it is not: analyze of a Perfetto trace or an .npz
    buffer read "not JSON", of a hatchet file "event #0 ('None') has no 'ts'"; intra stats of a Kineto trace "has
    no block", of random bytes "object of type 'int' has no len()", of an empty file 0 tasks and exit 0. Each now
    says what the file is and which command reads it, in one line, exit 2."""
    example = Path(__file__).parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    npz = tmp_path / "buf.npz"
    np.savez(npz, buffer=np.zeros(16, dtype=np.int64))
    (tmp_path / "empty.json").write_bytes(b"")
    (tmp_path / "noise.bin").write_bytes(bytes(range(7, 250)) * 8)
    cases = [(["analyze", str(DATA / "align_h100" / "bias_gelu.perfetto-trace.gz")], "a Perfetto trace (protobuf), not a Kineto trace: `kernscope intra stats`"),
             (["analyze", str(npz)], "an intra-kernel profiler buffer (numpy), not a trace: `kernscope intra stats`"),
             (["analyze", str(PROTON_H100 / "proton_ops.hatchet")], "a hatchet scope tree (Proton's profile), not a trace: `kernscope intra view`"),
             (["intra", "stats", str(example)], "a PyTorch profiler (Kineto) trace, not intra-kernel records: `kernscope analyze`"),
             (["intra", "stats", str(tmp_path / "empty.json")], "the file is empty"),
             (["intra", "stats", str(tmp_path / "noise.bin")], "nor a Perfetto trace (read as Perfetto's protobuf: ")]
    for argv, says in cases:
        assert main([*argv, "-q"]) == 2, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and says in err, (argv, err)
