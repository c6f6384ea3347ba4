"""The HTML report of one trace's analysis: timeline per device and stream, breakdown, per-step
category bars, sortable kernel/op/category/step tables. Formatting only: arrays are packed, not computed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ...analyze.summary import Analysis, headline
from ...scalars import as_int
from ..glossary import TERMS, define
from ..tables import records
from . import b64, page

#: table rows embedded per table (the page can filter and sort them)
MAX_TABLE_ROWS = 20_000


def table(df: pl.DataFrame, title: str, limit: int = MAX_TABLE_ROWS) -> dict[str, Any]:
    rows = records(df, limit)
    cols = list(df.columns)
    out = {"title": title + (f" (first {limit:,} of {df.height:,})" if df.height > limit else ""),
           "columns": cols, "rows": [[r[c] for c in cols] for r in rows]}
    return out


def timeline_data(gpu: pl.DataFrame, steps: pl.DataFrame, flush: set[tuple[str, int]] | None = None,
                  intra: pl.DataFrame | None = None) -> dict[str, Any]:
    """GPU rows as typed arrays, grouped by (device, stream) lane and sorted by start (ns from the first).
    ``intra``: rows placed below their stream's row (:func:`kernscope.intra.align.timeline_rows`: device, stream,
    sub ≥ 1, label, ts, dur, name, category)."""
    if gpu.height == 0:
        return {"lanes": [], "names": [], "categories": [], "events": {}, "lane_first": [0], "lane_max_dur": [],
                "span_ns": 1, "steps": []}
    g = gpu.select(
        pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1), "ts", "dur",
        pl.col("name").cast(pl.String).fill_null(""), pl.col("category").cast(pl.String).fill_null(""),
    ).with_columns(pl.lit(0, pl.Int64).alias("sub"), pl.lit(None, pl.String).alias("label"))
    if intra is not None and intra.height:
        g = pl.concat([g, intra.select(g.columns).cast(dict(g.schema))])  # type: ignore[arg-type]
    g = g.sort(["device", "stream", "sub", "ts"])
    t0 = as_int(g["ts"].min())
    span = as_int((g["ts"] + g["dur"]).max()) - t0
    lanes = g.select("device", "stream", "sub", "label").unique(["device", "stream", "sub"], maintain_order=True)
    lane_idx = g.select(pl.struct("device", "stream", "sub").rank("dense") - 1).to_series().to_numpy().astype(np.int64)
    counts = np.bincount(lane_idx, minlength=lanes.height)
    first = np.concatenate([[0], np.cumsum(counts)]).tolist()
    max_dur = (g.with_columns(pl.Series("_lane", lane_idx)).group_by("_lane").agg(pl.col("dur").max())
               .sort("_lane")["dur"].to_list())
    names = g["name"].unique(maintain_order=True)
    cats = g["category"].unique(maintain_order=True).sort()
    name_id = g["name"].replace_strict(names.to_list(), list(range(names.len())), return_dtype=pl.UInt32).to_numpy()
    cat_id = g["category"].replace_strict(cats.to_list(), list(range(cats.len())), return_dtype=pl.UInt16).to_numpy()
    ev: dict[str, Any] = {
        "start": b64((g["ts"].to_numpy() - t0).astype(np.float64)),
        "dur": b64(g["dur"].to_numpy().astype(np.float64)),
        "name": b64(name_id.astype(np.uint32)),
        "cat": b64(cat_id.astype(np.uint16)),
    }
    if flush:
        marks = pl.DataFrame({"name": [n for n, _ in flush], "ts": [t for _, t in flush]},
                             schema={"name": pl.String, "ts": pl.Int64})
        flag = g.select(pl.struct("name", "ts").is_in(marks.select(pl.struct("name", "ts")).to_series().implode()))
        ev["flag"] = b64(flag.to_series().to_numpy().astype(np.uint8))
    lane_rows = lanes.to_dicts()
    by_dev: dict[int, int] = {}
    for r in lane_rows:
        by_dev[r["device"]] = by_dev.get(r["device"], 0) + 1
    return {
        "lanes": [{"device": r["device"], "stream": r["stream"],
                   "label": r["label"] if r["sub"] else f"GPU {r['device']} · stream {r['stream']}"} for r in lane_rows],
        "names": names.to_list(), "categories": cats.to_list(), "events": ev, "lane_first": first,
        "lane_max_dur": max_dur, "span_ns": max(span, 1), "t0_ns": t0,
        "steps": [{"name": s["name"], "start_ns": int(s["start"]) - t0, "end_ns": int(s["end"]) - t0}
                  for s in steps.iter_rows(named=True)],
    }


def analysis_data(a: Analysis, extra: dict[str, pl.DataFrame] | None = None, memory: list[dict[str, Any]] | None = None,
                  intra: pl.DataFrame | None = None) -> dict[str, Any]:
    """The page's data document; ``extra`` sheets (perf model, diff) become sortable views after the tables;
    ``memory``: the memory chart's series (:func:`kernscope.render.memory.chart_data`); ``intra``: intra-kernel
    records placed under their kernels (:func:`kernscope.intra.align.timeline_rows`), rows below their stream."""
    f = a.facts.to_dict()
    flush = None
    if a.benchmark is not None:
        flush = {(k.name, k.ts_ns) for k in a.benchmark.flush_kernels if k.ts_ns is not None}
    tl = timeline_data(a.gpu, a.trace.steps, flush, intra)
    sc = a.step_categories
    step_names = sc["name"].unique(maintain_order=True).to_list() if sc.height else []
    cats = sorted(sc["category"].unique().to_list()) if sc.height else []
    values = []
    for s in step_names:
        d = dict(sc.filter(pl.col("name") == s).select("category", "total_us").iter_rows())
        values.append([float(d.get(c, 0.0)) for c in cats])
    used = set()
    tables = {
        "kernels": table(a.kernels.select("name", "launcher", "category", "count", "total_us", "pct", "mean_us",
                                          "min_us", "max_us", "library",
                                          *[c for c in ("decided_by", "decided_op") if c in a.kernels.columns]),
                         "Kernels by name and launching op"),
        "ops": table(a.ops.select("launcher", "count", "total_us", "pct"), "GPU time by launching CPU op"),
        "categories": table(a.categories.select("category", "count", "total_us", "pct"), "GPU time by category"),
        "steps": table(a.steps, "Steps"),
    }
    for t in tables.values():
        used.update(t["columns"])
    used.update(f)
    used.update(r["type"] for r in a.timeline.iter_rows(named=True))
    views = []
    if a.critical_path is not None and a.critical_path.steps.height:
        cp = a.critical_path
        views.append({"name": "critical_path", "title": "Critical path by step (what each step's end waited for)",
                      "table": table(cp.steps, "critical_path")})
        views.append({"name": "critical_path_ops", "title": "Host time on the critical path, by top-level CPU op",
                      "table": table(cp.ops, "critical_path_ops")})
        views.append({"name": "critical_path_whatif", "title": "What-ifs on the critical path (first order)",
                      "table": table(cp.whatif, "critical_path_whatif")})
        used.update(cp.steps.columns)
    if a.annotations is not None:
        views.append({"name": "annotations", "title": "GPU time by annotation (times include nested ranges)",
                      "table": table(a.annotations.ranges, "annotations")})
        used.update(a.annotations.ranges.columns)
    if extra:
        from .views import sheet_views

        more = sheet_views(extra)
        views.extend(more)
        for v in more:
            used.update(v["table"]["columns"])
    return {
        "views": views,
        "title": f["path"],
        "headline": {**headline(a), "findings": records(a.findings.select("rule", "title", "text", "win_back_us").head(3))},
        "facts": {k: f[k] for k in ("events", "gpu_events", "kernels", "kernel_time_us", "devices", "device_names",
                                    "rank", "world_size", "platform", "steps", "step_source", "graph_launches")},
        "glossary": {k: define(k) for k in sorted(used) if k in TERMS},  # sorted: the page is the same on every run
        "timeline": tl,
        "breakdown": records(a.timeline.select("type", "time_us", "percent")),
        "step_categories": {"steps": step_names, "categories": cats, "values": values},
        "tables": tables,
        "memory": memory or [],
    }


def render_analysis(a: Analysis, extra: dict[str, pl.DataFrame] | None = None,
                    memory: list[dict[str, Any]] | None = None, intra: pl.DataFrame | None = None) -> str:
    """The report page of one trace; ``extra``: more sheets shown as sortable tables (e.g. perf model, diff);
    ``memory``: the memory chart's series; ``intra``: intra-kernel rows for the timeline."""
    from ...version import __version__

    return page(analysis_data(a, extra, memory, intra), a.facts.path, f"kernscope {__version__} · {a.facts.kernels:,} kernels")
