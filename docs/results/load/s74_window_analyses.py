"""Session 74: a JAX profile analyzed a planned window at a time (``xplan.plan`` at quiet points, each window decoded
with the shared parts, linked and analyzed alone, one after another in one process) against the whole profile loaded
and analyzed the same way: wall time and peak RSS, and each analysis's JSON written to OUT/{whole,part0..}.xplane.json
for s73_parts_compare.py. Usage: python s74_window_analyses.py PROFILE OUT WINDOWS MODE (MODE: whole or windows)."""

from __future__ import annotations

import gc
import importlib
import json
import mmap
import sys
import time

from kernscope.analyze.summary import analyze
from kernscope.link.build import link
from kernscope.render.formats import text

xp = importlib.import_module("kernscope.load.xplane")
xpl = importlib.import_module("kernscope.load.xplan")


def hwm() -> float:  # the process's peak RSS, MiB
    return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM")) / 1024


def main() -> None:
    path, out, k, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    t0 = time.perf_counter()
    laps = []
    if mode == "whole":
        a = analyze(link(xp.decode(data, path), path))
        with open(f"{out}/whole.xplane.json", "w") as f:
            f.write(text(a, "json"))
        del a
    else:
        plan = xpl.plan(data, path, k)
        laps.append(("plan", round(time.perf_counter() - t0, 3)))
        for w in range(plan.windows):
            t = time.perf_counter()
            raw = xp.decode(data, path, window=xp.Window(plan.cuts, w), shared=plan.shared)
            a = analyze(link(raw, path))
            del raw
            with open(f"{out}/part{w}.xplane.json", "w") as f:
                f.write(text(a, "json"))
            del a
            gc.collect()
            laps.append((f"window {w}", round(time.perf_counter() - t, 3)))
    print(json.dumps({"mode": mode, "windows": k, "wall_s": round(time.perf_counter() - t0, 3), "peak_mib": round(hwm(), 1),
                      "laps": laps}))


if __name__ == "__main__":
    main()
