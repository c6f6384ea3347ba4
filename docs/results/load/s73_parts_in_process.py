"""Session 73: the parts of a JAX profile (docs/results/load/s73_parts.py) loaded and analyzed one after another in one
process, with the allocator settings of a one-shot command (jemalloc decay argv[2] ms), each part dropped before the
next: per part the load and analysis time, the RSS after it and the peak so far.

    python docs/results/load/s73_parts_in_process.py PART0,PART1,... [DECAY_MS]
"""
import os, sys, time, gc, resource
decay = sys.argv[2] if len(sys.argv) > 2 else "3000"
os.environ["_RJEM_MALLOC_CONF"] = f"narenas:1,dirty_decay_ms:{decay},muzzy_decay_ms:0"
os.environ["OPENBLAS_NUM_THREADS"] = "1"
import ctypes
libc = ctypes.CDLL("libc.so.6"); libc.mallopt(-8, 1); libc.mallopt(-3, 32 << 20)
import kernscope as k
from kernscope.analyze.summary import analyze
from kernscope.render.formats import json as _j  # noqa
def rss():
    for l in open("/proc/self/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) / 1024
t0 = time.perf_counter()
files = sys.argv[1].split(",")
for f in files:
    l0 = time.perf_counter(); t = k.load(f, cache=False, projection="analyze"); l1 = time.perf_counter()
    a = analyze(t); l2 = time.perf_counter(); print(f"  load {l1-l0:.3f} analyze {l2-l1:.3f}")
    steps = a.steps.height
    del t, a
    gc.collect()
    k_native = __import__("importlib").import_module("kernscope.load.native"); k_native.trim_heap()
    print(f"{os.path.basename(f)}: {steps} steps, RSS after {rss():.0f} MiB, peak so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MiB, {time.perf_counter()-t0:.2f} s", flush=True)
