"""Cost of warp sampling and of named scopes on a GPU, one run, variants interleaved.

    python benchmarks/bench_warps.py [--out bench_warps.json] [--rounds 5]

Kernel: the 256 MB copy as 65,536 one-tile programs (one record pair per program, the overhead goal's case).
Variants: no profiling (ENABLE_PROFILING=False), the leader thread recording task 0 (SYNC=True, the default,
and SYNC=False), a named scope (enter/exit) instead of task 0, and 4-warp sampling (WARP_IDS=(0, 1, 2, 3)).
Time: triton.testing.do_bench (L2 flushed, median ms), the variants interleaved round after round; the
table gives the median over rounds and the overhead against no profiling.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from kernscope.intra import Profiler, alloc_profiler_buffer, tid  # noqa: E402
from kernscope.intra.host import decode_profiler_buffer  # noqa: E402


@triton.jit
def copy_tiles(src, dst, buf, N, BLOCK: tl.constexpr, ENABLE: tl.constexpr, SYNC: tl.constexpr, SCOPE: tl.constexpr,
               WARPS: tl.constexpr):
    prof = Profiler.create(buf, 0, 1, is_leader=(tid(0) == 0), ENABLE_PROFILING=ENABLE, SYNC=SYNC, WARP_IDS=WARPS)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if SCOPE:
        prof = prof.enter("tile")
    else:
        prof = prof.record(True, 0)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < N), mask=offs < N)
    if SCOPE:
        prof = prof.exit("tile")
    else:
        prof = prof.record(False, 0)


VARIANTS = {
    "none": dict(ENABLE=False, SYNC=True, SCOPE=False, WARPS=None),
    "leader (SYNC=True)": dict(ENABLE=True, SYNC=True, SCOPE=False, WARPS=None),
    "leader (SYNC=False)": dict(ENABLE=True, SYNC=False, SCOPE=False, WARPS=None),
    "named scope (SYNC=True)": dict(ENABLE=True, SYNC=True, SCOPE=True, WARPS=None),
    "4 warps (0,1,2,3)": dict(ENABLE=True, SYNC=True, SCOPE=False, WARPS=(0, 1, 2, 3)),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench_warps.json")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    block = 1024
    n = 256 * (1 << 20) // 4
    programs = n // block
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    buf = alloc_profiler_buffer(programs * 4 * 2 + 64)

    def launch(v: dict) -> None:
        copy_tiles[(programs,)](src, dst, buf, n, BLOCK=block, **v)

    for name, v in VARIANTS.items():  # compile, check, and check what was recorded
        launch(v)
        torch.cuda.synchronize()
        assert torch.equal(src, dst), name
        if v["ENABLE"]:
            d = decode_profiler_buffer(buf, kernels=[copy_tiles])
            want = programs * (4 if v["WARPS"] else 1)
            assert d.tasks.height == want and d.dropped == 0, (name, d.tasks.height, want, d.dropped)
    times: dict[str, list[float]] = {k: [] for k in VARIANTS}
    for _ in range(args.rounds):
        for name, v in VARIANTS.items():
            times[name].append(triton.testing.do_bench(lambda v=v: launch(v), warmup=25, rep=200))
    base = statistics.median(times["none"])
    rows = []
    print(f"{torch.cuda.get_device_name()}: copy of 256 MB as {programs:,} one-tile programs, {args.rounds} rounds")
    for name, ts in times.items():
        m = statistics.median(ts)
        rows.append({"variant": name, "median_ms": m, "rounds_ms": ts, "overhead_pct": 100 * (m / base - 1)})
        print(f"  {name:26s} {m * 1e3:9.2f} us   {100 * (m / base - 1):+6.2f}%   (rounds {min(ts) * 1e3:.2f}-{max(ts) * 1e3:.2f})")
    Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "programs": programs, "rows": rows},
                                         indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
