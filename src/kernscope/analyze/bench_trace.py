"""The benchmark-trace view: one profiled iteration, its L2 flush, its compute kernels.

Benchmark traces (kernscope's harness, TritonBench ``--metrics kineto_trace``) record warm-up
iterations and one profiled ``ProfilerStep#N``. Kernels are attributed to that step by *launch*
correlation (warm-up kernels still queued on the GPU overlap the step in time). The L2 flush is
recognized structurally: the GPU work launched at the start of the step by a fill/zero op (or
inside a ``kernscope::l2_flush`` annotation), before the first launch of anything else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import polars as pl

from ..model import Trace
from ..scalars import as_int
from .categories import Categorizer
from .kernels import gpu_table

#: CPU ops whose GPU work at the start of a step is an L2-cache flush.
FLUSH_OPS = ("aten::zero_", "aten::fill_", "aten::zeros", "aten::ones", "aten::full", "aten::random_", "aten::normal_")
FLUSH_ANNOTATION = "kernscope::l2_flush"


@dataclass(frozen=True)
class BenchKernel:
    """One GPU kernel (or CPU op, for CPU benchmarks) of the profiled step. Times in µs."""

    name: str
    dur_us: float
    category: str
    library: str
    launcher: str
    kind: str
    ts_ns: int | None = None  #: start on the trace's clock (ns)


@dataclass(frozen=True)
class BenchmarkView:
    """The benchmark view of a trace: profiled step, its flush and its compute kernels. Times in µs.

    Attributes:
        step: the profiled step's name (e.g. "ProfilerStep#5"), None if there is none.
        device: "gpu" or "cpu".
        kernel_time_us: summed compute-kernel time.
        gpu_span_us: first compute start to last compute end.
        cpu_step_us: the step's CPU window.
        warmup_kernels_in_window: kernels of earlier iterations that ran during the step.
    """

    step: str | None
    device: str = "gpu"
    flush_kernels: list[BenchKernel] = field(default_factory=list)
    compute_kernels: list[BenchKernel] = field(default_factory=list)
    kernel_time_us: float = 0.0
    gpu_span_us: float = 0.0
    cpu_step_us: float = 0.0
    warmup_kernels_in_window: int = 0
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["note"] is None:
            del d["note"]
        return d


def _flush_launch_ids(trace: Trace, step_start: int, step_end: int) -> set[int]:
    """Launch rows inside a ``kernscope::l2_flush`` annotation of the step window."""
    ann = trace.events.filter(
        (pl.col("name").cast(pl.String) == FLUSH_ANNOTATION) & (pl.col("ts") >= step_start) & (pl.col("ts") < step_end)
    )
    if ann.height == 0:
        return set()
    ids: set[int] = set()
    rt = trace.events.filter(pl.col("kind").is_in(["runtime", "driver"]))
    for s, e, pid, tid in ann.select("ts", "end", "pid", "tid").iter_rows():
        ids.update(rt.filter((pl.col("ts") >= s) & (pl.col("ts") <= e) & (pl.col("pid") == pid) & (pl.col("tid") == tid))["idx"].to_list())
    return ids


def benchmark_step(trace: Trace) -> int | None:
    """The profiled step: the last ``ProfilerStep#N`` that launched GPU work (any step for CPU-only traces)."""
    if trace.gpu.height == 0:
        return as_int(trace.steps["step"].max()) if trace.steps.height else None
    launched = trace.gpu.filter(pl.col("step").is_not_null())["step"].unique()
    s = trace.steps.filter(pl.col("step").is_in(launched.implode()))
    return as_int(s["step"].max()) if s.height else None


def _cpu_view(trace: Trace, row: dict[str, Any]) -> tuple[list[BenchKernel], list[BenchKernel]]:
    """CPU-device benchmarks: the step's top-level ops; those under the flush annotation are the flush."""
    tree = trace.call_tree
    ev = trace.events.join(tree, on="idx", how="left")
    step_idx = ev.filter((pl.col("name").cast(pl.String) == row["name"]) & (pl.col("ts") == row["start"]))["idx"]
    if step_idx.len() == 0:
        return [], []
    children = ev.filter(pl.col("parent_idx") == step_idx[0]).sort("ts")
    flush: list[BenchKernel] = []
    compute: list[BenchKernel] = []
    for r in children.iter_rows(named=True):
        name = str(r["name"])
        if name == FLUSH_ANNOTATION:
            inner = ev.filter(pl.col("parent_idx") == r["idx"])
            for q in (inner.iter_rows(named=True) if inner.height else [r]):
                flush.append(BenchKernel(str(q["name"]), q["dur"] / 1000.0, "Memory", "ATen", FLUSH_ANNOTATION, "cpu_op"))
        elif r["kind"] in ("cpu_op", "user_annotation"):
            compute.append(BenchKernel(name, r["dur"] / 1000.0, "CPU op", "ATen", name, "cpu_op"))
    return flush, compute


def _split_flush(trace: Trace, g: pl.DataFrame, step_row: dict[str, Any]) -> tuple[pl.DataFrame, pl.DataFrame]:
    g = g.sort(["launch_ts", "ts"])
    annotated = _flush_launch_ids(trace, step_row["start"], step_row["end"])
    launch_idx = trace.gpu.select("correlation", "launch_idx").unique("correlation")
    g = g.join(launch_idx, on="correlation", how="left", maintain_order="left")
    if annotated:  # kernscope's harness marks the flush: trust the annotation alone
        is_flush_op = pl.col("launch_idx").is_in(list(annotated))
    else:  # e.g. TritonBench: the fill/zero of the cache buffer launched first in the step
        is_flush_op = pl.col("op_name").is_in(list(FLUSH_OPS))
    g = g.with_columns(is_flush_op.fill_null(False).alias("_flushy"))
    # flush = the leading run of flush-op launches (before the first launch of anything else)
    first_other = g.filter(~pl.col("_flushy"))["launch_ts"].min()
    if first_other is None:
        flush = g.filter(pl.col("_flushy") & pl.col("launch_idx").is_in(list(annotated))) if annotated else g.head(0)
    else:
        flush = g.filter(pl.col("_flushy") & (pl.col("launch_ts") < first_other))
    compute = g.join(flush.select("correlation", "ts"), on=["correlation", "ts"], how="anti")
    return flush.drop("_flushy", "launch_idx"), compute.drop("_flushy", "launch_idx")


def looks_like_benchmark(trace: Trace) -> bool:
    """A small trace whose profiled step starts with a flush-op launch followed by other work."""
    if trace.steps.height == 0 or trace.gpu.height > 20000:
        return False
    annotated = trace.events.filter(pl.col("name").cast(pl.String) == FLUSH_ANNOTATION).height > 0
    if trace.gpu.height == 0:
        return annotated
    step = benchmark_step(trace)
    if step is None:
        return False
    g = trace.gpu.filter(pl.col("step") == step).sort("launch_ts")
    if g.height < 2:
        return False
    first = g.row(0, named=True)
    return annotated or first["op_name"] in FLUSH_OPS


def analyze_benchmark(trace: Trace, categorizer: Categorizer | None = None, step: int | None = None,
                      table: pl.DataFrame | None = None) -> BenchmarkView:
    """The ``benchmark`` object of ``kernscope analyze --bench --format json`` (see :class:`BenchmarkView`).
    ``table``: the trace's categorized GPU table (:func:`~kernscope.analyze.kernels.gpu_table` with ``categorizer``)
    when the caller has built it already."""
    cat = categorizer or Categorizer.builtin()
    s = step if step is not None else benchmark_step(trace)
    if s is None:
        return BenchmarkView(step=None, note="no profiled step with GPU work")
    row = trace.steps.filter(pl.col("step") == s).row(0, named=True)
    if trace.gpu.height == 0:
        flush_c, compute_c = _cpu_view(trace, row)
        return BenchmarkView(
            step=row["name"], device="cpu", flush_kernels=flush_c, compute_kernels=compute_c,
            kernel_time_us=float(sum(k.dur_us for k in compute_c)), cpu_step_us=(row["end"] - row["start"]) / 1000.0,
        )
    allg = table if table is not None else gpu_table(trace, cat)
    g = allg.filter(pl.col("step") == s)
    flush, compute = _split_flush(trace, g, row)
    overlap = allg.filter(
        (pl.col("step") != s).fill_null(True) & (pl.col("end") > row["start"]) & (pl.col("ts") < row["end"])
    ).height

    def rows(d: pl.DataFrame) -> list[BenchKernel]:
        return [
            BenchKernel(str(r["name"]), r["dur"] / 1000.0, str(r["category"]), str(r["library"]), str(r["launcher"]),
                        str(r["kind"]), int(r["ts"]))
            for r in d.sort("ts").iter_rows(named=True)
        ]

    span = (int(compute["end"].max()) - int(compute["ts"].min())) / 1000.0 if compute.height else 0.0  # type: ignore[arg-type]
    return BenchmarkView(
        step=row["name"],
        device="gpu",
        flush_kernels=rows(flush),
        compute_kernels=rows(compute),
        kernel_time_us=float(int(compute["dur"].sum() or 0) / 1000.0),
        gpu_span_us=float(span),
        cpu_step_us=(row["end"] - row["start"]) / 1000.0,
        warmup_kernels_in_window=int(overlap),
    )
