"""A JAX profile analyzed a time window at a time: the same answer as the whole profile's, in a fraction of its memory.

:func:`kernscope.load.xplan.plan` cuts the profile at quiet points (no event of any line running, no launched GPU
record still to start) between steps. Each window is decoded alone (``xplane.decode(window=...)``), linked (its steps
from the profile's ``StepTraceAnnotation`` ranges only), and analyzed with the sums kept
(``analyze(..., keep_sums=True)``) while the next window is decoded on a thread; of the windows before, only the
small results are held (:class:`Part`).
:func:`merge` then makes the whole profile's :class:`~kernscope.analyze.summary.Analysis` of them:

- **rolled up again**: the summaries (kernels, categories, libraries, ops, sources) from the windows' groups of rows
  (integer ns sums, counts, minima and maxima); the timeline from each device's unions and first and last times (no
  GPU record spans a cut); the trace facts and unlinked counts, summed;
- **concatenated**: what is per step (steps, step categories, timeline by step, the critical path's tables, the
  findings of a step): a step and its GPU work lie in one window, and the critical path of a window's last step runs
  to the next step's start (``next_step_start``), which the plan gives;
- **recomputed over the merged rows**: the steps' phases (from each step's kernel multiset), the step-variance
  findings (the median over every step), the findings' ranking and kinds, and the critical path's notes.

Where a profile cannot be cut so (no compiled scanner, no quiet point, no step annotations, a step number in two
windows, GPU records without a device, events between a cut and the next step's start that belong to the step before
the cut, an event across a cut but for a user's range or Python frame holding whole steps), :func:`analyze_windows`
raises :class:`NotWindowed` and the caller reads it whole. The tests check on every real JAX profile
here that the merged analysis's JSON equals the whole profile's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import mmap
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ..errors import TraceError
from ..files import MOST_WINDOWS, WINDOW_EVENTS, WINDOWED_FROM
from ..intervals import first_held
from ..link.build import link
from ..link.steps import ANNOTATED, StepSpec, phases_of, step_signatures
from ..model import Lazy, Trace, TraceStats
from .critical_path import (
    COMM_FASTER,
    SYNC_KINDS,
    CriticalPath,
    busiest_launcher,
    empty_path,
    launch_counts,
    rank_note,
    unseen_note,
    with_queued_note,
)
from .facts import TraceFacts
from .findings import FindingRules, ranked, step_variance
from .kernels import source_summary
from .summary import Analysis, WindowSums, analyze, summaries
from .timeline import device_timelines_of

if TYPE_CHECKING:
    from ..load.xhead import XHeadStart
    from ..load.xplan import Count

#: the analyses' keyword arguments a windowed analysis takes (others: the whole profile is read)
WINDOWED_OPTIONS = frozenset({"categorizer", "use_kernel_name_categories", "linked_only", "finding_rules", "benchmark"})
#: a profile of at most this many GPU records may look like a benchmark trace
#: (:func:`~kernscope.analyze.bench_trace.looks_like_benchmark`), which the windows do not tell
BENCHMARK_MAX_GPU = 20000


@dataclass(frozen=True)
class Part:
    """What is kept of one window's analysis while the next is read: the analysis without its rows (its trace holds
    the window's steps and facts only), and what the link counted per window."""

    analysis: Analysis
    sums: WindowSums
    step_sigs: pl.DataFrame  #: :func:`~kernscope.link.steps.step_signatures` of the window's GPU rows
    outside_steps: int  #: the window's GPU rows in no step
    launches: pl.DataFrame  #: the window's GPU rows by launching thread (:func:`~.critical_path.launch_counts`)
    window: int = 0  #: which window of the plan


def keep(a: Analysis, window: int = 0, launches: pl.DataFrame | None = None) -> Part:
    """``a`` (window ``window``'s, ``analyze(..., keep_sums=True)``) without its event and GPU tables, nor its
    critical path's records (``CriticalPath.records``: the merged analysis has none; ``analyze`` renders none).
    ``launches``: its GPU rows' :func:`~.critical_path.launch_counts`, where the caller has them (None: counted here)."""
    if a.sums is None:
        raise ValueError("windows.keep: the analysis was made without keep_sums")
    t = a.trace
    header = Trace(path=t.path, events_table=Lazy.of(pl.DataFrame()), gpu=t.gpu.clear(), flows_table=Lazy.of(pl.DataFrame()),
                   steps=t.steps, tree_table=Lazy.of(pl.DataFrame()), stats=t.stats, metadata=t.metadata,
                   process_names=t.process_names, thread_names=t.thread_names, unlinked=t.unlinked,
                   step_source=t.step_source)
    # (the path's records, a row per GPU record on it, every kernel of a JAX step's: no output of ``analyze`` reads
    # them, and kept they would add up to the whole profile's)
    path = a.critical_path
    if path is not None:
        path = dataclasses.replace(path, records=path.records.clear())
    return Part(dataclasses.replace(a, trace=header, gpu_interned=a.gpu_interned.clear(), critical_path=path,
                                    sums=None), a.sums,
                step_signatures(t.gpu), int(t.gpu["step"].null_count()),
                launch_counts(t.gpu) if launches is None else launches, window)


def _stack(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The windows' tables of one kind as one (in window order; an empty window's adds nothing)."""
    return pl.concat(frames, how="vertical_relaxed") if len(frames) > 1 else frames[0]


def _rolled(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """The windows' groups of GPU rows (:func:`~kernscope.analyze.kernels.rows_by`'s, keys as text) rolled up by their
    keys: counts and ns sums summed, minima and maxima of the minima and maxima."""
    g = _stack([f.with_columns(pl.col(c).cast(pl.String) for c, t in f.schema.items()
                               if isinstance(t, (pl.Categorical, pl.Enum))) for f in frames])
    keys = [c for c in g.columns if not c.startswith("_")]
    return g.group_by(keys).agg(pl.col("_rows").sum(), pl.col("_n").sum(), pl.col("_sum").sum(), pl.col("_min").min(),
                                pl.col("_max").max())


def _facts(parts: list[Part], trace: Trace) -> TraceFacts:
    f = [p.analysis.facts for p in parts]
    kernel_ns = sum(int(p.sums.grouped.filter(pl.col("kind") == "kernel")["_sum"].sum() or 0) for p in parts)
    return dataclasses.replace(
        f[0], events=sum(x.events for x in f), event_counts=trace.stats.event_counts,
        gpu_events=sum(x.gpu_events for x in f), kernels=sum(x.kernels for x in f), kernel_time_us=kernel_ns / 1000.0,
        devices=sorted({d for x in f for d in x.devices}), device_names=sorted({n for x in f for n in x.device_names}),
        steps=trace.steps.height, step_source=trace.step_source, graph_launches=sum(x.graph_launches for x in f))


def _unlinked(parts: list[Part], has_steps: bool) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in parts:
        for k, v in p.analysis.unlinked.items():
            out[k] = out.get(k, 0) + v
    # (a window without steps counts none of its rows as outside them)
    out["gpu_outside_steps"] = sum(p.outside_steps for p in parts) if has_steps else 0
    return out


def _path(parts: list[Part], trace: Trace, findings: pl.DataFrame, untraced_waits: bool) -> CriticalPath | None:
    paths = [p.analysis.critical_path for p in parts if p.analysis.critical_path is not None]
    if not paths:
        return None
    have = [c for c in paths if c.steps.height]
    if not have:
        return empty_path(["no steps with GPU work: the critical path is per step"])

    def cat(name: str) -> pl.DataFrame:
        return _stack([getattr(c, name) for c in have])

    path = CriticalPath(cat("steps"), cat("categories"), cat("kernels"), cat("whatif"), records=cat("records"),
                        ops=cat("ops"))
    notes = []
    if (trace.world_size or 1) > 1 and path.whatif["change"].str.starts_with(COMM_FASTER).any():
        notes.append(rank_note(trace.world_size or 1))
    if "xplane" in trace.metadata:
        notes += unseen_note(path.steps, _stack([p.sums.kernel_time_by_step for p in parts]), untraced_waits)
    return with_queued_note(dataclasses.replace(path, notes=notes), findings)


def merge(parts: list[Part], *, finding_rules: FindingRules | None = None) -> Analysis:
    """The analysis of a whole profile from its time windows' (:func:`keep` of ``analyze(..., keep_sums=True)`` of
    each, in time order; see the module's docstring). ``finding_rules``: as given to each window's analysis."""
    if not parts:
        raise ValueError("windows.merge: no windows")
    first = parts[0].analysis.trace
    sigs = _stack([p.step_sigs for p in parts])
    steps = phases_of(_stack([p.analysis.trace.steps for p in parts]), sigs)
    events = sum(p.analysis.trace.stats.events for p in parts)
    counts: dict[str, int] = {}
    for p in parts:
        for k, v in p.analysis.trace.stats.event_counts.items():
            counts[k] = counts.get(k, 0) + v
    stats = TraceStats(events, counts, first.stats.platform, first.stats.t0,
                       sum(p.analysis.trace.stats.projected_out for p in parts))
    sources = [p.analysis.trace.step_source for p in parts if p.analysis.trace.steps.height]
    trace = dataclasses.replace(first, steps=steps, stats=stats, step_source=sources[0] if sources else first.step_source)
    trace = dataclasses.replace(trace, unlinked=_unlinked(parts, steps.height > 0))
    # the summaries, from the windows' groups of rows
    grouped = _rolled([p.sums.grouped for p in parts])
    spans = [(p.sums.first, p.sums.last) for p in parts if p.sums.first is not None and p.sums.last is not None]
    wall = max(int(s[1]) for s in spans) - min(int(s[0]) for s in spans) if spans else 0
    decided = tuple(c for c in ("decided_by", "decided_op") if c in grouped.columns)
    rest = summaries(trace, parts[0].analysis.gpu_interned, parts[0].analysis.gpu_interned, None, False, None, decided,
                      grouped, wall)
    src = [p.sums.sources for p in parts if p.sums.sources is not None]
    rest["sources"] = (source_summary(None, grouped=_rolled(src), wall_ns=wall) if src
                       else parts[0].analysis.sources)
    # per step, concatenated; the step phases as the whole profile's
    step_rows = _stack([p.analysis.steps for p in parts]).drop("phase").join(
        steps.select("step", "phase"), on="step", how="left", maintain_order="left")
    step_rows = step_rows.select(parts[0].analysis.steps.columns)
    rules = finding_rules or FindingRules.builtin()
    kept = _stack([p.analysis.findings for p in parts]).filter(pl.col("rule") != "step_variance")
    with rules.writing():
        variance = step_variance(step_rows, rules.rules["step_variance"])
    findings = ranked([*kept.iter_rows(named=True), *variance])
    timeline, by_dev = device_timelines_of(_stack([p.sums.devices for p in parts]))
    facts = _facts(parts, trace)
    rest.update(
        facts=facts, steps=step_rows, findings=findings,
        timeline_by_step=_stack([p.analysis.timeline_by_step for p in parts]),
        step_categories=_stack([p.analysis.step_categories for p in parts]),
        unlinked=dict(trace.unlinked))
    return Analysis(trace=trace, step=None, critical_path=_path(parts, trace, findings, False), timeline=timeline,
                    timeline_by_device=by_dev, **rest)


def _release(data: mmap.mmap) -> None:
    """The mapped file's pages out of the process (read again from the page cache where touched again)."""
    with contextlib.suppress(AttributeError, OSError, ValueError):  # (no madvise: the pages stay)
        data.madvise(mmap.MADV_DONTNEED)


class NotWindowed(Exception):
    """The profile cannot be analyzed a window at a time (the reason); it is read whole."""


def _threads(rows: pl.DataFrame) -> set[tuple[str | None, str | None]]:
    """The distinct (pid, tid) of ``rows`` (two columns, in that order), as text (made distinct first: a window's GPU
    rows are ~170 k of a 200 MB profile, their launching threads one or two)."""
    return set(rows.unique().select(pl.all().cast(pl.String)).iter_rows())


def _step_threads_of(trace: Trace) -> set[tuple[str | None, str | None]]:
    """The threads (pid, tid as text) of ``trace`` whose host events an analysis of a step reads, but for those that
    launched its GPU work (:class:`Part`'s ``launches``; the critical path's end point is the busiest of them, and it
    follows the launches of a step's rows): those of the steps' annotations and of runtime calls (a launch's, a
    synchronization's)."""
    ev = trace.events
    host = pl.col("kind").is_in(SYNC_KINDS) | (pl.col("step_num").is_not_null() if "step_num" in ev.columns else False)
    return _threads(ev.lazy().filter(host).select("pid", "tid").collect())


#: the kinds of event a cut may fall inside (:func:`_held_across`), where one holds whole steps
HELD_KINDS = ("user_annotation", "python_function")


#: a large profile (:data:`~kernscope.files.WINDOWED_FROM` bytes or more) whose plan puts this share of its events or
#: more in one window is read whole: the windows would save little memory, and cost their time. A GPU behind its host
#: through the whole profile (dispatch that never waits for it) leaves a quiet point before the first step only: the
#: 40-step profile with its GPU lines 1.5 steps later is planned as two windows, the second with 99.9% of the events
LOPSIDED = 0.95


def _largest_share(plan: Any) -> float:
    """The share of the profile's events in ``plan``'s largest window (from its cuts' counts, every line's)."""
    before = plan.cuts.before.sum(axis=0)
    total = int(before[-1]) if before.size else 0
    if total <= 0:
        return 0.0
    return float(np.diff(before, prepend=0).max() / total)


class _Replan(Exception):
    """A near plan's windows differ from the whole profile's (:func:`_windows`): every event's plan is made instead."""


def _refused(plan: Any, why: str) -> Exception:
    """What a cut that the windows' checks refuse raises: a near plan's (not ``checked``) makes every event's plan
    instead (:class:`_Replan`); the plan from every event's, a whole read (:class:`NotWindowed`, saying ``why``)."""
    return NotWindowed(why) if plan.checked else _Replan()


def _held_across(trace: Trace, cut: int) -> set[tuple[str | None, str | None]] | None:
    """Whether each event of ``trace`` (a window's, its events starting before ``cut``, ns) that runs across ``cut``
    is a host range holding whole steps (the first step starting at or after it ends within it: the rule by which the
    critical path takes no such range for an op) and no step annotation, or else a Python frame: the threads (pid, tid
    as text) of those frames, which must be no thread a step's analysis reads, in any window (:func:`_windows` checks
    once all are read: a data loader's thread, waiting on its full queue across every step's end); None where another
    event runs across. A plan cuts inside such events only (:meth:`~kernscope.load.xplan._Quiet._running_long`, and a
    frame of a line without step annotations or launches); a near plan guesses from its index, and this checks."""
    ev = trace.events
    # (a step annotation, or any event but a user's range or a Python frame: a GPU row, or a CPU op, the innermost op
    # of the launches inside it, which only the window holding it would have)
    other = ~pl.col("kind").is_in(HELD_KINDS) | (pl.col("step_num").is_not_null() if "step_num" in ev.columns else False)
    across = ev.lazy().filter(pl.col("end") > cut).select(
        "ts", "end", "pid", "tid", other.alias("_other"), (pl.col("kind") == "python_function").alias("_frame")).collect()
    if not across.height:
        return set()
    steps = trace.steps.select("start", "end").sort("start")
    if across["_other"].any():
        return None
    held = np.zeros(across.height, dtype=bool)
    if steps.height:
        s_start = steps["start"].to_numpy()
        first, holds = first_held(across["ts"].to_numpy(), across["end"].to_numpy(), s_start, steps["end"].to_numpy())
        held = holds & (s_start[first] < cut)
    loose = across.filter(pl.Series(~held))
    if not loose["_frame"].all():
        return None
    return _threads(loose.select("pid", "tid"))


def _windows(data: mmap.mmap, p: str, plan: Any, xplane: Any, stats: tuple[str, ...] | None,
             options: dict[str, Any], size: int, progress: Callable[[int, int], None] | None,
             laps: Callable[[str], None]) -> list[Part] | None:
    """Each window of ``plan`` decoded, linked and analyzed (:func:`analyze_windows`); None where a plan that is not
    ``checked`` split a correlation id between windows (:meth:`~kernscope.load.xplan.Ledger.split`)."""
    xplan = importlib.import_module("kernscope.load.xplan")
    t0: list[int] = []  # (every window's relative times from the profile's first event, the first window's)
    seen: set[int] = set()
    # the threads a step's analysis reads the host events of (:func:`_step_threads_of` and the launching ones, every
    # window's), and per window those of its events between its cut and the next step's start (checked against the
    # former once all are read)
    step_threads: set[tuple[str | None, str | None]] = set()
    early: dict[int, set[tuple[str | None, str | None]]] = {}
    across: set[tuple[str | None, str | None]] = set()  # (the threads of Python frames across a cut: :func:`_held_across`)
    ledger = None if plan.checked else xplan.Ledger()
    shared = plan.shared

    def decoded(k: int) -> Any:
        own: list[frozenset[str]] = []
        # (the scan gives back the window's pages as it walks them: all of them were in the process at the scan's end,
        # beside the previous window's analysis, at the windowed run's peak)
        raw = xplane.decode(data, p, window=xplane.Window(plan.cuts, k), shared=shared, stats=stats,
                            named=own.append if ledger is not None else None, release_pages=True)
        _release(data)  # (and what the decode read again after: the lines' names, the stats' texts)
        if ledger is not None:
            ledger.add(k, raw.events, own[0] if own else frozenset())
        return raw

    def window(k: int, thread: tuple[str, str] | None = None, raw: Any = None, again: bool = False) -> Part | None:
        if raw is None:
            raw = decoded(k)
        if raw.events.height == 0 and raw.flows.height == 0:
            return None
        # (the steps' phases are the whole profile's: merge marks them over every window's steps, which a window's
        # own, marked over its steps alone, would have stood in for)
        trace = link(raw, p, steps=StepSpec(ANNOTATED), phases=False)
        del raw
        if trace.gpu["device"].null_count():
            raise NotWindowed("GPU records without a device")
        if k + 1 < plan.windows:
            frames = _held_across(trace, int(plan.cuts.times[:, k].min()))
            if frames is None:  # (a near plan's guess of a range holding whole steps: every event's plan instead)
                raise _refused(plan, "an event across a cut that holds no whole step")
            across.update(frames)
        # the whole profile's last step before a cut spans up to the next step's start (``step_after``), beyond the cut:
        # what starts between the two is that step's there and this window's here. A step's analysis reads there the
        # GPU rows, the runtime calls of any thread (synchronizations) and the host events of the step's threads (its
        # launching ones, :func:`_step_threads_of`), never a Python frame (on real profiles the next annotation's
        # constructor) nor another thread's ranges (a data loader's): a profile with any of the first three there, as
        # where a step has no annotation of its own, is read whole (benchmarks/fuzz_long.py --jax, seed 98: the mosaic
        # profile with one `train` annotation dropped). Only after a window with steps: before the first step nothing
        # spans a cut. The threads are checked once every window is read: a step's thread may launch in a later one
        before = int(plan.step_after[k - 1]) if 0 < k <= len(plan.step_after) else -1
        if before >= 0 and seen:
            stretch = trace.events.filter((pl.col("ts") < before) & pl.col("cat").ne_missing("python_function"))
            if trace.gpu.filter(pl.col("ts") < before).height or stretch.filter(pl.col("kind").is_in(SYNC_KINDS)).height:
                raise NotWindowed("events between a cut and the next step's start (a step without its annotation)")
            early[k] = _threads(stretch.select("pid", "tid"))
        step_threads.update(_step_threads_of(trace))
        if not t0:
            t0.append(trace.t0)
        trace = dataclasses.replace(trace, stats=dataclasses.replace(trace.stats, t0=t0[0]))
        if not again:
            numbers = set(trace.steps["step"].to_list())
            if numbers & seen:
                raise NotWindowed("a step number in two windows")
            seen.update(numbers)
        after = int(plan.step_after[k]) if k < len(plan.step_after) else -1
        # the window's GPU rows by launching thread, which its part keeps; where no thread is given, their busiest is
        # the thread its critical path would find of them (counted once: 5 ms of each window of a 200 MB JAX profile)
        launches = launch_counts(trace.gpu)
        top = busiest_launcher(launches) if thread is None else thread
        a = analyze(trace, keep_sums=True, next_step_start=after if after >= 0 else None,
                    launch_thread=(top[0], top[1]) if top is not None and top[0] is not None and top[1] is not None
                    else None, **options)
        del trace
        return keep(a, k, launches)

    parts: list[Part] = []
    try:
        # the next window decoded on a thread while this one is linked and analyzed (the decode's scan runs without the
        # GIL; one window's work alone keeps ~1.2 of two cores busy): two windows' tables are held at a time
        with ThreadPoolExecutor(1, thread_name_prefix="kernscope-window") as pool:
            ahead = pool.submit(decoded, 0)
            for k in range(plan.windows):
                raw = ahead.result()
                if k + 1 < plan.windows:
                    ahead = pool.submit(decoded, k + 1)
                part = window(k, raw=raw)
                del raw
                if part is not None:
                    parts.append(part)
                laps(f"window {k + 1} of {plan.windows} (decode, link, analysis)")
                if progress is not None:
                    progress(size * (k + 1) // plan.windows, size)
        if ledger is not None:
            if ledger.split():
                raise _Replan
            # a window whose annotation another window's HLO names make an op: decoded again with the whole profile's
            shared = dataclasses.replace(shared, hlo_names=ledger.names())
            stale = set(ledger.stale())
            ledger = None
            for i, q in enumerate(parts):
                if q.window in stale:
                    parts[i] = window(q.window, again=True) or q  # (a window with events: never None again)
            if stale:
                laps(f"{len(stale)} window(s) again, with the whole profile's HLO names")
        step_threads.update(t for q in parts for t in q.launches.select("pid", "tid").iter_rows() if None not in t)
        if any(threads & step_threads for threads in early.values()):
            raise NotWindowed("events between a cut and the next step's start (a step without its annotation)")
        if across & step_threads:  # (a frame across a cut, of a thread a step's analysis reads)
            raise _refused(plan, "a Python frame across a cut, of a thread that launches or holds steps")
        # a step without an annotation of its own runs on the profile's busiest launching thread (the critical path's end
        # point), which a window's own may not be (a window that compiles): such windows are analyzed again
        busiest = busiest_launcher(_stack([q.launches for q in parts])) if parts else None
        again = [i for i, q in enumerate(parts) if q.analysis.trace.steps.height and busiest is not None
                 and busiest_launcher(q.launches) != busiest]
        for i in again:
            parts[i] = window(parts[i].window, busiest, again=True)  # type: ignore[arg-type,assignment]
        if again:
            laps(f"{len(again)} window(s) again, on the profile's busiest launching thread")
        return parts
    except _Replan:  # (a near plan's windows differ from the whole profile's: every event's plan instead)
        return None


def analyze_windows(path: str | Path, windows: int, *, by_events: bool = False, stats: tuple[str, ...] | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    timings: list[tuple[str, float]] | None = None, head: XHeadStart | None = None,
                    **options: Any) -> Analysis:
    """The analysis of the JAX profile at ``path`` (a plain ``.xplane.pb``), read ``windows`` time windows at a time
    (``by_events``: or more, one per :data:`~kernscope.files.WINDOW_EVENTS` of its events up to
    :data:`~kernscope.files.MOST_WINDOWS`, as ``analyze`` counts them by default)
    (:func:`merge`; ``options``: :func:`~kernscope.analyze.summary.analyze`'s, of :data:`WINDOWED_OPTIONS`;
    ``stats``: the XLA stats read, as a load projection's). ``progress``: called with (windows read, windows) in
    bytes of the file; ``timings``: receives (phase, seconds) of the plan, each window and the merge; ``head``: the
    lines' index made while the command imported (:mod:`kernscope.load.xhead`), for the plan (closed in any case). Raises
    :class:`NotWindowed` where the profile cannot be cut so, :class:`~kernscope.errors.TraceError` where it cannot
    be read."""
    try:
        xplan = importlib.import_module("kernscope.load.xplan")
        count = xplan.Count(windows, WINDOW_EVENTS if by_events else 0, MOST_WINDOWS)
        return _analyze_windows(str(path), count, stats, progress, timings, head, options)
    finally:
        if head is not None:
            head.close()


def _analyze_windows(p: str, count: Count, stats: tuple[str, ...] | None, progress: Callable[[int, int], None] | None,
                     timings: list[tuple[str, float]] | None, head: XHeadStart | None, options: dict[str, Any]
                     ) -> Analysis:
    if set(options) - WINDOWED_OPTIONS:
        raise NotWindowed(f"options {sorted(set(options) - WINDOWED_OPTIONS)}")
    bench = options.pop("benchmark", False)
    if bench:
        raise NotWindowed("the benchmark view")
    # (the built-in rules read once for every window and the merge: ~2 ms of TOML a window otherwise)
    options["finding_rules"] = options.get("finding_rules") or FindingRules.builtin()
    lap = time.perf_counter()

    def laps(phase: str) -> None:
        nonlocal lap
        if timings is not None:
            now = time.perf_counter()
            timings.append((phase, now - lap))
            lap = now
    xplane = importlib.import_module("kernscope.load.xplane")
    xplan = importlib.import_module("kernscope.load.xplan")
    try:
        with open(p, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError) as e:
        raise TraceError(p, f"cannot read it ({e})") from None
    try:
        # the plan from the events near each target (a few thousand a target); where it finds none, or its windows
        # turn out to split what the whole profile's keeps together, the plan from every event's stats
        base = xplane.lines_and_metadata(data, p)
        if not xplan.names_steps(base):
            raise NotWindowed("no step annotations")
        size = len(data)
        plan = xplan.plan_near(data, p, count, release_pages=True, head=head, base=base)  # (data: a read-only mapping)
        if plan is not None and size >= WINDOWED_FROM and _largest_share(plan) >= LOPSIDED:
            plan = None  # (the quiet points near the targets only: every event's plan may find nearer ones)
        near = plan is not None
        if plan is None:
            plan = xplan.plan(data, p, count, release_pages=True, base=base)
        if plan is None:
            raise NotWindowed("no plan (no quiet point, or no compiled scanner)")
        if not (plan.step_after >= 0).any():
            raise NotWindowed("no step annotations")
        held = _largest_share(plan)
        if size >= WINDOWED_FROM and held >= LOPSIDED:
            raise NotWindowed(f"one window would hold {held:.0%} of its events (no quiet point between most of its "
                              "steps: a GPU behind its host all along?)")
        _release(data)  # (the plan read the lines' events: the file's pages leave the process, the page cache keeps them)
        ahead = ", the lines indexed ahead" if head is not None and head.taken else ""
        laps(f"plan ({plan.windows} windows at quiet points{' near the targets' if near else ''}{ahead})")
        parts = _windows(data, p, plan, xplane, stats, options, size, progress, laps)
        if parts is None:  # (the near plan's windows split a launch from its rows: every event's stats read)
            plan = xplan.plan(data, p, count, release_pages=True, base=base)
            _release(data)
            if plan is None or not (plan.step_after >= 0).any():
                raise NotWindowed("no plan from every event (the near plan's windows split a launch from its rows)")
            laps(f"plan again, from every event ({plan.windows} windows)")
            parts = _windows(data, p, plan, xplane, stats, options, size, progress, laps)
            assert parts is not None
        gpu = sum(q.analysis.facts.gpu_events for q in parts)
        if gpu == 0:
            raise NotWindowed("no GPU records")  # (the whole load tells why)
        # the plan takes any event with a ``step_num`` for a step annotation; the load's steps are the host ranges
        # (:func:`~kernscope.link.steps.annotated_steps`) among them. Where none is, the whole profile's steps are found
        # another way (its XLA module's runs): a mutant whose ``step_num`` name moved to a memory stat was analyzed
        # with no steps at all by windows, and by its module's 9 runs whole (benchmarks/fuzz_long.py --jax, seed 87)
        if not any(q.analysis.trace.steps.height for q in parts):
            raise NotWindowed("no step annotation is a host range")
        if bench is None and gpu <= BENCHMARK_MAX_GPU:
            raise NotWindowed("a small profile, which may be a benchmark trace")
        merged = merge(parts, finding_rules=options.get("finding_rules"))
        laps("merge")
        return merged
    finally:
        with contextlib.suppress(BufferError):  # (a view of the shared parts still reads it: closed when the last one goes)
            data.close()
