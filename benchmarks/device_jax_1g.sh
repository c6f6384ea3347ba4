#!/usr/bin/env bash
# A ~1 GB JAX profile recorded on the device machine and `kernscope analyze` measured on it there, on two cores
# (taskset), read whole and by windows (session 76). The profile does not come back: compressed it is over the
# device's return limit. Needs .carry/ (gitignored, made here by benchmarks/device_carry.sh) carried: polars and the
# rest of what the image lacks (benchmarks/device_env.sh installs them and builds the C library).
# Usage, on the device, from the repo root: bash benchmarks/device_jax_1g.sh [STEPS [WINDOWS [ROUNDS]]]  (WINDOWS:
# 0,8,12,16: the counts bench_xplane.py compares, 0 first; ROUNDS: interleaved rounds, 1 by default). With
# .carry/base_src.tar.gz (an earlier commit's src/, `git archive COMMIT src/kernscope | gzip`), that tree's library is
# built too and its cold `analyze` (its own default) runs in the same rounds as `base_cold` (session 78).
set -uo pipefail
OUT=${OUT:-/tmp/kernscope-out}
mkdir -p "$OUT"
STEPS=${1:-15500}
WINDOWS=${2:-0,8,12,16}
ROUNDS=${3:-1}
t0=$SECONDS
source benchmarks/device_env.sh || exit 1
base=()
if [ -f .carry/base_src.tar.gz ]; then
  inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  suffix=$(python3 -c 'import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])')
  mkdir -p /tmp/base && tar -C /tmp/base -xzf .carry/base_src.tar.gz \
    && gcc -O3 -shared -fPIC -I"$inc" /tmp/base/src/kernscope/load/_xspace.c /tmp/base/src/kernscope/load/_kineto.c \
      /tmp/base/src/kernscope/load/_sweep.c -o "/tmp/base/src/kernscope/load/_xspace$suffix" || exit 1
  base=(--base-src /tmp/base/src)
fi
echo "setup $((SECONDS - t0)) s"
timeout 430 python3 examples/record_jax_profiles.py /tmp/rec --which long --long-steps "$STEPS" --max-gpu-events 16000000 \
  --no-perfetto --no-reference > "$OUT/record.log" 2>&1
tail -3 "$OUT/record.log"
P=$(find /tmp/rec -name '*.xplane.pb' | head -1)
[ -n "$P" ] || { echo "no profile recorded"; exit 1; }
stat -c '%s bytes' "$P" | tee "$OUT/profile.txt"; sha256sum "$P" | tee -a "$OUT/profile.txt"
echo "recorded $((SECONDS - t0)) s"
taskset -c 0,1 python3 benchmarks/bench_xplane.py --trace "$P" --windows "$WINDOWS" \
  "${base[@]}" \
  --only "kernscope_whole,$(echo "$WINDOWS" | sed "s/^0,//; s/\([0-9]*\)/kernscope_w\1/g")${base:+,base_cold}" --repeat "$ROUNDS" --out "$OUT/jax1g.json" > "$OUT/jax1g.txt" 2>&1
cat "$OUT/jax1g.txt"
echo "benched $((SECONDS - t0)) s"
rm -rf /tmp/kcache
taskset -c 0,1 python3 -m kernscope analyze "$P" --format json -o /tmp/a.json --timings > "$OUT/timings.txt" 2>&1
cat "$OUT/timings.txt"
echo "done $((SECONDS - t0)) s"
