#!/usr/bin/env bash
# JAX profiles recorded on the device machine with a data loader's thread (examples/record_jax_profiles.py --loader,
# session 87): a 40-step one, which comes back for the tests ($OUT/loader40.xplane.pb.gz, $OUT/record_info40.json),
# and a long one (STEPS steps) analyzed there on two cores (taskset): `kernscope analyze` by default (time windows)
# and read whole (--windows 0) in ROUNDS interleaved rounds, the outputs compared (benchmarks/bench_xplane.py), and
# the loader's ranges between each cut of the default plan and the next step's start counted, by thread (where the
# check of session 86 read any such profile whole). The long profile does not come back. Needs .carry/ carried
# (made here by benchmarks/device_carry.sh; benchmarks/device_env.sh installs it and builds the C library).
# Usage, on the device, from the repo root: bash benchmarks/device_jax_loader.sh [STEPS [ROUNDS]]
set -uo pipefail
STEPS=${1:-3300}
ROUNDS=${2:-3}
t0=$SECONDS
source benchmarks/device_env.sh || exit 1
record() {  # OUT_DIR STEPS [more options]: the long transformer with the loader; prints the profile's path
  local dir=$1 steps=$2
  shift 2
  timeout 300 python3 examples/record_jax_profiles.py "$dir" --which long --long-steps "$steps" --loader --no-perfetto "$@" \
    > "$OUT/record$steps.log" 2>&1 || { tail -20 "$OUT/record$steps.log" >&2; return 1; }
  find "$dir" -name '*.xplane.pb' | head -1
}
P40=$(record /tmp/rec40 40) || exit 1
gzip -9 -c "$P40" > "$OUT/loader40.xplane.pb.gz" && cp /tmp/rec40/record_info.json "$OUT/record_info40.json"
echo "recorded 40 steps: $(stat -c %s "$P40") bytes, $((SECONDS - t0)) s"
P=$(record /tmp/rec "$STEPS" --no-reference) || exit 1
echo "recorded $STEPS steps: $(stat -c %s "$P") bytes, $((SECONDS - t0)) s" | tee "$OUT/profile.txt"
taskset -c 0,1 python3 benchmarks/bench_xplane.py --trace "$P" --windows 0 --only kernscope_cold,kernscope_whole \
  --repeat "$ROUNDS" --out "$OUT/loader_long.json" > "$OUT/loader_long.txt" 2>&1
grep -E "round|equals|peak_rss_x|median_s" "$OUT/loader_long.txt"
taskset -c 0,1 python3 -m kernscope analyze "$P" --format json -o /tmp/a.json --timings --no-cache > "$OUT/timings.txt" 2>&1
cat "$OUT/timings.txt"
python3 - "$P" "$P40" > "$OUT/stretches.txt" 2>&1 <<'PY'
import importlib, sys
import polars as pl
from kernscope import files
from kernscope.pipeline import load
xplan = importlib.import_module("kernscope.load.xplan")
for path, windows in ((sys.argv[1], files.windows_for(sys.argv[1]) or 8), (sys.argv[2], 5)):
    plan = xplan.plan(open(path, "rb").read(), path, xplan.Count(windows, files.WINDOW_EVENTS, files.MOST_WINDOWS))
    t = load(path, cache=False)
    launching = t.gpu.select(pl.col("launch_tid").cast(pl.String)).unique().to_series().to_list()
    ev = t.events.filter(pl.col("cat").ne_missing("python_function"))
    rows = [ev.filter((pl.col("ts") >= cut) & (pl.col("ts") < nxt)).group_by(pl.col("tid").cast(pl.String)).len()
            for cut, nxt in zip(plan.cuts.times.min(axis=0).tolist(), plan.step_after.tolist())]
    held = [r for r in rows if r.height]
    on_launching = sum(int(r.filter(pl.col("tid").is_in(launching))["len"].sum()) for r in rows)
    print(f"{path}: {plan.windows} windows; {len(held)} of {len(rows)} cuts have events before the next step's start "
          f"({sum(int(r['len'].sum()) for r in rows)} events, {on_launching} on the launching threads {launching})")
    print("  loader ranges in the whole profile:", t.events.filter(pl.col("name").cast(pl.String).str.starts_with("loader.")).height)
PY
cat "$OUT/stretches.txt"
echo "done $((SECONDS - t0)) s"
