"""Rendered outputs kept in the parse cache: a second ``analyze`` of an unchanged file with the same
options prints the stored output without loading a table (not even importing polars).

The key is the trace's content hash (through its cache entry) plus everything that shapes the output:
command, format, options, terminal width, rule file content, kernscope version.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .load import cache as _cache
from .load.source import FileIdentity, open_trace

Notify = Callable[[str], None]


def rules_digest(rules: str | None) -> str | None:
    """The content digest of a rules file (None without one), for output-cache keys."""
    if not rules:
        return None
    try:
        return _cache.file_digest(rules)
    except OSError:
        return "unreadable"


def result_key(command: str, options: dict[str, Any], rules: str | None = None) -> dict[str, Any]:
    return {"command": command, **options, "rules": rules_digest(rules)}


def lookup(path: str, load_keys: list[dict[str, Any]], key: dict[str, Any],
           notify: Notify | None) -> tuple[_cache.KnownDigest | _cache.PendingDigest, bytes | None]:
    """(content digest of ``path``, stored output or None). The digest can be handed to
    :func:`kernscope.pipeline.load` so that the file is not hashed twice; it is a pending one (not hashed yet, and
    nothing stored) when no cache entry was ever written for a file of its size. ``load_keys``: the loads' whose
    entries may hold the output, in order (a projected load's, then the whole load's it may read)."""
    open_trace(path).close()  # the same checks and messages as a load (missing file, directory, empty)
    pending = _cache.digest_later(path, FileIdentity.of(path))
    if pending is not None:
        return pending, None
    known = _cache.KnownDigest.of(path)
    entry = _first_entry(known.hexdigest, load_keys, notify)
    return known, (_cache.read_result(entry, key) if entry is not None else None)


def store(digest: _cache.KnownDigest | _cache.PendingDigest, load_keys: list[dict[str, Any]],
          key: dict[str, Any], body: bytes, notify: Notify | None) -> None:
    """Store ``body`` in the first entry of ``load_keys``' (as :func:`lookup` takes them) there is: the one the load
    wrote, or the whole load's it read."""
    # (a pending digest not hashed yet: its load wrote no entry, so there is nowhere to store the output)
    hexdigest = digest.hexdigest if isinstance(digest, _cache.KnownDigest) else digest.known()
    entry = _first_entry(hexdigest, load_keys, notify) if hexdigest is not None else None
    if entry is not None:  # (the entry marked its file's size when it was written: :func:`kernscope.load.cache.mark_size`)
        _cache.write_result(entry, key, body)


def _first_entry(hexdigest: str, load_keys: list[dict[str, Any]], notify: Notify | None) -> _cache.Entry | None:
    """The parse-cache entry of the first of ``load_keys`` stored for the file of ``hexdigest``, or None."""
    for k in load_keys:
        entry = _cache.open_entry(hexdigest, k, notify=notify)
        if entry is not None:
            return entry
    return None


def may_be_stored(path: str) -> bool:
    """False when no output can be stored for ``path`` (none was ever stored for a file of its size), so a
    caller need not wait for its hash before starting other work."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return True
    return _cache.size_seen(size)
