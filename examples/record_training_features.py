"""Record traces of training features users profile with, on a GPU.

    python examples/record_training_features.py OUT_DIR [SCENARIO ...]

Each scenario trains for 3 profiled steps after warm-up (``record_shapes=True``) and is written to
``OUT_DIR/<scenario>.pt.trace.json.gz``; ``OUT_DIR/record_info.json`` holds the versions, the GPU and what each
scenario ran:

- ``reduce_overhead``: an MLP under ``torch.compile(mode="reduce-overhead")`` (Inductor's CUDA graph trees: the
  forward and backward replayed as CUDA graphs) with fused AdamW;
- ``amp_checkpoint``: fp16 autocast with a ``GradScaler``, activation checkpointing (``torch.utils.checkpoint``:
  the forward recomputed in the backward) and each batch copied from pinned memory with ``non_blocking=True``;
- ``streams``: two matrix products a step on a side stream overlapping the main stream's, joined by
  ``wait_stream``, recorded with the profiler's CUDA sync events (``enable_cuda_sync_events``);
- ``dataloader``: an MLP fed by a ``DataLoader`` (2 workers, ``pin_memory``) whose dataset takes ~4 ms of CPU a
  sample: each step begins by waiting for its batch (the input-bound step users profile);
- ``first_call_autotune``: a user Triton kernel under ``@triton.autotune`` (4 configs) profiled from its first call,
  no warm-up (``schedule(wait=0, warmup=0, active=3, repeat=1)``), as users profile their first steps: the first step
  holds Triton's benchmarking of every config, each timed run after an L2-cache flush.
"""

from __future__ import annotations

import os
import sys

from recording import profiled, run_all

SCENARIOS = ("reduce_overhead", "amp_checkpoint", "streams", "dataloader", "first_call_autotune")


def _mlp(dim: int, depth: int):  # type: ignore[no-untyped-def]
    import torch

    layers: list[torch.nn.Module] = []
    for _ in range(depth):
        layers += [torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim), torch.nn.LayerNorm(dim)]
    return torch.nn.Sequential(*layers).cuda()


def reduce_overhead(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    model = _mlp(1024, 4)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(512, 1024, device="cuda")
    losses: list[float] = []

    def step() -> None:
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))

    profiled(step, os.path.join(out, "reduce_overhead.pt.trace.json.gz"), warmup=4, sync_each=False,
             record_shapes=True)
    return {"model": "4 x (Linear(1024, 4096) GELU Linear(4096, 1024) LayerNorm), fp32, batch 512",
            "optimizer": "AdamW(fused=True)", "last_loss": losses[-1]}


def amp_checkpoint(out: str) -> dict:
    import torch
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(_mlp(1024, 1) for _ in range(4))
    opt = torch.optim.SGD(blocks.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    host = torch.randn(2048, 1024).pin_memory()
    losses: list[float] = []

    def step() -> None:
        x = host.to("cuda", non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            for b in blocks:
                x = checkpoint(b, x, use_reentrant=False)
            loss = x.float().square().mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))

    profiled(step, os.path.join(out, "amp_checkpoint.pt.trace.json.gz"), warmup=4, sync_each=False,
             record_shapes=True)
    return {"model": "4 checkpointed blocks of Linear(1024, 4096) GELU Linear(4096, 1024) LayerNorm, fp16 autocast",
            "batch": "2048 x 1024 fp32 from pinned memory, non_blocking", "scaler": "GradScaler",
            "last_loss": losses[-1], "scale": float(scaler.get_scale())}


def streams(out: str) -> dict:
    import torch
    from torch._C._profiler import _ExperimentalConfig

    torch.manual_seed(0)
    a, b, c, d = (torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    side = torch.cuda.Stream()

    def step() -> None:
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            y = c @ d
            y = y @ d
        x = a @ b
        x = x @ b
        main.wait_stream(side)
        (x + y).sum().item()  # the host waits for the step's end

    profiled(step, os.path.join(out, "streams.pt.trace.json.gz"), warmup=4, sync_each=False, record_shapes=True,
             experimental_config=_ExperimentalConfig(enable_cuda_sync_events=True))
    return {"work": "per step: two 4096^3 bf16 GEMMs on a side stream beside two on the main stream, joined by "
                    "wait_stream, then a sum read by .item()", "experimental_config": "enable_cuda_sync_events=True"}


class SlowDataset:
    """Random samples that each take ``ms`` milliseconds of CPU (a decode or augmentation) to make."""

    def __init__(self, n: int, dim: int, ms: float) -> None:
        self.n, self.dim, self.ms = n, dim, ms

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        import time

        import torch

        end = time.perf_counter() + self.ms / 1000
        while time.perf_counter() < end:  # (busy: a real transform holds the CPU)
            pass
        return torch.full((self.dim,), float(i % 7))


def dataloader(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    model = _mlp(1024, 2)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(SlowDataset(10_000, 1024, 4.0), batch_size=16, num_workers=2,
                                         pin_memory=True, persistent_workers=True)
    batches = iter(loader)
    losses: list[float] = []

    def step() -> None:
        x = next(batches).to("cuda", non_blocking=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))

    profiled(step, os.path.join(out, "dataloader.pt.trace.json.gz"), warmup=4, sync_each=False, record_shapes=True)
    return {"model": "2 x (Linear(1024, 4096) GELU Linear(4096, 1024) LayerNorm), fp32, batch 16",
            "loader": "DataLoader(num_workers=2, pin_memory=True), 4 ms of CPU a sample: ~32 ms a batch",
            "last_loss": losses[-1]}


def first_call_autotune(out: str) -> dict:
    import torch
    import triton
    import triton.language as tl
    from recording import save_chrome_gz
    from torch.profiler import ProfilerActivity, profile, schedule

    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (512, 2048) for w in (2, 4)]

    @triton.autotune(configs=configs, key=["n"], warmup=2, rep=5)
    @triton.jit
    def scale_add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(o_ptr + i, tl.load(x_ptr + i, mask=m) * 2.0 + tl.load(y_ptr + i, mask=m), mask=m)

    x = torch.randn(1 << 22, device="cuda")
    y, o = torch.randn_like(x), torch.empty_like(x)
    path = os.path.join(out, "first_call_autotune.pt.trace.json.gz")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=0, warmup=0, active=3, repeat=1),
                 on_trace_ready=lambda p: save_chrome_gz(p, path)) as prof:
        for _ in range(3):
            scale_add[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, o, x.numel())
            torch.cuda.synchronize()
            prof.step()
    best = scale_add.best_config
    return {"kernel": "scale_add (o = 2x + y, 4 M floats)", "configs": len(configs), "autotune": "warmup=2 ms, rep=5 ms",
            "best": {"BLOCK": best.kwargs["BLOCK"], "num_warps": best.num_warps}}


def main() -> None:
    out = sys.argv[1]
    chosen = sys.argv[2:] or list(SCENARIOS)
    os.makedirs(out, exist_ok=True)
    import torch

    info: dict = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}
    run_all(out, {n: globals()[n] for n in SCENARIOS}, chosen, info)


if __name__ == "__main__":
    main()
