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
from typing import Any

import polars as pl

from ..errors import KernscopeError


def tree_to_hatchet(tree: pl.DataFrame, *, kernel: str = "kernel", device: dict[str, Any] | None = None) -> list[Any]:
    """The hatchet literal of a :func:`~kernscope.intra.stats.scope_tree` table, in Proton's shape."""
    nodes: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {"frame": {"name": kernel, "type": "function"}, "metrics": {}, "children": []}
    for r in tree.sort("depth", "path").iter_rows(named=True):
        node: dict[str, Any] = {
            "frame": {"name": r["name"], "type": "function"},
            "metrics": {"count": int(r["count"]), "time (ns)": float(r["total_ns"]), "cycles": float(r["total_cycles"]),
                        "normalized_cycles": float(r["normalized_cycles"]), "mean_time (ns)": float(r["mean_ns"]),
                        "min_time (ns)": float(r["min_ns"]), "max_time (ns)": float(r["max_ns"])},
            "children": []}
        parent = r["path"].rsplit("/", 1)[0] if "/" in r["path"] else None
        (nodes[parent]["children"] if parent in nodes else top["children"]).append(node)
        nodes[r["path"]] = node
    root = {"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": [top]}
    return [root, device or {}]


#: metrics that describe one execution (not summed over a subtree)
_PER_EXECUTION = ("mean_", "avg_", "min_", "max_")


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
    while stack:  # one step per node of a small tree (a file's scopes), not per event
        node, prefix, ancestors = stack.pop()
        frame = node.get("frame") or {}
        name = str(frame.get("name", "?"))
        path = f"{prefix}/{name}" if prefix else name
        metrics = node.get("metrics") or {}
        chain = [*ancestors, len(rows)]
        rows.append({"path": path, "name": name, "depth": len(ancestors), "_chain": chain,
                     **{str(k): float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}})
        for child in reversed(node.get("children") or []):
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


def read_hatchet(path: str) -> pl.DataFrame:
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise KernscopeError(f"{path}: cannot read hatchet JSON ({e})") from None
    return hatchet_to_tree(doc, path)
