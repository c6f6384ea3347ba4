"""One rank's summary: the small tables a multi-rank analysis needs from each trace (worker side).

Input: a linked trace. Output: a :class:`RankResult` of small tables (per step, per collective kernel,
per stream), never event tables, so any number of ranks can be summarized in worker processes and only
these travel back to the client. All times µs except ``ts``/``end`` of collectives (ns, trace clock).

Definitions (per rank, over all its GPU activity, and per step over the GPU work launched in the step):

- ``compute_us``: union of kernels that are not communication (memcpy and memset records excluded);
- ``comm_us``: union of communication kernels (NCCL, RCCL, ...); ``exposed_comm_us``: communication not
  overlapped by compute; ``overlap_pct`` = 100 x |comm ∩ compute| / |comm| (HTA's comm/comp overlap);
- ``busy_us``: union of all GPU records; ``span_us``: first start to last end; ``other_work_us``: of a step, the time
  in its span when the GPU ran only other steps' work (or work in no step: a GPU behind its host runs the step
  before's work there); ``idle_us`` = span − busy − other work;
- a rank with several devices (a JAX host's GPUs): each of these per device, summed, the span counted once per
  device (device time, as the trace's timeline: :func:`kernscope.analyze.timeline.timeline_of`);
- idle breakdown of each gap in the busy union, by the record that ends it: ``host_wait_us`` when its launch
  came after the GPU went idle (the CPU was late), ``kernel_wait_us`` when it was launched in time and the gap
  is under :data:`KERNEL_WAIT_US` (back-to-back launch overhead), ``other_idle_us`` otherwise (waits on
  events, other streams, the host).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ...intervals import union_by
from ...load.native import union_lengths
from ...model import Trace
from ...scalars import as_float
from ..critical_path import critical_path
from ..facts import trace_facts
from ..idle import idle_breakdown
from ..kernels import COMM_PATTERN, NS_PER_US, gpu_table, mark_communication
from ..summary import empty_reason
from ..timeline import hidden_ns, one_device_filled, span_cover

_RANK_IN_NAME = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)
_TYPES = (("allreduce", "allreduce"), ("all_reduce", "allreduce"), ("allgather", "allgather"), ("all_gather", "allgather"),
          ("reducescatter", "reduce_scatter"), ("reduce_scatter", "reduce_scatter"), ("alltoall", "alltoall"),
          ("all_to_all", "alltoall"), ("broadcast", "broadcast"), ("sendrecv", "sendrecv"), ("send", "send"),
          ("recv", "recv"), ("reduce", "reduce"), ("gather", "gather"), ("scatter", "scatter"), ("barrier", "barrier"))
_ALGO = re.compile(r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)_(LL128|LL|SIMPLE)", re.IGNORECASE)
#: bytes per element of c10d's ``dtype`` names in record_param_comms
DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2, "int": 4,
               "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2, "char": 1, "int8": 1, "byte": 1, "uint8": 1,
               "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1}

METRICS = ("kernel_time_us", "compute_us", "comm_us", "exposed_comm_us", "overlap_pct", "busy_us", "span_us",
           "other_work_us", "idle_us", "host_wait_us", "kernel_wait_us", "other_idle_us")


@dataclass(frozen=True)
class RankResult:
    """What one rank contributes to a multi-rank analysis (small tables only)."""

    path: str
    rank: int | None
    rank_source: str  #: "distributedInfo", "XLA GPU clique", "file name" or "none"
    world_size: int | None
    device_names: list[str]
    pg_config: list[dict[str, Any]]
    gpu_start_ns: int | None  #: first GPU start on the trace's clock
    gpu_end_ns: int | None
    overall: dict[str, float]  #: METRICS over all GPU activity
    steps: pl.DataFrame  #: step, name, wall_us + METRICS per step (GPU work launched in the step)
    collectives: pl.DataFrame  #: one row per communication kernel (see :func:`collective_kernels`)
    launch: dict[str, float]  #: launch -> kernel start delay statistics (µs)
    #: per stream: launches, max_queue, mean_queue (time-weighted), pct_time_empty and the idle breakdown
    #: (:data:`STREAM_IDLE`)
    queues: pl.DataFrame
    load_s: float = 0.0
    notes: list[str] = field(default_factory=list)  #: what the rank's trace lacks (no GPU activity), in words
    #: the rank's critical path per step (:func:`~kernscope.analyze.critical_path.critical_path`'s ``steps``)
    critical_path: pl.DataFrame = field(default_factory=pl.DataFrame)
    #: an XSpace's profile start (epoch ns): its times are relative to it, each process's to its own start, so the
    #: job puts the ranks on one clock by it (None: a Kineto trace, whose ranks share their host's clock)
    clock_start_ns: int | None = None


#: rank ids at or beyond this are not ranks (no job has 2^31 processes): a corrupt or hostile value, left unknown
MAX_RANK = 1 << 31


#: the rank source of a JAX process whose rank its XSpace's GPU cliques give (:func:`xla_rank`)
XLA_CLIQUE = "XLA GPU clique"
_CLIQUE_DEVICES = re.compile(r"devices=(\d+):")
_CLIQUE_LOCAL = re.compile(r"local_participants=(\d+)")


#: a GPU clique of a JAX profile: its device count, its local participants (GPUs of this process) and their ranks
Clique = tuple[int, int, frozenset[int]]


def cliques(trace: Trace) -> list[Clique]:
    """The GPU cliques the profile's collectives ran in, as XLA records them (``AcquireGpuClique``: a local GPU's
    ``rank`` in the clique and the clique's key, ``devices=N:[...]; local_participants=L; ...``; read for a rank
    summary only, empty otherwise)."""
    ev = trace.events
    if "clique_key" not in ev.columns or "clique_rank" not in ev.columns:
        return []
    got = (ev.lazy().select("clique_key", "clique_rank").filter(pl.col("clique_key").is_not_null())
           .group_by(pl.col("clique_key").cast(pl.String)).agg(pl.col("clique_rank").drop_nulls().unique()).collect())
    out = []
    for key, ranks in got.iter_rows():
        devices, local = _CLIQUE_DEVICES.search(key or ""), _CLIQUE_LOCAL.search(key or "")
        if devices is not None and local is not None and int(local.group(1)) >= 1:
            out.append((int(devices.group(1)), int(local.group(1)), frozenset(ranks)))
    return out


def xla_rank(trace: Trace, found: list[Clique] | None = None) -> tuple[int, int] | None:
    """A JAX process's (rank, world size) from its GPU cliques (:func:`cliques`, or ``found``). The clique of the
    most devices gives them: with one GPU in the process (L = 1), its rank and N; with L GPUs whose ranks are the L
    consecutive ones from a multiple of L (processes own consecutive devices), that multiple's place and N / L
    processes. None otherwise (no collectives, ranks spread over the clique, an XSpace without these stats)."""
    found = cliques(trace) if found is None else found
    if not found:
        return None
    n, local_gpus, ranks = max(found, key=lambda c: c[0])
    first = min(ranks, default=-1)
    if (len(ranks) != local_gpus or ranks != set(range(first, first + local_gpus)) or first % local_gpus
            or n % local_gpus or not 0 <= first < n < MAX_RANK):
        return None
    return first // local_gpus, n // local_gpus


def rank_of(trace: Trace, path: str, found: list[Clique] | None = None) -> tuple[int | None, str]:
    """The trace's rank: ``distributedInfo.rank``, else (a JAX profile) its rank in its largest GPU clique
    (:func:`xla_rank`; ``found``: its cliques, when known), else a ``rank-3`` / ``rank3`` / ``_rank3`` in the file
    name; a value outside [0, 2^31) is no rank id (source ``"out of range"``)."""
    if trace.rank is not None:
        return (trace.rank, "distributedInfo") if 0 <= trace.rank < MAX_RANK else (None, "out of range")
    xla = xla_rank(trace, found)
    if xla is not None:
        return xla[0], XLA_CLIQUE
    m = _RANK_IN_NAME.search(path.replace("\\", "/").rsplit("/", 1)[-1])
    if m is None:
        return None, "none"
    v = int(m.group(1))
    return (v, "file name") if v < MAX_RANK else (None, "out of range")


def collective_type(meta: str | None, name: str) -> str:
    for text in (meta or "", name):
        low = text.lower().replace(" ", "")
        for needle, kind in _TYPES:
            if needle in low:
                return kind
    return "other"


def _union(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    if df.height == 0:
        have = df.schema
        return pl.DataFrame(schema={**{k: have[k] for k in keys}, "len": pl.Int64})
    return union_by(df, keys, sweep=union_lengths)


def _sums(g: pl.DataFrame, keys: list[str], ref: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per group of ``keys`` over GPU rows ``g``: kernel time and the compute, communication, both and busy unions
    (``_k``, ``_comp``, ``_comm``, ``_cc``, ``_busy``, ns), the span (``_span``, ns) and the idle gaps (µs); with
    ``ref`` (the rows ``g``'s were taken from), the other work in the gaps (``other_work_us``)."""
    is_k = pl.col("kind") == "kernel"
    comp = g.filter(is_k & ~pl.col("is_comm"))
    comm = g.filter(is_k & pl.col("is_comm"))
    both = g.filter(is_k)
    base = g.group_by(keys).agg(
        (pl.when(is_k).then(pl.col("dur")).otherwise(0).sum()).alias("_k"),
        (pl.col("end").max() - pl.col("ts").min()).alias("_span"))
    for name, part in (("_comp", comp), ("_comm", comm), ("_cc", both)):
        base = base.join(_union(part, keys).rename({"len": name}), on=keys, how="left")
    base = base.fill_null(0)
    idle = idle_breakdown(g, keys, ref=ref)  # also the busy union (_busy): the gaps are what the merged segments leave
    return base.join(idle, on=keys, how="left").fill_null(0)


def _metrics(g: pl.DataFrame, keys: list[str], ref: pl.DataFrame | None = None) -> pl.DataFrame:
    """METRICS per group of ``keys`` over GPU rows ``g`` (kind, is_comm, ts, end, dur, launch_ts, device). With
    several devices (one process driving several GPUs, a JAX host's), as the trace's timeline: each device's unions
    its own, summed, and the span the group's over all of them once per device; a device's idle before its first
    and after its last record in the group is ``other_idle_us`` (it waited on other GPUs' work, not on the host).

    ``ref``: where ``g`` is a part of the rank's GPU rows (its steps'), all of them: a group's span can hold other
    work (the step before's, on a GPU behind its host), which is ``other_work_us`` and not idle (as the timeline's
    ``other_work_time``: :func:`kernscope.analyze.timeline.span_cover`); its gaps are classified by their idle rest."""
    rows, devices = one_device_filled(g) if "device" in g.columns and "stream" not in keys else (g, 1)
    cover = span_cover(rows, keys, ref, by_device=False) if ref is not None and rows.height else None
    inner = ref if cover is not None else None
    if devices > 1:
        per = _sums(rows, [*keys, "device"], inner)
        span = rows.group_by(keys).agg((pl.col("end").max() - pl.col("ts").min()).alias("_group_span"))
        summed = per.group_by(keys).agg(pl.col("_k", "_comp", "_comm", "_cc", "_busy", "host_wait_us", "kernel_wait_us",
                                                "other_idle_us", *(["other_work_us"] if inner is not None else [])).sum())
        base = summed.join(span, on=keys, nulls_equal=True).with_columns((devices * pl.col("_group_span")).alias("_span"))
        gaps = pl.col("host_wait_us") + pl.col("kernel_wait_us") + pl.col("other_idle_us")
        if inner is not None:  # (the gaps' other work: taken out below, with the rest of the span's)
            gaps = gaps + pl.col("other_work_us")
        base = base.with_columns(
            (pl.col("other_idle_us") + (pl.col("_span") - pl.col("_busy")) / NS_PER_US - gaps).alias("other_idle_us"))
    else:
        base = _sums(g, keys, inner)
    if cover is None:
        base = base.with_columns(pl.lit(0.0).alias("other_work_us"))
    else:  # (the span's other work beyond the gaps' lies before or after a device's own records: out of other_idle)
        base = base.join(cover, on=keys, how="left", nulls_equal=True).with_columns(
            (pl.max_horizontal(pl.col("_cov").fill_null(0) - pl.col("_busy"), pl.lit(0)) / NS_PER_US).alias("_ow"))
        base = base.with_columns((pl.col("other_idle_us") - (pl.col("_ow") - pl.col("other_work_us"))).alias("other_idle_us"),
                                 pl.col("_ow").alias("other_work_us")).drop("_cov", "_ow")
    ovl = pl.col("_comp") + pl.col("_comm") - pl.col("_cc")
    if cover is not None and ref is not None:  # (a step's communication hidden by any compute on its GPU, another step's too)
        is_k = pl.col("kind") == "kernel"
        hid = hidden_ns(rows, [*keys, "device"] if devices > 1 else keys, ref, is_k & pl.col("is_comm"),
                        is_k & ~pl.col("is_comm")).group_by(keys).agg(pl.col("_hid").sum())
        base = base.join(hid, on=keys, how="left", nulls_equal=True).with_columns(pl.col("_hid").fill_null(0))
        ovl = pl.col("_hid")
    return base.select(
        *keys,
        (pl.col("_k") / NS_PER_US).alias("kernel_time_us"),
        (pl.col("_comp") / NS_PER_US).alias("compute_us"),
        (pl.col("_comm") / NS_PER_US).alias("comm_us"),
        ((pl.col("_comm") - ovl) / NS_PER_US).alias("exposed_comm_us"),
        pl.when(pl.col("_comm") > 0).then(100.0 * ovl / pl.col("_comm")).otherwise(None).alias("overlap_pct"),
        (pl.col("_busy") / NS_PER_US).alias("busy_us"),
        (pl.col("_span") / NS_PER_US).alias("span_us"),
        "other_work_us",
        ((pl.col("_span") - pl.col("_busy")) / NS_PER_US - pl.col("other_work_us")).alias("idle_us"),
        "host_wait_us", "kernel_wait_us", "other_idle_us",
    )


#: XLA collectives whose operands and result are of one size: the message is half the bytes the HLO instruction
#: moves (``hlo_bytes``, operands + result). An all-gather's or reduce-scatter's message depends on its group size,
#: which the rank's trace does not say: left unknown.
XLA_SAME_SIZE = ("XLA all-reduce", "XLA all-reduce-start", "XLA all-to-all", "XLA collective-permute")


#: XLA collectives whose result (all-gather) or operand (reduce-scatter) is n times the other, n the group's size:
#: the message (NCCL-tests' size: the larger side) is n/(n+1) of the bytes the instruction moves, where the profile's
#: GPU cliques are all of one size n (:func:`cliques`); else unknown
XLA_GROUPED = ("XLA all-gather", "XLA reduce-scatter")


def _gpu(trace: Trace, clique_sizes: set[int]) -> pl.DataFrame:
    """The GPU rows a rank summary reads, with ``is_comm`` and an XLA collective's message size from its HLO
    (``xla_msg_bytes``; ``clique_sizes``: the device counts of the profile's GPU cliques)."""
    size = pl.lit(None, pl.Float64)
    if {"hlo_bytes", "hlo_op_class"} <= set(trace.gpu.columns):
        op_class = pl.col("hlo_op_class").cast(pl.String)
        size = pl.when(op_class.is_in(XLA_SAME_SIZE)).then(pl.col("hlo_bytes") / 2)
        if len(clique_sizes) == 1:
            (k,) = clique_sizes
            size = size.when(op_class.is_in(XLA_GROUPED)).then(pl.col("hlo_bytes") * k / (k + 1))
    g = trace.gpu.select(pl.col("name").cast(pl.String), pl.col("kind").cast(pl.String), "ts", "end", "dur", "stream", "device",
                         "step", "launch_ts", "op_idx", "launch_idx", "correlation", size.alias("xla_msg_bytes"))
    # (the pattern tested once per distinct name, as kernels.mark_communication does: 1.4 M rows of a JAX profile)
    names = g.select(pl.col("name").unique()).with_columns(pl.col("name").str.contains(COMM_PATTERN).alias("_comm_name"))
    g = g.join(names, on="name", how="left", maintain_order="left", nulls_equal=True)
    return g.with_columns((pl.col("_comm_name") & (pl.col("kind") == "kernel")).alias("is_comm")).drop("_comm_name")


_META_COLS = ("collective", "in_msg_nelems", "out_msg_nelems", "comm_dtype", "pg_name", "pg_desc", "group_size",
              "comm_seq", "comm_rank")
#: collective types of point-to-point transfers: matched across ranks as one type, by the pair of ranks
P2P_TYPES = ("send", "recv", "sendrecv")


def _meta_schema() -> dict[str, Any]:
    return {"launch_idx": pl.Int64, **{m: (pl.String if m in ("collective", "comm_dtype", "pg_name", "pg_desc")
                                           else pl.Int64) for m in _META_COLS}}


def comm_meta(trace: Trace, c: pl.DataFrame) -> pl.DataFrame:
    """Per launch of a communication kernel (``launch_idx``): the args of the innermost CPU op that carries
    communication args (``record_param_comms``: Collective name, msg nelems, dtype, group, Seq) and encloses
    the launch on its thread. By time on the launching thread, not by the launch's External id, so the answer
    is the same whether or not the trace was loaded with a projection that skips other ops."""
    ev = trace.events
    have = [m for m in _META_COLS if m in ev.columns]
    schema = _meta_schema()
    if not have or c.height == 0:
        return pl.DataFrame(schema=schema)
    es = ev.schema
    as_text = [pl.col(m).cast(pl.String) if es[m] == pl.Categorical or isinstance(es[m], pl.Enum) else pl.col(m)
               for m in have]
    ops = ev.filter((pl.col("kind") == "cpu_op") & pl.any_horizontal(pl.col(m).is_not_null() for m in have)).select(
        pl.col("pid").cast(pl.String).alias("_op_pid"), pl.col("tid").cast(pl.String).alias("_op_tid"),
        pl.col("ts").alias("_os"), pl.col("end").alias("_oe"), *as_text)
    launches = c.select("launch_idx").drop_nulls().unique().join(
        ev.select(pl.col("idx").alias("launch_idx"), pl.col("pid").cast(pl.String).alias("_lp"),
                  pl.col("tid").cast(pl.String).alias("_lt"), pl.col("ts").alias("_ls")), on="launch_idx")
    if ops.height == 0 or launches.height == 0:
        return pl.DataFrame(schema=schema)
    pairs = launches.join_where(ops, pl.col("_os") <= pl.col("_ls"), pl.col("_oe") >= pl.col("_ls")).filter(
        (pl.col("_lp") == pl.col("_op_pid")) & (pl.col("_lt") == pl.col("_op_tid")))
    best = pairs.sort(["_os", "_oe"], descending=[True, False]).unique("launch_idx", keep="first")
    out = best.select("launch_idx", *have)
    for m in _META_COLS:
        if m not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=schema[m]).alias(m))
    return out.select(list(schema))


def p2p_batches(trace: Trace, c: pl.DataFrame, meta: pl.DataFrame) -> pl.DataFrame:
    """Per launch of a communication kernel that no op with communication args encloses (``launch_idx``): the
    point-to-point ops (``record_param_comms`` send and recv) issued on its launching thread since the previous
    communication launch there. c10d launches a batch of them (``batch_isend_irecv``, a pipeline schedule's
    transfers) as one ``SendRecv`` kernel when the batch ends, outside the ops. Columns: ``collective`` (send,
    recv or sendrecv), ``msg_bytes`` (the larger of the bytes sent and received), ``comm_rank`` (the peer, when
    every op of the batch has the same one), ``pg_name``, ``pg_desc`` and ``comm_dtype`` (the first op's)."""
    ev = trace.events
    out_schema = {"launch_idx": pl.Int64, "collective": pl.String, "msg_bytes": pl.Int64, "comm_rank": pl.Int64,
                  "pg_name": pl.String, "pg_desc": pl.String, "comm_dtype": pl.String}
    need = ("collective", "comm_rank", "in_msg_nelems", "comm_dtype")
    if c.height == 0 or any(m not in ev.columns for m in need):
        return pl.DataFrame(schema=out_schema)
    text = [pl.col(m).cast(pl.String) if m in ev.columns else pl.lit(None, pl.String).alias(m)
            for m in ("collective", "comm_dtype", "pg_name", "pg_desc")]
    ops = (ev.filter((pl.col("kind") == "cpu_op") & pl.col("collective").cast(pl.String).is_in(["send", "recv"]))
           .select(pl.col("pid").cast(pl.String).alias("_p"), pl.col("tid").cast(pl.String).alias("_t"),
                   pl.col("ts").alias("_at"), pl.col("comm_rank").cast(pl.Int64), pl.col("in_msg_nelems").cast(pl.Int64),
                   *text))
    if ops.height == 0:
        return pl.DataFrame(schema=out_schema)
    launches = (c.select("launch_idx").drop_nulls().unique()
                .join(ev.select(pl.col("idx").alias("launch_idx"), pl.col("pid").cast(pl.String).alias("_p"),
                                pl.col("tid").cast(pl.String).alias("_t"), pl.col("ts").alias("_at")), on="launch_idx")
                .sort("_at"))
    # each op to the first communication launch at or after it on its thread: the launch of its batch
    ops = (ops.sort("_at").join_asof(launches, on="_at", by=["_p", "_t"], strategy="forward", check_sortedness=False)
           .filter(pl.col("launch_idx").is_not_null()))
    unmet = c.filter(pl.col("launch_idx").is_not_null()).select("launch_idx").unique().join(
        meta.filter(pl.col("collective").is_not_null()).select("launch_idx"), on="launch_idx", how="anti")
    ops = ops.join(unmet, on="launch_idx", how="semi")
    bpe = pl.col("comm_dtype").str.to_lowercase().replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    ops = ops.with_columns((pl.col("in_msg_nelems") * bpe).alias("_b"))
    is_send = pl.col("collective") == "send"
    out = ops.group_by("launch_idx").agg(
        pl.when(is_send.any() & (~is_send).any()).then(pl.lit("sendrecv"))
        .otherwise(pl.col("collective").first()).alias("collective"),
        pl.max_horizontal(pl.col("_b").filter(is_send).sum(), pl.col("_b").filter(~is_send).sum()).alias("msg_bytes"),
        (pl.col("_b").null_count() > 0).alias("_unknown"),
        pl.when(pl.col("comm_rank").n_unique() == 1).then(pl.col("comm_rank").first()).alias("comm_rank"),
        pl.col("pg_name").first(), pl.col("pg_desc").first(), pl.col("comm_dtype").first())
    return out.with_columns(pl.when(pl.col("_unknown")).then(None).otherwise(pl.col("msg_bytes")).alias("msg_bytes")
                            ).select(list(out_schema)).cast(out_schema)  # type: ignore[arg-type]


def collective_kernels(trace: Trace, g: pl.DataFrame) -> pl.DataFrame:
    """One row per communication kernel: type, process group, message size, order keys, NCCL algorithm.

    Metadata comes from the op that launched it with communication args (see :func:`comm_meta`), or from the
    point-to-point ops of its batch (:func:`p2p_batches`), when present, else from the kernel name. Point-to-point
    kernels are all of type ``sendrecv`` with their ``peer`` rank and ``msg_bytes``; an XLA collective's
    ``msg_bytes`` come from its HLO instruction (:data:`XLA_SAME_SIZE`). ``ordinal``: position among
    the rank's kernels of the same (step, group, type, peer), by launch (matching key across ranks when ``seq`` is
    absent).
    """
    c = g.filter(pl.col("is_comm"))
    meta = comm_meta(trace, c)
    batches = p2p_batches(trace, c, meta)
    if batches.height:  # a batch of point-to-point ops launched as one kernel: what the batch's ops say
        meta = pl.concat([meta.join(batches, on="launch_idx", how="anti"),
                          batches.drop("msg_bytes")], how="diagonal_relaxed")
    c = c.join(meta, on="launch_idx", how="left").join(batches.select("launch_idx", "msg_bytes"), on="launch_idx",
                                                      how="left")
    names = c.select("name", "collective").unique()
    kinds = [collective_type(m, n) for n, m in names.iter_rows()]
    algo = [(_ALGO.search(n).group(1).upper() if _ALGO.search(n) else None) for n, _ in names.iter_rows()]  # type: ignore[union-attr]
    proto = [(_ALGO.search(n).group(2).upper() if _ALGO.search(n) else None) for n, _ in names.iter_rows()]  # type: ignore[union-attr]
    names = names.with_columns(pl.Series("type", kinds, dtype=pl.String), pl.Series("algo", algo, dtype=pl.String),
                               pl.Series("protocol", proto, dtype=pl.String))
    c = c.join(names, on=["name", "collective"], how="left", nulls_equal=True)
    bpe = pl.col("comm_dtype").cast(pl.String).str.to_lowercase().replace_strict(DTYPE_BYTES, default=None,
                                                                                return_dtype=pl.Int64)
    group = pl.coalesce(pl.col("pg_name").cast(pl.String), pl.col("pg_desc").cast(pl.String), pl.lit("default"))
    order = pl.coalesce("launch_ts", "ts")
    p2p = pl.col("type").is_in(P2P_TYPES)
    # a point-to-point kernel: one type whichever side it is on (a send matches its peer's recv), its peer
    # (c10d's "Rank" of a send or recv), two ranks to a transfer, no collective sequence number (c10d counts
    # point-to-point ops apart from collectives), and its bytes: the larger of what it sent and received
    c = c.with_columns(
        group.alias("pg"), bpe.alias("elem_bytes"), order.alias("_order"),
        pl.when(p2p).then(pl.lit("sendrecv")).otherwise(pl.col("type")).alias("type"),
        pl.when(p2p & pl.col("comm_rank").is_between(0, MAX_RANK - 1)).then(pl.col("comm_rank").cast(pl.Int64)).alias("peer"),
        pl.when(p2p & pl.col("comm_rank").is_between(0, MAX_RANK - 1)).then(pl.lit(2, pl.Int64))
        .otherwise(pl.col("group_size").cast(pl.Int64)).alias("group_size"),
        pl.when(p2p).then(None).otherwise(pl.col("comm_seq").cast(pl.Int64)).alias("seq"),
        pl.when(p2p).then(pl.coalesce(pl.col("msg_bytes").cast(pl.Float64),
                                      (pl.col("in_msg_nelems").cast(pl.Int64) * bpe).cast(pl.Float64), "xla_msg_bytes"))
        .otherwise(pl.col("xla_msg_bytes")).alias("msg_bytes")).sort("_order")
    c = c.with_columns(pl.int_range(pl.len()).over(["step", "pg", "type", "peer"]).alias("ordinal"))
    return c.select("name", "type", "pg", pl.col("pg_desc").cast(pl.String), "step", "ordinal", "seq", "peer", "stream",
                    "ts", "end", "dur", "launch_ts", pl.col("in_msg_nelems").cast(pl.Int64),
                    pl.col("out_msg_nelems").cast(pl.Int64), "elem_bytes", "msg_bytes", "group_size", "algo", "protocol")


def _launch_stats(g: pl.DataFrame) -> dict[str, float]:
    k = g.filter((pl.col("kind") == "kernel") & pl.col("launch_ts").is_not_null())
    if k.height == 0:
        return {"launches": 0}
    d = ((k["ts"] - k["launch_ts"]) / NS_PER_US)
    q = d.quantile
    return {"launches": float(k.height), "delay_mean_us": as_float(d.mean()), "delay_p50_us": float(q(0.5) or 0.0),
            "delay_p90_us": float(q(0.9) or 0.0), "delay_p99_us": float(q(0.99) or 0.0), "delay_max_us": as_float(d.max())}


def _queues(g: pl.DataFrame) -> pl.DataFrame:
    """GPU queue length per stream: kernels launched and not yet finished, over time (HTA's queue length)."""
    k = g.filter((pl.col("kind") == "kernel") & pl.col("launch_ts").is_not_null())
    schema = {"stream": pl.Int64, "launches": pl.Int64, "max_queue": pl.Int64, "mean_queue": pl.Float64,
              "pct_time_empty": pl.Float64}
    if k.height == 0:
        return pl.DataFrame(schema=schema)
    rows = []
    for (stream,), part in k.group_by(["stream"], maintain_order=True):
        t = np.concatenate([part["launch_ts"].to_numpy(), part["end"].to_numpy()]).astype(np.int64)
        step = np.concatenate([np.ones(part.height, dtype=np.int64), -np.ones(part.height, dtype=np.int64)])
        o = np.lexsort((-step, t))  # at equal times a launch counts before a completion
        t, q = t[o], np.cumsum(step[o])
        dt = np.diff(t)
        span = float(t[-1] - t[0]) if len(t) > 1 else 0.0
        mean = float((q[:-1] * dt).sum() / span) if span else 0.0
        empty = float(dt[q[:-1] == 0].sum() / span * 100.0) if span else 0.0
        rows.append({"stream": int(stream) if stream is not None else -1, "launches": part.height,
                     "max_queue": int(q.max()), "mean_queue": mean, "pct_time_empty": empty})
    return pl.DataFrame(rows, schema=schema).sort("stream")


def summarize_rank(trace: Trace, path: str, load_s: float = 0.0) -> RankResult:
    """The small tables of one rank (see :class:`RankResult`)."""
    found = cliques(trace)
    rank, source = rank_of(trace, path, found)
    clique = xla_rank(trace, found) if source == XLA_CLIQUE else None
    world = trace.world_size if clique is None else clique[1]
    g = _gpu(trace, {n for n, _, _ in found})
    facts = trace_facts(trace)
    info = trace.distributed_info
    overall = (_metrics(g.with_columns(pl.lit(0).alias("_all")), ["_all"]).drop("_all").to_dicts() or [{}])[0]
    in_steps = g.filter(pl.col("step").is_not_null())
    per_step = _metrics(in_steps, ["step"], g) if in_steps.height else pl.DataFrame(schema={"step": pl.Int64})
    steps = (trace.steps.select("step", "name", ((pl.col("end") - pl.col("start")) / NS_PER_US).alias("wall_us"))
             .join(per_step, on="step", how="left").sort("step"))
    t0 = g["ts"].min()
    t1 = g["end"].max()
    # (an XSpace's steps with their untraced waits: else its path is host time, and no wait on a late rank is on it)
    xspace = trace.metadata.get("trace_format") == "xplane"
    cp = (critical_path(trace, mark_communication(gpu_table(trace), otherwise="Compute"), untraced_waits=xspace)
          if trace.steps.height else None)
    coll = collective_kernels(trace, g)
    if cp is not None and cp.records.height:  # each collective's time on the rank's critical path
        # (the path's records named as text only where a collective kernel could be one: their names stay interned)
        on_path = (cp.records.filter(pl.col("name").is_in(coll["name"].cast(pl.String).unique().implode()))
                   .select(pl.col("name").cast(coll.schema["name"]), "ts", "end", "on_path_us", pl.col("step").alias("path_step")))
        coll = coll.join(on_path.unique(["name", "ts", "end"]), on=["name", "ts", "end"], how="left")
    else:
        coll = coll.with_columns(pl.lit(None, pl.Float64).alias("on_path_us"), pl.lit(None, pl.Int64).alias("path_step"))
    coll = coll.with_columns(pl.col("on_path_us").fill_null(0.0))
    return RankResult(
        path=path, rank=rank, rank_source=source, world_size=world, device_names=facts.device_names,
        pg_config=[p for p in info.get("pg_config", []) if isinstance(p, dict)] if isinstance(info.get("pg_config"), list) else [],
        gpu_start_ns=int(t0) if isinstance(t0, int) else None, gpu_end_ns=int(t1) if isinstance(t1, int) else None,
        overall={k: (float(v) if v is not None else None) for k, v in overall.items()},  # type: ignore[misc]
        steps=steps, collectives=coll, launch=_launch_stats(g), queues=_streams(g), load_s=load_s,
        critical_path=cp.steps if cp is not None else pl.DataFrame(),
        notes=[n for n in (empty_reason(trace),) if n is not None],
        clock_start_ns=trace.base_time_ns if xspace else None,
    )


#: per-stream idle columns (HTA's idle time breakdown, with kernscope's definitions of the three kinds)
STREAM_IDLE = ("span_us", "busy_us", "idle_us", "host_wait_us", "kernel_wait_us", "other_idle_us")


def _streams(g: pl.DataFrame) -> pl.DataFrame:
    """Per stream: the queue statistics of :func:`_queues` and the stream's own idle time (between its first
    start and last end, the gaps between its records) split into host wait, kernel wait and other, as HTA's
    idle time breakdown does per stream."""
    q = _queues(g)
    if g.height == 0:
        return q.with_columns(*(pl.lit(None, dtype=pl.Float64).alias(c) for c in STREAM_IDLE))
    per = _metrics(g.with_columns(pl.col("stream").fill_null(-1).cast(pl.Int64)), ["stream"]).select("stream", *STREAM_IDLE)
    return (q.join(per, on="stream", how="full", coalesce=True)
            .with_columns(pl.col("launches").fill_null(0)).sort("stream"))
