"""Terminal renderer (rich). Formats an :class:`Analysis`; computes nothing."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table

from ..analyze.summary import Analysis


def _short(s: Any, n: int = 70) -> str:
    s = "" if s is None else str(s)
    return s if len(s) <= n else s[: n - 1] + "…"


def _us(v: float | None) -> str:
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:,.3f} s"
    if v >= 1e3:
        return f"{v / 1e3:,.3f} ms"
    return f"{v:,.2f} µs"


def _table(title: str, cols: list[str], rows: list[list[str]], right: set[int] | None = None) -> Table:
    t = Table(title=title, title_justify="left", header_style="bold", show_edge=False, pad_edge=False)
    for i, c in enumerate(cols):
        num = bool(right and i in right)
        t.add_column(c, justify="right" if num else "left", overflow="ellipsis", no_wrap=True,
                     min_width=8 if not num else None, ratio=None if num else 1)
    for r in rows:
        t.add_row(*r)
    return t


def render(a: Analysis, console: Console, top: int = 15) -> None:
    f = a.facts
    dev = ", ".join(f.device_names) or "-"
    rank = f"{f.rank}/{f.world_size}" if f.rank is not None else "-"
    console.print(f"[bold]{f.path}[/bold]")
    console.print(
        f"  {f.events:,} events · {f.gpu_events:,} GPU events ({f.kernels:,} kernels, "
        f"{_us(f.kernel_time_us)}) · devices {f.devices or '-'} ({dev}) · rank {rank} · "
        f"platform {f.platform} · {f.steps} steps · {f.graph_launches} graph launches"
        + (f" · [yellow]salvaged {f.salvaged_events:,} events from a truncated file[/yellow]" if f.salvaged_events is not None else "")
    )
    if a.step is not None:
        console.print(f"  [bold]showing ProfilerStep#{a.step}[/bold] (GPU work launched in that step)")
    console.print()
    if a.steps.height:
        rows = [
            [r["name"], _us(r["cpu_duration_us"]), str(r["kernel_count"]), _us(r["kernel_time_us"]), _us(r["gpu_time_us"])]
            for r in a.steps.iter_rows(named=True)
        ]
        console.print(_table("Steps", ["step", "CPU time", "kernels", "kernel time", "GPU time"], rows, {1, 2, 3, 4}))
        console.print()
    tl = {r["type"]: r for r in a.timeline.iter_rows(named=True)}
    if tl and tl["total_time"]["time_us"] > 0:
        rows = [[k.replace("_", " "), _us(v["time_us"]), f"{v['percent']:.1f}%"] for k, v in tl.items()]
        console.print(_table("GPU timeline", ["", "time", "% of span"], rows, {1, 2}))
        console.print()
    if a.categories.height:
        rows = [
            [r["category"], str(r["count"]), _us(r["total_us"]), f"{r['pct']:.1f}%"]
            for r in a.categories.head(top).iter_rows(named=True)
        ]
        console.print(_table("GPU time by category", ["category", "count", "total", "%"], rows, {1, 2, 3}))
        console.print()
    if a.kernels.height:
        rows = [
            [_short(r["name"]), _short(r["launcher"], 28), r["category"], str(r["count"]), _us(r["total_us"]),
             _us(r["mean_us"]), f"{r['pct']:.1f}%"]
            for r in a.kernels.head(top).iter_rows(named=True)
        ]
        console.print(
            _table(f"Top {min(top, a.kernels.height)} of {a.kernels.height} kernels (by name and launching op)",
                   ["kernel", "launcher", "category", "count", "total", "mean", "%"], rows, {3, 4, 5, 6})
        )
        console.print()
    if a.ops.height:
        rows = [[_short(r["launcher"], 60), str(r["count"]), _us(r["total_us"]), f"{r['pct']:.1f}%"]
                for r in a.ops.head(top).iter_rows(named=True)]
        console.print(_table("GPU time by launching CPU op", ["launcher", "GPU events", "total", "%"], rows, {1, 2, 3}))
        console.print()
    graph = a.launcher_categories.filter(pl.col("launcher").cast(pl.String).str.contains("(?i)graphlaunch"))
    if graph.height:
        rows = [[r["launcher"], r["category"], str(r["count"]), _us(r["total_us"]), f"{r['pct_of_launcher']:.1f}%"]
                for r in graph.iter_rows(named=True)]
        console.print(_table("Graph launches by category", ["launcher", "category", "count", "total", "% of launcher"], rows,
                             {2, 3, 4}))
        console.print()
    if a.benchmark:
        b = a.benchmark
        console.print(f"[bold]Benchmark step[/bold] {b.step}: compute kernel time {_us(b.kernel_time_us)}")
        for k in b.flush_kernels:
            console.print(f"  flush    {_short(k.name)}  {_us(k.dur_us)}")
        for k in b.compute_kernels:
            console.print(f"  compute  {_short(k.name)}  {_us(k.dur_us)}  [{k.category}]")
        console.print()
    nonzero = {k: v for k, v in a.unlinked.items() if v}
    console.print("Unlinked: " + (", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in nonzero.items()) if nonzero else "none"))
