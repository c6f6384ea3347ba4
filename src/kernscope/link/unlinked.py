"""Counts of what could not be linked, by kind: nothing is dropped silently."""

from __future__ import annotations

import polars as pl

from .captures import CAPTURE_BEGIN, capture_windows, in_windows
from .kinds import named
from .steps import earlier_step_runs

#: Runtime/driver calls that queue GPU work (their correlation should find a GPU event).
LAUNCH_LIKE = r"(?i)(launchkernel|graphlaunch|modulelaunchkernel|extlaunchkernel|launchcooperativekernel|memcpy|memset)"


def flows_without_end(flows: pl.DataFrame) -> int:
    """The flows (by category and id) that start and never end: the distinct starts with no end of theirs, one lazy
    query on the interned phase (a group-by of every flow on its text took a 207 MB trace's run to its peak: +73 MB and
    0.1 s for 333 k flows; this takes +15 MB, 0.03 s). It reads the flow arrows alone: :func:`kernscope.link.build.link`
    starts it on a thread of its own while the GPU rows are linked."""
    by = ["cat", "flow_id"]
    started = flows.lazy().filter(pl.col("ph") == "s").select(by).unique()
    ended = flows.lazy().filter(pl.col("ph").is_in(["f", "t"])).select(by)
    return int(started.join(ended, on=by, how="anti", nulls_equal=True).select(pl.len()).collect().item())


def unlinked_counts(events: pl.DataFrame, gpu: pl.DataFrame, flows: pl.DataFrame, has_steps: bool,
                    without_end: int | None = None) -> dict[str, int]:
    """``gpu_without_launch``, ``gpu_without_correlation``, ``gpu_launched_before_window``,
    ``launches_without_gpu``, ``launches_in_graph_capture`` (of those, the ones made while their thread was capturing
    a CUDA/HIP graph: they have no GPU record of their own, the graph's replays run them), ``launches_without_op``,
    ``gpu_outside_steps``, ``gpu_in_earlier_step_runs`` (of those, the ones launched in an earlier run of a step's
    annotation, which the step is not: PyTorch Lightning opens ``ProfilerStep#2`` twice), ``flows_without_end``
    (``without_end``: :func:`flows_without_end` of ``flows`` where the caller counted it)."""
    is_runtime = pl.col("kind").is_in(["runtime", "driver"])
    runtime = events.select("kind", "correlation", "name").filter(is_runtime)
    captures = named(runtime, CAPTURE_BEGIN).height > 0
    if captures:  # (the runtime calls' threads and times read only where a graph capture is)
        runtime = events.select("kind", "correlation", "name", "pid", "tid", "ts", "end").filter(is_runtime)
    first_corr = runtime["correlation"].min()
    gpu_corr = gpu["correlation"].drop_nulls().unique().implode()
    launch_like = named(runtime.filter(pl.col("correlation").is_not_null()), LAUNCH_LIKE)
    no_gpu = launch_like.filter(~pl.col("correlation").is_in(gpu_corr))
    captured = int(in_windows(no_gpu, capture_windows(runtime)).sum()) if captures and no_gpu.height else 0
    if without_end is None:
        without_end = flows_without_end(flows)
    before = (
        gpu.filter(pl.col("launch_idx").is_null() & (pl.col("correlation") < first_corr)).height
        if first_corr is not None
        else 0
    )
    return {
        "gpu_without_launch": int(gpu["launch_idx"].null_count()),
        "gpu_without_correlation": int(gpu["correlation"].null_count()),
        "gpu_launched_before_window": int(before),
        "launches_without_gpu": int(no_gpu.height),
        "launches_in_graph_capture": captured,
        # XLA: the HLO op (op_name) is the launching op, not an enclosing host event
        "launches_without_op": int(
            gpu.filter(pl.col("launch_idx").is_not_null() & pl.col("op_idx").is_null()
                       & (pl.col("hlo_op").is_null() if "hlo_op" in gpu.columns else pl.lit(True)))["launch_idx"].n_unique()
        ),
        "gpu_outside_steps": int(gpu["step"].null_count()) if has_steps else 0,
        "gpu_in_earlier_step_runs": _in_earlier_runs(events, gpu) if has_steps and gpu["step"].null_count() else 0,
        "flows_without_end": int(without_end),
    }


def _in_earlier_runs(events: pl.DataFrame, gpu: pl.DataFrame) -> int:
    """GPU records in no step whose launch is inside an earlier run of a ``ProfilerStep#N`` annotation
    (:func:`~kernscope.link.steps.earlier_step_runs`)."""
    out = gpu.filter(pl.col("step").is_null() & pl.col("launch_ts").is_not_null())
    return int(in_windows(out, earlier_step_runs(events), at="launch_ts", by=()).sum())
