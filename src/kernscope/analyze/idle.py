"""Idle gaps of GPU work, classified by who was late: shared by the rank summaries and the findings.

A gap in the busy union of a group's GPU records (a rank, a step, a device) ends at a record; when that record
was launched after the gap began, the GPU ran dry waiting for the CPU (``host_wait``); when it was launched in
time and the gap is short, it is back-to-back launch overhead (``kernel_wait``); otherwise the GPU waited on
something else (events, other streams).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from ..intervals import merged
from .kernels import NS_PER_US

#: gaps shorter than this, before a kernel launched in time, count as launch overhead (µs)
KERNEL_WAIT_US = 10.0


def idle_breakdown(g: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per group of ``keys`` (rows ``ts``, ``end``, ``launch_ts`` in ns): the length of the busy union (``_busy``, ns)
    and its gaps, classified by the launch of the record that ends each gap (µs): ``host_wait_us`` (launched after
    the GPU went idle: the CPU was late; ``host_wait_gaps`` of them), ``kernel_wait_us`` (launched in time, gap
    under :data:`KERNEL_WAIT_US`), ``other_idle_us``. One numpy pass per group (a step, a device), not per event."""
    out: list[dict[str, Any]] = []
    for key, part in g.group_by(keys, maintain_order=True):
        ts = part["ts"].to_numpy().astype(np.int64)
        en = part["end"].to_numpy().astype(np.int64)
        launch = part["launch_ts"].fill_null(np.iinfo(np.int64).min).to_numpy().astype(np.int64)
        o = np.argsort(ts, kind="stable")
        ts, en, launch = ts[o], en[o], launch[o]
        s, e = merged(ts, en)
        row = dict(zip(keys, key))
        busy = int((e - s).sum())
        host = kern = other = 0.0
        late_gaps = 0
        if len(s) > 1:
            gap_start, gap = e[:-1], s[1:] - e[:-1]
            first = np.searchsorted(ts, s[1:], side="left")  # the record that starts each later segment
            late = launch[first] > gap_start
            quick = ~late & (gap < KERNEL_WAIT_US * NS_PER_US) & (launch[first] != np.iinfo(np.int64).min)
            host = float(gap[late].sum()) / NS_PER_US
            late_gaps = int(late.sum())
            kern = float(gap[quick].sum()) / NS_PER_US
            other = float(gap[~late & ~quick].sum()) / NS_PER_US
        out.append({**row, "_busy": busy, "host_wait_us": host, "kernel_wait_us": kern, "other_idle_us": other,
                    "host_wait_gaps": late_gaps})
    schema = pl.Schema({**{k: g.schema[k] for k in keys}, "_busy": pl.Int64(), "host_wait_us": pl.Float64(),
                        "kernel_wait_us": pl.Float64(), "other_idle_us": pl.Float64(), "host_wait_gaps": pl.Int64()})
    return pl.DataFrame(out, schema=schema)
