"""Versioned, declarative spec of the Kineto ``args`` keys that become columns.

Like HTA's arg spec: one table says which raw key becomes which column, of which type, since which
spec version. Both decoders (polars' JSON reader and the msgspec fallback) are generated from this
table, so adding a column is one line here and nowhere else. Args not listed here (shapes, strides,
concrete inputs, stacks) cost nothing at load time; :mod:`kernscope.load.opargs` reads them on demand.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Bump when the table below changes; it is part of the parse-cache key.
ARG_SPEC_VERSION = 6
#: Bump when the XSpace stat table or its mapping to the event table (:mod:`.xplane`) changes; part of the key.
XPLANE_SPEC_VERSION = 5


@dataclass(frozen=True)
class ArgField:
    raw: str  #: key inside the event's ``args`` object
    column: str  #: column name in the event table
    #: "int" (-> Int64; integral floats and "0x.."/"12" strings accepted), "str" (-> categorical string),
    #: "text" (-> string, any JSON scalar)
    kind: str
    since: int = 1  #: spec version that introduced it


ARG_FIELDS: tuple[ArgField, ...] = (
    ArgField("correlation", "correlation", "int"),
    ArgField("External id", "external_id", "int"),
    ArgField("device", "device", "int"),
    ArgField("stream", "stream", "int"),
    ArgField("Python id", "python_id", "int"),
    ArgField("Python parent id", "python_parent_id", "int"),
    ArgField("bytes", "bytes", "int"),
    ArgField("Collective name", "collective", "str", since=2),
    ArgField("In msg nelems", "in_msg_nelems", "int", since=2),
    ArgField("Out msg nelems", "out_msg_nelems", "int", since=3),
    ArgField("Group size", "group_size", "int", since=2),
    ArgField("dtype", "comm_dtype", "str", since=3),
    ArgField("Process Group Name", "pg_name", "str", since=3),
    ArgField("Process Group Description", "pg_desc", "str", since=3),
    ArgField("Process Group Ranks", "pg_ranks", "str", since=3),
    ArgField("Rank", "comm_rank", "int", since=3),
    ArgField("Seq", "comm_seq", "int", since=3),
    ArgField("kind", "gpu_kind", "str", since=2),
    ArgField("est. achieved occupancy %", "occupancy_pct", "int", since=4),
    ArgField("registers per thread", "registers", "int", since=4),
    # autograd: the node an op's backward runs for (a forward op and the backward ops of the node it made share it),
    # and, on a backward op, the forward's thread (0 on forward ops)
    ArgField("Sequence number", "seq_num", "int", since=5),
    ArgField("Fwd thread id", "fwd_tid", "int", since=5),
    # ``[memory]`` instant events (``profile_memory=True``): the allocation (+) or free (-) in bytes, the allocator's
    # totals after it, its device (Device Type 0: CPU, 1: CUDA) and the block's address. A whole load reads them for
    # the memory timeline (the file was read a second time for them); a projection that does not name them skips them
    ArgField("Bytes", "mem_bytes", "int", since=6),
    ArgField("Total Allocated", "mem_allocated", "int", since=6),
    ArgField("Total Reserved", "mem_reserved", "int", since=6),
    ArgField("Device Id", "mem_device", "int", since=6),
    ArgField("Device Type", "mem_device_type", "int", since=6),
    ArgField("Addr", "mem_addr", "int", since=6),
    ArgField("name", "meta_name", "text"),
    ArgField("sort_index", "sort_index", "text", since=2),
)

INT_COLUMNS = tuple(f.column for f in ARG_FIELDS if f.kind == "int")
STR_COLUMNS = tuple(f.column for f in ARG_FIELDS if f.kind == "str")
TEXT_COLUMNS = tuple(f.column for f in ARG_FIELDS if f.kind == "text")

#: args the link stage reads (CPU op <-> launch <-> GPU, and GPU placement)
LINK_ARGS = ("correlation", "external_id", "device", "stream")
#: kernel args the findings read (the low-occupancy rule)
KERNEL_ARGS = ("occupancy_pct", "registers")
#: autograd args ``--sources`` reads (a backward kernel's forward op: :mod:`kernscope.analyze.sources`)
AUTOGRAD_ARGS = ("seq_num", "fwd_tid")
#: the ``[memory]`` events' args (:mod:`kernscope.analyze.memory`)
MEMORY_ARGS = ("mem_bytes", "mem_allocated", "mem_reserved", "mem_device", "mem_device_type", "mem_addr")
#: args the loader itself reads (process and thread names from metadata events)
LOADER_ARGS = ("meta_name", "sort_index")
