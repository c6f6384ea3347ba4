"""Run operators x implementations x inputs; collect metrics; record and analyze one Kineto trace per cell."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import KernscopeError
from .api import ImplSpec, Input, Operator
from .env import probe_env
from .results import BenchRun, Cell
from .timing import L2Flusher, Timing, do_bench, do_bench_cudagraph
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
            return [t.grad.detach().clone() for t in self.leaves]

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
def select_impls(op: Operator, device: str, only: Sequence[str] | None, skip: Sequence[str]) -> tuple[list[ImplSpec], dict[str, str]]:
    """The implementations to run, and why the others are skipped."""
    specs = op.impls()
    names = [s.name for s in specs]
    if only:
        missing = [o for o in only if o not in names]
        if missing:
            raise KernscopeError(f"{op.name}: unknown impl(s) {', '.join(missing)}; available: {', '.join(names)}")
        specs = [s for s in specs if s.name in only]
    usable: list[ImplSpec] = []
    skipped: dict[str, str] = {}
    for s in specs:
        if s.name in skip:
            continue
        if s.needs_cuda and not device.startswith("cuda"):
            skipped[s.name] = "needs a CUDA device"
        elif op.mode not in s.modes:
            skipped[s.name] = f"no {op.mode} mode"
        elif s.dtypes is not None and op.dtype_name not in s.dtypes:
            skipped[s.name] = f"dtype {op.dtype_name} not supported"
        else:
            usable.append(s)
    return usable, skipped


def _inputs(op: Operator, num_inputs: int | None, input_id: int | None) -> list[tuple[int, Input]]:
    out = []
    for i, inp in enumerate(op.inputs()):
        if input_id is not None and i != input_id:
            continue
        if num_inputs is not None and input_id is None and i >= num_inputs:
            break
        out.append((i, inp))
    return out


# -- measuring ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    device: str
    metrics: tuple[str, ...]
    warmup: float  #: ms
    rep: float  #: ms
    cudagraph: bool
    output_dir: str


def _time(c: _Callable, s: Settings, flusher: L2Flusher) -> Timing:
    if s.cudagraph:
        return do_bench_cudagraph(c.fn, device=s.device, rep=s.rep, flusher=flusher)
    return do_bench(c.fn, device=s.device, warmup=s.warmup, rep=s.rep, flusher=flusher, before=c.before)


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


def measure_cell(op: Operator, spec: ImplSpec, i: int, inp: Input, s: Settings, flusher: L2Flusher,
                 ref_out: list[Any] | None) -> Cell:
    """Every requested metric of one (input, impl); raises on failure (the caller decides to go on)."""
    cell = Cell(i, inp.x, spec.name)
    c = _Callable(op, spec, inp)
    t = _time(c, s, flusher)
    cell.timing = t
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


def _reference(op: Operator, base: ImplSpec | None, usable: list[ImplSpec], i: int, inp: Input, s: Settings,
               flusher: L2Flusher, keep_going: bool) -> tuple[list[Any] | None, float | None]:
    """Baseline outputs (for accuracy) and, when the baseline is not among the impls run, its latency."""
    if base is None or not ({"accuracy", "speedup"} & set(s.metrics)):
        return None, None
    try:
        c = _Callable(op, base, inp)
        ref = [t.detach().clone() for t in c.outputs()] if "accuracy" in s.metrics else None
        ms = _time(c, s, flusher).median_ms if "speedup" in s.metrics and base not in usable else None
        return ref, ms
    except Exception as e:  # noqa: BLE001 - the baseline failing is reported per cell
        if not keep_going:
            raise KernscopeError(f"{op.name} baseline {base.name} failed on input {i}: {type(e).__name__}: {e}") from None
        return None, None


def _speedups(cells: list[Cell], base: ImplSpec | None, base_ms: float | None) -> None:
    base_cell = next((c for c in cells if base and c.impl == base.name and c.timing), None)
    ref_ms = base_cell.timing.median_ms if base_cell and base_cell.timing else base_ms
    for c in cells:
        c.metrics["speedup"] = (ref_ms / c.timing.median_ms) if (ref_ms and c.timing) else None


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
) -> BenchRun:
    """Benchmark one operator. ``warmup``/``rep`` are milliseconds. Returns every (input, impl) cell."""
    import torch

    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise KernscopeError(f"unknown metric(s) {', '.join(unknown)}; available: {', '.join(METRICS)}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise KernscopeError("CUDA is not available: use --device cpu")
    op = op_cls(device=device, dtype=dtype, mode=mode)
    usable, skipped = select_impls(op, device, only, skip)
    settings = Settings(device, tuple(metrics), warmup, rep, cudagraph, str(output_dir))
    result = BenchRun(op.name, tuple(op.x_label), [s.name for s in usable], list(metrics), mode, op.dtype_name, device,
                      skipped=skipped, env=probe_env(device))
    base = op.baseline()
    flusher = L2Flusher(device)
    for i, inp in _inputs(op, num_inputs, input_id):
        ref_out, base_ms = _reference(op, base, usable, i, inp, settings, flusher, keep_going)
        cells = []
        for spec in usable:
            if progress:
                progress(f"{op.name} input {i} {inp.label()} {spec.name}")
            try:
                cells.append(measure_cell(op, spec, i, inp, settings, flusher, ref_out))
            except KernscopeError:
                raise
            except Exception as e:  # noqa: BLE001 - keep_going shows the error in the table
                if not keep_going:
                    raise KernscopeError(f"{op.name}.{spec.name} failed on input {i} {inp.label()}: {type(e).__name__}: {e}") from None
                msg = str(e).splitlines()[0][:200] if str(e) else ""
                cells.append(Cell(i, inp.x, spec.name, error=f"{type(e).__name__}: {msg}"))
                logging.getLogger("kernscope.bench").debug("%s.%s failed", op.name, spec.name, exc_info=True)
        if "speedup" in metrics:
            _speedups(cells, base, base_ms)
        result.cells.extend(cells)
    if analyze_traces:
        analyze_cells(result)
    return result
