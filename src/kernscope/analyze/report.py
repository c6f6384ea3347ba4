"""The report of one trace (``kernscope report TRACE``): its analysis with what else the run found (the perf
model where ops have shapes, the memory timeline of a ``profile_memory`` trace, a diff with another trace,
intra-kernel records placed under their kernels), as one result whose tables are the report's sheets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import polars as pl

from .counters import KernelCounters
from .diff import TraceDiff
from .listing import SourceListing
from .memory import MemoryTimeline
from .perf import PerfModel
from .summary import Analysis


@dataclass(frozen=True)
class Report:
    """Result kind ``report``: an ``analysis`` and its optional companions (µs in ``*_us`` columns).

    ``intra_launches``: one row per intra-kernel launch placed under a kernel; ``intra_rows``: those records as
    timeline rows (device, stream, sub, label, ts, dur, name, category)."""

    analysis: Analysis
    perf: PerfModel | None = None
    memory: MemoryTimeline | None = None
    diff: TraceDiff | None = None
    intra_launches: pl.DataFrame | None = None
    intra_rows: pl.DataFrame | None = None
    #: the hardware counters of a trace recorded with ``profiler_metrics`` (:mod:`kernscope.analyze.counters`)
    counters: KernelCounters | None = None
    #: the user's code with each line's GPU time (``report --code``, :mod:`kernscope.analyze.listing`)
    code: SourceListing | None = None

    kind: ClassVar[str] = "report"

    @property
    def title(self) -> str:
        return self.analysis.title

    @property
    def notes(self) -> tuple[str, ...]:
        return self.analysis.notes + (tuple(self.perf.notes) if self.perf is not None else ())

    def facts_dict(self) -> dict[str, Any]:
        """The analysis's facts, and ``t0_ns``: the trace's first event (ns), the origin of relative times."""
        return {**self.analysis.facts_dict(), "t0_ns": self.analysis.trace.t0}

    def tables(self) -> dict[str, pl.DataFrame]:
        """The report's sheets, in order: ``gpu_timeline``, ``gpu_timeline_by_device``, ``gpu_timeline_by_step``,
        ``kernel_summary`` (by stream), ``category_summary``, ``library_summary``, ``ops_summary``, ``ops_summary_by_category``,
        ``launcher_categories``, ``steps``, ``findings``; ``source_summary`` where GPU rows have source lines (JAX);
        ``critical_path*`` where the trace has steps;
        ``annotation*`` with ``by_annotation``; the perf model's (:meth:`PerfModel.sheet_tables`); ``memory_devices``,
        ``memory_steps``, ``memory_ops``; ``diff_categories``, ``diff_libraries``, ``diff_kernels``, ``diff_ops``; ``intra_launches``;
        ``counters_kernels``, ``counters_metrics``, ``counters_ranges`` of a trace recorded with hardware counters;
        ``code_files``, ``code_lines`` with ``--code``."""
        return {**self.analysis_tables(), **self.companion_tables()}

    def analysis_tables(self) -> dict[str, pl.DataFrame]:
        """The analysis's sheets (:meth:`tables` up to the annotations)."""
        a = self.analysis
        out = {"gpu_timeline": a.timeline, "gpu_timeline_by_device": a.timeline_by_device,
               "gpu_timeline_by_step": a.timeline_by_step, "kernel_summary": a.kernels_by_stream,
               "category_summary": a.categories, "library_summary": a.libraries, "ops_summary": a.ops,
               "ops_summary_by_category": a.ops_by_category,
               "launcher_categories": a.launcher_categories, "steps": a.steps, "findings": a.findings,
               "findings_by_kind": a.findings_by_kind}
        if a.sources.height:
            out["source_summary"] = a.sources
        cp = a.critical_path
        if cp is not None and cp.steps.height:
            out.update({"critical_path": cp.steps, "critical_path_kernels": cp.kernels, "critical_path_ops": cp.ops,
                        "critical_path_whatif": cp.whatif})
        if a.annotations is not None:
            out.update({"annotations": a.annotations.ranges, "annotation_categories": a.annotations.categories,
                        "annotation_timeline": a.annotations.timeline})
        return out

    def companion_tables(self) -> dict[str, pl.DataFrame]:
        """The sheets of the perf model, memory timeline, diff and intra-kernel launches (:meth:`tables` after the
        analysis's)."""
        out: dict[str, pl.DataFrame] = {}
        if self.perf is not None:
            out.update(self.perf.sheet_tables())
        if self.memory is not None:
            out.update({"memory_devices": self.memory.devices, "memory_steps": self.memory.steps,
                        "memory_ops": self.memory.ops})
        if self.diff is not None:  # (by line only where both sides have lines)
            out.update({f"diff_{k}": v for k, v in self.diff.tables().items() if k != "sources" or v.height})
        if self.intra_launches is not None:
            out["intra_launches"] = self.intra_launches
        if self.counters is not None:
            out.update({f"counters_{k}": v for k, v in self.counters.tables().items()})
        if self.code is not None:
            out.update({f"code_{k}": v for k, v in self.code.tables().items()})
        return out

    def sheet_names(self) -> tuple[str, ...]:
        """The workbook's sheets in order: :meth:`tables` with ``perf_device`` after the perf model's and
        ``diff_summary`` before the diff's (text tables a renderer writes)."""
        return (*self.analysis_tables(), *self.companion_names())

    def companion_names(self) -> tuple[str, ...]:
        """:meth:`companion_tables`' names with ``perf_device`` and ``diff_summary`` in their places."""
        names: list[str] = []
        for n in self.companion_tables():
            if n == "diff_categories":
                names.append("diff_summary")
            names.append(n)
            if n == "perf_uncovered":
                names.append("perf_device")
        return tuple(names)
