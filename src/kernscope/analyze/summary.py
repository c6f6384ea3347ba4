"""The default analysis: one call that runs every summary a report needs (no printing, no I/O)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, TypeVar

import polars as pl

from ..errors import KernscopeError
from ..model import Trace
from .annotations import AnnotationBreakdown
from .annotations import by_annotation as by_annotation_
from .bench_trace import BenchmarkView, analyze_benchmark, looks_like_benchmark
from .categories import OTHER, UNKNOWN_LIBRARY, Categorizer
from .critical_path import CriticalPath, critical_path, kernel_time_by_step, with_queued_note
from .facts import TraceFacts, trace_facts
from .findings import SCHEMA as FINDINGS_SCHEMA
from .findings import FindingRules, by_kind, find, idle_findings
from .kernels import (
    SOURCE_SCHEMA,
    category_summary,
    gpu_table,
    kernel_summary,
    launcher_category_summary,
    library_summary,
    mark_communication,
    op_category_summary,
    op_summary,
    rows_by,
    source_summary,
    step_category_summary,
    step_summary,
    wall_time_ns,
    with_text_keys,
)
from .timeline import device_parts, device_timelines, device_timelines_of, step_timelines, timeline_rows

#: category/library given to every row when categories are off
UNCATEGORIZED = "Uncategorized"
@dataclass(frozen=True)
class WindowSums:
    """What :func:`kernscope.analyze.windows.merge` adds up of a time window's analysis (:func:`analyze` with
    ``keep_sums``; durations and times ns)."""

    #: the window's GPU rows grouped by :data:`SUMMARY_KEYS` (:func:`rows_by`; keys as text)
    grouped: pl.DataFrame
    first: int | None  #: the window's first GPU start (ns; None: no GPU rows)
    last: int | None  #: the window's last GPU end (ns)
    #: each device's unions (:func:`~kernscope.analyze.timeline.device_parts`)
    devices: pl.DataFrame
    #: a JAX profile's source rows grouped (:func:`~kernscope.analyze.sources.source_groups`); None for another trace
    sources: pl.DataFrame | None
    #: per step, its busiest GPU's kernel time (:func:`~kernscope.analyze.critical_path.kernel_time_by_step`)
    kernel_time_by_step: pl.DataFrame
    next_step_start: int | None  #: as given to :func:`analyze`


@dataclass(frozen=True)
class Analysis:
    """Results of :func:`analyze`. DataFrames use µs floats (columns ending in ``_us``)."""

    trace: Trace
    step: int | None
    facts: TraceFacts
    #: the categorized GPU rows of the selected step(s) as the analyses read them: ``name`` and the
    #: :data:`~kernscope.analyze.kernels.TEXT_KEYS` interned (Categorical); :attr:`gpu` gives the keys as text
    gpu_interned: pl.DataFrame = field(repr=False)
    steps: pl.DataFrame
    kernels: pl.DataFrame
    kernels_by_stream: pl.DataFrame
    categories: pl.DataFrame
    #: GPU time by library (who wrote the kernel): library, kernels (distinct names), count, total_us, ..., pct
    libraries: pl.DataFrame
    ops: pl.DataFrame
    ops_by_category: pl.DataFrame
    launcher_categories: pl.DataFrame
    timeline: pl.DataFrame
    timeline_by_device: pl.DataFrame
    timeline_by_step: pl.DataFrame
    step_categories: pl.DataFrame  #: step, name, category, total_us: GPU time per step and category
    unlinked: dict[str, int]
    benchmark: BenchmarkView | None = None
    annotations: AnnotationBreakdown | None = None  #: with ``by_annotation``: GPU time by the user's ranges
    #: GPU time by the line of the user's code (:func:`~kernscope.analyze.kernels.source_summary`): a JAX profile's
    #: always, a PyTorch trace's with ``python_sources``; else empty
    sources: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=SOURCE_SCHEMA))
    #: ranked findings (:mod:`kernscope.analyze.findings`): rule, where, ``win_back_us``, text, evidence
    findings: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=FINDINGS_SCHEMA))
    #: the critical path of each step (:mod:`kernscope.analyze.critical_path`); None when the trace has no steps
    critical_path: CriticalPath | None = None
    #: with ``analyze(..., keep_sums=True)``: what the analyses of a profile's time windows add up
    #: (:mod:`kernscope.analyze.windows`); else None
    sums: WindowSums | None = field(default=None, repr=False)

    kind: ClassVar[str] = "analysis"

    @cached_property
    def findings_by_kind(self) -> pl.DataFrame:
        """The findings gathered by kind, the same rule in the same place over steps (:func:`~kernscope.analyze.findings.by_kind`)."""
        return by_kind(self.findings)

    @cached_property
    def gpu(self) -> pl.DataFrame:
        """The categorized GPU rows of the selected step(s) (times in ns; ``name`` interned, Categorical, as in
        ``Trace.gpu``; kind, category, library, decided_by and decided_op as text). Made on first use: the default
        analysis and its renderers do not read it, and as text those five columns of a 200 MB JAX profile's 1.4 M
        rows are ~110 MB."""
        return with_text_keys(self.gpu_interned)

    @property
    def title(self) -> str:
        return self.facts.path

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self.facts.salvage_skipped)

    def facts_dict(self) -> dict[str, Any]:
        """``trace`` (:class:`~kernscope.analyze.facts.TraceFacts` as a dict), ``step``, ``unlinked`` (counts),
        ``salvage_skipped`` (lines), ``benchmark`` (the benchmark view as a dict, or None)."""
        return {"trace": self.facts.to_dict(), "step": self.step, "unlinked": dict(self.unlinked),
                "salvage_skipped": list(self.facts.salvage_skipped),
                "benchmark": self.benchmark.to_dict() if self.benchmark is not None else None}

    def tables(self) -> dict[str, pl.DataFrame]:
        """The result's tables by name (µs in ``*_us`` columns): ``kernels``, ``kernels_by_stream``, ``categories``,
        ``libraries``, ``ops``, ``ops_by_category``, ``launcher_categories``, ``steps``, ``timeline``, ``timeline_by_device``,
        ``timeline_by_step``, ``step_categories``, ``findings``, ``findings_by_kind``, ``sources`` (empty without source
        lines), and ``critical_path``, ``critical_path_categories``,
        ``critical_path_ops``, ``critical_path_kernels``, ``critical_path_whatif`` where the trace has steps, and
        ``annotations``, ``annotation_categories``, ``annotation_timeline`` with ``by_annotation``."""
        out = {"kernels": self.kernels, "kernels_by_stream": self.kernels_by_stream, "categories": self.categories,
               "libraries": self.libraries, "ops": self.ops, "ops_by_category": self.ops_by_category,
               "launcher_categories": self.launcher_categories,
               "steps": self.steps, "timeline": self.timeline, "timeline_by_device": self.timeline_by_device,
               "timeline_by_step": self.timeline_by_step, "step_categories": self.step_categories,
               "findings": self.findings, "findings_by_kind": self.findings_by_kind, "sources": self.sources}
        if self.critical_path is not None:
            out.update(self.critical_path.tables())
        if self.annotations is not None:
            out.update({"annotations": self.annotations.ranges, "annotation_categories": self.annotations.categories,
                        "annotation_timeline": self.annotations.timeline})
        return out


def check_step(trace: Trace, step: int | None) -> None:
    """Raise :class:`KernscopeError` naming the steps there are when ``step`` is not one of them (an
    analysis of a step that does not exist would be all zeros)."""
    if step is None:
        return
    have = trace.steps["step"].to_list()
    if step not in have:
        listed = ", ".join(str(s) for s in have[:20]) + (f", ... ({len(have)} in all)" if len(have) > 20 else "")
        raise KernscopeError(f"{trace.path}: no step {step}; available: {listed or 'none (the trace has no steps)'}")


def analyze(
    trace: Trace,
    *,
    step: int | None = None,
    categorizer: Categorizer | None = None,
    use_kernel_name_categories: bool = True,
    linked_only: bool = False,
    benchmark: bool | None = False,
    by_annotation: str | None = None,
    finding_rules: FindingRules | None = None,
    untraced_waits: bool = False,
    python_sources: bool = False,
    next_step_start: int | None = None,
    launch_thread: tuple[str, str] | None = None,
    keep_sums: bool = False,
) -> Analysis:
    """Run the default analysis of a trace.

    Args:
        step: restrict kernel summaries to GPU work launched in step ``step``.
        categorizer: rule set (default: built-in rules); not used when categories are off.
        use_kernel_name_categories: add ``category``/``library`` columns (on by default). When off,
            no rule runs; every row is ``Uncategorized``.
        linked_only: timeline over GPU work whose launch is in the trace only (TraceLens's view).
        benchmark: add the benchmark view (profiled step, flush, compute kernels); None = when the
            trace looks like a benchmark trace.
        by_annotation: add GPU time by the user annotations matching this regex ("" = all).
        finding_rules: thresholds and wording of the findings (default: the built-in ``findings.toml``).
        untraced_waits: JAX/XLA profiles: the critical path takes a step's untraced host tail as a wait for the
            GPU work that ended in it (:func:`~kernscope.analyze.critical_path.critical_path`).
        python_sources: PyTorch traces recorded with ``with_stack=True``: ``sources``, GPU time by the line of the
            user's code, from the Python stack events around each launch (:mod:`kernscope.analyze.sources`; a load
            that kept them: not ``projection="analyze"``). A JAX profile's lines come from its HLO: always there.
        next_step_start: where ``trace`` is a time window of a profile (:mod:`kernscope.analyze.windows`), the start
            of the profile's next step after the window's last one (ns; the critical path's time of that step ends
            there); None: the trace's last step is the profile's. ``launch_thread``: there, the profile's busiest
            launching thread (pid, tid as text; :func:`~kernscope.analyze.critical_path.busiest_launcher`), the
            critical path's thread of a step without an annotation of its own.
        keep_sums: keep in :attr:`Analysis.sums` what :func:`kernscope.analyze.windows.merge` adds up over time
            windows (all steps only: not with ``step``). Such an analysis is a time window's, one part of a whole:
            what ``merge`` rolls up again from the sums of every window (:data:`ROLLED_UP`: the kernel, category,
            library, op and launcher summaries, the timeline and the timeline by device) is left empty in it.
    """
    check_step(trace, step)
    if keep_sums and (step is not None or benchmark or by_annotation is not None):
        raise ValueError("analyze: keep_sums is for a time window's analysis of all steps (no benchmark view, no "
                         "annotations)")
    rules = finding_rules or FindingRules.builtin()
    beside = trace.gpu.height <= SIDE_BY_SIDE_MAX_ROWS or trace.events.height <= SIDE_BY_SIDE_MAX_EVENTS
    with ThreadPoolExecutor(2, thread_name_prefix="kernscope-analysis") if beside else _InOrder() as pool:
        # the analyses run on two threads, each taking the next one when it is done (polars and numpy release the
        # GIL in their work, and the analyses read the same tables and write nothing shared); the largest first, so
        # that the small ones fill in at the end. One fixed split (the critical path beside everything else) left a
        # thread idle for a third of the time on a 1 GB JAX profile. This thread hands the work out, categorizes the
        # rows and rolls up the small summaries. Side by side, the analyses that read no category start first, on the
        # rows not yet categorized (a selection of the trace's columns: no copy): the categorization took 0.13 s of a
        # 200 MB JAX profile's cold run, and the other core idled meanwhile. In order (above the bounds) they keep
        # their places, which set the 10 GB replica's peak (below)
        early: dict[str, Future[Any]] = {}
        # the rows' categories as this thread makes them, for the critical path that started before them
        categorized: Future[pl.Series] = Future()
        path_f: Future[CriticalPath] | None = None
        # a time window's kernel time by step, which its sums keep and its critical path's note reads (made once: 4-5 ms
        # a time, each window of a 200 MB JAX profile, was made twice)
        ran_f: Future[pl.DataFrame] | None = None
        if beside:
            plain = gpu_table(trace, text_names=False, text_keys=False)
            plain_g = plain if step is None else plain.filter(pl.col("step") == step)
            # the critical path, the longest analysis, reads the categories only at its end: it starts first, on the
            # rows not yet categorized, and takes their categories when it needs them (it waited for the
            # categorization, one core busy, the other idle: 0.03-0.06 s of a 200 MB v100 Kineto trace's analysis,
            # and of each JAX window's). Not over EARLY_PATH_MAX_ROWS GPU rows: there the two beside each other hold
            # their intermediates at once and share the cores' memory bandwidth (see the constant)
            if keep_sums:
                ran_f = pool.submit(kernel_time_by_step, plain)
            if trace.steps.height and trace.gpu.height <= EARLY_PATH_MAX_ROWS:
                path_f = pool.submit(critical_path, trace, plain, step=step, untraced_waits=untraced_waits,
                                     next_start=next_step_start, launch_thread=launch_thread, categories=categorized.result,
                                     kernel_time=ran_f.result if ran_f is not None else None)
        # kernel names stay interned, as the trace holds them (as text they were the largest column: 0.66 GB of a
        # 10 GB trace's, held through the critical path and the output); the summaries give them as text
        try:
            if beside:
                early = {"idle": pool.submit(idle_findings, trace, plain, rules),
                         "steps": pool.submit(step_summary, trace, plain), "facts": pool.submit(trace_facts, trace),
                         "sources": pool.submit(lambda: sources_of(trace, step, python_sources, wall_time_ns(plain_g)))}
            if use_kernel_name_categories:
                cat = categorizer or Categorizer.builtin()
                all_gpu = gpu_table(trace, cat, text_names=False, text_keys=False)
            else:
                cat = None
                uncategorized = plain if beside else gpu_table(trace, text_names=False, text_keys=False)
                all_gpu = mark_communication(uncategorized, otherwise=UNCATEGORIZED).with_columns(pl.lit(UNCATEGORIZED).alias("library"))
        except BaseException as e:
            categorized.set_exception(e)  # (the path's thread, waiting for them, raises it too, and the pool can close)
            raise
        categorized.set_result(all_gpu["category"])
        g = all_gpu if step is None else all_gpu.filter(pl.col("step") == step)
        decided = ("decided_by", "decided_op") if "decided_by" in g.columns else ()
        if keep_sums and ran_f is None:
            ran_f = pool.submit(kernel_time_by_step, all_gpu)
        if path_f is None and trace.steps.height:
            path_f = pool.submit(critical_path, trace, all_gpu, step=step, untraced_waits=untraced_waits,
                                 next_start=next_step_start, launch_thread=launch_thread,
                                 kernel_time=ran_f.result if ran_f is not None else None)
        # every GPU row clipped once (0.1 s of a 1 GB JAX profile's 6.7 M rows, each time): the timeline by step reads
        # those in a step, `--step N`'s those of step N, and both every row, since a GPU behind its host runs other
        # steps' work in a step's span (other_work_time, not idle)
        rows_f = pool.submit(timeline_rows, all_gpu, keys=("device", "step"), linked_only=linked_only)
        # by step, and with several GPUs each one's per step (the findings read which GPU left communication exposed)
        by_step_f = pool.submit(lambda: step_timelines(rows_f.result(), rows_f.result()))
        steps_f = early["steps"] if beside else pool.submit(step_summary, trace, all_gpu)
        # (all steps: from each device's unions, which time windows of a profile add up: ``keep_sums``)
        parts_f = pool.submit(lambda: device_parts(rows_f.result())) if step is None else None
        timelines_f = (None if keep_sums else
                       pool.submit(lambda: device_timelines_of(parts_f.result()) if parts_f is not None else
                                   device_timelines(rows_f.result().filter(pl.col("step") == step), rows_f.result())))
        # the rows grouped once by every key of the summaries, which roll these groups up (one pass over the rows;
        # in order, after the critical path: the grouping's freed memory, still held by polars' allocator, sat under
        # the critical path's (numpy's) peak when it ran first: 1 GB JAX class 2.99-3.08 GB against 2.90-2.95 GB)
        grouped_f = pool.submit(rows_by, g, SUMMARY_KEYS + decided)
        step_cats_f = pool.submit(step_category_summary, trace, all_gpu)
        facts_f = early["facts"] if beside else pool.submit(trace_facts, trace)
        sources_f = (early["sources"] if beside
                     else pool.submit(lambda: sources_of(trace, step, python_sources, wall_time_ns(g))))
        by_step, by_step_device = by_step_f.result()
        findings = find(trace, g, steps_f.result(), by_step, step=step, rules=rules, pool=pool, all_gpu=all_gpu,
                        by_step_device=by_step_device, started={"step_start_idle": early["idle"]} if beside else None)
        grouped, wall = grouped_f.result(), wall_time_ns(g)
        # (a time window's: its part of these is in its sums, which merge rolls up over every window: ~10% of a
        # window's analysis, each window, of a 200 MB JAX profile's, were computed and thrown away)
        rest = ({f: pl.DataFrame() for f in ROLLED_UP} | {"gpu_interned": g, "unlinked": dict(trace.unlinked)}
                if keep_sums else summaries(trace, g, all_gpu, cat, benchmark, by_annotation, decided, grouped, wall))
        rest["sources"], source_sums = sources_f.result()
        path = with_queued_note(path_f.result(), findings) if path_f is not None else None
        timeline, by_dev = timelines_f.result() if timelines_f is not None else (pl.DataFrame(), pl.DataFrame())
        rest.update(facts=facts_f.result(), steps=steps_f.result(), timeline_by_step=by_step,
                    step_categories=step_cats_f.result(), findings=findings)
        if keep_sums:
            assert parts_f is not None and ran_f is not None
            span = g.select(pl.col("ts").min(), pl.col("end").max()).row(0) if g.height else (None, None)
            rest["sums"] = WindowSums(_text_keys(grouped), span[0], span[1], parts_f.result(), source_sums,
                                      ran_f.result(), next_step_start)
    return Analysis(trace=trace, step=step, critical_path=path, timeline=timeline, timeline_by_device=by_dev, **rest)


def sources_of(trace: Trace, step: int | None, python: bool, wall: int) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """:attr:`Analysis.sources`, and with it, for a JAX profile's analysis of all steps, the rows it sums grouped
    (:func:`~kernscope.analyze.sources.source_groups`, which time windows add up; else None)."""
    from .sources import source_groups, source_table

    if step is None and not python:
        groups = source_groups(trace)
        if groups is not None:
            return source_summary(None, grouped=groups, wall_ns=wall), groups
    return source_table(trace, step, python, wall), None


def _text_keys(grouped: pl.DataFrame) -> pl.DataFrame:
    """``grouped`` (:func:`rows_by`) with its interned keys as text: the groups of several time windows, each interning
    its own names, concatenate."""
    return grouped.with_columns(pl.col(c).cast(pl.String) for c, t in grouped.schema.items()
                                if isinstance(t, (pl.Categorical, pl.Enum)))




#: the :class:`Analysis` fields :func:`kernscope.analyze.windows.merge` makes again from the time windows' sums, which
#: ``analyze(..., keep_sums=True)`` leaves empty (``timeline`` and ``timeline_by_device`` too)
ROLLED_UP = ("kernels", "kernels_by_stream", "categories", "libraries", "ops", "ops_by_category", "launcher_categories")
#: what :func:`analyze` groups the GPU rows by once, for all its summaries (with ``decided_by`` and ``decided_op``
#: where the categories were decided)
SUMMARY_KEYS = ("name", "launcher", "category", "library", "kind", "device", "stream")
#: ``analyze`` runs its analyses on two threads for GPU tables of at most this many rows, or for event tables of at
#: most :data:`SIDE_BY_SIDE_MAX_EVENTS` rows; a trace over both runs them in order, in one thread. There the tables
#: already hold most of the memory, and the two threads' intermediates held at once cost more than the time saved is
#: worth: the 10 GB replica (2.3 M GPU rows, 31.7 M events) side by side went from 3.85 to 4.03 GB peak RSS, over the
#: issue's 4 GB. Below either bound time is the scarcer: the 200 MB JAX class (1.39 M GPU rows) analyzed in 2.5-2.9 s
#: against 2.9-4.0 s; a real 975 MB JAX profile (6.7 M GPU rows, 8.8 M events) cold in 7.5-8.2 s against 8.3-9.7 s,
#: for 0.1-0.25 GB more at its peak (2.45-2.51 GB against 2.20-2.39 GB)
SIDE_BY_SIDE_MAX_ROWS = 1_500_000
#: ``analyze`` starts the critical path before the categorization for GPU tables of at most this many rows. Measured
#: (session 78, medians of 5-7 interleaved rounds): a 210 MB JAX profile's windows (181 k rows each) 2.35 -> 2.30 s; a
#: 200 MB v100 Kineto trace (89 k) 0.85 -> 0.84 s; its 3 windows (480 k rows) 1.83 -> 1.75 s at the same peak. Larger
#: tables are left in the order they had: no gain was shown there (a 975 MB JAX profile's 12 windows, 557 k rows each,
#: took 8.6-8.9 s with it against session 77's 8.0-8.8 s in two rounds on the device's CPU), and session 37 measured
#: the two slowing each other 1.3-2x at 6.7 M rows
EARLY_PATH_MAX_ROWS = 400_000
#: see :data:`SIDE_BY_SIDE_MAX_ROWS` (about a 5 GB Kineto trace, or a 1.8 GB XSpace)
SIDE_BY_SIDE_MAX_EVENTS = 16_000_000
T = TypeVar("T")


class _InOrder(Executor):
    """An executor that runs what it is given at once, in the calling thread (``analyze`` above
    :data:`SIDE_BY_SIDE_MAX_ROWS`)."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - raised again by result(), as a thread's would be
            done.set_exception(e)
        return done


def summaries(trace: Trace, g: pl.DataFrame, all_gpu: pl.DataFrame, cat: Categorizer | None, benchmark: bool | None,
               by_annotation: str | None, decided: tuple[str, ...], grouped: pl.DataFrame, wall: int) -> dict[str, Any]:
    """The :class:`Analysis` fields rolled up from ``grouped`` (``g``'s rows by :data:`SUMMARY_KEYS`; ``wall``:
    ``g``'s wall time, ns), and the optional views."""
    # one row per kernel, launcher and category: a row never hides a mix of categories
    by = ("name", "launcher", "category", "library") + decided
    want_bench = looks_like_benchmark(trace) if benchmark is None else benchmark
    return dict(
        gpu_interned=g,
        kernels=_text_names(kernel_summary(g, by=by, grouped=grouped, wall_ns=wall)),
        kernels_by_stream=_text_names(kernel_summary(g, by=("launcher", "category", "name", "device", "stream") + decided,
                                                     grouped=grouped, wall_ns=wall)),
        categories=category_summary(g, grouped=grouped, wall_ns=wall),
        libraries=library_summary(g, grouped=grouped, wall_ns=wall),
        ops=op_summary(g, grouped=grouped, wall_ns=wall),
        ops_by_category=op_category_summary(g, grouped=grouped, wall_ns=wall),
        launcher_categories=launcher_category_summary(g, grouped=grouped),
        unlinked=dict(trace.unlinked),
        benchmark=(analyze_benchmark(trace, cat, table=with_text_keys(all_gpu, names=True) if cat is not None else None)
                   if want_bench else None),
        annotations=by_annotation_(trace, with_text_keys(g, names=True), by_annotation) if by_annotation is not None else None,
    )


def _text_names(table: pl.DataFrame) -> pl.DataFrame:
    """``table`` with its ``name`` column as text (the analyses keep it interned)."""
    if "name" in table.columns and table.schema["name"] != pl.String:
        return table.with_columns(pl.col("name").cast(pl.String))
    return table


__all__ = ["Analysis", "analyze", "UNCATEGORIZED", "OTHER", "UNKNOWN_LIBRARY"]


def headline(a: Analysis, top: int = 3) -> dict[str, object]:
    """The answer first (the HTML report's first screen): ``steps`` (count), ``step_time_us`` (mean CPU window of
    the analyzed steps, None without steps), ``gpu_time_us`` (summed GPU time), ``gpu_busy_pct`` (busy share of
    first-GPU-start to last-GPU-end; with several GPUs their mean), ``gpus`` (how many) and ``top_categories``: the
    ``top`` categories as (category, total_us, pct)."""
    busy = a.timeline.filter(pl.col("type") == "busy_time")
    steps = a.steps
    return {
        "steps": steps.height,
        "step_time_us": float(steps["cpu_duration_us"].mean()) if steps.height else None,  # type: ignore[arg-type]
        "gpu_time_us": float(a.categories["total_us"].sum()) if a.categories.height else 0.0,
        "gpu_busy_pct": float(busy["percent"][0]) if busy.height else None,
        "gpus": a.timeline_by_device["device"].n_unique(),
        "top_categories": [(str(r["category"]), float(r["total_us"]), float(r["pct"]))
                           for r in a.categories.head(top).iter_rows(named=True)],
    }


#: runtime and driver calls that put work on a GPU (kernels, graphs, copies, sets): a trace with such calls and no GPU
#: records lost its device side; one whose calls are all others (synchronizations, allocations) profiled no GPU work
LAUNCH_CALLS = r"(?i)launch|memcpy|memset|^cu(Graph|Mem)"


def empty_reason(trace: Trace, step: int | None = None) -> str | None:
    """Why an analysis of ``trace`` (one ``step`` of it) has no GPU time to show, with what to do; None when
    it has some. A trace without GPU records that has launch calls lost the device side; one whose runtime calls
    launch nothing (synchronizations) profiled a window without GPU work; one with neither was recorded without the
    GPU activity."""
    if trace.gpu.height == 0:
        from .counters import RANGE_CAT

        ranges = int((trace.events["cat"] == RANGE_CAT).sum())
        if ranges:
            return (f"no GPU activity in {trace.path}: it was recorded with hardware counters (profiler_metrics: CUPTI's "
                    f"range profiler, which replays each kernel and records no kernel times); its {ranges:,} kernels' "
                    f"counters: kernscope counters {trace.path}")
        runtime = trace.events.filter(pl.col("kind") == "runtime").select(pl.col("name").cast(pl.String))["name"]
        launches = int(runtime.str.contains(LAUNCH_CALLS).sum())
        if launches:
            return (f"no GPU activity in {trace.path}, though it has {launches:,} launch calls: the profiler lost the "
                    "device side (CUPTI/roctracer unavailable to the process, or its activity buffers dropped); record "
                    "again and check the profiler's warnings")
        if runtime.len():
            names = runtime.unique(maintain_order=True)
            which = ", ".join(names.head(3).to_list()) + (", ..." if names.len() > 3 else "")
            calls = ("its one runtime call", "launches") if runtime.len() == 1 else (f"its {runtime.len():,} runtime calls", "launch")
            return (f"no GPU activity in {trace.path}: {calls[0]} ({which}) {calls[1]} no GPU work, so the profiled window "
                    "held none; with a profiler schedule, the active steps' trace is the one on_trace_ready receives "
                    "(export_chrome_trace after the profile exports only what ran after the last cycle)")
        if trace.metadata.get("framework") == "jax":  # (a JAX/xprof JSON export: no /device:GPU process)
            return (f"no GPU activity in {trace.path}: this JAX/XLA profile has no GPU device with events; it was "
                    "recorded without a GPU (CPU or TPU only), or before any GPU work ran")
        return (f"no GPU activity in {trace.path}: it was recorded without the GPU activity; record with "
                "torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])")
    if step is not None and not trace.gpu.filter(pl.col("step") == step).height:
        return (f"step {step} of {trace.path} launched no GPU work (its GPU records belong to other steps); "
                "analyze another step (--step) or all of them")
    return None
