# session 72: the C heap trimmed only where a load freed 16 MB (native.TRIM_MIN_BYTES); before = a680eb5 (worktree,
# bytecode compiled, the compiled library copied in), after = cac1885 or later. Loads and analyzes the public traces
# (KERNSCOPE_TRACES) ROUNDS times in one process, holding a few raw event lists as the test workers hold them, and
# prints wall, user and system time, peak RSS and the trim calls; the two trees interleaved.
# usage: KERNSCOPE_TRACES=../shared/traces python s72_trim.py BEFORE_SRC AFTER_SRC PAIRS [ROUNDS]
import os, subprocess, sys

CHILD = r"""
import gzip, importlib, json, os, resource, sys, time
from pathlib import Path
import kernscope
from kernscope.analyze.summary import analyze
from kernscope.pipeline import _gc_paused
nat = importlib.import_module("kernscope.load.native")
kin = importlib.import_module("kernscope.load.kineto")
pipe = importlib.import_module("kernscope.pipeline")
orig, calls = nat.trim_heap, [0]
def counted(*a):
    calls[0] += 1
    orig(*a)
kin.trim_heap = pipe.trim_heap = nat.trim_heap = counted
paths = sorted(Path(os.environ["KERNSCOPE_TRACES"]).rglob("*.json.gz"))
held = []
r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
for _ in range(int(sys.argv[1])):
    for i, p in enumerate(paths):
        analyze(kernscope.load(p, cache=False))
        if i % 6 == 0:
            with _gc_paused():
                held.append(json.loads(gzip.open(p).read())["traceEvents"][:2000])
r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
print(f"wall {t1 - t0:.2f} s user {r1.ru_utime - r0.ru_utime:.2f} s system {r1.ru_stime - r0.ru_stime:.2f} s "
      f"peak {r1.ru_maxrss // 1024} MiB trim calls {calls[0]} ({len(paths)} traces)")
"""

before, after, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3])
rounds = sys.argv[4] if len(sys.argv) > 4 else "2"
for r in range(pairs):
    for name, src in (("before", before), ("after", after)):
        env = dict(os.environ, PYTHONPATH=src, KERNSCOPE_CACHE_DIR="/tmp/s72_trim_cache")
        p = subprocess.run([sys.executable, "-c", CHILD, rounds], env=env, capture_output=True, text=True)
        print(f"pair {r} {name}: {p.stdout.strip() or p.stderr.strip().splitlines()[-1]}", flush=True)
