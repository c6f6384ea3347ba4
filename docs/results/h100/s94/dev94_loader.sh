#!/usr/bin/env bash
# Session 94, on the device (from the repo root, .carry/ carried): a real data loader's JAX recording (3,300 steps,
# ~240 MB, benchmarks/device_jax_loader.sh), then on 2 of its cores (taskset) the window counts of the old default
# (one per 240,000 events, twelve at most) and of the new one (200,000, fourteen), alternating, ROUNDS rounds,
# `--no-cache`, peak RSS by /usr/bin/time, the outputs compared. Usage: bash docs/results/h100/s94/dev94_loader.sh [ROUNDS]
set -uo pipefail
ROUNDS=${1:-3}
bash benchmarks/device_jax_loader.sh 3300 3 || exit 1
source benchmarks/device_env.sh > /dev/null || exit 1
P=$(find /tmp/rec -name '*.xplane.pb' | head -1)
read -r OLD NEW EV SZ < <(python3 - "$P" <<'PY'
import sys, os, numpy as np
from kernscope import files
from kernscope.load import xplane
from kernscope.load.xscan import line_index
p = sys.argv[1]; data = open(p, "rb").read(); base = xplane.lines_and_metadata(data, p)
events = int(line_index(np.frombuffer(data, np.uint8), base.line_off, base.line_len).total.sum())
size = os.stat(p).st_size
def count(per, most):
    return max(min(most, -(-size // files.WINDOW_BYTES)), min(most, -(-events // per)))
print(count(240_000, 12), count(files.WINDOW_EVENTS, files.MOST_WINDOWS), events, size)
PY
)
echo "profile $SZ bytes, $EV events: old default $OLD windows, new $NEW" | tee "$OUT/ab_counts.txt"
for r in $(seq "$ROUNDS"); do
  for w in "$OLD" "$NEW"; do
    taskset -c 0,1 /usr/bin/time -f "round $r windows $w: %e s, %M KB" python3 -m kernscope analyze "$P" --format json \
      --quiet --no-cache --windows "$w" > "/tmp/ab_$w.json" 2>> "$OUT/ab.txt"
  done
done
cat "$OUT/ab.txt"
cmp "/tmp/ab_$OLD.json" "/tmp/ab_$NEW.json" && echo "the same JSON" | tee -a "$OUT/ab.txt"
taskset -c 0,1 python3 -m kernscope analyze "$P" --format json -o /tmp/d.json --timings --no-cache 2>&1 | head -4 | tee "$OUT/default_timings.txt"
