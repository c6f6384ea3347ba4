"""The windows of a large JAX profile found near their targets (``xplan.plan_near``), not from every event's stats
(``xplan.plan``): the line index's latest end before each row, the cuts quiet by the whole profile's definition, and
what is checked once the windows are decoded (``xplan.Ledger``), each route forced where the real profiles never
take it: a launch split from its rows (the windows read again by the full plan) and a window whose annotation
another window's HLO names make an op (decoded again)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_jax import MLP, TRANSFORMER, xspace_bytes
from test_jax_windowed_analysis import LONG, _plain, _run_ns

from kernscope.analyze.summary import analyze
from kernscope.analyze.windows import analyze_windows
from kernscope.load.native import scanner
from kernscope.load.protowire import as_array
from kernscope.pipeline import load
from kernscope.render.formats import text

xplane = importlib.import_module("kernscope.load.xplane")
xplan = importlib.import_module("kernscope.load.xplan")
xscan = importlib.import_module("kernscope.load.xscan")
pytestmark = pytest.mark.skipif(scanner() is None, reason="the near plan needs the compiled XSpace scanner")
DATA = Path(__file__).parent / "data"
LOADER = DATA / "jax_loader_h100" / "vm.xplane.pb.gz"
PROFILES = [MLP, TRANSFORMER, DATA / "multigpu_h200" / "jax_dp.xplane.pb.gz", LONG, LOADER]


@pytest.fixture(autouse=True)
def _near_on_small_profiles(monkeypatch):
    """The near plan on the small profiles here, where its neighborhoods are most of the profile (a real 200 MB one
    reads ~2% of its bytes) and it would give up for :func:`xplan.plan` (``NEAR_MOST_SHARE``)."""
    monkeypatch.setattr(xplan, "NEAR_MOST_SHARE", 10.0)


def _whole_lines(data: bytes):
    """Every line's events as the plan's scan reads them (the shared parts, and the scan of whole lines)."""
    shared = xplane.prepare(data, "p")
    base, reader = shared.base, xplan._reader(shared.base)
    scan = xscan.scan_lines(as_array(data), base.line_off, base.line_len, base.line_plane, reader.spec,
                            base.stat_lookup, base.md_lookup)
    return shared, scan


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.parent.name)
def test_the_index_gives_each_lines_latest_end_before_each_row(path):
    data = xspace_bytes(path)
    shared, scan = _whole_lines(data)
    base = shared.base
    timed = ~scan.ev_flags.view(np.bool_)
    end = scan.ev_ts + scan.ev_dur
    lines = scan.ev_line
    first = np.searchsorted(lines, np.arange(base.line_off.size + 1))  # (the scan's events in line order)
    for stride in (1, 3, 512):
        index = xscan.line_index(as_array(data), base.line_off, base.line_len, stride)
        assert index.reach.size == index.line.size > 0
        want = []
        for li, count in zip(index.line.tolist(), index.count.tolist()):
            a = first[li]
            ends = end[a:a + count][timed[a:a + count]]
            want.append(int(ends.max()) if ends.size else int(np.iinfo(np.int64).min))
        assert index.reach.tolist() == want


def _quiet_and_steps(path: Path) -> tuple[set[int], np.ndarray]:
    """The whole profile's quiet points by their definition (``xplan.quiet_points`` of every event), and its step
    annotations' starts."""
    whole = xplane.decode(xspace_bytes(path), "p").events
    lines = whole.select("pid", "tid").unique(maintain_order=True).with_row_index("line")
    ev = whole.join(lines, on=["pid", "tid"]).sort("line", "ts", maintain_order=True)
    gpu = ev.group_by("line").agg(pl.col("device").is_not_null().any().alias("g"))
    gpu_line = lines.join(gpu, on="line", how="left", maintain_order="left")["g"].to_numpy()
    points = xplan.quiet_points(ev["line"].cast(pl.Int64).to_numpy(), ev["ts"].to_numpy(), ev["dur"].to_numpy(),
                                ev["correlation"], gpu_line, ev["step_num"].is_not_null().to_numpy(),
                                (ev["cat"] == "python_function").to_numpy())
    assert points is not None
    steps = np.unique(ev.filter(pl.col("step_num").is_not_null() & pl.col("device").is_null())["ts"].to_numpy())
    return set(points.tolist()), steps


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.parent.name)
def test_near_cuts_are_quiet_points_of_the_whole_profile(path, monkeypatch):
    """Small index strides and neighborhoods put the cuts where each line's events before the events read decide
    whether something runs (the index's latest ends): every cut is still a quiet point of the whole profile, and the
    step after it the whole profile's first step at or after it."""
    quiet, steps = _quiet_and_steps(path)
    data = xspace_bytes(path)
    cut_somewhere = 0
    for stride, rows in ((1, 1), (2, 1), (4, 2), (16, 1), (128, 32), (512, 8)):
        monkeypatch.setattr(xplan, "NEAR_STRIDE", stride)
        monkeypatch.setattr(xplan, "NEAR_ROWS", rows)
        for k in (2, 3, 5):
            plan = xplan.plan_near(data, "p", k)
            if plan is None:
                continue
            assert not plan.checked and plan.shared.hlo_names is None
            times = plan.cuts.times[0].tolist()
            assert plan.cuts.times.shape[1] == len(set(times)) <= k - 1
            assert set(times) <= quiet, sorted(set(times) - quiet)
            at = np.searchsorted(steps, times, side="left")
            assert plan.step_after.tolist() == steps[at].tolist()
            cut_somewhere += 1
    assert cut_somewhere >= 5


def test_the_near_plan_gives_up_past_its_share_of_the_bytes(tmp_path, monkeypatch):
    """A near plan that would read more than ``NEAR_MOST_SHARE`` of the events' bytes is none; the windowed analysis
    then takes the full plan, with the same answer."""
    p = _plain(LONG, tmp_path)
    data = p.read_bytes()
    assert xplan.plan_near(data, "p", 4) is not None
    monkeypatch.setattr(xplan, "NEAR_MOST_SHARE", 0.0)
    assert xplan.plan_near(data, "p", 4) is None
    timings: list = []
    merged = text(analyze_windows(p, 4, timings=timings), "json")
    assert timings[0][0] == "plan (4 windows at quiet points)"
    assert merged == _whole_json(p)


def test_the_near_plan_cuts_a_long_profile_near_its_quantiles():
    """The 40-step profile in eight windows: seven cuts, each window's events within a step's of an eighth."""
    data = xspace_bytes(LONG)
    plan = xplan.plan_near(data, "p", 8)
    assert plan is not None and plan.windows == 8
    sizes = [xplane.decode(data, "p", window=xplane.Window(plan.cuts, k)).events.height for k in range(8)]
    steps = 40
    assert max(abs(s - sum(sizes) / 8) for s in sizes) <= sum(sizes) / steps * 1.5


def test_the_ledger_finds_an_id_in_two_windows_and_the_stale_names():
    def table(ids: list[int | None], cats: list[str], names: list[str]) -> pl.DataFrame:
        return pl.DataFrame({"correlation": pl.Series(ids, dtype=pl.Int64),
                             "cat": pl.Series(cats, dtype=pl.Categorical), "name": pl.Series(names, dtype=pl.Categorical)})

    ok = xplan.Ledger()
    ok.add(0, table([1, 2, 2, 3, None, 7], ["cuda_runtime"] * 4 + ["user_annotation", "kernel"], list("abcdef")),
           frozenset({"op1"}))
    ok.add(1, table([4, 5, 6, 5], ["cuda_runtime"] * 4, list("ghij")), frozenset({"op1"}))
    ok.add(2, table([8, 9], ["kernel", "kernel"], ["k", "op2"]), frozenset({"op2"}))
    assert not ok.split()  # (ids 1-3 and 7; 4-6; 8-9: no id in two windows)
    assert ok.names() == {"op1", "op2"} and ok.stale() == []
    bad = xplan.Ledger()
    bad.add(0, table([10, 11, 12], ["cuda_runtime"] * 3, list("abc")), frozenset())
    bad.add(1, table([13, 12], ["cuda_runtime", "kernel"], list("de")), frozenset())  # (12: launched in 0, run in 1)
    assert bad.split()
    names = xplan.Ledger()
    names.add(0, table([None, None], ["user_annotation", "cpu_op"], ["fusion.1", "x"]), frozenset({"x"}))
    names.add(1, table([None], ["cpu_op"], ["fusion.1"]), frozenset({"fusion.1"}))
    names.add(2, table([None], ["user_annotation"], ["mine"]), frozenset())
    assert names.stale() == [0]  # (window 0's fusion.1 is an op by window 1's names)


def _whole_json(p: Path) -> str:
    return text(analyze(load(p, cache=False)), "json")


def test_windows_that_split_a_launch_from_its_rows_are_read_again_by_the_full_plan(tmp_path, monkeypatch):
    """Where the ledger finds an id in two windows (``Ledger.split``, tested above on tables; the real profiles here
    have no moment at which nothing runs while a launch is pending, so no near plan of theirs splits one), the
    windows are read again by the full plan, and the answer is the whole profile's."""
    p = _plain(LONG, tmp_path)
    whole = _whole_json(p)
    found: list[bool] = []
    real = xplan.Ledger.split

    def split_once(self):
        found.append(real(self))
        return len(found) == 1

    monkeypatch.setattr(xplan.Ledger, "split", split_once)
    timings: list = []
    merged = text(analyze_windows(p, 3, timings=timings), "json")
    phases = [t[0] for t in timings]
    assert found == [False]  # (the near plan's own windows split nothing; the full plan's are not checked)
    assert phases[0] == "plan (3 windows at quiet points near the targets)"
    assert "plan again, from every event (3 windows)" in phases
    assert phases.count("window 1 of 3 (decode, link, analysis)") == 2
    assert merged == whole


def test_a_window_that_another_windows_hlo_names_make_ops_is_decoded_again(tmp_path, monkeypatch):
    p = _plain(LONG, tmp_path)
    full = analyze(load(p, cache=False))
    whole, counts = text(full, "json"), full.trace.stats.event_counts
    assert counts["cpu_op"] > 0
    events = xplane.decode(p.read_bytes(), str(p)).events
    name = events.filter(pl.col("cat") == "cpu_op")["name"].cast(pl.String).mode().sort()[0]  # (an op of every step)
    real = xplane._hlo_names
    calls: list[int] = []

    def first_window_without(strings):  # (the first window's decode does not see the name among its own)
        calls.append(1)
        got = real(strings)
        return got - {name} if len(calls) == 1 else got

    monkeypatch.setattr(xplane, "_hlo_names", first_window_without)
    timings: list = []
    merged = analyze_windows(p, 4, timings=timings)
    assert "1 window(s) again, with the whole profile's HLO names" in [t[0] for t in timings]
    assert text(merged, "json") == whole
    assert merged.trace.stats.event_counts == counts
    # (the window left with its own names would have counted the name's events of its steps as annotations)
    monkeypatch.setattr(xplan.Ledger, "stale", lambda self: [])
    calls.clear()
    left = analyze_windows(p, 4).trace.stats.event_counts
    assert left["cpu_op"] < counts["cpu_op"] and left["user_annotation"] > counts["user_annotation"]


@pytest.mark.parametrize("unread", [5, 9])
def test_a_row_whose_launch_was_not_read_is_pending_from_the_launch_of_the_id_before(unread):
    """Line 0 a host thread, line 1 a GPU stream. Host events at 0-5, 20-25 (launch id 7), 40-45 and 60-65; GPU rows
    at 30-35 (an id whose launch is not among the events read) and 50-55 (id 7). By the whole profile's rule, 40 is
    not quiet (launch 7 pending). Read near a target, the row's launch was made after the launch read of the next lower
    id (the runtime numbers its calls in order): id 5 has none lower, so its launch lies before the events read and
    20 is not quiet either; id 9 was launched after launch 7 (at 20 or later), so 20 is."""
    gpu_line = np.array([False, True])
    line = np.array([0, 0, 0, 0, 1, 1])
    ts = np.array([0, 20, 40, 60, 30, 50])
    dur = np.array([5, 5, 5, 5, 5, 5])
    corr = pl.Series([None, 7, None, None, unread, 7], dtype=pl.Int64)

    def points(open_ended: bool) -> list[int]:
        q = xplan._Quiet(gpu_line, 0, open_ended=open_ended)
        q.add(line, ts, dur, corr)
        return q.result()[0].tolist()

    assert points(False) == [20, 60]
    assert points(True) == ([60] if unread == 5 else [20, 60])


def test_a_sparse_copy_streams_rows_launched_after_the_events_read_leave_the_near_cuts_where_they_are(tmp_path,
                                                                                                       monkeypatch):
    """The data loader's real recording (``jax_loader_h100``): its host-to-device copies run on a stream of their own,
    80 rows in all, fewer than an index row's stride, so a neighborhood reads that whole line, rows to the run's end
    whose launches (later, on other threads) it does not read. Until session 91 each counted as pending from before
    every event read up to its start: no neighborhood had a quiet point, and the near plan gave way to the full one
    (0.9-1.7 s of a 161-239 MB profile's run). Now each is pending from the launch of the id before it: every target's
    first neighborhood has its cut (no wider one is read), each a quiet point of the whole profile, and the windows
    give the whole read's output."""
    monkeypatch.setattr(xplan, "NEAR_MOST_ROWS", xplan.NEAR_ROWS)  # (no wider neighborhood)
    p = _plain(LOADER, tmp_path)
    data = p.read_bytes()
    plan = xplan.plan_near(data, str(p), 5)
    assert plan is not None and plan.windows == 5
    quiet, _ = _quiet_and_steps(LOADER)
    assert set(plan.cuts.times[0].tolist()) <= quiet
    timings: list = []
    assert text(analyze_windows(p, 5, timings=timings), "json") == _whole_json(p)
    assert timings[0][0] == "plan (5 windows at quiet points near the targets)"
    assert not any(t[0].startswith("plan again") for t in timings)


def test_a_profile_run_longer_is_windowed_by_the_near_plan(tmp_path):
    """``extend_xspace`` (the benchmarks' long profile: a real one run longer, its ids and step numbers continued):
    twice the GPU rows, kernel time and steps, every launch still linked; by the near plan's windows, the whole
    profile's answer."""
    from kernscope.testing.xspace import extend_xspace

    p = _plain(LONG, tmp_path)
    one = json.loads(_whole_json(p))
    longer = tmp_path / "longer.xplane.pb"
    longer.write_bytes(extend_xspace(p.read_bytes(), 2))
    whole = _whole_json(longer)
    two = json.loads(whole)
    for key in ("events", "gpu_events", "kernels", "graph_launches"):
        assert two["trace"][key] == 2 * one["trace"][key]
    assert two["trace"]["kernel_time_us"] == pytest.approx(2 * one["trace"]["kernel_time_us"], abs=0.01)
    assert len(two["steps"]) == 2 * len(one["steps"]) == 80
    assert two["unlinked"] == {k: 2 * v for k, v in one["unlinked"].items()}
    timings: list = []
    assert text(analyze_windows(longer, 5, timings=timings), "json") == whole
    assert timings[0][0] == "plan (5 windows at quiet points near the targets)"


def test_a_range_holding_whole_steps_runs_only_up_to_its_first_steps_start():
    """Line 0: a range at 10-1000 (an epoch's); line 1: step annotations at 100-200, 300-400, 500-600 and short host
    events at 50, 250, 450 and 700. The range holds its first step whole: a cut may fall inside it once that step has
    started (at 100 the step would go to the next window without the range): 250 on. As a step annotation, or where a
    GPU row runs across them all, nothing is quiet; a range ending before its first step does is an event like any, and
    one starting later holds the first step starting after it."""
    gpu_line = np.array([False, False, True])

    def points(first: tuple[int, int, bool], *more: tuple[int, int, int]) -> list[int]:
        line = [0, 1, 1, 1, 1, 1, 1, 1] + [m[0] for m in more]
        ts = [first[0], 100, 300, 500, 50, 250, 450, 700] + [m[1] for m in more]
        dur = [first[1], 100, 100, 100, 5, 5, 5, 5] + [m[2] for m in more]
        step = np.array([first[2], True, True, True, False, False, False, False] + [False] * len(more))
        order = np.lexsort((ts, line))
        q = xplan._Quiet(gpu_line, 10)
        q.add(np.array(line)[order], np.array(ts)[order], np.array(dur)[order],
              pl.Series([None] * len(line), dtype=pl.Int64).gather(order), step[order])
        return q.result()[0].tolist()

    assert points((10, 990, False)) == [250, 300, 450, 500, 700]
    assert points((10, 990, True)) == []
    assert points((10, 990, False), (2, 20, 800)) == []
    assert points((10, 150, False)) == [250, 300, 450, 500, 700]  # (runs to 150, before its first step's end)
    assert points((60, 940, False)) == [50, 60, 250, 300, 450, 500, 700]  # (nothing runs at 50, nor at its start)
    assert points((120, 880, False)) == [50, 100, 450, 500, 700]  # (its first step: 300-400)
    assert points((10, 990, False), (0, 20, 2)) == [250, 300, 450, 500, 700]  # (a short range inside it)


@pytest.mark.parametrize("loader", [False, True])
def test_the_near_plan_cuts_inside_a_range_holding_whole_steps(loader, tmp_path):
    """The 40-step profile with an epoch's range around the run: on the launching thread, where the near plan reads it
    among the events near a target (the range is its line's first event, and the first index row); or around a data
    loader's ranges on a thread of its own, where the index's latest end before the rows read gives it (the loader's
    ranges are the line's later rows). Either way the near plan cuts inside it, and the windows give the whole
    profile's output."""
    from kernscope.testing.xspace import with_host_thread

    data = xspace_bytes(LONG)
    ev = load(LONG, cache=False).events
    span = _run_ns(ev)
    p = tmp_path / "epoch.xplane.pb"
    if loader:
        p.write_bytes(with_host_thread(data, 777_777, 4_000, 1_000, around="epoch"))
    else:
        launcher = int(load(LONG, cache=False).gpu["launch_tid"].drop_nulls().unique().cast(pl.String)[0])
        p.write_bytes(with_host_thread(data, launcher, span + 10, span + 10, "epoch"))
    epoch = load(p, cache=False).events.filter(pl.col("name").cast(pl.String) == "epoch")
    assert epoch.height == 1
    plan = xplan.plan_near(p.read_bytes(), str(p), 5)
    assert plan is not None and plan.windows == 5
    assert ((plan.cuts.times > epoch["ts"][0]) & (plan.cuts.times < epoch["end"][0])).all()
    whole = _whole_json(p)
    timings: list = []
    assert text(analyze_windows(p, 5, timings=timings), "json") == whole
    assert timings[0][0] == "plan (5 windows at quiet points near the targets)"


def test_a_near_plans_cut_inside_a_range_holding_no_whole_step_sends_it_to_the_full_plan(tmp_path, monkeypatch):
    """The near plan takes a host line that runs past the events it reads for a range holding whole steps; the
    windows' decodes check each event across a cut. Where one fails (here forced once), every event's plan is made,
    with the whole profile's answer; where the full plan's cuts fail it too, the profile is read whole."""
    from kernscope.analyze import windows

    p = _plain(LONG, tmp_path)
    whole = _whole_json(p)
    real = windows._held_across
    calls: list[set | None] = []

    def once(trace, cut):  # (None: an event across the cut that holds no whole step)
        calls.append(real(trace, cut))
        return calls[-1] if len(calls) > 1 else None

    monkeypatch.setattr(windows, "_held_across", once)
    timings: list = []
    assert text(analyze_windows(p, 3, timings=timings), "json") == whole
    phases = [t[0] for t in timings]
    assert phases[0] == "plan (3 windows at quiet points near the targets)"
    assert "plan again, from every event (3 windows)" in phases
    monkeypatch.setattr(windows, "_held_across", lambda trace, cut: None)
    with pytest.raises(windows.NotWindowed, match="an event across a cut that holds no whole step"):
        analyze_windows(p, 3)
