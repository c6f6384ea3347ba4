"""Where a rendering goes: stdout or a file (atomically), fitted to the terminal it is shown on."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable

from ..result import Result
from ..sink import emit_bytes
from .views import Options


def console_width() -> int:
    """The terminal's width (``COLUMNS`` when set); 120 when piped to a file or another program."""
    return max(40, shutil.get_terminal_size((120, 24)).columns)


def options_for(fmt: str, output: str | None, top: int | None, default_top: int = 15) -> Options:
    """How a command prints ``fmt``: ``top`` rows per long table (in the terminal by default ``default_top``), fitted
    to the terminal (in colour when it is one) unless written to a file or as data (160 columns)."""
    if top is None and fmt == "table":
        top = default_top
    width = 160 if output or fmt != "table" else console_width()
    return Options(top=top, width=width, color=fmt == "table" and not output and sys.stdout.isatty())


def show(result: Result, fmt: str, output: str | None, top: int | None, default_top: int = 15) -> None:
    """``result`` as ``fmt`` to stdout or ``output`` (:func:`options_for`)."""
    from .formats import text

    emit_bytes(text(result, fmt, options_for(fmt, output, top, default_top)).encode(), output)


def write_result(result: Result, fmt: str, output: str, all_tables: bool = False,
                 say: Callable[[str], None] = lambda msg: None) -> None:
    """``result`` as a file (``xlsx``, ``html``) or a directory of CSVs (``csv`` with ``all_tables``) at ``output``,
    written whole or not at all (a workbook only as a regular file); ``say`` tells the user where."""
    from .formats import render, write

    write(render(result, fmt, Options(all_tables=all_tables)), output, regular=fmt == "xlsx")
    say(f"wrote {output}")


def warm(fmt: str) -> None:
    """Import the renderer of ``fmt`` and its views of an analysis (on a prefetch thread, while a trace loads)."""
    from .formats import renderer
    from .views import load_views

    renderer(fmt)
    load_views(fmt, "analysis")


#: the phase table's first row, where the command knows when its process started: the time no phase timed
START_ROW = "start (interpreter, imports, command line) and untimed"


def renderer_and_sink(fmt: str, options: Options, output: str | None, path: str,
                      timings: list[tuple[str, float]] | None, started: float | None = None
                      ) -> tuple[Callable[[Result], bytes], Callable[[bytes], None]]:
    """For ``analyze`` of one trace: (render a result as ``fmt``, emit the bytes to ``output`` or stdout and then,
    with ``timings``, the phase table of the cold run of ``path`` on stderr). ``started``: when the process started
    (:func:`time.perf_counter`'s clock, :func:`kernscope.oneshot.process_started`); the table then begins with
    :data:`START_ROW`, the time from then to the output written that no phase counted, and its total is the
    command's time so far."""
    from .formats import text

    counts: dict[str, int] = {}  # the trace's events and GPU rows, for the phase table

    def render(result: Result) -> bytes:
        if timings is not None:
            facts = result.facts_dict().get("trace") or {}
            counts.update((k, facts[k]) for k in ("events", "gpu_events") if isinstance(facts.get(k), int))
        return text(result, fmt, options).encode()

    def emit(body: bytes) -> None:
        emit_bytes(body, output)
        if timings is not None:
            from rich.console import Console

            from .timings import render_timings

            rows = list(timings)
            if started is not None:
                rows.insert(0, (START_ROW, max(0.0, time.perf_counter() - started - sum(s for _, s in rows))))
            render_timings(Console(stderr=True, width=console_width()), path, os.path.getsize(path), rows,
                           events=counts.get("events"), gpu_rows=counts.get("gpu_events"))

    return render, emit
