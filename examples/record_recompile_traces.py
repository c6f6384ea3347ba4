"""Record traces with a recompilation inside the profiled steps (the findings' recompile rule), on a GPU.

    python examples/record_recompile_traces.py OUT_DIR [torch|jax]

Writes ``OUT_DIR/torch_compile_recompile.pt.trace.json.gz``: a compiled MLP (``torch.compile(dynamic=False)``)
trained for 4 profiled steps, step 2 with a new batch size, so Dynamo recompiles inside it; and
``OUT_DIR/jax_recompile/``: a jitted function run for 4 steps (``StepTraceAnnotation``), step 2 with a new shape.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile


def torch_trace(out_dir: str) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, dynamic=False)

    def step(batch: int) -> None:
        x = torch.randn(batch, 1024, device="cuda")
        compiled(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step(64)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        for i in range(4):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                step(96 if i == 2 else 64)  # a new shape: Dynamo recompiles in step 2
            torch.cuda.synchronize()
    return save_chrome_gz(prof, os.path.join(out_dir, "torch_compile_recompile.pt.trace.json.gz"))


def save_chrome_gz(prof: object, path: str) -> str:
    """A finished ``torch.profiler.profile``'s Kineto trace, written gzipped to ``path`` (through a temporary file)."""
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(tmp)  # type: ignore[attr-defined]
    with open(tmp, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.unlink(tmp)
    return path


def jax_trace(out_dir: str) -> str:
    import jax
    import jax.numpy as jnp

    @jax.jit
    def f(x: jax.Array) -> jax.Array:
        return jnp.tanh(x @ x.T).sum()

    f(jnp.ones((256, 256))).block_until_ready()
    d = os.path.join(out_dir, "jax_recompile")
    jax.profiler.start_trace(d)
    for i in range(4):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            n = 384 if i == 2 else 256  # a new shape: XLA compiles again in step 2
            f(jnp.ones((n, n))).block_until_ready()
    jax.profiler.stop_trace()
    return d


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "recompile_traces"
    os.makedirs(out, exist_ok=True)
    which = sys.argv[2] if len(sys.argv) > 2 else "both"
    # one profiler per process: CUPTI takes a single subscriber, so PyTorch's and JAX's run in separate processes
    if which == "both":
        import subprocess

        for part in ("torch", "jax"):
            subprocess.run([sys.executable, __file__, out, part], check=True)
    elif which == "torch":
        print("wrote", torch_trace(out))
    else:
        print("wrote", jax_trace(out))
