"""Critical path per step: what the step's end waited for, back to its start, and what shortening it would win.

The path is a chain of nodes, walked backward from the step's end; each node's segment runs from its
predecessor's time to its own, so the segments cover the step exactly once (the path's length is the step's
time, never more) and every kernel on the path counts in full:

* **GPU record** ``g`` (kernel, memcpy, memset; time = its end). Its predecessor is what let it start:
  the previous record of its stream when ``g`` was queued behind it (launched before that record ended, and
  started within :data:`QUEUE_GAP_NS`); else the device's record that ended last before ``g`` started, when
  that ended after ``g``'s launch (``g`` waited for it: an event, another stream); else its **launch** (a CPU
  point): ``g`` was launched after the GPU work before it had ended. With several GPUs in the trace, a record whose
  start neither of those explains waited for another GPU's record that ended just before it
  (:data:`CROSS_DEVICE_GAP_NS`).
* **CPU point** (a launch call's start, or the step's end on the step's thread; time = that moment). Its
  predecessor is the last synchronizing call of the same thread that ended before it (the CPU blocked there,
  so what it waited for is the GPU record of any stream that ended last before the call returned), else the
  step's start: the stretch is host time (ops, Python, launches).

Segments are classified: ``cpu`` (host time), ``launch`` (launch call to kernel start), ``gpu`` (kernel time,
by category), ``queue`` (a short gap behind the previous record of the stream), ``stream_wait`` (waiting for
another stream), ``sync_return`` (a synchronizing call returning after its GPU work ended) and ``carryover``
(GPU work launched before the step: the wait for it to start and its kernel time; ``gpu`` is the step's own).
Predecessors are found for all nodes at once: the records sorted once by (device, stream, start), then in numpy a
running maximum per stream and an as-of ``searchsorted`` per device (the CPU points' synchronizing calls by an as-of
join); the chain of each step's end is read with binary lifting (numpy, ``O(n log d)``, d the longest chain), no
loop per event.

What-ifs are first order, on the path as it is (valid while it stays critical): a category's kernels 2x
faster save half their time on the path; removing a synchronizing call lets the host work after it
overlap the GPU work it waited for (saves the smaller of its wait and the host time after it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ..errors import TraceError
from ..intervals import (
    RANK_TABLE,
    dense_codes,
    first_held,
    first_positions,
    group_by_keys,
    partition,
    ranks,
    running_max,
    stable_order,
    text_ranks,
    tie_positions,
)
from ..link.kinds import OP_KINDS, named
from ..load.native import chain_depths, chain_nodes, group_last_max, node_windows, search_right
from ..model import Trace
from .kernels import NS_PER_US

#: a record that starts this soon after the previous record of its stream ended was queued behind it (ns)
QUEUE_GAP_NS = 2_000
#: a record that starts this soon after another GPU's record ended, where neither its own GPU's work nor its launch
#: ended that close to its start, waited for that record (a peer copy, an event of another device: 10-15 µs on two
#: H200s) (ns)
CROSS_DEVICE_GAP_NS = 50_000
#: synchronizing runtime and driver calls: the host waits for the GPU in them. Kineto names runtime calls
#: (cudaStreamSynchronize); XLA's CUPTI tracer names driver calls, its device-to-host copies ``MemcpyD2H``
#: (what ``block_until_ready``/``np.asarray`` of a result waits in)
SYNC_CALLS = (r"^((cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy|MemcpyDtoH|MemcpyAsync)"
              r"|cu(Ctx|Stream|Event)Synchronize|cuMemcpy(DtoH)?(Async)?(_v2)?|MemcpyD2H)$")
#: the event kinds of those calls
SYNC_KINDS = ("runtime", "driver")
SEGMENTS = ("cpu", "launch", "gpu", "queue", "stream_wait", "sync_return", "carryover")
#: how a node was reached, a byte a node: queued behind its stream's previous record, waiting for another record
#: (stream_wait), launched after the GPU ran dry, or a CPU point
_HOW_QUEUE, _HOW_WAIT, _HOW_LAUNCH, _HOW_CPU = range(4)


@dataclass(frozen=True)
class CriticalPath:
    """Per step: ``steps`` (step, step_us, length_us and one ``<segment>_us`` column per kind of segment),
    ``categories`` (step, category, time_us: kernel time on the path), ``kernels`` (step, name, category,
    launcher, count, time_us), ``ops`` (step, op, host_us: the path's host time split over the top-level CPU ops and user annotations
    it overlaps), ``whatif`` (step, change, saves_us); times µs."""

    steps: pl.DataFrame
    categories: pl.DataFrame
    kernels: pl.DataFrame
    whatif: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    #: the GPU records on the path: step, name, ts, end (ns), on_path_us (their time on it), carried (launched before the
    #: step: their time is the step's ``carryover``, not its ``gpu``)
    records: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: the path's host time by top-level CPU op or user annotation of its thread: step, op, host_us ("(between ops)": in
    #: none)
    ops: pl.DataFrame = field(default_factory=pl.DataFrame)

    def tables(self) -> dict[str, pl.DataFrame]:
        """The path's tables by their names in an analysis (``kernscope sql``'s ``analysis.<name>``)."""
        return {"critical_path": self.steps, "critical_path_categories": self.categories, "critical_path_ops": self.ops,
                "critical_path_kernels": self.kernels, "critical_path_whatif": self.whatif}


_US, _TEXT = pl.Float64, pl.String
#: the columns of the path's tables (steps, categories, kernels, whatif, records, ops) where no step has GPU work
_EMPTY = ({"step": pl.Int64, "step_us": _US, "length_us": _US, **{f"{s}_us": _US for s in SEGMENTS}},
          {"step": pl.Int64, "category": _TEXT, "time_us": _US},
          {"step": pl.Int64, "name": _TEXT, "category": _TEXT, "launcher": _TEXT, "count": pl.UInt32, "time_us": _US},
          {"step": pl.Int64, "change": _TEXT, "saves_us": _US},
          {"step": pl.Int64, "name": _TEXT, "ts": pl.Int64, "end": pl.Int64, "on_path_us": _US, "carried": pl.Boolean},
          {"step": pl.Int64, "op": _TEXT, "host_us": _US})


def _windows(trace: Trace, gpu: pl.DataFrame, next_start: int | None = None) -> pl.DataFrame:
    """step, start (S), T, _last: a step's time runs to the next step's start; the last one to its end or the end of
    its GPU work, whichever is later (``_gpu_end``: the end of the GPU work launched in the step), or to
    ``next_start`` where given (the trace is a time window of a profile whose next step starts there)."""
    st = trace.steps.select("step", "start", "end").sort("start")
    last_gpu = (gpu.lazy().filter(pl.col("step").is_not_null()).group_by("step").agg(pl.col("end").max().alias("_gpu_end"))
                .collect())  # (lazy: two columns read, not a copy of every column of the rows in steps)
    st = st.join(last_gpu, on="step", how="left").sort("start").with_columns(
        pl.col("start").shift(-1, fill_value=next_start).alias("_next"))
    # (automatic windows are GPU time ranges, the last one ending 1 ns after the last record: that record is its end)
    last_end = (pl.coalesce("_gpu_end", "end") if trace.step_source == "auto"
                else pl.max_horizontal("end", "_gpu_end"))
    return st.select("step", "start", pl.coalesce(pl.col("_next"), last_end).alias("T"),
                     "_gpu_end", pl.col("_next").is_null().alias("_last"))


def _ints(s: pl.Series, *, copy: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """An integer column as (values, 0 where null; valid). ``copy`` False: an int64 column's values are read where
    polars holds them (read-only)."""
    if s.null_count() == 0:  # (no fill and no mask made by polars' engine: ~90 µs a column, a dozen a path)
        return s.to_numpy().astype(np.int64, copy=copy), np.ones(s.len(), dtype=bool)
    return s.fill_null(0).to_numpy().astype(np.int64, copy=copy), s.is_not_null().to_numpy()


def _windows_of(time: np.ndarray, time_ok: np.ndarray, end_of: tuple[np.ndarray, np.ndarray],
                windows: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each node's step and its window's start, each with its validity: the window [start, T] holding the node's time
    (the last one starting at or before it: a time equal to the next step's start belongs to that next step), or
    ``end_of`` where given (a step's end point belongs to its step)."""
    w = windows.select("start", "T", "step").sort("start")
    starts, starts_ok = _ints(w["start"])
    ends, ends_ok = _ints(w["T"])
    steps = w["step"].to_numpy().astype(np.int64)
    # (in place where it can: each array is a node each, 53 MB at 1 GB of JAX, and this is the critical path's peak)
    if len(steps):
        j = search_right(starts, time)
        j -= 1
        inside = j >= 0
        np.maximum(j, 0, out=j)
        inside &= time_ok
        inside &= starts_ok[j]
        inside &= ends_ok[j]
        inside &= time <= ends[j]
        step = steps.take(j)
        del j
        step[~inside] = 0
    else:
        inside, step = np.zeros(len(time), bool), np.zeros(len(time), np.int64)
    step[end_of[1]] = end_of[0][end_of[1]]
    step_ok = end_of[1] | inside
    del inside
    by_step = w.select("step", "start").sort("step")
    keys, key_starts = by_step["step"].to_numpy().astype(np.int64), by_step["start"].to_numpy().astype(np.int64)
    k, found = _lookup(keys, step)
    found &= step_ok
    if len(keys):
        start = key_starts.take(k)
        start[~found] = 0
    else:
        start = np.zeros(len(step), np.int64)
    return step, step_ok, start, found


def _cut_links(time: np.ndarray, time_ok: np.ndarray, end_of: tuple[np.ndarray, np.ndarray], windows: pl.DataFrame,
               pred: np.ndarray, has: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each node's link to its predecessor ``pred`` (where ``has``) cut (``pred`` set to -1, in place) where polars'
    three-valued logic said True: no predecessor, one of no step, of another step than the node's, or from before the
    start of the node's step (the steps: :func:`_windows_of`). Returns the predecessor's time and whether it is valid
    and not cut. Compiled where it can be (``native.node_windows``: two passes, where numpy made and gathered ten
    arrays of a node each: 0.45 -> 0.03 s at 1 GB of JAX), else numpy."""
    w = windows.select("start", "T", "step").sort("start")
    by_step = w.select("step", "start").sort("step")
    keys, key_starts = by_step["step"].to_numpy().astype(np.int64), by_step["start"].to_numpy().astype(np.int64)
    table = None
    if len(keys) and int(keys[-1]) - int(keys[0]) < RANK_TABLE:
        table = (first_positions(keys - keys[0], int(keys[-1]) - int(keys[0]) + 1), int(keys[0]))
    starts, starts_ok = _ints(w["start"])
    ends, ends_ok = _ints(w["T"])
    compiled = node_windows(time, time_ok, end_of[0], end_of[1], (starts, starts_ok, ends, ends_ok,
                            w["step"].to_numpy().astype(np.int64)), keys, key_starts, table, pred, has)
    if compiled is not None:
        return compiled
    n_step, n_step_ok, n_start, n_start_ok = _windows_of(time, time_ok, end_of, windows)
    at = np.where(has, pred, 0)
    pt, pt_ok = time[at], has & time_ok[at]
    ps, ps_ok = n_step[at], has & n_step_ok[at]
    cut = ~has | ~ps_ok | (n_step_ok & (ps != n_step)) | (pt_ok & n_start_ok & (pt < n_start))
    pred[cut] = -1
    pt_ok &= ~cut
    return pt, pt_ok


def _last_records(step: pl.Series, end: np.ndarray) -> pl.DataFrame:
    """Per step of the records (``step``, null: none; ``end`` of each): ``_lr`` the record that ends last (of equal
    ends the later one) and ``_le`` its end. Compiled over a table of the step numbers where their range is narrow
    (``native.group_last_max``: one pass, where polars' grouping took 0.11 s of 6.7 M records), else polars."""
    values, ok = _ints(step, copy=False)
    found = group_last_max(values, ok, end, RANK_TABLE)
    if found is not None:
        return pl.DataFrame({"step": found[0], "_lr": found[2], "_le": found[1]},
                            schema={"step": step.dtype, "_lr": pl.Int64, "_le": pl.Int64})
    return (pl.DataFrame({"step": step, "end": end, "_g": np.arange(len(end), dtype=np.int64)})
            .filter(pl.col("step").is_not_null())
            .group_by("step").agg(pl.col("_g").filter(pl.col("end") == pl.col("end").max()).max().alias("_lr"),
                                  pl.col("end").max().alias("_le")))


def _lookup(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``values``, the position of its first equal in ``keys`` (sorted int64), and whether it has one
    (position 0 where not). Step numbers span a narrow range: one table of positions answers each value at once (a
    1 GB JAX profile's 6.7 M nodes in 15,500 steps: 0.12 s by binary search); a wide range, a binary search."""
    if len(keys) == 0:
        return np.zeros(len(values), dtype=np.int64), np.zeros(len(values), dtype=bool)
    lo, hi = int(keys[0]), int(keys[-1])
    if hi - lo < RANK_TABLE:
        table = first_positions(keys - lo, hi - lo + 1)  # (of equal keys, the first)
        inside = (values >= lo) & (values <= hi)
        at = np.where(inside, values, lo)  # (in place where it can: a node each)
        at -= lo
        k = table.take(at)
        del at
        found = inside & (k >= 0)
        k[~found] = 0
        return k, found
    k = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return k, keys[k] == values


def _text_rank(col: pl.Expr) -> pl.Expr:
    """A categorical's values as their rank in the text order of its distinct values (nulls: null), UInt32: sorting
    by it orders rows as sorting by the text would, without the text."""
    distinct = col.unique().drop_nulls().sort()
    return col.to_physical().replace_strict(distinct.to_physical(), pl.int_range(distinct.len(), dtype=pl.UInt32),
                                            default=None, return_dtype=pl.UInt32)


#: chains walked a link at a time (all chains at once) up to this length; longer ones by binary lifting
WALK_LINKS = 4096


def _ancestors(pred: np.ndarray, starts: np.ndarray, root: int,
               depth: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(owner, node): every node on the chain of each start (``pred`` up to ``root``, root excluded; ``pred[root]``
    is ``root``), the chains one after the other, each from its start back. Chains up to :data:`WALK_LINKS` long
    (a JAX step's path: hundreds of records, in thousands of steps) are walked a link at a time, all at once: no
    table of a node each (binary lifting's took 0.1-0.2 GB on a 1.4 M-node path); longer ones by
    :func:`_ancestors_lifted`. ``depth``: the chains' lengths where :func:`_depths` has counted them."""
    if depth is None:
        depth = _depths(pred, starts, root)
        if depth is None:
            return _ancestors_lifted(pred, starts, root)
    owner = np.repeat(np.arange(len(starts)), depth)
    walked = chain_nodes(pred, starts, depth)
    if walked is not None:
        return owner, walked
    node = np.empty(len(owner), dtype=np.int64)
    at = np.cumsum(depth) - depth  # each chain's first slot
    x = starts.astype(np.int64)
    live = np.flatnonzero(depth > 0)
    while len(live):  # write each chain's nodes in order, a link of every chain at a time
        node[at[live]] = x[live]
        at[live] += 1
        x[live] = pred[x[live]]
        live = live[x[live] != root]
    return owner, node


class LinkCycle(Exception):
    """A start's chain of predecessors never reaches the root: the links go round a cycle, which only a trace whose
    times contradict each other makes (a record that waits for one that waits for it)."""


def _ancestors_lifted(pred: np.ndarray, starts: np.ndarray, root: int) -> tuple[np.ndarray, np.ndarray]:
    """(owner, node): every node on the chain of each start (``pred`` up to ``root``, root excluded; ``pred[root]``
    is ``root``), by binary lifting: log d vectorized jumps (d: the longest chain), no loop per node. The jump
    tables stop at the longest chain's length, not the node count's (a step's path is thousands of nodes, a
    10 GB trace has millions), in int32 where the ids fit: 23 -> 12 tables of 4 instead of 8 bytes per node."""
    dtype = np.int32 if len(pred) < 2**31 else np.int64
    up = [pred.astype(dtype)]
    # up[k] jumps 2**k links; stop once 2**len(up) links take every start to the root (chains are shorter). A chain
    # of more links than there are nodes goes round a cycle: the tables grew until memory ran out (a fuzzed JAX profile,
    # benchmarks/fuzz_long.py --jax --seed 111: 4 GB within seconds, the process killed)
    while (up[-1][up[-1][starts]] != root).any():
        if (1 << len(up)) > len(pred):
            raise LinkCycle
        up.append(up[-1][up[-1]])
    levels = len(up)
    depth = np.zeros(len(starts), dtype=np.int64)  # nodes before the root on each chain
    x = starts.astype(dtype)
    alive = x != root
    for k in reversed(range(levels)):
        y = up[k][x]
        ok = alive & (y != root)
        x = np.where(ok, y, x)
        depth += np.where(ok, 1 << k, 0)
    depth = np.where(alive, depth + 1, 0)
    owner = np.repeat(np.arange(len(starts)), depth)
    j = np.arange(len(owner)) - np.repeat(np.cumsum(depth) - depth, depth)  # 0 .. depth-1 along each chain
    node = starts.astype(dtype)[owner]
    for k in range(levels):
        bit = (j >> k) & 1 == 1
        node = np.where(bit, up[k][node], node)
    return owner, node.astype(np.int64)


def _cross_device_waits(device: np.ndarray, ts: np.ndarray, end: np.ndarray, by_end: np.ndarray | None,
                        launch_ts: np.ndarray, queued: np.ndarray, w: np.ndarray, w_ok: np.ndarray) -> None:
    """Where one process drives several GPUs: a record not queued on its stream whose start neither its own GPU's
    last-ended record nor its launch explains (both more than :data:`CROSS_DEVICE_GAP_NS` before it), and before
    which another GPU's record ended within that gap, waited for that record (a pipeline's second stage for the
    first stage's copy). ``w``, ``w_ok`` (each record's wait, :func:`_last_ended`) are updated in place."""
    a, a_ok = _last_ended(np.zeros(len(ts), dtype=np.int64), ts, end, by_end)  # any GPU's
    never = -(2**62)
    explained = np.maximum(np.where(w_ok, end[w], never), launch_ts)  # (no launch: launch_ts is `never` already)
    other = np.where(a_ok, end[a], never)
    cross = ~queued & a_ok & (device[a] != device) & (other > explained)
    cross &= (ts - other <= CROSS_DEVICE_GAP_NS) & (ts - explained > CROSS_DEVICE_GAP_NS)
    w[cross] = a[cross]
    w_ok |= cross


def _last_ended(device: np.ndarray, ts: np.ndarray, end: np.ndarray,
                by_end: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each record, the record of its device that ended last at or before its start (of equal ends, the later
    record), and whether there is one: an as-of search on (device, end) keys. ``by_end``: ``stable_order(end)``
    where the caller has it (it serves as the keys' order when there is one device)."""
    n = len(ts)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    codes, n_dev = ranks(device)
    if n_dev == 1:
        key_end, key_ts = end, ts
        order = stable_order(end) if by_end is None else by_end
    else:
        lo = int(min(ts.min(), end.min()))
        span = int(max(ts.max(), end.max())) - lo + 1
        if n_dev * span >= 2**62:  # (a range too wide to lay the devices end to end: one device at a time)
            out, ok = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
            for d in range(n_dev):
                rows = np.flatnonzero(codes == d)
                w, w_ok = _last_ended(np.zeros(len(rows), dtype=np.int64), ts[rows], end[rows])
                out[rows], ok[rows] = rows[w], w_ok
            return out, ok
        key_end, key_ts = codes * span + (end - lo), codes * span + (ts - lo)
        order = stable_order(key_end)  # by device, then end, equal ends in record order (None: already)
    # (in place where it can: each array is a row per record, 53 MB at 1 GB of JAX)
    at = search_right(key_end if order is None else key_end[order], key_ts)
    at -= 1
    ok = at >= 0
    np.maximum(at, 0, out=at)
    w = at if order is None else order.take(at)
    if n_dev > 1:
        ok &= codes[w] == codes
    w[~ok] = 0
    return w.astype(np.int64, copy=False), ok


def _node_order(gpu: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """(order, lane, device, identity): the GPU records as nodes, and each node's stream and device as codes in key
    order. Node k is row ``order[k]`` of ``gpu``: the rows by (device, stream, start), then a total order, so that
    records that tie get the same node ids from any load of the trace: by end, correlation, name and launcher (by
    their text; nulls last), then row. ``identity``: node k is row k (a real JAX profile's rows lie in this order:
    its columns are then read as they are, not gathered into copies).

    One stable argsort of an int64 key (stream lane, start), the tied rows ordered apart by all seven keys. Sorting
    every row by the seven keys, and then its columns by them, grew the process by ~290 MB in the critical path of a
    200 MB JAX profile's 1.4 M records; this way, with its columns gathered in node order as they are needed, ~180 MB
    (the analyses one after the other; the command's peak, where other analyses run beside it, did not move). Its
    time is the same on Kineto traces (their records are few: 0.09-0.11 s at 200 MB)."""
    keys = gpu.select(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1))
    lane = dense_codes(keys, ["device", "stream"])
    device = ranks(keys["device"].to_numpy())[0]
    del keys
    ts = gpu["ts"].to_numpy()
    lo, span = int(ts.min()), int(ts.max()) - int(ts.min()) + 1
    natural = False  # the rows in key order already
    if (int(lane.max()) + 1) * span < 2**62:
        key = lane * span + (ts - lo)
        order = stable_order(key)  # (rows of a stream come nearly in time order: timsort's runs; None: in order)
        if order is None:
            order, natural = np.arange(len(key), dtype=np.int64), True
        else:
            key = key[order]
        tie = np.flatnonzero(key[1:] == key[:-1])  # positions whose next node ties with them
        del key
        pos = tie_positions(tie, len(order))  # every position of a run of ties
    else:  # (a range too wide to lay the streams end to end: all rows order by the whole key)
        order, natural = np.arange(len(ts), dtype=np.int64), True
        pos = order.copy()
    if len(pos):
        # the tied rows by the whole key: each run of ties has a key of its own, and the runs lie in key order, so
        # each comes back to its own positions, ordered within
        tied = gpu.select(pl.col("device").fill_null(-1), pl.col("stream").fill_null(-1), "ts", "end", "correlation",
                          pl.col("name").cast(pl.Categorical), pl.col("launcher").cast(pl.Categorical)
                          ).gather(pl.Series(order[pos]))
        within = tied.select(pl.arg_sort_by("device", "stream", "ts", "end", "correlation", _text_rank(pl.col("name")),
                                            _text_rank(pl.col("launcher")), nulls_last=True, maintain_order=True)
                             ).to_series().to_numpy()
        natural = natural and bool((within[1:] > within[:-1]).all())  # (ties in row order already)
        order[pos] = order[pos][within]
    order = order.astype(np.int64, copy=False)
    if natural:
        return order, lane, device, True
    return order, lane[order], device[order], False


def empty_path(notes: list[str]) -> CriticalPath:
    """A path of no step: its tables empty, with their columns (a query or a sheet names them)."""
    steps, cats, kernels, whatif, records, ops = (pl.DataFrame(schema=s) for s in _EMPTY)
    return CriticalPath(steps, cats, kernels, whatif, notes=notes, records=records, ops=ops)


def critical_path(trace: Trace, gpu: pl.DataFrame, *, step: int | None = None,
                  untraced_waits: bool = False, next_start: int | None = None,
                  launch_thread: tuple[str, str] | None = None,
                  categories: Callable[[], pl.Series] | None = None,
                  kernel_time: Callable[[], pl.DataFrame] | None = None) -> CriticalPath:
    """The critical path of every step of ``trace`` (or of ``step``). ``gpu``: the categorized GPU rows of the
    whole trace (``category``, ``launcher``, ``step``, ``launch_ts``, ``launch_pid``, ``launch_tid``); or its rows not
    yet categorized (:func:`~kernscope.analyze.kernels.gpu_table` without a categorizer), with ``categories`` a call
    that gives each row's category, in ``gpu``'s order, once the path needs them (at its summary: ``analyze`` makes
    them meanwhile).

    ``untraced_waits`` (JAX/XLA profiles): take a step's untraced tail on the host as a wait for the GPU work that
    ended in it (:func:`_untraced_waits`; XLA records no event for ``block_until_ready``), so that the path follows
    that work back through the GPU. Off by default: a heuristic, and the path then holds every kernel of such a step
    (on a 975 MB profile 6.7 M nodes: the command +1.0-1.4 s, +0.1-0.4 GB of peak).

    Where ``trace`` is a time window of a profile (:mod:`kernscope.analyze.windows`): ``next_start`` (ns), the start
    of the profile's next step after the window's last one, where that step's time ends (None: the trace's last step
    is the profile's); ``launch_thread`` (pid, tid as text), the profile's :func:`busiest_launcher`, the thread of a
    step without an annotation of its own (None: the trace's). ``kernel_time``: where the caller makes the GPU rows'
    :func:`kernel_time_by_step` too (a time window's analysis keeps it), a call that gives it (None: made here)."""
    all_windows = _windows(trace, gpu, next_start)
    windows = all_windows if step is None else all_windows.filter(pl.col("step") == step)
    if windows.height == 0 or gpu.height == 0:
        return empty_path(["no steps with GPU work: the critical path is per step"])
    node_order, lane, device, identity = _node_order(gpu)
    n_g = len(node_order)
    # node k is row order[k] of ``gpu``; None: row k (no array of positions held through the path: 11 MB at 200 MB of
    # JAX, whose records lie in node order)
    order = None if identity else node_order
    del node_order
    by_node = None if order is None else pl.Series(order)

    def in_node_order(name: str) -> pl.Series:
        return gpu[name] if by_node is None else gpu[name].gather(by_node)

    def sorted_ints(name: str, *, writable: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """A column of the records in node order: (values, 0 where null; valid); read-only unless ``writable`` (in
        node order already, an int64 column without nulls is read where polars holds it)."""
        return _ints(in_node_order(name), copy=writable)

    # -- GPU records: what let each one start, in numpy over the records in node order (as polars window functions,
    #    an as-of join and two sorts they took 0.4 s of a JAX profile's 1.4 M records)
    # (each array below is a row per record, 53 MB at 1 GB of JAX: each is made when it is needed and goes when it
    # has been read, and arrays that are no longer read are written over; the critical path was the command's peak)
    # the previous record of its stream
    p_ok = np.ones(n_g, dtype=bool)
    p_ok[0] = False
    np.equal(lane[1:], lane[:-1], out=p_ok[1:])
    del lane
    g_ts, g_end = sorted_ints("ts")[0], sorted_ints("end")[0]  # never null (link checks)
    launch_ts, launch_ok = sorted_ints("launch_ts", writable=True)
    launch_ts[~launch_ok] = -(2**62)  # (no launch: never after the previous record's end)
    # queued behind the previous record of its stream: launched before the stream's records before it had ended (the
    # running maximum of their ends, read one row on: ``before[i - 1]`` is record i's), and started soon after
    before = running_max(g_end, ~p_ok)
    queued = np.zeros(n_g, dtype=bool)
    np.less_equal(launch_ts[1:], before[:-1], out=queued[1:])
    queued &= p_ok
    np.subtract(g_ts[1:], before[:-1], out=before[:-1])
    queued[1:] &= before[:-1] <= QUEUE_GAP_NS
    del before
    # the device's record that ended last at or before this one started (of equal ends the later record): when it
    # ended after this one's launch, this record waited for it (an event, another stream, a full queue); else it
    # waited for its launch
    end_order = stable_order(g_end)  # the records by end, equal ends in record order (None: in order already)
    w_, w_ok = _last_ended(device, g_ts, g_end, end_order)
    if int(device.max(initial=0)) > int(device.min(initial=0)):  # several GPUs: waits on another's work
        _cross_device_waits(device, g_ts, g_end, end_order, launch_ts, queued, w_, w_ok)
    del device
    waited = g_end[w_]
    waited = w_ok & (~launch_ok | (waited >= launch_ts))
    g_how = np.select([queued, waited, launch_ok], [_HOW_QUEUE, _HOW_WAIT, _HOW_LAUNCH], _HOW_WAIT).astype(np.int8)
    del launch_ts, launch_ok, queued, waited
    # the records by end (in node order already where end_order is None: no gather of the ends)
    by_end = (g_end, np.arange(n_g, dtype=np.int64)) if end_order is None else (g_end[end_order], end_order)
    del end_order
    # -- CPU points: launches that records waited for, and each step's end on the step's thread
    launched = np.flatnonzero(g_how == _HOW_LAUNCH)
    # (the launched records gathered first, then their threads made text: not every record's)
    launches = gpu.select("launch_pid", "launch_tid", "launch_ts").gather(pl.Series(launched if order is None else order[launched])).select(
        pl.Series("_for", launched, dtype=pl.Int64), pl.col("launch_pid").cast(pl.String).alias("pid"),
        pl.col("launch_tid").cast(pl.String).alias("tid"), pl.col("launch_ts").alias("t"), pl.lit(None, pl.Int64).alias("_end_of"))
    ends = windows.join(_step_threads(trace, windows, launch_thread), on="step", how="left").select(
        pl.lit(None, pl.Int64).alias("_for"), "pid", "tid", pl.col("T").alias("t"), pl.col("step").alias("_end_of"))
    cpu = pl.concat([launches, ends]).with_row_index("_c").with_columns((pl.col("_c").cast(pl.Int64) + n_g).alias("_c"))
    ended = pl.DataFrame({"_w_end": by_end[0], "_w": by_end[1]})
    syncs = _blocking_syncs(trace, ended)
    notes: list[str] = []
    if untraced_waits and "xplane" in trace.metadata:  # XLA traces no host wait for the GPU: a step's untraced tail
        untraced = _untraced_waits(trace, gpu, ends, ended)
        if untraced.height:
            syncs = pl.concat([syncs, untraced]).sort("_s_end", "_s_ts", "pid", "tid")
            notes.append(f"XLA records no event for the host waiting on the GPU (block_until_ready): in {untraced.height:,} "
                         f"of {ends.height:,} steps the host showed no event from its last one until GPU work it had "
                         f"launched ended, taken as the host waiting for that work ('{UNTRACED_WAIT}')")
    del ended
    cpu = (cpu.sort("t", "_c").join_asof(syncs, left_on="t", right_on="_s_end", by=["pid", "tid"], strategy="backward",
                                   check_sortedness=False).sort("_c"))
    # (the intermediate tables go as soon as they are used: on a 10 GB trace each is hundreds of MB)
    del launches, ends, syncs, by_end, launched
    root = n_g + cpu.height
    # -- every node (ids 0 .. root-1: the records in node order, then the CPU points in ``_c`` order): its time, its
    #    predecessor, and the step window it lies in (a predecessor in another window, or before the step's start,
    #    is cut). Arrays indexed by node id (a table of the nodes, sorted and joined, held 1 GB on a 10 GB trace)
    cpu_t, cpu_t_ok = _ints(cpu["t"])
    time, time_ok = np.concatenate([g_end, cpu_t]), np.concatenate([np.ones(n_g, dtype=bool), cpu_t_ok])
    how = np.concatenate([g_how, np.full(cpu.height, _HOW_CPU, np.int8)])
    for_, for_ok = _ints(cpu["_for"])
    launch_cpu = np.full(n_g, -1, np.int64)  # each launch record's CPU point
    launch_cpu[for_[for_ok]] = cpu["_c"].to_numpy()[for_ok]
    a_, a_ok = _ints(cpu["_a"])
    # each node's predecessor (-1: none) and whether it has one, written in place by how the record started: queued
    # ones wait for the previous record, waiting ones for the record that ended last, launched ones for their launch's
    # CPU point; the CPU points for the record their thread waited on
    # each record's previous one, -1 for the first, written once (no array of positions beside it: most records are
    # queued); the CPU points' part is written below
    # (with a slot for the root beyond them: ``root_pred`` below is made of this array in place)
    root_pred = np.arange(-1, root, dtype=np.int64)
    pred, has = root_pred[:root], np.empty(root, dtype=bool)
    g_pred, g_has = pred[:n_g], has[:n_g]  # (views)
    g_has[:] = p_ok
    waits = g_how == _HOW_WAIT
    g_pred[waits], g_has[waits] = w_[waits], w_ok[waits]
    del waits
    launches_at = g_how == _HOW_LAUNCH
    g_pred[launches_at] = launch_cpu[launches_at]
    g_has[launches_at] = launch_cpu[launches_at] >= 0
    del launches_at, g_pred, g_has
    pred[n_g:], has[n_g:] = np.where(a_ok, a_, -1), a_ok
    # (``g_ts`` is kept: a record's start on the path is read from it, where a copy with the CPU points' zeros beside
    # it was an array more through the path)
    del for_, for_ok, launch_cpu, p_ok, w_, w_ok, a_, a_ok, g_end, cpu_t, cpu_t_ok
    end_of, end_of_ok = np.zeros(root, np.int64), np.zeros(root, bool)  # (a step's end point: the records have none)
    end_of[n_g:], end_of_ok[n_g:] = _ints(cpu["_end_of"])
    pt, pt_ok = _cut_links(time, time_ok, (end_of, end_of_ok), all_windows, pred, has)
    del end_of, end_of_ok, has
    # each node's predecessor, the root where it has none (the root's own too): in place, no copy of ``pred``
    np.copyto(pred, root, where=pred < 0)
    root_pred[root] = root
    del pred
    # -- each step's end node: its last GPU record when the last step's GPU work ends after its CPU work, else
    #    the CPU point at its end
    #    (the record that ends last, of equal ends the later node: a maximum per step, not a sort of every record)
    last_rec = _last_records(in_node_order("step"), time[:n_g])
    end_cpu = cpu.filter(pl.col("_end_of").is_not_null()).select(pl.col("_end_of").alias("step"), pl.col("_c").alias("_ec"))
    ends_tbl = (windows.join(end_cpu, on="step", how="left").join(last_rec, on="step", how="left").sort("start")
                .with_columns(pl.when(pl.col("_last") & pl.col("_lr").is_not_null() & (pl.col("_le") >= pl.col("T")))
                              .then(pl.col("_lr")).otherwise(pl.col("_ec")).alias("_end")))
    starts = ends_tbl["_end"].to_numpy().astype(np.int64)
    category = gpu["category"] if categories is None else categories()
    if category.len() != gpu.height:
        raise ValueError(f"critical_path: {category.len()} categories for {gpu.height} GPU rows")
    labels = gpu.select(pl.lit(category).cast(pl.Categorical).alias("category"),
                        pl.col("name", "launcher").cast(pl.Categorical))
    parts, stretches = [], []
    # the steps' paths in batches of about PATH_BATCH nodes, each summarized before the next is walked: a JAX
    # profile's path is every kernel of every step (1.4 M nodes at 207 MB, 6.7 M at 975 MB), a few hundred bytes a
    # node while summarized
    depths = _depths(root_pred, starts, root)
    for lo, hi in _batches(depths, len(starts), PATH_BATCH):
        try:
            owner, on_path = (_ancestors_lifted(root_pred, starts, root) if depths is None  # (chains past WALK_LINKS)
                              else _ancestors(root_pred, starts[lo:hi], root, depths[lo:hi]))
        except LinkCycle:
            raise TraceError(trace.path, "its critical path's links go round a cycle: times that contradict each other "
                                         "(a record that waits for one that waits for it; a damaged file?)") from None
        # the path's nodes as arrays (a polars row per node, with its labels and its CPU point's text, held 0.4 GB on
        # a JAX profile's 1.4 M-node path)
        path = PathNodes(owner, on_path, time[on_path], time_ok[on_path], how[on_path], _record_starts(g_ts, on_path),
                         root_pred[on_path] != root, pt[on_path], pt_ok[on_path],
                         _record_origins(gpu, on_path, n_g, order, by_gpu_time=trace.step_source == "auto"))
        del owner, on_path
        part, stretch = _summarize(path, ends_tbl.slice(lo, hi - lo), labels, order, cpu, n_g)
        parts.append(part)
        stretches.append(stretch)
        del path
    del root_pred, time, time_ok, how, g_ts, pt, pt_ok, ends_tbl, labels, cpu  # (before the CPU ops are read)
    summary = _joined(parts)
    whatif = summary.whatif
    if (trace.world_size or 1) > 1 and (whatif["change"] == COMM_FASTER).any():  # one rank of a job: its collectives'
        # kernels also wait for the other ranks, which a faster collective would not make arrive sooner
        whatif = whatif.with_columns(pl.when(pl.col("change") == COMM_FASTER).then(pl.lit(COMM_FASTER + COMM_WAIT_NOTE))
                                     .otherwise(pl.col("change")).alias("change"))
        notes = notes + [rank_note(trace.world_size or 1)]
    return dataclasses.replace(summary, whatif=whatif, ops=_host_by_op(trace, pl.concat(stretches)),
                               notes=notes + _unseen_waits(trace, gpu, summary.steps, untraced_waits, kernel_time))


def rank_note(world_size: int) -> str:
    """The path's note on one rank of a job of ``world_size`` whose what-if halves its communication kernels."""
    return (f"this trace is one rank of a job of {world_size}: its communication kernels run while it waits for the "
            "other ranks, so halving them wins less than the what-if says; analyze the ranks' traces together (a "
            "folder) to tell the wait from the transfer")


#: the what-if of the communication kernels, and what it says on one rank of a job: halving a collective's kernel time
#: halves its wait for the other ranks too only if they arrive sooner (the job's analysis tells the wait apart)
COMM_FASTER = "kernels of Communication 2x faster"
COMM_WAIT_NOTE = " (their time includes waits for the other ranks)"


#: the nodes of the steps' paths summarized at once (:func:`critical_path`'s batches)
PATH_BATCH = 1 << 20
#: the kernels of a step's path listed by name in ``CriticalPath.kernels``, the longest on the path first; the others
#: are one row, ``(N other kernels)`` (a JAX step's path holds ~100 kernel names: 304 k rows over 3,300 steps)
KERNELS_PER_STEP = 10


def _record_starts(g_ts: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """The start of each of ``nodes`` that is a GPU record (id below ``len(g_ts)``: ``g_ts`` holds the records' starts
    in node order), 0 for a CPU point (whose start no summary reads)."""
    out = np.zeros(len(nodes), dtype=np.int64)
    records = nodes < len(g_ts)
    out[records] = g_ts[nodes[records]]
    return out


def _record_origins(gpu: pl.DataFrame, nodes: np.ndarray, n_g: int, order: np.ndarray | None, *,
                    by_gpu_time: bool) -> np.ndarray:
    """What places each of ``nodes`` that is a GPU record in a step (``link.steps.assign_steps``): its launch, else
    its start; its start where the steps are GPU time ranges (``by_gpu_time``). A CPU point's is 0 (no summary reads
    it). Gathered for the path's records only (an array of every record's was 11 MB more at the path's peak on a
    207 MB JAX profile)."""
    out = np.zeros(len(nodes), dtype=np.int64)
    records = nodes < n_g
    rows = nodes[records] if order is None else order[nodes[records]]
    cols = [pl.col("ts").gather(pl.Series(rows, dtype=pl.Int64))]
    if not by_gpu_time:
        cols.insert(0, pl.col("launch_ts").gather(pl.Series(rows, dtype=pl.Int64)))
    out[records] = gpu.select(pl.coalesce(cols).cast(pl.Int64)).to_series().to_numpy()
    return out


def _depths(pred: np.ndarray, starts: np.ndarray, root: int) -> np.ndarray | None:
    """The number of nodes on each start's chain (:func:`_ancestors`), walked a link at a time; None past
    :data:`WALK_LINKS` links. Compiled where the library is (:func:`~kernscope.load.native.chain_depths`), else a
    numpy call per link of all chains at once."""
    found = chain_depths(pred, root, starts, WALK_LINKS)
    if found is False:  # (a chain past the limit)
        return None
    if found is not None:
        return found
    x = starts.astype(np.int64)
    depth = np.zeros(len(x), dtype=np.int64)
    live = np.flatnonzero(x != root)
    for _ in range(WALK_LINKS):
        if not len(live):
            return depth
        depth[live] += 1
        x[live] = pred[x[live]]
        live = live[x[live] != root]
    return None if len(live) else depth


def _batches(depth: np.ndarray | None, n: int, budget: int) -> list[tuple[int, int]]:
    """Consecutive ranges [lo, hi) of the ``n`` starts whose chains hold about ``budget`` nodes together (at least one
    start each); one range where the depths are unknown (None: chains past :data:`WALK_LINKS`, a long Kineto step)."""
    if depth is None or n == 0:
        return [(0, n)]
    total = np.cumsum(depth)
    cuts = [0]
    while cuts[-1] < n:
        base = int(total[cuts[-1] - 1]) if cuts[-1] else 0
        cuts.append(min(n, max(int(np.searchsorted(total, base + budget, side="right")), cuts[-1] + 1)))
    return list(zip(cuts[:-1], cuts[1:]))


def _joined(parts: list[CriticalPath]) -> CriticalPath:
    """The batches' paths as one (:func:`critical_path`): their tables concatenated, by step."""
    if len(parts) == 1:
        return parts[0]
    # (each batch's rows are in order within their steps, which are a batch's only: a stable sort by step)
    steps, categories, kernels, whatif = (pl.concat([getattr(p, name) for p in parts]).sort("step", maintain_order=True)
                                          for name in ("steps", "categories", "kernels", "whatif"))
    return CriticalPath(steps, categories, kernels, whatif, records=pl.concat([p.records for p in parts]))


def _bounded(kernels: pl.DataFrame, top: int) -> pl.DataFrame:
    """``kernels`` (step, name, category, launcher: interned; count, ``_ns``: time on the path) as the path's kernel
    table: names as text, time_us, sorted by step, then time (longest first) and the names; each step's first ``top``
    rows, and one row ``(N other kernels)`` (null category and launcher) of the others' count and time. Rows past each
    step's ``top`` longest times are left out before the names are made text and sorted (a JAX profile's 300 k)."""
    keys = ["step", "name", "category", "launcher"]
    by_time = kernels.sort("step", "_ns", descending=[False, True]).with_columns(pl.int_range(pl.len()).over("step").alias("_at"))
    cut = by_time.filter(pl.col("_at") == top - 1).select("step", pl.col("_ns").alias("_cut"))
    # (ties with a step's top-th time kept until the names order them)
    near = (by_time.join(cut, on="step", how="left").filter(pl.col("_cut").is_null() | (pl.col("_ns") >= pl.col("_cut")))
            .select(*keys, "count", "_ns").with_columns(pl.col("name", "category", "launcher").cast(pl.String))
            .sort("step", "_ns", "name", "category", "launcher", descending=[False, True, False, False, False]))
    kept = near.filter(pl.int_range(pl.len()).over("step") < top) if cut.height else near
    parts = [kept]
    if kept.height < kernels.height:  # the others of each step, one row (integer sums: the times add up exactly)
        totals = kernels.group_by("step").agg(pl.len().alias("_n"), pl.col("count").sum(), pl.col("_ns").sum())
        shown = kept.group_by("step").agg(pl.len().alias("_k"), pl.col("count").sum().alias("_kc"), pl.col("_ns").sum().alias("_kn"))
        rest = (totals.join(shown, on="step", how="left").filter(pl.col("_n") > pl.col("_k"))
                .select("step", pl.format("({} other kernels)", pl.col("_n") - pl.col("_k")).alias("name"),
                        pl.lit(None, pl.String).alias("category"), pl.lit(None, pl.String).alias("launcher"),
                        (pl.col("count") - pl.col("_kc")).alias("count"), (pl.col("_ns") - pl.col("_kn")).alias("_ns")))
        parts.append(rest.cast(kept.schema))
    out = pl.concat(parts).sort("step", maintain_order=True) if len(parts) > 1 else kept
    return out.select(*keys, "count", (pl.col("_ns") / NS_PER_US).alias("time_us"))


#: the name of a step's untraced wait for the GPU in XLA profiles (what the critical path's what-if would remove)
UNTRACED_WAIT = "host's untraced wait for the GPU"
#: the host event kinds whose ends show the host busy (XLA profiles)
HOST_KINDS = ("cpu_op", "user_annotation", "python_function", "runtime", "driver")
#: the shortest untraced gap before a step's last GPU work ended that is taken as the host waiting for it when the
#: host's traced work resumes after it within the step (ns): in host-bound steps the GPU work ends 1-31 µs into a
#: gap between two traced host calls; such gaps of real block_until_ready calls were 0.3-18 ms
MIN_UNTRACED_WAIT_NS = 50_000


def _untraced_waits(trace: Trace, gpu: pl.DataFrame, ends: pl.DataFrame, by_end: pl.DataFrame) -> pl.DataFrame:
    """XLA profiles record no event for the host waiting on the GPU (``block_until_ready``, a result's transfer):
    after it dispatched a step's work the host shows nothing until the GPU work ends. Per step (``ends``: its end
    point ``t`` on its thread), what it waited for is the GPU record that ended last before the step's end
    (``by_end``); the host waited for it when no innermost host event (one that holds no other: the Python frame or
    annotation around the step's body holds its calls, and the wait too) of the step's thread or of a thread that
    launched its GPU work runs at that record's end. The wait is the untraced gap before it: from the last such
    event's end in the step (else the step's start) to the record's end, as :func:`_blocking_syncs` finds a
    synchronizing call's: a tail (nothing traced after the record to the step's end) of any length, a gap the host's
    traced work resumes after within the step when :data:`MIN_UNTRACED_WAIT_NS` or longer; what the host did after
    the record ended is host time."""
    schema = {"pid": pl.String, "tid": pl.String, "_s_name": pl.String, "_s_ts": pl.Int64, "_s_end": pl.Int64,
              "_a": pl.Int64, "_a_end": pl.Int64}
    pts = (ends.select("pid", "tid", pl.col("t").alias("_s_end"), pl.col("_end_of").alias("step"))
           .join(trace.steps.select("step", pl.col("start").alias("_start")), on="step", how="left")
           .drop_nulls(["_s_end", "_start"]).sort("_s_end")
           .join_asof(by_end.select(pl.col("_w").alias("_a"), pl.col("_w_end").alias("_a_end")).sort("_a_end"),
                      left_on="_s_end", right_on="_a_end", strategy="backward")
           .filter(pl.col("_a").is_not_null() & (pl.col("_a_end") > pl.col("_start"))))
    if pts.height == 0:
        return pl.DataFrame(schema=schema)
    # the threads whose events show the host busy in a step: its own, and those that launched its GPU work (XLA
    # writes a step's annotation and the dispatch's events on different lines of one thread)
    # (a lazy query: the three columns are not first copied out of the GPU rows, 0.06-0.13 -> 0.04 s at 6.7 M rows)
    launchers = (gpu.lazy().select("step", "launch_pid", "launch_tid").drop_nulls().unique().collect()
                 .select("step", pl.col("launch_pid").cast(pl.String).alias("pid"), pl.col("launch_tid").cast(pl.String).alias("tid")))
    busy_on = pl.concat([pts.select("step", "pid", "tid"), launchers.join(pts.select("step"), on="step", how="semi")]).unique()
    busy_on = busy_on.join(pts.select("step", "_start", "_a_end", "_s_end"), on="step")
    ev = trace.events
    found = []
    for (pid, tid), win in busy_on.group_by("pid", "tid"):  # a thread or two: the steps' own and their launchers
        # the thread's host events (their threads compared as text only where the kind matches), by start, the
        # outer of two that start together first
        same = [pl.col(c).is_null() if v is None else pl.col(c) == v for c, v in (("pid", pid), ("tid", tid))]
        host = (ev.lazy().select("kind", "pid", "tid", "ts", "end")
                .filter(pl.col("kind").is_in(HOST_KINDS) & same[0] & same[1])  # (interned: no text per event)
                .select("ts", "end").sort("ts", "end", descending=[False, True]).collect())
        ts, end = host["ts"].to_numpy().astype(np.int64), host["end"].to_numpy().astype(np.int64)
        # innermost events: none of the thread's events starts inside them
        leaf = np.ones(len(ts), dtype=bool)
        if len(ts) > 1:
            leaf[:-1] = ts[1:] >= end[:-1]
        ts, end = ts[leaf], end[leaf]
        win = win.sort("_start")
        start, at = win["_start"].to_numpy().astype(np.int64), win["_a_end"].to_numpy().astype(np.int64)
        stop = win["_s_end"].to_numpy().astype(np.int64)
        # each event's step (the last that started before it), kept when it starts after the step's start: the
        # last end at or before the record's end per step, whether an event runs across that end, and whether one
        # starts after it (before the step's end)
        k = np.searchsorted(start, ts, side="left") - 1
        ok = k >= 0
        before = ok.copy()
        before[ok] &= end[ok] <= at[k[ok]]
        busy = np.full(len(start), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(busy, k[before], end[before])
        across, later = ok.copy(), ok.copy()
        across[ok] &= (ts[ok] < at[k[ok]]) & (end[ok] > at[k[ok]])
        later[ok] &= (ts[ok] >= at[k[ok]]) & (ts[ok] < stop[k[ok]])
        covered, resumed = np.zeros(len(start), dtype=bool), np.zeros(len(start), dtype=bool)
        covered[k[across]] = True
        resumed[k[later]] = True
        found.append(win.select("step", pl.Series("_busy", busy), pl.Series("_covered", covered),
                                pl.Series("_resumed", resumed)))
    per = pl.concat(found).group_by("step").agg(pl.col("_busy").max(), pl.col("_covered").any(), pl.col("_resumed").any())
    w = (pts.join(per, on="step", how="left").filter(~pl.col("_covered").fill_null(False))
         .select("pid", "tid", pl.lit(UNTRACED_WAIT).alias("_s_name"),
                 pl.when(pl.col("_busy") > pl.col("_start")).then("_busy").otherwise("_start").alias("_s_ts"),
                 "_a", "_a_end", pl.col("_resumed").fill_null(False)))
    # the wait ends with the GPU work it waited for: what the thread did after it (until the step's end) is host
    # time, not a call returning (a tail of 3.8 ms after the last kernel read as sync return). A gap the host's
    # traced work resumes after within the step is a wait when MIN_UNTRACED_WAIT_NS or longer (shorter: the host
    # between two traced calls, a host-bound step's kernels ending while it works); a tail, with nothing traced
    # after the GPU work to the step's end, is one whatever its length
    long_enough = ~pl.col("_resumed") | (pl.col("_a_end") - pl.col("_s_ts") >= MIN_UNTRACED_WAIT_NS)
    return (w.filter((pl.col("_a_end") > pl.col("_s_ts")) & long_enough)
            .with_columns(pl.col("_a_end").alias("_s_end")).select(list(schema)).cast(schema))  # type: ignore[arg-type]


#: a step's kernel time, as a share of the step, from which a path without GPU work is noted as blind to it
UNSEEN_SHARE = 0.1


def _unseen_waits(trace: Trace, gpu: pl.DataFrame, steps: pl.DataFrame, untraced_waits: bool = False,
                  kernel_time: Callable[[], pl.DataFrame] | None = None) -> list[str]:
    """The note of a JAX profile whose path sees no GPU work in steps whose kernels ran :data:`UNSEEN_SHARE` of them or
    more: XLA records no event for the host
    waiting on the GPU (``block_until_ready``), so such a step's path is host time back to its start and its kernels'
    share is not on it (docs/diagnose.md: a remedy measured and not shipped). ``kernel_time``: see
    :func:`critical_path`."""
    if "xplane" not in trace.metadata or steps.height == 0:
        return []
    return unseen_note(steps, kernel_time() if kernel_time is not None else kernel_time_by_step(gpu), untraced_waits)


def kernel_time_by_step(gpu: pl.DataFrame) -> pl.DataFrame:
    """Per step, the kernel time of its busiest GPU (``_k_us``) and its GPUs (``_gpus``): what :func:`unseen_note`
    reads of the GPU rows (a step's rows are all in one time window of a profile: the windows' tables concatenate)."""
    # (three columns of the GPU rows, not all of them copied by a filter: +90 MB of peak on a 207 MB JAX profile)
    # (per GPU, the busiest one's: two GPUs' kernels summed ran "125%" of a step)
    return (gpu.lazy().select("kind", "step", "device", "dur").filter(pl.col("kind") == "kernel")
            .group_by("step", "device").agg(pl.col("dur").sum()).group_by("step")
            .agg((pl.col("dur").max() / NS_PER_US).alias("_k_us"), pl.len().alias("_gpus")).collect())


def unseen_note(steps: pl.DataFrame, ran: pl.DataFrame, untraced_waits: bool) -> list[str]:
    """:func:`_unseen_waits`' note of a JAX profile's path ``steps`` (``CriticalPath.steps``) and its
    :func:`kernel_time_by_step`."""
    # (steps whose kernels ran at least a tenth of them: a host-bound step's path is host time, rightly)
    blind = steps.join(ran, on="step", how="inner").filter(
        (pl.col("gpu_us") == 0) & (pl.col("_k_us") >= UNSEEN_SHARE * pl.col("step_us")))
    if blind.height == 0:
        return []
    share = 100.0 * float(blind["_k_us"].sum()) / max(float(blind["step_us"].sum()), 1e-9)
    where = "summed on the busiest GPU of each step" if int(blind["_gpus"].max()) > 1 else "summed"  # type: ignore[arg-type]
    how = ("--untraced-waits found no untraced wait at their ends (the host's last events there come after their "
           "GPU work; untraced gaps inside a step are not taken as waits)" if untraced_waits else
           "or on the path with --untraced-waits (the host's untraced tail taken as a wait for the GPU)")
    return [f"XLA records no event for the host waiting on the GPU (block_until_ready): in {blind.height:,} of "
            f"{steps.height:,} steps this path is host time to the step's start, though their kernels ran "
            f"{share:.0f}% of their time ({where}); the GPU's share is in the timeline, {how}"]


def with_queued_note(path: CriticalPath, findings: pl.DataFrame) -> CriticalPath:
    """``path`` with a note where a step's ``launch`` time holds a ``step_start_queued`` finding's wait (``findings``:
    rule, step, win_back_us): the step's first work waiting after its launch call returned, with no GPU record before
    it, is not what a launch costs (TraceLens's ROCm vLLM decode trace: 7,826 of its path's 7,837 µs of launch)."""
    if findings.height == 0 or path.steps.height == 0:
        return path
    queued = findings.filter(pl.col("rule") == "step_start_queued").group_by("step").agg(pl.col("win_back_us").max())
    on_path = path.steps.select("step", "launch_us").join(queued, on="step").filter(
        pl.col("launch_us") >= pl.col("win_back_us"))
    if on_path.height == 0:
        return path
    steps = ", ".join(str(s) for s in on_path["step"].sort().to_list()[:5]) + (", …" if on_path.height > 5 else "")
    note = (f"{float(on_path['win_back_us'].sum()):,.0f} µs of the launch time of step(s) {steps} is the step's first "
            "GPU work waiting after its launch call returned, with no GPU record before it (step_start_queued): work "
            "launched before the trace began, or the host's and the GPU's clocks apart, not what the launch cost")
    return dataclasses.replace(path, notes=[*path.notes, note])


def launch_counts(gpu: pl.DataFrame) -> pl.DataFrame:
    """The GPU records by the thread that launched them: ``pid``, ``tid`` (as text) and ``len``; the time windows of a
    profile give tables that add up (:func:`busiest_launcher` of them concatenated)."""
    # grouped on the interned values, text only for the few threads (casting every GPU row's pid and tid to text
    # first took 0.3 s of a JAX profile's 1.4 M rows)
    return (gpu.group_by("launch_pid", "launch_tid").len()
            .select(pl.col("launch_pid").cast(pl.String).alias("pid"), pl.col("launch_tid").cast(pl.String).alias("tid"),
                    pl.col("len").cast(pl.Int64)))


def busiest_launcher(counts: pl.DataFrame) -> tuple[str | None, str | None] | None:
    """The thread that launched most GPU records (pid, tid), of :func:`launch_counts`' rows (several tables of them
    summed); of threads that launched as much, the first by text. None where there are none."""
    top = (counts.group_by("pid", "tid").agg(pl.col("len").sum())
           .sort("len", "pid", "tid", descending=[True, False, False], nulls_last=True).head(1))
    return (top["pid"][0], top["tid"][0]) if top.height else None


def _step_threads(trace: Trace, windows: pl.DataFrame, launch_thread: tuple[str, str] | None = None) -> pl.DataFrame:
    """The thread each step runs on (its ProfilerStep annotation's), else the thread that launched most work
    (``launch_thread`` where given: of the profile a time window ``trace`` is of)."""
    names = trace.steps.select("step", "name")
    ev = (trace.events.select("name", "kind", "pid", "tid", "ts")
          .filter(pl.col("name").is_in(names["name"].implode()) & (pl.col("kind") != "gpu"))
          .select(pl.col("name").cast(pl.String), pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String), "ts"))
    marks = names.join(ev, on="name", how="inner").sort("ts").unique("step", keep="first").select("step", "pid", "tid")
    top = launch_thread if launch_thread is not None else busiest_launcher(launch_counts(trace.gpu))
    busiest = pl.DataFrame({"pid": [top[0]] if top else [], "tid": [top[1]] if top else []},
                           schema={"pid": pl.String, "tid": pl.String})
    fallback = windows.select("step").join(busiest, how="cross")
    return fallback.join(marks, on="step", how="left", suffix="_m").select(
        "step", pl.coalesce("pid_m", "pid").alias("pid"), pl.coalesce("tid_m", "tid").alias("tid"))


def _blocking_syncs(trace: Trace, by_end: pl.DataFrame) -> pl.DataFrame:
    """Synchronizing runtime calls during which the GPU was still busy (the host blocked), with ``_a``: the GPU
    record that ended last before the call returned (what it waited for) and ``_a_end``."""
    rt = named(trace.rows(SYNC_KINDS, ("pid", "tid", "name", "ts", "end")), SYNC_CALLS)
    s = (rt.select(pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String), pl.col("name").cast(pl.String).alias("_s_name"),
                   pl.col("ts").alias("_s_ts"), pl.col("end").alias("_s_end"))
         .sort("_s_end", "_s_ts", "pid", "tid")
         .join_asof(by_end.select(pl.col("_w").alias("_a"), pl.col("_w_end").alias("_a_end")), left_on="_s_end",
                    right_on="_a_end", strategy="backward"))
    return s.filter(pl.col("_a").is_not_null() & (pl.col("_a_end") > pl.col("_s_ts"))).sort("_s_end", "_s_ts", "pid", "tid")


@dataclass(frozen=True)
class PathNodes:
    """Every node on a step's path, as arrays a node each: ``owner`` (its row of the steps' ends), ``node`` (its id),
    its ``time`` (and whether it has one), how it was reached (``how``: ``_HOW_QUEUE`` ... ``_HOW_CPU``), its start ``ts`` (a
    record's), whether it has a predecessor on the path (``linked``), that predecessor's time ``pt``, and a record's
    ``origin`` (its launch, else its start; 0 for a CPU point)."""

    owner: np.ndarray
    node: np.ndarray
    time: np.ndarray
    time_ok: np.ndarray
    how: np.ndarray
    ts: np.ndarray
    linked: np.ndarray
    pt: np.ndarray
    pt_ok: np.ndarray
    origin: np.ndarray


def _per_step(owner: np.ndarray, n_k: int) -> Callable[[np.ndarray], np.ndarray]:
    """Integer sums per step row of arrays a value per node (``owner``: each node's row, sorted: a path's nodes come
    grouped by their step, in order), the rows' runs found once for every segment summed."""
    first = np.flatnonzero(np.diff(owner, prepend=-1)) if len(owner) else np.zeros(0, dtype=np.int64)
    present = owner[first]

    def sums(values: np.ndarray) -> np.ndarray:
        out = np.zeros(n_k, dtype=np.int64)
        if len(first):
            out[present] = np.add.reduceat(values, first)
        return out
    return sums


def _summarize(path: PathNodes, ends: pl.DataFrame, labels: pl.DataFrame, order: np.ndarray | None,
               cpu: pl.DataFrame, n_g: int) -> tuple[CriticalPath, pl.DataFrame]:
    """The path's tables (``ops`` still empty) and its host stretches (step, pid, tid, a, b) for :func:`_host_by_op`.
    ``labels``: the GPU records' category, name and launcher, in the trace's order; node id k < ``n_g`` is record
    ``order[k]`` (None: record k). Segments in numpy, a node each; polars tables only of the records (grouped) and of
    the CPU points (a few a step)."""
    k = ends.select(pl.int_range(pl.len()).alias("_k"), "step", "start", "T")
    k_step, k_start = k["step"].to_numpy().astype(np.int64), k["start"].to_numpy().astype(np.int64)
    n_k = k.height
    start = k_start[path.owner]
    frm = np.maximum(np.where(path.pt_ok, path.pt, start), start)  # the predecessor's time, not before the step
    is_gpu = path.node < n_g
    r_at, c_at = np.flatnonzero(is_gpu), np.flatnonzero(~is_gpu)
    # records: their kernel time from when they could start, and the gap before it by how they were reached
    g_from, g_ts, g_linked, g_how = frm[r_at], path.ts[r_at], path.linked[r_at], path.how[r_at]
    gap = np.maximum(g_ts - g_from, 0)
    # kernel time on the path: the step's own is ``gpu``; a record launched before the step (GPU work the step's start
    # found still queued or running) is ``carryover``, as is the wait before such a record began
    k_time = path.time[r_at] - np.maximum(g_ts, g_from)
    carried = path.origin[r_at] < start[r_at]
    seg = {"gpu": np.where(carried, 0, k_time), "carryover": np.where(~g_linked, gap, 0) + np.where(carried, k_time, 0)}
    for name, code in (("launch", _HOW_LAUNCH), ("queue", _HOW_QUEUE), ("stream_wait", _HOW_WAIT)):
        seg[name] = np.where(g_linked & (g_how == code), gap, 0)
    # CPU points: a synchronizing call's return after the GPU work it waited for, then host time to the point
    c = cpu.select(pl.col("_s_name", "_s_ts", "_s_end", "_a_end", "pid", "tid")).gather(
        pl.Series(path.node[c_at] - n_g, dtype=pl.Int64))
    s_end, s_end_ok = _ints(c["_s_end"])
    a_end, a_end_ok = _ints(c["_a_end"])
    c_from = frm[c_at]
    synced = path.linked[c_at]
    c_time_ok = path.time_ok[c_at]
    host = np.where(c_time_ok, path.time[c_at] - np.maximum(np.where(synced & s_end_ok, s_end, c_from), c_from), 0)
    c_seg = {"sync_return": np.where(synced & s_end_ok,
                                     np.maximum(s_end - np.where(a_end_ok, np.maximum(a_end, c_from), c_from), 0), 0),
             "cpu": host}
    # per step: integer sums of each segment over the step's nodes of its kind (records or CPU points)
    per_record, per_point = _per_step(path.owner[r_at], n_k), _per_step(path.owner[c_at], n_k)
    sums = {name: per_record(v) for name, v in seg.items()} | {name: per_point(v) for name, v in c_seg.items()}
    # (every µs column a Series of integer ns divided: polars divides a one-row column exactly and a longer one by the
    # reciprocal, so a step analyzed alone and the whole trace differed in the last digit; the length from the
    # segments' integer sums, not a sum of their floats)
    length = np.sum([np.asarray(sums[s], dtype=np.int64) for s in SEGMENTS], axis=0)
    span = (k["T"] - k["start"]).cast(pl.Int64)
    steps = (k.with_columns(*(pl.Series(f"{s}_us", sums[s], dtype=pl.Int64) / NS_PER_US for s in SEGMENTS))
             .with_columns((span / NS_PER_US).alias("step_us"),
                           (pl.Series("length_us", length, dtype=pl.Int64) / NS_PER_US).alias("length_us"))
             .select("step", "step_us", "length_us", *(f"{s}_us" for s in SEGMENTS)).sort("step"))
    # the records: their labels gathered by id (a record's id is its place in ``order``), grouped on one integer a row
    rows = path.node[r_at] if order is None else order[path.node[r_at]]
    kern = labels.gather(pl.Series(rows, dtype=pl.Int64)).with_columns(
        pl.Series("step", k_step[path.owner[r_at]]), pl.Series("gpu", k_time), pl.Series("ts", path.ts[r_at]),
        pl.Series("time", path.time[r_at]), pl.Series("carried", carried))
    categories = (group_by_keys(kern, ["step", "category"], [(pl.col("gpu").sum() / NS_PER_US).alias("time_us")])
                  .with_columns(pl.col("category").cast(pl.String)).sort("step", "time_us", "category", descending=[False, True, False]))
    kernels = _bounded(group_by_keys(kern, ["step", "name", "category", "launcher"],
                                     [pl.len().alias("count"), pl.col("gpu").sum().alias("_ns")]), KERNELS_PER_STEP)
    faster = categories.select("step", ("kernels of " + pl.col("category") + " 2x faster").alias("change"),
                               (pl.col("time_us") / 2).alias("saves_us"))
    points = c.with_columns(pl.Series("step", k_step[path.owner[c_at]]), pl.Series("start", start[c_at]),
                            pl.Series("cpu", host), pl.Series("time", path.time[c_at]), pl.Series("_synced", synced),
                            pl.Series("_time_ok", c_time_ok))
    after = points.filter(pl.col("_synced")).select(
        "step", ("remove the " + pl.col("_s_name") + " that returns at " + ((pl.col("_s_end") - pl.col("start")) / NS_PER_US)
                 .round(1).cast(pl.String) + " µs").alias("change"),
        (pl.min_horizontal(pl.col("_s_end") - pl.col("_s_ts"), pl.col("cpu")) / NS_PER_US).alias("saves_us"))
    whatif = (pl.concat([faster, after]).filter(pl.col("saves_us") > 0)
              .sort("step", "saves_us", "change", descending=[False, True, False]))
    records = kern.select("step", "name", "ts", pl.col("time").alias("end"), (pl.col("gpu") / NS_PER_US).alias("on_path_us"),
                          "carried")
    stretches = points.filter(pl.col("_time_ok") & (pl.col("cpu") > 0)).select(
        "step", "pid", "tid", (pl.col("time") - pl.col("cpu")).alias("a"), pl.col("time").alias("b"))
    return CriticalPath(steps, categories, kernels, whatif, records=records), stretches


def _top_level(rows: pl.DataFrame, s_start: np.ndarray, s_end: np.ndarray) -> pl.DataFrame:
    """One thread's top-level ops (``ts``, ``end``, ``name`` as text), in time order, of its CPU ops and user
    annotations ``rows`` (``_ann``: an annotation; ``name`` interned): an op is top level when it starts at or after
    every earlier op's end. An annotation holding a whole step (the first step starting at or after it ends within it:
    the step's own, ``s_start``/``s_end`` the steps sorted by start) is not an op. Of events with one span the
    annotation comes first (the user's range around the op), then the name in text order: one order whatever order the
    rows came in. numpy's sort of integer keys, the names ranked by their distinct texts."""
    ts, end, ann = rows["ts"].to_numpy().astype(np.int64), rows["end"].to_numpy().astype(np.int64), rows["_ann"].to_numpy()
    if len(s_start) and ann.any():
        keep = ~(ann & first_held(ts, end, s_start, s_end)[1])
        if not keep.all():
            rows, ts, end, ann = rows.filter(pl.Series(keep)), ts[keep], end[keep], ann[keep]
    if not len(ts):
        return pl.DataFrame({"ts": ts, "end": end, "name": pl.Series([], dtype=pl.String)})
    order = stable_order(ts)
    order = np.arange(len(ts)) if order is None else order
    t_in = ts[order]
    tie = np.flatnonzero(t_in[1:] == t_in[:-1])
    if len(tie):  # events starting together: ordered by span, kind and name
        # only the rows of a run of ties are sorted by the whole key (each run comes back to its own positions, the
        # runs lying in time order), their names ranked among their own: a lexsort of every row took 5-6 ms of the
        # a100 replica's analysis, whose launching thread holds 100,000 ops
        pos = tie_positions(tie, len(order))
        rows_at = order[pos]
        names = rows["name"].gather(pl.Series(rows_at, dtype=pl.Int64))
        within = np.lexsort((text_ranks(names), ~ann[rows_at], -end[rows_at], ts[rows_at]))
        order[pos] = rows_at[within]
    ts, end = ts[order], end[order]
    seen = np.maximum.accumulate(end)
    top = np.ones(len(ts), bool)
    top[1:] = ts[1:] >= seen[:-1]
    pick = order[top]
    return pl.DataFrame({"ts": ts[top], "end": end[top], "name": rows["name"].gather(pick).cast(pl.String)})


def _host_by_op(trace: Trace, host: pl.DataFrame) -> pl.DataFrame:
    """The path's host stretches ([a, b] on a thread) split over the thread's top-level CPU ops and user annotations
    (a DataLoader's ``__next__``, ``Optimizer.step``, the user's ranges; not an annotation holding a whole step) by
    overlap: per step and op, the host time on the path (``(between ops)``: time in no top-level op). Per thread, the
    top-level ops are disjoint and sorted, so each stretch covers a range of them: the ends by searchsorted, the
    fully covered middle by a difference array (numpy, no loop per stretch)."""
    schema = {"step": pl.Int64, "op": pl.String, "host_us": pl.Float64}
    if host.height == 0:
        return pl.DataFrame(schema=schema)
    ev = trace.events
    threads = host.select(pl.col("pid").cast(ev.schema["pid"]), pl.col("tid").cast(ev.schema["tid"])).unique()
    st = trace.steps.select("start", "end").sort("start")
    s_start, s_end = st["start"].to_numpy().astype(np.int64), st["end"].to_numpy().astype(np.int64)
    # one query: the CPU ops and user annotations of these threads, not first copied out of the event table on their
    # own; each thread's top level is then found in numpy (a polars sort by the names as text took 45-75 ms of a JAX
    # profile's 0.2 s critical path: its launching thread holds 260,700 PjRt annotations)
    mine = (ev.lazy().select("kind", "name", "pid", "tid", "ts", "end")
            .filter(pl.col("kind").is_in(list(OP_KINDS)))
            .join(threads.lazy(), on=["pid", "tid"], how="semi").filter(pl.col("end") > pl.col("ts"))
            .select((pl.col("kind") == "user_annotation").alias("_ann"), "name", "pid", "tid", "ts", "end")
            .collect())
    # (keyed by the pid and tid as text, as the stretches name them)
    by_thread = partition(mine, ("pid", "tid")) if mine.height else {}
    parts: list[pl.DataFrame] = []
    for (pid, tid), segs in host.group_by("pid", "tid"):  # one pass per thread, not per stretch
        # (a stretch of a thread without a pid or tid, a JAX export's host rows, matches no op, as a join would)
        rows = by_thread.get((pid, tid)) if pid is not None and tid is not None else None
        top = _top_level(rows, s_start, s_end) if rows is not None else None
        a, b = segs["a"].to_numpy().astype(np.int64), segs["b"].to_numpy().astype(np.int64)
        steps = segs["step"].to_numpy()
        if top is None or top.height == 0:
            parts.append(pl.DataFrame({"step": steps, "op": ["(between ops)"] * len(a), "_ns": b - a}))
            continue
        s0, e0 = top["ts"].to_numpy().astype(np.int64), top["end"].to_numpy().astype(np.int64)
        # the ops are kept as their rows in ``top`` and named by one gather at the end (an op without a name stays
        # null: as numpy objects, a None among the names made the column polars' Object type)
        first = np.searchsorted(e0, a, side="right")  # first op ending after a
        last = np.searchsorted(s0, b, side="left") - 1  # last op starting before b
        n = len(s0)
        rows_op, rows_step, rows_ns = [], [], []
        for idx, end in ((first, 0), (last, 1)):  # the partial ops at both ends (one op, once, when first == last)
            ok = (idx >= 0) & (idx < n) & (first <= last)
            i = np.clip(idx, 0, n - 1)
            part = np.where(ok, np.minimum(b, e0[i]) - np.maximum(a, s0[i]), 0)
            keep = ok & (part > 0) & ((end == 0) | (first != last))
            rows_op.append(i[keep])
            rows_step.append(steps[keep])
            rows_ns.append(part[keep])
        # ops strictly between first and last are covered in full: count the stretches covering each op
        cover = np.zeros(n + 1, dtype=np.int64)
        inner = last - first >= 2
        np.add.at(cover, first[inner] + 1, 1)
        np.add.at(cover, last[inner], -1)
        cover = np.cumsum(cover)[:n]
        full = cover > 0
        # each fully covered op's stretch: stretches on a thread are disjoint, so their op ranges are too
        order = np.argsort(first[inner], kind="stable")
        starts_in = (first[inner] + 1)[order]
        k = np.searchsorted(starts_in, np.arange(n), side="right") - 1
        step_of_op = steps[inner][order][np.clip(k, 0, max(len(starts_in) - 1, 0))] if len(starts_in) else np.zeros(n, np.int64)
        rows_op.append(np.flatnonzero(full))
        rows_step.append(step_of_op[full])
        rows_ns.append((e0 - s0)[full] * cover[full])
        covered = pl.DataFrame({"step": np.concatenate(rows_step).astype(np.int64),
                                "op": top["name"].gather(np.concatenate(rows_op).astype(np.int64)),
                                "_ns": np.concatenate(rows_ns).astype(np.int64)})
        gaps = (pl.DataFrame({"step": steps.astype(np.int64), "_ns": b - a}).group_by("step").agg(pl.col("_ns").sum())
                .join(covered.group_by("step").agg(pl.col("_ns").sum().alias("_in")), on="step", how="left")
                .select("step", pl.lit("(between ops)").alias("op"), (pl.col("_ns") - pl.col("_in").fill_null(0)).alias("_ns")))
        parts += [covered, gaps]
    out = pl.concat([p.cast({"step": pl.Int64, "op": pl.String, "_ns": pl.Int64}) for p in parts])
    return (out.group_by("step", "op").agg((pl.col("_ns").sum() / NS_PER_US).alias("host_us"))
            .filter(pl.col("host_us") > 0).sort("step", "host_us", "op", descending=[False, True, False]))
