"""HTML views beyond one trace's report: sheets as sortable views (titles, key columns first), a multi-rank job,
and a benchmark directory. Formatting only: every number comes from the analysis results as they are."""

from __future__ import annotations

from typing import Any

import polars as pl

from ...analyze.bench_dir import BenchDir
from ...analyze.ranks import JobAnalysis
from ...scalars import as_float
from ..views import Section, layout, view

#: titles of known sheets (others get their name)
TITLES = {
    "ranks": "Per rank (all GPU activity; overlap = comm hidden under compute)",
    "rank_steps": "Per rank and step",
    "stragglers": "Straggler of every step (the rank the others waited for)",
    "collectives": "Collectives by process group and type",
    "collective_instances": "Collective instances matched across ranks",
    "collective_waits": "Wait per collective instance and rank",
    "queues": "GPU queue length per rank and stream",
    "findings": "Findings, by time to win back",
    "findings_by_kind": "Findings by kind (the same rule in the same place, over steps)",
    "critical_path": ("Critical path per rank and step (carryover: earlier steps' GPU work; last arriver: waiting for the "
                      "slowest rank)"),
    "unified_perf_summary": "Perf model: every op with shapes (FLOPs, bytes, roofline)",
    "diff_summary": "Diff: totals",
    "diff_categories": "Diff: GPU time by category (B − A)",
    "diff_libraries": "Diff: GPU time by library (B − A)",
    "diff_kernels": "Diff: kernels (B − A, by absolute delta)",
    "diff_ops": "Diff: CPU ops (B − A, by absolute delta)",
    "cells": "Benchmark cells: per input and impl (fastest first)",
}


def flat(df: pl.DataFrame) -> pl.DataFrame:
    """List columns joined with `` | `` (a table cell holds text or a number)."""
    lists = [c for c, t in df.schema.items() if isinstance(t, pl.List)]
    if not lists:
        return df
    return df.with_columns(pl.col(c).list.eval(pl.element().cast(pl.String)).list.join(" | ") for c in lists)


#: columns a reader looks at first, in this order, ahead of the sheet's others (names, shapes, parameters)
KEY_FIRST = ("name", "op_class", "category", "count", "kernel_time_us", "tflops_per_s", "tb_per_s", "pct_of_peak", "bound")


def key_first(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with the :data:`KEY_FIRST` columns it has first, so time and throughput are on the first screen."""
    first = [c for c in KEY_FIRST if c in df.columns]
    return df.select(*first, *[c for c in df.columns if c not in first])



layout("html", "job", lambda j: ("job", *j.tables()))
layout("html", "bench_dir", ("bench", "cells"))


@view("html", "job.job")
def _job(s: Section) -> dict[str, Any]:
    """A multi-rank job: per-rank stacked bars (compute, hidden comm, exposed comm, idle) and its facts."""
    from ...version import __version__

    j: JobAnalysis = s.result
    r = j.ranks.sort("rank")
    parts = ["compute", "hidden comm", "exposed comm", "idle"]
    values = []
    for row in r.iter_rows(named=True):
        comm, exposed = as_float(row["comm_us"]), as_float(row["exposed_comm_us"])
        values.append([as_float(row["compute_us"]), max(0.0, comm - exposed), exposed, as_float(row["idle_us"])])
    facts: dict[str, Any] = {"ranks": r.height, "world_size": j.world_size,
                             "failed": [f"{f.path}: {f.problem}" for f in j.failures], "notes": list(j.notes)}
    if j.stragglers.height:
        worst = j.stragglers.sort("wait_us", descending=True).row(0, named=True)
        w = as_float(worst["wait_us"])
        waited = f"{w / 1000:,.3f} ms" if w >= 1000 else f"{w:,.2f} µs"
        facts["worst_straggler"] = f"rank {worst['rank']} in {worst['step']}: the others waited {waited} for it"
    return {"facts": facts, "facts_title": "Job", "subtitle": f"kernscope {__version__} · multi-rank job",
            "charts": [{"name": "ranks", "title": "GPU time per rank (µs): compute, communication hidden under compute, "
                                                  "exposed communication, idle",
                        "steps": [f"rank {x}" for x in r["rank"].to_list()], "categories": parts, "values": values}]}


@view("html", "bench_dir.bench")
def _bench(s: Section) -> dict[str, Any]:
    """A benchmark directory: kernel time per (input, impl) as bars coloured by impl, and its facts."""
    from ...version import __version__

    b: BenchDir = s.result
    c = b.cells.sort("input", "impl")
    impls = sorted(c["impl"].unique().to_list())
    labels, values = [], []
    for row in c.iter_rows(named=True):
        labels.append(f"in{row['input']} {row['impl']}")
        values.append([as_float(row["kernel_time_us"]) if i == row["impl"] else 0.0 for i in impls])
    return {"facts_title": "Benchmark directory", "subtitle": f"kernscope {__version__} · benchmark directory",
            "facts": {"layout": b.layout, "cells": c.height, "inputs": c["input"].n_unique() if c.height else 0,
                      "impls": impls, "notes": list(b.notes)},
            "charts": [{"name": "bench", "title": "Kernel time per input and impl (µs, profiled step)",
                        "steps": labels, "categories": impls, "values": values}]}
