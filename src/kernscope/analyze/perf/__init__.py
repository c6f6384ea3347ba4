"""Perf model and roofline: FLOPs and bytes per op from recorded shapes, achieved rates, % of device peak.

``formulas`` (closed forms and the op registry) -> ``attribute`` (GPU time of each op) -> ``roofline``
(:func:`perf_model`), with ``devices`` (peaks table, ``--peak``) and ``dtypes``.

The names below are imported from their modules when first used: ``analyze`` reads only the devices' table (a
finding names the GPU), and importing the model with it was ~30 ms of every command's start (2-core VM).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .devices import DevicePeaks, match_device, parse_peak
    from .formulas import REGISTRY, Call, Work, gemm_flops, sdpa_bwd_flops, sdpa_flops
    from .roofline import OP_COLUMNS, PerfModel, PerfReport, perf_model

#: each public name and the module of this package that defines it
_MODULE_OF = {
    "DevicePeaks": "devices", "match_device": "devices", "parse_peak": "devices",
    "REGISTRY": "formulas", "Call": "formulas", "Work": "formulas", "gemm_flops": "formulas",
    "sdpa_bwd_flops": "formulas", "sdpa_flops": "formulas",
    "OP_COLUMNS": "roofline", "PerfModel": "roofline", "PerfReport": "roofline", "perf_model": "roofline",
}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)


__all__ = ["DevicePeaks", "match_device", "parse_peak", "REGISTRY", "Call", "Work", "gemm_flops", "sdpa_flops",
           "sdpa_bwd_flops", "OP_COLUMNS", "PerfModel", "PerfReport", "perf_model"]
