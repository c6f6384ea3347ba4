"""Parse cache: a linked trace saved as Arrow IPC, keyed by file identity and format version.

Written to a temporary directory and renamed into place, so a crash never leaves a half cache.
Location: ``$KERNSCOPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/kernscope``, else ``~/.cache/kernscope``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from ..model import Trace
from .argspec import ARG_SPEC_VERSION
from .source import FileIdentity

#: Bump whenever decoding or linking changes what is stored.
CACHE_FORMAT_VERSION = 6
_TABLES = ("events", "gpu", "flows", "steps")
#: Read eagerly on a cache hit; the others are read on first use (the default summary needs neither).
_EAGER = ("gpu", "steps")


def cache_dir() -> Path:
    env = os.environ.get("KERNSCOPE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kernscope"


def cache_key(ident: FileIdentity, salvage: bool) -> str:
    from .. import __version__

    raw = json.dumps(
        [ident.path, ident.size, ident.mtime_ns, ident.inode, CACHE_FORMAT_VERSION, ARG_SPEC_VERSION, __version__, salvage]
    )
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def read(ident: FileIdentity, salvage: bool) -> Trace | None:
    """Return the cached trace, or None if absent or unreadable (never raises for a bad cache)."""
    d = cache_dir() / cache_key(ident, salvage)
    try:
        info: dict[str, Any] = json.loads((d / "info.json").read_text())
        tables = {t: pl.read_ipc(d / f"{t}.arrow") for t in _EAGER}
        if not all((d / f"{t}.arrow").is_file() for t in _TABLES):
            return None
    except (OSError, ValueError, pl.exceptions.PolarsError):
        return None

    def lazy(name: str) -> Any:
        return lambda: pl.read_ipc(d / f"{name}.arrow")

    return Trace(path=info["path"], events_source=lazy("events"), flows_source=lazy("flows"), **tables,
                 metadata=info["metadata"], process_names=info["process_names"], thread_names=info["thread_names"],
                 unlinked=info["unlinked"], salvaged=info["salvaged"], from_cache=True, stats=info["stats"])


def write(trace: Trace, ident: FileIdentity, salvage: bool) -> Path | None:
    """Store ``trace`` atomically; returns the cache path, or None if the cache dir is not writable."""
    root = cache_dir()
    final = root / cache_key(ident, salvage)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    except OSError:
        return None
    try:
        for t in _TABLES:
            # uncompressed: a cached reload is then a plain read of Arrow buffers
            getattr(trace, t).write_ipc(tmp / f"{t}.arrow", compression="uncompressed")
        info = {
            "path": trace.path,
            "metadata": trace.metadata,
            "process_names": trace.process_names,
            "thread_names": trace.thread_names,
            "unlinked": trace.unlinked,
            "salvaged": trace.salvaged,
            "stats": trace.stats,
        }
        (tmp / "info.json").write_text(json.dumps(info, default=str))
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return final
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
