"""Warp sampling without a GPU: the buffer layout (CPU model -> decoder), the exports (one track per warp), the
device code's compile-time mask (same rules as the layout's), and the instrumented copy compiled for sm_90."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from kernscope.cli import main
from kernscope.errors import KernscopeError
from kernscope.intra.decode import decode_buffer
from kernscope.intra.export import assign_lanes, perfetto_bytes, read_perfetto
from kernscope.intra.layout import H_WARPS, warp_mask, warps_of
from kernscope.intra.simulate import Region, empty_buffer, fill_buffer

DATA = Path(__file__).parent / "data"


def _sampled(programs: int, warps: tuple[int, ...]) -> tuple[np.ndarray, dict]:
    """Each sampled warp of each program records task 0 then task 1; warp w starts 10*w ns later than warp 0."""
    regions, want = [], {}
    for p in range(programs):
        for w in warps:
            t = 1000 * p + 10 * w
            regions.append(Region([(t, True, 0), (t + 100 + w, False, 0), (t + 200, True, 1), (t + 260, False, 1)],
                                  t0=500 * p, sm=p % 3))
            want[(p, w)] = [(t, t + 100 + w), (t + 200, t + 260)]
    buf = fill_buffer(empty_buffer(programs * len(warps) * 4 + 16), regions, warp_ids=warps)
    return buf, want


def test_mask_rules_agree_with_the_device_code():
    pytest.importorskip("triton")
    from kernscope.intra.device import _warp_mask

    for ids in [(0,), (0, 1, 2, 3), (1, 5, 31), (3, 0)]:
        assert _warp_mask(ids) == warp_mask(ids) and warps_of(warp_mask(ids)) == sorted(ids)
    assert _warp_mask(None) == 0
    for bad in [(), (1, 1), (32,), (-1,)]:
        with pytest.raises(ValueError):
            warp_mask(bad)
        with pytest.raises(ValueError):
            _warp_mask(bad)


def test_stats_say_which_sampled_warps_recorded_nothing(tmp_path, capsys):
    regions = [Region([(10, True, 0), (20, False, 0)] if w != 5 else [], t0=0, sm=0) for p in range(3) for w in (0, 5)]
    buf = fill_buffer(empty_buffer(3 * 2 * 4 + 16), regions, warp_ids=(0, 5))
    np.savez(tmp_path / "b.npz", buffer=buf, task_names=np.array(["t"]))
    assert main(["intra", "stats", str(tmp_path / "b.npz")]) == 0
    assert "sampled warps with no records: 5" in capsys.readouterr().out
    assert main(["intra", "stats", str(tmp_path / "b.npz"), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["sampled_warps"] == "0,5" and summary["warps_without_records"] == "5"


def test_decode_gives_each_sampled_warp_its_own_group():
    buf, want = _sampled(4, (0, 2, 5))
    d = decode_buffer(buf, ["load", "mma"])
    assert d.warps == [0, 2, 5] and d.dropped == 0 and d.unpaired == 0
    t = d.tasks
    assert t.height == 4 * 3 * 2 and sorted(set(t["group"].to_list())) == [0, 2, 5]
    got: dict = {}
    for r in t.iter_rows(named=True):
        got.setdefault((r["block"], r["group"]), []).append((r["start_ns"], r["end_ns"]))
    assert got == want
    assert (t.filter(t["block"] == 1)["sm"] == 1).all()
    assert d.silent_warps == []
    # a sampled warp that never records (warp 5 of a 4-warp kernel) is reported
    regions = [Region([(10, True, 0), (20, False, 0)] if w != 5 else [], t0=0, sm=0) for p in range(3) for w in (0, 5)]
    quiet = decode_buffer(fill_buffer(empty_buffer(3 * 2 * 4 + 16), regions, warp_ids=(0, 5)), ["t"])
    assert quiet.silent_warps == [5] and sorted(set(quiet.tasks["group"].to_list())) == [0]
    # a header whose mask disagrees with its group count is refused
    buf[H_WARPS] = warp_mask((0, 1))
    with pytest.raises(KernscopeError, match="warp mask"):
        decode_buffer(buf)


def test_exports_put_every_warp_on_its_own_track():
    buf, _ = _sampled(2, (0, 1, 2, 3))
    t = decode_buffer(buf, ["load", "mma"]).tasks
    lanes = assign_lanes(t)
    # the four warps of a program overlap in time: four lanes under its SM
    assert lanes.units.height == 2 * 4 and set(lanes.lanes_per_sm.values()) == {4}
    back = read_perfetto(perfetto_bytes(t))
    assert back.height == t.height and sorted(set(back["group"].to_list())) == [0, 1, 2, 3]


def test_instrumented_copy_with_warp_sampling_compiles_for_sm90(capsys):
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernscope.intra import instrument

    sys.path.insert(0, str(DATA))
    import libkernels

    ik = instrument(libkernels.sum_rows, warps=(0, 1, 2, 3))
    assert "WARP_IDS=(0, 1, 2, 3)" in ik.rewrite.source and ik.rewrite.warps == (0, 1, 2, 3)
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_cols": "i32", "stride": "i32", "_ks_prof_buf": "*i64",
           "BLOCK": "constexpr"}
    ptx = triton.compile(ASTSource(fn=ik.jit, signature=sig, constexprs={"BLOCK": 128}),
                         target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert "@p st.global.b64" in ptx  # a store per sampled warp, not Triton's one-thread scalar store
    assert "popc.b64" in ptx
    plain = triton.compile(ASTSource(fn=instrument(libkernels.sum_rows).jit, signature=sig, constexprs={"BLOCK": 128}),
                           target=GPUTarget("cuda", 90, 32)).asm["ptx"]
    assert "@p st.global.b64" not in plain
    # each sampled warp records when it gets there: no block barrier per record (the kernel's own reduction keeps its)
    assert ptx.count("bar.sync") + 2 * len(ik.scopes) <= plain.count("bar.sync")
    with pytest.raises(KernscopeError, match="distinct integers"):
        instrument(libkernels.sum_rows, warps=(0, 0))
    assert main(["intra", "run", "--warps", "a,b", "--", "python", str(DATA / "run_libkernel.py")]) == 2
    assert "--warps 'a,b'" in capsys.readouterr().err


def test_a_single_sampled_warp_keeps_its_id():
    b = empty_buffer(4 * 8)
    fill_buffer(b, [Region([(10, True, 0), (20, False, 0)], t0=5) for _ in range(4)], warp_ids=[2])
    d = decode_buffer(b)
    assert d.warps == [2] and d.tasks["group"].to_list() == [2, 2, 2, 2] and d.tasks["block"].to_list() == [0, 1, 2, 3]


def _ws_gemm_buffer(programs: int, steps: int) -> np.ndarray:
    """A warp-specialized GEMM's records, two groups per program: group 0 (consumer) ``wait_data`` [40 ns] then ``mma``
    [100 ns] per K step; group 1 (producer) ``wait_slot`` [30 ns] then ``tma`` [20 ns] per K step, running ahead of
    the consumer by ``lead`` ns (program p: lead 10 p)."""
    regions = []
    for p in range(programs):
        t0 = 10_000 * p
        cons, prod = [], []
        for i in range(steps):
            c = t0 + 140 * i
            cons += [(c, True, 0), (c + 40, False, 0), (c + 40, True, 1), (c + 140, False, 1)]
            q = c + 10 * p  # the producer's step, shifted by the program's lead
            prod += [(q, True, 2), (q + 30, False, 2), (q + 30, True, 3), (q + 50, False, 3)]
        regions += [Region(cons, t0=t0, sm=p), Region(prod, t0=t0, sm=p)]
    return fill_buffer(empty_buffer(programs * 2 * (4 * steps + 4) + 16), regions, num_groups=2)


def test_warp_group_overlap_per_cta(tmp_path, capsys):
    """#28.5: for warp-specialized kernels, intra stats says per pair of tasks of two groups how long both ran at once,
    summed over CTAs and per CTA (here computed by hand from the records' layout)."""
    np.savez(tmp_path / "ws.npz", buffer=_ws_gemm_buffer(3, 4), task_names=np.array(["wait_data", "mma", "wait_slot", "tma"]))
    assert main(["intra", "stats", str(tmp_path / "ws.npz"), "--format", "json"]) == 0
    s = json.loads(capsys.readouterr().out)["summary"]
    pairs = {(r["task_a"], r["task_b"]): r for r in s["group_overlap"]}
    assert set(pairs) == {("mma", "tma"), ("mma", "wait_slot"), ("wait_data", "tma"), ("wait_data", "wait_slot")}
    # program p, step i: wait_data [c, c+40), mma [c+40, c+140), tma [c+10p+30, c+10p+50)
    per = {(r["block"], r["task_a"], r["task_b"]): r["overlap_ns"] for r in s["group_overlap_per_cta"]}
    assert [per[(p, "mma", "tma")] for p in range(3)] == [4 * 10, 4 * 20, 4 * 20]
    assert [per[(p, "wait_data", "tma")] for p in range(3)] == [4 * 10, 0, 0]
    mt = pairs[("mma", "tma")]
    assert mt["blocks"] == 3 and mt["a_ns"] == 3 * 4 * 100 and mt["b_ns"] == 3 * 4 * 20 and mt["overlap_ns"] == 200
    assert mt["pct_of_b"] == pytest.approx(100 * 200 / 240) and mt["cta_pct_of_a_min"] == 10.0 and mt["cta_pct_of_a_max"] == 20.0
    assert main(["intra", "stats", str(tmp_path / "ws.npz"), "--html", str(tmp_path / "ws.html")]) == 0
    out = capsys.readouterr().out
    assert "warp groups: time two groups' tasks run at once (over 3 CTAs)" in out and "0·mma" in out and "1·tma" in out
    assert "Warp groups: overlap per CTA" in (tmp_path / "ws.html").read_text()
