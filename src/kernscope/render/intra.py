"""Intra-kernel statistics: terminal tables and the JSON document. Formatting only."""

from __future__ import annotations

from typing import Any

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .terminal import Col, fit_table


def clock_line(summary: dict[str, Any]) -> str:
    """What the times are and which SM clock (if any) converts them, from ``time_unit``/``clock_*``."""
    if summary.get("time_unit") == "cycles":
        return ("times are SM cycles (kcycles = 1,000 cycles): no SM clock is known to make them time "
                "(--clock-ghz G converts them)")
    if summary.get("clock_ghz"):
        return f"SM clock {summary['clock_ghz']:.3f} GHz ({summary.get('clock_source')}): cycles = ns x clock"
    return "times in ns; no SM clock known, so no cycle columns (--clock-ghz G gives them)"


def render_stats(con: Console, title: str, summary: dict[str, Any], per_task: pl.DataFrame) -> None:
    """Per-task table (µs, or kcycles for a table in cycles) and the kernel-level line (span, tail, SM balance,
    drops)."""
    u = "kcycles" if summary.get("time_unit") == "cycles" else "µs"
    con.print(Text(f"{title}: {summary.get('tasks', 0):,} tasks, {summary.get('blocks', 0):,} blocks on "
                   f"{summary.get('sms', 0)} SMs", style="italic", overflow="fold"))  # a path: folded, never cut
    cols = [Col("task", enum=True), Col("count", numeric=True),
            *(Col(f"{k} {u}", numeric=True) for k in ("mean", "p50", "p95", "max", "total"))]
    rows = [[str(r["task"]), f"{r['count']:,}", *(f"{r[k] / 1000:,.3f}" for k in ("mean_ns", "p50_ns", "p95_ns", "max_ns", "total_ns"))]
            for r in per_task.iter_rows(named=True)]
    con.print(fit_table("", cols, rows, con.width))
    if summary.get("launches"):
        # (kernscope's own export of one kernel names no kernel: no column of dashes then)
        named = any(r["kernel"] for r in summary["launches"])
        lcols = [Col("kernel")] * named + [Col(c, numeric=True) for c in ("launch", "blocks", "tasks", f"span {u}", "tail",
                                                                          "SM busy", "SM imbalance")]
        lrows = [[str(r["kernel"] or "-")] * named + [
            str(r["launch"]), f"{r['blocks']:,}", f"{r['tasks']:,}", f"{r['span_ns'] / 1000:,.3f}", f"x{r['tail_ratio']:.2f}",
            f"{r['sm_busy_fraction_mean']:.1%}", f"x{r['sm_imbalance']:.2f}"] for r in summary["launches"]]
        con.print(fit_table(f"{len(summary['launches'])} kernel launches in this trace", lcols, lrows, con.width))
    elif summary.get("tasks"):
        con.print(
            f"span {summary['span_ns'] / 1000:,.3f} {u} · last block end {summary['last_block_end_ns'] / 1000:,.3f} {u} vs "
            f"median {summary['median_block_end_ns'] / 1000:,.3f} {u} (tail x{summary['tail_ratio']:.2f}) · SM busy mean "
            f"{summary['sm_busy_fraction_mean']:.1%} · SM imbalance max/mean x{summary['sm_imbalance']:.2f}"
        )
    if summary.get("group_overlap"):
        render_overlap(con, summary["group_overlap"], u)
    if "time_unit" in summary:
        con.print(clock_line(summary))
    if summary.get("warps_without_records"):
        con.print(f"[yellow]sampled warps with no records: {summary['warps_without_records']} (does the kernel have "
                  f"that many warps?)[/yellow]")
    if summary.get("staged_ring_slots"):
        con.print(f"records staged on chip ({summary.get('staged_in') or 'registers'}, a ring of "
                  f"{summary['staged_ring_slots']:,} per program) and written at finalize()")
    if summary.get("finalize_ctas"):
        con.print(f"finalize per CTA (writing its records out): mean {summary['finalize_mean_ns']:,.0f} ns, "
                  f"max {summary['finalize_max_ns']:,} ns over {summary['finalize_ctas']:,} CTAs")
    if summary.get("ring_overwritten"):
        con.print(f"[yellow]{summary['ring_overwritten']:,} earlier records overwritten: the ring keeps the newest "
                  f"per program[/yellow]")
    if summary.get("dropped") or summary.get("unpaired"):
        con.print(f"[yellow]dropped {summary.get('dropped', 0):,} records, {summary.get('unpaired', 0):,} unpaired[/yellow]")


def render_overlap(con: Console, rows: list[dict[str, Any]], u: str) -> None:
    """Warp groups: for each pair of tasks of two groups, the time both ran at once, summed over CTAs, as a share
    of each task's time, and that share's spread over CTAs (``intra.stats.group_overlap``)."""
    cols = [Col("group·task A", enum=True), Col("group·task B", enum=True), Col(f"A {u}", numeric=True),
            Col(f"B {u}", numeric=True), Col(f"both {u}", numeric=True), Col("% of A", numeric=True),
            Col("% of B", numeric=True), Col("per CTA % of A min/p50/max", numeric=True)]

    def pct(v: Any) -> str:
        return "-" if v is None else f"{v:.1f}"

    body = [[f"{r['group_a']}·{r['task_a']}", f"{r['group_b']}·{r['task_b']}", f"{r['a_ns'] / 1000:,.3f}",
             f"{r['b_ns'] / 1000:,.3f}", f"{r['overlap_ns'] / 1000:,.3f}", pct(r["pct_of_a"]), pct(r["pct_of_b"]),
             f"{pct(r['cta_pct_of_a_min'])}/{pct(r['cta_pct_of_a_p50'])}/{pct(r['cta_pct_of_a_max'])}"] for r in rows]
    con.print(fit_table(f"warp groups: time two groups' tasks run at once (over {rows[0]['blocks']:,} CTAs)", cols, body,
                        con.width))


def render_tree(con: Console, title: str, tree: pl.DataFrame, column: str, metric: str,
                count_column: str = "count") -> None:
    """The scope tree, indented by depth, with ``metric`` (from ``column``) and its share of the top node(s)
    (the shallowest ones with a value),
    plus the executions in ``count_column`` (like proton-viewer)."""
    valued = tree.filter(pl.col(column).is_not_null()) if column in tree.columns else tree.clear()
    # the top: the shallowest nodes with a value (Proton's files leave ROOT and the kernel's frame empty)
    tops = valued.filter(pl.col("depth") == pl.col("depth").min())
    total = float(tops[column].sum() or 0.0) if tops.height else 0.0
    con.print(Text(title, style="italic", overflow="fold"))  # a path above the table, never wrapped mid-name by it
    t = Table(show_edge=False)
    t.add_column("scope")
    t.add_column(metric, justify="right")
    t.add_column("% of top", justify="right")
    with_count = count_column in tree.columns and column != count_column
    if with_count:
        t.add_column(count_column, justify="right")
    for r in tree.iter_rows(named=True):  # in the tree's order (depth first)
        v = r.get(column)
        shown = "-" if v is None else (f"{v / 1000:,.3f}" if metric == "time/us" else f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.2f}")
        pct = "-" if not total or v is None else f"{100 * v / total:.1f}%"
        cells = ["  " * int(r["depth"]) + str(r["name"]), shown, pct]
        if with_count:
            cells.append("-" if r.get(count_column) is None else f"{r[count_column]:,.0f}")
        t.add_row(*cells)
    con.print(t)


def render_alignment(con: Console, path: str, al: Any) -> None:
    """One alignment (:class:`~kernscope.intra.align.Alignment`): per launch, its kernel and gaps, and the fit."""
    con.print(Text(f"{path}: {al.matched} of {al.launches.height} profiled launches of {al.kernel} placed under their "
                   f"kernels", style="italic", overflow="fold"))
    cols = [Col("launch", numeric=True), Col("kernel at µs", numeric=True), Col("start gap ns", numeric=True),
            Col("end gap ns", numeric=True), Col("fit residual ns", numeric=True), Col("records", numeric=True),
            Col("blocks", numeric=True), Col("grid", numeric=True), Col("outside", numeric=True)]

    def n(v: Any) -> str:
        return "-" if v is None else f"{v:,}"

    rows = [[str(r["launch"]), "-" if r["kernel_at_ns"] is None else f"{r['kernel_at_ns'] / 1000:,.3f}", n(r["start_gap_ns"]),
             n(r["end_gap_ns"]), n(r["fit_residual_ns"]), n(r["records"]), n(r["blocks"]),
             "-" if r["grid_check"] is None else r["grid_check"] if r["grid_blocks"] is None
             else f"{r['grid_blocks']:,} ({r['grid_check']})", n(r["outside"])]
            for r in al.launches.iter_rows(named=True)]
    con.print(fit_table("", cols, rows, con.width))
    res = al.launches["fit_residual_ns"].drop_nulls().abs()
    con.print(f"offset {al.offset_ns:,} ns (host clock minus GPU timer), drift {al.drift_ppm:.1f} ppm; "
              f"largest fit residual {int(res.max() or 0):,} ns; "
              f"{int(al.launches['outside'].drop_nulls().sum()):,} records outside their kernel")
    for note in al.notes:
        con.print(f"[yellow]{note}[/yellow]")
