"""kernscope diff vs HTA's TraceDiff on the pair HTA's own tests diff (one step of each, GPU kernels).

    python benchmarks/diff_vs_hta.py [--a ../shared/traces/hta/a100_8rank_rank3_control.json.gz]
                                     [--b ../shared/traces/hta/v100_2rank_rank1_test.json.gz]

Prints, per kernel name, whether the counts and summed durations of both tools agree, and the time each
tool takes. Needs ``pip install holistictraceanalysis`` (not a kernscope dependency).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
HTA = ROOT.parent / "shared" / "traces" / "hta"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", default=str(HTA / "a100_8rank_rank3_control.json.gz"))
    ap.add_argument("--b", default=str(HTA / "v100_2rank_rank1_test.json.gz"))
    args = ap.parse_args()
    import polars as pl

    from kernscope import load
    from kernscope.analyze.diff import Side, diff
    from kernscope.render.diff import verdict_text

    t0 = time.perf_counter()
    ta, tb = load(args.a, cache=False), load(args.b, cache=False)
    sa, sb = int(ta.steps["step"].min()), int(tb.steps["step"].min())
    d = diff(Side(ta, sa), Side(tb, sb))
    ks_s = time.perf_counter() - t0
    ours = d.kernels.group_by("name").agg(pl.col("a_count").sum(), pl.col("b_count").sum(), pl.col("a_us").sum(),
                                          pl.col("b_us").sum())

    try:
        from hta.trace_diff import DeviceType, LabeledTrace, TraceDiff
    except ImportError:
        print("HTA not installed: pip install holistictraceanalysis")
        return 1
    tmp = Path(tempfile.mkdtemp())
    try:
        dirs = []
        for i, p in enumerate((args.a, args.b)):
            dd = tmp / f"t{i}"
            dd.mkdir()
            shutil.copy(p, dd / Path(p).name)
            dirs.append(str(dd))
        t0 = time.perf_counter()
        la, lb = LabeledTrace("Control", trace_dir=dirs[0]), LabeledTrace("Test", trace_dir=dirs[1])
        comp = TraceDiff.compare_traces(la, lb, control_iteration=sa, test_iteration=sb, device_type=DeviceType.GPU)
        hta_s = time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    comp = comp.reset_index().rename(columns={"index": "name", "name": "name"})
    hta = pl.from_pandas(comp[["name", "Control_counts", "Test_counts", "Control_total_duration", "Test_total_duration"]])
    hta = hta.filter(~pl.col("name").str.starts_with("Memcpy") & ~pl.col("name").str.starts_with("Memset"))
    j = hta.join(ours, on="name", how="full", coalesce=True).fill_null(0)
    counts_ok = j.filter((pl.col("Control_counts") == pl.col("a_count")) & (pl.col("Test_counts") == pl.col("b_count")))
    dur_ok = j.filter(((pl.col("Control_total_duration") - pl.col("a_us")).abs() <= 1.0)
                      & ((pl.col("Test_total_duration") - pl.col("b_us")).abs() <= 1.0))
    print(f"A {os.path.basename(args.a)} step {sa}; B {os.path.basename(args.b)} step {sb}")
    print(f"kernel names: {j.height}; counts agree on {counts_ok.height}; summed durations agree (±1 µs) on {dur_ok.height}")
    print(f"kernel time A: kernscope {float(ours['a_us'].sum()):,.1f} µs, HTA {float(hta['Control_total_duration'].sum()):,.1f} µs")
    print(f"kernel time B: kernscope {float(ours['b_us'].sum()):,.1f} µs, HTA {float(hta['Test_total_duration'].sum()):,.1f} µs")
    bad = j.join(counts_ok.select("name"), on="name", how="anti").head(10)
    for r in bad.iter_rows(named=True):
        print(f"  differs: {r['name'][:90]}: HTA {r['Control_counts']}/{r['Test_counts']}, kernscope {r['a_count']}/{r['b_count']}")
    print(f"time: kernscope load+diff {ks_s:.2f} s, HTA parse+diff {hta_s:.2f} s ({hta_s / ks_s:.1f}x)")
    print(f"verdict: {verdict_text(d)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
