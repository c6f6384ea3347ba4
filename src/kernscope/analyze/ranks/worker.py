"""The per-rank task: path -> :class:`RankResult` (or a :class:`Failure`). Runs in a worker process or on a
Dask worker; imports only what it needs and returns small tables."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from ...errors import KernscopeError, TraceError
from ...link import StepSpec
from ...link.markers import marker_names
from ...load.argspec import LINK_ARGS
from ...load.projection import Projection
from ...load.source import Limits
from ...load.xplane import XLA_COLUMNS
from ...load.xstats import OPT_IN_STATS
from ...pipeline import load
from .job import Failure
from .summary import RankResult, summarize_rank

#: CPU ops a rank summary reads: those that carry communication args or enclose communication launches
COMM_OPS = r"record_param_comms|nccl|rccl|c10d|gloo|ProfilerStep"


#: the ``args`` columns the rank summary reads: the links, bytes moved, and what a collective is
RANK_ARGS = (*LINK_ARGS, "bytes", "collective", "in_msg_nelems", "out_msg_nelems", "group_size", "comm_dtype",
             "pg_name", "pg_desc", "comm_seq", "comm_rank")


#: an XSpace's columns a rank summary reads: all (the collectives' HLO sizes among them) and the GPU cliques', whose
#: rank is the process's (:func:`~kernscope.analyze.ranks.summary.rank_of`)
RANK_XLA_STATS = tuple(sorted(XLA_COLUMNS | OPT_IN_STATS))


def rank_keep_pattern(step_marker: str | None) -> str:
    """One regex for the op names a rank load keeps: communication ops and step markers."""
    return f"(?:{COMM_OPS})|{marker_names(step_marker)}"


@dataclass(frozen=True)
class RankTask:
    """How to load each rank (picklable: it travels to the workers)."""

    cache: bool = True
    salvage: bool = False
    step_marker: str | None = None
    threads: int | None = None  #: parse threads per rank (default: all cores; the engines set cores / workers)
    #: skip, unparsed, the CPU ops, Python events and flow arrows the rank summary does not read (same results,
    #: less parsing)
    projection: bool = True
    #: bytes each rank's decoded tables may use (0: the loader's default); the engines share the machine's
    #: budget among the ranks they run at once
    max_memory: int = 0

    def load_projection(self) -> Projection | None:
        """What a rank load may skip: CPU ops and Python functions other than communication ops and the
        annotations steps may come from (ProfilerStep, the step-marker presets, ``step_marker``)."""
        if not self.projection:
            return None
        keep = rank_keep_pattern(self.step_marker)
        try:
            re.compile(keep)
        except re.error:  # a marker that is no valid regex: load whole, and linking reports the marker
            return None
        # flow arrows: the summary links by correlation; of an XSpace, every column and the GPU cliques' (the rank)
        return Projection(keep=keep, drop_phases=("s", "f", "t"), args=RANK_ARGS, stats=RANK_XLA_STATS)


def summarize_file(path: str, task: RankTask) -> RankResult | Failure:
    """Load one rank's trace and summarize it; bad input becomes a :class:`Failure` (the job goes on)."""
    t0 = time.perf_counter()
    try:
        trace = load(path, cache=task.cache, salvage=task.salvage, steps=StepSpec(task.step_marker), workers=task.threads,
                     projection=task.load_projection(), limits=Limits(max_memory=task.max_memory))
        return summarize_rank(trace, path, time.perf_counter() - t0)
    except TraceError as e:
        return Failure(path, e.problem)
    except KernscopeError as e:
        return Failure(path, str(e).removeprefix(f"{path}: "))
    except MemoryError:
        return Failure(path, "out of memory")
