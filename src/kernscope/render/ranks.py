"""Renderers for a multi-rank job (:class:`~kernscope.analyze.ranks.JobAnalysis`): terminal, JSON, CSV, sheets."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
from rich.console import Console
from rich.text import Text

from ..analyze.ranks import JobAnalysis
from ..scalars import as_float
from ..version import SCHEMA_VERSION
from .console import render_findings
from .names import term
from .tables import csv_text, findings_records, records
from .terminal import Col, count, fit_table, pct, us

_SHADES = " ▁▂▃▄▅▆▇█"


def _strip(values: list[float | None], top: float) -> str:
    if top <= 0:
        return "".join("·" if v is None else _SHADES[1] for v in values)
    return "".join("·" if v is None else _SHADES[max(1, min(8, round(8 * v / top)))] for v in values)


def heat_rows(j: JobAnalysis, metric: str) -> tuple[list[str], list[list[Any]]]:
    """(step names, rows of [rank, strip, min, max]) for a rank x step heat strip of ``metric`` (µs)."""
    rs = j.rank_steps
    if rs.height == 0 or metric not in rs.columns:
        return [], []
    steps = rs.select("step", "name").unique("step").sort("step")
    wide = rs.pivot(on="step", index="rank", values=metric, aggregate_function="first").sort("rank")
    cols = [str(s) for s in steps["step"].to_list() if str(s) in wide.columns]
    top = as_float(rs[metric].max())
    rows = []
    for r in wide.iter_rows(named=True):
        vals = [r[c] for c in cols]
        present = [v for v in vals if v is not None]
        rows.append([str(r["rank"]), _strip(vals, top), us(min(present)) if present else "-", us(max(present)) if present else "-"])
    return steps["name"].to_list(), rows


def render(j: JobAnalysis, console: Console, top: int | None = 15, width: int | None = None) -> None:
    w = width or console.width
    n = j.ranks.height
    console.print(term(f"{n} ranks" + (f" of {j.world_size}" if j.world_size else ""), "bold"), overflow="fold")
    for f in j.failures:
        console.print(Text(f"failed: {f.path}: {f.problem}", style="red"), overflow="fold")
    for note in j.notes:
        console.print(Text(note, style="yellow"), overflow="fold")
    console.print()
    rows = [[str(r["rank"]), count(r["steps"]), us(r["kernel_time_us"]), us(r["compute_us"]), us(r["comm_us"]),
             us(r["exposed_comm_us"]), pct(r["overlap_pct"]), us(r["idle_us"]), us(r["host_wait_us"]),
             us(r["launch_delay_p50_us"]), count(r["max_queue"])] for r in j.ranks.iter_rows(named=True)]
    cols = [Col("rank", True), Col("steps", True), Col("kernel time", True), Col("compute", True), Col("comm", True),
            Col("exposed comm", True), Col("overlap", True), Col("idle", True), Col("host wait", True),
            Col("launch p50", True), Col("max queue", True)]
    console.print(fit_table("Per rank (all GPU activity; overlap = comm hidden under compute)", cols, rows, w))
    console.print()
    for metric, title in (("wall_us", "Step time"), ("exposed_comm_us", "Exposed communication")):
        names, hrows = heat_rows(j, metric)
        if hrows:
            console.print(fit_table(f"{title} by step, {names[0]} … {names[-1]} (darker = longer)",
                                    [Col("rank", True), Col("steps", min_width=len(hrows[0][1])), Col("min", True),
                                     Col("max", True)], hrows, w))
            console.print()
    if j.stragglers.height:
        rows = [[r["step"], str(r["rank"]), us(r["wait_us"]), us(r["max_wait_us"]), f"{r['last_in']}/{r['collectives']}"]
                for r in j.stragglers.iter_rows(named=True)]
        console.print(fit_table("Stragglers: the rank the others waited for most, per step", [
            Col("step", min_width=14), Col("rank", True), Col("wait caused / other rank", True), Col("longest wait", True),
            Col("last to arrive", True)], rows, w))
        console.print()
    if j.collectives.height:
        d = j.collectives.head(top) if top is not None else j.collectives
        rows = [[r["pg"], r["type"], count(r["instances"]), f"{(r['bytes'] or 0) / 2**20:,.1f}", us(r["transfer_us"]),
                 us(r["skew_mean_us"]), us(r["skew_max_us"]), "-" if r["busbw_gb_s"] is None else f"{r['busbw_gb_s']:,.1f}",
                 r["algo"] or "-", "-" if r["most_often_last"] is None else str(r["most_often_last"])]
                for r in d.iter_rows(named=True)]
        console.print(fit_table("Collectives across ranks", [
            Col("group", min_width=5), Col("type", enum=True), Col("instances", True), Col("MiB", True),
            Col("transfer", True), Col("skew mean", True), Col("skew max", True), Col("busbw GB/s", True),
            Col("algo", True), Col("last arriver", True)], rows, w, more=j.collectives.height - d.height))
    if j.critical_path.height and "length_us" in j.critical_path.columns:
        d = j.critical_path.head(top) if top is not None else j.critical_path
        rows = [[str(r["rank"]), str(r["step"]), us(r["length_us"]), us(r["cpu_us"]), us(r["gpu_us"]),
                 us(r["last_arriver_wait_us"])] for r in d.iter_rows(named=True)]
        console.print()
        console.print(fit_table("Critical path per rank and step (last arriver: path time waiting for the slowest rank)",
                                [Col("rank", True), Col("step", True), Col("length", True), Col("cpu", True),
                                 Col("gpu", True), Col("last arriver", True)], rows, w,
                                more=j.critical_path.height - d.height))
    render_findings(j.findings, console, top=5 if top is not None else None)


def to_dict(j: JobAnalysis, top: int | None = None) -> dict[str, Any]:
    """``--format json``: ranks, rank_steps, collectives, collective_instances, stragglers, findings, queues, failures,
    notes."""
    return {
        "schema_version": SCHEMA_VERSION,
        "world_size": j.world_size,
        "ranks": records(j.ranks),
        "rank_steps": records(j.rank_steps),
        "stragglers": records(j.stragglers),
        "findings": findings_records(j.findings),
        "critical_path": records(j.critical_path),
        "collectives": records(j.collectives),
        "collective_instances": records(j.instances, top),
        "queues": records(j.queues),
        "failures": [{"path": f.path, "problem": f.problem} for f in j.failures],
        "notes": list(j.notes),
    }


def to_json(j: JobAnalysis, top: int | None = None) -> str:
    return json.dumps(to_dict(j, top), indent=2, ensure_ascii=False)


def to_csv(j: JobAnalysis) -> str:
    return csv_text(j.ranks)


def rank_sheets(j: JobAnalysis) -> dict[str, pl.DataFrame]:
    return {"ranks": j.ranks, "rank_steps": j.rank_steps, "stragglers": j.stragglers, "findings": j.findings,
            "critical_path": j.critical_path, "collectives": j.collectives,
            "collective_instances": j.instances, "collective_waits": j.waits, "queues": j.queues}
