"""Honest timing: L2 flushed before every timed call, CUDA events, robust statistics, raw samples kept.

``warmup`` and ``rep`` are **milliseconds** of GPU time (like ``triton.testing.do_bench``), turned into
call counts from a first estimate of one call's duration.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .stats import median_ci

FLUSH_ANNOTATION = "kernscope::l2_flush"
MIN_REPS = 5
MAX_REPS = 10_000
CPU_FLUSH_CAP = 64 << 20


@dataclass
class Timing:
    """Per-call times in **milliseconds**. ``samples_ms`` are the raw measurements, in order."""

    samples_ms: list[float] = field(default_factory=list)
    median_ms: float = math.nan
    mean_ms: float = math.nan
    min_ms: float = math.nan
    max_ms: float = math.nan
    iqr_ms: float = math.nan
    mad_ms: float = math.nan
    outliers: int = 0
    method: str = "cuda_events"
    ci_low_ms: float = math.nan  #: 95% confidence interval of the median
    ci_high_ms: float = math.nan
    #: median SM clock (MHz) while the samples ran (per sample: the mean of the readings around its batch)
    sm_mhz_median: float = math.nan
    #: SM-clock-normalized median: median of ``sample × its SM clock / ref_sm_mhz`` (ms). What the call would take
    #: at the card's maximum clock if its time scaled with the SM clock: right for compute-bound kernels, an
    #: over-correction for memory-bound ones (the memory clock does not move with the SM clock).
    at_ref_clock_ms: float = math.nan
    ref_sm_mhz: float = math.nan

    @property
    def spread(self) -> float:
        """Robust relative spread: 1.4826 * MAD / median (≈ the coefficient of variation for normal data)."""
        return 1.4826 * self.mad_ms / self.median_ms if self.median_ms else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "median_ms": self.median_ms, "mean_ms": self.mean_ms, "min_ms": self.min_ms, "max_ms": self.max_ms,
            "iqr_ms": self.iqr_ms, "mad_ms": self.mad_ms, "spread": self.spread, "outliers": self.outliers,
            "n": len(self.samples_ms), "method": self.method, "ci_low_ms": self.ci_low_ms, "ci_high_ms": self.ci_high_ms,
            "sm_mhz_median": self.sm_mhz_median, "at_ref_clock_ms": self.at_ref_clock_ms, "ref_sm_mhz": self.ref_sm_mhz,
            "samples_ms": self.samples_ms,
        }

    def with_clocks(self, sm_mhz: list[float], ref_mhz: float | None) -> Timing:
        """This timing with the SM clock of every sample (MHz, NaN where unknown) and the normalized median."""
        known = [f for f in sm_mhz if not math.isnan(f)]
        if len(sm_mhz) != len(self.samples_ms) or not known:
            return self
        if not ref_mhz or len(known) != len(sm_mhz):
            return replace(self, sm_mhz_median=statistics.median(known))
        return replace(self, sm_mhz_median=statistics.median(known), ref_sm_mhz=ref_mhz,
                       at_ref_clock_ms=statistics.median(t * f / ref_mhz for t, f in zip(self.samples_ms, sm_mhz)))


def summarize(samples: list[float], method: str = "cuda_events") -> Timing:
    """Median and robust spread; outliers (beyond 5 scaled MADs) are counted, not removed from ``samples``."""
    if not samples:
        return Timing(method=method)
    s = sorted(samples)
    med = statistics.median(s)
    mad = statistics.median([abs(x - med) for x in s])
    q1, q3 = (statistics.quantiles(s, n=4)[0], statistics.quantiles(s, n=4)[2]) if len(s) >= 4 else (s[0], s[-1])
    limit = 5 * 1.4826 * mad
    kept = [x for x in s if abs(x - med) <= limit] if mad > 0 else s
    lo, hi = median_ci(s)
    return Timing(list(samples), med, statistics.fmean(kept), s[0], s[-1], q3 - q1, mad, len(s) - len(kept), method, lo, hi)


class L2Flusher:
    """Writes a buffer larger than the last-level cache before each timed call.

    GPU: 2x the device's L2 (``torch.cuda.get_device_properties().L2_cache_size``). CPU: 2x the L3,
    at most 64 MB.
    The write runs under the ``kernscope::l2_flush`` profiler annotation, so traces show it as such.
    """

    def __init__(self, device: str) -> None:
        import torch

        self.device = device
        if device.startswith("cuda"):
            l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (50 << 20))
            self.bytes = 2 * l2
        else:  # capped: a CPU flush of several hundred MB would dominate every sample
            self.bytes = min(2 * _cpu_llc_bytes(), CPU_FLUSH_CAP)
        self.buffer = torch.empty(self.bytes // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        import torch

        with torch.profiler.record_function(FLUSH_ANNOTATION):
            self.buffer.zero_()


def _cpu_llc_bytes() -> int:
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            txt = f.read().strip().upper()
        mult = {"K": 1 << 10, "M": 1 << 20}.get(txt[-1], 1)
        return int(txt.rstrip("KM")) * mult
    except (OSError, ValueError):
        return 32 << 20


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def estimate_ms(fn: Callable[[], Any], device: str, flusher: L2Flusher | None, n: int = 5) -> float:
    """Median of a few flushed calls (ms), after one untimed call."""
    fn()
    _sync(device)
    return bench(fn, device=device, flusher=flusher, reps=n).median_ms


def launch_shield_cycles(fn: Callable[[], Any], device: str) -> int:
    """GPU cycles to spin before each timed call so the CPU has queued flush + call before the GPU gets there.

    Without it a call whose host-side launch takes longer than the flush (Python dispatch, Triton's
    launcher: tens of µs) is timed with the GPU idling for its launch: latency = launch overhead, not
    GPU time. The spin is not inside the timed region.
    """
    import torch

    if not hasattr(torch.cuda, "_sleep"):
        return 0
    t0 = time.perf_counter()
    fn()
    host_us = (time.perf_counter() - t0) * 1e6
    torch.cuda.synchronize(device)
    props = torch.cuda.get_device_properties(device)
    khz = getattr(props, "clock_rate", 0) or 2_000_000  # kHz
    return int((2 * host_us + 50) * khz / 1000)


class _CudaTimer:
    """CUDA events around each call: GPU time of the call alone."""

    method = "cuda_events"

    def __init__(self, n: int) -> None:
        import torch

        self.starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        self.ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]

    def start(self, i: int) -> None:
        self.starts[i].record()

    def stop(self, i: int) -> None:
        self.ends[i].record()

    def samples_ms(self, device: str) -> list[float]:
        _sync(device)
        return [s.elapsed_time(e) for s, e in zip(self.starts, self.ends)]


class _WallTimer:
    """Host clock around each call (CPU devices)."""

    method = "perf_counter"

    def __init__(self, n: int) -> None:
        self.t = [0] * (2 * n)

    def start(self, i: int) -> None:
        self.t[2 * i] = time.perf_counter_ns()

    def stop(self, i: int) -> None:
        self.t[2 * i + 1] = time.perf_counter_ns()

    def samples_ms(self, device: str) -> list[float]:
        return [(self.t[2 * i + 1] - self.t[2 * i]) / 1e6 for i in range(len(self.t) // 2)]


def call_loop(fn: Callable[[], Any], n: int, *, flusher: L2Flusher | None = None,
              before: Callable[[], None] | None = None, shield: int = 0, timer: Any = None,
              after: Callable[[], None] | None = None) -> None:
    """The one flush-then-call loop: ``n`` times ``before``, GPU spin, flush, [timer start], call, [timer stop], ``after``.

    Warm-up, timed repetitions and profiled iterations all run through it, so they do the same work.
    """
    spin = None
    if shield:
        import torch

        spin = torch.cuda._sleep
    for i in range(n):
        if before is not None:
            before()
        if spin is not None:
            spin(shield)
        if flusher is not None:
            flusher()
        if timer is not None:
            timer.start(i)
        fn()
        if timer is not None:
            timer.stop(i)
        if after is not None:
            after()


def bench(fn: Callable[[], Any], *, device: str, flusher: L2Flusher | None, reps: int,
          before: Callable[[], None] | None = None, shield: int | None = None) -> Timing:
    """Time ``reps`` calls, each after a flush (and ``before``, e.g. clearing grads), one sample per call.

    On CUDA each call is preceded by a GPU spin of ``shield`` cycles (default: sized from the call's
    host launch time) so the measured interval holds GPU work only, not launch latency.
    """
    cuda = device.startswith("cuda")
    if cuda and shield is None:
        shield = launch_shield_cycles(fn, device)
    timer = _CudaTimer(reps) if cuda else _WallTimer(reps)
    call_loop(fn, reps, flusher=flusher, before=before, shield=(shield or 0) if cuda else 0, timer=timer)
    return summarize(timer.samples_ms(device), timer.method)


@dataclass
class Prepared:
    """A callable warmed up and ready to be timed in batches: its first estimate (ms) and launch shield."""

    fn: Callable[[], Any]
    before: Callable[[], None] | None
    est_ms: float
    shield: int


def prepare(fn: Callable[[], Any], *, device: str, warmup: float, flusher: L2Flusher | None,
            before: Callable[[], None] | None = None) -> Prepared:
    """Estimate one call, warm up for ``warmup`` ms, size the launch shield."""
    est = max(estimate_ms(fn, device, flusher), 1e-4)
    call_loop(fn, max(1, int(warmup / est)), flusher=flusher, before=before)
    _sync(device)
    shield = launch_shield_cycles(fn, device) if device.startswith("cuda") else 0
    return Prepared(fn, before, est, shield)


def reps_for(p: Prepared, rep_ms: float) -> int:
    return min(MAX_REPS, max(MIN_REPS, int(rep_ms / p.est_ms)))


def measure_batches(items: dict[str, Prepared], reps: dict[str, int], *, device: str, flusher: L2Flusher | None,
                    batch_ms: float | None, read: Callable[[], Any] | None = None,
                    on_reading: Callable[[str, Any], None] | None = None,
                    sm_mhz: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Time every item ``reps[name]`` times, in batches of about ``batch_ms`` of calls, round-robin over the
    items (each round starts one item later), so drift over time hits every item alike. ``batch_ms`` None: one
    item after the other. ``read`` (e.g. the GPU's clocks) is called before and after every batch and handed
    to ``on_reading(name, reading)``; with ``sm_mhz`` given, each sample's SM clock (the mean of the two
    readings around its batch, NaN if unknown) is appended there. Returns the per-call samples (ms) of each item."""
    samples: dict[str, list[float]] = {k: [] for k in items}
    names = list(items)
    r = 0
    while any(len(samples[k]) < reps[k] for k in names):
        order = names[r % len(names):] + names[: r % len(names)]
        r += 1
        for k in order:
            left = reps[k] - len(samples[k])
            if left <= 0:
                continue
            p = items[k]
            size = left if batch_ms is None else max(1, min(left, int(round(batch_ms / p.est_ms))))
            r0 = read() if read is not None else None
            if on_reading is not None and read is not None:
                on_reading(k, r0)
            t = bench(p.fn, device=device, flusher=flusher, reps=size, before=p.before, shield=p.shield)
            r1 = read() if read is not None else None
            if on_reading is not None and read is not None:
                on_reading(k, r1)
            samples[k].extend(t.samples_ms)
            if sm_mhz is not None:
                f0, f1 = getattr(r0, "sm_mhz", None), getattr(r1, "sm_mhz", None)
                f = (f0 + f1) / 2 if f0 is not None and f1 is not None else math.nan
                sm_mhz.setdefault(k, []).extend([f] * len(t.samples_ms))
    return samples


def do_bench(fn: Callable[[], Any], *, device: str, warmup: float = 25.0, rep: float = 100.0,
             flusher: L2Flusher | None = None, before: Callable[[], None] | None = None) -> Timing:
    """Warm up for ``warmup`` ms, then time for about ``rep`` ms of calls (each flushed)."""
    p = prepare(fn, device=device, warmup=warmup, flusher=flusher, before=before)
    return bench(fn, device=device, flusher=flusher, reps=reps_for(p, rep), before=before, shield=p.shield)


def do_bench_cudagraph(fn: Callable[[], Any], *, device: str, rep: float = 100.0, flusher: L2Flusher | None = None,
                       replays: int = 10) -> Timing:
    """CUDA-graph timing: ``k`` (flush, call) pairs captured in one graph, minus a graph of ``k`` flushes.

    The flush happens inside the graph (as it does in the eager path) and its cost is subtracted.
    Each sample is one replay's per-call average.
    """
    import torch

    if not device.startswith("cuda"):
        raise RuntimeError("--cudagraph needs a CUDA device")
    est = max(estimate_ms(fn, device, flusher), 1e-4)
    k = min(1000, max(1, int(rep / replays / est)))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up on a side stream before capture (required by CUDA graphs)
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g_work, g_flush = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(g_work):
        for _ in range(k):
            if flusher is not None:
                flusher.buffer.zero_()
            fn()
    with torch.cuda.graph(g_flush):
        for _ in range(k):
            if flusher is not None:
                flusher.buffer.zero_()

    def time_graph(g: Any) -> list[float]:
        out = []
        for _ in range(replays):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            g.replay()
            b.record()
            torch.cuda.synchronize(device)
            out.append(a.elapsed_time(b))
        return out

    g_work.replay()
    g_flush.replay()
    torch.cuda.synchronize(device)
    work = time_graph(g_work)
    flush = statistics.median(time_graph(g_flush))
    return summarize([(w - flush) / k for w in work], "cudagraph")
