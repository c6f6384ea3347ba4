"""Record one training loop twice on a GPU: with the CUDA activity alone and with CPU + CUDA.

    python examples/record_activity_traces.py OUT_DIR

Writes ``OUT_DIR/cuda_only.pt.trace.json.gz`` (``activities=[ProfilerActivity.CUDA]``: kernels, memsets and
runtime calls, no CPU op and no ``ProfilerStep`` annotation, so kernscope finds the steps itself) and
``OUT_DIR/cpu_cuda.pt.trace.json.gz`` (both activities: the same loop with its ``ProfilerStep`` ranges). The loop:
four 1024x1024 linear layers, batch 256, SGD, ``torch.cuda.synchronize()`` after each iteration; the profiler's
schedule waits one step, warms up one and records three.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys


def main(out_dir: str) -> list[str]:
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(256, 1024, device="cuda")

    def step() -> None:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for activities, name in (([ProfilerActivity.CUDA], "cuda_only"),
                             ([ProfilerActivity.CPU, ProfilerActivity.CUDA], "cpu_cuda")):
        plain = os.path.join(out_dir, f"{name}.pt.trace.json")

        def ready(prof: profile, plain: str = plain) -> None:
            prof.export_chrome_trace(plain)

        with profile(activities=activities, schedule=schedule(wait=1, warmup=1, active=3), on_trace_ready=ready) as prof:
            for _ in range(5):
                step()
                torch.cuda.synchronize()
                prof.step()
        with open(plain, "rb") as src, gzip.open(plain + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.remove(plain)
        written.append(plain + ".gz")
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for path in main(sys.argv[1]):
        sys.stdout.write(path + "\n")
