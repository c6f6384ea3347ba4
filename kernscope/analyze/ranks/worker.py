"""The per-rank task: path -> :class:`RankResult` (or a :class:`Failure`). Runs in a worker process or on a
Dask worker; imports only what it needs and returns small tables."""

from __future__ import annotations

import time
from dataclasses import dataclass

from ...errors import KernscopeError, TraceError
from ...link import StepSpec
from ...pipeline import load
from .job import Failure
from .summary import RankResult, summarize_rank


@dataclass(frozen=True)
class RankTask:
    """How to load each rank (picklable: it travels to the workers)."""

    cache: bool = True
    salvage: bool = False
    step_marker: str | None = None
    threads: int | None = None  #: parse threads per rank (default: all cores; the engines set cores / workers)


def summarize_file(path: str, task: RankTask) -> RankResult | Failure:
    """Load one rank's trace and summarize it; bad input becomes a :class:`Failure` (the job goes on)."""
    t0 = time.perf_counter()
    try:
        trace = load(path, cache=task.cache, salvage=task.salvage, steps=StepSpec(task.step_marker), workers=task.threads)
        return summarize_rank(trace, path, time.perf_counter() - t0)
    except TraceError as e:
        return Failure(path, e.problem)
    except KernscopeError as e:
        return Failure(path, str(e).removeprefix(f"{path}: "))
    except MemoryError:
        return Failure(path, "out of memory")
