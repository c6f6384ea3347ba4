"""Intra-kernel profiler for Triton kernels.

``from kernscope.intra import Profiler, ProfilerBuffer, alloc_profiler_buffer, reset_profiler_buffer,
export_to_perfetto_trace, set_export_trace_on, set_export_trace_off, tid`` gives the seed user guide's
API. Device helpers need triton and host helpers need torch; decoding, export and statistics
(:func:`decode_buffer`, :mod:`.export`, :mod:`.stats`) run on any CPU.
"""

from __future__ import annotations

from typing import Any

_DECODE = {"Decoded", "decode_buffer"}
_INSTRUMENT = {"instrument", "InstrumentedKernel"}
_DEVICE = {"Profiler", "tid", "smid", "globaltimer", "clock64"}
_HOST = {
    "ProfilerBuffer",
    "alloc_profiler_buffer",
    "reset_profiler_buffer",
    "export_to_perfetto_trace",
    "set_export_trace_on",
    "set_export_trace_off",
    "decode_profiler_buffer",
    "read_profiler_buffer",
    "ProfilerOverflowWarning",
    "ProfilerScopeWarning",
    "calibrate_record_cost",
}

__all__ = sorted(_DEVICE | _HOST | _INSTRUMENT | {"Decoded", "decode_buffer"})


def __getattr__(name: str) -> Any:
    if name in _DEVICE:
        from . import device

        return getattr(device, name)
    if name in _HOST:
        from . import host

        return getattr(host, name)
    if name in _INSTRUMENT:
        from . import rewrite as ins

        return getattr(ins, name)
    if name in _DECODE:
        from . import decode

        return getattr(decode, name)
    raise AttributeError(f"module 'kernscope.intra' has no attribute {name!r}")
