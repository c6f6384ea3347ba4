"""Perf model and roofline: FLOPs and bytes per op from recorded shapes, achieved rates, % of device peak.

``formulas`` (closed forms and the op registry) -> ``attribute`` (GPU time of each op) -> ``roofline``
(:func:`perf_model`), with ``devices`` (peaks table, ``--peak``) and ``dtypes``.
"""

from .devices import DevicePeaks, match_device, parse_peak
from .formulas import REGISTRY, Call, Work, gemm_flops, sdpa_bwd_flops, sdpa_flops
from .roofline import OP_COLUMNS, PerfModel, PerfReport, perf_model

__all__ = ["DevicePeaks", "match_device", "parse_peak", "REGISTRY", "Call", "Work", "gemm_flops", "sdpa_flops",
           "sdpa_bwd_flops", "OP_COLUMNS", "PerfModel", "PerfReport", "perf_model"]
