"""Record small real multi-rank jobs of the parallelisms beyond data parallel: kernscope's test data for
point-to-point transfers (a pipeline), tensor parallelism and all-to-all (a mixture of experts).

    torchrun --nproc-per-node 2 examples/record_parallel_jobs.py OUT_DIR [--which pp,tp,ep] [--steps 3]

- ``pp``: a 8-layer MLP (4096 wide, bf16 autocast) split into one stage per rank with
  ``torch.distributed.pipelining`` and trained with ``Schedule1F1B`` over 8 micro-batches: the activations go
  forward and the gradients back by NCCL ``send``/``recv`` (``batch_isend_irecv``).
- ``tp``: the same kind of MLP made tensor-parallel with ``parallelize_module`` (``ColwiseParallel`` then
  ``RowwiseParallel`` per pair of layers): an all-reduce of the activations in each pair's forward and of the
  input gradients in its backward.
- ``ddpc``: a 4-layer MLP under ``DistributedDataParallel`` and ``torch.compile``, with an all-gather of the loss on a
  second process group each step (not run unless named: ``--which ddpc``).
- ``fsdpc``: FSDP2 (``fully_shard``) over 4 blocks, each compiled (``Module.compile``) before it is sharded, bf16
  parameters and fp32 gradient reductions (not run unless named: ``--which fsdpc``).
- ``ddpacc``: ``DistributedDataParallel`` with gradient accumulation, 4 micro-batches a step, the first 3 under
  ``no_sync()``: one step's all-reduces after the last micro-batch's backward (not run unless named).
- ``ep``: a mixture-of-experts layer, one expert MLP per rank: the tokens go to their expert and back with
  ``all_to_all_single`` of uneven splits (rank 0 routes 3/4 of its tokens to rank 1, rank 1 keeps 3/4 of its own),
  forward and backward (``all_to_all_single_autograd``).

Each job warms up 2 steps and records ``--steps`` (``schedule(wait=0, warmup=2, active=STEPS)``:
``ProfilerStep#2..``), CPU and CUDA activities, ``record_shapes``. Writes ``OUT_DIR/<job>/rank{R}.pt.trace.json.gz``
(with ``distributedInfo``) and ``OUT_DIR/<job>/record_info_rank{R}.json`` (what ran where, the last loss).
Runs on CPU too with ``--device cpu`` (gloo), for checking the script: no GPU kernels then.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

WIDTH = 4096
TOKENS = 2048


def mlp(n_layers: int, width: int) -> Any:
    import torch

    return torch.nn.Sequential(*[m for _ in range(n_layers) for m in (torch.nn.Linear(width, width), torch.nn.GELU())])


def sgd_step(model: Any, opt: Any, x: Any, dev: Any) -> Any:
    """One step of the tensor-parallel and DDP jobs: the mean square of the output as loss (bf16 autocast), SGD; the
    loss, detached."""
    import torch

    opt.zero_grad(set_to_none=True)
    with torch.autocast(dev.type, dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    return loss.detach()


def pp_job(rank: int, world: int, dev: Any, width: int) -> tuple[Callable[[], float], list[Any]]:
    """One pipeline stage per rank, 1F1B over 8 micro-batches; the step returns the last stage's mean loss (else 0)."""
    import torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    torch.manual_seed(0)
    full = mlp(8, width)
    per = len(full) // world
    stage_mod = full[rank * per:(rank + 1) * per].to(dev)
    stage = PipelineStage(stage_mod, rank, world, dev)
    sched = Schedule1F1B(stage, n_microbatches=8, loss_fn=lambda out, y: (out.float() - y).pow(2).mean())
    x = torch.randn(TOKENS, width, device=dev)
    y = torch.zeros(TOKENS, width, device=dev)
    opt = torch.optim.SGD(stage_mod.parameters(), lr=1e-3)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        losses: list[Any] = []
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            if rank == 0:
                sched.step(x)
            elif rank == world - 1:
                sched.step(target=y, losses=losses)
            else:
                sched.step()
        opt.step()
        return float(torch.stack(losses).mean()) if losses else 0.0

    return step, [stage_mod]


def tp_job(rank: int, world: int, dev: Any, width: int) -> tuple[Callable[[], float], list[Any]]:
    """Megatron-style tensor parallelism of an 8-layer MLP over every rank (one device mesh)."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    torch.manual_seed(0)
    model = mlp(8, width).to(dev)
    mesh = init_device_mesh(dev.type, (world,))
    plan = {str(2 * i): (ColwiseParallel() if i % 2 == 0 else RowwiseParallel()) for i in range(8)}
    model = parallelize_module(model, mesh, plan)
    x = torch.randn(TOKENS, width, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> float:
        return float(sgd_step(model, opt, x, dev))

    return step, [model]


def ep_job(rank: int, world: int, dev: Any, width: int) -> tuple[Callable[[], float], list[Any]]:
    """A mixture-of-experts layer with one expert per rank and uneven all-to-all splits (two ranks: rank 0 sends
    3/4 of its tokens away, rank 1 keeps 3/4 of its own), forward and backward."""
    import torch
    import torch.distributed as dist
    from torch.distributed._functional_collectives import all_to_all_single_autograd

    torch.manual_seed(rank)
    expert = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                 torch.nn.Linear(2 * width, width)).to(dev)
    x = torch.randn(TOKENS, width, device=dev, requires_grad=False)
    # tokens this rank sends to each rank: rank 0 keeps a quarter; every other rank keeps three quarters
    keep = TOKENS // 4 if rank == 0 else 3 * TOKENS // 4
    rest = TOKENS - keep
    send = [keep if r == rank else rest // (world - 1) for r in range(world)]
    send[(rank + 1) % world] += TOKENS - sum(send)
    counts = torch.tensor(send, device=dev)
    recv_t = torch.empty_like(counts)
    dist.all_to_all_single(recv_t, counts)  # how many tokens each rank sends here (once, before profiling)
    recv = [int(v) for v in recv_t.tolist()]
    opt = torch.optim.SGD(expert.parameters(), lr=1e-3)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            inp = x.to(torch.bfloat16)
            routed = all_to_all_single_autograd(inp, recv, send, dist.group.WORLD)
            out = expert(routed)
            back = all_to_all_single_autograd(out, send, recv, dist.group.WORLD)
            loss = back.float().pow(2).mean()
        loss.backward()
        opt.step()
        return float(loss.detach())

    return step, [expert]


def ddpc_job(rank: int, world: int, dev: Any, width: int) -> tuple[Callable[[], float], list[Any]]:
    """DistributedDataParallel under ``torch.compile`` (its all-reduces between the compiled graph's buckets), and per
    step an all-gather of the loss on a second process group over the same ranks (``dist.new_group``): two groups."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torch.compile(DistributedDataParallel(mlp(4, width).to(dev), bucket_cap_mb=25))
    metrics = dist.new_group(list(range(world)))
    x = torch.randn(TOKENS, width, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    gathered = torch.empty(world, device=dev)

    def step() -> float:
        loss = sgd_step(model, opt, x, dev)
        dist.all_gather_into_tensor(gathered, loss.reshape(1), group=metrics)
        return float(gathered.mean())

    return step, [model]


def ddpacc_job(rank: int, world: int, dev: Any, width: int) -> tuple[Callable[[], float], list[Any]]:
    """DistributedDataParallel with gradient accumulation: 4 micro-batches a step, the first 3 under ``no_sync()``
    (no all-reduce), the last one reducing the accumulated gradients; one optimizer step."""
    import contextlib

    import torch
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = DistributedDataParallel(mlp(4, width).to(dev), bucket_cap_mb=25)
    micro = [torch.randn(TOKENS // 4, width, device=dev) for _ in range(4)]
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=dev)
        for i, x in enumerate(micro):
            with model.no_sync() if i < len(micro) - 1 else contextlib.nullcontext():
                with torch.autocast(dev.type, dtype=torch.bfloat16):
                    loss = model(x).float().pow(2).mean() / len(micro)
                loss.backward()
            total += loss.detach()
        opt.step()
        return float(total)

    return step, [model]


def fsdpc_job(rank: int, world: int, dev: Any, width: int) -> tuple[Callable[[], float], list[Any]]:
    """FSDP2 (``fully_shard``) with each block compiled first (torchtitan's order): per block an all-gather of its
    parameters forward and backward and a reduce-scatter of its gradients, bf16 parameters, fp32 reductions."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU()) for _ in range(4)]
    model = torch.nn.Sequential(*blocks).to(dev)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for b in model:
        b.compile()
        fully_shard(b, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    x = torch.randn(TOKENS, width, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> float:
        return float(sgd_step(model, opt, x, dev))

    return step, [model]


JOBS = {"pp": pp_job, "tp": tp_job, "ep": ep_job, "ddpc": ddpc_job, "fsdpc": fsdpc_job, "ddpacc": ddpacc_job}


def record(job: str, out_dir: str, steps: int, dev: Any, width: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from record_recompile_traces import save_chrome_gz
    from torch.profiler import ProfilerActivity, profile, schedule

    rank, world = dist.get_rank(), dist.get_world_size()
    step, _ = JOBS[job](rank, world, dev, width)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(2):  # warm-up: compilation (ddpc), allocator, NCCL communicators, cuBLAS handles
        step()
    sync()
    dist.barrier()
    d = os.path.join(out_dir, job)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, f"rank{rank}.pt.trace.json.gz")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    losses = []
    with profile(activities=acts, record_shapes=True, schedule=schedule(wait=0, warmup=2, active=steps),
                 on_trace_ready=lambda p: save_chrome_gz(p, path)) as prof:
        for _ in range(steps + 2):
            losses.append(step())
            sync()
            prof.step()
    dist.barrier()
    info = {"job": job, "rank": rank, "world_size": world, "file": path, "bytes": os.path.getsize(path),
            "last_loss": losses[-1], "torch": torch.__version__,
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}
    with open(os.path.join(d, f"record_info_rank{rank}.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--which", default="pp,tp,ep")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--width", type=int, default=WIDTH, help="the MLPs' width (smaller for a CPU check)")
    a = ap.parse_args(argv)

    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl" if a.device == "cuda" else "gloo")
    rank = dist.get_rank()
    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
        dev = torch.device("cuda", torch.cuda.current_device())
    else:
        dev = torch.device("cpu")
    for job in a.which.split(","):
        info = record(job, a.out_dir, a.steps, dev, a.width)
        print(f"rank {rank}: {job}: {info['file']} ({info['bytes']:,} bytes), last loss {info['last_loss']:.6g}",
              flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
