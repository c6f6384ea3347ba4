"""Long mutation-fuzzing run for before releases: many mutants of every small real trace, per-class figures.

    python benchmarks/fuzz_long.py [--n 20000] [--seed 1] [--out docs/results/fuzz_long_seedN.json]
    python benchmarks/fuzz_long.py --jax [--n 1000] [--seed 1] [--out docs/results/fuzz_jax_seedN.json]

``--jax``: mutants of every JAX profile (XSpace protobuf) in ``tests/data`` and ``../shared/traces``, each analyzed by
the compiled scanner and the numpy reader whole and by the compiled scanner three time windows at a time
(``kernscope.testing.fuzz.check_binary``: the same exit code and the same JSON, never a traceback).

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-mb", type=float, default=2.0, help="use real traces up to this size (gz)")
    ap.add_argument("--out")
    ap.add_argument("--jax", action="store_true", help="mutants of the JAX profiles (XSpace protobufs) instead")
    ap.add_argument("--head-start", action="store_true", help="mutants loaded with a head start and without instead")
    ap.add_argument("--mutator", action="append", help="only this mutation (repeatable; default: every one of the kind)")
    args = ap.parse_args()
    if args.jax:
        sources = sorted([*(ROOT / "tests" / "data").rglob("*.xplane.pb*"), *TRACES.rglob("*.xplane.pb*")])
        sources = [p for p in sources if p.stat().st_size <= args.max_mb * 1e6]
    else:
        sources = [p for p in sorted(TRACES.rglob("*.json.gz")) if p.stat().st_size <= args.max_mb * 1e6]
    work = Path(tempfile.mkdtemp(prefix="ks-fuzz-"))
    t0 = time.perf_counter()
    if args.jax:
        rep = fuzz.run_binary(sources, work, args.n, seed=args.seed, only=args.mutator)
    elif args.head_start:
        rep = fuzz.run_head_start(sources, work, args.n, seed=args.seed, only=args.mutator)
    else:
        rep = fuzz.run(sources, work, args.n, seed=args.seed, only=args.mutator)
    dt = time.perf_counter() - t0
    by = {k: dict(v) for k, v in rep.by_class().items()}
    print(f"{args.n:,} mutants of {len(sources)} real traces in {dt:.0f} s; failures: {len(rep.failures)}")
    for k, v in sorted(by.items()):
        print(f"  {k:16s} tried {v.get('tried', 0):6,}  accepted {v.get('accepted', 0):6,}  rejected {v.get('rejected', 0):6,}"
              f"  failures {v.get('failures', 0)}" + (f"  taken ahead {v.get('taken_ahead', 0):6,}" if args.head_start else ""))
    for f in rep.failures[:50]:
        print(f"FAIL {f.mutator}: {f.problem}: {f.message}")
    if args.out:
        Path(args.out).write_text(json.dumps({"n": args.n, "seed": args.seed, "seconds": dt, "mutators": args.mutator,
                                              "sources": [str(p.relative_to(TRACES if p.is_relative_to(TRACES) else ROOT)) for p in sources],
                                              "reads": [r.label for r in fuzz.BINARY_READS] if args.jax else
                                              ["analyze projection, a head start", "analyze projection"] if args.head_start else None,
                                              "by_class": by, "failures": len(rep.failures)}, indent=2))
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.exit(main())
