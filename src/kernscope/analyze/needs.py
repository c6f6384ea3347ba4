"""What each analysis reads, as load projections (no numpy or polars here: the CLI builds the cache key of
a stored output from these before it decides to load anything).

A load with a projection skips, unparsed, the events and args columns the analysis never reads
(:mod:`kernscope.load.project`, :mod:`kernscope.load.lines`); tests check that the results are identical
with and without it on every real trace.
"""

from __future__ import annotations

import re

from ..link.markers import marker_names
from ..load.argspec import AUTOGRAD_ARGS, KERNEL_ARGS, LINK_ARGS
from ..load.projection import COST_STATS, Projection

#: the ``args`` columns the default analysis reads (through the link stage, and the findings' kernel args)
ANALYZE_ARGS = LINK_ARGS + KERNEL_ARGS


#: the XSpace (JAX) profile's own columns the default analysis reads: the HLO op and module (link, steps), the step
#: number, the kernel's occupancy and registers (findings), its HLO instruction and description (categories), the line
#: of the program's source it was traced from and its function (GPU time by source line); and the program id (two
#: programs may share a module's name), which the decode reads anyway: kept, so that the HLO costs can be added to
#: this load's cache entry (``perf`` after ``analyze``: :func:`kernscope.load.xplane.with_costs`)
ANALYZE_XLA_STATS = ("hlo_op", "hlo_module", "step_num", "occupancy_pct", "registers", "hlo_instruction", "hlo_desc",
                     "hlo_source", "hlo_function", "program_id")
#: and those ``--roofline`` reads besides (the HLO cost model's)
ROOFLINE_XLA_STATS = COST_STATS


def analyze_projection(step_marker: str | None = None, *, roofline: bool = False,
                       python: bool = False) -> Projection | None:
    """What a load for ``kernscope analyze`` of one trace may skip: args columns other than
    :data:`ANALYZE_ARGS`, instant events (memory records, markers: ``ph`` "i"), and ``python_function``
    events other than those steps may come from (``step_marker``, ProfilerStep, the presets; every one with ``python``:
    ``--sources`` reads the Python stacks, and autograd's args that lead a backward op to its forward op); of a JAX
    profile's own columns, those other than :data:`ANALYZE_XLA_STATS` (and :data:`ROOFLINE_XLA_STATS` with
    ``roofline``). None when ``step_marker`` is not a valid regex (the load then reads everything and linking reports
    it)."""
    keep = marker_names(step_marker)
    try:
        re.compile(keep)
    except re.error:
        return None
    return Projection(keep=keep, drop_cats=() if python else ("python_function",), drop_phases=("i",),
                      args=ANALYZE_ARGS + (AUTOGRAD_ARGS if python else ()),
                      stats=ANALYZE_XLA_STATS + (ROOFLINE_XLA_STATS if roofline else ()))


#: the XSpace profile's own columns the memory timeline reads (XLA's allocator events: ``MemoryAllocation``,
#: ``MemoryDeallocation``)
MEMORY_XLA_STATS = ("bytes_allocated", "bytes_reserved", "peak_bytes_in_use", "allocation_bytes", "requested_bytes",
                    "allocator_name", "addr")


def xla_projection(*stats: tuple[str, ...]) -> Projection:
    """A load that reads of a JAX profile only ``stats`` (of its own columns; the kernel launch details, the op paths
    of the events and the other stats stay null) and everything of a Kineto trace."""
    return Projection(keep="", drop_cats=(), drop_phases=(), args=None, stats=tuple(c for group in stats for c in group),
                      formats=("xplane",))


def perf_projection(step_marker: str | None = None) -> Projection | None:
    """What a load for ``kernscope perf`` may skip: what ``analyze --roofline`` skips (:func:`analyze_projection`). Of a
    JAX profile, its own columns other than those the HLO cost model and the steps read (:data:`ANALYZE_XLA_STATS`,
    :data:`ROOFLINE_XLA_STATS`: the kernel launch details and memory stats stay null); of a Kineto trace, the Python
    events, instant events and unread args (the model reads the ops' shapes with a sparse read of its own,
    :mod:`kernscope.load.opargs`)."""
    return analyze_projection(step_marker, roofline=True)


def memory_projection() -> Projection:
    """``kernscope memory``: of a JAX profile, the allocator events' columns and the steps'."""
    return xla_projection(ANALYZE_XLA_STATS, MEMORY_XLA_STATS)


def report_projection() -> Projection:
    """``kernscope report`` (without intra-kernel records): of a JAX profile, what its analysis, perf model and memory
    timeline read."""
    return xla_projection(ANALYZE_XLA_STATS, ROOFLINE_XLA_STATS, MEMORY_XLA_STATS)


def diff_projection(step_marker: str | None = None, *, python: bool = False) -> Projection | None:
    """``kernscope diff`` (and a report's other side): what ``analyze`` reads (its categorized GPU rows, CPU ops and
    steps are what the diff compares; :func:`analyze_projection`); with ``python`` (``--sources``) the Python events
    and autograd's args too."""
    return analyze_projection(step_marker, python=python)
