"""Run-to-run stability of the harness on a GPU: the 8192³ bf16 GEMM, torch vs Triton, 3 separate runs.

    python benchmarks/bench_stability.py --out DIR [--runs 3] [--duration 3] [--input-id 5]
    python benchmarks/bench_stability.py --summarize DIR      # only the summary of existing run files

Each run is a separate process (``kernscope bench --op gemm --input-id 5 --only torch_matmul,triton_matmul
--metrics latency,tflops,speedup --duration S --json runN.json``), impls interleaved. Prints per impl the
median of each run, the spread (max − min) / mean of the medians, the speedup of each run and its spread, and
which runs' cells had moving clocks (the harness flags them). One extra run without interleaving shows what
interleaving buys. Clocks are never touched unless ``--lock-clocks`` is passed through ``--extra``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def bench(out: Path, name: str, args: argparse.Namespace, interleave: bool = True) -> Path:
    path = out / f"{name}.json"
    cmd = [sys.executable, "-m", "kernscope", "bench", "--op", "gemm", "--input-id", str(args.input_id), "--only",
           "torch_matmul,triton_matmul", "--metrics", "latency,tflops,speedup", "--duration", str(args.duration),
           "--json", str(path), *(["--no-interleave"] if not interleave else []), *args.extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    (out / f"{name}.txt").write_text(r.stdout + "\n" + r.stderr[-4000:])
    return path


def summarize(out: Path) -> str:
    runs = sorted(out.glob("run*.json"))
    lines = []
    med: dict[str, list[float]] = {}
    norm: dict[str, list[float]] = {}
    spd: list[float] = []
    spd_norm: list[float] = []
    for p in runs:
        d = json.loads(p.read_text())
        gpu = d["env"].get("gpu")
        clocks = d["env"].get("clocks", {})
        for c in d["results"]:
            m = c["machine"] or {}
            t = c["timing"] or {}
            med.setdefault(c["impl"], []).append(t.get("median_ms"))
            if t.get("at_ref_clock_ms") == t.get("at_ref_clock_ms") and t.get("at_ref_clock_ms"):  # not NaN/None
                norm.setdefault(c["impl"], []).append(t["at_ref_clock_ms"])
            flag = "clocks MOVED" if m.get("moved") else "clocks steady"
            lines.append(f"{p.stem} {c['impl']:14s} median {t.get('median_ms'):.4f} ms [{t.get('ci_low_ms'):.4f}, "
                         f"{t.get('ci_high_ms'):.4f}] n={t.get('n')} SM {m.get('sm_min_mhz')}–{m.get('sm_max_mhz')} MHz "
                         f"power ≤{m.get('power_max_w')} W temp ≤{m.get('temp_max_c')} °C {flag} "
                         f"reasons={','.join(m.get('reasons') or []) or '-'} speedup={c['metrics'].get('speedup')} "
                         f"ci={c['metrics'].get('speedup_ci')} tflops={c['metrics'].get('tflops')} "
                         f"SM median {t.get('sm_mhz_median')} MHz, at max SM clock {t.get('at_ref_clock_ms')} ms")
            if c["impl"] == "triton_matmul":
                spd.append(c["metrics"]["speedup"])
        lines.append(f"   gpu={gpu} clocks={clocks}")
    for impl, v in med.items():
        v = [x for x in v if x]
        if len(v) > 1:
            lines.append(f"{impl}: medians {', '.join(f'{x:.4f}' for x in v)} ms; spread (max-min)/mean = "
                         f"{100 * (max(v) - min(v)) / statistics.fmean(v):.2f}%")
    for impl, v in norm.items():
        if len(v) > 1:
            lines.append(f"{impl}: SM-clock-normalized medians {', '.join(f'{x:.4f}' for x in v)} ms; spread = "
                         f"{100 * (max(v) - min(v)) / statistics.fmean(v):.2f}%")
    if len(norm.get("torch_matmul", [])) == len(norm.get("triton_matmul", [])) > 1:
        spd_norm = [a / b for a, b in zip(norm["torch_matmul"], norm["triton_matmul"])]
        lines.append(f"speedup at max SM clock per run: {', '.join(f'{x:.4f}' for x in spd_norm)}; spread = "
                     f"{100 * (max(spd_norm) - min(spd_norm)) / statistics.fmean(spd_norm):.2f}%")
    if len(spd) > 1:
        lines.append(f"speedup torch/triton per run: {', '.join(f'{x:.4f}' for x in spd)}; spread = "
                     f"{100 * (max(spd) - min(spd)) / statistics.fmean(spd):.2f}%")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--summarize", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--input-id", type=int, default=5)
    ap.add_argument("--extra", nargs=argparse.REMAINDER, default=[])
    args = ap.parse_args()
    if args.summarize:
        print(summarize(args.summarize))
        return 0
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    bench(out, "warm", args)  # compiles and autotunes the Triton kernel once (its cache serves the runs)
    for i in range(1, args.runs + 1):
        bench(out, f"run{i}", args)
    bench(out, "sequential", args, interleave=False)
    text = summarize(out)
    (out / "summary.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
