"""GPU timeline breakdown by interval unions (concurrent streams are never double-counted).

Definitions (the same as TraceLens's ``gpu_timeline``):
- computation: union of kernels that are neither communication nor memory copies;
- communication / memcpy: union of Communication-category kernels / memcpy activity (a memset runs
  as a kernel on the SMs, so it counts as computation, as in TraceLens);
- exposed communication: communication not overlapped by computation;
- exposed memcpy: memcpy not overlapped by computation or communication;
- busy: union of everything; total: first start to last end; idle = total - busy.
A kernel whose reported end runs past the start of the next kernel on the same stream is clipped
to it (a ROCm timestamp artifact) and counted in ``clipped_kernels``.
"""

from __future__ import annotations

import numpy as np
import polars as pl

TIMELINE_ROWS = (
    "computation_time",
    "exposed_comm_time",
    "exposed_memcpy_time",
    "busy_time",
    "idle_time",
    "total_time",
    "total_comm_time",
    "total_memcpy_time",
)


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length (ns) of the union of half-open intervals [start, end)."""
    if len(starts) == 0:
        return 0
    o = np.argsort(starts, kind="stable")
    s = starts[o]
    e = ends[o]
    run_end = np.maximum.accumulate(e)
    new_seg = np.empty(len(s), dtype=bool)
    new_seg[0] = True
    new_seg[1:] = s[1:] > run_end[:-1]
    seg_id = np.cumsum(new_seg) - 1
    seg_start = s[new_seg]
    seg_end = np.zeros(len(seg_start), dtype=np.int64)
    np.maximum.at(seg_end, seg_id, run_end)
    return int((seg_end - seg_start).sum())


def clip_overruns(table: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """Clip each event's end to the next start on the same (device, stream); return (table, n clipped)."""
    t = table.sort(["device", "stream", "ts"]).with_columns(
        pl.col("ts").shift(-1).over(["device", "stream"]).alias("_next")
    )
    over = (pl.col("_next").is_not_null()) & (pl.col("end") > pl.col("_next"))
    n = int(t.select(over.sum()).item())
    t = t.with_columns(pl.when(over).then(pl.col("_next")).otherwise(pl.col("end")).alias("end")).drop("_next")
    return t, n


def _breakdown(t: pl.DataFrame) -> dict[str, float]:
    if t.height == 0:
        return {k: 0.0 for k in TIMELINE_ROWS}
    is_mem = pl.col("kind") == "memcpy"
    is_comm = (pl.col("category") == "Communication") & ~is_mem
    comp = t.filter(~is_mem & ~is_comm)
    comm = t.filter(is_comm)
    mem = t.filter(is_mem)
    arr = lambda d: (d["ts"].to_numpy(), d["end"].to_numpy())  # noqa: E731
    cat = lambda *ds: tuple(np.concatenate(x) for x in zip(*(arr(d) for d in ds)))  # noqa: E731
    u_comp = union_ns(*arr(comp))
    u_comm = union_ns(*arr(comm))
    u_mem = union_ns(*arr(mem))
    u_comp_comm = union_ns(*cat(comp, comm))
    u_all = union_ns(*cat(comp, comm, mem))
    total = int(t["end"].max() - t["ts"].min())
    return {
        "computation_time": u_comp,
        "exposed_comm_time": u_comp_comm - u_comp,
        "exposed_memcpy_time": u_all - u_comp_comm,
        "busy_time": u_all,
        "idle_time": total - u_all,
        "total_time": total,
        "total_comm_time": u_comm,
        "total_memcpy_time": u_mem,
    }


def gpu_timeline(
    table: pl.DataFrame, *, by: str | None = "device", clip: bool = True, linked_only: bool = False
) -> pl.DataFrame:
    """Timeline breakdown of a categorized GPU table.

    Args:
        table: output of :func:`kernscope.analyze.kernels.gpu_table` with a categorizer.
        by: ``"device"`` (one block per device), ``"step"`` or None (all rows together).
        clip: clip same-stream overruns first.
        linked_only: drop GPU activity whose launch is not in the trace (work queued before the
            profiling window). TraceLens does this implicitly; kernscope counts it by default.

    Returns:
        Long table: ``<by>, type, time_us, percent, clipped_kernels`` (percent of total_time).
    """
    if linked_only:
        table = table.filter(pl.col("launch_ts").is_not_null())
    groups = [(None, table)] if by is None else [(k[0], d) for k, d in table.group_by([by], maintain_order=True)]
    rows = []
    for key, d in sorted(groups, key=lambda x: (x[0] is None, x[0] if x[0] is not None else 0)):
        n_clip = 0
        if clip and d.height:
            d, n_clip = clip_overruns(d)
        b = _breakdown(d)
        for typ in TIMELINE_ROWS:
            rows.append(
                {
                    "group": key,
                    "type": typ,
                    "time_us": b[typ] / 1000.0,
                    "percent": (100.0 * b[typ] / b["total_time"]) if b["total_time"] else 0.0,
                    "clipped_kernels": n_clip,
                }
            )
    df = pl.DataFrame(rows, schema={"group": pl.Int64, "type": pl.String, "time_us": pl.Float64, "percent": pl.Float64, "clipped_kernels": pl.Int64})
    return df.rename({"group": by}) if by else df.drop("group")
