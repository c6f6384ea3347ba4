"""kernscope: where does the GPU time go, from the training step down to a task inside one kernel."""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import KernscopeError, TraceError  # noqa: E402
from .load import load  # noqa: E402
from .model import Trace  # noqa: E402

__all__ = ["load", "Trace", "KernscopeError", "TraceError", "__version__"]
