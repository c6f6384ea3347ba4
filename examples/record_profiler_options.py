"""Record traces with the torch.profiler options users turn on, on a GPU machine: kernscope's test data for them.

    python examples/record_profiler_options.py OUT_DIR [--which cycles,flops,memory_mp,autotune]

- ``cycles``: ``schedule(wait=1, warmup=1, active=2, repeat=2)`` with ``tensorboard_trace_handler(OUT_DIR/cycles,
  use_gzip=True)``, as PyTorch's profiler tutorial records: one file per cycle, ``{host}_{pid}.{ms}.pt.trace.json.gz``.
- ``flops``: ``with_flops=True, record_shapes=True`` around a small model's training step (linear layers, a batched
  matmul, a 2-D convolution, scaled-dot-product attention): the profiler's own FLOP counts (the ``flops`` arg of
  ``aten::mm``, ``aten::addmm``, ``aten::bmm``, ``aten::convolution`` ...) beside the shapes kernscope's perf model
  reads. ``OUT_DIR/flops.pt.trace.json.gz``; the exported trace carries no FLOP count, so the profiler's own
  (``key_averages(group_by_input_shape=True)``: op, input shapes, calls, FLOPs) go to ``OUT_DIR/flops.torch_flops.json``.
- ``memory_mp``: ``profile_memory=True`` around the two-GPU pipeline of ``record_multigpu_traces.py`` (its
  ``torch_mp``): allocations on both GPUs. ``OUT_DIR/memory_mp.pt.trace.json.gz``. Needs two GPUs.
- ``autotune``: an MLP compiled with ``torch.compile(mode="max-autotune-no-cudagraphs")``: Inductor's Triton GEMM
  templates (``triton_tem_fused_*``) where they won the autotuning. ``OUT_DIR/autotune.pt.trace.json.gz``.

Each runs a few warm-up steps before the profiler starts (compiling, autotuning) and synchronizes after each step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def profiled_steps(step: Any, steps: int, **options: Any) -> Any:
    """Warm ``step`` up three times, then profile ``steps`` calls of it (CPU and CUDA, ``options`` added), each inside a
    ``ProfilerStep#i`` range and synchronized after; returns the finished profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **options) as prof:
        for i in range(steps):
            with torch.profiler.record_function(f"ProfilerStep#{i}"):
                step()
            torch.cuda.synchronize()
    return prof


def cycles(out_dir: str) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device="cuda")
    log = os.path.join(out_dir, "cycles")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=2),
                 on_trace_ready=tensorboard_trace_handler(log, use_gzip=True)) as prof:
        for _ in range(8):
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            opt.step()
            torch.cuda.synchronize()
            prof.step()
    return {"files": sorted(os.listdir(log))}


def flops(out_dir: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from record_recompile_traces import save_chrome_gz

    torch.manual_seed(0)
    lin1, lin2 = torch.nn.Linear(512, 2048).cuda(), torch.nn.Linear(2048, 512).cuda()
    conv = torch.nn.Conv2d(16, 32, 3, padding=1).cuda()
    params = [*lin1.parameters(), *lin2.parameters(), *conv.parameters()]
    x = torch.randn(4, 256, 512, device="cuda")
    img = torch.randn(8, 16, 64, 64, device="cuda")

    def step() -> None:
        h = lin2(F.gelu(lin1(x)))  # addmm / mm
        q = k = v = h.view(4, 256, 8, 64).transpose(1, 2)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        scores = torch.bmm(h, h.transpose(1, 2))  # bmm
        loss = att.square().mean() + scores.mean() + conv(img).square().mean()
        loss.backward()
        for p in params:
            p.grad = None

    prof = profiled_steps(step, 2, with_flops=True, record_shapes=True)
    path = os.path.join(out_dir, "flops.pt.trace.json.gz")
    save_chrome_gz(prof, path)
    # the profiler's own FLOP counts (with_flops): not in the exported trace, so written beside it
    counted = [{"name": e.key, "input_shapes": e.input_shapes, "count": e.count, "flops": e.flops}
               for e in prof.key_averages(group_by_input_shape=True) if e.flops]
    with open(os.path.join(out_dir, "flops.torch_flops.json"), "w") as f:
        json.dump(counted, f, indent=1)
    return {"file": path, "bytes": os.path.getsize(path), "ops_with_flops": len(counted)}


def memory_mp(out_dir: str) -> dict[str, Any]:
    import torch
    from record_recompile_traces import save_chrome_gz

    if torch.cuda.device_count() < 2:
        raise SystemExit("memory_mp needs two GPUs")
    torch.manual_seed(0)
    width = 2048

    def block(dev: str) -> torch.nn.Sequential:
        return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width)).to(dev)

    first, second = block("cuda:0"), block("cuda:1")
    opt = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=1e-3)
    x = torch.randn(1024, width, device="cuda:0")

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        second(first(x).to("cuda:1")).square().mean().backward()
        opt.step()

    prof = profiled_steps(step, 3, profile_memory=True, record_shapes=True)
    path = os.path.join(out_dir, "memory_mp.pt.trace.json.gz")
    save_chrome_gz(prof, path)
    peaks = {f"cuda:{d}": torch.cuda.max_memory_allocated(d) for d in range(2)}
    return {"file": path, "bytes": os.path.getsize(path), "max_memory_allocated": peaks}


def autotune(out_dir: str) -> dict[str, Any]:
    import torch
    from record_recompile_traces import save_chrome_gz

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda().half()
    compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
    x = torch.randn(2048, 1024, device="cuda", dtype=torch.half)
    with torch.no_grad():
        prof = profiled_steps(lambda: compiled(x), 3, record_shapes=True)
    path = os.path.join(out_dir, "autotune.pt.trace.json.gz")
    save_chrome_gz(prof, path)
    return {"file": path, "bytes": os.path.getsize(path)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--which", default="cycles,flops,memory_mp,autotune")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    runs = {"cycles": cycles, "flops": flops, "memory_mp": memory_mp, "autotune": autotune}
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "devices": [torch.cuda.get_device_name(i)
                                                                    for i in range(torch.cuda.device_count())]}
    for name in a.which.split(","):
        info[name] = runs[name](a.out)
    print(json.dumps(info, indent=1))
    with open(os.path.join(a.out, "record_info_options.json"), "w") as f:
        json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
