"""Compare two traces (or two steps of one, or two ranks): totals, categories, kernels, CPU ops and the lines of the
user's code (a JAX profile's always; a PyTorch trace's with ``python_sources``).

Input: two linked traces and what to compare of each (a step, or all). Output: a :class:`TraceDiff` of
DataFrames (µs), rows sorted by absolute delta (the one-line verdict is the renderers', from these). ``B - A``: positive deltas are
time B spends more. Kernel names that differ only in template arguments, tile sizes or autotuning
suffixes match with ``match="loose"`` (:func:`loose_name`); so do the lines of one function of the user's code (lines
move when code is edited: the file and function are the key).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import polars as pl

from ..intervals import union_by
from ..load.native import union_lengths
from ..model import Trace
from ..scalars import as_int
from .categories import Categorizer, kernel_head
from .facts import TraceFacts, trace_facts
from .kernels import NS_PER_US, gpu_table
from .sources import source_file, source_rows
from .timeline import one_device_filled

_TILE = re.compile(r"\d+x\d+(?:x\d+)*")
_TEMPLATE = re.compile(r"<[^<>]*>")
_TUNED = re.compile(r"(?i)(align|stages|warps|stage|warp|splitk|split_k|_k|_sm)(\d+)")
_SUFFIX = re.compile(r"_\d+$")
_NUM_FIELD = re.compile(r"(?<=_)\d+(?=_)")


def loose_name(name: str) -> str:
    """A kernel name without what changes between builds of the same kernel: template arguments
    (``<…>``), the parameter list, tile shapes (``128x256x64`` -> ``#x#``), tuning numbers (``align8``,
    ``stages3``) and numeric fields (``_80_``, a Triton kernel's trailing ``_12``)."""
    n = kernel_head(name)
    for _ in range(32):  # innermost template argument lists first, until none is left
        m = _TEMPLATE.sub("\x01", n)
        if m == n:
            break
        n = m
    n = n.replace("\x01", "<…>")
    n = _TILE.sub("#x#", n)
    n = _TUNED.sub(lambda m: m.group(1) + "#", n)
    n = _NUM_FIELD.sub("#", n)
    return _SUFFIX.sub("_#", n)


#: columns of :attr:`TraceDiff.sources`
DIFF_SOURCE_SCHEMA = {"source": pl.String, "function": pl.String, "a_count": pl.Int64, "b_count": pl.Int64,
                      "a_us": pl.Float64, "b_us": pl.Float64, "delta_us": pl.Float64, "only": pl.String}


@dataclass(frozen=True)
class Side:
    """What is compared of one trace."""

    trace: Trace
    step: int | None = None
    label: str = ""


@dataclass(frozen=True)
class TraceDiff:
    """Results of :func:`diff`. All times µs; ``delta`` = B − A.

    Attributes:
        total: ``a_us, b_us, delta_us, delta_pct`` (summed GPU time) and ``a_busy_us, b_busy_us`` (union).
        categories: ``category, a_count, b_count, a_us, b_us, delta_us``.
        libraries: ``library, a_count, b_count, a_us, b_us, delta_us`` (who wrote the kernels: cuBLAS, Triton, ...).
        kernels: ``name, launcher, a_count, b_count, a_us, b_us, delta_us, only, variants`` (``only``: "a",
            "b" or "" when on both sides; ``variants``: raw names merged by loose matching).
        ops: CPU ops: ``name, a_count, b_count, a_us, b_us, delta_us, a_gpu_us, b_gpu_us, only`` (``*_us``
            host time of the op; ``*_gpu_us`` GPU time of the kernels it launched).
        sources: GPU time by the line of the user's code (:func:`kernscope.analyze.sources.source_rows`; kernels,
            copies and sets): ``source, function, a_count, b_count, a_us, b_us, delta_us, only``; ``source`` is
            ``path:line``, or ``path`` with ``match="loose"`` (a function's lines as one row); null: the records
            with no line. Empty unless both sides have lines (JAX profiles; PyTorch traces with stacks, asked for).
    """

    a: TraceFacts
    b: TraceFacts
    step_a: int | None
    step_b: int | None
    match: str
    total: dict[str, float]
    categories: pl.DataFrame
    kernels: pl.DataFrame
    ops: pl.DataFrame
    libraries: pl.DataFrame
    #: (rank of A, rank of B) when A and B are two ranks of one job (:func:`ranks_of_one_job`), else None
    ranks: tuple[int, int] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    sources: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=DIFF_SOURCE_SCHEMA))

    kind: ClassVar[str] = "diff"

    @property
    def title(self) -> str:
        return f"{self.a.path} vs {self.b.path}"

    def facts_dict(self) -> dict[str, Any]:
        """``a``, ``b``: each side's trace facts and step; ``match``; ``ranks``; ``total`` (µs, B − A)."""
        return {"a": {**self.a.to_dict(), "step": self.step_a}, "b": {**self.b.to_dict(), "step": self.step_b},
                "match": self.match, "ranks": self.ranks, "total": dict(self.total)}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``categories``, ``libraries``, ``sources``, ``kernels``, ``ops`` (µs; sorted by absolute delta)."""
        return {"categories": self.categories, "libraries": self.libraries, "sources": self.sources,
                "kernels": self.kernels, "ops": self.ops}


def _gpu(side: Side, categorizer: Categorizer) -> pl.DataFrame:
    return gpu_table(side.trace, categorizer, step=side.step)


def _ops(side: Side) -> pl.DataFrame:
    ev = side.trace.events.filter(pl.col("kind") == "cpu_op")
    if side.step is not None:
        w = side.trace.steps.filter(pl.col("step") == side.step)
        if w.height:
            s, e = w.row(0, named=True)["start"], w.row(0, named=True)["end"]
            ev = ev.filter((pl.col("ts") >= s) & (pl.col("ts") < e))
    return ev.group_by(pl.col("name").cast(pl.String)).agg(pl.len().alias("count"), (pl.col("dur").sum() / NS_PER_US).alias("us"))


def _join(a: pl.DataFrame, b: pl.DataFrame, keys: list[str], values: list[str], nulls_equal: bool = False) -> pl.DataFrame:
    out = a.rename({v: f"a_{v}" for v in values}).join(b.rename({v: f"b_{v}" for v in values}), on=keys, how="full",
                                                        coalesce=True, nulls_equal=nulls_equal)
    fills = [pl.col(f"{s}_{v}").fill_null(0) for s in "ab" for v in values]
    only = (pl.when(pl.col("_in_a").is_null()).then(pl.lit("b")).when(pl.col("_in_b").is_null()).then(pl.lit("a"))
            .otherwise(pl.lit("")).alias("only"))
    return out.with_columns(only).with_columns(fills).drop("_in_a", "_in_b")


def _by_source(side: Side, python: bool, loose: bool, tag: str) -> pl.DataFrame | None:
    """GPU time (µs) and count by the user's line (``loose``: by file and function) of one side; None where it has
    no line."""
    rows = source_rows(side.trace, side.step, python)
    if rows is None:
        return None
    return (rows.group_by((source_file() if loose else pl.col("source").cast(pl.String)).alias("source"),
                          pl.col("function").cast(pl.String))
            .agg(pl.len().cast(pl.Int64).alias("count"), (pl.col("dur").sum() / NS_PER_US).alias("us"))
            .with_columns(pl.lit(True).alias(f"_in_{tag}")))


def source_deltas(a: Side, b: Side, *, python: bool = False, loose: bool = False) -> tuple[pl.DataFrame, str | None]:
    """:attr:`TraceDiff.sources` of ``a`` and ``b`` (``python``: read a PyTorch trace's lines from its Python stacks;
    ``loose``: a function's lines as one row), sorted by absolute delta; and, where ``python`` asked for lines, a note
    where only one side has them (the table is then empty: the other side's time would all read as moved)."""
    sa, sb = _by_source(a, python, loose, "a"), _by_source(b, python, loose, "b")
    if sa is None or sb is None:
        empty = pl.DataFrame(schema=DIFF_SOURCE_SCHEMA)
        if (sa is None and sb is None) or not python:
            return empty, None
        return empty, (f"only {'A' if sb is None else 'B'} has lines of the user's code, so GPU time by line is not "
                       "compared (a PyTorch trace has them with --sources where it was recorded with with_stack=True)")
    out = (_join(sa, sb, ["source", "function"], ["count", "us"], nulls_equal=True)
           .with_columns((pl.col("b_us") - pl.col("a_us")).alias("delta_us"))
           .sort([pl.col("delta_us").abs(), "source", "function"], descending=[True, False, False], nulls_last=True))
    return out.select(list(DIFF_SOURCE_SCHEMA)).cast(DIFF_SOURCE_SCHEMA), None  # type: ignore[arg-type]


def diff(a: Side, b: Side, *, match: str = "exact", categorizer: Categorizer | None = None,
         python_sources: bool = False) -> TraceDiff:
    """Compare ``a`` and ``b``.

    Args:
        match: "exact" (kernel names as recorded; the user's code by line) or "loose" (names through
            :func:`loose_name`; the user's code by file and function).
        categorizer: kernel categories (default: built-in rules).
        python_sources: PyTorch traces recorded with ``with_stack=True``: GPU time by the user's function from the
            Python stacks too (the traces must be loaded with their Python events); JAX profiles have lines always.
    """
    if match not in ("exact", "loose"):
        raise ValueError("match must be 'exact' or 'loose'")
    cat = categorizer or Categorizer.builtin()
    ga, gb = _gpu(a, cat), _gpu(b, cat)

    def kernels(g: pl.DataFrame) -> pl.DataFrame:
        k = g.filter(pl.col("kind") == "kernel").with_columns(pl.col("launcher").cast(pl.String).fill_null(""))
        if match == "loose":
            names = k.select(pl.col("name").unique())
            names = names.with_columns(pl.Series("key", [loose_name(n) for n in names["name"].to_list()], dtype=pl.String))
            k = k.join(names, on="name", how="left").with_columns(pl.col("key").alias("name_key"))
        else:
            k = k.with_columns(pl.col("name").alias("name_key"))
        return k.group_by("name_key", "launcher").agg(
            pl.len().alias("count"), (pl.col("dur").sum() / NS_PER_US).alias("us"), pl.col("name").n_unique().alias("variants"))

    ka, kb = kernels(ga), kernels(gb)
    ka = ka.with_columns(pl.lit(True).alias("_in_a"))
    kb = kb.with_columns(pl.lit(True).alias("_in_b"))
    kern = _join(ka.rename({"variants": "va"}), kb.rename({"variants": "vb"}), ["name_key", "launcher"], ["count", "us"])
    kern = (kern.with_columns((pl.col("b_us") - pl.col("a_us")).alias("delta_us"),
                              pl.max_horizontal(pl.col("va").fill_null(0), pl.col("vb").fill_null(0)).alias("variants"))
            .rename({"name_key": "name"})
            .sort([pl.col("delta_us").abs(), "name", "launcher"], descending=[True, False, False])
            .select("name", "launcher", "a_count", "b_count", "a_us", "b_us", "delta_us", "only", "variants"))

    def by(key: str) -> pl.DataFrame:  # GPU time by category or library, A and B side by side
        def one(g: pl.DataFrame, side: str) -> pl.DataFrame:
            return (g.group_by(pl.col(key).cast(pl.String)).agg(pl.len().alias("count"), (pl.col("dur").sum() / NS_PER_US).alias("us"))
                    .with_columns(pl.lit(True).alias(f"_in_{side}")))

        return (_join(one(ga, "a"), one(gb, "b"), [key], ["count", "us"]).drop("only")
                .with_columns((pl.col("b_us") - pl.col("a_us")).alias("delta_us"))
                .sort([pl.col("delta_us").abs(), key], descending=[True, False])
                .select(key, "a_count", "b_count", "a_us", "b_us", "delta_us"))

    categories, libraries = by("category"), by("library")

    def ops(side: Side, g: pl.DataFrame) -> pl.DataFrame:
        host = _ops(side)
        gpu = (g.filter(pl.col("op_name").is_not_null()).group_by(pl.col("op_name").cast(pl.String).alias("name"))
               .agg((pl.col("dur").sum() / NS_PER_US).alias("gpu_us")))
        return host.join(gpu, on="name", how="left").with_columns(pl.col("gpu_us").fill_null(0.0))

    oa = ops(a, ga).with_columns(pl.lit(True).alias("_in_a"))
    ob = ops(b, gb).with_columns(pl.lit(True).alias("_in_b"))
    op_rows = (_join(oa, ob, ["name"], ["count", "us", "gpu_us"])
               .with_columns((pl.col("b_us") - pl.col("a_us")).alias("delta_us"))
               .sort([pl.col("delta_us").abs(), "name"], descending=[True, False])
               .select("name", "a_count", "b_count", "a_us", "b_us", "delta_us", "a_gpu_us", "b_gpu_us", "only"))

    a_us = float(ga["dur"].sum() or 0) / NS_PER_US
    b_us = float(gb["dur"].sum() or 0) / NS_PER_US
    total = {
        "a_us": a_us, "b_us": b_us, "delta_us": b_us - a_us,
        "delta_pct": 100.0 * (b_us - a_us) / a_us if a_us else 0.0,
        "a_busy_us": _busy(ga), "b_busy_us": _busy(gb),
    }
    fa, fb = trace_facts(a.trace), trace_facts(b.trace)
    notes = []
    if fa.device_names and fb.device_names and fa.device_names != fb.device_names:
        notes.append(f"different devices: A ran on {', '.join(fa.device_names)}, B on {', '.join(fb.device_names)}; "
                     "the times compare the hardware as well as the code")
    fw_a, fw_b = _framework(a.trace), _framework(b.trace)
    if fw_a != fw_b:
        notes.append(f"A is a {fw_a} profile and B a {fw_b} one: kernel and op names differ between the frameworks "
                     "(XLA fusions and HLO ops against ATen kernels and ops), so compare by category; a kernel 'only' on "
                     "one side may have a counterpart under another name")
    if a.step is None and b.step is None and fa.steps and fb.steps and fa.steps != fb.steps:
        notes.append(f"A has {fa.steps} steps and B {fb.steps}: totals cover all of them; compare one step each with "
                     "--step N --step-b M")
    sources, lines_note = source_deltas(a, b, python=python_sources, loose=match == "loose")
    if lines_note is not None:
        notes.append(lines_note)
    ranks = ranks_of_one_job(a.trace, b.trace, ga, gb)
    return TraceDiff(fa, fb, a.step, b.step, match, total, categories, kern, op_rows, libraries, ranks, tuple(notes),
                     sources)


def _framework(trace: Trace) -> str:
    """``JAX/XLA`` for an XSpace or JAX JSON export, else ``PyTorch``."""
    return "JAX/XLA" if trace.metadata.get("framework") == "jax" else "PyTorch"


def _busy(g: pl.DataFrame) -> float:
    """GPU busy time, µs: each device's union of its records, summed (one GPU's work never hides another's)."""
    if g.height == 0:
        return 0.0
    rows, _ = one_device_filled(g.select("device", "ts", "end"))
    return float(union_by(rows, ["device"], sweep=union_lengths)["len"].sum()) / NS_PER_US


def ranks_of_one_job(a: Trace, b: Trace, ga: pl.DataFrame, gb: pl.DataFrame) -> tuple[int, int] | None:
    """The ranks of ``a`` and ``b`` when they are two ranks of one job: both record a rank (distributedInfo),
    the ranks differ, the world sizes agree and their GPU activity overlaps in time. Else None."""
    if a.rank is None or b.rank is None or a.rank == b.rank or a.world_size != b.world_size:
        return None
    if ga.height == 0 or gb.height == 0:
        return None
    a0, a1, b0, b1 = (as_int(x) for x in (ga["ts"].min(), ga["end"].max(), gb["ts"].min(), gb["end"].max()))
    if max(a0, b0) >= min(a1, b1):
        return None
    return a.rank, b.rank
