"""Bench results -> tables (DataFrames), text, CSV and JSON. Formatting only."""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl

from .results import BenchRun


def _fmt(metric: str, v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "✓" if v else "✗"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if metric == "latency":
            return f"{v:.4f}"
        return f"{v:.2f}"
    return str(v)


def results_frame(run: BenchRun) -> pl.DataFrame:
    """Long table: one row per (input, impl) with every metric, spread and error."""
    rows = []
    for c in run.cells:
        r: dict[str, Any] = {"input_id": c.input_id, "x": "(" + ", ".join(map(str, c.x)) + ")", "impl": c.impl, "error": c.error}
        for m in run.metrics:
            v = c.metrics.get(m)
            r[m] = v if not isinstance(v, bool) else v
        if c.timing is not None:
            r["latency_spread"] = c.timing.spread
            r["latency_n"] = len(c.timing.samples_ms)
            r["latency_outliers"] = c.timing.outliers
        if "max_abs_err" in c.metrics:
            r["max_abs_err"] = c.metrics["max_abs_err"]
        rows.append(r)
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def wide_table(run: BenchRun) -> tuple[list[str], list[list[str]]]:
    """TritonBench-style table: one row per input, a column per ``<impl>-<metric>``."""
    label = "(" + ", ".join(run.x_label) + ")"
    cols = [label] + [f"{i}-{m}" for i in run.impls for m in run.metrics]
    by_input: dict[int, dict[str, Any]] = {}
    xs: dict[int, tuple[Any, ...]] = {}
    for c in run.cells:
        xs[c.input_id] = c.x
        for m in run.metrics:
            key = f"{c.impl}-{m}"
            if c.error:
                by_input.setdefault(c.input_id, {})[key] = f"error: {c.error}" if m == run.metrics[0] else ""
            else:
                v = c.metrics.get(m)
                txt = _fmt(m, v)
                if m == "latency" and c.timing is not None and not math.isnan(c.timing.spread):
                    txt += f" ±{c.timing.spread * 100:.1f}%"
                by_input.setdefault(c.input_id, {})[key] = txt
    rows = []
    for i in sorted(xs):
        x = xs[i]
        rows.append(["(" + ", ".join(map(str, x)) + ")" if len(x) != 1 else str(x[0])] + [by_input[i].get(k, "-") for k in cols[1:]])
    return cols, rows


def trace_table(run: BenchRun) -> tuple[list[str], list[list[str]]]:
    """The analyzed-trace table: profiled step, flush, compute kernels, kernel time vs latency."""
    cols = ["input", "impl", "step", "flush", "compute kernels", "kernel µs", "latency µs", "overhead µs"]
    rows = []
    for c in run.cells:
        if c.analysis is None:
            continue
        a = c.analysis
        v = a.view
        comp = v.compute_kernels
        names = "; ".join(f"{k.name[:60]} [{k.category}] {k.dur_us:.1f}µs" for k in comp[:4])
        if len(comp) > 4:
            names += f"; +{len(comp) - 4} more"
        flush = "; ".join(f"{k.name[:40]} {k.dur_us:.1f}µs" for k in v.flush_kernels) or "-"
        rows.append([
            str(c.input_id), c.impl, str(v.step), flush, names or "-", f"{v.kernel_time_us:.2f}",
            f"{a.latency_us:.2f}" if a.latency_us is not None else "-",
            f"{a.overhead_us:.2f}" if a.overhead_us is not None else "-",
        ])
    return cols, rows


def plain(cols: list[str], rows: list[list[str]]) -> str:
    w = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    line = lambda r: "  ".join(v.rjust(w[i]) for i, v in enumerate(r))  # noqa: E731
    return "\n".join([line(cols), "  ".join("-" * x for x in w)] + [line(r) for r in rows])


def to_json(run: BenchRun) -> str:
    return json.dumps(run.to_dict(), indent=2, default=str)
