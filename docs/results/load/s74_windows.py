"""Session 74: a JAX profile decoded a time window at a time (``xplane.time_cuts`` + ``decode(window=...)``; "planned":
``xplan.plan``'s windows at quiet points, the shared parts read once, the plan's time as ``cuts_s``) against the whole
decode, each in a fresh process: wall time and peak RSS. Usage: python s74_windows.py PROFILE [WINDOWS]."""

from __future__ import annotations

import subprocess
import sys

CHILD = r"""
import gc, importlib, json, mmap, sys, time
import numpy as np
xp = importlib.import_module("kernscope.load.xplane")
def hwm():  # the process's peak RSS, MiB (VmHWM: ru_maxrss would keep the parent's across the exec)
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
path, mode, k = sys.argv[1], sys.argv[2], int(sys.argv[3])
f = open(path, "rb"); data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
base = hwm()
t0 = time.perf_counter()
cut_s, per = 0.0, []
if mode == "span":  # the GPU rows' first start and last start + 1 (ns)
    ev = xp.decode(data, path).events
    g = ev.filter(ev["device"].is_not_null())["ts"]
    print(json.dumps([int(g.min()), int(g.max()) + 1]))
    sys.exit(0)
if mode == "whole":
    ev = xp.decode(data, path).events
    rows, gpu = ev.height, int(ev["device"].is_not_null().sum())
    del ev
elif mode == "planned":  # xplan.plan: k windows cut at quiet points, the profile's shared parts read once
    xpl = importlib.import_module("kernscope.load.xplan")
    t1 = time.perf_counter()
    plan = xpl.plan(data, path, k)
    cut_s = time.perf_counter() - t1
    rows = gpu = 0
    for w in range(plan.windows):
        tw = time.perf_counter()
        ev = xp.decode(data, path, window=xp.Window(plan.cuts, w), shared=plan.shared).events
        rows += ev.height
        gpu += int(ev["device"].is_not_null().sum())
        per.append((round(time.perf_counter() - tw, 3), ev.height))
        del ev
        gc.collect()
else:  # k windows of equal time over the GPU rows' span, one after another, each freed before the next
    span = json.loads(sys.argv[4])
    t1 = time.perf_counter()
    cuts = xp.time_cuts(data, path, np.linspace(span[0], span[1], k + 1)[1:-1].astype(np.int64))
    cut_s = time.perf_counter() - t1
    rows = gpu = 0
    for w in range(k):
        tw = time.perf_counter()
        ev = xp.decode(data, path, window=xp.Window(cuts, w)).events
        rows += ev.height
        gpu += int(ev["device"].is_not_null().sum())
        per.append((round(time.perf_counter() - tw, 3), ev.height))
        del ev
        gc.collect()
wall = time.perf_counter() - t0
print(json.dumps({"mode": mode, "windows": k, "wall_s": round(wall, 3), "cuts_s": round(cut_s, 3), "rows": rows,
                  "gpu_rows": gpu, "peak_mib": round(hwm(), 1), "start_mib": round(base, 1), "per_window": per or None}))
"""


def main() -> None:
    path = sys.argv[1]
    ks = [int(x) for x in sys.argv[2:]] or [4, 8]
    span = subprocess.run([sys.executable, "-c", CHILD, path, "span", "1"], capture_output=True, text=True,
                          check=True).stdout.strip()
    print(f"profile {path}; the GPU rows' span (ns) {span}")
    for rnd in range(3):
        for mode, k in [("whole", 1), *(("windows", k) for k in ks), *(("planned", k) for k in ks)]:
            out = subprocess.run([sys.executable, "-c", CHILD, path, mode, str(k), span], capture_output=True, text=True,
                                 check=True)
            print(f"round {rnd}: {out.stdout.strip()}")


if __name__ == "__main__":
    main()
