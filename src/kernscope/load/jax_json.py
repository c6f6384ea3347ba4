"""JAX's JSON exports (``perfetto_trace.json.gz``, ``<host>.trace.json.gz``) on the Kineto table.

xprof writes Chrome JSON from the XSpace: processes named after the planes (``/device:GPU:0``,
``/host:CPU``), thread names from the lines, events **without** ``cat``, stats as string ``args``, and a
trailing empty event ``{}``. Read by the JSON decoder like any trace, then adapted here: the empty
events are dropped (counted in ``metadata["jax_json"]``), events of ``/device:GPU:N`` processes become
GPU activity (kernels; memcpy/memset by name) on device N with the thread id as stream. These exports
drop the launch events' correlation, the HLO programs and the step numbers, so kernels are not linked
to launches: the ``.xplane.pb`` of the same run is the complete record (``kernscope analyze <run dir>``
picks it).
"""

from __future__ import annotations

import re

import polars as pl

from ..model import RawTrace

_DEVICE = re.compile(r"^/device:GPU:(\d+)")


def is_jax_json(raw: RawTrace) -> bool:
    """Whether the trace's process names are XSpace plane names (a JAX/xprof JSON export)."""
    m = raw.meta_events
    if m.height == 0 or "meta_name" not in m.columns:
        return False
    names = m.filter(pl.col("name").cast(pl.String) == "process_name")["meta_name"].cast(pl.String).drop_nulls()
    return bool(names.str.contains(r"^/(device|host):").any())


def adapt(raw: RawTrace) -> RawTrace:
    """The JAX JSON export as kernscope's event table (see the module docstring)."""
    m = raw.meta_events.filter(pl.col("name").cast(pl.String) == "process_name")
    devices = {str(pid): int(mm.group(1)) for pid, name in m.select(pl.col("pid").cast(pl.String), pl.col("meta_name")).iter_rows()
               if name and (mm := _DEVICE.match(str(name)))}
    ev = raw.events
    empty = pl.col("ph").is_null() & pl.col("name").is_null() & pl.col("ts_missing")
    dropped = int(ev.select(empty.sum()).item())
    ev = ev.filter(~empty)
    pid = pl.col("pid").cast(pl.String)
    on_gpu = pid.is_in(list(devices)) & (pl.col("ph").cast(pl.String) == "X")
    low = pl.col("name").cast(pl.String).str.to_lowercase()
    gpu_cat = (pl.when(low.str.contains("memcpy|memorycopy|copybuffer")).then(pl.lit("gpu_memcpy"))
               .when(low.str.contains("memset|fillbuffer")).then(pl.lit("gpu_memset")).otherwise(pl.lit("kernel")))
    dtype = ev.schema["cat"]
    ev = ev.with_columns(
        pl.when(on_gpu & pl.col("cat").is_null()).then(gpu_cat).otherwise(pl.col("cat").cast(pl.String)).cast(dtype).alias("cat"),
        pl.when(on_gpu).then(pid.replace_strict(devices, default=None, return_dtype=pl.Int64)).otherwise(pl.col("device"))
        .alias("device"),
        pl.when(on_gpu).then(pl.col("tid").cast(pl.String).cast(pl.Int64, strict=False)).otherwise(pl.col("stream"))
        .alias("stream"),
    )
    meta = {**raw.metadata, "framework": "jax", "jax_json": {"empty_events_dropped": dropped, "gpu_processes": len(devices)}}
    return RawTrace(ev, meta, flows=raw.flows, meta_events=raw.meta_events, salvaged=raw.salvaged, skipped=raw.skipped,
                    projected_out=raw.projected_out, projected_first_ts=raw.projected_first_ts, readers=raw.readers)
