"""Intra-kernel profiler, CPU side: decode (wrap, overflow, ring, cycles, empty, many SMs), export, stats."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from kernscope.cli import main
from kernscope.errors import KernscopeError
from kernscope.intra import decode_buffer
from kernscope.intra import protobuf as pb
from kernscope.intra.export import (
    LANE_UUID_BASE,
    P_TRACK_DESC,
    P_TRACK_EVENT,
    SM_UUID_BASE,
    TRACE_PACKET,
    assign_lanes,
    perfetto_bytes,
    read_perfetto,
    write_perfetto,
)
from kernscope.intra.layout import MAGIC
from kernscope.intra.simulate import Region, empty_buffer, fill_buffer
from kernscope.intra.stats import kernel_summary, sm_stats, task_stats

NAMES = ["load", "compute"]


def _tile_records(t0, n_tiles=3, tile=3000, gap=200):
    recs, t = [], t0
    for _ in range(n_tiles):
        recs += [(t, True, 0), (t + tile // 3, False, 0), (t + tile // 3, True, 1), (t + tile, False, 1)]
        t += tile + gap
    return recs


def test_decode_roundtrip_values():
    buf = empty_buffer(1000)
    regions = [Region(_tile_records(10_000 + 50 * b), t0=10_000 + 50 * b - 7, sm=b % 4) for b in range(8)]
    fill_buffer(buf, regions)
    d = decode_buffer(buf, NAMES)
    assert d.dropped == 0 and d.unpaired == 0 and d.regions == 8
    t = d.tasks
    assert t.height == 8 * 6
    assert set(t["task"].to_list()) == {"load", "compute"}
    b3 = t.filter((pl.col("block") == 3) & (pl.col("task") == "load")).sort("start_ns")
    assert b3["start_ns"].to_list() == [10_150, 13_350, 16_550]
    assert (b3["duration_ns"] == 1000).all()
    assert set(t.filter(pl.col("block") == 5)["sm"].to_list()) == {1}


def test_globaltimer_low_word_wrap_is_harmless():
    t0 = 2**32 - 1500  # the low 32 bits of %globaltimer wrap inside this kernel
    buf = empty_buffer(100)
    fill_buffer(buf, [Region([(t0 + 100, True, 0), (t0 + 4000, False, 0)], t0=t0)])
    t = decode_buffer(buf, NAMES).tasks
    assert t["start_ns"].item() == t0 + 100 and t["end_ns"].item() == t0 + 4000 and t["duration_ns"].item() == 3900


def test_overflow_is_bounded_counted_and_warned(tmp_path):
    buf = empty_buffer(8)  # 8 slots, 2 regions -> few records per region
    regions = [Region(_tile_records(1000, n_tiles=10), t0=1000) for _ in range(2)]
    fill_buffer(buf, regions)
    d = decode_buffer(buf, NAMES)
    per = (len(buf) - 8) // 2
    assert d.capacity_per_region == per - 6
    assert d.dropped == 2 * (40 - d.capacity_per_region)
    assert d.tasks.height > 0 and (d.tasks["duration_ns"] > 0).all()
    from kernscope.intra.host import export_to_perfetto_trace

    with pytest.warns(UserWarning, match=f"{d.dropped:,} profiler records were dropped"):
        export_to_perfetto_trace(buf, NAMES, str(tmp_path / "o"))


def test_fill_never_writes_outside_region():
    buf = empty_buffer(16)
    guard = buf.copy()
    regions = [Region(_tile_records(1000, n_tiles=50), t0=1000) for _ in range(3)]
    fill_buffer(buf, regions)
    per = (len(buf) - 8) // 3
    assert (buf[8 + 3 * per:] == guard[8 + 3 * per:]).all()


def test_ring_mode_keeps_latest():
    buf = empty_buffer(10)
    regions = [Region(_tile_records(1000, n_tiles=20), t0=1000)]
    fill_buffer(buf, regions, ring=True)
    d = decode_buffer(buf, NAMES)
    assert d.ring and d.ring_overwritten == 80 - d.capacity_per_region
    last_end = max(r[0] for r in regions[0].records)
    assert d.tasks["end_ns"].max() == last_end
    assert (d.tasks["duration_ns"] > 0).all()
    assert d.tasks.height >= d.capacity_per_region // 2 - 1


def test_cycle_mode_converts_with_anchors():
    buf = empty_buffer(100)
    recs = [(1_000_000, True, 0), (1_030_000, False, 0)]
    fill_buffer(buf, [Region(recs, t0=1_000_000, c0=5_000_000, cycles_per_ns=1.755)], cycles=True)
    t = decode_buffer(buf, NAMES).tasks
    assert t["duration_ns"].item() == pytest.approx(30_000, abs=2)


def test_empty_and_unwritten_buffers():
    buf = empty_buffer(100)
    d = decode_buffer(buf, NAMES)
    assert d.tasks.height == 0 and d.regions == 0
    fill_buffer(buf, [Region([], t0=5)])
    assert decode_buffer(buf, NAMES).tasks.height == 0
    assert perfetto_bytes(d.tasks)  # still a valid (empty) trace
    with pytest.raises(KernscopeError, match="bad magic"):
        decode_buffer(np.zeros(100, dtype=np.int64))


def test_unpaired_counted():
    buf = empty_buffer(100)
    fill_buffer(buf, [Region([(10, True, 0), (20, False, 0), (30, True, 1)], t0=0)])
    d = decode_buffer(buf, NAMES)
    assert d.tasks.height == 1 and d.unpaired == 1


def _many(n_blocks=4096, sms=132):
    buf = empty_buffer(n_blocks * 4 + 10)
    regs = [Region(_tile_records(1_000_000 + (b // sms) * 3300, n_tiles=1), t0=1_000_000, sm=b % sms) for b in range(n_blocks)]
    return fill_buffer(buf, regs)


def test_many_sms_lanes_and_stats():
    d = decode_buffer(_many(), NAMES)
    t = d.tasks
    assert t.height == 4096 * 2 and t["sm"].n_unique() == 132
    lanes = assign_lanes(t)
    # blocks on one SM run back to back here: they pack onto a single lane
    assert max(lanes.lanes_per_sm.values()) == 1
    ts = task_stats(t).sort("task")
    assert ts.filter(pl.col("task") == "load")["p50_ns"].item() == 1000
    sms = sm_stats(t)
    assert sms.height == 132 and (sms["busy_fraction"] <= 1).all()
    s = kernel_summary(t)
    assert s["blocks"] == 4096 and s["sms"] == 132 and s["tail_ratio"] >= 1


def test_lanes_never_overlap():
    rng = np.random.default_rng(0)
    rows = []
    for b in range(300):
        s = int(rng.integers(0, 100_000))
        rows.append({"block": b, "group": 0, "sm": b % 3, "task_type": 0, "task": "x", "start_ns": s, "end_ns": s + int(rng.integers(1, 20_000)), "duration_ns": 0})
    t = pl.DataFrame(rows)
    units = assign_lanes(t).units.join(t, on=["block", "group", "sm"])
    for (sm, lane), g in units.group_by("sm", "lane"):
        g = g.sort("start_ns")
        assert (g["start_ns"].to_numpy()[1:] >= g["end_ns"].to_numpy()[:-1]).all()


def test_perfetto_structure_and_roundtrip(tmp_path):
    d = decode_buffer(_many(512, 16), NAMES)
    data = perfetto_bytes(d.tasks)
    tracks, begins, ends, seq_ids = {}, 0, 0, set()
    for f, wt, pkt in pb.iter_fields(data):
        assert f == TRACE_PACKET and wt == pb.WT_LEN
        for pf, _, v in pb.iter_fields(pkt):
            if pf == 10:
                seq_ids.add(v)
            if pf == P_TRACK_DESC:
                dd = {k: val for k, _, val in pb.iter_fields(v)}
                tracks[dd[1]] = dd
            if pf == P_TRACK_EVENT:
                te = {k: val for k, _, val in pb.iter_fields(v)}
                assert te[11] in tracks  # every slice is on a declared track
                begins += te[9] == 1
                ends += te[9] == 2
    assert begins == ends == d.tasks.height
    assert len(seq_ids) == 1
    sm_tracks = [t for u, t in tracks.items() if SM_UUID_BASE <= u < LANE_UUID_BASE]
    lane_tracks = [t for u, t in tracks.items() if u >= LANE_UUID_BASE]
    assert len(sm_tracks) == 16 and all(t[2].startswith(b"SM ") for t in sm_tracks)
    assert all(t[5] in tracks for t in lane_tracks)  # lanes hang under their SM
    back = read_perfetto(data).sort(["start_ns", "block", "task"])
    orig = d.tasks.sort(["start_ns", "block", "task"])
    assert back.select("block", "sm", "task", "start_ns", "end_ns").equals(orig.select("block", "sm", "task", "start_ns", "end_ns"))
    p = write_perfetto(d.tasks, tmp_path / "copy")
    assert p.endswith(".perfetto-trace")


def test_protobuf_varints_match_reference_encoding():
    vals = np.array([0, 1, 127, 128, 300, 2**32, 2**63 - 1], dtype=np.int64)
    rows = pb.varints(vals)
    for i, v in enumerate(vals):
        assert rows.mat[i][rows.mask[i]].tobytes() == pb.varint_bytes(int(v))
    assert rows.tobytes() == b"".join(pb.varint_bytes(int(v)) for v in vals)


def test_chrome_export_and_cli(tmp_path, capsys):
    buf = _many(256, 8)
    np.savez(tmp_path / "b.npz", buffer=buf, task_names=np.array(NAMES))
    assert main(["intra", "stats", str(tmp_path / "b.npz"), "--format", "json", "--html", str(tmp_path / "t.html")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["blocks"] == 256 and doc["summary"]["dropped"] == 0
    assert {r["task"] for r in doc["tasks"]} == set(NAMES)
    html = (tmp_path / "t.html").read_text()
    data = json.loads(html.split('id="ks-data">', 1)[1].split("</script>", 1)[0])
    assert data["timeline"]["categories"] == sorted(NAMES) and data["timeline"]["lanes"][0]["label"].startswith("SM ")
    assert data["timeline"]["lane_first"][-1] == 512  # every task is on the page (no cap)
    assert "Content-Security-Policy" in html
    assert main(["intra", "export", str(tmp_path / "b.npz"), "-o", str(tmp_path / "t.json")]) == 0
    ch = json.loads((tmp_path / "t.json").read_text())
    assert sum(1 for e in ch["traceEvents"] if e["ph"] == "X") == 512
    assert main(["intra", "export", str(tmp_path / "b.npz"), "-o", str(tmp_path / "t.perfetto-trace")]) == 0
    capsys.readouterr()
    for f in ("t.json", "t.perfetto-trace"):
        assert main(["intra", "stats", str(tmp_path / f), "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["summary"]["tasks"] == 512
    (tmp_path / "junk.npz").write_bytes(b"junk")
    assert main(["intra", "stats", str(tmp_path / "junk.npz")]) == 2


def test_seed_api_names_importable():
    import kernscope.intra as ki

    for name in ("ProfilerBuffer", "alloc_profiler_buffer", "reset_profiler_buffer", "export_to_perfetto_trace",
                 "set_export_trace_on", "set_export_trace_off"):
        assert callable(getattr(ki, name))
    ki.set_export_trace_off()
    from kernscope.intra.host import export_enabled

    assert not export_enabled()
    ki.set_export_trace_on()
    assert export_enabled()
    assert MAGIC == 0x4B53_5052_4F46


def test_lane_packing_is_valid_and_uses_the_fewest_lanes():
    """assign_lanes' vectorized wave path and its greedy fallback: no two units of one lane overlap, and every SM
    uses exactly its peak concurrency (what the greedy interval partitioning gives)."""
    from kernscope.intra.export import _greedy, assign_lanes

    rng = np.random.default_rng(7)
    for trial in range(150):
        n = int(rng.integers(1, 50))
        sm = rng.integers(0, 3, n)
        if trial % 3 == 0:  # waves of 4 equal blocks: the fast path
            s, d = (np.arange(n) // 4) * 10, np.full(n, 10)
        else:  # anything: the fallback
            s, d = rng.integers(0, 100, n), rng.integers(0, 40, n)
        t = pl.DataFrame({"block": np.arange(n), "group": np.zeros(n, np.int64), "sm": sm, "start_ns": s, "end_ns": s + d})
        lanes = assign_lanes(t)
        u = lanes.units.join(t, on=["block", "group", "sm"]).sort("sm", "lane", "start_ns", "end_ns")
        same = (u["sm"].to_numpy()[1:] == u["sm"].to_numpy()[:-1]) & (u["lane"].to_numpy()[1:] == u["lane"].to_numpy()[:-1])
        assert (u["end_ns"].to_numpy()[:-1][same] <= u["start_ns"].to_numpy()[1:][same]).all()
        for k in set(sm.tolist()):
            one = t.filter(pl.col("sm") == k).sort("start_ns")
            assert lanes.lanes_per_sm[k] == _greedy(one["start_ns"].to_numpy(), one["end_ns"].to_numpy())[1]


def test_layout_v2_fills_one_sector_per_record_pair_and_v1_buffers_still_decode():
    from kernscope.intra.layout import GLOBAL_HEADER_WORDS, LAYOUTS, VERSION
    from kernscope.intra.simulate import Region, empty_buffer, fill_buffer

    assert VERSION == 2
    regions = [Region([(100 + b, True, 0), (180 + b, False, 0)], t0=b, sm=b % 5) for b in range(37)]
    v2 = fill_buffer(empty_buffer(37 * 2 + 5), regions)
    lay = LAYOUTS[2]
    per = lay.region_words(len(v2), 37)
    assert per % 4 == 0 and GLOBAL_HEADER_WORDS % 4 == 0  # every region starts on a 32-byte sector
    written = np.flatnonzero(v2[GLOBAL_HEADER_WORDS:GLOBAL_HEADER_WORDS + per * 37].reshape(37, per)[1:].any(axis=0))
    assert written.tolist() == [0, 1, 2, 3]  # t0, SM, start, end: one sector per program (program 0 has t0 = 0)
    v1 = fill_buffer(empty_buffer(37 * 2 + 5, version=1), regions)
    a, b = decode_buffer(v2, ["tile"]).tasks, decode_buffer(v1, ["tile"]).tasks
    assert a.equals(b) and a.height == 37 and a["duration_ns"].to_list() == [80] * 37
    v1[1] = 3
    with pytest.raises(KernscopeError, match="version 3 is not supported"):
        decode_buffer(v1)
