"""Summarize `kernscope bench --json` files into Markdown tables (for docs/bench.md).

Usage: python benchmarks/summarize_bench.py RESULTS_DIR > table.md
Reads bench_*.json and repeat_<op>_<n>.json; writes compact copies (raw samples dropped) to
RESULTS_DIR/compact/ when --compact is given.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def load(path: str) -> dict:
    return json.load(open(path))


def fmt(v, nd=3):
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def op_table(doc: dict) -> str:
    impls = doc["impls"]
    metrics = [m for m in doc["metrics"] if m != "kineto_trace"]
    head = "| " + ", ".join(doc["x_label"]) + " | " + " | ".join(f"{i} {m}" for i in impls for m in metrics) + " |"
    sep = "|" + "---|" * (1 + len(impls) * len(metrics))
    rows = defaultdict(dict)
    xs = {}
    for r in doc["results"]:
        xs[r["input_id"]] = r["x"]
        for m in metrics:
            v = r["metrics"].get(m)
            if r["error"]:
                v = "error"
            elif m == "latency" and r["timing"]:
                v = f"{r['timing']['median_ms']:.4f} ±{100 * r['timing']['spread']:.1f}%"
            elif isinstance(v, bool):
                v = "✓" if v else f"✗ ({r['metrics'].get('max_abs_err', 0):.3g})"
            elif isinstance(v, float):
                v = f"{v:.2f}"
            rows[r["input_id"]][f"{r['impl']} {m}"] = v
    lines = [head, sep]
    for i in sorted(xs):
        lines.append("| " + ", ".join(map(str, xs[i])) + " | " + " | ".join(str(rows[i].get(f"{im} {m}", "-")) for im in impls for m in metrics) + " |")
    return "\n".join(lines)


def agreement(docs: list[dict]) -> str:
    """Latency (CUDA events) vs compute-kernel time in the analyzed trace, kernels >= 50 µs."""
    rat = []
    for d in docs:
        for r in d["results"]:
            a = r.get("analysis")
            if a and a.get("kernel_time_us", 0) >= 50 and a.get("latency_us"):
                rat.append((d["op"], r["impl"], r["x"], a["kernel_time_us"], a["latency_us"]))
    if not rat:
        return "no traced cells with kernel time >= 50 µs"
    diffs = [100 * (lat / k - 1) for *_, k, lat in rat]
    within = sum(1 for x in diffs if abs(x) <= 3)
    worst = max(rat, key=lambda t: abs(t[4] / t[3] - 1))
    return (f"{len(rat)} cells with compute-kernel time ≥ 50 µs: latency − kernel time median {statistics.median(diffs):+.2f}%, "
            f"max {max(diffs):+.2f}%, min {min(diffs):+.2f}%; {within}/{len(rat)} within ±3%. Worst: {worst[0]} {worst[1]} {worst[2]} "
            f"kernel {worst[3]:.1f} µs vs latency {worst[4]:.1f} µs.")


def spread(paths: list[str]) -> str:
    runs = [load(p) for p in sorted(paths)]
    by = defaultdict(list)
    for d in runs:
        for r in d["results"]:
            if r["timing"]:
                by[(r["impl"], tuple(r["x"]))].append(r["timing"]["median_ms"])
    lines = ["| impl | input | medians (ms) | run-to-run spread |", "|---|---|---|---|"]
    big = []
    for (impl, x), meds in sorted(by.items()):
        sp = (max(meds) - min(meds)) / statistics.median(meds)
        lines.append(f"| {impl} | {x} | {', '.join(f'{m:.4f}' for m in meds)} | {100 * sp:.2f}% |")
        if statistics.median(meds) >= 0.05:
            big.append(sp)
    if big:
        lines.append(f"\nKernels ≥ 50 µs: max run-to-run spread {100 * max(big):.2f}%, median {100 * statistics.median(big):.2f}% ({len(big)} cells).")
    return "\n".join(lines)


def main() -> int:
    d = sys.argv[1]
    compact = "--compact" in sys.argv
    out = []
    docs = []
    for p in sorted(glob.glob(os.path.join(d, "bench_*.json"))):
        if p.endswith("bench_intra.json"):
            continue
        doc = load(p)
        docs.append(doc)
        out.append(f"### {os.path.basename(p)[6:-5]}: {doc['op']} ({doc['mode']}, {doc['dtype']})\n\n{op_table(doc)}\n")
        if compact:
            os.makedirs(os.path.join(d, "compact"), exist_ok=True)
            for r in doc["results"]:
                if r["timing"]:
                    r["timing"].pop("samples_ms", None)
            json.dump(doc, open(os.path.join(d, "compact", os.path.basename(p)), "w"), indent=1)
    out.append("### Latency vs trace kernel time\n\n" + agreement(docs) + "\n")
    for op in ("gemm", "softmax"):
        ps = glob.glob(os.path.join(d, f"repeat_{op}_*.json"))
        if ps:
            out.append(f"### Run-to-run spread: {op} ({len(ps)} runs)\n\n" + spread(ps) + "\n")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
