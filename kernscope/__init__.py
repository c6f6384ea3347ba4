"""kernscope: where does the GPU time go, from the training step down to a task inside one kernel.

``kernscope.load(path)`` returns a linked :class:`~kernscope.model.Trace`. The package front imports
the pipeline on first use, so the command line starts without loading polars when it does not need it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from . import load as _load_package  # noqa: F401 - the subpackage first, so ``load`` below stays the function
from .errors import KernscopeError, TraceError
from .version import __version__

if TYPE_CHECKING:
    from .link.steps import StepSpec
    from .load.source import Limits
    from .model import Trace

__all__ = ["load", "Trace", "KernscopeError", "TraceError", "__version__"]


def load(path: str | os.PathLike[str], *, cache: bool = True, salvage: bool = False, workers: int | None = None,
         steps: StepSpec | None = None, limits: Limits | None = None) -> Trace:
    """Load and link a PyTorch profiler (Kineto) trace (see :func:`kernscope.pipeline.load`)."""
    from .pipeline import load as _load

    return _load(path, cache=cache, salvage=salvage, workers=workers, steps=steps, limits=limits)


def __getattr__(name: str) -> Any:
    if name == "Trace":
        from .model import Trace

        return Trace
    raise AttributeError(f"module 'kernscope' has no attribute {name!r}")
