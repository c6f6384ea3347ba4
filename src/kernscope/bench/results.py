"""Typed bench results: one :class:`Cell` per (input, impl), one :class:`BenchRun` per operator."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import polars as pl

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

    kind: ClassVar[str] = "bench_run"

    @property
    def title(self) -> str:
        return f"{self.op} · {self.mode} · {self.dtype} · {self.env.get('gpu') or self.device}"

    @property
    def notes(self) -> tuple[str, ...]:
        """One line per implementation that was skipped, with why."""
        return tuple(f"skipped {name}: {why}" for name, why in self.skipped.items())

    def facts_dict(self) -> dict[str, Any]:
        """The run's settings: :meth:`to_dict` without its ``results``."""
        return {k: v for k, v in self.to_dict().items() if k != "results"}

    def tables(self) -> dict[str, pl.DataFrame]:
        """``results``: one row per (input, impl) with every metric (ms, TFLOP/s, GB/s ...), its spread and
        confidence interval, the GPU state while it was timed and the error, if any."""
        return {"results": self.results_table()}

    def results_table(self) -> pl.DataFrame:
        """The long table of :meth:`tables`."""
        rows = []
        for c in self.cells:
            r: dict[str, Any] = {"input_id": c.input_id, "x": "(" + ", ".join(map(str, c.x)) + ")", "impl": c.impl,
                                 "error": c.error}
            for m in self.metrics:
                r[m] = c.metrics.get(m)
            if c.timing is not None:
                r["latency_spread"] = c.timing.spread
                r["latency_n"] = len(c.timing.samples_ms)
                r["latency_outliers"] = c.timing.outliers
                r["ci_low_ms"] = c.timing.ci_low_ms
                r["ci_high_ms"] = c.timing.ci_high_ms
                r["sm_mhz_median"] = c.timing.sm_mhz_median
                r["latency_at_max_sm_clock"] = c.timing.at_ref_clock_ms
            if "speedup_ci" in c.metrics:
                r["speedup_ci_low"], r["speedup_ci_high"] = c.metrics["speedup_ci"]
                r["speedup_noise"] = c.metrics.get("speedup_noise")
            if c.machine is not None:
                mc = c.machine
                r.update(sm_min_mhz=mc.sm_min_mhz, sm_max_mhz=mc.sm_max_mhz, mem_min_mhz=mc.mem_min_mhz,
                         power_max_w=mc.power_max_w, temp_max_c=mc.temp_max_c, throttle=",".join(mc.reasons) or None,
                         clocks_moved=mc.moved)
            if "max_abs_err" in c.metrics:
                r["max_abs_err"] = c.metrics["max_abs_err"]
            rows.append(r)
        return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()

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
