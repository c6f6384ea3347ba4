"""JSON and CSV renderers (all times µs, rounded to the data's precision: 3 decimals = 1 ns)."""

from __future__ import annotations

import io
import json
from typing import Any

import polars as pl

from .names import FORMULA_PREFIX
from .views import OMIT, Parts, Section, layout, view


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
    """The rows (``top`` of them) as dicts, floats rounded (:func:`rounded`), a non-finite float (JSON has none) as
    null: in polars, not a check of every value in Python (a 1 GB trace's 11 K critical-path rows: 0.045 s of it)."""
    d = rounded(df.head(top) if top is not None else df)
    floats = [name for name, dt in d.schema.items() if dt.is_float()]
    if floats:
        d = d.with_columns(pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c in floats)
    rows: list[dict[str, Any]] = d.to_dicts()
    return rows


layout("json", "analysis", ("schema_version", "trace", "step", "steps", "kernels", "categories", "ops",
                           "launcher_categories", "timeline", "unlinked", "findings", "critical_path", "salvage_skipped",
                           "benchmark", "annotations", "annotation_categories", "annotation_timeline"))
layout("csv", "analysis", ("kernels",))

#: the trace facts the analysis JSON shows
TRACE_KEYS = ("path", "events", "gpu_events", "kernels", "kernel_time_us", "devices", "device_names", "rank", "world_size",
              "platform", "graph_launches", "salvaged_events", "step_source")


@view("json", "analysis.trace")
def _json_trace(s: Section) -> dict[str, Any]:
    return {k: s.value[k] for k in TRACE_KEYS}


@view("json", "analysis.kernels")
def _json_kernels(s: Section) -> list[dict[str, Any]]:
    signal = [c for c in ("decided_by", "decided_op") if c in s.df.columns]
    return records(s.df.select("name", "launcher", "category", "library", *signal, "count", "total_us", "mean_us", "min_us",
                               "max_us", "pct"), s.top)


@view("json", "analysis.categories")
def _json_categories(s: Section) -> list[dict[str, Any]]:
    return records(s.df.select("category", "count", "total_us", "pct"))


@view("json", "analysis.ops")
def _json_ops(s: Section) -> list[dict[str, Any]]:
    return records(s.df.select("launcher", "count", "total_us", "pct"), s.top)


@view("json", "analysis.launcher_categories")
def _json_launcher_categories(s: Section) -> list[dict[str, Any]]:
    return records(s.df.select("launcher", "category", "count", "total_us", "pct_of_launcher"), s.top)


@view("json", "analysis.timeline")
def _json_timeline(s: Section) -> list[dict[str, Any]]:
    return records(s.df.select("type", "time_us", "percent"))


@view("json", "analysis.findings")
def _json_findings(s: Section) -> list[dict[str, Any]]:
    return findings_records(s.df)


@view("json", "analysis.critical_path")
def _json_critical_path(s: Section) -> Any:
    cp = s.result.critical_path
    if cp is None:
        return OMIT
    return Parts({"steps": lambda: records(cp.steps), "categories": lambda: records(cp.categories),
                  "kernels": lambda: records(cp.kernels, s.top), "ops": lambda: records(cp.ops, s.top),
                  "whatif": lambda: records(cp.whatif), "notes": lambda: list(cp.notes)})


@view("json", "analysis.salvage_skipped")
def _json_salvage_skipped(s: Section) -> Any:
    return s.value or OMIT


@view("json", "analysis.benchmark")
def _json_benchmark(s: Section) -> Any:
    return OMIT if s.value is None else s.value


@view("json", "analysis.annotations")
def _json_annotations(s: Section) -> Any:
    return records(s.df, s.top) if s.name in s.tables else OMIT


@view("json", "analysis.annotation_categories")
@view("json", "analysis.annotation_timeline")
def _json_annotation_whole(s: Section) -> Any:
    return records(s.df) if s.name in s.tables else OMIT


def findings_records(findings: pl.DataFrame) -> list[dict[str, Any]]:
    """Findings as JSON rows, ranked; ``evidence`` as an object (its numbers, units in the key names)."""
    return [{**r, "evidence": json.loads(r["evidence"])} for r in records(findings)]


def csv_text(df: pl.DataFrame) -> str:
    """A table as CSV: numbers rounded to their precision, text cells safe from formula injection."""
    d = rounded(df)
    strings = [c for c, t in d.schema.items() if t in (pl.String, pl.Categorical) or isinstance(t, pl.Enum)]
    if strings:
        d = d.with_columns(csv_safe(pl.col(c).cast(pl.String)).alias(c) for c in strings)
    buf = io.StringIO()
    d.write_csv(buf)
    return buf.getvalue()
