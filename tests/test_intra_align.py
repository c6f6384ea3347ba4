"""Intra-kernel records on the host timeline (issue #28, item 4): ``kernscope intra align``.

Real files (``tests/data/align_h100``): ``tests/data/train_with_triton.py`` run on an H100 under
``kernscope intra run --kernel bias_gelu`` (``benchmarks/gpu_session.sh intra3``): a Kineto trace of 4 active
steps, and kernscope's records of the Triton kernel's first 6 launches (2 warm-up steps the profiler skipped).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

import kernscope
from kernscope.cli import main
from kernscope.errors import KernscopeError
from kernscope.intra.align import align, split_launches
from kernscope.intra.io import load_tasks

DATA = Path(__file__).parent / "data" / "align_h100"
HOST, RECORDS = DATA / "train.pt.trace.json.gz", DATA / "bias_gelu.perfetto-trace.gz"


def test_real_run_every_matched_record_lies_inside_its_kernel():
    trace = kernscope.load(HOST, cache=False)
    tasks = load_tasks(RECORDS).tasks
    al = align(trace, tasks, "bias_gelu")
    raw = json.loads(gzip.decompress(HOST.read_bytes()))
    kernels = sorted(e["ts"] for e in raw["traceEvents"] if e.get("cat") == "kernel" and e["name"] == "bias_gelu")
    assert len(kernels) == 4 and al.launches.height == 6 and al.matched == 4
    got = al.launches.filter(pl.col("gpu_idx").is_not_null())
    assert got["launch"].to_list() == [2, 3, 4, 5]  # the two warm-up launches ran before the profiler's window
    assert got["kernel_ts"].to_list() == [round(ts * 1000) for ts in kernels]  # each launch to its own kernel, in order
    assert got["outside"].to_list() == [0, 0, 0, 0] and got["records"].to_list() == [4096] * 4
    assert (got["start_gap_ns"] >= 0).all() and got["start_gap_ns"].max() < 1_000  # first record right after the start
    assert got["fit_residual_ns"].abs().max() <= 1_000  # the goal: <= 1 µs per launch on %globaltimer records
    placed = al.tasks.filter(pl.col("gpu_idx").is_not_null()).join(
        trace.gpu.select(pl.col("idx").alias("gpu_idx"), "ts", "end"), on="gpu_idx")
    assert placed.height == 4 * 4096
    assert ((placed["start_ns"] >= placed["ts"]) & (placed["end_ns"] <= placed["end"])).all()
    assert any("2 of 6" in n for n in al.notes)


def _host(path: Path, kernels: list[tuple[int, int]], base: int, grids: list[int] | None = None) -> None:
    """A Kineto trace with kernels ``k`` at (ts_ns, dur_ns) on the trace's clock, each launched by a runtime call
    (grid: ``grids[i]`` blocks, default 8)."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::k", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1e6, "args": {"External id": 1}}]
    for i, (ts, dur) in enumerate(kernels):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts / 1000 - 5,
                   "dur": 3.0, "args": {"correlation": 100 + i, "External id": 1}})
        ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts / 1000, "dur": dur / 1000,
                   "args": {"device": 0, "stream": 7, "correlation": 100 + i, "grid": [grids[i] if grids else 8, 1, 1]}})
    path.write_text(json.dumps({"traceEvents": ev, "baseTimeNanoseconds": base}))


def _records(starts_gpu: list[int], dur: int, lag: int, blocks: int = 8) -> pl.DataFrame:
    """``blocks`` blocks per launch (numbered across launches, as files do), each from ``lag`` ns after the launch
    start (GPU timer ns) to ``dur - lag``."""
    rows = [{"block": blocks * j + b, "group": 0, "sm": b % 132, "task_type": 0, "task": "k", "start_ns": s + lag + 10 * (b % 8),
             "end_ns": s + dur - lag, "duration_ns": dur - 2 * lag - 10 * (b % 8)}
            for j, s in enumerate(starts_gpu) for b in range(blocks)]
    return pl.DataFrame(rows)


def test_offset_and_drift_are_recovered_and_unmatched_launches_said(tmp_path):
    base, offset, ppm = 1_700_000_000_000_000_000, 2_286_515, 25.0
    kernels = [(1_000_000 + 5_000_000 * i, 20_000) for i in range(5)]
    _host(tmp_path / "h.json", kernels, base)
    trace = kernscope.load(tmp_path / "h.json", cache=False)
    # the GPU timer: trace wall clock minus (offset + drift); one extra launch before the trace began
    gpu = [base + ts - offset - round(ppm * 1e-6 * (ts - kernels[0][0])) for ts, _ in kernels]
    al = align(trace, _records([gpu[0] - 9_000_000, *gpu], 20_000, 300), "k")
    assert al.matched == 5 and al.launches["gpu_idx"][0] is None and al.notes
    assert al.drift_ppm == pytest.approx(ppm, abs=0.5)  # the GPU timer runs slow here: the offset grows
    got = al.launches.drop_nulls("gpu_idx")
    assert got["start_gap_ns"].to_list() == [0] * 5 and got["outside"].sum() == 0
    assert got["fit_residual_ns"].abs().max() <= 1
    assert abs(al.offset_ns - (offset - 300)) <= 1  # the line meets each launch's first record at its kernel start


def test_grid_decides_between_kernels_of_one_name(tmp_path):
    """Two launches of ``k`` with other grids, either of which the records' times fit: the launch goes to the kernel
    whose grid can hold its blocks (Kineto's ``grid`` arg), an exact grid first; the launches table says so."""
    _host(tmp_path / "h.json", [(1_000_000, 20_000), (3_000_000, 20_000)], 0, grids=[8, 64])
    trace = kernscope.load(tmp_path / "h.json", cache=False)
    wide = align(trace, _records([10**12], 19_000, 100, blocks=64), "k")  # 64 blocks: only the second kernel holds them
    row = wide.launches.row(0, named=True)
    assert wide.matched == 1 and row["kernel_ts"] == 3_000_000 and row["grid_blocks"] == 64 and row["grid_check"] == "equal"
    narrow = align(trace, _records([10**12], 19_000, 100, blocks=8), "k")  # both hold 8 blocks: the exact grid wins
    row = narrow.launches.row(0, named=True)
    assert row["kernel_ts"] == 1_000_000 and row["grid_check"] == "equal"
    _host(tmp_path / "h2.json", [(1_000_000, 20_000), (3_000_000, 20_000)], 0, grids=[4, 4])
    none = kernscope.load(tmp_path / "h2.json", cache=False)
    with pytest.raises(KernscopeError, match="were they recorded in the same run"):  # no kernel's grid holds 8 blocks
        align(none, _records([10**12], 19_000, 100, blocks=8), "k")


def test_split_launches_by_time():
    t = _records([0, 100_000, 100_000 + 20_000 + 1], 20_000, 0)
    assert split_launches(t).group_by("launch").len().sort("launch")["len"].to_list() == [8, 8, 8]
    # a one-program kernel (grid 1) whose two scopes follow each other: one launch per block, not per scope (by
    # records, each scope opened a launch of its own: 4 launches of 1 record that no kernel's grid of 1 could tell apart)
    one = pl.DataFrame({"block": [0, 0, 1, 1], "group": 0, "sm": 0, "task_type": 0, "task": ["a", "b", "a", "b"],
                        "start_ns": [0, 60, 1_000, 1_060], "end_ns": [50, 110, 1_050, 1_110]}).with_columns(
        (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))
    assert split_launches(one).sort("start_ns")["launch"].to_list() == [0, 0, 1, 1]


def test_errors_are_one_line(tmp_path, capsys):
    _host(tmp_path / "h.json", [(1_000_000, 20_000)], 0)
    trace = kernscope.load(tmp_path / "h.json", cache=False)
    with pytest.raises(KernscopeError, match="no kernel named 'nope'"):
        align(trace, _records([1_000_000], 20_000, 0), "nope")
    with pytest.raises(KernscopeError, match="were they recorded in the same run"):
        align(trace, _records([1_000_000], 10_000_000, 0), "k")  # a launch far longer than any kernel k
    far = align(trace, _records([10**15], 20_000, 0), "k")  # one launch, one kernel: it fits, but the clocks disagree
    assert far.matched == 1 and any("different runs" in n for n in far.notes)
    proton = Path(__file__).parent / "data" / "proton_h100" / "tutorial_override.chrome_trace.gz"
    assert main(["intra", "align", str(tmp_path / "h.json"), str(proton)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SM cycles with no known clock" in err[0]
    assert main(["intra", "align", str(HOST), str(RECORDS), "-o", str(tmp_path / "m.txt")]) == 2
    assert "Chrome/Kineto JSON (.json, .json.gz), a Perfetto trace (.perfetto-trace, .pftrace" in capsys.readouterr().err
    assert not (tmp_path / "m.txt").exists()
    (tmp_path / "other.json.gz").write_bytes(HOST.read_bytes())
    assert main(["report", str(HOST), str(tmp_path / "other.json.gz"), "--intra", str(RECORDS), "-o", str(tmp_path / "r.html")]) == 2
    assert "give one trace, not a job" in capsys.readouterr().err


def test_cli_writes_one_merged_trace_that_analyze_reads_the_same(tmp_path, capsys):
    out = tmp_path / "merged.json.gz"
    assert main(["intra", "align", str(HOST), str(RECORDS), "-o", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (a,) = doc["alignments"]
    assert a["kernel"] == "bias_gelu" and a["matched"] == 4 and len(a["launches"]) == 6
    merged = json.loads(gzip.decompress(out.read_bytes()))
    host = json.loads(gzip.decompress(HOST.read_bytes()))
    added = merged["traceEvents"][len(host["traceEvents"]):]
    assert merged["traceEvents"][: len(host["traceEvents"])] == host["traceEvents"]  # the host's events untouched
    records = [e for e in added if e["ph"] == "X"]
    assert len(records) == 4 * 4096 and {e["cat"] for e in records} == {"intra_kernel"}
    assert {e["pid"] for e in records} == {0}  # the GPU's process, as its kernels
    names = {e["args"]["name"] for e in added if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(n.startswith("stream 7 \u21b3 bias_gelu \u00b7 SM ") for n in names)
    facts = []
    for p in (HOST, out):  # kernscope still reads the merged file, with the host's numbers
        assert main(["analyze", str(p), "--format", "json", "--no-cache"]) == 0
        t = json.loads(capsys.readouterr().out)["trace"]
        facts.append((t["kernels"], t["gpu_events"], t["kernel_time_us"]))
    assert facts[0] == facts[1] == (53, 77, pytest.approx(11560.038))


def test_timeline_rows_sit_below_their_stream_one_row_per_sm_lane():
    from kernscope.intra.align import placed, timeline_rows

    trace = kernscope.load(HOST, cache=False)
    al = align(trace, load_tasks(RECORDS).tasks, "bias_gelu")
    rows = timeline_rows([al])
    assert rows.height == 4 * 4096 and set(rows["stream"]) == {7} and set(rows["device"]) == {0}
    k = trace.gpu.select(pl.col("idx").alias("gpu_idx"), pl.col("ts").alias("k_ts"), pl.col("end").alias("k_end"))
    inside = rows.join(k, on="gpu_idx")
    assert ((inside["ts"] >= inside["k_ts"]) & (inside["ts"] + inside["dur"] <= inside["k_end"])).all()
    p = placed(al)
    lanes = p.select("sm", "lane").unique().height
    assert sorted(rows["sub"].unique()) == list(range(1, lanes + 1))  # one row per (SM, lane), numbered from 1
    # a row never holds two overlapping units of one launch (the lanes' promise)
    u = (p.group_by("launch", "block", "group", "sm", "lane").agg(pl.col("start_ns").min().alias("s"),
                                                                 pl.col("end_ns").max().alias("e"))
         .sort("sm", "lane", "s"))
    prev_end = u.select(pl.col("e").shift(1).over("sm", "lane")).to_series()
    assert ((prev_end.is_null()) | (u["s"] >= prev_end)).all()
    assert all(lbl.startswith("\u21b3 bias_gelu \u00b7 SM ") for lbl in rows["label"].unique())
    assert set(rows["category"]) == {"intra \u00b7 " + n for n in p["task"].cast(pl.String).unique()}
    only_first = timeline_rows([al], al.launches["gpu_idx"].drop_nulls().head(1))
    assert only_first.height == 4096  # the report's step window keeps the records under its kernels only


def test_report_intra_adds_the_launches_sheet_and_timeline_rows(tmp_path, capsys):
    from kernscope.analyze.summary import analyze as run
    from kernscope.intra.align import align_files, timeline_rows
    from kernscope.render.html.analysis import timeline_data

    out = tmp_path / "csv"
    assert main(["report", str(HOST), "--intra", str(RECORDS), "-o", str(out), "--no-cache"]) == 0
    sheet = pl.read_csv(out / "intra_launches.csv")
    assert sheet.height == 6 and sheet["kernel"].unique().to_list() == ["bias_gelu"]
    assert sheet["gpu_idx"].null_count() == 2 and sheet.filter(pl.col("gpu_idx").is_not_null())["outside"].sum() == 0
    trace = kernscope.load(HOST, cache=False)
    a = run(trace)
    rows = timeline_rows([al for _, al in align_files(trace, [str(RECORDS)])])
    tl = timeline_data(a.gpu, a.trace.steps, None, rows)
    labels = [ln["label"] for ln in tl["lanes"]]
    at = labels.index("GPU 0 \u00b7 stream 7")
    subs = labels[at + 1: at + 1 + int(rows["sub"].max())]  # type: ignore[arg-type]  # polars' scalar: an int here
    assert all(lbl.startswith("\u21b3 bias_gelu") for lbl in subs)  # right below the kernel's stream
    first = tl["lane_first"]
    n_intra = sum(first[i + 1] - first[i] for i, lbl in enumerate(labels) if lbl.startswith("\u21b3"))
    assert n_intra == 4 * 4096 and first[-1] == a.gpu.height + 4 * 4096
    html = tmp_path / "m.html"
    assert main(["intra", "align", str(HOST), str(RECORDS), "-o", str(html)]) == 0
    assert "intra_launches" in html.read_text() and "bias_gelu" in html.read_text()


def _read_pftrace(data: bytes) -> tuple[dict[int, dict], list[dict]]:
    """Tracks (uuid -> name, parent, pid) and slices (track, name, cat, ts, end, flows, args) of a Perfetto trace, read
    packet by packet with strict begin/end pairing per track (a test-side reader, independent of the writer)."""
    from kernscope.intra import protobuf as pb

    tracks: dict[int, dict] = {}
    names: dict[int, str] = {}
    cats: dict[int, str] = {}
    args: dict[int, str] = {}
    open_: dict[int, list[dict]] = {}
    slices: list[dict] = []
    last_ts = -1
    for f, _, pkt in pb.iter_fields(data):
        assert f == 1
        d: dict[int, list] = {}
        for pf, _, v in pb.iter_fields(pkt):
            d.setdefault(pf, []).append(v)
        for v in d.get(12, []):  # interned data
            for idf, _, entry in pb.iter_fields(v):
                e = {k: val for k, _, val in pb.iter_fields(entry)}
                {1: cats, 2: names, 3: args}[idf][e[1]] = bytes(e[2]).decode()
        for v in d.get(60, []):  # track descriptor
            t = {k: val for k, _, val in pb.iter_fields(v)}
            pid = None
            if 3 in t:
                pid = {k: val for k, _, val in pb.iter_fields(t[3])}.get(1)
            tracks[t[1]] = {"name": bytes(t[2]).decode(), "parent": t.get(5), "pid": pid}
        if 11 not in d:
            continue
        ts = d[8][0]
        assert ts >= last_ts  # packets in time order
        last_ts = ts
        te: dict[int, list] = {}
        for ef, _, v in pb.iter_fields(d[11][0]):
            te.setdefault(ef, []).append(v)
        typ, trk = te[9][0], te[11][0]
        assert trk in tracks
        if typ in (1, 3):
            ann = {}
            for v in te.get(4, []):
                a = {k: val for k, _, val in pb.iter_fields(v)}
                ann[args[a[1]]] = a[4]
            s = {"track": trk, "name": names[te[10][0]], "cat": cats[te[3][0]], "ts": ts, "end": ts,
                 "flows": [int.from_bytes(x, "little") if isinstance(x, bytes) else x for x in te.get(47, [])], "args": ann}
            if typ == 1:
                open_.setdefault(trk, []).append(s)
            else:
                slices.append(s)
        else:
            s = open_[trk].pop()  # an end closes the innermost open slice of its track
            s["end"] = ts
            slices.append(s)
    assert not any(open_.values())
    return tracks, slices


def test_merged_perfetto_trace_holds_every_event_flows_and_the_records_under_their_kernel(tmp_path, capsys):
    out = tmp_path / "merged.perfetto-trace"
    assert main(["intra", "align", str(HOST), str(RECORDS), "-o", str(out), "-q"]) == 0
    tracks, slices = _read_pftrace(out.read_bytes())
    raw = json.loads(gzip.decompress(HOST.read_bytes()))["traceEvents"]
    want = sorted((e["name"], round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e.get("dur", 0) * 1000))
                  for e in raw if e.get("ph") in ("X", "i"))
    host = [s for s in slices if s["cat"] != "intra_kernel"]
    assert sorted((s["name"], s["ts"], s["end"]) for s in host) == want  # every event, its times exact (ns)
    # the streams and threads are tracks under their processes, named as the trace names them
    stream = next(u for u, t in tracks.items() if t["name"].strip() == "stream 7")
    assert tracks[tracks[stream]["parent"]]["pid"] == 0
    # a flow joins each kernel to the runtime call that launched it
    kernels = [s for s in host if s["cat"] == "kernel"]
    by_flow: dict = {}
    for s in host:
        for f in s["flows"]:
            by_flow.setdefault(f, []).append(s)
    linked = kernscope.load(HOST, cache=False).gpu.filter(pl.col("kind") == "kernel")["launch_idx"].is_not_null().sum()
    assert sum(len(s["flows"]) == 1 for s in kernels) == linked == 52 and all(len(s["flows"]) <= 1 for s in kernels)
    for s in (s for s in kernels if s["flows"]):
        launch = [x for x in by_flow[s["flows"][0]] if x["cat"] != "kernel"]
        assert len(launch) == 1 and launch[0]["cat"] in ("cuda_runtime", "cuda_driver")
        assert launch[0]["args"]["correlation"] == s["args"]["correlation"] and launch[0]["ts"] < s["ts"]
    # the records: on child tracks of the kernel's stream, each inside one bias_gelu kernel
    intra = [s for s in slices if s["cat"] == "intra_kernel"]
    assert len(intra) == 4 * 4096 and {tracks[s["track"]]["parent"] for s in intra} == {stream}
    spans = sorted((s["ts"], s["end"]) for s in kernels if s["name"] == "bias_gelu")
    assert all(any(a <= s["ts"] and s["end"] <= b for a, b in spans) for s in intra)
    assert {s["args"]["block"] for s in intra} == set(range(2 * 4096, 6 * 4096))  # launches 2..5 (0, 1: warm-up)
    assert main(["intra", "align", str(HOST), str(RECORDS), "-o", str(tmp_path / "m.pftrace.gz"), "-q"]) == 0
    assert gzip.decompress((tmp_path / "m.pftrace.gz").read_bytes()) == out.read_bytes()


def test_merged_perfetto_trace_reads_with_perfettos_own_schema(tmp_path):
    """Perfetto's published schema (the generated ``perfetto_trace_pb2`` of the ``perfetto`` package, used here only
    as a cross-check) reads every packet of the merged file, with no field it does not know."""
    from google.protobuf.unknown_fields import UnknownFieldSet
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent

    out = tmp_path / "merged.perfetto-trace"
    assert main(["intra", "align", str(HOST), str(RECORDS), "-o", str(out), "-q"]) == 0
    t = Trace.FromString(out.read_bytes())
    unknown = []

    def walk(m):
        unknown.extend(UnknownFieldSet(m))
        for fd, v in m.ListFields():
            if fd.type == fd.TYPE_MESSAGE:
                for x in (v if fd.is_repeated else [v]):
                    walk(x)

    for p in t.packet:
        walk(p)
    assert unknown == []
    events = [p.track_event for p in t.packet if p.HasField("track_event")]
    begins = sum(e.type == TrackEvent.TYPE_SLICE_BEGIN for e in events)
    assert begins == sum(e.type == TrackEvent.TYPE_SLICE_END for e in events)
    raw = json.loads(gzip.decompress(HOST.read_bytes()))["traceEvents"]
    assert begins + sum(e.type == TrackEvent.TYPE_INSTANT for e in events) == \
        sum(e.get("ph") in ("X", "i") for e in raw) + 4 * 4096
    tracks = {p.track_descriptor.uuid: p.track_descriptor for p in t.packet if p.HasField("track_descriptor")}
    assert {e.track_uuid for e in events} <= set(tracks)
    assert {tracks[u].process.pid for u in tracks if tracks[u].HasField("process")} >= {0, 1092}
