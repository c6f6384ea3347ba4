"""Findings: what limits a step and what to fix first, each with its evidence and the time it could win back.

Rules are data: thresholds and wording live in ``findings.toml`` (a user file overrides any key); this module
only measures. Every finding names where (step, device, op, kernel, rank) and how much (``win_back_us``: the
time the step could save if the cause were removed; upper bounds say so in their text). Findings are ranked
by that time. Each rule is vectorized over GPU rows (one polars pipeline, or one numpy pass per step and
device); only the findings themselves (a few rows) are built in Python.

Rules (``findings.toml``): ``launch_bound`` (GPU idle because launches came late), ``step_start_idle`` (GPU idle
from the step's start to its first work: CPU or data loading first), ``step_start_wait`` (with several GPUs: the
first work launched, then waiting on another GPU's work; step_start_idle then ends at the launch), ``step_start_queued``
(the first work launched, then waiting with nothing in the trace running: work from before the trace, or clocks apart),
``blocking_sync`` (synchronizing runtime calls), ``exposed_comm`` (communication not overlapped by compute),
``tiny_gemm`` (many GEMM kernels of a few µs), ``step_variance`` (a step far slower than the median), ``recompile`` (torch.compile / XLA
compiling inside a step), ``low_occupancy`` (kernels that leave most of the GPU idle), and where the perf model
runs (``perf``, ``report``) ``far_from_roofline``; across ranks, ``straggler``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import polars as pl

from ..errors import KernscopeError
from ..intervals import (
    first_positions,
    group_by_keys,
    key_ranges,
    partition,
    ranks,
    row_keys,
    running_max,
    stable_order,
    text_ranks,
)
from ..intervals import (
    merged as interval_union,
)
from ..link.captures import INSTANTIATE, capture_windows
from ..link.kinds import OP_KINDS, named
from ..model import Trace
from .attribute import innermost_op_pairs
from .idle import idle_breakdown
from .kernels import NS_PER_US
from .perf.devices import match_device

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

RULES_FILE = Path(__file__).with_name("findings.toml")
#: columns of a findings table (µs; ``evidence`` is a JSON object of the numbers behind ``text``)
SCHEMA = {"rule": pl.String, "title": pl.String, "step": pl.Int64, "device": pl.Int64, "rank": pl.Int64, "op": pl.String,
          "kernel": pl.String, "win_back_us": pl.Float64, "text": pl.String, "evidence": pl.String}

#: what makes two findings one kind: the rule and where (a step is not: the kinds gather a rule's steps)
KIND_KEYS = ("rule", "device", "rank", "op", "kernel")
#: the columns of :func:`by_kind`
KIND_SCHEMA = {"rule": pl.String, "device": pl.Int64, "rank": pl.Int64, "op": pl.String, "kernel": pl.String,
               "occurrences": pl.UInt32, "worst_us": pl.Float64, "total_us": pl.Float64, "median_us": pl.Float64,
               "step": pl.Int64, "title": pl.String, "text": pl.String}


def by_kind(findings: pl.DataFrame) -> pl.DataFrame:
    """Ranked findings (:data:`SCHEMA`, sorted by ``win_back_us``) gathered by kind (:data:`KIND_KEYS`: the same rule
    in the same place, over steps): ``occurrences``, ``worst_us`` (the worst one's win back), ``total_us`` and ``median_us``
    (over the occurrences), and the worst one's ``step``, ``title`` and ``text``; kinds in the order of their worst
    instance. A 3,300-step JAX profile has 3,545 findings in 3 kinds: the terminal lists kinds, not 5 steps of one."""
    if findings.height == 0:
        return pl.DataFrame(schema=KIND_SCHEMA)
    return (findings.group_by(KIND_KEYS, maintain_order=True)  # (in order: each kind's first row is its worst)
            .agg(pl.len().alias("occurrences"), pl.col("win_back_us").first().alias("worst_us"),
                 pl.col("win_back_us").sum().alias("total_us"), pl.col("win_back_us").median().alias("median_us"),
                 pl.col("step").first(), pl.col("title").first(), pl.col("text").first())
            .cast(KIND_SCHEMA))  # type: ignore[arg-type]


@dataclass(frozen=True)
class FindingRules:
    """Thresholds and wording per rule (``findings.toml``)."""

    rules: dict[str, dict[str, Any]]
    #: the user's file the rules were read from (None: the built-in ones); errors in its texts name it
    source: str | None = None

    @classmethod
    def builtin(cls) -> FindingRules:
        with open(RULES_FILE, "rb") as f:
            doc = tomllib.load(f)
        return cls({k: v for k, v in doc.items() if isinstance(v, dict)})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FindingRules:
        """The built-in rules with the keys of the TOML file at ``path`` replacing theirs (one clear error for
        unreadable files, unknown rules or keys, and values of the wrong type)."""
        base = cls.builtin()
        try:  # (UTF-8 whatever the locale, a byte order mark read as nothing: Windows editors write one)
            doc = tomllib.loads(Path(path).read_text(encoding="utf-8-sig"))
        except OSError as e:
            raise KernscopeError(f"{path}: cannot read the findings rules ({e.strerror or e})") from None
        except UnicodeDecodeError as e:
            raise KernscopeError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
        except tomllib.TOMLDecodeError as e:
            raise KernscopeError(f"{path}: not valid TOML ({e})") from None
        rules = {k: dict(v) for k, v in base.rules.items()}
        for name, over in doc.items():
            if name == "version":
                continue
            if name not in rules or not isinstance(over, dict):
                raise KernscopeError(f"{path}: unknown findings rule [{name}] (rules: {', '.join(sorted(rules))})")
            for key, value in over.items():
                if key not in rules[name]:
                    raise KernscopeError(f"{path}: [{name}] has no key {key!r} (keys: {', '.join(sorted(rules[name]))})")
                want = type(rules[name][key])
                ok = isinstance(value, want) or (want is float and isinstance(value, int) and not isinstance(value, bool))
                if ok and want is list:
                    ok = all(isinstance(x, str) for x in value)
                if not ok:
                    raise KernscopeError(f"{path}: [{name}] {key} must be {want.__name__}, not {type(value).__name__}")
                rules[name][key] = float(value) if want is float else value
        return cls(rules, source=str(path))

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Where findings of these rules are written: a text that cannot be written (:class:`RuleTextError`) is
        raised with the rules file's name in front, where the rules came from one."""
        try:
            yield
        except RuleTextError as e:
            raise (KernscopeError(f"{self.source}: {e}") if self.source else e) from None


class RuleTextError(KernscopeError):
    """A rule's text cannot be written with its findings' values (a name it does not have, a bad format)."""


#: the evidence's JSON text, as ``json.dumps(evidence, default=str)`` writes it (one encoder for every finding: a
#: long JAX profile has ~15,000, and ``dumps`` with an option builds an encoder per call)
_EVIDENCE = json.JSONEncoder(default=str)


def _row(cfg: dict[str, Any], rule: str, win_back_us: float, evidence: dict[str, Any], *,
         words: dict[str, Any] | None = None, **where: Any) -> dict[str, Any]:
    """A finding: its text written from ``cfg["text"]`` with the rule's settings, the ``evidence`` and ``words`` (the
    text's words for values the evidence holds as null, and phrases of its own)."""
    try:
        text = str(cfg["text"]).format_map({**{k: v for k, v in cfg.items() if k != "text"}, **evidence, **(words or {})})
    except (KeyError, ValueError, IndexError) as e:
        raise RuleTextError(f"findings rule [{rule}]: its text cannot be written ({type(e).__name__}: {e})") from None
    return {"rule": rule, "title": cfg["title"], "step": where.get("step"), "device": where.get("device"),
            "rank": where.get("rank"), "op": where.get("op"), "kernel": where.get("kernel"),
            "win_back_us": float(win_back_us), "text": text, "evidence": _EVIDENCE.encode(evidence)}


def _device_work(gpu: pl.DataFrame, *more: str) -> pl.DataFrame:
    """The GPU rows in steps: ``step``, ``device`` (-1 where unknown), ``ts``, ``end`` and the columns ``more`` (only
    those read: a JAX profile has over a million rows)."""
    # (the columns selected first, then filtered, both eager: where every row is in a step, as a JAX profile's are,
    # they stay polars' own, where a lazy query's streaming engine copied each into chunks)
    return gpu.select("step", pl.col("device").fill_null(-1), "ts", "end", *more).filter(pl.col("step").is_not_null())


def launch_bound(gpu: pl.DataFrame, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    g = _device_work(gpu, "dur", "launch_ts", "kind")
    if g.height == 0:
        return []
    keys = ["step", "device"]
    # each (step, device)'s span and kernels, and the gaps between its own records that a late launch ended, from one
    # sort of the rows: an upper bound of its GPU's idle that late launches ended (each such gap of the device's work
    # lies in one of the step's), which the steps over the thresholds have measured on the device's work
    per = idle_breakdown(g, keys, extent=True, counts={"kernels": pl.col("kind") == "kernel"})
    share = pl.when(pl.col("span_us") != 0).then(100.0 * pl.col("host_wait_us") / pl.col("span_us")).otherwise(0.0)

    def over(t: pl.DataFrame) -> pl.DataFrame:
        return t.with_columns(share.alias("_share")).filter(
            (pl.col("host_wait_us") >= cfg["min_us"]) & (pl.col("_share") >= cfg["min_share_pct"]))

    maybe = over(per)
    if maybe.height == 0:
        return []
    spans = group_by_keys(_rows_of(g, keys, maybe), keys, (pl.col("ts").min().alias("_f"), pl.col("end").max().alias("_l")))
    late = _late_gaps(gpu, spans)
    waits = group_by_keys(late, keys, (pl.col("_gap").sum().alias("_wait"), pl.len().alias("_gaps")))
    per = maybe.drop("_share").join(waits, on=keys, how="left")
    # (ns to µs in numpy, as the idle breakdown divides: polars divides a one-row column exactly and a longer one by the
    # reciprocal, so the whole trace and a step analyzed alone differed in the last digit)
    hit = over(per.with_columns(pl.Series("host_wait_us", per["_wait"].fill_null(0).to_numpy().astype(np.float64) / NS_PER_US),
                                pl.col("_gaps").fill_null(0).cast(pl.Int64).alias("host_wait_gaps")))
    if hit.height == 0:
        return []
    # the medians of the evidence, for the (step, device) found only (each is a sort of its rows)
    medians = group_by_keys(_rows_of(g, keys, hit), keys, (
        pl.col("dur").filter(pl.col("kind") == "kernel").median().alias("median_kernel_us"),
        # launch lead: how long before it started a record was launched (a short one: an empty launch queue)
        (pl.col("ts") - pl.col("launch_ts")).median().alias("median_lead_us")))
    medians = medians.with_columns(medians["median_kernel_us"] / NS_PER_US, medians["median_lead_us"] / NS_PER_US)
    longest = _longest(gpu, late.join(hit.select(keys), on=keys, how="semi"), spans)
    out = []
    for r in (hit.join(medians, on=keys, how="left").join(longest, on=keys, how="left")
              .sort(keys).iter_rows(named=True)):
        ev = {"step": r["step"], "device": r["device"], "wait_us": r["host_wait_us"], "share_pct": r["_share"],
              "gaps": r["host_wait_gaps"], "kernels": r["kernels"], "median_kernel_us": r["median_kernel_us"] or 0.0,
              "span_us": r["span_us"], "median_lead_us": r["median_lead_us"] or 0.0,
              "longest_gap_us": r["longest_gap_us"] or 0.0, "longest_gap_at_us": r["longest_gap_at_us"] or 0.0,
              "longest_gap_kernel": r["longest_gap_kernel"], "longest_gap_op": r["longest_gap_op"]}
        # (a long median lead with idle gaps: launches come in bursts, as from DataParallel's replica threads)
        queue = ("a short launch queue" if ev["median_lead_us"] < cfg["short_lead_us"]
                 else "the queue ran dry between bursts of launches")
        op = ev["longest_gap_op"]
        launched = f"launched by {op}" if op else "launched outside any CPU op"
        out.append(_row(cfg, "launch_bound", r["host_wait_us"], ev,
                        words={"queue": queue, "longest_gap_launched": launched, "longest_gap_op": op or "no CPU op",
                               "longest_gap_kernel": ev["longest_gap_kernel"] or "-"},
                        step=r["step"], device=r["device"]))
    return out


#: rows of the GPU table read at once where :func:`_late_gaps` finds a device's records in its steps' spans
SCAN_BLOCK = 1 << 18


def _late_gaps(gpu: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """The idle gaps of a GPU that a late launch ended inside the ``steps`` (step, device, ``_f`` and ``_l``: the first
    start and last end of the step's records on the device, ns): gaps of the device's work (every record of it, of any
    step or none) before a record of the step, not its first, launched after that work had ended. One row a gap:
    ``step``, ``device`` (-1: none), ``_gap`` and ``_start`` (ns), ``_r`` (the record's row of ``gpu``).

    The device's work, not the step's: where a step's records wait behind an earlier step's (a GPU running behind its
    host), the time between them is not idle (HTA's A100 Triton rank: 60 ms of the 155 ms between two records of step
    551 ran step 550's work, read as idle). Only the device's records in the steps' spans are read (their union per
    device, each stretch on its own): a JAX profile's few such steps, not its 1.4 M records."""
    keys = ["step", "device"]
    out = pl.DataFrame(schema={"step": steps.schema["step"], "device": steps.schema["device"], "_gap": pl.Int64,
                               "_start": pl.Int64, "_r": pl.Int64})
    ts, end = gpu["ts"].to_numpy(), gpu["end"].to_numpy()  # (never null: read where polars holds them)
    parts = []
    for dev in steps["device"].unique().to_list():
        iv = steps.filter(pl.col("device") == dev)
        s_m, e_m = interval_union(iv["_f"].to_numpy(), iv["_l"].to_numpy())
        # the device's records that overlap a stretch, and the stretch each is in, a block of rows at a time (arrays of
        # every row were 40-70 MB more at a 207 MB JAX profile's peak)
        found_rows, found_at = [], []
        for lo in range(0, gpu.height, SCAN_BLOCK):
            hi = min(lo + SCAN_BLOCK, gpu.height)
            at = np.searchsorted(s_m, end[lo:hi], side="left") - 1
            inside = (at >= 0) & (e_m[np.maximum(at, 0)] > ts[lo:hi])
            inside &= (gpu["device"].slice(lo, hi - lo).fill_null(-1) == dev).to_numpy()
            k = np.flatnonzero(inside)
            found_rows.append(k + lo)
            found_at.append(at[k])
        rows = np.concatenate(found_rows)
        if len(rows) < 2:
            continue
        stretch, r_ts, r_end = np.concatenate(found_at), ts[rows], end[rows]
        launch = gpu["launch_ts"].gather(pl.Series(rows, dtype=pl.Int64))
        order = np.lexsort((r_ts, stretch))
        stretch, r_ts, r_end, rows = stretch[order], r_ts[order], r_end[order], rows[order]
        r_launch = launch.fill_null(np.iinfo(np.int64).min).to_numpy().astype(np.int64)[order]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = stretch[1:] != stretch[:-1]
        before = running_max(r_end.astype(np.int64), first)  # the stretch's latest end up to each record
        gap = np.zeros(len(rows), dtype=np.int64)
        np.subtract(r_ts[1:], before[:-1], out=gap[1:])
        late = ~first & (gap > 0)
        late[1:] &= r_launch[1:] > before[:-1]
        k = np.flatnonzero(late)
        parts.append(pl.DataFrame({"_gap": gap[k], "_start": before[k - 1], "_r": rows[k]}))
    if not parts:
        return out
    gaps = pl.concat(parts)
    found = gpu.select("step", pl.col("device").fill_null(-1)).gather(gaps["_r"]).hstack(gaps)
    # (of the steps asked, and not before a step's first record on its device: its start, not a late launch inside it)
    return (found.join(steps, on=keys, how="inner").filter(pl.col("_start") >= pl.col("_f"))
            .select(out.columns).cast(dict(out.schema)))  # type: ignore[arg-type]


def _longest(gpu: pl.DataFrame, late: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """Per (step, device) of the gaps ``late`` (:func:`_late_gaps`): the longest (of equal ones the first): its
    ``longest_gap_us``, ``longest_gap_at_us`` (its start from the first start of the step's work on the device:
    ``spans``' ``_f``, as :func:`_late_gaps` read it), the record after it (``longest_gap_kernel``) and that record's
    launching op (``longest_gap_op``)."""
    keys = ["step", "device"]
    best = late.sort(*keys, "_gap", "_start", descending=[False, False, True, False]).unique(keys, keep="first")
    best = best.join(spans.select(*keys, pl.col("_f").alias("_first")), on=keys, how="left")
    # (the records gathered, then made text: the whole name column as text was 77 MB of a 207 MB JAX profile)
    rec = gpu.select("name", "launcher").gather(best["_r"]).select(pl.col("name").cast(pl.String).alias("longest_gap_kernel"),
                                                                   pl.col("launcher").cast(pl.String).alias("longest_gap_op"))
    return best.hstack(rec).with_columns(
        pl.Series("longest_gap_us", best["_gap"], dtype=pl.Int64) / NS_PER_US,
        pl.Series("longest_gap_at_us", best["_start"] - best["_first"], dtype=pl.Int64) / NS_PER_US).select(
        *keys, "longest_gap_us", "longest_gap_at_us", "longest_gap_kernel", "longest_gap_op")


def _rows_of(g: pl.DataFrame, keys: list[str], groups: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``g`` whose ``keys`` are those of a row of ``groups`` (a semi join: null keys match nothing),
    found through one integer a row where the keys allow it (:func:`kernscope.intervals.row_keys`): the groups
    numbered as ``g``'s rows are, then the rows of those numbers."""
    ranges = key_ranges(g, keys)
    if ranges is None:
        return g.join(groups.select(keys), on=keys, how="semi")
    wanted = row_keys(groups.select(keys).drop_nulls(), keys, ranges)
    one = row_keys(g, keys, ranges)
    if wanted is None or one is None:  # (keys of other types than g's)
        return g.join(groups.select(keys), on=keys, how="semi")
    numbers = pl.Series(np.unique(wanted[wanted >= 0]))
    keep = pl.Series(one).is_in(numbers.implode())
    return g if bool(keep.all()) else g.filter(keep)


def step_start_idle(trace: Trace, gpu: pl.DataFrame, cfg: dict[str, Any],
                    wait_cfg: dict[str, Any] | None = None,
                    queued_cfg: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """``step_start_idle`` (``cfg``): per step and device, the GPU idle from the step's start (or the end of the work
    still running then) until its first work ran; and ``step_start_wait`` (``wait_cfg``): where that work was launched
    during the idle and another GPU's record ended between its launch and its start, the part after the launch is a
    wait on that GPU (one process driving two as a pipeline: the second stage's first kernel of a step, launched at
    1.2 ms, ran at 4.7 ms, after the first stage's copy), and ``step_start_idle`` keeps the part before the launch.
    No record of the idle device can end in its idle, so a wait is only ever explained by another device's work.
    ``step_start_queued`` (``queued_cfg``): where no record explains it and the part from the launch call's return to
    the start is itself a finding (its ``min_us`` and ``min_share_pct``), that part is queued behind nothing the trace
    holds (work launched before the trace began, or host and GPU clocks apart: TraceLens's ROCm vLLM decode trace ran
    every record 6.9-17 ms after its launch), and ``step_start_idle`` keeps the part until that return: the host's, as
    its title says (it read 8,371 µs, 348% of that trace's step, for a first copy launched 534 µs in). A launch's
    usual few µs to its start stay in ``step_start_idle``."""
    # every record of the device, in a step or not: work launched before the steps or unlinked (no launch, so in no
    # step) still kept the GPU busy (a ROCm trace's first step read 30 ms "idle" behind 968 such records)
    cols = ["step", pl.col("device").fill_null(-1), "ts", "end"] + [c for c in ("launch_ts", "launch_dur") if c in gpu.columns]
    g = gpu.select(cols)  # (eager: the columns as polars holds them; a lazy query copied each into chunks)
    if g.height == g["step"].null_count() or trace.steps.height == 0:
        return []
    rows = _idle_starts(_step_firsts(g).join(trace.steps.select("step", "start", "end"), on="step").sort("step", "device"),
                        min(c["min_us"] for c in (cfg, wait_cfg, queued_cfg) if c is not None))
    several = wait_cfg is not None and g["device"].n_unique() > 1
    waited = _waited_for(gpu, [(r.first, r.launched) for r in rows]) if several and rows else {}
    queued = {i for i, r in enumerate(rows) if i not in waited and queued_cfg is not None
              and _reported((r.first - r.returned) / NS_PER_US, r.dur, queued_cfg)}
    # each row's idle: to its first work's launch where another GPU's work held that work back, to the launch call's
    # return where nothing the trace holds did (the call itself is the host's: a first cuGraphLaunch of a JAX step
    # returned after 100-190 µs, its first kernel starting as it did); the rest is a wait
    cuts = [r.launched if waited.get(i) is not None else r.returned if i in queued else r.first for i, r in enumerate(rows)]
    idles = [(cut - r.begin) / NS_PER_US for r, cut in zip(rows, cuts)]
    flags = [_reported(idle, r.dur, cfg) for r, idle in zip(rows, idles)]
    host = _host_in_gaps(trace, gpu, [(r.step, r.begin, cut) for r, cut, f in zip(rows, cuts, flags) if f])
    out = []
    for i, (r, cut, idle, flag) in enumerate(zip(rows, cuts, idles, flags)):
        src = waited.get(i)
        wait = (r.first - cut) / NS_PER_US
        dur = r.dur
        if flag:
            ev: dict[str, Any] = {"step": r.step, "device": r.device, "idle_us": idle, "share_pct": 100.0 * idle / dur, "step_us": dur}
            until = ("to its first GPU work" if cut == r.first else "until its first GPU work was launched" if i in waited
                     else "until the call that launched its first GPU work returned")
            op, op_ns = host.get((r.step, r.begin, cut), (None, 0))
            host_words = ""
            if op is not None and op_ns / NS_PER_US >= HOST_OP_SHARE * idle:
                ev.update(host_op=op, host_op_us=op_ns / NS_PER_US)
                host_words = f"; the host spent {op_ns / NS_PER_US:,.0f} µs of it in {op}" + (
                    " (waiting for the input pipeline: more DataLoader workers, or a cheaper dataset and transforms)"
                    if re.search(DATA_LOADING, op) else "")
            out.append(_row(cfg, "step_start_idle", idle, ev, words={"until": until, "host": host_words},
                            step=r.step, device=r.device))
        # (the evidence made only for a row that is a finding: most are not, a JAX profile's one a step)
        extra: dict[str, Any]
        if src is not None and wait_cfg is not None and _reported(wait, dur, wait_cfg):
            rule, rule_cfg, extra = "step_start_wait", wait_cfg, {"waited_for": src}
        elif i in queued and queued_cfg is not None:
            rule, rule_cfg, extra = "step_start_queued", queued_cfg, {"returned_us": (r.returned - r.start) / NS_PER_US}
        else:
            continue
        ev = {"step": r.step, "device": r.device, "wait_us": wait, "share_pct": 100.0 * wait / dur, "step_us": dur,
              "launched_us": (r.launched - r.start) / NS_PER_US, **extra}
        out.append(_row(rule_cfg, rule, wait, ev, step=r.step, device=r.device))
    return out


def _reported(us: float, step_us: float, cfg: dict[str, Any]) -> bool:
    """Whether ``us`` of a step of ``step_us`` µs is a finding by ``cfg``'s ``min_us`` and ``min_share_pct``."""
    return bool(us >= cfg["min_us"] and 100.0 * us / step_us >= cfg["min_share_pct"])


class _IdleStart(NamedTuple):
    """A (step, device) whose GPU was idle at the step's start (:func:`step_start_idle`; times in ns, ``dur`` µs)."""

    step: int
    device: int
    start: int  #: the step's start
    first: int  #: its first GPU record's start
    begin: int  #: the idle's start: the step's, or the end of the device's work still running then
    launched: int  #: when that first record was launched (within [begin, first]; ``first`` where unknown)
    returned: int  #: when the call that launched it returned (within [launched, first]; ``launched`` where unknown)
    dur: float  #: the step's length (µs)


def _idle_starts(t: pl.DataFrame, min_us: float) -> list[_IdleStart]:
    """The rows of ``t`` (per step and device, in order: ``step``, ``device``, ``start``, ``end``, ``_first``,
    ``_prev_end``, ``_launch`` and ``_returned`` of :func:`_step_firsts` with the step's window) whose idle from their
    begin to their first work is at least ``min_us`` µs, in a step of positive length. In numpy (a 3,300-step JAX
    profile's rows were read one dict at a time): the same values, ns / :data:`NS_PER_US` as Python divides them."""
    start, end, first = (t[c].to_numpy().astype(np.int64, copy=False) for c in ("start", "end", "_first"))
    prev = t["_prev_end"]
    after = (prev.is_not_null() & (prev != 0)).to_numpy()  # (a null or 0 end: no work before, as ``or`` reads it)
    begin = np.where(after, np.maximum(start, prev.fill_null(0).to_numpy()), start)
    dur = (end - start) / NS_PER_US
    keep = np.flatnonzero(((first - begin) / NS_PER_US >= min_us) & (dur > 0))
    launched = first
    if "_launch" in t.columns:
        launch = t["_launch"]
        launched = np.where(launch.is_not_null().to_numpy(),
                            np.minimum(np.maximum(launch.fill_null(0).to_numpy(), begin), first), first)
    returned = launched
    if "_returned" in t.columns:
        back = t["_returned"]
        returned = np.where(back.is_not_null().to_numpy(),
                            np.minimum(np.maximum(back.fill_null(0).to_numpy(), launched), first), launched)
    picked = pl.Series(keep)
    return [_IdleStart(*r) for r in zip(t["step"].gather(picked).to_list(), t["device"].gather(picked).to_list(),
                                         start[keep].tolist(), first[keep].tolist(), begin[keep].tolist(),
                                         launched[keep].tolist(), returned[keep].tolist(), dur[keep].tolist())]


#: the share of a step's idle start one host event must hold to be named as what the host did meanwhile
HOST_OP_SHARE = 0.5
#: a host event that waits for the input pipeline (PyTorch's DataLoader iterator, recorded as a user annotation)
DATA_LOADING = r"(?i)DataLoader|_DataLoaderIter|dataloader"


def _host_in_gaps(trace: Trace, gpu: pl.DataFrame, gaps: list[tuple[int, int, int]]) -> dict[tuple[int, int, int],
                                                                                              tuple[str, int]]:
    """For each (step, begin, end) of ``gaps`` (ns): the host event (CPU op or user annotation) that started in it
    on the thread that launched the step's first GPU work and overlaps it most, as (name, overlap ns). Among equals
    the longest (the outermost), then an annotation (the user's range around the op), then the name in text order.
    An event holding the whole step (the step's own annotation) is not one. Numpy on each thread's events sorted by
    start: every gap's events gathered at once and the best of each taken by one sort, no loop per gap (3,300 gaps
    of a JAX profile took 0.1 s in a loop)."""
    if not gaps or "launch_tid" not in gpu.columns:
        return {}
    # each step's first launch's thread (the earliest launch: its first row where several tie)
    first = (gpu.lazy().select("step", "launch_ts", "launch_pid", "launch_tid")
             .filter(pl.col("launch_ts").is_not_null() & pl.col("step").is_not_null())
             .group_by("step").agg(pl.col("launch_pid", "launch_tid").get(pl.col("launch_ts").arg_min())).collect())
    wanted = {g[0] for g in gaps}
    thread = {s: t for s, t in zip(first["step"].to_list(), zip(first["launch_pid"].to_list(), first["launch_tid"].to_list()))
              if s in wanted}
    st = trace.steps
    windows = dict(zip(st["step"].to_list(), zip(st["start"].to_list(), st["end"].to_list())))
    lo, hi = min(g[1] for g in gaps), max(g[2] for g in gaps)
    threads = pl.DataFrame(list(set(thread.values())), schema={"pid": trace.events.schema["pid"],
                                                               "tid": trace.events.schema["tid"]}, orient="row")
    # (the launching threads' events in the gaps' span only, names left interned: the chosen few are read as text)
    ev = (trace.events.lazy().filter(pl.col("kind").is_in(list(OP_KINDS)) & (pl.col("ts") >= lo) & (pl.col("ts") < hi)
                                     & (pl.col("end") > pl.col("ts")))
          .join(threads.lazy(), on=["pid", "tid"], how="semi")
          .select("pid", "tid", "ts", "end", "name", (pl.col("kind") == "user_annotation").alias("_ann")).collect())
    if not ev.height:
        return {}
    by_gap_thread: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for g in gaps:
        if thread.get(g[0]) is not None:
            by_gap_thread.setdefault(thread[g[0]], []).append(g)
    out: dict[tuple[int, int, int], tuple[str, int]] = {}
    for key, part in partition(ev, ("pid", "tid")).items():
        mine = by_gap_thread.get(key)
        if not mine:
            continue
        order = stable_order(part["ts"].to_numpy())
        part = part if order is None else part[order]
        ts, ends, ann = part["ts"].to_numpy(), part["end"].to_numpy(), part["_ann"].to_numpy()
        begin = np.array([g[1] for g in mine], np.int64)
        end = np.array([g[2] for g in mine], np.int64)
        no = (np.iinfo(np.int64).min, np.iinfo(np.int64).max)  # a step without a window: no event holds it
        w0 = np.array([windows.get(g[0], no)[0] for g in mine], np.int64)
        w1 = np.array([windows.get(g[0], no)[1] for g in mine], np.int64)
        a, b = np.searchsorted(ts, begin, side="left"), np.searchsorted(ts, end, side="left")
        n = np.maximum(b - a, 0)
        gid = np.repeat(np.arange(len(mine)), n)  # each gap's events, gathered at once
        pos = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n) + np.repeat(a, n)
        if not len(pos):
            continue
        s_ts, s_end = ts[pos], ends[pos]
        whole = (s_ts <= w0[gid]) & (s_end >= w1[gid])
        overlap = np.where(whole, -1, np.minimum(s_end, end[gid]) - s_ts)
        names = part["name"].gather(pos)
        best = np.lexsort((text_ranks(names), ~ann[pos], -(s_end - s_ts), -overlap, gid))
        heads = best[np.r_[True, gid[best][1:] != gid[best][:-1]]]  # each gap's best (gaps without events have none)
        heads = heads[overlap[heads] > 0]
        for i, text, ns in zip(gid[heads].tolist(), names.gather(heads).cast(pl.String).to_list(), overlap[heads].tolist()):
            out[mine[i]] = (text, int(ns))
    return out


def _waited_for(gpu: pl.DataFrame, probes: list[tuple[int, int]]) -> dict[int, str]:
    """For each (first start, launch) of ``probes`` (ns), the GPU record that last ended after the launch and by the
    start (another device's: the waiting one was idle), in words; probes without one are left out."""
    probe = pl.DataFrame({"_i": range(len(probes)), "_at": [p[0] for p in probes]}, schema={"_i": pl.Int64, "_at": pl.Int64})
    cols = [c for c in ("name", "device", "stream", "end") if c in gpu.columns]
    ended = gpu.lazy().select(cols).filter(pl.col("end").is_not_null()).sort("end").collect()
    hits = probe.sort("_at").join_asof(ended, left_on="_at", right_on="end", strategy="backward")
    return {r["_i"]: f"{r['name']} on GPU {r['device']}, stream {r['stream']}" for r in hits.iter_rows(named=True)
            if r["end"] is not None and r["end"] > probes[r["_i"]][1]}


def _step_firsts(g: pl.DataFrame) -> pl.DataFrame:
    """Per (step, device) of the GPU rows ``g`` (``step``: null for a record in no step; ``device``, ``ts``, ``end``:
    int64 ns, never null): the start of its first record (``_first``) and the latest end of the device's records
    before that one, in a step or not (``_prev_end``, null for the device's first record): the GPU was busy until
    then; with a ``launch_ts`` column, the first record's launch (``_launch``), and with ``launch_dur`` when its launch
    call returned (``_returned``). "Before" is the order of a stable sort by (device, start), ties in row order. In
    numpy: one sort (none where the rows come sorted, as a JAX profile's do), a running maximum per device and each
    group's first position (the sorted table, a shifted cumulative maximum per device and a grouped first took 0.37 s
    of a 1 GB JAX profile's findings)."""
    # (each array freed once used: at 2 M rows and more they are 17 MB each, in the C heap that a command never trims)
    dev_code, n_dev = ranks(g["device"].to_numpy())
    ts, end = g["ts"].to_numpy(), g["end"].to_numpy()
    lo = int(ts.min())
    span = int(ts.max()) - lo + 1
    if n_dev * span < 2**62:
        order = stable_order(dev_code * span + (ts - lo))
    else:  # (times too far apart to lay the devices end to end)
        order = np.lexsort((ts, dev_code))
    if order is not None:  # (rows in order, as a JAX profile's come: read in place)
        dev_code, ts, end = dev_code[order], ts[order], end[order]
    new_dev = np.ones(g.height, dtype=bool)
    np.not_equal(dev_code[1:], dev_code[:-1], out=new_dev[1:])
    run = running_max(end, new_dev)
    del end
    in_step = g["step"].is_not_null()
    # (a record in no step: step code 0, a group of its own, left out below)
    low = g["step"].min()
    step_code, n_step = ranks(g["step"].fill_null((low if isinstance(low, int) else 0) - 1).to_numpy())
    group = (step_code if order is None else step_code[order]) * n_dev  # (step, device) as one number: both ranks
    del step_code
    group += dev_code
    del dev_code
    pos = first_positions(group, n_step * n_dev)  # each group's first row in that order
    del group
    pos = pos[pos >= 0]
    if not in_step.all():
        stepped = in_step.to_numpy()
        pos = pos[stepped[pos if order is None else order[pos]]]
    prev_ok = ~new_dev[pos]
    prev = pl.Series("_prev_end", np.where(prev_ok, run[np.maximum(pos - 1, 0)], 0))
    rows = pos if order is None else order[pos]
    out = pl.DataFrame({"step": g["step"].gather(rows), "device": g["device"].gather(rows),
                        "_first": ts[pos], "_prev_end": prev.set(pl.Series(~prev_ok), None)})
    if "launch_ts" not in g.columns:
        return out
    launch = g["launch_ts"].gather(rows)
    out = out.with_columns(launch.alias("_launch"))
    return out.with_columns((launch + g["launch_dur"].gather(rows)).alias("_returned")) if "launch_dur" in g.columns else out


def blocking_sync(trace: Trace, cfg: dict[str, Any], step: int | None) -> list[dict[str, Any]]:
    # Kineto's runtime calls, XLA's driver calls
    rt = named(trace.rows(("runtime", "driver"), ("idx", "pid", "tid", "ts", "dur", "name")), cfg["names"])
    if rt.height == 0 or trace.steps.height == 0:
        return []
    rt = _in_steps(rt.select("idx", "pid", "tid", "ts", "dur", pl.col("name").cast(pl.String)), "ts",
                   _step_starts(trace)).with_row_index("_g")
    if step is not None:
        rt = rt.filter(pl.col("step") == step)
    probe = rt.select("_g", pl.col("pid").alias("launch_pid"), pl.col("tid").alias("launch_tid"),
                      pl.col("ts").alias("launch_ts"), "dur")
    threads = rt.select("pid", "tid").unique()
    # lazy queries over the event table: the CPU ops are not first copied out on their own (large traces)
    cpu = trace.events.lazy().filter(pl.col("kind") == "cpu_op")
    cpu_ops = cpu.select("idx", "pid", "tid", "ts", "end").join(threads.lazy(), on=["pid", "tid"], how="semi").collect()
    ops = innermost_op_pairs(cpu_ops, probe).select("_g", "op_idx")
    names = (cpu.select(pl.col("idx").alias("op_idx"), "name").join(ops.lazy().select("op_idx").unique(), on="op_idx")
             .select("op_idx", pl.col("name").cast(pl.String).alias("op")).collect())  # the names of the ops found only
    ops = ops.join(names, on="op_idx", how="left")
    # (summed in ns, made µs one value at a time: polars' grouped sum / 1000 multiplied by 1/1000 over several groups,
    # so one step's 18,753.224 µs read 18,753.224000000002 in the whole trace's findings and 18,753.224 in --step's)
    per = (rt.join(ops, on="_g", how="left")
           .group_by("step", "name", "op").agg(pl.len().alias("count"), pl.col("dur").sum().alias("total_ns")))
    out = []
    for r in per.sort("step", "total_ns", "op", descending=[False, True, False], nulls_last=True).iter_rows(named=True):
        r["total_us"] = r["total_ns"] / NS_PER_US
        if r["total_us"] >= cfg["min_us"]:
            # calls outside every CPU op: the op null (as every table's), the text saying where they were
            ev = {"step": r["step"], "call": r["name"], "op": r["op"], "count": r["count"], "total_us": r["total_us"]}
            words = {"op": r["op"] or "(no CPU op)",
                     "source": f"from {r['op']}" if r["op"] is not None else "outside any CPU op"}
            out.append(_row(cfg, "blocking_sync", r["total_us"], ev, words=words, step=r["step"], op=r["op"]))
    return out


def exposed_comm(by_step: pl.DataFrame, cfg: dict[str, Any], by_step_device: pl.DataFrame | None = None,
                 world_size: int | None = None) -> list[dict[str, Any]]:
    """Per step (with several GPUs: per step and GPU, ``by_step_device``), communication no computation hid. In one
    rank of a job (``world_size`` > 1) the text adds that a collective's kernel time includes its wait for the others."""
    ranks = str(cfg.get("ranks_note", "")).format(world_size=world_size) if world_size and world_size > 1 else ""
    table = by_step if by_step_device is None else by_step_device
    if table.height == 0:
        return []
    keys = ["step"] if by_step_device is None else ["step", "device"]
    wide = (table.filter(pl.col("type").is_in(["exposed_comm_time", "total_time"]))
            .pivot(on="type", index=keys, values="time_us"))
    if "exposed_comm_time" not in wide.columns:
        return []
    out = []
    for r in wide.sort(keys).iter_rows(named=True):
        exposed, span = r["exposed_comm_time"] or 0.0, r["total_time"] or 0.0
        share = 100.0 * exposed / span if span else 0.0
        if exposed >= cfg["min_us"] and share >= cfg["min_share_pct"]:
            ev = {"step": r["step"], "exposed_us": exposed, "share_pct": share, "span_us": span}
            if by_step_device is None:
                out.append(_row(cfg, "exposed_comm", exposed, ev, words={"where": "", "ranks": ranks}, step=r["step"]))
            else:
                ev["device"] = r["device"]
                out.append(_row(cfg, "exposed_comm", exposed, ev, words={"where": f", GPU {r['device']}", "ranks": ranks},
                                step=r["step"], device=r["device"]))
    return out


def tiny_gemm(gpu: pl.DataFrame, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    # compared on the interned kind and category (a JAX profile's 1.4 M rows cast to text: 0.09 s)
    g = gpu.select("step", "kind", "category", "name", "launcher", "dur").filter(
        pl.col("step").is_not_null() & (pl.col("kind") == "kernel") & (pl.col("category") == cfg["category"]))
    if g.height == 0:
        return []
    # grouped by the interned names, as text for the groups found only (the text of every GEMM row's name and op: a
    # 1 GB JAX profile's 0.8 M GEMM kernels took 0.08 s alone, 0.22 s beside the critical path)
    per = (group_by_keys(g, ["step", "name", "launcher"], (
               pl.len().alias("count"), (pl.col("dur").mean() / NS_PER_US).alias("mean_us")))
           .filter((pl.col("mean_us") <= cfg["max_mean_us"]) & (pl.col("count") >= cfg["min_count"]))
           .select("step", pl.col("name").cast(pl.String), pl.col("launcher").cast(pl.String).alias("op"), "count",
                   "mean_us"))
    if cfg.get("skip_names"):
        per = per.filter(~pl.col("name").str.contains(str(cfg["skip_names"])))
    out = []
    for r in per.sort("step", "count", descending=[False, True]).iter_rows(named=True):
        saving = r["count"] * min(r["mean_us"], cfg["saving_per_kernel_us"])
        ev = {"step": r["step"], "kernel": r["name"], "op": r["op"], "count": r["count"], "mean_us": r["mean_us"]}
        out.append(_row(cfg, "tiny_gemm", saving, ev, step=r["step"], op=r["op"], kernel=r["name"]))
    return out


def step_variance(steps: pl.DataFrame, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    d = steps.filter(pl.col("cpu_duration_us").is_not_null())
    if d.height < cfg["min_steps"]:
        return []
    median = float(d["cpu_duration_us"].median() or 0.0)  # type: ignore[arg-type]
    out = []
    for r in d.sort("step").iter_rows(named=True):
        excess = 100.0 * (r["cpu_duration_us"] - median) / median if median else 0.0
        if excess >= cfg["min_excess_pct"]:
            ev = {"step": r["step"], "duration_us": r["cpu_duration_us"], "median_us": median, "excess_pct": excess,
                  "steps": d.height}
            out.append(_row(cfg, "step_variance", r["cpu_duration_us"] - median, ev, step=r["step"]))
    return out


def _step_starts(trace: Trace) -> pl.DataFrame:
    """The steps by start (``_s``, ``_e``, ``step``), for :func:`_in_steps`."""
    return trace.steps.select(pl.col("start").alias("_s"), pl.col("end").alias("_e"), "step").sort("_s")


def _in_steps(table: pl.DataFrame, at: str, steps: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``table`` whose time ``at`` (ns) is inside a step of ``steps`` (:func:`_step_starts`), with their
    ``step``."""
    return (table.sort(at).join_asof(steps, left_on=at, right_on="_s", strategy="backward")
            .filter(pl.col(at) < pl.col("_e")).drop("_s", "_e"))


def _spans_in_steps(trace: Trace, pattern: str, step: int | None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The host events (CPU ops and user annotations) named by ``pattern`` that start inside a step (``name`` as text,
    ``ts``, ``end``, ``step``; of ``step`` only where given), the host events, and the steps by start, for the rules
    that name spans a step spent in (compiles, host callbacks)."""
    host = trace.rows(OP_KINDS, ("name", "ts", "end"))
    steps = _step_starts(trace)
    spans = named(host, pattern)
    if spans.height == 0 or steps.height == 0:
        return pl.DataFrame(schema={"name": pl.String, "ts": pl.Int64, "end": pl.Int64, "step": pl.Int64}), host, steps
    spans = _in_steps(spans.select(pl.col("name").cast(pl.String), "ts", "end"), "ts", steps)
    return (spans.filter(pl.col("step") == step) if step is not None else spans), host, steps


def _counted(counts: list[dict[str, Any]]) -> str:
    """``value_counts`` of names as words, the most first and ties by name (one text whatever order polars gave)."""
    return ", ".join(f"{v['count']} {v['name']}" for v in sorted(counts, key=lambda v: (-v["count"], v["name"])))


def recompile(trace: Trace, cfg: dict[str, Any], step: int | None) -> list[dict[str, Any]]:
    """Compile spans inside steps (the outermost ones of ``cfg["names"]``), with torch.compile's compile ids (``0/1``:
    frame 0, recompilation 1) from the annotations Dynamo writes beside them."""
    spans, host, steps = _spans_in_steps(trace, cfg["names"], step)
    if spans.height == 0:
        return []
    ids = (_in_steps(named(host, "compile_id=").select(
               pl.col("name").cast(pl.String).str.extract(r"compile_id=([0-9/]+)").alias("_id"), "ts"), "ts", steps)
           .group_by("step").agg(pl.col("_id").drop_nulls().unique().sort().alias("_ids")))
    per = (spans.group_by("step").agg(((pl.col("end") - pl.col("ts")).sum() / NS_PER_US).alias("compile_us"),
                                      pl.col("name").value_counts(sort=True).alias("_names"))
           .join(ids, on="step", how="left"))
    out = []
    for r in per.sort("step").iter_rows(named=True):  # one per step that compiled
        if r["compile_us"] >= cfg["min_us"]:
            names = _counted(r["_names"])
            listed = ", ".join(r["_ids"] or [])
            ev = {"step": r["step"], "compile_us": r["compile_us"], "spans": names, "ids": listed or None,
                  "ids_note": str(cfg["ids_note"]).format(ids=listed) if listed else ""}
            out.append(_row(cfg, "recompile", r["compile_us"], ev, step=r["step"]))
    return out


def host_callback(trace: Trace, cfg: dict[str, Any], step: int | None) -> list[dict[str, Any]]:
    """JAX host callbacks inside steps (``jax.debug.print`` / ``debug.callback``, ``pure_callback``, ``io_callback``:
    XLA runs them as HLO instructions ``debug_callback.N`` ..., on a host thread, while the device work after them
    waits): per step, their time and names."""
    spans, _, _ = _spans_in_steps(trace, cfg["names"], step)
    if spans.height == 0:
        return []
    per = spans.group_by("step").agg(((pl.col("end") - pl.col("ts")).sum() / NS_PER_US).alias("callback_us"),
                                     pl.col("name").value_counts(sort=True).alias("_names"))
    out = []
    for r in per.sort("step").iter_rows(named=True):  # one per step that called back
        if r["callback_us"] >= cfg["min_us"]:
            names = _counted(r["_names"])
            ev = {"step": r["step"], "callback_us": r["callback_us"], "spans": names,
                  "calls": int(sum(v["count"] for v in r["_names"]))}
            out.append(_row(cfg, "host_callback", r["callback_us"], ev, step=r["step"]))
    return out


def autotune(trace: Trace, gpu: pl.DataFrame, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """An autotuner's benchmarking inside steps: per step, the L2-cache flushes (fills of ``cfg["flush_ops"]`` long
    enough to have written ``min_fill_mb`` at the device's memory bandwidth, where the device table knows it, else at
    ``max_tb_per_s``: ``dur`` ns >= bytes / bandwidth) and the kernels right after a flush on the same stream (the
    configs timed), with every launch of those kernels in the step."""
    known = [p.hbm_tb_s for p in map(match_device, trace.device_properties) if p is not None and p.hbm_tb_s]
    min_ns = cfg["min_fill_mb"] * 1e6 / (max(known or [cfg["max_tb_per_s"]]) * 1e3)
    kernels = gpu.lazy().filter(pl.col("step").is_not_null() & (pl.col("kind") == "kernel"))
    flush = (pl.col("dur") >= min_ns) & pl.col("launcher").is_in(list(cfg["flush_ops"]))  # (on the interned launcher)
    if kernels.filter(flush).select(pl.len()).collect().item() < cfg["min_flushes"]:  # (no other work where none is)
        return []
    g = (kernels.select("step", "device", "stream", "ts", "dur", "name", "launcher", flush.fill_null(False).alias("_flush"))
         .collect().sort("device", "stream", "ts"))
    # the kernel after each flush on its stream (a run of flushes: the first kernel after the run)
    lane = (pl.col("device").cast(pl.Int64).fill_null(-1) * (1 << 32) + pl.col("stream").cast(pl.Int64).fill_null(-1))
    g = g.with_columns(lane.alias("_lane")).with_columns(
        (pl.col("_flush").shift(1).over("_lane").fill_null(False) & ~pl.col("_flush")).alias("_timed"))
    out = []
    flushes = g.filter(pl.col("_flush")).group_by("step").agg(pl.len().alias("flushes"), pl.col("dur").sum().alias("_fns"))
    for r in flushes.filter(pl.col("flushes") >= cfg["min_flushes"]).sort("step").iter_rows(named=True):
        in_step = g.filter((pl.col("step") == r["step"]) & ~pl.col("_flush"))
        timed = set(in_step.filter(pl.col("_timed"))["name"].cast(pl.String).to_list())
        runs = (in_step.filter(pl.col("name").cast(pl.String).is_in(sorted(timed)))
                .group_by(pl.col("name").cast(pl.String)).agg(pl.len().alias("count"), pl.col("dur").sum().alias("_ns")))
        listed = sorted(runs.iter_rows(named=True), key=lambda v: (-v["_ns"], v["name"]))
        words = ", ".join(f"{v['count']:,} launches of {v['name']} ({v['_ns'] / NS_PER_US:,.0f} µs)" for v in listed[:3])
        more = f" and {len(listed) - 3} more kernels" if len(listed) > 3 else ""
        flush_us, timed_us = r["_fns"] / NS_PER_US, sum(v["_ns"] for v in listed) / NS_PER_US
        ev = {"step": r["step"], "flushes": r["flushes"], "flush_us": flush_us, "min_fill_mb": cfg["min_fill_mb"],
              "timed": (words + more) or "no other kernel", "timed_us": timed_us,
              "kernels": [v["name"] for v in listed]}
        out.append(_row(cfg, "autotune", flush_us + timed_us, ev, step=r["step"], kernel=listed[0]["name"] if listed else None))
    return out


def graph_capture(trace: Trace, cfg: dict[str, Any], step: int | None) -> list[dict[str, Any]]:
    """CUDA/HIP graphs captured inside steps: per step, the captures' windows on the host (a thread's
    ``cudaStreamBeginCapture`` to its ``cudaStreamEndCapture``) and the graphs' instantiations, in time. The launches
    in a capture run nothing: the step recorded graphs rather than replaying them (torch.compile's CUDA graph trees
    record a graph the first times they meet a new shape or path, often in the first profiled steps)."""
    runtime = trace.rows(("runtime", "driver"), ("name", "pid", "tid", "ts", "end"))
    windows = capture_windows(runtime)
    if windows.height == 0 or trace.steps.height == 0:
        return []
    steps = _step_starts(trace)
    caps = _in_steps(windows, "start", steps).group_by("step").agg(
        pl.len().alias("graphs"), ((pl.col("end") - pl.col("start")).sum() / NS_PER_US).alias("capture_us"))
    inst = _in_steps(named(runtime, INSTANTIATE).select("ts", "end"), "ts", steps).group_by("step").agg(
        ((pl.col("end") - pl.col("ts")).sum() / NS_PER_US).alias("instantiate_us"))
    trees = set(_in_steps(named(trace.rows(OP_KINDS, ("name", "ts")), cfg["tree_names"]).select("ts"), "ts",
                          steps)["step"].to_list())
    per = caps.join(inst, on="step", how="left").with_columns(pl.col("instantiate_us").fill_null(0.0))
    if step is not None:
        per = per.filter(pl.col("step") == step)
    out = []
    for r in per.sort("step").iter_rows(named=True):  # one per step that captured
        spent = r["capture_us"] + r["instantiate_us"]
        if spent >= cfg["min_us"]:
            ev = {"step": r["step"], "graphs": r["graphs"], "capture_us": r["capture_us"],
                  "instantiate_us": r["instantiate_us"], "torch_compile": r["step"] in trees}
            words = {"hint": str(cfg["hint_trees"] if ev["torch_compile"] else cfg["hint_plain"])}
            out.append(_row(cfg, "graph_capture", spent, ev, words=words, step=r["step"]))
    return out


def low_occupancy(gpu: pl.DataFrame, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    if "occupancy_pct" not in gpu.columns:
        return []
    # the kernels in steps, read lazily: the step times from two columns, the rated kernels in one filter (the
    # kernels first copied whole, then filtered again, were +320 MB at 1 GB of JAX)
    g = gpu.lazy().filter(pl.col("step").is_not_null() & (pl.col("kind") == "kernel"))  # (on the interned kind)
    skip = list(cfg["skip_categories"])
    rated_rows = g.filter(pl.col("occupancy_pct").is_not_null() & ~pl.col("category").is_in(skip))
    low = _groups_at_most(rated_rows, cfg["max_occupancy_pct"])
    if low.height == 0:
        return []
    step_time = g.group_by("step").agg(pl.col("dur").sum().alias("_step_ns")).collect()
    rated = rated_rows.join(low.lazy(), on=["step", "name"], how="semi", maintain_order="left").select(
        "step", pl.col("name").cast(pl.Categorical), "dur", "occupancy_pct", "registers").collect()
    rated = _may_hold_share(rated, step_time, cfg["min_share_pct"])
    # grouped by the interned name (grouping by (step, text) row-encoded every kernel's name), and by one integer a
    # row for the two keys (intervals.group_by_keys), text for the groups
    per = (group_by_keys(rated, ["step", "name"], (
               pl.len().alias("count"), pl.col("dur").sum().alias("_ns"),
               ((pl.col("occupancy_pct") * pl.col("dur")).sum() / pl.col("dur").sum()).alias("occupancy_pct"),
               pl.col("registers").mean().alias("registers")))
           .with_columns(pl.col("name").cast(pl.String))
           .join(step_time, on="step")
           .with_columns((100.0 * pl.col("_ns") / pl.col("_step_ns")).alias("share_pct"))
           .filter((pl.col("occupancy_pct") <= cfg["max_occupancy_pct"]) & (pl.col("share_pct") >= cfg["min_share_pct"])))
    out = []
    for r in per.sort("step", "_ns", descending=[False, True]).iter_rows(named=True):  # one per flagged kernel
        time_us = r["_ns"] / NS_PER_US
        # (the share divided here: polars' column gave a different last digit with one step's rows than with all)
        ev = {"step": r["step"], "kernel": r["name"], "count": r["count"], "time_us": time_us,
              "share_pct": 100.0 * r["_ns"] / r["_step_ns"],
              "occupancy_pct": r["occupancy_pct"], "registers": r["registers"] or 0.0}
        out.append(_row(cfg, "low_occupancy", time_us * cfg["assumed_saving_pct"] / 100.0, ev, step=r["step"],
                        kernel=r["name"]))
    return out


def _groups_at_most(rated: pl.LazyFrame, bound: float) -> pl.DataFrame:
    """The (``step``, ``name``) groups of ``rated`` with a kernel whose ``occupancy_pct`` is at most ``bound``: only these
    can be flagged, a group's occupancy being its kernels' weighted by their durations (never negative), so at least
    its lowest. Its rows alone are read after (every rated kernel read whole was +62-68 MB and 0.04-0.13 s of a 207 MB
    JAX profile, none of whose kernels was under the bound)."""
    return rated.filter(pl.col("occupancy_pct") <= bound).select("step", "name").unique().collect()


def _may_hold_share(rated: pl.DataFrame, step_time: pl.DataFrame, min_share_pct: float) -> pl.DataFrame:
    """The rows of ``rated`` (``step``, ``name``, ``dur`` in ns) whose (step, name) group may hold ``min_share_pct`` of
    its step's ``_step_ns`` (``step_time``): every group's time summed in numpy, one bincount over the two keys' ranks,
    and tested a hair below the bound (the exact test runs on the groups kept). The rows of a group are kept or
    dropped together, so what is computed of them after is what all the rows gave: a 1 GB JAX profile's 3.4 M rated
    kernels are 1.05 M groups, whose grouping took 0.27-0.38 s; a few percent of them can hold a share."""
    if rated.height == 0 or any(rated[c].null_count() for c in ("step", "name", "dur")):
        return rated  # (nulls: polars groups them)
    step = rated["step"].to_numpy()
    step_rank, n_step = ranks(step)
    name_rank, n_name = ranks(rated["name"].to_physical().to_numpy())
    if n_step * n_name > 4 * rated.height + 4096:  # (few of the pairs are used: bincount's table would be too large)
        return rated
    key = step_rank * n_name + name_rank
    group_ns = np.bincount(key, weights=rated["dur"].to_numpy(), minlength=n_step * n_name)
    step_ns = (pl.DataFrame({"step": step[first_positions(step_rank, n_step)]})  # (each rank's step)
               .join(step_time, on="step", how="left", maintain_order="left")["_step_ns"].to_numpy())
    bound = np.repeat(np.nan_to_num(step_ns.astype(np.float64), nan=np.inf) * (min_share_pct * (1 - 1e-9)), n_name)
    return rated.filter(pl.Series((100.0 * group_ns >= bound)[key]))


def find_roofline(ops: pl.DataFrame, steps: int, *, rules: FindingRules | None = None) -> pl.DataFrame:
    """Findings of the perf model (``ops``: :class:`~kernscope.analyze.perf.PerfModel` op rows over ``steps``
    steps, 0 when the trace has none): ops far below their roofline that take a large share of the modeled
    time; the win back is per step (the model's target efficiency, ``findings.toml``)."""
    given = rules or FindingRules.builtin()
    with given.writing():
        return ranked(_roofline_rows(ops, steps, given.rules["far_from_roofline"]))


def _roofline_rows(ops: pl.DataFrame, steps: int, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    if ops.height == 0:
        return []
    d = ops.filter(~pl.col("nested") & pl.col("pct_of_peak").is_not_null()) if "nested" in ops.columns else ops
    total = float(d["kernel_time_us"].sum() or 0.0)
    per_step = max(steps, 1)
    rows = []
    for r in d.sort("kernel_time_us", descending=True).iter_rows(named=True):  # op signatures, not events
        share = 100.0 * r["kernel_time_us"] / total if total else 0.0
        if r["pct_of_peak"] > cfg["max_pct_of_peak"] or share < cfg["min_share_pct"]:
            continue
        time_us = r["kernel_time_us"] / per_step
        # (the shortest its kernels can run, per step: a GPU runs no kernel in less than min_kernel_us)
        floor_us = float(cfg.get("min_kernel_us", 0.0)) * r["count"] / per_step
        if 2.0 * floor_us > time_us:
            continue
        roofline_us = time_us * r["pct_of_peak"] / cfg["target_pct_of_peak"]
        target_us = max(roofline_us, floor_us)
        ev = {"op": r["name"], "dtype": r["dtype"] or "-", "calls": r["count"], "time_us": time_us, "share_pct": share,
              "pct_of_peak": r["pct_of_peak"], "bound": r["bound"] or "-", "tflops_per_s": r["tflops_per_s"] or 0.0,
              "tb_per_s": r["tb_per_s"] or 0.0, "input_dims": r.get("input_dims"), "target_us": target_us,
              "steps": steps}
        floor = f" ({cfg.get('min_kernel_us', 0.0):g} µs a kernel at least)" if floor_us > roofline_us else ""
        # (a JAX op's line of the user's code, as its file's name and line: the evidence has the whole path)
        source = _source_of(r.get("params"))
        if source:
            ev["source"] = source
        where = f" at {os.path.basename(source)}" if source else ""
        rows.append(_row(cfg, "far_from_roofline", time_us - target_us, ev, op=r["name"],
                         words={"floor": floor, "where": where}))
    return rows


def _source_of(params: str | None) -> str | None:
    """The ``source`` (``path:line``) of a perf op row's ``params`` JSON, where it has one (JAX ops)."""
    if not params:
        return None
    try:
        p = json.loads(params)
    except ValueError:
        return None
    return str(p["source"]) if isinstance(p, dict) and p.get("source") else None


def merged(*tables: pl.DataFrame) -> pl.DataFrame:
    """Several findings tables as one, ranked."""
    rows = [r for t in tables for r in t.iter_rows(named=True)]
    return ranked(rows)


def ranked(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Findings rows (dicts of :data:`SCHEMA`'s keys) as a findings table, ranked by ``win_back_us``."""
    t = pl.DataFrame(rows, schema=SCHEMA) if rows else pl.DataFrame(schema=SCHEMA)
    # a total order: findings that tie on time keep one order whatever the grouping's order was
    keys = ["win_back_us", "rule", "step", "device", "rank", "op", "kernel", "text"]
    return t.sort(keys, descending=[True] + [False] * (len(keys) - 1), nulls_last=True)


def find(trace: Trace, gpu: pl.DataFrame, steps: pl.DataFrame, by_step: pl.DataFrame, *, step: int | None = None,
         rules: FindingRules | None = None, pool: Executor | None = None,
         all_gpu: pl.DataFrame | None = None, by_step_device: pl.DataFrame | None = None,
         started: Mapping[str, Future[list[dict[str, Any]]]] | None = None) -> pl.DataFrame:
    """The findings of one trace, ranked by ``win_back_us``: ``gpu`` the categorized GPU rows analyzed (with
    ``step``, ``launch_ts``, ``category``, ``launcher``), ``steps`` the step summary (``cpu_duration_us``),
    ``by_step`` the GPU timeline per step; ``step`` keeps the findings of that step only. ``all_gpu``: every GPU row
    of the trace where ``gpu`` holds one step's (default ``gpu``): whether the GPU was idle at a step's start depends
    on the work before it (with ``--step 2`` alone, step 1's work still running read as 7 ms idle). ``pool``: an
    executor the rules run on side by side (:func:`kernscope.analyze.analyze` hands its own); the same table.
    ``by_step_device``: with several GPUs, the timeline per step and GPU (exposed communication is each GPU's).
    ``started``: rules already running, by name (``"step_start_idle"``: :func:`idle_findings` with the same rules),
    whose rows are used in place of running them again."""
    given = rules or FindingRules.builtin()
    r = given.rules
    every = gpu if all_gpu is None else all_gpu
    calls: dict[str, Callable[[], list[dict[str, Any]]]] = {
        "launch_bound": partial(launch_bound, gpu, r["launch_bound"]), "step_start_idle": partial(idle_findings, trace, every, given),
        "blocking_sync": partial(blocking_sync, trace, r["blocking_sync"], step),
        "exposed_comm": partial(exposed_comm, by_step, r["exposed_comm"], by_step_device, trace.world_size),
        "tiny_gemm": partial(tiny_gemm, gpu, r["tiny_gemm"]), "step_variance": partial(step_variance, steps, r["step_variance"]),
        "recompile": partial(recompile, trace, r["recompile"], step),
        "graph_capture": partial(graph_capture, trace, r["graph_capture"], step),
        "host_callback": partial(host_callback, trace, r["host_callback"], step),
        "autotune": partial(autotune, trace, gpu, r["autotune"]),
        "low_occupancy": partial(low_occupancy, gpu, r["low_occupancy"])}
    ready = started or {}
    # (rows in the rules' order, wherever they ran: the ranking's ties keep one order)
    with given.writing():
        if pool is not None:
            made = [f.result() for f in [ready[n] if n in ready else pool.submit(c) for n, c in calls.items()]]
        else:
            made = [ready[n].result() if n in ready else c() for n, c in calls.items()]
    t = ranked([row for part in made for row in part])
    return t.filter(pl.col("step") == step) if step is not None else t


def idle_findings(trace: Trace, gpu: pl.DataFrame, rules: FindingRules) -> list[dict[str, Any]]:
    """The rows of ``step_start_idle``, ``step_start_wait`` and ``step_start_queued`` (:func:`step_start_idle`) of
    ``rules``, their texts written as :func:`find` writes them. ``gpu``: every GPU row of the trace; no category is
    read, so :func:`kernscope.analyze.analyze` starts it before the rows are categorized."""
    with rules.writing():
        return step_start_idle(trace, gpu, rules.rules["step_start_idle"], rules.rules["step_start_wait"],
                               rules.rules["step_start_queued"])


def find_stragglers(stragglers: pl.DataFrame, *, rules: FindingRules | None = None) -> pl.DataFrame:
    """Findings across ranks: per step, the rank the collectives waited for (a job's ``stragglers`` table:
    ``step_number``, ``rank``, ``wait_us``, ``max_wait_us``, ``collectives``, ``last_in``, ``p2p``)."""
    given = rules or FindingRules.builtin()
    cfg = given.rules["straggler"]
    rows = []
    with given.writing():
        for r in stragglers.iter_rows(named=True):  # one per step
            if (r["wait_us"] or 0.0) >= cfg["min_us"]:
                p2p = r.get("p2p") or 0
                ev = {"step": r["step_number"], "rank": r["rank"], "wait_us": r["wait_us"], "max_wait_us": r["max_wait_us"],
                      "collectives": r["collectives"], "last_in": r["last_in"] or 0, "p2p": p2p}
                which = "what_p2p" if p2p and p2p == r["collectives"] else "what_mixed" if p2p else "what_collectives"
                what = str(cfg.get(which, "collectives")).format(p2p=p2p)
                rows.append(_row(cfg, "straggler", r["wait_us"], ev, words={"what": what}, step=r["step_number"],
                                 rank=r["rank"]))
    return ranked(rows)
