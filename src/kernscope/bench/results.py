"""Typed bench results: one :class:`Cell` per (input, impl), one :class:`BenchRun` per operator."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..analyze.bench_trace import BenchmarkView
from .machine import CellMachine
from .timing import Timing


@dataclass(frozen=True)
class TraceCheck:
    """A cell's Kineto trace as kernscope analyzed it, next to the measured latency. Times in µs."""

    view: BenchmarkView
    latency_us: float | None = None
    overhead_us: float | None = None  #: latency - compute-kernel time
    kernel_vs_latency: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = self.view.to_dict()
        d.update(latency_us=self.latency_us, overhead_us=self.overhead_us, kernel_vs_latency=self.kernel_vs_latency)
        return d


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
    analysis: TraceCheck | None = None
    machine: CellMachine | None = None  #: GPU clocks, power, temperature, throttle reasons while it was timed


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
    output_dir: str = ""  #: where the Kineto traces were written (``--output-dir``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op, "x_label": list(self.x_label), "mode": self.mode, "dtype": self.dtype, "device": self.device,
            "output_dir": self.output_dir,
            "impls": self.impls, "metrics": self.metrics, "skipped": self.skipped, "env": self.env,
            "results": [
                {"input_id": c.input_id, "x": list(c.x), "impl": c.impl, "metrics": c.metrics, "error": c.error,
                 "timing": c.timing.to_dict() if c.timing else None, "trace": c.trace,
                 "analysis": c.analysis.to_dict() if c.analysis else None,
                 "machine": c.machine.to_dict() if c.machine else None}
                for c in self.cells
            ],
        }


__all__ = ["Cell", "BenchRun", "TraceCheck", "asdict"]
