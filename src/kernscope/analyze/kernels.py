"""Kernel, category, op, launcher and step summaries: pure functions Trace -> DataFrame.

Input times are int64 ns; every summary column ending in ``_us`` is float **microseconds**,
``pct`` columns are percent of the summed GPU time of the rows summarized.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ..intervals import group_by_keys
from ..model import Trace
from ..scalars import as_int
from .categories import Categorizer

NS_PER_US = 1000.0


def gpu_table(
    trace: Trace,
    categorizer: Categorizer | None = None,
    *,
    step: int | None = None,
    kinds: Sequence[str] = ("kernel", "memcpy", "memset"),
    text_names: bool = True,
    text_keys: bool = True,
) -> pl.DataFrame:
    """GPU activity rows (optionally one step, optionally categorized) with string columns.

    Columns: name, kind, device, stream, ts, dur, end (ns), launcher, op_name, launch_name,
    graph_launch, step, correlation, launch_ts/dur/pid/tid, occupancy_pct and registers (the profiler's estimate and
    the kernel's registers per thread, null where the trace has none), and category/library/decided_by/decided_op when a
    categorizer is given (the category uses the launching op, or for JAX the HLO instruction, as a second
    signal: see ``launcher_categories``). ``text_names=False`` keeps ``name`` interned (Categorical), as the trace
    holds it: a 10 GB trace's 2.3 M kernel names are 0.66 GB as text; ``text_keys=False`` keeps the :data:`TEXT_KEYS`
    (kind, category, library, decided_by, decided_op) interned too (a 200 MB JAX profile's 1.4 M rows: ~110 MB as text).
    """
    g = trace.gpu
    wanted = g["kind"].is_in(list(kinds))
    if not wanted.all():  # (a filter that keeps every row would still copy every column)
        g = g.filter(wanted)
    if step is not None:
        g = g.filter(pl.col("step") == step)
    if categorizer is not None:
        from .launcher_categories import refine_by_launcher

        g = refine_by_launcher(trace, categorizer.categorize(g, platform=trace.platform), categorizer)
    cols = [
        pl.col("name").cast(pl.String) if text_names else pl.col("name"),
        "kind",
        "device",
        "stream",
        "ts",
        "dur",
        "end",
        "launcher",
        "op_name",
        "launch_name",
        "graph_launch",
        "step",
        "correlation",
        "launch_ts",
        "launch_dur",
        "launch_pid",
        "launch_tid",
    ]
    cols += [pl.col(c) if c in g.columns else pl.lit(None, pl.Int64).alias(c) for c in ("occupancy_pct", "registers")]
    if categorizer is not None:
        cols += ["category", "library", "decided_by", "decided_op"]
    out = g.select(cols)
    return with_text_keys(out) if text_keys else out


#: the GPU table's columns the summaries give as text (:func:`gpu_table` may keep them interned)
TEXT_KEYS = ("kind", "category", "library", "decided_by", "decided_op")


def with_text_keys(table: pl.DataFrame, *, names: bool = False) -> pl.DataFrame:
    """``table`` with its :data:`TEXT_KEYS` columns (and ``name`` with ``names``) as text."""
    wanted = (*TEXT_KEYS, "name") if names else TEXT_KEYS
    schema = table.schema
    interned = [c for c in wanted if c in schema and schema[c] != pl.String]
    return table.with_columns(pl.col(interned).cast(pl.String)) if interned else table


#: Collective-communication kernels (NCCL, RCCL, NVSHMEM, custom all-reduce): the timeline needs them
#: even when categories are off.
COMM_PATTERN = r"(?i)nccl|rccl|nvshmem|all_?reduce|allgather|all_gather|reduce_?scatter|alltoall|sendrecv|custom_?ar"


def mark_communication(table: pl.DataFrame, otherwise: str) -> pl.DataFrame:
    """Add ``category``: "Communication" for collective kernels, ``otherwise`` for the rest (one regex
    test per distinct name)."""
    names = table.select(pl.col("name").unique())
    names = names.with_columns(
        pl.when(pl.col("name").cast(pl.String).str.contains(COMM_PATTERN)).then(pl.lit("Communication")).otherwise(pl.lit(otherwise))
        .alias("category")
    )
    return table.join(names, on="name", how="left", maintain_order="left")


def rows_by(table: pl.DataFrame, keys: Sequence[str]) -> pl.DataFrame:
    """GPU rows grouped by ``keys``, each group as what a summary needs of it: ``_rows`` (rows), ``_n`` (rows with a
    duration) and the durations' ``_sum``, ``_min`` and ``_max`` (ns). The keys keep their types.

    Every summary (:func:`summarize`) rolls such groups up to its own keys, and :func:`kernscope.analyze.analyze`
    groups its rows once by all of its summaries' keys: one pass over the rows instead of one per summary (a 1 GB JAX
    profile has 7 M GPU rows)."""
    keys = list(dict.fromkeys(keys))
    # text keys are grouped interned, and the groups' keys turned back to text: grouping by several text columns
    # row-encoded every row's texts (0.9 GB for the 2.3 M kernels of a 10 GB trace)
    schema = table.schema
    text = [c for c in keys if schema[c] == pl.String]
    keyed = table.select(*dict.fromkeys([*keys, "dur"]))
    if text:
        keyed = keyed.with_columns(pl.col(text).cast(pl.Categorical))
    # (grouped by one integer a row where the keys allow it: intervals.group_by_keys)
    out = group_by_keys(keyed, keys, (
        pl.len().alias("_rows"), pl.col("dur").count().alias("_n"), pl.col("dur").sum().alias("_sum"),
        pl.col("dur").min().alias("_min"), pl.col("dur").max().alias("_max")))
    return out.with_columns(pl.col(text).cast(pl.String)) if text else out


def summarize(
    table: pl.DataFrame | None, by: Sequence[str], *, wall_ns: int | None = None, sort: bool = True,
    grouped: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Group GPU rows by ``by``: count, total/mean/min/max (µs), % of GPU time, and (``wall_ns`` given: the GPU
    wall span, ns) % of wall time (``pct_wall``; null when the span is 0).

    ``grouped``: the rows (those of ``table``, which is then not read) already grouped by keys that include ``by``
    (:func:`rows_by`). The result is the same either way: a group's mean is its durations' integer sum over their
    count, as polars' grouped mean is."""
    g = grouped if grouped is not None else rows_by(table, by)  # type: ignore[arg-type]
    by = list(dict.fromkeys(by))
    total = g["_sum"].sum() or 0
    # the interned keys are given as text (the launching op's too: the summaries' text columns are all String)
    gs = g.schema
    text = [c for c in by if gs[c] != pl.String and (c in TEXT_KEYS or isinstance(gs[c], (pl.Categorical, pl.Enum)))]
    s, n = pl.col("_sum").sum(), pl.col("_n").sum()
    out = g.group_by(by).agg(
        pl.col("_rows").sum().cast(gs["_rows"]).alias("count"),
        (s / NS_PER_US).alias("total_us"),
        (pl.when(n > 0).then(s / n) / NS_PER_US).alias("mean_us"),
        (pl.col("_min").min() / NS_PER_US).alias("min_us"),
        (pl.col("_max").max() / NS_PER_US).alias("max_us"),
    )
    if text:
        out = out.with_columns(pl.col(text).cast(pl.String))
    out = out.with_columns(
        (pl.col("total_us") * NS_PER_US * 100.0 / (total if total else 1)).alias("pct"),
    )
    if wall_ns is not None:  # (null where there is no wall span: no GPU rows, or none with a duration)
        share = pl.col("total_us") * NS_PER_US * 100.0 / wall_ns if wall_ns else pl.lit(None, pl.Float64)
        out = out.with_columns(share.alias("pct_wall"))
    if sort:
        out = out.sort(["total_us", *by], descending=[True] + [False] * len(by), nulls_last=True)
    return out


def wall_time_ns(table: pl.DataFrame) -> int:
    """Span from the first GPU activity start to the last end (ns)."""
    if table.height == 0:
        return 0
    return as_int(table["end"].max()) - as_int(table["ts"].min())


def _wall(table: pl.DataFrame, wall_ns: int | None) -> int:
    """``wall_ns`` when the caller knows it, else ``table``'s :func:`wall_time_ns`."""
    return wall_ns if wall_ns is not None else wall_time_ns(table)


def kernel_summary(table: pl.DataFrame, by: Sequence[str] = ("name", "launcher"), *,
                   grouped: pl.DataFrame | None = None, wall_ns: int | None = None) -> pl.DataFrame:
    """Kernels (kind == kernel) grouped by ``by`` (default: name and launching CPU op). ``grouped``: ``table``'s rows
    grouped by keys that include ``by`` and ``kind`` (:func:`rows_by`); ``wall_ns``: ``table``'s
    :func:`wall_time_ns` when known."""
    wall = _wall(table, wall_ns)
    if grouped is not None:
        return summarize(None, by, wall_ns=wall, grouped=grouped.filter(pl.col("kind") == "kernel"))
    # the grouped columns only: a copy of the whole table's kernel rows (names as text) was most of its memory
    k = table.select(*dict.fromkeys([*by, "dur", "kind"])).filter(pl.col("kind") == "kernel")
    return summarize(k, by, wall_ns=wall)


def category_summary(table: pl.DataFrame, *, grouped: pl.DataFrame | None = None,
                     wall_ns: int | None = None) -> pl.DataFrame:
    """All GPU activity grouped by category (needs a categorized table). ``grouped``, ``wall_ns``: as for
    :func:`kernel_summary`."""
    return summarize(table, ["category"], wall_ns=_wall(table, wall_ns), grouped=grouped)


def library_summary(table: pl.DataFrame, *, grouped: pl.DataFrame | None = None,
                    wall_ns: int | None = None) -> pl.DataFrame:
    """All GPU activity grouped by library, who wrote the kernel (cuBLAS, NCCL, Triton, XLA, ...; needs a categorized
    table), with ``kernels``: the distinct kernel names of each. ``grouped``, ``wall_ns``: as for :func:`kernel_summary`."""
    per = summarize(table, ["library"], wall_ns=_wall(table, wall_ns), grouped=grouped)
    src = grouped if grouped is not None else table
    names = (src.lazy().filter(pl.col("kind") == "kernel").group_by(pl.col("library").cast(pl.String))
             .agg(pl.col("name").n_unique().cast(pl.Int64).alias("kernels")).collect())
    return (per.join(names, on="library", how="left", maintain_order="left")
            .with_columns(pl.col("kernels").fill_null(0))
            .select("library", "kernels", *[c for c in per.columns if c != "library"]))


#: the columns of :func:`source_summary`
SOURCE_SCHEMA = {"source": pl.String, "function": pl.String, "kernels": pl.Int64, "top_kernel": pl.String,
                 "count": pl.UInt32, "total_us": pl.Float64, "mean_us": pl.Float64, "min_us": pl.Float64,
                 "max_us": pl.Float64, "pct": pl.Float64, "pct_wall": pl.Float64}


def source_summary(table: pl.DataFrame | None, *, wall_ns: int | None = None,
                   grouped: pl.DataFrame | None = None) -> pl.DataFrame:
    """GPU time by the line of the user's code each GPU row's work came from: ``table`` is
    :func:`kernscope.analyze.sources.source_rows`' (``source`` as ``path:line``, ``function``: a JAX/XLA profile's
    from its HLO, the innermost frame of the user's code as JAX records it, or a PyTorch trace's from its Python
    stacks). ``source``, ``function``, ``kernels`` (distinct kernel names), ``top_kernel`` (the kernel of most time
    there), then :func:`summarize`'s columns (% of all GPU time: rows with no line, XLA's copies and memsets, the
    instructions XLA added, PyTorch launches under no frame of the user's, are one row with a null ``source``). Empty
    (with :data:`SOURCE_SCHEMA`) where no row has a line. ``grouped``: ``table``'s rows grouped by
    :data:`SOURCE_KEYS` (:func:`rows_by`; ``table`` is then not read, and ``wall_ns`` must be given): the same
    result, as the parts of a profile analyzed a time window at a time give it."""
    if grouped is None:
        if table is None or "source" not in table.columns or table["source"].null_count() == table.height:
            return pl.DataFrame(schema=SOURCE_SCHEMA)
        grouped = rows_by(table, SOURCE_KEYS)
        wall_ns = _wall(table, wall_ns)
    if grouped["source"].null_count() == grouped.height:
        return pl.DataFrame(schema=SOURCE_SCHEMA)
    by = ["source", "function"]
    per = summarize(None, by, wall_ns=wall_ns, grouped=grouped)
    # each line's kernels: how many names, and the one of most time (ties: the first name in text order)
    kernels = (grouped.lazy().filter(pl.col("kind") == "kernel")
               .group_by(*by, pl.col("name")).agg(pl.col("_sum").sum().alias("_t"))
               .with_columns(pl.col("name").cast(pl.String))
               .sort("_t", "name", descending=[True, False], nulls_last=True)
               .group_by(by).agg(pl.len().cast(pl.Int64).alias("kernels"), pl.col("name").first().alias("top_kernel"))
               .with_columns(pl.col(by).cast(pl.String)).collect())
    out = (per.join(kernels, on=by, how="left", maintain_order="left", nulls_equal=True)
           .with_columns(pl.col("kernels").fill_null(0)))
    return out.select(list(SOURCE_SCHEMA)).cast(SOURCE_SCHEMA)  # type: ignore[arg-type]


#: what :func:`source_summary` groups its rows by (:func:`rows_by`)
SOURCE_KEYS = ("source", "function", "name", "kind")


def op_summary(table: pl.DataFrame, *, grouped: pl.DataFrame | None = None, wall_ns: int | None = None) -> pl.DataFrame:
    """GPU time by launching CPU op (graph kernels count under their graph launch). ``grouped``, ``wall_ns``: as for
    :func:`kernel_summary`."""
    return summarize(table, ["launcher"], wall_ns=_wall(table, wall_ns), grouped=grouped)


def op_category_summary(table: pl.DataFrame, *, grouped: pl.DataFrame | None = None,
                        wall_ns: int | None = None) -> pl.DataFrame:
    """GPU time by category over all launchers (like TraceLens ``ops_summary_by_category``). ``grouped``,
    ``wall_ns``: as for :func:`kernel_summary`."""
    return summarize(table, ["category", "library"], wall_ns=_wall(table, wall_ns), grouped=grouped)


def launcher_category_summary(table: pl.DataFrame, *, grouped: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per launcher and category: count, total time, % of that launcher's GPU time.

    This is the grouped view for graph launches: what dominates ``cudaGraphLaunch``. ``grouped``: as for
    :func:`kernel_summary`.
    """
    per = summarize(table, ["launcher", "category"], sort=False, grouped=grouped)
    launcher_total = pl.col("total_us").sum().over("launcher")
    return (
        per.with_columns((pl.col("total_us") * 100.0 / launcher_total).alias("pct_of_launcher"))
        .with_columns(launcher_total.alias("_lt"))
        .sort(["_lt", "launcher", "total_us", "category"], descending=[True, False, True, False])
        .drop("_lt")
    )


def step_category_summary(trace: Trace, table: pl.DataFrame) -> pl.DataFrame:
    """GPU time (µs) per step and category, steps in time order (for per-step stacked bars)."""
    # (grouped by one integer a row: polars row-encodes two keys, 0.2 s of a 1 GB JAX profile's 6.7 M rows)
    per = group_by_keys(table.select("step", "category", "dur").filter(pl.col("step").is_not_null()), ["step", "category"],
                        ((pl.col("dur").sum() / NS_PER_US).alias("total_us"),))
    return (trace.steps.select("step", "name", "start").join(per.with_columns(pl.col("category").cast(pl.String)), on="step",
                                                              how="inner")
            .sort(["start", "category"]).select("step", "name", "category", "total_us"))


def step_summary(trace: Trace, table: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per ``ProfilerStep#N``: CPU window (µs from trace start) and the GPU work launched in it."""
    g = table if table is not None else gpu_table(trace)
    t0 = trace.t0
    per = g.group_by("step").agg(
        (pl.col("kind") == "kernel").sum().alias("kernel_count"),
        (pl.when(pl.col("kind") == "kernel").then(pl.col("dur")).otherwise(0).sum() / NS_PER_US).alias("kernel_time_us"),
        pl.len().alias("gpu_event_count"),
        (pl.col("dur").sum() / NS_PER_US).alias("gpu_time_us"),
        ((pl.col("end").max() - pl.col("ts").min()) / NS_PER_US).alias("gpu_span_us"),
    )
    s = trace.steps.join(per, on="step", how="left")
    # (ns to µs in numpy: polars divides a short column exactly and a longer one by the reciprocal, so a step's time
    # took another last digit in a profile's time window than in the whole profile)
    ns = s.select((pl.col("start") - t0).alias("start_us"), (pl.col("end") - t0).alias("end_us"),
                  (pl.col("end") - pl.col("start")).alias("cpu_duration_us"))
    s = s.with_columns(pl.Series(c, ns[c].cast(pl.Float64).to_numpy() / NS_PER_US).fill_nan(None) for c in ns.columns)
    return s.select(
        "step",
        "name",
        "kind",
        "phase",
        "start_us",
        "end_us",
        "cpu_duration_us",
        pl.col("kernel_count").fill_null(0).cast(pl.Int64),
        pl.col("kernel_time_us").fill_null(0.0),
        pl.col("gpu_event_count").fill_null(0).cast(pl.Int64),
        pl.col("gpu_time_us").fill_null(0.0),
        "gpu_span_us",
    ).sort("step")
