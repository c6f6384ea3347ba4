"""Record real Proton intra-kernel files, and profile the same kernel with kernscope, on a GPU.

    python examples/record_proton_files.py OUT_DIR [--programs 528] [--cols 65536] [--repeats 5] [--small]

Writes into OUT_DIR:

- ``proton_trace.chrome_trace``: Proton's timeline (``proton.start(..., data="trace", backend="instrumentation")``);
- ``proton_ops.hatchet``: Proton's op-measure profile (``backend="instrumentation"``);
- ``kernscope.npz``: kernscope's buffer for the same kernel with the same scopes (CYCLES mode, as Proton);
- ``compare.json``: per scope, the mean duration each tool measured in each of ``--repeats`` launches
  (alternating Proton's and kernscope's; ns, Proton's cycles divided by the SM clock kernscope measured),
  the medians over launches and their ratio, the time in ``kernel`` outside its child scopes, and the
  unprofiled kernel's median time (CUDA events) for scale.

The kernel: each program sums one row of ``cols`` floats in a loop; scopes ``kernel`` (everything),
``row_loop`` (the loop) and ``store``. ``--small`` records 16 programs of 4,096 columns (files for tests).
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
import triton.profiler as proton  # noqa: E402
import triton.profiler.language as pl  # noqa: E402

from kernscope.intra import Profiler, tid  # noqa: E402
from kernscope.intra.host import alloc_profiler_buffer, decode_profiler_buffer, read_profiler_buffer  # noqa: E402
from kernscope.intra.scopes import scope_table  # noqa: E402

pl.enable_semantic("triton")
NAMES = ("kernel", "row_loop", "store")


@triton.jit
def rows_proton(x, out, cols, BLOCK: tl.constexpr):
    pl.enter_scope("kernel")
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    pl.enter_scope("row_loop")
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * cols + offs, mask=offs < cols, other=0.0)
    pl.exit_scope("row_loop")
    pl.enter_scope("store")
    tl.store(out + row, tl.sum(acc))
    pl.exit_scope("store")
    pl.exit_scope("kernel")


@triton.jit
def rows_plain(x, out, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(out + row, tl.sum(acc))


@triton.jit
def rows_kernscope(x, out, cols, buf, BLOCK: tl.constexpr, CYCLES: tl.constexpr, SYNC: tl.constexpr = True,
                   STAGE: tl.constexpr = 0):
    prof = Profiler.create(buf, 0, 1, is_leader=(tid(0) == 0), CYCLES=CYCLES, SYNC=SYNC, STAGE=STAGE)
    prof = prof.enter("kernel")
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    prof = prof.enter("row_loop")
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * cols + offs, mask=offs < cols, other=0.0)
    prof = prof.exit("row_loop")
    prof = prof.enter("store")
    tl.store(out + row, tl.sum(acc))
    prof = prof.exit("store")
    prof = prof.exit("kernel")
    prof.finalize()  # STAGE > 0: write the on-chip records (nothing otherwise)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--programs", type=int, default=528)
    ap.add_argument("--cols", type=int, default=65536)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--repeats", type=int, default=5, help="launches per profiler, alternated")
    ap.add_argument("--stage", type=int, default=0, help="kernscope records staged on chip (STAGE=N), 0: stored")
    args = ap.parse_args()
    if args.small:
        args.programs, args.cols, args.repeats = 16, 4096, 1
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    x = torch.randn(args.programs, args.cols, device="cuda")
    y = torch.empty(args.programs, device="cuda")
    grid = (args.programs,)
    for _ in range(3):  # compile and warm up both variants outside the profiles
        rows_proton[grid](x, y, args.cols, BLOCK=1024, num_warps=4)
    buf = alloc_profiler_buffer(args.programs * 8 + 64)
    for _ in range(3):
        rows_kernscope[grid](x, y, args.cols, buf, BLOCK=1024, CYCLES=True, STAGE=args.stage, num_warps=4)
        rows_plain[grid](x, y, args.cols, BLOCK=1024, num_warps=4)
    torch.cuda.synchronize()

    from kernscope.intra.io import load_tasks

    table = scope_table(names=NAMES)
    ks_means: dict[str, list[float]] = {n: [] for n in NAMES}
    px_means: dict[str, list[float]] = {n: [] for n in NAMES}
    clock, clock_source = 1.0, None
    for r in range(args.repeats):  # alternate the two profilers' launches: same conditions for both
        name = "proton_trace" if r == 0 else f"proton_trace_{r}"
        proton.start(str(out / name), data="trace", backend="instrumentation")
        rows_proton[grid](x, y, args.cols, BLOCK=1024, num_warps=4)
        proton.finalize()
        buf = alloc_profiler_buffer(args.programs * 8 + 64)
        rows_kernscope[grid](x, y, args.cols, buf, BLOCK=1024, CYCLES=True, STAGE=args.stage, num_warps=4)
        d = decode_profiler_buffer(buf, table)
        clock, clock_source = d.clock_ghz or 1.0, d.clock_source
        if r == 0:
            import numpy as np

            np.savez(out / "kernscope.npz", buffer=read_profiler_buffer(buf), task_names=np.array(list(table.values())),
                     task_ids=np.array(list(table), dtype=np.int64))
        pt = load_tasks(str(out / f"{name}.chrome_trace")).tasks
        for n in NAMES:
            ks_means[n].append(statistics.mean(d.tasks.filter(d.tasks["task"].cast(str) == n)["duration_ns"].to_list()))
            # Proton's durations are cycles (its 1 GHz convention): ns at the SM clock kernscope measured
            px_means[n].append(statistics.mean(pt.filter(pt["task"].cast(str) == n)["duration_ns"].to_list()) / clock)
        if r:
            (out / f"{name}.chrome_trace").unlink()  # keep the first trace only
    proton.start(str(out / "proton_ops"), backend="instrumentation")
    rows_proton[grid](x, y, args.cols, BLOCK=1024, num_warps=4)
    proton.finalize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    plain = []
    for _ in range(10):  # the kernel without any profiler, for scale: 20 launches back to back per sample
        start.record()
        for _ in range(20):
            rows_plain[grid](x, y, args.cols, BLOCK=1024, num_warps=4)
        end.record()
        end.synchronize()
        plain.append(start.elapsed_time(end) * 1e6 / 20)

    rows = []
    for n in NAMES:
        k, p = statistics.median(ks_means[n]), statistics.median(px_means[n])
        rows.append({"scope": n, "kernscope_ns": k, "proton_ns": p, "ratio": k / p if p else None,
                     "kernscope_launch_means_ns": ks_means[n], "proton_launch_means_ns": px_means[n]})
    k_self = [a - b - c for a, b, c in zip(ks_means["kernel"], ks_means["row_loop"], ks_means["store"], strict=True)]
    p_self = [a - b - c for a, b, c in zip(px_means["kernel"], px_means["row_loop"], px_means["store"], strict=True)]
    rows.append({"scope": "kernel self", "kernscope_ns": statistics.median(k_self), "proton_ns": statistics.median(p_self)})
    comparison: dict[str, object] = {
        "programs": args.programs, "cols": args.cols, "repeats": args.repeats, "files": sorted(p.name for p in out.iterdir()),
        "sm_clock_ghz": clock, "clock_source": clock_source, "plain_kernel_ns_median": statistics.median(plain),
        "scopes": rows}
    (out / "compare.json").write_text(json.dumps(comparison, indent=2))
    print(json.dumps(comparison, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
