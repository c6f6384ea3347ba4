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
    """Load and link a trace: a PyTorch profiler (Kineto) or Chrome JSON trace, a JAX/XLA profile
    (``*.xplane.pb`` or its JSON exports), or a JAX run directory holding one host's profile (its richest
    file is read). See :func:`kernscope.pipeline.load`."""
    from .pipeline import load as _load

    if os.path.isdir(path):
        from .files import resolve_run_dir

        run = resolve_run_dir(str(path))
        if run is not None and len(run[0]) > 1:
            raise KernscopeError(f"{path}: a JAX run of {len(run[0])} hosts; load one file, or analyze them together as "
                                 "ranks: kernscope analyze DIR")
        if run is not None:
            path = run[0][0]
    return _load(path, cache=cache, salvage=salvage, workers=workers, steps=steps, limits=limits)


def __getattr__(name: str) -> Any:
    if name == "Trace":
        from .model import Trace

        return Trace
    raise AttributeError(f"module 'kernscope' has no attribute {name!r}")
