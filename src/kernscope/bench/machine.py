"""The GPU's state while a cell is measured: SM and memory clocks, power, temperature, throttle reasons.

NVML (``nvidia-ml-py``) on NVIDIA, ``amdsmi`` on AMD where installed; without either, states are None and
the output says so. A cell's state is sampled at every batch boundary of its measurement (not in a thread:
no sampling noise inside a timed batch), and the cell is flagged when its SM clock moved by more than
:data:`MOVED_PCT` or the driver reported a power or thermal slowdown.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

#: SM clock range (max − min) above this share of the max counts as "clocks moved"
MOVED_PCT = 1.0
#: NVML clock-event (throttle) reason bits -> names
_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
            0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
            0x100: "display_clock_setting"}
#: reasons that mean the clock was pulled down under load
SLOWDOWNS = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                       "hw_power_brake_slowdown"})


@dataclass(frozen=True)
class GpuState:
    """One reading. Clocks MHz, power W, temperature °C."""

    sm_mhz: float | None
    mem_mhz: float | None
    power_w: float | None
    temp_c: float | None
    reasons: tuple[str, ...] = ()


class Backend(Protocol):
    name: str

    def read(self) -> GpuState | None: ...


class NullBackend:
    name = "none"

    def read(self) -> GpuState | None:
        return None


def max_sm_mhz(backend: Backend) -> float | None:
    """The card's maximum SM clock (MHz), where the backend can tell (NVML: ``nvmlDeviceGetMaxClockInfo``)."""
    fn = getattr(backend, "max_sm_mhz", None)
    try:
        v = fn() if callable(fn) else None
    except Exception:  # noqa: BLE001 - a driver that cannot tell: no normalization, not a failure
        return None
    return float(v) if v else None


class NvmlBackend:
    """NVIDIA Management Library through ``pynvml`` (package ``nvidia-ml-py``)."""

    name = "nvml"

    def __init__(self, uuid: str | None, index: int) -> None:
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        handle = None
        if uuid:
            try:
                handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            except pynvml.NVMLError:
                handle = None
        self.h = handle or pynvml.nvmlDeviceGetHandleByIndex(index)

    def _get(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nv, fn)(self.h, *args)
        except (self.nv.NVMLError, AttributeError):
            return None

    def max_sm_mhz(self) -> float | None:
        v = self._get("nvmlDeviceGetMaxClockInfo", self.nv.NVML_CLOCK_SM)
        return float(v) if v else None

    def read(self) -> GpuState | None:
        nv = self.nv
        sm = self._get("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_SM)
        mem = self._get("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_MEM)
        mw = self._get("nvmlDeviceGetPowerUsage")
        temp = self._get("nvmlDeviceGetTemperature", nv.NVML_TEMPERATURE_GPU)
        bits = self._get("nvmlDeviceGetCurrentClocksEventReasons")
        if bits is None:
            bits = self._get("nvmlDeviceGetCurrentClocksThrottleReasons")
        return GpuState(float(sm) if sm is not None else None, float(mem) if mem is not None else None,
                        mw / 1000.0 if mw is not None else None, float(temp) if temp is not None else None,
                        reasons_of(bits or 0))


class AmdSmiBackend:
    """AMD GPUs through ``amdsmi`` (ROCm SMI's Python library), when installed."""

    name = "amdsmi"

    def __init__(self, index: int) -> None:
        import amdsmi

        self.smi = amdsmi
        amdsmi.amdsmi_init()
        self.h = amdsmi.amdsmi_get_processor_handles()[index]

    def read(self) -> GpuState | None:
        smi = self.smi
        try:
            sm = smi.amdsmi_get_clock_info(self.h, smi.AmdSmiClkType.GFX).get("clk")
            mem = smi.amdsmi_get_clock_info(self.h, smi.AmdSmiClkType.MEM).get("clk")
            power = smi.amdsmi_get_power_info(self.h).get("current_socket_power")
            temp = smi.amdsmi_get_temp_metric(self.h, smi.AmdSmiTemperatureType.HOTSPOT, smi.AmdSmiTemperatureMetric.CURRENT)
        except Exception:  # noqa: BLE001 - a library/driver mismatch: no reading rather than a crash
            return None
        return GpuState(sm, mem, power, temp)


def reasons_of(bits: int) -> tuple[str, ...]:
    """NVML throttle-reason bitmask -> names."""
    return tuple(name for bit, name in _REASONS.items() if bits & bit)


def open_backend(device: str) -> Backend:
    """The state reader for a torch device string (``cuda:1``), or a null one."""
    if not device.startswith("cuda"):
        return NullBackend()
    index = int(device.split(":")[1]) if ":" in device else 0
    uuid = None
    try:
        import torch

        uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "") or None
        hip = getattr(torch.version, "hip", None)
    except Exception:  # noqa: BLE001
        hip = None
    try:
        if hip:
            return AmdSmiBackend(index)
        return NvmlBackend(uuid, index)
    except Exception:  # noqa: BLE001 - no NVML/amdsmi library or no permission: states are None
        return NullBackend()


@dataclass
class CellMachine:
    """The machine state over one cell's measurement (clocks MHz, power W, temperature °C)."""

    backend: str
    before: GpuState | None = None
    after: GpuState | None = None
    readings: int = 0
    sm_min_mhz: float | None = None
    sm_max_mhz: float | None = None
    mem_min_mhz: float | None = None
    mem_max_mhz: float | None = None
    power_max_w: float | None = None
    temp_max_c: float | None = None
    reasons: list[str] = field(default_factory=list)

    def add(self, s: GpuState | None) -> None:
        if s is None:
            return
        if self.before is None:
            self.before = s
        self.after = s
        self.readings += 1

        def lo(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else min(a, b)

        def hi(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else max(a, b)

        self.sm_min_mhz, self.sm_max_mhz = lo(self.sm_min_mhz, s.sm_mhz), hi(self.sm_max_mhz, s.sm_mhz)
        self.mem_min_mhz, self.mem_max_mhz = lo(self.mem_min_mhz, s.mem_mhz), hi(self.mem_max_mhz, s.mem_mhz)
        self.power_max_w, self.temp_max_c = hi(self.power_max_w, s.power_w), hi(self.temp_max_c, s.temp_c)
        for r in s.reasons:
            if r not in self.reasons:
                self.reasons.append(r)

    @property
    def moved(self) -> bool:
        """Clocks moved during the cell: SM range > MOVED_PCT of its max, or a power/thermal slowdown reported."""
        lo, hi = self.sm_min_mhz, self.sm_max_mhz
        if lo is not None and hi and 100.0 * (hi - lo) / hi > MOVED_PCT:
            return True
        return bool(SLOWDOWNS & set(self.reasons))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["moved"] = self.moved
        return d


@dataclass(frozen=True)
class ClockLock:
    """What ``--lock-clocks`` achieved."""

    requested: bool
    locked: bool
    mhz: int | None = None
    message: str = ""


def lock_clocks(device: str, mhz: str) -> ClockLock:
    """Try to lock the SM clock (``nvidia-smi --lock-gpu-clocks``; needs root). ``mhz``: a number or "max"."""
    if not device.startswith("cuda") or shutil.which("nvidia-smi") is None:
        return ClockLock(True, False, None, "nvidia-smi not found")
    index = device.split(":")[1] if ":" in device else "0"
    target = mhz
    if mhz == "max":
        q = subprocess.run(["nvidia-smi", "-i", index, "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        target = q.stdout.strip().splitlines()[0] if q.returncode == 0 and q.stdout.strip() else ""
    if not target.isdigit():
        return ClockLock(True, False, None, f"cannot read the maximum SM clock ({mhz!r})")
    r = subprocess.run(["nvidia-smi", "-i", index, f"--lock-gpu-clocks={target},{target}"], capture_output=True, text=True,
                       timeout=20)
    ok = r.returncode == 0
    msg = (r.stdout + r.stderr).strip().splitlines()[-1] if (r.stdout + r.stderr).strip() else ""
    return ClockLock(True, ok, int(target) if ok else None, msg)


def unlock_clocks(device: str) -> None:
    index = device.split(":")[1] if ":" in device else "0"
    subprocess.run(["nvidia-smi", "-i", index, "--reset-gpu-clocks"], capture_output=True, text=True, timeout=20)
