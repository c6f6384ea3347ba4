"""Self-contained HTML timeline of intra-kernel tasks: one lane per SM lane, colored by task, with a time
axis, zoom/pan, hover details, a legend and the statistics tables. The same page engine as the report
(typed arrays, one mark per pixel per lane), so millions of tasks stay responsive."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from .html import b64, page
from .tables import records


def _table(df: pl.DataFrame, title: str) -> dict[str, Any]:
    cols = list(df.columns)
    return {"title": title, "columns": cols, "rows": [[r[c] for c in cols] for r in records(df)]}


def intra_data(tasks: pl.DataFrame, lanes: pl.DataFrame, summary: dict[str, Any], per_task: pl.DataFrame,
               per_sm: pl.DataFrame, title: str) -> dict[str, Any]:
    t = tasks.join(lanes, on=["block", "group", "sm"], how="left").with_columns(pl.col("lane").fill_null(0))
    keys = t.select("sm", "lane").unique().sort(["sm", "lane"]).with_row_index("row")
    t = t.join(keys, on=["sm", "lane"], how="left").sort(["row", "start_ns"])
    names = sorted(t["task"].cast(pl.String).unique().to_list()) if t.height else []
    t0 = int(t["start_ns"].min()) if t.height else 0  # type: ignore[arg-type]
    span = int(t["end_ns"].max()) - t0 if t.height else 1  # type: ignore[arg-type]
    rows = t["row"].to_numpy().astype(np.int64) if t.height else np.zeros(0, np.int64)
    counts = np.bincount(rows, minlength=keys.height)
    first = np.concatenate([[0], np.cumsum(counts)]).tolist()
    max_dur = (t.group_by("row").agg(pl.col("duration_ns").max()).sort("row")["duration_ns"].to_list()
               if t.height else [])
    task_id = (t["task"].cast(pl.String).replace_strict(names, list(range(len(names))), return_dtype=pl.UInt16).to_numpy()
               if t.height else np.zeros(0, np.uint16))
    block_names = t["block"].cast(pl.String).unique(maintain_order=True) if t.height else pl.Series([], dtype=pl.String)
    timeline = {
        "lanes": [{"label": f"SM {sm} · lane {ln}"} for sm, ln in keys.select("sm", "lane").iter_rows()],
        "names": [f"block {b}" for b in block_names.to_list()],
        "categories": names,
        "events": {
            "start": b64((t["start_ns"].to_numpy() - t0).astype(np.float64)) if t.height else "",
            "dur": b64(t["duration_ns"].to_numpy().astype(np.float64)) if t.height else "",
            "cat": b64(task_id.astype(np.uint16)),
            "name": b64(t["block"].cast(pl.String).replace_strict(block_names.to_list(), list(range(block_names.len())),
                                                                 return_dtype=pl.UInt32).to_numpy().astype(np.uint32))
            if t.height else "",
        },
        "lane_first": first, "lane_max_dur": max_dur, "span_ns": max(span, 1), "t0_ns": t0, "steps": [],
        "time_unit": summary.get("time_unit", "ns"),  # "cycles": the axis and hovers count cycles, not time
    }
    facts = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in summary.items()
             if not (isinstance(v, list) and v and isinstance(v[0], dict))}  # row lists become tables below
    unit = "cycles" if summary.get("time_unit") == "cycles" else "ns"
    tables = {"tasks": _table(per_task, f"Per task ({unit})"), "sms": _table(per_sm, "Per SM")}
    for key, title_ in (("launches", "Per kernel launch"), ("unbalanced", "Unbalanced scopes"),
                        ("group_overlap", f"Warp groups: time two groups' tasks run at once, all CTAs ({unit})"),
                        ("group_overlap_per_cta", f"Warp groups: overlap per CTA ({unit})")):
        listed = summary.get(key)
        if isinstance(listed, list) and listed and isinstance(listed[0], dict):
            tables[key] = _table(pl.DataFrame(listed), title_)
    return {"title": title, "facts": facts, "timeline": timeline, "tables": tables, "glossary": {}}


def render_html(tasks: pl.DataFrame, lanes: pl.DataFrame, summary: dict[str, Any], per_task: pl.DataFrame,
                per_sm: pl.DataFrame, title: str = "kernscope intra-kernel timeline") -> str:
    """HTML page; ``lanes`` maps (block, group, sm) -> lane (from ``intra.export.assign_lanes``)."""
    return page(intra_data(tasks, lanes, summary, per_task, per_sm, title), title,
                f"{tasks.height:,} tasks on {summary.get('sms', 0)} SMs")
