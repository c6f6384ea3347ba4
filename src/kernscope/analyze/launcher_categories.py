"""Categories that use the launching op: a second signal for kernels whose name says little.

A kernel named for what it does locally (a fill, an index or segment kernel, a small cuDNN helper) gets
the category of the innermost enclosing CPU op that an ``[[op_category]]`` rule names
(``aten::embedding_dense_backward`` -> Embedding/Indexing), when its name-based category is ``Other`` or
one of ``[launcher].generic`` and the op's is not generic. Kernels whose name matches ``[launcher].keep``
(dtype casts and copies: ``bfloat16_copy_kernel`` under an autocast ``aten::linear`` is not GEMM work)
keep their own category.

JAX/XLA kernels have a stronger second signal: the HLO instruction XLA compiled them from
(``hlo_desc``: opcode, fusion kind, fused opcodes, custom-call target; see :mod:`kernscope.load.hlo`).
Where the name's category is ``Other`` or generic, the ``[[op_category]]`` rule naming that description
decides, generic categories included (``fusion_84`` fusing a reduce is a Reduction).

``decided_by`` says which signal won: ``name``, ``op``, ``graph`` (the op around a graph launch) or
``hlo``; ``decided_op`` names the op (or HLO instruction) that decided (null for ``name``).
Vectorized: one nesting pass over the named ops.
"""

from __future__ import annotations

import polars as pl

from ..link.kinds import by_number, numbered
from ..model import Trace
from .attribute import innermost_op_pairs
from .categories import OTHER, Categorizer


def refine_by_launcher(trace: Trace, gpu: pl.DataFrame, categorizer: Categorizer) -> pl.DataFrame:
    """``gpu`` (categorized rows with launch columns) with ``category`` refined and a ``decided_by`` column."""
    out = gpu.with_columns(pl.lit("name", dtype=pl.Categorical).alias("decided_by"),
                           pl.lit(None, dtype=pl.Categorical).alias("decided_op"))
    generic = categorizer.generic | {OTHER}
    out = xla_generated(out)
    if not categorizer.op_rules or gpu.height == 0:
        return out
    out = refine_by_hlo(out, categorizer)
    cand = (out.with_row_index("_g")
            .select("_g", "kind", "category", "launch_ts", "decided_by", "name", "launch_pid", "launch_tid", "dur")
            .filter((pl.col("kind") == "kernel") & pl.col("category").is_in(sorted(generic))
                    & pl.col("launch_ts").is_not_null() & (pl.col("decided_by") == "name")))
    if categorizer.keep and cand.height:  # casts and copies keep their category: tested once per distinct name
        distinct = cand.select(pl.col("name").unique())
        kept = distinct.filter(pl.col("name").cast(pl.String).str.contains(f"(?i){categorizer.keep}"))
        cand = cand.join(kept, on="name", how="anti", maintain_order="left")
    if cand.height == 0:
        return out
    # CPU ops in lazy queries over the event table: each keeps only the rows and columns it needs (the CPU ops
    # copied out first were most of this function's memory on large traces)
    cpu = trace.events.lazy().filter(pl.col("kind") == "cpu_op")
    name_type = trace.events.schema["name"]
    # the rules run once per distinct op name; ops are matched on the interned names (no string per op)
    names = cpu.select(pl.col("name").unique()).drop_nulls().collect()["name"].cast(pl.String).to_list()
    op_cat = categorizer.op_categories(names).drop_nulls()
    op_cat = op_cat.filter(~pl.col("category").is_in(sorted(generic)))
    if op_cat.height == 0:
        return out
    ops = (cpu.select("idx", "name", "pid", "tid", "ts", "end")
           .join(op_cat.lazy().select(pl.col("name").cast(name_type), pl.col("category").alias("_op_cat")),
                 on="name", how="inner", maintain_order="left")
           .select("idx", "pid", "tid", "ts", "end", "_op_cat").collect())
    inner = innermost_op_pairs(ops.drop("_op_cat"), cand.select("_g", "launch_pid", "launch_tid", "launch_ts", "dur"))
    if inner.height == 0:
        return out
    op_name = (cpu.select(pl.col("idx").alias("op_idx"), "name").join(inner.lazy().select("op_idx").unique(), on="op_idx")
               .select("op_idx", pl.col("name").cast(pl.String).alias("_op_name")).collect())  # the ops found only
    best = (inner.join(ops.select(pl.col("idx").alias("op_idx"), "_op_cat"), on="op_idx")
            .join(op_name, on="op_idx", how="left")
            .select("_g", "_op_cat", "_op_name").unique("_g", keep="first"))
    # the new columns aligned with the rows (a join of the whole table would copy every column)
    found = out.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("_g")).join(
        best.with_columns(pl.col("_g").cast(pl.Int64)), on="_g", how="left", maintain_order="left")
    new = out.with_columns(found["_op_cat"], found["_op_name"])
    # the new values as the columns' types: no row's text made (categories are interned)
    dtype = gpu.schema["category"]
    new = new.with_columns(pl.col("_op_cat").cast(dtype), pl.col("_op_name").cast(pl.Categorical))
    changed = pl.col("_op_cat").is_not_null() & (pl.col("_op_cat") != pl.col("category"))
    graph = pl.col("graph_launch").fill_null(False) if "graph_launch" in new.columns else pl.lit(False)
    return new.with_columns(
        pl.when(changed).then(pl.col("_op_cat")).otherwise(pl.col("category")).alias("category"),
        pl.when(changed & graph).then(pl.lit("graph", dtype=pl.Categorical)).when(changed)
        .then(pl.lit("op", dtype=pl.Categorical)).otherwise(pl.col("decided_by")).alias("decided_by"),
        pl.when(changed).then(pl.col("_op_name")).otherwise(pl.col("decided_op")).alias("decided_op"),
    ).drop("_op_cat", "_op_name")


#: libraries a kernel XLA generated may read by its name or launch alone (its first ``copy`` or ``transpose`` has no
#: number to tell it from a user's Triton kernel of that name; every fusion on ROCm is launched through the driver API)
XLA_GENERATED_FROM = ("Unknown", "Triton")


#: the custom calls of JAX's Pallas kernels (its Triton and Mosaic GPU backends): library ``Pallas``, whatever the
#: kernel's name (``pallas_matmul``, ``mha_forward``)
PALLAS_CALLS = ("hlo:custom-call:__gpu$xla.gpu.triton", "hlo:custom-call:mosaic_gpu", "hlo:custom-call:mosaic_gpu_v2")


def xla_generated(gpu: pl.DataFrame) -> pl.DataFrame:
    """JAX rows: a kernel of an HLO instruction that is not a custom call (a fusion, a copy, a sort: XLA generated it)
    is library ``XLA`` where its name or launch said Unknown or Triton; a Pallas kernel (:data:`PALLAS_CALLS`) is
    ``Pallas``. Other custom calls keep theirs (cuBLAS, cuDNN, cuSOLVER). On the interned values: the distinct
    descriptions are read as text, not the rows."""
    if "hlo_desc" not in gpu.columns or "library" not in gpu.columns or gpu["hlo_desc"].null_count() == gpu.height:
        return gpu
    desc = gpu["hlo_desc"].cast(pl.Categorical)
    distinct = desc.unique().drop_nulls().cast(pl.String).to_list()
    generated = [d for d in distinct if not d.startswith("hlo:custom-call")]
    pallas = [d for d in distinct if d in PALLAS_CALLS]
    if not generated and not pallas:
        return gpu
    kernel = pl.col("kind") == "kernel"
    xla = kernel & desc.is_in(generated) & pl.col("library").is_in(list(XLA_GENERATED_FROM))
    return gpu.with_columns(pl.when(xla).then(pl.lit("XLA", dtype=pl.Categorical))
                            .when(kernel & desc.is_in(pallas)).then(pl.lit("Pallas", dtype=pl.Categorical))
                            .otherwise(pl.col("library")).alias("library"))


def refine_by_hlo(gpu: pl.DataFrame, categorizer: Categorizer) -> pl.DataFrame:
    """JAX rows: where the name's category is ``Other`` or generic, the category the ``[[op_category]]``
    rules give the kernel's HLO instruction (``hlo_desc``), when one does (``decided_by`` = ``hlo``).
    The rules run once per distinct description; rows are matched on the interned codes."""
    if "hlo_desc" not in gpu.columns or gpu["hlo_desc"].null_count() == gpu.height:
        return gpu
    generic = categorizer.generic | {OTHER}
    desc = gpu["hlo_desc"].cast(pl.Categorical)
    dtype = gpu.schema["category"]
    def categories(one: list[pl.Series]) -> pl.Series:  # (each distinct description's category, or null)
        texts = one[0].cast(pl.String)
        known = texts.drop_nulls().to_list()
        by_text = dict(zip(known, categorizer.op_categories(known)["category"].to_list()))
        out: pl.Series = pl.Series("_hlo_cat", [None if t is None else by_text[t] for t in texts.to_list()],
                                   dtype=pl.String).cast(dtype)
        return out

    found = numbered([desc])
    if found is not None:  # the rows' descriptions numbered in two compiled passes, each number's category gathered
        hlo_cat = by_number(found, [desc], categories)
        if hlo_cat.null_count() == hlo_cat.len():
            return gpu
        joined = gpu.with_columns(hlo_cat)
    else:
        distinct = desc.unique().drop_nulls()
        cats = categorizer.op_categories(distinct.cast(pl.String).to_list())
        table = pl.DataFrame({"_code": distinct.to_physical(), "_hlo_cat": cats["category"]}).drop_nulls()
        table = table.with_columns(pl.col("_hlo_cat").cast(dtype))
        if table.height == 0:
            return gpu
        # each row's HLO category aligned with the rows (a join of the whole table copied every column: 6.7 M rows of
        # ~70 at 1 GB)
        codes = gpu.select(desc.to_physical().alias("_code"))
        joined = gpu.with_columns(codes.join(table, on="_code", how="left", maintain_order="left")["_hlo_cat"])
    cat = pl.col("category")
    change = (pl.col("_hlo_cat").is_not_null() & cat.is_in(sorted(generic)) & (pl.col("_hlo_cat") != cat)
              & (pl.col("kind") == "kernel"))  # on the interned values: no text per row
    who = pl.coalesce(pl.col("hlo_instruction").cast(pl.Categorical), pl.col("hlo_op").cast(pl.Categorical)) \
        if "hlo_instruction" in gpu.columns else pl.col("hlo_op").cast(pl.Categorical)
    return joined.with_columns(
        pl.when(change).then(pl.col("_hlo_cat")).otherwise(cat).alias("category"),
        pl.when(change).then(pl.lit("hlo", dtype=pl.Categorical)).otherwise(pl.col("decided_by")).alias("decided_by"),
        pl.coalesce(pl.when(change).then(who), pl.col("decided_op").cast(pl.Categorical)).alias("decided_op"),
    ).drop("_hlo_cat")
