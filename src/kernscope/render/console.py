"""Terminal views of one trace's :class:`~kernscope.analyze.summary.Analysis`. Formats; computes nothing."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.text import Text

from ..analyze.critical_path import SEGMENTS, CriticalPath
from ..analyze.summary import Analysis
from .names import NO_SOURCE, sources_title, term
from .shortnames import compact
from .terminal import Col, count, fit_table, pct, us
from .views import Section, layout, view


def _limited(df: pl.DataFrame, top: int | None) -> tuple[pl.DataFrame, int]:
    if top is None or df.height <= top:
        return df, 0
    return df.head(top), df.height - top


layout("table", "analysis", ("trace", "steps", "timeline", "categories", "libraries", "kernels", "ops", "sources",
                            "launcher_categories",
                            "benchmark", "annotations", "unlinked", "critical_path", "findings"))


@view("table", "analysis.trace")
def _head(s: Section, out: Console) -> None:
    a: Analysis = s.result
    f = a.facts
    dev = ", ".join(f.device_names) or "-"
    rank = "-" if f.rank is None else f"{f.rank}/{f.world_size}" if f.world_size is not None else str(f.rank)
    out.print(term(f.path, "bold"), overflow="fold")
    line = (f"{f.events:,} events · {f.gpu_events:,} GPU events ({f.kernels:,} kernels, {us(f.kernel_time_us)}) · "
            f"devices {f.devices or '-'} ({dev}) · rank {rank} · platform {f.platform} · "
            f"{f.steps} steps ({f.step_source}) · {f.graph_launches} graph launches")
    out.print(term(line), overflow="fold")
    if f.salvaged_events is not None:
        out.print(Text(f"salvaged {f.salvaged_events:,} events", style="yellow"))
    if a.step is not None:
        out.print(Text(f"showing step {a.step} (GPU work launched in that step)", style="bold"))
    out.print()


@view("table", "analysis.steps")
def _steps(s: Section, out: Console) -> None:
    if s.df.height:
        d, more = _limited(s.df, s.top)
        rows = [[r["name"], r["kind"] or "", r["phase"] or "", us(r["cpu_duration_us"]), count(r["kernel_count"]),
                 us(r["kernel_time_us"]), us(r["gpu_time_us"])] for r in d.iter_rows(named=True)]
        cols = [Col("step", weight=2), Col("kind", enum=True), Col("phase", enum=True), Col("window", True),
                Col("kernels", True), Col("kernel time", True), Col("GPU time", True)]
        for j in (2, 1):  # drop the kind / phase columns when the steps have none
            if not any(r[j] for r in rows):
                cols.pop(j)
                rows = [r[:j] + r[j + 1:] for r in rows]
        gpus = len(s.result.facts.devices or [])
        summed = f"; kernel and GPU time summed over {gpus} GPUs" if gpus > 1 else ""
        out.print(fit_table(f"Steps ({s.result.facts.step_source}{summed})", cols, rows, s.options.width, more=more))
        out.print()


#: the by-device table's columns: (timeline type, header, optional)
_DEVICE_COLUMNS = (("busy_time", "busy", False), ("other_work_time", "other work", False), ("idle_time", "idle", False),
                   ("computation_time", "computation", False),
                   ("exposed_comm_time", "exposed comm", False), ("exposed_memcpy_time", "exposed memcpy", False),
                   ("total_comm_time", "total comm", True), ("total_memcpy_time", "total memcpy", True))


@view("table", "analysis.timeline")
def _timeline(s: Section, out: Console) -> None:
    by_dev = s.tables["timeline_by_device"]
    if by_dev["device"].n_unique() > 1:
        _device_timeline(s, by_dev, out)
        return
    tl = {r["type"]: r for r in s.df.iter_rows(named=True)}
    if tl and tl["total_time"]["time_us"] > 0:
        # (other steps' work in the span: only where a part of the work is shown, `--step N`)
        rows = [[k.replace("_", " "), us(v["time_us"]), pct(v["percent"])] for k, v in tl.items()
                if k != "other_work_time" or v["time_us"]]
        out.print(fit_table("GPU timeline", [Col(""), Col("time", True), Col("% of span", True)], rows, s.options.width))
        out.print()


def _device_timeline(s: Section, by_dev: pl.DataFrame, out: Console) -> None:
    """Several devices: a row per device (each over the GPU span of them all) and their sum."""
    cells = {(r["device"], r["type"]): r for r in by_dev.iter_rows(named=True)}
    overall = {r["type"]: r for r in s.df.iter_rows(named=True)}
    devices = list(dict.fromkeys(by_dev["device"].to_list()))
    span = cells[devices[0], "total_time"]["time_us"]

    shown = [c for c in _DEVICE_COLUMNS if c[0] != "other_work_time" or overall["other_work_time"]["time_us"]]

    def row(label: str, get: dict[str, dict[str, float]]) -> list[str]:
        busy = get["busy_time"]
        return [label, us(busy["time_us"]), pct(busy["percent"]), *(us(get[t]["time_us"]) for t, _, _ in shown[1:])]

    rows = [row("-" if d is None else str(d), {t: cells[d, t] for t, _, _ in _DEVICE_COLUMNS}) for d in devices]
    rows.append(row(f"all {len(devices)}", overall))
    cols = [Col("device", enum=True), Col("busy", True), Col("% busy", True),
            *(Col(h, True, optional=o) for _, h, o in shown[1:])]
    out.print(fit_table(f"GPU timeline by device (each over the span of all GPU work: {us(span)})", cols,
                        rows, s.options.width))
    out.print()


@view("table", "analysis.categories")
def _categories(s: Section, out: Console) -> None:
    if s.df.height:
        d, more = _limited(s.df, s.top)
        rows = [[r["category"], count(r["count"]), us(r["total_us"]), pct(r["pct"])] for r in d.iter_rows(named=True)]
        out.print(fit_table("GPU time by category", [Col("category", enum=True), Col("count", True), Col("total", True),
                                                     Col("%", True)], rows, s.options.width, more=more))
        out.print()


@view("table", "analysis.libraries")
def _libraries(s: Section, out: Console) -> None:
    if s.df.height:
        d, more = _limited(s.df, s.top)
        rows = [[r["library"], count(r["kernels"]), count(r["count"]), us(r["total_us"]), pct(r["pct"])]
                for r in d.iter_rows(named=True)]
        out.print(fit_table("GPU time by library (who wrote the kernel)",
                            [Col("library", enum=True), Col("kernels", True), Col("count", True), Col("total", True),
                             Col("%", True)], rows, s.options.width, more=more))
        out.print()


@view("table", "analysis.kernels")
def _kernels(s: Section, out: Console) -> None:
    k = s.df
    if k.height:
        d, more = _limited(k, s.top)
        rows = [[r["name"], r["launcher"], r["category"], r.get("decided_by") or "name", count(r["count"]),
                 us(r["total_us"]), us(r["mean_us"]), pct(r["pct"])] for r in d.iter_rows(named=True)]
        cols = [Col("kernel", weight=5, min_width=14, kernel=True), Col("launcher", weight=2, min_width=10),
                Col("category", enum=True), Col("by", enum=True, optional=True),
                Col("count", True), Col("total", True), Col("mean", True, optional=True), Col("%", True)]
        out.print(fit_table(f"Kernels by name and launching op ({k.height:,})", cols, rows, s.options.width, more=more))
        out.print()


@view("table", "analysis.ops")
def _ops(s: Section, out: Console) -> None:
    if s.df.height:
        d, more = _limited(s.df, s.top)
        rows = [[r["launcher"], count(r["count"]), us(r["total_us"]), pct(r["pct"])] for r in d.iter_rows(named=True)]
        counts = s.result.facts.event_counts
        # (a trace recorded with the CUDA activity alone has runtime calls and no CPU op: they are the launchers)
        title = ("GPU time by launching runtime call (no CPU op in the trace: recorded without the CPU activity)"
                 if not counts.get("cpu_op") and counts.get("runtime") else "GPU time by launching CPU op")
        out.print(fit_table(title, [Col("launcher"), Col("GPU events", True),
                                                             Col("total", True), Col("%", True)], rows, s.options.width,
                            more=more))
        out.print()


@view("table", "analysis.sources")
def _sources(s: Section, out: Console) -> None:
    if s.df.height:
        d, more = _limited(s.df, s.top)
        rows = [[r["source"] if r["source"] is not None else NO_SOURCE, r["function"] or "", r["top_kernel"] or "",
                 count(r["count"]), us(r["total_us"]), pct(r["pct"])] for r in d.iter_rows(named=True)]
        cols = [Col("source line", weight=3, min_width=16, tail=True), Col("function", weight=2, min_width=8, tail=True),
                Col("top kernel", weight=2, min_width=10, kernel=True, optional=True), Col("count", True),
                Col("total", True), Col("%", True)]
        out.print(fit_table(sources_title(s.result.trace.metadata.get("framework")), cols, rows, s.options.width, more=more))
        out.print()


@view("table", "analysis.launcher_categories")
def _graph_launches(s: Section, out: Console) -> None:
    graph = s.df.filter(pl.col("launcher").cast(pl.String).str.contains("(?i)graphlaunch"))
    if graph.height:
        d, more = _limited(graph, s.top)
        rows = [[r["launcher"], r["category"], count(r["count"]), us(r["total_us"]), pct(r["pct_of_launcher"])]
                for r in d.iter_rows(named=True)]
        out.print(fit_table("Graph launches by category", [Col("launcher"), Col("category", enum=True), Col("count", True),
                                                           Col("total", True), Col("% of launcher", True)],
                            rows, s.options.width, more=more))
        out.print()


@view("table", "analysis.benchmark")
def _benchmark(s: Section, out: Console) -> None:
    b = s.result.benchmark
    if b:
        rows = [["flush", k.name, k.category, us(k.dur_us)] for k in b.flush_kernels]
        rows += [["compute", k.name, k.category, us(k.dur_us)] for k in b.compute_kernels]
        out.print(fit_table(f"Benchmark step {b.step}: compute kernel time {us(b.kernel_time_us)}",
                            [Col("", min_width=7), Col("kernel", weight=4, kernel=True), Col("category", enum=True),
                             Col("time", True)], rows, s.options.width))
        out.print()


@view("table", "analysis.annotations")
def _annotations(s: Section, out: Console) -> None:
    if "annotations" in s.tables:
        d, more = _limited(s.df, s.top)
        rows = [["  " * int(r["depth"]) + str(r["name"]), count(r["instances"]), count(r["kernel_count"]),
                 us(r["kernel_time_us"]), us(r["busy_us"]), pct(r["pct_of_gpu"])] for r in d.iter_rows(named=True)]
        out.print(fit_table("GPU time by annotation (nested ranges indented; times include nested ranges)",
                            [Col("annotation", weight=3), Col("instances", True), Col("kernels", True),
                             Col("kernel time", True), Col("GPU busy", True), Col("% of GPU", True)], rows,
                            s.options.width, more=more))
        out.print()


#: unlinked counts that are parts of another, said beside it: (the part's key, its words)
_PARTS = {"launches_without_gpu": ("launches_in_graph_capture", "in a graph capture"),
          "gpu_outside_steps": ("gpu_in_earlier_step_runs", "launched in an earlier run of a step's annotation, which the "
                                                            "step is not")}
_PARTS_OF = {p for p, _ in _PARTS.values()}


@view("table", "analysis.unlinked")
def _unlinked(s: Section, out: Console) -> None:
    nonzero = {k: v for k, v in s.value.items() if v and k not in _PARTS_OF}
    words = []
    for k, v in nonzero.items():
        part = _PARTS.get(k)
        n = s.value.get(part[0], 0) if part else 0
        words.append(f"{k.replace('_', ' ')} {v:,}" + (f" ({n:,} of them {part[1]})" if part and n else ""))
    out.print(term("Unlinked: " + (", ".join(words) if words else "none")), overflow="fold")


@view("table", "analysis.critical_path")
def _critical_path(s: Section, out: Console) -> None:
    cp = s.result.critical_path
    if cp is not None and cp.steps.height:
        render_critical_path(cp, out, s.options.width, s.top)


@view("table", "analysis.findings")
def _findings(s: Section, out: Console) -> None:
    render_findings(s.result.findings_by_kind, out, top=5 if s.top is not None else None)


def render_critical_path(cp: CriticalPath, console: Console, width: int, top: int | None) -> None:
    """Per step: the path's length and what it is made of; then the largest first-order what-ifs."""
    console.print()
    d, more = _limited(cp.steps, top)
    rows = [[str(r["step"]), us(r["length_us"]), *(us(r[f"{s}_us"]) for s in SEGMENTS)] for r in d.iter_rows(named=True)]
    cols = [Col("step", True), Col("length", True), Col("cpu", True), Col("launch", True), Col("gpu", True),
            Col("queue", True, optional=True), Col("stream wait", True, optional=True), Col("sync return", True, optional=True),
            Col("carryover", True, optional=True)]
    console.print(fit_table("Critical path by step (what its end waited for; length: to next step's start)", cols,
                            rows, width, more=more))
    for note in cp.notes:
        console.print(term(note, "dim"), overflow="fold")
    if cp.whatif.height:
        best = cp.whatif.sort("saves_us", "step", "change", descending=[True, False, False]).head(
            5 if top is not None else cp.whatif.height)
        console.print(term("What-ifs on the critical path (first order, while it stays critical):", "bold"), overflow="fold")
        for r in best.iter_rows(named=True):
            console.print(term(f"  step {r['step']}: {r['change']} → −{us(r['saves_us'])}"), overflow="fold")


def render_findings(kinds: pl.DataFrame, console: Console, top: int | None = 5) -> None:
    """The ranked findings by kind (:func:`kernscope.analyze.findings.by_kind`), one numbered paragraph each: the
    worst instance's time to win back, rule and words, then how often the kind recurs over steps and what it adds up to."""
    console.print()
    if kinds.height == 0:
        console.print(term("Findings: none above the thresholds (kernscope/analyze/findings.toml; --findings FILE)"),
                      overflow="fold")
        return
    shown = kinds.head(top) if top is not None else kinds
    n = int(kinds["occurrences"].sum())
    counted = (f"{n:,}" if n == kinds.height else f"{n:,} in {kinds.height:,} kind{'' if kinds.height == 1 else 's'}")
    console.print(term(f"Findings, by time to win back ({counted}"
                       + (f"; top {shown.height}, all in --format json" if shown.height < kinds.height else "") + ")",
                       "bold"), overflow="fold")
    for i, r in enumerate(shown.iter_rows(named=True), 1):
        again = (f" · in {r['occurrences']:,} steps: {us(r['total_us'])} in all, median {us(r['median_us'])}"
                 if r["occurrences"] > 1 else "")
        text = r["text"]
        if r.get("kernel"):  # a demangled C++ name runs to hundreds of characters: the kernels table's compact form
            text = text.replace(r["kernel"], compact(r["kernel"]))
        console.print(term(f"{i}. up to {us(r['worst_us'])} · {r['title']} [{r['rule']}]: {text}{again}"),
                      overflow="fold")
