"""HTML pieces of a trace's page: a table as the page's sortable table, the GPU rows as the timeline's packed
arrays (per device and stream). Formatting only: arrays are packed, not computed (:mod:`kernscope.render.report`
puts them on the page).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ...scalars import as_int
from ..tables import records
from . import b64

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
    # the rows are sorted by lane: a lane starts where its (device, stream, sub) differs from the row before
    keys = [g[c].to_numpy() for c in ("device", "stream", "sub")]
    starts = np.ones(g.height, dtype=bool)
    starts[1:] = np.logical_or.reduce([k[1:] != k[:-1] for k in keys])
    lane_idx = np.cumsum(starts) - 1
    lanes = g.select("device", "stream", "sub", "label").filter(pl.Series(starts))
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
