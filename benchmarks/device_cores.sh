#!/usr/bin/env bash
# One core against two on the device machine's CPU (session 91: on this project's 2-core VM, a small trace's cold
# `kernscope analyze` ran faster confined to one core than on two, 0.45 s against 0.47-0.58 s). Times, in ROUNDS
# alternating rounds, `kernscope analyze --no-cache` under `taskset -c 0` and `taskset -c 0,1` of: the bundled example,
# the example replicated to ~10 MB and ~60 MB of JSON (kernscope.testing.replicate), and the 40-step JAX profile run
# 80x as long (202.6 MB, extend_xspace). Prints one line a run and a median table; writes $OUT/cores.txt. Needs .carry/
# carried (benchmarks/device_carry.sh).
# Usage, on the device, from the repo root: bash benchmarks/device_cores.sh [ROUNDS]
set -uo pipefail
ROUNDS=${1:-5}
source benchmarks/device_env.sh || exit 1
EX=src/kernscope/examples/h200_gpt_train_step.pt.trace.json.gz
python3 - <<'PY' || exit 1
import gzip
from kernscope.testing.replicate import replicate
from kernscope.testing.xspace import extend_xspace
ex = "src/kernscope/examples/h200_gpt_train_step.pt.trace.json.gz"
replicate(ex, "/tmp/k10.json", target_bytes=10e6)
replicate(ex, "/tmp/k60.json", target_bytes=60e6)
raw = gzip.decompress(open("tests/data/jax_long_h200/vm.xplane.pb.gz", "rb").read())
open("/tmp/j200.xplane.pb", "wb").write(extend_xspace(raw, 80))
PY
python3 - "$ROUNDS" "$EX" /tmp/k10.json /tmp/k60.json /tmp/j200.xplane.pb <<'PY' | tee "$OUT/cores.txt"
import os, statistics, subprocess, sys, time
rounds, files = int(sys.argv[1]), sys.argv[2:]
times = {}
for r in range(rounds):
    for f in files:
        for cpus in ("0", "0,1"):
            t0 = time.perf_counter()
            subprocess.run(["taskset", "-c", cpus, sys.executable, "-m", "kernscope", "analyze", f, "--no-cache",
                            "--format", "json", "-o", "/tmp/out.json"], check=True, capture_output=True)
            dt = time.perf_counter() - t0
            times.setdefault((f, cpus), []).append(dt)
            print(f"round {r + 1} {os.path.basename(f)} cores {cpus}: {dt:.3f} s", flush=True)
print("file, MB, one core (median, range), two cores (median, range)")
for f in files:
    a, b = times[(f, "0")], times[(f, "0,1")]
    print(f"{os.path.basename(f)} {os.path.getsize(f) / 1e6:.1f} MB: one {statistics.median(a):.3f} s ({min(a):.3f}-{max(a):.3f}), "
          f"two {statistics.median(b):.3f} s ({min(b):.3f}-{max(b):.3f})")
PY
