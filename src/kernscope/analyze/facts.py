"""Trace-level facts (counts, devices, rank, platform): a typed summary of one trace."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from ..model import Trace


@dataclass(frozen=True)
class TraceFacts:
    """What a report says about the trace as a whole. Times in µs."""

    path: str
    events: int  #: events in the file (metadata and flows included)
    event_counts: dict[str, int]  #: linked events by kind
    gpu_events: int  #: kernels + memcpy + memset
    kernels: int
    kernel_time_us: float  #: summed kernel durations (µs)
    devices: list[int]
    device_names: list[str]
    rank: int | None
    world_size: int | None
    platform: str
    steps: int
    step_source: str  #: how steps were found: "ProfilerStep", "marker:<pattern>", "auto" or "none"
    graph_launches: int
    salvaged_events: int | None
    salvage_skipped: list[str] = field(default_factory=list)
    from_cache: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def trace_facts(trace: Trace) -> TraceFacts:
    """Facts of a linked trace (reads only the GPU table and link-time stats)."""
    names = [str(d.get("name")) for d in trace.device_properties if d.get("name")]
    kernels = trace.gpu.select("kind", "dur").filter(pl.col("kind") == "kernel")  # (not every column of the kernels)
    return TraceFacts(
        path=trace.path,
        events=trace.stats.events,
        event_counts=dict(trace.stats.event_counts),
        gpu_events=int(trace.gpu.height),
        kernels=int(kernels.height),
        kernel_time_us=float(int(kernels["dur"].sum() or 0) / 1000.0),
        devices=trace.devices,
        device_names=sorted(set(names)),
        rank=trace.rank,
        world_size=trace.world_size,
        platform=trace.platform,
        steps=int(trace.steps.height),
        step_source=trace.step_source,
        graph_launches=int(trace.gpu.select(pl.col("launch_idx").filter(pl.col("graph_launch")).n_unique()).item()),
        salvaged_events=trace.salvaged,
        salvage_skipped=list(trace.salvage_skipped),
        from_cache=trace.from_cache,
    )
