"""One reader for every intra-kernel format (issue #28, item 3): Proton's periodic flushing (``.part_N`` files read
as one profile), Proton's ``hatchet_msgpack``, and Perfetto traces of intra-kernel slices written by other tools
(tg4perfetto-style: plain or interned names, thread tracks, unit annotations), besides the formats read before."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import polars as pl
import pytest

from kernscope.cli import main
from kernscope.intra import protobuf as pb
from kernscope.intra.export import read_perfetto
from kernscope.intra.hatchet import merge_trees, read_hatchet
from kernscope.intra.io import load_tasks

DATA = Path(__file__).parent / "data" / "proton_h100"
TUTORIAL = DATA / "tutorial_override.chrome_trace.gz"


def test_periodic_flushing_parts_read_as_one_profile(tmp_path, capsys):
    doc = json.loads(gzip.decompress(TUTORIAL.read_bytes()))
    ev = doc["traceEvents"]
    thirds = [ev[i::3] for i in range(3)]  # any split: the reader merges the events
    for n, part in enumerate(thirds):
        (tmp_path / f"add.part_{n}.chrome_trace").write_text(json.dumps({"traceEvents": part}))
    whole = load_tasks(TUTORIAL).tasks
    for given in ("add.part_1.chrome_trace", "add"):  # one part's name, or the name the parts share
        merged = load_tasks(tmp_path / given).tasks
        assert merged.height == whole.height == 1552
        key = ["task", "start_ns", "duration_ns"]
        assert merged.select(key).sort(key).equals(whole.select(key).sort(key))
    assert main(["intra", "stats", str(tmp_path / "add"), "--format", "json"]) == 0
    assert {r["name"]: r["count"] for r in json.loads(capsys.readouterr().out)["scopes"]}["load_x_issue"] == 388


def _hatchet(count: int, time: float, lo: float, hi: float) -> list:
    node = {"frame": {"name": "scope", "type": "function"},
            "metrics": {"count": count, "time (ns)": time, "min_time (ns)": lo, "max_time (ns)": hi,
                        "mean_time (ns)": time / count}, "children": []}
    return [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {},
             "children": [{"frame": {"name": "k", "type": "function"}, "metrics": {}, "children": [node]}]}, {}]


def test_hatchet_parts_merge_and_msgpack_reads_like_json(tmp_path, capsys):
    (tmp_path / "p.part_0.hatchet").write_text(json.dumps(_hatchet(3, 30.0, 8.0, 12.0)))
    (tmp_path / "p.part_1.hatchet").write_text(json.dumps(_hatchet(5, 60.0, 9.0, 15.0)))
    t = read_hatchet(str(tmp_path / "p.part_0.hatchet"))
    row = t.filter(pl.col("name") == "scope").row(0, named=True)
    assert row["count"] == 8 and row["time (ns)"] == 90.0 and row["min_time (ns)"] == 8.0
    assert row["max_time (ns)"] == 15.0 and row["mean_time (ns)"] == pytest.approx(90.0 / 8)  # weighted by count
    assert merge_trees([t]).height == t.height
    # Proton's hatchet_msgpack: the same tree as its JSON, and intra view shows the same numbers
    raw = json.loads((DATA / "proton_ops.hatchet").read_text())
    mp = tmp_path / "ops.hatchet_msgpack"
    mp.write_bytes(msgspec.msgpack.encode(raw))
    assert read_hatchet(str(mp)).equals(read_hatchet(str(DATA / "proton_ops.hatchet")))
    outs = []
    for f in (DATA / "proton_ops.hatchet", mp):
        assert main(["intra", "view", str(f), "-m", "cycles"]) == 0
        out = capsys.readouterr().out
        outs.append(out[out.index(" scope"):])  # the table below the title (the title names the path)
    assert outs[0] == outs[1]
    bad = tmp_path / "bad.hatchet_msgpack"
    bad.write_bytes(b"\x92\xc1")  # msgpack array head, then a reserved byte
    assert main(["intra", "view", str(bad)]) == 2


def _packet(*fields: bytes) -> bytes:
    return pb.field_bytes(1, b"".join(fields))


def _foreign_trace() -> bytes:
    """What a writer like tg4perfetto produces: thread tracks under a process track per SM, slices with plain names
    or names interned per sequence, 'cta'/'warp' annotations on some, and an instant (skipped)."""
    out = []
    for sm in range(2):
        out.append(_packet(pb.field_bytes(60, pb.field_varint(1, 100 + sm) + pb.field_bytes(3, pb.field_string(6, f"SM{sm}")))))
        for w in range(2):
            uuid = 1000 + 10 * sm + w
            thread = pb.field_varint(1, 1) + pb.field_varint(2, uuid) + pb.field_string(5, f"cta{sm} warp{w}")
            out.append(_packet(pb.field_bytes(60, pb.field_varint(1, uuid) + pb.field_varint(5, 100 + sm) + pb.field_bytes(4, thread))))
    seq = pb.field_varint(10, 7)
    interned = pb.field_bytes(12, pb.field_bytes(2, pb.field_varint(1, 1) + pb.field_string(2, "mma")))
    out.append(_packet(seq, pb.field_varint(13, 1), interned))
    t = 1_000
    for sm in range(2):
        for w in range(2):
            uuid = 1000 + 10 * sm + w
            ann = pb.field_bytes(4, pb.field_string(10, "warp") + pb.field_varint(4, w)) if w == 1 else b""
            out.append(_packet(pb.field_varint(8, t), seq, pb.field_bytes(11, pb.field_varint(9, 1) + pb.field_varint(11, uuid)
                                                                           + pb.field_string(23, "load") + ann)))
            out.append(_packet(pb.field_varint(8, t + 10), seq, pb.field_bytes(11, pb.field_varint(9, 1) + pb.field_varint(11, uuid)
                                                                                + pb.field_varint(10, 1))))  # interned "mma"
            out.append(_packet(pb.field_varint(8, t + 20), seq, pb.field_bytes(11, pb.field_varint(9, 2) + pb.field_varint(11, uuid))))
            out.append(_packet(pb.field_varint(8, t + 25), seq, pb.field_bytes(11, pb.field_varint(9, 3) + pb.field_varint(11, uuid)
                                                                                + pb.field_string(23, "mark"))))
            out.append(_packet(pb.field_varint(8, t + 40), seq, pb.field_bytes(11, pb.field_varint(9, 2) + pb.field_varint(11, uuid))))
            t += 100
    return b"".join(out)


def test_a_foreign_perfetto_trace_of_intra_kernel_slices(tmp_path, capsys):
    t = read_perfetto(_foreign_trace())
    assert t.height == 8  # 4 tracks x (load ⊃ mma); the instant is skipped
    by = t.group_by(pl.col("task").cast(pl.String)).agg(pl.len(), pl.col("duration_ns").sum()).sort("task")
    assert by.rows() == [("load", 4, 160), ("mma", 4, 40)]
    assert t["block"].n_unique() == 4 and set(t["sm"]) == {0, 1}  # a track per unit, its process track the SM
    assert set(t.filter(pl.col("group") == 1)["task"].cast(pl.String)) == {"load", "mma"}  # the 'warp' annotation
    p = tmp_path / "tg.perfetto-trace"
    p.write_bytes(_foreign_trace())
    assert main(["intra", "stats", str(p), "--format", "json"]) == 0
    scopes = {s["path"]: s["count"] for s in json.loads(capsys.readouterr().out)["scopes"]}
    assert scopes == {"load": 4, "load/mma": 4}


def _iket_doc() -> dict:
    """An IKET JSON trace in the shape NVIDIA's CUTLASS docs publish ("JSON Trace Shape", run-iket --postprocess json):
    a warp-specialized GEMM's two launches, 2 CTAs each; warp 4 the TMA producer, warp 0 the MMA consumer."""
    launches = []
    for n, (grid_id, kernel) in enumerate([(11, "gemm_kernel"), (12, "gemm_kernel")]):
        ranges, markers = [], []
        for cta in range(2):
            base = 10_000 * n + 1_000 * cta
            loc = {"smId": 2 * cta + n, "tpcId": 0, "gpcId": 0, "ctaId": [cta, 0, 0]}
            for k in range(3):  # three K tiles: the load of tile k overlaps the MMA of tile k - 1
                t = base + 100 * k
                ranges.append({"rangeName": "tma_k_tile", "rangeScope": 0, "startTs": t, "endTs": t + 60,
                               "warpLocs": [{**loc, "warpId": 4}], "internalEvents": []})
                ranges.append({"rangeName": "mma_k_tile", "rangeScope": 0, "startTs": t + 40, "endTs": t + 120,
                               "warpLocs": [{**loc, "warpId": 0}], "internalEvents": []})
            markers.append({"markerName": "epilogue_done", "timestamp": base + 400, "location": {**loc, "warpId": 0},
                            "payloadType": 0, "payloadVal": 0})
        launches.append({"gridId": grid_id, "kernelName": kernel, "ranges": ranges, "markers": markers,
                         "warpLifetimes": [{"startTs": 10_000 * n, "endTs": 10_000 * n + 2_000,
                                            "warpLocation": {"smId": 0, "tpcId": 0, "gpcId": 0, "ctaId": [0, 0, 0], "warpId": 0}}]})
    return {"launches": launches}


def test_iket_json_reads_as_tasks_per_warp_and_launch(tmp_path, capsys):
    """#28.3: NVIDIA's IKET JSON (CuTe DSL in-kernel event tracing), built from its published schema since run-iket
    needs a GPU and the nvidia-cutlass-dsl wheel: every range of every warp location is one task, durations are
    endTs - startTs exactly, CTAs of two launches never merge, and the warps are the groups (producer/consumer)."""
    doc = _iket_doc()
    path = tmp_path / "gemm.iket.json"
    path.write_text(json.dumps(doc))
    loaded = load_tasks(path)
    t = loaded.tasks
    assert loaded.source == "iket" and t.height == 2 * 2 * 3 * 2
    want = sum(r["endTs"] - r["startTs"] for ln in doc["launches"] for r in ln["ranges"])
    assert t["duration_ns"].sum() == want and t["block"].n_unique() == 4  # 2 launches x 2 CTAs
    assert sorted(set(t["group"].to_list())) == [0, 4] and set(t["task"].cast(pl.String)) == {"tma_k_tile", "mma_k_tile"}
    assert loaded.launches is not None and set(loaded.launches["markers"]) == {2}  # markers are counted, not tasks
    assert main(["intra", "stats", str(path), "--format", "json"]) == 0
    s = json.loads(capsys.readouterr().out)["summary"]
    assert len(s["launches"]) == 2
    mt = {(r["task_a"], r["task_b"]): r for r in s["group_overlap"]}[("mma_k_tile", "tma_k_tile")]
    # per CTA: MMAs [40, 120), [140, 220), [240, 320) against loads [0, 60), [100, 160), [200, 260): 5 x 20 = 100 of 240
    assert mt["blocks"] == 4 and mt["overlap_ns"] == 4 * 100 and mt["a_ns"] == 4 * 240
    doc["launches"][0]["ranges"][0]["endTs"] = None
    path.write_text(json.dumps(doc))
    assert main(["intra", "stats", str(path)]) == 2
    assert "ranges without a valid startTs/endTs" in capsys.readouterr().err


def _tasks(blocks: list[tuple[int, int, list[tuple[int, int]]]]) -> pl.DataFrame:
    """(block, sm, [(start, end) of its tasks]) as a task table."""
    rows = [{"block": b, "group": 0, "sm": sm, "task_type": 0, "task": "body", "start_ns": s, "end_ns": e,
             "duration_ns": e - s} for b, sm, spans in blocks for s, e in spans]
    return pl.DataFrame(rows).cast({"block": pl.Int64, "group": pl.Int64, "sm": pl.Int64, "task_type": pl.Int64,
                                    "start_ns": pl.Int64, "end_ns": pl.Int64, "duration_ns": pl.Int64})


def test_a_kernscope_export_of_several_launches_is_summarized_per_launch(tmp_path, capsys):
    """``intra run`` writes every profiled launch of a kernel into one Perfetto file, its blocks numbered across
    launches: ``intra stats`` finds the launches (a block starting after every earlier block ended opens one) and gives
    span, tail and SM busy per launch (over all six launches of the bundled H100 file it said a 225 ms span, SM busy
    0.1%); one block whose tasks follow each other stays one launch."""
    from kernscope.intra.export import write_perfetto

    two = _tasks([(0, 0, [(0, 100)]), (1, 1, [(10, 90)]), (2, 0, [(100, 200)]),  # launch 0: 0-200 ns
                  (3, 0, [(5000, 5100)]), (4, 1, [(5000, 5050), (5050, 5120)])])  # launch 1: 5,000-5,120 ns
    p = write_perfetto(two, tmp_path / "k.perfetto-trace", ["body"])
    loaded = load_tasks(p)
    assert loaded.launches is not None and loaded.launches.sort("block")["launch"].to_list() == [0, 0, 0, 1, 1]
    assert main(["intra", "stats", p, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(x["launch"], x["blocks"], x["span_ns"]) for x in doc["summary"]["launches"]] == [(0, 3, 200), (1, 2, 120)]
    # the table: no kernel column where the file names none (it was a column of dashes)
    assert main(["intra", "stats", p]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, ln in enumerate(lines) if "2 kernel launches in this trace" in ln)
    assert lines[at + 1].split()[:3] == ["launch", "blocks", "tasks"] and lines[at + 2].split()[:3] == ["0", "3", "3"]
    one = write_perfetto(_tasks([(0, 0, [(0, 10), (20, 30), (40, 50)])]), tmp_path / "one.perfetto-trace", ["body"])
    assert load_tasks(one).launches is None
    real = Path(__file__).parent / "data" / "align_h100" / "bias_gelu.perfetto-trace.gz"
    got = load_tasks(real).launches
    assert got is not None and got.group_by("launch").len()["len"].to_list() == [4096] * 6


def test_a_utf8_byte_order_mark_before_intra_json_is_a_blank(tmp_path, capsys):
    """Proton's Chrome trace and hatchet JSON with a UTF-8 byte order mark before them (Windows tools write one) read
    as without it (they were "not JSON, an .npz buffer, nor a Perfetto trace")."""
    bom = b"\xef\xbb\xbf"
    for name in ("proton_trace.chrome_trace", "proton_ops.hatchet"):
        marked = tmp_path / name
        marked.write_bytes(bom + (DATA / name).read_bytes())
        if name.endswith(".hatchet"):
            assert read_hatchet(str(marked)).equals(read_hatchet(str(DATA / name)))
            assert main(["intra", "view", str(marked)]) == 0
        else:
            assert load_tasks(str(marked)).tasks.equals(load_tasks(str(DATA / name)).tasks)
            assert main(["intra", "stats", str(marked)]) == 0
    capsys.readouterr()
