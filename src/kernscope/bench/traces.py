"""One Kineto trace per (input, impl): record it, then analyze it with kernscope's benchmark view."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..analyze.bench_trace import analyze_benchmark
from ..pipeline import load
from .results import BenchRun, TraceCheck
from .timing import L2Flusher, call_loop

KINETO_WARMUP_STEPS = 5


#: libkineto's own log lines (torch 2.12+ writes ``USDT:... profiler_start``/``profiler_stop`` at every start and stop of
#: the profiler, older ones ``STAGE:... Completed Stage``), on the process's stderr whatever ``KINETO_LOG_LEVEL`` says
_KINETO_LOG = re.compile(rb"^(USDT|STAGE):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ \S+\.cpp:\d+\] ")


@contextmanager
def _without_kineto_log() -> Iterator[None]:
    """Run the block with the process's stderr (fd 2) in a temporary file, then write it back without libkineto's log
    lines: a benchmark's progress on stderr was interleaved with two such lines per recorded trace. Everything else
    written there (a warning, an error of the impl) comes back, in order, when the block ends."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # (no stderr to redirect)
        yield
        return
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            with suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = b"".join(line for line in held if not _KINETO_LOG.match(line))
            if kept:
                os.write(2, kept)


def trace_path(output_dir: str | os.PathLike[str], op: str, impl: str, input_id: int) -> Path:
    """Deterministic trace location: ``<output-dir>/<op>/<impl>/input_<id>.json.gz``."""
    return Path(output_dir) / op / impl / f"input_{input_id}.json.gz"


def record_trace(fn: Callable[[], Any], *, device: str, flusher: L2Flusher | None, path: Path,
                 before: Callable[[], None] | None = None, warmup_steps: int = KINETO_WARMUP_STEPS) -> Path:
    """Profile ``warmup_steps`` + 1 iterations (flush, call) with a schedule; the last is ``ProfilerStep#N``."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    cuda = device.startswith("cuda")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), _without_kineto_log():
        # (torch warns that a schedule's cycle drops the events of the cycle before it: the harness records one)
        warnings.filterwarnings("ignore", message=".*Profiler clears events at the end of each cycle")
        with profile(activities=acts, schedule=schedule(wait=0, warmup=warmup_steps, active=1, repeat=1),
                     record_shapes=True) as prof:  # shapes: the perf model rates each cell
            def step() -> None:
                if cuda:
                    torch.cuda.synchronize(device)
                prof.step()

            call_loop(fn, warmup_steps + 1, flusher=flusher, before=before, after=step)
    fd, tmp = tempfile.mkstemp(suffix=".json", dir=path.parent)
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        gz_tmp = tmp + ".gz"
        with open(tmp, "rb") as src, gzip.open(gz_tmp, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        os.replace(gz_tmp, path)
    finally:
        for f in (tmp, tmp + ".gz"):
            if os.path.exists(f):
                os.unlink(f)
    return path


def analyze_cells(run: BenchRun) -> None:
    """Analyze every recorded trace with kernscope's benchmark view (kernels by launch correlation)."""
    for c in run.cells:
        if not c.trace:
            continue
        view = analyze_benchmark(load(c.trace, cache=False))
        if c.timing is None:
            c.analysis = TraceCheck(view)
            continue
        lat_us = c.timing.median_ms * 1e3
        c.analysis = TraceCheck(view, lat_us, lat_us - view.kernel_time_us,
                                view.kernel_time_us / lat_us if lat_us else None)
