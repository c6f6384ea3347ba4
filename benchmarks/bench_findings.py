"""What the diagnoses cost (findings and the critical path), on a real trace replicated to size.

    python benchmarks/bench_findings.py [--from TRACE] [--size-mb 200] [--repeat 3] [--out results.json]

Builds the replica (``kernscope.testing.replicate``: the real events' bytes, shifted), then, interleaved
``--repeat`` times: a cold ``kernscope analyze --no-cache --format json`` in a subprocess (load + link +
analysis + findings + critical path, what a user runs) and, in this process on the loaded trace, the findings
alone (:func:`kernscope.analyze.findings.find`) and the critical path alone
(:func:`kernscope.analyze.critical_path.critical_path`). Prints the medians and their share of the cold analyze.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import kernscope  # noqa: E402
from kernscope.analyze.categories import Categorizer  # noqa: E402
from kernscope.analyze.critical_path import critical_path  # noqa: E402
from kernscope.analyze.findings import find  # noqa: E402
from kernscope.analyze.kernels import gpu_table  # noqa: E402
from kernscope.analyze.summary import analyze  # noqa: E402
from kernscope.testing.replicate import replicate  # noqa: E402

EXAMPLE = Path(kernscope.__file__).parent / "examples" / "h200_gpt_train_step.pt.trace.json.gz"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", default=str(EXAMPLE), help="real trace to replicate")
    ap.add_argument("--size-mb", type=float, default=200.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", help="write the results as JSON")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        big = Path(d) / "big.json"
        rs = replicate(a.src, big, target_bytes=int(a.size_mb * 1e6))
        size = big.stat().st_size
        trace = kernscope.load(big, cache=False)
        an = analyze(trace)  # its parts are the findings' inputs
        all_gpu = gpu_table(trace, Categorizer.builtin())
        cold: list[float] = []
        alone: list[float] = []
        paths: list[float] = []
        found = 0
        for _ in range(a.repeat):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "kernscope", "analyze", str(big), "--no-cache", "--format", "json", "-q"],
                           check=True, stdout=subprocess.DEVNULL)
            cold.append(time.perf_counter() - t)
            t = time.perf_counter()
            found = find(trace, an.gpu, an.steps, an.timeline_by_step).height
            alone.append(time.perf_counter() - t)
            t = time.perf_counter()
            critical_path(trace, all_gpu)
            paths.append(time.perf_counter() - t)
        res = {"source": a.src, "json_mb": size / 1e6, "replicas": rs.replicas, "events": rs.events, "findings": found,
               "cold_analyze_s": statistics.median(cold), "findings_s": statistics.median(alone),
               "critical_path_s": statistics.median(paths), "steps": trace.steps.height,
               "runs": {"cold_analyze_s": cold, "findings_s": alone, "critical_path_s": paths}}
        res["findings_share_pct"] = 100.0 * res["findings_s"] / res["cold_analyze_s"]
        res["critical_path_share_pct"] = 100.0 * res["critical_path_s"] / res["cold_analyze_s"]
        res["both_share_pct"] = res["findings_share_pct"] + res["critical_path_share_pct"]
    print(f"{res['json_mb']:.0f} MB, {res['events']:,} events, {res['steps']:,} steps: cold analyze {res['cold_analyze_s']:.2f} s "
          f"(median of {a.repeat}); findings {res['findings_s']:.3f} s = {res['findings_share_pct']:.1f}% of it "
          f"({res['findings']} findings); critical path {res['critical_path_s']:.3f} s = {res['critical_path_share_pct']:.1f}%; "
          f"together {res['both_share_pct']:.1f}%")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
