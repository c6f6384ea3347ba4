"""JSON and CSV renderers (all times µs, rounded to the data's precision: 3 decimals = 1 ns)."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import polars as pl

from ..analyze.summary import Analysis
from ..version import SCHEMA_VERSION
from .names import FORMULA_PREFIX


def csv_safe(e: pl.Expr) -> pl.Expr:
    """Text a spreadsheet would run as a formula gets a leading apostrophe (OWASP CSV injection)."""
    return pl.when(e.str.contains(FORMULA_PREFIX)).then(pl.concat_str(pl.lit("'"), e)).otherwise(e)


def rounded(df: pl.DataFrame) -> pl.DataFrame:
    """µs columns to 3 decimals (ns), other floats to 6 significant places: no ``423.00600000000003``."""
    exprs = []
    for name, dt in df.schema.items():
        if dt.is_float():
            exprs.append(pl.col(name).round(3 if name.endswith("_us") or name == "time_us" else 4))
    return df.with_columns(exprs) if exprs else df


def records(df: pl.DataFrame, top: int | None = None) -> list[dict[str, Any]]:
    d = rounded(df.head(top) if top is not None else df)
    out = d.to_dicts()
    for r in out:
        for k, v in r.items():
            if isinstance(v, float) and not math.isfinite(v):
                r[k] = None
    return out


def to_dict(a: Analysis, top: int | None = None) -> dict[str, Any]:
    """The ``--format json`` object. Times are µs. Every row unless ``top`` is given."""
    f = a.facts.to_dict()
    trace = {k: f[k] for k in ("path", "events", "gpu_events", "kernels", "kernel_time_us", "devices", "device_names",
                               "rank", "world_size", "platform", "graph_launches", "salvaged_events", "step_source")}
    signal = [c for c in ("decided_by", "decided_op") if c in a.kernels.columns]
    kernels = a.kernels.select(
        "name", "launcher", "category", "library", *signal, "count", "total_us", "mean_us", "min_us", "max_us", "pct"
    )
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "trace": trace,
        "step": a.step,
        "steps": records(a.steps, top),
        "kernels": records(kernels, top),
        "categories": records(a.categories.select("category", "count", "total_us", "pct")),
        "ops": records(a.ops.select("launcher", "count", "total_us", "pct"), top),
        "launcher_categories": records(
            a.launcher_categories.select("launcher", "category", "count", "total_us", "pct_of_launcher"), top
        ),
        "timeline": records(a.timeline.select("type", "time_us", "percent")),
        "unlinked": a.unlinked,
        "findings": findings_records(a.findings),
    }
    if a.critical_path is not None:
        cp = a.critical_path
        out["critical_path"] = {"steps": records(cp.steps), "categories": records(cp.categories),
                                "kernels": records(cp.kernels, top), "ops": records(cp.ops, top), "whatif": records(cp.whatif),
                                "notes": list(cp.notes)}
    if a.facts.salvage_skipped:
        out["salvage_skipped"] = a.facts.salvage_skipped
    if a.benchmark is not None:
        out["benchmark"] = a.benchmark.to_dict()
    if a.annotations is not None:
        out["annotations"] = records(a.annotations.ranges, top)
        out["annotation_categories"] = records(a.annotations.categories)
        out["annotation_timeline"] = records(a.annotations.timeline)
    return out


def findings_records(findings: pl.DataFrame) -> list[dict[str, Any]]:
    """Findings as JSON rows, ranked; ``evidence`` as an object (its numbers, units in the key names)."""
    return [{**r, "evidence": json.loads(r["evidence"])} for r in records(findings)]


def to_json(a: Analysis, top: int | None = None) -> str:
    return json.dumps(to_dict(a, top), indent=2, ensure_ascii=False)


def csv_text(df: pl.DataFrame) -> str:
    """A table as CSV: numbers rounded to their precision, text cells safe from formula injection."""
    d = rounded(df)
    strings = [c for c, t in d.schema.items() if t in (pl.String, pl.Categorical) or isinstance(t, pl.Enum)]
    if strings:
        d = d.with_columns(csv_safe(pl.col(c).cast(pl.String)).alias(c) for c in strings)
    buf = io.StringIO()
    d.write_csv(buf)
    return buf.getvalue()


def to_csv(a: Analysis, top: int | None = None) -> str:
    """The kernel summary as CSV (one row per kernel name and launcher)."""
    return csv_text(a.kernels.head(top) if top is not None else a.kernels)
