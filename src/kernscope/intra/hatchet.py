"""Hatchet files (op-measure mode): write a scope tree as a hatchet literal, read ours and Proton's back.

A hatchet literal is a JSON list ``[root, device info]``; every node is ``{"frame": {"name", "type"},
"metrics": {...}, "children": [...]}`` (the format ``proton-viewer`` reads). Hatchet takes the metric names
from the *root* node: when the root has metrics, they are exclusive and readers add each subtree up
(``<metric> (inc)``); when the root has none, as in Proton's instrumentation profiles (``ROOT`` → kernel →
scopes), every node's values are shown as written. kernscope writes Proton's shape, so ``proton-viewer``
shows its numbers exactly as it shows Proton's: ``ROOT`` → the kernel → the scope tree, each scope with
its own totals (a parent includes its nested scopes):

* ``count`` (executions), ``time (ns)``, ``cycles`` (ns x clock), ``normalized_cycles`` (per unit that ran
  the scope, Proton's meaning);
* ``mean_time (ns)``, ``min_time (ns)``, ``max_time (ns)``: per execution.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

import msgspec
import polars as pl

from ..errors import KernscopeError
from ..load.document import UTF8_BOM

#: hatchet metric <- scope-tree column (besides ``count``)
_METRICS = (("time (ns)", "total_ns"), ("cycles", "total_cycles"), ("normalized_cycles", "normalized_cycles"),
            ("mean_time (ns)", "mean_ns"), ("min_time (ns)", "min_ns"), ("max_time (ns)", "max_ns"))


def tree_to_hatchet(tree: pl.DataFrame, *, kernel: str = "kernel", device: dict[str, Any] | None = None) -> list[Any]:
    """The hatchet literal of a :func:`~kernscope.intra.stats.scope_tree` table (in its order: depth first), in
    Proton's shape. Parents come from the order and depths, never from parsing paths (a name may hold "/")."""
    top: dict[str, Any] = {"frame": {"name": kernel, "type": "function"}, "metrics": {}, "children": []}
    open_nodes: list[dict[str, Any]] = [top]  # the chain from the kernel down to the last node: a parent per depth
    for r in tree.iter_rows(named=True):  # in the tree's order (depth first: a node right after its parent)
        metrics = {m: float(r[c]) for m, c in _METRICS if r[c] is not None}  # a unit without a clock: left out
        node: dict[str, Any] = {"frame": {"name": r["name"], "type": "function"},
                                "metrics": {"count": int(r["count"]), **metrics}, "children": []}
        del open_nodes[min(int(r["depth"]), len(open_nodes) - 1) + 1:]
        open_nodes[-1]["children"].append(node)
        open_nodes.append(node)
    root = {"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": [top]}
    return [root, device or {}]


#: metrics that describe one execution (not summed over a subtree)
_PER_EXECUTION = ("mean_", "avg_", "min_", "max_")
#: scope trees deeper than this, or whose node paths add up to more text, are refused (as the Kineto reader
#: refuses JSON nested deeper than 1,000 levels)
MAX_DEPTH = 1000
MAX_PATH_CHARS = 256 << 20


def hatchet_to_tree(doc: Any, source: str = "hatchet") -> pl.DataFrame:
    """Rows ``path, name, depth`` and every numeric metric of a hatchet literal (Proton's or ours) as written.
    When the root node has metrics (hatchet's exclusive convention), each additive one of them (not
    ``mean_``/``avg_``/``min_``/``max_``) also gets ``<metric> (inc)``: the sum over the node's subtree, as
    hatchet and ``proton-viewer`` compute it; when the root has none (Proton's and kernscope's intra-kernel
    profiles) the values already are per-scope totals. The root node is kept as depth 0."""
    roots = doc[:1] if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "frame" in doc[0] else \
        ([doc] if isinstance(doc, dict) and "frame" in doc else None)
    if not roots:
        raise KernscopeError(f"{source}: not a hatchet file (expected [{{'frame': ..., 'metrics': ..., 'children': ...}}, ...])")
    rows: list[dict[str, Any]] = []
    stack: list[tuple[dict[str, Any], str, list[int]]] = [(roots[0], "", [])]
    path_chars = 0
    while stack:  # one step per node of a small tree (a file's scopes), not per event
        node, prefix, ancestors = stack.pop()
        if not isinstance(node, dict):
            raise KernscopeError(f"{source}: a hatchet node is {type(node).__name__}, not an object")
        if len(ancestors) > MAX_DEPTH:
            raise KernscopeError(f"{source}: the scope tree is deeper than {MAX_DEPTH:,} levels")
        frame = node.get("frame") or {}
        if not isinstance(frame, dict):
            raise KernscopeError(f"{source}: a hatchet frame is {type(frame).__name__}, not an object")
        name = str(frame.get("name", "?"))
        path = f"{prefix}/{name}" if prefix else name
        path_chars += len(path)
        if path_chars > MAX_PATH_CHARS:  # every node holds its whole path: deep trees of long names grow quadratically
            raise KernscopeError(f"{source}: the scope paths of this tree exceed {MAX_PATH_CHARS >> 20} MB of text "
                                 "(a tree far deeper or wider than a kernel's scopes)")
        metrics = node.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise KernscopeError(f"{source}: the metrics of {path!r} are {type(metrics).__name__}, not an object")
        chain = [*ancestors, len(rows)]
        values = {str(k): v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if any(isinstance(v, int) and abs(v) > 2**63 for v in values.values()):
            raise KernscopeError(f"{source}: a metric of {path!r} does not fit in 64 bits")
        rows.append({"path": path, "name": name, "depth": len(ancestors), "_chain": chain,
                     **{k: float(v) for k, v in values.items()}})
        children = node.get("children") or []
        if not isinstance(children, list):
            raise KernscopeError(f"{source}: the children of {path!r} are {type(children).__name__}, not a list")
        for child in reversed(children):
            if isinstance(child, dict):
                stack.append((child, path, chain))
    df = pl.DataFrame(rows, infer_schema_length=None).with_row_index("_id")
    root_metrics = roots[0].get("metrics") or {}
    metrics = [c for c in df.columns if c in root_metrics and not c.endswith("(inc)") and not c.startswith(_PER_EXECUTION)]
    if metrics:  # inclusive = sum over the subtree: each node adds its own value to itself and every ancestor
        inc = (df.select("_chain", *metrics).explode("_chain")
               .group_by("_chain").agg(pl.col(m).fill_null(0).sum().alias(f"{m} (inc)") for m in metrics)
               .rename({"_chain": "_id"}).with_columns(pl.col("_id").cast(pl.UInt32)))
        df = df.join(inc, on="_id", how="left")
    return df.sort("_id").drop("_id", "_chain")


#: ``intra view -m`` metric -> (column of a scope tree from tasks, metric name in a hatchet file)
VIEW_METRICS = {
    "time/ns": ("total_ns", "time (ns)"),
    "time/us": ("total_ns", "time (ns)"),
    "cycles": ("total_cycles", "cycles"),
    "normalized_cycles": ("normalized_cycles", "normalized_cycles"),
    "count": ("count", "count"),
}


@dataclass(frozen=True)
class MetricChoice:
    """What ``intra view`` shows of a hatchet tree: ``column`` of ``tree`` under the label ``metric``, and a
    ``note`` for the user when it is not what they asked for (or converted)."""

    tree: pl.DataFrame
    column: str
    metric: str
    note: str | None = None


def _column(tree: pl.DataFrame, name: str) -> str | None:
    """The inclusive column of metric ``name`` where hatchet makes one, else the metric as written."""
    for c in (f"{name} (inc)", name):
        if c in tree.columns:
            return c
    return None


def pick_metric(tree: pl.DataFrame, metric: str | None, clock_ghz: float | None, source: str) -> MetricChoice:
    """The metric to show of a hatchet ``tree`` (from :func:`hatchet_to_tree`).

    ``metric`` None: the first of time/ns, cycles, normalized_cycles, count the file has. A time metric on a
    file with cycles only (Proton's instrumentation profiles) converts cycles to ns with ``clock_ghz`` (cycles
    per ns) when given, else shows cycles and says so. Another metric the file lacks falls back to the first
    it has, with a note; a file with none of them raises :class:`KernscopeError` naming what it has."""
    have = [m for m in VIEW_METRICS if _column(tree, VIEW_METRICS[m][1])]
    if not have:
        names = [c for c in tree.columns if c not in ("path", "name", "depth") and not c.endswith("(inc)")]
        raise KernscopeError(f"{source}: none of the metrics intra view shows ({', '.join(VIEW_METRICS)}) is in this "
                             f"hatchet file; it has: {', '.join(names) or 'no numeric metric'}")
    if metric is None:
        m = have[0]
        return MetricChoice(tree, _column(tree, VIEW_METRICS[m][1]) or "", m)
    col = _column(tree, VIEW_METRICS[metric][1])
    if col is not None:
        return MetricChoice(tree, col, metric)
    cycles = _column(tree, "cycles")
    if metric.startswith("time/") and cycles is not None:
        if clock_ghz:
            conv = tree.with_columns((pl.col(cycles) / clock_ghz).alias("_time_ns"))
            return MetricChoice(conv, "_time_ns", metric,
                                f"{source}: no time in this file; its cycles are shown as time at --clock-ghz {clock_ghz:g}")
        return MetricChoice(tree, cycles, "cycles",
                            f"{source}: no time in this file (Proton's instrumentation counts cycles); showing cycles "
                            f"(--clock-ghz G converts them to time)")
    fallback = have[0]
    return MetricChoice(tree, _column(tree, VIEW_METRICS[fallback][1]) or "", fallback,
                        f"{source}: no {VIEW_METRICS[metric][1]!r} in this file; showing {fallback} "
                        f"(it has: {', '.join(have)})")


def without_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte order mark (RFC 8259 lets a reader ignore one)."""
    return data[len(UTF8_BOM):] if data.startswith(UTF8_BOM) else data


def parse_json(data: bytes | str, source: str) -> Any:
    """JSON text of an intra-kernel file; nesting deeper than Python's decoder can follow (about 1,000 levels,
    the Kineto reader's bound too) is one clear error, not a RecursionError."""
    try:
        return json.loads(data)
    except RecursionError:
        raise KernscopeError(f"{source}: JSON nested deeper than 1,000 levels") from None


#: Proton's periodic flushing writes one file per phase: ``<name>.part_<N>.<format>``
_PART = re.compile(r"^(?P<base>.+)\.part_(?P<n>\d{1,9})\.(?P<ext>hatchet|hatchet_msgpack|chrome_trace)$")


def part_files(path: str) -> list[str]:
    """The files of one profile: ``path`` itself, or, for a part of Proton's periodic flushing (``x.part_3.hatchet``)
    or the name they share (``x`` when only ``x.part_N.<format>`` files exist), every part in phase order."""
    folder, name = os.path.split(path)
    m = _PART.match(name)
    if m is None and os.path.exists(path):
        return [path]
    base, ext = (m.group("base"), m.group("ext")) if m else (name, None)
    found = []
    for other in os.listdir(folder or "."):
        om = _PART.match(other)
        if om and om.group("base") == base and (ext is None or om.group("ext") == ext):
            found.append((om.group("ext"), int(om.group("n")), os.path.join(folder, other)))
    exts = {e for e, _, _ in found}
    if len(exts) > 1:
        raise KernscopeError(f"{path}: parts in several formats ({', '.join(sorted(exts))}); give one part's name")
    return [p for _, _, p in sorted(found)] or [path]


def _decode(data: bytes, source: str) -> Any:
    """A hatchet literal from JSON or from msgpack (Proton's ``hatchet_msgpack``)."""
    first = data[:1]
    if first and (0x90 <= first[0] <= 0x9F or first[0] in (0xDC, 0xDD, 0xDE, 0xDF) or 0x80 <= first[0] <= 0x8F):
        try:
            return msgspec.msgpack.decode(data)
        except (msgspec.DecodeError, RecursionError) as e:
            raise KernscopeError(f"{source}: not a hatchet msgpack file ({e})") from None
    return parse_json(data, source)


def is_hatchet(path: str) -> bool:
    """Whether ``path`` (or its first part) holds a hatchet tree (JSON or msgpack)."""
    try:
        with open(part_files(path)[0], "rb") as f:
            head = without_bom(f.read(4096))
    except (OSError, KernscopeError):
        return False
    stripped = head.lstrip()
    return (stripped[:1] == b"[" and b'"frame"' in stripped) or (bool(head) and head[0] in range(0x90, 0xA0)
                                                                   and b"frame" in head)


def read_hatchet(path: str) -> pl.DataFrame:
    """The scope tree of a hatchet file (JSON or msgpack), or of every part of a periodically flushed profile merged
    (:func:`merge_trees`)."""
    trees = []
    for part in part_files(path):  # a handful of files
        try:
            with open(part, "rb") as f:
                doc = _decode(without_bom(f.read()), part)
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            raise KernscopeError(f"{part}: cannot read hatchet JSON ({e})") from None
        trees.append(hatchet_to_tree(doc, part))
    return merge_trees(trees) if len(trees) > 1 else trees[0]


def merge_trees(trees: list[pl.DataFrame]) -> pl.DataFrame:
    """One tree of several phases' trees: per node (path), additive metrics summed, ``min_``/``max_`` metrics the
    extreme, ``mean_``/``avg_`` ones weighted by the node's ``count`` in each phase (a plain mean without counts)."""
    t = pl.concat(trees, how="diagonal_relaxed").with_row_index("_order")
    metrics = [c for c in t.columns if c not in ("path", "name", "depth", "_order")]
    weight = pl.col("count").fill_null(0) if "count" in t.columns else pl.lit(1.0)

    def agg(c: str) -> pl.Expr:
        if c.startswith("min_"):
            return pl.col(c).min()
        if c.startswith("max_"):
            return pl.col(c).max()
        if c.startswith(("mean_", "avg_")):
            return ((pl.col(c) * weight).sum() / weight.filter(pl.col(c).is_not_null()).sum()).alias(c)
        return pl.when(pl.col(c).is_not_null().any()).then(pl.col(c).sum()).alias(c)  # absent in every phase: null

    return (t.group_by("path", "name", "depth").agg(pl.col("_order").min(), *(agg(c) for c in metrics))
            .sort("_order").drop("_order"))
