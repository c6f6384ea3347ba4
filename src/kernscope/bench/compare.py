"""Two benchmark runs compared cell by cell (``kernscope bench --compare A.json B.json``): a regression check
across time, machines or versions.

Input: two ``--json`` result files of ``kernscope bench`` (raw samples included). Cells match by (impl, input
parameters); for each, :func:`kernscope.bench.stats.verdict` says whether B is faster, slower or within noise,
with the ratio of medians (B / A, < 1: B faster), its bootstrap interval, the test that fits the samples, its p
value and Cliff's delta. Notes say what moved between the runs: the GPU, software versions, clock locking, and
per cell a median SM clock that differs by more than 2%.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from ..errors import KernscopeError
from .stats import verdict

#: median SM clocks of one cell further apart than this share count as "the clock moved between the runs"
CLOCK_MOVED_PCT = 2.0


@dataclass
class Comparison:
    """One row per cell present in both runs, and what differs between the runs."""

    a: str  #: path of run A
    b: str  #: path of run B
    op: str
    #: impl, input (the parameters, as text), median_a_ms, median_b_ms, ratio (B/A), ratio_low, ratio_high, test,
    #: p_value, cliffs_delta, effect, verdict, sm_mhz_a, sm_mhz_b, clock_moved
    cells: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    only_a: int = 0  #: cells only in A
    only_b: int = 0  #: cells only in B


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except FileNotFoundError:
        raise KernscopeError(f"{path}: no such file") from None
    except (OSError, ValueError) as e:
        raise KernscopeError(f"{path}: not a kernscope bench result file ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list) or "op" not in doc:
        raise KernscopeError(f"{path}: not a kernscope bench result file (write one with kernscope bench --json FILE)")
    return doc


def _cells(doc: dict[str, Any], path: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for r in doc["results"]:
        t = r.get("timing") or {}
        samples = t.get("samples_ms") or []
        if r.get("error") or not samples:
            continue
        key = (str(r["impl"]), "(" + ", ".join(str(v) for v in r.get("x") or []) + ")")
        out[key] = {"samples": [float(s) for s in samples], "sm": t.get("sm_mhz_median")}
    if not out:
        raise KernscopeError(f"{path}: no timed cell with raw samples (was it run with the latency metric?)")
    return out


def _env_notes(ea: dict[str, Any], eb: dict[str, Any]) -> list[str]:
    notes = []
    for key, what in (("gpu", "GPU"), ("torch", "torch"), ("triton", "triton"), ("cuda", "CUDA"), ("driver", "driver")):
        if ea.get(key) != eb.get(key) and (ea.get(key) or eb.get(key)):
            notes.append(f"{what} differs: A {ea.get(key) or '-'}, B {eb.get(key) or '-'}")
    la, lb = (ea.get("clocks") or {}).get("locked"), (eb.get("clocks") or {}).get("locked")
    if la != lb:
        notes.append(f"SM clocks locked in {'A' if la else 'B'} only: timings of the other include boost changes")
    return notes


def compare_runs(path_a: str | os.PathLike[str], path_b: str | os.PathLike[str]) -> Comparison:
    """Compare two ``kernscope bench --json`` files cell by cell (see the module doc)."""
    pa, pb = str(path_a), str(path_b)
    da, db = _read(pa), _read(pb)
    if da["op"] != db["op"]:
        raise KernscopeError(f"{pb}: operator {db['op']} is not {pa}'s {da['op']}: compare runs of one operator")
    ca, cb = _cells(da, pa), _cells(db, pb)
    rows = []
    for key in [k for k in ca if k in cb]:
        a, b = ca[key], cb[key]
        v = verdict(a["samples"], b["samples"])
        sa, sb = a["sm"], b["sm"]
        moved = bool(sa and sb and abs(sa - sb) / max(sa, sb) * 100 > CLOCK_MOVED_PCT)
        ci: list[float] = v["ratio_ci"]  # type: ignore[assignment]
        rows.append({"impl": key[0], "input": key[1], "median_a_ms": statistics.median(a["samples"]),
                     "median_b_ms": statistics.median(b["samples"]), "ratio": v["ratio"],
                     "ratio_low": ci[0], "ratio_high": ci[1], "test": v["test"], "p_value": v["p_value"],
                     "cliffs_delta": v["cliffs_delta"], "effect": v["effect"], "verdict": v["verdict"],
                     "sm_mhz_a": sa, "sm_mhz_b": sb, "clock_moved": moved})
    schema = {"impl": pl.String, "input": pl.String, "median_a_ms": pl.Float64, "median_b_ms": pl.Float64,
              "ratio": pl.Float64, "ratio_low": pl.Float64, "ratio_high": pl.Float64, "test": pl.String,
              "p_value": pl.Float64, "cliffs_delta": pl.Float64, "effect": pl.String, "verdict": pl.String,
              "sm_mhz_a": pl.Float64, "sm_mhz_b": pl.Float64, "clock_moved": pl.Boolean}
    cells = pl.DataFrame(rows, schema=schema)
    notes = _env_notes(da.get("env") or {}, db.get("env") or {})
    if cells.height == 0:
        raise KernscopeError(f"{pa} and {pb} share no (impl, input) cell")
    n_moved = int(cells["clock_moved"].sum())
    if n_moved:
        notes.append(f"{n_moved} cell(s) ran at a median SM clock more than {CLOCK_MOVED_PCT:g}% apart (⚠): their "
                     "difference may be the clock's, not the code's")
    if da.get("dtype") != db.get("dtype") or da.get("mode") != db.get("mode"):
        notes.append(f"dtype/mode differ: A {da.get('dtype')}/{da.get('mode')}, B {db.get('dtype')}/{db.get('mode')}")
    return Comparison(pa, pb, str(da["op"]), cells, notes, len(set(ca) - set(cb)), len(set(cb) - set(ca)))
