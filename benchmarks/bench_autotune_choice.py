"""Does the Triton GEMM run the same kernel in every run? Autotuning per process vs a cached tuning result.

    python benchmarks/bench_autotune_choice.py --out DIR [--runs 3] [--duration 3]

Each run is a separate process timing the 8192³ bf16 GEMM (``kernscope bench --op gemm --input-id 5``,
cuBLAS vs ``triton_matmul``, interleaved) and reporting which autotuner config ``triton_matmul`` ran with.
Mode ``fresh``: every process autotunes again (Triton's default). Mode ``cached``:
``TRITON_CACHE_AUTOTUNING=1`` (the first process tunes and stores its choice, the later ones reuse it).
If fresh runs pick different configs, run-to-run differences of the Triton median and of the speedup are
partly a different kernel, not only the clock. Prints per mode the config, medians and speedup of each run
and their spreads (max − min) / mean.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, sys
from kernscope.cli import main
from kernscope.bench.kernels import matmul
out = sys.argv[1]
try:
    main(["bench", "--op", "gemm", "--input-id", "5", "--only", "torch_matmul,triton_matmul", "--metrics",
          "latency,speedup", "--duration", sys.argv[2], "--json", out])
finally:
    cfg = getattr(matmul._matmul_kernel, "best_config", None) or list(matmul._matmul_kernel.cache.values())
    print("CONFIG " + json.dumps({"config": str(cfg)}))
"""


def one(out: Path, name: str, duration: float, env: dict[str, str]) -> dict[str, object]:
    path = out / f"{name}.json"
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), str(duration)], capture_output=True, text=True, env=env)
    (out / f"{name}.log").write_text(r.stdout[-3000:] + "\n" + r.stderr[-3000:])
    cfg = next((json.loads(line[7:])["config"] for line in r.stdout.splitlines() if line.startswith("CONFIG ")), None)
    if not path.exists():
        return {"config": cfg, "error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    d = json.loads(path.read_text())
    cells = {c["impl"]: c for c in d["results"]}
    t, c = cells["triton_matmul"], cells["torch_matmul"]
    return {"config": cfg, "cublas_ms": c["timing"]["median_ms"], "triton_ms": t["timing"]["median_ms"],
            "speedup": t["metrics"]["speedup"], "cublas_at_max_clk": c["timing"]["at_ref_clock_ms"],
            "triton_at_max_clk": t["timing"]["at_ref_clock_ms"],
            "sm_mhz": [c["timing"]["sm_mhz_median"], t["timing"]["sm_mhz_median"]]}


def spread(v: list[float]) -> str:
    v = [x for x in v if isinstance(x, (int, float)) and x == x]
    return f"{100 * (max(v) - min(v)) / statistics.fmean(v):.2f}%" if len(v) > 1 else "-"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, list[dict[str, object]]] = {}
    for mode in ("fresh", "cached"):
        env = dict(os.environ)
        if mode == "cached":
            env["TRITON_CACHE_AUTOTUNING"] = "1"
            env["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cache-")  # one shared cache for these runs
        report[mode] = [one(out, f"{mode}{i + 1}", args.duration, env) for i in range(args.runs)]
        print(f"\n{mode}:")
        for i, r in enumerate(report[mode]):
            print(f"  run {i + 1}: {r}")
        for k in ("cublas_ms", "triton_ms", "speedup", "cublas_at_max_clk", "triton_at_max_clk"):
            print(f"  {k} spread: {spread([r.get(k) for r in report[mode]])}")  # type: ignore[misc]
        print(f"  distinct Triton configs: {len({r.get('config') for r in report[mode]})}")
    (out / "summary.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
