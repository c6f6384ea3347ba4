"""The compiled library (``_xspace.c``, ``_kineto.c``, ``_sweep.c``) found and loaded with ctypes, without numpy: the
parse's head start (:mod:`.headstart`) loads it while the command still imports numpy and polars. :mod:`.native`
wraps its functions for numpy arrays."""

from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import os
from pathlib import Path
from typing import Any

#: the ABI this Python side speaks (``ks_abi_version()`` in _xspace.c)
ABI_VERSION = 27


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
                for fn in ("ks_scan_events", "ks_count_events", "ks_cut_lines", "ks_time_cuts", "ks_line_index",
                           "ks_count_fields", "ks_fields", "ks_innermost", "ks_nest",
                           "ks_search_right", "ks_union_lengths", "ks_idle_gaps", "ks_clip", "ks_code_range",
                           "ks_distinct_keys", "ks_distinct_number", "ks_mark_used", "ks_window_of", "ks_node_windows",
                           "ks_group_last_max", "ks_chain_depths", "ks_chain_nodes", "ks_kineto_scan", "ks_kineto_head", "ks_load_acquire"):
                    getattr(lib, fn).restype = ctypes.c_int64
                lib.ks_store_release.restype = None
                lib.ks_free_arena.restype = None
                return lib
            except (OSError, AttributeError):
                return None
    return None


def scanner() -> Any:
    """The compiled library, or None (then the numpy readers run)."""
    if os.environ.get("KERNSCOPE_NO_NATIVE") == "1":
        return None
    return _library()
