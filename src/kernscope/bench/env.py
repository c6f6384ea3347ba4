"""What the benchmark ran on: library versions, GPU, driver."""

from __future__ import annotations

import platform
import subprocess
from typing import Any


def probe_env(device: str) -> dict[str, Any]:
    """torch/triton/python versions and, on CUDA, GPU name, SM count, L2 size, CUDA and driver versions."""
    import torch

    e: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(), "device": device}
    try:
        import triton

        e["triton"] = triton.__version__
    except ImportError:
        e["triton"] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        p = torch.cuda.get_device_properties(device)
        e.update(gpu=p.name, sms=p.multi_processor_count, l2_bytes=getattr(p, "L2_cache_size", None), cuda=torch.version.cuda)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10).stdout
            e["driver"] = out.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            e["driver"] = None
    return e
