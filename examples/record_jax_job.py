"""Record a real multi-process JAX job, one process per GPU, with an injected straggler: kernscope's test data for a
job of JAX profiles (one XSpace per process, as ``jax.distributed`` jobs write them).

    python examples/record_jax_job.py OUT_DIR [--processes 2] [--late-process 1] [--late-ms 20] [--steps 4]

Starts ``--processes`` Python processes on this host, each seeing one GPU (``CUDA_VISIBLE_DEVICES``), joined by
``jax.distributed`` over localhost. Together they train the transformer of ``record_jax_profiles.py`` data-parallel
over a one-axis mesh of all their GPUs (the batch sharded, the parameters replicated: XLA all-reduces the gradients
with NCCL). Process ``--late-process`` sleeps ``--late-ms`` on the host before dispatching each step, so the others
wait for it in every all-reduce. Each process profiles ``--steps`` steps inside ``StepTraceAnnotation`` into
``OUT_DIR/process{i}/`` (``plugins/profile/<run>/<host>.xplane.pb``: every process on one host writes a file of the
same name, so each gets its own folder) and writes ``OUT_DIR/process{i}/record_info.json`` (what ran where).
``--fsdp`` shards the parameters over the processes (each on its largest dimension they divide): XLA all-gathers
them and reduce-scatters the gradients. ``--ring`` adds, after each step, a ring exchange of a 1024 x 4096 fp32
block per process (``ppermute`` in ``shard_map``: XLA's collective-permute, NCCL send/recv kernels). ``--cpu`` runs
it on the CPU (gloo collectives) to check the script: no GPU kernels then.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _local_part(v: Any, spec: Any, me: int) -> Any:
    """This process's part of a parameter sharded by ``spec`` over the processes (one device each)."""
    import jax

    for i, axis in enumerate(spec):
        if axis is not None:
            n = v.shape[i] // jax.process_count()
            return v.take(range(me * n, (me + 1) * n), axis=i)
    return v


def worker(a: argparse.Namespace) -> int:
    import jax

    if a.cpu:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        attention = jax.nn.dot_product_attention  # the transformer asks for cuDNN's: XLA's own on the CPU
        jax.nn.dot_product_attention = lambda *args, implementation=None, **kw: attention(*args, **kw)
    jax.distributed.initialize(f"127.0.0.1:{a.port}", num_processes=a.processes, process_id=a.process_id)
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from record_jax_profiles import transformer_setup

    me = jax.process_index()
    mesh = Mesh(np.array(jax.devices()), ("data",))
    params, (x, y), loss_fn = transformer_setup(jax.random.PRNGKey(0))  # the same values in every process
    x, y = jax.numpy.tile(x, (2, 1)), jax.numpy.tile(y, (2, 1))  # 16 sequences per process

    def global_array(local: Any, spec: PartitionSpec) -> jax.Array:
        return jax.make_array_from_process_local_data(NamedSharding(mesh, spec), np.asarray(local))

    def param_spec(v: Any) -> PartitionSpec:
        """Replicated, or with --fsdp sharded on its largest dimension that the processes divide (ZeRO-3 style: XLA
        all-gathers the parameters where they are used and reduce-scatters their gradients)."""
        dims = [i for i in sorted(range(v.ndim), key=lambda i: -v.shape[i]) if v.shape[i] % jax.process_count() == 0]
        if not a.fsdp or not dims or v.ndim < 2:
            return PartitionSpec()
        return PartitionSpec(*[("data" if i == dims[0] else None) for i in range(v.ndim)])

    params = jax.tree_util.tree_map(lambda v: global_array(np.asarray(v) if not a.fsdp else
                                                           _local_part(np.asarray(v), param_spec(v), me), param_spec(v)),
                                    params)
    x, y = global_array(x, PartitionSpec("data")), global_array(y, PartitionSpec("data"))

    @jax.jit
    def train_step(p: Any, x: jax.Array, y: jax.Array) -> tuple[Any, jax.Array]:
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - (1e-3 * b).astype(a.dtype), p, g), loss

    n = jax.process_count()
    spec = PartitionSpec("data")
    # a ring exchange after each step (--ring): every process sends its shard to the next (XLA's collective-permute,
    # NCCL send/recv kernels)
    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:
        from jax.experimental.shard_map import shard_map
    ring = jax.jit(shard_map(lambda v: jax.lax.ppermute(v, "data", perm=[(i, (i + 1) % n) for i in range(n)]),
                             mesh=mesh, in_specs=spec, out_specs=spec))
    block = global_array(np.ones((1024, 4096), np.float32), spec) if a.ring else None

    def step() -> jax.Array:
        nonlocal params, block
        if me == a.late_process:
            time.sleep(a.late_ms / 1000.0)  # the straggler: late to every all-reduce of the step
        params, loss = train_step(params, x, y)
        if block is not None:
            block = ring(block)
        return loss.block_until_ready()

    for _ in range(3):
        step()
    out = os.path.join(a.out_dir, f"process{me}")
    with jax.profiler.trace(out, create_perfetto_trace=False):
        for s in range(a.steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=s):
                loss = step()
    files = {os.path.relpath(os.path.join(r, n), a.out_dir): os.path.getsize(os.path.join(r, n))
             for r, _, names in os.walk(out) for n in names}
    info = {"process": me, "processes": jax.process_count(), "devices": [str(d) for d in jax.local_devices()],
            "device_kind": jax.local_devices()[0].device_kind, "jax": jax.__version__, "loss": float(loss),
            "late_process": a.late_process, "late_ms": a.late_ms, "ring": a.ring, "fsdp": a.fsdp, "files": files}
    with open(os.path.join(out, "record_info.json"), "w") as f:
        json.dump(info, f, indent=1)
    jax.distributed.shutdown()
    print(json.dumps(info), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--late-process", type=int, default=1)
    ap.add_argument("--late-ms", type=float, default=20.0)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--ring", action="store_true", help="after each step, a ring exchange of a 16 MiB shard (ppermute)")
    ap.add_argument("--fsdp", action="store_true", help="parameters sharded over the processes (all-gathers, "
                    "reduce-scatters) instead of replicated (all-reduces)")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (gloo), to check the script")
    ap.add_argument("--process-id", type=int, default=None, help=argparse.SUPPRESS)  # set for the workers
    ap.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.process_id is not None:
        return worker(a)
    os.makedirs(a.out_dir, exist_ok=True)
    port = _free_port()
    procs = []
    for i in range(a.processes):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(i), "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        if a.cpu:
            env["JAX_PLATFORMS"] = "cpu"
        cmd = [sys.executable, os.path.abspath(__file__), a.out_dir, "--processes", str(a.processes), "--late-process",
               str(a.late_process), "--late-ms", str(a.late_ms), "--steps", str(a.steps), "--process-id", str(i),
               "--port", str(port), *(["--cpu"] if a.cpu else []), *(["--ring"] if a.ring else []),
               *(["--fsdp"] if a.fsdp else [])]
        procs.append(subprocess.Popen(cmd, env=env))
    codes = [p.wait() for p in procs]
    print(f"processes exited {codes}", flush=True)
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
