"""Time windows of a JAX profile decoded alone (``xplane.time_cuts`` + ``decode(window=...)``): the first stage of a
streamed analysis. Each window reads only its events' bytes; put together, the windows give the whole profile's table
(the same rows, ``idx`` and values), but for the two things of a row that other rows decide (below)."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_jax import MLP, TRACELENS_JAX, TRANSFORMER, _event, _field, _odd_profile, _varint, xspace_bytes

from kernscope.errors import TraceError
from kernscope.load.native import scanner

xplane = importlib.import_module("kernscope.load.xplane")
pytestmark = pytest.mark.skipif(scanner() is None, reason="time windows need the compiled XSpace scanner")


def _files() -> list:
    kernels = Path(__file__).parent / "data" / "jax_kernels_h200"  # Pallas, Mosaic, library calls, control flow
    files = [MLP, TRANSFORMER, *sorted(kernels.glob("*/vm.xplane.pb.gz"))]
    if TRACELENS_JAX.is_dir():
        files += sorted(TRACELENS_JAX.glob("*.xplane.pb"))
    return files


def _text(d: pl.DataFrame) -> pl.DataFrame:
    return d.with_columns(pl.col(c).cast(pl.String) for c, t in d.schema.items() if t == pl.Categorical)


def _windows(data: bytes, cuts) -> list[pl.DataFrame]:
    return [xplane.decode(data, "p", window=xplane.Window(cuts, k)).events for k in range(cuts.times.shape[1] + 1)]


def _differing(whole: pl.DataFrame, parts: list[pl.DataFrame]) -> dict[str, pl.Series]:
    """The rows (as a mask) of each column where the windows put together differ from the whole profile's table."""
    joined = _text(pl.concat(parts, how="vertical_relaxed").sort("idx"))
    w = _text(whole)
    assert joined.columns == w.columns
    assert joined["idx"].to_list() == w["idx"].to_list()  # every event once, numbered as in the whole profile
    return {c: ~w[c].eq_missing(joined[c]) for c in w.columns if not w[c].eq_missing(joined[c]).all()}


def _explained(whole: pl.DataFrame, diff: dict[str, pl.Series]) -> None:
    """What may differ, and only where it may: a host event's category where its name is an HLO op or module that
    GPU rows of another window name (the decode makes such host events ops); the HLO columns of a command buffer's
    library kernels whose run a cut splits (they are matched to the buffer's custom calls by the whole run)."""
    w = _text(whole)
    hlo_names = set(w["hlo_op"].drop_nulls().to_list()) | set(w["hlo_module"].drop_nulls().to_list())
    for c, mask in diff.items():
        rows = w.filter(mask)
        if c == "cat":
            assert rows["device"].is_null().all() and set(rows["name"].to_list()) <= hlo_names, rows
        else:
            assert c in xplane.HLO_COLUMNS, (c, rows)
            assert rows["device"].is_not_null().all() and rows["hlo_op"].str.starts_with("command_buffer").all(), rows


@pytest.mark.parametrize("path", _files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_windows_put_together_are_the_whole_profile(path):
    data = xspace_bytes(path)
    whole = xplane.decode(data, "p").events
    gpu_ts = whole.filter(pl.col("device").is_not_null())["ts"].to_numpy()
    # cuts inside the GPU work, one exactly at an event's start (it starts the later window), one at the first GPU
    # row (the window before holds host events only), one before everything and one after everything (empty windows)
    times = [*np.quantile(gpu_ts, [0.2, 0.5, 0.8]).astype(np.int64).tolist(), int(gpu_ts[len(gpu_ts) // 3]),
             int(gpu_ts.min()), int(whole["ts"].min()) - 1, int(whole["ts"].max()) + 10]
    cuts = xplane.time_cuts(data, "p", times)
    assert cuts is not None
    parts = _windows(data, cuts)
    edges = [None, *sorted(times), None]
    for k, part in enumerate(parts):  # each window holds the events that start in it
        lo, hi = edges[k], edges[k + 1]
        assert lo is None or (part["ts"] >= lo).all()
        assert hi is None or (part["ts"] < hi).all()
    assert parts[0].height == 0 and parts[-1].height == 0
    host_only = parts[1]  # before the first GPU row
    assert host_only.height > 0 and host_only["device"].is_null().all()
    assert sum(p.height for p in parts) == whole.height
    _explained(whole, _differing(whole, parts))


def test_each_line_cut_at_its_own_times():
    """Each GPU stream cut where the work launched after the host's cut starts: a window then holds its kernels with
    their launches, and a command buffer's library kernels whole."""
    data = xspace_bytes(TRANSFORMER)
    whole = xplane.decode(data, "p").events
    plane, ids = xplane.lines_of(data, "p")
    assert ids.size == plane.size and set(whole["tid"].unique().to_list()) <= {str(i) for i in ids.tolist()}
    gpu = whole.filter(pl.col("device").is_not_null())
    host = whole.filter(pl.col("device").is_null() & pl.col("correlation").is_not_null())
    linked = gpu.join(host.select(pl.col("ts").alias("launch_ts"), "correlation"), on="correlation", how="inner")
    cut_at = np.quantile(host["ts"].to_numpy(), [0.25, 0.5, 0.75]).astype(np.int64)
    times = np.broadcast_to(cut_at, (ids.size, cut_at.size)).copy()
    gpu_tids = set(gpu["tid"].cast(pl.String).unique().to_list())
    assert not gpu_tids & set(whole.filter(pl.col("device").is_null())["tid"].cast(pl.String).unique().to_list())
    per_line = 0
    for li, line_id in enumerate(ids.tolist()):
        rows = linked.filter(pl.col("tid").cast(pl.String) == str(line_id)).sort("ts")
        if rows.height == 0:
            continue
        per_line += 1
        for k, t in enumerate(cut_at.tolist()):
            after = rows.filter(pl.col("launch_ts") >= t)
            times[li, k] = after["ts"][0] if after.height else np.iinfo(np.int64).max
    assert per_line >= 1
    cuts = xplane.time_cuts(data, "p", times)
    assert cuts is not None
    parts = _windows(data, cuts)
    diff = _differing(whole, parts)
    assert not any(c in xplane.HLO_COLUMNS for c in diff)  # no command buffer's run split
    _explained(whole, diff)
    for part in parts:  # every kernel's launch in its window
        g = part.filter(pl.col("device").is_not_null() & pl.col("correlation").is_not_null())
        h = part.filter(pl.col("device").is_null() & pl.col("correlation").is_not_null())
        assert g.join(h, on="correlation", how="anti").height == 0


def _ordered_profile(timestamp_last: bool) -> bytes:
    """A GPU line of three events in time order; its timestamp_ns written after the events or before them."""
    names = {1: "correlation_id"}
    smd = b"".join(_field(5, _varint(1 << 3) + _varint(i) + _field(2, _varint(1 << 3) + _varint(i) + _field(2, n.encode())))
                   for i, n in names.items())
    emd = _field(4, _varint(1 << 3) + _varint(1) + _field(2, _varint(1 << 3) + _varint(1) + _field(2, b"kern_a")))
    events = b"".join(_event(1, off, 1000) for off in (1_000_000, 2_000_000, 3_000_000))
    ts = _varint(3 << 3) + _varint(5000)
    line = _varint(1 << 3) + _varint(5) + _field(2, b"stream 5") + (events + ts if timestamp_last else ts + events)
    return _field(1, _varint(1 << 3) + _varint(1) + _field(2, b"/device:GPU:0") + _field(3, line) + emd + smd)


@pytest.mark.parametrize("timestamp_last", [False, True])
def test_a_window_is_timed_by_its_line_header(timestamp_last):
    data = _ordered_profile(timestamp_last)
    cuts = xplane.time_cuts(data, "p", [5000 + 2000])  # line start 5000 ns + 2,000,000 ps = 7000 ns: the 2nd event
    assert cuts is not None
    first, second = _windows(data, cuts)
    assert first["ts"].to_list() == [6000]
    assert second["ts"].to_list() == [7000, 8000]
    assert second["idx"].to_list() == [1, 2] and second["tid"].to_list() == ["5", "5"]


def test_a_line_out_of_time_order_cannot_be_cut():
    assert xplane.time_cuts(_odd_profile(), "p", [10_000]) is None  # its events start at 1.5, 1, 11 and 21 ns


def test_without_the_compiled_scanner_there_are_no_windows(monkeypatch):
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    assert xplane.time_cuts(xspace_bytes(MLP), "p", [0]) is None


def test_damaged_profile_is_named(tmp_path):
    data = xspace_bytes(MLP)
    with pytest.raises(TraceError, match="damaged"):
        xplane.time_cuts(data[: len(data) // 2], "cut.xplane.pb", [0])


# -- the plan: windows cut at quiet points, equal to the whole profile in every column ---------------------------------
xplan = importlib.import_module("kernscope.load.xplan")


@pytest.mark.parametrize("path", _files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_planned_windows_are_the_whole_profile_in_every_column(path):
    data = xspace_bytes(path)
    whole = xplane.decode(data, "p").events
    plan = xplan.plan(data, "p", 3)
    assert plan is not None and plan.windows >= 2  # every real profile here has quiet points
    assert plan.shared.hlo_names is not None
    parts = [xplane.decode(data, "p", window=xplane.Window(plan.cuts, k), shared=plan.shared).events
             for k in range(plan.windows)]
    assert all(p.height for p in parts)
    assert _differing(whole, parts) == {}
    # each cut's next step: the first step annotation's start at or after it (where the last step before it ends)
    steps = np.unique(whole.filter(pl.col("step_num").is_not_null() & pl.col("device").is_null())["ts"].to_numpy())
    for t, after in zip(plan.cuts.times[0].tolist(), plan.step_after.tolist()):
        later = steps[steps >= t]
        assert after == (int(later[0]) if later.size else -1)
    if path in (MLP, TRANSFORMER):  # (3 steps each, recorded with StepTraceAnnotation)
        assert (plan.step_after > 0).all()
    # the profile's parts read once are what each window reads alone
    alone = xplane.decode(data, "p", window=xplane.Window(plan.cuts, 1)).events
    shared = parts[1]
    assert _text(alone).drop("cat").equals(_text(shared).drop("cat"))


def test_quiet_points_are_where_nothing_runs_and_nothing_is_pending():
    # line 0: a host thread; line 1: a GPU stream. Host events [0, 10) [10, 20) [20, 40) [25, 30) [40, 50), launches at
    # 12 (correlation 1) and 41 (correlation 2); the GPU rows of 1 at [15, 18), of 2 at [44, 46)
    line = np.array([0, 0, 0, 0, 0, 0, 0, 1, 1])
    ts = np.array([0, 10, 12, 20, 25, 40, 41, 15, 44])
    dur = np.array([10, 10, 1, 20, 5, 10, 1, 3, 2])
    corr = pl.Series([None, None, 1, None, None, None, 2, 1, 2], dtype=pl.Int64)
    got = xplan.quiet_points(line, ts, dur, corr, np.array([False, True]))
    # 10: nothing runs (the first event ends at 10), nothing launched; 12: inside [10, 20); 20: row 1 ended at 18;
    # 25 and 41: inside [20, 40) and [40, 50); 40: nothing runs, nothing pending; 0 is the first event's start
    assert got.tolist() == [10, 20, 40]
    # a GPU row launched at 12 that starts only at 21: 20 is no longer quiet (its work is pending)
    late = ts.copy()
    late[7] = 21
    assert xplan.quiet_points(line, late, dur, corr, np.array([False, True])).tolist() == [10, 40]
    # a GPU row of correlation 2 at [38, 40), before its launch at 41: nothing runs at 40, but a cut there parts them
    early = ts.copy()
    early[8] = 38
    assert xplan.quiet_points(line, early, dur, corr, np.array([False, True])).tolist() == [10, 20]
    # a line out of time order: no answer
    assert xplan.quiet_points(line, ts[[1, 0, 2, 3, 4, 5, 6, 7, 8]], dur, corr, np.array([False, True])) is None


@pytest.mark.parametrize("seed", range(6))
def test_quiet_points_equal_their_definition_on_random_lines(seed):
    # the definition checked point by point: a host start after the first event's at which no event of any line started
    # before it ends after it, and no correlation's host launch lies before it with one of its GPU rows at or after it,
    # nor one of its GPU rows before it with its launch at or after it (a row that starts before its launch: a damaged
    # or reused id, which the whole profile's link still pairs)
    rng = np.random.default_rng(seed)
    lines, gpu_line = 5, np.array([False, False, False, True, True])
    line, ts, dur = [], [], []
    for li in range(lines):
        n = int(rng.integers(5, 40))
        s = np.sort(rng.integers(0, 400, n))
        line += [li] * n
        ts += s.tolist()
        dur += rng.integers(0, 12 if li < 3 else 6, n).tolist()
    line_a, ts_a, dur_a = np.array(line), np.array(ts, dtype=np.int64), np.array(dur, dtype=np.int64)
    corr = np.where(rng.random(ts_a.size) < 0.3, rng.integers(0, 15, ts_a.size), -1)
    corr_s = pl.Series([None if c < 0 else int(c) for c in corr], dtype=pl.Int64)
    got = xplan.quiet_points(line_a, ts_a, dur_a, corr_s, gpu_line)
    first = int(ts_a.min())
    host = ~gpu_line[line_a]
    want = []
    for t in sorted(set(ts_a[host].tolist())):
        if t <= first or ((ts_a < t) & (ts_a + dur_a > t)).any():
            continue
        pending = False
        for c in set(corr[corr >= 0].tolist()):
            launch = ts_a[(corr == c) & host]
            rows = ts_a[(corr == c) & ~host]
            if launch.size and rows.size and min(launch.min(), rows.min()) < t <= max(launch.min(), rows.max()):
                pending = True
        if not pending:
            want.append(t)
    assert got is not None and got.tolist() == want


def test_no_plan_for_one_window_or_without_the_compiled_scanner(monkeypatch):
    data = xspace_bytes(MLP)
    assert xplan.plan(data, "p", 1) is None
    monkeypatch.setenv("KERNSCOPE_NO_NATIVE", "1")
    assert xplan.plan(data, "p", 3) is None


@pytest.mark.parametrize("path", [MLP, TRANSFORMER], ids=lambda p: p.parent.name)
def test_quiet_points_found_chunk_by_chunk_are_those_of_the_whole(path, monkeypatch):
    whole = xplane.decode(xspace_bytes(path), "p").events
    lines = whole.select("pid", "tid").unique(maintain_order=True).with_row_index("line")
    ev = whole.join(lines, on=["pid", "tid"]).select("line", "ts", "dur", "correlation", "device")
    gpu = ev.group_by("line").agg(pl.col("device").is_not_null().any().alias("g"))
    gpu_line = lines.join(gpu, on="line", how="left", maintain_order="left")["g"].to_numpy()
    ev = ev.sort("line", "ts", maintain_order=True)

    def found(parts: int) -> np.ndarray:
        q = xplan._Quiet(gpu_line, int(ev["ts"].min()))
        edges = np.linspace(int(ev["ts"].min()), int(ev["ts"].max()) + 1, parts + 1)
        for a, b in zip(edges[:-1], edges[1:]):
            c = ev.filter((pl.col("ts") >= a) & (pl.col("ts") < b))
            q.add(c["line"].cast(pl.Int64).to_numpy(), c["ts"].to_numpy(), c["dur"].to_numpy(), c["correlation"])
        points, before = q.result()
        assert before.tolist() == [int((ev["ts"] < t).sum()) for t in points.tolist()]  # the events before each
        return points

    one = found(1)
    assert one.size >= 3
    assert found(7).tolist() == one.tolist() == found(40).tolist()
    # the plan in many small chunks cuts where it cuts in one
    data = xspace_bytes(path)
    in_one = xplan.plan(data, "p", 3)
    monkeypatch.setattr(xplan, "CHUNK_BYTES", 2048)
    in_many = xplan.plan(data, "p", 3)
    assert in_one is not None and in_many is not None
    assert in_many.cuts.times.tolist() == in_one.cuts.times.tolist()


@pytest.mark.parametrize("path", [MLP, TRANSFORMER, *sorted(TRACELENS_JAX.glob("*.xplane.pb"))], ids=lambda p: p.name)
def test_cuts_from_the_sparse_index_are_those_of_a_whole_walk(path):
    xscan = importlib.import_module("kernscope.load.xscan")
    from kernscope.load.protowire import as_array

    data = xspace_bytes(path)
    buf = as_array(data)
    _, off, size = xplane._line_spans(xplane._planes(buf, len(data), "p")[0])
    for stride in (1, 3, 64, 512):
        index = xscan.line_index(buf, off, size, stride)
        timed = index.span[:, 0] <= index.span[:, 1]
        lo, hi = int(index.span[timed, 0].min()), int(index.span[timed, 1].max())
        rng = np.random.default_rng(stride)
        # random times, every kind of edge: an indexed event's start, the first and last starts, before and after all
        times = np.unique(np.concatenate([rng.integers(lo - 10, hi + 10, 40), index.start[rng.integers(0, index.start.size, 10)],
                                          [lo, hi, lo - 1, hi + 1]]))
        got, want = index.cuts(times), xscan.time_cuts(buf, off, size, times)
        for field in ("times", "at", "before", "hdr", "span"):
            assert np.array_equal(getattr(got, field), getattr(want, field)), (stride, field)


def _resident_kb(path: Path) -> int:
    """The kB of ``path``'s mapping in this process's memory (/proc/self/smaps: its Rss)."""
    kb, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):  # a mapping's first line
            inside = head[-1] == str(path)
        elif inside and line.startswith("Rss:"):
            kb += int(head[1])
    return kb


LONG = Path(__file__).parent / "data" / "jax_long_h200" / "vm.xplane.pb.gz"  # (40 steps, one H200)


def _mapped(path: Path, tmp_path: Path):
    """``path``'s profile written to a file, out of the page cache (read from disk when touched, as a profile that
    was not just written is), and mapped read-only: (file, mapping, its array, its lines' offsets and lengths)."""
    import mmap
    import os

    from kernscope.load.protowire import as_array

    file = tmp_path / "vm.xplane.pb"
    file.write_bytes(xspace_bytes(path))
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    buf = as_array(data)
    _, off, size = xplane._line_spans(xplane._planes(buf, len(data), "p")[0])
    return file, data, buf, off, size


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="the resident pages are read from /proc (Linux)")
@pytest.mark.parametrize("path", [MLP, TRANSFORMER, LONG], ids=lambda p: p.parent.name)
def test_the_plan_gives_back_the_pages_it_walked_and_plans_alike(path, tmp_path, monkeypatch):
    import mmap

    xscan = importlib.import_module("kernscope.load.xscan")
    file, data, buf, off, size = _mapped(path, tmp_path)
    data.madvise(mmap.MADV_DONTNEED)
    kept = xscan.line_index(buf, off, size, 512)
    held = _resident_kb(file)
    data.madvise(mmap.MADV_DONTNEED)
    assert _resident_kb(file) == 0
    given = xscan.line_index(buf, off, size, 512, release=8192)
    for field in ("line", "off", "start", "count", "hdr", "span", "total"):  # the same index
        assert np.array_equal(getattr(given, field), getattr(kept, field)), field
    gave = _resident_kb(file)
    # the plan, giving back the pages of each chunk it reads (many small chunks here), cuts where it cuts holding them
    data.madvise(mmap.MADV_DONTNEED)
    plain = xplan.plan(data, str(file), 3)
    plan_held = _resident_kb(file)
    data.madvise(mmap.MADV_DONTNEED)
    monkeypatch.setattr(xplan, "CHUNK_BYTES", 1 << 16)
    released = xplan.plan(data, str(file), 3, release_pages=True)
    plan_gave = _resident_kb(file)
    assert plain is not None and released is not None
    assert released.cuts.times.tolist() == plain.cuts.times.tolist()
    assert released.step_after.tolist() == plain.step_after.tolist() and released.shared.hlo_names == plain.shared.hlo_names
    if path == LONG:  # (3.3 MB, 2.4 MB of it events: the kernel maps pages around each one touched, in large folios
        # where it reads ahead, so that a few hundred kB stay; the two smaller profiles' lines are a few such reads)
        assert gave < 0.75 * held and plan_gave < 0.75 * plan_held, (gave, held, plan_gave, plan_held)
    del buf, given, kept


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="the resident pages are read from /proc (Linux)")
@pytest.mark.parametrize("path", [*_files(), LONG], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_window_scan_gives_back_the_pages_it_walked_and_decodes_alike(path, tmp_path, monkeypatch):
    """Each time window decoded from the file's mapping with ``release_pages`` (every walk of the scan gives back the
    pages behind it: the cut of long lines, the count, the scan) is the window decoded holding them, in every column;
    the pages of the larger profile's events are given back as they are walked (here every 16 kB)."""
    import mmap

    xscan = importlib.import_module("kernscope.load.xscan")
    monkeypatch.setattr(xplane, "RELEASE_BYTES", 1 << 14)
    monkeypatch.setattr(xscan, "SEGMENT_BYTES", 1 << 18)  # (long lines cut, as a real profile's GPU stream is)
    file, data, buf, off, size = _mapped(path, tmp_path)
    plan = xplan.plan(data, str(file), 3)
    assert plan is not None
    for k in range(plan.windows):
        data.madvise(mmap.MADV_DONTNEED)
        held = xplane.decode(data, str(file), window=xplane.Window(plan.cuts, k), shared=plan.shared)
        held_kb = _resident_kb(file)
        data.madvise(mmap.MADV_DONTNEED)
        given = xplane.decode(data, str(file), window=xplane.Window(plan.cuts, k), shared=plan.shared, release_pages=True)
        given_kb = _resident_kb(file)
        assert given.events.equals(held.events) and given.flows.equals(held.flows), k
        assert given.meta_events.equals(held.meta_events) and given.metadata == held.metadata, k
        if path == LONG:  # (as in the plan's test: a few hundred kB around the pages read again stay)
            assert given_kb < 0.75 * held_kb, (k, given_kb, held_kb)
    # a decode of bytes (no mapping) gives nothing back, and reads alike
    whole = xplane.decode(xspace_bytes(path), str(file), release_pages=True)
    assert whole.events.height == sum(xplane.decode(data, str(file), window=xplane.Window(plan.cuts, k),
                                                    shared=plan.shared).events.height for k in range(plan.windows))
    del buf
