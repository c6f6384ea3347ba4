"""Long mutation-fuzzing run for before releases: many mutants of every small real trace, per-class figures.

    python benchmarks/fuzz_long.py [--n 20000] [--seed 1] [--out docs/results/fuzz_long_seedN.json]
    python benchmarks/fuzz_long.py --jax [--n 1000] [--seed 1] [--out docs/results/fuzz_jax_seedN.json]

``--jax``: mutants of every JAX profile (XSpace protobuf) in ``tests/data`` and ``../shared/traces``, each analyzed by
the compiled scanner and the numpy reader whole and by the compiled scanner three time windows at a time
(``kernscope.testing.fuzz.check_binary``: the same exit code and the same JSON, never a traceback). ``--jax --ranges``:
of the 40-step profile with ranges around its steps instead (:func:`ranges_profiles`).

    python benchmarks/fuzz_long.py --head-start [--n 1000] [--seed 1] [--out docs/results/fuzz_head_seedN.json]

``--head-start``: mutants of the small real Kineto traces (every other one gzipped) loaded as ``analyze`` loads them,
with a head start scanning their pieces on a thread and without (``kernscope.testing.fuzz.check_head_start``, in
256 KB pieces: the same tables or the same one-line error).

Failing mutants are kept in the work directory and listed. Record the figures in docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernscope.testing import fuzz  # noqa: E402

TRACES = ROOT.parent / "shared" / "traces"


def ranges_profiles(work: Path) -> list[Path]:
    """The 40-step ``jax_long_h200`` profile with ranges around its steps, on its launching thread or a new one
    (``testing.xspace.with_host_thread``), written to ``work``: one ``epoch`` over the run, a Python frame over it, three
    and two epochs in turn, and one over the first half. The windows cut inside them (the plan's rule of session 88)."""
    import gzip

    import polars as pl

    from kernscope import load
    from kernscope.testing.xspace import with_host_thread

    long = ROOT / "tests" / "data" / "jax_long_h200" / "vm.xplane.pb.gz"
    data = gzip.decompress(long.read_bytes())
    t = load(long, cache=False)
    run = int(t.events.select(pl.col("end").max() - pl.col("ts").min()).item())
    launching = int(t.gpu["launch_tid"].drop_nulls().unique().cast(pl.String)[0])
    cases = {"epoch_launching": (launching, run + 10, run + 10, "epoch"),
             "frame_own": (777_777, run + 10, run + 10, "$train.py:12 main"),
             "frame_launching": (launching, run + 10, run + 10, "$train.py:12 main"),
             "three_epochs_own": (777_777, -(-run // 3), -(-run // 3) - 1000, "epoch"),
             "two_epochs_launching": (launching, -(-run // 2), -(-run // 2) - 1000, "epoch"),
             "first_half_launching": (launching, 10**15, run // 2, "epoch")}
    out = []
    for name, (tid, every, dur, label) in cases.items():
        p = work / f"{name}.xplane.pb"
        p.write_bytes(with_host_thread(data, tid, every, dur, label))
        out.append(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-mb", type=float, default=2.0, help="use real traces up to this size (gz)")
    ap.add_argument("--out")
    ap.add_argument("--jax", action="store_true", help="mutants of the JAX profiles (XSpace protobufs) instead")
    ap.add_argument("--head-start", action="store_true", help="mutants loaded with a head start and without instead")
    ap.add_argument("--mutator", action="append", help="only this mutation (repeatable; default: every one of the kind)")
    ap.add_argument("--ranges", action="store_true",
                    help="with --jax: mutants of the 40-step jax_long_h200 profile with ranges around its steps "
                         "(an epoch's, a loop's Python frame; session 88) instead of every profile here")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ks-fuzz-"))
    if args.jax and args.ranges:
        sources = ranges_profiles(work)
    elif args.jax:
        sources = sorted([*(ROOT / "tests" / "data").rglob("*.xplane.pb*"), *TRACES.rglob("*.xplane.pb*")])
        sources = [p for p in sources if p.stat().st_size <= args.max_mb * 1e6]
    else:
        sources = [p for p in sorted(TRACES.rglob("*.json.gz")) if p.stat().st_size <= args.max_mb * 1e6]
    t0 = time.perf_counter()
    if args.jax:
        rep = fuzz.run_binary(sources, work, args.n, seed=args.seed, only=args.mutator)
    elif args.head_start:
        rep = fuzz.run_head_start(sources, work, args.n, seed=args.seed, only=args.mutator)
    else:
        rep = fuzz.run(sources, work, args.n, seed=args.seed, only=args.mutator)
    dt = time.perf_counter() - t0
    by = {k: dict(v) for k, v in rep.by_class().items()}
    what = "profiles (a real one, ranges added)" if args.ranges else "real traces"
    print(f"{args.n:,} mutants of {len(sources)} {what} in {dt:.0f} s; failures: {len(rep.failures)}")
    for k, v in sorted(by.items()):
        print(f"  {k:16s} tried {v.get('tried', 0):6,}  accepted {v.get('accepted', 0):6,}  rejected {v.get('rejected', 0):6,}"
              f"  failures {v.get('failures', 0)}" + (f"  taken ahead {v.get('taken_ahead', 0):6,}" if args.head_start else ""))
    for f in rep.failures[:50]:
        print(f"FAIL {f.mutator}: {f.problem}: {f.message}")
    if args.out:
        Path(args.out).write_text(json.dumps({"n": args.n, "seed": args.seed, "seconds": dt, "mutators": args.mutator,
                                              "sources": [p.name if args.ranges else str(p.relative_to(TRACES if p.is_relative_to(TRACES) else ROOT))
                                                          for p in sources],
                                              "reads": [r.label for r in fuzz.BINARY_READS] if args.jax else
                                              ["analyze projection, a head start", "analyze projection"] if args.head_start else None,
                                              "by_class": by, "failures": len(rep.failures)}, indent=2))
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.exit(main())
