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
from .io import block_launches

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
    """``tasks`` with ``launch`` (0, 1, ...): a new launch starts where a block starts after every earlier block
    ended (:func:`~kernscope.intra.io.block_launches`; by records, a one-program kernel's sequential scopes were
    launches of their own). Sorted by start."""
    t = tasks.sort("start_ns")
    if t.height == 0:
        return t.with_columns(pl.lit(0, pl.Int64).alias("launch"))
    return t.join(block_launches(t), on="block", how="left", maintain_order="left")


def _kernels(trace: Trace, kernel: str) -> pl.DataFrame:
    g = trace.kernels
    named = g.filter(pl.col("name").cast(pl.String) == kernel)
    if named.height == 0:  # demangled or decorated names: the profiled function's name inside them
        named = g.filter(pl.col("name").cast(pl.String).str.contains(kernel, literal=True))
    ks = named.select(pl.col("idx").alias("gpu_idx"), pl.col("ts").alias("kernel_ts"), pl.col("end").alias("kernel_end"),
                      "stream", "device").sort("kernel_ts")
    return ks.join(_grids(trace, named), on="gpu_idx", how="left", maintain_order="left")


def _grids(trace: Trace, named: pl.DataFrame) -> pl.DataFrame:
    """``gpu_idx, grid_blocks`` (the kernel's grid, x·y·z blocks; null where unknown) of the kernels ``named``:
    XLA states the grid in its own columns, Kineto in each kernel's ``grid`` arg (read from the file for these
    kernels alone)."""
    schema = {"gpu_idx": pl.Int64, "grid_blocks": pl.Int64}
    if {"grid_x", "grid_y", "grid_z"} <= set(named.columns):
        grids = named.select(pl.col("idx").alias("gpu_idx"), "grid_x", "grid_y", "grid_z")
    else:
        from ..errors import TraceError
        from ..load.opargs import read_kernel_args

        try:
            grids = read_kernel_args(trace.path, named["idx"].to_list()).rename({"idx": "gpu_idx"})
        except (OSError, TraceError):  # the file moved since it was loaded: match without grids
            return pl.DataFrame(schema=schema)
    return grids.select(pl.col("gpu_idx").cast(pl.Int64),
                        (pl.col("grid_x") * pl.col("grid_y") * pl.col("grid_z")).cast(pl.Int64).alias("grid_blocks"))


def _fits(blocks: np.ndarray, grid: np.ndarray, i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whether each launch (``blocks``: how many blocks recorded in it) can be kernel ``i`` by its grid (``grid``:
    its blocks, -1 unknown: any launch fits; block ids are not compared, files number them across launches), and
    whether the grid equals the blocks."""
    g = grid[i]
    return (g < 0) | (blocks <= g), g == blocks


def _score(a: np.ndarray, b: np.ndarray, s: np.ndarray, e: np.ndarray, delta: np.ndarray, blocks: np.ndarray,
           grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each candidate offset: launches inside a kernel (within the tolerance) whose grid can hold them, how
    many of those have exactly the kernel's grid of blocks, and their summed |start gap|."""
    a2 = a[None, :] + delta[:, None]
    b2 = b[None, :] + delta[:, None]
    i = np.clip(np.searchsorted(s, a2 + MATCH_TOLERANCE_NS, side="right") - 1, 0, len(s) - 1)
    fit, exact = _fits(blocks[None, :], grid, i)
    inside = (s[i] - MATCH_TOLERANCE_NS <= a2) & (b2 <= e[i] + MATCH_TOLERANCE_NS) & fit
    gaps = np.where(inside, np.abs(a2 - s[i]), 0).sum(axis=1)
    return inside.sum(axis=1), (inside & exact).sum(axis=1), gaps


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
    blocks = per["blocks"].to_numpy().astype(np.int64)
    grid = ks["grid_blocks"].fill_null(-1).to_numpy().astype(np.int64)
    base = trace.base_time_ns or 0
    s = ks["kernel_ts"].to_numpy().astype(np.int64) + base  # the kernels on the wall clock, as %globaltimer counts
    e = ks["kernel_end"].to_numpy().astype(np.int64) + base
    delta = (s[None, :] - a[:, None]).reshape(-1)  # every (launch, kernel) pair proposes an offset
    parts: list[tuple[np.ndarray, ...]] = []
    for lo in range(0, len(delta), 4096):  # bounded memory: 4,096 candidates x launches at a time
        parts.append((*_score(a, b, s, e, delta[lo:lo + 4096], blocks, grid), delta[lo:lo + 4096]))
    hits, exact, gaps, best = (np.concatenate(c) for c in zip(*parts))
    order = np.lexsort((gaps, -exact, -hits))  # most launches inside a kernel that can hold them, then exact grids
    d0 = int(best[order[0]])
    notes: list[str] = []
    # the match at that offset
    i = np.clip(np.searchsorted(s, a + d0 + MATCH_TOLERANCE_NS, side="right") - 1, 0, len(s) - 1)
    fit, _ = _fits(blocks, grid, i)
    ok = (s[i] - MATCH_TOLERANCE_NS <= a + d0) & (b + d0 <= e[i] + MATCH_TOLERANCE_NS) & fit
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
    moved = (t.join(launches.select("launch", "_shift", "gpu_idx", "stream", "device", "kernel_ts", "kernel_end", "grid_blocks"),
                    on="launch")
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
                .with_columns(pl.when(pl.col("gpu_idx").is_null()).then(None)
                              .when(pl.col("grid_blocks").is_null()).then(pl.lit("unknown"))
                              .when(pl.col("grid_blocks") == pl.col("blocks")).then(pl.lit("equal"))
                              .otherwise(pl.lit("fits")).alias("grid_check"))
                .select("launch", "blocks", "records", "first_ns", "last_ns", "gpu_idx", "kernel_ts", "kernel_end",
                        "kernel_at_ns", "stream", "device", "grid_blocks", "grid_check", "start_gap_ns", "end_gap_ns",
                        "fit_residual_ns", "outside")
                .sort("launch"))
    return Alignment(kernel, launches, moved.drop("_shift", "kernel_ts", "kernel_end", "grid_blocks"),
                     int(np.rint(line[int(np.argmax(ok))])), float(slope) * 1e6, notes)


def placed(al: Alignment) -> pl.DataFrame:
    """The records of ``al`` that were placed (their launch matched a kernel), each with ``lane``: the blocks of
    each launch on each SM packed onto the fewest non-overlapping lanes (launches pack separately, so a block id
    that recurs in the next launch is another unit)."""
    from .export import assign_lanes

    t = al.tasks.filter(pl.col("gpu_idx").is_not_null())
    if t.height == 0:
        return t.with_columns(pl.lit(0, pl.Int64).alias("lane"))
    keyed = t.with_columns((pl.col("launch").cast(pl.Int64) * (1 << 32) + pl.col("block")).alias("_unit"))
    lanes = assign_lanes(keyed.drop("block").rename({"_unit": "block"})).units.rename({"block": "_unit"})
    return keyed.join(lanes, on=["_unit", "group", "sm"], how="left").drop("_unit")


def timeline_rows(alignments: list[Alignment], keep_gpu_idx: pl.Series | None = None) -> pl.DataFrame:
    """The placed records as rows of the report's GPU timeline: columns ``device``, ``stream``, ``sub`` (1, 2, …:
    the rows right below the kernel's stream, one per SM lane of each aligned kernel), ``label``, ``ts`` and
    ``dur`` (ns, trace clock), ``name`` (the task), ``category`` (``intra · TASK``), ``gpu_idx`` (the kernel's row).
    ``keep_gpu_idx``: only records under these kernels (the report's step window)."""
    schema = {"device": pl.Int64, "stream": pl.Int64, "sub": pl.Int64, "label": pl.String, "ts": pl.Int64,
              "dur": pl.Int64, "name": pl.String, "category": pl.String, "gpu_idx": pl.Int64}
    parts = []
    for k, al in enumerate(alignments):
        t = placed(al)
        if keep_gpu_idx is not None:
            t = t.filter(pl.col("gpu_idx").is_in(keep_gpu_idx.implode()))
        if t.height == 0:
            continue
        parts.append(t.select(
            pl.col("device").cast(pl.Int64).fill_null(-1), pl.col("stream").cast(pl.Int64).fill_null(-1),
            pl.lit(k, pl.Int64).alias("_k"), pl.col("sm").cast(pl.Int64), pl.col("lane").cast(pl.Int64),
            pl.lit(al.kernel).alias("_kernel"), pl.col("start_ns").alias("ts"),
            (pl.col("end_ns") - pl.col("start_ns")).alias("dur"), pl.col("task").cast(pl.String).alias("name"),
            pl.col("gpu_idx").cast(pl.Int64)))
    if not parts:
        return pl.DataFrame(schema=schema)
    rows = pl.concat(parts)
    return rows.with_columns(
        pl.struct("_k", "sm", "lane").rank("dense").over("device", "stream").cast(pl.Int64).alias("sub"),
        pl.format("\u21b3 {} \u00b7 SM {} lane {}", "_kernel", "sm", "lane").alias("label"),
        pl.format("intra \u00b7 {}", "name").alias("category"),
    ).select(list(schema)).cast(schema)  # type: ignore[arg-type]


def align_files(trace: Trace, files: list[str] | tuple[str, ...], kernel: str | None = None,
                clock_ghz: float | None = None) -> list[tuple[str, Alignment]]:
    """Align every intra-kernel file (kernscope buffers/traces, Proton's traces) with ``trace``: one alignment
    per (file, kernel). ``kernel``: the host's kernel name [default: the file's kernels as it names them, else its
    base name]. Records in SM cycles need a clock (``clock_ghz``, measured or stated); without one the file is
    refused with a one-line error, as are files whose launches match no kernel."""
    import os

    from .io import load_tasks
    from .units import clock_for, in_time

    done = []
    for f in files:
        loaded = load_tasks(f)
        t, unit = in_time(loaded.tasks, loaded.unit, clock_for(loaded, clock_ghz, f))
        if unit != "ns":
            raise KernscopeError(f"{f}: its times are SM cycles with no known clock, so they cannot be placed on the "
                                 "host's clock (records in %globaltimer ns can; see intra stats --clock-ghz)")
        # (kernels the file names: Proton's; kernscope's own export names none: its file is named after its kernel)
        units = loaded.launches if loaded.launches is not None else pl.DataFrame(schema={"kernel": pl.String, "block": pl.Int64})
        named = sorted({k for k in units["kernel"].to_list() if k})
        names = [kernel] if kernel else named or [os.path.basename(f).split(".")[0]]
        for name in names:
            part = t if not named or kernel else t.filter(
                pl.col("block").is_in(units.filter(pl.col("kernel") == name)["block"].implode()))
            try:
                done.append((f, align(trace, part, name)))
            except KernscopeError as e:
                raise KernscopeError(f"{f}: {e}" + ("" if kernel else " (--kernel NAME names the host's kernel)")) from None
    return done


def launches_sheet(done: list[tuple[str, Alignment]]) -> pl.DataFrame:
    """One row per profiled launch of every alignment: ``file``, ``kernel``, then the launch columns of
    :attr:`Alignment.launches` (times ns, trace clock), for the report's ``intra_launches`` table/sheet."""
    parts = [al.launches.with_columns(pl.lit(f).alias("file"), pl.lit(al.kernel).alias("kernel"))
             .select("file", "kernel", *al.launches.columns) for f, al in done]
    return pl.concat(parts, how="diagonal_relaxed") if parts else pl.DataFrame()
