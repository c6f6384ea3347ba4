"""Folders of benchmark traces, one per (input, impl): the benchmark view of every one, compared per input.

Layouts (found by :func:`discover`):

- kernscope bench: ``<op>/<impl>/input_<id>.json[.gz]`` (``kernscope bench --metrics kineto_trace``);
- TritonBench: ``kineto_traces/<impl>_<i>/*.pt.trace.json[.gz]`` (``run.py --metrics kineto_trace``; one
  ``tensorboard_trace_handler`` file per folder).

Each cell gets its profiled step, flush and compute kernels and compute-kernel time (the benchmark view),
and the perf model's work for the problem: FLOPs and bytes of the modeled ops of the step. Every impl of
an input solves the same problem, so a cell whose kernels no model covers (a Triton kernel) is rated
with the FLOPs found for another impl of that input, as TritonBench rates every impl with one formula.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from ..errors import KernscopeError
from ..model import Trace
from .bench_trace import FLUSH_OPS, BenchmarkView, analyze_benchmark, benchmark_step
from .categories import Categorizer
from .perf import perf_model

_KS = re.compile(r"^input_(\d{1,9})\.json(\.gz)?$")
#: input ids of up to 9 digits: longer numbers are no input ids (a folder named so is not a cell)
_TB_DIR = re.compile(r"^(.+?)_(\d{1,9})$")
_TB_FILE = re.compile(r"\.pt\.trace\.json(\.gz)?$")


@dataclass(frozen=True)
class CellPath:
    input: int
    impl: str
    path: Path
    op: str | None
    layout: str  #: "kernscope" or "tritonbench"


@dataclass(frozen=True)
class BenchDir:
    """Results of :func:`analyze_bench_dir`. ``cells`` (one row per trace, µs):

    ``op, input, impl, path, layout, step, flush_kernels, compute_kernels, kernel_time_us, gpu_span_us, flops,
    bytes, flops_from, tflops_per_s, tb_per_s, bound, pct_of_peak, fastest, vs_fastest`` (``vs_fastest``: kernel
    time / the input's fastest; ``flush_kernels``/``compute_kernels``: kernel names).
    """

    root: str
    layout: str
    cells: pl.DataFrame
    views: dict[str, BenchmarkView] = field(default_factory=dict)  #: path -> the cell's benchmark view
    notes: tuple[str, ...] = ()

    kind: ClassVar[str] = "bench_dir"

    @property
    def title(self) -> str:
        return self.root

    def facts_dict(self) -> dict[str, Any]:
        """``root`` (the folder) and ``layout`` (``kernscope`` or ``tritonbench``)."""
        return {"root": self.root, "layout": self.layout}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``cells``: one row per trace (µs)."""
        return {"cells": self.cells}


def discover(root: str | os.PathLike[str]) -> list[CellPath]:
    """The (input, impl) traces under ``root`` in either layout, sorted by op, input, impl."""
    base = Path(root)
    if not base.is_dir():
        raise KernscopeError(f"{root}: not a directory (--bench with a directory analyzes a folder of benchmark traces)")
    cells: list[CellPath] = []
    for p in base.rglob("input_*.json*"):
        m = _KS.match(p.name)
        if m and p.is_file():
            rel = p.relative_to(base).parts
            op = rel[-3] if len(rel) >= 3 else (base.name if len(rel) == 2 else None)
            cells.append(CellPath(int(m.group(1)), p.parent.name, p, op, "kernscope"))
    for d in sorted(x for x in base.rglob("*") if x.is_dir()):
        m = _TB_DIR.match(d.name)
        if not m:
            continue
        files = sorted((f for f in d.iterdir() if f.is_file() and _TB_FILE.search(f.name)), key=lambda f: f.stat().st_mtime)
        if not files:
            continue
        parent = d.parent
        op = parent.parent.name if parent.name == "kineto_traces" else None
        cells.append(CellPath(int(m.group(2)), m.group(1), files[-1], op, "tritonbench"))
    cells.sort(key=lambda c: (c.op or "", c.input, c.impl))
    if not cells:
        raise KernscopeError(f"{root}: no benchmark traces found (expected <op>/<impl>/input_<id>.json.gz from kernscope "
                             "bench, or kineto_traces/<impl>_<i>/*.pt.trace.json from TritonBench; ids of up to 9 digits)")
    return cells


def is_bench_dir(root: str | os.PathLike[str], traces: list[str]) -> bool:
    """Whether the folder ``root``, whose trace files are ``traces``, holds benchmark traces only: every one of them
    lies in a cell's folder of either layout (:func:`discover`; TritonBench keeps earlier runs' traces beside the newest
    one, which is the cell's)."""
    try:
        cells = discover(root)
    except KernscopeError:
        return False
    folders = {os.path.realpath(c.path.parent) for c in cells}
    return all(os.path.realpath(os.path.dirname(t)) in folders for t in traces)


def _work(trace: Trace, step: int | None) -> dict[str, Any]:
    """FLOPs and bytes of the step's modeled ops (the flush excluded), the bound and peak of the main op."""
    pm = perf_model(trace, step=step)
    ops = pm.ops.filter(~pl.col("nested") & ~pl.col("name").is_in(list(FLUSH_OPS)))
    if ops.height == 0:
        return {}
    main = ops.sort("kernel_time_us", descending=True).row(0, named=True)
    flops = float((ops["flops"] * ops["count"]).sum() or 0.0)
    moved = float((ops["bytes"].fill_null(0) * ops["count"]).sum() or 0.0)
    return {"flops": flops or None, "bytes": moved or None, "bound": main["bound"], "peak_tflops": main["peak_tflops"],
            "peak_tb_per_s": main["peak_tb_per_s"]}


def analyze_bench_dir(root: str | os.PathLike[str], load: Callable[[str], Trace],
                      categorizer: Categorizer | None = None) -> BenchDir:
    """Analyze every benchmark trace under ``root`` (``load``: path -> linked trace, e.g. the cached loader)."""
    found = discover(root)
    cat = categorizer or Categorizer.builtin()
    rows: list[dict[str, Any]] = []
    views: dict[str, BenchmarkView] = {}
    notes: list[str] = []
    for c in found:
        t = load(str(c.path))
        step = benchmark_step(t)
        v = analyze_benchmark(t, cat, step=step)
        views[str(c.path)] = v
        if v.note:
            notes.append(f"{c.path}: {v.note}")
        w = _work(t, step) if step is not None else {}
        rows.append({
            "op": c.op, "input": c.input, "impl": c.impl, "path": str(c.path), "layout": c.layout, "step": v.step,
            "flush_kernels": [k.name for k in v.flush_kernels], "compute_kernels": [k.name for k in v.compute_kernels],
            "kernel_time_us": v.kernel_time_us, "gpu_span_us": v.gpu_span_us, **w,
        })
    df = pl.DataFrame(rows, schema={
        "op": pl.String, "input": pl.Int64, "impl": pl.String, "path": pl.String, "layout": pl.String, "step": pl.String,
        "flush_kernels": pl.List(pl.String), "compute_kernels": pl.List(pl.String), "kernel_time_us": pl.Float64,
        "gpu_span_us": pl.Float64, "flops": pl.Float64, "bytes": pl.Float64, "bound": pl.String,
        "peak_tflops": pl.Float64, "peak_tb_per_s": pl.Float64})
    # the problem's work per input: from a cell with a model (the first impl in name order)
    key = ["op", "input"]
    ref = (df.filter(pl.col("flops").is_not_null()).sort("impl").group_by(key, maintain_order=True)
           .agg(pl.col("impl").first().alias("_from"), pl.col("flops").first().alias("_f"), pl.col("bytes").first().alias("_b"),
                pl.col("bound").first().alias("_bound"), pl.col("peak_tflops").first().alias("_pt"),
                pl.col("peak_tb_per_s").first().alias("_pb")))
    df = df.join(ref, on=key, how="left", nulls_equal=True, maintain_order="left")
    secs = pl.col("kernel_time_us") * 1e-6
    df = df.with_columns(
        pl.when(pl.col("flops").is_not_null()).then(pl.col("impl")).otherwise(pl.col("_from")).alias("flops_from"),
        pl.coalesce("flops", "_f").alias("flops"), pl.coalesce("bytes", "_b").alias("bytes"),
        pl.coalesce("bound", "_bound").alias("bound"), pl.coalesce("peak_tflops", "_pt").alias("peak_tflops"),
        pl.coalesce("peak_tb_per_s", "_pb").alias("peak_tb_per_s"),
    ).with_columns(
        pl.when(secs > 0).then(pl.col("flops") / secs / 1e12).alias("tflops_per_s"),
        pl.when(secs > 0).then(pl.col("bytes") / secs / 1e12).alias("tb_per_s"),
    ).with_columns(
        pl.when(pl.col("bound") == "compute").then(100.0 * pl.col("tflops_per_s") / pl.col("peak_tflops"))
        .when(pl.col("bound") == "memory").then(100.0 * pl.col("tb_per_s") / pl.col("peak_tb_per_s"))
        .alias("pct_of_peak"),
    )
    fastest = pl.col("kernel_time_us").filter(pl.col("kernel_time_us") > 0).min().over(key)
    df = df.with_columns((pl.col("kernel_time_us") == fastest).fill_null(False).alias("fastest"),
                         (pl.col("kernel_time_us") / fastest).alias("vs_fastest"))
    layouts = sorted(set(df["layout"].to_list()))
    cells = df.select("op", "input", "impl", "path", "layout", "step", "flush_kernels", "compute_kernels", "kernel_time_us",
                      "gpu_span_us", "flops", "bytes", "flops_from", "tflops_per_s", "tb_per_s", "bound", "pct_of_peak",
                      "fastest", "vs_fastest")
    if cells["flops"].null_count() == cells.height:
        notes.append("no cell has op shapes the perf model can use: TFLOP/s and % of peak are empty (record with "
                     "record_shapes=True)")
    return BenchDir(str(root), "+".join(layouts), cells, views, tuple(notes))
