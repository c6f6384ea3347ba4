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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from ..model import Lazy, Trace, TraceStats
from ..version import __version__
from .argspec import ARG_SPEC_VERSION
from .source import FileIdentity

#: Bump whenever decoding or linking changes what is stored.
CACHE_FORMAT_VERSION = 7
_TABLES = ("events", "gpu", "flows", "steps")


def cache_dir() -> Path:
    env = os.environ.get("KERNSCOPE_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kernscope"


def cache_key(ident: FileIdentity, options: dict[str, Any]) -> str:
    """Key of one (input, options) entry; ``options`` are the JSON-able parse and link options."""
    raw = json.dumps([ident.path, ident.size, ident.mtime_ns, ident.inode, CACHE_FORMAT_VERSION, ARG_SPEC_VERSION,
                      __version__, sorted(options.items())], default=str)
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def read(ident: FileIdentity, options: dict[str, Any], *, path: str,
         make_tree: Callable[[pl.DataFrame], pl.DataFrame]) -> Trace | None:
    """Return the cached trace, or None if absent or unreadable (never raises for a bad cache)."""
    d = cache_dir() / cache_key(ident, options)
    try:
        info: dict[str, Any] = json.loads((d / "info.json").read_text())
        if not all((d / f"{t}.arrow").is_file() for t in _TABLES):
            return None
        gpu = pl.read_ipc(d / "gpu.arrow")
        step_table = pl.read_ipc(d / "steps.arrow")
        events = Lazy(lambda: pl.read_ipc(d / "events.arrow"))
        return Trace(
            path=path, events_table=events, gpu=gpu, flows_table=Lazy(lambda: pl.read_ipc(d / "flows.arrow")),
            steps=step_table, tree_table=Lazy(lambda: make_tree(events.get())),
            stats=TraceStats.from_dict(info["stats"]), metadata=info["metadata"],
            process_names=info["process_names"], thread_names=info["thread_names"], unlinked=info["unlinked"],
            salvaged=info["salvaged"], salvage_skipped=tuple(info["salvage_skipped"]), from_cache=True,
            step_source=info["step_source"],
        )
    except (OSError, ValueError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None


def write(trace: Trace, ident: FileIdentity, options: dict[str, Any]) -> Path | None:
    """Store ``trace`` atomically; returns the cache path, or None if the cache dir is not writable."""
    root = cache_dir()
    final = root / cache_key(ident, options)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    except OSError:
        return None
    try:
        tables = {"events": trace.events, "gpu": trace.gpu, "flows": trace.flows, "steps": trace.steps}
        for name, df in tables.items():
            # uncompressed: a cached reload is then a plain read of Arrow buffers
            df.write_ipc(tmp / f"{name}.arrow", compression="uncompressed")
        info = {
            "path": trace.path,
            "metadata": trace.metadata,
            "process_names": trace.process_names,
            "thread_names": trace.thread_names,
            "unlinked": trace.unlinked,
            "salvaged": trace.salvaged,
            "salvage_skipped": list(trace.salvage_skipped),
            "stats": trace.stats.to_dict(),
            "step_source": trace.step_source,
        }
        (tmp / "info.json").write_text(json.dumps(info, default=str))
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        return final
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return None
