"""Session 74: the quiet points of a JAX profile (launch times at which no GPU row is running and no launched row is
still to start), and the windows cut at three of them against the whole decode. Usage: python s74_quiet.py PROFILE."""

from __future__ import annotations

import gzip
import importlib
import sys

import numpy as np
import polars as pl

xp = importlib.import_module("kernscope.load.xplane")


def text(d: pl.DataFrame) -> pl.DataFrame:
    return d.with_columns(pl.col(c).cast(pl.String) for c, t in d.schema.items() if t == pl.Categorical)


def main() -> None:
    path = sys.argv[1]
    data = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
    whole = xp.decode(data, path).events
    is_gpu = whole["device"].is_not_null()
    gpu = whole.filter(is_gpu).select("ts", "dur", "correlation")
    host = whole.filter(~is_gpu & whole["correlation"].is_not_null()).select(pl.col("ts").alias("lts"), "correlation")
    linked = gpu.join(host, on="correlation", how="inner")
    cand = np.unique(host["lts"].to_numpy())  # a window edge at a launch: that launch starts the later window
    s, e = gpu["ts"].to_numpy(), (gpu["ts"] + gpu["dur"]).to_numpy()
    order = np.argsort(s, kind="stable")
    s, running_end = s[order], np.maximum.accumulate(e[order])
    i = np.searchsorted(s, cand, side="left")  # GPU rows that start before the edge
    idle = np.where(i > 0, running_end[np.maximum(i - 1, 0)] <= cand, True)
    # pending: a row launched before the edge that starts at or after it (its launch and it in different windows)
    launch, start = linked["lts"].to_numpy(), linked["ts"].to_numpy()
    lo, hi = np.searchsorted(cand, launch, side="right"), np.searchsorted(cand, start, side="right")
    diff = np.zeros(cand.size + 1, np.int64)
    np.add.at(diff, lo, 1)
    np.add.at(diff, hi, -1)
    pending = np.cumsum(diff)[:-1] > 0
    quiet = cand[idle & ~pending]
    print(f"{path}: {cand.size:,} launch times, {quiet.size:,} quiet points")
    if quiet.size < 3:
        return
    times = quiet[np.linspace(0, quiet.size - 1, 5).astype(int)[1:-1]]
    cuts = xp.time_cuts(data, path, times)
    parts = [xp.decode(data, path, window=xp.Window(cuts, k)).events for k in range(times.size + 1)]
    joined, w = text(pl.concat(parts, how="vertical_relaxed").sort("idx")), text(whole)
    bad = [c for c in w.columns if not w[c].eq_missing(joined[c]).all()]
    print(f"  cut at {times.tolist()}: windows of {[p.height for p in parts]} events; columns that differ: {bad or 'none'}")
    for c in bad:
        m = ~w[c].eq_missing(joined[c])
        print(f"  {c}: {int(m.sum())} rows, names {sorted(set(w.filter(m)['name'].to_list()))[:5]}")


if __name__ == "__main__":
    main()
