"""Typed access to polars scalars (``Series.max()`` and friends return a wide union of Python types)."""

from __future__ import annotations

from typing import Any


def as_int(value: Any, default: int = 0) -> int:
    """An aggregate's value as ``int`` (``default`` when the column was empty or all null)."""
    if value is None:
        return default
    return int(value)


def as_float(value: Any, default: float = 0.0) -> float:
    """An aggregate's value as ``float`` (``default`` when the column was empty or all null)."""
    if value is None:
        return default
    return float(value)
