"""Units of intra-kernel times: nanoseconds or SM cycles, and the clock that converts one into the other.

A task table's times are either **ns** (``%globaltimer`` records, or cycle records kernscope converted with the
SM clock it measured) or **cycles** (Proton's traces: SM cycles written as µs at Proton's 1 GHz convention).
Cycles become time only with a known clock, and time becomes cycles only with one: ``--clock-ghz``, the
clock a cycle-mode buffer measured, a clock the file states (a Proton trace written at a real frequency), or
the device's clock recorded next to the run (``FILE.clock.json``, written by ``intra override`` and
``intra run``). Without one, cycles stay cycles (shown as kcycles) and no cycle column is made up from ns.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import polars as pl

#: what ``intra`` writes next to a run: ``{"sm_clock_ghz": float, "source": str}``
SIDECAR_SUFFIX = ".clock.json"


@dataclass(frozen=True)
class Clock:
    """The SM clock in GHz (cycles per ns), or None when unknown; ``source`` says where it came from."""

    ghz: float | None
    source: str


def sidecar_path(path: str) -> str:
    return path + SIDECAR_SUFFIX


def read_sidecar(path: str) -> Clock | None:
    """The clock recorded next to ``path`` (``path.clock.json``), or None when there is none or it is unusable."""
    p = sidecar_path(path)
    try:
        with open(p, encoding="utf-8") as f:
            doc = json.load(f)
        ghz = float(doc["sm_clock_ghz"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not 0.05 <= ghz <= 10.0:  # no SM runs outside this; a corrupt file is ignored, not believed
        return None
    return Clock(ghz, f"{doc.get('source') or 'recorded with the run'} ({os.path.basename(p)})")


def device_clock() -> Clock | None:
    """The current CUDA device's maximum SM clock (Triton's driver properties, else NVML), or None."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        dev = torch.cuda.current_device()
        name = torch.cuda.get_device_name(dev)
        try:
            from triton.runtime import driver

            khz = driver.active.utils.get_device_properties(dev).get("max_clock_rate")
            if khz:
                return Clock(float(khz) / 1e6, f"max SM clock of the {name}, recorded with the run")
        except Exception:  # noqa: BLE001 - no triton or another backend: NVML below
            pass
        import pynvml  # type: ignore[import-not-found,unused-ignore]

        pynvml.nvmlInit()
        mhz = pynvml.nvmlDeviceGetMaxClockInfo(pynvml.nvmlDeviceGetHandleByIndex(dev), pynvml.NVML_CLOCK_SM)
        return Clock(float(mhz) / 1e3, f"max SM clock of the {name} (NVML), recorded with the run") if mhz else None
    except Exception:  # noqa: BLE001 - no torch, no driver, no NVML: the clock stays unknown
        return None


def write_sidecar(path: str, clock: Clock | None) -> str | None:
    """Record ``clock`` next to ``path``; returns the sidecar's path (None when there is no clock to record)."""
    if clock is None or clock.ghz is None:
        return None
    from ..files import write_text

    p = sidecar_path(path)
    write_text(p, json.dumps({"sm_clock_ghz": clock.ghz, "source": clock.source}))
    return p


def pick_clock(option_ghz: float | None, *, measured: Clock | None = None, stated: Clock | None = None,
               path: str | None = None) -> Clock:
    """The clock to use, in order: ``--clock-ghz``, a cycle-mode buffer's measured clock, the file's own,
    the sidecar next to ``path``; else unknown."""
    if option_ghz:
        return Clock(float(option_ghz), "--clock-ghz")
    for c in (measured, stated, read_sidecar(path) if path else None):
        if c is not None and c.ghz:
            return c
    return Clock(None, "unknown")


def in_time(tasks: pl.DataFrame, unit: str, clock: Clock) -> tuple[pl.DataFrame, str]:
    """``tasks`` with times in ns where possible: a table in cycles is converted with a known clock
    (ns = cycles / GHz, rounded); otherwise it is returned as it is, with its unit."""
    if unit != "cycles" or not clock.ghz:
        return tasks, unit
    g = clock.ghz
    return (tasks.with_columns((pl.col("start_ns") / g).round().cast(pl.Int64).alias("start_ns"),
                               (pl.col("end_ns") / g).round().cast(pl.Int64).alias("end_ns"))
            .with_columns((pl.col("end_ns") - pl.col("start_ns")).alias("duration_ns"))), "ns"


def cycle_keys(doc: Any) -> Any:
    """A JSON document of a table in cycles: every ``*_ns`` key renamed ``*_cycles`` (recursively), so no key
    says ns of a value that counts cycles. ``finalize_*`` keep ``_ns``: Proton writes that time in ns."""
    if isinstance(doc, dict):
        return {(k[:-3] + "_cycles" if isinstance(k, str) and k.endswith("_ns") and not k.startswith("finalize") else k):
                cycle_keys(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [cycle_keys(v) for v in doc]
    return doc


def clock_for(loaded: Any, clock_ghz: float | None, path: str) -> Clock:
    """The SM clock for a loaded intra file (:class:`~kernscope.intra.io.Loaded`): ``clock_ghz`` when given, else
    the clock measured in its buffer, else the one stated next to it (see :func:`pick_clock`)."""
    d0 = loaded.decoded
    measured = (Clock(d0.clock_ghz, d0.clock_source or "measured from the buffer")
                if d0 is not None and d0.cycles and d0.clock_ghz else None)
    return pick_clock(clock_ghz, measured=measured, stated=loaded.clock, path=path)
