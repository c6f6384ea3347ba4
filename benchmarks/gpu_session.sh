#!/usr/bin/env bash
# One device-machine session: record the example trace, run GPU tests, intra-kernel overhead benchmark,
# and the benchmark harness on every built-in operator. Writes everything under $OUT.
# Usage (on the device machine, from the repo root, .carry/ carried): bash benchmarks/gpu_session.sh [part]
set -uo pipefail
PART=${1:-all}
# .carry/ from benchmarks/device_carry.sh: polars, msgspec, zlib-ng, xlsxwriter into /tmp/site, the C library built for
# the device's Python, PYTHONPATH, OUT, $OUT/env.txt
source benchmarks/device_env.sh || exit 1
ks() { python3 -m kernscope "$@"; }

if [ "$PART" = all ] || [ "$PART" = 1 ]; then
  echo "== example trace"
  timeout 300 python3 examples/record_example_trace.py "$OUT/h200_gpt_train_step.pt.trace.json.gz" 2>&1 | tail -3
  ks analyze "$OUT/h200_gpt_train_step.pt.trace.json.gz" --top 8 > "$OUT/example_analyze.txt" 2>&1; tail -30 "$OUT/example_analyze.txt"
  echo "== GPU tests"
  timeout 400 python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -o addopts="" > "$OUT/gpu_tests.txt" 2>&1; tail -25 "$OUT/gpu_tests.txt"
  echo "== intra overhead"
  timeout 500 python3 benchmarks/bench_intra.py --out "$OUT/bench_intra.json" > "$OUT/bench_intra.log" 2>&1; tail -12 "$OUT/bench_intra.log"
fi
if [ "$PART" = intra2 ]; then
  echo "== GPU tests"
  timeout 300 python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -o addopts="" > "$OUT/gpu_tests.txt" 2>&1; tail -25 "$OUT/gpu_tests.txt"
  echo "== Proton vs kernscope, same kernel and scopes"
  timeout 150 python3 examples/record_proton_files.py "$OUT/proton" > "$OUT/proton.log" 2>&1; tail -40 "$OUT/proton.log"
  timeout 100 python3 examples/record_proton_files.py "$OUT/proton_small" --small > "$OUT/proton_small.log" 2>&1; tail -3 "$OUT/proton_small.log"
  echo "== intra run on an unmodified program"
  timeout 120 python3 -m kernscope intra run --kernel add_kernel --kernel sum_rows -o "$OUT/intra_run" -- python3 tests/data/run_libkernel.py > "$OUT/intra_run.txt" 2>&1; tail -30 "$OUT/intra_run.txt"
  python3 -m kernscope intra stats "$OUT/proton/kernscope.npz" --hatchet "$OUT/proton/kernscope.hatchet" > "$OUT/proton/kernscope_stats.txt" 2>&1; tail -20 "$OUT/proton/kernscope_stats.txt"
  ls -la "$OUT" "$OUT/proton" "$OUT/intra_run"
  (cd "$OUT" && tar czf intra2.tgz proton proton_small intra_run 2>/dev/null && rm -rf proton proton_small intra_run)
fi
if [ "$PART" = round3 ]; then
  echo "== GPU tests (with -s: printed measurements)"
  timeout 300 python3 -m pytest -m gpu tests/test_gpu.py -q -s -p no:cacheprovider -o addopts="" > "$OUT/gpu_tests.txt" 2>&1; tail -15 "$OUT/gpu_tests.txt"
  grep -a "warp spread" "$OUT/gpu_tests.txt"
  echo "== warp sampling and named scopes: cost"
  timeout 150 python3 benchmarks/bench_warps.py --out "$OUT/bench_warps.json" 2>&1 | tail -8
  echo "== intra override on the library program"
  timeout 120 python3 -m kernscope intra override -o "$OUT/override" -- python3 tests/data/run_libkernel.py > "$OUT/override.txt" 2>&1; tail -25 "$OUT/override.txt"
  echo "== intra-kernel overhead goals (bench_intra)"
  timeout 200 python3 benchmarks/bench_intra.py --out "$OUT/bench_intra.json" --reps 20 > "$OUT/bench_intra.log" 2>&1; tail -14 "$OUT/bench_intra.log"
fi
if [ "$PART" = intra3 ]; then
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,clocks.applications.graphics --format=csv >> "$OUT/env.txt"
  echo "== Proton's tutorial override flow, its record layout (scope tree per polars thread count)"
  for acc in "" --increase-accuracy; do
    d="$OUT/tut${acc:+_acc}"; mkdir -p "$d"
    timeout 150 python3 tests/data/tutorial_records_flow.py "$d" $acc > "$d/flow.log" 2>&1; tail -2 "$d/flow.log"
    tr=$(ls "$d"/*.chrome_trace | head -1); cp "$tr" "$d/trace.chrome_trace"
    for th in 1 2 4 16 32; do POLARS_MAX_THREADS=$th ks intra stats "$tr" > "$d/stats_t$th.txt" 2>&1; done
    (cd "$d" && md5sum stats_t*.txt); cat "$d/stats_t16.txt"
    rm -rf "$d/ttgir_dump"
  done
  echo "== a training step with profile_memory=True"
  timeout 200 python3 examples/record_example_trace.py "$OUT/mem/h100_gpt_memory.pt.trace.json.gz" --memory --steps=3 2>&1 | tail -2
  echo "== a Kineto-profiled loop whose Triton kernel is profiled inside (intra run)"
  mkdir -p "$OUT/align"
  timeout 200 python3 -m kernscope intra run --kernel bias_gelu --max-launches 16 -o "$OUT/align" -- python3 tests/data/train_with_triton.py "$OUT/align/train.pt.trace.json" > "$OUT/align/run.txt" 2>&1; tail -20 "$OUT/align/run.txt"
  gzip -9 "$OUT/align/train.pt.trace.json"; ls -la "$OUT"/*/
  (cd "$OUT" && tar czf intra3.tgz tut tut_acc mem align && rm -rf tut tut_acc mem align)
fi
if [ "$PART" = diag ]; then
  echo "== GPU test: intra records aligned under their Kineto kernels"
  timeout 300 python3 -m pytest -m gpu tests/test_gpu.py -q -s -p no:cacheprovider -o addopts="" -k align > "$OUT/gpu_align.txt" 2>&1; tail -6 "$OUT/gpu_align.txt"
  echo "== traces with a recompilation inside the profiled steps"
  timeout 400 python3 examples/record_recompile_traces.py "$OUT/recompile" > "$OUT/recompile.log" 2>&1; tail -5 "$OUT/recompile.log"
  find "$OUT/recompile" -type f | head; (cd "$OUT" && tar czf recompile.tgz recompile && rm -rf recompile)
fi
if [ "$PART" = jaxrecompile ]; then
  timeout 300 python3 examples/record_recompile_traces.py "$OUT/recompile" jax > "$OUT/recompile.log" 2>&1; tail -3 "$OUT/recompile.log"
  f=$(find "$OUT/recompile" -name "*.xplane.pb" | head -1); python3 -m kernscope analyze "$f" --no-cache | tail -25
  cp "$f" "$OUT/jax_recompile.xplane.pb"; rm -rf "$OUT/recompile"
fi
if [ "$PART" = seedcmd ]; then
  echo "== the first seed's bench command as written (TritonBench impl names)"
  python3 -c 'import importlib.util as u; print("flash_attn", bool(u.find_spec("flash_attn")), "flash_attn_interface", bool(u.find_spec("flash_attn_interface")))'
  timeout 300 python3 -m kernscope bench --op flash_attention --num-inputs 2 --metrics kineto_trace --only flash_v3,cudnn,triton_tutorial_flash_v2 \
     --output-dir "$OUT/seedcmd" > "$OUT/seedcmd.txt" 2>"$OUT/seedcmd.err"; echo "rc=$?"; cat "$OUT/seedcmd.txt"; grep -v "^…" "$OUT/seedcmd.err" | tail -5
  COLUMNS=200 timeout 300 python3 -m kernscope bench --op flash_attention --num-inputs 3 --metrics latency,tflops,speedup,accuracy --only aten,sdpa,cudnn,triton_tutorial_flash_v2,flash_v2 \
     > "$OUT/seedcmd2.txt" 2>"$OUT/seedcmd2.err"; echo "rc=$?"; cat "$OUT/seedcmd2.txt"; grep -v "^…" "$OUT/seedcmd2.err" | tail -5
  timeout 300 python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -o addopts="" -k "seeds_bench_command or bench_vector_add" > "$OUT/gpu_tests.txt" 2>&1; tail -8 "$OUT/gpu_tests.txt"
  rm -rf "$OUT/seedcmd"
fi
if [ "$PART" = newops ]; then
  echo "== the operators added for TritonBench users"
  timeout 300 python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -o addopts="" -k "new_operators" > "$OUT/gpu_tests.txt" 2>&1; tail -6 "$OUT/gpu_tests.txt"
  for op in ${OPS:-swiglu geglu embedding rope sum addmm welford}; do
    COLUMNS=160 timeout 150 python3 -m kernscope bench --op $op --metrics latency,gbps,speedup,accuracy --keep-going --json "$OUT/bench_$op.json" > "$OUT/bench_$op.txt" 2>"$OUT/bench_$op.err"
    echo "-- $op rc=$?"; cat "$OUT/bench_$op.txt"; grep -v "^…" "$OUT/bench_$op.err" | tail -3
  done
fi
if [ "$PART" = round4 ] || [ "$PART" = round4xplane ]; then
  # the base tree's own C library for this Python (device_env.sh built this tree's; the base's ABI may differ)
  inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  suf=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  b=.carry/base_src/kernscope/load
  [ -d $b ] && gcc -O3 -shared -fPIC -I"$inc" $b/_xspace.c $b/_kineto.c $(ls $b/_sweep.c 2>/dev/null) -o "$b/_xspace$suf"
fi
if [ "$PART" = round4 ]; then
  echo "== GPU tests: the new operators (fwd) and the Triton backward passes"
  timeout 420 python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -o addopts="" -k "new_operators or backward_passes" > "$OUT/gpu_tests.txt" 2>&1; tail -8 "$OUT/gpu_tests.txt"
  for op in ${OPS:-fp8_gemm bf16xint4_gemm grouped_gemm decoding_attention}; do
    COLUMNS=200 timeout 200 python3 -m kernscope bench --op $op --metrics latency,tflops,gbps,speedup,accuracy --keep-going --json "$OUT/bench_$op.json" > "$OUT/bench_$op.txt" 2>"$OUT/bench_$op.err"
    echo "-- $op rc=$?"; cat "$OUT/bench_$op.txt"; grep -v "^…" "$OUT/bench_$op.err" | tail -3
  done
  for op in ${BWD_OPS:-swiglu geglu rope embedding}; do
    COLUMNS=200 timeout 150 python3 -m kernscope bench --op $op --mode bwd --metrics latency,gbps,speedup,accuracy --keep-going --json "$OUT/bench_${op}_bwd.json" > "$OUT/bench_${op}_bwd.txt" 2>"$OUT/bench_${op}_bwd.err"
    echo "-- $op bwd rc=$?"; cat "$OUT/bench_${op}_bwd.txt"; grep -v "^…" "$OUT/bench_${op}_bwd.err" | tail -3
  done
  (cd "$OUT" && tar czf round4.tgz gpu_tests.txt bench_* && rm -f gpu_tests.txt bench_*)  # few files come back
fi
if [ "$PART" = round4xplane ]; then
  echo "== XSpace decode + link on 2 cores (taskset), this tree and the base"
  POLARS_MAX_THREADS=2 timeout 400 taskset -c 2,3 python3 benchmarks/bench_xplane.py --size-mb 200 --repeat 5 \
    ${BASE_SRC:+--base-src $BASE_SRC} --out "$OUT/bench_xplane_2cores.json" > "$OUT/bench_xplane.log" 2>&1; tail -40 "$OUT/bench_xplane.log"
fi
if [ "$PART" = wsgemm ]; then
  echo "== warp-specialized Gluon GEMM: GPU test, then kernscope vs Proton scopes"
  timeout 200 python3 -m pytest -m gpu tests/test_gpu.py -q -s -p no:cacheprovider -o addopts="" -k "warp_specialized" > "$OUT/ws_test.txt" 2>&1; tail -30 "$OUT/ws_test.txt"
  PYTHONUNBUFFERED=1 timeout 300 python3 benchmarks/bench_ws_gemm.py --rounds 3 --proton-timeout 90 --out "$OUT/bench_ws_gemm.json" > "$OUT/bench_ws_gemm.log" 2>&1; tail -70 "$OUT/bench_ws_gemm.log"
fi
if [ "$PART" = tests ]; then
  timeout 400 python3 -m pytest -m gpu tests/test_gpu.py -q -p no:cacheprovider -o addopts="" > "$OUT/gpu_tests.txt" 2>&1; tail -25 "$OUT/gpu_tests.txt"
fi
if [ "$PART" = seed ]; then
  echo "== seed example"
  timeout 200 python3 -m kernscope bench --op flash_attention --num-inputs 2 --metrics latency,tflops,kineto_trace --only sdpa_flash,sdpa_cudnn,triton_flash \
     --output-dir "$OUT/traces" --json "$OUT/bench_seed.json" > "$OUT/bench_seed.txt" 2>"$OUT/bench_seed.err"; cat "$OUT/bench_seed.txt"; tail -3 "$OUT/bench_seed.err"
fi
if [ "$PART" = ops ]; then
  for op in $2; do
    m=latency,gbps,speedup,accuracy,kineto_trace; [ $op = gemm ] && m=latency,tflops,speedup,accuracy,kineto_trace
    timeout ${3:-150} python3 -m kernscope bench --op $op --metrics $m --keep-going --output-dir "$OUT/traces" --json "$OUT/bench_$op.json" > "$OUT/bench_$op.txt" 2>"$OUT/bench_$op.err"
    echo "-- $op rc=$?"; cat "$OUT/bench_$op.txt"; grep -v "^…" "$OUT/bench_$op.err" | tail -3
  done
fi
if [ "$PART" = all ] || [ "$PART" = 3 ]; then
  timeout 200 python3 -m kernscope bench --op gemm --dtype float8_e4m3fn --metrics latency,tflops,speedup,accuracy --keep-going --num-inputs 6 --json "$OUT/bench_gemm_fp8.json" > "$OUT/bench_gemm_fp8.txt" 2>&1; echo "-- gemm fp8"; head -12 "$OUT/bench_gemm_fp8.txt"
  for mode in fwd bwd; do
    timeout 280 python3 -m kernscope bench --op flash_attention --mode $mode --metrics latency,tflops,speedup,accuracy,kineto_trace --keep-going --output-dir "$OUT/traces_$mode" --json "$OUT/bench_fa_$mode.json" > "$OUT/bench_fa_$mode.txt" 2>"$OUT/bench_fa_$mode.err"
    echo "-- flash_attention $mode rc=$?"; head -30 "$OUT/bench_fa_$mode.txt"; tail -3 "$OUT/bench_fa_$mode.err"
  done
  echo "== run-to-run spread"
  for i in 1 2 3; do timeout 120 python3 -m kernscope bench --op gemm --num-inputs 6 --only torch_matmul --metrics latency --json "$OUT/repeat_gemm_$i.json" > /dev/null 2>&1; done
  for i in 1 2 3; do timeout 120 python3 -m kernscope bench --op softmax --only torch_softmax,triton_softmax --metrics latency --json "$OUT/repeat_softmax_$i.json" > /dev/null 2>&1; done
  ls "$OUT"
fi
