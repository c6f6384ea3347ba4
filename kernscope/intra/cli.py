"""``kernscope intra``: statistics, HTML timeline and exports for intra-kernel profiles."""

from __future__ import annotations

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

    from ..files import write_text
    from ..render.intra import render_stats, stats_document
    from . import stats as st
    from .export import assign_lanes
    from .io import load_tasks

    loaded = load_tasks(path, task_names.split(",") if task_names else None)
    t = loaded.tasks
    per_task = st.task_stats(t)
    summary = st.kernel_summary(t)
    if loaded.decoded is not None:
        d = loaded.decoded
        summary.update(records=d.records, dropped=d.dropped, ring_overwritten=d.ring_overwritten, unpaired=d.unpaired,
                       capacity_per_region=d.capacity_per_region)
    if html_out:
        from ..render.intra_html import render_html

        write_text(html_out, render_html(t, assign_lanes(t).units, summary, per_task, st.sm_stats(t), title=path))
    if fmt == "json":
        click.echo(stats_document(summary, per_task, st.sm_stats(t)))
    else:
        render_stats(Console(), path, summary, per_task)


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
