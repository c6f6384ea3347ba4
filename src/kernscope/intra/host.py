"""Host side of the intra-kernel profiler (needs torch): buffers, reset, export, on/off switch.

Names, arguments and defaults follow the seed user guide, so its examples run with only the
import line changed to ``from kernscope.intra import ...``.
"""

from __future__ import annotations

import contextvars
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import KernscopeError
from ..scalars import as_float
from .decode import Decoded, Names, decode_buffer
from .export import write_perfetto
from .layout import MAGIC, VERSION, buffer_words
from .scopes import merge_names
from .stats import shift_durations

_EXPORT_ON: contextvars.ContextVar[bool] = contextvars.ContextVar("kernscope_intra_export", default=True)


class ProfilerOverflowWarning(UserWarning):
    """Some records did not fit their region and were dropped (counted, never written out of bounds)."""


def set_export_trace_on() -> None:
    """Export a trace when a :class:`ProfilerBuffer` block exits (the default)."""
    _EXPORT_ON.set(True)


def set_export_trace_off() -> None:
    """Do not export on :class:`ProfilerBuffer` exit (profile selectively)."""
    _EXPORT_ON.set(False)


def export_enabled() -> bool:
    return _EXPORT_ON.get()


def alloc_profiler_buffer(max_num_profile_slots: int, device: "str | None" = None):
    """Allocate a zeroed int64 profiler buffer on the GPU holding ``max_num_profile_slots`` records."""
    import torch

    if max_num_profile_slots <= 0:
        raise ValueError("max_num_profile_slots must be positive")
    buf = torch.empty(buffer_words(max_num_profile_slots), dtype=torch.int64, device=device or "cuda")
    reset_profiler_buffer(buf)
    return buf


def reset_profiler_buffer(profiler_buffer) -> None:
    """Clear all records and write the header (one memset and one small copy, asynchronous)."""
    import torch

    profiler_buffer.zero_()
    header = torch.tensor([MAGIC, VERSION, profiler_buffer.numel()], dtype=torch.int64, device=profiler_buffer.device)
    profiler_buffer[: len(header)].copy_(header)


#: pinned host staging buffers by (device, words), reused across reads (at most 8 kept)
_PINNED: "dict[tuple[int, int], Any]" = {}


def read_profiler_buffer(profiler_buffer, copy: bool = True) -> np.ndarray:
    """Copy the buffer to host memory (waits for the kernels that write it).

    With ``copy=False`` the result is a view of the staging buffer, overwritten by the next read.

    Uses a pinned staging buffer, reused per (device, size): a 4 MB readback takes ~0.3 ms instead of
    the ~1.5 ms of a pageable copy.
    """
    if isinstance(profiler_buffer, np.ndarray):
        return profiler_buffer
    if not profiler_buffer.is_cuda:
        return profiler_buffer.numpy()
    import torch

    key = (profiler_buffer.device.index or 0, profiler_buffer.numel())
    host = _PINNED.get(key)
    if host is None:
        if len(_PINNED) > 8:
            _PINNED.clear()
        host = torch.empty(profiler_buffer.numel(), dtype=torch.int64, pin_memory=True)
        _PINNED[key] = host
    host.copy_(profiler_buffer)  # synchronous: waits for the writing kernels
    return host.numpy().copy() if copy else host.numpy()


class ProfilerScopeWarning(UserWarning):
    """Named scopes were not balanced (an enter without its exit, or the reverse): those records are not paired."""


def decode_profiler_buffer(profiler_buffer, task_names: "Names" = (), kernels: Sequence[Any] = (),
                           time_shift_ns: float = 0.0) -> Decoded:
    """Read back and decode: tasks DataFrame plus dropped/unpaired counts.

    ``kernels``: the JIT functions whose named scopes (``prof.enter("name")``) to name; ``time_shift_ns``: the
    cost of one record pair (see :func:`calibrate_record_cost`), subtracted from every duration.
    """
    d = decode_buffer(read_profiler_buffer(profiler_buffer, copy=False), merge_names(task_names, kernels),
                      clock_hint_ghz=_sm_clock_ghz(profiler_buffer))
    if time_shift_ns:
        d.tasks = shift_durations(d.tasks, time_shift_ns)
    return d


def _sm_clock_ghz(profiler_buffer: Any) -> float | None:
    """The device's current SM clock (GHz) as NVML reports it (``torch.cuda.clock_rate``), or None."""
    try:
        import torch

        dev = getattr(profiler_buffer, "device", None)
        if dev is None or dev.type != "cuda":
            return None
        mhz = torch.cuda.clock_rate(dev)
        return float(mhz) / 1e3 if mhz else None
    except Exception:  # noqa: BLE001 - no NVML (pynvml) or no driver: cycle records fall back to the pooled rate
        return None


def _warn_about(d: Decoded) -> None:
    if d.dropped:
        warnings.warn(
            f"{d.dropped:,} profiler records were dropped: a region holds {d.capacity_per_region} records; "
            f"raise max_num_profile_slots or use RING=True",
            ProfilerOverflowWarning,
            stacklevel=3,
        )
    if d.stage_slots and d.ring_overwritten:
        warnings.warn(
            f"{d.ring_overwritten:,} earlier profiler records were overwritten: the staged ring keeps the newest "
            f"{d.stage_slots} records per program; raise STAGE to keep more",
            ProfilerOverflowWarning,
            stacklevel=3,
        )
    if d.unbalanced and not (d.stage_slots and d.ring_overwritten):  # a ring cut leaves ends without starts
        listed = ", ".join(f"{n!r} ({a} enter without exit, {b} exit without enter)" for n, a, b in d.unbalanced[:5])
        warnings.warn(f"unbalanced scopes: {listed}", ProfilerScopeWarning, stacklevel=3)


def export_to_perfetto_trace(profiler_buffer, task_names: "Names", file_name: str, kernels: Sequence[Any] = (),
                             time_shift_ns: float = 0.0) -> str:
    """Decode the buffer and write a Perfetto trace (``<file_name>.perfetto-trace``); returns its path.

    Warns (:class:`ProfilerOverflowWarning`) with the number of dropped records if any region filled up, and
    (:class:`ProfilerScopeWarning`) naming any unbalanced scope.
    """
    d = decode_profiler_buffer(profiler_buffer, task_names, kernels, time_shift_ns)
    _warn_about(d)
    names = d.task_names
    return write_perfetto(d.tasks, file_name, list(names.values()) if isinstance(names, dict) else list(names))


def calibrate_record_cost(device: "str | None" = None, pairs: int = 1024, programs: int = 132) -> float:
    """The cost (ns) one start/end record pair adds to a measured scope, on this GPU: ``programs`` programs
    each record ``pairs`` empty scopes back to back, timed in SM cycles (%globaltimer's ticks are coarser than
    one pair) and converted to ns at the SM clock measured in the same launch; the mean duration of an empty
    scope is the cost (``time_shift``: subtract it from every scope). Needs triton and a GPU."""
    from .device import calibration_kernel

    buf = alloc_profiler_buffer(programs * pairs * 2 + 16, device)
    calibration_kernel[(programs,)](buf, pairs)  # the first launch compiles and warms up
    reset_profiler_buffer(buf)
    calibration_kernel[(programs,)](buf, pairs)
    d = decode_profiler_buffer(buf)
    if d.tasks.height == 0:
        raise KernscopeError("calibrate_record_cost: the calibration kernel recorded nothing")
    return as_float(d.tasks["duration_ns"].mean())


class ProfilerBuffer:
    """Context manager: allocates (and resets) a buffer, exports a trace on exit when export is on.

    ``with ProfilerBuffer(max_num_profile_slots, trace_file, task_names) as profile_buf: kernel[grid](profile_buf, ...)``
    """

    def __init__(self, max_num_profile_slots: int = 1_000_000, trace_file: str = "trace", task_names: "Names" = (),
                 device: "str | None" = None, kernels: Sequence[Any] = (), time_shift: bool = False) -> None:
        self.max_num_profile_slots = int(max_num_profile_slots)
        self.trace_file = trace_file
        self.task_names = merge_names(task_names, kernels)
        self.device = device
        self.buffer = None
        self.last_trace: str | None = None
        self.time_shift = time_shift
        #: the calibrated cost of one record pair (ns), subtracted from durations when ``time_shift`` is on
        self.time_shift_ns = 0.0

    def __enter__(self):
        if self.time_shift:
            self.time_shift_ns = calibrate_record_cost(self.device)
        self.buffer = alloc_profiler_buffer(self.max_num_profile_slots, self.device)
        return self.buffer

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None or self.buffer is None:
            return
        if export_enabled():
            self.last_trace = export_to_perfetto_trace(self.buffer, self.task_names, self.trace_file,
                                                       time_shift_ns=self.time_shift_ns)
        return

    def save(self, path: str | os.PathLike[str]) -> str:
        """Save the raw buffer and task names (``.npz``) for ``kernscope intra stats`` later."""
        from ..files import atomic_path

        p = str(path) if str(path).endswith(".npz") else str(path) + ".npz"
        names = self.task_names
        ids = list(names) if isinstance(names, dict) else list(range(len(names)))
        labels = list(names.values()) if isinstance(names, dict) else list(names)
        with atomic_path(p) as tmp, open(tmp, "wb") as f:
            np.savez(f, buffer=read_profiler_buffer(self.buffer), task_names=np.array(labels, dtype=str),
                     task_ids=np.array(ids, dtype=np.int64), time_shift_ns=np.array([self.time_shift_ns]))
        return p

