"""Record a small real multi-rank job on a machine with two or more GPUs: the sample of ``kernscope analyze DIR``'s
job output (its JSON Schema's tables: stragglers, collectives, queues ...) and of the multi-rank tests.

    torchrun --nproc-per-node 2 examples/record_ddp_job.py OUT_DIR [--late-rank 1] [--late-ms 20]

Each rank trains a 4-layer MLP (4096 wide, bf16 autocast) with ``DistributedDataParallel`` over NCCL for 2 warm-up
and 3 profiled steps (``ProfilerStep#2..4``), ``record_shapes=True``. Rank ``--late-rank`` sleeps ``--late-ms``
on the host before each backward pass, so the other ranks wait for it in every all-reduce: an injected straggler.
Writes ``OUT_DIR/rank{R}.pt.trace.json.gz`` (with ``distributedInfo``: rank and world size).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from record_recompile_traces import save_chrome_gz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--late-rank", type=int, default=1)
    ap.add_argument("--late-ms", type=float, default=20.0)
    a = ap.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    from torch.profiler import ProfilerActivity, profile, schedule

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(4096, 4096), torch.nn.GELU()]
    model = DistributedDataParallel(torch.nn.Sequential(*layers).cuda(), bucket_cap_mb=25)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(2048, 4096, device="cuda")

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        if rank == a.late_rank:
            time.sleep(a.late_ms / 1000.0)  # the straggler: late to every all-reduce of this step
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    os.makedirs(a.out_dir, exist_ok=True)
    path = os.path.join(a.out_dir, f"rank{rank}.pt.trace.json.gz")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=0, warmup=2, active=3),
                 on_trace_ready=lambda p: save_chrome_gz(p, path)) as prof:
        for _ in range(5):
            step()
            torch.cuda.synchronize()
            prof.step()
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: {path} ({os.path.getsize(path):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
