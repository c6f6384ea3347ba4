"""This tree against another, phase by phase: alternating pairs of a cold ``kernscope analyze TRACE --no-cache
--format json --timings`` with this tree's source and with ``--against SRC`` (another tree's ``src`` folder, e.g. a
``git worktree`` of an earlier commit with its compiled library built and its bytecode compiled, ``python -m
compileall``, as ``make install`` does for this tree), each its own process.

    python benchmarks/bench_phases.py TRACE [TRACE ...] --against SRC [--pairs 4] [--out results.json]

Prints per trace and side the median and range of each phase of ``--timings`` (since session 96 the command's start
first; parse, link, analysis, render; a JAX profile's plan, windows summed, merge; a phase one tree's table lacks
reads 0 on its side), of the whole process's wall time, the peaks (``os.wait4``), the ratio of
the medians (against / this) and whether both sides printed the same JSON (a change that is only faster must). A
phase takes a few tens of ms where the wall time varies by ±0.1 s on a noisy machine: the phase shows what the wall
time cannot.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from pathlib import Path

from bench_headstart import child

ROOT = Path(__file__).resolve().parent.parent
#: a row of the ``--timings`` table: the phase's first word, then its seconds and share
_ROW = re.compile(r"^(\w+)\b.*?\s([\d.]+)\s+[\d.]+%$")


def phases(timings: str) -> dict[str, float]:
    """Seconds per phase of a ``--timings`` table (its rows of one first word summed: a JAX profile's windows)."""
    out: dict[str, float] = {}
    for line in timings.splitlines():
        m = _ROW.match(line.strip())
        if m and m.group(1) != "phase":
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(2))
    return out


def run(trace: str, src: str) -> tuple[dict[str, float], float, str]:
    """(phases with ``wall``, peak MiB, stdout) of one cold analyze with ``src`` first on the path."""
    env = dict(os.environ, PYTHONPATH=src)
    seconds, peak, out, err = child([sys.executable, "-m", "kernscope", "analyze", trace, "--no-cache", "--format", "json",
                                     "--timings", "-q"], env)
    return {**phases(err), "wall": seconds}, peak, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--against", required=True, help="another source tree (its src folder)")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--out", help="write the runs as JSON")
    args = ap.parse_args()
    trees = {"this": str(ROOT / "src"), "against": os.path.abspath(args.against)}
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; {args.pairs} alternating pairs per trace; "
          f"against {trees['against']}")
    results = {}
    for trace in args.traces:
        runs: dict[str, list[tuple[dict[str, float], float]]] = {"this": [], "against": []}
        outputs: dict[str, set[str]] = {"this": set(), "against": set()}
        for i in range(args.pairs):
            for side in (("this", "against") if i % 2 == 0 else ("against", "this")):
                times, peak, out = run(trace, trees[side])
                runs[side].append((times, peak))
                outputs[side].add(out)
        print(f"{trace} ({os.path.getsize(trace) / 1e6:,.1f} MB on disk)")
        names = list(dict.fromkeys(k for times, _ in runs["this"] + runs["against"] for k in times))
        med: dict[str, dict[str, float]] = {}
        for side in ("this", "against"):
            med[side] = {}
            cells = []
            for k in names:
                t = [times.get(k, 0.0) for times, _ in runs[side]]
                med[side][k] = statistics.median(t)
                cells.append(f"{k} {med[side][k]:.3f} ({min(t):.3f}-{max(t):.3f})")
            m = [peak for _, peak in runs[side]]
            print(f"  {side:7s}: " + ", ".join(cells) + f" s; peak {min(m):.0f}-{max(m):.0f} MiB")
        ratios = ", ".join(f"{k} {med['against'][k] / med['this'][k]:.2f}x" for k in names if med["this"][k] > 0)
        same = len(outputs["this"] | outputs["against"]) == 1
        print(f"  against / this (medians): {ratios}; the same JSON on both sides: {same}")
        results[trace] = {"runs": runs, "same_output": same}
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
