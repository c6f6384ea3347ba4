"""``link``: decoded event table -> linked :class:`~kernscope.model.Trace`.

Modules: ``kinds`` (event kinds from ph/cat), ``correlation`` (GPU <-> launch <-> op), ``ops`` (fallback
ops, python parents), ``steps`` (step windows), ``markers`` (step-marker presets), ``tree`` (call tree),
``unlinked`` (counters), ``build`` (the ``link`` function that runs them in order). The names below are
imported on first use, so ``kernscope.link.markers`` can be used without polars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .build import link
    from .steps import StepSpec

__all__ = ["link", "StepSpec"]


def __getattr__(name: str) -> Any:
    if name == "link":
        from .build import link

        return link
    if name == "StepSpec":
        from .steps import StepSpec

        return StepSpec
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
