"""Classify events by ``ph``/``cat`` into a small fixed set of kinds (CUDA, ROCm, MTIA spellings), and select events
by name (:func:`named`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from ..intervals import RANK_TABLE, dense_ranks

KINDS = (
    "cpu_op",
    "user_annotation",
    "python_function",
    "runtime",
    "driver",
    "kernel",
    "memcpy",
    "memset",
    "gpu_user_annotation",
    "sync",
    "instant",
    "flow",
    "metadata",
    "counter",
    "other",
)
KindEnum = pl.Enum(KINDS)

#: GPU-side activity that occupies an engine and is counted in GPU time.
GPU_KINDS = ("kernel", "memcpy", "memset")
#: Host-side events that form the per-thread call tree.
CPU_TREE_KINDS = ("cpu_op", "user_annotation", "python_function", "runtime", "driver", "sync")
#: Host-side events that name what the host did: ops and the ranges recorded around them (record_function, a
#: DataLoader's ``__next__``, ``Optimizer.step``); the critical path's host split and ``step_start_idle`` read them
OP_KINDS = ("cpu_op", "user_annotation")

_CAT_TO_KIND = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "python_function": "python_function",
    "cuda_runtime": "runtime",
    "hip_runtime": "runtime",
    "runtime": "runtime",
    "mtia_runtime": "runtime",
    "cuda_driver": "driver",
    "hip_driver": "driver",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "gpu_user_annotation",
    "cuda_sync": "sync",
}


def kind_of(ph: str, cat: str) -> str:
    """The kind of an event of phase ``ph`` and category ``cat`` (:data:`KINDS`)."""
    if ph == "M":
        return "metadata"
    if ph in ("s", "f", "t"):
        return "flow"
    if ph == "C":
        return "counter"
    if ph in ("i", "I", "n"):
        return "instant"
    return _CAT_TO_KIND.get(cat.lower(), "other")


#: category codes up to this are mapped to their index by a table (8 bytes a code), larger ones by binary search
LUT_MAX_CODE = 1 << 24


def _codes(s: pl.Series) -> tuple[np.ndarray, list[str]]:
    """Each row's index into a list of the column's distinct values (null as "")."""
    if isinstance(s.dtype, (pl.Categorical, pl.Enum)):  # the physical codes: no string per row
        none = np.iinfo(np.uint32).max
        distinct = s.unique()
        codes = distinct.to_physical().fill_null(none).to_numpy().astype(np.int64)
        order = np.argsort(codes)
        names = distinct.cast(pl.String).fill_null("").to_list()
        physical = s.to_physical()
        top = int(codes[codes != none].max(initial=-1))
        if top < LUT_MAX_CODE:
            # a table from each code to its index (the null's after the largest code): one gather per row, where a
            # binary search per row took 0.05 s per column of 2.7 M rows
            lut = np.zeros(top + 2, dtype=np.int64)
            lut[np.minimum(codes[order], top + 1)] = np.arange(len(order))
            rows = physical.fill_null(top + 1).to_numpy()
            return lut[rows], [names[i] for i in order]
        rows = physical.fill_null(none).to_numpy().astype(np.int64)
        return np.searchsorted(codes[order], rows), [names[i] for i in order]
    text = s.cast(pl.String).fill_null("")
    enum = text.cast(pl.Enum(text.unique().sort().to_list()))
    dtype = enum.dtype
    assert isinstance(dtype, pl.Enum)
    return enum.to_physical().to_numpy().astype(np.int64), [str(c) for c in dtype.categories.to_list()]


#: the most combinations of codes :func:`numbered` numbers by a flat table
FLAT_KEYS = float(1 << 24)


def interned_codes(s: pl.Series) -> tuple[np.ndarray, np.ndarray | None]:
    """A categorical or Enum column's physical codes as int32 (read where polars holds them when there is no null)
    and where it is null (None: nowhere; the codes read 0 there)."""
    codes = s.to_physical()
    nulls = codes.null_count()
    v = (codes.fill_null(0) if nulls else codes).to_numpy()
    return (v.view(np.int32) if v.dtype == np.uint32 else v.astype(np.int32)), (codes.is_null().to_numpy() if nulls else None)


#: the widest range of one column's codes :func:`dense_codes` renumbers (:data:`kernscope.intervals.RANK_TABLE`)
DENSE_RANGE = RANK_TABLE


def dense_codes(codes: np.ndarray, missing: np.ndarray | None) -> np.ndarray | None:
    """``codes`` (int32 or int64 per row) renumbered 0..k-1 in their order, k the distinct codes of the rows not
    ``missing`` (those read any number: their mask says they are null), as int32: their ranks by
    :func:`kernscope.intervals.dense_ranks` (a table over the codes' range, no sort). None where the range is over
    :data:`DENSE_RANGE`.

    A categorical column's codes are the process's: polars numbers every string the process has interned, so where it
    has read other traces (a notebook, a test session) one trace's names hold codes from old ones (low) to its own new
    ones (high), a range far wider than its distinct names."""
    v = codes if missing is None else codes[~missing]
    if not v.size:
        return np.zeros(len(codes), dtype=np.int32)
    filled = codes.astype(np.int64)
    if missing is not None:
        filled[missing] = v[0]  # (a code of the rows kept: the null rows add no rank)
    ranked = dense_ranks(filled)
    return None if ranked is None else ranked[0].astype(np.int32)


def numbered(columns: list[pl.Series], max_space: float = FLAT_KEYS) -> tuple[np.ndarray, np.ndarray, list[np.ndarray | None]] | None:
    """The distinct combinations of the interned ``columns`` (categorical or Enum, equal lengths), numbered by the
    compiled library (:func:`kernscope.load.native.distinct_rows`): (each row's number, int32; one row of each
    combination; each column's null rows or None), or None where a column is not interned, the library is not there
    or the codes' ranges multiply past ``max_space`` even renumbered densely (:func:`dense_codes`: the same numbers,
    in the same order, as the codes themselves give where their ranges fit)."""
    if not columns or not len(columns[0]) or any(not isinstance(c.dtype, (pl.Enum, pl.Categorical)) for c in columns):
        return None
    from ..load.native import distinct_rows, scanner

    cols, missing = zip(*(interned_codes(c) for c in columns))
    got = distinct_rows(list(cols), list(missing), None, max_space)
    if got is None and scanner() is not None:
        dense: list[np.ndarray] = []
        space = 1
        for c, m in zip(cols, missing):  # (renumbered one column at a time: none more once the space is too wide)
            d = dense_codes(c, m)
            space *= 0 if d is None else int(d.max()) + 1
            if d is None or space > max_space:
                return None
            dense.append(d)
        got = distinct_rows(dense, list(missing), None, max_space)
    return None if got is None else (got[0], got[1], list(missing))


def by_number(found: tuple[np.ndarray, np.ndarray, list[np.ndarray | None]], columns: list[pl.Series],
              per_distinct: Callable[[list[pl.Series]], pl.Series]) -> pl.Series:
    """A value for every row, computed once per distinct combination of ``columns`` as :func:`numbered` ``found``
    them: ``per_distinct`` gets one row of each combination (the columns gathered there) and returns the value of
    each, which is gathered back by the rows' numbers."""
    number, first, _ = found
    at = pl.Series(first)
    return per_distinct([c.gather(at) for c in columns]).gather(pl.Series(number.view(np.uint32)))  # (no -1: all numbered)


def classify(ph: pl.Series, cat: pl.Series) -> pl.Series:
    """``kind`` for every row from its interned ``ph``/``cat`` codes: one lookup per distinct pair.

    Works on the physical codes of categorical and Enum columns (no per-row string work): the distinct pairs
    numbered in two compiled passes where the library is there (:func:`numbered`; a 975 MB JAX profile's 8.8 M rows
    0.1 -> 0.04 s), else through a table of each column's codes; other columns are cast to an Enum of their distinct
    values first.
    """
    def kinds(one: list[pl.Series]) -> pl.Series:
        pairs = zip(*(s.cast(pl.String).fill_null("").to_list() for s in one))
        return pl.Series("kind", [kind_of(p, c) for p, c in pairs], dtype=KindEnum)

    found = numbered([ph, cat])
    if found is not None:
        return by_number(found, [ph, cat], kinds)
    ph_idx, ph_names = _codes(ph)
    cat_idx, cat_names = _codes(cat)
    kind_code = {k: i for i, k in enumerate(KINDS)}
    lut = np.array([[kind_code[kind_of(p, c)] for c in cat_names] for p in ph_names], dtype=np.uint32).reshape(-1)
    idx = ph_idx * max(len(cat_names), 1) + cat_idx
    return pl.Series("kind", list(KINDS), dtype=KindEnum).gather(pl.Series(lut[idx], dtype=pl.UInt32))


def matching(names: pl.Series, pattern: str) -> pl.Series:
    """The distinct values of ``names`` (a column of names, interned or not) whose text matches the regex ``pattern``
    (``str.contains``): for ``is_in`` on the rows, so that the regex runs once per distinct name, not once per row
    (the 924 k rated kernels of a 207 MB JAX profile's perf model: 0.12 -> 0.10 s)."""
    distinct = names.unique().drop_nulls()
    return distinct.filter(distinct.cast(pl.String).str.contains(pattern))


def named(table: pl.DataFrame, pattern: str) -> pl.DataFrame:
    """The rows of ``table`` whose ``name`` matches the regex ``pattern`` (``str.contains``), in their order. The
    regex runs once per distinct name and rows are matched on the name as stored (interned): no row's name is
    cast to text (ten million CPU ops' names were a few hundred MB of strings)."""
    return table.filter(pl.col("name").is_in(matching(table["name"], pattern).implode()))
