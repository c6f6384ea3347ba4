"""The compiled scanners (``_xspace.c``: XSpace lines; ``_kineto.c``: Kineto events) and interval sweep
(``_sweep.c``), loaded with ctypes when the install could build them.

``pip install`` compiles ``kernscope/load/_xspace.c``, ``_kineto.c`` and ``_sweep.c`` (one library) with the machine's C
compiler (an optional extension: without a compiler the install goes on). :func:`scanner` returns it, or None when it is
missing, of another ABI version, or ``KERNSCOPE_NO_NATIVE=1`` asks for the numpy readers (which give the
same columns: ``tests/test_jax.py`` compares both) and polars' joins.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.machinery
import os
from pathlib import Path
from typing import Any

import numpy as np

#: the ABI this Python side speaks (``ks_abi_version()`` in _xspace.c)
ABI_VERSION = 13


@functools.lru_cache(maxsize=1)
def _library() -> Any:
    here = Path(__file__).parent
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        f = here / f"_xspace{suffix}"
        if f.exists():
            try:
                lib = ctypes.CDLL(str(f))
                lib.ks_abi_version.restype = ctypes.c_int64
                if lib.ks_abi_version() != ABI_VERSION:
                    return None
                for fn in ("ks_scan_events", "ks_count_events", "ks_cut_lines", "ks_count_fields", "ks_fields", "ks_innermost", "ks_nest",
                           "ks_search_right"):
                    getattr(lib, fn).restype = ctypes.c_int64
                lib.ks_kineto_scan.restype = ctypes.c_int64
                return lib
            except (OSError, AttributeError):
                return None
    return None


def scanner() -> Any:
    """The compiled library, or None (then the numpy readers run)."""
    if os.environ.get("KERNSCOPE_NO_NATIVE") == "1":
        return None
    return _library()


def innermost(group: np.ndarray, start: np.ndarray, end: np.ndarray, qgroup: np.ndarray, qt: np.ndarray) -> np.ndarray | None:
    """For each query (its group and time, sorted by both), the position of its innermost enclosing interval, or
    -1: among the intervals of its group with ``start <= t <= end``, the latest start, of those the earliest end,
    then the later position. The intervals sorted by (group, start, -end, position). All int64 (any unit, the
    same for all). None when the library is not available (``_sweep.c``: ks_innermost)."""
    lib = scanner()
    if lib is None:
        return None
    cols = [np.ascontiguousarray(a, dtype=np.int64) for a in (group, start, end, qgroup, qt)]
    out = np.empty(len(qt), dtype=np.int64)
    stack = np.empty(max(len(start), 1), dtype=np.int64)
    p = [ctypes.c_void_p(a.ctypes.data) for a in (*cols, out, stack)]
    lib.ks_innermost(p[0], p[1], p[2], ctypes.c_int64(len(start)), p[3], p[4], ctypes.c_int64(len(qt)), p[5], p[6])
    return out


def nest(group: np.ndarray, start: np.ndarray, end: np.ndarray, bleed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The call tree's stack nesting of events sorted by (group, start, -end, row): per event the position of its
    parent in that order, or -1, and its depth (int32, roots 0); an end overrun of at most ``bleed`` still nests
    (:mod:`kernscope.link.tree`). All int64 (any unit, the same for all; ``group`` compared for equality only).
    None when the library is not available (``_sweep.c``: ks_nest)."""
    lib = scanner()
    if lib is None:
        return None
    # (uint64 hashes as int64 wrap: equal stays equal)
    cols: list[np.ndarray] = [np.ascontiguousarray(a, dtype=np.int64) for a in (group, start, end)]
    n = len(cols[1])
    parent = np.empty(n, dtype=np.int64)
    depth = np.empty(n, dtype=np.int32)
    stack = np.empty(max(n, 1), dtype=np.int64)
    p = [ctypes.c_void_p(a.ctypes.data) for a in (*cols, parent, depth, stack)]
    lib.ks_nest(p[0], p[1], p[2], ctypes.c_int64(n), ctypes.c_int64(max(-(1 << 63), min(bleed, (1 << 63) - 1))), p[3], p[4], p[5])
    return parent, depth


def search_right(hay: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``np.searchsorted(hay, q, side="right")`` (int64: how many of ``hay``, sorted, are at or below each of ``q``).
    The compiled library (``_sweep.c``: ks_search_right) starts each search from the previous query's answer, so
    queries that come nearly in order (GPU records by stream and time, nodes by time) cost O(1) each: 6.7 M queries
    into 6.7 M sorted ends 0.30 -> 0.04 s, into 15,500 step starts 0.19 -> 0.01 s (queries in no order: about numpy's
    time). Without the library, numpy's search."""
    lib = scanner()
    if lib is None:
        out: np.ndarray = np.searchsorted(hay, q, side="right")
        return out
    h, x = (np.ascontiguousarray(a, dtype=np.int64) for a in (hay, q))
    out = np.empty(len(x), dtype=np.int64)
    lib.ks_search_right(ctypes.c_void_p(h.ctypes.data), ctypes.c_int64(len(h)), ctypes.c_void_p(x.ctypes.data),
                        ctypes.c_int64(len(x)), ctypes.c_void_p(out.ctypes.data))
    return out


@functools.lru_cache(maxsize=1)
def _libc() -> Any:
    try:
        return ctypes.CDLL("libc.so.6") if os.uname().sysname == "Linux" else None
    except OSError:
        return None


def trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``; elsewhere nothing).

    A parse leaves its per-piece numpy buffers (each under glibc's mmap threshold, so in the heap) freed but mapped,
    and the ``kernscope`` process never trims its heap on its own (:func:`kernscope.oneshot.tune_allocators`),
    while linking and the analysis allocate through polars' allocator, which cannot reuse those pages: without this
    the process's peak holds both. Measured after the parse of 200 MB replicas: peak RSS of a cold ``analyze``
    -10 to -15% (ns-resolution trace 529 -> 448 MB), time unchanged (a few ms)."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(AttributeError):  # a libc without it (musl)
            libc.malloc_trim(0)
