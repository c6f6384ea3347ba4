"""Where a cold `kernscope analyze` spends its time, phase by phase, on one trace.

    python benchmarks/load_phases.py TRACE [--workers N]

Phases are timed one after the other in one process (wall clock, `time.perf_counter`): imports, content
hash (the cache key), for a Kineto JSON trace cutting the event array into pieces alone (no parse), parse
(the format's own: Kineto pieces on the thread pool, or a JAX profile's XSpace decode), link, cache write,
default summary, JSON render. The sum is close to, but not exactly, a cold CLI run (the CLI overlaps the
imports with the file's hash; it adds argument parsing and the interpreter start).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--read-all", action="store_true", help="parse every event and arg (analyze --read-all)")
    args = ap.parse_args()
    os.environ["KERNSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="ks-phases-")
    os.environ.setdefault("_RJEM_MALLOC_CONF", "narenas:1,dirty_decay_ms:200,muzzy_decay_ms:0")  # as the CLI
    size = os.path.getsize(args.trace)
    rows: list[tuple[str, float]] = []

    def lap(name: str, t0: float) -> float:
        t = time.perf_counter()
        rows.append((name, t - t0))
        return t

    t = time.perf_counter()
    import polars  # noqa: F401

    from kernscope.analyze.needs import analyze_projection
    from kernscope.analyze.summary import analyze
    from kernscope.link import StepSpec, link
    from kernscope.load import cache
    from kernscope.load.document import Splitter
    from kernscope.load.formats import ParseOptions, detect
    from kernscope.load.kineto import piece_bytes
    from kernscope.load.source import Limits, open_trace
    from kernscope.pipeline import LoadOptions, _info
    from kernscope.render.formats import text as render_text
    t = lap("imports (polars, kernscope)", t)
    digest = cache.file_digest(args.trace)
    t = lap("content hash (xxh3-128, cache key)", t)
    src = open_trace(args.trace)
    fmt = detect(src)
    if fmt.name == "kineto":
        n = sum(1 for _ in Splitter(src, Limits(), chunk_bytes=piece_bytes()).pieces())
        t = lap(f"cut into {n} event-aligned pieces (no parse)", t)
    src.close()
    projection = None if args.read_all else analyze_projection(None)
    src = open_trace(args.trace)
    raw = fmt.parse(src, ParseOptions(workers=args.workers, projection=projection if fmt.projects else None))
    src.close()
    what = "pieces on threads" if fmt.name == "kineto" else "XSpace decode"
    t = lap(f"parse ({fmt.name}): {what}", t)
    trace = link(raw, args.trace, steps=StepSpec())
    t = lap("link (correlation, tree, steps)", t)
    tables = {"events": trace.events, "gpu": trace.gpu, "flows": trace.flows, "steps": trace.steps}
    cache.write_entry(digest, LoadOptions(projection=projection).key(), tables, _info(trace))
    t = lap("cache write (Arrow IPC + checksums)", t)
    a = analyze(trace)
    t = lap("default summary (analyze)", t)
    body = render_text(a)
    t = lap("JSON render", t)
    total = sum(v for _, v in rows)
    cut = next((v for k, v in rows if k.startswith("cut ")), 0.0)
    print(f"{args.trace}: {size / 1e6:.0f} MB, {trace.stats.events:,} events, {len(body):,} bytes of JSON out")
    for k, v in rows:
        print(f"  {k:48s} {v:7.2f} s  {100 * v / total:5.1f}%")
    print(f"  {'total (cut counted once, inside parse)':48s} {total - cut:7.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
