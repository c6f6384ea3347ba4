"""Hatchet files (op-measure mode): write a scope tree as a hatchet literal, read ours and Proton's back.

A hatchet literal is a JSON list ``[root, device info]``; every node is ``{"frame": {"name", "type"},
"metrics": {...}, "children": [...]}`` (the format ``proton-viewer`` reads). kernscope writes the metrics
``count``, ``time (ns)``, ``cycles``, ``normalized_cycles``, ``avg_time (ns)``, ``min_time (ns)`` and
``max_time (ns)`` per scope, the root holding the sums of the top-level scopes.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from ..errors import KernscopeError


def tree_to_hatchet(tree: pl.DataFrame, *, kernel: str = "kernel", device: dict[str, Any] | None = None) -> list[Any]:
    """The hatchet literal of a :func:`~kernscope.intra.stats.scope_tree` table."""
    nodes: dict[str, dict[str, Any]] = {}
    root: dict[str, Any] = {"frame": {"name": kernel, "type": "function"}, "metrics": {}, "children": []}
    for r in tree.sort("depth", "path").iter_rows(named=True):
        node = {"frame": {"name": r["name"], "type": "function"},
                "metrics": {"count": int(r["count"]), "time (ns)": float(r["total_ns"]), "cycles": float(r["total_cycles"]),
                            "normalized_cycles": float(r["normalized_cycles"]), "avg_time (ns)": float(r["mean_ns"]),
                            "min_time (ns)": float(r["min_ns"]), "max_time (ns)": float(r["max_ns"])},
                "children": []}
        parent = r["path"].rsplit("/", 1)[0] if "/" in r["path"] else None
        (nodes[parent]["children"] if parent in nodes else root["children"]).append(node)
        nodes[r["path"]] = node
    for key in ("count", "time (ns)", "cycles", "normalized_cycles"):
        root["metrics"][key] = float(sum(c["metrics"][key] for c in root["children"]))
    return [root, device or {}]


def hatchet_to_tree(doc: Any, source: str = "hatchet") -> pl.DataFrame:
    """Rows ``path, name, depth`` and every numeric metric of a hatchet literal (Proton's or ours).
    The root node is kept as depth 0."""
    roots = doc[:1] if isinstance(doc, list) and doc and isinstance(doc[0], dict) and "frame" in doc[0] else \
        ([doc] if isinstance(doc, dict) and "frame" in doc else None)
    if not roots:
        raise KernscopeError(f"{source}: not a hatchet file (expected [{{'frame': ..., 'metrics': ..., 'children': ...}}, ...])")
    rows: list[dict[str, Any]] = []
    stack: list[tuple[dict[str, Any], str, int]] = [(roots[0], "", 0)]
    while stack:
        node, prefix, depth = stack.pop()
        frame = node.get("frame") or {}
        name = str(frame.get("name", "?"))
        path = f"{prefix}/{name}" if prefix else name
        metrics = node.get("metrics") or {}
        rows.append({"path": path, "name": name, "depth": depth,
                     **{str(k): float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}})
        for child in reversed(node.get("children") or []):
            if isinstance(child, dict):
                stack.append((child, path, depth + 1))
    return pl.DataFrame(rows, infer_schema_length=None)


def read_hatchet(path: str) -> pl.DataFrame:
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise KernscopeError(f"{path}: cannot read hatchet JSON ({e})") from None
    return hatchet_to_tree(doc, path)
