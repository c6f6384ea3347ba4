"""Where the profiler's overhead on a GEMM tile goes: the pieces of a record pair, one at a time.

    python benchmarks/bench_gemm_overhead.py [--rounds 7]

Kernel: 4096³ bf16 GEMM, 128×128 tiles (1,024 programs, 8 warps, 3 stages), as in bench_intra. Variants:

- none;
- kernscope: ``Profiler`` record pair around the tile (default ``SYNC=True``), and ``SYNC=False``;
- timers only: two %globaltimer reads around the tile, kept alive by a store that never happens;
- stores only: the four words of a record pair stored at the end of the tile, no timer;
- header load only: the buffer-header load of ``Profiler.create`` and a store that never happens.

Time: triton.testing.do_bench (L2 flushed, median ms), variants interleaved, median over rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from kernscope.intra import Profiler, alloc_profiler_buffer, tid  # noqa: E402
from kernscope.intra.device import globaltimer  # noqa: E402


@triton.jit
def gemm(a, b, c, buf, never, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, V: tl.constexpr):
    pid = tl.program_id(0)
    n_n = tl.cdiv(N, BN)
    pm = pid // n_n
    pn = pid % n_n
    prof = Profiler.create(buf, 0, 1, tid(0) == 0, ENABLE_PROFILING=(V == 1) or (V == 2), SYNC=V == 1)
    if V == 1 or V == 2:
        prof = prof.record(True, 0)
    if V == 3:
        t0 = globaltimer()
    if V == 5:
        hdr = tl.load(buf.to(tl.pointer_type(tl.int64)) + 2)
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
    if V == 1 or V == 2:
        prof = prof.record(False, 0)
    if V == 3:
        t1 = globaltimer()
        tl.store(buf.to(tl.pointer_type(tl.int64)) + 8 + pid, t1 - t0, mask=never != 0)
    if V == 4:
        base = buf.to(tl.pointer_type(tl.int64)) + 8 + pid.to(tl.int64) * 8
        for w in tl.static_range(4):
            tl.store(base + w, pid.to(tl.int64) + w, mask=tid(0) == 0)
    if V == 5:
        tl.store(buf.to(tl.pointer_type(tl.int64)) + 8 + pid, hdr, mask=never != 0)


VARIANTS = {"none": 0, "kernscope (SYNC=True)": 1, "kernscope (SYNC=False)": 2, "timers only": 3, "stores only": 4,
            "header load only": 5}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    m = n = k = 4096
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    tiles = (m // 128) * (n // 128)
    buf = alloc_profiler_buffer(tiles * 2 + 64)
    regs = {}
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(args.rounds):
        for name, v in VARIANTS.items():
            def fn(v: int = v) -> None:
                gemm[(tiles,)](a, b, c, buf, 0, m, n, k, BM=128, BN=128, BK=64, V=v, num_warps=8, num_stages=3)

            times[name].append(triton.testing.do_bench(fn, warmup=25, rep=200))
    for name, v in VARIANTS.items():  # registers per thread of each variant (occupancy)
        try:
            kern = gemm.warmup(a, b, c, buf, 0, m, n, k, BM=128, BN=128, BK=64, V=v, num_warps=8, num_stages=3,
                               grid=(tiles,))
            kern._init_handles()
            regs[name] = kern.n_regs
        except Exception as e:  # noqa: BLE001 - a Triton without these internals: no register count
            regs[name] = f"? ({type(e).__name__})"
    torch.testing.assert_close(c.float(), (a.float() @ b.float()).to(torch.bfloat16).float(), rtol=2e-2, atol=1.0)
    base = statistics.median(times["none"])
    print(f"{torch.cuda.get_device_name()}: 4096³ bf16 GEMM, {tiles} tiles of 128×128, {args.rounds} rounds")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"  {name:24s} {med * 1e3:8.2f} us  {100 * (med / base - 1):+6.2f}%  regs {regs[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
