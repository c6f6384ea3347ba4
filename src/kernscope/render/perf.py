"""Renderers for the perf model (:class:`~kernscope.analyze.perf.PerfModel`): terminal, JSON, CSV, xlsx sheets.

Formatting only: every number shown is a column of the model's tables.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from rich.console import Console
from rich.text import Text

from ..analyze.perf import PerfModel
from ..version import SCHEMA_VERSION
from .console import render_findings
from .names import term
from .tables import csv_text, findings_records, records
from .terminal import Col, count, fit_table, pct, us


def shapes_label(input_dims: str | None) -> str:
    """``[[8944, 1024], [1024, 2816], []]`` -> ``8944x1024, 1024x2816`` (tensor arguments only)."""
    try:
        dims = json.loads(input_dims) if input_dims else []
    except ValueError:
        return input_dims or ""
    parts = []
    for d in dims:
        if isinstance(d, list) and d and all(isinstance(x, int) for x in d):
            parts.append("x".join(str(x) for x in d))
        elif isinstance(d, list) and d and all(isinstance(x, list) for x in d):
            parts.append("[" + ", ".join("x".join(str(y) for y in x) for x in d) + "]")
    return ", ".join(parts)


def _num(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def device_line(pm: PerfModel) -> str:
    d = pm.device
    if d is None:
        return f"device: {pm.device_name or '(not recorded)'}: no peaks (give --peak)"
    m = d.matrix
    main = next((f"{k} {m[k]:,.0f}" for k in ("bf16", "fp16", "fp32") if k in m), "")
    src = {"table": "", "override": " (from --peak)", "table+override": " (table, changed by --peak)"}[d.source]
    return (f"device: {pm.device_name or '(not recorded)'} -> peaks of {d.name}{src}: matrix {main} TFLOP/s, "
            f"vector fp32 {d.vector.get('fp32', 0):,.1f} TFLOP/s, memory {d.hbm_tb_s or 0:,.2f} TB/s")


def render(pm: PerfModel, path: str, console: Console, top: int | None = 15, width: int | None = None,
           show_nested: bool = False, findings: pl.DataFrame | None = None) -> None:
    w = width or console.width
    console.print(term(path, "bold"), overflow="fold")
    console.print(term(device_line(pm)), overflow="fold")
    c = pm.coverage
    console.print(term(f"perf model covers {c['pct']:.1f}% of GPU time ({us(c['modeled_us'])} of {us(c['gpu_time_us'])})"
                       + (f"; {us(c['missing_us'])} in modeled kinds of op without usable shapes" if c["missing_us"] else "")
                       + (f" · step {pm.step}" if pm.step is not None else "")), overflow="fold")
    for n in pm.notes:
        console.print(Text(n, style="yellow"), overflow="fold")
    console.print()
    if pm.classes.height:
        rows = [[r["op_class"], count(r["calls"]), us(r["kernel_time_us"]), pct(r["pct_of_modeled"]), _num(r["tflops_per_s"], 2),
                 _num(r["tb_per_s"], 3)] for r in pm.classes.iter_rows(named=True)]
        console.print(fit_table("GPU time by op class", [Col("class", enum=True), Col("calls", True), Col("time", True),
                                                         Col("% of modeled", True), Col("TFLOP/s", True), Col("TB/s", True)],
                                rows, w))
        console.print()
    ops = listed_ops(pm, show_nested)
    if ops.height:
        d = ops.head(top) if top is not None else ops
        more = ops.height - d.height
        rows = [[r["name"].removeprefix("aten::"), r["op_class"], r["dtype"], shapes_label(r["input_dims"]), count(r["count"]),
                 us(r["kernel_time_us"]), _num(r["tflops_per_s"], 2), pct(r["pct_of_peak"]), _num(r["tb_per_s"], 3),
                 _num(r["arithmetic_intensity"], 1), r["bound"] or "-"]
                for r in d.iter_rows(named=True)]
        cols = [Col("op", weight=2, min_width=10), Col("class", enum=True), Col("dtype", enum=True),
                Col("shapes", weight=3, min_width=10), Col("calls", True), Col("time", True), Col("TFLOP/s", True),
                Col("% of peak", True), Col("TB/s", True), Col("FLOP/B", True, optional=True),
                Col("bound", enum=True, optional=True)]
        console.print(fit_table(f"Ops by GPU time ({ops.height:,} signatures; % of peak = of the roofline at the op's "
                                "arithmetic intensity)", cols, rows, w, more=more))
        console.print()
    if pm.missing.height:
        rows = [[r["name"], r["reason"], count(r["count"]), us(r["kernel_time_us"])] for r in pm.missing.iter_rows(named=True)]
        console.print(fit_table("Ops the model could not use", [Col("op", weight=2), Col("why"), Col("calls", True),
                                                                 Col("time", True)], rows, w))
        console.print()
    if pm.uncovered.height:
        d = pm.uncovered.head(top) if top is not None else pm.uncovered
        rows = [[r["op_name"], count(r["count"]), us(r["kernel_time_us"])] for r in d.iter_rows(named=True)]
        console.print(fit_table("GPU time outside modeled ops, by launching op", [Col("launcher"), Col("GPU records", True),
                                                                                 Col("time", True)], rows, w,
                                more=pm.uncovered.height - d.height))
    if findings is not None:
        render_findings(findings, console, top=5 if top is not None else None)


def listed_ops(pm: PerfModel, show_nested: bool) -> pl.DataFrame:
    """The op rows every output lists: without ops that contain another modeled op unless ``show_nested``."""
    return pm.ops if show_nested else pm.ops.filter(~pl.col("nested"))


def to_dict(pm: PerfModel, path: str, top: int | None = None, show_nested: bool = False,
            findings: pl.DataFrame | None = None) -> dict[str, Any]:
    """The ``--format json`` object: device {name, peaks}, coverage, classes, ops (the rows the table lists:
    ``nested_ops_hidden`` says how many containing ops ``--all`` adds), missing, uncovered, notes."""
    ops = listed_ops(pm, show_nested)
    return {
        "schema_version": SCHEMA_VERSION,
        "trace": path,
        "step": pm.step,
        "device": {"name": pm.device_name, "peaks": pm.device.to_dict() if pm.device else None},
        "coverage": {k: round(v, 3) for k, v in pm.coverage.items()},
        "classes": records(pm.classes),
        "ops": records(ops, top),
        "nested_ops_hidden": pm.ops.height - ops.height,
        "missing": records(pm.missing),
        "uncovered": records(pm.uncovered, top),
        "notes": list(pm.notes),
        "findings": findings_records(findings) if findings is not None else [],
    }


def to_json(pm: PerfModel, path: str, top: int | None = None, show_nested: bool = False,
            findings: pl.DataFrame | None = None) -> str:
    return json.dumps(to_dict(pm, path, top, show_nested, findings), indent=2, ensure_ascii=False)


def to_csv(pm: PerfModel, top: int | None = None, show_nested: bool = False) -> str:
    ops = listed_ops(pm, show_nested)
    return csv_text(ops.head(top) if top is not None else ops)


def perf_sheets(pm: PerfModel) -> dict[str, pl.DataFrame]:
    """xlsx/CSV sheets: one per op class (TraceLens's names, with ``param:`` columns), ``unified_perf_summary``
    (every modeled signature), the classes, missing and uncovered tables, and the device peaks."""
    sheets: dict[str, pl.DataFrame] = {}
    for cls, df in pm.by_class().items():
        sheets[cls] = df.drop("op_class")
    sheets["unified_perf_summary"] = pm.ops
    sheets["perf_by_class"] = pm.classes
    sheets["perf_missing_shapes"] = pm.missing
    sheets["perf_uncovered"] = pm.uncovered
    d = pm.device
    peaks = [("device", pm.device_name), ("peaks_of", d.name if d else "")]
    if d is not None:
        peaks += [(f"matrix_{k}_tflops", str(v)) for k, v in d.matrix.items()]
        peaks += [(f"vector_{k}_tflops", str(v)) for k, v in d.vector.items()]
        peaks += [("hbm_tb_s", str(d.hbm_tb_s)), ("source", d.source)]
    sheets["perf_device"] = pl.DataFrame(peaks, schema={"key": pl.String, "value": pl.String}, orient="row")
    return sheets
