"""CUDA and HIP graph captures on the host: the windows in which a thread recorded a graph instead of running its
launches (``cudaStreamBeginCapture`` ... ``cudaStreamEndCapture``), and the graphs' instantiations. A launch inside
a capture queues nothing on the GPU, so it has no GPU record of its own; the graph's replays do."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from .kinds import named

#: runtime calls that open and close a stream's capture (CUDA and HIP spellings)
CAPTURE_BEGIN = r"^(cuda|hip)StreamBeginCapture"
CAPTURE_END = r"^(cuda|hip)StreamEndCapture"
#: runtime calls that make a captured graph executable
INSTANTIATE = r"^(cuda|hip)GraphInstantiate"


def capture_windows(runtime: pl.DataFrame) -> pl.DataFrame:
    """Per capture, its thread and window: (``pid``, ``tid``, ``start``, ``end``; ns), from a begin call's start to
    the end of the same thread's next end call (a begin without one is left out: its capture is not in the trace).
    ``runtime``: the runtime and driver events (``name``, ``pid``, ``tid``, ``ts``, ``end``); an empty table where no
    capture begins (the common case: one pass over the distinct names)."""
    begins = named(runtime, CAPTURE_BEGIN)
    if begins.height == 0:
        return pl.DataFrame(schema=[("pid", runtime.schema["pid"]), ("tid", runtime.schema["tid"]), ("start", pl.Int64),
                                    ("end", pl.Int64)])
    ends = named(runtime, CAPTURE_END).select("pid", "tid", pl.col("ts").alias("_end_ts"), pl.col("end").alias("_end"))
    return (begins.select("pid", "tid", pl.col("ts").alias("start")).sort("start")
            .join_asof(ends.sort("_end_ts"), left_on="start", right_on="_end_ts", by=["pid", "tid"], strategy="forward",
                       check_sortedness=False)
            .filter(pl.col("_end").is_not_null())
            .select("pid", "tid", "start", pl.col("_end").alias("end")))


def in_windows(rows: pl.DataFrame, windows: pl.DataFrame, *, at: str = "ts", by: Sequence[str] = ("pid", "tid")) -> pl.Series:
    """Whether each row of ``rows`` has its time ``at`` (ns) inside one of ``windows`` (``start``, ``end``, both
    ends in; of its own thread's, the columns ``by``, where given: :func:`capture_windows`), in the rows' order."""
    if windows.height == 0 or rows.height == 0:
        return pl.Series("in_window", [False] * rows.height, dtype=pl.Boolean)
    found = (rows.select(*by, at).with_row_index("_i").sort(at)
             .join_asof(windows.sort("start"), left_on=at, right_on="start", by=list(by) or None, strategy="backward",
                        check_sortedness=False)
             .sort("_i"))
    return found.select((pl.col("end").is_not_null() & (pl.col(at) <= pl.col("end"))).alias("in_window"))["in_window"]
