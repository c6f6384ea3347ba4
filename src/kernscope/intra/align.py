"""Intra-kernel records on the host trace's timeline: match each profiled launch to its kernel in a Kineto
trace and place its records under that kernel.

Inputs: a linked :class:`~kernscope.model.Trace` (its GPU table, times in ns on the trace's clock, plus
``baseTimeNanoseconds`` when the trace has it) and a task table (``%globaltimer`` ns, the GPU's clock).
CUPTI stamps kernels with the same GPU timer, and Kineto moves those stamps onto its own time base by an
offset (and a drift small enough to fit), so one line ``trace_ns = intra_ns + offset + drift x (intra_ns -
t0)`` maps every record. Steps, all vectorized over launches:

1. **Launches** of the intra file: records of one kernel that overlap in time belong to one launch (a
   launch ends where nothing of that kernel runs any more).
2. **Match**: every (launch, kernel of that name) pair proposes an offset; the offset that puts the most
   launches inside a kernel of that name, in order, wins (then the smallest gaps).
3. **Fit** the line through the matched pairs' (kernel start − first record) values (a constant with fewer than
   3 pairs), then shift it so no launch's first record lies before its kernel's start: the earliest record of a
   launch comes some ns after its kernel starts, never before.
4. **Report** per launch: the kernel, the start gap (kernel start → first record), the end gap (last record
   → kernel end) and the fit residual (how far this launch's offset lies from the line: the alignment's own
   error); records that still fall outside their kernel are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..errors import KernscopeError
from ..model import Trace

#: a record may lie this far outside its kernel and still count as matched while the offset is searched (ns)
MATCH_TOLERANCE_NS = 5_000
#: offsets beyond this between the GPU timer and the host's wall clock suggest files of different runs (ns)
MAX_PLAUSIBLE_OFFSET_NS = 60_000_000_000


@dataclass
class Alignment:
    """Intra-kernel records placed on a host trace's clock (all times ns on the trace's clock, as its tables)."""

    kernel: str  #: the kernel name the records were matched to
    #: one row per intra launch: launch, blocks, records, first_ns/last_ns (trace clock), gpu_idx/kernel_ts/
    #: kernel_end/kernel_at_ns (since the trace's first event)/stream/device of the matched kernel (null when
    #: unmatched), start_gap_ns, end_gap_ns, fit_residual_ns, outside (records not inside the kernel)
    launches: pl.DataFrame
    #: the task table with ``launch``, times moved to the trace's clock, and the matched kernel's
    #: ``gpu_idx``, ``stream`` and ``device``
    tasks: pl.DataFrame
    offset_ns: int  #: trace clock minus intra clock at the first record
    drift_ppm: float  #: how fast the offset changes (parts per million of elapsed time)
    notes: list[str] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return int(self.launches["gpu_idx"].is_not_null().sum())


def split_launches(tasks: pl.DataFrame) -> pl.DataFrame:
    """``tasks`` with ``launch`` (0, 1, ...): a new launch starts where a record starts after every earlier
    record ended. Sorted by start."""
    t = tasks.sort("start_ns")
    if t.height == 0:
        return t.with_columns(pl.lit(0, pl.Int64).alias("launch"))
    return t.with_columns((pl.col("start_ns") > pl.col("end_ns").cum_max().shift(1)).fill_null(False)
                          .cast(pl.Int64).cum_sum().alias("launch"))


def _kernels(trace: Trace, kernel: str) -> pl.DataFrame:
    g = trace.kernels
    named = g.filter(pl.col("name").cast(pl.String) == kernel)
    if named.height == 0:  # demangled or decorated names: the profiled function's name inside them
        named = g.filter(pl.col("name").cast(pl.String).str.contains(kernel, literal=True))
    return named.select(pl.col("idx").alias("gpu_idx"), pl.col("ts").alias("kernel_ts"), pl.col("end").alias("kernel_end"),
                        "stream", "device").sort("kernel_ts")


def _score(a: np.ndarray, b: np.ndarray, s: np.ndarray, e: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each candidate offset: launches inside a kernel (within the tolerance), and their summed |start gap|."""
    a2 = a[None, :] + delta[:, None]
    b2 = b[None, :] + delta[:, None]
    i = np.clip(np.searchsorted(s, a2 + MATCH_TOLERANCE_NS, side="right") - 1, 0, len(s) - 1)
    inside = (s[i] - MATCH_TOLERANCE_NS <= a2) & (b2 <= e[i] + MATCH_TOLERANCE_NS)
    gaps = np.where(inside, np.abs(a2 - s[i]), 0).sum(axis=1)
    return inside.sum(axis=1), gaps


def align(trace: Trace, tasks: pl.DataFrame, kernel: str) -> Alignment:
    """Place ``tasks`` (one kernel's records, ``%globaltimer`` ns) under their kernels of ``trace``."""
    if tasks.height == 0:
        raise KernscopeError("the intra-kernel file has no records to align")
    ks = _kernels(trace, kernel)
    if ks.height == 0:
        names = trace.kernels["name"].cast(pl.String).unique().sort().head(8).to_list()
        raise KernscopeError(f"no kernel named {kernel!r} in the host trace (it has e.g. {', '.join(names) or 'no kernels'})")
    t = split_launches(tasks)
    per = (t.group_by("launch").agg(pl.col("block").n_unique().alias("blocks"), pl.len().alias("records"),
                                    pl.col("start_ns").min().alias("_a"), pl.col("end_ns").max().alias("_b"))
           .sort("launch"))
    a, b = per["_a"].to_numpy().astype(np.int64), per["_b"].to_numpy().astype(np.int64)
    base = trace.base_time_ns or 0
    s = ks["kernel_ts"].to_numpy().astype(np.int64) + base  # the kernels on the wall clock, as %globaltimer counts
    e = ks["kernel_end"].to_numpy().astype(np.int64) + base
    delta = (s[None, :] - a[:, None]).reshape(-1)  # every (launch, kernel) pair proposes an offset
    best = np.zeros(0, dtype=np.int64)
    hits, gaps = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    for lo in range(0, len(delta), 4096):  # bounded memory: 4,096 candidates x launches at a time
        h, g = _score(a, b, s, e, delta[lo:lo + 4096])
        hits, gaps, best = np.concatenate([hits, h]), np.concatenate([gaps, g]), np.concatenate([best, delta[lo:lo + 4096]])
    order = np.lexsort((gaps, -hits))
    d0 = int(best[order[0]])
    notes: list[str] = []
    # the match at that offset
    i = np.clip(np.searchsorted(s, a + d0 + MATCH_TOLERANCE_NS, side="right") - 1, 0, len(s) - 1)
    ok = (s[i] - MATCH_TOLERANCE_NS <= a + d0) & (b + d0 <= e[i] + MATCH_TOLERANCE_NS)
    _, first = np.unique(np.where(ok, i, -1 - np.arange(len(i))), return_index=True)
    ok &= np.isin(np.arange(len(i)), first)  # one launch per kernel: the first that claims it
    if not ok.any():
        raise KernscopeError(f"no profiled launch of {kernel!r} lies inside a kernel of that name in the host trace "
                             f"({len(a)} launches, {len(s)} kernels): were they recorded in the same run?")
    x, y = a[ok], (s[i] - a)[ok]  # first record (intra clock) -> kernel start minus first record
    if ok.sum() >= 3:
        slope, icpt = np.polyfit((x - x[0]).astype(np.float64), y.astype(np.float64), 1)
    else:
        slope, icpt = 0.0, float(np.median(y))
    line = icpt + slope * (a - x[0]).astype(np.float64)
    residual = np.where(ok, (s[i] - a) - line, np.nan)
    line = line + np.nanmax(residual)  # no first record before its kernel's start
    residual = residual - np.nanmax(residual)
    shift = np.rint(line).astype(np.int64) - base  # per launch: intra ns -> trace ns (the trace's own origin)
    if abs(line[int(np.argmax(ok))]) > MAX_PLAUSIBLE_OFFSET_NS:
        notes.append(f"the GPU timer and the host trace's clock differ by {line[int(np.argmax(ok))] / 1e9:,.1f} s: "
                     "if the files come from different runs, this match is by order alone")
    if (~ok).any():
        notes.append(f"{int((~ok).sum())} of {len(a)} profiled launches match no kernel of the host trace "
                     "(launched outside the profiler's active steps?)")
    idx = np.where(ok, i, -1)
    launches = per.with_columns(
        pl.Series("_shift", shift), pl.Series("_k", idx),
        pl.Series("fit_residual_ns", np.rint(residual)).cast(pl.Int64, strict=False))
    kt = ks.with_row_index("_k").with_columns(pl.col("_k").cast(pl.Int64))
    launches = launches.join(kt, on="_k", how="left")
    moved = (t.join(launches.select("launch", "_shift", "gpu_idx", "stream", "device", "kernel_ts", "kernel_end"), on="launch")
             .with_columns((pl.col("start_ns") + pl.col("_shift")).alias("start_ns"),
                           (pl.col("end_ns") + pl.col("_shift")).alias("end_ns")))
    outside = (moved.filter(pl.col("gpu_idx").is_not_null())
               .group_by("launch").agg(((pl.col("start_ns") < pl.col("kernel_ts")) | (pl.col("end_ns") > pl.col("kernel_end")))
                                       .sum().alias("outside")))
    launches = (launches.with_columns((pl.col("_a") + pl.col("_shift")).alias("first_ns"),
                                      (pl.col("_b") + pl.col("_shift")).alias("last_ns"))
                .with_columns((pl.col("first_ns") - pl.col("kernel_ts")).alias("start_gap_ns"),
                              (pl.col("kernel_end") - pl.col("last_ns")).alias("end_gap_ns"),
                              (pl.col("kernel_ts") - trace.t0).alias("kernel_at_ns"))
                .join(outside, on="launch", how="left")
                .select("launch", "blocks", "records", "first_ns", "last_ns", "gpu_idx", "kernel_ts", "kernel_end",
                        "kernel_at_ns", "stream", "device", "start_gap_ns", "end_gap_ns", "fit_residual_ns", "outside")
                .sort("launch"))
    return Alignment(kernel, launches, moved.drop("_shift", "kernel_ts", "kernel_end"),
                     int(np.rint(line[int(np.argmax(ok))])), float(slope) * 1e6, notes)
