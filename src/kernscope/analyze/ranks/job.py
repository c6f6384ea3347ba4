"""The job across ranks: per-rank tables side by side, collectives matched across ranks, stragglers per step.

Input: the :class:`~kernscope.analyze.ranks.summary.RankResult` of every rank (client side; small tables).
Output: a :class:`JobAnalysis` of DataFrames (µs).

Collective matching: a communication kernel of one rank is the same collective instance as another rank's when
they share the process group and ``Seq`` (record_param_comms), or else the process group, the collective type,
the step and the position among that rank's kernels of that kind in that step (all ranks issue collectives of a
group in the same order). A point-to-point kernel (send, recv, a batch of them: type ``sendrecv``) whose peer is
known is an instance of its two ranks: its group is named with the pair (``0 (ranks 1-2)``) and it matches the
peer's kernel at the same position among that pair's transfers in the step. Kernels that ran before the profiled
window (no launch in the trace) are not matched. Per instance: the arrival skew (last start − first start), each
rank's wait (the last arrival − its own start), the last arriver, bytes and the bandwidth of the transfer as
NCCL-tests define it (``algbw`` = bytes / the last arriver's kernel time, which did not wait; ``busbw`` = algbw
x 2(n−1)/n for all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, 1 otherwise).

Straggler of a step: the rank the others waited for most: per instance the others' waits are attributed to
its last arriver; ``wait_us`` is the wait it caused per other rank (summed over the step's collectives).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import polars as pl

from ...errors import KernscopeError
from ...scalars import as_int
from ..findings import SCHEMA as FINDINGS_SCHEMA
from ..findings import by_kind, find_stragglers
from ..kernels import NS_PER_US
from .summary import METRICS, STREAM_IDLE, RankResult


@dataclass(frozen=True)
class Failure:
    """A rank file that could not be analyzed."""

    path: str
    problem: str


#: a job's tables, in the order :meth:`JobAnalysis.tables` gives them (``kernscope sql`` of several traces: ``job.<name>``)
JOB_TABLES = ("ranks", "rank_steps", "stragglers", "findings", "findings_by_kind", "critical_path", "collectives",
              "collective_instances", "collective_waits", "queues")


@dataclass(frozen=True)
class JobAnalysis:
    """Results of :func:`combine`. Times µs.

    Attributes:
        ranks: one row per rank: rank, path, steps, METRICS, launch delay and queue statistics.
        rank_steps: one row per (rank, step): step, name, wall_us and METRICS.
        instances: one row per matched collective instance: pg, type, step, key, ranks, bytes, skew_us,
            max_wait_us, last_rank, transfer_us, algbw_gb_s, busbw_gb_s, algo, protocol.
        waits: one row per (instance, rank): the rank's wait (µs).
        collectives: summary by process group and type.
        stragglers: one row per step: step (name), rank, wait_us, total_wait_us, max_wait_us, collectives, last_in,
            p2p (how many of the step's collectives are point-to-point transfers).
        queues: per rank and stream: queue length statistics and the stream's idle time split into host wait,
            kernel wait and other (HTA's idle time breakdown).
        findings: ranked findings across ranks (:func:`kernscope.analyze.findings.find_stragglers`).
        critical_path: per (rank, step): the rank's critical path and ``last_arriver_wait_us``, the part of it
            spent in collectives waiting for the last rank to arrive.
    """

    ranks: pl.DataFrame
    rank_steps: pl.DataFrame
    instances: pl.DataFrame
    waits: pl.DataFrame
    collectives: pl.DataFrame
    stragglers: pl.DataFrame
    queues: pl.DataFrame
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    world_size: int | None = None
    findings: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=FINDINGS_SCHEMA))
    critical_path: pl.DataFrame = field(default_factory=pl.DataFrame)

    kind: ClassVar[str] = "job"

    @cached_property
    def findings_by_kind(self) -> pl.DataFrame:
        """The findings gathered by kind (:func:`~kernscope.analyze.findings.by_kind`): a straggler rank over steps."""
        return by_kind(self.findings)

    @property
    def title(self) -> str:
        return f"{self.ranks.height} ranks" + (f" of {self.world_size}" if self.world_size else "")

    def facts_dict(self) -> dict[str, Any]:
        """``world_size``, ``ranks`` (how many were analyzed) and ``failures`` (path, problem)."""
        return {"world_size": self.world_size, "ranks": self.ranks.height,
                "failures": [{"path": f.path, "problem": f.problem} for f in self.failures]}

    def tables(self) -> dict[str, pl.DataFrame]:
        """:data:`JOB_TABLES`: ``ranks``, ``rank_steps``, ``stragglers``, ``findings``, ``findings_by_kind``,
        ``critical_path``, ``collectives``, ``collective_instances``, ``collective_waits``, ``queues`` (µs)."""
        return {"ranks": self.ranks, "rank_steps": self.rank_steps, "stragglers": self.stragglers,
                "findings": self.findings, "findings_by_kind": self.findings_by_kind, "critical_path": self.critical_path,
                "collectives": self.collectives,
                "collective_instances": self.instances, "collective_waits": self.waits, "queues": self.queues}

    def sql(self, query: str) -> pl.DataFrame:
        """Run a SQL query (polars' SQL dialect) over :meth:`tables` as ``job.<name>``, e.g. ``job.sql("SELECT rank,
        max_wait_us FROM job.stragglers")`` (µs in ``*_us``), as ``kernscope sql QUERY DIR`` does."""
        from ..sql import job_sql

        return job_sql(self, query)


#: torch.profiler.tensorboard_trace_handler's file name: ``{worker}.{time}.pt.trace.json[.gz]`` (ns in torch 2.11), the worker
#: ``{host}_{pid}`` unless given
_HANDLER_NAME = re.compile(r"(.+)\.(\d{10,})\.pt\.trace\.json(?:\.gz)?")
#: PyTorch Lightning's ``PyTorchProfiler`` writes a trace per profiled action of one process, through
#: tensorboard_trace_handler: ``fit-NAME[-RANK]-[Strategy]SingleDeviceStrategy.training_step.<time>.pt.trace.json``
_LIGHTNING_NAME = re.compile(r"(.*)\[Strategy\]\w+\.(\w+)\.(\d{10,})\.pt\.trace\.json(?:\.gz)?")


def _one_job_hint(a: str, b: str) -> str:
    """For two files of one rank: the actions of PyTorch Lightning's profiler, the cycles of one process's profiler
    (tensorboard_trace_handler's names, one worker), or the glob of one job's files when their names differ before
    ``rank`` (a folder holding two jobs, ``ddp4_rank0`` and ``fsdp4_rank0``), else nothing."""
    actions = [_LIGHTNING_NAME.fullmatch(os.path.basename(p)) for p in (a, b)]
    if actions[0] is not None and actions[1] is not None and actions[0].group(2) != actions[1].group(2):
        return (f" (PyTorch Lightning's profiler writes a trace per profiled action of each rank: give one action's "
                f"files, '{os.path.join(os.path.dirname(a), '*' + actions[0].group(2) + '*')}')")
    cycles = [_HANDLER_NAME.fullmatch(os.path.basename(p)) for p in (a, b)]
    if cycles[0] is not None and cycles[1] is not None and cycles[0].group(1) == cycles[1].group(1):
        return (" (two cycles of one process's profiler: tensorboard_trace_handler writes a file per cycle of "
                "schedule(..., repeat=N); give each rank's file of one cycle)")
    globs = []
    for p in (a, b):
        head = re.match(r"(?i)(.*?rank)", os.path.basename(p))
        if head is None:
            return ""
        globs.append(os.path.join(os.path.dirname(p), head.group(1)) + "*")
    return "" if globs[0] == globs[1] else f" (two jobs in one place? give one job's files: '{globs[0]}' or '{globs[1]}')"


def _one_process_cycles(results: list[RankResult]) -> None:
    """Raise where the traces without a rank are the cycles of one process's profiler (tensorboard_trace_handler
    writes one file per ``schedule(..., repeat=N)`` cycle, named by its worker), or PyTorch Lightning's traces of one
    process's profiled actions (``training_step``, ``validation_step``): not ranks of a job."""
    paths = [r.path for r in results if r.rank is None]
    actions = [_LIGHTNING_NAME.fullmatch(os.path.basename(p)) for p in paths]
    if len(paths) > 1 and None not in actions:
        named = sorted({m.group(2) for m in actions if m is not None})
        first = next((p for p, m in zip(paths, actions) if m is not None and m.group(2) == "training_step"), paths[0])
        raise KernscopeError(f"{len(paths)} traces of one process written by PyTorch Lightning's profiler, one per profiled "
                             f"action ({', '.join(named)}), not the ranks of a job: analyze one (kernscope analyze "
                             f"'{first}'), or compare two: kernscope diff A B")
    names = [_HANDLER_NAME.fullmatch(os.path.basename(r.path)) for r in results if r.rank is None]
    workers = {m.group(1) for m in names if m is not None}
    if len(names) > 1 and None not in names and len(workers) == 1:
        newest = max((r.path for r in results if r.rank is None), key=lambda p: int(_HANDLER_NAME.fullmatch(
            os.path.basename(p)).group(2)))  # type: ignore[union-attr]
        raise KernscopeError(f"{len(names)} traces of one process ({workers.pop()}), the profiler's cycles "
                             f"(tensorboard_trace_handler, schedule(..., repeat=N)), not the ranks of a job: analyze one "
                             f"(the newest: kernscope analyze {newest}), or compare two cycles: kernscope diff A B")


def _check(results: list[RankResult]) -> tuple[list[str], bool]:
    """Job-level checks: one clear message each. Returns (notes, clocks_overlap). Raises on duplicate ranks
    and mixed jobs (different world sizes, or no GPU model in common: separate runs). GPU activity that does not
    overlap in time is a note, worded as separate runs when the ranks also profiled different steps."""
    notes: list[str] = []
    seen: dict[int, str] = {}
    for r in results:
        if r.rank is None and r.rank_source == "out of range":
            raise KernscopeError(f"{r.path}: its rank id is not one (outside 0 to 2^31 - 1, in distributedInfo.rank or the "
                                 "file name)")
        if r.rank is None:
            _one_process_cycles(results)
            hint = (" (a folder of benchmark traces? add --bench)" if re.search(r"input_\d+\.json|pt\.trace\.json", r.path)
                    else "")
            raise KernscopeError(f"{r.path}: no rank (no distributedInfo.rank and no rank number in the file name){hint}")
        if r.rank in seen:
            raise KernscopeError(f"rank {r.rank} appears twice: {seen[r.rank]} and {r.path}{_one_job_hint(seen[r.rank], r.path)}")
        seen[r.rank] = r.path
    bad_sizes = sorted({r.world_size for r in results if r.world_size is not None and not 1 <= r.world_size <= 1 << 31})
    if bad_sizes:
        notes.append(f"world_size {', '.join(map(str, bad_sizes))} in distributedInfo is no job size: ignored (the ranks "
                     "given are the job)")
    sizes = {r.world_size for r in results if r.world_size is not None and 1 <= r.world_size <= 1 << 31}
    if len(sizes) > 1:
        by = ", ".join(f"{r.path} ({r.world_size})" for r in results[:4])
        raise KernscopeError(f"traces of different jobs: world sizes {sorted(sizes)} ({by}, ...)")
    models = {r.path: frozenset(r.device_names) for r in results if r.device_names}
    if len(models) > 1 and not frozenset.intersection(*models.values()):  # no GPU model in common
        by = "; ".join(f"{p.rsplit('/', 1)[-1]}: {', '.join(sorted(m))}" for p, m in list(models.items())[:4])
        raise KernscopeError(f"these look like separate runs, not ranks of one job: their GPUs differ ({by}); "
                             f"compare two runs with `kernscope diff A B`, or analyze each on its own")
    if len(models) > 1 and len(set(models.values())) > 1:  # some GPU model in common, but not the same everywhere
        mixed = sorted({n for m in models.values() for n in m})
        notes.append(f"the ranks ran on different GPU models ({', '.join(mixed)}): compute times differ by hardware, and "
                     "the slowest GPU may look like a straggler")
    spans = [(r.gpu_start_ns, r.gpu_end_ns) for r in results if r.gpu_start_ns is not None and r.gpu_end_ns is not None]
    overlap = True
    if len(spans) > 1 and max(s for s, _ in spans) > min(e for _, e in spans):
        overlap = False
        steps = {r.rank: tuple(sorted(r.steps["step"].to_list())) if r.steps.height else () for r in results}
        if len(set(steps.values())) > 1:  # ranks of one job profile the same steps
            shown = "; ".join(f"rank {k}: {_step_range(v)}" for k, v in list(steps.items())[:4])
            notes.append(f"these look like separate runs, not ranks of one job: their GPU activity does not overlap in "
                         f"time and they profiled different steps ({shown}); per-rank results are shown, collective "
                         f"skew, waits and stragglers are not computed; compare two runs with `kernscope diff A B`, "
                         f"or analyze each on its own")
        else:
            notes.append("the ranks' GPU activity does not overlap in time (clocks of different hosts, or traces of "
                         "different runs): per-rank results are shown; collective skew, waits and stragglers need one "
                         "clock and are not computed")
    return notes, overlap


def _step_range(steps: tuple[int, ...]) -> str:
    if not steps:
        return "no steps"
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"


#: JAX writes one XSpace per host (``<host>.xplane.pb``) and records no rank in it
_XSPACE_NAME = re.compile(r"\.xplane\.pb(\.gz)?$")


def _number_hosts(results: list[RankResult]) -> tuple[list[RankResult], list[str]]:
    """JAX profiles without a rank become ranks in the order of their file names (after any rank the others
    name), said in a note."""
    unnamed = [r for r in results if r.rank is None and _XSPACE_NAME.search(r.path)]
    if not unnamed:
        return results, []
    first = max((r.rank for r in results if r.rank is not None), default=-1) + 1
    numbered = {id(r): dataclasses.replace(r, rank=first + i, rank_source="file order")
                for i, r in enumerate(sorted(unnamed, key=lambda r: r.path))}
    # each file by what tells it from the others (every process of a host writes <host>.xplane.pb)
    base = os.path.commonpath([os.path.dirname(r.path) for r in unnamed]) if len(unnamed) > 1 else None
    names = ", ".join(f"{os.path.relpath(r.path, base) if base else os.path.basename(r.path)} = {numbered[id(r)].rank}"
                      for r in sorted(unnamed, key=lambda r: r.path)[:4])
    note = (f"JAX profiles carry no rank: the {len(unnamed)} host file(s) are numbered in file-name order ({names}"
            f"{', ...' if len(unnamed) > 4 else ''})")
    return [numbered.get(id(r), r) for r in results], [note]


#: message elements and group sizes beyond these are not real (an Int64 product would wrap; 0 ranks divides)
MAX_ELEMS = 1 << 50
MAX_GROUP = 1 << 20


def _sane_comm_args(coll: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """``coll`` with message element counts outside [0, MAX_ELEMS] and group sizes outside [1, MAX_GROUP] set to
    null (unknown), and how many records had one."""
    cols = [c for c in ("in_msg_nelems", "out_msg_nelems") if c in coll.columns]
    if coll.height == 0 or (not cols and "group_size" not in coll.columns):
        return coll, 0
    bad_el = [(pl.col(c) < 0) | (pl.col(c) > MAX_ELEMS) for c in cols]
    bad_gs = ((pl.col("group_size") < 1) | (pl.col("group_size") > MAX_GROUP)) if "group_size" in coll.columns else pl.lit(False)
    bad = pl.any_horizontal(*bad_el, bad_gs).fill_null(False)
    n = int(coll.select(bad.sum()).item())
    if n == 0:
        return coll, 0
    fixes = [pl.when(b.fill_null(False)).then(None).otherwise(pl.col(c)).alias(c) for c, b in zip(cols, bad_el, strict=True)]
    if "group_size" in coll.columns:
        fixes.append(pl.when(bad_gs.fill_null(False)).then(None).otherwise(pl.col("group_size")).alias("group_size"))
    return coll.with_columns(fixes), n


def _one_clock(results: list[RankResult]) -> list[RankResult]:
    """The ranks' times on one clock. An XSpace's times are relative to its own profile's start (the processes of a
    JAX job start profiling microseconds to seconds apart): when every rank says its start (``clock_start_ns``),
    each rank's collectives and GPU span move by its start less the earliest rank's. Kineto ranks share their
    host's clock and stay as they are."""
    starts = [r.clock_start_ns for r in results]
    if not results or any(s is None for s in starts):
        return results
    first = min(s for s in starts if s is not None)
    out = []
    for r, start in zip(results, starts):
        d = (start or 0) - first
        if d == 0:
            out.append(r)
            continue
        coll = r.collectives.with_columns(pl.col("ts", "end", "launch_ts") + d) if r.collectives.height else r.collectives
        out.append(dataclasses.replace(r, collectives=coll,
                                       gpu_start_ns=None if r.gpu_start_ns is None else r.gpu_start_ns + d,
                                       gpu_end_ns=None if r.gpu_end_ns is None else r.gpu_end_ns + d))
    return out


def combine(results: list[RankResult], failures: list[Failure] | None = None) -> JobAnalysis:
    """The job analysis of the ranks' results (any order)."""
    results, host_notes = _number_hosts(_one_clock(results))
    results = sorted(results, key=lambda r: (r.rank if r.rank is not None else -1, r.path))
    if not results:
        raise KernscopeError("no rank could be analyzed")
    notes, clocks_ok = _check(results)
    notes = host_notes + notes + [f"rank {r.rank}: {n}" for r in results for n in r.notes]
    if any(_XSPACE_NAME.search(r.path) for r in results):
        notes.append("JAX ranks' critical paths take the host's untraced gap before a step's last GPU work ended as a "
                     "wait for that work (as analyze --untraced-waits does; XLA records no event for block_until_ready): "
                     "the path then runs through the GPU and the collectives that waited for a late rank")
    ranks = pl.DataFrame([{
        "rank": r.rank, "path": r.path, "steps": r.steps.height,
        **{m: r.overall.get(m) for m in METRICS},
        "launch_delay_p50_us": r.launch.get("delay_p50_us"), "launch_delay_p99_us": r.launch.get("delay_p99_us"),
        "max_queue": as_int(r.queues["max_queue"].max()) if r.queues.height else 0,
    } for r in results], schema={"rank": pl.Int64, "path": pl.String, "steps": pl.Int64, **{m: pl.Float64 for m in METRICS},
                                 "launch_delay_p50_us": pl.Float64, "launch_delay_p99_us": pl.Float64, "max_queue": pl.Int64})
    rank_steps = pl.concat([r.steps.with_columns(pl.lit(r.rank, dtype=pl.Int64).alias("rank")) for r in results
                            if r.steps.height], how="diagonal_relaxed") if any(r.steps.height for r in results) else \
        pl.DataFrame(schema={"rank": pl.Int64, "step": pl.Int64, "name": pl.String, "wall_us": pl.Float64})
    if rank_steps.height:
        rank_steps = rank_steps.select("rank", "step", "name", "wall_us", *[m for m in METRICS if m in rank_steps.columns])
    queues = pl.concat([r.queues.with_columns(pl.lit(r.rank, dtype=pl.Int64).alias("rank")) for r in results],
                       how="diagonal_relaxed").select("rank", "stream", "launches", "max_queue", "mean_queue", "pct_time_empty",
                                                     *STREAM_IDLE)
    coll = pl.concat([r.collectives.with_columns(pl.lit(r.rank, dtype=pl.Int64).alias("rank")) for r in results],
                     how="diagonal_relaxed")
    coll, impossible = _sane_comm_args(coll)
    if impossible:
        notes.append(f"{impossible:,} communication records carry impossible sizes (message elements negative or beyond "
                     f"2^{MAX_ELEMS.bit_length() - 1}, group size outside 1-{MAX_GROUP:,}): their bytes or group size "
                     "are left unknown, not computed from them")
    instances, waits = (_match(coll, len(results)) if clocks_ok else (_empty_instances(), _empty_waits()))
    names = rank_steps.select("step", "name").unique("step") if rank_steps.height else pl.DataFrame(
        schema={"step": pl.Int64, "name": pl.String})
    stragglers = _stragglers(instances, waits, names)
    partial = instances.filter(pl.col("ranks") < pl.col("expected_ranks")).height if instances.height else 0
    if partial:
        notes.append(f"{partial} collective instance(s) were found on fewer ranks than their group has (a rank's trace "
                     "is missing or its window is shorter)")
    world = next((r.world_size for r in results if r.world_size is not None and 1 <= r.world_size <= 1 << 31), None)
    if world is not None and len(results) < world:
        notes.append(f"{len(results)} of {world} ranks analyzed")
    return JobAnalysis(ranks, rank_steps.sort("rank", "step") if rank_steps.height else rank_steps, instances, waits,
                       _collective_summary(instances), stragglers, queues, list(failures or []), notes, world,
                       find_stragglers(stragglers), _critical_paths(results, waits))


def _empty_instances() -> pl.DataFrame:
    return pl.DataFrame(schema={"pg": pl.String, "type": pl.String, "step": pl.Int64, "key": pl.Int64, "ranks": pl.UInt32,
                                "expected_ranks": pl.Int64, "bytes": pl.Float64, "skew_us": pl.Float64,
                                "max_wait_us": pl.Float64, "last_rank": pl.Int64, "transfer_us": pl.Float64,
                                "algbw_gb_s": pl.Float64, "busbw_gb_s": pl.Float64, "algo": pl.String,
                                "protocol": pl.String, "size_mismatch": pl.Boolean, "start_ns": pl.Int64})


def _empty_waits() -> pl.DataFrame:
    return pl.DataFrame(schema={"pg": pl.String, "type": pl.String, "step": pl.Int64, "key": pl.Int64, "rank": pl.Int64,
                                "wait_us": pl.Float64, "last_rank": pl.Int64, "on_path_us": pl.Float64,
                                "path_step": pl.Int64})


def _critical_paths(results: list[RankResult], waits: pl.DataFrame) -> pl.DataFrame:
    """Per (rank, step): the rank's critical path (its segments, µs) and ``last_arriver_wait_us``: the time its
    path spent in collectives waiting for the last rank to arrive (each collective on the path counts the
    smaller of its wait and its time on the path)."""
    parts = [r.critical_path.with_columns(pl.lit(r.rank, dtype=pl.Int64).alias("rank")) for r in results
             if r.critical_path.height]
    if not parts:
        return pl.DataFrame(schema={"rank": pl.Int64, "step": pl.Int64})
    cp = pl.concat(parts, how="diagonal_relaxed")
    waited = (waits.filter(pl.col("path_step").is_not_null())  # by the step whose path the collective lies on
              .group_by("rank", pl.col("path_step").alias("step"))
              .agg(pl.min_horizontal("wait_us", "on_path_us").sum().alias("last_arriver_wait_us")))
    return (cp.join(waited, on=["rank", "step"], how="left")
            .with_columns(pl.col("last_arriver_wait_us").fill_null(0.0))
            .select("rank", "step", *[c for c in cp.columns if c not in ("rank", "step")], "last_arriver_wait_us")
            .sort("rank", "step"))


def _match(coll: pl.DataFrame, n_ranks: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    if coll.height == 0:
        return _empty_instances(), _empty_waits()
    c = coll.filter(pl.col("launch_ts").is_not_null())
    if "peer" in c.columns:  # a point-to-point transfer is an instance of its two ranks: the pair names its group
        lo, hi = pl.min_horizontal("rank", "peer"), pl.max_horizontal("rank", "peer")
        c = c.with_columns(pl.when(pl.col("peer").is_not_null() & pl.col("rank").is_not_null())
                           .then(pl.format("{} (ranks {}-{})", pl.col("pg"), lo, hi)).otherwise(pl.col("pg")).alias("pg"))
    # point-to-point transfers carry no collective Seq: they are matched by position, the collectives apart by their
    # own rule (by Seq where every one has it)
    p2p = c.filter(pl.col("type") == "sendrecv")
    if p2p.height and p2p.height < c.height:
        parts = [_match_part(p, n_ranks) for p in (c.filter(pl.col("type") != "sendrecv"), p2p)]
        inst = pl.concat([i for i, _ in parts], how="diagonal_relaxed").sort("start_ns")
        return inst, pl.concat([w for _, w in parts], how="diagonal_relaxed")
    return _match_part(c, n_ranks)


def _match_part(c: pl.DataFrame, n_ranks: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The instances and waits of the collective kernels ``c`` (all matched by one rule: Seq or position)."""
    use_seq = c["seq"].null_count() == 0 and c.height > 0
    c = c.with_columns((pl.col("seq") if use_seq else pl.col("ordinal")).alias("key"))
    if not use_seq:
        has_steps = c["step"].null_count() < c.height
        if has_steps:
            c = c.filter(pl.col("step").is_not_null())
    keys = ["pg", "type", "step", "key"] if not use_seq else ["pg", "type", "key"]
    if use_seq:
        c = c.with_columns(pl.col("step").min().over(keys).alias("step"))
    elems = pl.coalesce(pl.when(pl.col("type").is_in(["allgather"])).then(pl.col("out_msg_nelems")),
                        pl.col("in_msg_nelems"), pl.col("out_msg_nelems"))
    size = elems.cast(pl.Float64) * pl.col("elem_bytes").cast(pl.Float64)  # no Int64 wrap
    if "msg_bytes" in c.columns:  # a point-to-point batch's, an XLA collective's (summary.collective_kernels)
        size = (pl.when(pl.col("type") == "sendrecv").then(pl.col("msg_bytes"))
                .otherwise(pl.coalesce(size, pl.col("msg_bytes"))).cast(pl.Float64))
    c = c.with_columns(size.alias("_bytes"))
    last = pl.col("ts").max().over(keys)
    c = c.with_columns(last.alias("_last"), pl.len().over(keys).alias("_n"))
    on_path = pl.col("on_path_us").fill_null(0.0) if "on_path_us" in c.columns else pl.lit(0.0)
    path_step = pl.col("path_step") if "path_step" in c.columns else pl.lit(None, pl.Int64)
    waits = c.select(*keys, "rank", ((pl.col("_last") - pl.col("ts")) / NS_PER_US).alias("wait_us"), on_path.alias("on_path_us"),
                     path_step.alias("path_step"))
    arriver = (c.sort("ts").group_by(keys, maintain_order=True)
               .agg(pl.col("rank").last().alias("last_rank"), pl.col("dur").last().alias("_tdur")))
    inst = c.group_by(keys).agg(
        pl.len().alias("ranks"), pl.col("group_size").max().alias("_gs"), pl.col("_bytes").max().alias("bytes"),
        (pl.col("_bytes").n_unique() > 1).alias("size_mismatch"),
        ((pl.col("ts").max() - pl.col("ts").min()) / NS_PER_US).alias("skew_us"),
        pl.col("ts").min().alias("start_ns"), pl.col("algo").drop_nulls().first().alias("algo"),
        pl.col("protocol").drop_nulls().first().alias("protocol"),
        *([pl.col("step").min()] if use_seq else []),  # (matched by Seq: the step its first rank ran it in)
    ).join(arriver, on=keys, how="left", nulls_equal=True)
    max_wait = waits.group_by(keys).agg(pl.col("wait_us").max().alias("max_wait_us"))
    inst = inst.join(max_wait, on=keys, how="left", nulls_equal=True)
    inst = inst.with_columns(pl.coalesce(pl.col("_gs"), pl.lit(n_ranks)).cast(pl.Int64).alias("expected_ranks"),
                             (pl.col("_tdur") / NS_PER_US).alias("transfer_us"))
    n = pl.col("expected_ranks").cast(pl.Float64)
    factor = (pl.when(n <= 1).then(1.0)
              .when(pl.col("type") == "allreduce").then(2.0 * (n - 1) / n)
              .when(pl.col("type").is_in(["allgather", "reduce_scatter", "alltoall"])).then((n - 1) / n)
              .otherwise(1.0))
    inst = inst.with_columns(
        pl.when(pl.col("transfer_us") > 0).then(pl.col("bytes") / (pl.col("transfer_us") * 1e-6) / 1e9).alias("algbw_gb_s"))
    inst = inst.with_columns((pl.col("algbw_gb_s") * factor).alias("busbw_gb_s"))
    cols = ["pg", "type", "step", "key", "ranks", "expected_ranks", "bytes", "skew_us", "max_wait_us", "last_rank",
            "transfer_us", "algbw_gb_s", "busbw_gb_s", "algo", "protocol", "size_mismatch", "start_ns"]
    inst = inst.select(cols).sort("start_ns")
    waits = waits.join(inst.select(*keys, "last_rank"), on=keys, how="left", nulls_equal=True)
    if use_seq:
        waits = waits.join(inst.select("pg", "type", "key", "step"), on=["pg", "type", "key"], how="left")
    return inst, waits.select("pg", "type", "step", "key", "rank", "wait_us", "last_rank", "on_path_us", "path_step")


def _stragglers(inst: pl.DataFrame, waits: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
    schema = {"step": pl.String, "step_number": pl.Int64, "rank": pl.Int64, "wait_us": pl.Float64,
              "total_wait_us": pl.Float64, "max_wait_us": pl.Float64, "collectives": pl.Int64, "last_in": pl.Int64,
              "p2p": pl.Int64}
    w = waits.filter(pl.col("step").is_not_null() & (pl.col("rank") != pl.col("last_rank")))
    if w.height == 0:
        return pl.DataFrame(schema=schema)
    caused = w.group_by("step", "last_rank").agg(pl.col("wait_us").sum().alias("total_wait_us"),
                                                 pl.col("rank").n_unique().alias("_others"))
    per_other = (w.group_by("step", "last_rank", "rank").agg(pl.col("wait_us").sum())
                 .group_by("step", "last_rank").agg(pl.col("wait_us").max().alias("max_wait_us"),
                                                    pl.col("wait_us").mean().alias("_mean")))
    n_inst = inst.group_by("step").agg(pl.len().alias("collectives"),
                                       (pl.col("type") == "sendrecv").sum().cast(pl.Int64).alias("p2p"))
    last_in = inst.group_by("step", "last_rank").agg(pl.len().alias("last_in"))
    per_rank_count = inst.select(pl.col("expected_ranks").max()).item() or 2
    t = (caused.join(per_other, on=["step", "last_rank"]).join(last_in, on=["step", "last_rank"], how="left")
         .with_columns((pl.col("total_wait_us") / max(int(per_rank_count) - 1, 1)).alias("wait_us")))
    best = t.sort(["step", "total_wait_us"], descending=[False, True]).unique("step", keep="first")
    return (best.join(n_inst, on="step", how="left").join(names, on="step", how="left")
            .select(pl.coalesce(pl.col("name"), pl.col("step").cast(pl.String)).alias("step"),
                    pl.col("step").alias("step_number"), pl.col("last_rank").alias("rank"), "wait_us", "total_wait_us",
                    "max_wait_us", "collectives", pl.col("last_in").cast(pl.Int64), "p2p")
            .sort("step_number"))


def _collective_summary(inst: pl.DataFrame) -> pl.DataFrame:
    if inst.height == 0:
        return pl.DataFrame(schema={"pg": pl.String, "type": pl.String, "instances": pl.UInt32, "bytes": pl.Float64,
                                    "skew_mean_us": pl.Float64, "skew_max_us": pl.Float64, "wait_mean_us": pl.Float64,
                                    "transfer_us": pl.Float64, "busbw_gb_s": pl.Float64, "algo": pl.String,
                                    "most_often_last": pl.Int64})
    return (inst.group_by("pg", "type").agg(
        pl.len().alias("instances"), pl.when(pl.col("bytes").count() > 0).then(pl.col("bytes").sum()).alias("bytes"),
        pl.col("skew_us").mean().alias("skew_mean_us"),
        pl.col("skew_us").max().alias("skew_max_us"), pl.col("max_wait_us").mean().alias("wait_mean_us"),
        pl.col("transfer_us").sum().alias("transfer_us"), pl.col("busbw_gb_s").median().alias("busbw_gb_s"),
        pl.col("algo").drop_nulls().mode().first().alias("algo"), pl.col("last_rank").mode().first().alias("most_often_last"))
        .sort("transfer_us", descending=True))
