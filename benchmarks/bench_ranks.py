"""Many ranks: kernscope's local engine vs HTA's TraceAnalysis on the same folder, in one run; client memory
as ranks grow; the Dask engine (LocalCluster, 2 workers) against the local one.

    python benchmarks/bench_ranks.py                      # 64 ranks of ~30 MB (replicated from multirank/ddp4)
    python benchmarks/bench_ranks.py --ranks 16 64 256 --size-mb 9 --skip-hta   # client memory vs ranks
    python benchmarks/bench_ranks.py --ranks 8 --size-mb 9 --dask

Ranks are real rank traces made bigger with ``kernscope.testing.replicate`` (each a shifted copy of the
ddp4 job's steps) and made into new ranks with ``make_rank`` (rank number, world size, small jitter).
Each tool runs in its own process; "client RSS" is the peak RSS of the process that asked for the analysis
(kernscope's worker processes are measured separately), HTA's is its own process plus its parse pool.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
SRC = ROOT.parent / "shared" / "traces" / "multirank"
WORK = Path(os.environ.get("KERNSCOPE_BENCH_DIR", "/tmp/kernscope-bench-ranks"))

KS = r"""
import json, os, resource, sys, time, tempfile
os.environ.setdefault("KERNSCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="kscache-"))
from kernscope.analyze.ranks import RankTask
from kernscope.engine import EngineSpec, analyze_job, expand_inputs
kind, workers, folder = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mode = sys.argv[5] if len(sys.argv) > 5 else ""
cache = mode == "cached"
projection = mode != "whole"  # "whole": every event parsed (no load projection)
if cache:  # fill the parse cache first: the timed run is a re-analysis
    analyze_job(expand_inputs([folder]), RankTask(cache=True), EngineSpec(kind, workers=workers))
t0 = time.perf_counter()
job = analyze_job(expand_inputs([folder]), RankTask(cache=cache, projection=projection), EngineSpec(kind, workers=workers))
dt = time.perf_counter() - t0
self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
job.ranks.write_parquet(sys.argv[4] + ".ranks.parquet")
job.stragglers.write_parquet(sys.argv[4] + ".stragglers.parquet")
job.instances.write_parquet(sys.argv[4] + ".instances.parquet")
print(json.dumps({"seconds": dt, "client_rss_mb": self_kb / 1024, "worker_rss_mb": kids_kb / 1024,
                  "ranks": job.ranks.height, "stragglers": job.stragglers["rank"].to_list(),
                  "overlap": job.ranks["overlap_pct"].to_list()}))
"""

HTA = r"""
import json, logging, resource, sys, time
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
ta = TraceAnalysis(trace_dir=sys.argv[1])
df = ta.get_comm_comp_overlap(visualize=False)
dt = time.perf_counter() - t0
self_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kids_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": dt, "client_rss_mb": self_kb / 1024, "worker_rss_mb": kids_kb / 1024, "ranks": len(df)}))
"""


def prepare(n: int, size_mb: float) -> Path:
    """``n`` rank files of about ``size_mb`` MB JSON each (cached under WORK)."""
    from kernscope.testing.replicate import make_rank, replicate, span_us

    folder = WORK / f"ranks{n}_{size_mb:g}mb_v2"
    done = folder / ".done"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    bases = []
    period = max(span_us(SRC / f"ddp4_rank{r}.json.gz") for r in range(4)) + 1000  # replicas aligned across ranks
    for r in range(4):
        src = SRC / f"ddp4_rank{r}.json.gz"
        base = WORK / f"base_rank{r}_{size_mb:g}mb_v2.json"
        if not base.exists():
            replicate(src, base, target_bytes=int(size_mb * 1e6), period_us=period)
        bases.append(base)
    for r in range(n):
        make_rank(bases[r % 4], folder / f"rank{r}.json", rank=r, world_size=n, jitter_us=20, seed=1)
    done.touch()
    return folder


def run(code: str, *args: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, nargs="+", default=[64])
    ap.add_argument("--size-mb", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--dask", action="store_true", help="also run the Dask engine (LocalCluster of 2 workers)")
    ap.add_argument("--cached", action="store_true", help="also time a re-analysis that uses the parse cache")
    ap.add_argument("--whole", action="store_true",
                    help="also time kernscope parsing every event (no load projection) and check the tables are equal")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores; ranks replicated from {SRC}")
    for n in args.ranks:
        t0 = time.perf_counter()
        folder = prepare(n, args.size_mb)
        total = sum(p.stat().st_size for p in folder.glob("rank*.json"))
        print(f"\n{n} ranks, {total / 1e6 / n:,.1f} MB JSON each ({total / 1e9:,.2f} GB; prepared in "
              f"{time.perf_counter() - t0:,.0f} s)")
        ks = run(KS, "local", str(args.workers), str(folder), str(WORK / f"ks{n}"))
        print(f"  kernscope local ({args.workers} processes), cold: {ks}")
        if args.whole:
            kw = run(KS, "local", str(args.workers), str(folder), str(WORK / f"ksw{n}"), "whole")
            import polars as pl

            same = all(pl.read_parquet(WORK / f"ks{n}.{t}.parquet").equals(pl.read_parquet(WORK / f"ksw{n}.{t}.parquet"))
                       for t in ("ranks", "stragglers", "instances"))
            print(f"  kernscope local, every event parsed (no projection): {kw}; identical tables: {same}")
        if args.cached:
            kc = run(KS, "local", str(args.workers), str(folder), str(WORK / f"ksc{n}"), "cached")
            print(f"  kernscope local, re-analysis (parse cache): {kc}")
        if args.dask:
            dk = run(KS, "dask", "2", str(folder), str(WORK / f"dask{n}"))
            import polars as pl

            same = all(pl.read_parquet(WORK / f"ks{n}.{t}.parquet").equals(pl.read_parquet(WORK / f"dask{n}.{t}.parquet"))
                       for t in ("ranks", "stragglers", "instances"))
            print(f"  kernscope dask (LocalCluster, 2 workers): {dk}; identical tables: {same}")
        if not args.skip_hta:
            hta = run(HTA, str(folder))
            print(f"  HTA TraceAnalysis + get_comm_comp_overlap: {hta}")
            if "seconds" in hta and "seconds" in ks:
                print(f"  -> kernscope is {float(hta['seconds']) / float(ks['seconds']):,.1f}x faster cold; "  # type: ignore[arg-type]
                      f"client RSS {ks['client_rss_mb']:,.0f} MB vs HTA {hta['client_rss_mb']:,.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
