"""The host trace with intra-kernel records under their kernels: one Chrome/Kineto JSON file (Perfetto UI and
chrome://tracing open it; ``kernscope analyze`` still reads it). Formatting only: the placement is
:func:`kernscope.intra.align.align`'s.

The host trace's events are copied as they are; each aligned kernel's records become ``X`` events in the
GPU's process (the kernel's own ``pid``), on threads named ``stream S ↳ KERNEL · SM n lane k`` placed right
after the stream's row, with ``args`` block, group, SM and the launch.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from typing import Any

import msgspec
import polars as pl

from ..intra.align import Alignment, placed
from ..model import Trace

#: thread ids of the added rows: above any stream or OS thread id Kineto writes for a GPU process
TID_BASE = 1 << 40


def _pid(p: Any) -> Any:
    """A pid as the trace wrote it: the model keeps pids as strings; Kineto writes GPU pids as numbers."""
    s = str(p)
    return int(s) if s.lstrip("-").isdigit() else s


def _rows(al: Alignment, trace: Trace, index: int) -> tuple[bytes, list[dict[str, Any]]]:
    """(X events as comma-joined JSON objects, thread metadata) of one alignment's placed records."""
    t = placed(al)
    if t.height == 0:
        return b"", []
    pids = trace.gpu.select(pl.col("idx").alias("gpu_idx"), pl.col("pid").cast(pl.String))
    t = (t.join(pids, on="gpu_idx", how="left")
         .with_columns((TID_BASE + pl.lit(index, pl.Int64) * (1 << 32) + pl.col("stream").cast(pl.Int64) * (1 << 20)
                        + pl.col("sm").cast(pl.Int64) * 64 + pl.col("lane")).alias("tid")))
    numeric = t["pid"].str.contains(r"^-?\d+$").all()  # the trace's pid values as written: 0, not "0"
    events = t.select(
        pl.lit("X").alias("ph"), pl.col("task").cast(pl.String).alias("name"), pl.lit("intra_kernel").alias("cat"),
        pl.col("pid").cast(pl.Int64) if numeric else pl.col("pid"), "tid",
        (pl.col("start_ns") / 1000.0).alias("ts"), ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("dur"),
        pl.struct("block", "group", "sm", "launch").alias("args"))
    body = events.write_ndjson().strip().replace("\n", ",").encode()  # one vectorized writer, no loop per record
    meta: list[dict[str, Any]] = []
    for r in t.select("pid", "tid", "stream", "sm", "lane").unique().sort("pid", "tid").iter_rows(named=True):
        pid = _pid(r["pid"]) if numeric else r["pid"]  # one per track (SMs x lanes), not per record
        label = f"stream {r['stream']} \u21b3 {al.kernel} \u00b7 SM {r['sm']} lane {r['lane']}"
        meta.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": r["tid"], "args": {"name": label}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": r["tid"],
                     "args": {"sort_index": int(r["stream"]) * 100_000 + int(r["sm"]) * 64 + int(r["lane"]) + 1}})
    return body, meta


def merged_json(host: bytes, trace: Trace, alignments: Sequence[Alignment]) -> bytes:
    """The host trace's JSON text (``host``, decompressed) with the aligned records added at the end of its
    ``traceEvents``. The host's events are spliced in as raw text (never decoded and re-encoded)."""
    try:
        doc = msgspec.json.decode(host, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError:  # a bare array of events
        doc = {"traceEvents": msgspec.Raw(host)}
    parts: list[bytes] = []
    for k, al in enumerate(alignments):
        body, meta = _rows(al, trace, k)
        parts += [msgspec.json.encode(meta)[1:-1], body]
    added = b",".join(p for p in parts if p)
    old = bytes(doc.get("traceEvents") or b"[]").strip()
    inner = old[1:-1].strip()
    doc["traceEvents"] = msgspec.Raw(b"[" + inner + (b"," if inner and added else b"") + added + b"]")
    return msgspec.json.encode(doc)


def encode(data: bytes, path: str) -> bytes:
    """``data`` gzipped when ``path`` ends in ``.gz``."""
    return gzip.compress(data, compresslevel=6) if path.endswith(".gz") else data
