"""The default analysis: one call that runs every summary a report needs (no printing, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..model import Trace
from .categories import Categorizer
from .kernels import (
    category_summary,
    gpu_table,
    kernel_summary,
    launcher_category_summary,
    op_category_summary,
    op_summary,
    step_summary,
    summarize,
    wall_time_ns,
)
from .timeline import gpu_timeline


@dataclass
class Analysis:
    """Results of :func:`analyze`. DataFrames use µs floats (columns ending in ``_us``)."""

    trace: Trace
    step: int | None
    facts: dict[str, Any]
    gpu: pl.DataFrame  #: categorized GPU rows of the selected step(s) (times in ns)
    steps: pl.DataFrame
    kernels: pl.DataFrame
    kernels_by_stream: pl.DataFrame
    categories: pl.DataFrame
    ops: pl.DataFrame
    ops_by_category: pl.DataFrame
    launcher_categories: pl.DataFrame
    timeline: pl.DataFrame
    timeline_by_device: pl.DataFrame
    timeline_by_step: pl.DataFrame
    unlinked: dict[str, int]
    benchmark: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def facts(trace: Trace) -> dict[str, Any]:
    """Trace-level facts: path, counts, devices, rank and world size, platform."""
    counts = trace.stats.get("event_counts") or {str(k): int(n) for k, n in trace.events.group_by("kind").len().iter_rows()}
    names = [d.get("name") for d in trace.device_properties if d.get("name")]
    return {
        "path": trace.path,
        "events": int(trace.stats["events"]) if "events" in trace.stats else int(trace.events.height + trace.flows.height),
        "event_counts": counts,
        "gpu_events": int(trace.gpu.height),
        "kernels": int(trace.kernels.height),
        "kernel_time_us": float((trace.kernels["dur"].sum() or 0) / 1000.0),
        "devices": trace.devices,
        "device_names": sorted(set(names)),
        "rank": trace.rank,
        "world_size": trace.world_size,
        "platform": trace.platform,
        "steps": int(trace.steps.height),
        "graph_launches": int(trace.gpu.filter(pl.col("graph_launch"))["launch_idx"].n_unique()),
        "salvaged_events": trace.salvaged,
        "from_cache": trace.from_cache,
    }


def analyze(
    trace: Trace,
    *,
    step: int | None = None,
    categorizer: Categorizer | None = None,
    use_kernel_name_categories: bool = True,
    linked_only: bool = False,
) -> Analysis:
    """Run the default analysis of a trace.

    Args:
        step: restrict kernel summaries to GPU work launched in ``ProfilerStep#<step>``.
        categorizer: rule set (default: built-in rules); ignored when categories are off.
        use_kernel_name_categories: add ``category``/``library`` columns (on by default).
        linked_only: timeline over GPU work whose launch is in the trace only (TraceLens's view).
    """
    cat = (categorizer or Categorizer.builtin()) if use_kernel_name_categories else None
    all_gpu = gpu_table(trace, cat or Categorizer.builtin())
    g = all_gpu if step is None else all_gpu.filter(pl.col("step") == step)
    if not use_kernel_name_categories:
        g = g.with_columns(pl.lit("Uncategorized").alias("category"), pl.lit("Unknown").alias("library"))
    kern = kernel_summary(g, by=("name", "launcher"))
    name_cat = g.group_by("name").agg(pl.col("category").first(), pl.col("library").first())
    kern = kern.join(name_cat, on="name", how="left", maintain_order="left")
    by_stream = kernel_summary(g, by=("launcher", "category", "name", "device", "stream"))
    tl_src = g
    by_dev = gpu_timeline(tl_src, by="device", linked_only=linked_only)
    if tl_src["device"].n_unique() <= 1:  # one device: the overall view is that device's
        timeline = by_dev.drop("device") if "device" in by_dev.columns else by_dev
        if timeline.height == 0:
            timeline = gpu_timeline(tl_src, by=None, linked_only=linked_only)
    else:
        timeline = gpu_timeline(tl_src, by=None, linked_only=linked_only)
    by_step = gpu_timeline(all_gpu.filter(pl.col("step").is_not_null()), by="step", linked_only=linked_only)
    return Analysis(
        trace=trace,
        step=step,
        facts=facts(trace),
        gpu=g,
        steps=step_summary(trace, all_gpu),
        kernels=kern,
        kernels_by_stream=by_stream,
        categories=category_summary(g),
        ops=op_summary(g),
        ops_by_category=op_category_summary(g),
        launcher_categories=launcher_category_summary(g),
        timeline=timeline,
        timeline_by_device=by_dev,
        timeline_by_step=by_step,
        unlinked=dict(trace.unlinked),
    )


__all__ = ["Analysis", "analyze", "facts", "summarize", "wall_time_ns"]
