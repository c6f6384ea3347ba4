"""JSON and CSV renderers for :class:`~kernscope.analyze.summary.Analysis` (all times in µs)."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import polars as pl

from ..analyze.summary import Analysis


def _records(df: pl.DataFrame, top: int | None = None) -> list[dict[str, Any]]:
    d = df.head(top) if top else df
    out = d.to_dicts()
    for r in out:
        for k, v in r.items():
            if isinstance(v, float):
                r[k] = round(v, 4) if math.isfinite(v) else None
    return out


def to_dict(a: Analysis, top: int | None = None) -> dict[str, Any]:
    """The ``--format json`` object. Times are microseconds (floats)."""
    f = a.facts.to_dict()
    trace = {k: f[k] for k in ("path", "events", "gpu_events", "kernels", "kernel_time_us", "devices", "device_names",
                               "rank", "world_size", "platform", "graph_launches", "salvaged_events", "step_source")}
    kernels = a.kernels.select(
        "name", "launcher", "category", "library", "count", "total_us", "mean_us", "min_us", "max_us", "pct"
    )
    cats = a.categories.select("category", "count", "total_us", "pct")
    tl = a.timeline.select("type", "time_us", "percent")
    out: dict[str, Any] = {
        "trace": trace,
        "step": a.step,
        "steps": _records(a.steps),
        "kernels": _records(kernels, top),
        "categories": _records(cats),
        "ops": _records(a.ops.select("launcher", "count", "total_us", "pct"), top),
        "launcher_categories": _records(
            a.launcher_categories.select("launcher", "category", "count", "total_us", "pct_of_launcher"), top
        ),
        "timeline": _records(tl),
        "unlinked": a.unlinked,
    }
    if a.benchmark is not None:
        out["benchmark"] = a.benchmark.to_dict()
    return out


def to_json(a: Analysis, top: int | None = None) -> str:
    return json.dumps(to_dict(a, top), indent=2)


def to_csv(a: Analysis, top: int | None = None) -> str:
    """The kernel summary as CSV (one row per kernel name and launcher)."""
    buf = io.StringIO()
    d = a.kernels.head(top) if top else a.kernels
    d.write_csv(buf)
    return buf.getvalue()
