"""Record real Proton intra-kernel files, and profile the same kernel with kernscope, on a GPU.

    python examples/record_proton_files.py OUT_DIR [--programs 528] [--cols 65536] [--small]

Writes into OUT_DIR:

- ``proton_trace.chrome_trace``: Proton's timeline (``proton.start(..., data="trace", backend="instrumentation")``);
- ``proton_ops.hatchet``: Proton's op-measure profile (``backend="instrumentation"``);
- ``kernscope.npz``: kernscope's buffer for the same kernel with the same scopes (CYCLES mode, as Proton);
- ``compare.json``: per scope, the mean duration each tool measured (ns; Proton's cycles divided by the SM
  clock kernscope measured), and their ratio.

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
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
def rows_kernscope(x, out, cols, buf, BLOCK: tl.constexpr, CYCLES: tl.constexpr):
    prof = Profiler.create(buf, 0, 1, is_leader=(tid(0) == 0), CYCLES=CYCLES)
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--programs", type=int, default=528)
    ap.add_argument("--cols", type=int, default=65536)
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    if args.small:
        args.programs, args.cols = 16, 4096
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    x = torch.randn(args.programs, args.cols, device="cuda")
    y = torch.empty(args.programs, device="cuda")
    grid = (args.programs,)
    for _ in range(3):  # compile and warm up both variants outside the profiles
        rows_proton[grid](x, y, args.cols, BLOCK=1024, num_warps=4)
    buf = alloc_profiler_buffer(args.programs * 8 + 64)
    for _ in range(3):
        rows_kernscope[grid](x, y, args.cols, buf, BLOCK=1024, CYCLES=True, num_warps=4)
    torch.cuda.synchronize()

    proton.start(str(out / "proton_trace"), data="trace", backend="instrumentation")
    rows_proton[grid](x, y, args.cols, BLOCK=1024, num_warps=4)
    proton.finalize()
    proton.start(str(out / "proton_ops"), backend="instrumentation")
    rows_proton[grid](x, y, args.cols, BLOCK=1024, num_warps=4)
    proton.finalize()

    buf = alloc_profiler_buffer(args.programs * 8 + 64)
    rows_kernscope[grid](x, y, args.cols, buf, BLOCK=1024, CYCLES=True, num_warps=4)
    table = scope_table(names=NAMES)
    d = decode_profiler_buffer(buf, table)
    import numpy as np

    np.savez(out / "kernscope.npz", buffer=read_profiler_buffer(buf), task_names=np.array(list(table.values())),
             task_ids=np.array(list(table), dtype=np.int64))

    from kernscope.intra.io import load_tasks

    proton_files = sorted(p for p in out.iterdir() if p.name.startswith("proton_trace"))
    comparison: dict[str, object] = {"programs": args.programs, "cols": args.cols, "files": [p.name for p in out.iterdir()]}
    if proton_files:
        pt = load_tasks(str(proton_files[0])).tasks
        clock = d.clock_ghz or 1.0
        rows = []
        for name in NAMES:
            k = d.tasks.filter(d.tasks["task"].cast(str) == name)["duration_ns"].to_list()
            p = pt.filter(pt["task"].cast(str) == name)["duration_ns"].to_list()  # cycles (Proton's 1 GHz ns)
            if k and p:
                k_ns, p_ns = statistics.mean(k), statistics.mean(p) / clock
                rows.append({"scope": name, "kernscope_ns": k_ns, "proton_ns": p_ns, "ratio": k_ns / p_ns if p_ns else None,
                             "kernscope_n": len(k), "proton_n": len(p)})
        by = {r["scope"]: r for r in rows}
        if {"kernel", "row_loop", "store"} <= set(by):  # time in "kernel" outside its two child scopes
            k_self = by["kernel"]["kernscope_ns"] - by["row_loop"]["kernscope_ns"] - by["store"]["kernscope_ns"]
            p_self = by["kernel"]["proton_ns"] - by["row_loop"]["proton_ns"] - by["store"]["proton_ns"]
            rows.append({"scope": "kernel self", "kernscope_ns": k_self, "proton_ns": p_self})
        comparison.update(sm_clock_ghz=clock, clock_source=d.clock_source, scopes=rows)
    (out / "compare.json").write_text(json.dumps(comparison, indent=2))
    print(json.dumps(comparison, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
