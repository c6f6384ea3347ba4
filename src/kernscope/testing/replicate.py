"""Grow a real trace to a chosen size by replicating its events, keeping their bytes as recorded.

Benchmarks must measure what users record, not a generator shaped like the parser. Each replica is
the original event text with only these numbers rewritten, exactly (decimal arithmetic on the text):

- ``ts`` shifted by ``replica * period`` µs (the period is the trace's span rounded up, plus a gap);
- ``correlation``, ``External id``, flow ``id``, ``Python id`` and ``Python parent id`` offset per
  replica so links stay within their replica;
- ``ProfilerStep#N`` renumbered so every replica's steps are distinct.

Keys, args (shapes, strides, concrete inputs, stacks), whitespace and metadata stay as in the source.
:func:`make_rank` makes a trace for another rank of the same job (a small time jitter, a new rank).
"""

from __future__ import annotations

import gzip
import json
import random
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_EVENTS = msgspec.json.Decoder(list[msgspec.Raw])
#: numbers to rewrite, by key; group 1: the key and separator, group 2: the number
_NUM = re.compile(rb'("(ts|correlation|External id|id|Python id|Python parent id)"\s*:\s*)(-?[0-9][0-9.eE+-]*)')
_STEP = re.compile(rb'"ProfilerStep#(\d+)"')
_ID_KEYS = (b"correlation", b"External id", b"id", b"Python id", b"Python parent id")


@dataclass
class ReplicaStats:
    replicas: int
    events: int
    json_bytes: int


def read_json_bytes(path: str | Path) -> bytes:
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def _shift_us(text: bytes, shift_us: int) -> bytes:
    """``text`` (a JSON number in µs) plus an integer number of µs, exactly, keeping its decimals."""
    if shift_us == 0:
        return text
    if b"e" in text or b"E" in text:
        return str(Decimal(text.decode()) + shift_us).encode()
    neg = text.startswith(b"-")
    ip, dot, frac = text.lstrip(b"-").partition(b".")
    value = (-int(ip) if neg else int(ip)) + shift_us
    if neg and frac and value >= 0:  # crossing zero with decimals: exact Decimal path
        return str(Decimal(text.decode()) + shift_us).encode()
    return str(value).encode() + dot + frac


def _split(data: bytes) -> tuple[bytes, list[bytes], bytes]:
    """(text before the events, raw event texts, text after the events)."""
    top = _TOP.decode(data)
    raw = bytes(top["traceEvents"])
    start = data.index(raw)
    inner = raw[1:-1]
    lead = inner[: len(inner) - len(inner.lstrip())]
    trail = inner[len(inner.rstrip()):]
    head = data[:start] + b"[" + lead
    tail = trail + b"]" + data[start + len(raw):]
    return head, [bytes(e) for e in _EVENTS.decode(raw)], tail


def _span_us(events: list[bytes]) -> tuple[int, int]:
    """(first ts, last end) of the events in whole µs (rounded outwards)."""
    lo, hi = None, None
    for m in re.finditer(rb'"ts"\s*:\s*(-?[0-9][0-9.eE+-]*)(?:[^{}]*?"dur"\s*:\s*(-?[0-9][0-9.eE+-]*))?', b"\n".join(events)):
        ts = Decimal(m.group(1).decode())
        end = ts + (Decimal(m.group(2).decode()) if m.group(2) else 0)
        lo = ts if lo is None or ts < lo else lo
        hi = end if hi is None or end > hi else hi
    if lo is None or hi is None:
        return 0, 0
    return int(lo.to_integral_value(rounding="ROUND_FLOOR")), int(hi.to_integral_value(rounding="ROUND_CEILING"))


def _max_ids(events: list[bytes]) -> int:
    best = 0
    for m in _NUM.finditer(b"\n".join(events)):
        key = m.group(2)
        if key in _ID_KEYS and b"." not in m.group(3):
            best = max(best, abs(int(m.group(3))))
    return best


def _max_step(events: list[bytes]) -> int:
    return max((int(m.group(1)) for m in _STEP.finditer(b"\n".join(events))), default=0)


def _rewrite(event_text: bytes, shift_us: int, id_offset: int, step_offset: int) -> bytes:
    def num(m: re.Match[bytes]) -> bytes:
        key, val = m.group(2), m.group(3)
        if key == b"ts":
            return m.group(1) + _shift_us(val, shift_us)
        if id_offset and b"." not in val and val not in (b"0", b"-1"):  # 0/-1 mean "none" in Kineto
            v = int(val)
            return m.group(1) + str(v + id_offset if v > 0 else v - id_offset).encode()
        return m.group(0)

    out = _NUM.sub(num, event_text)
    if step_offset:
        out = _STEP.sub(lambda m: b'"ProfilerStep#%d"' % (int(m.group(1)) + step_offset), out)
    return out


def span_us(src: str | Path) -> int:
    """First event start to last event end of a trace, whole µs (rounded outwards)."""
    lo, hi = _span_us(_split(read_json_bytes(src))[1])
    return hi - lo


def replicate(src: str | Path, dst: str | Path, *, target_bytes: int | None = None, copies: int | None = None,
              gap_us: int = 1000, period_us: int | None = None) -> ReplicaStats:
    """Write ``dst`` (gzip if it ends in .gz): the events of ``src`` repeated until ``target_bytes`` of
    JSON (or ``copies`` times), each replica shifted in time after the previous one: by ``period_us``
    (give the same to every rank of a job so their replicas stay aligned), else the span plus ``gap_us``."""
    head, events, tail = _split(read_json_bytes(src))
    lo, hi = _span_us(events)
    period = period_us if period_us is not None else hi - lo + gap_us
    if period < hi - lo:
        raise ValueError(f"period_us {period} is shorter than the trace's span ({hi - lo} µs)")
    id_step = 10 ** len(str(_max_ids(events) + 1))
    step_step = _max_step(events) + 1
    body = b",".join(events)
    per_copy = len(body) + 1
    n = copies or max(1, -(-(int(target_bytes or 0) - len(head) - len(tail)) // per_copy))
    sep = _separator(head)
    total = 0
    out: Any
    with (gzip.open(dst, "wb", compresslevel=1) if str(dst).endswith(".gz") else open(dst, "wb")) as out:  # noqa: SIM115
        out.write(head)
        total += len(head)
        for r in range(n):
            if r:
                out.write(sep)
                total += len(sep)
            chunk = sep.join(_rewrite(e, r * period, r * id_step, r * step_step) for e in events) if r else sep.join(events)
            out.write(chunk)
            total += len(chunk)
        out.write(tail)
        total += len(tail)
    return ReplicaStats(n, n * len(events), total)


def _separator(head: bytes) -> bytes:
    """The text Kineto puts between events, guessed from the indentation before the first one."""
    indent = head[len(head.rstrip(b" \t")):]
    return b",\n" + indent if head.rstrip(b" \t").endswith(b"\n") else b", "


def make_rank(src: str | Path, dst: str | Path, *, rank: int, world_size: int | None = None, jitter_us: int = 0,
              seed: int = 0) -> None:
    """Another rank of the same job: the same events shifted by a small jitter, ``distributedInfo.rank`` set."""
    head, events, tail = _split(read_json_bytes(src))
    rnd = random.Random(seed * 100_003 + rank)
    shift = rnd.randint(0, jitter_us) if jitter_us else 0
    doc_head = head + b"[]" + tail
    meta: dict[str, Any] = json.loads(doc_head)
    info = dict(meta.get("distributedInfo") or {})
    info["rank"] = rank
    if world_size is not None:
        info["world_size"] = world_size
    meta["distributedInfo"] = info
    meta.pop("traceEvents", None)
    sep = _separator(head)
    with (gzip.open(dst, "wb", compresslevel=1) if str(dst).endswith(".gz") else open(dst, "wb")) as out:  # noqa: SIM115
        out.write(b"{\n" + b"".join(b"  " + json.dumps(k).encode() + b": " + json.dumps(v).encode() + b",\n"
                                    for k, v in meta.items()))
        out.write(b'  "traceEvents": [\n  ')
        out.write(sep.join(_rewrite(e, shift, 0, 0) for e in events))
        out.write(b"\n  ]\n}\n")
