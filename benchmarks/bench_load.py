"""Trace-load benchmark: kernscope vs json.loads vs HTA on one synthetic Kineto trace, side by side.

Each measurement runs in a fresh Python process so that peak RSS (ru_maxrss of the process and
of its worker children) and cold timings are honest. Usage:

    python benchmarks/bench_load.py [--size-mb 1000] [--gz] [--skip-hta] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

TASKS = {
    "kernscope_cold": """
        import kernscope
        from kernscope.analyze.summary import analyze
        t = kernscope.load(PATH, cache=False)
        a = analyze(t)
        n = int(t.kernels.height)
    """,
    "kernscope_cold_write_cache": """
        import kernscope
        from kernscope.analyze.summary import analyze
        t = kernscope.load(PATH, cache=True)
        a = analyze(t)
        n = int(t.kernels.height)
    """,
    "kernscope_cached": """
        import kernscope
        from kernscope.analyze.summary import analyze
        t = kernscope.load(PATH, cache=True)
        assert t.from_cache
        a = analyze(t)
        n = int(t.kernels.height)
    """,
    "kernscope_load_only_cold": """
        import kernscope
        t = kernscope.load(PATH, cache=False)
        n = int(t.kernels.height)
    """,
    "kernscope_load_only_cached": """
        import kernscope
        t = kernscope.load(PATH, cache=True)
        assert t.from_cache
        n = int(t.kernels.height)
    """,
    "json_loads": """
        import json, gzip
        raw = open(PATH, 'rb').read()
        if raw[:2] == b'\\x1f\\x8b': raw = gzip.decompress(raw)
        d = json.loads(raw)
        n = sum(1 for e in d['traceEvents'] if e.get('cat') == 'kernel')
    """,
    "hta": """
        import os, shutil, logging
        logging.disable(logging.CRITICAL)
        from hta.trace_analysis import TraceAnalysis
        d = os.path.join(TMP, 'hta_trace')
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, 'rank-0.json' + ('.gz' if PATH.endswith('.gz') else ''))
        if not os.path.exists(dst): os.symlink(PATH, dst)
        ta = TraceAnalysis(trace_dir=d)
        kb = ta.get_gpu_kernel_breakdown(visualize=False)
        n = int(len(ta.t.get_trace(0).query('stream >= 0')))
    """,
}

RUNNER = """
import os, sys, time, resource, json, gc
PATH = {path!r}; TMP = {tmp!r}
t0 = time.perf_counter()
{body}
dt = time.perf_counter() - t0
self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({{"seconds": dt, "rss": self_rss, "child_rss": child_rss, "n": n}}))
"""


def run_task(name: str, path: str, tmp: str, env: dict[str, str]) -> dict:
    code = RUNNER.format(path=path, tmp=tmp, body=textwrap.indent(textwrap.dedent(TASKS[name]), ""))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode != 0:
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=1000.0, help="JSON size of the synthetic trace (MB)")
    ap.add_argument("--gz", action="store_true", help="write the trace gzip-compressed")
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--trace", help="benchmark this trace instead of a synthetic one")
    ap.add_argument("--out", help="write results as JSON")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from kernscope.testing.synth import make_trace

    tmp = tempfile.mkdtemp(prefix="kernscope-bench-")
    env = dict(os.environ, KERNSCOPE_CACHE_DIR=os.path.join(tmp, "cache"), PYTHONPATH=str(ROOT))
    if args.trace:
        path = os.path.abspath(args.trace)
    else:
        path = os.path.join(tmp, "trace.json" + (".gz" if args.gz else ""))
        t0 = time.perf_counter()
        st = make_trace(path, int(args.size_mb * 1e6))
        print(f"synthesized {path}: {st.events:,} events, {st.kernels:,} kernels in {time.perf_counter() - t0:.1f}s")
    json_bytes = int(args.size_mb * 1e6) if not args.trace else None
    if json_bytes is None or args.gz:
        import gzip

        with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
            json_bytes = sum(len(b) for b in iter(lambda: f.read(1 << 24), b""))
    else:
        json_bytes = os.path.getsize(path)
    mb = json_bytes / 1e6
    print(f"JSON size: {mb:,.1f} MB  file: {os.path.getsize(path) / 1e6:,.1f} MB  machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    order = ["kernscope_cold", "kernscope_cold_write_cache", "kernscope_cached", "kernscope_load_only_cold",
             "kernscope_load_only_cached", "json_loads"] + ([] if args.skip_hta else ["hta"])
    res = {}
    for name in order:
        r = run_task(name, path, tmp, env)
        res[name] = r
        if "error" in r:
            print(f"{name:28s} ERROR {r['error']}")
            continue
        print(f"{name:28s} {r['seconds']:8.2f} s  {mb / r['seconds']:8.1f} MB/s  peak RSS {r['rss'] / 1e9:6.2f} GB "
              f"({r['rss'] / json_bytes:4.2f}x JSON; workers {r['child_rss'] / 1e9:5.2f} GB)  n={r['n']:,}")
    cold = res["kernscope_cold"].get("seconds")
    print()
    ratios = {}
    if cold:
        lo, lc = res.get("kernscope_load_only_cold", {}).get("seconds"), res.get("kernscope_load_only_cached", {}).get("seconds")
        if lo and lc:
            ratios["cold load / cached reload (load only)"] = lo / lc
        if res.get("kernscope_cached", {}).get("seconds"):
            ratios["cold / cached (load + summary)"] = cold / res["kernscope_cached"]["seconds"]
        for other, label in (("json_loads", "json.loads / kernscope cold"), ("hta", "HTA / kernscope cold (load + kernel breakdown)")):
            if res.get(other, {}).get("seconds"):
                ratios[label] = res[other]["seconds"] / cold
        for label, r in ratios.items():
            print(f"{label:48s} {r:6.1f}x")
    if args.out:
        Path(args.out).write_text(json.dumps({"json_mb": mb, "results": res, "ratios": ratios,
                                              "machine": f"{platform.machine()} {os.cpu_count()} cores"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
