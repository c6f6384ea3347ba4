"""Peak throughput of known GPUs, matched from the trace's ``deviceProperties``, and ``--peak`` overrides.

Numbers are the vendors' datasheet peaks for **dense** math (no structured sparsity) at boost clock, per
device as PyTorch sees it (one GCD of an MI250/MI250X). ``matrix`` is tensor-core / matrix-core
throughput, ``vector`` the CUDA-core / SIMD rate; ``hbm_tb_s`` is memory bandwidth. TFLOP/s and TB/s
(10^12). A datasheet peak is rarely reached: cuBLAS reaches ~70-80% of the bf16 peak on large GEMMs.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ...errors import KernscopeError


@dataclass(frozen=True)
class DevicePeaks:
    """Peaks of one device. ``matrix``/``vector``: precision key -> TFLOP/s; ``hbm_tb_s``: TB/s."""

    name: str
    matrix: dict[str, float] = field(default_factory=dict)
    vector: dict[str, float] = field(default_factory=dict)
    hbm_tb_s: float | None = None
    source: str = "table"  #: "table", "override" or "table+override"

    def flops_peak(self, unit: str, prec: str | None) -> float | None:
        """Peak TFLOP/s for an op on ``unit`` ("matrix"/"vector") in precision ``prec`` (None if unknown).

        fp32 matrix ops use the fp32 (non-TF32) peak: PyTorch's default for matmul. Vector ops in 16- or
        8-bit types use the fp32 vector rate; integer ops use it too.
        """
        if prec is None:
            return None
        if unit == "matrix":
            return self.matrix.get(prec) or (self.matrix.get("fp16") if prec == "bf16" else None)
        key = "fp64" if prec == "fp64" else "fp32"
        return self.vector.get(key)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "matrix_tflops": dict(self.matrix), "vector_tflops": dict(self.vector),
                "hbm_tb_s": self.hbm_tb_s, "source": self.source}


def _nv(name: str, fp64: float, fp64_tc: float, fp32: float, tf32: float, bf16: float, fp8: float | None,
        bw: float, int8: float | None = None, fp4: float | None = None) -> DevicePeaks:
    m = {"fp64": fp64_tc, "fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": bf16}
    if fp8:
        m["fp8"] = fp8
    if int8 or fp8:
        m["int8"] = int8 or fp8 or 0.0
    if fp4:
        m["fp4"] = fp4
    return DevicePeaks(name, m, {"fp64": fp64, "fp32": fp32}, bw)


#: (regex on the device name, lower case, peaks). First match wins: specific variants before families.
TABLE: tuple[tuple[str, DevicePeaks], ...] = (
    (r"h100.*pcie", _nv("NVIDIA H100 PCIe", 25.6, 51.2, 51.2, 378.0, 756.0, 1513.0, 2.0)),
    (r"h100.*nvl", _nv("NVIDIA H100 NVL", 30.0, 60.0, 60.0, 417.5, 835.0, 1670.0, 3.9)),
    (r"h100|h800", _nv("NVIDIA H100 SXM", 33.5, 66.9, 66.9, 494.7, 989.4, 1978.9, 3.35)),
    (r"h200.*nvl", _nv("NVIDIA H200 NVL", 30.0, 60.0, 60.0, 417.5, 835.0, 1670.0, 4.8)),
    (r"h200|h20\b", _nv("NVIDIA H200 SXM", 33.5, 66.9, 66.9, 494.7, 989.4, 1978.9, 4.8)),
    (r"b200", _nv("NVIDIA B200 (HGX, 1000 W)", 40.0, 40.0, 80.0, 1100.0, 2250.0, 4500.0, 8.0, int8=4500.0, fp4=9000.0)),
    (r"a100.*pcie.*80|a100.*80.*pcie", _nv("NVIDIA A100 PCIe 80GB", 9.7, 19.5, 19.5, 156.0, 312.0, None, 1.935, 624.0)),
    (r"a100.*pcie", _nv("NVIDIA A100 PCIe 40GB", 9.7, 19.5, 19.5, 156.0, 312.0, None, 1.555, 624.0)),
    (r"a100.*80g", _nv("NVIDIA A100 SXM 80GB", 9.7, 19.5, 19.5, 156.0, 312.0, None, 2.039, 624.0)),
    (r"a100", _nv("NVIDIA A100 SXM 40GB", 9.7, 19.5, 19.5, 156.0, 312.0, None, 1.555, 624.0)),
    (r"v100.*pcie", DevicePeaks("NVIDIA V100 PCIe", {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0}, {"fp64": 7.0, "fp32": 14.0}, 0.9)),
    (r"v100", DevicePeaks("NVIDIA V100 SXM2", {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0}, {"fp64": 7.8, "fp32": 15.7}, 0.9)),
    (r"mi325", DevicePeaks("AMD Instinct MI325X", {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4,
                                                  "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
                           {"fp64": 81.7, "fp32": 163.4}, 6.0)),
    (r"mi300x|mi300", DevicePeaks("AMD Instinct MI300X", {"fp64": 163.4, "fp32": 163.4, "tf32": 653.7, "bf16": 1307.4,
                                                         "fp16": 1307.4, "fp8": 2614.9, "int8": 2614.9},
                                  {"fp64": 81.7, "fp32": 163.4}, 5.3)),
    (r"mi250x", DevicePeaks("AMD Instinct MI250X (one GCD)", {"fp64": 47.9, "fp32": 47.9, "bf16": 191.5, "fp16": 191.5,
                                                              "int8": 191.5}, {"fp64": 23.9, "fp32": 23.9}, 1.6384)),
    (r"mi250", DevicePeaks("AMD Instinct MI250 (one GCD)", {"fp64": 45.3, "fp32": 45.3, "bf16": 181.0, "fp16": 181.0,
                                                            "int8": 181.0}, {"fp64": 22.6, "fp32": 22.6}, 1.6384)),
    (r"mi210", DevicePeaks("AMD Instinct MI210", {"fp64": 45.3, "fp32": 45.3, "bf16": 181.0, "fp16": 181.0,
                                                 "int8": 181.0}, {"fp64": 22.6, "fp32": 22.6}, 1.6384)),
)

#: Devices that report a generic name ("AMD Radeon Graphics"): recognised by (compute capability, SMs/CUs)
_FINGERPRINTS: dict[tuple[int, int, int], str] = {
    (9, 0, 104): "mi210",  # gfx90a with 104 CUs: an MI210, or one GCD of an MI250 (same peaks)
    (9, 0, 110): "mi250x",
    (9, 4, 304): "mi300x",
}


def _by_key(key: str) -> DevicePeaks | None:
    for pattern, peaks in TABLE:
        if re.search(pattern, key):
            return peaks
    return None


def match_device(props: dict[str, Any]) -> DevicePeaks | None:
    """The peaks of a ``deviceProperties`` entry (by name, then by compute capability and SM count)."""
    name = str(props.get("name") or "").lower()
    found = _by_key(name) if name else None
    if found is not None:
        if "a100" in name and "80g" not in name and "pcie" not in name and int(props.get("totalGlobalMem") or 0) > 60e9:
            found = _by_key("a100 80g")  # e.g. "A100-PG509-200": the memory size says which variant
        return found
    try:
        fp = (int(props.get("computeMajor", -1)), int(props.get("computeMinor", -1)), int(props.get("numSms", -1)))
    except (TypeError, ValueError):
        return None
    key = _FINGERPRINTS.get(fp)
    if key is None:
        return None
    p = _by_key(key)
    how = f"compute {fp[0]}.{fp[1]}, {fp[2]} CUs"
    said = f"from {props['name']!r}: {how}" if props.get("name") else f"by {how}; no device name recorded"
    return replace(p, name=f"{p.name} (recognised {said})") if p else None


def known_names() -> list[str]:
    return [p.name for _, p in TABLE]


_SPEC = re.compile(r"^\s*([a-z0-9_]+)\s*=\s*([0-9.eE+]+)\s*$")


def parse_peak(spec: str, base: DevicePeaks | None = None) -> DevicePeaks:
    """``--peak``: a device name from the table (``h100``, ``mi300x``), or ``key=value`` pairs overriding
    ``base``: ``bf16=989,fp32=67,bw=3.35`` (matrix TFLOP/s per precision, ``vector_fp32=``, ``bw=`` TB/s)."""
    text = spec.strip()
    if not text:
        raise KernscopeError("--peak is empty")
    if "=" not in text:
        p = _by_key(text.lower())
        if p is None:
            raise KernscopeError(f"--peak {spec!r}: unknown device; known: {', '.join(known_names())}; "
                                 "or give numbers like bf16=989,fp32=67,bw=3.35")
        return replace(p, source="override")
    matrix = dict(base.matrix) if base else {}
    vector = dict(base.vector) if base else {}
    bw = base.hbm_tb_s if base else None
    for part in text.split(","):
        m = _SPEC.match(part.lower())
        if not m:
            raise KernscopeError(f"--peak {spec!r}: cannot read {part!r}; expected key=number, e.g. bf16=989 or bw=3.35")
        k, v = m.group(1), float(m.group(2))
        if not math.isfinite(v) or v <= 0:
            raise KernscopeError(f"--peak {spec!r}: {k} must be a positive finite number")
        if k in ("bw", "hbm", "hbm_tb_s"):
            bw = v
        elif k.startswith("vector_"):
            vector[k.removeprefix("vector_")] = v
        elif k in ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"):
            matrix[k] = v
            if k in ("fp32", "fp64") and k not in vector:
                vector[k] = v
        else:
            raise KernscopeError(f"--peak {spec!r}: unknown key {k!r} (use fp64, fp32, tf32, bf16, fp16, fp8, int8, fp4, "
                                 "vector_fp32, vector_fp64, bw)")
    return DevicePeaks(base.name if base else "custom", matrix, vector, bw,
                       "table+override" if base else "override")
