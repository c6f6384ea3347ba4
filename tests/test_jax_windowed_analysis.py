"""A JAX profile analyzed a time window at a time (``kernscope.analyze.windows``): the merged analysis of the windows
is the whole profile's, to the byte of its JSON, on every real JAX profile here that has steps; a profile that cannot
be cut so is said so (``NotWindowed``), for the caller to read it whole."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import importlib
import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from test_jax import MLP, TRACELENS_JAX, TRANSFORMER

from kernscope import commands, load
from kernscope.analyze.summary import analyze
from kernscope.analyze.windows import NotWindowed, analyze_windows, keep, merge
from kernscope.load.native import scanner
from kernscope.model import Trace
from kernscope.render.formats import text

xplan = importlib.import_module("kernscope.load.xplan")
pytestmark = pytest.mark.skipif(scanner() is None, reason="time windows need the compiled XSpace scanner")
DATA = Path(__file__).parent / "data"
LONG = DATA / "jax_long_h200" / "vm.xplane.pb.gz"  # (40 steps, one H200)
#: 40 steps on an H100, each batch from a data loader's thread, the Python tracer on (its record_info.json)
LOADER = DATA / "jax_loader_h100" / "vm.xplane.pb.gz"


def _stepped() -> list[Path]:
    """The real JAX profiles here with StepTraceAnnotation steps (one to eleven steps, one or two GPUs)."""
    return [MLP, TRANSFORMER, *sorted((DATA / "jax_kernels_h200").glob("*/vm.xplane.pb.gz")),
            DATA / "multigpu_h200" / "jax_dp.xplane.pb.gz", DATA / "recompile_h100" / "jax_recompile.xplane.pb.gz",
            *sorted(DATA.glob("jax_job_h200*/process0/plugins/profile/*/vm.xplane.pb.gz")), LONG, LOADER]


def _plain(path: Path, tmp_path: Path) -> Path:
    """The profile as a plain ``.xplane.pb`` (windows are read from a mapped file)."""
    if path.suffix != ".gz":
        return path
    out = tmp_path / path.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


def _json(a) -> dict:
    return json.loads(text(a, "json"))


#: each profile's plain copy and its whole analysis (JSON), made once a test process for both plans' tests of it
_WHOLE: dict[str, tuple[Path, str]] = {}


def _plain_and_whole(path: Path, tmp_path_factory) -> tuple[Path, str]:
    if str(path) not in _WHOLE:
        p = _plain(path, tmp_path_factory.mktemp("plain"))
        _WHOLE[str(path)] = (p, text(analyze(load(p, cache=False)), "json"))
    return _WHOLE[str(path)]


@pytest.mark.parametrize("route", ["near", "full"])
@pytest.mark.parametrize("path", _stepped(), ids=lambda p: "/".join(p.parts[-3:]))
def test_the_windows_merged_are_the_whole_profiles_analysis(path, route, tmp_path_factory, monkeypatch):
    """By either plan: ``near`` (``xplan.plan_near``, here on profiles small enough that it would otherwise give up
    for the full plan) and ``full`` (``xplan.plan``). A count that one of these profiles' few steps cannot serve
    gives the cuts of a smaller one (20 of the 84 plans): the same windows, whose analysis is not run twice."""
    p, whole = _plain_and_whole(path, tmp_path_factory)
    data = p.read_bytes()
    if route == "near":
        monkeypatch.setattr(xplan, "NEAR_MOST_SHARE", 10.0)
    else:
        monkeypatch.setattr(xplan, "plan_near", lambda *a, **kw: None)
    seen: list[np.ndarray] = []
    for k in (2, 3, 5):
        plan = (xplan.plan_near if route == "near" else xplan.plan)(data, str(p), k)
        assert plan is not None and plan.windows >= 2  # (cut for real: two windows at least)
        assert plan.checked == (route == "full")
        if any(np.array_equal(plan.cuts.times, c) for c in seen):
            continue
        seen.append(plan.cuts.times)
        merged = text(analyze_windows(p, k), "json")
        if merged != whole:  # (the first section that differs, for the message)
            w, m = json.loads(whole), json.loads(merged)
            bad = [s for s in w if w[s] != m.get(s)]
            pytest.fail(f"{plan.windows} windows: {bad} differ; first: {w[bad[0]]!s:.400} vs {m.get(bad[0])!s:.400}")


def test_a_windowed_analysis_holds_what_a_user_checks(tmp_path):
    """The 11-step transformer read in three windows: the counts and the kernel time against the GPU rows of the
    whole profile's table, every step once and in order, and the findings ranked."""
    p = _plain(TRANSFORMER, tmp_path)
    t = load(p, cache=False)
    m = _json(analyze_windows(p, 3))
    kernels = t.gpu.filter(pl.col("kind") == "kernel")
    assert m["trace"]["kernels"] == kernels.height and m["trace"]["gpu_events"] == t.gpu.height
    assert m["trace"]["kernel_time_us"] == int(kernels["dur"].sum()) / 1000
    assert sum(r["count"] for r in m["categories"]) == t.gpu.height
    assert [r["step"] for r in m["steps"]] == sorted(t.steps["step"].to_list())
    wins = [r["win_back_us"] for r in m["findings"]]
    assert wins == sorted(wins, reverse=True)


def test_profiles_without_steps_or_with_other_options_are_read_whole(tmp_path, monkeypatch):
    """A profile whose planes name no ``step_num`` stat has no step annotations to cut between: it is read whole before
    either plan walks its lines (a 202.6 MB one paid ~0.8 s for the two plans that found no step, session 88)."""
    def no_plan(*args, **kwargs):
        raise AssertionError("a plan of a profile without step annotations")

    data = gzip.decompress(LONG.read_bytes())
    assert data.count(b"step_num") == 1
    renamed = tmp_path / "renamed.xplane.pb"
    renamed.write_bytes(data.replace(b"step_num", b"step_nux"))
    with monkeypatch.context() as m:
        m.setattr(xplan, "plan_near", no_plan)
        m.setattr(xplan, "plan", no_plan)
        # (no StepTraceAnnotation: windows could cut a module)
        for p in [renamed, *(sorted(TRACELENS_JAX.glob("*.xplane.pb")) if TRACELENS_JAX.is_dir() else [])]:
            with pytest.raises(NotWindowed, match="no step annotations"):
                analyze_windows(p, 3)
    with pytest.raises(NotWindowed, match="options"):
        analyze_windows(MLP, 3, step=1)
    with pytest.raises(NotWindowed, match="no plan"):
        analyze_windows(MLP, 1)


def test_a_step_num_on_no_host_range_is_read_whole(tmp_path):
    """A profile whose ``step_num`` stat name moved to another stat's id (its metadata's own id changed, one bit:
    ``benchmarks/fuzz_long.py --jax`` seed 87 found it): events carry a ``step_num`` (memory events here), so the plan
    cuts windows, but no host range does, and the whole load's steps are the XLA module's runs. The windows found no
    step and printed an analysis without steps; now the profile is read whole: the same output."""
    from conftest import cli

    data = gzip.decompress((DATA / "jax_kernels_h200" / "partial" / "vm.xplane.pb.gz").read_bytes())
    entry = b"\x08\n\x12\x0c\x08\n\x12\x08step_num"  # (map key 10: XStatMetadata {id 10, name "step_num"})
    assert data.count(entry) == 1
    p = tmp_path / "moved.xplane.pb"
    p.write_bytes(data.replace(entry, entry[:5] + b"\x0e" + entry[6:]))  # (its id 14, the key still 10)
    whole = load(p, cache=False)
    assert whole.step_source == "XLA module" and whole.steps.height == 9
    assert whole.events["step_num"].null_count() < whole.events.height  # (the plan sees step numbers)
    with pytest.raises(NotWindowed, match="no step annotation is a host range"):
        analyze_windows(p, 3)
    base = ["analyze", str(p), "--no-bench", "--format", "json", "--no-cache"]
    a, b = cli(*base, "--windows", "0"), cli(*base, "--windows", "3")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    assert [s["step"] for s in json.loads(b.stdout)["steps"]] == list(range(9))


def test_a_step_without_its_annotation_is_read_whole(tmp_path):
    """A profile with one ``train`` step annotation dropped (``benchmarks/fuzz_long.py --jax`` seed 98, the
    ``event_structure`` mutation): the whole profile's step before it spans up to the next annotation's start, over
    the dropped step's host ops and kernels. A cut in that stretch left them to the next window, and the windows'
    critical path of the step before took 606 µs of the step's host time where the whole read takes 830. Such a profile
    is now read whole: the same output."""
    from conftest import cli

    from kernscope.testing.xspace import _enc, _msg, host_plane

    space = _msg(gzip.decompress((DATA / "jax_kernels_h200" / "mosaic" / "vm.xplane.pb.gz").read_bytes()))
    host = host_plane(space)
    plane = _msg(space[host][2])
    names = {}
    for f, _, v in plane:
        if f == 4:  # (event metadata: key 1, value 2 (XEventMetadata: name 2))
            entry = dict((ef, ev) for ef, _, ev in _msg(v))
            names[entry[1]] = dict((mf, mv) for mf, _, mv in _msg(entry[2])).get(2)
    train = [(li, ei) for li, (f, _, v) in enumerate(plane) if f == 3
             for ei, (ef, _, ev) in enumerate(_msg(v)) if ef == 4 and names.get(dict((x, y) for x, _, y in _msg(ev))[1]) == b"train"]
    assert len(train) == 3  # (three steps, each one annotation on the Python thread)
    li, ei = train[1]
    line = _msg(plane[li][2])
    del line[ei]
    plane[li] = (3, 2, _enc(line))
    space[host] = (1, 2, _enc(plane))
    p = tmp_path / "two_of_three.xplane.pb"
    p.write_bytes(_enc(space))
    with pytest.raises(NotWindowed, match="events between a cut and the next step's start"):
        analyze_windows(p, 3)
    base = ["analyze", str(p), "--no-bench", "--format", "json", "--no-cache"]
    a, b = cli(*base, "--windows", "0"), cli(*base, "--windows", "3")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    steps = json.loads(b.stdout)["critical_path"]["steps"]
    assert [s["step"] for s in steps] == [0, 2]


def _with_loader(tmp_path: Path, tid: int | None) -> Path:
    """The 40-step profile with a data loader's thread (``tid``; None: a new one) running a 1 µs range every 4 µs,
    written to ``tmp_path``. Its ranges lie between at least two of a 5-window plan's cuts and the next step's start
    (else the tests would prove nothing)."""
    from kernscope.testing.xspace import with_host_thread

    data = gzip.decompress(LONG.read_bytes())
    if tid is None:
        tid = 777_777
    p = tmp_path / "loader.xplane.pb"
    p.write_bytes(with_host_thread(data, tid, 4_000, 1_000))
    plan = xplan.plan(p.read_bytes(), str(p), 5)
    assert plan is not None and plan.windows == 5
    ts = np.sort(load(p, cache=False).events.filter(pl.col("name").cast(pl.String) == "Iterator::Prefetch")["ts"].to_numpy())
    held = np.searchsorted(ts, plan.step_after) - np.searchsorted(ts, plan.cuts.times.min(axis=0))
    assert (held > 0).sum() >= 2, held
    return p


def test_a_data_loaders_ranges_between_steps_leave_the_profile_windowed(tmp_path):
    """A thread of ranges that neither launches GPU work nor holds a step's annotation (a data loader's: tf.data writes
    such ranges on its own threads) has ranges between each cut and the next step's start. No analysis of a step reads
    them: the windows give the whole read's output (until session 87 any such range sent the profile to a whole read, at
    over 4x its size in memory: 4.4x at 200.8 MB)."""
    p = _with_loader(tmp_path, None)
    whole = text(analyze(load(p, cache=False)), "json")
    for k in (3, 5):
        assert text(analyze_windows(p, k), "json") == whole


def test_ranges_on_the_launching_thread_between_steps_are_read_whole(tmp_path):
    """The same ranges on the thread that launches the GPU work (a second line of its id): the critical path of the
    step before a cut takes them as its host time up to the next step's start (windowed, the host time of each such
    step by op differed by 4-7 µs), so the profile is read whole, with the whole read's output."""
    from conftest import cli

    p = _with_loader(tmp_path, _launching_tid())
    with pytest.raises(NotWindowed, match="events between a cut and the next step's start"):
        analyze_windows(p, 5)
    base = ["analyze", str(p), "--no-bench", "--format", "json", "--no-cache"]
    a, b = cli(*base, "--windows", "0"), cli(*base, "--windows", "5")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout


def _run_ns(events: pl.DataFrame) -> int:
    """The time from the first event's start to the last end (ns)."""
    return int(events.select(pl.col("end").max() - pl.col("ts").min()).item())


@functools.cache
def _long_trace() -> Trace:
    """The 40-step profile loaded (once a test process)."""
    return load(LONG, cache=False)


def _launching_tid() -> int:
    """The thread id that launches the 40-step profile's GPU work (one)."""
    launcher = _long_trace().gpu["launch_tid"].drop_nulls().unique()
    assert launcher.len() == 1
    return int(launcher.cast(pl.String)[0])


def _with_ranges(tmp_path: Path, tid: int | None, name: str, parts: int = 1) -> Path:
    """The 40-step profile with ``parts`` ranges named ``name`` one after another over the whole run (one: from its
    first event to its last end) on thread ``tid`` (None: a new one; else a second line of that thread's id)."""
    from kernscope.testing.xspace import with_host_thread

    data = gzip.decompress(LONG.read_bytes())
    span = _run_ns(_long_trace().events)
    every = span + 10 if parts == 1 else -(-span // parts)
    p = tmp_path / "ranges.xplane.pb"
    p.write_bytes(with_host_thread(data, 777_777 if tid is None else tid, every, every - 1_000 * (parts > 1), name))
    return p


def _cut_inside(p: Path, name: str, windows: int) -> None:
    """Asserts the full plan cuts ``p`` into ``windows`` windows, each cut inside a range named ``name``."""
    plan = xplan.plan(p.read_bytes(), str(p), windows)
    assert plan is not None and plan.windows == windows
    ranges = load(p, cache=False).events.filter(pl.col("name").cast(pl.String) == name)
    for cut in plan.cuts.times.min(axis=0).tolist():
        assert ranges.filter((pl.col("ts") < cut) & (pl.col("end") > cut)).height == 1, cut


@pytest.mark.parametrize(("thread", "name", "parts"), [("launching", "epoch", 1), ("own", "$train.py:12 main", 1),
                                                        ("launching", "epoch", 3)])
def test_a_range_holding_whole_steps_leaves_the_profile_windowed(thread, name, parts, tmp_path):
    """An annotation around the training loop (an epoch's; or the Python tracer's frame of the function that runs it)
    is open across any moment between two steps: until session 88 such a profile had no quiet point and was read whole
    (4.4x a 200 MB profile's size in memory). A cut may fall inside a user's range or a Python frame that holds whole
    steps, after its first step's start: no analysis of a step reads it (the critical path takes no such range for an
    op), and the window of its first step holds it. One range around the run or a few in turn, on the launching thread
    or another: each cut falls inside one, and the windows give the whole read's output."""
    p = _with_ranges(tmp_path, _launching_tid() if thread == "launching" else None, name, parts)
    _cut_inside(p, name, 5)
    whole = text(analyze(load(p, cache=False)), "json")
    assert json.loads(whole)["trace"]["events"] == _long_trace().events.height + parts
    assert text(analyze_windows(p, 5), "json") == whole


def test_a_cpu_op_around_the_steps_is_read_whole(tmp_path, monkeypatch):
    """A CPU op (a host event an HLO module names) around the run: the critical path takes it for the op of every
    step's host time, so a window without it would tell other ops (measured: the critical path's host time by op of
    the steps after the first cut differed). The plan does not tell the kinds of events apart, the windows' decodes
    check them: the profile is read whole, with the whole read's output, and the command says so."""
    from conftest import cli

    events = _long_trace().events
    op = events.filter(pl.col("kind") == "cpu_op")["name"].cast(pl.String).mode().sort()[0]
    p = _with_ranges(tmp_path, _launching_tid(), op)
    big = load(p, cache=False).events.filter(pl.col("dur") > _run_ns(events))
    assert big["kind"].cast(pl.String).to_list() == ["cpu_op"]
    _cut_inside(p, op, 5)
    with pytest.raises(NotWindowed, match="an event across a cut that holds no whole step"):
        analyze_windows(p, 5)
    base = ["analyze", str(p), "--no-bench", "--format", "json", "--no-cache"]
    a, b = cli(*base, "--windows", "0"), cli(*base, "--windows", "5")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    # (said, since the whole read takes several times the file's size in memory; not where asked, nor when quiet;
    # and what trying the windows took, where it took long enough to matter: every time, here)
    monkeypatch.setattr(commands, "TRIED_SAY_S", 0.0)
    said = cli(*base, "--windows", "5").stderr.splitlines()
    assert len(said) == 1 and re.fullmatch(
        re.escape(f"kernscope: {p} was read whole, not a time window at a time: an event across a cut that holds no "
                  "whole step (trying the windows took ") + r"\d+\.\d s: --windows 0 reads it whole without trying\)", said[0]), said
    monkeypatch.setattr(commands, "TRIED_SAY_S", float("inf"))
    assert cli(*base, "--windows", "5").stderr.splitlines() == [
        f"kernscope: {p} was read whole, not a time window at a time: an event across a cut that holds no whole step"]
    assert a.stderr == cli(*base, "--windows", "5", "--quiet").stderr == ""


def test_a_gpu_behind_its_host_all_along_is_read_whole_where_large(tmp_path, monkeypatch):
    """The 40-step profile with its GPU lines 1.5 steps later (a host whose dispatch never waits for its GPU): every
    launch's rows start after the next step's start, so the only quiet point is before the first step, and the plan's
    second window holds 99.9% of the events. The windows give the whole read's answer, but save no memory: a large
    profile (here: the bound lowered to this one's size) is read whole, and the command says why; a near plan so cut
    gives way to the full plan first."""
    from kernscope.analyze import windows
    from kernscope.testing.xspace import with_gpu_lag

    steps = _long_trace().steps.sort("start")["start"]
    step_ns = int(np.median(np.diff(steps.to_numpy())))
    p = tmp_path / "lag.xplane.pb"
    p.write_bytes(with_gpu_lag(gzip.decompress(LONG.read_bytes()), 3 * step_ns // 2))
    whole = load(p, cache=False)
    assert whole.gpu.filter(pl.col("ts") - pl.col("launch_ts") <= step_ns).height == 0
    plan = xplan.plan(p.read_bytes(), str(p), 5)
    assert plan is not None and plan.windows == 2 and plan.cuts.times.max() < steps.to_numpy().min()
    assert windows._largest_share(plan) > 0.99
    assert text(analyze_windows(p, 5), "json") == text(analyze(whole), "json")
    monkeypatch.setattr(windows, "WINDOWED_FROM", 0)
    with pytest.raises(NotWindowed, match=r"one window would hold 100% of its events \(no quiet point between"):
        analyze_windows(p, 5)
    # a near plan that puts most events in one window gives way to the full plan, which may cut nearer the targets:
    # the mosaic profile's near plan of 2 windows holds 98% in one, the full plan's 66%
    monkeypatch.setattr(xplan, "NEAR_MOST_SHARE", 10.0)
    q = _plain(DATA / "jax_kernels_h200" / "mosaic" / "vm.xplane.pb.gz", tmp_path)
    near = xplan.plan_near(q.read_bytes(), str(q), 2)
    assert near is not None and windows._largest_share(near) >= windows.LOPSIDED
    timings: list = []
    assert text(analyze_windows(q, 2, timings=timings), "json") == text(analyze(load(q, cache=False)), "json")
    assert timings[0][0] == "plan (2 windows at quiet points)"


def test_a_gpu_row_before_its_launch_stays_in_its_launchs_window(tmp_path):
    """A profile whose Memset took a later launch's correlation id (736 -> 864, one byte: ``benchmarks/fuzz_long.py
    --jax`` seed 88 found it): the whole profile's link pairs the row with that launch, 25 ms after it. The plan cut
    between them (a row was pending only from its launch on), and the windows left the row unlinked and outside any
    step; now no cut falls between a row and its launch, whichever comes first: the same output as a whole read."""
    from conftest import cli

    ring = sorted(DATA.glob("jax_job_h200_ring/process0/plugins/profile/*/vm.xplane.pb.gz"))[0]
    data = gzip.decompress(ring.read_bytes())
    stat = b'\x18\x80\xe4\xaf\x01"\x05\x08\t\x18\xe0\x05'  # (XStat {metadata 9: correlation_id, uint64 736})
    assert data.count(stat) == 1
    p = tmp_path / "later.xplane.pb"
    p.write_bytes(data.replace(stat, stat[:-1] + b"\x06"))  # (864)
    g = load(p, cache=False).gpu
    row = g.filter((pl.col("correlation") == 864) & (pl.col("ts") < pl.col("launch_ts")))
    assert row.height == 1 and row["name"].cast(pl.String).to_list() == ["Memset 3"]
    base = ["analyze", str(p), "--no-bench", "--format", "json", "--no-cache"]
    a, b = cli(*base, "--windows", "0"), cli(*base, "--windows", "3")
    assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
    assert json.loads(b.stdout)["unlinked"]["gpu_without_launch"] == 0


def test_a_step_in_two_windows_is_not_merged(tmp_path, monkeypatch):
    """Windows whose steps are not each whole in one (here: a window's steps renumbered to the next one's) are not
    merged into an answer that would count a step twice."""
    from kernscope.analyze import windows
    from kernscope.link import build

    p = _plain(TRANSFORMER, tmp_path)
    real = build.link

    def renumbered(raw, path, **kw):
        t = real(raw, path, **kw)
        return dataclasses.replace(t, steps=t.steps.with_columns(pl.lit(5, pl.Int64).alias("step")))

    monkeypatch.setattr(windows, "link", renumbered)
    with pytest.raises(NotWindowed, match="two windows"):
        analyze_windows(p, 3)


def test_merge_needs_each_windows_sums():
    t = load(MLP, cache=False)
    a = analyze(t)
    with pytest.raises(ValueError, match="keep_sums"):
        keep(a)
    # a window's analysis leaves out what merge makes again from the sums, so it takes no option whose view the
    # merge would not have
    for opts in ({"step": int(t.steps["step"][0])}, {"benchmark": True}, {"by_annotation": ""}):
        with pytest.raises(ValueError, match="keep_sums"):
            analyze(t, keep_sums=True, **opts)
    with pytest.raises(ValueError, match="no windows"):
        merge([])


def test_findings_over_every_step_are_ranked_over_the_whole_profile(tmp_path):
    """With thresholds low enough that each window finds slow steps of its own (against its own median), the merged
    findings are still the whole profile's: step variance is judged against the median of every step."""
    from kernscope.analyze.findings import FindingRules

    rules_file = tmp_path / "rules.toml"
    rules_file.write_text("[step_variance]\nmin_steps = 2\nmin_excess_pct = 0.0\n")
    rules = FindingRules.load(rules_file)
    p = _plain(TRANSFORMER, tmp_path)
    whole = _json(analyze(load(p, cache=False), finding_rules=rules))
    assert sum(r["rule"] == "step_variance" for r in whole["findings"]) >= 1
    for k in (2, 3):
        parts = _json(analyze_windows(p, k, finding_rules=rules))
        assert parts["findings"] == whole["findings"] and parts["findings_by_kind"] == whole["findings_by_kind"]


def test_analyze_windows_gives_the_same_output_and_stores_it(tmp_path, monkeypatch):
    """``kernscope analyze PROFILE --windows N``: the output of the whole profile's analysis, in every format that
    renders the analysis (JSON, the terminal's table, CSV), the phases with ``--timings``; its output is stored and
    answers the next run, which reads no window."""
    from conftest import cli

    from kernscope.analyze import windows

    p = _plain(TRANSFORMER, tmp_path)
    base = ["analyze", str(p), "--no-bench"]
    for fmt in ("json", "table", "csv"):
        whole = cli(*base, "--windows", "0", "--format", fmt, "--no-cache")
        win = cli(*base, "--windows", "3", "--format", fmt, "--no-cache")
        assert whole.returncode == win.returncode == 0 and whole.stdout == win.stdout
    timed = cli(*base, "--windows", "3", "--format", "json", "--timings")
    assert timed.returncode == 0 and "plan (3 windows at quiet points" in timed.stderr
    assert "window 3 of 3 (decode, link, analysis)" in timed.stderr and "parse (" not in timed.stderr
    first = cli(*base, "--windows", "3", "--format", "json")
    monkeypatch.setattr(windows, "analyze_windows", lambda *a, **k: pytest.fail("the stored output answers"))
    again = cli(*base, "--windows", "3", "--format", "json", "-o", str(tmp_path / "again.json"))
    assert again.returncode == 0 and (tmp_path / "again.json").read_text().strip() == first.stdout.strip()


def test_analyze_reads_whole_what_windows_cannot_tell(tmp_path):
    """A small profile with the benchmark view left to detect (it may be a benchmark trace), an option the windows do
    not give (``--step``), or a profile without steps: read whole, the same output, ``--timings`` the whole load's;
    the command says why it read the profile whole where windows were asked or the default (not for ``--step``), and
    ``--timings`` shows what the windows took before as a phase."""
    from conftest import cli

    p = _plain(TRANSFORMER, tmp_path)
    whole = cli("analyze", str(p), "--windows", "0", "--format", "json", "--no-cache")
    auto = cli("analyze", str(p), "--windows", "3", "--format", "json", "--timings")
    assert auto.returncode == 0 and auto.stdout == whole.stdout
    assert "parse (xplane" in auto.stderr and "window 1" not in auto.stderr
    said = f"kernscope: {p} was read whole, not a time window at a time: a small profile, which may be a benchmark trace"
    lines = [line for line in auto.stderr.splitlines() if line.startswith(said)]  # (and what trying took, if long)
    assert len(lines) == 1 and re.fullmatch(
        re.escape(said) + r"( \(trying the windows took \d+\.\d s: --windows 0 reads it whole without trying\))?", lines[0])
    # (what the windows took before is a phase of the run's: the rate is through every phase)
    tried = [line for line in auto.stderr.splitlines() if line.startswith("time windows tried (a small profile")]
    assert len(tried) == 1 and float(tried[0].split()[-2]) > 0
    one = cli("analyze", str(p), "--windows", "3", "--step", "1", "--format", "json", "--no-cache")
    assert one.returncode == 0 and json.loads(one.stdout)["step"] == 1
    if TRACELENS_JAX.is_dir():
        q = sorted(TRACELENS_JAX.glob("*.xplane.pb"))[0]
        a = cli("analyze", str(q), "--windows", "3", "--no-bench", "--format", "json", "--no-cache")
        b = cli("analyze", str(q), "--windows", "0", "--no-bench", "--format", "json", "--no-cache")
        assert a.returncode == b.returncode == 0 and a.stdout == b.stdout


def test_how_many_windows_by_default(tmp_path):
    """A plain XSpace profile of 128 MB or more: one window per 26 MB, fourteen at most; smaller, gzipped or another
    format: whole."""
    from kernscope.files import MOST_WINDOWS, WINDOW_BYTES, WINDOWED_FROM, windows_for

    big = tmp_path / "big.xplane.pb"
    with open(big, "wb") as f:
        f.truncate(WINDOWED_FROM + 1)
    assert windows_for(str(big)) == -(-(WINDOWED_FROM + 1) // WINDOW_BYTES) == 5  # (128 MB and a byte: 5 of 26 MB)
    with open(big, "r+b") as f:
        f.truncate(40 * WINDOW_BYTES)
    assert windows_for(str(big)) == MOST_WINDOWS == 14  # (1.04 GB: 14 windows of 74 MB)
    with open(big, "r+b") as f:
        f.truncate(8 * WINDOW_BYTES)
    assert windows_for(str(big)) == 8  # (208 MB: 8 windows of 26 MB)
    assert windows_for(str(MLP)) == 0 and windows_for(str(big), 0) == 0 and windows_for(str(MLP), 5) == 5
    gz = tmp_path / "big2.xplane.pb"
    with open(gz, "wb") as f:
        f.write(b"\x1f\x8b")
        f.truncate(WINDOWED_FROM + 1)
    assert windows_for(str(gz)) == 0 and windows_for(str(gz), 4) == 0  # (asked for, too: it is read whole)
    assert windows_for(str(TRANSFORMER), 3) == 0  # (gzipped, small)
    assert windows_for(str(tmp_path / "missing.xplane.pb")) == 0


def test_the_default_adds_windows_where_a_profile_has_many_events_a_byte(tmp_path, monkeypatch):
    """By default (no ``--windows``) the plan makes one window per ``WINDOW_EVENTS`` events where the bytes would make
    fewer, up to ``MOST_WINDOWS``: a window's tables grow with its events. Here 2 windows by the bytes, 5 by the 23 k
    events (one per 5,000); ``--windows 2`` keeps 2. The same output as the whole read either way."""
    from conftest import cli

    from kernscope import files
    from kernscope.analyze import windows

    count = xplan.Count(2, 5_000, 12)
    assert [count.of(n) for n in (0, 9_999, 10_001, 23_000, 10**9)] == [2, 2, 3, 5, 12]
    assert xplan.Count(2).of(10**9) == 2
    # the two 200 MB classes measured in docs/performance.md (session 94): the data loader's (199.0 MB, 2.79 M events)
    # is 14 windows by its events, the 40-step profile run 80 times as long (202.6 MB, 1.84 M events) 10, not its 8 by bytes
    for size, events, expected in ((199_048_856, 2_792_896, 14), (202_638_000, 1_835_440, 10)):
        sized = tmp_path / f"{size}.xplane.pb"
        with open(sized, "wb") as f:
            f.truncate(size)
        by_bytes = files.windows_for(str(sized))
        assert by_bytes == 8
        assert xplan.Count(by_bytes, files.WINDOW_EVENTS, files.MOST_WINDOWS).of(events) == expected
    p = _plain(LONG, tmp_path)
    monkeypatch.setattr(files, "WINDOWED_FROM", 0)
    monkeypatch.setattr(files, "WINDOW_BYTES", p.stat().st_size // 2 + 1)
    monkeypatch.setattr(windows, "WINDOW_EVENTS", 5_000)
    base = ["analyze", str(p), "--no-bench", "--format", "json", "--no-cache"]  # (small: else it may be a benchmark)
    whole = cli(*base, "--windows", "0")
    by_default, asked = cli(*base, "--timings"), cli(*base, "--timings", "--windows", "2")
    assert whole.returncode == by_default.returncode == asked.returncode == 0
    assert by_default.stdout == asked.stdout == whole.stdout
    assert "plan (5 windows at quiet points" in by_default.stderr and "plan (2 windows at quiet points" in asked.stderr


def test_windows_is_an_option_of_one_profile():
    from conftest import cli

    job = DATA / "jax_job_h200"
    got = cli("analyze", str(job), "--windows", "2", "--no-cache")
    # (a note on what the job's folder holds may come first; the refusal is one line, the last, and no traceback)
    lines = got.stderr.strip().splitlines()
    assert got.returncode == 2 and "--windows: an option of one trace" in lines[-1] and "Traceback" not in got.stderr
    assert sum("error" in line for line in lines) == 1 and not got.stdout
    bad = cli("analyze", str(MLP), "--windows", "-1", "--no-cache")
    assert bad.returncode == 2 and "--windows" in bad.stderr


def test_forty_steps_in_many_windows_merge_to_the_whole(tmp_path):
    """The 40-step recording cut where a large profile is cut (a window every few steps), through the command."""
    from conftest import cli

    p = _plain(LONG, tmp_path)
    data = p.read_bytes()
    plan = xplan.plan(data, str(p), 16)
    assert plan is not None and plan.windows >= 12  # (about one quiet point a step)
    whole = cli("analyze", str(p), "--format", "json", "--windows", "0", "--no-cache").stdout
    steps = json.loads(whole)
    assert len(steps["steps"]) == 40 and [s["step"] for s in steps["steps"]] == list(range(40))
    # (17,560 GPU rows: a profile this small may be a benchmark trace, which is read whole unless --no-bench says not)
    assert "window 1 of" not in cli("analyze", str(p), "--format", "json", "--windows", "8", "--timings").stderr
    for k in (8, 16):
        got = cli("analyze", str(p), "--format", "json", "--windows", str(k), "--no-bench", "--timings")
        assert got.returncode == 0 and got.stdout == whole, k
        assert f"window {min(k, plan.windows)} of {min(k, plan.windows)} (decode" in got.stderr, got.stderr


def test_windows_asked_of_a_gzipped_profile_or_a_kineto_trace_read_them_whole(tmp_path):
    from conftest import cli

    kineto = Path(__file__).parents[1] / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"
    assert kineto.exists()
    for path in (TRANSFORMER, kineto):
        a = cli("analyze", str(path), "--windows", "3", "--no-bench", "--format", "json", "--no-cache", "--timings")
        b = cli("analyze", str(path), "--windows", "0", "--no-bench", "--format", "json", "--no-cache")
        assert a.returncode == b.returncode == 0 and a.stdout == b.stdout, (path, a.stderr[-300:])
        assert "window 1 of" not in a.stderr


def test_step_phases_are_marked_over_every_windows_steps(tmp_path, monkeypatch):
    """A step's phase (steady: the profile's most common kernel multiset; warmup before the first such step) is the
    whole profile's, not its window's: here the first window's steps launch kernels of other names (renamed as it is
    linked), so within that window they are the common multiset, but in the profile they come before its first steady
    step."""
    from kernscope.analyze import windows
    from kernscope.link import build

    p = _plain(LONG, tmp_path)
    plain = analyze_windows(p, 4, benchmark=False)
    assert plain.steps.height == 40 and plain.steps["phase"].to_list()[1:] == ["steady"] * 39
    real, seen = build.link, []

    def renamed_first(raw, path, **kw):
        t = real(raw, path, **kw)
        seen.append(t.steps["step"].to_list())
        if len(seen) > 1:
            return t
        gpu = t.gpu.with_columns((pl.col("name").cast(pl.String) + "_other").cast(pl.Categorical))
        return dataclasses.replace(t, gpu=gpu)

    monkeypatch.setattr(windows, "link", renamed_first)
    got = analyze_windows(p, 4, benchmark=False).steps
    first = seen[0]
    assert len(seen) >= 3 and len(first) >= 3  # (the first window holds several steps)
    phase = dict(zip(got["step"].to_list(), got["phase"].to_list()))
    assert [phase[s] for s in first] == ["warmup"] * len(first)
    assert [phase[s] for s in range(first[-1] + 1, 40)] == ["steady"] * (39 - first[-1])


def test_a_data_loader_waiting_across_every_steps_end_leaves_a_real_profile_windowed(tmp_path):
    """A real recording (``jax_loader_h100``: 40 steps, each batch from a data loader's thread two batches ahead, JAX's
    Python tracer on as by default). The loader's thread waits in ``queue.put`` (Python frames) across every step's
    end, so until session 90 the profile had no quiet point between its steps: planned as one window of every event
    (at 238.5 MB, 3,300 steps: read whole at 4.1x its size). That thread launches nothing and holds no step: no analysis
    of a step reads its frames, and the plan now cuts inside them. The windows give the whole read's output."""
    p = _plain(LOADER, tmp_path)
    data = p.read_bytes()
    t = load(p, cache=False)
    plan = xplan.plan(data, str(p), 5)
    assert plan is not None and plan.windows == 5
    cuts = plan.cuts.times.min(axis=0)
    steps = t.steps.sort("start")
    assert (cuts > steps["end"][0]).all() and (cuts < steps["start"][-1]).all()  # (between the steps)
    ev = t.events.with_columns(pl.col("tid").cast(pl.String))
    step_tids = set(ev.filter(pl.col("step_num").is_not_null())["tid"].to_list())
    launching = set(t.gpu["launch_tid"].cast(pl.String).unique().to_list())
    frames = ev.filter(pl.col("kind") == "python_function")
    for cut in cuts.tolist():  # (each cut inside a frame of the loader's thread: what the plan took for a wait)
        across = frames.filter((pl.col("ts") < cut) & (pl.col("end") > cut))
        loose = set(across["tid"].to_list()) - step_tids - launching
        assert loose and "$queue.py:122 put" in across["name"].cast(pl.String).to_list(), cut
    assert text(analyze_windows(p, 5), "json") == text(analyze(t), "json")


def test_a_python_frame_across_a_cut_on_a_thread_that_holds_steps_is_read_whole(tmp_path, monkeypatch):
    """The same profile planned as if no line held steps or launches (every Python frame free to be cut): the cuts
    fall inside frames of the thread that holds the steps (the training loop's ``queue.get`` between steps), which
    a step's analysis reads, so the windows' check across cuts sends the profile to a whole read."""
    p = _plain(LOADER, tmp_path)
    add = xplan._Quiet.add

    def unread(self, *args, **kwargs):
        add(self, *args, **kwargs)
        self.busy[:] = False

    monkeypatch.setattr(xplan._Quiet, "add", unread)
    with pytest.raises(NotWindowed, match="a Python frame across a cut"):
        analyze_windows(p, 5)
