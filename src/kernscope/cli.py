"""``kernscope`` command line: parse arguments into a :class:`~kernscope.commands.Session` and one call of
:mod:`kernscope.commands`, then give the result to a renderer (:mod:`kernscope.render.formats`). Nothing else."""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from . import exits, oneshot
from .render.output import options_for, renderer_and_sink, show, warm, write_result

if TYPE_CHECKING:
    from .commands import Session
    from .replay import Invocation

F = TypeVar("F", bound=Callable[..., Any])  # a click command function


# -- helpers ---------------------------------------------------------------------------------------
class _Notices:
    """The running command's notices (each said once); :func:`main` starts a new set for every command."""

    current = oneshot.Notices(lambda msg: click.echo(msg, err=True))


def _notice(msg: str) -> None:
    """One line on stderr, once per command (the cache is asked several times and would repeat itself)."""
    _Notices.current(msg)


def _parse_size(text: str | None) -> int:
    if not text:
        return 0
    t = text.strip().upper().removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:], 1)
    try:
        return int(float(t.rstrip("KMGT")) * mult)
    except ValueError:
        raise click.BadParameter(f"expected a size like 8G or 500M, got {text!r}", param_hint="--max-memory") from None


def _parse_step(step: str | None, hint: str = "--step") -> int | None:
    if step is None or step == "all":
        return None
    try:
        return int(step.removeprefix("ProfilerStep#"))
    except ValueError:
        raise click.BadParameter(f"expected a step number or 'all', got {step!r}", param_hint=hint) from None


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


def output_options(top_help: str = "Rows per table [default: 15 in the terminal; every row in JSON/CSV].",
                   output_help: str = "Write to FILE instead of stdout.") -> Callable[[F], F]:
    """``--top``, ``--format`` and ``-o`` of a command that prints a result."""

    def add(f: F) -> F:
        f = click.option("-o", "--output", help=output_help)(f)
        f = click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)(f)
        return click.option("--top", default=None, type=click.IntRange(min=1), help=top_help)(f)

    return add


def trace_options(f: F) -> F:
    """The trace options, handed to the command as one :class:`~kernscope.commands.Session` ``s``."""

    @functools.wraps(f)
    def command(*args: Any, salvage: bool, no_cache: bool, rules: str | None, quiet: bool, max_memory: str | None,
                step_marker: str | None, **kwargs: Any) -> Any:
        from .commands import Session
        from .render.progress import Progress

        invocation = click.get_current_context().find_root().obj  # a kernscope.replay.Invocation, from main()
        s = Session(cache=not no_cache, salvage=salvage, max_memory=_parse_size(max_memory), step_marker=step_marker,
                    rules=rules, findings=kwargs.pop("findings_rules", None), quiet=quiet, notice=_notice,
                    progress=lambda label, unit: Progress(label, quiet, unit=unit),
                    keep=invocation.record if invocation is not None else None,
                    head=invocation.head if invocation is not None else None)
        return f(*args, s=s, **kwargs)

    for opt in reversed(_trace_opts):
        command = opt(command)
    return command  # type: ignore[return-value]


_rank_opts = [
    click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
                 help="Several traces (ranks): analyze them in local processes, or on Dask (kernscope[dask])."),
    click.option("--scheduler", metavar="ADDRESS", help="With --engine dask: an existing scheduler (tcp://host:8786); "
                                                        "default: start a LocalCluster."),
    click.option("--workers", type=click.IntRange(min=1),
                 help="Processes / LocalCluster workers (default: CPU count; a small local job runs in this process)."),
    click.option("--strict", is_flag=True, help="Several traces: stop at the first one that fails to load."),
    click.option("--read-all", "read_all", is_flag=True,
                 help="Parse every event and arg (by default what the analysis never reads is skipped unparsed: "
                      "instant and Python events and unused args for one trace; also other CPU ops and flow arrows "
                      "for several ranks; the results are the same, loading is faster)."),
]


#: ``--untraced-waits`` of ``analyze`` and ``report``
untraced_waits_option = click.option(
    "--untraced-waits", is_flag=True,
    help="JAX/XLA profiles: the critical path takes a step's untraced host tail (XLA records no event for "
         "block_until_ready) as a wait for the GPU work that ended in it, and follows that work; a heuristic, slower "
         "on large profiles.")

sources_option = click.option(
    "--sources", "python_sources", is_flag=True,
    help="PyTorch traces recorded with with_stack=True: GPU time by the function of your code, from the Python stack "
         "around each launch (reads the trace's Python events: a slower load). JAX profiles have it always, by line.")


def rank_options(f: F) -> F:
    for opt in reversed(_rank_opts):
        f = opt(f)
    return f


@cli.command()
@click.argument("traces", nargs=-1, required=True)
@click.option("--step", default=None, help="Step number to analyze, or 'all' (default).")
@output_options()
@click.option("--no-categories", is_flag=True, help="Skip kernel-name categories.")
@click.option("--linked-only", is_flag=True, help="Timeline over GPU work launched inside the trace window only.")
@click.option("--bench/--no-bench", "bench", default=None,
              help="Benchmark-trace view (default: auto-detect); with a directory: every (input, impl) trace in it, "
                   "kernscope bench's or TritonBench's layout, compared per input.")
@click.option("--findings", "findings_rules", type=click.Path(dir_okay=False), metavar="FILE",
              help="TOML file overriding the findings' thresholds and wording (see kernscope/analyze/findings.toml).")
@click.option("--by-annotation", "by_annotation", is_flag=False, flag_value="", default=None, metavar="[REGEX]",
              help="GPU time, categories and timeline by your record_function ranges (all, or those matching REGEX; "
                   "a REGEX that names a file: --by-annotation=REGEX).")
@click.option("--roofline", is_flag=True,
              help="Also run the perf model (op shapes: a second, sparse read of the file, ~0.5 s per 200 MB) and add "
                   "its far_from_roofline findings; report always does.")
@untraced_waits_option
@sources_option
@click.option("--timings", is_flag=True,
              help="After the output, print to stderr where the time went (the command's start, parse, link, "
                   "analysis, render), reading the file cold (the cache is neither read nor written).")
@click.option("--windows", type=click.IntRange(min=0), default=None, metavar="N",
              help="A JAX profile (.xplane.pb): read and analyze it N time windows at a time, cut between steps, for "
                   "the same output in a fraction of the memory, in more time (0: whole) [default: one window per 26 MB "
                   "or per 200,000 events, whichever makes more, fourteen at most, for a plain profile of 128 MB or more].")
@trace_options
@rank_options
def analyze(s: Session, traces: tuple[str, ...], step: str | None, top: int | None, fmt: str, output: str | None,
            no_categories: bool, linked_only: bool, bench: bool | None, by_annotation: str | None, roofline: bool,
            untraced_waits: bool, python_sources: bool, timings: bool, windows: int | None, engine: str,
            scheduler: str | None, workers: int | None, strict: bool, read_all: bool) -> None:
    """Summarize a PyTorch profiler (Kineto) trace or a JAX profile (.xplane.pb, or its run directory): steps,
    kernels, launching ops, categories, the GPU timeline, the critical path and ranked findings.

    Several traces (files, directories, globs) are the ranks of one job: per-rank compute, communication,
    overlap and idle time, collectives matched across ranks, and the straggler of every step."""
    from . import commands

    s = dataclasses.replace(s, cache=False) if timings else s  # the phases of a cold run
    given = {"--step": step is not None, "--no-categories": no_categories, "--linked-only": linked_only,
             "--by-annotation": by_annotation is not None, "--roofline": roofline, "--untraced-waits": untraced_waits,
             "--sources": python_sources, "--timings": timings, "--windows": windows is not None}
    got = s.several(traces, bench, engine, scheduler, workers, strict, read_all,
                    per_trace=[name for name, on in given.items() if on])
    if not isinstance(got, str):  # a folder of benchmark traces, or a job
        show(got, fmt, output, top)
        commands.check_job(got)
        return
    laps: list[tuple[str, float]] | None = [] if timings else None
    o = options_for(fmt, output, top)
    req = commands.AnalyzeRequest(got, _parse_step(step), fmt, o.top, o.width, o.color, not no_categories, linked_only,
                                  bench, by_annotation, roofline, read_all, untraced_waits, python_sources, windows)
    # (the ``kernscope`` process: its start-up is the command's; a call of main() in a running process has none)
    started = oneshot.process_started() if timings and click.get_current_context().find_root().obj is not None else None
    render, emit = renderer_and_sink(fmt, o, output, req.path, laps, started)
    keep = None
    if s.keep is not None and traces == (got,):  # a file named as such (a directory or glob may resolve elsewhere)
        keep = functools.partial(s.keep, [got, *(f for f in (s.rules, s.findings) if f)], output)
    commands.analyze_one(s, req, render, emit, laps, warm=lambda: warm(fmt), keep=keep)


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
@untraced_waits_option
@sources_option
@click.option("--code", is_flag=True, help="Add your code with each line's GPU time (as kernscope annotate: the "
                                           "code_files and code_lines tables).")
@click.option("--root", "roots", multiple=True, type=click.Path(file_okay=False), metavar="DIR",
              help="With --code: where your code is (repeatable; see kernscope annotate).")
@click.option("--intra-kernel", default=None, metavar="NAME", help="With --intra: the host's kernel name "
                                                                    "[default: the intra file's kernel].")
@trace_options
@rank_options
def report(s: Session, traces: tuple[str, ...], output: str, step: str | None, linked_only: bool, bench: bool | None,
           by_annotation: str | None, diff_with: str | None, step_b: str | None, peak: str | None,
           intra_files: tuple[str, ...], intra_kernel: str | None, untraced_waits: bool, python_sources: bool,
           code: bool, roots: tuple[str, ...], engine: str, scheduler: str | None, workers: int | None, strict: bool,
           read_all: bool) -> None:
    """Write the perf report: Excel workbook, self-contained HTML page, or a directory of CSVs.

    Workbooks and CSV directories also get the perf model's sheets (one per op class, unified_perf_summary) when the
    trace has op shapes, and the diff_* sheets with --diff."""
    from . import commands

    fmt, all_tables = commands.report_target(output)
    given = {"--step": step is not None, "--linked-only": linked_only, "--by-annotation": by_annotation is not None,
             "--diff": diff_with is not None, "--step-b": step_b is not None, "--peak": peak is not None,
             "--untraced-waits": untraced_waits, "--sources": python_sources, "--code": code, "--root": bool(roots)}
    got = s.several(traces, bench, engine, scheduler, workers, strict, read_all, one_only="--intra places records on "
                    "one host trace: give one trace, not a job" if intra_files else None,
                    per_trace=[name for name, on in given.items() if on])
    if not isinstance(got, str):  # a folder of benchmark traces, or a job
        write_result(got, fmt, output, all_tables, s.say)
        commands.check_job(got)
        return
    n = _parse_step(step)
    ans = s.report(got, n, linked_only=linked_only, bench=bench, by_annotation=by_annotation, diff_with=diff_with,
                   step_b=_parse_step(step_b, "--step-b") if step_b is not None else n, peak=peak,
                   intra_files=intra_files, intra_kernel=intra_kernel, untraced_waits=untraced_waits,
                   python_sources=python_sources, code=code, roots=roots)
    write_result(ans.result, fmt, output, all_tables, s.say)
    ans.check()


@cli.command()
@click.argument("trace")
@click.option("--step", default=None, help="Step number, or 'all' (default).")
@click.option("--peak", metavar="DEVICE|KEY=VALUE,...",
              help="Device peaks: a known device (h100, h200, b200, a100, mi300x, ...) or numbers overriding the matched "
                   "device, e.g. bf16=989,fp32=67,bw=3.35 (TFLOP/s, TB/s).")
@click.option("--all", "show_nested", is_flag=True, help="Also list ops that contain another modeled op (aten::linear around aten::addmm).")
@click.option("--findings", "findings_rules", type=click.Path(dir_okay=False), metavar="FILE",
              help="TOML file overriding the findings' thresholds and wording (see kernscope/analyze/findings.toml).")
@output_options(output_help="Write to FILE instead of stdout; a .xlsx name writes a workbook (one sheet per op class).")
@trace_options
def perf(s: Session, trace: str, step: str | None, peak: str | None, top: int | None, show_nested: bool, fmt: str,
         output: str | None) -> None:
    """Perf model and roofline: FLOPs, bytes, TFLOP/s, TB/s and % of the device's peak for every op with shapes."""
    ans = s.perf(trace, _parse_step(step), peak=peak, show_nested=show_nested)
    if output and output.lower().endswith(".xlsx"):
        write_result(ans.result, "xlsx", output, say=s.say)
        return
    show(ans.result, fmt, output, top)
    ans.check()


@cli.command()
@click.argument("trace")
@output_options("Ops listed [default: 15 in the terminal; every row in JSON/CSV].")
@trace_options
def memory(s: Session, trace: str, top: int | None, fmt: str, output: str | None) -> None:
    """Memory over time (a PyTorch trace recorded with profile_memory=True, or a JAX profile: XLA's allocator
    events): per device the peak with the op and step that reached it, per step the growth, per op the
    allocations, their lifetime and what is still held."""
    show(s.memory(trace), fmt, output, top)


@cli.command()
@click.argument("trace")
@click.option("--step", default=None, help="Step number, or 'all' (default).")
@click.option("--root", "roots", multiple=True, type=click.Path(file_okay=False), metavar="DIR",
              help="Where your code is (repeatable): looked in first, by the tails of the paths the profile names "
                   "(a JAX profile names them as on the machine that recorded it).")
@output_options("Files listed, by GPU time [default: 5 in the terminal; every file in JSON/CSV].")
@trace_options
def annotate(s: Session, trace: str, step: str | None, roots: tuple[str, ...], top: int | None, fmt: str,
             output: str | None) -> None:
    """Your code with the GPU time of each line beside it: a JAX profile's lines from its HLO, a PyTorch trace's
    functions from its Python stacks (recorded with with_stack=True). Lines whose code changed since the profile was
    recorded are flagged."""
    show(s.annotate(trace, _parse_step(step), roots), fmt, output, top, default_top=5)


@cli.command()
@click.argument("trace")
@output_options("Kernels listed [default: 15 in the terminal; every row in JSON/CSV].",
                output_help="Write to FILE instead of stdout; a .xlsx name writes a workbook (kernels, metrics, ranges).")
@trace_options
def counters(s: Session, trace: str, top: int | None, fmt: str, output: str | None) -> None:
    """Hardware counters of each kernel (a PyTorch trace recorded with profiler_metrics: CUPTI's range profiler), by
    kernel and launching op: FLOPs per precision and DRAM bytes where the counters allow, and every counter."""
    result = s.counters(trace)
    if output and output.lower().endswith(".xlsx"):
        write_result(result, "xlsx", output, say=s.say)
        return
    show(result, fmt, output, top)


@cli.command("sql")
@click.argument("query")
@click.argument("traces", nargs=-1, required=True)
@click.option("--step", default=None, help="Step of the analysis.* tables (default: all steps).")
@output_options("Rows shown [default: 50 in the terminal; all in JSON/CSV].")
@trace_options
@rank_options
def sql_cmd(s: Session, query: str, traces: tuple[str, ...], step: str | None, top: int | None, fmt: str,
            output: str | None, engine: str, scheduler: str | None, workers: int | None, strict: bool,
            read_all: bool) -> None:
    """Run a SQL QUERY over a TRACE's tables: events, gpu, kernels, cpu_ops, launches, steps, flows, call_tree
    (times int64 ns), and analysis.<table> (analysis.kernels, analysis.categories, analysis.findings,
    analysis.critical_path, ...; µs in *_us). Several traces (files, folders, globs) are the ranks of one job:
    job.<table> (job.ranks, job.rank_steps, job.stragglers, job.collectives, job.critical_path, ...). Polars' SQL
    dialect; see docs/glossary.md for every table."""
    from . import commands
    from .errors import KernscopeError

    _check_sql_order(query, traces)
    paths = s.expand(traces)
    if len(paths) == 1:
        show(s.query(query, paths[0], _parse_step(step)), fmt, output, top, default_top=50)
        return
    if step is not None:
        raise KernscopeError("--step: a job's tables hold every step (filter them: WHERE step = N)")
    from .analyze.ranks.job import JOB_TABLES
    from .model import check_statement

    check_statement(query, [f"job.{n}" for n in JOB_TABLES])  # (before the ranks are read)
    job = s.job(paths, engine, scheduler, workers, strict, read_all)
    show(s.job_query(query, job), fmt, output, top, default_top=50)
    commands.check_job(job)


def _check_sql_order(query: str, traces: tuple[str, ...]) -> None:
    """One clear line where the trace came first and the query after it (``kernscope sql TRACE QUERY``), which would
    otherwise read the query as a file pattern that matches nothing."""
    import re

    from .errors import KernscopeError

    sql = re.compile(r"\s*(select|with|from)\b", re.IGNORECASE)
    late = next((t for t in traces if sql.match(t) and not os.path.exists(t)), None)
    if late is not None and not sql.match(query) and os.path.exists(query):
        raise KernscopeError(f"{late!r} is a query and {query} a file: the query comes first "
                             f"(kernscope sql QUERY TRACE...)")


@cli.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--step", multiple=True, help="Step of A to compare (and of B, unless --step-b is given); given twice, A's "
                                            "step and B's (A A --step 3 --step 5).")
@click.option("--step-b", default=None, help="Step of B to compare.")
@click.option("--match", type=click.Choice(["exact", "loose"]), default="exact", show_default=True,
              help="loose: kernel names that differ only in template arguments, tile sizes or tuning numbers match, "
                   "and so do the lines of one function of your code (by file and function).")
@sources_option
@output_options(output_help="Write to FILE instead of stdout; a .xlsx name writes a workbook.")
@trace_options
def diff_cmd(s: Session, a: str, b: str, step: tuple[str, ...], step_b: str | None, match: str, python_sources: bool,
             top: int | None, fmt: str, output: str | None) -> None:
    """Compare two traces, two steps of one trace (A A --step 3 --step-b 5) or two ranks: where B spends more or less
    (by category, library, line of your code where both sides have lines, kernel and CPU op)."""
    # (--step twice is A's step and B's: it had kept the last one alone, and A A --step 1 --step 2 compared step 2
    # with itself)
    if len(step) > 2 or (len(step) == 2 and step_b is not None):
        raise click.BadParameter(f"given {len(step)} times" + (" beside --step-b" if step_b is not None else "")
                                 + ": give A's step and B's (--step 3 --step 5, or --step 3 --step-b 5)", param_hint="--step")
    n = _parse_step(step[0] if step else None)
    m = _parse_step(step[1]) if len(step) == 2 else _parse_step(step_b, "--step-b") if step_b is not None else n
    ans = s.diff(a, b, n, m, match, python_sources)
    if output and output.lower().endswith(".xlsx"):
        write_result(ans.result, "xlsx", output, say=s.say)
    else:
        show(ans.result, fmt, output, top)
    ans.check()


def main(argv: list[str] | None = None, invocation: Invocation | None = None) -> int:
    """Entry point: bad input is one line on stderr and exit code 2, never a traceback (:mod:`kernscope.exits`).
    ``invocation``: the command's :class:`~kernscope.replay.Invocation`, whose output is then kept for replay."""
    from .bench.cli import bench
    from .cache_cli import cache_group
    from .intra.cli import intra

    args = _optional_values(sys.argv[1:] if argv is None else list(argv))
    oneshot.tune_allocators(args)
    for group in (bench, intra, cache_group):
        cli.add_command(group)
    _Notices.current = oneshot.Notices(lambda msg: click.echo(msg, err=True))
    return exits.guarded(lambda: cli.main(args=args, prog_name="kernscope", standalone_mode=False, obj=invocation),
                         _notice)


#: options whose value is optional (``--by-annotation [REGEX]``)
OPTIONAL_VALUES = ("--by-annotation",)


def _optional_values(args: list[str]) -> list[str]:
    """An option of :data:`OPTIONAL_VALUES` followed by the name of an existing file or folder takes no value: that is a
    trace (``analyze --by-annotation trace.json`` read the trace's name as the regex, then missed the trace). A regex
    that names a file is written ``--by-annotation=REGEX``."""
    out = list(args)
    for i in range(len(out) - 1):
        if out[i] in OPTIONAL_VALUES and os.path.exists(out[i + 1]):
            out[i] += "="
    return out


def run(invocation: Invocation | None = None) -> None:  # pragma: no cover - exits the process
    """The ``kernscope`` command: :func:`main`, then a quick exit (:func:`kernscope.oneshot.quick_exit`)."""
    oneshot.quick_exit(main(invocation=invocation))


if __name__ == "__main__":  # pragma: no cover
    run()
