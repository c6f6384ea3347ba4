"""kernscope: where does the GPU time go, from the training step down to a task inside one kernel."""

from __future__ import annotations

from .errors import KernscopeError, TraceError  # noqa: E402
from .model import Trace  # noqa: E402
from .pipeline import load  # noqa: E402
from .version import __version__  # noqa: E402

__all__ = ["load", "Trace", "KernscopeError", "TraceError", "__version__"]
