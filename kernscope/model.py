"""The loaded, linked trace: typed tables (polars) plus document metadata.

Times are int64 **nanoseconds** in every table (``ts``, ``dur``, ``end``), on the trace's own clock
(add ``base_time_ns`` for wall-clock time when the trace has ``baseTimeNanoseconds``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

import polars as pl


@dataclass
class Trace:
    """A linked trace. Build it with :func:`kernscope.load`.

    Attributes:
        path: the file it came from.
        events: every non-metadata, non-flow event, one row each (``idx`` is the row id).
        gpu: GPU activity (kernels, memcpy, memset) with launch/op/step link columns.
        flows: flow events (``ph`` s/f/t) with their ids.
        steps: ``ProfilerStep#N`` windows (``step, name, start, end`` in ns).
        metadata: top-level document keys other than ``traceEvents``.
        unlinked: counts of things that could not be linked, by kind (never silently dropped).
        salvaged: number of events recovered from a truncated file, or None.
    """

    path: str
    events_source: pl.DataFrame | Callable[[], pl.DataFrame]
    gpu: pl.DataFrame
    flows_source: pl.DataFrame | Callable[[], pl.DataFrame]
    steps: pl.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[str, str] = field(default_factory=dict)
    unlinked: dict[str, int] = field(default_factory=dict)
    salvaged: int | None = None
    from_cache: bool = False
    #: facts computed once at link time (event counts, platform, t0), so a cached trace can be
    #: summarized without reading its full event table
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def events(self) -> pl.DataFrame:
        """Every non-metadata, non-flow event (read from the cache on first use when cached)."""
        if callable(self.events_source):
            self.events_source = self.events_source()
        return self.events_source

    @property
    def flows(self) -> pl.DataFrame:
        if callable(self.flows_source):
            self.flows_source = self.flows_source()
        return self.flows_source

    # -- metadata ---------------------------------------------------------------------------
    @property
    def distributed_info(self) -> dict[str, Any]:
        d = self.metadata.get("distributedInfo")
        return d if isinstance(d, dict) else {}

    @property
    def rank(self) -> int | None:
        r = self.distributed_info.get("rank")
        return r if isinstance(r, int) else None

    @property
    def world_size(self) -> int | None:
        w = self.distributed_info.get("world_size")
        return w if isinstance(w, int) else None

    @property
    def base_time_ns(self) -> int | None:
        b = self.metadata.get("baseTimeNanoseconds")
        return b if isinstance(b, int) else None

    @property
    def device_properties(self) -> list[dict[str, Any]]:
        d = self.metadata.get("deviceProperties")
        return [x for x in d if isinstance(x, dict)] if isinstance(d, list) else []

    @property
    def platform(self) -> str:
        """``"rocm"``, ``"cuda"`` or ``"unknown"``, from metadata and runtime names."""
        if "platform" in self.stats:
            return str(self.stats["platform"])
        return _platform(self.metadata, self.events)

    @cached_property
    def devices(self) -> list[int]:
        """GPU device ids that ran activity in this trace."""
        if self.gpu.height == 0:
            return []
        return sorted(int(d) for d in self.gpu["device"].drop_nulls().unique().to_list())

    @property
    def t0(self) -> int:
        """Earliest event start (ns): the origin for relative times in reports."""
        if "t0" in self.stats:
            return int(self.stats["t0"])
        return _t0(self.events)

    # -- tables ------------------------------------------------------------------------------
    @property
    def kernels(self) -> pl.DataFrame:
        """GPU kernels only (no memcpy/memset), with link columns."""
        return self.gpu.filter(pl.col("kind") == "kernel")

    @property
    def cpu_ops(self) -> pl.DataFrame:
        return self.events.filter(pl.col("kind") == "cpu_op")

    @property
    def launches(self) -> pl.DataFrame:
        """Runtime/driver events that launched GPU work in this trace."""
        ids = self.gpu["launch_idx"].drop_nulls().unique()
        return self.events.filter(pl.col("idx").is_in(ids.implode()))

    @cached_property
    def call_tree(self) -> pl.DataFrame:
        """``idx, parent_idx, depth`` for host events (computed on first use)."""
        from .link.tree import call_tree

        return call_tree(self.events)

    def __repr__(self) -> str:
        return (
            f"Trace({self.path!r}, events={self.stats.get('events', '?')}, gpu={self.gpu.height}, "
            f"steps={self.steps.height}, unlinked={self.unlinked})"
        )


def _platform(metadata: dict[str, Any], events: pl.DataFrame) -> str:
    if any(k.startswith(("roctracer", "hip_")) for k in metadata):
        return "rocm"
    names = events.filter(pl.col("kind") == "runtime")["name"].cast(pl.String)
    if names.str.starts_with("hip").any():
        return "rocm"
    if names.str.starts_with("cu").any() or "cuda_runtime_version" in metadata:
        return "cuda"
    return "unknown"


def _t0(events: pl.DataFrame) -> int:
    t = events.filter(pl.col("kind") != "instant")["ts"].min()
    return int(t) if t is not None else 0


def compute_stats(trace: Trace) -> dict[str, Any]:
    """The facts kept in ``Trace.stats``, computed from the full tables."""
    ev = trace.events
    return {
        "events": int(ev.height + trace.flows.height),
        "event_counts": {str(k): int(n) for k, n in ev.group_by("kind").len().iter_rows()},
        "platform": _platform(trace.metadata, ev),
        "t0": _t0(ev),
    }
