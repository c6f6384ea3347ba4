#!/usr/bin/env bash
# First look at the device machine: GPU, driver, Python packages kernscope needs, Proton; and the
# full-detail GPT trace the load benchmark replicates (record_shapes, with_stack, profile_memory).
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/gpu.txt" 2>&1
python3 -c 'import sys, torch, triton; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' >> "$OUT/gpu.txt" 2>&1
python3 -m pip list 2>/dev/null | grep -i -E "^(polars|msgspec|xxhash|zlib|rich|click|xlsxwriter|pandas|pyarrow|numpy|nvidia-ml-py|pynvml|websocket|hatchet|llnl)" >> "$OUT/gpu.txt"
python3 -c 'import triton.profiler as p; print("proton at", p.__file__)' >> "$OUT/gpu.txt" 2>&1
which proton-viewer proton >> "$OUT/gpu.txt" 2>&1
python3 -c 'import pynvml; pynvml.nvmlInit(); h=pynvml.nvmlDeviceGetHandleByIndex(0); print("nvml ok", pynvml.nvmlDeviceGetName(h))' >> "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
timeout 300 python3 examples/record_example_trace.py "$OUT/h100_gpt_full.pt.trace.json.gz" --full --steps=6 2>&1 | tail -2
ls -la "$OUT"
