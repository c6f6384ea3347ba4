"""The 207 MB profile decoded by kernscope against jax.profiler.ProfileData's per-line counts (record_info.json)."""
import json, sys, time
import polars as pl
from kernscope.load.xplane import decode
import kernscope
path, info = sys.argv[1], json.load(open(sys.argv[2]))
ref = next(iter(info["reference"].values()))
for native in ("0", "1"):
    import os
    os.environ["KERNSCOPE_NO_NATIVE"] = native
    t = time.perf_counter()
    raw = decode(open(path, "rb").read(), path)
    dt = time.perf_counter() - t
    ev = raw.events
    names = {(str(r[2]), str(r[3])): str(r[4]) for r in raw.meta_events.filter(pl.col("name") == "thread_name").iter_rows()}
    got = ev.group_by(pl.col("pid").cast(pl.String), pl.col("tid").cast(pl.String)).agg(pl.len(), pl.col("dur").sum(), pl.col("ts").min())
    by_line = {names[(p, t_)]: (n, d, m) for p, t_, n, d, m in got.iter_rows()}
    print(f"reader {'numpy' if native == '1' else 'compiled'}: {ev.height:,} events (ProfileData {ref['events']:,}) in {dt:.2f} s")
    ok = ev.height == ref["events"]
    for plane, lines in ref["planes"].items():
        for line, want in lines.items():
            n, d, m = by_line[line]
            same_n = n == want["events"]
            close_d = abs(d - want["dur_ns"]) <= n / 2 + 1
            ok &= same_n and close_d
            print(f"  {plane} / {line}: events {n:,} vs {want['events']:,} {'=' if same_n else 'DIFFER'}; "
                  f"dur {d:,} ns vs {want['dur_ns']:,.0f} (|diff| {abs(d - want['dur_ns']):,.0f} <= {n / 2 + 1:,.0f}: {close_d})")
    print("  all equal:", ok)
t = kernscope.load(path, cache=False)
print("load: gpu rows", t.gpu.height, "kernels", int((t.gpu["kind"] == "kernel").sum()), "steps", t.steps.height)
