"""Record JAX profiles of hand-written kernels and rematerialization, on a GPU.

    python examples/record_jax_kernels.py OUT_DIR [--cpu] [--which pallas,remat,pytrace,control,libraries,mosaic,partial]

Writes ``OUT_DIR/<which>/plugins/profile/<run>/<host>.xplane.pb`` (``jax.profiler.trace`` around 3 jitted training
steps, each in ``StepTraceAnnotation("train", step_num=i)``, compiled and warmed up before) and
``OUT_DIR/record_info.json`` (versions, the device, per profile what ran and the loss):

- ``pallas``: a Pallas (Triton) matrix-product kernel and Pallas's fused attention
  (``jax.experimental.pallas.ops.gpu.attention.mha``, causal) in a two-layer model's forward and backward;
- ``remat``: the transformer block of ``record_jax_profiles.py`` under ``jax.checkpoint`` (the forward recomputed in
  the backward), attention by XLA (``implementation="xla"``);
- ``pytrace``: the same ``remat`` model recorded with ``jax.profiler.ProfileOptions`` at ``python_tracer_level=1``
  (every Python call an event) and ``host_tracer_level=3``, as users turn them on to see their Python;
- ``control``: a step with a ``lax.fori_loop`` (4 iterations of a 1024-wide matrix product), a ``lax.cond`` and a
  ``jax.debug.callback`` that hands the loss to the host (a host callback inside the step, 2 ms of host work);
- ``libraries``: what XLA hands to libraries or its own kernels beyond GEMM: ``fft2``/``ifft2``, ``cholesky``, ``qr``,
  ``eigh``, ``solve`` (cuSOLVER), ``sort`` and ``top_k``, ``cumsum``, a scatter-add, a 2-D convolution (cuDNN) and
  ``jax.random.normal`` inside the step, differentiated (forward and backward).

- ``mosaic``: a Pallas kernel of JAX's Mosaic GPU backend (an elementwise add, 128-row blocks), called twice a step
  on two shapes between XLA's matrix products, and Mosaic GPU's flash attention (``attention_mgpu``, Hopper) forward
  and backward where it runs.

- ``partial``: not a training step but one jitted function per op that reads or writes part of a buffer (an in-place
  ``dynamic_update_slice`` of a donated buffer, with and without arithmetic fused into the update, a slice, a dynamic
  slice, a gather, a scatter-add into a donated buffer, two halves of one array added, a ``lax.scan`` stacking its
  outputs), each called 3 times a step; ``record_info.json`` holds XLA's own cost analysis of each function's compiled
  module (``compiled.cost_analysis()``: ``bytes accessed``, ``flops``) and its optimized HLO, what the perf model's
  bytes of those kernels are tested against.

``--cpu`` runs the same programs on the CPU (Pallas in interpret mode) to check the script where no GPU is. (Not
``libraries``: with jaxlib 0.10.2 on a 2-core CPU, a program holding two LAPACK custom calls, a QR and an eigh say,
waited forever; each alone runs in under a second.)
"""

from __future__ import annotations

import argparse
import json
import os
import traceback
from typing import Any

import jax
import jax.numpy as jnp


def pallas_matmul(x: jax.Array, w: jax.Array, interpret: bool) -> jax.Array:
    """x (M, K) @ w (K, N) by a Pallas kernel of 128 x 128 tiles (M, N, K multiples of 128)."""
    from jax.experimental import pallas as pl

    bm = bn = 128
    bk = 64

    def kernel(x_ref, w_ref, o_ref):  # type: ignore[no-untyped-def]
        acc = jnp.zeros((bm, bn), jnp.float32)

        def body(i, acc):  # type: ignore[no-untyped-def]
            xs = x_ref[:, pl.ds(i * bk, bk)]
            ws = w_ref[pl.ds(i * bk, bk), :]
            return acc + jnp.dot(xs, ws, preferred_element_type=jnp.float32)

        acc = jax.lax.fori_loop(0, x_ref.shape[1] // bk, body, acc)
        o_ref[...] = acc.astype(o_ref.dtype)

    m, k = x.shape
    n = w.shape[1]
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // bm, n // bn),
        in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)), pl.BlockSpec((k, bn), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)), interpret=interpret, name="pallas_matmul")(x, w)


def pallas_setup(key: jax.Array, interpret: bool) -> tuple[Any, tuple[jax.Array, ...], Any]:
    from jax.experimental.pallas.ops.gpu import attention

    b, t, h, d = 4, 1024, 8, 64
    k = iter(jax.random.split(key, 8))
    params = {"w1": jax.random.normal(next(k), (h * d, h * d), jnp.float16) * (h * d) ** -0.5,
              "w2": jax.random.normal(next(k), (h * d, h * d), jnp.float16) * (h * d) ** -0.5}
    x = jax.random.normal(next(k), (b * t, h * d), jnp.float16)

    @jax.custom_vjp
    def mm(x: jax.Array, w: jax.Array) -> jax.Array:
        return pallas_matmul(x, w, interpret)

    def mm_fwd(x: jax.Array, w: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        return mm(x, w), (x, w)

    def mm_bwd(res: tuple[jax.Array, jax.Array], g: jax.Array) -> tuple[jax.Array, jax.Array]:
        x, w = res
        return pallas_matmul(g, w.T, interpret), pallas_matmul(x.T, g, interpret)

    mm.defvjp(mm_fwd, mm_bwd)

    def loss_fn(p: Any, x: jax.Array) -> jax.Array:
        q = mm(x, p["w1"]).reshape(b, t, h, d)
        y = attention.mha(q, q, q, segment_ids=None, causal=True, interpret=interpret).reshape(b * t, h * d)
        return (mm(y, p["w2"]).astype(jnp.float32) ** 2).mean()

    return params, (x,), loss_fn


def mosaic_add(a: jax.Array, b: jax.Array, interpret: bool) -> jax.Array:
    """a + b by a Pallas kernel of JAX's Mosaic GPU backend (``compiler_params=plgpu.CompilerParams()``), 128-row
    blocks a program."""
    from jax.experimental import pallas as pl

    m, n = a.shape
    spec = pl.BlockSpec((128, n), lambda i: (i, 0))

    def kernel(a_ref, b_ref, o_ref):  # type: ignore[no-untyped-def]
        o_ref[...] = a_ref[...] + b_ref[...]

    params = {}
    if not interpret:  # (Mosaic GPU's compiler parameters choose that backend)
        from jax.experimental.pallas import mosaic_gpu as plgpu

        params = {"compiler_params": plgpu.CompilerParams()}
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(a.shape, a.dtype), grid=(m // 128,),
                          in_specs=[spec, spec], out_specs=spec, interpret=interpret, name="mosaic_add",
                          **params)(a, b)


def _mosaic_attention(interpret: bool) -> Any:
    """JAX's Mosaic GPU flash attention (``pallas.ops.gpu.attention_mgpu``, Hopper), forward and backward, or None
    where it cannot run (the CPU, another GPU, another JAX)."""
    if interpret:
        return None
    try:
        from jax.experimental.pallas.ops.gpu import attention_mgpu as am

        config = am.TuningConfig(block_q=64, block_kv=128, max_concurrent_steps=2, block_q_dkv=64, block_kv_dkv=64,
                                 block_q_dq=64, block_kv_dq=64)
        q = jnp.ones((1, 1024, 8, 64), jnp.float16)
        jax.block_until_ready(jax.grad(lambda q: am.attention(q, q, q, config).astype(jnp.float32).sum())(q))
        return lambda q, k, v: am.attention(q, k, v, config)
    except Exception:  # noqa: BLE001 (the profile is recorded without it: its custom calls say so)
        traceback.print_exc()
        return None


def mosaic_setup(key: jax.Array, interpret: bool) -> tuple[Any, tuple[jax.Array, ...], Any]:
    """Two calls of one Mosaic GPU kernel of two shapes (two configs of one name) between XLA's matrix products, and
    Mosaic GPU's flash attention where it runs."""
    k = iter(jax.random.split(key, 4))
    params = {"w": jax.random.normal(next(k), (128, 128), jnp.float32) * 128 ** -0.5}
    x = jax.random.normal(next(k), (1024, 128), jnp.float32)
    attention = _mosaic_attention(interpret)
    try:  # (jaxlib 0.11.2's CUDA plugin on an H200 had no Mosaic GPU lowering of a gridded pallas_call: XLA adds)
        jax.block_until_ready(jax.jit(lambda a: mosaic_add(a, a, interpret))(x))
        own = True
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        own = False
    if not own and attention is None:
        raise RuntimeError("no Mosaic GPU kernel runs here")

    @jax.custom_vjp
    def add(a: jax.Array, b: jax.Array) -> jax.Array:
        return mosaic_add(a, b, interpret) if own else a + b

    add.defvjp(lambda a, b: (add(a, b), None), lambda _, g: (g, g))

    def loss_fn(p: Any, x: jax.Array) -> jax.Array:
        h = add(x @ p["w"], x)  # 1024 x 128
        y = add(h[:256] @ p["w"], h[256:512])  # 256 x 128: the same kernel, another config
        loss = (y ** 2).mean() + (h ** 2).mean()
        if attention is not None:  # 1 x 1024 tokens x 2 heads x 64
            q = h.reshape(1, 1024, 2, 64).astype(jnp.float16)
            loss = loss + attention(q, q, q).astype(jnp.float32).mean()
        return loss

    return params, (x,), loss_fn


def remat_setup(key: jax.Array, interpret: bool) -> tuple[Any, tuple[jax.Array, ...], Any]:
    d, heads, t, b = 512, 8, 512, 8
    hd = d // heads
    k = iter(jax.random.split(key, 8))
    params = [{"qkv": jax.random.normal(next(k), (d, 3 * d), jnp.bfloat16) * d ** -0.5,
               "fc1": jax.random.normal(next(k), (d, 4 * d), jnp.bfloat16) * d ** -0.5,
               "fc2": jax.random.normal(next(k), (4 * d, d), jnp.bfloat16) * (4 * d) ** -0.5} for _ in range(2)]
    x = jax.random.normal(next(k), (b, t, d), jnp.bfloat16)

    @jax.checkpoint
    def block(x: jax.Array, lp: dict[str, jax.Array]) -> jax.Array:
        qkv = (x @ lp["qkv"]).reshape(b, t, 3, heads, hd)
        y = jax.nn.dot_product_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], is_causal=True,
                                         implementation="xla").reshape(b, t, d)
        x = x + y
        return x + jax.nn.gelu(x @ lp["fc1"]) @ lp["fc2"]

    def loss_fn(p: Any, x: jax.Array) -> jax.Array:
        for lp in p:
            x = block(x, lp)
        return (x.astype(jnp.float32) ** 2).mean()

    return params, (x,), loss_fn


def control_setup(key: jax.Array, interpret: bool) -> tuple[Any, tuple[jax.Array, ...], Any]:
    """A step with control flow and a host callback: 4 refinement iterations in a ``lax.fori_loop`` (static bounds, so
    that it can be differentiated: XLA runs it as a while loop), a ``lax.cond`` on the iterate's norm, and
    ``jax.debug.callback`` handing the loss to the host (which sleeps 2 ms in it)."""
    import time

    d, b = 1024, 512
    k = iter(jax.random.split(key, 4))
    params = {"w": jax.random.normal(next(k), (d, d), jnp.bfloat16) * d ** -0.5}
    x = jax.random.normal(next(k), (b, d), jnp.bfloat16)
    seen: list[float] = []

    def on_host(loss: Any) -> None:
        time.sleep(0.002)
        seen.append(float(loss))

    def loss_fn(p: Any, x: jax.Array) -> jax.Array:
        h = jax.lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ p["w"]), x)
        h = jax.lax.cond(jnp.linalg.norm(h.astype(jnp.float32)) > 1.0, lambda h: h * 0.5, lambda h: h, h)
        loss = (h.astype(jnp.float32) ** 2).mean()
        jax.debug.callback(on_host, loss)
        return loss

    return params, (x,), loss_fn


def libraries_setup(key: jax.Array, interpret: bool) -> tuple[Any, tuple[jax.Array, ...], Any]:
    """A step that calls what XLA runs through libraries (cuFFT, cuSOLVER, cuDNN) or its own sort, scan, scatter and
    random-number kernels, each on a parameter so that the backward runs too."""
    k = iter(jax.random.split(key, 8))
    n = 128
    params = {"img": jax.random.normal(next(k), (8, 256, 256), jnp.float32),
              "a": jax.random.normal(next(k), (32, n, n), jnp.float32) * n ** -0.5,
              "v": jax.random.normal(next(k), (1 << 18,), jnp.float32),
              "w": jax.random.normal(next(k), (32, 16, 3, 3), jnp.float32) * 0.1}
    ids = jax.random.randint(next(k), (1 << 18,), 0, 4096)
    x = jax.random.normal(next(k), (8, 16, 128, 128), jnp.float32)
    rng = next(k)  # (an argument: a constant key's numbers would be folded at compile time)

    def loss_fn(p: Any, ids: jax.Array, x: jax.Array, rng: jax.Array) -> jax.Array:
        spec = jnp.fft.fft2(p["img"])
        img = jnp.fft.ifft2(spec * jnp.exp(-jnp.abs(spec) * 1e-3)).real
        spd = p["a"] @ jnp.swapaxes(p["a"], -1, -2) + n * jnp.eye(n)
        chol = jnp.linalg.cholesky(spd)
        q, r = jnp.linalg.qr(p["a"])
        evals, _ = jnp.linalg.eigh(spd)
        sol = jnp.linalg.solve(spd, p["a"][..., :8])
        srt = jnp.sort(p["v"])
        top, _ = jax.lax.top_k(p["v"], 64)
        cum = jnp.cumsum(p["v"])
        seg = jnp.zeros(4096).at[ids].add(p["v"])
        conv = jax.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME")
        noise = jax.random.normal(rng, p["v"].shape)
        terms = (img.mean(), chol.mean(), q.mean() + r.mean(), evals.mean(), sol.mean(), srt[-10:].mean(), top.mean(),
                 (cum * p["v"]).mean() * 1e-3, seg.mean(), conv.mean(), (p["v"] * noise).mean())
        return sum(terms)

    return params, (ids, x, rng), loss_fn


def partial_functions(key: jax.Array) -> dict[str, tuple[Any, tuple[Any, ...], tuple[int, ...]]]:
    """name -> (function, arguments, donated argument numbers): one op each that touches part of a buffer."""
    k = iter(jax.random.split(key, 8))
    big = jax.random.normal(next(k), (4096, 4096), jnp.float32)
    rows = jax.random.normal(next(k), (256, 4096), jnp.float32)
    table = jax.random.normal(next(k), (8192, 1024), jnp.bfloat16)
    idx = jax.random.randint(next(k), (2048,), 0, 8192)
    upd = jax.random.normal(next(k), (2048, 1024), jnp.bfloat16)
    w = jax.random.normal(next(k), (1024, 1024), jnp.bfloat16) * 0.03
    xs = jax.random.normal(next(k), (16, 1024, 1024), jnp.bfloat16)
    at = jnp.int32(1024)

    def scan_stack(w: jax.Array, xs: jax.Array) -> jax.Array:
        def body(c: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            h = jnp.tanh(x @ w + c)
            return h, h * 2.0
        return jax.lax.scan(body, jnp.zeros((1024, 1024), jnp.bfloat16), xs)[1]

    return {
        "dus_inplace": (lambda b, r, i: jax.lax.dynamic_update_slice(b, r, (i, 0)), (big, rows, at), (0,)),
        "dus_fused": (lambda b, r, i: jax.lax.dynamic_update_slice(b, jnp.exp(r) * 2.0 + 1.0, (i, 0)),
                      (big, rows, at), (0,)),
        "slice_scale": (lambda x: x[:1024] * 2.0, (big,), ()),
        "dynamic_slice": (lambda x, i: jax.lax.dynamic_slice(x, (i, 0), (512, 4096)) + 1.0, (big, at), ()),
        "gather_rows": (lambda t, i: t[i] * 2, (table, idx), ()),
        "scatter_add": (lambda t, i, u: t.at[i].add(u), (table, idx, upd), (0,)),
        "halves_add": (lambda x: x[:, :2048] + x[:, 2048:], (big,), ()),
        "scan_stack": (scan_stack, (w, xs), ()),
    }


def record_partial(out: str, steps: int = 3) -> dict[str, Any]:
    """The ``partial`` profile: each function of :func:`partial_functions` compiled (its arguments donated where
    named, fresh copies for each call), warmed up, then called once per step inside the trace; XLA's cost analysis
    and the optimized HLO of each compiled module."""
    funcs = partial_functions(jax.random.PRNGKey(0))
    compiled: dict[str, Any] = {}
    costs: dict[str, Any] = {}
    for name, (fn, args, donate) in funcs.items():
        fn.__name__ = name  # (the module is jit_<name>)
        jitted = jax.jit(fn, donate_argnums=donate)
        c = jitted.lower(*args).compile()
        ca = c.cost_analysis()
        ca = ca[0] if isinstance(ca, (list, tuple)) else ca
        costs[name] = {"module": f"jit_{name}", "donated": list(donate),
                       "cost_analysis": {k: float(v) for k, v in (ca or {}).items()
                                         if k in ("flops", "bytes accessed", "transcendentals")
                                         or k.startswith("bytes accessed")},
                       "hlo": c.as_text()}
        compiled[name] = jitted
        for _ in range(2):  # warm-up, on copies (a donated buffer is gone after a call)
            jax.block_until_ready(jitted(*[jnp.copy(a) for a in args]))
    with jax.profiler.trace(os.path.join(out, "partial")):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                for name, (_, args, donate) in funcs.items():
                    fresh = [jnp.copy(a) if j in donate else a for j, a in enumerate(args)]
                    jax.block_until_ready(compiled[name](*fresh))
    return {"ok": True, "functions": costs}


def record(name: str, setup: Any, out: str, interpret: bool, steps: int = 3, python_tracer: bool = False) -> dict[str, Any]:
    params, args, loss_fn = setup(jax.random.PRNGKey(0), interpret)

    @jax.jit
    def train_step(p: Any, *a: jax.Array) -> tuple[Any, jax.Array]:
        loss, g = jax.value_and_grad(loss_fn)(p, *a)
        return jax.tree_util.tree_map(lambda w, gw: w - (1e-3 * gw).astype(w.dtype), p, g), loss

    for _ in range(3):
        params, loss = train_step(params, *args)
    loss.block_until_ready()
    options = None
    if python_tracer:  # the Python tracer on (each Python call an event) and the host tracer at its most verbose
        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 1
        options.host_tracer_level = 3
    with jax.profiler.trace(os.path.join(out, name), profiler_options=options):
        for i in range(steps):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, loss = train_step(params, *args)
                loss.block_until_ready()
    hlo = train_step.lower(params, *args).compile().as_text() or ""
    return {"ok": True, "loss": float(loss), "custom_calls": sorted(set(
        w.split('"')[1] for w in hlo.split("custom_call_target=")[1:] if '"' in w))[:40]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--which", default="", help="comma-separated profiles (default: all)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    info: dict[str, Any] = {"jax": jax.__version__, "devices": [str(d) for d in jax.devices()],
                            "device_kind": jax.devices()[0].device_kind, "profiles": {}}
    for name, setup in (("pallas", pallas_setup), ("remat", remat_setup), ("pytrace", remat_setup),
                        ("control", control_setup), ("libraries", libraries_setup), ("mosaic", mosaic_setup),
                        ("partial", None)):
        if a.which and name not in a.which.split(","):
            continue
        try:
            info["profiles"][name] = (record_partial(a.out) if setup is None else
                                      record(name, setup, a.out, a.cpu, python_tracer=name == "pytrace"))
        except Exception as e:  # noqa: BLE001 (a profile the machine cannot run is recorded as such)
            info["profiles"][name] = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000],
                                      "traceback": traceback.format_exc()[-4000:]}
        print(name, info["profiles"][name].get("ok"), info["profiles"][name].get("error", "")[:300], flush=True)
    with open(os.path.join(a.out, "record_info.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
