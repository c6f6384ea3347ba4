"""Where kernscope's and Proton's scope times differ on the same kernel (GPU): whole-kernel time of each
variant (CUDA events around 20 back-to-back launches, median of 15 batches: unprofiled, kernscope SYNC=True/False, Proton's scopes with and
without a Proton session), and kernscope's per-scope means with and without the block barrier.

    python benchmarks/proton_vs_kernscope.py [--programs 528] [--cols 65536] > out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import triton.profiler as proton  # noqa: E402
from gpu_timing import timed  # noqa: E402
from record_proton_files import NAMES, rows_kernscope, rows_plain, rows_proton  # noqa: E402

from kernscope.intra.host import alloc_profiler_buffer, decode_profiler_buffer, reset_profiler_buffer  # noqa: E402
from kernscope.intra.scopes import scope_table  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--programs", type=int, default=528)
    ap.add_argument("--cols", type=int, default=65536)
    a = ap.parse_args()
    x = torch.randn(a.programs, a.cols, device="cuda")
    y = torch.empty(a.programs, device="cuda")
    g = (a.programs,)
    buf = alloc_profiler_buffer(a.programs * 8 + 64)
    table = scope_table(names=NAMES)
    res: dict[str, object] = {"gpu": torch.cuda.get_device_name(), "programs": a.programs, "cols": a.cols}
    kernel_us = {
        "plain": timed(lambda: rows_plain[g](x, y, a.cols, BLOCK=1024, num_warps=4)),
        "kernscope_sync": timed(lambda: rows_kernscope[g](x, y, a.cols, buf, BLOCK=1024, CYCLES=True, SYNC=True, num_warps=4)),
        "kernscope_nosync": timed(lambda: rows_kernscope[g](x, y, a.cols, buf, BLOCK=1024, CYCLES=True, SYNC=False, num_warps=4)),
        "kernscope_globaltimer": timed(lambda: rows_kernscope[g](x, y, a.cols, buf, BLOCK=1024, CYCLES=False, SYNC=True,
                                                                 num_warps=4)),
        "kernscope_staged": timed(lambda: rows_kernscope[g](x, y, a.cols, buf, BLOCK=1024, CYCLES=True, SYNC=True, STAGE=8,
                                                            num_warps=4)),
        "kernscope_staged_nosync": timed(lambda: rows_kernscope[g](x, y, a.cols, buf, BLOCK=1024, CYCLES=True, SYNC=False,
                                                                   STAGE=8, num_warps=4)),
        "proton_scopes_no_session": timed(lambda: rows_proton[g](x, y, a.cols, BLOCK=1024, num_warps=4)),
    }
    proton.start("/tmp/pvk", data="trace", backend="instrumentation")
    kernel_us["proton_session"] = timed(lambda: rows_proton[g](x, y, a.cols, BLOCK=1024, num_warps=4), n=3, batch=5)
    proton.finalize()
    res["kernel_us_median"] = kernel_us
    for sync, stage in ((True, 0), (False, 0), (True, 8), (False, 8)):
        means: dict[str, list[float]] = {n: [] for n in NAMES}
        for _ in range(7):
            reset_profiler_buffer(buf)
            rows_kernscope[g](x, y, a.cols, buf, BLOCK=1024, CYCLES=True, SYNC=sync, STAGE=stage, num_warps=4)
            d = decode_profiler_buffer(buf, table)
            for n in NAMES:
                means[n].append(statistics.mean(d.tasks.filter(d.tasks["task"].cast(str) == n)["duration_ns"].to_list()))
        res[f"scopes_ns_sync_{sync}" + (f"_stage{stage}" if stage else "")] = {n: statistics.median(v) for n, v in means.items()}
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
