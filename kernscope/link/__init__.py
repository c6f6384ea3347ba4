"""``link``: decoded event table -> :class:`~kernscope.model.Trace` with launch, op, tree and step links."""

from __future__ import annotations

import polars as pl

from ..errors import TraceError
from ..load.kineto import RawTrace
from ..model import Trace, compute_stats
from .correlation import launcher_ops, launches, link_gpu
from .kinds import classify
from .steps import assign_steps, steps
from .tree import call_tree

__all__ = ["link", "call_tree", "steps"]

LAUNCH_LIKE = r"(?i)(launchkernel|graphlaunch|modulelaunchkernel|extlaunchkernel|launchcooperativekernel|memcpy|memset)"
_DROP = ["ts_missing", "dur_missing", "meta_name", "sort_index"]


def _validate(ev: pl.DataFrame, path: str) -> None:
    ph = pl.col("ph").cast(pl.String)
    bad_ts = ev.filter(ph.is_in(["X", "i", "I", "B", "E"]) & pl.col("ts_missing"))
    if bad_ts.height:
        r = bad_ts.row(0, named=True)
        raise TraceError(path, f"event #{r['idx']} ({r['name']!s:.60}) has no 'ts' ({bad_ts.height} such events)")
    bad_dur = ev.filter((ph == "X") & pl.col("dur_missing"))
    if bad_dur.height:
        r = bad_dur.row(0, named=True)
        raise TraceError(
            path, f"complete event #{r['idx']} ({r['name']!s:.60}) has no 'dur' ({bad_dur.height} such events)"
        )
    neg = ev.filter(pl.col("dur") < 0)
    if neg.height:
        r = neg.row(0, named=True)
        raise TraceError(
            path,
            f"event #{r['idx']} ({r['name']!s:.60}) has a negative duration ({r['dur'] / 1000:g} us; "
            f"{neg.height} such events)",
        )


def _names(meta: pl.DataFrame, which: str, keys: list[str]) -> dict[str, str]:
    rows = meta.filter((pl.col("name").cast(pl.String) == which) & pl.col("meta_name").is_not_null())
    out: dict[str, str] = {}
    for r in rows.select(*keys, "meta_name").iter_rows():
        out[":".join(str(k) for k in r[:-1])] = r[-1]
    return out


def _fallback_ops(gpu: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """For launches with no External-id match: the innermost ``cpu_op`` enclosing it on its thread.

    A range join (polars ``join_where``) of just those launches against the ops of their threads;
    the latest-starting enclosing op is the innermost one.
    """
    need = gpu.filter(pl.col("launch_idx").is_not_null() & pl.col("op_idx").is_null())
    if need.height == 0:
        return gpu
    launches = (
        need.select("launch_idx").unique()
        .join(events.select(pl.col("idx").alias("launch_idx"), pl.col("pid").alias("_lp"), pl.col("tid").alias("_lt"),
                            pl.col("ts").alias("_ls"), pl.col("end").alias("_le")), on="launch_idx")
    )
    threads = launches.select("_lp", "_lt").unique()
    ops = events.filter(pl.col("kind") == "cpu_op").select(
        pl.col("idx").alias("_fb"), pl.col("pid").alias("_lp"), pl.col("tid").alias("_lt"),
        pl.col("ts").alias("_os"), pl.col("end").alias("_oe"),
    ).join(threads, on=["_lp", "_lt"], how="semi")
    if ops.height == 0:
        return gpu
    pairs = launches.join_where(
        ops.rename({"_lp": "_op_pid", "_lt": "_op_tid"}),
        pl.col("_os") <= pl.col("_ls"),
        pl.col("_oe") >= pl.col("_ls"),
    ).filter((pl.col("_lp") == pl.col("_op_pid")) & (pl.col("_lt") == pl.col("_op_tid")))
    fb = pairs.sort("_os", descending=True).unique("launch_idx", keep="first").select("launch_idx", "_fb")
    return (
        gpu.join(fb, on="launch_idx", how="left", maintain_order="left")
        .with_columns(pl.coalesce("op_idx", "_fb").alias("op_idx"))
        .drop("_fb")
    )


def link(raw: RawTrace, path: str) -> Trace:
    """Link a decoded trace: GPU <-> launch <-> CPU op, python tree, steps, unlinked counts."""
    decoded, raw.events = raw.events, pl.DataFrame()  # do not keep the unlinked table alive while linking
    ev = decoded.with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64), classify(decoded["ph"], decoded["cat"]))
    del decoded
    if ev.height == 0:
        raise TraceError(path, "trace has no events ('traceEvents' is empty)")
    _validate(ev, path)
    ev = ev.with_columns((pl.col("ts") + pl.col("dur")).alias("end"))
    meta = ev.filter(pl.col("kind") == "metadata")
    process_names = _names(meta, "process_name", ["pid"])
    thread_names = _names(meta, "thread_name", ["pid", "tid"])
    flows = ev.filter(pl.col("kind") == "flow").select("idx", "ph", "cat", "name", "pid", "tid", "ts", "flow_id")
    events = ev.filter(~pl.col("kind").is_in(["metadata", "flow", "counter"])).drop(_DROP)
    del ev
    if events.height == 0:
        raise TraceError(path, "trace has only metadata events, nothing to analyze")

    # python_function tree by Python id / parent id
    py = events.filter(pl.col("kind") == "python_function")
    if py.height:
        pyp = py.select(pl.col("pid"), pl.col("python_id").alias("python_parent_id"), pl.col("idx").alias("py_parent_idx"))
        pyp = pyp.filter(pl.col("python_parent_id").is_not_null()).unique(["pid", "python_parent_id"], keep="first")
        events = events.join(pyp, on=["pid", "python_parent_id"], how="left", maintain_order="left")
    else:
        events = events.with_columns(pl.lit(None, dtype=pl.Int64).alias("py_parent_idx"))

    launch = launches(events)
    gpu = link_gpu(events, launch)
    ops = launcher_ops(launch.filter(pl.col("launch_idx").is_in(gpu["launch_idx"].drop_nulls().implode())), events)
    gpu = gpu.join(ops, on="launch_idx", how="left", maintain_order="left")
    gpu = _fallback_ops(gpu, events)
    op_names = (
        events.select(pl.col("idx").alias("op_idx"), "name")
        .join(gpu.select("op_idx").drop_nulls().unique(), on="op_idx", how="semi")
        .with_columns(pl.col("name").cast(pl.String).alias("op_name"))
        .drop("name")
    )
    gpu = gpu.join(op_names, on="op_idx", how="left", maintain_order="left")
    pid_int = pl.col("pid").cast(pl.String).cast(pl.Int64, strict=False)
    tid_int = pl.col("tid").cast(pl.String).cast(pl.Int64, strict=False)
    gpu = gpu.with_columns(
        pl.coalesce("device", pid_int).alias("device"),
        pl.coalesce("stream", tid_int).alias("stream"),
        pl.when(pl.col("launch_idx").is_null())
        .then(pl.lit("<no launch in trace>"))
        .when(pl.col("graph_launch"))
        .then(pl.col("launch_name"))
        .otherwise(pl.coalesce("op_name", pl.col("launch_name")))
        .alias("launcher"),
    )
    step_table = steps(events)
    gpu = assign_steps(gpu, step_table)
    # compact: drop columns that only mean something for host events; low-cardinality names as Categorical
    gpu = gpu.drop([c for c in ("flow_id", "python_id", "python_parent_id", "py_parent_idx", "ph") if c in gpu.columns])
    gpu = gpu.with_columns(pl.col("launch_name", "op_name", "launcher").cast(pl.Categorical))

    gpu_corr = gpu["correlation"].drop_nulls().unique().implode()
    first_corr = events.filter(pl.col("kind").is_in(["runtime", "driver"]))["correlation"].min()
    launch_like = events.filter(
        pl.col("kind").is_in(["runtime", "driver"])
        & pl.col("correlation").is_not_null()
        & pl.col("name").cast(pl.String).str.contains(LAUNCH_LIKE)
    )
    flow_ends = flows.group_by("cat", "flow_id").agg(
        (pl.col("ph").cast(pl.String) == "s").any().alias("_s"),
        (pl.col("ph").cast(pl.String).is_in(["f", "t"])).any().alias("_f"),
    )
    unlinked = {
        "gpu_without_launch": int(gpu["launch_idx"].null_count()),
        "gpu_without_correlation": int(gpu["correlation"].null_count()),
        "gpu_launched_before_window": int(
            gpu.filter(pl.col("launch_idx").is_null() & (pl.col("correlation") < first_corr)).height
        )
        if first_corr is not None
        else 0,
        "launches_without_gpu": int(launch_like.filter(~pl.col("correlation").is_in(gpu_corr)).height),
        "launches_without_op": int(
            gpu.filter(pl.col("launch_idx").is_not_null() & pl.col("op_idx").is_null())["launch_idx"].n_unique()
        ),
        "gpu_outside_steps": int(gpu["step"].null_count()) if step_table.height else 0,
        "flows_without_end": int(flow_ends.filter(pl.col("_s") & ~pl.col("_f")).height),
    }
    trace = Trace(
        path=path,
        events_source=events,
        gpu=gpu,
        flows_source=flows,
        steps=step_table,
        metadata=raw.metadata,
        process_names=process_names,
        thread_names=thread_names,
        unlinked=unlinked,
        salvaged=raw.salvaged,
    )
    trace.stats = compute_stats(trace)
    return trace
