"""Step windows and the step of each GPU event, chosen by its *launch* time.

Windows come from ``ProfilerStep#N`` annotations by default. Step tables have the columns
``step`` (Int64), ``name`` (String), ``start``, ``end`` (ns) and ``kind`` (String: e.g. "train",
"decode", "prefill"; null when the marker says nothing about it).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

STEP_PATTERN = r"^ProfilerStep#(\d+)$"
STEP_SCHEMA = {"step": pl.Int64, "name": pl.String, "start": pl.Int64, "end": pl.Int64, "kind": pl.String}


@dataclass(frozen=True)
class StepSpec:
    """How to find steps: ``marker=None`` uses ``ProfilerStep#N``."""

    marker: str | None = None


@dataclass(frozen=True)
class FoundSteps:
    table: pl.DataFrame
    source: str  #: "ProfilerStep", "marker:<pattern>", "auto" or "none"


def profiler_steps(events: pl.DataFrame) -> pl.DataFrame:
    """One row per CPU-side ``ProfilerStep#N``: step, name, start, end (ns), kind (null)."""
    s = events.filter(
        pl.col("kind").is_in(["user_annotation", "cpu_op"]) & pl.col("name").cast(pl.String).str.contains(STEP_PATTERN)
    )
    t = (
        s.group_by(pl.col("name").cast(pl.String))
        .agg(pl.col("ts").min().alias("start"), pl.col("end").max().alias("end"))
        .with_columns(
            pl.col("name").str.extract(STEP_PATTERN, 1).cast(pl.Int64, strict=False).alias("step"),
            pl.lit(None, dtype=pl.String).alias("kind"),
        )
    )
    bad = t.filter(pl.col("step").is_null())
    if bad.height:
        raise StepNumberError(str(bad["name"][0]), bad.height)
    return t.select(list(STEP_SCHEMA)).sort("start")


class StepNumberError(ValueError):
    """A ``ProfilerStep#N`` whose N does not fit int64."""

    def __init__(self, name: str, count: int) -> None:
        super().__init__(f"step {name[:60]!r} has a number that does not fit int64 ({count:,} such steps)")
        self.name = name
        self.count = count


def find_steps(events: pl.DataFrame, gpu: pl.DataFrame, spec: StepSpec) -> FoundSteps:
    """Step windows per ``spec``."""
    t = profiler_steps(events)
    return FoundSteps(t, "ProfilerStep" if t.height else "none")


def assign_steps(gpu: pl.DataFrame, step_table: pl.DataFrame) -> pl.DataFrame:
    """Add ``step`` to GPU rows: the step whose CPU window contains the launch (null if none)."""
    if step_table.height == 0 or gpu.height == 0:
        return gpu.with_columns(pl.lit(None, dtype=pl.Int64).alias("step"))
    windows = step_table.select(
        pl.col("start").alias("launch_ts"), pl.col("step"), pl.col("end").alias("_step_end")
    ).sort("launch_ts")
    keyed = gpu.with_row_index("_r").sort("launch_ts", nulls_last=True)
    valid = keyed.filter(pl.col("launch_ts").is_not_null())
    joined = valid.join_asof(windows, on="launch_ts", strategy="backward")
    joined = joined.with_columns(
        pl.when(pl.col("launch_ts") < pl.col("_step_end")).then(pl.col("step")).otherwise(None).alias("step")
    ).drop("_step_end")
    rest = keyed.filter(pl.col("launch_ts").is_null()).with_columns(pl.lit(None, dtype=pl.Int64).alias("step"))
    return pl.concat([joined, rest], how="vertical_relaxed").sort("_r").drop("_r")
