"""Hardware counters of each kernel, from a PyTorch trace recorded in CUPTI's range-profiling mode
(``kernscope counters``).

Input: a linked trace recorded with ``torch.profiler.profile(..., experimental_config=
torch.profiler._ExperimentalConfig(profiler_metrics=[...], profiler_measure_per_kernel=True))``. Kineto writes each
kernel as a ``cuda_profiler_range`` event named after it, with the counters' values as its args
(``dram__bytes_read.sum``, ``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``, ...). CUPTI replays every kernel,
serialized, once per pass of counters: the trace then has no kernel activity, and the ranges' times are not the
kernels' (Kineto spaces them evenly over the window). Their order and their values are what such a trace records.
Output: a :class:`KernelCounters` of DataFrames.

- **Which launch.** The i-th range is the i-th kernel launch of the process, in launch order (range profiling
  serializes the kernels). Where the counts agree and one process launched them, each range gets its launch and the
  CPU op that made it (the innermost op around the launch, up the call tree); else the ranges stand alone, and a note
  says why.
- **Derived.** FLOPs per precision from the SASS thread-instruction counters, as Nsight Compute's roofline counts them
  (``add + mul + 2 × fma``, double, single and half precision: the ``smsp__sass_thread_inst_executed_op_{d,f,h}
  {add,mul,fma}_pred_on.sum`` counters, the set HTA's counter analysis asks for); DRAM bytes (``dram__bytes_read.sum
  + dram__bytes_write.sum``); FLOPs per DRAM byte. No rates: the ranges' times are not the kernels'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..load.opargs import read_counter_args
from ..model import Trace
from .sources import call_parents, marks, picks, up_to

#: the events of CUPTI's range profiler, one per kernel with ``profiler_measure_per_kernel``
RANGE_CAT = "cuda_profiler_range"
#: runtime and driver calls that launch one kernel (not a graph, a copy or a set): what a range is matched to
KERNEL_LAUNCH = r"(?i)launchkernel|launchcooperativekernel|modulelaunchkernel|extlaunchkernel"
#: the SASS thread-instruction counter of an operation (``dadd``, ``ffma``, ``hmul``, ...)
SASS_OP = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
#: precision -> its add, mul and fma operations
PRECISIONS = {"fp64": ("dadd", "dmul", "dfma"), "fp32": ("fadd", "fmul", "ffma"), "fp16": ("hadd", "hmul", "hfma")}
DRAM = ("dram__bytes_read.sum", "dram__bytes_write.sum")


@dataclass(frozen=True)
class KernelCounters:
    """Result of :func:`kernel_counters`.

    Attributes:
        trace: the trace's path.
        ranges: one row per profiled kernel, in launch order: ``seq`` (0-based), ``name``, ``op`` (the launching CPU
            op, innermost; null where not matched), ``top_op`` (the outermost CPU op around the launch),
            ``launch_idx``, the derived columns (``flops_fp64``, ``flops_fp32``, ``flops_fp16``, ``flops``,
            ``dram_bytes``, ``flops_per_byte``: those the counters allow), then every counter as recorded (its name
            is the column's).
        kernels: per (``name``, ``op``): ``count``, then the derived columns and counters summed (``flops_per_byte`` of
            the sums); by FLOPs, else DRAM bytes, else count.
        metrics: per counter: ``metric``, ``total``, ``kernels`` (ranges where it is nonzero).
        linked: whether the ranges were matched to their launches.
    """

    trace: str
    ranges: pl.DataFrame
    kernels: pl.DataFrame
    metrics: pl.DataFrame
    linked: bool
    notes: tuple[str, ...] = field(default_factory=tuple)

    kind: ClassVar[str] = "counters"

    @property
    def title(self) -> str:
        return self.trace

    @property
    def derived(self) -> list[str]:
        """The derived columns present, in order."""
        return [c for c in DERIVED if c in self.ranges.columns]

    def facts_dict(self) -> dict[str, Any]:
        """``trace``, ``kernels_profiled`` (ranges), ``linked``, ``derived`` (the derived columns present)."""
        return {"trace": self.trace, "kernels_profiled": self.ranges.height, "linked": self.linked,
                "derived": self.derived}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``kernels``, ``metrics``, ``ranges``."""
        return {"kernels": self.kernels, "metrics": self.metrics, "ranges": self.ranges}


#: the derived columns, in order
DERIVED = ("flops_fp64", "flops_fp32", "flops_fp16", "flops", "dram_bytes", "flops_per_byte")
#: :meth:`KernelCounters.tables` by name, with the columns every trace's have (the derived ones and the counters
#: are those recorded): what a trace without counters gives (``kernscope sql``'s ``counters.*``, empty)
COUNTER_TABLES = {
    "kernels": {"name": pl.String, "op": pl.String, "count": pl.Int64},
    "metrics": {"metric": pl.String, "total": pl.Float64, "kernels": pl.Int64},
    "ranges": {"seq": pl.Int64, "name": pl.String, "op": pl.String, "top_op": pl.String, "launch_idx": pl.Int64},
}


def _derived(df: pl.DataFrame, metrics: list[str]) -> pl.DataFrame:
    """``df`` (columns named as the ``metrics``) with the derived columns they allow (module docstring)."""
    out: list[pl.Expr] = []
    precisions = []
    for p, (add, mul, fma) in PRECISIONS.items():
        names = [SASS_OP.format(x) for x in (add, mul, fma)]
        if all(n in metrics for n in names):
            out.append((pl.col(names[0]) + pl.col(names[1]) + 2 * pl.col(names[2])).alias(f"flops_{p}"))
            precisions.append(f"flops_{p}")
    if all(d in metrics for d in DRAM):
        out.append((pl.col(DRAM[0]) + pl.col(DRAM[1])).alias("dram_bytes"))
    df = df.with_columns(out)
    return df.with_columns(pl.sum_horizontal(precisions).alias("flops")) if precisions else df


def _per_byte(df: pl.DataFrame) -> pl.DataFrame:
    if "flops" not in df.columns or "dram_bytes" not in df.columns:
        return df
    return df.with_columns(pl.when(pl.col("dram_bytes") > 0).then(pl.col("flops") / pl.col("dram_bytes"))
                           .alias("flops_per_byte"))


def _launch_ops(trace: Trace, ranges: int) -> tuple[pl.DataFrame | None, str | None]:
    """Each kernel launch's ``launch_idx`` and ``op`` in launch order where there are ``ranges`` of them, made by one
    process; else None and why."""
    ev = trace.events
    launches = (ev.lazy().filter(pl.col("kind").is_in(["runtime", "driver"])
                                 & pl.col("name").cast(pl.String).str.contains(KERNEL_LAUNCH))
                .select("idx", "pid", "ts").sort("ts", "idx").collect())
    if launches.height != ranges:
        return None, (f"the trace has {launches.height:,} kernel launches and {ranges:,} counter ranges, so the ranges "
                      "are not matched to their launches and ops (a launch outside the profiled ranges, or a kernel "
                      "the profiler could not replay)")
    if launches["pid"].n_unique() > 1:
        return None, "kernels were launched by several processes: the ranges' order does not say whose each is"
    ops = ev.lazy().filter(pl.col("kind") == "cpu_op").select("idx", "name").collect()
    parent = call_parents(trace)
    mark = marks(parent.size, ops["idx"])
    start = parent[launches["idx"].to_numpy()]  # (from the launch's parent: a launch is no op)
    found = up_to(mark, parent, start)
    outer = found.copy()  # the outermost op: up from each op found while there is another above it
    at = np.flatnonzero(found >= 0)
    while at.size:
        above = up_to(mark, parent, parent[ops["idx"].to_numpy()[outer[at]]])
        more = above >= 0
        outer[at[more]] = above[more]
        at = at[more]
    name = ops["name"].cast(pl.String)
    return pl.DataFrame({"launch_idx": launches["idx"], "op": name[picks(found)], "top_op": name[picks(outer)]}), None


def kernel_counters(trace: Trace) -> KernelCounters | None:
    """The counters of ``trace``'s profiled kernels (module docstring); None where it has no counter range. The
    counters are read from the file (a second, sparse read: the load keeps no such args)."""
    ranges = (trace.events.lazy().filter(pl.col("cat") == RANGE_CAT)
              .select("idx", pl.col("name").cast(pl.String), "ts").sort("ts", "idx").collect())
    if ranges.height == 0:
        return None
    values = read_counter_args(trace.path, ranges["idx"])
    metrics = sorted({k for v in values.values() for k in v})
    rows = [values.get(i, {}) for i in ranges["idx"].to_list()]  # (one dict a range: a few hundred kernels)
    counters = pl.DataFrame({m: [r.get(m) for r in rows] for m in metrics}, schema=dict.fromkeys(metrics, pl.Float64))
    ops, why = _launch_ops(trace, ranges.height)
    links = ops if ops is not None else pl.DataFrame(
        {c: [None] * ranges.height for c in ("launch_idx", "op", "top_op")},
        schema={"launch_idx": pl.Int64, "op": pl.String, "top_op": pl.String})
    per = pl.concat([ranges.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("seq"), "name"), links, counters],
                    how="horizontal")
    per = _per_byte(_derived(per, metrics))
    order = [c for c in DERIVED if c in per.columns and c != "flops_per_byte"]
    per = per.select("seq", "name", "op", "top_op", "launch_idx", *order, *(("flops_per_byte",) if "flops_per_byte" in per.columns
                                                                  else ()), *metrics)
    summed = [*order, *metrics]
    kernels = (per.group_by("name", "op", maintain_order=True)
               .agg(pl.len().cast(pl.Int64).alias("count"), *(pl.col(c).sum() for c in summed)))
    key = next((c for c in ("flops", "dram_bytes") if c in kernels.columns), "count")
    kernels = _per_byte(kernels).sort([key, "name"], descending=[True, False], nulls_last=True)
    kernels = kernels.select("name", "op", "count", *[c for c in DERIVED if c in kernels.columns], *metrics)
    table = pl.DataFrame({"metric": metrics,
                          "total": [float(per[m].sum() or 0.0) for m in metrics],
                          "kernels": [int((per[m] > 0).sum()) for m in metrics]},
                         schema={"metric": pl.String, "total": pl.Float64, "kernels": pl.Int64})
    notes = [why] if why else []
    notes.append("CUPTI's range profiler replays each kernel, serialized: a range's time is not its kernel's (no rates "
                 "here); record without profiler_metrics for times")
    return KernelCounters(trace.path, per, kernels, table, ops is not None, tuple(notes))
