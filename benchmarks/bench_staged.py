"""Staged (on-chip) profiler buffer vs records stored as they come: kernel-time overhead and finalize time.

    python benchmarks/bench_staged.py [--out results.json] [--rounds 7]

The kernel (``tests/data/staged_kernels.py``): each program runs ``n_iter`` load-accumulate iterations of a
256-float tile with one record pair per iteration (2 × n_iter records per program). Variants, timed
interleaved (``rounds`` rounds of ``triton.testing.do_bench`` each, median of the rounds' medians):
profiling compiled away, records stored to global memory as they come (``STAGE=0``), records staged on
chip in a ring of ``STAGE`` slots and written at ``finalize()``; both recorders also without the block
barrier at each record (``SYNC=False``), which isolates what the stores cost. Reports each variant's overhead over the
uninstrumented kernel and, for the staged one, the finalize time per CTA.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests" / "data"))
import staged_kernels as sk  # noqa: E402

from kernscope.intra.host import alloc_profiler_buffer, decode_profiler_buffer, reset_profiler_buffer  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    block = 256
    results = []
    for programs, n_iter, stage in ((1056, 64, 128), (1056, 8, 16), (8448, 8, 16)):
        x = torch.randn(programs * n_iter * block, device="cuda")
        out = torch.empty(programs * block, device="cuda")
        buf = alloc_profiler_buffer(programs * max(stage + 2, 2 * n_iter))
        variants = {
            "off": dict(STAGE=0, ENABLE=False),
            "stored": dict(STAGE=0, ENABLE=True),
            f"staged{stage}": dict(STAGE=stage, ENABLE=True),
            "stored_nosync": dict(STAGE=0, ENABLE=True, SYNC=False),
            f"staged{stage}_nosync": dict(STAGE=stage, ENABLE=True, SYNC=False),
            f"shared{stage}": dict(STAGE=stage, ENABLE=True, BUFFER_TYPE="shared_mem"),
            f"shared{stage}_nosync": dict(STAGE=stage, ENABLE=True, SYNC=False, BUFFER_TYPE="shared_mem"),
        }

        def launch(kw: dict, programs: int = programs, buf: torch.Tensor = buf, x: torch.Tensor = x,
                   out: torch.Tensor = out, n_iter: int = n_iter) -> None:
            sk.loop_kernel[(programs,)](buf, x, out, n_iter, CYCLES=False, BLOCK=block, **kw)

        for kw in variants.values():  # compile and warm
            launch(kw)
        torch.cuda.synchronize()
        rounds: dict[str, list[float]] = {k: [] for k in variants}
        for r in range(args.rounds):
            order = list(variants)[r % len(variants):] + list(variants)[: r % len(variants)]
            for k in order:
                rounds[k].append(triton.testing.do_bench(lambda kw=variants[k]: launch(kw), warmup=25, rep=200))
        med = {k: statistics.median(v) for k, v in rounds.items()}
        fins = {}
        for kind in (f"staged{stage}", f"shared{stage}"):
            reset_profiler_buffer(buf)
            launch(variants[kind])
            torch.cuda.synchronize()
            d = decode_profiler_buffer(buf, ["iter"])
            fins[kind] = d.finalize["finalize_ns"] if d.finalize is not None else None
        fin = fins[f"staged{stage}"]
        fsh = fins[f"shared{stage}"]
        row = {
            "programs": programs, "iterations": n_iter, "records_per_program": 2 * n_iter, "stage": stage,
            "median_ms": med, "rounds_ms": rounds,
            "overhead_stored_pct": 100 * (med["stored"] / med["off"] - 1),
            "overhead_staged_pct": 100 * (med[f"staged{stage}"] / med["off"] - 1),
            "overhead_stored_nosync_pct": 100 * (med["stored_nosync"] / med["off"] - 1),
            "overhead_staged_nosync_pct": 100 * (med[f"staged{stage}_nosync"] / med["off"] - 1),
            "overhead_shared_pct": 100 * (med[f"shared{stage}"] / med["off"] - 1),
            "overhead_shared_nosync_pct": 100 * (med[f"shared{stage}_nosync"] / med["off"] - 1),
            "staged_records_kept": d.records, "staged_overwritten": d.ring_overwritten,
            "finalize_mean_ns": float(fin.mean()) if fin is not None else None,  # type: ignore[arg-type]
            "finalize_max_ns": int(fin.max()) if fin is not None else None,  # type: ignore[arg-type]
            "iteration_median_ns": float(d.tasks["duration_ns"].median() or 0),
            "finalize_shared_mean_ns": float(fsh.mean()) if fsh is not None else None,  # type: ignore[arg-type]
            "finalize_shared_max_ns": int(fsh.max()) if fsh is not None else None,  # type: ignore[arg-type]
        }
        results.append(row)
        print(f"{programs} programs x {n_iter} iterations ({2 * n_iter} records each), STAGE={stage}: "
              f"off {med['off'] * 1e3:.1f} us, stored {med['stored'] * 1e3:.1f} us (+{row['overhead_stored_pct']:.2f}%), "
              f"staged {med[f'staged{stage}'] * 1e3:.1f} us (+{row['overhead_staged_pct']:.2f}%); without the block "
              f"barrier (SYNC=False): stored +{row['overhead_stored_nosync_pct']:.2f}%, staged "
              f"+{row['overhead_staged_nosync_pct']:.2f}%; shared-memory ring +{row['overhead_shared_pct']:.2f}% "
              f"(SYNC=False +{row['overhead_shared_nosync_pct']:.2f}%); "
              f"finalize per CTA mean {row['finalize_mean_ns']:.0f} ns, max {row['finalize_max_ns']} ns (shared ring "
              f"{row['finalize_shared_mean_ns']:.0f} / {row['finalize_shared_max_ns']} ns); "
              f"kept {d.records} records, overwritten {d.ring_overwritten}")
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__}
    if args.out:
        Path(args.out).write_text(json.dumps({"env": env, "results": results}, indent=1))
    print(env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
