"""Intra-kernel profiler overhead on a real GPU: uninstrumented vs kernscope vs Proton instrumentation.

For a memory-bound tile copy (256 MB split into N one-tile programs) and a GEMM-like kernel (one
start/end pair per output tile), measures in one run:

- kernel GPU time: median kernel duration from a PyTorch-profiler (Kineto) trace, read by kernscope;
- end-to-end cost of one profiled launch: reset + launch + buffer readback + decode (kernscope), or
  ``proton.start`` + launch + ``proton.finalize`` (Proton).

Usage: ``python benchmarks/bench_intra.py [--out results.json] [--reps 30]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
import kernscope  # noqa: E402
from kernscope.intra import Profiler, tid  # noqa: E402
from kernscope.intra.host import alloc_profiler_buffer, reset_profiler_buffer  # noqa: E402

try:
    import triton.profiler as proton
    import triton.profiler.language as ppl

    try:
        ppl.enable_semantic("triton")
    except Exception:  # noqa: BLE001 - older/newer Proton without this switch
        pass
    HAVE_PROTON = True
except Exception:  # noqa: BLE001
    HAVE_PROTON = False
    ppl = None


@triton.jit
def copy_tiles(src, dst, buf, TILE: tl.constexpr, BLOCK: tl.constexpr, MODE: tl.constexpr, SYNC: tl.constexpr = True):
    """MODE 0: uninstrumented, 1: kernscope records, 2: Proton scope (same place in the code)."""
    pid = tl.program_id(0)
    prof = Profiler.create(buf, 0, 1, tid(0) == 0, ENABLE_PROFILING=MODE == 1, SYNC=SYNC)
    if MODE == 1:
        prof = prof.record(True, 0)
    if MODE == 2:
        ppl.enter_scope("tile")
    base = pid.to(tl.int64) * TILE
    for i in range(0, TILE, BLOCK):
        offs = base + i + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs))
    if MODE == 2:
        ppl.exit_scope("tile")
    if MODE == 1:
        prof = prof.record(False, 0)


@triton.jit
def gemm_tiles(a, b, c, buf, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, MODE: tl.constexpr,
               SYNC: tl.constexpr = True):
    pid = tl.program_id(0)
    n_n = tl.cdiv(N, BN)
    pm = pid // n_n
    pn = pid % n_n
    prof = Profiler.create(buf, 0, 1, tid(0) == 0, ENABLE_PROFILING=MODE == 1, SYNC=SYNC)
    if MODE == 1:
        prof = prof.record(True, 0)
    if MODE == 2:
        ppl.enter_scope("tile")
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * K + rk[None, :]
    pb = b + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(pa), tl.load(pb), acc)
        pa += BK
        pb += BK * N
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))
    if MODE == 2:
        ppl.exit_scope("tile")
    if MODE == 1:
        prof = prof.record(False, 0)


def kernel_times_us(launch, reps: int, tmp: str, tag: str) -> list[float]:
    """Durations (µs) of every kernel launched by ``launch`` under the PyTorch profiler, via kernscope."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            launch()
        torch.cuda.synchronize()
    path = os.path.join(tmp, f"{tag}.json")
    prof.export_chrome_trace(path)
    t = kernscope.load(path, cache=False)
    k = t.kernels.filter(~t.kernels["name"].cast(str).str.contains("(?i)fill|zero|memset"))
    return [d / 1000 for d in k["dur"].to_list()]


ROUNDS = 4


def med(x: list[float]) -> float:
    return statistics.median(x) if x else float("nan")


def bench_case(name: str, launch_for_mode, n_programs: int, reps: int, tmp: str, results: dict, nosync_launch=None) -> None:
    row: dict = {"case": name, "programs": n_programs, "records": 2 * n_programs}
    buf = alloc_profiler_buffer(max(2 * n_programs, 16))
    # alternate the variants over several rounds so clock/thermal drift does not favour either
    samples: dict[str, list[float]] = {"none": [], "kernscope": []}
    for rnd in range(ROUNDS):
        for mode, label in ((0, "none"), (1, "kernscope")) if rnd % 2 == 0 else ((1, "kernscope"), (0, "none")):
            fn = launch_for_mode(mode, buf)
            fn()
            torch.cuda.synchronize()
            samples[label] += kernel_times_us(fn, reps, tmp, f"{name}_{label}_{rnd}")
    for label, xs in samples.items():
        row[f"{label}_us"] = med(xs)
    # kernscope end to end: reset + launch + readback + decode
    fn = launch_for_mode(1, buf)
    e2e, parts = [], []
    from kernscope.intra import decode_buffer
    from kernscope.intra.host import read_profiler_buffer

    for _ in range(10):
        t0 = time.perf_counter()
        reset_profiler_buffer(buf)
        fn()
        t1 = time.perf_counter()
        host = read_profiler_buffer(buf, copy=False)  # waits for the kernel
        t2 = time.perf_counter()
        d = decode_buffer(host, ["tile"])
        t3 = time.perf_counter()
        e2e.append((t3 - t0) * 1e3)
        parts.append(((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3))
    row["kernscope_e2e_ms"] = med(e2e)
    row["tile_p50_us"] = float(d.tasks["duration_ns"].median()) / 1000 if d.tasks.height else None
    if nosync_launch is not None:  # the same records without the block-wide barrier
        fn_ns = nosync_launch(buf)
        fn_ns()
        torch.cuda.synchronize()
        row["kernscope_nosync_us"] = med(kernel_times_us(fn_ns, reps, tmp, f"{name}_nosync"))
        row["kernscope_nosync_overhead_pct"] = 100 * (row["kernscope_nosync_us"] / row["none_us"] - 1)
    row["kernscope_e2e_parts_ms"] = {k: med([p[i] for p in parts]) for i, k in enumerate(("reset_launch", "wait_readback", "decode"))}
    row["kernscope_decoded_tasks"] = d.tasks.height
    row["kernscope_dropped"] = d.dropped
    row["kernscope_overhead_pct"] = 100 * (row["kernscope_us"] / row["none_us"] - 1)
    if HAVE_PROTON:
        try:
            fn = launch_for_mode(2, buf)
            times = []
            e2e_p = []
            for i in range(3):
                t0 = time.perf_counter()
                proton.start(os.path.join(tmp, f"proton_{name}_{i}"), data="trace", backend="instrumentation")
                if i == 0:
                    fn()  # compile with instrumentation inside the session
                    torch.cuda.synchronize()
                    proton.finalize()
                    continue
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                torch.cuda.synchronize()
                times.append(s.elapsed_time(e) * 1e3)
                proton.finalize()
                e2e_p.append((time.perf_counter() - t0) * 1e3)
            row["proton_event_us"] = med(times)
            row["proton_e2e_ms"] = med(e2e_p)
            # kernel time from Kineto is the metric; CUPTI may be shared with Proton, so try it and say which was used
            try:
                proton.start(os.path.join(tmp, f"proton_{name}_k"), data="trace", backend="instrumentation")
                kt = kernel_times_us(fn, reps, tmp, f"{name}_proton")
                proton.finalize()
                row["proton_us"] = med(kt)
                row["proton_time_source"] = "kineto"
            except Exception as e:  # noqa: BLE001 - Kineto and Proton share CUPTI; report the failure, no number
                row["proton_us"] = None
                row["proton_time_source"] = f"not measured (Kineto failed under Proton: {type(e).__name__})"
                try:
                    proton.finalize()
                except Exception:  # noqa: BLE001
                    pass
            # same-method baseline for the event-timed number
            fn0 = launch_for_mode(0, buf)
            ev = []
            for _ in range(reps):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                fn0()
                e.record()
                torch.cuda.synchronize()
                ev.append(s.elapsed_time(e) * 1e3)
            row["none_event_us"] = med(ev)
            row["proton_overhead_pct"] = 100 * (row["proton_us"] / row["none_us"] - 1) if row["proton_us"] else None
        except Exception as e:  # noqa: BLE001
            row["proton_error"] = f"{type(e).__name__}: {e}"[:300]
            traceback.print_exc()
    results["cases"].append(row)
    print(json.dumps(row), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench_intra.json")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--copies", default="65536,16384,4096,1024", help="program counts of the copy cases ('' for none)")
    args = ap.parse_args()
    dev = torch.cuda.get_device_properties(0)
    results: dict = {"gpu": dev.name, "sms": dev.multi_processor_count, "torch": torch.__version__,
                     "triton": triton.__version__, "proton": HAVE_PROTON, "cases": []}
    tmp = tempfile.mkdtemp(prefix="kernscope-intra-")
    n = 64 * 2**20  # 256 MB of fp32
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    for programs in [int(x) for x in args.copies.split(",") if x]:
        tile = n // programs
        block = min(tile, 4096)

        def launch_for_mode(mode, buf, programs=programs, tile=tile, block=block):
            return lambda: copy_tiles[(programs,)](src, dst, buf, TILE=tile, BLOCK=block, MODE=mode)

        def nosync(buf, programs=programs, tile=tile, block=block):
            return lambda: copy_tiles[(programs,)](src, dst, buf, TILE=tile, BLOCK=block, MODE=1, SYNC=False)

        bench_case(f"copy_256MB_{programs}_programs", launch_for_mode, programs, args.reps, tmp, results, nosync)
    m = nn = kk = 4096
    a = torch.randn(m, kk, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(kk, nn, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, nn, device="cuda", dtype=torch.bfloat16)
    tiles = (m // 128) * (nn // 128)

    def gemm_launch(mode, buf):
        return lambda: gemm_tiles[(tiles,)](a, b, c, buf, m, nn, kk, BM=128, BN=128, BK=64, MODE=mode, num_warps=8, num_stages=3)

    def gemm_nosync(buf):
        return lambda: gemm_tiles[(tiles,)](a, b, c, buf, m, nn, kk, BM=128, BN=128, BK=64, MODE=1, SYNC=False,
                                            num_warps=8, num_stages=3)

    bench_case("gemm_4096_bf16_tile128", gemm_launch, tiles, args.reps, tmp, results, gemm_nosync)
    # ENABLE_PROFILING=False costs nothing: the generated code has no timer reads
    buf = alloc_profiler_buffer(16)
    k0 = copy_tiles[(4,)](src, dst, buf, TILE=4096, BLOCK=4096, MODE=0)
    k1 = copy_tiles[(4,)](src, dst, buf, TILE=4096, BLOCK=4096, MODE=1)
    results["ptx_disabled_has_globaltimer"] = "globaltimer" in k0.asm["ptx"]
    results["ptx_enabled_has_globaltimer"] = "globaltimer" in k1.asm["ptx"]
    results["ptx_lines_disabled"] = len(k0.asm["ptx"].splitlines())
    results["ptx_lines_enabled"] = len(k1.asm["ptx"].splitlines())
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(json.dumps({k: v for k, v in results.items() if k != "cases"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
