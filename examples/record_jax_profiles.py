"""Record real JAX profiles on a GPU machine: the JAX test data of kernscope's JAX reader.

    python examples/record_jax_profiles.py OUT_DIR [--which mlp,transformer,long] [--steps 3] [--long-steps 40]
        [--no-perfetto] [--no-reference] [--max-gpu-events N] [--loader]

Each run is ``jax.profiler.trace(dir, create_perfetto_trace=True)`` around ``--steps`` jit-compiled
training steps (compiled and warmed up before the trace starts), each step inside
``jax.profiler.StepTraceAnnotation("train", step_num=i)``, as a JAX user records them. What
``jax.profiler`` writes lands under ``OUT_DIR/<which>/plugins/profile/<run>/``: ``<host>.xplane.pb``
(the XSpace protobuf), ``<host>.trace.json.gz`` and ``perfetto_trace.json.gz``.

- ``mlp``: a 4-layer bf16 MLP, softmax cross entropy, SGD (GEMMs, elementwise and reduction fusions).
- ``transformer``: a small decoder (embedding, ``lax.scan`` over 4 layers, layer norm, attention through
  ``jax.nn.dot_product_attention(..., implementation="cudnn")``, GELU MLP), its gradient and SGD.
- ``long``: the transformer for ``--long-steps`` steps (40 by default). With 3,300 steps it is a real ~200 MB
  profile, the size the load benchmarks measure (``benchmarks/bench_xplane.py --trace``); ``--no-perfetto`` and
  ``--no-reference`` then skip the Perfetto JSON and JAX's own (slow, Python) read of the result. JAX's GPU
  tracer keeps ~2 M activity events by default and drops the rest ("Already too many activity events"): a
  15,500-step run then gives a 365 MB profile whose last ~70% of steps have no kernels. ``--max-gpu-events``
  raises that cap (and the callback events') so that such a run is recorded whole (~1 GB).

``--loader``: each step's batch comes from a data loader's thread (two batches ahead), which makes each row of a
batch inside a ``TraceAnnotation`` (``loader.sample``, ~20-60 µs of numpy each, in ``loader.batch``), as tf.data and
grain write their own: a host thread that neither launches GPU work nor holds a step, busy around the steps' starts.
The step then copies its batch to the GPU (``jnp.asarray``), as a training loop does.

Needs only ``jax`` with its CUDA plugin (no flax/optax); one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Params = Any


def mlp_setup(key: jax.Array) -> tuple[Params, tuple[jax.Array, jax.Array], Callable[..., Any]]:
    sizes = [1024, 4096, 4096, 4096, 1000]
    keys = jax.random.split(key, len(sizes) + 1)
    params = [(jax.random.normal(k, (a, b), jnp.bfloat16) * (a ** -0.5), jnp.zeros((b,), jnp.bfloat16))
              for k, a, b in zip(keys[:-2], sizes[:-1], sizes[1:])]
    x = jax.random.normal(keys[-2], (512, sizes[0]), jnp.bfloat16)
    y = jax.random.randint(keys[-1], (512,), 0, sizes[-1])

    def loss_fn(p: Params, x: jax.Array, y: jax.Array) -> jax.Array:
        h = x
        for i, (w, b) in enumerate(p):
            h = h @ w + b
            if i < len(p) - 1:
                h = jax.nn.relu(h)
        logp = jax.nn.log_softmax(h.astype(jnp.float32))
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    return params, (x, y), loss_fn


def transformer_setup(key: jax.Array) -> tuple[Params, tuple[jax.Array, jax.Array], Callable[..., Any]]:
    vocab, d, heads, layers, ctx, batch = 8192, 512, 8, 4, 512, 8
    hd = d // heads
    k = iter(jax.random.split(key, 16))

    def init(shape: tuple[int, ...], scale: float) -> jax.Array:
        return (jax.random.normal(next(k), shape, jnp.float32) * scale).astype(jnp.bfloat16)

    params = {
        "tok": init((vocab, d), 0.02), "pos": init((ctx, d), 0.02),
        "layers": {  # stacked on a leading axis: lax.scan runs one layer per iteration
            "ln1": jnp.ones((layers, d), jnp.bfloat16), "ln2": jnp.ones((layers, d), jnp.bfloat16),
            "qkv": init((layers, d, 3 * d), d ** -0.5), "proj": init((layers, d, d), d ** -0.5),
            "fc1": init((layers, d, 4 * d), d ** -0.5), "fc2": init((layers, 4 * d, d), (4 * d) ** -0.5),
        },
        "lnf": jnp.ones((d,), jnp.bfloat16), "head": init((d, vocab), d ** -0.5),
    }
    data = jax.random.randint(next(k), (batch, ctx + 1), 0, vocab)

    def norm(x: jax.Array, g: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        x32 = (x32 - x32.mean(-1, keepdims=True)) * jax.lax.rsqrt(x32.var(-1, keepdims=True) + 1e-5)
        return (x32 * g.astype(jnp.float32)).astype(x.dtype)

    def layer(x: jax.Array, lp: dict[str, jax.Array]) -> tuple[jax.Array, None]:
        b, t, _ = x.shape
        qkv = (norm(x, lp["ln1"]) @ lp["qkv"]).reshape(b, t, 3, heads, hd)
        q, kk, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        y = jax.nn.dot_product_attention(q, kk, v, is_causal=True, implementation="cudnn").reshape(b, t, d)
        x = x + y @ lp["proj"]
        return x + jax.nn.gelu(norm(x, lp["ln2"]) @ lp["fc1"]) @ lp["fc2"], None

    def loss_fn(p: Params, x: jax.Array, y: jax.Array) -> jax.Array:
        h = p["tok"][x] + p["pos"][None, : x.shape[1]]
        h, _ = jax.lax.scan(layer, h, p["layers"])
        logits = (norm(h, p["lnf"]) @ p["head"]).astype(jnp.float32)
        logp = jax.nn.log_softmax(logits)
        return -jnp.take_along_axis(logp, y[..., None], axis=-1).mean()

    return params, (data[:, :-1], data[:, 1:]), loss_fn


#: the data loader's work per sample (``--loader``): a sort of this many floats, ~20-60 µs of one core
LOADER_SAMPLE_FLOATS = 2048


def _loader(shape: tuple[int, ...], vocab: int, batches: int, out: queue.Queue[Any]) -> None:
    """A data loader's thread (``--loader``): each batch's rows made one at a time, each row's work inside a
    ``TraceAnnotation`` as tf.data and grain write theirs, the batch put on ``out`` (two ahead at most: the thread
    waits on a full queue, as a prefetching loader does)."""
    rng = np.random.default_rng(0)
    for _ in range(batches):
        with jax.profiler.TraceAnnotation("loader.batch"):
            rows = []
            for _ in range(shape[0]):
                with jax.profiler.TraceAnnotation("loader.sample"):
                    np.sort(rng.standard_normal(LOADER_SAMPLE_FLOATS))  # (decoding and augmenting a sample)
                    rows.append(rng.integers(0, vocab, shape[1] + 1, dtype=np.int32))
            batch = np.stack(rows)
        out.put(batch)


def record(name: str, setup: Callable[..., Any], steps: int, out: str, perfetto: bool = True,
           max_gpu_events: int | None = None, loader: bool = False) -> dict[str, Any]:
    params, (x, y), loss_fn = setup(jax.random.PRNGKey(0))

    @jax.jit
    def train_step(p: Params, x: jax.Array, y: jax.Array) -> tuple[Params, jax.Array]:
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - (1e-3 * b).astype(a.dtype), p, g), loss

    for _ in range(3):  # compile and warm up outside the trace
        params, loss = train_step(params, x, y)
    loss.block_until_ready()
    log_dir = os.path.join(out, name)
    t = time.perf_counter()
    options = jax.profiler.ProfileOptions()
    if max_gpu_events:  # assigned whole: the property gives a copy, so an item set on it would be lost
        options.advanced_configuration = {"gpu_max_activity_api_events": max_gpu_events,
                                          "gpu_max_callback_api_events": max_gpu_events}
    batches: queue.Queue[Any] = queue.Queue(maxsize=2)
    if loader:  # (the batches' tokens from a thread of its own, as a training loop's data loader gives them)
        thread = threading.Thread(target=_loader, args=(x.shape, params["tok"].shape[0], steps, batches), daemon=True)
    with jax.profiler.trace(log_dir, create_perfetto_trace=perfetto, profiler_options=options):
        if loader:
            thread.start()
        for i in range(steps):
            batch = batches.get() if loader else None  # (outside the step, as `for batch in loader:` takes it)
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                if batch is not None:
                    x, y = jnp.asarray(batch[:, :-1]), jnp.asarray(batch[:, 1:])
                params, loss = train_step(params, x, y)
                loss.block_until_ready()
    wall = time.perf_counter() - t
    files = {}
    for root, _, names in os.walk(log_dir):
        for n in names:
            files[os.path.relpath(os.path.join(root, n), out)] = os.path.getsize(os.path.join(root, n))
    return {"name": name, "steps": steps, "loss": float(loss), "wall_s": round(wall, 3), "files": files, "loader": loader}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--which", default="mlp,transformer")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--long-steps", type=int, default=40, help="steps of the 'long' run")
    ap.add_argument("--no-perfetto", dest="perfetto", action="store_false", help="no perfetto_trace.json.gz")
    ap.add_argument("--no-reference", dest="reference", action="store_false",
                    help="skip JAX's own read of each profile (record_info.json's 'reference')")
    ap.add_argument("--loader", action="store_true",
                    help="each step's batch from a data loader's thread, whose rows are TraceAnnotation ranges")
    ap.add_argument("--max-gpu-events", type=int, default=None,
                    help="the GPU tracer's cap on activity and callback events (JAX's default: ~2 M)")
    a = ap.parse_args()
    runs = {"mlp": (mlp_setup, a.steps), "transformer": (transformer_setup, a.steps),
            "long": (transformer_setup, a.long_steps)}
    info: dict[str, Any] = {"jax": jax.__version__, "devices": [str(d) for d in jax.devices()],
                            "device_kind": jax.devices()[0].device_kind, "runs": []}
    if a.loader and set(a.which.split(",")) - {"transformer", "long"}:
        ap.error("--loader gives token batches: the transformer's runs only (--which transformer,long)")
    for name in a.which.split(","):
        setup, steps = runs[name]
        info["runs"].append(record(name, setup, steps, a.out, a.perfetto, a.max_gpu_events, a.loader))
    if a.reference:
        info["reference"] = reference(a.out)
    print(json.dumps({k: v for k, v in info.items() if k != "reference"}, indent=1))
    with open(os.path.join(a.out, "record_info.json"), "w") as f:
        json.dump(info, f, indent=1)


def reference(out: str) -> dict[str, Any]:
    """JAX's own reader of each xplane (``jax.profiler.ProfileData``): events and summed durations per
    plane and line, the numbers kernscope's decoder is tested against, and the time it takes."""
    ref: dict[str, Any] = {}
    for root, _, names in os.walk(out):
        for n in names:
            if not n.endswith(".xplane.pb"):
                continue
            path = os.path.join(root, n)
            t = time.perf_counter()
            pd = jax.profiler.ProfileData.from_file(path)
            planes: dict[str, Any] = {}
            events = 0
            for plane in pd.planes:
                lines = planes.setdefault(plane.name, {})
                for line in plane.lines:
                    cnt = dur = 0
                    first = None
                    for ev in line.events:
                        cnt += 1
                        dur += ev.duration_ns
                        first = ev.start_ns if first is None else min(first, ev.start_ns)
                    events += cnt
                    lines[line.name] = {"events": cnt, "dur_ns": dur, "first_start_ns": first}
            ref[os.path.relpath(path, out)] = {"planes": planes, "events": events, "bytes": os.path.getsize(path),
                                               "profiledata_s": round(time.perf_counter() - t, 4)}
    return ref


if __name__ == "__main__":
    main()
