"""Run per-rank work in parallel: local processes (default) or a Dask cluster (``kernscope[dask]``).

Each task loads one rank's trace in a worker and returns its small summary tables
(:class:`~kernscope.analyze.ranks.RankResult`), never event tables: the client's memory stays bounded
however many ranks there are. A rank that fails to load comes back as a
:class:`~kernscope.analyze.ranks.Failure`; a worker that dies is retried (Dask: ``retries``; local: the
task is resubmitted to a fresh pool).
"""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from .analyze.ranks import Failure, JobAnalysis, RankResult, RankTask, combine, summarize_file
from .cores import usable_cores
from .errors import KernscopeError
from .files import (
    expand_inputs,  # noqa: F401 - re-exported: the CLI reads it from files (no polars import)
    resolve_run_dir,
)
from .load.source import available_memory

#: retries of a task whose worker was lost
RETRIES = 2
#: a job whose ranks one process would summarize in about this long (:func:`serial_estimate_s`) runs in this process
#: unless workers are asked for: a worker process starts in ~1 s (Python, polars and kernscope imported), more than it
#: saves on a small job (DDP's 4 ranks of 0.6 MB, 2 cores: 1.86-2.00 s in two workers, 1.65-1.90 s in one process)
SERIAL_JOB_S = 1.2


@dataclass(frozen=True)
class EngineSpec:
    """``kind``: "local" or "dask"; ``scheduler``: a Dask scheduler address (None: start a LocalCluster);
    ``workers``: processes (local) or LocalCluster workers (default: CPU count, at most the ranks; a small local job,
    :data:`SERIAL_JOB_S`, runs in this process)."""

    kind: str = "local"
    scheduler: str | None = None
    workers: int | None = None
    connect_timeout_s: float = 10.0  #: how long to try reaching ``scheduler``


def _limit_threads(n: int) -> None:
    """Worker start: polars' pool and kernscope's parse threads share the cores with the other workers."""
    os.environ["POLARS_MAX_THREADS"] = str(n)


def shared_budget(task: RankTask, workers: int) -> RankTask:
    """``task`` with each rank's memory budget a share of the machine's: ranks loaded at once by ``workers``
    processes must fit together (each alone would take 80% of free memory)."""
    if task.max_memory:
        return task
    return replace(task, max_memory=max(1 << 28, int(available_memory() * 0.8) // max(1, workers)))


@contextmanager
def _main_not_imported() -> Iterator[None]:
    """While it is open, spawned workers (a process pool's, a Dask LocalCluster's) do not import the caller's
    ``__main__`` (they need nothing of it: the task is kernscope's). Python's spawn runs the main script again in
    every worker: a script read from stdin (``python - < job.py``) cannot be (every worker died at start, reported
    as out of memory), and a script without an ``if __name__ == "__main__":`` guard would start the job again in
    each worker."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
    try:
        for k in saved:
            setattr(main, k, None)
        yield
    finally:
        for k, v in saved.items():
            setattr(main, k, v)


def _local(paths: Sequence[str], task: RankTask, workers: int, progress: Callable[[int, int], None] | None) -> list[Any]:
    threads = max(1, usable_cores() // workers)
    task = shared_budget(replace(task, threads=task.threads or threads), min(workers, len(paths)))
    results: dict[str, Any] = {}
    tries = {p: 0 for p in paths}
    todo = list(paths)
    ctx = multiprocessing.get_context("spawn")  # no fork of a threaded (polars) parent
    while todo:
        with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx, initializer=_limit_threads,
                                 initargs=(task.threads or 1,)) as pool:
            futures = {pool.submit(summarize_file, p, task): p for p in todo}
            todo = []
            try:
                for f in as_completed(futures):
                    p = futures[f]
                    try:
                        results[p] = f.result()
                    except BrokenProcessPool:
                        raise
                    except Exception as e:  # noqa: BLE001 - a bug in one rank's analysis: report it, go on
                        results[p] = Failure(p, f"internal error: {type(e).__name__}: {e}")
                    if progress:
                        progress(len(results), len(paths))
            except BrokenProcessPool:  # a worker died (killed, out of memory): retry what did not finish
                for p in futures.values():
                    if p not in results:
                        tries[p] += 1
                        if tries[p] > RETRIES:
                            results[p] = Failure(p, "the worker analyzing it died (out of memory?)")
                        else:
                            todo.append(p)
    return [results[p] for p in paths]


def _dask(paths: Sequence[str], task: RankTask, spec: EngineSpec, progress: Callable[[int, int], None] | None) -> list[Any]:
    try:
        from dask.distributed import Client, LocalCluster
        from dask.distributed import as_completed as dask_completed
    except ImportError:
        raise KernscopeError('the dask engine needs dask.distributed: pip install "kernscope[dask]"') from None
    cluster = None
    try:
        if spec.scheduler:
            if not re.fullmatch(r"(?:[a-z][a-z0-9+.-]*://)?[^\s:/]+:\d{1,5}/?", spec.scheduler):
                raise KernscopeError(f"--scheduler {spec.scheduler!r}: not a Dask scheduler address (expected "
                                     "tcp://host:port)")
            try:
                client = Client(spec.scheduler, timeout=f"{spec.connect_timeout_s}s")
            except (OSError, TimeoutError, ValueError) as e:
                raise KernscopeError(f"cannot reach the Dask scheduler at {spec.scheduler} ({e})") from None
        else:
            cores = usable_cores()
            n = spec.workers or min(cores, len(paths))
            threads = max(1, cores // n)  # (each worker's share of the cores: its polars pool and its parse)
            cluster = LocalCluster(n_workers=max(1, n), threads_per_worker=1, processes=True, dashboard_address=None,
                                   env={"POLARS_MAX_THREADS": str(threads)})
            client = Client(cluster)
            task = shared_budget(replace(task, threads=task.threads or threads), max(1, n))
        try:
            futures = client.map(summarize_file, list(paths), task=task, retries=RETRIES, pure=False)
            index = {f.key: p for f, p in zip(futures, paths)}
            results: dict[str, Any] = {}
            for f in dask_completed(futures):
                p = index[f.key]
                try:
                    results[p] = f.result()
                except Exception as e:  # noqa: BLE001 - a task that failed after its retries
                    results[p] = Failure(p, f"failed on the cluster: {type(e).__name__}: {e}")
                if progress:
                    progress(len(results), len(paths))
            return [results[p] for p in paths]
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()


#: seconds one process takes per MB of a rank's file, by its ending: JSON ~3.5 ms (a 54-62 MB rank 0.37-0.40 s with
#: its 0.2 s), a gzip file of it ~15 times its size; an XSpace protobuf ~10 ms (a 209 MB H200 JAX profile analyzed in
#: 1.8-2.6 s past the command's start), gzipped ~5 times its size (the bundled profiles: 2.1-6.6)
SECONDS_PER_MB = {".pb": 0.010, ".pb.gz": 0.050, ".gz": 0.0525, "": 0.0035}


def serial_estimate_s(paths: Sequence[str]) -> float | None:
    """Seconds one process would take to summarize the ranks ``paths``, from their sizes: 0.2 s a rank and
    :data:`SECONDS_PER_MB` of its bytes (measured on this project's 2-core machine: the four ranks of DDP and FSDP2
    jobs, 9.5-10.5 MB of JSON each, 0.22-0.25 s each). None where a size cannot be read (then the job gets its worker
    processes). A folder counts the files a load of it reads (:func:`kernscope.files.resolve_run_dir`)."""
    total = 0.0
    try:
        for p in paths:
            run = resolve_run_dir(p) if os.path.isdir(p) else None
            if run is None and os.path.isdir(p):
                return None
            for f in (run[0] if run is not None else [p]):
                end = next(e for e in SECONDS_PER_MB if f.endswith(e))
                total += os.path.getsize(f) / 1e6 * SECONDS_PER_MB[end]
    except (OSError, KernscopeError):
        return None
    return 0.2 * len(paths) + total


def summarize_ranks(paths: Sequence[str], task: RankTask | None = None, spec: EngineSpec | None = None,
                    progress: Callable[[int, int], None] | None = None) -> list[RankResult | Failure]:
    """Every rank's summary, in ``paths`` order (local processes or Dask)."""
    task = task or RankTask()
    spec = spec or EngineSpec()
    if spec.kind == "dask":
        with _main_not_imported():  # (a LocalCluster's nannies spawn its workers)
            return _dask(paths, task, spec, progress)
    if spec.kind != "local":
        raise KernscopeError(f"unknown engine {spec.kind!r}; expected local or dask")
    workers = spec.workers or min(usable_cores(), len(paths))
    if spec.workers is None and workers > 1:
        est = serial_estimate_s(paths)
        workers = 1 if est is not None and est <= SERIAL_JOB_S else workers
    if workers <= 1 or len(paths) == 1:
        out = []
        for i, p in enumerate(paths):
            out.append(summarize_file(p, task))
            if progress:
                progress(i + 1, len(paths))
        return out
    with _main_not_imported():
        return _local(paths, task, workers, progress)


def analyze_job(paths: Sequence[str], task: RankTask | None = None, spec: EngineSpec | None = None, *,
                strict: bool = False, progress: Callable[[int, int], None] | None = None) -> JobAnalysis:
    """Summarize every rank in parallel and combine them (see :func:`kernscope.analyze.ranks.combine`).

    ``strict``: the first rank that fails raises; otherwise failures are listed in the result."""
    out = summarize_ranks(paths, task, spec, progress)
    failures = [r for r in out if isinstance(r, Failure)]
    if failures and strict:
        f = failures[0]
        raise KernscopeError(f"{f.path}: {f.problem}")
    good = [r for r in out if isinstance(r, RankResult)]
    if not good:
        listed = "; ".join(f"{f.path}: {f.problem}" for f in failures[:3])
        raise KernscopeError(f"no rank could be analyzed ({listed})")
    return combine(good, failures)
