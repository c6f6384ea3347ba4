"""GPU time by the user's own ranges (``record_function`` / user annotations), nested as a tree.

A range owns the GPU work launched inside it on its own thread (by launch time, like steps), and a
nested range's work counts in every range around it (inclusive times). Ranges of one depth never
overlap on a thread, so the owner at each depth is found with one as-of join per depth level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from ..errors import KernscopeError
from ..intervals import union_by
from ..load.native import union_lengths
from ..model import Trace
from .kernels import NS_PER_US
from .timeline import clip_overruns, timeline_of

#: annotations that are not the user's ranges
_SKIP = r"^(ProfilerStep#\d+|## Call CompiledFxGraph .*|Optimizer\..*|Memcpy.*|Memset.*)$"


@dataclass(frozen=True)
class AnnotationBreakdown:
    """Per range (path in the tree): instances, kernels, times (µs); categories and timeline per range."""

    ranges: pl.DataFrame  #: path, name, depth, instances, kernel_count, kernel_time_us, gpu_time_us, busy_us, pct_of_gpu
    categories: pl.DataFrame  #: path, category, count, total_us
    timeline: pl.DataFrame  #: path, type, time_us, percent
    pattern: str


def _ranges(trace: Trace, pattern: str) -> pl.DataFrame:
    """The user annotations matching ``pattern`` (empty: all), nested per thread."""
    ev = trace.events
    ann = ev.filter((pl.col("kind") == "user_annotation") & (pl.col("ph") == "X"))
    names = ann["name"].unique().drop_nulls().cast(pl.String).to_list()
    try:
        rx = re.compile(pattern or ".")
    except re.error as e:
        raise KernscopeError(f"--by-annotation {pattern!r} is not a valid regular expression ({e})") from None
    skip = re.compile(_SKIP)
    keep = [n for n in names if rx.search(n) and not skip.match(n)]
    if not keep:
        # (the annotations listed are the user's ranges only: a profiler step listed beside "matches no annotation"
        # read as a contradiction)
        user = ann.filter(~pl.col("name").cast(pl.String).str.contains(_SKIP))
        top = (user.group_by(pl.col("name").cast(pl.String)).len().sort(["len", "name"], descending=[True, False])
               .head(8).iter_rows())
        listed = ", ".join(f"{n[:50]!r} ({c})" for n, c in top) or "none"
        left = " (profiler steps, compiled-graph calls, optimizer steps and memcpy/memset ranges are not counted)" \
            if any(skip.match(n) for n in names) else ""
        what = f"--by-annotation {pattern!r} matches" if pattern else "--by-annotation finds"
        raise KernscopeError(f"{trace.path}: {what} no user annotation{left}; the most frequent are: {listed}")
    r = (ann.filter(pl.col("name").cast(pl.String).is_in(keep))
         .select("idx", pl.col("name").cast(pl.String), "pid", "tid", pl.col("ts").alias("start"), "end")
         .sort(["pid", "tid", "start", "end"], descending=[False, False, False, True]))
    # nesting per thread (annotation ranges only: few rows)
    parent: list[int | None] = []
    depth: list[int] = []
    path: list[str] = []
    stack: list[int] = []
    rows = r.select("pid", "tid", "start", "end", "name").rows()
    prev = None
    for i, (pid, tid, s, _end, name) in enumerate(rows):
        if (pid, tid) != prev:
            stack.clear()
            prev = (pid, tid)
        while stack and rows[stack[-1]][3] <= s:
            stack.pop()
        p = stack[-1] if stack else None
        parent.append(p)
        depth.append(depth[p] + 1 if p is not None else 0)
        path.append(f"{path[p]} / {name}" if p is not None else name)
        stack.append(i)
    return r.with_columns(pl.Series("depth", depth, dtype=pl.Int32), pl.Series("path", path, dtype=pl.String))


def by_annotation(trace: Trace, gpu: pl.DataFrame, pattern: str = "") -> AnnotationBreakdown:
    """The breakdown of ``gpu`` (a categorized GPU table with launch columns) by the ranges matching
    ``pattern`` (a regex; empty: every user annotation but steps)."""
    ranges = _ranges(trace, pattern)
    # each path as a number (the pairs below are a GPU row per range around it: ~10 a row in a JAX profile, whose
    # 279 k annotations and 1.4 M GPU rows made 14 M pairs: as text paths and with every GPU column, 21 s and 12 GB)
    names = ranges.select("path").unique().sort("path").with_row_index("_p")
    ranges = ranges.join(names, on="path", how="left")
    wanted = ("launch_pid", "launch_tid", "launch_ts", "ts", "end", "dur", "kind", "category", "device", "stream")
    g = gpu.filter(pl.col("launch_ts").is_not_null()).select(c for c in wanted if c in gpu.columns)
    # same-stream overruns clipped once, on the GPU rows themselves: a row is in every range around its launch, and
    # clipped among its own copies (equal starts, one per range) each copy but the last read as zero length (a JAX
    # profile's nested ranges showed 0 µs busy in their timelines)
    g = clip_overruns(g)[0].drop("device", "stream", strict=False).sort("launch_ts")  # (the clip read the streams)
    owned = []
    for d in sorted(ranges["depth"].unique().to_list()):
        level = ranges.filter(pl.col("depth") == d).select(
            pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"), pl.col("start").alias("launch_ts"),
            pl.col("end").alias("_end"), "_p").sort("launch_ts")
        hit = (g.join_asof(level, on="launch_ts", by=["launch_pid", "launch_tid"], strategy="backward", check_sortedness=False)
               .filter(pl.col("_p").is_not_null() & (pl.col("launch_ts") <= pl.col("_end")))
               .drop("_end", "launch_pid", "launch_tid", "launch_ts"))  # (the launch found the range: not kept)
        owned.append(hit)
    pairs = pl.concat(owned) if owned else g.head(0).drop("launch_pid", "launch_tid", "launch_ts").with_columns(
        pl.lit(None, dtype=pl.UInt32).alias("_p"))
    del owned
    inst = ranges.group_by("_p").agg(pl.col("path").first(), pl.col("name").first(), pl.col("depth").first(),
                                     pl.len().alias("instances"))
    total_gpu = int(gpu["dur"].sum() or 0)
    per = pairs.group_by("_p").agg(
        (pl.col("kind") == "kernel").sum().cast(pl.Int64).alias("kernel_count"),
        (pl.when(pl.col("kind") == "kernel").then(pl.col("dur")).otherwise(0).sum() / NS_PER_US).alias("kernel_time_us"),
        (pl.col("dur").sum() / NS_PER_US).alias("gpu_time_us"),
    )
    busy = union_by(pairs.select("_p", "ts", "end"), ["_p"], sweep=union_lengths).select(
        "_p", (pl.col("len") / NS_PER_US).alias("busy_us"))
    out = (inst.join(per, on="_p", how="left").join(busy, on="_p", how="left")
           .with_columns(pl.col("kernel_count").fill_null(0), pl.col("kernel_time_us").fill_null(0.0),
                         pl.col("gpu_time_us").fill_null(0.0), pl.col("busy_us").fill_null(0.0))
           .with_columns((pl.col("gpu_time_us") * NS_PER_US * 100.0 / max(total_gpu, 1)).alias("pct_of_gpu"))
           .sort("path")
           .select("path", "name", "depth", "instances", "kernel_count", "kernel_time_us", "gpu_time_us", "busy_us",
                   "pct_of_gpu"))
    cats = (pairs.group_by("_p", "category").agg(pl.len().alias("count"), (pl.col("dur").sum() / NS_PER_US).alias("total_us"))
            .join(names, on="_p").select("path", "category", "count", "total_us")
            .sort(["path", "total_us", "category"], descending=[False, True, False]))
    if pairs.height:
        tl = timeline_of(pairs, by="_p").join(names, on="_p").select("path", "type", "time_us", "percent")
    else:
        tl = pl.DataFrame(schema={"path": pl.String, "type": pl.String, "time_us": pl.Float64, "percent": pl.Float64})
    return AnnotationBreakdown(out, cats, tl, pattern)
