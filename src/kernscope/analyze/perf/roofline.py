"""``perf_model``: per-op FLOPs, bytes, achieved rates and roofline position for a linked trace.

Input: a :class:`~kernscope.model.Trace` (shapes are read from its file on demand). Output: a
:class:`PerfModel` of DataFrames. One row per distinct call signature (op name, ``Input Dims``,
``Input type``, ``Concrete Inputs``), like TraceLens's per-op sheets. Python runs once per distinct
signature, never per event.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import msgspec
import polars as pl

from ...errors import TraceError
from ...link.kinds import matching
from ...load.opargs import read_op_args
from ...model import Trace
from ..attribute import op_gpu_pairs
from .devices import DevicePeaks, match_device
from .dtypes import FUSED_OPTIMIZER_TYPE, TF32_KERNELS, bytes_per_element, precision, short_name
from .formulas import FUSED_CLASSES, REGISTRY, Call, Registry, Work
from .xla import has_hlo, xla_rows

#: the GPU records of a copy over a link, between two GPUs or between the host and a GPU (Kineto: ``Memcpy PtoP (Device
#: -> Device)``, ``Memcpy HtoD (Pinned -> Device)``, ``Memcpy DtoH (Device -> Pageable)``)
LINK_COPY = r"^Memcpy (PtoP|HtoD|DtoH|HtoH)\b"

NS_PER_US = 1000.0
#: the share of a JAX profile's GPU time in XLA's copies and memsets from which the perf model says they are not covered
COPY_NOTE_SHARE = 0.05
#: the share of GPU time in graph replays outside every modeled op from which the perf model says why it is unmodeled
GRAPH_NOTE_SHARE = 0.05

#: column order of :attr:`PerfModel.ops`
OP_COLUMNS = (
    "name", "op_class", "dtype", "input_dims", "input_type", "concrete_inputs", "count", "kernel_time_us",
    "mean_time_us", "median_time_us", "min_time_us", "max_time_us", "flops", "bytes", "arithmetic_intensity",
    "tflops_per_s", "tb_per_s", "peak_tflops", "peak_tb_per_s", "peak_precision", "pct_of_peak", "bound", "nested",
    "params", "example_idx",
)


@dataclass(frozen=True)
class PerfModel:
    """Results of :func:`perf_model`. Times in µs; ``flops``/``bytes`` per call; rates in TFLOP/s and TB/s.

    Attributes:
        device: the peaks used (None when the device is not in the table and no ``--peak`` was given).
        device_name: the trace's device name (``deviceProperties``), or "".
        ops: one row per distinct signature with a model (see :data:`OP_COLUMNS`). ``nested`` rows
            contain another modeled op (``aten::linear`` around ``aten::addmm``): their time is also in
            that op's row, so totals skip them.
        missing: ops of modeled kinds the model could not use: ``name, reason, count, kernel_time_us``
            (reason: "no shapes recorded", "tensor-list shapes not recorded", "shapes outside physical bounds"
            (a dimension negative or beyond 2^40) or "shapes not usable").
        uncovered: GPU time outside every modeled op, by launching op: ``op_name, count, kernel_time_us``.
        classes: per op class: ``op_class, calls, kernel_time_us, pct_of_modeled, gflops, data_moved_mb,
            tflops_per_s, tb_per_s`` (innermost rows only).
        coverage: ``gpu_time_us`` in scope, ``modeled_us`` (innermost modeled rows), ``missing_us``, ``pct``.
        notes: one line each (unknown device, missing shapes, ...): for the renderers to show.
    """

    device: DevicePeaks | None
    device_name: str
    ops: pl.DataFrame
    missing: pl.DataFrame
    uncovered: pl.DataFrame
    classes: pl.DataFrame
    coverage: dict[str, float]
    step: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def sheet_tables(self) -> dict[str, pl.DataFrame]:
        """The model as a workbook's tables: one per op class (:meth:`by_class`, without ``op_class``),
        ``unified_perf_summary`` (every modeled signature), ``perf_by_class``, ``perf_missing_shapes``,
        ``perf_uncovered`` (built once: a report's layout and its tables both ask)."""
        return dict(self._sheet_tables)

    @cached_property
    def _sheet_tables(self) -> dict[str, pl.DataFrame]:
        out = {cls: df.drop("op_class") for cls, df in self.by_class().items()}
        out.update({"unified_perf_summary": self.ops, "perf_by_class": self.classes, "perf_missing_shapes": self.missing,
                    "perf_uncovered": self.uncovered})
        return out

    def by_class(self) -> dict[str, pl.DataFrame]:
        """``ops`` split by op class (TraceLens's sheets: GEMM, CONV_fwd, SDPA_fwd, UnaryElementwise, ...), with
        the class's parameters as columns (``param: M``, ...)."""
        out: dict[str, pl.DataFrame] = {}
        for cls in self.ops["op_class"].unique(maintain_order=True).to_list():
            part = self.ops.filter(pl.col("op_class") == cls)
            params = [msgspec.json.decode(p) if p else {} for p in part["params"].to_list()]
            keys: list[str] = []
            for p in params:
                keys += [k for k in p if k not in keys]
            cols = {f"param: {k}": [_cell(p.get(k)) for p in params] for k in keys}
            out[cls] = pl.concat([part.select("name"), pl.DataFrame(cols, schema={k: pl.String for k in cols}),
                                  part.drop("name", "params")], how="horizontal")
        return out


def _cell(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(str(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return str(v)


def _device(trace: Trace) -> tuple[str, DevicePeaks | None]:
    used = set(trace.devices)
    props = [p for p in trace.device_properties if p.get("id") in used] or trace.device_properties
    if not props:
        return "", None
    return str(props[0].get("name") or ""), match_device(props[0])


def _decode(text: str | None) -> Any:
    if not text:
        return None
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return None


#: a tensor dimension beyond this (2^40 elements) is not a real shape: the op gets no model, not a number
MAX_DIM = 1 << 40


def _physical(d: list[Any]) -> bool:
    """Every dimension of every shape an int in [0, MAX_DIM] (negative or huge dims gave negative or absurd
    TFLOP/s)."""
    for shape in d:
        if isinstance(shape, list):
            for x in shape:
                if isinstance(x, list):
                    if not _physical([x]):
                        return False
                elif isinstance(x, bool) or not isinstance(x, int) or not 0 <= x <= MAX_DIM:
                    return False
    return True


def _work(registry: Registry, name: str, dims: str | None, types: str | None,
          concrete: str | None, strides: str | None = None) -> tuple[Work | None, str | None]:
    """(the model's answer, None) or (None, the model's reason; None where the recorded arguments never reached a
    model: :func:`_why_missing` says why)."""
    d, t, c, st = _decode(dims), _decode(types), _decode(concrete), _decode(strides)
    if not isinstance(d, list) or not isinstance(t, list) or not _physical(d):
        return None, None
    conc = tuple(str(x) if not isinstance(x, str) else x for x in c) if isinstance(c, list) else ()
    return registry.attempt(Call(name, tuple(d), tuple(str(x) for x in t), conc, tuple(st) if isinstance(st, list) else ()))


def perf_model(trace: Trace, *, step: int | None = None, peaks: DevicePeaks | None = None,
               registry: Registry = REGISTRY) -> PerfModel:
    """FLOPs, bytes, achieved TFLOP/s and TB/s and roofline position of every modeled op.

    Args:
        step: only GPU work launched in this step.
        peaks: device peaks to use (default: matched from the trace's ``deviceProperties``).
        registry: op models (default: the built-in ones).
    """
    device_name, matched = _device(trace)
    dev = peaks or matched
    gpu = trace.gpu if step is None else trace.gpu.filter(pl.col("step") == step)
    gpu = gpu.with_row_index("_g")
    total_ns = int(gpu["dur"].sum() or 0)
    if has_hlo(trace):  # JAX: FLOPs and bytes from the HLO programs in the profile
        return _xla_model(gpu, dev, device_name, step, total_ns)
    ev = trace.events
    is_op = pl.col("kind") == "cpu_op"
    # the ops a model takes: by name, or by a pattern (Inductor's kernels), tested once per distinct name (read as one
    # column: the CPU ops' rows are not copied)
    distinct = ev.lazy().filter(is_op).select(pl.col("name").unique()).collect()["name"]
    names = registry.select(distinct.cast(pl.String).drop_nulls().to_list())
    ops = ev.filter(is_op & pl.col("name").is_in(names)).select(
        "idx", pl.col("name").cast(pl.String), "pid", "tid", "ts", "end")
    pairs = op_gpu_pairs(ops, gpu)
    # the GPU records' names read as text once per distinct name: TF32 GEMM kernels, and copies between two GPUs or
    # with the host (they run at the link's bandwidth, NVLink or PCIe, not the memory's)
    name, distinct = pl.col("name"), gpu["name"].unique()  # (the distinct names once, for both tests)
    flags = gpu.select("_g", name.is_in(matching(distinct, TF32_KERNELS).implode()).fill_null(False).alias("_tf32"),
                       name.is_in(matching(distinct, LINK_COPY).implode()).fill_null(False).alias("_link"))
    tf32, link = flags.select("_g", "_tf32"), flags.select("_g", "_link")
    per_op = pairs.join(link, on="_g", how="left").group_by("op_idx").agg(
        pl.col("dur").sum().alias("gpu_ns"),
        pl.col("innermost").not_().any().alias("nested"),
        pl.col("_link").all().alias("link"),
    ).join(ops.select(pl.col("idx").alias("op_idx"), "name"), on="op_idx")
    try:
        args = read_op_args(trace.path, per_op["op_idx"].to_list())
    except OSError as e:
        raise TraceError(trace.path, f"the perf model reads op shapes from the trace file, which cannot be read "
                                     f"({e.strerror or e})") from None
    inst = _compact(per_op.join(args.rename({"idx": "op_idx"}), on="op_idx", how="left"))
    sig = ["name", "input_dims", "input_type", "concrete_inputs"]
    groups = inst.group_by(*sig, "link").agg(
        # (the strides of the signature's first call: they tell an expanded operand, read once per distinct element)
        pl.col("input_strides").sort_by("op_idx").first(),
        pl.len().alias("count"),
        (pl.col("gpu_ns").sum() / NS_PER_US).alias("kernel_time_us"),
        (pl.col("gpu_ns").mean() / NS_PER_US).alias("mean_time_us"),
        (pl.col("gpu_ns").median() / NS_PER_US).alias("median_time_us"),
        (pl.col("gpu_ns").min() / NS_PER_US).alias("min_time_us"),
        (pl.col("gpu_ns").max() / NS_PER_US).alias("max_time_us"),
        pl.col("nested").any().alias("nested"),
        pl.col("op_idx").min().alias("example_idx"),
    ).sort("example_idx")
    modeled: list[tuple[dict[str, Any], Work]] = []
    miss: list[tuple[str, str, int, float]] = []
    for r in groups.iter_rows(named=True):
        w, why = _work(registry, r["name"], r["input_dims"], r["input_type"], r["concrete_inputs"], r.pop("input_strides"))
        if w is None:
            reason = _why_missing(r["input_dims"], r["input_type"])
            if reason == "shapes not usable" and why:  # the model says which
                reason = why
            if not r["nested"]:
                miss.append((r["name"], reason, r["count"], r["kernel_time_us"]))
            continue
        modeled.append((r, w))
    modeled = _list_types(modeled, inst, pairs, gpu, sig)
    ran = _ran_in(modeled, inst, pairs, tf32, sig)
    rows = [{**r, **_rates(w, r["count"], r["kernel_time_us"], dev, ran.get(tuple(r[c] for c in sig)), link=r.pop("link"))}
            for r, w in modeled]
    ops_df = pl.DataFrame(rows, schema=_schema()) if rows else pl.DataFrame(schema=_schema())
    ops_df = ops_df.select(OP_COLUMNS).sort("kernel_time_us", descending=True)
    missing = (pl.DataFrame(miss, schema={"name": pl.String, "reason": pl.String, "count": pl.Int64,
                                          "kernel_time_us": pl.Float64}, orient="row")
               .group_by("name", "reason").agg(pl.col("count").sum(), pl.col("kernel_time_us").sum())
               .sort("kernel_time_us", descending=True))
    covered = set(pairs["_g"].to_list()) if pairs.height else set()
    outside = gpu.filter(~pl.col("_g").is_in(sorted(covered))) if covered else gpu
    uncovered = (outside.group_by(pl.col("launcher").cast(pl.String).fill_null("<no launch in trace>").alias("op_name"))
                 .agg(pl.len().alias("count"), (pl.col("dur").sum() / NS_PER_US).alias("kernel_time_us"))
                 .sort("kernel_time_us", descending=True))
    modeled_us = float(ops_df.filter(~pl.col("nested"))["kernel_time_us"].sum() or 0.0)
    missing_us = float(missing["kernel_time_us"].sum() or 0.0)
    gpu_us = total_ns / NS_PER_US
    coverage = {"gpu_time_us": gpu_us, "modeled_us": modeled_us, "missing_us": missing_us,
                "pct": 100.0 * modeled_us / gpu_us if gpu_us else 0.0}
    notes = []
    graph_us = (float(outside.filter(pl.col("graph_launch"))["dur"].sum() or 0) / NS_PER_US
                if "graph_launch" in outside.columns else 0.0)
    if graph_us >= GRAPH_NOTE_SHARE * gpu_us > 0:
        notes.append(f"{graph_us:,.1f} µs of GPU time ({100.0 * graph_us / gpu_us:.0f}%) ran in graph replays (CUDA/HIP "
                     "graphs), whose ops the profiler records when a graph is captured, not when it is replayed: to model "
                     "them, profile the capture, or a step run without graphs (torch.compile's "
                     "mode='max-autotune-no-cudagraphs' instead of 'reduce-overhead'; vLLM's enforce_eager)")
    fused = ops_df.filter(pl.col("op_class").is_in(list(FUSED_CLASSES.values())) & ~pl.col("nested"))
    if fused.height:
        notes.append(f"{int(fused['count'].sum()):,} calls of Inductor's fused pointwise and reduction kernels "
                     f"({float(fused['kernel_time_us'].sum()):,.1f} µs of GPU time) are modeled from their buffers and "
                     "iteration counts: each buffer read or written once, no more of its elements than the kernel's "
                     "iterations; an estimate (a buffer updated in place is read and written, but counted once)")
    if dev is None:
        notes.append(f"device {device_name or '(none recorded)'!r} is not in the peaks table: % of peak and bound are "
                     "left empty; give --peak (a device such as h100, or numbers such as bf16=989,fp32=67,bw=3.35)")
    if missing.height:
        no_shapes = missing.filter(pl.col("reason") == "no shapes recorded")
        if no_shapes.height:
            notes.append(f"{int(no_shapes['count'].sum())} op calls ({float(no_shapes['kernel_time_us'].sum()):,.1f} µs of "
                         "GPU time) have no shapes: record with torch.profiler.profile(record_shapes=True)")
        lists = missing.filter(pl.col("reason") == "tensor-list shapes not recorded")
        if lists.height:
            shown = lists["name"].head(3).to_list()  # (the most GPU time first)
            named = ", ".join(shown) + (f" and {lists.height - len(shown)} more" if lists.height > len(shown) else "")
            notes.append(f"{int(lists['count'].sum())} op calls ({float(lists['kernel_time_us'].sum()):,.1f} µs of GPU time) "
                         f"take tensor lists whose shapes the profile does not hold ({named}: an optimizer's step, "
                         "foreach or fused): no FLOPs or bytes for them")
        unusable = missing.filter(~pl.col("reason").is_in(["no shapes recorded", "tensor-list shapes not recorded"]))
        if unusable.height:  # recorded, but no model could use them: counted, with the commonest reasons
            notes.append(f"{int(unusable['count'].sum())} op calls ({float(unusable['kernel_time_us'].sum()):,.1f} µs of GPU "
                         "time) have shapes no model could use: "
                         + "; ".join(f"{r} ({n})" for r, n in commonest_reasons(unusable)))
    return PerfModel(dev, device_name, ops_df, missing, uncovered, _classes(ops_df), coverage, step, tuple(notes))


def _list_types(modeled: list[tuple[dict[str, Any], Work]], inst: pl.DataFrame, pairs: pl.DataFrame, gpu: pl.DataFrame,
                sig: list[str]) -> list[tuple[dict[str, Any], Work]]:
    """``modeled`` with each fused optimizer step's bytes at its tensor lists' element type, where the model assumed
    one (``assumed_bpe``: a list's type is not recorded) and its kernels name one type
    (:data:`~kernscope.analyze.perf.dtypes.FUSED_OPTIMIZER_TYPE`). A bf16 model's fused AdamW counted at 4 bytes
    an element read 5.8 TB/s on an H200, above its memory's 4.8."""
    assumed = [tuple(r[c] for c in sig) for r, w in modeled if "assumed_bpe" in w.params]
    if not assumed or pairs.height == 0:
        return modeled
    keys = pl.DataFrame(assumed, schema={c: pl.String for c in sig}, orient="row")
    found = (inst.select("op_idx", *sig).join(keys, on=sig, nulls_equal=True)
             .join(pairs.select("op_idx", "_g"), on="op_idx")
             .join(gpu.select("_g", pl.col("name").cast(pl.String).str.extract(FUSED_OPTIMIZER_TYPE, 1).alias("_t")),
                   on="_g")
             .drop_nulls("_t").group_by(*sig).agg(pl.col("_t").unique()))
    told = {tuple(r[c] for c in sig): r["_t"][0] for r in found.iter_rows(named=True) if len(r["_t"]) == 1}
    out = []
    for r, w in modeled:
        t = told.get(tuple(r[c] for c in sig)) if "assumed_bpe" in w.params else None
        bpe = bytes_per_element(t)
        if t is not None and bpe is not None and w.bytes is not None:
            params = {k: v for k, v in w.params.items() if k != "assumed_bpe"} | {"element": short_name(t),
                                                                                  "element_from": "kernel name"}
            w = dataclasses.replace(w, bytes=w.bytes * bpe / w.params["assumed_bpe"], dtype=t, params=params)
        out.append((r, w))
    return out


def _ran_in(modeled: list[tuple[dict[str, Any], Work]], inst: pl.DataFrame, pairs: pl.DataFrame, tf32: pl.DataFrame,
            sig: list[str]) -> dict[tuple[Any, ...], str]:
    """The precision each matrix-op signature's GEMMs ran in, where that is not its inputs' type: per GPU record under a
    matrix op, the precision of its innermost modeled op (an fp32 GEMM whose kernel is a TF32 one, by its name:
    ``tf32``); per signature, the precision with the most GPU time. An fp32 ``aten::linear`` under autocast holds a
    bf16 ``aten::addmm``: its GEMM ran in bf16 (rated against the fp32 peak, it read 990% of it). Matrix-op
    signatures only (vector ops keep their vector peak); ``modeled``: (the signature's row, its work)."""
    keys = [tuple(r[c] for c in sig) for r, w in modeled if w.unit == "matrix"]
    if not keys or pairs.height == 0:
        return {}
    own = [precision(w.dtype) for _, w in modeled if w.unit == "matrix"]
    mats = pl.DataFrame([list(k) + [p] for k, p in zip(keys, own)], schema={**{c: pl.String for c in sig}, "_p": pl.String},
                        orient="row")
    op_p = inst.select("op_idx", *sig).join(mats, on=sig, how="inner", nulls_equal=True)
    # each GPU record's precision, from its innermost op where that is a modeled matrix op
    rec = (pairs.filter(pl.col("innermost")).select("_g", "dur", "op_idx").join(op_p.select("op_idx", "_p"), on="op_idx")
           .join(tf32, on="_g", how="left")
           .select("_g", "dur", pl.when((pl.col("_p") == "fp32") & pl.col("_tf32")).then(pl.lit("tf32"))
                   .otherwise(pl.col("_p")).alias("_ran")))
    by_sig = (pairs.select("op_idx", "_g").join(rec, on="_g").join(op_p.select("op_idx", *sig), on="op_idx")
              .group_by(*sig, "_ran").agg(pl.col("dur").sum())
              .sort("dur", "_ran", descending=[True, False]).group_by(sig, maintain_order=True).first())
    return {tuple(r[c] for c in sig): r["_ran"] for r in by_sig.iter_rows(named=True) if r["_ran"] is not None}


def commonest_reasons(missing: pl.DataFrame, n: int = 3) -> list[tuple[str, int]]:
    """The ``n`` reasons of ``missing`` (``reason``, ``count``) with the most op calls, as (reason, calls); of equal
    counts the first in the reason's text (two reasons of one count came out in either order from run to run)."""
    top = (missing.group_by("reason").agg(pl.col("count").sum())
           .sort("count", "reason", descending=[True, False]).head(n))
    return [(str(r), int(c)) for r, c in top.iter_rows()]


def _xla_model(gpu: pl.DataFrame, dev: DevicePeaks | None, device_name: str, step: int | None, total_ns: int) -> PerfModel:
    rows, left = xla_rows(gpu, dev, _rates)
    ops_df = (pl.DataFrame(rows.to_dicts(), schema=_schema()) if rows.height else pl.DataFrame(schema=_schema()))
    ops_df = ops_df.select(OP_COLUMNS).sort("kernel_time_us", descending=True)
    # by the instruction each kernel runs where the profile names it (a Pallas call inside a command buffer), else
    # by its launch (the command buffer)
    op = (pl.coalesce(pl.col("hlo_instruction").cast(pl.String), pl.col("launcher").cast(pl.String))
          if "hlo_instruction" in left.columns else pl.col("launcher").cast(pl.String))
    uncovered = (left.group_by(op.fill_null("<no launch in trace>").alias("op_name"))
                 .agg(pl.len().alias("count"), (pl.col("dur").sum() / NS_PER_US).alias("kernel_time_us"))
                 .sort("kernel_time_us", descending=True))
    modeled_us = float(ops_df["kernel_time_us"].sum() or 0.0)
    gpu_us = total_ns / NS_PER_US
    coverage = {"gpu_time_us": gpu_us, "modeled_us": modeled_us, "missing_us": 0.0,
                "pct": 100.0 * modeled_us / gpu_us if gpu_us else 0.0}
    notes = ["JAX/XLA profile: FLOPs and bytes come from the HLO instruction each kernel runs (matrix products "
             "on the matrix roof, other fusions on the bandwidth roof); library kernels inside an XLA command buffer "
             "are matched to their custom calls by the module's schedule where that leaves no doubt, the others are not "
             "covered"]
    # XLA's copies and memsets (memcpy and memset records, which name no instruction) say why coverage is low
    copies_us = (float(left.filter(pl.col("kind").is_in(["memcpy", "memset"]))["dur"].sum() or 0) / NS_PER_US
                 if "kind" in left.columns else 0.0)
    if copies_us >= COPY_NOTE_SHARE * gpu_us > 0:
        notes.append(f"{copies_us:,.1f} µs of GPU time ({100.0 * copies_us / gpu_us:.0f}%) are XLA's copies and memsets "
                     "(memcpy and memset records, which name no HLO instruction): not covered")
    if dev is None:
        notes.append(f"device {device_name or '(none recorded)'!r} is not in the peaks table: % of peak and bound are "
                     "left empty; give --peak (a device such as h100, or numbers such as bf16=989,fp32=67,bw=3.35)")
    missing = pl.DataFrame(schema={"name": pl.String, "reason": pl.String, "count": pl.Int64, "kernel_time_us": pl.Float64})
    return PerfModel(dev, device_name, ops_df, missing, uncovered, _classes(ops_df), coverage, step, tuple(notes))


def _classes(ops: pl.DataFrame) -> pl.DataFrame:
    inner = ops.filter(~pl.col("nested"))
    total = float(inner["kernel_time_us"].sum() or 0.0)
    secs = pl.col("kernel_time_us") * 1e-6
    return (inner.group_by("op_class").agg(
        pl.col("count").sum().alias("calls"), pl.col("kernel_time_us").sum(),
        (pl.col("flops") * pl.col("count")).sum().alias("_f"), (pl.col("bytes") * pl.col("count")).sum().alias("_b"))
        .with_columns((100.0 * pl.col("kernel_time_us") / total if total else pl.lit(0.0)).alias("pct_of_modeled"),
                      (pl.col("_f") / 1e9).alias("gflops"), (pl.col("_b") / 2**20).alias("data_moved_mb"),
                      pl.when(secs > 0).then(pl.col("_f") / secs / 1e12).alias("tflops_per_s"),
                      pl.when(secs > 0).then(pl.col("_b") / secs / 1e12).alias("tb_per_s"))
        .drop("_f", "_b").sort("kernel_time_us", descending=True)
        .select("op_class", "calls", "kernel_time_us", "pct_of_modeled", "gflops", "data_moved_mb", "tflops_per_s",
                "tb_per_s"))


def _compact(inst: pl.DataFrame) -> pl.DataFrame:
    """Argument texts in one spelling (``[[8944, 1024], [1024, 2816]]``): files differ in indentation."""
    cols = ("input_dims", "input_type", "concrete_inputs", "input_strides")
    out = []
    for c in cols:
        raw = inst[c].unique().drop_nulls().to_list()
        norm = [json.dumps(_decode(t)) if _decode(t) is not None else t for t in raw]
        m = pl.DataFrame({c: raw, "_n": norm}, schema={c: pl.String, "_n": pl.String})
        out.append(inst.select(c).join(m, on=c, how="left", maintain_order="left")["_n"].alias(c))
    return inst.with_columns(out)


def _why_missing(dims: str | None, types: str | None) -> str:
    d, t = _decode(dims), _decode(types)
    if isinstance(t, list) and "TensorList" in t:
        return "tensor-list shapes not recorded"  # PyTorch records no shapes for TensorList arguments
    if not isinstance(d, list) or all(x == [] for x in d):
        return "no shapes recorded"
    if not _physical(d):
        return "shapes outside physical bounds"
    return "shapes not usable"


def _rates(w: Work, count: int, time_us: float, dev: DevicePeaks | None, ran: str | None = None, *,
           link: bool = False) -> dict[str, Any]:
    """A signature's rates and roofline position. ``ran``: the precision a matrix op's GEMMs ran in where known
    (:func:`_ran_in`: bf16 under autocast, tf32 by kernel name); an fp32 matrix op faster than the fp32 peak
    allows ran on TF32 tensor cores (it is rated against their peak). ``link``: every GPU record of the calls is a
    copy between two GPUs or between the host and a GPU: bound by the link (NVLink, PCIe), whose bandwidth the peaks
    table does not know, so no % of peak (rated on the memory's, a 380 GB/s NVLink copy read 8% of an H200's HBM, a
    54 GB/s copy from pinned host memory 2.3%)."""
    secs = time_us * 1e-6
    tflops = w.flops * count / secs / 1e12 if secs > 0 else None
    tbps = w.bytes * count / secs / 1e12 if secs > 0 and w.bytes is not None else None
    ai = w.flops / w.bytes if w.bytes else None
    prec = precision(w.dtype)
    if w.unit == "matrix" and ran is not None:
        prec = ran
    peak = dev.flops_peak(w.unit, prec) if dev else None
    if (w.unit == "matrix" and prec == "fp32" and dev is not None and peak and tflops is not None and tflops > peak
            and dev.matrix.get("tf32")):
        prec, peak = "tf32", dev.flops_peak("matrix", "tf32")
    # (the FLOP roof the row is rated on: none for pure data movement, rated on the bandwidth alone)
    rated = (prec if w.unit == "matrix" else "fp64" if prec == "fp64" else "fp32") if peak and w.flops else None
    bw = dev.hbm_tb_s if dev and not link else None
    pct = bound = None
    if link:
        bound = "link"
    elif w.flops == 0 and bw and tbps is not None:  # pure data movement
        bound, pct = "memory", 100.0 * tbps / bw
    elif peak and bw and ai is not None and tflops is not None:
        ridge = peak / bw
        bound = "compute" if ai >= ridge else "memory"
        attainable = min(peak, ai * bw)
        pct = 100.0 * tflops / attainable if attainable > 0 else None
    return {
        "op_class": w.op_class, "dtype": short_name(w.dtype), "flops": float(w.flops),
        "bytes": float(w.bytes) if w.bytes is not None else None,
        "arithmetic_intensity": ai if ai is None or math.isfinite(ai) else None,
        "tflops_per_s": tflops, "tb_per_s": tbps, "peak_tflops": peak, "peak_tb_per_s": bw, "peak_precision": rated,
        "pct_of_peak": pct,
        "bound": bound, "params": msgspec.json.encode(w.params).decode(),
    }


def _schema() -> dict[str, Any]:
    return {
        "name": pl.String, "input_dims": pl.String, "input_type": pl.String, "concrete_inputs": pl.String,
        "count": pl.Int64, "kernel_time_us": pl.Float64, "mean_time_us": pl.Float64, "median_time_us": pl.Float64,
        "min_time_us": pl.Float64, "max_time_us": pl.Float64, "nested": pl.Boolean, "example_idx": pl.Int64,
        "op_class": pl.String, "dtype": pl.String, "flops": pl.Float64, "bytes": pl.Float64,
        "arithmetic_intensity": pl.Float64, "tflops_per_s": pl.Float64, "tb_per_s": pl.Float64,
        "peak_tflops": pl.Float64, "peak_tb_per_s": pl.Float64, "peak_precision": pl.String, "pct_of_peak": pl.Float64,
        "bound": pl.String,
        "params": pl.String,
    }


@dataclass(frozen=True)
class PerfReport:
    """What ``kernscope perf`` answers (result kind ``perf``): the ``model`` of trace ``path``, its roofline
    ``findings``, and whether ops that contain another modeled op are listed (``show_nested``)."""

    model: PerfModel
    path: str
    findings: pl.DataFrame | None = None
    show_nested: bool = False

    kind: ClassVar[str] = "perf"

    @property
    def title(self) -> str:
        return self.path

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self.model.notes)

    @property
    def findings_by_kind(self) -> pl.DataFrame:
        """The findings gathered by kind (:func:`~kernscope.analyze.findings.by_kind`)."""
        from ..findings import SCHEMA, by_kind

        return by_kind(self.findings if self.findings is not None else pl.DataFrame(schema=SCHEMA))

    @property
    def listed_ops(self) -> pl.DataFrame:
        """The op rows every output lists: without ops that contain another modeled op unless ``show_nested``."""
        return self.model.ops if self.show_nested else self.model.ops.filter(~pl.col("nested"))

    def facts_dict(self) -> dict[str, Any]:
        """``trace`` (path), ``step``, ``device`` (name and peaks), ``coverage`` (µs, %), ``nested_ops_hidden``."""
        pm = self.model
        return {"trace": self.path, "step": pm.step,
                "device": {"name": pm.device_name, "peaks": pm.device.to_dict() if pm.device else None},
                "coverage": dict(pm.coverage), "nested_ops_hidden": pm.ops.height - self.listed_ops.height}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``classes``, ``ops`` (listed rows), ``missing``, ``uncovered``, ``findings``, ``findings_by_kind``, then
        :meth:`PerfModel.sheet_tables`."""
        pm = self.model
        from ..findings import SCHEMA

        findings = self.findings if self.findings is not None else pl.DataFrame(schema=SCHEMA)
        return {"classes": pm.classes, "ops": self.listed_ops, "missing": pm.missing, "uncovered": pm.uncovered,
                "findings": findings, "findings_by_kind": self.findings_by_kind, **pm.sheet_tables()}
