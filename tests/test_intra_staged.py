"""Staged (on-chip) profiler buffer, CPU side: the decoder on buffers the CPU model writes as the device does,
the CLI's finalize summary, and the device code compiled for sm_90 (no GPU): no global store in a staged loop."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from kernscope.cli import main
from kernscope.errors import KernscopeError
from kernscope.intra import decode_buffer
from kernscope.intra.layout import FLAG_STAGED, H_FLAGS, STAGE_SHIFT
from kernscope.intra.simulate import Region, empty_buffer, fill_buffer

DATA = Path(__file__).parent / "data"


def _regions(n_prog: int, iters: int, t0: int = 10_000, it_ns: int = 100, fin_ns: int = 150) -> list[Region]:
    out = []
    for p in range(n_prog):
        base = t0 + 1000 * p
        recs = []
        for i in range(iters):
            s = base + 50 + i * (it_ns + 20)
            recs += [(s, True, i % 2), (s + it_ns + p, False, i % 2)]  # durations it_ns + p
        last = recs[-1][0]
        out.append(Region(recs, t0=base, sm=p % 4, finalize=(last + 10, last + 10 + fin_ns + p)))
    return out


def test_all_records_fit_every_task_and_the_finalize_times():
    b = empty_buffer(8 * 40)
    fill_buffer(b, _regions(8, 10), stage=32)
    assert int(b[H_FLAGS]) == FLAG_STAGED | 32 << STAGE_SHIFT
    d = decode_buffer(b, ["even", "odd"])
    assert d.stage_slots == 32 and d.ring_overwritten == 0 and d.unpaired == 0 and d.records == 8 * 20
    assert d.tasks.height == 80
    per_block = d.tasks.group_by("block").agg(pl.col("duration_ns").min()).sort("block")
    assert per_block["duration_ns"].to_list() == [100 + p for p in range(8)]
    assert sorted(d.tasks["task"].unique().to_list()) == ["even", "odd"]
    assert d.finalize is not None
    assert d.finalize.sort("block")["finalize_ns"].to_list() == [150 + p for p in range(8)]
    assert d.finalize["sm"].to_list() == [p % 4 for p in range(8)]


def test_more_records_than_slots_keep_the_newest_window():
    b = empty_buffer(4 * 40)
    fill_buffer(b, _regions(4, 12), stage=8)  # 24 records per program, 8 slots: the last 4 iterations
    d = decode_buffer(b, ["even", "odd"])
    assert d.ring_overwritten == 4 * 16 and d.records == 4 * 8 and d.unpaired == 0
    assert d.tasks.height == 16
    first = d.tasks.filter(d.tasks["block"] == 0)["start_ns"].to_list()
    assert first == [10_000 + 50 + i * 120 for i in range(8, 12)]  # iterations 8..11, in order
    # an odd window cuts a pair: the lone end is counted as unpaired, never paired with a wrong start
    b = empty_buffer(4 * 40)
    fill_buffer(b, _regions(4, 12), stage=8)
    b2 = empty_buffer(2 * 40)
    regs = _regions(2, 12)
    regs[0].records = list(regs[0].records)[:-1]  # 23 records: the window starts on an end
    fill_buffer(b2, regs, stage=8)
    d2 = decode_buffer(b2, ["even", "odd"])
    assert d2.unpaired >= 1 and d2.ring_overwritten == (23 - 8) + (24 - 8)


def test_cycle_mode_finalize_in_ns():
    b = empty_buffer(4 * 40)
    regs = _regions(4, 10, it_ns=30_000)  # 20 µs+ anchors: the clock is measured per region
    for r in regs:
        r.cycles_per_ns = 1.5
    fill_buffer(b, regs, stage=32, cycles=True)
    d = decode_buffer(b, ["even", "odd"])
    assert d.cycles and abs(d.clock_ghz - 1.5) < 0.01
    assert d.finalize is not None and all(abs(v - (150 + p)) <= 2 for p, v in enumerate(d.finalize.sort("block")["finalize_ns"]))
    assert abs(int(d.tasks["duration_ns"].min()) - 30_000) <= 2


def test_too_small_regions_and_finalize_never_called():
    b = empty_buffer(4 * 8)  # regions of 8 words: 2 record slots, the ring needs 34
    fill_buffer(b, _regions(4, 2), stage=32)
    with pytest.raises(KernscopeError, match="too small for STAGE=32"):
        decode_buffer(b, [])
    b = empty_buffer(4 * 40)
    fill_buffer(b, [Region([], t0=100) for _ in range(4)], stage=32)  # nothing recorded / finalize not reached
    d = decode_buffer(b, [])
    assert d.tasks.height == 0 and d.regions == 0 and d.finalize is not None and d.finalize.height == 0


def test_cli_shows_finalize_times_and_ring_slots(tmp_path, capsys):
    b = empty_buffer(8 * 40)
    fill_buffer(b, _regions(8, 10), stage=32)
    np.savez(tmp_path / "s.npz", buffer=b, task_names=np.array(["even", "odd"]))
    assert main(["intra", "stats", str(tmp_path / "s.npz"), "--format", "json"]) == 0
    s = json.loads(capsys.readouterr().out)["summary"]
    assert s["staged_ring_slots"] == 32 and s["finalize_ctas"] == 8 and s["staged_in"] == "registers"
    assert s["finalize_mean_ns"] == pytest.approx(153.5) and s["finalize_max_ns"] == 157
    assert main(["intra", "stats", str(tmp_path / "s.npz")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "finalize per CTA (writing its records out): mean 154 ns, max 157 ns over 8 CTAs" in out, out
    assert "records staged on chip (registers, a ring of 32 per program)" in out
    b = empty_buffer(4 * 40)
    fill_buffer(b, _regions(4, 12), stage=8)
    np.savez(tmp_path / "w.npz", buffer=b, task_names=np.array(["even", "odd"]))
    assert main(["intra", "stats", str(tmp_path / "w.npz")]) == 0
    assert "64 earlier records overwritten" in " ".join(capsys.readouterr().out.split())
    fill_buffer(b, _regions(8, 10), stage=32, shared=True)
    assert decode_buffer(b, []).stage_memory == "shared_mem"


def _ptx(**constexprs):
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(DATA))
    import staged_kernels as sk

    sig = {"buf": "*i64", "x_ptr": "*fp32", "out_ptr": "*fp32", "n_iter": "i32", "STAGE": "constexpr",
           "CYCLES": "constexpr", "BLOCK": "constexpr", "ENABLE": "constexpr", "SYNC": "constexpr",
           "BUFFER_TYPE": "constexpr"}
    cx = {"CYCLES": False, "BLOCK": 256, "ENABLE": True, "SYNC": True, "BUFFER_TYPE": None, **constexprs}
    c = triton.compile(ASTSource(fn=sk.loop_kernel, signature=sig, constexprs=cx), target=GPUTarget("cuda", 90, 32))
    assert "cubin" in c.asm  # ptxas accepted it
    return c.asm["ptx"]


def _loop_body(ptx: str) -> str:
    """The PTX of the kernel's loop: from a label to the branch back to it (a backward branch)."""
    for m in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, re.MULTILINE):
        back = re.search(r"bra(?:\.uni)?\s+" + re.escape(m.group(1)) + ";", ptx[m.end():])
        if back is not None:
            return ptx[m.end(): m.end() + back.start()]
    raise AssertionError("no loop in the PTX")


def test_staged_loop_has_no_global_store_and_bad_options_are_refused():
    staged = _loop_body(_ptx(STAGE=16))
    stored = _loop_body(_ptx(STAGE=0))
    assert "globaltimer" in staged and "st.global" not in staged
    assert "st.global" in stored
    # the shared-memory ring: declared once at kernel scope, one st.shared per record in the loop, no global store
    shared = _ptx(STAGE=16, BUFFER_TYPE="shared_mem")
    assert shared.count(".shared .align 16 .b64 __kernscope_ring[16];") == 1
    body = _loop_body(shared)
    assert "st.shared" in body and "st.global" not in body
    assert "__kernscope_ring[256]" in _ptx(BUFFER_TYPE="shared_mem")  # default size
    for bad in ({"STAGE": 3}, {"STAGE": 1 << 13}, {"STAGE": 16, "BUFFER_TYPE": "global"},
                {"BUFFER_TYPE": "registers"}, {"BUFFER_TYPE": "smem"}):
        with pytest.raises(Exception) as err:
            _ptx(**bad)
        chain: list[str] = []
        e: BaseException | None = err.value
        while e is not None:  # Triton wraps the constexpr function's error in a CompilationError
            chain.append(str(e))
            e = e.__cause__ or e.__context__
        assert any("STAGE must be a power of two" in m or "BUFFER_TYPE" in m for m in chain), chain


def test_two_shared_rings_need_their_own_ring_id():
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, str(DATA))
    import staged_kernels as sk

    sig = {"buf": "*i64", "x_ptr": "*fp32", "out_ptr": "*fp32", "n_iter": "i32", "RING1": "constexpr",
           "BLOCK": "constexpr"}

    def build(ring1: int):
        return triton.compile(ASTSource(fn=sk.two_groups_kernel, signature=sig, constexprs={"RING1": ring1, "BLOCK": 128}),
                              target=GPUTarget("cuda", 90, 32))

    ptx = build(1).asm["ptx"]
    assert "__kernscope_ring[64]" in ptx and "__kernscope_ring1[64]" in ptx
    with pytest.raises(Exception, match="[Dd]uplicate definition"):
        build(0)
