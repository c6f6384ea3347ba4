"""The line of the user's code each GPU record's work came from, in a PyTorch trace recorded with ``with_stack=True``.

Kineto records the Python stack as ``python_function`` events (``model.py(42): forward``,
``torch/nn/modules/module.py(1783): _call_impl``, ``<built-in function linear>``) that nest, on the launching thread,
around the CPU ops and the runtime call that launched the kernel. From that call up the call tree
(:func:`kernscope.link.tree.call_tree`), the first Python frame that is not the framework's own
(:data:`FRAMEWORK_FRAMES`: PyTorch, Triton, Python's standard library, built-ins, Inductor's generated code) is the
line of the user's code: the model's, or a model library's (``transformers/models/qwen2/modeling_qwen2.py(276):
forward``). The backward runs on autograd's thread, which has no Python stack: a backward kernel counts for the
function of its forward op (the op that made the autograd node whose backward launched it: the backward op's
``Sequence number``), marked ``(backward)``. JAX profiles have their lines from the HLO (``hlo_source``,
:mod:`kernscope.load.hlo`).

Numpy over the call tree: one step up every unresolved row at a time (a Python stack is a few dozen frames deep),
each distinct frame name parsed once.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import polars as pl

from ..load.hlo import PACKAGE_FILE
from ..model import Trace

#: a Python frame's event name: ``path(line): function``
_FRAME = re.compile(r"^(?P<path>.+)\((?P<line>\d+)\): (?P<function>.+)$")
#: frames that are the framework's, not the user's: PyTorch's own packages, Triton, Inductor's generated modules,
#: installed packages named by their full path, Python's standard library (by its first path component)
FRAMEWORK_FRAMES = re.compile(
    rf"^(torch|torchgen|functorch|triton|torch_tensorrt|apex|tensorrt)/|torchinductor_|{PACKAGE_FILE.pattern}|^<")
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
#: the columns :func:`python_sources` gives the GPU rows
SOURCE_COLUMNS = ("py_source", "py_function")
#: the GPU records that have a line: those the analysis sums (kernels, copies, sets)
SOURCE_KINDS = ("kernel", "memcpy", "memset")
#: the line number at the end of a ``source`` (``path:line``)
_LINE = r":(\d+)$"


def source_file(col: str = "source") -> pl.Expr:
    """The file of a ``path:line`` source column (text)."""
    return pl.col(col).cast(pl.String).str.replace(_LINE, "")


def source_line(col: str = "source") -> pl.Expr:
    """The line number (int64) of a ``path:line`` source column."""
    return pl.col(col).cast(pl.String).str.extract(_LINE).cast(pl.Int64)


def source_rows(trace: Trace, step: int | None = None, python: bool = False) -> pl.DataFrame | None:
    """The GPU records of ``step`` (all steps: None) that a source table sums (:data:`SOURCE_KINDS`), each with the
    line of the user's code its work came from: ``name``, ``kind``, ``dur`` (ns), ``source`` (``path:line``),
    ``function``. A JAX profile's from its HLO (``hlo_source``, ``hlo_function``), else with ``python`` a PyTorch
    trace's from its Python stacks (:func:`python_sources`). ``source`` is null where a record has no line. None
    where no record has one (a Kineto trace without ``python``, or recorded without Python stacks). Read from the
    trace's GPU table, whose columns the selection shares."""
    out = _line_rows(trace, step, python)
    return out if out is not None and out.height and out["source"].null_count() < out.height else None


def _line_rows(trace: Trace, step: int | None, python: bool, *, any_hlo: bool = False) -> pl.DataFrame | None:
    """:func:`source_rows`, with those that have no line; None where the trace has no lines to give (``any_hlo``: a
    JAX profile's rows, whether any of them has a line or not)."""
    gpu = trace.gpu
    jax = "hlo_source" in gpu.columns and (any_hlo or gpu["hlo_source"].null_count() < gpu.height)
    if not jax and not python:
        return None
    wanted = ["name", "kind", "dur", *(("hlo_source", "hlo_function") if jax else ("launch_idx",))]
    keep = pl.col("kind").is_in(SOURCE_KINDS)
    if step is not None:
        keep = keep & (pl.col("step") == step)
    # (eager: where every row is kept, as a JAX profile's 1.4 M are, the columns stay polars' own; a lazy query's
    # streaming engine copied them into chunks)
    got = gpu.select(*wanted, "step").filter(keep).select(wanted)
    if jax:
        out = got.rename({"hlo_source": "source", "hlo_function": "function"})
    else:
        out = python_sources(trace, got).drop("launch_idx").rename(dict(zip(SOURCE_COLUMNS, ("source", "function"))))
    return out


def source_groups(trace: Trace) -> pl.DataFrame | None:
    """A JAX profile's GPU rows that a source table sums, grouped by
    :data:`~kernscope.analyze.kernels.SOURCE_KEYS` (:func:`~kernscope.analyze.kernels.rows_by`; durations ns), with
    the rows that have no line: what :func:`~kernscope.analyze.kernels.source_summary` reads of one time window of
    a profile, to be put together with the other windows'. None for a trace without HLO lines (a Kineto trace)."""
    from .kernels import SOURCE_KEYS, rows_by

    rows = _line_rows(trace, None, False, any_hlo=True)
    return None if rows is None else rows_by(rows, SOURCE_KEYS)


def source_table(trace: Trace, step: int | None = None, python: bool = False, wall_ns: int | None = None) -> pl.DataFrame:
    """GPU time by the user's line (:func:`kernscope.analyze.kernels.source_summary` of :func:`source_rows`; ``wall_ns``:
    the wall time of ``step``'s GPU rows, ns, computed where not given); empty where no record has a line."""
    from .kernels import SOURCE_SCHEMA, source_summary, wall_time_ns

    rows = source_rows(trace, step, python)
    if rows is None:
        return pl.DataFrame(schema=SOURCE_SCHEMA)
    if wall_ns is None:
        wall_ns = wall_time_ns(trace.gpu if step is None else trace.gpu.filter(pl.col("step") == step))
    return source_summary(rows, wall_ns=wall_ns)


def user_frame(name: str) -> tuple[str, str] | None:
    """(``path:line``, function) of a ``python_function`` event's name where the frame is the user's code, else None
    (a framework frame, a built-in, ``nn.Module: Linear_0``)."""
    m = _FRAME.match(name)
    if m is None:
        return None
    path = m["path"]
    if FRAMEWORK_FRAMES.search(path) or path.split("/", 1)[0].removesuffix(".py") in _STDLIB:
        return None
    return f"{path}:{m['line']}", m["function"]


def python_sources(trace: Trace, rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (GPU rows with ``launch_idx``) with :data:`SOURCE_COLUMNS`: the user's line each one's launch was
    made from, or its forward op's for a backward kernel (its function then ends ``(backward)``); null where neither
    is under a frame of the user's (no Python stack recorded, or none of the user's)."""
    none = rows.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in SOURCE_COLUMNS)
    ev = trace.events
    if rows.height == 0 or "launch_idx" not in rows.columns:
        return none
    py = ev.lazy().filter(pl.col("kind") == "python_function").select("idx", pl.col("name")).collect()
    if py.height == 0:
        return none
    names = py.select(pl.col("name").unique().drop_nulls()).to_series()
    frames = [user_frame(str(n)) for n in names.cast(pl.String).to_list()]
    known = pl.DataFrame({"name": names, "_src": [f[0] if f else None for f in frames],
                          "_fn": [f[1] if f else None for f in frames]}).filter(pl.col("_src").is_not_null())
    users = py.join(known, on="name", how="inner").select("idx", "_src", "_fn")
    if users.height == 0:
        return none
    parent = call_parents(trace)
    top = parent.size
    frame = marks(top, users["idx"])  # each user frame's row in ``users``, by event idx
    start = rows["launch_idx"].fill_null(-1).to_numpy().astype(np.int64)
    start[(start < 0) | (start >= top)] = -1
    found = up_to(frame, parent, start)
    # a backward kernel (autograd's thread: no Python stack) is its forward op's: the op that made the node whose
    # backward launched it (the backward op's ``seq_num``), whose own stack names the user's function
    backward = np.zeros(found.size, dtype=np.bool_)
    if "seq_num" in ev.columns and "fwd_tid" in ev.columns and (found < 0).any():
        forward_of = _forward_ops(ev, top)
        if forward_of is not None:
            lost = np.flatnonzero((found < 0) & (start >= 0))
            op = up_to(forward_of, parent, start[lost])
            hit = lost[op >= 0]
            again = up_to(frame, parent, op[op >= 0])
            found[hit] = again
            backward[hit[again >= 0]] = True
    got = users.select("_src", "_fn")[picks(found)]
    fn = pl.when(pl.Series(backward)).then(got["_fn"] + " (backward)").otherwise(got["_fn"])
    return rows.with_columns(got["_src"].alias(SOURCE_COLUMNS[0]), pl.select(fn).to_series().alias(SOURCE_COLUMNS[1]))


def call_parents(trace: Trace) -> np.ndarray:
    """Each event's parent in the call tree (:attr:`Trace.call_tree`), by event idx: -1 for a root, or an event
    not in the tree. Its size is the largest idx + 1."""
    tree = trace.call_tree.select("idx", "parent_idx")
    parent = np.full(int(max(int(trace.events["idx"].max() or 0), 0)) + 1, -1, dtype=np.int64)  # type: ignore[arg-type]
    parent[tree["idx"].to_numpy()] = tree["parent_idx"].fill_null(-1).to_numpy()
    return parent


def marks(size: int, idx: pl.Series) -> np.ndarray:
    """By event idx (``size`` of them): the row of ``idx`` that names the event, else -1 (the marks of
    :func:`up_to`)."""
    out = np.full(size, -1, dtype=np.int64)
    out[idx.to_numpy()] = np.arange(idx.len())
    return out


def picks(rows: np.ndarray) -> pl.Series:
    """``rows`` (of :func:`up_to`; -1: none) as an index that takes null where there is none."""
    return pl.Series(rows).set(pl.Series(rows < 0), None)


def up_to(mark: np.ndarray, parent: np.ndarray, start: np.ndarray) -> np.ndarray:
    """For each event idx of ``start`` (-1: none), ``mark`` of the first event up its call tree (itself first) whose
    ``mark`` is >= 0; -1 where none is."""
    cur = start.copy()
    found = np.full(cur.size, -1, dtype=np.int64)
    todo = np.flatnonzero(cur >= 0)
    while todo.size:  # (one step up the tree for every row not yet found)
        hit = mark[cur[todo]]
        found[todo[hit >= 0]] = hit[hit >= 0]
        todo = todo[hit < 0]
        cur[todo] = parent[cur[todo]]
        todo = todo[cur[todo] >= 0]
    return found


def _forward_ops(ev: pl.DataFrame, top: int) -> np.ndarray | None:
    """By event idx: for a backward op, the idx of its forward op, else -1 (None: no backward op has one). A backward
    op has a
    ``seq_num`` and a nonzero ``fwd_tid``; its forward op is the latest-starting op of its process with that
    ``seq_num`` and ``fwd_tid`` 0 (the op that made the node: ops recorded before it inside the same call share the
    number)."""
    ops = (ev.lazy().filter(pl.col("seq_num").is_not_null() & (pl.col("kind") == "cpu_op"))
           .select("idx", "pid", "ts", "seq_num", pl.col("fwd_tid").fill_null(0)).collect())
    fwd = (ops.filter(pl.col("fwd_tid") == 0).sort("ts", "idx")
           .unique(["pid", "seq_num"], keep="last").select("pid", "seq_num", pl.col("idx").alias("_fwd")))
    bwd = ops.filter(pl.col("fwd_tid") != 0).join(fwd, on=["pid", "seq_num"], how="inner")
    if bwd.height == 0:
        return None
    out = np.full(top, -1, dtype=np.int64)
    out[bwd["idx"].to_numpy()] = bwd["_fwd"].to_numpy()
    return out
