"""Read intra-kernel results back: raw buffer dumps (.npz), Perfetto traces, Chrome JSON."""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from ..errors import KernscopeError
from .decode import SCHEMA, Decoded, decode_buffer
from .export import read_perfetto
from .hatchet import parse_json, part_files, without_bom
from .stats import shift_durations
from .units import Clock


@dataclass
class Loaded:
    tasks: pl.DataFrame
    decoded: Decoded | None  # present for raw buffers (dropped/unpaired counts)
    source: str  #: "buffer", "chrome", "perfetto", "proton" (Proton's instrumentation trace) or "iket" (NVIDIA's IKET JSON)
    #: Proton traces: per CTA the time its profile buffer took to write out ("Finalization Time (ns)")
    finalize: pl.DataFrame | None = None
    #: what the times count: "ns", or "cycles" (Proton's traces at its 1 GHz convention: µs x 1000 = cycles)
    unit: str = "ns"
    #: the SM clock the file itself states (GHz), when it states a real one
    clock: Clock | None = None
    #: Proton traces holding several kernels or launches: one row per block (kernel, launch, cta, block); the
    #: ``block`` ids of the task table are then unique over the whole file
    launches: pl.DataFrame | None = None


_PROTON_PID = re.compile(r"Core\s*(\d+)\D+CTA\s*(\d+)", re.IGNORECASE)
_WARP = re.compile(r"(\d+)")


_MAX_NS = 2**62  # times in ns beyond this (or ts + dur) do not fit the int64 columns
_MAX_ID = 2**31  # core, CTA, warp, block and SM ids at or beyond this are no ids (a GPU has far fewer)


def _id(v: Any, i: int) -> int:
    """An id of event ``i`` (block, group, SM, task type): an integer in [-1, 2^31)."""
    if isinstance(v, bool) or not isinstance(v, int) or not -1 <= v < _MAX_ID:
        raise KernscopeError(f"event #{i}: an id is not an integer in -1 .. 2^31 - 1 ({v!r})")
    return v


def _ns(e: dict[str, Any], key: str, i: int) -> int:
    """``e[key]`` (µs) in ns, range-checked: a finite number, not negative for ``dur``, within int64."""
    v = e[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise KernscopeError(f"$.traceEvents[{i}].{key}: {v!r} is not a finite number")
    if key == "dur" and v < 0:
        raise KernscopeError(f"$.traceEvents[{i}].dur: negative duration {v!r}")
    ns = round(float(v) * 1000)
    if abs(ns) > _MAX_NS:
        raise KernscopeError(f"$.traceEvents[{i}].{key}: {v!r} µs does not fit in int64 nanoseconds")
    return ns


def _proton(doc: dict[str, Any] | list[Any], p: str) -> Loaded | None:
    """Proton's instrumentation Chrome trace: pid "<kernel> Core<N> CTA<m>", tid "warp <k>", ts/dur in µs of
    cycles at Proton's 1 GHz convention, the CTA's finalize time in ``args``. None when it is not one."""
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    rows, fin = [], []
    seen_proton = False
    mhz: float | None = None
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        m = _PROTON_PID.search(str(e.get("pid", "")))
        if m is None:
            continue
        seen_proton = True
        core, cta = int(m.group(1)), int(m.group(2))
        w = _WARP.search(str(e.get("tid", "0")))
        warp = int(w.group(1)) if w else 0
        if max(core, cta, warp) >= _MAX_ID:
            raise KernscopeError(f"event #{i}: core, CTA or warp id beyond 2^31 - 1 ({e.get('pid')!r}, {e.get('tid')!r})")
        start = _ns(e, "ts", i)
        dur = _ns(e, "dur", i)
        kernel = str(e.get("pid", ""))[: m.start()].strip()
        rows.append((cta, warp, core, -1, str(e.get("name", "")), start, start + dur, dur, kernel))
        args = e.get("args") or {}
        for k, v in args.items():
            if "final" in str(k).lower() and isinstance(v, (int, float)):
                fin.append((cta, core, int(v)))
            elif mhz is None and str(k).lower().startswith("frequency") and isinstance(v, (int, float)) and v > 0:
                mhz = float(v)
    if not seen_proton:
        return None
    types = {**SCHEMA, "kernel": pl.String}
    t = pl.DataFrame(rows, schema=list(types), orient="row").cast(types)  # type: ignore[arg-type]
    finalize = pl.DataFrame(fin, schema={"block": pl.Int64, "sm": pl.Int64, "finalize_ns": pl.Int64}, orient="row").unique(
        ["block", "sm"]) if fin else None
    t, launches = _split_launches(t)
    # Proton divides cycles by "Frequency (MHz)" to write µs: at its 1,000 MHz convention the values are cycles;
    # at another (a measured) frequency they are time, and the file states the clock
    real = mhz is not None and abs(mhz - 1000.0) > 1e-6 and 50 <= mhz <= 10_000
    clock = Clock(mhz / 1e3, f"Proton's trace (Frequency {mhz:g} MHz)") if real and mhz else None
    return Loaded(t.sort("block", "group", "start_ns"), None, "proton", finalize, launches=launches,
                  unit="ns" if real else "cycles", clock=clock)


def block_launches(tasks: pl.DataFrame) -> pl.DataFrame:
    """``block``, ``launch`` (0, 1, ... in time order) of records whose blocks are numbered across launches: a launch
    ends where no block runs any more; a block that starts after every earlier block ended opens the next one.
    Blocks, not records: the tasks of one block follow each other (a one-program kernel's two scopes are one launch)."""
    return (tasks.group_by("block").agg(pl.col("start_ns").min().alias("_s"), pl.col("end_ns").max().alias("_e"))
            .sort("_s", "block")
            .select("block", (pl.col("_s") > pl.col("_e").cum_max().shift(1)).fill_null(False).cast(pl.Int64).cum_sum()
                    .alias("launch")))


def launches_by_blocks(tasks: pl.DataFrame) -> pl.DataFrame | None:
    """The launches of an export that does not name them (kernscope's Perfetto or Chrome file of ``intra run``, which
    holds every profiled launch of a kernel, its blocks numbered across launches; :func:`block_launches`). One launch:
    None (the table is the launch). Else one row per block (``kernel`` "", ``launch``, ``cta``, ``block``), as Proton's
    traces have."""
    if tasks.height == 0:
        return None
    b = block_launches(tasks)
    if int(b["launch"].max() or 0) == 0:  # type: ignore[arg-type]
        return None
    return b.select(pl.lit("").alias("kernel"), "launch", pl.col("block").alias("cta"), "block")


def _is_iket(doc: Any) -> bool:
    """NVIDIA's IKET JSON (CuTe DSL's in-kernel event tracing, ``run-iket --postprocess json``): an object whose
    ``launches`` list holds launches with ``ranges`` (the published "JSON Trace Shape")."""
    if not isinstance(doc, dict) or not isinstance(doc.get("launches"), list):
        return False
    return any(isinstance(x, dict) and ("ranges" in x or "markers" in x) for x in doc["launches"])


def _iket(doc: dict[str, Any]) -> Loaded:
    """IKET's JSON trace: per launch (``gridId``, ``kernelName``) its ``ranges`` (``rangeName``, ``startTs``,
    ``endTs`` in the trace's ns timebase, 32 ns granularity) with the ``warpLocs`` of the warps that recorded them
    (``smId``, ``ctaId`` [x, y, z], ``warpId``). One task per (range, warp location): ``task`` the range's name,
    ``group`` the warp, ``sm`` the SM, ``block`` the CTA, numbered per (kernel, launch, CTA) so that launches never
    merge. Markers (point events) and warp lifetimes are not tasks: they are counted in ``launches``."""
    parts, units = [], []
    for n, launch in enumerate(doc["launches"]):
        if not isinstance(launch, dict):
            raise KernscopeError(f"IKET launch #{n} is not an object")
        ranges = launch.get("ranges") or []
        kernel = str(launch.get("kernelName", f"launch {n}"))
        units.append({"launch": n, "kernel": kernel, "grid_id": launch.get("gridId"), "ranges": len(ranges),
                      "markers": len(launch.get("markers") or []), "warp_lifetimes": len(launch.get("warpLifetimes") or [])})
        if not ranges:
            continue
        r = pl.DataFrame([{"task": x.get("rangeName"), "start_ns": x.get("startTs"), "end_ns": x.get("endTs"),
                           "locs": x.get("warpLocs") or []} for x in ranges],
                         schema={"task": pl.String, "start_ns": pl.Int64, "end_ns": pl.Int64,
                                 "locs": pl.List(pl.Struct({"smId": pl.Int64, "ctaId": pl.List(pl.Int64), "warpId": pl.Int64}))},
                         strict=False)
        bad = r.filter(pl.col("start_ns").is_null() | pl.col("end_ns").is_null() | (pl.col("end_ns") < pl.col("start_ns")))
        if bad.height:
            raise KernscopeError(f"IKET launch #{n} ({kernel}): {bad.height:,} ranges without a valid startTs/endTs")
        parts.append(r.explode("locs").drop_nulls("locs").unnest("locs").select(
            pl.lit(n, pl.Int64).alias("launch"), pl.lit(kernel).alias("kernel"),
            pl.col("ctaId").list.get(0, null_on_oob=True).fill_null(0).alias("cx"),
            pl.col("ctaId").list.get(1, null_on_oob=True).fill_null(0).alias("cy"),
            pl.col("ctaId").list.get(2, null_on_oob=True).fill_null(0).alias("cz"),
            pl.col("warpId").fill_null(0).alias("group"), pl.col("smId").fill_null(-1).alias("sm"),
            pl.col("task").fill_null("?"), "start_ns", "end_ns"))
    if not parts:
        raise KernscopeError("an IKET trace with no ranges (markers alone are not tasks)")
    t = pl.concat(parts)
    ids = t.select("kernel", "launch", "cx", "cy", "cz").unique().sort("launch", "cz", "cy", "cx").with_row_index("block")
    t = t.join(ids.with_columns(pl.col("block").cast(pl.Int64)), on=["kernel", "launch", "cx", "cy", "cz"], how="left")
    tasks = t.select("block", "group", "sm", pl.lit(-1, pl.Int64).alias("task_type"), "task", "start_ns", "end_ns",
                     (pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns")).cast(SCHEMA)  # type: ignore[arg-type]
    per_launch = pl.DataFrame(units)
    launches = (ids.select("kernel", "launch", pl.format("{},{},{}", "cx", "cy", "cz").alias("cta"), pl.col("block").cast(pl.Int64))
                .join(per_launch.select("launch", "grid_id", "ranges", "markers", "warp_lifetimes"), on="launch", how="left"))
    return Loaded(tasks.sort("block", "group", "start_ns"), None, "iket", launches=launches if len(units) > 1 else None)


def _split_launches(t: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Proton writes every launch of every kernel into one trace, on one time axis, with CTA ids that repeat per
    launch. A launch ends where nothing of that kernel runs any more: sorted by start, a record that starts after
    every earlier record of its kernel ended opens the next launch. Blocks are then numbered per (kernel, launch,
    CTA), so per-block statistics never merge two launches. One kernel, one launch: the table is unchanged."""
    t = t.sort("kernel", "start_ns").with_columns(
        (pl.col("start_ns") > pl.col("end_ns").cum_max().shift(1).over("kernel")).fill_null(False).cast(pl.Int64)
        .cum_sum().over("kernel").alias("launch"))
    if t["kernel"].n_unique() == 1 and int(t["launch"].max() or 0) == 0:  # type: ignore[arg-type]
        return t.drop("kernel", "launch"), None
    units = t.select("kernel", "launch", pl.col("block").alias("cta")).unique().sort("kernel", "launch", "cta")
    units = units.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("block"))
    t = t.rename({"block": "cta"}).join(units, on=["kernel", "launch", "cta"], how="left")
    return t.select(list(SCHEMA)), units


#: Python's JSON objects take about this many times the text they come from
JSON_EXPANSION = 12


def text_budget() -> int:
    """Bytes of JSON text an intra-kernel file may hold: what its parsed objects can take of the memory budget."""
    from ..load.source import Limits

    return Limits().memory() // JSON_EXPANSION


def _gunzip(data: bytes, path: str) -> bytes:
    """``data`` decompressed, stopped with one line at :func:`text_budget` (a 1 MB gzip bomb took 2.2 GB)."""
    budget = text_budget()
    d = zlib.decompressobj(31)
    out = d.decompress(data, budget + 1)
    if len(out) > budget or d.unconsumed_tail:
        raise KernscopeError(f"decompressed content exceeds {budget / 1e9:.2f} GB, what its parsed JSON could take of "
                             "the memory budget: a decompression bomb, or an intra-kernel trace far larger than any "
                             "kernel records")
    return out


def _parts(p: str, parts: list[str]) -> Loaded:
    """A Proton trace flushed in parts (``x.part_N.chrome_trace``): their events read as one trace, so launches
    split across parts are found as in one file."""
    events: list[Any] = []
    for part in parts:  # one per phase file
        with open(part, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = _gunzip(data, part)
        try:
            doc = parse_json(data, part)
        except (ValueError, UnicodeDecodeError) as e:
            raise KernscopeError(f"{part}: not JSON ({e})") from None
        evs = doc.get("traceEvents") if isinstance(doc, dict) else doc
        if not isinstance(evs, list):
            raise KernscopeError(f"{part}: no traceEvents list")
        events += evs
    try:
        loaded = _proton({"traceEvents": events}, p)
    except KernscopeError as e:
        raise KernscopeError(f"{p}: {e}") from None
    if loaded is None:
        raise KernscopeError(f"{p}: its {len(parts)} parts hold no Proton intra-kernel events")
    return loaded


def load_tasks(path: str | os.PathLike[str], task_names: list[str] | dict[int, str] | None = None) -> Loaded:
    """Tasks of a raw buffer (.npz/.npy), kernscope's Chrome/Perfetto export (or another writer's Perfetto trace of
    intra-kernel slices), or Proton's instrumentation trace (``.chrome_trace``, optionally gzipped; a periodically
    flushed one as its ``.part_N`` files, read as one)."""
    p = str(path)
    parts = part_files(p)
    if len(parts) > 1:
        return _parts(p, parts)
    if not os.path.isfile(p):
        raise KernscopeError(f"{p}: file not found")
    try:
        if p.endswith((".xplane.pb", ".xplane.pb.gz")):
            raise KernscopeError("a JAX/XLA profile (XSpace), not intra-kernel records: `kernscope analyze` reads it")
        if p.endswith(".npz"):
            with np.load(p, allow_pickle=False) as z:
                if "buffer" not in z:
                    raise KernscopeError(f"an .npz without a buffer array (it holds: {', '.join(sorted(z.files)[:5]) or 'nothing'}): "
                                         "not a kernscope buffer dump")
                stored: list[str] | dict[int, str] = [str(x) for x in z["task_names"]] if "task_names" in z else []
                if "task_ids" in z and isinstance(stored, list):
                    stored = {int(i): n for i, n in zip(z["task_ids"], stored)}
                shift = float(z["time_shift_ns"][0]) if "time_shift_ns" in z else 0.0
                d = decode_buffer(z["buffer"], task_names or stored)
            if shift:
                d.tasks = shift_durations(d.tasks, shift)
            return Loaded(d.tasks, d, "buffer", d.finalize)
        if p.endswith(".npy"):
            d = decode_buffer(np.load(p, allow_pickle=False), task_names or [])
            return Loaded(d.tasks, d, "buffer", d.finalize)
        with open(p, "rb") as f:
            data = f.read()
        if data[:2] == b"\x1f\x8b":
            data = _gunzip(data, p)
        data = without_bom(data)
        head = data.lstrip()[:1]
        if head in (b"{", b"["):
            doc = parse_json(data, p)
            if _is_iket(doc):
                return _iket(doc)
            if isinstance(doc, dict) and not isinstance(doc.get("traceEvents"), list):
                keys = ", ".join(list(map(str, doc))[:5]) + (", ..." if len(doc) > 5 else "")
                raise KernscopeError(f"a JSON object without a traceEvents list (keys: {keys}): not a trace of "
                                     "intra-kernel events")
            proton = _proton(doc, p)
            if proton is not None:
                return proton
            ev = [(i, e) for i, e in enumerate(doc["traceEvents"] if isinstance(doc, dict) else doc)
                  if isinstance(e, dict) and e.get("ph") == "X"]
            if not ev:
                if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "frame" in doc[0]:
                    raise KernscopeError("a hatchet scope tree, not a trace of intra-kernel events: `kernscope intra "
                                         "view` shows it")
                raise KernscopeError("no intra-kernel events in it (kernscope's X events with block args, or Proton's "
                                     "'<kernel> CoreN CTAm' events)")
            t0 = int(doc.get("otherData", {}).get("t0_ns", 0)) if isinstance(doc, dict) else 0
            rows = []
            for i, e in ev:  # kernscope's own Chrome export: read back event by event (the Perfetto file is the fast path)
                a = e.get("args")
                if not isinstance(a, dict) or "block" not in a:
                    if e.get("cat") in KINETO_CATS:
                        raise KernscopeError("a PyTorch profiler (Kineto) trace, not intra-kernel records: `kernscope "
                                             "analyze` reads it; `kernscope intra align TRACE RECORDS...` places records "
                                             "under its kernels")
                    name = repr(str(e["name"])[:60]) if e.get("name") is not None else "unnamed"
                    raise KernscopeError(f"event {i} ({name}) has no block in its args: not "
                                         "kernscope's intra-kernel export nor Proton's '<kernel> CoreN CTAm' events")
                start, dur = t0 + _ns(e, "ts", i), _ns(e, "dur", i)
                rows.append({"block": _id(a["block"], i), "group": _id(a.get("group", 0), i), "sm": _id(a.get("sm", e["pid"]), i),
                             "task_type": _id(a.get("task_type", -1), i), "task": e["name"], "start_ns": start,
                             "end_ns": start + dur, "duration_ns": dur})
            unit = str(doc.get("otherData", {}).get("time_unit", "ns")) if isinstance(doc, dict) else "ns"
            t = pl.DataFrame(rows, schema=SCHEMA)
            return Loaded(t, None, "chrome", unit="cycles" if unit == "cycles" else "ns", launches=launches_by_blocks(t))
        if not data.strip():
            raise KernscopeError("the file is empty")
        try:
            t = read_perfetto(data)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            why = "not valid protobuf" if isinstance(e, TypeError) else _reason(e)
            raise KernscopeError(f"not JSON, an .npz buffer, nor a Perfetto trace (read as Perfetto's protobuf: {why})") from None
        if t.height == 0:
            raise KernscopeError("no intra-kernel slices in it (read as a Perfetto trace: no complete slices with a block)")
        t = t.with_columns(pl.lit(-1).cast(pl.Int64).alias("task_type")).select(list(SCHEMA))
        return Loaded(t, None, "perfetto", launches=launches_by_blocks(t))
    except KernscopeError as e:
        raise KernscopeError(f"{p}: {e}") from None
    except (ValueError, KeyError, TypeError, zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError, OSError, EOFError,
            zlib.error) as e:
        raise KernscopeError(f"{p}: not a kernscope intra-kernel buffer or trace ({_reason(e)})") from None


#: event categories of PyTorch's profiler (a Kineto trace given where intra-kernel records are expected)
KINETO_CATS = frozenset({"kernel", "cpu_op", "cuda_runtime", "cuda_driver", "python_function", "user_annotation",
                         "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "ac2g"})


def _reason(e: BaseException) -> str:
    """An exception as words for a one-line message: a missing key named as such, else its text (never the
    exception's class name alone)."""
    if isinstance(e, KeyError):
        return f"{e.args[0] if e.args else 'a field'} is missing"
    return str(e).strip().splitlines()[0] if str(e).strip() else "unexpected contents"
