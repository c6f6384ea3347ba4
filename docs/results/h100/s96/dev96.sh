#!/usr/bin/env bash
# Session 96 on the device: the GPU tests, the example recorded and analyzed, the intra overhead (gpu_session.sh part 1),
# then real benchmark runs' terminal tables drawn by kernscope's own table drawing and by rich's, compared byte for byte.
# Usage (repo root, .carry/ carried): bash docs/results/h100/s96/dev96.sh
set -uo pipefail
bash benchmarks/gpu_session.sh 1
source benchmarks/device_env.sh > /dev/null || exit 1
echo "== bench tables: own drawing against rich's"
timeout 300 python3 - <<'PY' 2>&1 | tee "$OUT/bench_tables.txt"
import os, time
from kernscope.bench.operators import builtin_registry
from kernscope.bench.runner import run
from kernscope.render import terminal
from kernscope.render.formats import Options, text

out = os.environ["OUT"]
reg = builtin_registry()
device = os.environ.get("DEV96_DEVICE", "cuda")
for op, metrics in (("softmax", "latency,gbps,speedup,accuracy"), ("gemm", "latency,tflops,speedup,accuracy,kineto_trace")):
    r = run(reg.get(op), device=device, num_inputs=4, metrics=metrics.split(","), output_dir=f"{out}/bench_{op}")
    for width in (80, 120, 220):
        for color in (False, True):
            t0 = time.perf_counter(); fast = text(r, "table", Options(width=width, color=color)); t1 = time.perf_counter()
            keep = terminal._plain_body
            terminal._plain_body = lambda *a: None
            try:
                slow = text(r, "table", Options(width=width, color=color)); t2 = time.perf_counter()
            finally:
                terminal._plain_body = keep
            print(f"{op} width {width} color {color}: same={fast == slow} lines={fast.count(chr(10))} "
                  f"own {1e3 * (t1 - t0):.1f} ms rich {1e3 * (t2 - t1):.1f} ms")
            if width == 120 and not color:
                open(f"{out}/bench_{op}_table.txt", "w").write(fast)
    print(text(r, "table", Options(width=120)))
PY
du -sh "$OUT"/* | sort -h | tail -5
