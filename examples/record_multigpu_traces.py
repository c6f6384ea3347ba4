"""Record one process driving two GPUs, and CUDA-graph trees, on a GPU machine: kernscope's multi-device test data.

    python examples/record_multigpu_traces.py OUT_DIR [--which torch_mp,torch_dp,graphs,jax_dp] [--steps 3]

- ``torch_mp``: one PyTorch process, a 6-layer MLP split over ``cuda:0`` (layers 1-3) and ``cuda:1`` (4-6), the
  activations copied between the GPUs (device-to-device memcpys), trained with SGD. One Kineto trace with both
  devices' kernels: ``OUT_DIR/torch_mp.pt.trace.json.gz``. Needs two GPUs.
- ``torch_dp``: the same kind of MLP under ``torch.nn.DataParallel`` on both GPUs (one process: the parameters
  broadcast and the gradients reduced with NCCL each step). ``OUT_DIR/torch_dp.pt.trace.json.gz``. Needs two GPUs.
- ``graphs``: a small MLP trained with ``torch.compile(mode="reduce-overhead")``: Inductor's CUDA-graph trees
  replay the forward and the backward as graphs (``cudaGraphLaunch``), the optimizer runs eagerly. One GPU:
  ``OUT_DIR/graphs.pt.trace.json.gz``.
- ``jax_dp``: a JAX transformer (``record_jax_profiles.transformer_setup``) trained data-parallel over every
  visible GPU: the batch sharded on a one-axis mesh, the parameters replicated, so XLA all-reduces the gradients
  (NCCL kernels). One XSpace with a plane per GPU: ``OUT_DIR/jax_dp/plugins/profile/<run>/<host>.xplane.pb``.

Each PyTorch run records ``--steps`` steps with ``torch.profiler.schedule(wait=1, warmup=1, active=STEPS)``
(``ProfilerStep#N`` ranges), both CPU and CUDA activities and ``record_shapes``; JAX records its steps inside
``StepTraceAnnotation``. Everything is compiled and warmed up before the profiled steps. The JAX run belongs in a
process of its own (JAX takes most of each GPU's memory when it starts): run ``--which jax_dp`` separately.
``OUT_DIR/record_info_<which>.json`` says what ran where (devices, versions, losses).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def torch_profiled(out_path: str, steps: int, step: Any) -> None:
    """Run ``step()`` under the profiler (wait 1, warm up 1, record ``steps``) and write the gzipped trace."""
    import torch
    from record_recompile_traces import save_chrome_gz
    from torch.profiler import ProfilerActivity, profile, schedule

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=steps)) as prof:
        for _ in range(steps + 2):
            step()
            torch.cuda.synchronize()
            prof.step()
    save_chrome_gz(prof, out_path)


def torch_mp(out_dir: str, steps: int) -> dict[str, Any]:
    import torch

    if torch.cuda.device_count() < 2:
        raise SystemExit("torch_mp needs two GPUs")
    torch.manual_seed(0)
    width = 4096

    def block(dev: str) -> torch.nn.Sequential:
        return torch.nn.Sequential(*[m for _ in range(3) for m in (torch.nn.Linear(width, width), torch.nn.GELU())]).to(dev)

    first, second = block("cuda:0"), block("cuda:1")
    x = torch.randn(2048, width, device="cuda:0")
    opt = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=1e-3)
    return trained(out_dir, "torch_mp", steps, lambda: second(first(x).to("cuda:1")).square().mean(), opt)


def trained(out_dir: str, name: str, steps: int, loss_of: Any, opt: Any) -> dict[str, Any]:
    """Train with ``loss_of()`` and ``opt`` on two GPUs: three warm-up steps, then ``torch_profiled`` into
    ``OUT_DIR/<name>.pt.trace.json.gz``; what ran (file, size, last loss, the GPUs)."""
    import torch

    losses = []

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = loss_of()
        loss.backward()
        opt.step()
        losses.append(loss.detach())

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    path = os.path.join(out_dir, f"{name}.pt.trace.json.gz")
    torch_profiled(path, steps, step)
    return {"file": path, "bytes": os.path.getsize(path), "loss": float(losses[-1]),
            "devices": [torch.cuda.get_device_name(i) for i in range(2)]}


def torch_dp(out_dir: str, steps: int) -> dict[str, Any]:
    import torch

    if torch.cuda.device_count() < 2:
        raise SystemExit("torch_dp needs two GPUs")
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(3) for m in (torch.nn.Linear(2048, 2048), torch.nn.GELU())]).cuda()
    dp = torch.nn.DataParallel(model, device_ids=[0, 1])
    x = torch.randn(4096, 2048, device="cuda:0")
    return trained(out_dir, "torch_dp", steps, lambda: dp(x).square().mean(), torch.optim.SGD(model.parameters(), lr=1e-3))


def graphs(out_dir: str, steps: int) -> dict[str, Any]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
                                torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, mode="reduce-overhead")
    x = torch.randn(512, 1024, device="cuda")
    losses = []

    def step() -> None:
        torch.compiler.cudagraph_mark_step_begin()
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.detach())

    for _ in range(5):  # compile, warm up, record the graphs
        step()
    torch.cuda.synchronize()
    path = os.path.join(out_dir, "graphs.pt.trace.json.gz")
    torch_profiled(path, steps, step)
    return {"file": path, "bytes": os.path.getsize(path), "loss": float(losses[-1]),
            "devices": [torch.cuda.get_device_name(0)]}


def jax_dp(out_dir: str, steps: int) -> dict[str, Any]:
    import jax
    from jax.sharding import NamedSharding, PartitionSpec
    from record_jax_profiles import transformer_setup

    devices = jax.devices()
    mesh = jax.sharding.Mesh(devices, ("data",))
    params, (x, y), loss_fn = transformer_setup(jax.random.PRNGKey(0))
    reps = len(devices) * 2  # a batch of 16 sequences per GPU: the transformer's batch of 8 repeated
    x, y = jax.numpy.tile(x, (reps, 1)), jax.numpy.tile(y, (reps, 1))
    params = jax.device_put(params, NamedSharding(mesh, PartitionSpec()))
    x = jax.device_put(x, NamedSharding(mesh, PartitionSpec("data")))
    y = jax.device_put(y, NamedSharding(mesh, PartitionSpec("data")))

    @jax.jit
    def train_step(p: Any, x: jax.Array, y: jax.Array) -> tuple[Any, jax.Array]:
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - (1e-3 * b).astype(a.dtype), p, g), loss

    for _ in range(3):
        params, loss = train_step(params, x, y)
    loss.block_until_ready()
    log_dir = os.path.join(out_dir, "jax_dp")
    with jax.profiler.trace(log_dir, create_perfetto_trace=False):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, loss = train_step(params, x, y)
                loss.block_until_ready()
    hlo = train_step.lower(params, x, y).compile().as_text()
    files = {os.path.relpath(os.path.join(r, n), out_dir): os.path.getsize(os.path.join(r, n))
             for r, _, names in os.walk(log_dir) for n in names}
    return {"files": files, "loss": float(loss), "jax": jax.__version__, "devices": [str(d) for d in devices],
            "device_kind": devices[0].device_kind, "all_reduces_in_hlo": hlo.count("all-reduce")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--which", default="torch_mp,graphs")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    runs = {"torch_mp": torch_mp, "torch_dp": torch_dp, "graphs": graphs, "jax_dp": jax_dp}
    info: dict[str, Any] = {}
    for name in a.which.split(","):
        info[name] = runs[name](a.out, a.steps)
        if name != "jax_dp":
            import torch

            info[name]["torch"] = torch.__version__
    print(json.dumps(info, indent=1))
    with open(os.path.join(a.out, f"record_info_{a.which.replace(',', '_')}.json"), "w") as f:
        json.dump(info, f, indent=1)


if __name__ == "__main__":
    main()
