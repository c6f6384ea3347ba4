"""Where the compiled Kineto scanner (``_kineto.c``) puts what it reads: its string and int slots, and the args keys
it reads into them. Without numpy or polars: the parse's head start (:mod:`.headstart`) asks for the same slots as
:func:`kernscope.load.fastscan.scan` before either is imported."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .argspec import ARG_FIELDS, LOADER_ARGS

#: the scanner's fixed string slots and time slots (the order of the enums in _kineto.c)
FIXED_STRINGS = ("ph", "cat", "name", "pid", "tid", "flow_id")
FIXED_INTS = ("ts", "dur")
#: target size of one chunk of events (JSON text) for the compiled scanner. Its per-piece cost is mostly fixed (the
#: piece's table, dictionary and outputs): cold ``analyze`` of 200 MB replicas 4-12% faster than in 4 MB pieces on five
#: classes of six (owlv2 the same), the same peak RSS (docs/performance.md, session 21; 16 MB: +70 MB peak)
CHUNK_BYTES = 8 << 20
#: where a document's event array begins (after its ``[``), within :data:`HEAD_LIMIT` bytes of its start; a UTF-8 byte
#: order mark first is read as a blank. The splitter (:mod:`.document`) and the head start (:mod:`.headstart`) both
#: find the array so
EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
HEAD_LIMIT = 64 << 20
UTF8_BOM = b"\xef\xbb\xbf"
#: ``_kineto.c``'s mark of a string slot that takes its arg's JSON text as written (``RAW_SLOT``)
RAW_SLOT = 1 << 40
#: (args key, column) pairs read as their JSON text (:func:`kernscope.load.fastscan.scan`'s ``texts``)
Texts = tuple[tuple[str, str], ...]
#: the args columns a scan reads (None: all)
Args_ = tuple[str, ...] | None


@dataclass(frozen=True)
class Slots:
    """The args a scan reads and where each goes: ``slots[k]`` >= 0 a string slot, -(j + 1) int slot j, a string slot
    plus :data:`RAW_SLOT` for one read as its JSON text; ``keys[k]`` the arg's key as the trace writes it."""

    keys: tuple[bytes, ...]
    slots: tuple[int, ...]
    strings: tuple[str, ...]  #: column of each string slot (the fixed ones first)
    ints: tuple[str, ...]  #: column of each int slot (ts and dur first)


@lru_cache(maxsize=16)
def slots_of(args: Args_, texts: Texts = ()) -> Slots:
    """The slots of a scan reading the args columns ``args`` (None: all; the loader's own always) and ``texts``."""
    wanted = [f for f in ARG_FIELDS if args is None or f.column in args or f.column in LOADER_ARGS]
    strings, ints = list(FIXED_STRINGS), list(FIXED_INTS)
    slots = []
    for f in wanted:
        if f.kind == "int":
            slots.append(-(len(ints) + 1))
            ints.append(f.column)
        else:
            slots.append(len(strings))
            strings.append(f.column)
    for _, column in texts:
        slots.append(len(strings) + RAW_SLOT)
        strings.append(column)
    keys = tuple(f.raw.encode() for f in wanted) + tuple(key.encode() for key, _ in texts)
    return Slots(keys, tuple(slots), tuple(strings), tuple(ints))
