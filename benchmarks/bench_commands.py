"""What the commands a user runs on one trace cost: each cold, and each after `kernscope analyze` of the same file.

    python benchmarks/bench_commands.py TRACE... [--repeat 3] [--commands perf,memory,report] [--against SRC]

For every trace and command, in fresh processes: **cold** (an empty parse cache: the command alone) and **after
analyze** (a cache holding only what a cold `kernscope analyze --format json` stored: the command then reads that
entry where it can, or parses the file again). Each run is the whole process's wall time and its peak RSS
(`os.wait4`). The commands: `perf`, `analyze --roofline`, `memory` and `sql` (a count of the kernels) as JSON,
`report` as HTML. A command that answers nothing (exit 3: `memory` of a trace without memory events) shows `-`.

`--against SRC`: the same runs with another source tree's `kernscope` (`PYTHONPATH=SRC`, e.g. a `git worktree` of an
earlier commit with its compiled scanner built or copied in), interleaved run by run with this tree's, and the ratio
of the medians (before / after). Outputs are compared byte for byte (the HTML report too); a difference is printed.
This is how `docs/results/load/s61_*` were taken, there as shell loops.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: command -> (arguments after the trace, output suffix)
COMMANDS: dict[str, tuple[list[str], str]] = {
    "perf": (["--format", "json"], "json"),
    "roofline": (["--roofline", "--format", "json"], "json"),  # (analyze --roofline)
    "memory": (["--format", "json"], "json"),
    "report": ([], "html"),
    "sql": (["--format", "json"], "json"),
}
SQL = "SELECT count(*) AS kernels FROM kernels"


def _argv(command: str, trace: str, out: str) -> list[str]:
    """The command line of ``command`` on ``trace`` writing ``out``."""
    if command == "analyze":
        return ["analyze", trace, "--format", "json", "-o", out]
    if command == "roofline":
        return ["analyze", trace, *COMMANDS[command][0], "-o", out]
    if command == "sql":
        return ["sql", SQL, trace, *COMMANDS[command][0], "-o", out]
    return [command, trace, *COMMANDS[command][0], "-o", out]


def _run(src: str, argv: list[str], cache: str) -> tuple[float, int, int]:
    """(wall s, peak RSS MB, exit code) of ``python -m kernscope ARGV`` with ``src`` first on the path."""
    import time

    env = dict(os.environ, PYTHONPATH=src, KERNSCOPE_CACHE_DIR=cache)
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "kernscope", *argv], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss // 1024, p.returncode


def _digest(path: str) -> str | None:
    return hashlib.sha1(Path(path).read_bytes()).hexdigest()[:12] if os.path.exists(path) else None


def measure(trace: str, command: str, after: bool, src: str, work: str) -> tuple[float, int, int, str | None]:
    """One run of ``command`` on ``trace`` (``after``: once ``analyze`` stored its entry), in a fresh cache."""
    cache = os.path.join(work, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    if after:
        _run(src, _argv("analyze", trace, os.path.join(work, "analyze.json")), cache)
    out = os.path.join(work, f"out.{COMMANDS[command][1]}")
    if os.path.exists(out):
        os.remove(out)
    wall, rss, rc = _run(src, _argv(command, trace, out), cache)
    return wall, rss, rc, _digest(out) if rc == 0 else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--commands", default=",".join(COMMANDS), help=f"of {', '.join(COMMANDS)}")
    ap.add_argument("--against", default=None, help="another source tree (its src folder) to compare with")
    args = ap.parse_args()
    commands = [c for c in args.commands.split(",") if c]
    unknown = [c for c in commands if c not in COMMANDS]
    if unknown:
        ap.error(f"unknown command(s) {', '.join(unknown)}: {', '.join(COMMANDS)}")
    sides = [("after", str(ROOT / "src"))] if args.against is None else [("before", args.against), ("after", str(ROOT / "src"))]
    differ = 0
    with tempfile.TemporaryDirectory(prefix="kernscope-bench-") as work:
        for trace in args.traces:
            size = os.path.getsize(trace) / 1e6
            print(f"\n{trace} ({size:,.1f} MB), {args.repeat} interleaved round(s): median wall time (peak RSS)")
            head = f"{'command':<24}" + "".join(f"{name:>22}" for name, _ in sides) + ("   ratio" if len(sides) > 1 else "")
            print(head)
            for command in commands:
                for after in (False, True):
                    runs: dict[str, list[tuple[float, int, int, str | None]]] = {name: [] for name, _ in sides}
                    for _ in range(args.repeat):
                        for name, src in sides:
                            runs[name].append(measure(trace, command, after, src, work))
                    label = f"{command} {'after analyze' if after else 'cold'}"
                    cells, medians = [], []
                    for name, _ in sides:
                        got = runs[name]
                        if any(r[2] != 0 for r in got):
                            cells.append(f"{'- (exit ' + str(got[0][2]) + ')':>22}")
                            medians.append(None)
                            continue
                        wall = statistics.median(r[0] for r in got)
                        rss = statistics.median(r[1] for r in got)
                        cells.append(f"{f'{wall:.2f} s ({rss:.0f} MB)':>22}")
                        medians.append(wall)
                    ratio = (f"{medians[0] / medians[1]:>8.2f}" if len(sides) > 1 and None not in medians else "")
                    print(f"{label:<24}" + "".join(cells) + ratio)
                    digests = {r[3] for name in runs for r in runs[name]}
                    if len(digests) > 1:
                        differ += 1
                        print(f"  outputs differ: {sorted(d or '-' for d in digests)}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
