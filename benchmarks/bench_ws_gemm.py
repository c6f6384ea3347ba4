"""Warp-specialized Gluon GEMM (tests/data/gluon_ws_gemm.py) on a Hopper GPU: the cost of kernscope's scopes per
warp group against Proton's scopes of the same names, and what the records say (producer/consumer overlap).

Variants, interleaved over ``--rounds`` rounds, each timed as CUDA events around 20 back-to-back launches (median of
15 batches): ``plain`` (no instrumentation), ``kernscope`` (a Profiler per warp group, %globaltimer, no barrier),
``kernscope_cycles`` (the same with %clock64), ``proton`` (Proton's ``enter_scope``/``exit_scope`` in both partitions,
inside a Proton instrumentation session, in a child process: plain and Proton interleaved there).

    python benchmarks/bench_ws_gemm.py [--m 4096 --n 4096 --k 4096] [--rounds 3] [--out result.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import polars as pl
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "data"))
import gluon_ws_gemm as W  # noqa: E402
from gpu_timing import timed  # noqa: E402

from kernscope.intra.host import alloc_profiler_buffer, decode_profiler_buffer  # noqa: E402
from kernscope.intra.stats import group_overlap, task_stats  # noqa: E402


def _inputs(a: argparse.Namespace) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return (torch.randn(a.m, a.k, device="cuda", dtype=torch.float16),
            torch.randn(a.k, a.n, device="cuda", dtype=torch.float16))


def proton_child(a: argparse.Namespace) -> int:
    """The Proton variant, in a process of its own (a kernel that never finishes can only be ended with its
    process): plain and Proton-instrumented launches interleaved, inside a Proton instrumentation session."""
    import triton.profiler as proton

    x, y = _inputs(a)
    out: dict[str, list[float]] = {"plain": [], "proton": []}
    proton.start(os.path.join(tempfile.mkdtemp(), "ws"), data="trace", backend="instrumentation")
    try:
        ok = bool(torch.allclose(W.ws_gemm(x, y, proton=True).float(), x.float() @ y.float(), rtol=1e-2, atol=0.5))
        for _ in range(a.rounds):
            out["plain"].append(timed(lambda: W.ws_gemm(x, y)))
            out["proton"].append(timed(lambda: W.ws_gemm(x, y, proton=True)))
    finally:
        proton.finalize()
    print(json.dumps({"rounds": out, "correct": ok}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--proton-timeout", type=float, default=120.0, help="seconds before the Proton child is ended")
    ap.add_argument("--out")
    ap.add_argument("--proton-child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.proton_child:
        return proton_child(a)
    import subprocess

    import triton

    x, y = _inputs(a)
    ref = x.float() @ y.float()
    ctas, steps = (a.m // 128) * (a.n // 128), a.k // 64
    buf = alloc_profiler_buffer(ctas * 2 * (4 * steps + 8) + 64)
    res: dict = {"gpu": torch.cuda.get_device_name(), "m": a.m, "n": a.n, "k": a.k, "ctas": ctas, "k_steps": steps,
                 "torch": torch.__version__, "triton": triton.__version__}
    res["correct"] = {"plain": bool(torch.allclose(W.ws_gemm(x, y).float(), ref, rtol=1e-2, atol=0.5)),
                      "kernscope": bool(torch.allclose(W.ws_gemm(x, y, buf).float(), ref, rtol=1e-2, atol=0.5))}
    print("correct:", res["correct"], file=sys.stderr, flush=True)
    times: dict[str, list[float]] = {"plain": [], "kernscope": [], "kernscope_cycles": []}
    for _ in range(a.rounds):
        times["plain"].append(timed(lambda: W.ws_gemm(x, y)))
        times["kernscope_cycles"].append(timed(lambda: W.ws_gemm(x, y, buf, cycles=True)))
        times["kernscope"].append(timed(lambda: W.ws_gemm(x, y, buf)))  # last: the buffer keeps %globaltimer records
    print("kernscope rounds:", times, file=sys.stderr, flush=True)
    res["kernel_us"] = {k: statistics.median(v) for k, v in times.items()}
    res["kernel_us_rounds"] = times
    plain = res["kernel_us"]["plain"]
    res["overhead_pct"] = {k: round(100.0 * (v / plain - 1.0), 2) for k, v in res["kernel_us"].items() if k != "plain"}
    res["tflops"] = {k: round(2.0 * a.m * a.n * a.k / (v * 1e-6) / 1e12, 1) for k, v in res["kernel_us"].items()}
    torch.cuda.synchronize()
    d = decode_profiler_buffer(buf, kernels=[W._consumer, W._producer])  # the last kernscope launch's records
    res["records"] = {"tasks": d.tasks.height, "dropped": d.dropped, "unpaired": d.unpaired}
    res["tasks"] = task_stats(d.tasks).with_columns(pl.col("task").cast(pl.String)).to_dicts()
    totals, _ = group_overlap(d.tasks)
    res["group_overlap"] = totals.to_dicts()
    cmd = [sys.executable, __file__, "--proton-child", "--m", str(a.m), "--n", str(a.n), "--k", str(a.k),
           "--rounds", str(a.rounds)]
    try:
        child = subprocess.run(cmd, capture_output=True, text=True, timeout=a.proton_timeout)
        if child.returncode == 0:
            pr = json.loads(child.stdout.strip().splitlines()[-1])
            res["proton"] = {"correct": pr["correct"], "rounds": pr["rounds"],
                             "kernel_us": {k: statistics.median(v) for k, v in pr["rounds"].items()}}
            ku = res["proton"]["kernel_us"]
            res["overhead_pct"]["proton"] = round(100.0 * (ku["proton"] / ku["plain"] - 1.0), 2)
        else:
            tail = [ln for ln in (child.stderr + child.stdout).strip().splitlines() if ln.strip()][-4:]
            res["proton_error"] = f"exit status {child.returncode}: " + " | ".join(tail)[:600]
    except subprocess.TimeoutExpired:
        res["proton_error"] = (f"Proton's scopes in the warp-specialized partitions: the instrumented kernel did not "
                               f"finish within {a.proton_timeout:.0f} s (its process was ended)")
    print(json.dumps(res, indent=1, default=str))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
