"""Recover the complete events of a truncated trace (a crash mid-write is common)."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ..errors import TraceError
from ..model import RawTrace
from .kineto import decode_events

_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_MAX_TRIES = 20


def salvage_document(data: Any, path: str, *, workers: int | None = None) -> RawTrace:
    """Decode as many whole events as possible from a truncated Kineto document.

    Metadata written before ``traceEvents`` is kept; keys after it are lost with the tail.
    """
    m = _KEY.search(data)
    if m is None:
        raise TraceError(path, "cannot salvage: no 'traceEvents' array found")
    meta: dict[str, Any] = {}
    head = data[: m.start()].rstrip().rstrip(b",")
    try:
        meta = msgspec.json.decode(head + b"}") if head.lstrip().startswith(b"{") else {}
    except msgspec.DecodeError:
        meta = {}
    body = memoryview(data)[m.end() :]
    # A complete array: let the normal path decide.
    tail_window = 4 << 20
    ends: list[int] = []
    lo = max(0, len(body) - tail_window)
    for b in _BOUNDARY.finditer(body, lo):
        ends.append(b.start() + 1)
    last_close = bytes(body).rfind(b"}") if not ends else -1
    if last_close >= 0:
        ends.append(last_close + 1)
    for end in reversed(ends[-_MAX_TRIES:]):
        try:
            ev = decode_events(body[:end], path, workers=workers)
        except TraceError:
            continue
        return RawTrace(ev, meta if isinstance(meta, dict) else {}, salvaged=ev.height)
    raise TraceError(path, "cannot salvage: no complete event could be recovered")
