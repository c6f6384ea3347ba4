"""Trace-load benchmark: kernscope vs json.load vs HTA, side by side, on real traces replicated to size.

Every contender runs in a fresh process on the same file in the same run, the file read through (untimed) just
before each, so that each finds it in the page cache as a user's second look at a trace does; wall time is the whole
process (interpreter start, imports, load, analysis, output) and peak RSS is the process's (threads
and worker processes included, via wait4). With ``--repeat N`` the contenders run in turn N times and
the median is reported (with the range). Usage:

    python benchmarks/bench_load.py --from ../shared/traces/hta/v100_2rank_nccl_rank1.json.gz --size-mb 200
    python benchmarks/bench_load.py --synthetic --size-mb 1000 --skip-hta
    python benchmarks/bench_load.py --trace my.json --out results.json

Contenders: ``kernscope_cold`` (``kernscope analyze FILE --format json -o OUT`` with an empty cache),
``kernscope_cold_readers`` (the same with ``KERNSCOPE_NO_NATIVE=1``: polars' readers instead of the compiled scanner),
``kernscope_cached`` (the same command again), ``kernscope_api_cold`` (``kernscope.load`` +
``analyze`` in Python, no cache), ``json_load`` (stdlib, GC off) and ``hta`` (``TraceAnalysis`` +
``get_gpu_kernel_breakdown``, HTA from PyPI). Two more measure what any run costs on the machine of the moment:
``kernscope_floor`` (the cold command on the bundled 160 KB example trace: start-up, imports and the analysis's
fixed work) and ``imports`` (``python -c "import polars, numpy"``); with HTA in the same run the report prints HTA's
time over the floor, the most any cold kernscope run could reach against HTA there.
"""

from __future__ import annotations

import argparse
import compileall
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PY_TASKS = {
    "kernscope_api_cold": """
        import kernscope
        from kernscope.analyze.summary import analyze
        t = kernscope.load(PATH, cache=False)
        a = analyze(t)
        n = int(t.kernels.height)
    """,
    "json_load": """
        import json, gzip, gc
        gc.disable()
        raw = open(PATH, 'rb').read()
        if raw[:2] == b'\\x1f\\x8b': raw = gzip.decompress(raw)
        d = json.loads(raw)
        n = sum(1 for e in d['traceEvents'] if e.get('cat') == 'kernel')
    """,
    "hta": """
        import os, logging
        logging.disable(logging.CRITICAL)
        from hta.trace_analysis import TraceAnalysis
        d = os.path.join(TMP, 'hta_trace')
        os.makedirs(d, exist_ok=True)
        dst = os.path.join(d, 'rank-0.json' + ('.gz' if PATH.endswith('.gz') else ''))
        if not os.path.exists(dst): os.symlink(PATH, dst)
        ta = TraceAnalysis(trace_dir=d)
        kb = ta.get_gpu_kernel_breakdown(visualize=False)
        n = int(len(ta.t.get_trace(next(iter(ta.t.traces))).query('stream >= 0')))  # the file's rank (v100: 1)
    """,
}

#: the bundled example trace (160 KB gzip): what the floor contender analyzes
EXAMPLE = ROOT / "src" / "kernscope" / "examples" / "h200_gpt_train_step.pt.trace.json.gz"

RUNNER = """
import os, sys, json
PATH = {path!r}; TMP = {tmp!r}
{body}
print(json.dumps({{"n": n}}))
"""


def timed(cmd: list[str], env: dict[str, str]) -> dict:
    """Wall time and peak RSS (ru_maxrss via wait4) of one process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t0
    out = p.stdout.read().decode() if p.stdout else ""
    err = p.stderr.read().decode() if p.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        return {"error": (err.strip().splitlines() or ["failed"])[-1]}
    return {"seconds": dt, "rss": ru.ru_maxrss * 1024, "stdout": out[-2000:]}


def run_contender(name: str, path: str, tmp: str, env: dict[str, str]) -> dict:
    if name == "kernscope_cold_readers":  # the same command without the compiled scanner (polars' readers)
        name, env = "kernscope_cold", dict(env, KERNSCOPE_NO_NATIVE="1")
    if name == "imports":
        return dict(timed([sys.executable, "-c", "import polars, numpy"], env), n=0)
    if name == "kernscope_floor":
        name, path = "kernscope_cold", str(EXAMPLE)
    if name in ("kernscope_cold", "kernscope_cached"):
        out = os.path.join(tmp, "analyze.json")
        r = timed([sys.executable, "-m", "kernscope", "analyze", path, "--format", "json", "-o", out], env)
        if "error" not in r:
            trace = json.loads(Path(out).read_text())["trace"]
            # (the analyses scale with the GPU rows: a JAX profile holds 16-75x a Kineto replica's per MB, session 66)
            r.update(n=trace["kernels"], events=trace["events"], gpu_rows=trace["gpu_events"])
        return r
    code = RUNNER.format(path=path, tmp=tmp, body=textwrap.dedent(PY_TASKS[name]))
    r = timed([sys.executable, "-c", code], env)
    if "error" not in r:
        r["n"] = json.loads(r["stdout"].strip().splitlines()[-1])["n"]
    return r


def warm(path: str) -> None:
    """Read the file through (untimed) so that every contender finds it in the page cache: one that runs after
    another's gigabytes (HTA holds 4-7 GB at 1 GB) may otherwise read it from disk, and pay for all (session 24,
    the 1 GB v100 replica, the cold analyze in pairs: 8.10 and 6.82 s with the file dropped from the page cache,
    7.51 and 5.94 s with it there)."""
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 24):
            pass


def json_size(path: str) -> int:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        return os.path.getsize(path)
    with gzip.open(path, "rb") as f:
        return sum(len(b) for b in iter(lambda: f.read(1 << 24), b""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--from", dest="src", help="replicate this real trace to --size-mb of JSON")
    src.add_argument("--synthetic", action="store_true", help="synthesize a trace of --size-mb (kernscope.testing.synth)")
    src.add_argument("--trace", help="benchmark this trace file as it is")
    ap.add_argument("--size-mb", type=float, default=200.0, help="JSON size to build (MB)")
    ap.add_argument("--gz", action="store_true", help="write the built trace gzip-compressed")
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--only", help="comma-separated contenders to run")
    ap.add_argument("--keep", help="keep the built trace at this path")
    ap.add_argument("--out", help="write results as JSON")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds: every contender runs once per round, in turn (so a slow minute of a shared "
                         "machine hits all of them); the median of the rounds is reported")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    tmp = tempfile.mkdtemp(prefix="kernscope-bench-")
    cache = os.path.join(tmp, "cache")
    env = dict(os.environ, KERNSCOPE_CACHE_DIR=cache, PYTHONPATH=str(ROOT / "src"))
    # kernscope as installed: its modules compiled to bytecode, as pip does at install time (HTA's are). A
    # checkout run with PYTHONDONTWRITEBYTECODE=1 set would otherwise compile its changed modules in every run
    compileall.compile_dir(str(ROOT / "src" / "kernscope"), quiet=1)
    suffix = ".json.gz" if args.gz else ".json"
    if args.trace:
        path = os.path.abspath(args.trace)
        origin = f"as given: {path}"
    else:
        path = args.keep or os.path.join(tmp, "trace" + suffix)
        t0 = time.perf_counter()
        # built in a child process: this process stays small, so the contenders it forks report their
        # own peak RSS (a child's ru_maxrss counts the memory it had when forked, before its exec)
        if args.synthetic:
            code = ("import sys; from kernscope.testing.synth import make_trace; "
                    "st = make_trace(sys.argv[1], int(sys.argv[2])); print(f'synthetic ({st.events:,} events)')")
            build = [sys.executable, "-c", code, path, str(int(args.size_mb * 1e6))]
        else:
            src_path = args.src or str(ROOT.parent / "shared/traces/hta/v100_2rank_nccl_rank1.json.gz")
            code = ("import sys; from pathlib import Path; from kernscope.testing.replicate import replicate; "
                    "rs = replicate(sys.argv[3], sys.argv[1], target_bytes=int(sys.argv[2])); "
                    "print(f'{Path(sys.argv[3]).name} x{rs.replicas} ({rs.events:,} events)')")
            build = [sys.executable, "-c", code, path, str(int(args.size_mb * 1e6)), src_path]
        origin = subprocess.run(build, env=env, check=True, capture_output=True, text=True).stdout.strip()
        print(f"built {path} in {time.perf_counter() - t0:.1f}s: {origin}")
    jb = json_size(path)
    mb = jb / 1e6
    print(f"JSON {mb:,.1f} MB, file {os.path.getsize(path) / 1e6:,.1f} MB; machine {platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    order = ["kernscope_cold", "kernscope_cached", "kernscope_cold_readers", "kernscope_api_cold", "json_load",
             "kernscope_floor", "imports"] + ([] if args.skip_hta else ["hta"])
    if args.only:
        order = [o for o in order if o in args.only.split(",")]
    runs: dict[str, list[dict]] = {name: [] for name in order}
    for _ in range(max(1, args.repeat)):
        for name in order:
            if name in ("kernscope_cold", "kernscope_cold_readers", "kernscope_floor"):
                shutil.rmtree(cache, ignore_errors=True)
            warm(path)
            r = run_contender(name, path, tmp, env)
            r.pop("stdout", None)
            runs[name].append(r)
    res: dict[str, dict] = {}
    for name in order:
        failed = [r for r in runs[name] if "error" in r]
        if failed:
            res[name] = failed[0]
            print(f"{name:20s} ERROR {failed[0]['error']}")
            continue
        secs = sorted(r["seconds"] for r in runs[name])
        # the rounds' times in the order they ran too: a slow run right after another contender's shows as such
        r = {"seconds": statistics.median(secs), "seconds_all": secs, "seconds_by_round": [x["seconds"] for x in runs[name]],
             "rss": max(x["rss"] for x in runs[name]), "rss_by_round": [x["rss"] for x in runs[name]],
             "n": runs[name][0]["n"]}
        r.update({k: runs[name][0][k] for k in ("events", "gpu_rows") if k in runs[name][0]})
        res[name] = r
        spread = f" ({secs[0]:.2f}-{secs[-1]:.2f}, {len(secs)} runs)" if len(secs) > 1 else ""
        if name in ("kernscope_floor", "imports"):  # they do not read the trace
            print(f"{name:20s} {r['seconds']:8.2f} s{spread}  peak RSS {r['rss'] / 1e9:6.2f} GB")
            continue
        print(f"{name:20s} {r['seconds']:8.2f} s{spread}  {mb / r['seconds']:8.1f} MB/s  peak RSS {r['rss'] / 1e9:6.2f} GB "
              f"({r['rss'] / jb:4.2f}x JSON)  kernels={r['n']:,}"
              + (f"  events={r['events']:,} ({r['events'] / 1e6 / r['seconds']:.2f} M/s)  GPU rows={r['gpu_rows']:,}"
                 if "events" in r else ""))
    print()
    ratios = {}
    cold = res.get("kernscope_cold", {}).get("seconds")
    if cold:
        for other, label in (("kernscope_cached", "cold / cached analyze"),
                             ("kernscope_cold_readers", "without / with the compiled scanner"),
                             ("json_load", "json.load / kernscope cold analyze"),
                             ("hta", "HTA / kernscope cold analyze")):
            s = res.get(other, {}).get("seconds")
            if s:
                ratios[label] = (cold / s) if other == "kernscope_cached" else (s / cold)
    floor, hta = res.get("kernscope_floor", {}).get("seconds"), res.get("hta", {}).get("seconds")
    if floor and cold:
        ratios["floor / kernscope cold analyze"] = floor / cold
    if floor and hta:
        ratios["HTA / floor (the most any cold run reaches)"] = hta / floor
    for label, r in ratios.items():
        print(f"{label:44s} {r:6.2f}x" if label.startswith("floor") else f"{label:44s} {r:6.1f}x")
    if args.out:
        Path(args.out).write_text(json.dumps({"origin": origin, "json_mb": mb, "file_mb": os.path.getsize(path) / 1e6,
                                              "results": res, "ratios": ratios,
                                              "machine": f"{platform.machine()} {os.cpu_count()} cores"}, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
