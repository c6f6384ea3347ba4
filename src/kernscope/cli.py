"""``kernscope`` command line: parse arguments, run the pipeline, pick a renderer. Nothing else."""

from __future__ import annotations

import errno
import os
import shutil
import sys
import time
import warnings
from typing import TYPE_CHECKING, Any

import click

from . import oneshot
from .errors import EXIT_EMPTY, EmptyAnswer, KernscopeError, PartialFailure
from .result import Result

if TYPE_CHECKING:
    from .analyze.bench_dir import BenchDir
    from .render.views import Options

EXIT_BAD_INPUT = 2


# -- helpers ---------------------------------------------------------------------------------------
class _Notices:
    """The running command's notices (each said once); :func:`main` starts a new set for every command."""

    current = oneshot.Notices(lambda msg: click.echo(msg, err=True))


def _notice(msg: str) -> None:
    """One line on stderr, once per command (the cache is asked several times and would repeat itself)."""
    _Notices.current(msg)


def _silent(msg: str) -> None:
    """--quiet: notices (cache, salvage) are dropped, not turned into Python warnings."""


def _expand(traces: tuple[str, ...] | list[str], quiet: bool) -> list[str]:
    """The trace files named (files, directories, globs; a JAX run directory: its richest file, said on stderr)."""
    from .files import expand_inputs

    notes: list[str] = []
    paths = expand_inputs(traces, notes)
    for n in notes if not quiet else []:
        _notice(f"kernscope: {n}")
    return paths


class Progress:
    """A progress bar on stderr for loads that take more than a second (terminal only, not with --quiet).

    ``unit`` "bytes" counts bytes read (then says what comes next, with a spinner, while the trace is linked);
    any other unit counts items, e.g. "ranks": ``2/4 ranks``."""

    def __init__(self, label: str, quiet: bool, unit: str = "bytes", after: str = "linking and analyzing") -> None:
        self.label = label
        self.unit = unit
        self.after = after
        self.enabled = not quiet and sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.monotonic() - self.t0 < 1.0:
                return
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress

            count = (DownloadColumn(),) if self.unit == "bytes" else (MofNCompleteColumn(), TextColumn(self.unit))
            self.bar = RichProgress(SpinnerColumn(), "[progress.description]{task.description}", BarColumn(), *count,
                                    TimeRemainingColumn(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.label, total=total)
        described = f"{self.label}: {self.after}" if self.unit == "bytes" and total and done >= total else self.label
        self.bar.update(self.task, completed=done, total=total, description=described)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _parse_size(text: str | None) -> int:
    if not text:
        return 0
    t = text.strip().upper().removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    try:
        return int(float(t.rstrip("KMGT")) * mult)
    except ValueError:
        raise click.BadParameter(f"expected a size like 8G or 500M, got {text!r}", param_hint="--max-memory") from None


def _parse_step(step: str | None) -> int | None:
    if step is None or step == "all":
        return None
    s = step.removeprefix("ProfilerStep#")
    try:
        return int(s)
    except ValueError:
        raise click.BadParameter(f"expected a step number or 'all', got {step!r}", param_hint="--step") from None


def _categorizer(rules: str | None) -> Any:
    from .analyze.categories import Categorizer

    c = Categorizer.builtin()
    return c.with_rules(rules) if rules else c


def _prefetched(rules: str | None) -> Any:
    """What :class:`kernscope.oneshot.Prefetch` does while the trace is hashed and parsed: the analysis's imports
    (polars among them, ~0.15 s) and the categorizer."""
    from . import pipeline  # noqa: F401
    from .analyze import summary  # noqa: F401
    from .render import tables  # noqa: F401

    return _categorizer(rules)


def _console_width() -> int:
    """The terminal's width (``COLUMNS`` when set); 120 when piped to a file or another program."""
    return max(40, shutil.get_terminal_size((120, 24)).columns)


def _emit_bytes(body: bytes, output: str | None) -> None:
    from .files import write_bytes

    if output:
        write_bytes(output, body)
    else:
        body = body if body.endswith(b"\n") else body + b"\n"
        out = getattr(sys.stdout, "buffer", None)
        if out is not None:
            out.write(body)
        else:  # a text stream (tests, notebooks)
            sys.stdout.write(body.decode("utf-8", "replace"))
        sys.stdout.flush()


def _load(path: str, *, salvage: bool, no_cache: bool, quiet: bool, max_memory: str | None,
          step_marker: str | None = None, projection: Any = None, digest: Any = None,
          defer_cache_write: Any = None, timings: list[tuple[str, float]] | None = None) -> Any:
    """Load a trace for a command; ``projection``: what the command never reads (None: read all);
    ``digest``: the file's content digest if the command has just computed it; ``defer_cache_write``:
    see :func:`kernscope.pipeline.load`."""
    from .link import StepSpec
    from .load.source import Limits
    from .pipeline import load

    progress = Progress(f"reading {os.path.basename(path)}", quiet)
    try:
        return load(path, cache=not no_cache, salvage=salvage, notify=_silent if quiet else _notice, progress=progress,
                    limits=Limits(max_memory=_parse_size(max_memory)), steps=StepSpec(step_marker),
                    projection=projection, digest=digest, defer_cache_write=defer_cache_write, timings=timings)
    finally:
        progress.close()


def _check_step(trace: Any, step: int | None) -> None:
    from .analyze.summary import check_step

    check_step(trace, step)


# -- commands -----------------------------------------------------------------------------------------
@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="kernscope")
def cli() -> None:
    """kernscope: where does the GPU time go?"""


_trace_opts = [
    click.option("--salvage", is_flag=True, help="Read a truncated or partly corrupt trace: keep every complete, valid event."),
    click.option("--no-cache", is_flag=True, help="Do not read or write the parse cache."),
    click.option("--rules", type=click.Path(dir_okay=False), help="TOML file of extra/overriding category rules."),
    click.option("--quiet", "-q", is_flag=True, help="No progress bar or notices on stderr."),
    click.option("--max-memory", metavar="SIZE", help="Memory the decoded tables may use (e.g. 8G; default 80% of free memory)."),
    click.option("--step-marker", metavar="REGEX|PRESET|auto",
                 help="Steps from annotations matching REGEX, a preset (vllm, sglang, megatron) or 'auto'."),
]


def trace_options(f: Any) -> Any:
    for opt in reversed(_trace_opts):
        f = opt(f)
    return f


_rank_opts = [
    click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
                 help="Several traces (ranks): analyze them in local processes, or on Dask (kernscope[dask])."),
    click.option("--scheduler", metavar="ADDRESS", help="With --engine dask: an existing scheduler (tcp://host:8786); "
                                                        "default: start a LocalCluster."),
    click.option("--workers", type=click.IntRange(min=1), help="Processes / LocalCluster workers (default: CPU count)."),
    click.option("--strict", is_flag=True, help="Several traces: stop at the first one that fails to load."),
    click.option("--read-all", "read_all", is_flag=True,
                 help="Parse every event and arg (by default what the analysis never reads is skipped unparsed: "
                      "instant and Python events and unused args for one trace; also other CPU ops and flow arrows "
                      "for several ranks; the results are the same, loading is faster)."),
]


def rank_options(f: Any) -> Any:
    for opt in reversed(_rank_opts):
        f = opt(f)
    return f


def _job(paths: list[str], engine: str, scheduler: str | None, workers: int | None, strict: bool, quiet: bool,
         salvage: bool, no_cache: bool, step_marker: str | None, read_all: bool = False) -> Any:
    from .analyze.ranks import RankTask
    from .engine import EngineSpec, analyze_job

    progress = Progress(f"analyzing {len(paths)} ranks", quiet, unit="ranks")
    try:
        return analyze_job(paths, RankTask(cache=not no_cache, salvage=salvage, step_marker=step_marker,
                                           projection=not read_all),
                           EngineSpec(engine, scheduler, workers), strict=strict, progress=progress)
    finally:
        progress.close()


def _failures(job: Any) -> None:
    if job.failures:
        first = job.failures[0]
        raise PartialFailure(f"{len(job.failures)} of {len(job.failures) + job.ranks.height} rank files failed "
                             f"(first: {first.path}: {first.problem}); results cover the others")


def _perf(t: Any, step_n: int | None, peak: str | None) -> Any:
    """The perf model of ``t`` (its op shapes read from the file)."""
    from .analyze.perf import perf_model

    return perf_model(t, step=step_n, peaks=_peaks(peak, t))


def _with_roofline(a: Any, pm: Any, findings_rules: str | None) -> Any:
    """``a`` with the perf model's far_from_roofline findings merged into its ranked findings."""
    if not pm.ops.height:
        return a
    import dataclasses

    from .analyze.findings import find_roofline, merged

    steps = 1 if a.step is not None else a.trace.steps.height
    found = find_roofline(pm.ops, steps, rules=_finding_rules(findings_rules))
    return dataclasses.replace(a, findings=merged(a.findings, found))


@cli.command()
@click.argument("traces", nargs=-1, required=True)
@click.option("--step", default=None, help="Step number to analyze, or 'all' (default).")
@click.option("--top", default=None, type=click.IntRange(min=1),
              help="Rows per table [default: 15 in the terminal; every row in JSON/CSV].")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("-o", "--output", help="Write to FILE instead of stdout.")
@click.option("--no-categories", is_flag=True, help="Skip kernel-name categories.")
@click.option("--linked-only", is_flag=True, help="Timeline over GPU work launched inside the trace window only.")
@click.option("--bench/--no-bench", "bench", default=None,
              help="Benchmark-trace view (default: auto-detect); with a directory: every (input, impl) trace in it, "
                   "kernscope bench's or TritonBench's layout, compared per input.")
@click.option("--findings", "findings_rules", type=click.Path(dir_okay=False), metavar="FILE",
              help="TOML file overriding the findings' thresholds and wording (see kernscope/analyze/findings.toml).")
@click.option("--by-annotation", "by_annotation", is_flag=False, flag_value="", default=None, metavar="[REGEX]",
              help="GPU time, categories and timeline by your record_function ranges (all, or those matching REGEX).")
@click.option("--roofline", is_flag=True,
              help="Also run the perf model (op shapes: a second, sparse read of the file, ~0.5 s per 200 MB) and add "
                   "its far_from_roofline findings; report always does.")
@click.option("--timings", is_flag=True,
              help="After the output, print to stderr where the time went (parse, link, analysis, render), reading "
                   "the file cold (the cache is neither read nor written).")
@trace_options
@rank_options
def analyze(traces: tuple[str, ...], step: str | None, top: int | None, fmt: str, output: str | None,
            no_categories: bool, linked_only: bool, bench: bool | None, findings_rules: str | None,
            by_annotation: str | None, roofline: bool, timings: bool, salvage: bool,
            no_cache: bool, rules: str | None, quiet: bool, max_memory: str | None, step_marker: str | None,
            engine: str, scheduler: str | None, workers: int | None, strict: bool, read_all: bool) -> None:
    """Summarize PyTorch profiler (Kineto) traces: steps, kernels, launching ops, categories, GPU timeline.

    Several traces (files, directories, globs) are the ranks of one job: per-rank compute, communication,
    overlap and idle time, collectives matched across ranks, and the straggler of every step."""
    from . import outputs

    if len(traces) == 1 and os.path.isdir(traces[0]) and bench:
        _show(_bench_dir(traces[0], rules, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory),
              fmt, output, top)
        return

    paths = _expand(traces, quiet)
    if len(paths) > 1:
        job = _with_findings(_job(paths, engine, scheduler, workers, strict, quiet, salvage, no_cache, step_marker,
                                  read_all), findings_rules)
        _show(job, fmt, output, top)
        _failures(job)
        return
    trace = paths[0]
    laps: list[tuple[str, float]] | None = [] if timings else None
    if timings:
        no_cache = True  # the phases of a cold analyze
    finding_rules = _finding_rules(findings_rules)
    if top is None and fmt == "table":
        top = 15
    width = 160 if output or fmt != "table" else _console_width()
    color = fmt == "table" and not output and sys.stdout.isatty()
    from .analyze.needs import analyze_projection

    req = oneshot.Request(
        "analyze", trace, {"fmt": fmt, "top": top, "step": step, "categories": not no_categories, "linked_only": linked_only,
                           "bench": bench, "width": width, "color": color, "by_annotation": by_annotation,
                           "findings": outputs.rules_digest(findings_rules), "roofline": roofline,
                           "path": trace},  # the output prints the path: a copy is another output
        rules, salvage=salvage, step_marker=step_marker, projection=None if read_all else analyze_projection(step_marker),
        no_cache=no_cache, notify=_silent if quiet else _notice)
    prefetch = oneshot.Prefetch(lambda: _prefetched(rules))
    done: dict[str, Any] = {}

    def load(digest: Any, defer: Any) -> Any:
        return _load(trace, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory, step_marker=step_marker,
                     projection=req.projection, digest=digest, defer_cache_write=defer, timings=laps)

    def compute(t: Any) -> bytes:
        lap = time.perf_counter()
        from .analyze.summary import analyze as run  # imported by the prefetch thread while the trace was parsed

        step_n = done["step"] = _parse_step(step)  # analyze() refuses a step the trace does not have
        a = done["analysis"] = run(t, step=step_n, categorizer=prefetch.result(), use_kernel_name_categories=not no_categories,
                                   linked_only=linked_only, benchmark=bench, by_annotation=by_annotation,
                                   finding_rules=finding_rules)
        if roofline:
            a = done["analysis"] = _with_roofline(a, _perf(t, step_n, None), findings_rules)
        if laps is not None:
            laps.append(("analysis (summaries, categories, findings" + (", roofline)" if roofline else ")"),
                         time.perf_counter() - lap))
            done["lap"] = time.perf_counter()
        if t.salvaged is not None and not quiet:
            _notice(f"kernscope: salvaged {t.salvaged:,} complete events from {trace}")
            for line in t.salvage_skipped:
                _notice(f"kernscope: {line}")
        from .render.views import Options

        return _rendered(a, fmt, Options(top=top, width=width, color=color))

    def emit(body: bytes) -> None:
        _emit_bytes(body, output)
        if laps is not None:
            from rich.console import Console

            from .render.timings import render_timings

            laps.append((f"render ({fmt})", time.perf_counter() - done["lap"]))
            render_timings(Console(stderr=True, width=_console_width()), trace, os.path.getsize(trace), laps)

    oneshot.answer(req, prefetch, load, compute, emit,
                   check=lambda t: _raise_if_empty((t, done["step"]), analysis=done["analysis"]))


def _rendered(result: Result, fmt: str, options: Options) -> bytes:
    """``result`` as ``fmt`` (``table``, ``json``, ``csv``, ``xlsx``) through its renderer."""
    from .render.formats import render

    out = render(result, fmt, options)
    assert isinstance(out, bytes)
    return out


def _show(result: Result, fmt: str, output: str | None, top: int | None, default_top: int = 15) -> None:
    """``result`` as ``fmt`` to stdout or ``output`` (``top`` rows per long table; in the terminal by default
    ``default_top``), fitted to the terminal unless written to a file."""
    from .render.views import Options

    if top is None and fmt == "table":
        top = default_top
    color = fmt == "table" and not output and sys.stdout.isatty()
    _emit_bytes(_rendered(result, fmt, Options(top=top, width=160 if output else _console_width(), color=color)), output)


def _write(result: Result, fmt: str, output: str, quiet: bool, all_tables: bool = False) -> None:
    """``result`` as a file (``xlsx``, ``html``) or a directory of CSVs (``csv`` with ``all_tables``) at ``output``,
    written whole or not at all."""
    from .render.formats import render, write
    from .render.views import Options

    write(render(result, fmt, Options(all_tables=all_tables)), output, regular=fmt == "xlsx")
    if not quiet:
        _notice(f"wrote {output}")


def _with_findings(job: Any, path: str | None) -> Any:
    """``job`` with its findings under ``--findings FILE`` (the job computes them with the built-in rules)."""
    if not path:
        return job
    import dataclasses

    from .analyze.findings import find_stragglers

    return dataclasses.replace(job, findings=find_stragglers(job.stragglers, rules=_finding_rules(path)))


def _finding_rules(path: str | None) -> Any:
    """The findings' rules with ``--findings FILE`` applied (None: the built-in ones)."""
    if not path:
        return None
    from .analyze.findings import FindingRules

    return FindingRules.load(path)


def _raise_if_empty(*sides: tuple[Any, int | None], analysis: Any = None) -> None:
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


def _bench_dir(root: str, rules: str | None, **load_opts: Any) -> BenchDir:
    from .analyze.bench_dir import analyze_bench_dir

    return analyze_bench_dir(root, lambda p: _load(p, **load_opts), _categorizer(rules))


def _report_target(output: str) -> tuple[str, bool]:
    """(format, one CSV per table) for ``-o``: ``xlsx``, ``html``, or a directory of CSVs (recognised with or without
    a trailing slash)."""
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


@cli.command()
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--output", required=True, help="report.xlsx (Excel), report.html (self-contained page) or a directory (CSVs).")
@click.option("--step", default=None, help="Step number, or 'all' (default).")
@click.option("--linked-only", is_flag=True, help="Timeline over GPU work launched inside the trace window only.")
@click.option("--bench/--no-bench", "bench", default=None, help="Benchmark-trace view (default: auto-detect).")
@click.option("--findings", "findings_rules", type=click.Path(dir_okay=False), metavar="FILE",
              help="TOML file overriding the findings' thresholds and wording (see kernscope/analyze/findings.toml).")
@click.option("--by-annotation", "by_annotation", is_flag=False, flag_value="", default=None, metavar="[REGEX]",
              help="Add GPU time by your record_function ranges (all, or those matching REGEX).")
@click.option("--diff", "diff_with", metavar="TRACE_B", help="Add the comparison with TRACE_B (diff_* sheets).")
@click.option("--step-b", default=None, help="With --diff: the step of TRACE_B (default: --step).")
@click.option("--peak", metavar="DEVICE|KEY=VALUE,...", help="Device peaks for the perf sheets (see kernscope perf).")
@click.option("--intra", "intra_files", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="Intra-kernel records of the same run (kernscope buffers/traces, Proton's traces; repeatable): "
                   "placed under their kernels (see kernscope intra align): rows on the HTML timeline below the "
                   "kernel's stream, and the intra_launches table/sheet.")
@click.option("--intra-kernel", default=None, metavar="NAME", help="With --intra: the host's kernel name "
                                                                    "[default: the intra file's kernel].")
@trace_options
@rank_options
def report(traces: tuple[str, ...], output: str, step: str | None, linked_only: bool, bench: bool | None,
           findings_rules: str | None,
           by_annotation: str | None, diff_with: str | None, step_b: str | None, peak: str | None,
           intra_files: tuple[str, ...], intra_kernel: str | None, salvage: bool,
           no_cache: bool, rules: str | None, quiet: bool, max_memory: str | None, step_marker: str | None,
           engine: str, scheduler: str | None, workers: int | None, strict: bool, read_all: bool) -> None:
    """Write the perf report: Excel workbook, self-contained HTML page, or a directory of CSVs.

    Workbooks and CSV directories also get the perf model's sheets (one per op class, unified_perf_summary) when the
    trace has op shapes, and the diff_* sheets with --diff."""
    from .analyze.report import Report
    from .analyze.summary import analyze as run

    fmt, all_tables = _report_target(output)
    if len(traces) == 1 and os.path.isdir(traces[0]) and bench:
        b = _bench_dir(traces[0], rules, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory)
        _write(b, fmt, output, quiet, all_tables)
        return
    paths = _expand(traces, quiet)
    if intra_files and len(paths) > 1:
        raise KernscopeError("--intra places records on one host trace: give one trace, not a job")
    if len(paths) > 1:
        job = _with_findings(_job(paths, engine, scheduler, workers, strict, quiet, salvage, no_cache, step_marker,
                                  read_all), findings_rules)
        _write(job, fmt, output, quiet, all_tables)
        _failures(job)
        return
    t = _load(paths[0], salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory, step_marker=step_marker)
    step_n = _parse_step(step)  # analyze() refuses a step the trace does not have
    cat = _categorizer(rules)
    a = run(t, step=step_n, categorizer=cat, linked_only=linked_only, benchmark=bench, by_annotation=by_annotation,
            finding_rules=_finding_rules(findings_rules))
    pm = _perf(t, step_n, peak)
    if pm.ops.height:
        a = _with_roofline(a, pm, findings_rules)  # the report has the perf model's findings too
    from .analyze.memory import memory_timeline

    d = None
    if diff_with:
        from .analyze.diff import Side, diff

        tb = _load(diff_with, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory,
                   step_marker=step_marker)
        sb = _parse_step(step_b) if step_b is not None else step_n
        _check_step(tb, sb)
        d = diff(Side(t, step_n), Side(tb, sb), categorizer=cat)
    launches = rows = None
    if intra_files:
        from .intra.align import align_files, launches_sheet, timeline_rows

        done = align_files(t, intra_files, intra_kernel)
        launches = launches_sheet(done)
        rows = timeline_rows([al for _, al in done], a.gpu["idx"] if "idx" in a.gpu.columns else None)
    report_ = Report(a, pm if pm.ops.height else None, memory_timeline(t), d, launches, rows)
    _write(report_, fmt, output, quiet, all_tables)
    _raise_if_empty((t, step_n), analysis=a)


def _peaks(spec: str | None, trace: Any) -> Any:
    if not spec:
        return None
    from .analyze.perf import match_device, parse_peak

    base = None
    if "=" in spec:
        props = trace.device_properties
        base = match_device(props[0]) if props else None
    return parse_peak(spec, base)


@cli.command()
@click.argument("trace")
@click.option("--step", default=None, help="Step number, or 'all' (default).")
@click.option("--peak", metavar="DEVICE|KEY=VALUE,...",
              help="Device peaks: a known device (h100, h200, b200, a100, mi300x, ...) or numbers overriding the matched "
                   "device, e.g. bf16=989,fp32=67,bw=3.35 (TFLOP/s, TB/s).")
@click.option("--top", default=None, type=click.IntRange(min=1),
              help="Rows per table [default: 15 in the terminal; every row in JSON/CSV].")
@click.option("--all", "show_nested", is_flag=True, help="Also list ops that contain another modeled op (aten::linear around aten::addmm).")
@click.option("--findings", "findings_rules", type=click.Path(dir_okay=False), metavar="FILE",
              help="TOML file overriding the findings' thresholds and wording (see kernscope/analyze/findings.toml).")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("-o", "--output", help="Write to FILE instead of stdout; a .xlsx name writes a workbook (one sheet per op class).")
@trace_options
def perf(trace: str, step: str | None, peak: str | None, top: int | None, show_nested: bool, findings_rules: str | None,
         fmt: str, output: str | None,
         salvage: bool, no_cache: bool, rules: str | None, quiet: bool, max_memory: str | None,
         step_marker: str | None) -> None:
    """Perf model and roofline: FLOPs, bytes, TFLOP/s, TB/s and % of the device's peak for every op with shapes."""
    from .analyze.findings import find_roofline
    from .analyze.perf import PerfReport, perf_model

    t = _load(trace, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory, step_marker=step_marker)
    step_n = _parse_step(step)
    _check_step(t, step_n)
    pm = perf_model(t, step=step_n, peaks=_peaks(peak, t))
    findings = find_roofline(pm.ops, 1 if step_n is not None else t.steps.height, rules=_finding_rules(findings_rules))
    if not quiet:
        for n in pm.notes:
            _notice(f"kernscope: {n}")
    result = PerfReport(pm, trace, findings, show_nested)
    if output and output.lower().endswith(".xlsx"):
        _write(result, "xlsx", output, quiet)
        return
    _show(result, fmt, output, top)
    _raise_if_empty((t, step_n))


@cli.command()
@click.argument("trace")
@click.option("--top", default=None, type=click.IntRange(min=1),
              help="Ops listed [default: 15 in the terminal; every row in JSON/CSV].")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("-o", "--output", help="Write to FILE instead of stdout.")
@trace_options
def memory(trace: str, top: int | None, fmt: str, output: str | None, salvage: bool, no_cache: bool, rules: str | None,
           quiet: bool, max_memory: str | None, step_marker: str | None) -> None:
    """Memory over time (a trace recorded with profile_memory=True): per device the peak with the op and step
    that reached it, per step the growth, per op the allocations, their lifetime and what is still held."""
    import dataclasses

    from .analyze.memory import memory_timeline

    t = _load(trace, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory, step_marker=step_marker)
    m = memory_timeline(t)
    if m is None:
        raise EmptyAnswer(f"{trace}: no [memory] events: record the trace with torch.profiler.profile(profile_memory=True)")
    _show(dataclasses.replace(m, path=trace), fmt, output, top)


@cli.command("sql")
@click.argument("query")
@click.argument("trace")
@click.option("--step", default=None, help="Step of the analysis.* tables (default: all steps).")
@click.option("--top", default=None, type=click.IntRange(min=1), help="Rows shown [default: 50 in the terminal; all in JSON/CSV].")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("-o", "--output", help="Write to FILE instead of stdout.")
@trace_options
def sql_cmd(query: str, trace: str, step: str | None, top: int | None, fmt: str, output: str | None, salvage: bool,
            no_cache: bool, rules: str | None, quiet: bool, max_memory: str | None, step_marker: str | None) -> None:
    """Run a SQL QUERY over TRACE's tables: events, gpu, kernels, cpu_ops, launches, steps, flows, call_tree
    (times int64 ns), and analysis.<table> (analysis.kernels, analysis.categories, analysis.findings,
    analysis.critical_path, ...; µs in *_us). Polars' SQL dialect; see docs/glossary.md for every table."""
    from .analyze.sql import QueryResult, sql

    t = _load(trace, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory, step_marker=step_marker)
    step_n = _parse_step(step)
    if step_n is not None:
        _check_step(t, step_n)
    _show(QueryResult(query, sql(t, query, step=step_n, categorizer=_categorizer(rules))), fmt, output, top, default_top=50)


@cli.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--step", default=None, help="Step of A to compare (and of B, unless --step-b is given).")
@click.option("--step-b", default=None, help="Step of B to compare.")
@click.option("--match", type=click.Choice(["exact", "loose"]), default="exact", show_default=True,
              help="loose: kernel names that differ only in template arguments, tile sizes or tuning numbers match.")
@click.option("--top", default=None, type=click.IntRange(min=1),
              help="Rows per table [default: 15 in the terminal; every row in JSON/CSV].")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("-o", "--output", help="Write to FILE instead of stdout; a .xlsx name writes a workbook.")
@trace_options
def diff_cmd(a: str, b: str, step: str | None, step_b: str | None, match: str, top: int | None, fmt: str,
             output: str | None, salvage: bool, no_cache: bool, rules: str | None, quiet: bool, max_memory: str | None,
             step_marker: str | None) -> None:
    """Compare two traces, two steps of one trace (A A --step 3 --step-b 5) or two ranks: where B spends more or less."""
    from .analyze.diff import Side, diff

    ta = _load(a, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory, step_marker=step_marker)
    same_file = os.path.realpath(a) == os.path.realpath(b)
    tb = ta if same_file else _load(b, salvage=salvage, no_cache=no_cache, quiet=quiet, max_memory=max_memory,
                                    step_marker=step_marker)
    sa = _parse_step(step)
    sb = _parse_step(step_b) if step_b is not None else sa
    _check_step(ta, sa)
    _check_step(tb, sb)
    d = diff(Side(ta, sa), Side(tb, sb), match=match, categorizer=_categorizer(rules))
    if output and output.lower().endswith(".xlsx"):
        _write(d, "xlsx", output, quiet)
    else:
        _show(d, fmt, output, top)
    _raise_if_empty((ta, sa), (tb, sb))  # a side with nothing to compare: the deltas are the other side's totals


@cli.group("cache")
def cache_group() -> None:
    """The parse cache: where it is, how big, and clearing it."""


@cache_group.command("info")
def cache_info() -> None:
    """Location, entries, size and size cap of the cache."""
    from .load import cache as c

    root = c.cache_root(_notice)
    if root is None:
        click.echo("cache: off (no writable cache directory)")
        return
    found = c.entries(root)
    total = sum(e[1] for e in found)
    click.echo(f"cache: {root}")
    click.echo(f"entries: {len(found)}  size: {total / 1e6:,.1f} MB  cap: {c.max_bytes() / 1e6:,.0f} MB "
               "(KERNSCOPE_CACHE_MAX_BYTES; least recently used entries are evicted first)")


@cache_group.command("clear")
def cache_clear() -> None:
    """Remove every cache entry."""
    from .load import cache as c

    freed = c.clear(c.cache_root(_notice))
    click.echo(f"cache cleared: {freed / 1e6:,.1f} MB freed")


def _register_optional() -> None:
    from .bench.cli import bench
    from .intra.cli import intra

    cli.add_command(bench)
    cli.add_command(intra)


def _show_notice(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
    if category.__name__ == "CacheNotice":  # by name: importing the cache module here would import polars early
        _notice(str(message))
    else:
        click.echo(f"kernscope: warning: {message}", err=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input is one line on stderr and exit code 2, never a traceback."""
    oneshot.tune_allocators()
    _register_optional()
    _Notices.current = oneshot.Notices(lambda msg: click.echo(msg, err=True))
    try:
        with warnings.catch_warnings():  # a cache notice from a call without a notify: one plain line, not a warning
            warnings.showwarning = _show_notice
            cli.main(args=argv, prog_name="kernscope", standalone_mode=False)
    except KernscopeError as e:
        click.echo(f"kernscope: error: {e}", err=True)
        return EXIT_BAD_INPUT
    except PartialFailure as e:
        click.echo(f"kernscope: {e}", err=True)
        return 1
    except EmptyAnswer as e:
        click.echo(f"kernscope: {e}", err=True)
        return EXIT_EMPTY
    except click.exceptions.Abort:
        click.echo("kernscope: aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return EXIT_BAD_INPUT
    except MemoryError:
        click.echo("kernscope: error: out of memory (try --max-memory, or fewer/smaller traces)", err=True)
        return 1
    except BrokenPipeError:
        return 0
    except OSError as e:
        if e.errno not in _WRITE_ERRNOS:
            return _internal(e)
        click.echo(f"kernscope: error: cannot write the output: {e.strerror or e}", err=True)  # disk full, read-only
        return EXIT_BAD_INPUT
    except Exception as e:  # a bug: still one line unless asked for the traceback
        return _internal(e)
    return 0


#: errno values of an output that cannot be written: no space, over quota, file too large, read-only, I/O error
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def _internal(e: BaseException) -> int:
    if os.environ.get("KERNSCOPE_DEBUG"):
        raise e
    click.echo(f"kernscope: internal error: {type(e).__name__}: {e} (set KERNSCOPE_DEBUG=1 for a traceback)", err=True)
    return 1


def run() -> None:  # pragma: no cover - exits the process
    """The ``kernscope`` command: :func:`main`, then a quick exit (:func:`kernscope.oneshot.quick_exit`)."""
    oneshot.quick_exit(main())


if __name__ == "__main__":  # pragma: no cover
    run()
