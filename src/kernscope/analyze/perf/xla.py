"""The perf model of a JAX/XLA profile: FLOPs and bytes from the HLO programs the profile carries.

A JAX kernel runs one HLO instruction (see :mod:`kernscope.load.hlo_work`): the trace's GPU rows hold that
instruction's FLOPs and bytes (``hlo_flops``, ``hlo_bytes``). Rows are grouped by instruction; an
instruction run as several kernels (cuBLAS's split-K) counts one call per distinct kernel name's launches.
Matrix products sit on the matrix roof of their element type, other fusions on the bandwidth roof (their
FLOPs are not counted; a fusion that slices or updates part of a buffer has no byte count, so no rate).
Kernels whose instruction the profile does not name (library kernels inside an XLA command buffer: their
``hlo_op`` is the buffer) are listed as not covered, by launching op.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ...link.kinds import matching
from ...model import Trace
from .devices import DevicePeaks
from .dtypes import TF32_KERNELS, precision
from .formulas import Work

NS_PER_US = 1000.0
#: the op classes on the matrix roof: matrix products, cuDNN's convolutions (implicit GEMMs) and fused attention
MATRIX_CLASSES = ("GEMM", "CONV", "SDPA_fwd", "SDPA_bwd")


def has_hlo(trace: Trace) -> bool:
    return "hlo_flops" in trace.gpu.columns


def xla_rows(gpu: pl.DataFrame, dev: DevicePeaks | None, rates: Any) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(modeled rows as dicts for :func:`roofline._schema`, GPU rows left out). ``rates``: ``roofline._rates``."""
    # (a float dot on TF32 tensor cores, XLA's default for f32 on GPUs that have them, by its kernel's name: a key, so
    # that two programs of one name, one at the default precision and one at HIGHEST, stay two rows; an instruction
    # whose kernels are a TF32 one and a helper, a cuDNN convolution's, ran on TF32 and is one row: as two, each counted
    # the convolution's FLOPs, and the helper's 0.8 µs read "1,470 TFLOP/s, 639% of its roofline")
    program = [c for c in ("hlo_module", "program_id") if c in gpu.columns]  # (two programs may share a module's name)
    # (the columns read, then the rows: a filter of every column copied most of the GPU table, 0.4 GB at the peak of a
    # 207 MB profile's perf)
    read = [c for c in ("hlo_module", "program_id", "hlo_instruction", "hlo_op_class", "hlo_dtype", "hlo_params", "hlo_flops",
                        "hlo_bytes", "hlo_source", "name", "dur", "_g") if c in gpu.columns]
    rated = pl.col("hlo_flops").is_not_null() & pl.col("hlo_instruction").is_not_null()
    modeled = gpu.lazy().select(read).filter(rated).collect()
    modeled = modeled.with_columns(pl.col("name").is_in(matching(modeled["name"], TF32_KERNELS).implode()).fill_null(False)
                                   .any().over(*program, "hlo_instruction").alias("_tf32"))
    # a program's own row where programs share its module's name (a function compiled for two shapes): its id in the
    # row's params, so that two rows of one instruction name say which program each is
    if "program_id" in gpu.columns:
        ids = pl.col("program_id")
        shared = (ids.n_unique() - ids.is_null().any().cast(pl.UInt32)).over("hlo_module") > 1  # (nulls not an id)
        modeled = modeled.with_columns(pl.when(shared).then(ids).cast(pl.Int64).alias("_program"))
    else:
        modeled = modeled.with_columns(pl.lit(None, dtype=pl.Int64).alias("_program"))
    keys = ["hlo_module", "_program", "hlo_instruction", "hlo_op_class", "hlo_dtype", "hlo_params", "hlo_flops", "hlo_bytes",
            "_tf32"]
    groups = (modeled.group_by(keys).agg(
        pl.len().alias("_rows"), pl.col("name").n_unique().alias("_kernels"),
        (pl.col("dur").sum() / NS_PER_US).alias("kernel_time_us"),
        (pl.col("dur").median() / NS_PER_US).alias("median_time_us"),
        (pl.col("dur").min() / NS_PER_US).alias("min_time_us"),
        (pl.col("dur").max() / NS_PER_US).alias("max_time_us"),
        pl.col("_g").min().alias("example_idx"),
        # (the line of the user's code the instruction was traced from: one an instruction)
        (pl.col("hlo_source").drop_nulls().first().cast(pl.String) if "hlo_source" in read
         else pl.lit(None, dtype=pl.String)).alias("_source"))
        .sort("example_idx"))
    rows: list[dict[str, Any]] = []
    for r in groups.iter_rows(named=True):
        count = max(1, r["_rows"] // max(1, r["_kernels"]))
        gemm = r["hlo_op_class"] in MATRIX_CLASSES
        flops = r["hlo_flops"]
        if flops is None:
            continue
        moved = float(r["hlo_bytes"]) if r["hlo_bytes"] is not None else None
        w = Work(float(flops), moved, str(r["hlo_op_class"]), "matrix" if gemm else "vector", str(r["hlo_dtype"] or ""),
                 {"module": r["hlo_module"], **({"program": r["_program"]} if r["_program"] is not None else {}),
                  **({"source": r["_source"]} if r["_source"] is not None else {})})
        row = {"name": str(r["hlo_instruction"]), "input_dims": r["hlo_params"] or None, "input_type": str(r["hlo_dtype"] or ""),
               "concrete_inputs": None, "count": count, "kernel_time_us": r["kernel_time_us"],
               "mean_time_us": r["kernel_time_us"] / count, "median_time_us": r["median_time_us"],
               "min_time_us": r["min_time_us"], "max_time_us": r["max_time_us"], "nested": False,
               "example_idx": int(r["example_idx"])}
        ran = "tf32" if gemm and r["_tf32"] and precision(w.dtype) == "fp32" else None
        rows.append({**row, **rates(w, count, r["kernel_time_us"], dev, ran)})
    left = (gpu.lazy().select([c for c in ("hlo_instruction", "hlo_flops", "launcher", "dur", "kind") if c in gpu.columns])
            .filter(pl.col("hlo_instruction").is_null() | pl.col("hlo_flops").is_null()).collect())
    return pl.DataFrame(rows) if rows else pl.DataFrame(), left
