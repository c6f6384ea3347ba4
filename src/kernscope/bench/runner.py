"""Run operators x implementations x inputs; collect metrics; record and analyze one Kineto trace per cell."""

from __future__ import annotations

import logging
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import KernscopeError
from .api import ImplSpec, Input, Operator
from .env import probe_env
from .machine import Backend, CellMachine, ClockLock, max_sm_mhz, open_backend, unlock_clocks
from .machine import lock_clocks as lock_clocks_
from .results import BenchRun, Cell
from .stats import ratio_ci, verdict, within_noise
from .timing import L2Flusher, Prepared, Timing, do_bench_cudagraph, measure_batches, prepare, reps_for, summarize
from .traces import analyze_cells, record_trace, trace_path

METRICS = ("latency", "tflops", "gbps", "speedup", "accuracy", "gpu_peak_mem", "kineto_trace")
DEFAULT_METRICS = ("latency",)
#: FLOPs of a mode relative to the forward pass (backward ≈ 2.5x, forward + backward ≈ 3.5x)

__all__ = ["run", "trace_path", "METRICS", "Cell", "BenchRun"]


def _tensors(obj: Any) -> list[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o)]
    return []


class _Callable:
    """The timed callable for a mode, plus what it produces (for accuracy) and what to reset."""

    def __init__(self, op: Operator, spec: ImplSpec, inp: Input) -> None:
        import torch

        fwd = op.make(spec, inp)
        self.leaves = [t for t in _tensors(inp.args) + _tensors(inp.kwargs) if t.requires_grad]
        if op.mode == "fwd":
            self.fn: Callable[[], Any] = fwd
            self.before: Callable[[], None] | None = None
            self.outputs: Callable[[], list[Any]] = lambda: _tensors(fwd())
            return
        if not self.leaves:
            raise KernscopeError(f"{op.name}: mode {op.mode} needs inputs with requires_grad")
        outs = _tensors(fwd())
        gen = torch.Generator(device=outs[0].device).manual_seed(1234)  # same upstream grads for every impl
        grads = [torch.randn(o.shape, generator=gen, device=o.device, dtype=o.dtype) for o in outs]

        def clear() -> None:
            for t in self.leaves:
                t.grad = None

        self.before = clear
        if op.mode == "bwd":
            self.fn = lambda: torch.autograd.backward(outs, grads, retain_graph=True)
        else:
            self.fn = lambda: torch.autograd.backward(_tensors(fwd()), grads)

        def grads_of() -> list[Any]:
            clear()
            torch.autograd.backward(_tensors(fwd()), grads)
            # (an input the implementation does not use has no gradient: zero, as the math says; rms_norm's bias)
            return [t.grad.detach().clone() if t.grad is not None else torch.zeros_like(t) for t in self.leaves]

        self.outputs = grads_of


def _accuracy(op: Operator, got: list[Any], ref: list[Any]) -> tuple[bool, float]:
    import torch

    if len(got) != len(ref):
        return False, math.inf
    rtol, atol = op.tolerances.get(op.dtype_name, (1e-2, 1e-2))
    ok = True
    worst = 0.0
    for g, r in zip(got, ref):
        if g.shape != r.shape:
            return False, math.inf
        g32, r32 = g.float(), r.float()
        worst = max(worst, float((g32 - r32).abs().max()) if g.numel() else 0.0)
        ok = ok and bool(torch.allclose(g32, r32, rtol=rtol, atol=atol))
    return ok, worst


# -- selection ------------------------------------------------------------------------------------
def module_available(name: str) -> bool:
    """Whether ``name`` (dotted) can be imported, without importing it."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a missing parent package
        return False


def installed(spec: ImplSpec) -> bool:
    """Whether one of the packages ``spec`` needs (any of ``spec.modules``) can be imported; True when it needs none."""
    return not spec.modules or any(module_available(m) for m in spec.modules)


def resolve_impls(op: Operator, names: Sequence[str]) -> list[ImplSpec]:
    """The implementations ``names`` select (their own names or aliases), each carrying the name as typed, in the
    order typed; a name typed twice (or an alias and its implementation) runs once. Unknown names: one error that
    lists what exists."""
    import dataclasses

    specs = op.impls()
    by_name = {s.name: s for s in specs}
    for s in specs:
        for a in s.aliases:
            by_name.setdefault(a, s)
    missing = [n for n in names if n not in by_name]
    if missing:
        avail = ", ".join(s.name + (f" ({', '.join(s.aliases)})" if s.aliases else "") for s in specs)
        raise KernscopeError(f"{op.name}: unknown impl(s) {', '.join(missing)}; available (aliases): {avail}")
    out: list[ImplSpec] = []
    seen: set[str] = set()
    for n in names:
        s = by_name[n]
        if s.method not in seen:
            seen.add(s.method)
            out.append(s if s.name == n else dataclasses.replace(s, name=n))
    return out


def select_impls(op: Operator, device: str, only: Sequence[str] | None, skip: Sequence[str]) -> tuple[list[ImplSpec], dict[str, str]]:
    """The implementations to run, and why the others are skipped."""
    specs = resolve_impls(op, only) if only else op.impls()
    skip_methods = {s.method for s in resolve_impls(op, skip)} if skip else set()
    usable: list[ImplSpec] = []
    skipped: dict[str, str] = {}
    for s in specs:
        if s.method in skip_methods:
            continue
        if not installed(s):
            skipped[s.name] = (f"needs the {' or '.join(s.modules)} package, not installed here"
                               + (f"; the nearest available: {s.nearest}" if s.nearest else ""))
        elif s.needs_cuda and not device.startswith("cuda"):
            skipped[s.name] = "needs a CUDA device"
        elif op.mode not in s.modes:
            skipped[s.name] = f"no {op.mode} mode"
        elif s.dtypes is not None and op.dtype_name not in s.dtypes:
            skipped[s.name] = f"dtype {op.dtype_name} not supported"
        else:
            usable.append(s)
    return usable, skipped


def _inputs(op: Operator, num_inputs: int | None, input_id: int | None) -> list[tuple[int, Input]]:
    """The inputs to run, by id: the first ``num_inputs``, or the one ``input_id`` (an id the operator does not have on
    this device is an error naming the ids it has, not an empty table)."""
    out = []
    n = 0
    for i, inp in enumerate(op.inputs()):
        n = i + 1
        if input_id is not None:
            if i == input_id:
                return [(i, inp)]
            continue
        if num_inputs is not None and i >= num_inputs:
            break
        out.append((i, inp))
    if input_id is not None:
        have = f"ids 0-{n - 1}" if n > 1 else ("id 0" if n == 1 else "none")
        raise KernscopeError(f"{op.name}: no input {input_id} on {op.device} (its inputs there: {have})")
    return out


# -- measuring ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    device: str
    metrics: tuple[str, ...]
    warmup: float  #: ms
    rep: float  #: ms of timed calls per cell
    cudagraph: bool
    output_dir: str
    interleave: bool = True  #: impls of an input timed round-robin in batches
    batch_ms: float = 20.0  #: GPU time per batch when interleaving
    cooldown_s: float = 0.0  #: sleep before each input's measurements
    duration_s: float | None = None  #: timed time per cell in seconds (overrides ``rep``)


def _peak_mem_mib(c: _Callable, device: str) -> float:
    import torch

    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before_mem = torch.cuda.memory_allocated(device)
    if c.before:
        c.before()
    c.fn()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before_mem) / 2**20


BASELINE_KEY = "\x00baseline"


def _fail(op: Operator, name: str, i: int, inp: Input, e: Exception, keep_going: bool) -> Cell:
    if not keep_going:
        raise KernscopeError(f"{op.name}.{name} failed on input {i} {inp.label()}: {type(e).__name__}: {e}") from None
    msg = str(e).splitlines()[0][:200] if str(e) else ""
    logging.getLogger("kernscope.bench").debug("%s.%s failed", op.name, name, exc_info=True)
    return Cell(i, inp.x, name, error=f"{type(e).__name__}: {msg}")


def _timings(calls: dict[str, _Callable], s: Settings, flusher: L2Flusher, backend: Backend,
             errors: dict[str, Exception]) -> tuple[dict[str, Timing], dict[str, CellMachine]]:
    """Time every callable of one input (interleaved unless told otherwise), with the machine state per cell."""
    machines = {k: CellMachine(backend.name) for k in calls}
    timings: dict[str, Timing] = {}
    if s.cudagraph:
        for k, c in calls.items():
            try:
                machines[k].add(backend.read())
                timings[k] = do_bench_cudagraph(c.fn, device=s.device, rep=s.rep, flusher=flusher)
                machines[k].add(backend.read())
            except Exception as e:  # noqa: BLE001 - reported per cell
                errors[k] = e
        return timings, machines
    prepared: dict[str, Prepared] = {}
    for k, c in calls.items():
        try:
            prepared[k] = prepare(c.fn, device=s.device, warmup=s.warmup, flusher=flusher, before=c.before)
        except Exception as e:  # noqa: BLE001
            errors[k] = e
    rep_ms = s.duration_s * 1e3 if s.duration_s else s.rep
    reps = {k: reps_for(p, rep_ms) for k, p in prepared.items()}
    clocks: dict[str, list[float]] = {}
    try:
        samples = measure_batches(prepared, reps, device=s.device, flusher=flusher,
                                  batch_ms=s.batch_ms if s.interleave and len(prepared) > 1 else None,
                                  read=backend.read, on_reading=lambda k, st: machines[k].add(st), sm_mhz=clocks)
    except Exception as e:  # noqa: BLE001 - an impl failing mid-measurement: time the others alone
        if len(prepared) == 1:
            errors[next(iter(prepared))] = e
            return timings, machines
        samples = {}
        for k, p in prepared.items():
            try:
                samples.update(measure_batches({k: p}, {k: reps[k]}, device=s.device, flusher=flusher, batch_ms=None,
                                               read=backend.read, on_reading=lambda n, st: machines[n].add(st),
                                               sm_mhz=clocks))
            except Exception as e2:  # noqa: BLE001
                errors[k] = e2
    method = "cuda_events" if s.device.startswith("cuda") else "perf_counter"
    ref = max_sm_mhz(backend)
    for k, v in samples.items():
        timings[k] = summarize(v, method).with_clocks(clocks.get(k, []), ref)
    return timings, machines


def measure_input(op: Operator, usable: list[ImplSpec], base: ImplSpec | None, i: int, inp: Input, s: Settings,
                  flusher: L2Flusher, backend: Backend, keep_going: bool) -> list[Cell]:
    """Every (input, impl) cell of one input; impls timed interleaved, then the untimed metrics per cell."""
    calls: dict[str, _Callable] = {}
    errors: dict[str, Exception] = {}
    for spec in usable:
        try:
            calls[spec.name] = _Callable(op, spec, inp)
        except KernscopeError:
            raise
        except Exception as e:  # noqa: BLE001
            errors[spec.name] = e
    want_ref = base is not None and bool({"accuracy", "speedup"} & set(s.metrics))
    ref_out = None
    if want_ref and base is not None:
        try:
            bc = calls.get(base.name) or _Callable(op, base, inp)
            ref_out = [t.detach().clone() for t in bc.outputs()] if "accuracy" in s.metrics else None
            if "speedup" in s.metrics and base.name not in calls:
                calls[BASELINE_KEY] = bc
        except Exception as e:  # noqa: BLE001 - the baseline failing is reported per cell
            if not keep_going:
                raise KernscopeError(f"{op.name} baseline {base.name} failed on input {i}: {type(e).__name__}: {e}") from None
    if s.cooldown_s:
        time.sleep(s.cooldown_s)
    timings, machines = _timings(calls, s, flusher, backend, errors)
    ref_samples = None
    if "speedup" in s.metrics and base is not None:
        key = base.name if base.name in timings else BASELINE_KEY
        ref_samples = timings[key].samples_ms if key in timings else None
    cells = []
    for spec in usable:
        if spec.name in errors or spec.name not in timings:
            err = errors.get(spec.name, RuntimeError("not measured"))
            if isinstance(err, KernscopeError):
                raise err
            cells.append(_fail(op, spec.name, i, inp, err, keep_going))
            continue
        try:
            cells.append(_finish_cell(op, spec, i, inp, s, flusher, calls[spec.name], timings[spec.name],
                                      machines[spec.name], ref_out, ref_samples))
        except KernscopeError:
            raise
        except Exception as e:  # noqa: BLE001
            cells.append(_fail(op, spec.name, i, inp, e, keep_going))
    return cells


def _finish_cell(op: Operator, spec: ImplSpec, i: int, inp: Input, s: Settings, flusher: L2Flusher, c: _Callable,
                 t: Timing, machine: CellMachine, ref_out: list[Any] | None, ref_samples: list[float] | None) -> Cell:
    cell = Cell(i, inp.x, spec.name, timing=t, machine=machine)
    sec = t.median_ms / 1e3
    m = s.metrics
    if "latency" in m:
        cell.metrics["latency"] = t.median_ms
    if "tflops" in m:
        f = op.flops(inp)
        cell.metrics["tflops"] = f / sec / 1e12 if f else None
    if "gbps" in m:
        b = op.bytes(inp)
        cell.metrics["gbps"] = b / sec / 1e9 if b else None
    if "speedup" in m:
        if ref_samples:
            ratio = statistics.median(ref_samples) / t.median_ms
            ci = ratio_ci(ref_samples, t.samples_ms)
            # this impl (B) against the baseline (A); the speedup's interval, inverted, is the time ratio's
            inv = (1.0 / ci[1], 1.0 / ci[0]) if ci[0] > 0 and ci[1] > 0 else None
            v = verdict(ref_samples, t.samples_ms, ci=inv)
            cell.metrics["speedup"] = ratio
            cell.metrics["speedup_ci"] = list(ci)
            cell.metrics["speedup_test"] = v["test"]
            cell.metrics["speedup_p"] = v["p_value"]
            cell.metrics["speedup_effect"] = v["cliffs_delta"]
            cell.metrics["speedup_verdict"] = v["verdict"]
            cell.metrics["speedup_noise"] = within_noise(ci) or v["verdict"] == "within noise"
        else:
            cell.metrics["speedup"] = None
    if "accuracy" in m:
        if ref_out is None:
            cell.metrics["accuracy"] = None
        else:
            ok, err = _accuracy(op, [x.detach() for x in c.outputs()], ref_out)
            cell.metrics["accuracy"] = ok
            cell.metrics["max_abs_err"] = err
    if "gpu_peak_mem" in m and s.device.startswith("cuda"):
        cell.metrics["gpu_peak_mem"] = _peak_mem_mib(c, s.device)
    if "kineto_trace" in m:
        p = trace_path(s.output_dir, op.name, spec.name, i)
        record_trace(c.fn, device=s.device, flusher=flusher, path=p, before=c.before)
        cell.trace = cell.metrics["kineto_trace"] = str(p)
    return cell


def run(
    op_cls: type[Operator],
    *,
    device: str = "cuda",
    dtype: str | None = None,
    mode: str = "fwd",
    only: Sequence[str] | None = None,
    skip: Sequence[str] = (),
    num_inputs: int | None = None,
    input_id: int | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    warmup: float = 25.0,
    rep: float = 100.0,
    cudagraph: bool = False,
    output_dir: str | os.PathLike[str] = "kernscope-bench",
    keep_going: bool = False,
    analyze_traces: bool = True,
    progress: Callable[[str], None] | None = None,
    interleave: bool = True,
    batch_ms: float = 20.0,
    cooldown: float = 0.0,
    duration: float | None = None,
    lock_clocks: str | None = None,
    backend: Backend | None = None,
) -> BenchRun:
    """Benchmark one operator. ``warmup``/``rep``/``batch_ms`` are milliseconds, ``cooldown``/``duration``
    seconds. Impls of an input are timed round-robin in batches (``interleave``); every cell records the GPU's
    clocks, power, temperature and throttle reasons. ``lock_clocks`` ("max" or MHz) tries to lock the SM clock
    for the run (needs root) and says whether it could. Returns every (input, impl) cell."""
    import torch

    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise KernscopeError(f"unknown metric(s) {', '.join(unknown)}; available: {', '.join(METRICS)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise KernscopeError("CUDA is not available: use --device cpu")
    op = op_cls(device=device, dtype=dtype, mode=mode)
    usable, skipped = select_impls(op, device, only, skip)
    if mode != "fwd" and not any(mode in s.modes for s in op.impls()):  # (an inference operator: no backward at all)
        raise KernscopeError(f"{op.name} has no {mode} mode: none of its implementations has one (modes: "
                             f"{', '.join(sorted({m for s in op.impls() for m in s.modes}))})")
    settings = Settings(device, tuple(metrics), warmup, rep, cudagraph, str(output_dir), interleave, batch_ms, cooldown,
                        duration)
    env = probe_env(device)
    reader = backend or open_backend(device)
    lock = lock_clocks_(device, lock_clocks) if lock_clocks else ClockLock(False, False, None, "not requested")
    env["clocks"] = {"locked": lock.locked, "mhz": lock.mhz, "requested": lock.requested, "message": lock.message,
                     "monitor": reader.name}
    result = BenchRun(op.name, tuple(op.x_label), [s.name for s in usable], list(metrics), mode, op.dtype_name, device,
                      skipped=skipped, env=env, output_dir=os.path.abspath(str(output_dir)))
    base = op.baseline()
    flusher = L2Flusher(device)
    try:
        for i, inp in _inputs(op, num_inputs, input_id):
            if progress:
                progress(f"{op.name} input {i} {inp.label()}: {', '.join(x.name for x in usable)}"
                         + (" (interleaved)" if interleave and len(usable) > 1 else ""))
            result.cells.extend(measure_input(op, usable, base, i, inp, settings, flusher, reader, keep_going))
    finally:
        if lock.locked:
            unlock_clocks(device)
    if analyze_traces:
        analyze_cells(result)
    return result
