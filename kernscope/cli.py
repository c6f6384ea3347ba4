"""``kernscope`` command line: parse arguments, run the pipeline, pick a renderer. Nothing else."""

from __future__ import annotations

import io
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import click

from .errors import KernscopeError


def _tune_allocators() -> None:
    """Memory behaviour for a one-shot command (before polars is imported; the library never does this).

    polars' jemalloc: one arena and a short decay, so memory freed by one parsing thread is reused by
    the next instead of being held per thread (peak RSS 20-25% lower, same speed). glibc: large buffers
    (the JSON pieces) always mmapped, so they go back to the system when freed.
    """
    os.environ.setdefault("_RJEM_MALLOC_CONF", "narenas:1,dirty_decay_ms:200,muzzy_decay_ms:0")
    if "polars" in sys.modules or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 20)  # M_MMAP_THRESHOLD: fixed 1 MB (no dynamic growth)
    except (OSError, AttributeError):
        pass

EXIT_BAD_INPUT = 2


def _load(path: str, *, salvage: bool, no_cache: bool) -> Any:
    from .pipeline import load

    return load(path, cache=not no_cache, salvage=salvage, notify=_notice)


def _categorizer(rules: str | None) -> Any:
    from .analyze.categories import Categorizer

    c = Categorizer.builtin()
    return c.with_rules(rules) if rules else c


def _parse_step(step: str | None) -> int | None:
    if step is None or step == "all":
        return None
    s = step.removeprefix("ProfilerStep#")
    try:
        return int(s)
    except ValueError:
        raise click.BadParameter(f"expected a step number or 'all', got {step!r}", param_hint="--step") from None


def _emit(text: str, output: str | None) -> None:
    from .files import write_text

    if output:
        write_text(output, text)
    else:
        click.echo(text, nl=not text.endswith("\n"))


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="kernscope")
def cli() -> None:
    """kernscope: where does the GPU time go?"""


_trace_opts = [
    click.option("--salvage", is_flag=True, help="Read a truncated trace: keep every complete event."),
    click.option("--no-cache", is_flag=True, help="Do not read or write the parse cache."),
    click.option("--rules", type=click.Path(dir_okay=False), help="TOML file of extra/overriding category rules."),
]


def trace_options(f: Any) -> Any:
    for opt in reversed(_trace_opts):
        f = opt(f)
    return f


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--step", default=None, help="ProfilerStep number to analyze, or 'all' (default).")
@click.option("--top", default=15, show_default=True, type=click.IntRange(min=1), help="Rows per table.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to FILE instead of stdout.")
@click.option("--no-categories", is_flag=True, help="Skip kernel-name categories.")
@click.option("--linked-only", is_flag=True, help="Timeline over GPU work launched inside the trace window only.")
@click.option("--bench/--no-bench", "bench", default=None, help="Benchmark-trace view (default: auto-detect).")
@trace_options
def analyze(trace: str, step: str | None, top: int, fmt: str, output: str | None, no_categories: bool,
            linked_only: bool, bench: bool | None, salvage: bool, no_cache: bool, rules: str | None) -> None:
    """Summarize a PyTorch profiler (Kineto) trace: steps, kernels, launching ops, categories."""
    from . import outputs

    width = 160 if output or fmt != "table" else _console_width()
    load_key = {"salvage": salvage, "step_marker": None}
    key = outputs.result_key("analyze", {"fmt": fmt, "top": None if output and fmt == "json" else top, "step": step,
                                         "categories": not no_categories, "linked_only": linked_only, "bench": bench,
                                         "width": width, "color": fmt == "table" and not output and sys.stdout.isatty()},
                             rules)
    digest = None
    if not no_cache:
        digest, stored = outputs.lookup(trace, load_key, key, _notice)
        if stored is not None:
            _emit_bytes(stored, output)
            return
    from .analyze.summary import analyze as run

    t = _load(trace, salvage=salvage, no_cache=no_cache)
    a = run(t, step=_parse_step(step), categorizer=_categorizer(rules), use_kernel_name_categories=not no_categories,
            linked_only=linked_only, benchmark=bench)
    if t.salvaged is not None:
        click.echo(f"kernscope: salvaged {t.salvaged:,} complete events from {trace}", err=True)
        for line in t.salvage_skipped:
            click.echo(f"kernscope: {line}", err=True)
    if fmt == "json":
        from .render.tables import to_json

        text = to_json(a, top=None if output else top)
    elif fmt == "csv":
        from .render.tables import to_csv

        text = to_csv(a, top=None)
    else:
        from rich.console import Console

        from .render import console

        buf = io.StringIO()
        tty = not output and sys.stdout.isatty()
        console.render(a, Console(file=buf, width=width, force_terminal=tty, no_color=not tty), top=top)
        text = buf.getvalue()
    body = text.encode()
    _emit_bytes(body, output)
    if digest is not None:
        outputs.store(digest, load_key, key, body, _notice)


def _console_width() -> int:
    return shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100


def _notice(msg: str) -> None:
    click.echo(msg, err=True)


def _emit_bytes(body: bytes, output: str | None) -> None:
    from .files import write_bytes

    if output:
        write_bytes(output, body)
    else:
        sys.stdout.buffer.write(body if body.endswith(b"\n") else body + b"\n")
        sys.stdout.flush()


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, help="out.xlsx for Excel, or a directory (ending in /) for CSVs.")
@click.option("--step", default=None, help="ProfilerStep number, or 'all' (default).")
@click.option("--linked-only", is_flag=True, help="Timeline over GPU work launched inside the trace window only.")
@trace_options
def report(trace: str, output: str, step: str | None, linked_only: bool, salvage: bool, no_cache: bool, rules: str | None) -> None:
    """Write the perf report: gpu_timeline, kernel_summary, category_summary, ops_summary(_by_category), steps."""
    from .analyze.summary import analyze as run
    from .render.excel import write_csv_dir, write_xlsx

    t = _load(trace, salvage=salvage, no_cache=no_cache)
    a = run(t, step=_parse_step(step), categorizer=_categorizer(rules), linked_only=linked_only)
    if output.endswith(("/", os.sep)) or Path(output).is_dir():
        write_csv_dir(a, output)
    elif output.endswith(".xlsx"):
        write_xlsx(a, output)
    else:
        raise click.BadParameter("use a .xlsx file or a directory ending in '/'", param_hint="-o")
    click.echo(f"wrote {output}", err=True)


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


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input is one line on stderr and exit code 2, never a traceback."""
    _tune_allocators()
    _register_optional()
    try:
        cli.main(args=argv, prog_name="kernscope", standalone_mode=False)
    except KernscopeError as e:
        click.echo(f"kernscope: error: {e}", err=True)
        return EXIT_BAD_INPUT
    except click.exceptions.Abort:
        click.echo("kernscope: aborted", err=True)
        return 130
    except click.ClickException as e:
        e.show()
        return EXIT_BAD_INPUT
    except MemoryError:
        click.echo("kernscope: error: out of memory", err=True)
        return 1
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug: still one line unless asked for the traceback
        if os.environ.get("KERNSCOPE_DEBUG"):
            raise
        click.echo(f"kernscope: internal error: {type(e).__name__}: {e} (set KERNSCOPE_DEBUG=1 for a traceback)", err=True)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
