"""Views of the perf model (:class:`~kernscope.analyze.perf.PerfReport`): terminal, JSON, CSV, xlsx sheets.

Formatting only: every number shown is a column of the model's tables.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import polars as pl
from rich.console import Console
from rich.text import Text

from ..analyze.perf import PerfModel
from .console import render_findings
from .excel import Sheet
from .formats.json import whole
from .names import term
from .tables import JsonRows, findings_json
from .terminal import Col, count, fit_table, pct, us
from .views import Section, layout, view


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


layout("table", "perf", ("trace", "classes", "ops", "missing", "uncovered", "findings"))
layout("json", "perf", ("schema_version", "trace", "step", "device", "coverage", "classes", "ops", "nested_ops_hidden",
                        "missing", "uncovered", "notes", "findings", "findings_by_kind"))
layout("csv", "perf", ("ops",))
layout("xlsx", "perf", lambda r: (*r.model.sheet_tables(), "perf_device"))


@view("table", "perf.trace")
def _console_head(s: Section, out: Console) -> None:
    pm = s.result.model
    out.print(term(s.result.path, "bold"), overflow="fold")
    out.print(term(device_line(pm)), overflow="fold")
    c = pm.coverage
    out.print(term(f"perf model covers {c['pct']:.1f}% of GPU time ({us(c['modeled_us'])} of {us(c['gpu_time_us'])})"
                   + (f"; {us(c['missing_us'])} in modeled kinds of op without usable shapes" if c["missing_us"] else "")
                   + (f" · step {pm.step}" if pm.step is not None else "")), overflow="fold")
    for n in pm.notes:
        out.print(Text(n, style="yellow"), overflow="fold")
    out.print()


@view("table", "perf.classes")
def _console_classes(s: Section, out: Console) -> None:
    if s.df.height:
        rows = [[r["op_class"], count(r["calls"]), us(r["kernel_time_us"]), pct(r["pct_of_modeled"]), _num(r["tflops_per_s"], 2),
                 _num(r["tb_per_s"], 3)] for r in s.df.iter_rows(named=True)]
        out.print(fit_table("GPU time by op class", [Col("class", enum=True), Col("calls", True), Col("time", True),
                                                     Col("% of modeled", True), Col("TFLOP/s", True), Col("TB/s", True)],
                            rows, s.options.width))
        out.print()


@view("table", "perf.ops")
def _console_ops(s: Section, out: Console) -> None:
    ops, top = s.df, s.top
    if ops.height:
        d = ops.head(top) if top is not None else ops
        more = ops.height - d.height
        params = _params(d)
        # (a JAX op's line of the user's code, where the profile names one: last, left out first when narrow)
        lines = any(p.get("source") for p in params)
        rows = [[label, r["op_class"], _ran(r, p), shapes_label(r["input_dims"]), count(r["count"]),
                 us(r["kernel_time_us"]), _num(r["tflops_per_s"], 2), pct(r["pct_of_peak"]), _num(r["tb_per_s"], 3),
                 _num(r["arithmetic_intensity"], 1), r["bound"] or "-", *([p.get("source") or ""] if lines else [])]
                for label, p, r in zip(_op_labels(d, params), params, d.iter_rows(named=True))]
        cols = [Col("op", weight=2, min_width=10), Col("class", enum=True), Col("dtype", enum=True),
                Col("shapes", weight=3, min_width=10), Col("calls", True), Col("time", True), Col("TFLOP/s", True),
                Col("% of peak", True), Col("TB/s", True), Col("FLOP/B", True, optional=True),
                Col("bound", enum=True, optional=True),
                *([Col("source line", weight=2, min_width=12, tail=True, optional=True)] if lines else [])]
        out.print(fit_table(f"Ops by GPU time ({ops.height:,} signatures; % of peak = of the roofline at the op's "
                            "arithmetic intensity)", cols, rows, s.options.width, more=more))
        out.print()


def _params(ops: pl.DataFrame) -> list[dict[str, Any]]:
    """Each op row's ``params`` (JSON) as a dict ({} where it has none)."""
    if "params" not in ops.columns:
        return [{}] * ops.height
    decoded = [msgspec.json.decode(p) if p else {} for p in ops["params"].to_list()]
    return [p if isinstance(p, dict) else {} for p in decoded]


def _op_labels(ops: pl.DataFrame, params: list[dict[str, Any]]) -> list[str]:
    """Each op's name as the table shows it: a JAX profile's instruction after its module where the rows come from
    several modules (``jit_train_step/fusion.3``, ``jit_eval_step/fusion.3``), and with its program's id where
    programs share a module's name (``copy.1 #9295``: a function compiled for two shapes). ``params``: :func:`_params`."""
    several = len({p.get("module") for p in params if p.get("module")}) > 1
    out = []
    for name, p in zip(ops["name"].to_list(), params):
        label = str(name).removeprefix("aten::")
        if several and p.get("module"):
            label = f"{p['module']}/{label}"
        out.append(f"{label} #{p['program']}" if p.get("program") is not None else label)
    return out


def _ran(r: dict, params: dict[str, Any]) -> str:
    """The row's type, and the precision its GEMMs ran in where that differs (fp32→tf32, fp32→bf16 under autocast;
    a vector op's peak is the fp32 or fp64 rate whatever its type: not shown); a cast's types, from→to (a copy_ of
    bf16 into fp32 and one of fp32 into fp32 read as two identical rows). ``params``: the row's (:func:`_params`)."""
    if params.get("from") or params.get("to"):
        return f"{params['from']}→{r['dtype']}" if params.get("from") else f"{r['dtype']}→{params['to']}"
    ran = r.get("peak_precision")
    return f"{r['dtype']}→{ran}" if ran and ran != r["dtype"] and ran not in ("fp32", "fp64") else r["dtype"]


@view("table", "perf.missing")
def _console_missing(s: Section, out: Console) -> None:
    if s.df.height:
        d = s.shown  # (the longest first)
        rows = [[r["name"], r["reason"], count(r["count"]), us(r["kernel_time_us"])] for r in d.iter_rows(named=True)]
        out.print(fit_table("Ops the model could not use", [Col("op", weight=2), Col("why"), Col("calls", True),
                                                             Col("time", True)], rows, s.options.width,
                            more=s.df.height - d.height))
        out.print()


@view("table", "perf.uncovered")
def _console_uncovered(s: Section, out: Console) -> None:
    u, top = s.df, s.top
    if u.height:
        d = u.head(top) if top is not None else u
        rows = [[r["op_name"], count(r["count"]), us(r["kernel_time_us"])] for r in d.iter_rows(named=True)]
        out.print(fit_table("GPU time outside modeled ops, by launching op", [Col("launcher"), Col("GPU records", True),
                                                                             Col("time", True)], rows, s.options.width,
                            more=u.height - d.height))


@view("table", "perf.findings")
def _console_findings(s: Section, out: Console) -> None:
    if s.result.findings is not None:
        render_findings(s.result.findings_by_kind, out, top=5 if s.top is not None else None)



@view("json", "perf.coverage")
def _json_coverage(s: Section) -> dict[str, float]:
    return {k: round(v, 3) for k, v in s.facts["coverage"].items()}


view("json", "perf.classes")(whole)
view("json", "perf.missing")(whole)



@view("json", "perf.findings")
def _json_findings(s: Section) -> JsonRows | list[dict[str, Any]]:
    return findings_json(s.df) if s.result.findings is not None else []


def device_sheet(pm: PerfModel) -> pl.DataFrame:
    """The device and its peaks as (key, value) text rows."""
    d = pm.device
    peaks = [("device", pm.device_name), ("peaks_of", d.name if d else "")]
    if d is not None:
        peaks += [(f"matrix_{k}_tflops", str(v)) for k, v in d.matrix.items()]
        peaks += [(f"vector_{k}_tflops", str(v)) for k, v in d.vector.items()]
        peaks += [("hbm_tb_s", str(d.hbm_tb_s)), ("source", d.source)]
    return pl.DataFrame(peaks, schema={"key": pl.String, "value": pl.String}, orient="row")


@view("xlsx", "perf.perf_device")
def _xlsx_device(s: Section) -> Sheet:
    return Sheet(device_sheet(s.result.model))
