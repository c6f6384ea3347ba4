"""``link``: decoded event table -> :class:`~kernscope.model.Trace` (launch, op, step and tree links)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import polars as pl

from ..errors import NeedsFullRead, TraceError
from ..model import Lazy, RawTrace, Trace, TraceStats, literal_nulls
from .correlation import launcher_ops, link_gpu
from .kinds import GPU_KINDS, classify
from .ops import fallback_ops, op_names
from .steps import MarkerError, StepNumberError, StepSpec, assign_steps, find_steps, mark_phases
from .tree import call_tree
from .unlinked import flows_without_end, unlinked_counts

#: host-only columns dropped from the GPU table (it is kept compact: it is what summaries read)
_HOST_ONLY = ("flow_id", "python_id", "python_parent_id", "py_parent_idx", "ph")


def _validate(ev: pl.DataFrame, path: str) -> None:
    complete = (pl.col("ph") == "X").fill_null(False)  # on the interned phase: no text per event
    gpu = pl.col("kind").is_in(list(GPU_KINDS))
    checks = (
        (pl.col("ts_missing"), "has no 'ts'"),
        ((complete | gpu) & pl.col("dur_missing"), "is a complete event ('X') but has no 'dur'"),
        (pl.col("dur") < 0, "has a negative duration"),
    )
    counts = ev.select(*(cond.sum().alias(str(i)) for i, (cond, _) in enumerate(checks))).row(0)  # one pass
    for (cond, problem), n in zip(checks, counts):
        if n:
            r = ev.filter(cond).row(0, named=True)
            raise TraceError(path, f"event #{r['idx']} ({str(r['name'])[:60]!r}) {problem} ({n:,} such events)")


def _names(meta: pl.DataFrame, which: str, keys: list[str]) -> dict[str, str]:
    rows = meta.filter((pl.col("name").cast(pl.String) == which) & pl.col("meta_name").is_not_null())
    return {":".join(str(k) for k in r[:-1]): str(r[-1]) for r in rows.select(*keys, "meta_name").iter_rows()}


def platform_of(metadata: dict[str, object], events: pl.DataFrame) -> str:
    """``"rocm"``, ``"cuda"`` or ``"unknown"``, from metadata keys and runtime call names."""
    if any(k.startswith(("roctracer", "hip_")) for k in metadata):
        return "rocm"
    names = events.lazy().filter(pl.col("kind") == "runtime").select(pl.col("name").unique()).collect()["name"].cast(pl.String)
    if names.str.starts_with("hip").any():
        return "rocm"
    if names.str.starts_with("cu").any() or "cuda_runtime_version" in metadata:
        return "cuda"
    return "unknown"


def earliest_start(events: pl.DataFrame) -> int | None:
    """The trace's time origin (ns): the earliest start of a classified event other than instants."""
    # (two columns read, not the table; as a when/then, polars takes the minimum without making the filtered column:
    # 64 MB of fresh pages for 8.8 M events of a 1 GB JAX profile)
    t = events.select(pl.when(pl.col("kind") != "instant").then(pl.col("ts")).min()).item()
    return int(t) if isinstance(t, int) else None


#: slack (µs) when comparing a skipped event's start, read from the text as float64, with the earliest start
_SLACK_US = 1.0


def _check_projection(raw: RawTrace, t: int | None) -> None:
    """A projection's skipped ``ph: X`` events must all start after the parsed ones' earliest start ``t``
    (ns; it is the origin of every relative time); else the trace is read again in full."""
    if raw.projected_first_ts == float("inf"):
        return
    if t is None or raw.projected_first_ts < t / 1000.0 + _SLACK_US:
        raise NeedsFullRead


def _stats(events: pl.DataFrame, n_flows: int, metadata: dict[str, object], projected_out: int, t: int | None) -> TraceStats:
    """``t``: the earliest start (ns, :func:`earliest_start`)."""
    return TraceStats(
        events=int(events.height + n_flows + projected_out),
        projected_out=projected_out,
        event_counts={str(k): int(n) for k, n in events.group_by("kind").len().iter_rows()},
        platform=platform_of(metadata, events),
        t0=t if t is not None else 0,
    )


def _as_int(df: pl.DataFrame, col: str) -> pl.Series:
    """``col`` (a categorical of numbers, e.g. pid) as Int64, parsed once per distinct value (null: not a number)."""
    distinct = df.select(pl.col(col).unique())
    parsed = distinct.with_columns(pl.col(col).cast(pl.String).cast(pl.Int64, strict=False).alias("_int"))
    out: pl.Series = df.select(col).join(parsed, on=col, how="left", maintain_order="left", nulls_equal=True)["_int"]
    return out


def link_gpu_table(events: pl.DataFrame) -> pl.DataFrame:
    """GPU rows with launch, CPU op, launcher, device and stream columns."""
    gpu = link_gpu(events)
    ops = None
    if gpu["launch_external_id"].null_count() < gpu.height:  # (no launch of a JAX profile has an External id)
        # the launches of these GPU rows, one row each (their launch columns)
        launched = (gpu.select("launch_idx", "launch_external_id", "launch_pid", "launch_ts").drop_nulls("launch_idx")
                    .unique("launch_idx"))
        ops = launcher_ops(launched, events)
    if ops is not None and ops.height:
        gpu = gpu.with_columns(gpu.select("launch_idx").join(ops, on="launch_idx", how="left", maintain_order="left")["op_idx"])
    else:  # (no launch has an External-id match, as in every JAX profile: no join of every GPU row with nothing)
        gpu = gpu.with_columns(pl.lit(None, dtype=pl.Int64).alias("op_idx"))
    # XLA: a kernel's launching op is its HLO op (a command buffer for graph kernels); its CPU op's name only where it
    # has none
    hlo = "hlo_op" in gpu.columns
    gpu = op_names(fallback_ops(gpu, events), events, where=pl.col("hlo_op").is_null() if hlo else None)
    gpu = gpu.with_columns(pl.col("op_name").cast(pl.Categorical), pl.col("launch_name").cast(pl.Categorical))
    if hlo:
        gpu = gpu.with_columns(pl.coalesce(pl.col("hlo_op").cast(pl.Categorical), "op_name").alias("op_name"))
    # the numbers of pid/tid where no device/stream arg says: read once per distinct pid/tid, only when needed
    fill = [(c, k) for c, k in (("device", "pid"), ("stream", "tid")) if gpu[c].null_count()]
    return gpu.with_columns(
        *(pl.coalesce(c, _as_int(gpu, k)).alias(c) for c, k in fill),
        pl.when(pl.col("hlo_op").is_not_null() if hlo else pl.lit(False))
        .then(pl.col("op_name"))
        .when(pl.col("launch_idx").is_null())
        .then(pl.lit("<no launch in trace>", dtype=pl.Categorical))
        .when(pl.col("graph_launch"))
        .then(pl.col("launch_name"))
        .otherwise(pl.coalesce("op_name", pl.col("launch_name")))
        .alias("launcher"),
    )


def link(raw: RawTrace, path: str, *, steps: StepSpec | None = None,
         events_ready: Callable[[pl.DataFrame], None] | None = None, phases: bool = True) -> Trace:
    """Link a decoded trace: GPU <-> launch <-> CPU op, python parents, steps, unlinked counts.

    Args:
        raw: the decoded trace (its event table is consumed: not kept alive while linking).
        steps: how to find step windows (default: ``ProfilerStep#N``, else automatic windows).
        events_ready: called with the trace's event table as soon as it is final, before the rest is linked (the
            load starts writing it to the parse cache then). The link may still raise after it.
        phases: mark each step's phase (steady, warmup, irregular: :func:`~kernscope.link.steps.mark_phases`, from
            the steps' kernel multisets). False: the phases the steps were found with (null for annotated steps),
            as for a time window of a profile, whose steps' phases are the whole profile's
            (:func:`kernscope.analyze.windows.merge` marks them over every window's steps).
    """
    if raw.flows.height < ON_A_THREAD:
        return _link(raw, path, steps, events_ready, phases, None)
    # what reads the flow arrows alone (the flows that never end) or the final event table alone (the trace's facts:
    # its events by kind, its platform) on a thread of its own while the GPU rows are linked (polars runs the queries
    # without the GIL): 12-14 and ~9 ms of a 200 MB Kineto trace's link, on the command's thread. Not for a trace
    # without flow arrows (a JAX profile): a time window's link beside the next window's decode on a third thread
    # took the 202.6 MB profile's 10 windows 1.92 -> 2.09 s
    with ThreadPoolExecutor(1, thread_name_prefix="kernscope-link") as pool:
        return _link(raw, path, steps, events_ready, phases, pool)


#: from this many flow arrows on, :func:`link` reads the flow arrows and the trace's facts on a thread
ON_A_THREAD = 20_000


def _link(raw: RawTrace, path: str, steps: StepSpec | None, events_ready: Callable[[pl.DataFrame], None] | None,
          phases: bool, pool: ThreadPoolExecutor | None) -> Trace:
    without_end: Future[int] | None = pool.submit(flows_without_end, raw.flows) if pool is not None else None
    decoded, raw.events = raw.events, pl.DataFrame()  # do not keep the decoded table alive while linking
    if decoded.height == 0 and raw.meta_events.height == 0 and raw.flows.height == 0:
        raise TraceError(path, "trace has no events ('traceEvents' is empty)")
    events = decoded.with_columns(classify(decoded["ph"], decoded["cat"]))
    del decoded
    t0 = earliest_start(events)
    _check_projection(raw, t0)
    _validate(events, path)
    events = events.with_columns((pl.col("ts") + pl.col("dur")).alias("end")).drop("ts_missing", "dur_missing")
    # columns the trace has no value in (a Kineto trace's collective and memory args, python ids, an XSpace's Kineto
    # columns ...), whatever the format: one null literal each, no buffer, and not copied by a filter or gather of the
    # events (the 10 GB replica held 235 MB of them, and each filter of its 10 M CPU ops copied them again)
    events = literal_nulls(events)
    meta = raw.meta_events
    process_names = _names(meta, "process_name", ["pid"]) if meta.height else {}
    thread_names = _names(meta, "thread_name", ["pid", "tid"]) if meta.height else {}
    flows = raw.flows
    if events.height == 0:
        raise TraceError(path, "trace has only metadata events, nothing to analyze")
    if events_ready is not None and raw.salvaged is None:
        events_ready(events)  # final: only a salvaged trace's steps may still filter it
    stats: Future[TraceStats] | None = None
    if pool is not None and raw.salvaged is None:
        stats = pool.submit(_stats, events, flows.height, raw.metadata, raw.projected_out, t0)
    gpu = link_gpu_table(events)
    while True:
        try:
            found = find_steps(events, gpu, steps or StepSpec())
            break
        except StepNumberError as e:
            if raw.salvaged is None:
                raise TraceError(path, str(e)) from None
            events = events.filter(pl.col("name").cast(pl.String) != e.name)
            t0 = earliest_start(events)
            raw.skipped.append(f"skipped {e.count} step annotation(s) {e.name[:60]!r}: number does not fit int64")
        except MarkerError as e:
            raise TraceError(path, str(e)) from None
    if events_ready is not None and raw.salvaged is not None:
        events_ready(events)
    gpu = assign_steps(gpu, found.table, by_gpu_time=found.by_gpu_time)
    step_table = mark_phases(found.table, gpu) if phases else found.table
    gpu = gpu.drop([c for c in _HOST_ONLY if c in gpu.columns]).with_columns(
        pl.col("launch_name", "op_name", "launcher").cast(pl.Categorical)
    )
    # (columns gathered or filtered from nulls are buffers of nulls: a JAX profile's step_num and launch_external_id,
    # 16 bytes a GPU row, copied again by each filter and sort of the table)
    gpu = literal_nulls(gpu)
    return Trace(
        path=path,
        events_table=Lazy.of(events),
        gpu=gpu,
        flows_table=Lazy.of(flows),
        steps=step_table,
        tree_table=Lazy(lambda: call_tree(events)),
        stats=stats.result() if stats is not None else _stats(events, flows.height, raw.metadata, raw.projected_out, t0),
        metadata=raw.metadata,
        process_names=process_names,
        thread_names=thread_names,
        unlinked=unlinked_counts(events, gpu, flows, step_table.height > 0,
                                 without_end.result() if without_end is not None else None),
        salvaged=raw.salvaged,
        salvage_skipped=tuple(raw.skipped),
        step_source=found.source,
    )
