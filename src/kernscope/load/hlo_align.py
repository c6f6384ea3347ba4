"""The library kernels of an XLA command buffer, matched to the custom calls they run by the module's schedule.

XLA runs cuBLAS's GEMMs and cuDNN's attention and convolutions inside a command buffer (a CUDA graph) in recent JAX.
Such a kernel is named by its library (``nvjet_sm90_tst_128x128_…``, ``cudnn_generated_fort_native_sdpa_…``) and its
``hlo_op`` is the buffer (``command_buffer_13``): neither names the instruction, so the perf model left it out (20% of
the GPU time of a 200 MB JAX transformer profile, its GEMMs and attention among them).

The buffer runs its instructions in the order of the computation's schedule (``HloModuleProto.schedule``), on one
stream. The kernels XLA generated are named after their instruction (``loop_add_fusion_3``): they are anchors. A run
of unnamed kernels between two anchors ran the custom calls between the anchors' instructions in the schedule (after
the first anchor's in its computation and before the second's in its, when a loop body begins or ends between them).
Of those calls, only the ones whose library can have written the kernel count (:data:`FAMILIES`: a cuBLAS call for
``nvjet_…``, cuDNN's attention for ``cudnn_…sdpa…``); a run is matched only when that leaves no doubt:

- one call: every kernel of the run is that call's (a GEMM and its split-K reduction; cuDNN's attention backward and
  its helpers);
- else each kernel with exactly one call it can be, or as many kernels as calls, each in turn its call's.

Anything else stays unmatched, as before. Where XLA reused its kernels for identical instructions (the forward and its
rematerialized copy under ``jax.checkpoint``), the same run of kernels between the same anchors comes twice a step and
is matched to the same call both times: the remat block's GEMMs read 2 calls a step of one instruction instead of 1 of
each of two of the same shapes (the FLOPs and bytes the same, the instruction named the first's).

Matching reads each distinct run (the anchors and the kernel names between
them) once, not each row: a profile repeats its steps. Copies and memsets (``memcpy128``, ``Memset 0``: XLA's runtime
copies, CUDA memcpy and memset records; ROCm's copy kernels) are neither anchors nor matched: matching them to
copy instructions broke more runs than it matched (the transformer profile 78.8% → 73.8% covered).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import polars as pl

#: a custom call's target prefix -> the kernel names that library writes (a kernel matches a call of its library only)
FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("__cublas", re.compile(r"nvjet|gemm|cutlass|xmma|splitk|cublas|^(void )?(sm\d+|ampere|volta|turing|hopper)_|cijk",
                            re.IGNORECASE)),
    ("__cudnn$fmha", re.compile(r"cudnn|sdpa|fmha|flash|dot_do_o|dq_to_16", re.IGNORECASE)),
    ("__cudnn$conv", re.compile(r"cudnn|conv|xmma|implicit|winograd|fft|wgrad|dgrad|fprop|cutlass", re.IGNORECASE)),
)
#: the runtime's copy and fill kernels inside a buffer (ROCm's ``__amd_rocclr_copyBuffer``; CUDA's copies and memsets are
#: not kernels): not a library call's kernels, neither anchors nor matched
RUNTIME_KERNELS = r"^(memcpy|Memcpy|Memset|memset)|__amd_rocclr_"


def _fits(target: str, kernel: str) -> bool:
    return any(target.startswith(prefix) and rx.search(kernel) for prefix, rx in FAMILIES)


class Schedule:
    """The custom calls of each computation in schedule order, and where each instruction is."""

    def __init__(self, hlo: pl.DataFrame) -> None:
        sched = hlo.filter(pl.col("pos").is_not_null())
        #: (module, instruction) -> (computation, position)
        self.at: dict[tuple[str, str], tuple[int, int]] = {
            (m, i): (c, p) for m, i, c, p in sched.select("hlo_module", "instruction", "comp", "pos").iter_rows()}
        calls = sched.filter(pl.col("opcode") == "custom-call").sort("hlo_module", "comp", "pos")
        #: (module, computation) -> [(position, row, target)] of its custom calls
        self.calls: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
        for m, c, p, r, t in calls.select("hlo_module", "comp", "pos", "row", "target").iter_rows():
            self.calls.setdefault((m, c), []).append((p, r, t or ""))

    def window(self, module: str, first: str | None, last: str | None) -> list[tuple[int, str]] | None:
        """The custom calls (row, target) scheduled between instruction ``first`` and ``last`` (None: the run begins
        or ends the stream's kernels), or None when neither is in the schedule."""
        a = self.at.get((module, first)) if first is not None else None
        b = self.at.get((module, last)) if last is not None else None
        if a is None and b is None:
            return None
        if a is not None and b is not None and a[0] == b[0]:
            if a[1] >= b[1]:
                return None  # (an anchor named by a kernel XLA reused for another instruction: no order to read)
            return [(r, t) for p, r, t in self.calls.get((module, a[0]), []) if a[1] < p < b[1]]
        out = [(r, t) for p, r, t in self.calls.get((module, a[0]), []) if p > a[1]] if a is not None else []
        return out + ([(r, t) for p, r, t in self.calls.get((module, b[0]), []) if p < b[1]] if b is not None else [])


def resolve(kernels: Sequence[str], calls: list[tuple[int, str]]) -> list[int | None]:
    """The call (its row) each kernel of a run ran, or None, by the rules of the module docstring."""
    fits = [[r for r, t in calls if _fits(t, k)] for k in kernels]
    every = {r for f in fits for r in f}
    if len(every) == 1 and all(fits):
        return [next(iter(every))] * len(kernels)
    if all(len(f) == 1 for f in fits):
        return [f[0] for f in fits]
    usable = [(r, t) for r, t in calls if r in every]
    if len(usable) == len(kernels) and all(_fits(t, k) for (r, t), k in zip(usable, kernels)):
        return [r for r, _ in usable]
    return [None] * len(kernels)


def _text_flags(col: pl.Series, test: pl.Expr) -> np.ndarray:
    """``test`` (on the text) of each row of a Categorical column, judged once per distinct value; False for nulls."""
    distinct = col.unique().drop_nulls()
    keep = distinct.filter(pl.DataFrame({"s": distinct.cast(pl.String)}).select(test.fill_null(False))["s"])
    return col.is_in(keep.implode()).fill_null(False).to_numpy()


def _texts(col: pl.Series) -> dict[int, str]:
    """Code -> text of the distinct values of a Categorical column."""
    distinct = col.unique().drop_nulls()
    return dict(zip(distinct.to_physical().to_list(), distinct.cast(pl.String).to_list()))


def match(table: pl.DataFrame, hlo: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(rows of ``table``, the HLO instruction row each ran) for the library kernels of command buffers that the
    schedule matches. ``table``: the decoded events, with ``cat``, ``name``, ``device``, ``stream``, ``ts``,
    ``hlo_module``, ``hlo_op`` and ``hlo_instruction`` (``name``, ``hlo_op``, ``hlo_instruction`` Categorical);
    ``hlo``: :func:`kernscope.load.hlo.instructions`' table. The texts are judged once per category, not per row."""
    none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    if hlo.height == 0 or hlo["pos"].null_count() == hlo.height or table.height == 0:
        return none
    kernel = (table["cat"] == "kernel").fill_null(False).to_numpy() & table["hlo_module"].is_not_null().to_numpy()
    runtime = _text_flags(table["name"], pl.col("s").str.contains(RUNTIME_KERNELS))
    named = table["hlo_instruction"].is_not_null().to_numpy()
    in_buffer = _text_flags(table["hlo_op"], pl.col("s").str.starts_with("command_buffer"))
    take = kernel & ~runtime
    if not (take & ~named & in_buffer).any():
        return none
    rows = np.flatnonzero(take)
    k = pl.DataFrame({"_r": rows, "device": table["device"].gather(rows), "stream": table["stream"].gather(rows),
                      "ts": table["ts"].gather(rows), "_i": table["hlo_instruction"].to_physical().gather(rows),
                      "_buf": in_buffer[rows]})
    # the stream's kernels in time order (the scan's order already, line by line: sorted only where it is not); a run
    # is the unnamed kernels between two anchors (its id: the anchors so far)
    part = pl.struct("device", "stream")
    if not k.select(((pl.col("ts").diff() >= 0) | (part != part.shift())).fill_null(True).all()).item():
        k = k.sort("device", "stream", "ts", "_r")
    # only the unnamed kernels and the kernels beside them (a run's anchors) say anything of a run: a named kernel
    # between named ones neither ends a run nor starts one (the 207 MB profile: 950 k kernels, 297 k of them kept)
    unnamed = k["_i"].is_null().to_numpy()
    near = unnamed.copy()
    near[1:] |= unnamed[:-1]
    near[:-1] |= unnamed[1:]
    if not near.all():
        k = k.filter(pl.Series(near))
    k = k.with_columns(pl.col("_i").is_not_null().cum_sum().over("device", "stream").alias("_run"),
                       pl.col("_i").forward_fill().over("device", "stream").alias("_first"),
                       pl.col("_i").backward_fill().over("device", "stream").alias("_last"))
    runs = k.filter(pl.col("_i").is_null() & pl.col("_buf"))
    runs = runs.with_columns(pl.Series("_n", table["name"].to_physical().gather(runs["_r"]).to_numpy()),
                             pl.Series("_m", table["hlo_module"].to_physical().gather(runs["_r"]).to_numpy()))
    # (a run's kernel names as the list of their codes: joined as text they took a third of the matching's time)
    runs = (runs.group_by("device", "stream", "_run", maintain_order=True)
            .agg(pl.col("_r"), pl.col("_n").alias("_names"), pl.col("_m").first(),
                 pl.col("_first").first(), pl.col("_last").first()))
    keys = ["_m", "_first", "_last", "_names"]
    distinct = runs.unique(keys, keep="first", maintain_order=True)
    # the texts of the codes the distinct runs hold, each read at a row of it (not the distinct values of every
    # kernel row: a 200 MB profile's 950 k): the runs' kernels, their first row's module, one row of each anchor
    anchors = k.lazy().filter(pl.col("_i").is_not_null()).unique("_i", keep="any").select("_r").collect()["_r"]
    name_text = _texts(table["name"].gather(distinct["_r"].explode()))
    module_text = _texts(table["hlo_module"].gather(distinct["_r"].list.first()))
    instr_text = _texts(table["hlo_instruction"].gather(anchors))
    distinct = distinct.select(keys)
    schedule = Schedule(hlo)
    calls: list[list[int]] = []
    for m, first, last, names in distinct.iter_rows():  # (once per distinct run: a profile repeats its steps)
        kernels_of_run = [name_text[int(c)] for c in names]
        window = schedule.window(module_text[int(m)], None if first is None else instr_text[int(first)],
                                 None if last is None else instr_text[int(last)])
        got = resolve(kernels_of_run, window) if window else [None] * len(kernels_of_run)
        calls.append([-1 if c is None else c for c in got])
    distinct = distinct.with_columns(pl.Series("_call", calls, dtype=pl.List(pl.Int64)))
    out = (runs.join(distinct, on=keys, how="left", nulls_equal=True).select("_r", "_call").explode("_r", "_call")
           .filter(pl.col("_call") >= 0))
    return out["_r"].cast(pl.Int64).to_numpy(), out["_call"].to_numpy()
