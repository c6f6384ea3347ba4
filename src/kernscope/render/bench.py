"""Views of a bench run (:class:`~kernscope.bench.results.BenchRun`: TritonBench's wide table, the GPU state per
cell, the analyzed traces; JSON; CSV) and of a comparison of two runs. Formatting only."""

from __future__ import annotations

import math
import os
from typing import Any

from rich.console import Console
from rich.text import Text

from ..bench.results import BenchRun, Cell
from .formats.json import raw_rows
from .terminal import Col, fit_table
from .views import Section, layout, view


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
                by_input.setdefault(c.input_id, {})[key] = _cell_text(c, m, run.output_dir)
    rows = []
    for i in sorted(xs):
        x = xs[i]
        rows.append(["(" + ", ".join(map(str, x)) + ")" if len(x) != 1 else str(x[0])] + [by_input[i].get(k, "-") for k in cols[1:]])
    return cols, rows


def _cell_text(c: Cell, m: str, output_dir: str = "") -> str:
    v = c.metrics.get(m)
    if m == "kineto_trace" and isinstance(v, str) and output_dir:
        rel = os.path.relpath(os.path.abspath(v), output_dir)
        return v if rel.startswith("..") else rel  # relative to --output-dir (said above the table)
    txt = _fmt(m, v)
    if m == "latency" and c.timing is not None and not math.isnan(c.timing.ci_low_ms) and c.timing.median_ms:
        half = (c.timing.ci_high_ms - c.timing.ci_low_ms) / 2 / c.timing.median_ms * 100
        txt += f" ±{half:.2f}%"
        if c.machine is not None and c.machine.moved:
            txt += " ⚠"
    if m == "speedup" and isinstance(v, float) and "speedup_ci" in c.metrics:
        lo, hi = c.metrics["speedup_ci"]
        txt = f"≈{v:.2f}" if c.metrics.get("speedup_noise") else f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
    return txt


def machine_table(run: BenchRun) -> tuple[list[str], list[list[str]]]:
    """Clocks, power and temperature of every cell while it was timed (⚠: clocks moved)."""
    cols = ["input", "impl", "SM MHz", "SM median", "mem MHz", "power W", "temp °C", "throttle", "clocks",
            "ms @ max SM clk"]
    rows = []
    for c in run.cells:
        mc = c.machine
        if mc is None or mc.readings == 0:
            continue

        def rng(a: float | None, b: float | None) -> str:
            if a is None or b is None:
                return "-"
            return f"{a:.0f}" if a == b else f"{a:.0f}–{b:.0f}"

        t = c.timing
        med = "-" if t is None or math.isnan(t.sm_mhz_median) else f"{t.sm_mhz_median:.0f}"
        norm = "-" if t is None or math.isnan(t.at_ref_clock_ms) else f"{t.at_ref_clock_ms:.4f} @{t.ref_sm_mhz:.0f}"
        rows.append([str(c.input_id), c.impl, rng(mc.sm_min_mhz, mc.sm_max_mhz), med, rng(mc.mem_min_mhz, mc.mem_max_mhz),
                     "-" if mc.power_max_w is None else f"{mc.power_max_w:.0f}",
                     "-" if mc.temp_max_c is None else f"{mc.temp_max_c:.0f}", ",".join(mc.reasons) or "-",
                     "⚠ moved" if mc.moved else "steady", norm])
    return cols, rows


def clocks_line(run: BenchRun) -> str:
    c = run.env.get("clocks") or {}
    if c.get("locked"):
        state = f"locked at {c.get('mhz')} MHz"
    elif c.get("requested"):
        state = f"not locked (could not: {c.get('message') or 'no permission'})"
    else:
        state = "not locked"
    return f"clocks: {state}; GPU state from {c.get('monitor', 'none')}"


layout("table", "bench_run", ("results", "machine", "traces"))
layout("json", "bench_run", ("op", "x_label", "mode", "dtype", "device", "output_dir", "impls", "metrics", "skipped", "env",
                             "results"))
layout("csv", "bench_run", ("results",))
layout("table", "bench_compare", ("cells",))
layout("json", "bench_compare", ("op", "a", "b", "notes", "only_a", "only_b", "cells"))
layout("csv", "bench_compare", ("cells",))


@view("table", "bench_run.results")
def _console_results(s: Section, out: Console) -> None:
    """TritonBench's table: a row per input, a column per impl and metric (± = 95% CI of the median); one table per
    implementation, stacked, where the wide one would leave metrics out."""
    run: BenchRun = s.result
    w = s.options.width
    out.print(Text(f"{run.op} · {run.mode} · {run.dtype} · {run.env.get('gpu') or run.device} · {clocks_line(run)}"),
              overflow="fold")
    cols, rows = wide_table(run)
    units = {"latency": "ms", "tflops": "TFLOP/s", "gbps": "GB/s", "gpu_peak_mem": "MiB", "speedup": "x"}
    heads = [cols[0]] + [f"{h} ({units[h.rsplit('-', 1)[1]]})" if h.rsplit("-", 1)[1] in units else h for h in cols[1:]]
    if "kineto_trace" in run.metrics and run.output_dir:
        out.print(Text(f"Kineto traces under {run.output_dir}"), overflow="fold")
    title = "Results (latency: median ± 95% CI half-width; speedup [95% CI], ≈ within noise; ⚠ clocks moved)"
    wide = fit_table(title, [Col(heads[0], enum=True)] + [Col(h, numeric=True) for h in heads[1:]], rows, w)
    if not wide.caption or len(run.impls) < 2:
        out.print(wide)
    else:  # the wide table would leave metrics out: one table per implementation, stacked, every number whole
        n = len(run.metrics)
        for k, impl_name in enumerate(run.impls):
            part = slice(1 + k * n, 1 + (k + 1) * n)
            sub_heads = [heads[0]] + [h.split("-", 1)[1] if h.startswith(impl_name + "-") else h for h in heads[part]]
            out.print(fit_table(f"{impl_name} · " + (title if k == 0 else "results"),
                                [Col(sub_heads[0], enum=True)] + [Col(h, numeric=True) for h in sub_heads[1:]],
                                [[r[0], *r[part]] for r in rows], w))


@view("table", "bench_run.machine")
def _console_machine(s: Section, out: Console) -> None:
    mcols, mrows = machine_table(s.result)
    if mrows:
        out.print()
        text_cols = {"impl", "throttle"}
        out.print(fit_table("GPU state while each cell was timed (ms @ max SM clk: the median scaled to the card's "
                            "maximum SM clock, for compute-bound kernels)",
                            [Col(h, min_width=8) if h in text_cols else Col(h, True) for h in mcols], mrows, s.options.width))


@view("table", "bench_run.traces")
def _console_traces(s: Section, out: Console) -> None:
    tcols, trows = trace_table(s.result)
    if trows:
        out.print()
        out.print(fit_table("Kineto traces analyzed by kernscope (kernels of the profiled step, by launch)",
                            [Col(tcols[0], True), Col(tcols[1], min_width=8), Col(tcols[2], min_width=8),
                             Col(tcols[3], weight=2), Col(tcols[4], weight=4)] + [Col(h, True) for h in tcols[5:]],
                            trows, s.options.width))


@view("json", "bench_run.results")
def _json_results(s: Section) -> list[dict[str, Any]]:
    return list(s.result.to_dict()["results"])


@view("csv", "bench_run.results")
def _csv_results(s: Section) -> str:
    return s.df.write_csv()


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


@view("table", "bench_compare.cells")
def _console_compare(s: Section, out: Console) -> None:
    """The run comparison (:class:`kernscope.bench.compare.Comparison`): one row per cell, then the notes."""
    cmp = s.result
    out.print(Text(f"{cmp.title} (ratio = median B / median A; < 1: B faster)"), overflow="fold")

    def ratio(r: dict[str, Any]) -> str:
        ci = f" [{r['ratio_low']:.3f}, {r['ratio_high']:.3f}]" if r["ratio_low"] is not None else ""
        return f"{r['ratio']:.3f}{ci}"

    rows = [[r["impl"], r["input"], f"{r['median_a_ms']:.4f}", f"{r['median_b_ms']:.4f}", ratio(r),
             r["verdict"] + (" ⚠" if r["clock_moved"] else ""), r["test"],
             "-" if r["p_value"] is None else f"{r['p_value']:.2g}",
             "-" if r["cliffs_delta"] is None else f"{r['cliffs_delta']:+.2f} {r['effect']}"]
            for r in s.df.iter_rows(named=True)]
    # (an impl's name is what a row is: shortened only past 24 characters, the optional columns left out first: at
    # 8 characters 80 columns read 'torc…max' and 'naiv…max' beside the test's name; the medians go before the ratio
    # and the verdict, which 60 columns left out)
    cols = [Col("impl", min_width=min(24, max([len(r[0]) for r in rows] + [4]))), Col("input", enum=True),
            Col("A ms", True, optional=True), Col("B ms", True, optional=True),
            Col("B/A [95% CI]", True), Col("verdict", enum=True), Col("test", enum=True, optional=True),
            Col("p", True, optional=True), Col("Cliff's delta", enum=True, optional=True)]
    out.print(fit_table("Cells in both runs (⚠: the median SM clock differs by > 2%)", cols, rows, s.options.width))
    if cmp.only_a or cmp.only_b:
        out.print(Text(f"{cmp.only_a} cell(s) only in A, {cmp.only_b} only in B (not compared)"), overflow="fold")
    for n in cmp.notes:
        out.print(Text(f"note: {n}"), overflow="fold")



view("json", "bench_compare.cells")(raw_rows)
