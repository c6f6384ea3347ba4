"""Views of a multi-rank job (:class:`~kernscope.analyze.ranks.JobAnalysis`): terminal, JSON, CSV, sheets."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from ..analyze.ranks import JobAnalysis
from ..scalars import as_float
from .console import render_findings
from .formats.json import whole
from .names import term
from .tables import JsonRows, csv_text, findings_json
from .terminal import GAP, Col, count, fit_table, pct, size, us
from .views import Section, layout, view

_SHADES = " ▁▂▃▄▅▆▇█"


def _strip(values: list[float | None], top: float) -> str:
    if top <= 0:
        return "".join("·" if v is None else _SHADES[1] for v in values)
    return "".join("·" if v is None else _SHADES[max(1, min(8, round(8 * v / top)))] for v in values)


def _buckets(values: list[float | None], per: int) -> list[float | None]:
    """``values`` in runs of ``per``, each run as its largest present value (None when it has none)."""
    out: list[float | None] = []
    for i in range(0, len(values), per):
        present = [v for v in values[i:i + per] if v is not None]
        out.append(max(present) if present else None)
    return out


def heat_rows(j: JobAnalysis, metric: str, cells: int | None = None) -> tuple[list[str], list[list[Any]], int]:
    """(step names, rows of [rank, strip, min, max], steps per cell) for a rank x step heat strip of ``metric``
    (µs); with more steps than ``cells``, each cell holds a run of consecutive steps and shows the longest."""
    rs = j.rank_steps
    if rs.height == 0 or metric not in rs.columns:
        return [], [], 1
    steps = rs.select("step", "name").unique("step").sort("step")
    wide = rs.pivot(on="step", index="rank", values=metric, aggregate_function="first").sort("rank")
    cols = [str(s) for s in steps["step"].to_list() if str(s) in wide.columns]
    per = max(1, -(-len(cols) // cells)) if cells else 1
    top = as_float(rs[metric].max())
    rows = []
    for r in wide.iter_rows(named=True):
        vals = [r[c] for c in cols]
        present = [v for v in vals if v is not None]
        rows.append([str(r["rank"]), _strip(_buckets(vals, per), top), us(min(present)) if present else "-",
                     us(max(present)) if present else "-"])
    return steps["name"].to_list(), rows, per


layout("table", "job", ("ranks", "rank_steps", "stragglers", "collectives", "critical_path", "findings"))
layout("json", "job", ("schema_version", "world_size", "ranks", "rank_steps", "stragglers", "findings", "findings_by_kind",
                       "critical_path", "collectives", "collective_instances", "queues", "failures", "notes"))
layout("csv", "job", ("ranks",))
layout("xlsx", "job", ("ranks", "rank_steps", "stragglers", "findings", "findings_by_kind", "critical_path", "collectives",
                       "collective_instances", "collective_waits", "queues"))


@view("table", "job.ranks")
def _console_ranks(s: Section, out: Console) -> None:
    j, w = s.result, s.options.width
    out.print(term(j.title, "bold"), overflow="fold")
    for f in j.failures:
        out.print(Text(f"failed: {f.path}: {f.problem}", style="red"), overflow="fold")
    for note in j.notes:
        out.print(Text(note, style="yellow"), overflow="fold")
    out.print()
    rows = [[str(r["rank"]), count(r["steps"]), us(r["kernel_time_us"]), us(r["compute_us"]), us(r["comm_us"]),
             us(r["exposed_comm_us"]), pct(r["overlap_pct"]), us(r["idle_us"]), us(r["host_wait_us"]),
             us(r["launch_delay_p50_us"]), count(r["max_queue"])] for r in s.df.iter_rows(named=True)]
    cols = [Col("rank", True), Col("steps", True), Col("kernel time", True), Col("compute", True), Col("comm", True),
            Col("exposed comm", True), Col("overlap", True), Col("idle", True), Col("host wait", True),
            Col("launch p50", True), Col("max queue", True)]
    out.print(fit_table("Per rank (all GPU activity; overlap = comm hidden under compute)", cols, rows, w))
    out.print()


@view("table", "job.rank_steps")
def _console_heat(s: Section, out: Console) -> None:
    for metric, title in (("wall_us", "Step time"), ("exposed_comm_us", "Exposed communication")):
        # the strip gets the width the rank, min and max columns leave (a cell a run of steps when they are more)
        _, full, _ = heat_rows(s.result, metric, None)
        if not full:
            continue
        side = sum(max(len(h), *(len(r[i]) for r in full)) for i, h in ((0, "rank"), (2, "min"), (3, "max")))
        names, hrows, per = heat_rows(s.result, metric, max(8, s.options.width - side - 3 * GAP))
        runs = f"; {per:,} steps a cell, the longest" if per > 1 else ""
        out.print(fit_table(f"{title} by step, {names[0]} … {names[-1]} (darker = longer{runs})",
                            [Col("rank", True), Col("steps", min_width=len(hrows[0][1])), Col("min", True),
                             Col("max", True)], hrows, s.options.width))
        out.print()


@view("table", "job.stragglers")
def _console_stragglers(s: Section, out: Console) -> None:
    if s.df.height:
        d = s.shown  # (a row per step: a long job's, the first --top)
        rows = [[r["step"], str(r["rank"]), us(r["wait_us"]), us(r["max_wait_us"]), f"{r['last_in']}/{r['collectives']}"]
                for r in d.iter_rows(named=True)]
        out.print(fit_table("Stragglers: the rank the others waited for most, per step", [
            Col("step", min_width=14), Col("rank", True), Col("wait caused / other rank", True), Col("longest wait", True),
            Col("last to arrive", True)], rows, s.options.width, more=s.df.height - d.height))
        out.print()


def _gb_s(v: float | None) -> str:
    """A bandwidth in GB/s: one decimal, two significant digits below 0.1 (a few bytes' all-gather read 0.0)."""
    if v is None:
        return "-"
    return f"{v:,.1f}" if v >= 0.1 or v == 0 else f"{v:.2g}"


@view("table", "job.collectives")
def _console_collectives(s: Section, out: Console) -> None:
    c, top = s.df, s.top
    if c.height:
        d = c.head(top) if top is not None else c
        rows = [[r["pg"], r["type"], count(r["instances"]), size(r["bytes"]),
                 us(r["transfer_us"]),
                 us(r["skew_mean_us"]), us(r["skew_max_us"]), _gb_s(r["busbw_gb_s"]),
                 r["algo"] or "-", "-" if r["most_often_last"] is None else str(r["most_often_last"])]
                for r in d.iter_rows(named=True)]
        out.print(fit_table("Collectives across ranks", [
            Col("group", enum=True), Col("type", enum=True), Col("instances", True), Col("data", True),
            Col("transfer", True), Col("skew mean", True), Col("skew max", True), Col("busbw GB/s", True),
            Col("algo", True), Col("last arriver", True)], rows, s.options.width, more=c.height - d.height))


@view("table", "job.critical_path")
def _console_critical_path(s: Section, out: Console) -> None:
    cp, top = s.df, s.top
    if cp.height and "length_us" in cp.columns:
        d = cp.head(top) if top is not None else cp
        rows = [[str(r["rank"]), str(r["step"]), us(r["length_us"]), us(r["cpu_us"]), us(r["gpu_us"]),
                 us(r.get("carryover_us")), us(r["last_arriver_wait_us"])] for r in d.iter_rows(named=True)]
        out.print()
        out.print(fit_table("Critical path per rank and step (carryover: earlier steps' GPU work; last arriver: waiting "
                            "for the slowest rank)",
                            [Col("rank", True), Col("step", True), Col("length", True), Col("cpu", True),
                             Col("gpu", True), Col("carryover", True, optional=True), Col("last arriver", True)], rows,
                            s.options.width, more=cp.height - d.height))


@view("table", "job.findings")
def _console_findings(s: Section, out: Console) -> None:
    render_findings(s.result.findings_by_kind, out, top=5 if s.top is not None else None)


for _t in ("ranks", "rank_steps", "stragglers", "critical_path", "collectives", "queues"):
    view("json", f"job.{_t}")(whole)


@view("json", "job.findings")
def _json_findings(s: Section) -> JsonRows | list[dict[str, Any]]:
    return findings_json(s.df)



@view("csv", "job.ranks")
def _csv_ranks(s: Section) -> str:
    return csv_text(s.df)  # every rank
