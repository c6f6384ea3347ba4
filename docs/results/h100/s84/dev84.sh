#!/usr/bin/env bash
# Session 84 on the device: the GPU tests at today's main (last run: session 66, before sessions 67-83 changed the
# load, the link and the analysis), the example trace recorded and analyzed cold and cached. polars' runtime travels
# as an xz tarball (its wheel alone is 54 MB; the travelling tree is capped at 64 MiB).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/site "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .carry/whl/*.whl
tar xJf .carry/prt.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index --target /tmp/ksb . > "$OUT/build.log" 2>&1 || tail -5 "$OUT/build.log"
cp /tmp/ksb/kernscope/load/*.so src/kernscope/load/ && ls src/kernscope/load/*.so
export PYTHONPATH=$PWD/src:/tmp/site KERNSCOPE_CACHE_DIR=/tmp/kcache
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import torch, triton, polars, sys; print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "polars", polars.__version__, "python", sys.version.split()[0])'
  python3 -c 'from kernscope.load import native; print("compiled scanner:", native.scanner() is not None)'
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
echo "== GPU tests"
start=$(date +%s)
timeout 420 python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -o addopts="" > "$OUT/gpu_tests.txt" 2>&1
echo "rc $? in $(( $(date +%s) - start )) s"; tail -15 "$OUT/gpu_tests.txt"
echo "== example trace"
timeout 100 python3 examples/record_example_trace.py /tmp/ex.pt.trace.json.gz 2>&1 | tail -2
for run in cold cached; do
  s=$(date +%s.%N)
  timeout 60 python3 -m kernscope analyze /tmp/ex.pt.trace.json.gz --top 8 > "$OUT/example_analyze_$run.txt" 2>&1
  echo "analyze $run rc $? in $(python3 -c "import time; print(round(time.time() - $s, 2))") s"
done
cmp -s "$OUT/example_analyze_cold.txt" "$OUT/example_analyze_cached.txt" && echo "cold and cached output identical"
head -14 "$OUT/example_analyze_cold.txt"
