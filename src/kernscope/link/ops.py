"""Host-side links: the CPU op of each launch without an External-id match, and python_function parents."""

from __future__ import annotations

import numpy as np
import polars as pl

from ..intervals import tie_positions
from ..load import native


def fallback_ops(gpu: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """For launches with no External-id match: the innermost ``cpu_op`` enclosing it on its thread.

    The innermost: of the ops of the launch's thread with ``ts <= launch ts <= end``, the latest-starting one (of
    two starting together, the one that ends first; then the later event). One sweep over each thread's sorted ops
    and launches (``load/_sweep.c``), or, without the compiled library, a range join (polars ``join_where``) of the
    launches against the ops of their threads: the same pairs.
    """
    need = gpu.filter(pl.col("launch_idx").is_not_null() & pl.col("op_idx").is_null())
    if need.height == 0:
        return gpu
    # (in file order: a thread's launches are then in time order, as the sweep takes them, in every trace here)
    launches = rows_by_idx(events.select("idx", "pid", "tid", "ts"), need["launch_idx"].unique().sort()).select(
        pl.col("idx").alias("launch_idx"), pl.col("pid").alias("_lp"), pl.col("tid").alias("_lt"), pl.col("ts").alias("_ls"))
    threads = launches.select("_lp", "_lt").unique()
    # lazy: the CPU ops' five columns are read, not all their columns copied first (1 GB on a 10 GB trace)
    ops = events.lazy().filter(pl.col("kind") == "cpu_op").select(
        pl.col("idx").alias("_fb"), pl.col("pid").alias("_lp"), pl.col("tid").alias("_lt"),
        pl.col("ts").alias("_os"), pl.col("end").alias("_oe"),
    ).join(threads.lazy(), on=["_lp", "_lt"], how="semi").collect()
    if ops.height == 0:
        return gpu
    fb = swept_innermost(launches, ops)
    if fb is None:
        fb = joined_innermost(launches, ops)
    found = looked_up(gpu["launch_idx"], fb["launch_idx"], fb["_fb"])
    if found is None:
        found = gpu.select("launch_idx").join(fb, on="launch_idx", how="left", maintain_order="left")["_fb"]
    return gpu.with_columns(pl.coalesce(pl.col("op_idx"), pl.lit(found)).alias("op_idx"))


#: :func:`looked_up` builds a table over the keys' range when it is at most this many times the rows involved
DENSE_RANGE = 4


def looked_up(keys: pl.Series, table_keys: pl.Series, values: pl.Series) -> pl.Series | None:
    """``values`` at each of ``keys`` (Int64 columns; ``table_keys`` distinct, not null): null where a key is null or not
    in ``table_keys``, in the order of ``keys``. Through a flat table over the table keys' range (a left join of a
    JAX profile's 6.7 M GPU rows with 170 k launches took 0.06-0.1 s, this 0.035-0.04 s); None where that range is
    over :data:`DENSE_RANGE` times the rows, or a column is not Int64: the caller joins."""
    if table_keys.len() == 0 or any(s.dtype != pl.Int64 for s in (keys, table_keys, values)) or table_keys.null_count():
        return None
    k = table_keys.to_numpy()
    lo, hi = int(k.min()), int(k.max())
    if hi - lo + 1 > DENSE_RANGE * (keys.len() + k.size):
        return None
    slot = np.full(hi - lo + 2, k.size, dtype=np.int64 if k.size >= 2**31 else np.int32)  # the last: no value
    slot[k - lo] = np.arange(k.size, dtype=slot.dtype)
    q = keys.to_numpy() if keys.null_count() == 0 else keys.fill_null(lo - 1).to_numpy()
    inside = (q >= lo) & (q <= hi)
    rows = slot[np.where(inside, q - lo, hi - lo + 1)]
    return pl.concat([values, pl.Series([None], dtype=pl.Int64)]).gather(pl.Series(rows)).alias(values.name)


def rows_by_idx(events: pl.DataFrame, idx: pl.Series) -> pl.DataFrame:
    """The rows of ``events`` whose ``idx`` is in ``idx`` (distinct values; the rows in no particular order). The event
    table is in file order, its ``idx`` increasing: the rows are found by binary search and gathered (a hash join of
    264 k launches against 2.7 M events took 0.06 s); a table not in that order is joined."""
    col = events.get_column("idx")
    if col.null_count() == 0 and idx.null_count() == 0 and col.len():
        at = col.to_numpy()
        want = idx.to_numpy()
        if at.size < 2 or bool((at[1:] > at[:-1]).all()):
            pos = np.minimum(np.searchsorted(at, want), at.size - 1)
            found = at[pos] == want
            rows: pl.DataFrame = events[pos[found]]
            return rows
    return events.join(idx.alias("idx").to_frame(), on="idx", how="semi")


def thread_key(pid: str, tid: str) -> pl.Expr:
    """A thread as one int64 (``_g``): the category codes of its pid and tid, or null."""
    return (pl.col(pid).to_physical().cast(pl.Int64) * (1 << 32) + pl.col(tid).to_physical().cast(pl.Int64)).alias("_g")


_CATEGORIES = (pl.Categorical, pl.Enum)


def swept_innermost(launches: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame | None:
    """``launch_idx, _fb``: each launch's innermost enclosing op (``launches``: launch_idx, _lp, _lt, _ls; ``ops``:
    _fb, _lp, _lt, _os, _oe), by the compiled sweep; None without the compiled library."""
    if native.scanner() is None:
        return None
    ls, os_ = launches.schema, ops.schema
    if all(isinstance(s[c], _CATEGORIES) and s[c] == os_[c] for s in (ls, os_) for c in ("_lp", "_lt")):
        # both sides' pid and tid are of one event table: their category codes name a thread alike (joining every op
        # to a numbered list of threads took 0.1 s for the 1 M ops of a 1 GB trace)
        o = ops.with_columns(thread_key("_lp", "_lt")).drop_nulls(["_g", "_os", "_oe"])
        q = launches.with_columns(thread_key("_lp", "_lt")).drop_nulls(["_g", "_ls"])
    else:
        groups = ops.select("_lp", "_lt").unique().with_row_index("_g").with_columns(pl.col("_g").cast(pl.Int64))
        o = ops.drop_nulls(["_os", "_oe"]).join(groups, on=["_lp", "_lt"])
        q = launches.drop_nulls("_ls").join(groups, on=["_lp", "_lt"])
    ops_sorted = _thread_ordered(o.select("_g", "_os", "_oe", "_fb"), [False, False, True, False])
    launches_sorted = _thread_ordered(q.select("_g", "_ls", "launch_idx"), [False, False])
    g, starts, ends, fb = ops_sorted["_g"], ops_sorted["_os"], ops_sorted["_oe"], ops_sorted["_fb"]
    pos = native.innermost(g, starts, ends, launches_sorted["_g"], launches_sorted["_ls"])
    if pos is None:
        return None
    hit = pos >= 0
    return pl.DataFrame({"launch_idx": launches_sorted["launch_idx"][hit], "_fb": fb[pos[hit]]},
                        schema={"launch_idx": q.schema["launch_idx"], "_fb": o.schema["_fb"]})


def _thread_ordered(table: pl.DataFrame, descending: list[bool]) -> dict[str, np.ndarray]:
    """``table``'s columns (Int64, as numpy arrays) sorted by its first ``len(descending)`` columns (``descending``
    each, no nulls; the first is the thread, ``_g``, ascending). A thread's events come in time order in the file: the
    rows grouped by thread in file order (a stable argsort of the thread key) are taken where they are in that order,
    with only the runs of rows that start together sorted where just those are not; else numpy's ``lexsort`` (the 227 k
    CPU ops of a 216 MB trace: ~1 ms grouped, 12 ms sorted; polars' sort of the four keys took 14-29 ms, of its 89 k
    launches' two keys 10-17 ms against numpy's 0.5 ms)."""
    cols = {c: table.get_column(c).to_numpy() for c in table.columns}
    names = table.columns[: len(descending)]
    by_thread = np.argsort(cols[names[0]], kind="stable")
    grouped = {c: a[by_thread] for c, a in cols.items()}
    if _in_order([grouped[c] for c in names], descending):
        return grouped
    thread, start = grouped[names[0]], grouped[names[1]]
    if len(names) > 2 and not descending[1] and _in_order([thread, start], [False, False]):
        # in time order, but not the ops that start together (a child written before its parent): only the runs of
        # equal (thread, start) sorted by the other keys (the 201 k ops of a 207 MB a100 trace: 25 k such rows)
        tied = (thread[1:] == thread[:-1]) & (start[1:] == start[:-1])
        run = np.cumsum(np.concatenate([[True], ~tied]))  # each row's run of equal (thread, start)
        at = tie_positions(np.flatnonzero(tied), len(thread))
        keys = [run[at], *(~grouped[c][at] if desc else grouped[c][at] for c, desc in zip(names[2:], descending[2:]))]
        moved = at[np.lexsort(keys[::-1])]
        for a in grouped.values():  # (in place: no second copy of every column)
            a[at] = a[moved]
        return grouped
    del grouped
    # (~x orders as -x does, without overflowing at int64's minimum)
    perm = np.lexsort([~cols[c] if desc else cols[c] for c, desc in reversed(list(zip(names, descending)))])
    return {c: a[perm] for c, a in cols.items()}


def _in_order(keys: list[np.ndarray], descending: list[bool]) -> bool:
    """Whether each row is after the one before it by ``keys`` (lexicographic; ``descending`` each): equal rows are in
    order, as a sort may give them in any order."""
    if keys[0].size < 2:
        return True
    after = np.zeros(keys[0].size - 1, dtype=bool)  # strictly after, by the keys so far
    tied = np.ones(keys[0].size - 1, dtype=bool)  # equal in the keys so far
    for a, desc in zip(keys, descending):
        prev, nxt = a[:-1], a[1:]
        after |= tied & ((nxt < prev) if desc else (nxt > prev))
        tied &= nxt == prev
    return bool((after | tied).all())


def joined_innermost(launches: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """:func:`swept_innermost` by a range join (polars ``join_where``) and a sort of the pairs."""
    pairs = launches.join_where(
        ops.rename({"_lp": "_op_pid", "_lt": "_op_tid"}),
        pl.col("_os") <= pl.col("_ls"),
        pl.col("_oe") >= pl.col("_ls"),
    ).filter((pl.col("_lp") == pl.col("_op_pid")) & (pl.col("_lt") == pl.col("_op_tid")))
    # the innermost: the latest start; of ops starting together, the one ending first (it is inside the other),
    # then the later event (a deterministic choice for identical windows)
    return (pairs.sort(["_os", "_oe", "_fb"], descending=[True, False, True])
            .unique("launch_idx", keep="first").select("launch_idx", "_fb"))


def python_parents(events: pl.DataFrame) -> pl.DataFrame:
    """Add ``py_parent_idx``: the row of each python_function's parent (by Python id / parent id)."""
    py = events.filter(pl.col("kind") == "python_function")
    if py.height == 0:
        return events.with_columns(pl.lit(None, dtype=pl.Int64).alias("py_parent_idx"))
    parents = (
        py.select(pl.col("pid"), pl.col("python_id").alias("python_parent_id"), pl.col("idx").alias("py_parent_idx"))
        .filter(pl.col("python_parent_id").is_not_null())
        .unique(["pid", "python_parent_id"], keep="first")
    )
    col = (
        events.select("pid", "python_parent_id")
        .join(parents, on=["pid", "python_parent_id"], how="left", maintain_order="left")["py_parent_idx"]
    )
    return events.with_columns(col)


def op_names(gpu: pl.DataFrame, events: pl.DataFrame, where: pl.Expr | None = None) -> pl.DataFrame:
    """Add ``op_name`` (the launching CPU op's name) from ``op_idx``, for the rows where ``where`` holds (null for
    the others; every row without it). Where no row asks for a name, no lookup is made (a JAX profile's GPU rows are
    named by their HLO ops: looking up 6.7 M rows' CPU ops took 0.1-0.15 s for nothing)."""
    idx = gpu["op_idx"] if where is None else gpu.select(pl.when(where).then(pl.col("op_idx"))).to_series()
    wanted = idx.drop_nulls().unique()
    if wanted.len() == 0:
        return gpu.with_columns(pl.lit(None, dtype=events.schema["name"]).alias("op_name"))
    names = rows_by_idx(events.select("idx", "name"), wanted).select(
        pl.col("idx").alias("op_idx"), pl.col("name").alias("op_name"))  # interned: no string per row
    return gpu.with_columns(idx.to_frame("op_idx").join(names, on="op_idx", how="left", maintain_order="left")["op_name"])
