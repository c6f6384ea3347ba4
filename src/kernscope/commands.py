"""What each ``kernscope`` command computes, typed, with no argument parsing and no rendering: the CLI parses its
options into a :class:`Session` and one call here, and hands the result to a renderer
(:mod:`kernscope.render.formats`). Each call returns a result of the contract (:class:`kernscope.result.Result`).

A :class:`Session` holds what every command shares: how traces are loaded (cache, salvage, memory limit, step
markers), the rule files (categories, findings), and how the command talks to its user while it works (one-line
notices, progress bars). Its defaults are a quiet library caller's.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from . import oneshot, outputs
from .errors import EmptyAnswer, KernscopeError, PartialFailure

if TYPE_CHECKING:
    from .analyze.bench_dir import BenchDir
    from .analyze.categories import Categorizer
    from .analyze.counters import KernelCounters
    from .analyze.diff import TraceDiff
    from .analyze.findings import FindingRules
    from .analyze.listing import SourceListing
    from .analyze.memory import MemoryTimeline
    from .analyze.perf import DevicePeaks, PerfModel, PerfReport
    from .analyze.ranks import JobAnalysis
    from .analyze.report import Report
    from .analyze.sql import QueryResult
    from .analyze.summary import Analysis
    from .load.xhead import XHeadStart
    from .model import Trace


R = TypeVar("R")

#: a JAX profile read whole after its time windows were tried: where the trying took this long or more (seconds: the
#: plans, and any windows analyzed before the one that could not be), the notice says so and that ``--windows 0``
#: reads it whole without trying (1.0 s of a 3.0 s run at 202.6 MB with a GPU behind its host all along)
TRIED_SAY_S = 0.25


@dataclass(frozen=True)
class Answer(Generic[R]):
    """A command's ``result`` and what to check once it is shown: the ``sides`` (trace, step) whose GPU time it
    covers, and the ``analysis`` (a benchmark trace on the CPU is not empty)."""

    result: R
    sides: tuple[tuple[Trace, int | None], ...] = ()
    analysis: Analysis | None = None

    def check(self) -> None:
        """:class:`EmptyAnswer` when the answer is empty for a reason a trace shows (:func:`check_answer`)."""
        check_answer(*self.sides, analysis=self.analysis)


class Bar(Protocol):
    """A progress display: called with (done, total) as work advances, closed at the end."""

    def __call__(self, done: int, total: int) -> None: ...

    def close(self) -> None: ...


class _NoBar:
    def __call__(self, done: int, total: int) -> None:
        pass

    def close(self) -> None:
        pass


def _no_bar(label: str, unit: str) -> Bar:
    return _NoBar()


def _drop(msg: str) -> None:
    pass


@dataclass(frozen=True)
class Session:
    """A command's settings: ``cache`` (read and write the parse cache), ``salvage`` (keep the complete events of a
    damaged trace), ``max_memory`` (bytes the decoded tables may use; 0: the default), ``step_marker``, ``rules``
    (a categorization rules file), ``findings`` (a findings rules file), ``quiet``; ``notice`` says one line to the
    user, ``progress(label, unit)`` makes a progress display (``unit``: "bytes" or a count's name)."""

    cache: bool = True
    salvage: bool = False
    max_memory: int = 0
    step_marker: str | None = None
    rules: str | None = None
    findings: str | None = None
    quiet: bool = False
    notice: Callable[[str], None] = _drop
    progress: Callable[[str, str], Bar] = _no_bar
    #: ``keep(files, output, body)``: keeps the output ``body`` a command wrote to ``output`` (None: stdout) after
    #: reading ``files``, for the next identical command line (:meth:`kernscope.replay.Invocation.record`)
    keep: Callable[[list[str], str | None, bytes], object] | None = None
    #: the trace's first pieces scanned while the command imported (:class:`kernscope.load.headstart.HeadStart`),
    #: for the load that parses it (a load of another file, or another reading, leaves them); or a large JAX
    #: profile's lines indexed meanwhile (:class:`kernscope.load.xhead.XHeadStart`), for its windows' plan
    head: Any = None

    # -- inputs ---------------------------------------------------------------------------------------------
    @property
    def notify(self) -> Callable[[str], None]:
        """Where the load's notices go: ``notice``, or nowhere when quiet."""
        return _drop if self.quiet else self.notice

    def say(self, msg: str) -> None:
        """A notice, unless quiet."""
        if not self.quiet:
            self.notice(msg)

    def expand(self, inputs: Sequence[str]) -> list[str]:
        """The trace files named (files, directories, globs; a JAX run directory: its richest file, said)."""
        from .files import expand_inputs

        notes: list[str] = []
        paths = expand_inputs(inputs, notes)
        for n in notes:
            self.say(f"kernscope: {n}")
        return paths

    def one_file(self, path: str) -> str:
        """``path``, or the trace of the JAX run directory it names (its XSpace, said as ``analyze`` says it); a run of
        several hosts is refused in one line (their files are the ranks of a job: ``analyze`` the folder)."""
        if not os.path.isdir(path):
            return path
        from .files import resolve_run_dir

        run = resolve_run_dir(path)
        if run is None:
            return path  # (the load says it is a directory, not a trace file)
        files, note = run
        if len(files) > 1:
            names = ", ".join(os.path.basename(f) for f in files[:4]) + (", ..." if len(files) > 4 else "")
            raise KernscopeError(f"{path}: a JAX run of {len(files)} hosts ({names}): name one host's file (kernscope "
                                 "analyze of the folder takes them as the ranks of one job)")
        self.say(f"kernscope: {note}")
        return files[0]

    def load(self, path: str, *, projection: Any = None, digest: Any = None, defer_cache_write: Any = None,
             timings: list[tuple[str, float]] | None = None) -> Trace:
        """Load and link ``path`` (:func:`kernscope.pipeline.load`) with a progress display; ``projection``: what
        the command never reads; ``digest``: the file's content digest when just computed; ``timings``: phases."""
        from .link import StepSpec
        from .load.source import Limits
        from .pipeline import load

        bar = self.progress(f"reading {os.path.basename(path)}", "bytes")
        try:
            return load(path, cache=self.cache, salvage=self.salvage, notify=self.notify,
                        progress=bar, limits=Limits(max_memory=self.max_memory), steps=StepSpec(self.step_marker),
                        projection=projection, digest=digest, defer_cache_write=defer_cache_write, timings=timings,
                        head=None if self._jax_head() is not None else self.head)
        finally:
            bar.close()

    def _jax_head(self) -> XHeadStart | None:
        """:attr:`head` where it is a JAX profile's (:class:`kernscope.load.xhead.XHeadStart`), else None."""
        if self.head is None:  # (nothing imported: most commands have none)
            return None
        from .load.xhead import XHeadStart

        return self.head if isinstance(self.head, XHeadStart) else None

    def load_step(self, path: str, step: int | None, projection: Any = None) -> Trace:
        """:meth:`load`, refusing a ``step`` the trace does not have (one line naming the steps there are)."""
        from .analyze.summary import check_step

        t = self.load(path, projection=projection)
        check_step(t, step)
        return t

    def categorizer(self) -> Categorizer:
        """The built-in categories with ``rules`` applied."""
        from .analyze.categories import Categorizer

        c = Categorizer.builtin()
        return c.with_rules(self.rules) if self.rules else c

    def finding_rules(self) -> FindingRules | None:
        """The findings' rules with ``findings`` applied (None: the built-in ones); the file is read once."""
        return self._finding_rules

    @cached_property
    def _finding_rules(self) -> FindingRules | None:
        if not self.findings:
            return None
        from .analyze.findings import FindingRules

        return FindingRules.load(self.findings)

    # -- answers --------------------------------------------------------------------------------------------
    def job(self, paths: Sequence[str], engine: str = "local", scheduler: str | None = None, workers: int | None = None,
            strict: bool = False, read_all: bool = False) -> JobAnalysis:
        """Several traces as the ranks of one job (in processes, or on Dask), with the findings' rules applied."""
        from .analyze.findings import find_stragglers
        from .analyze.ranks import RankTask
        from .engine import EngineSpec, analyze_job

        bar = self.progress(f"analyzing {len(paths)} ranks", "ranks")
        try:
            job = analyze_job(list(paths), RankTask(cache=self.cache, salvage=self.salvage, step_marker=self.step_marker,
                                                    projection=not read_all),
                              EngineSpec(engine, scheduler, workers), strict=strict, progress=bar)
        finally:
            bar.close()
        if self.findings:
            job = dataclasses.replace(job, findings=find_stragglers(job.stragglers, rules=self.finding_rules()))
        return job

    def several(self, inputs: Sequence[str], bench: bool | None = None, engine: str = "local",
                scheduler: str | None = None, workers: int | None = None, strict: bool = False, read_all: bool = False,
                one_only: str | None = None, per_trace: Sequence[str] = ()) -> BenchDir | JobAnalysis | str:
        """What ``inputs`` name: with ``bench``, one folder of benchmark traces (its :meth:`bench_dir`); several
        traces (files, folders, globs), the ranks of one job (:meth:`job`); one trace, its path. ``one_only``:
        the error when several traces are not allowed; ``per_trace``: the options given that only one trace's
        analysis has (refused, before anything runs, for a job or a folder of benchmark traces: they were ignored);
        ``engine``, ``scheduler``, ``workers`` and ``strict`` other than their defaults are a job's, refused for one
        trace or a folder of benchmark traces."""
        def refuse(what: str) -> None:
            if per_trace:
                raise KernscopeError(f"{', '.join(per_trace)}: {'an option' if len(per_trace) == 1 else 'options'} of one "
                                     f"trace's analysis, not of {what}: give one trace for {'it' if len(per_trace) == 1 else 'them'}")

        # (and the options of a job, given where there is none: they were ignored)
        per_job = [name for name, on in (("--engine dask", engine != "local"), ("--scheduler", scheduler is not None),
                                         ("--workers", workers is not None), ("--strict", strict)) if on]

        def refuse_job_options(what: str) -> None:
            if per_job:
                one = len(per_job) == 1
                raise KernscopeError(f"{', '.join(per_job)}: {'an option' if one else 'options'} of several traces (the "
                                     f"ranks of one job), not of {what}: give the job's traces, or leave "
                                     f"{'it' if one else 'them'} out")
        def bench_folder() -> BenchDir:
            refuse("a folder of benchmark traces")
            refuse_job_options("a folder of benchmark traces")
            return self.bench_dir(inputs[0])

        folder = len(inputs) == 1 and os.path.isdir(inputs[0])
        if folder and bench:
            return bench_folder()
        paths = self.expand(inputs)
        if folder and bench is None and len(paths) > 1:
            # (auto: a folder that holds benchmark traces only, in kernscope bench's or TritonBench's layout; it was taken
            # for the ranks of a job and refused for want of ranks. Imported here: the module imports polars, which a
            # stored answer never needs)
            from .analyze.bench_dir import is_bench_dir

            if is_bench_dir(inputs[0], paths):
                return bench_folder()
        if len(paths) == 1:
            refuse_job_options("one trace's analysis")
            return paths[0]
        if one_only:
            raise KernscopeError(one_only)
        refuse(f"a job of {len(paths):,} traces")
        return self.job(paths, engine, scheduler, workers, strict, read_all)

    def bench_dir(self, root: str) -> BenchDir:
        """A folder of benchmark traces (kernscope bench's or TritonBench's layout)."""
        from .analyze.bench_dir import analyze_bench_dir

        plain = dataclasses.replace(self, step_marker=None)
        return analyze_bench_dir(root, plain.load, self.categorizer())

    def analysis(self, trace: Trace, step: int | None = None, *, categorizer: Categorizer | None = None,
                 categories: bool = True, linked_only: bool = False, bench: bool | None = None,
                 by_annotation: str | None = None, roofline: bool = False, untraced_waits: bool = False,
                 python_sources: bool = False) -> Analysis:
        """The default analysis of ``trace``; ``roofline``: with the perf model's findings merged in;
        ``python_sources``: a PyTorch trace's GPU time by the user's function (``--sources``)."""
        from .analyze.summary import analyze

        a = analyze(trace, step=step, categorizer=categorizer or self.categorizer(), use_kernel_name_categories=categories,
                    linked_only=linked_only, benchmark=bench, by_annotation=by_annotation,
                    finding_rules=self.finding_rules(), untraced_waits=untraced_waits, python_sources=python_sources)
        return self.with_roofline(a, self.perf_model(trace, step)) if roofline else a

    def windowed(self, r: AnalyzeRequest, windows: int, categorizer: Categorizer, projection: Any, digest: Any,
                 key: dict[str, Any], timings: list[tuple[str, float]] | None = None) -> Analysis | str:
        """``analyze`` of the JAX profile ``r.path`` read ``windows`` time windows at a time
        (:func:`kernscope.analyze.windows.analyze_windows`: the same answer in a fraction of the memory), with a
        progress display; where it cannot be cut so, why (it is then read whole). With the cache, an entry without
        tables is written under ``key`` (:func:`kernscope.pipeline.results_entry`), where the output is stored."""
        from .analyze.windows import NotWindowed, analyze_windows
        from .pipeline import results_entry

        # (by default the plan may add windows where the profile has many events a byte: :data:`~.files.WINDOW_EVENTS`)
        by_events = r.windows is None
        bar = self.progress(f"reading {os.path.basename(r.path)} in {windows}{'+' if by_events else ''} windows", "bytes")
        had = len(timings) if timings is not None else 0
        began = time.perf_counter()
        try:
            a = analyze_windows(r.path, windows, by_events=by_events,
                                stats=projection.stats if projection is not None else None,
                                progress=bar, timings=timings, head=self._jax_head(), categorizer=categorizer,
                                use_kernel_name_categories=r.categories, linked_only=r.linked_only,
                                finding_rules=self.finding_rules(), benchmark=r.bench)
        except NotWindowed as e:
            if timings is not None:  # (the whole load's phases follow; what the windows took before is one row)
                del timings[had:]
                timings.append((f"time windows tried ({e})", time.perf_counter() - began))
            return str(e)
        finally:
            bar.close()
        if self.cache:
            results_entry(r.path, digest, key, self.notify)
        return a

    def no_sources(self, a: Analysis, path: str) -> None:
        """Say why ``--sources`` found no function of the user's code where it found none (the output then has no
        table)."""
        if not a.sources.height and a.trace.metadata.get("framework") != "jax":
            self.say(f"kernscope: --sources: no launch in {path} is under a Python function of your code: record with "
                     "torch.profiler.profile(with_stack=True)")

    def perf_model(self, trace: Trace, step: int | None, peak: str | None = None) -> PerfModel:
        """The perf model of ``trace`` (its op shapes read from the file), with ``--peak`` applied."""
        from .analyze.perf import perf_model

        return perf_model(trace, step=step, peaks=peaks(peak, trace))

    def with_roofline(self, a: Analysis, pm: PerfModel) -> Analysis:
        """``a`` with the perf model's far_from_roofline findings merged into its ranked findings."""
        if not pm.ops.height:
            return a
        from .analyze.findings import find_roofline, merged

        steps = 1 if a.step is not None else a.trace.steps.height
        found = find_roofline(pm.ops, steps, rules=self.finding_rules())
        return dataclasses.replace(a, findings=merged(a.findings, found))

    def report(self, path: str, step: int | None = None, *, linked_only: bool = False, bench: bool | None = None,
               by_annotation: str | None = None, diff_with: str | None = None, step_b: int | None = None,
               peak: str | None = None, intra_files: Sequence[str] = (), intra_kernel: str | None = None,
               untraced_waits: bool = False, python_sources: bool = False, code: bool = False,
               roots: Sequence[str] = ()) -> Answer[Report]:
        """One trace's report: its analysis, the perf model where ops have shapes (its findings merged), the memory
        timeline, a diff with ``diff_with`` (its step ``step_b``), intra-kernel records placed under their kernels;
        ``python_sources``: a PyTorch trace's GPU time by the user's function (``--sources``; a report reads a Kineto
        trace whole, its Python events with it); ``code``: the user's code with each line's GPU time (``--code``, as
        ``kernscope annotate``; the files looked for under ``roots`` first)."""
        from .analyze.memory import memory_timeline
        from .analyze.needs import diff_projection, report_projection
        from .analyze.report import Report

        # (intra-kernel records are placed by the kernels' launch details: read whole then)
        t = self.load(path, projection=None if intra_files else report_projection())
        cat = self.categorizer()
        a = self.analysis(t, step, categorizer=cat, linked_only=linked_only, bench=bench, by_annotation=by_annotation,
                          untraced_waits=untraced_waits, python_sources=python_sources)
        if python_sources:
            self.no_sources(a, path)
        pm = self.perf_model(t, step, peak)
        a = self.with_roofline(a, pm)
        d = None
        if diff_with:
            from .analyze.diff import Side, diff

            tb = self.load_step(diff_with, step_b, diff_projection(self.step_marker, python=python_sources))
            d = diff(Side(t, step), Side(tb, step_b), categorizer=cat, python_sources=python_sources)
        launches = rows = None
        if intra_files:
            from .intra.align import align_files, launches_sheet, timeline_rows

            done = align_files(t, list(intra_files), intra_kernel)
            launches = launches_sheet(done)
            g = a.gpu_interned
            rows = timeline_rows([al for _, al in done], g["idx"] if "idx" in g.columns else None)
        from .analyze.counters import kernel_counters

        listing = None
        if code:
            from .analyze.listing import roots_of, source_listing

            listing = source_listing(t, step=step, python=True, roots=roots_of(roots))
            if listing is None:
                self.say(f"kernscope: --code: no GPU record of {path} has a line of your code: a PyTorch trace has them "
                         "where it was recorded with with_stack=True")
        return Answer(Report(a, pm if pm.ops.height else None, memory_timeline(t), d, launches, rows, kernel_counters(t),
                             listing), ((t, step),), a)

    def perf(self, path: str, step: int | None = None, *, peak: str | None = None,
             show_nested: bool = False) -> Answer[PerfReport]:
        """``kernscope perf``: the perf model of ``path`` with its roofline findings (model notes said)."""
        from .analyze.findings import find_roofline
        from .analyze.needs import perf_projection
        from .analyze.perf import PerfReport

        path = self.one_file(path)
        t = self.load_step(path, step, perf_projection(self.step_marker))
        pm = self.perf_model(t, step, peak)
        findings = find_roofline(pm.ops, 1 if step is not None else t.steps.height, rules=self.finding_rules())
        for n in pm.notes:
            self.say(f"kernscope: {n}")
        return Answer(PerfReport(pm, path, findings, show_nested), ((t, step),))

    def memory(self, path: str) -> MemoryTimeline:
        """``kernscope memory``: the memory timeline of a ``profile_memory`` trace or a JAX profile."""
        from .analyze.memory import memory_timeline
        from .analyze.needs import memory_projection

        path = self.one_file(path)
        t = self.load(path, projection=memory_projection())
        m = memory_timeline(t)
        if m is None:
            if "xplane" in t.metadata:  # (a JAX profile: XLA's allocator events are recorded by default)
                raise EmptyAnswer(f"{path}: no memory events: this profile has none of XLA's allocator events "
                                  "(MemoryAllocation, MemoryDeallocation)")
            raise EmptyAnswer(f"{path}: no [memory] events: record the trace with torch.profiler.profile(profile_memory=True)")
        return m

    def annotate(self, path: str, step: int | None = None, roots: Sequence[str] = ()) -> SourceListing:
        """``kernscope annotate``: the user's code with each line's GPU time (a PyTorch trace's from its Python
        stacks: its Python events are read)."""
        from .analyze.listing import roots_of, source_listing
        from .analyze.needs import analyze_projection

        path = self.one_file(path)
        t = self.load_step(path, step, analyze_projection(self.step_marker, python=True))
        listing = source_listing(t, step=step, python=True, roots=roots_of(roots))
        if listing is None:
            raise EmptyAnswer(f"{path}: no GPU record has a line of your code: a PyTorch trace has them where it was "
                              "recorded with torch.profiler.profile(with_stack=True); a JAX profile where its HLO "
                              "metadata names them")
        return listing

    def counters(self, path: str) -> KernelCounters:
        """``kernscope counters``: the hardware counters of a trace recorded in CUPTI's range-profiling mode."""
        from .analyze.counters import kernel_counters

        path = self.one_file(path)
        c = kernel_counters(self.load(path))
        if c is None:
            raise EmptyAnswer(f"{path}: no hardware counters: it has no cuda_profiler_range events; record with "
                              "torch.profiler.profile(experimental_config=torch.profiler._ExperimentalConfig("
                              "profiler_metrics=[...], profiler_measure_per_kernel=True))")
        return c

    def query(self, query: str, path: str, step: int | None = None) -> QueryResult:
        """``kernscope sql``: ``query`` over the trace's tables and its analysis's (a statement that is not a query
        refused before anything is read)."""
        from .analyze.sql import QueryResult, sql, stored_sql, table_names
        from .model import check_statement

        check_statement(query, table_names())
        read = self._query_tables(query, path) if step is None else None
        if read is not None:  # the tables read as far as the query needs them; the whole trace only if it needs it
            tables, whole = read
            return QueryResult(query, stored_sql(tables, whole, query, categorizer=self.categorizer()))
        t = self.load_step(path, step)
        return QueryResult(query, sql(t, query, step=step, categorizer=self.categorizer()))

    def _query_tables(self, query: str, path: str) -> tuple[Callable[[str], Any], Callable[[], Trace]] | None:
        """What a query of all steps reads (``pipeline.stored_tables``, and the whole trace loaded on first use): the
        stored tables of a whole load, else of ``analyze``'s narrower load (its GPU rows, steps, CPU ops and launches);
        with neither stored, that load, made now (and stored), for a query that names only those tables in columns it
        fills as a whole load does (:func:`~kernscope.analyze.sql.reads_only`, ``pipeline.served_tables``). None: the
        trace is loaded whole."""
        from .analyze.needs import analyze_projection
        from .analyze.sql import reads_only
        from .link import StepSpec
        from .model import Lazy
        from .pipeline import Held, LoadOptions, projection_unread, served_tables, stored, stored_tables

        narrow = analyze_projection(self.step_marker)
        if self.cache:
            found = stored(path, LoadOptions(self.salvage, StepSpec(self.step_marker)), self.notify)
            projection = None
            if found is None and narrow is not None:
                found = stored(path, LoadOptions(self.salvage, StepSpec(self.step_marker), narrow), self.notify)
                projection = narrow
            if found is not None:
                entry, digest = found
                stored_whole = Lazy(lambda: self.load(path, digest=digest))
                return stored_tables(entry, projection, stored_whole.get), stored_whole.get
        if narrow is not None and not self.salvage and reads_only(query, served_tables(narrow), projection_unread(narrow)):
            whole = Lazy(lambda: self.load(path))
            return stored_tables(Held(self.load(path, projection=narrow)), narrow, whole.get), whole.get
        return None

    def job_query(self, query: str, job: JobAnalysis) -> QueryResult:
        """``kernscope sql`` of several traces: ``query`` over the job's tables (``job.<name>``)."""
        from .analyze.sql import QueryResult, job_sql

        return QueryResult(query, job_sql(job, query))

    def diff(self, a: str, b: str, step: int | None = None, step_b: int | None = None,
             match: str = "exact", python_sources: bool = False) -> Answer[TraceDiff]:
        """``kernscope diff``: two traces, two steps of one (``a == b``) or two ranks. ``python_sources``: PyTorch
        traces' GPU time by the user's function too, from their Python stacks (``--sources``)."""
        from .analyze.diff import Side, diff
        from .analyze.needs import diff_projection

        a, b = self.one_file(a), self.one_file(b)
        projection = diff_projection(self.step_marker, python=python_sources)
        ta = self.load_step(a, step, projection)
        tb = ta if os.path.realpath(a) == os.path.realpath(b) else self.load(b, projection=projection)
        from .analyze.summary import check_step

        check_step(tb, step_b)
        d = diff(Side(ta, step), Side(tb, step_b), match=match, categorizer=self.categorizer(),
                 python_sources=python_sources)
        return Answer(d, ((ta, step), (tb, step_b)))  # a side with nothing to compare: the deltas are the other's


@dataclass(frozen=True)
class AnalyzeRequest:
    """One trace's ``kernscope analyze``: every option that changes its output (also the stored output's key)."""

    path: str
    step: int | None = None
    fmt: str = "table"
    top: int | None = None
    width: int = 160
    color: bool = False
    categories: bool = True
    linked_only: bool = False
    bench: bool | None = None
    by_annotation: str | None = None
    roofline: bool = False
    read_all: bool = False
    untraced_waits: bool = False
    python_sources: bool = False  #: ``--sources``: a PyTorch trace's GPU time by the user's function (Python events read)
    #: ``--windows``: a JAX profile analyzed this many time windows at a time (0: whole; None: by its size,
    #: :func:`kernscope.analyze.windows.windows_for`)
    windows: int | None = None


def analyze_one(s: Session, r: AnalyzeRequest, render: Callable[[Analysis], bytes], emit: Callable[[bytes], None],
                timings: list[tuple[str, float]] | None = None, warm: Callable[[], object] = lambda: None,
                keep: Callable[[bytes], object] | None = None) -> None:
    """``kernscope analyze TRACE``: the stored output when the file and options are unchanged (no table loaded),
    else load (the parse cache written on a thread), analyze, ``render`` and ``emit`` it and store it
    (:func:`kernscope.oneshot.answer`). ``timings`` (a cold run: no cache): the phases, render included. ``warm``:
    more to import on the prefetch thread (the renderer's modules). ``keep``: also given a stored output."""
    from .analyze.needs import analyze_projection

    options = {"fmt": r.fmt, "top": r.top, "step": "all" if r.step is None else str(r.step),
               "categories": r.categories, "linked_only": r.linked_only, "bench": r.bench, "width": r.width,
               "color": r.color, "by_annotation": r.by_annotation, "findings": outputs.rules_digest(s.findings),
               # (the output prints the path: a copy is another output)
               "roofline": r.roofline, "untraced_waits": r.untraced_waits, "sources": r.python_sources, "path": r.path}
    from .files import windows_for

    projection = None if r.read_all else analyze_projection(s.step_marker, roofline=r.roofline, python=r.python_sources)
    # a large JAX profile a time window at a time, where the options are those the windows' merge gives exactly
    plain = (r.step is None and r.by_annotation is None and not r.roofline and not r.untraced_waits
             and not r.python_sources and not r.read_all and r.bench is not True and not s.salvage
             and s.step_marker is None)
    windows = windows_for(r.path, r.windows) if plain else 0
    windowed = None
    if windows:  # (pipeline imports polars, which a stored answer does without)
        from .pipeline import windowed_key

        windowed = windowed_key(s.salvage, s.step_marker, projection)
    more = (windowed,) if windowed is not None else ()
    req = oneshot.Request("analyze", r.path, options, s.rules, salvage=s.salvage, step_marker=s.step_marker,
                          projection=projection, no_cache=not s.cache, notify=s.notify, keep=keep, more_keys=more)
    prefetch = oneshot.Prefetch(lambda: _prefetched(s, warm))
    done: dict[str, Any] = {}

    def load(digest: Any, defer: Any) -> Trace | _Windowed:
        if windowed is not None:
            tried = time.perf_counter()
            a = s.windowed(r, windows, prefetch.result(), projection, digest, windowed, timings)
            if not isinstance(a, str):
                return _Windowed(a)
            tried = time.perf_counter() - tried
            # (said once the whole read has given an answer)
            done["whole"] = a + (f" (trying the windows took {tried:.1f} s: --windows 0 reads it whole without trying)"
                                 if tried >= TRIED_SAY_S else "")
        return s.load(r.path, projection=req.projection, digest=digest, defer_cache_write=defer, timings=timings)

    def compute(t: Trace | _Windowed) -> bytes:
        lap = time.perf_counter()
        if isinstance(t, _Windowed):  # (analyzed a window at a time, as it was read: its phases are timed)
            a = done["analysis"] = t.analysis
        else:
            a = done["analysis"] = s.analysis(t, r.step, categorizer=prefetch.result(), categories=r.categories,
                                              linked_only=r.linked_only, bench=r.bench, by_annotation=r.by_annotation,
                                              roofline=r.roofline, untraced_waits=r.untraced_waits,
                                              python_sources=r.python_sources)
            if r.python_sources:
                s.no_sources(a, r.path)
            if t.salvaged is not None:
                s.say(f"kernscope: salvaged {t.salvaged:,} complete events from {r.path}")
                for line in t.salvage_skipped:
                    s.say(f"kernscope: {line}")
            if timings is not None:
                timings.append(("analysis (summaries, categories, findings" + (", roofline)" if r.roofline else ")"),
                                time.perf_counter() - lap))
        lap = time.perf_counter()
        body = render(a)
        if timings is not None:
            timings.append((f"render ({r.fmt})", time.perf_counter() - lap))
        return body

    def check(t: Trace | _Windowed) -> None:
        if not isinstance(t, _Windowed):  # (a windowed analysis has GPU work: analyze_windows reads others whole)
            check_answer((t, r.step), analysis=done["analysis"])
            if "whole" in done:  # (a large profile's memory: several times its size; the reason may be mended)
                s.say(f"kernscope: {r.path} was read whole, not a time window at a time: {done['whole']}")

    oneshot.answer(req, prefetch, load, compute, emit, check=check)


@dataclass(frozen=True)
class _Windowed:
    """An analysis made a time window at a time (``analyze_one``'s load gives it in place of a trace)."""

    analysis: Analysis


def _prefetched(s: Session, warm: Callable[[], object]) -> Categorizer:
    """What :class:`kernscope.oneshot.Prefetch` does while the trace is hashed and parsed: the analysis's imports
    (polars among them, ~0.15 s), ``warm`` and the categorizer."""
    from . import pipeline  # noqa: F401
    from .analyze import summary  # noqa: F401

    warm()
    return s.categorizer()


def peaks(spec: str | None, trace: Trace) -> DevicePeaks | None:
    """``--peak``: a known device, or numbers overriding the trace's matched device (None: the trace's)."""
    if not spec:
        return None
    from .analyze.perf import match_device, parse_peak

    base = None
    if "=" in spec:
        props = trace.device_properties
        base = match_device(props[0]) if props else None
    return parse_peak(spec, base)


def check_answer(*sides: tuple[Trace, int | None], analysis: Analysis | None = None) -> None:
    """:class:`EmptyAnswer` when the answer has no GPU time for a reason a trace shows (``sides``: (trace, step)
    of one trace, or of A and B, named in the line). A benchmark trace recorded on the CPU is not empty: its
    benchmark view times CPU ops."""
    from .analyze.summary import empty_reason

    if analysis is not None and analysis.benchmark is not None:
        return
    named = len(sides) > 1
    reasons = [f"{'AB'[i]}: {r}" if named else r for i, (t, n) in enumerate(sides) if (r := empty_reason(t, n)) is not None]
    if reasons:
        raise EmptyAnswer("; ".join(reasons))


def check_job(result: BenchDir | JobAnalysis) -> None:
    """:class:`EmptyAnswer` when no rank of a job has GPU activity (each rank's reason said), :class:`PartialFailure`
    when some rank files of a job failed (the results cover the others); a folder of benchmark traces passes."""
    from .analyze.ranks import JobAnalysis

    if isinstance(result, JobAnalysis) and result.ranks["span_us"].null_count() == result.ranks.height:
        raise EmptyAnswer(f"no rank of the job has GPU activity ({result.ranks.height} ranks; each rank's reason is "
                          "in the output's notes)")
    if isinstance(result, JobAnalysis) and result.failures:
        first = result.failures[0]
        raise PartialFailure(f"{len(result.failures)} of {len(result.failures) + result.ranks.height} rank files "
                             f"failed (first: {first.path}: {first.problem}); results cover the others")


def report_target(output: str) -> tuple[str, bool]:
    """(format, one CSV per table) for ``report -o``: ``xlsx``, ``html``, or a directory of CSVs (recognised with
    or without a trailing slash)."""
    low = output.lower()
    if low.endswith(".xlsx"):
        if os.path.isdir(output):
            raise KernscopeError(f"{output}: is a directory; give a file name ending in .xlsx")
        return "xlsx", False
    if low.endswith((".html", ".htm")):
        if os.path.isdir(output):
            raise KernscopeError(f"{output}: is a directory; give a file name ending in .html")
        return "html", False
    if output.endswith(("/", os.sep)) or os.path.isdir(output) or not os.path.splitext(output)[1]:
        return "csv", True
    raise KernscopeError(f"{output}: use a .xlsx or .html file, or a directory (for CSVs)")

