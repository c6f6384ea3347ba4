"""kernscope: where does the GPU time go, from the training step down to a task inside one kernel.

``kernscope.load(path)`` returns a linked :class:`~kernscope.model.Trace`. The package front imports
the pipeline on first use, so the command line starts without loading polars when it does not need it.
"""

from __future__ import annotations

import os

from . import load as _load_package  # noqa: F401 - the subpackage first, so ``load`` below stays the function
from .errors import KernscopeError, TraceError
from .version import __version__

#: not ``typing.TYPE_CHECKING``: importing ``typing`` costs a cached ``kernscope analyze`` (:mod:`.replay`) ~5 ms
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any, Literal

    from .link.steps import StepSpec
    from .load.projection import Projection
    from .load.source import Limits
    from .model import Trace

__all__ = ["load", "Trace", "Projection", "KernscopeError", "TraceError", "__version__"]


def load(path: str | os.PathLike[str], *, cache: bool = True, salvage: bool = False, workers: int | None = None,
         steps: StepSpec | None = None, limits: Limits | None = None,
         projection: Projection | Literal["analyze"] | None = None) -> Trace:
    """Load and link a trace: a PyTorch profiler (Kineto) or Chrome JSON trace, a JAX/XLA profile
    (``*.xplane.pb`` or its JSON exports), or a JAX run directory holding one host's profile (its richest
    file is read). See :func:`kernscope.pipeline.load`.

    ``projection``: what the load may skip unparsed, the fast load the command line uses. ``"analyze"`` skips
    what :func:`kernscope.analyze.summary.analyze` never reads (``python_function`` events other than step
    markers, instant events, ``args`` other than the link's and the findings'): the same analysis, faster, with
    those events absent from ``trace.events``; of a JAX profile, its own columns the analysis does not read (HLO
    costs, launch dimensions, memory stats) are null. A :class:`~kernscope.load.projection.Projection` says it
    yourself. Projected loads are cached apart from whole ones."""
    from .pipeline import load as _load

    if isinstance(projection, str):
        if projection != "analyze":
            raise KernscopeError(f"unknown projection {projection!r}: 'analyze', a Projection, or None (read all)")
        from .analyze.needs import analyze_projection

        projection = analyze_projection(steps.marker if steps is not None else None)

    if os.path.isdir(path):
        from .files import resolve_run_dir

        run = resolve_run_dir(str(path))
        if run is not None and len(run[0]) > 1:
            raise KernscopeError(f"{path}: a JAX run of {len(run[0])} hosts; load one file, or analyze them together as "
                                 "ranks: kernscope analyze DIR")
        if run is not None:
            path = run[0][0]
    return _load(path, cache=cache, salvage=salvage, workers=workers, steps=steps, limits=limits, projection=projection)


def __getattr__(name: str) -> Any:
    if name == "Trace":
        from .model import Trace

        return Trace
    if name == "Projection":
        from .load.projection import Projection

        return Projection
    raise AttributeError(f"module 'kernscope' has no attribute {name!r}")
