"""Read intra-kernel results back: raw buffer dumps (.npz), Perfetto traces, Chrome JSON."""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass

import numpy as np
import polars as pl

from ..errors import KernscopeError
from .decode import SCHEMA, Decoded, decode_buffer
from .export import read_perfetto


@dataclass
class Loaded:
    tasks: pl.DataFrame
    decoded: Decoded | None  # present for raw buffers (dropped/unpaired counts)
    source: str


def load_tasks(path: str | os.PathLike[str], task_names: list[str] | None = None) -> Loaded:
    p = str(path)
    if not os.path.isfile(p):
        raise KernscopeError(f"{p}: file not found")
    try:
        if p.endswith(".npz"):
            with np.load(p, allow_pickle=False) as z:
                stored = [str(x) for x in z["task_names"]] if "task_names" in z else []
                names = task_names or stored
                d = decode_buffer(z["buffer"], names)
            return Loaded(d.tasks, d, "buffer")
        if p.endswith(".npy"):
            d = decode_buffer(np.load(p, allow_pickle=False), task_names or [])
            return Loaded(d.tasks, d, "buffer")
        with open(p, "rb") as f:
            head = f.read(1)
        if head in (b"{", b"["):
            with open(p, "rb") as f:
                doc = json.loads(f.read())
            ev = [e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc) if e.get("ph") == "X"]
            t0 = int(doc.get("otherData", {}).get("t0_ns", 0)) if isinstance(doc, dict) else 0
            rows = [
                {"block": e["args"]["block"], "group": e["args"].get("group", 0), "sm": e["args"].get("sm", e["pid"]),
                 "task_type": e["args"].get("task_type", -1), "task": e["name"],
                 "start_ns": t0 + round(e["ts"] * 1000), "end_ns": t0 + round((e["ts"] + e["dur"]) * 1000),
                 "duration_ns": round(e["dur"] * 1000)}
                for e in ev
            ]
            return Loaded(pl.DataFrame(rows, schema=SCHEMA), None, "chrome")
        with open(p, "rb") as f:
            data = f.read()
        t = read_perfetto(data).with_columns(pl.lit(-1).cast(pl.Int64).alias("task_type")).select(list(SCHEMA))
        return Loaded(t, None, "perfetto")
    except KernscopeError as e:
        raise KernscopeError(f"{p}: {e}") from None
    except (ValueError, KeyError, TypeError, zipfile.BadZipFile, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise KernscopeError(f"{p}: not a kernscope intra-kernel buffer or trace ({type(e).__name__}: {e})") from None
