"""Per-rank comm/comp overlap: kernscope vs HTA 0.5.0's ``get_comm_comp_overlap`` on the multirank jobs.

    python benchmarks/overlap_vs_hta.py [--jobs ddp4 fsdp4]

Prints, per rank: kernscope (all GPU activity of the trace); HTA as shipped (µs rounding of ns timestamps,
result rounded to 2 decimals); HTA with ``HTA_DISABLE_NS_ROUNDING=1`` and its ratio unrounded; and kernscope's
formula applied to exactly the kernels HTA kept (HTA keeps kernels launched before the last ProfilerStep, and
drops the rest). The last two columns agreeing shows the definition is the same; the first two differ by the
kernels each counts.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
MULTI = ROOT.parent / "shared" / "traces" / "multirank"


def hta_overlap(folder: str, ns_rounding: bool) -> tuple[dict[int, float], dict[int, set[int]]]:
    """HTA's unrounded overlap per rank, and the correlation ids of the GPU kernels it kept."""
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "0" if ns_rounding else "1"
    logging.disable(logging.WARNING)
    import importlib

    import hta.configs.env_options as env

    importlib.reload(env)
    from hta.analyzers import communication_analysis as ca
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_dir=folder)
    kept: dict[int, set[int]] = {}
    for rank, df in ta.t.traces.items():
        kept[rank] = set(int(c) for c in df[df["stream"].ne(-1)]["correlation"].tolist())
    orig_round = round
    ratios: dict[int, float] = {}
    ca.round = lambda x, n=None: x  # type: ignore[attr-defined]  # the unrounded ratio
    try:
        df = ta.get_comm_comp_overlap(visualize=False)
    finally:
        ca.round = orig_round  # type: ignore[attr-defined]
    for r, v in zip(df["rank"], df["comp_comm_overlap_pctg"]):
        ratios[int(r)] = float(v)
    return ratios, kept


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", nargs="+", default=["ddp4", "fsdp4"])
    args = ap.parse_args()
    import polars as pl

    from kernscope import load
    from kernscope.analyze.ranks.summary import _gpu, _metrics, summarize_rank

    for job in args.jobs:
        tmp = Path(tempfile.mkdtemp())
        for p in sorted(MULTI.glob(f"{job}_rank*.json.gz")):
            shutil.copy(p, tmp / p.name)
        shipped, _ = hta_overlap(str(tmp), ns_rounding=True)
        exact, kept = hta_overlap(str(tmp), ns_rounding=False)
        print(f"{job}: rank | kernscope (all GPU activity) | HTA shipped | HTA, ns rounding off | kernscope on HTA's kernels")
        for p in sorted(MULTI.glob(f"{job}_rank*.json.gz")):
            t = load(p)
            r = summarize_rank(t, str(p))
            g = _gpu(t).filter(pl.col("correlation").is_in(sorted(kept[r.rank or 0])))
            same = _metrics(g.with_columns(pl.lit(0).alias("k")), ["k"])["overlap_pct"][0]
            print(f"  {r.rank} | {r.overall['overlap_pct']:.2f} | {shipped[r.rank or 0]:.2f} | {exact[r.rank or 0]:.2f} | "
                  f"{same:.2f}")
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
