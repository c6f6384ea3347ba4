"""JSON and CSV renderers (all times µs, rounded to the data's precision: 3 decimals = 1 ns)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
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


def _prepared(df: pl.DataFrame, top: int | None) -> pl.DataFrame:
    """The rows (``top`` of them), floats rounded (:func:`rounded`), a non-finite float (JSON has none) as null: in
    polars, not a check of every value in Python (a 1 GB trace's 11 K critical-path rows: 0.045 s of it)."""
    d = rounded(df.head(top) if top is not None else df)
    floats = [name for name, dt in d.schema.items() if dt.is_float()]
    if floats:
        d = d.with_columns(pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c in floats)
    return d


def records(df: pl.DataFrame, top: int | None = None) -> list[dict[str, Any]]:
    """The rows (``top`` of them) as dicts, floats rounded (:func:`rounded`), a non-finite float as null."""
    rows: list[dict[str, Any]] = _prepared(df, top).to_dicts()
    return rows


@dataclass(frozen=True)
class JsonRows:
    """A table's rows as the JSON text ``json.dumps(records(df, top), ensure_ascii=False)`` would be, without the
    spaces (which the JSON format's indenting rewrites anyway): written by polars from the columns, with no Python
    object per cell (a 975 MB JAX profile's 15,500 steps and its critical path's tables: 0.25-0.3 s as records)."""

    text: bytes


def _plain(dt: Any) -> bool:
    """Whether polars writes a column of this type as ``json.dumps`` writes its Python values: integers, Float64 (the
    shortest text that reads back, as Python's ``repr``; a Float32's differs), booleans, text and lists of these
    (nulls as null)."""
    if isinstance(dt, pl.List):
        return _plain(dt.inner)
    return (dt.is_integer() or dt == pl.Float64 or dt == pl.Boolean or dt == pl.String or dt == pl.Null
            or isinstance(dt, (pl.Categorical, pl.Enum)))


def json_rows(df: pl.DataFrame, top: int | None = None) -> JsonRows | list[dict[str, Any]]:
    """The rows for the JSON format: :class:`JsonRows` where every column is :func:`_plain`, else :func:`records`
    (dates, structs and others: as the standard library writes their Python values)."""
    if not all(_plain(dt) for dt in df.schema.values()):
        return records(df, top)
    buf = io.BytesIO()
    _prepared(df, top).write_json(buf)
    return JsonRows(buf.getvalue())


layout("json", "analysis", ("schema_version", "trace", "step", "steps", "kernels", "categories", "libraries", "ops",
                           "sources", "launcher_categories", "timeline", "timeline_by_device", "unlinked", "findings",
                           "findings_by_kind", "critical_path", "salvage_skipped", "benchmark", "annotations",
                           "annotation_categories", "annotation_timeline"))
layout("csv", "analysis", ("kernels",))

#: the trace facts the analysis JSON shows
TRACE_KEYS = ("path", "events", "gpu_events", "kernels", "kernel_time_us", "devices", "device_names", "rank", "world_size",
              "platform", "graph_launches", "salvaged_events", "step_source")


@view("json", "analysis.trace")
def _json_trace(s: Section) -> dict[str, Any]:
    return {k: s.value[k] for k in TRACE_KEYS}


@view("json", "analysis.kernels")
def _json_kernels(s: Section) -> JsonRows | list[dict[str, Any]]:
    signal = [c for c in ("decided_by", "decided_op") if c in s.df.columns]
    return json_rows(s.df.select("name", "launcher", "category", "library", *signal, "count", "total_us", "mean_us", "min_us",
                               "max_us", "pct"), s.top)


@view("json", "analysis.categories")
def _json_categories(s: Section) -> JsonRows | list[dict[str, Any]]:
    return json_rows(s.df.select("category", "count", "total_us", "pct"))


@view("json", "analysis.libraries")
def _json_libraries(s: Section) -> JsonRows | list[dict[str, Any]]:
    return json_rows(s.df.select("library", "kernels", "count", "total_us", "pct"))


@view("json", "analysis.ops")
def _json_ops(s: Section) -> JsonRows | list[dict[str, Any]]:
    return json_rows(s.df.select("launcher", "count", "total_us", "pct"), s.top)


@view("json", "analysis.sources")
def _json_sources(s: Section) -> Any:
    # (only where GPU rows have source lines: a JAX profile's, a PyTorch trace's with --sources)
    if not s.df.height:
        return OMIT
    return json_rows(s.df.select("source", "function", "kernels", "top_kernel", "count", "total_us", "pct"), s.top)


@view("json", "analysis.launcher_categories")
def _json_launcher_categories(s: Section) -> JsonRows | list[dict[str, Any]]:
    return json_rows(s.df.select("launcher", "category", "count", "total_us", "pct_of_launcher"), s.top)


@view("json", "analysis.timeline")
def _json_timeline(s: Section) -> JsonRows | list[dict[str, Any]]:
    return json_rows(s.df.select("type", "time_us", "percent"))


@view("json", "analysis.timeline_by_device")
def _json_timeline_by_device(s: Section) -> JsonRows | list[dict[str, Any]]:
    return json_rows(s.df.select("device", "type", "time_us", "percent"))


@view("json", "analysis.findings")
def _json_findings(s: Section) -> JsonRows | list[dict[str, Any]]:
    return findings_json(s.df)


@view("json", "analysis.critical_path")
def _json_critical_path(s: Section) -> Any:
    cp = s.result.critical_path
    if cp is None:
        return OMIT
    return Parts({"steps": lambda: json_rows(cp.steps), "categories": lambda: json_rows(cp.categories),
                  "kernels": lambda: json_rows(cp.kernels, s.top), "ops": lambda: json_rows(cp.ops, s.top),
                  "whatif": lambda: json_rows(cp.whatif), "notes": lambda: list(cp.notes)})


@view("json", "analysis.salvage_skipped")
def _json_salvage_skipped(s: Section) -> Any:
    return s.value or OMIT


@view("json", "analysis.benchmark")
def _json_benchmark(s: Section) -> Any:
    return OMIT if s.value is None else s.value


@view("json", "analysis.annotations")
def _json_annotations(s: Section) -> Any:
    return json_rows(s.df, s.top) if s.name in s.tables else OMIT


@view("json", "analysis.annotation_categories")
@view("json", "analysis.annotation_timeline")
def _json_annotation_whole(s: Section) -> Any:
    return json_rows(s.df) if s.name in s.tables else OMIT


def findings_records(findings: pl.DataFrame) -> list[dict[str, Any]]:
    """Findings as JSON rows, ranked; ``evidence`` as an object (its numbers, units in the key names)."""
    return [{**r, "evidence": json.loads(r["evidence"])} for r in records(findings)]


def findings_json(findings: pl.DataFrame) -> JsonRows | list[dict[str, Any]]:
    """:func:`findings_records` for the JSON format: each finding's other columns written by polars and its
    evidence's JSON text placed after them as it was stored (a 975 MB JAX profile's 15,656 findings: 0.1-0.15 s as
    records, each evidence parsed back into objects). Where a stored text is not what ``json.dumps`` of its parsed
    value would write (an escaped non-ASCII character, ``NaN`` or ``Infinity``) or ``evidence`` is not the last
    column, the records."""
    cols = findings.columns
    if (not cols or cols[-1] != "evidence" or findings.height == 0
            or not all(_plain(dt) for dt in findings.schema.values())
            or findings.select(pl.col("evidence").str.contains(r"\\u|NaN|Infinity").any()).item()):
        return findings_records(findings)
    buf = io.BytesIO()
    _prepared(findings.drop("evidence"), None).write_ndjson(buf)
    heads = buf.getvalue().splitlines()  # one object per finding, in order: its closing brace replaced below
    evidence = findings["evidence"].to_list()
    return JsonRows(b"[" + b",".join(h[:-1] + b',"evidence":' + e.encode() + b"}" for h, e in zip(heads, evidence))
                    + b"]")


def csv_text(df: pl.DataFrame) -> str:
    """A table as CSV: numbers rounded to their precision, text cells safe from formula injection."""
    d = rounded(df)
    strings = [c for c, t in d.schema.items() if t in (pl.String, pl.Categorical) or isinstance(t, pl.Enum)]
    if strings:
        d = d.with_columns(csv_safe(pl.col(c).cast(pl.String)).alias(c) for c in strings)
    buf = io.StringIO()
    d.write_csv(buf)
    return buf.getvalue()
