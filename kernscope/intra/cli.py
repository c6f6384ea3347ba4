"""``kernscope intra``: statistics, HTML timeline and exports for intra-kernel profiles."""

from __future__ import annotations

import json

import click


@click.group()
def intra() -> None:
    """Intra-kernel (Triton) profiles: buffers (.npz), Perfetto or Chrome traces."""


@intra.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--task-names", help="Comma-separated names for task types 0, 1, ... (raw buffers).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--html", "html_out", type=click.Path(dir_okay=False), help="Also write an HTML timeline (rows = SM lanes).")
def stats(path: str, task_names: str | None, fmt: str, html_out: str | None) -> None:
    """Per task count/mean/p50/p95/max, per-SM busy fraction, tail and SM imbalance."""
    from rich.console import Console
    from rich.table import Table

    from ..render.io import write_text
    from . import stats as st
    from .export import assign_lanes
    from .io import load_tasks

    loaded = load_tasks(path, task_names.split(",") if task_names else None)
    t = loaded.tasks
    per_task = st.task_stats(t)
    per_sm = st.sm_stats(t)
    summary = st.kernel_summary(t)
    if loaded.decoded is not None:
        d = loaded.decoded
        summary.update(records=d.records, dropped=d.dropped, ring_overwritten=d.ring_overwritten, unpaired=d.unpaired,
                       capacity_per_region=d.capacity_per_region)
    if html_out:
        from ..render.intra_html import render_html

        write_text(html_out, render_html(t, assign_lanes(t).units, summary))
    if fmt == "json":
        click.echo(json.dumps({"summary": summary, "tasks": per_task.to_dicts(), "sms": per_sm.to_dicts()}, indent=2))
        return
    con = Console()
    tt = Table(title=f"{path}: {summary.get('tasks', 0):,} tasks, {summary.get('blocks', 0):,} blocks on {summary.get('sms', 0)} SMs",
               title_justify="left", show_edge=False)
    for c in ("task", "count", "mean µs", "p50 µs", "p95 µs", "max µs", "total µs"):
        tt.add_column(c, justify="left" if c == "task" else "right")
    for r in per_task.iter_rows(named=True):
        tt.add_row(r["task"], f"{r['count']:,}", *(f"{r[k] / 1000:,.3f}" for k in ("mean_ns", "p50_ns", "p95_ns", "max_ns", "total_ns")))
    con.print(tt)
    if summary.get("tasks"):
        con.print(
            f"span {summary['span_ns'] / 1000:,.3f} µs · last block end {summary['last_block_end_ns'] / 1000:,.3f} µs vs median "
            f"{summary['median_block_end_ns'] / 1000:,.3f} µs (tail x{summary['tail_ratio']:.2f}) · SM busy mean "
            f"{summary['sm_busy_fraction_mean']:.1%} · SM imbalance max/mean x{summary['sm_imbalance']:.2f}"
        )
    if loaded.decoded is not None and (loaded.decoded.dropped or loaded.decoded.unpaired):
        con.print(f"[yellow]dropped {loaded.decoded.dropped:,} records, {loaded.decoded.unpaired:,} unpaired[/yellow]")


@intra.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, help="Output: .perfetto-trace (protobuf) or .json (Chrome).")
@click.option("--task-names", help="Comma-separated names for task types 0, 1, ... (raw buffers).")
def export(path: str, output: str, task_names: str | None) -> None:
    """Convert a buffer dump or trace to Perfetto protobuf or Chrome JSON."""
    from .export import write_chrome, write_perfetto
    from .io import load_tasks

    t = load_tasks(path, task_names.split(",") if task_names else None).tasks
    out = write_chrome(t, output) if output.endswith(".json") else write_perfetto(t, output)
    click.echo(f"wrote {out} ({t.height:,} slices)", err=True)
