"""The parse's head starts on and off, side by side: alternating pairs of a cold ``kernscope analyze TRACE --no-cache``
with ``KERNSCOPE_NO_HEADSTART`` unset (on) and ``=1`` (off), each its own process, wall time and peak RSS.

    python benchmarks/bench_headstart.py TRACE [TRACE ...] [--pairs 8] [--out results.json]

A plain Kineto trace of 24 MB or more gets the head start of ``kernscope.load.headstart`` (its first pieces scanned
while the command imports), a gzipped one of 1 MB or more that inflates to 24 MB its gzip head start
(``kernscope.load.gzhead``: all of it inflated and scanned on a thread). Prints per trace the median and range of
each side, the peaks, the ratio of the medians, and whether the two sides printed the same JSON (they must).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str, str]:
    """(seconds, the child's own peak RSS in MiB (``os.wait4``), stdout, stderr) of ``cmd`` run in its own process
    (its outputs through files: the process is reaped by ``wait4`` alone); exits where it fails."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited with {proc.returncode}: {stderr.strip()[-300:]}")
    return seconds, usage.ru_maxrss / 1024, stdout, stderr


def run(trace: str, on: bool) -> tuple[float, float, str]:
    """(seconds, the child's own peak RSS in MiB, stdout) of one cold analyze in its own process."""
    env = dict(os.environ)
    env.pop("KERNSCOPE_NO_HEADSTART", None)
    if not on:
        env["KERNSCOPE_NO_HEADSTART"] = "1"
    seconds, peak, out, _ = child([sys.executable, "-m", "kernscope", "analyze", trace, "--no-cache", "--format", "json",
                                   "-q"], env)
    return seconds, peak, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--out", help="write the runs as JSON")
    args = ap.parse_args()
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; {args.pairs} alternating pairs per trace")
    results = {}
    for trace in args.traces:
        runs: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
        outputs: dict[str, set[str]] = {"on": set(), "off": set()}
        for i in range(args.pairs):
            for side in (("on", "off") if i % 2 == 0 else ("off", "on")):
                seconds, peak, out = run(trace, side == "on")
                runs[side].append((seconds, peak))
                outputs[side].add(out)
        print(f"{trace} ({os.path.getsize(trace) / 1e6:,.1f} MB on disk)")
        med = {}
        for side in ("on", "off"):
            t = [r[0] for r in runs[side]]
            m = [r[1] for r in runs[side]]
            med[side] = statistics.median(t)
            print(f"  head start {side:3s}: median {med[side]:.3f} s (range {min(t):.3f}-{max(t):.3f}), "
                  f"peak {min(m):.0f}-{max(m):.0f} MiB")
        same = len(outputs["on"] | outputs["off"]) == 1
        print(f"  off / on: {med['off'] / med['on']:.2f}x; the same JSON on both sides: {same}")
        results[trace] = {"runs": runs, "same_output": same}
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
