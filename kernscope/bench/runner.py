"""Run operators x implementations x inputs; collect metrics; record and analyze one Kineto trace per cell."""

from __future__ import annotations

import gzip
import math
import os
import shutil
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import KernscopeError
from .api import ImplSpec, Input, Operator
from .timing import L2Flusher, Timing, do_bench, do_bench_cudagraph

METRICS = ("latency", "tflops", "gbps", "speedup", "accuracy", "gpu_peak_mem", "kineto_trace")
DEFAULT_METRICS = ("latency",)
KINETO_WARMUP_STEPS = 5


@dataclass
class Cell:
    """One (input, impl) result."""

    input_id: int
    x: tuple[Any, ...]
    impl: str
    metrics: dict[str, Any] = field(default_factory=dict)
    timing: Timing | None = None
    error: str | None = None
    trace: str | None = None
    analysis: dict[str, Any] | None = None


@dataclass
class BenchRun:
    op: str
    x_label: tuple[str, ...]
    impls: list[str]
    metrics: list[str]
    mode: str
    dtype: str
    device: str
    cells: list[Cell] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)


def trace_path(output_dir: str | os.PathLike[str], op: str, impl: str, input_id: int) -> Path:
    """Deterministic trace location: ``<output-dir>/<op>/<impl>/input_<id>.json.gz``."""
    return Path(output_dir) / op / impl / f"input_{input_id}.json.gz"


def _env(device: str) -> dict[str, Any]:
    import platform

    import torch

    e: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(), "device": device}
    try:
        import triton

        e["triton"] = triton.__version__
    except ImportError:
        e["triton"] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(device)
        e.update(gpu=p.name, sms=p.multi_processor_count, l2_bytes=getattr(p, "L2_cache_size", None),
                 cuda=torch.version.cuda)
        try:
            import subprocess

            e["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                         capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            e["driver"] = None
    return e


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
            self.before = None
            self.outputs = lambda: _tensors(fwd())
            return
        if not self.leaves:
            raise KernscopeError(f"{op.name}: mode {op.mode} needs inputs with requires_grad")
        out = fwd()
        outs = _tensors(out)
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


def record_trace(fn: Callable[[], Any], *, device: str, flusher: L2Flusher | None, path: Path,
                 before: Callable[[], None] | None = None, warmup_steps: int = KINETO_WARMUP_STEPS) -> Path:
    """Profile ``warmup_steps`` + 1 iterations (flush, call) with a schedule; the last is ``ProfilerStep#N``."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    path.parent.mkdir(parents=True, exist_ok=True)
    with profile(activities=acts, schedule=schedule(wait=0, warmup=warmup_steps, active=1, repeat=1)) as prof:
        for _ in range(warmup_steps + 1):
            if before is not None:
                before()
            if flusher is not None:
                flusher()
            fn()
            if device.startswith("cuda"):
                torch.cuda.synchronize(device)
            prof.step()
    fd, tmp = tempfile.mkstemp(suffix=".json", dir=path.parent)
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        gz_tmp = tmp + ".gz"
        with open(tmp, "rb") as src, gzip.open(gz_tmp, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst)
        os.replace(gz_tmp, path)
    finally:
        for f in (tmp, tmp + ".gz"):
            if os.path.exists(f):
                os.unlink(f)
    return path


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
    specs = op.impls()
    names = [s.name for s in specs]
    if only:
        missing = [o for o in only if o not in names]
        if missing:
            raise KernscopeError(f"{op.name}: unknown impl(s) {', '.join(missing)}; available: {', '.join(names)}")
        specs = [s for s in specs if s.name in only]
    specs = [s for s in specs if s.name not in skip]
    run_ = BenchRun(op.name, tuple(op.x_label), [], list(metrics), mode, op.dtype_name, device, env=_env(device))
    usable = []
    for s in specs:
        if s.needs_cuda and not device.startswith("cuda"):
            run_.skipped[s.name] = "needs a CUDA device"
        elif mode not in s.modes:
            run_.skipped[s.name] = f"no {mode} mode"
        elif s.dtypes is not None and op.dtype_name not in s.dtypes:
            run_.skipped[s.name] = f"dtype {op.dtype_name} not supported"
        else:
            usable.append(s)
    run_.impls = [s.name for s in usable]
    base_spec = op.baseline()
    flusher = L2Flusher(device)
    need_ref = "accuracy" in metrics or "speedup" in metrics
    for i, inp in enumerate(op.inputs()):
        if input_id is not None and i != input_id:
            continue
        if num_inputs is not None and input_id is None and i >= num_inputs:
            break
        ref_out = None
        base_ms = None
        if need_ref and base_spec is not None:
            try:
                c = _Callable(op, base_spec, inp)
                ref_out = [t.detach().clone() for t in c.outputs()] if "accuracy" in metrics else None
                if "speedup" in metrics and base_spec not in usable:
                    base_ms = do_bench(c.fn, device=device, warmup=warmup, rep=rep, flusher=flusher, before=c.before).median_ms
            except Exception as e:  # noqa: BLE001 - the baseline failing is reported per cell
                ref_out = None
                if not keep_going:
                    raise KernscopeError(f"{op.name} baseline {base_spec.name} failed on input {i}: {type(e).__name__}: {e}") from None
        cells_this_input = []
        for spec in usable:
            cell = Cell(i, inp.x, spec.name)
            if progress:
                progress(f"{op.name} input {i} {inp.label()} {spec.name}")
            try:
                c = _Callable(op, spec, inp)
                if cudagraph:
                    t = do_bench_cudagraph(c.fn, device=device, rep=rep, flusher=flusher)
                else:
                    t = do_bench(c.fn, device=device, warmup=warmup, rep=rep, flusher=flusher, before=c.before)
                cell.timing = t
                sec = t.median_ms / 1e3
                if "latency" in metrics:
                    cell.metrics["latency"] = t.median_ms
                if "tflops" in metrics:
                    f = op.flops(inp)
                    cell.metrics["tflops"] = (f * (2.5 if mode == "bwd" else 3.5 if mode == "fwd_bwd" else 1.0) / sec / 1e12) if f else None
                if "gbps" in metrics:
                    b = op.bytes(inp)
                    cell.metrics["gbps"] = b / sec / 1e9 if b else None
                if "accuracy" in metrics:
                    if ref_out is None:
                        cell.metrics["accuracy"] = None
                    else:
                        ok, err = _accuracy(op, [x.detach() for x in c.outputs()], ref_out)
                        cell.metrics["accuracy"] = ok
                        cell.metrics["max_abs_err"] = err
                if "gpu_peak_mem" in metrics and device.startswith("cuda"):
                    torch.cuda.synchronize(device)
                    torch.cuda.reset_peak_memory_stats(device)
                    before_mem = torch.cuda.memory_allocated(device)
                    if c.before:
                        c.before()
                    c.fn()
                    torch.cuda.synchronize(device)
                    cell.metrics["gpu_peak_mem"] = (torch.cuda.max_memory_allocated(device) - before_mem) / 2**20
                if "kineto_trace" in metrics:
                    p = trace_path(output_dir, op.name, spec.name, i)
                    record_trace(c.fn, device=device, flusher=flusher, path=p, before=c.before)
                    cell.trace = str(p)
                    cell.metrics["kineto_trace"] = str(p)
            except KernscopeError:
                raise
            except Exception as e:  # noqa: BLE001 - keep_going shows the error in the table
                if not keep_going:
                    raise KernscopeError(f"{op.name}.{spec.name} failed on input {i} {inp.label()}: {type(e).__name__}: {e}") from None
                cell.error = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                cell.metrics.clear()
                if os.environ.get("KERNSCOPE_DEBUG"):
                    traceback.print_exc()
            cells_this_input.append(cell)
        if "speedup" in metrics:
            base_cell = next((c for c in cells_this_input if base_spec and c.impl == base_spec.name and c.timing), None)
            ref_ms = base_cell.timing.median_ms if base_cell else base_ms
            for c in cells_this_input:
                c.metrics["speedup"] = (ref_ms / c.timing.median_ms) if (ref_ms and c.timing) else None
        run_.cells.extend(cells_this_input)
    if analyze_traces:
        analyze_cells(run_)
    return run_


def analyze_cells(run_: BenchRun) -> None:
    """Analyze every recorded trace with kernscope's benchmark view (by launch correlation)."""
    from .. import load
    from ..analyze.bench_trace import analyze_benchmark

    for c in run_.cells:
        if not c.trace:
            continue
        a = analyze_benchmark(load(c.trace, cache=False))
        if c.timing is not None:
            lat_us = c.timing.median_ms * 1e3
            a["latency_us"] = lat_us
            a["overhead_us"] = lat_us - a["kernel_time_us"]
            a["kernel_vs_latency"] = a["kernel_time_us"] / lat_us if lat_us else None
        c.analysis = a
