"""``link``: decoded event table -> linked :class:`~kernscope.model.Trace`.

Modules: ``kinds`` (event kinds from ph/cat), ``correlation`` (GPU <-> launch <-> op), ``ops`` (fallback
ops, python parents), ``steps`` (step windows), ``tree`` (call tree), ``unlinked`` (counters),
``build`` (the ``link`` function that runs them in order).
"""

from __future__ import annotations

from .build import link
from .steps import StepSpec

__all__ = ["link", "StepSpec"]
