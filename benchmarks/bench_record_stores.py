"""What the profiler's record stores cost, by their placement in a region (an experiment for the buffer layout).

    python benchmarks/bench_record_stores.py [--rounds 5]

The 256 MB copy as 65,536 one-tile programs, each program also writing four int64 words (what one record
pair costs today: region header T0 and SM id, start and end records) into its own 64-byte region of a side
buffer, by thread 0, at different word offsets:

- none: no side writes;
- layout v1: words 1, 3, 6, 7 (today's: header T0/SMID, then the records) — two partly written 32-byte sectors;
- one sector: words 0, 1, 2, 3 — one fully written sector;
- records only: words 6, 7.

Time: triton.testing.do_bench (L2 flushed, median ms), variants interleaved, median over rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def copy_and_mark(src, dst, side, N, BLOCK: tl.constexpr, W0: tl.constexpr, W1: tl.constexpr, W2: tl.constexpr,
                  W3: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)
    base = side + pid.to(tl.int64) * 8
    v = pid.to(tl.int64) + 1
    if W0 >= 0:
        tl.store(base + W0, v)
    if W1 >= 0:
        tl.store(base + W1, v)
    if W2 >= 0:
        tl.store(base + W2, v)
    if W3 >= 0:
        tl.store(base + W3, v)


VARIANTS = {
    "none": (-1, -1, -1, -1),
    "layout v1 (words 1,3,6,7)": (1, 3, 6, 7),
    "one sector (words 0-3)": (0, 1, 2, 3),
    "records only (words 6,7)": (6, 7, -1, -1),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    block = 1024
    n = 256 * (1 << 20) // 4
    programs = n // block
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    side = torch.zeros(programs * 8, dtype=torch.int64, device="cuda")
    times: dict[str, list[float]] = {k: [] for k in VARIANTS}
    for _ in range(args.rounds):
        for name, w in VARIANTS.items():
            fn = lambda w=w: copy_and_mark[(programs,)](src, dst, side, n, BLOCK=block, W0=w[0], W1=w[1], W2=w[2],  # noqa: E731
                                                        W3=w[3])
            times[name].append(triton.testing.do_bench(fn, warmup=25, rep=200))
    assert torch.equal(src, dst)
    base = statistics.median(times["none"])
    print(f"{torch.cuda.get_device_name()}: 256 MB copy, {programs:,} programs, 4 int64 side writes each")
    for name, ts in times.items():
        m = statistics.median(ts)
        print(f"  {name:28s} {m * 1e3:8.2f} us  {100 * (m / base - 1):+6.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
