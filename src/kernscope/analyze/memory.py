"""Memory over time from a trace recorded with ``profile_memory=True`` (Kineto's ``[memory]`` instant events), or a
JAX profile (XLA's ``MemoryAllocation``/``MemoryDeallocation`` events: the block's size and address, the
allocator's bytes in use after it, its name ``GPU_0_bfc`` saying the device).

Each ``[memory]`` event is one allocation (``Bytes`` > 0) or free (< 0) by the caching allocator, with the
device's ``Total Allocated`` and ``Total Reserved`` bytes after it, the block's address and the thread that
asked. A whole load reads their args into the event table (``mem_*`` columns); a load that skipped them (a projection
not naming them) has them read from the file on first use (:func:`~kernscope.load.opargs.read_memory_args`). Everything
here is vectorized over events:

* **per device**: allocated and reserved bytes over time, the peak (equal to the largest ``Total Allocated``
  in the file) with the CPU op and step that reached it;
* **per op** (the innermost CPU op around the event on its thread): allocations, bytes, frees, the lifetime
  of its blocks (allocation to the free of the same address), and blocks still held at the trace's end;
* **per step**: allocated at the step's start and end (growth across steps), and the step's peak.

Times are ns on the trace's clock; sizes are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from ..model import Trace
from .attribute import innermost_op_pairs

#: Kineto's ``Device Type`` values (c10::DeviceType)
DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip", 7: "fpga",
                8: "maia", 9: "xla", 10: "vulkan", 11: "metal", 12: "xpu", 13: "mps", 14: "meta", 15: "hpu",
                16: "ve", 17: "lazy", 18: "ipu", 19: "mtia", 20: "privateuse1"}


@dataclass(frozen=True)
class MemoryTimeline:
    """Results of :func:`memory_timeline` (bytes, ns on the trace's clock; ``*_at_ns`` since the trace's start)."""

    #: one row per ``[memory]`` event: idx, ts, device_type, device, bytes (+ alloc, - free), allocated, reserved,
    #: addr, op_idx, op (innermost CPU op around it on its thread), step
    events: pl.DataFrame
    #: per device: events, peak_allocated, peak_at_ns, peak_op, peak_step, peak_reserved, allocated_at_end
    devices: pl.DataFrame
    #: per (device, op): allocations, allocated_bytes, frees, freed_bytes, mean_lifetime_us, held_blocks, held_bytes
    ops: pl.DataFrame
    #: per (device, step): allocated_at_start, allocated_at_end, growth, peak_allocated, peak_reserved
    steps: pl.DataFrame
    notes: tuple[str, ...] = ()
    path: str = ""  #: the trace's path

    kind: ClassVar[str] = "memory"

    @property
    def title(self) -> str:
        return self.path

    def facts_dict(self) -> dict[str, Any]:
        """``trace`` (path) and ``events`` (how many ``[memory]`` events)."""
        return {"trace": self.path, "events": self.events.height}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``devices``, ``steps``, ``ops`` (bytes; ``*_at_ns`` since the trace's start)."""
        return {"devices": self.devices, "steps": self.steps, "ops": self.ops}


def _innermost_ops(host: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """``ev`` (``_row``, pid, tid, ts) with ``op_idx``/``op``: the innermost of the ``host`` events (idx, name, pid,
    tid, ts, end) of the same thread whose [ts, end] holds the event
    (:func:`~kernscope.analyze.attribute.innermost_op_pairs`, an event as a zero-length launch)."""
    ops = host.select("idx", "pid", "tid", "ts", "end")
    probe = ev.select(pl.col("_row").cast(pl.UInt32).alias("_g"), pl.col("pid").alias("launch_pid"),
                      pl.col("tid").alias("launch_tid"), pl.col("ts").alias("launch_ts"), pl.lit(0, pl.Int64).alias("dur"))
    pairs = innermost_op_pairs(ops, probe)
    names = host.select(pl.col("idx").alias("op_idx"), pl.col("name").cast(pl.String).alias("op"))
    best = pairs.select(pl.col("_g").cast(pl.UInt32).alias("_row"), "op_idx").join(names, on="op_idx", how="left")
    return ev.with_columns(pl.col("_row").cast(pl.UInt32)).join(best, on="_row", how="left")


#: the events of a memory timeline (:func:`memory_events`)
EVENT_SCHEMA = {"idx": pl.Int64, "ts": pl.Int64, "device_type": pl.String, "device": pl.Int64, "bytes": pl.Int64,
                "allocated": pl.Int64, "reserved": pl.Int64, "addr": pl.Int64, "op_idx": pl.Int64, "op": pl.String,
                "step": pl.Int64}
#: XLA's allocator events (a JAX profile's host plane): the block's size, the allocator's bytes in use after it
XLA_MEMORY_EVENTS = ("MemoryAllocation", "MemoryDeallocation")


def _kineto_memory(trace: Trace) -> pl.DataFrame | None:
    """Kineto's ``[memory]`` events: idx, pid, tid, ts, device_type, device, bytes, total_allocated, total_reserved, addr.
    Their args as a whole load reads them (:data:`~kernscope.load.argspec.MEMORY_ARGS`); where the load skipped them
    (a projection that does not name them), read from the file again (:func:`~kernscope.load.opargs.read_memory_args`)."""
    from ..load.argspec import MEMORY_ARGS
    from ..load.opargs import MEMORY_SCHEMA, read_memory_args

    mem = trace.events.filter(pl.col("name") == "[memory]")
    ev = mem.select("idx", "pid", "tid", "ts")
    if ev.height == 0:
        return None
    if all(c in mem.columns for c in MEMORY_ARGS) and any(mem[c].null_count() < mem.height for c in MEMORY_ARGS):
        # (an event with none of them: no row, as the file's second read gives none for an event without args)
        named = {"mem_allocated": "total_allocated", "mem_reserved": "total_reserved", "mem_bytes": "bytes",
                 "mem_device": "device", "mem_device_type": "device_type", "mem_addr": "addr"}
        args = mem.select("idx", *[pl.col(c).alias(named[c]) for c in MEMORY_ARGS]).select(list(MEMORY_SCHEMA)).filter(
            pl.any_horizontal(pl.col(list(named.values())).is_not_null()))
    elif str(trace.path).endswith((".json", ".json.gz", ".gz")):
        args = read_memory_args(trace.path, ev["idx"].to_list())
    else:
        return None
    ev = (ev.join(args, on="idx", how="inner")
          .with_columns(pl.col("device_type").replace_strict(DEVICE_TYPES, default=None, return_dtype=pl.String)
                        .fill_null(pl.col("device_type").cast(pl.String)).alias("device_type")))
    # the CPU allocator keeps no reserve: its events say Total Reserved 0 whatever they hold (null: not reported)
    return ev.with_columns(pl.when(pl.col("device_type") != "cpu").then(pl.col("total_reserved")).alias("total_reserved"))


def _xla_memory(trace: Trace) -> pl.DataFrame | None:
    """XLA's allocator events (``MemoryAllocation``/``MemoryDeallocation`` with ``allocation_bytes``; a JAX profile
    records them by default) in the columns of :func:`_kineto_memory`: the allocator's device from its name
    (``GPU_0_bfc``: gpu 0; another allocator: its name, device -1), ``bytes`` signed, ``bytes_allocated`` after the
    event as the total; the BFC allocator reports no reserved bytes (0: null here)."""
    ev = trace.events
    if "allocation_bytes" not in ev.columns:
        return None
    ev = ev.filter(pl.col("name").cast(pl.String).is_in(XLA_MEMORY_EVENTS) & pl.col("allocation_bytes").is_not_null())
    if ev.height == 0:
        return None
    alloc = pl.col("allocator_name").cast(pl.String)
    kind = alloc.str.extract(r"(?i)^(gpu|tpu|cpu)_\d+", 1).str.to_lowercase()
    sign = pl.when(pl.col("name").cast(pl.String) == "MemoryAllocation").then(1).otherwise(-1)
    return ev.select(
        "idx", "pid", "tid", "ts", pl.coalesce(kind, alloc, pl.lit("?")).alias("device_type"),
        pl.coalesce(alloc.str.extract(r"(?i)^(?:gpu|tpu|cpu)_(\d+)", 1).cast(pl.Int64), pl.lit(-1)).alias("device"),
        (pl.col("allocation_bytes") * sign).alias("bytes"), pl.col("bytes_allocated").alias("total_allocated"),
        pl.when(pl.col("bytes_reserved") > 0).then(pl.col("bytes_reserved")).alias("total_reserved"),
        (pl.col("addr") if "addr" in ev.columns else pl.lit(None, pl.Int64)).alias("addr"))


def memory_events(trace: Trace) -> pl.DataFrame:
    """One row per memory event of ``trace`` (Kineto's ``[memory]``, XLA's allocator events) with its sizes, op and
    step (empty when there are none)."""
    ev = _kineto_memory(trace)
    # the op of an event: Kineto's innermost CPU op; XLA's allocations happen in its runtime's annotations
    # (AllocateOutputBuffersWithInputReuse, Execute ...), not in an op
    host = trace.cpu_ops
    if ev is None:
        ev = _xla_memory(trace)
        host = trace.events.filter(pl.col("kind").is_in(["cpu_op", "user_annotation"]) & (pl.col("end") > pl.col("ts")))
    if ev is None or ev.height == 0:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    ev = _innermost_ops(host, ev.with_row_index("_row"))
    steps = trace.steps.select(pl.col("start").alias("_s"), pl.col("end").alias("_e"), "step").sort("_s")
    if steps.height:
        ev = (ev.sort("ts").join_asof(steps, left_on="ts", right_on="_s", strategy="backward")
              .with_columns(pl.when(pl.col("ts") < pl.col("_e")).then(pl.col("step")).alias("step")).drop("_s", "_e"))
    else:
        ev = ev.with_columns(pl.lit(None, pl.Int64).alias("step"))
    return (ev.rename({"total_allocated": "allocated", "total_reserved": "reserved"})
            .sort("ts", "idx").select(list(EVENT_SCHEMA)).cast(EVENT_SCHEMA))  # type: ignore[arg-type]


def memory_timeline(trace: Trace) -> MemoryTimeline | None:
    """The memory timeline of ``trace``, or None when it has no memory events (a PyTorch trace not recorded with
    ``profile_memory=True``; a JAX profile without XLA's allocator events)."""
    ev = memory_events(trace)
    if ev.height == 0:
        return None
    t0 = trace.t0
    dev = ["device_type", "device"]
    peak_rows = (ev.sort("allocated", "ts", "idx", descending=[True, False, False]).unique(dev, keep="first")
                 .select(*dev, pl.col("allocated").alias("peak_allocated"), (pl.col("ts") - t0).alias("peak_at_ns"),
                         pl.col("op").alias("peak_op"), pl.col("step").alias("peak_step")))
    devices = (ev.group_by(dev).agg(pl.len().alias("events"), pl.col("reserved").max().alias("peak_reserved"),
                                    pl.col("allocated").sort_by("ts").last().alias("allocated_at_end"))
               .join(peak_rows, on=dev).sort(dev)
               .select(*dev, "events", "peak_allocated", "peak_at_ns", "peak_op", "peak_step", "peak_reserved",
                       "allocated_at_end"))
    # lifetimes: an allocation ends at the next event of the same block (device, address) when that is a free
    blocks = ev.sort(*dev, "addr", "ts", "idx").with_columns(
        pl.col("bytes").shift(-1).over(*dev, "addr").alias("_next_bytes"),
        pl.col("ts").shift(-1).over(*dev, "addr").alias("_next_ts"))
    allocs = blocks.filter(pl.col("bytes") > 0).with_columns(
        pl.when(pl.col("_next_bytes") < 0).then(pl.col("_next_ts") - pl.col("ts")).alias("_life"))
    per_op_alloc = allocs.group_by(*dev, "op").agg(
        pl.len().alias("allocations"), pl.col("bytes").sum().alias("allocated_bytes"),
        (pl.col("_life").mean() / 1000.0).alias("mean_lifetime_us"),
        pl.col("_life").is_null().sum().alias("held_blocks"),
        pl.col("bytes").filter(pl.col("_life").is_null()).sum().alias("held_bytes"))
    per_op_free = ev.filter(pl.col("bytes") < 0).group_by(*dev, "op").agg(
        pl.len().alias("frees"), (-pl.col("bytes")).sum().alias("freed_bytes"))
    ops = (per_op_alloc.join(per_op_free, on=[*dev, "op"], how="full", coalesce=True, nulls_equal=True)
           .with_columns(pl.col("allocations", "allocated_bytes", "frees", "freed_bytes", "held_blocks", "held_bytes")
                         .fill_null(0))
           .select(*dev, "op", "allocations", "allocated_bytes", "frees", "freed_bytes", "mean_lifetime_us", "held_blocks",
                   "held_bytes")
           # (a total order: an op on two devices tied on bytes came out in either order from run to run)
           .sort("allocated_bytes", "op", *dev, descending=[True, False, False, False], nulls_last=True))
    steps = _per_step(trace, ev)
    notes = []
    if ev["op"].null_count():
        notes.append(f"{ev['op'].null_count():,} of {ev.height:,} memory events happen outside any CPU op (op empty)")
    unpaired = int(ev.filter(pl.col("bytes") < 0).height) - int(allocs.filter(pl.col("_life").is_not_null()).height)
    if unpaired > 0:
        notes.append(f"{unpaired:,} frees of blocks allocated before the trace began")
    return MemoryTimeline(ev, devices, ops, steps, tuple(notes), trace.path)


def _per_step(trace: Trace, ev: pl.DataFrame) -> pl.DataFrame:
    """Per (device, step): allocated before the step's first event and after its last, and the step's peak."""
    schema = {"device_type": pl.String, "device": pl.Int64, "step": pl.Int64, "allocated_at_start": pl.Int64,
              "allocated_at_end": pl.Int64, "growth": pl.Int64, "peak_allocated": pl.Int64, "peak_reserved": pl.Int64}
    inside = ev.filter(pl.col("step").is_not_null())
    if inside.height == 0:
        return pl.DataFrame(schema=schema)
    dev = ["device_type", "device"]
    per = (inside.sort("ts", "idx").group_by(*dev, "step").agg(
        (pl.col("allocated").first() - pl.col("bytes").first()).alias("allocated_at_start"),
        pl.col("allocated").last().alias("allocated_at_end"), pl.col("allocated").max().alias("_after_max"),
        pl.col("reserved").max().alias("peak_reserved"))
        # a step whose first event is a free held more than any level after its events: it started there
        .with_columns((pl.col("allocated_at_end") - pl.col("allocated_at_start")).alias("growth"),
                      pl.max_horizontal("allocated_at_start", "_after_max").alias("peak_allocated")))
    return per.select(list(schema)).cast(schema).sort(*dev, "step")  # type: ignore[arg-type]
