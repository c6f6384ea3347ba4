"""Views of the memory timeline (``kernscope memory``): terminal tables, JSON, CSV, sheets and the chart. Formatting only."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from rich.console import Console
from rich.text import Text

from ..analyze.memory import MemoryTimeline
from ..scalars import as_int
from .formats.json import whole
from .html import b64
from .names import term
from .terminal import Col, count, fit_table, size, us
from .views import Section, layout, view


def _device(r: dict) -> str:
    """A memory row's device as PyTorch names it: ``cuda:1``; the CPU allocator's (device -1) plain ``cpu``."""
    d = r["device"]
    return str(r["device_type"]) if d is None or d < 0 else f"{r['device_type']}:{d}"


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.3f} ms"


layout("table", "memory", ("trace", "devices", "steps", "ops"))
layout("json", "memory", ("schema_version", "trace", "devices", "steps", "ops", "events", "notes"))
layout("csv", "memory", ("ops",))


@view("table", "memory.trace")
def _console_head(s: Section, out: Console) -> None:
    out.print(term(s.facts["trace"], "bold"), overflow="fold")
    for n in s.result.notes:
        out.print(Text(n, style="yellow"), overflow="fold")
    out.print()


@view("table", "memory.devices")
def _console_devices(s: Section, out: Console) -> None:
    rows = [[_device(r), size(r["peak_allocated"]), size(r["peak_reserved"]), _ms(r["peak_at_ns"]),
             "-" if r["peak_step"] is None else str(r["peak_step"]), r["peak_op"] or "-", size(r["allocated_at_end"]),
             count(r["events"])] for r in s.df.iter_rows(named=True)]
    out.print(fit_table("Memory per device (peak = the largest Total Allocated; at = since the trace's start)",
                        [Col("device", enum=True), Col("peak allocated", True), Col("peak reserved", True),
                         Col("at", True), Col("step", True), Col("op at peak", weight=2), Col("allocated at end", True),
                         Col("events", True, optional=True)], rows, s.options.width))
    out.print()


@view("table", "memory.steps")
def _console_steps(s: Section, out: Console) -> None:
    if s.df.height:
        # (the first ``top`` rows, as every long table: a 3,300-step profile's were all printed, 1 s of rendering)
        d = s.shown
        rows = [[_device(r), str(r["step"]), size(r["allocated_at_start"]), size(r["allocated_at_end"]),
                 size(r["growth"]), size(r["peak_allocated"]), size(r["peak_reserved"])] for r in d.iter_rows(named=True)]
        out.print(fit_table("Per step (growth = held at the step's end minus at its start)",
                            [Col("device", enum=True), Col("step", True), Col("at start", True), Col("at end", True),
                             Col("growth", True), Col("peak allocated", True), Col("peak reserved", True)], rows,
                            s.options.width, more=s.df.height - d.height))
        out.print()


@view("table", "memory.ops")
def _console_ops(s: Section, out: Console) -> None:
    d = s.shown
    rows = [[r["op"] or "(outside any op)", _device(r), count(r["allocations"]), size(r["allocated_bytes"]),
             us(r["mean_lifetime_us"]), count(r["held_blocks"]),
             size(r["held_bytes"]), count(r["frees"])] for r in d.iter_rows(named=True)]
    out.print(fit_table("Allocations by CPU op (lifetime: to the free of the same block; held: not freed in the trace)",
                        [Col("op", weight=2, min_width=12), Col("device", enum=True), Col("allocs", True), Col("bytes", True),
                         Col("mean lifetime", True), Col("held", True), Col("held bytes", True),
                         Col("frees", True, optional=True)], rows, s.options.width, more=s.df.height - d.height))


view("json", "memory.devices")(whole)
view("json", "memory.steps")(whole)




#: points per device in the HTML chart; more events are bucketed (max per bucket: the peak stays visible)
CHART_POINTS = 4000
#: a device whose peak is below this many bytes gets its line of words but no chart (the CPU allocator of a GPU
#: training step peaks at a few bytes: a chart of 8 B said nothing)
CHART_MIN_BYTES = 2**20


def chart_data(m: MemoryTimeline, t0: int) -> list[dict[str, Any]]:
    """Per device: allocated and reserved bytes over time (ns since ``t0``) for the report's memory chart, and its
    peak (bytes, time, op, step); ``chart`` False (and no series) for a device that peaked under
    :data:`CHART_MIN_BYTES`."""
    out = []
    for r in m.devices.iter_rows(named=True):  # one per device
        peak = {"bytes": r["peak_allocated"], "at_ns": r["peak_at_ns"], "op": r["peak_op"], "step": r["peak_step"]}
        if (r["peak_allocated"] or 0) < CHART_MIN_BYTES:
            out.append({"label": _device(r), "chart": False, "peak": peak})
            continue
        ev = m.events.filter((pl.col("device_type") == r["device_type"]) & (pl.col("device") == r["device"])).sort("ts", "idx")
        ev = ev.select((pl.col("ts") - t0).alias("t"), "allocated", "reserved")
        if ev.height > 2 * CHART_POINTS:
            span = max(as_int(ev["t"].max()) - as_int(ev["t"].min()), 1)
            ev = (ev.with_columns(((pl.col("t") - pl.col("t").min()) * CHART_POINTS // span).alias("_b"))
                  .group_by("_b").agg(pl.col("t").min(), pl.col("allocated").max(), pl.col("reserved").max()).sort("_b"))
        out.append({"label": _device(r), "chart": True,
                    "t": b64(ev["t"].to_numpy().astype(np.float64)),
                    "allocated": b64(ev["allocated"].fill_null(0).to_numpy().astype(np.float64)),
                    "reserved": b64(ev["reserved"].fill_null(0).to_numpy().astype(np.float64)),
                    "peak": peak})
    return out
