"""Does a record pair around one global load measure the load? (the scheduling-safety test of issue #9)

    python benchmarks/bench_single_load.py

Each of 1,024 programs loads one float from its own 4 KB-apart address between a start and an end record
(cycle mode), then stores it. Variants: block barrier before each record (``SYNC=True``, the default) or not
(``SYNC=False``); the end record scheduling-safe (``record(False, 0, after=v)``: it waits for the loaded value)
or not; the L2 cache flushed before the launch (the load goes to HBM) or warm (a second launch: an L2 hit). If the end record's timer read could run before the load's data arrived, the scope would read a few
cycles whatever the memory level; a scope that waits for the load reads the memory latency, HBM > L2.
Prints the median scope per variant (ns and SM cycles at the measured clock).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from kernscope.intra import Profiler, alloc_profiler_buffer, tid  # noqa: E402
from kernscope.intra.host import decode_profiler_buffer, reset_profiler_buffer  # noqa: E402


@triton.jit
def one_load(x, out, buf, STRIDE: tl.constexpr, SYNC: tl.constexpr, AFTER: tl.constexpr):
    pid = tl.program_id(0)
    prof = Profiler.create(buf, 0, 1, is_leader=(tid(0) == 0), CYCLES=True, SYNC=SYNC)
    prof = prof.record(True, 0)
    v = tl.load(x + pid * STRIDE)
    if AFTER:
        prof = prof.record(False, 0, after=v)  # scheduling-safe: the end waits for the loaded value
    else:
        prof = prof.record(False, 0)
    tl.store(out + pid, v)


def main() -> int:
    programs, stride = 1024, 1024  # floats: 4 KB apart
    x = torch.randn(programs * stride, device="cuda")
    out = torch.empty(programs, device="cuda")
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    buf = alloc_profiler_buffer(programs * 2 + 64)
    print(f"{torch.cuda.get_device_name()}: one load per program, {programs} programs, cycle-mode records")
    for sync, after in ((True, False), (False, False), (False, True)):
        for level in ("HBM (L2 flushed)", "L2 (warm)"):
            ns, ghz = [], []
            for _ in range(9):
                flush.zero_()
                if level.startswith("L2"):
                    one_load[(programs,)](x, out, buf, STRIDE=stride, SYNC=sync, AFTER=after)  # lines into L2
                reset_profiler_buffer(buf)
                one_load[(programs,)](x, out, buf, STRIDE=stride, SYNC=sync, AFTER=after)
                torch.cuda.synchronize()
                d = decode_profiler_buffer(buf)
                assert d.tasks.height == programs and d.unpaired == 0
                ns.append(float(d.tasks["duration_ns"].median()))  # type: ignore[arg-type]
                ghz.append(d.clock_ghz or float("nan"))
            assert torch.equal(out, x[::stride])
            m, g = statistics.median(ns), statistics.median(ghz)
            print(f"  SYNC={sync!s:5s} after={after!s:5s} {level:18s} scope median {m:7.1f} ns = {m * g:6.0f} cycles at {g:.2f} GHz"
                  f" (launch medians {min(ns):.0f}-{max(ns):.0f} ns)")
    print(f"  clock: {d.clock_source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
