"""The line of the user's code each GPU record's work came from, in a PyTorch trace recorded with ``with_stack=True``.

Kineto records the Python stack as ``python_function`` events (``model.py(42): forward``,
``torch/nn/modules/module.py(1783): _call_impl``, ``<built-in function linear>``) that nest, on the launching thread,
around the CPU ops and the runtime call that launched the kernel. From that call up the call tree
(:func:`kernscope.link.tree.call_tree`), the first Python frame that is not the framework's own
(:data:`FRAMEWORK_FRAMES`: PyTorch, Triton, Python's standard library, built-ins, Inductor's generated code) is the
line of the user's code: the model's, or a model library's (``transformers/models/qwen2/modeling_qwen2.py(276):
forward``). JAX profiles have their lines from the HLO (``hlo_source``, :mod:`kernscope.load.hlo`).

Numpy over the call tree: one step up every unresolved row at a time (a Python stack is a few dozen frames deep),
each distinct frame name parsed once.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import polars as pl

from ..load.hlo import PACKAGE_FILE
from ..model import Trace

#: a Python frame's event name: ``path(line): function``
_FRAME = re.compile(r"^(?P<path>.+)\((?P<line>\d+)\): (?P<function>.+)$")
#: frames that are the framework's, not the user's: PyTorch's own packages, Triton, Inductor's generated modules,
#: installed packages named by their full path, Python's standard library (by its first path component)
FRAMEWORK_FRAMES = re.compile(
    rf"^(torch|torchgen|functorch|triton|torch_tensorrt|apex|tensorrt)/|torchinductor_|{PACKAGE_FILE.pattern}|^<")
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
#: the columns :func:`python_sources` gives the GPU rows
SOURCE_COLUMNS = ("py_source", "py_function")


def user_frame(name: str) -> tuple[str, str] | None:
    """(``path:line``, function) of a ``python_function`` event's name where the frame is the user's code, else None
    (a framework frame, a built-in, ``nn.Module: Linear_0``)."""
    m = _FRAME.match(name)
    if m is None:
        return None
    path = m["path"]
    if FRAMEWORK_FRAMES.search(path) or path.split("/", 1)[0].removesuffix(".py") in _STDLIB:
        return None
    return f"{path}:{m['line']}", m["function"]


def python_sources(trace: Trace, rows: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (GPU rows with ``launch_idx``) with :data:`SOURCE_COLUMNS`: the user's line each one's launch was
    made from (null where the launch is not under such a frame: no Python stack recorded, or none of the user's)."""
    none = rows.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in SOURCE_COLUMNS)
    ev = trace.events
    if rows.height == 0 or "launch_idx" not in rows.columns:
        return none
    py = ev.lazy().filter(pl.col("kind") == "python_function").select("idx", pl.col("name")).collect()
    if py.height == 0:
        return none
    names = py.select(pl.col("name").unique().drop_nulls()).to_series()
    frames = [user_frame(str(n)) for n in names.cast(pl.String).to_list()]
    known = pl.DataFrame({"name": names, "_src": [f[0] if f else None for f in frames],
                          "_fn": [f[1] if f else None for f in frames]}).filter(pl.col("_src").is_not_null())
    users = py.join(known, on="name", how="inner").select("idx", "_src", "_fn")
    if users.height == 0:
        return none
    tree = trace.call_tree.select("idx", "parent_idx")
    top = int(max(int(ev["idx"].max() or 0), 0)) + 1  # type: ignore[arg-type]
    parent = np.full(top, -1, dtype=np.int64)
    parent[tree["idx"].to_numpy()] = tree["parent_idx"].fill_null(-1).to_numpy()
    frame = np.full(top, -1, dtype=np.int64)  # each user frame's row in ``users``, by event idx
    frame[users["idx"].to_numpy()] = np.arange(users.height)
    cur = rows["launch_idx"].fill_null(-1).to_numpy().astype(np.int64)
    cur[(cur < 0) | (cur >= top)] = -1
    found = np.full(cur.size, -1, dtype=np.int64)
    todo = np.flatnonzero(cur >= 0)
    while todo.size:  # (one step up the stack for every row not yet under a user frame)
        at = cur[todo]
        hit = frame[at]
        found[todo[hit >= 0]] = hit[hit >= 0]
        todo = todo[hit < 0]
        cur[todo] = parent[cur[todo]]
        todo = todo[cur[todo] >= 0]
    pick = pl.Series(found).set(pl.Series(found < 0), None)
    got = users.select("_src", "_fn")[pick]
    return rows.with_columns(got["_src"].alias(SOURCE_COLUMNS[0]), got["_fn"].alias(SOURCE_COLUMNS[1]))
