"""Versioned, declarative spec of the Kineto ``args`` keys that become columns.

Like HTA's arg spec: one table says which raw key becomes which column, of which type,
since which spec version. The decoder struct is generated from this table, so adding a
column is one line here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

#: Bump when the table below changes; it is part of the parse-cache key.
ARG_SPEC_VERSION = 2


@dataclass(frozen=True)
class ArgField:
    raw: str  #: key inside the event's ``args`` object
    column: str  #: column name in the event table
    kind: str  #: "int" (-> Int64), "str" (-> categorical string), "intstr" (int or "0x.." string -> Int64), "any"
    since: int = 1  #: spec version that introduced it


ARG_FIELDS: tuple[ArgField, ...] = (
    ArgField("correlation", "correlation", "int"),
    ArgField("External id", "external_id", "int"),
    ArgField("device", "device", "intstr"),
    ArgField("stream", "stream", "intstr"),
    ArgField("Python id", "python_id", "int"),
    ArgField("Python parent id", "python_parent_id", "int"),
    ArgField("bytes", "bytes", "int"),
    ArgField("Collective name", "collective", "str", since=2),
    ArgField("In msg nelems", "in_msg_nelems", "int", since=2),
    ArgField("Group size", "group_size", "int", since=2),
    ArgField("kind", "gpu_kind", "str", since=2),
    ArgField("name", "meta_name", "any"),
    ArgField("sort_index", "sort_index", "any", since=2),
)

#: Default of absent integer args: lets a column of plain ints go straight into an int64 array.
MISSING_INT = -(2**63)

_PY_TYPES: dict[str, Any] = {
    "int": int | str | None,  # some tracers write numbers as strings ("0x1f", "12") or null
    "str": str | None,
    "intstr": int | str | None,
    "any": Any,
}
_DEFAULTS: dict[str, Any] = {"int": MISSING_INT, "intstr": MISSING_INT, "str": None, "any": None}

#: msgspec struct for ``args``: reads only the keys above, skips the rest without building objects.
Args = msgspec.defstruct(
    "Args",
    [(f.column, _PY_TYPES[f.kind], msgspec.field(default=_DEFAULTS[f.kind], name=f.raw)) for f in ARG_FIELDS],
    frozen=True,
    gc=False,
)

EMPTY_ARGS = Args()
