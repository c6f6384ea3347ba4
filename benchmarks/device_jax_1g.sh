#!/usr/bin/env bash
# A ~1 GB JAX profile recorded on the device machine and `kernscope analyze` measured on it there, on two cores
# (taskset), read whole and by windows (session 76). The profile does not come back: compressed it is over the
# device's return limit. Needs, carried in .carry/ (gitignored): rt.tar.xz (polars-runtime-32's wheel extracted, then
# tar | xz: the wheel itself is over the travelling tree's limit) and wheels/ (polars, msgspec, zlib-ng for cp312).
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
mkdir -p /tmp/site && tar -C /tmp/site -xJf .carry/rt.tar.xz \
  && python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/wheels/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD/src KERNSCOPE_CACHE_DIR=/tmp/kcache
suffix=$(python3 -c 'import importlib.machinery as m; print(m.EXTENSION_SUFFIXES[0])')
inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
gcc -O3 -shared -fPIC -I"$inc" src/kernscope/load/_xspace.c src/kernscope/load/_kineto.c src/kernscope/load/_sweep.c \
  -o "src/kernscope/load/_xspace$suffix" || exit 1
base=()
if [ -f .carry/base_src.tar.gz ]; then
  mkdir -p /tmp/base && tar -C /tmp/base -xzf .carry/base_src.tar.gz \
    && gcc -O3 -shared -fPIC -I"$inc" /tmp/base/src/kernscope/load/_xspace.c /tmp/base/src/kernscope/load/_kineto.c \
      /tmp/base/src/kernscope/load/_sweep.c -o "/tmp/base/src/kernscope/load/_xspace$suffix" || exit 1
  base=(--base-src /tmp/base/src)
fi
python3 -c 'from kernscope.load.native import scanner; import polars; assert scanner() is not None; print("polars", polars.__version__, "scanner ok")' || exit 1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; lscpu | grep -m1 "Model name"; } | tee "$OUT/env.txt"
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
