"""Renderers for a trace diff (:class:`~kernscope.analyze.diff.TraceDiff`): terminal, JSON, CSV, xlsx sheets."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from rich.console import Console
from rich.text import Text

from ..analyze.diff import TraceDiff
from ..version import SCHEMA_VERSION
from .names import term
from .tables import csv_text, records
from .terminal import Col, count, fit_table, us


def _side(facts: Any, step: int | None) -> str:
    dev = ", ".join(facts.device_names) or "-"
    return f"{facts.path}" + (f" (step {step})" if step is not None else "") + f" · {dev}"


def _delta(v: float) -> str:
    return ("+" if v > 0 else "") + us(v) if v else "0"


def render(d: TraceDiff, console: Console, top: int | None = 15, width: int | None = None) -> None:
    w = width or console.width
    console.print(term("A: " + _side(d.a, d.step_a)), overflow="fold")
    console.print(term("B: " + _side(d.b, d.step_b)), overflow="fold")
    console.print(Text(d.verdict, style="bold"), overflow="fold")
    for n in d.notes:
        console.print(Text(n, style="yellow"), overflow="fold")
    t = d.total
    console.print(term(f"GPU time A {us(t['a_us'])} · B {us(t['b_us'])} · delta {_delta(t['delta_us'])} ({t['delta_pct']:+.1f}%) · "
                       f"GPU busy A {us(t['a_busy_us'])} · B {us(t['b_busy_us'])}"), overflow="fold")
    console.print()
    rows = [[r["category"], count(r["a_count"]), count(r["b_count"]), us(r["a_us"]), us(r["b_us"]), _delta(r["delta_us"])]
            for r in d.categories.iter_rows(named=True)]
    console.print(fit_table("By category", [Col("category", enum=True), Col("A count", True), Col("B count", True),
                                            Col("A", True), Col("B", True), Col("B - A", True)], rows, w))
    console.print()
    for title, df, name_cols in (
        (f"Kernels by |B - A| ({'names matched loosely' if d.match == 'loose' else 'exact names'}; "
         "'only' = on one side only)", d.kernels, ["name", "launcher"]),
        ("CPU ops by |B - A| of host time", d.ops, ["name"]),
    ):
        part = df.head(top) if top is not None else df
        cols = [Col("kernel" if "launcher" in name_cols else "op", weight=4, min_width=12, kernel="launcher" in name_cols)]
        if "launcher" in name_cols:
            cols.append(Col("launcher", weight=2, min_width=8))
        cols += [Col("A count", True), Col("B count", True), Col("A", True), Col("B", True), Col("B - A", True),
                 Col("only", True)]
        rows = [[*(r[c] for c in name_cols), count(r["a_count"]), count(r["b_count"]), us(r["a_us"]), us(r["b_us"]),
                 _delta(r["delta_us"]), r["only"]] for r in part.iter_rows(named=True)]
        console.print(fit_table(title, cols, rows, w, more=df.height - part.height))
        console.print()


def _facts(f: Any) -> dict[str, Any]:
    keep = ("path", "events", "gpu_events", "kernels", "kernel_time_us", "devices", "device_names", "rank", "world_size",
            "platform", "steps", "step_source", "graph_launches")
    return {k: getattr(f, k) for k in keep}


def to_dict(d: TraceDiff, top: int | None = None) -> dict[str, Any]:
    """The ``--format json`` object: a, b (trace facts), total, categories, kernels, ops, verdict, notes."""
    return {
        "schema_version": SCHEMA_VERSION,
        "a": {**_facts(d.a), "step": d.step_a},
        "b": {**_facts(d.b), "step": d.step_b},
        "match": d.match,
        "verdict": d.verdict,
        "notes": list(d.notes),
        "total": {k: round(v, 3) for k, v in d.total.items()},
        "categories": records(d.categories),
        "kernels": records(d.kernels, top),
        "ops": records(d.ops, top),
    }


def to_json(d: TraceDiff, top: int | None = None) -> str:
    return json.dumps(to_dict(d, top), indent=2, ensure_ascii=False)


def to_csv(d: TraceDiff, top: int | None = None) -> str:
    return csv_text(d.kernels.head(top) if top is not None else d.kernels)


def diff_sheets(d: TraceDiff) -> dict[str, pl.DataFrame]:
    summary = pl.DataFrame(
        [("A", d.a.path), ("A step", "" if d.step_a is None else str(d.step_a)), ("A devices", ", ".join(d.a.device_names)),
         ("B", d.b.path), ("B step", "" if d.step_b is None else str(d.step_b)), ("B devices", ", ".join(d.b.device_names)),
         ("match", d.match), ("verdict", d.verdict), *(("note", n) for n in d.notes),
         *((k, f"{v:.3f}") for k, v in d.total.items())],
        schema={"key": pl.String, "value": pl.String}, orient="row")
    return {"diff_summary": summary, "diff_categories": d.categories, "diff_kernels": d.kernels, "diff_ops": d.ops}
