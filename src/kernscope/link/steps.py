"""Step windows and the step of each GPU event, chosen by its *launch* time.

Where steps come from (``StepSpec.marker``):

- ``None`` (default): ``ProfilerStep#N`` annotations; JAX/TensorFlow ``StepTraceAnnotation`` ranges
  (``step_num``); in a JAX trace without them, the executions of its most frequent XLA module; else the
  first preset that matches
  (vLLM, SGLang, Megatron, torch.compile graph calls); without a match, automatic windows;
- a preset name (``vllm``, ``sglang``, ``megatron``, ``compiled``) or a regular expression over CPU-side
  annotation names (``record_function`` ranges, user annotations, ops): one window per matching range.
  A named group ``(?P<kind>...)`` gives the step's kind;
- ``auto``: the repeating unit of the GPU kernel sequence (the period of the launch-ordered kernel names
  that best predicts each kernel from the one a period earlier, at least 90%), windows starting at the kernel
  launched after the host drained the device (a synchronize call) in most periods where there is one, else at the
  kernel with the longest typical GPU gap before it. These windows are GPU time ranges (runs of consecutive
  kernels, so graph launches split too), and GPU work belongs to the window where it starts.

Step tables have the columns ``step`` (Int64), ``name``, ``start``, ``end`` (ns), ``kind`` (e.g. decode,
prefill, extend; null when the marker says nothing) and ``phase`` (``warmup`` for windows before the
steady pattern starts, ``steady``, ``irregular`` for later windows unlike the others, ``tail``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..load.native import search_right, window_of
from ..scalars import as_int
from .kinds import named
from .markers import DEFAULT_CASCADE, PRESETS

STEP_PATTERN = r"^ProfilerStep#(\d+)$"
STEP_SCHEMA = {"step": pl.Int64, "name": pl.String, "start": pl.Int64, "end": pl.Int64, "kind": pl.String,
               "phase": pl.String}
#: CPU-side event kinds that may carry step markers
MARKER_KINDS = ("user_annotation", "cpu_op", "python_function")
#: automatic windows need at least this share of kernels equal to the kernel one period later
PERIOD_MATCH = 0.9


#: the marker of JAX/TensorFlow ``StepTraceAnnotation`` ranges only (``step_num``): where none is, no steps (the time
#: windows of a profile whose steps are these, a window holding none: :mod:`kernscope.analyze.windows`)
ANNOTATED = "StepTraceAnnotation"


@dataclass(frozen=True)
class StepSpec:
    """How to find steps: ``marker=None`` is ProfilerStep, then presets, then automatic windows."""

    marker: str | None = None


@dataclass(frozen=True)
class FoundSteps:
    table: pl.DataFrame
    source: str  #: "ProfilerStep", "marker:<preset or regex>", "auto" or "none"
    by_gpu_time: bool = False  #: windows are GPU time ranges (a GPU-only trace): assign by kernel start


class MarkerError(ValueError):
    """A step marker that matches nothing (the message lists the most frequent annotations)."""


def empty_steps() -> pl.DataFrame:
    return pl.DataFrame(schema=STEP_SCHEMA)


def _step_runs(events: pl.DataFrame) -> pl.DataFrame:
    """The CPU-side ``ProfilerStep#N`` annotations (``name`` as text, ``ts``, ``end``) in time order, each with its run
    (``_run``: consecutive annotations of one name) and whether that run is its name's last (``_last``)."""
    # (lazy: three columns of the host events are read, not every column copied first)
    cand = events.lazy().filter(pl.col("kind").is_in(["user_annotation", "cpu_op"])).select("name", "ts", "end").collect()
    s = named(cand, STEP_PATTERN).with_columns(pl.col("name").cast(pl.String)).sort("ts", "end")
    run = (pl.col("name") != pl.col("name").shift()).fill_null(True).cum_sum()
    return s.with_columns(run.alias("_run")).with_columns((pl.col("_run") == pl.col("_run").max().over("name")).alias("_last"))


def earlier_step_runs(events: pl.DataFrame) -> pl.DataFrame:
    """The windows (``start``, ``end``; ns) of the runs of ``ProfilerStep#N`` annotations that are not their name's
    last (PyTorch Lightning opens ``ProfilerStep#2`` before ``ProfilerStep#1`` and again after it): the work in
    them is in no step (:func:`profiler_steps` takes each name's last run)."""
    s = _step_runs(events).filter(~pl.col("_last"))
    return s.group_by("_run").agg(pl.col("ts").min().alias("start"), pl.col("end").max().alias("end")).select("start", "end")


def profiler_steps(events: pl.DataFrame) -> pl.DataFrame:
    """One row per CPU-side ``ProfilerStep#N``: step, name, start, end (ns), kind (null), phase."""
    # a name's window is the hull of its annotations in their last run (in time, with no other step's between them):
    # PyTorch Lightning's profiler opens ProfilerStep#2 before ProfilerStep#1 and again after it, and the hull of both
    # held step 1 (a 183 ms step 2 over a 150 ms step 1 on a Lightning fit recorded on an H200)
    s = _step_runs(events).filter(pl.col("_last"))
    t = (
        s.group_by("name")
        .agg(pl.col("ts").min().alias("start"), pl.col("end").max().alias("end"))
        .with_columns(
            pl.col("name").str.extract(STEP_PATTERN, 1).cast(pl.Int64, strict=False).alias("step"),
            pl.lit(None, dtype=pl.String).alias("kind"),
            pl.lit(None, dtype=pl.String).alias("phase"),
        )
    )
    bad = t.filter(pl.col("step").is_null())
    if bad.height:
        raise StepNumberError(str(bad["name"][0]), bad.height)
    return t.select(list(STEP_SCHEMA)).sort("start")


#: XLA module executions on the host (JAX): ``jit_f:XLA GPU module`` (recent XLA) or ``XlaModule:#hlo_module=...#``
MODULE_PATTERN = r"(?::XLA GPU module$|^XlaModule:#)"


def annotated_steps(events: pl.DataFrame) -> pl.DataFrame:
    """One window per ``StepTraceAnnotation`` (JAX, TensorFlow): host ranges carrying ``step_num``,
    named ``<name>#<step_num>``; ranges of one step number are merged."""
    if "step_num" not in events.columns:
        return empty_steps()
    s = events.filter(pl.col("step_num").is_not_null() & pl.col("kind").is_in(list(MARKER_KINDS))
                      & (pl.col("ph") == "X"))
    if s.height == 0:
        return empty_steps()
    t = (s.group_by("step_num")
         .agg(pl.col("name").cast(pl.String).first().alias("_n"), pl.col("ts").min().alias("start"), pl.col("end").max().alias("end"))
         .select(pl.col("step_num").alias("step"), pl.format("{}#{}", "_n", "step_num").alias("name"), "start", "end",
                 pl.lit(None, dtype=pl.String).alias("kind"), pl.lit(None, dtype=pl.String).alias("phase")))
    return t.select(list(STEP_SCHEMA)).sort("start")


def module_steps(events: pl.DataFrame) -> pl.DataFrame:
    """Without step annotations, a JAX trace's steps are the executions of its XLA module that runs most
    often (ties: the one with the most host time), one window each; executions that overlap in time (one
    program run on several GPUs by one process) are one window."""
    if "hlo_module" not in events.columns:
        return empty_steps()
    m = named(events.lazy().filter(pl.col("kind") == "cpu_op").select("name", "dur", "ts", "end").collect(), MODULE_PATTERN)
    if m.height == 0:
        return empty_steps()
    top = (m.group_by(pl.col("name").cast(pl.String)).agg(pl.len().alias("n"), pl.col("dur").sum().alias("d"))
           .sort(["n", "d", "name"], descending=[True, True, False]).row(0, named=True)["name"])
    hits = m.filter(pl.col("name").cast(pl.String) == top).select(pl.col("name").cast(pl.String), "ts", "end").sort("ts")
    end = hits["end"].to_numpy()
    prev_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], end[:-1]]))
    group = np.cumsum(hits["ts"].to_numpy() >= prev_max)  # a new window where no earlier execution is still running
    hits = (hits.with_columns(pl.Series("_g", group)).group_by("_g", maintain_order=True)
            .agg(pl.col("name").first(), pl.col("ts").min(), pl.col("end").max()).drop("_g"))
    t = hits.with_row_index("step").select(
        pl.col("step").cast(pl.Int64), pl.format("{}#{}", "name", "step").alias("name"), pl.col("ts").alias("start"), "end",
        pl.lit(None, dtype=pl.String).alias("kind"), pl.lit(None, dtype=pl.String).alias("phase"))
    return t.select(list(STEP_SCHEMA))


class StepNumberError(ValueError):
    """A ``ProfilerStep#N`` whose N does not fit int64."""

    def __init__(self, name: str, count: int) -> None:
        super().__init__(f"step {name[:60]!r} has a number that does not fit int64 ({count:,} such steps)")
        self.name = name
        self.count = count


# -- markers -------------------------------------------------------------------------------------------
def _kind_of(m: re.Match[str], preset: str | None) -> str | None:
    g = m.groupdict()
    if preset == "vllm" and g.get("ctx") is not None:
        ctx, gen = int(g["ctx"]), int(g["gen"])
        return "decode" if ctx == 0 else "prefill" if gen == 0 else "mixed"
    for key in ("kind", "kind2"):
        if g.get(key):
            return str(g[key]).lower()
    return None


def marker_steps(events: pl.DataFrame, marker: str) -> tuple[pl.DataFrame, str]:
    """Windows from CPU-side ranges whose name matches ``marker`` (a preset name or a regex)."""
    preset = marker if marker in PRESETS else None
    pattern = PRESETS.get(marker, marker)
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise MarkerError(f"--step-marker {marker!r} is not a valid regular expression ({e})") from None
    cand = events.filter(pl.col("kind").is_in(list(MARKER_KINDS)) & (pl.col("ph") == "X"))
    names = cand["name"].unique().drop_nulls().cast(pl.String).to_list()
    kinds: dict[str, str | None] = {}
    for n in names:  # one regex test per distinct name
        m = rx.search(n)
        if m:
            kinds[n] = _kind_of(m, preset)
    if not kinds:
        return empty_steps(), f"marker:{marker}"
    hits = (
        cand.filter(pl.col("name").is_in(list(kinds)))
        .select(pl.col("name").cast(pl.String), "ts", "end")
        .sort("ts")
    )
    hits = _outermost(hits)
    t = hits.with_row_index("step").select(
        pl.col("step").cast(pl.Int64), "name", pl.col("ts").alias("start"), "end",
        pl.col("name").replace_strict(kinds, default=None, return_dtype=pl.String).alias("kind"),
        pl.lit(None, dtype=pl.String).alias("phase"),
    )
    return t.select(list(STEP_SCHEMA)), f"marker:{marker}"


def _outermost(hits: pl.DataFrame) -> pl.DataFrame:
    """Drop matching ranges nested inside an earlier matching range (windows do not overlap)."""
    if hits.height < 2:
        return hits
    end = hits["end"].to_numpy()
    prev_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], end[:-1]]))
    keep = hits["ts"].to_numpy() >= prev_max
    return hits.filter(pl.Series(keep))


def frequent_annotations(events: pl.DataFrame, n: int = 8) -> list[tuple[str, int]]:
    """The names a step marker could match, most frequent first: the user's ranges (``record_function``) before CPU
    ops (an ATen op listed first, as ``aten::as_strided`` (1096) was, is no step), numbers in names read as ``N``
    (``ProfilerStep#N``, not each step on its own)."""
    ann = events.filter(pl.col("kind").is_in(["user_annotation", "cpu_op"]) & (pl.col("ph") == "X"))
    counts = (ann.group_by(pl.col("name").cast(pl.String).str.replace_all(r"\d+", "N"),
                           (pl.col("kind") == "user_annotation").alias("_user")).len()
              .sort(["_user", "len", "name"], descending=[True, True, False]).head(n))
    return [(str(a), int(c)) for a, _, c in counts.iter_rows()]


# -- automatic windows ------------------------------------------------------------------------------------
def repeating_period(codes: np.ndarray, min_period: int = 2) -> int | None:
    """The repeating unit: the period p with the most codes[i] == codes[i + p] (at least ``PERIOD_MATCH``),
    the smallest one among those within 1% of the best (multiples of a period match about as well).

    Candidates are the distances between consecutive occurrences of the kernel names that occur least
    often (a name launched once per iteration repeats exactly one period later), so only a few periods
    are tested, whatever the length of the sequence.
    """
    n = len(codes)
    if n < 2 * min_period:
        return None
    order = np.argsort(codes, kind="stable")
    sc = codes[order]
    same = sc[1:] == sc[:-1]
    gaps = (order[1:] - order[:-1])[same]
    names = sc[1:][same]
    counts = np.bincount(codes)
    cand: set[int] = set()
    for c in np.unique(counts[counts >= 2])[:12]:  # the rarest repeated names first
        sel = counts[names] == c
        vals, freq = np.unique(gaps[sel], return_counts=True)
        cand.update(int(v) for v in vals[np.argsort(-freq)][:8])
    rates = {p: float((codes[:-p] == codes[p:]).mean()) for p in sorted(v for v in cand if min_period <= v <= n // 2)}
    ok = {p: r for p, r in rates.items() if r >= PERIOD_MATCH}
    if not ok:
        return None
    best = max(ok.values())
    # multiples of the true period match almost as well; a part of it (half a layer) clearly less
    return min(p for p, r in ok.items() if r >= best - 0.01)


#: calls by which the host waits for the device to drain: where one lies between two launches in most periods, the
#: automatic windows start there (a training loop's ``torch.cuda.synchronize()`` or ``loss.item()`` per iteration)
DRAIN_CALLS = r"^((cuda|hip)(DeviceSynchronize|StreamSynchronize)|cu(Ctx|Stream)Synchronize)$"


def drain_ends(events: pl.DataFrame) -> np.ndarray:
    """The ends (ns, sorted) of the host's :data:`DRAIN_CALLS` (runtime and driver calls)."""
    calls = named(events.filter(pl.col("kind").is_in(["runtime", "driver"]) & pl.col("end").is_not_null()), DRAIN_CALLS)
    return np.sort(calls["end"].to_numpy().astype(np.int64, copy=False))


def auto_steps(gpu: pl.DataFrame, drains: np.ndarray | None = None) -> tuple[pl.DataFrame, bool]:
    """Windows from the repeating unit of the kernel sequence, as GPU time ranges; (table, True). ``drains``: the
    sorted ends (ns) of the host's synchronizing calls (:func:`drain_ends`): the windows start at the kernel
    launched after one in most periods where there is such a kernel (:data:`PERIOD_MATCH`), else at the kernel
    with the longest typical GPU gap before it."""
    k = gpu.filter(pl.col("kind") == "kernel")
    if k.height == 0:
        return empty_steps(), False
    # the windows are runs of consecutive kernels in GPU time (a graph launch starts many kernels at once)
    by_gpu = True
    order = "ts"
    k = k.sort(["ts", "dur"])
    n = k.height
    codes = k["name"].cast(pl.String).rank("dense").cast(pl.Int64).to_numpy()
    starts = k[order].to_numpy()
    gpu_start = k["ts"].to_numpy()
    gpu_end = (k["ts"] + k["dur"]).to_numpy()
    p = repeating_period(codes) if n >= 4 else None
    last = max(as_int((gpu["ts"] + gpu["dur"]).max()), int(starts.max()))
    starts = starts.copy()
    starts[0] = min(int(starts[0]), as_int(gpu["ts"].min()))  # memcpys before the first kernel
    if p is None:  # no repeating unit: the whole trace is one window
        t = pl.DataFrame({"step": [0], "name": ["window 0"], "start": [int(starts.min())], "end": [last + 1],
                          "kind": [None], "phase": [None]}, schema=STEP_SCHEMA)
        return t, by_gpu
    # where the steady pattern starts: the first i from which most of the next periods match
    match = np.concatenate([codes[:-p] == codes[p:], np.zeros(p, bool)])
    win = np.convolve(match.astype(np.int32), np.ones(p, np.int32), "valid")[: n - p + 1]
    steady = int(np.argmax(win >= PERIOD_MATCH * p))
    # phase: the offset (within one period) with the longest mean GPU gap before it, among those launched after the
    # host drained the device in most periods where there are such (a CUDA-only recording of a training loop: the
    # gap before the optimizer's kernel was as long as the one before the next forward's first)
    gaps = np.concatenate([[0], gpu_start[1:] - gpu_end[:-1]]).astype(np.float64)
    span = np.arange(steady, n)
    offset = (span - steady) % p
    phase_gap = np.bincount(offset, weights=gaps[span], minlength=p) / np.bincount(offset, minlength=p)
    if drains is not None and len(drains):
        launch = k["launch_ts"].fill_null(-1).to_numpy()
        # a drain ended after the previous kernel's launch and at or before this kernel's (none before the first)
        drained = np.searchsorted(drains, launch, "right")  # the drains ended by each kernel's launch
        after = np.zeros(n, dtype=bool)
        after[1:] = (drained[1:] > drained[:-1]) & (launch[1:] >= 0) & (launch[:-1] >= 0)
        seen = span > 0  # (the first kernel has no launch before it: no drain can be seen there)
        per = np.bincount(offset[seen], minlength=p)
        share = np.bincount(offset[seen], weights=after[span[seen]], minlength=p) / np.maximum(per, 1)
        if share.max() >= PERIOD_MATCH:
            phase_gap = np.where(share >= PERIOD_MATCH, phase_gap, -1.0)
    first = steady + int(np.argmax(phase_gap))
    bounds = list(range(first, n, p))
    rows = []
    if first > 0:
        rows.append((int(starts[0]), int(starts[first]), "warmup"))
    for j, b in enumerate(bounds):
        nxt = bounds[j + 1] if j + 1 < len(bounds) else None
        if nxt is None:
            tail_complete = n - b >= p
            rows.append((int(starts[b]), last + 1, "steady" if tail_complete else "tail"))
        else:
            rows.append((int(starts[b]), int(starts[nxt]), "steady"))
    t = pl.DataFrame(
        {"step": list(range(len(rows))), "name": [f"window {i}" for i in range(len(rows))],
         "start": [r[0] for r in rows], "end": [r[1] for r in rows], "kind": [None] * len(rows),
         "phase": [r[2] for r in rows]},
        schema=STEP_SCHEMA,
    )
    return t, by_gpu


# -- phases ------------------------------------------------------------------------------------------------
def mark_phases(steps: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """``phase`` for steps that have none: steady when a step launches the most common kernel sequence
    (as a multiset of names), warmup before the first such step, irregular after it."""
    if steps.height < 2 or steps["phase"].null_count() == 0:
        return steps
    return phases_of(steps, step_signatures(gpu))


def step_signatures(gpu: pl.DataFrame) -> pl.DataFrame:
    """Per step, the multiset of its kernels' names as one number (``sig``: each name's hash, of its text, times its
    count, summed): two steps that launch the same kernels the same number of times have the same. Of the text, not
    of the interned code, so that the time windows of a profile, each interning its own names, give a step the
    number the whole profile gives it (:func:`phases_of` of their tables concatenated)."""
    k = gpu.select("kind", "step", "name").filter((pl.col("kind") == "kernel") & pl.col("step").is_not_null())
    # (the names counted per step first, each distinct (step, name) then made text: not a string per kernel)
    per = k.group_by("step", "name").agg(pl.len().cast(pl.UInt64).alias("_n"))
    return per.group_by("step").agg(
        (pl.col("name").cast(pl.String).hash() * pl.col("_n")).sum().alias("sig"))


def phases_of(steps: pl.DataFrame, sigs: pl.DataFrame) -> pl.DataFrame:
    """:func:`mark_phases` of ``steps`` from their :func:`step_signatures`."""
    if steps.height < 2 or steps["phase"].null_count() == 0 or sigs.height == 0:
        return steps
    joined = steps.join(sigs, on="step", how="left")
    common = Counter(joined["sig"].drop_nulls().to_list()).most_common(1)
    if not common or common[0][1] < 2:
        return steps
    mode = common[0][0]
    is_steady = (joined["sig"] == mode).fill_null(False).to_list()
    first = is_steady.index(True)
    phases = ["steady" if s else ("warmup" if i < first else "irregular") for i, s in enumerate(is_steady)]
    existing = steps["phase"].to_list()
    return steps.with_columns(pl.Series("phase", [e if e is not None else p for e, p in zip(existing, phases)],
                                        dtype=pl.String))


def find_steps(events: pl.DataFrame, gpu: pl.DataFrame, spec: StepSpec) -> FoundSteps:
    """Step windows per ``spec`` (see the module docstring)."""
    marker = spec.marker
    if marker is None:
        t = profiler_steps(events)
        if t.height:
            return FoundSteps(t, "ProfilerStep")
        t = annotated_steps(events)
        if t.height:
            return FoundSteps(t, ANNOTATED)
        t = module_steps(events)
        if t.height:
            return FoundSteps(t, "XLA module")
        for preset in DEFAULT_CASCADE:
            t, source = marker_steps(events, preset)
            if t.height:
                return FoundSteps(t, source)
        marker = "auto"
    if marker == "auto":
        t, by_gpu = auto_steps(gpu, drain_ends(events))
        return FoundSteps(t, "auto" if t.height else "none", by_gpu)
    if marker == ANNOTATED:
        return FoundSteps(annotated_steps(events), ANNOTATED)
    if marker in ("ProfilerStep", "profilerstep"):
        t = profiler_steps(events)
        return FoundSteps(t, "ProfilerStep")
    t, source = marker_steps(events, marker)
    if t.height == 0:
        top = frequent_annotations(events)
        listed = ", ".join(f"{n[:50]!r} ({c})" for n, c in top) or "none (the trace has no CPU-side annotations)"
        raise MarkerError(f"--step-marker {marker!r} matches no annotation; the most frequent are: {listed}")
    return FoundSteps(t, source)


def assign_steps(gpu: pl.DataFrame, step_table: pl.DataFrame, *, by_gpu_time: bool = False) -> pl.DataFrame:
    """Add ``step`` to GPU rows: the step whose window contains the launch (or the kernel start for
    windows in GPU time); null if none."""
    if step_table.height == 0 or gpu.height == 0:
        return gpu.with_columns(pl.lit(None, dtype=pl.Int64).alias("step"))
    key = gpu["ts" if by_gpu_time else "launch_ts"]
    # the window that starts last at or before each key (of windows starting together, the last in start order), in
    # numpy: the GPU table is not sorted (a sort and an as-of join took 0.14 s of a JAX profile's 1.4 M rows). Steps
    # come from events, whose times are never null
    w = step_table.select("start", "end", "step").sort("start", maintain_order=True)
    starts = w["start"].to_numpy().astype(np.int64)
    ends, ends_ok = w["end"].fill_null(0).to_numpy().astype(np.int64), w["end"].is_not_null().to_numpy()
    k, k_ok = key.fill_null(0).to_numpy().astype(np.int64, copy=False), key.is_not_null().to_numpy()
    numbers = w["step"].cast(pl.Int64)
    values, values_ok = numbers.fill_null(0).to_numpy(), numbers.is_not_null().to_numpy()
    found = window_of(starts, ends, ends_ok, values, values_ok, k, k_ok)
    if found is not None:  # (compiled: the search, checks and gather in one pass)
        number, inside = found
    else:
        at = search_right(starts, k) - 1  # (the rows come nearly in time order: each search starts where the last ended)
        j = np.maximum(at, 0)
        inside = k_ok & (at >= 0) & ends_ok[j] & (k < ends[j]) & values_ok[j]
        number = values[j]
    step = pl.Series("step", number, dtype=pl.Int64)
    if not inside.all():
        return gpu.with_columns(step.set(pl.Series(~inside), None))
    if len(number) > 1 and bool((number[1:] >= number[:-1]).all()):
        # every row in a step and the rows in step order (a JAX profile's): said, so that polars groups by step in runs
        # instead of hashing every row (6.7 M rows by 15,500 steps: 0.04-0.06 -> 0.008 s, in each of the summaries
        # and timelines by step)
        step = step.set_sorted()
    return gpu.with_columns(step)
