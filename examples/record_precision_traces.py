"""Record the traces the perf model's precision and byte rules are checked on, on a GPU.

    python examples/record_precision_traces.py OUT_DIR [torch|jax]

Writes ``OUT_DIR/precision.pt.trace.json.gz`` (``record_shapes=True``), one profiled step per case, 3 calls each:

- ``ProfilerStep#0``: ``torch.mm`` of 4096 x 4096 float32 tensors with TF32 off (``allow_tf32 = False``): SIMT
  fp32 kernels, rated against the fp32 peak;
- ``ProfilerStep#1``: the same with TF32 on: TF32 tensor-core kernels (their peak);
- ``ProfilerStep#2``: ``torch.nn.functional.linear`` of float32 tensors under ``torch.autocast(bfloat16)``: an fp32
  ``aten::linear`` holding a bf16 GEMM;
- ``ProfilerStep#3``: ``torch.mul(x, 0.5, out=y)`` of 64 M floats and ``torch.gather`` with an index ``expand``ed over
  the rows' 768 columns (a tied embedding's loss): memory-bound, an ``out=`` tensor and an expanded operand.

and ``OUT_DIR/jax_precision/``: a jitted float32 4096³ matrix product, step 0 at JAX's default precision (TF32 on
GPUs that have it), step 1 at ``Precision.HIGHEST`` (fp32), 3 calls each. Without an argument both, each in its own
process (CUPTI takes one subscriber).
"""

from __future__ import annotations

import os
import sys


def record(out_dir: str) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    x = torch.randn(64 * 2**20, device="cuda")
    y = torch.empty_like(x)
    table = torch.randn(50304, 768, device="cuda")
    rows = torch.randint(0, 50304, (8192, 1), device="cuda").expand(8192, 768)

    def mm(tf32: bool) -> None:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for _ in range(3):
            torch.mm(a, b)

    def autocast() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            for _ in range(3):
                torch.nn.functional.linear(a, b)

    def memory() -> None:
        for _ in range(3):
            torch.mul(x, 0.5, out=y)
            torch.gather(table, 0, rows)

    cases = (lambda: mm(False), lambda: mm(True), autocast, memory)
    for case in cases:  # warm up: cuBLAS handles, autocast caches
        case()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        for i, case in enumerate(cases):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                case()
                torch.cuda.synchronize()
    torch.backends.cuda.matmul.allow_tf32 = False
    from record_recompile_traces import save_chrome_gz  # (this script's folder is on the path when it runs)

    return save_chrome_gz(prof, os.path.join(out_dir, "precision.pt.trace.json.gz"))


def record_jax(out_dir: str) -> str:
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (4096, 4096), jnp.float32)
    default = jax.jit(lambda x: x @ x)
    highest = jax.jit(lambda x: jnp.matmul(x, x, precision=jax.lax.Precision.HIGHEST))
    for f in (default, highest):
        f(a).block_until_ready()
    d = os.path.join(out_dir, "jax_precision")
    jax.profiler.start_trace(d)
    for i, f in enumerate((default, highest)):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            for _ in range(3):
                f(a).block_until_ready()
    jax.profiler.stop_trace()
    return d


if __name__ == "__main__":
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    which = sys.argv[2] if len(sys.argv) > 2 else "both"
    if which == "both":
        import subprocess

        for part in ("torch", "jax"):
            subprocess.run([sys.executable, __file__, out, part], check=True)
    else:
        print(record(out) if which == "torch" else record_jax(out))
