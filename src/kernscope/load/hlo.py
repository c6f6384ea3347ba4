"""The XLA programs a JAX profile carries: one row per HLO instruction, to tell what each kernel does.

``jax.profiler`` stores every compiled module's ``HloProto`` in the ``/host:metadata`` plane (an event
metadata stat named ``Hlo Proto``). XLA names a kernel after the instruction it runs (``fusion.84`` runs
as ``fusion_84``), so the instruction behind a kernel gives what its name may hide: the opcode, the
fusion kind (``kLoop``, ``kInput``, ``kCustom``), the opcodes fused into it, a custom call's target
(``__cudnn$fmhaSoftmaxBackward``, ``__cublas$lt$matmul``) and the JAX op it came from (``op_name``).

Field numbers (``xla/service/hlo.proto``): HloProto.hlo_module 1; HloModuleProto name 1, computations 3, id 5 (the
program id of the kernels' events), schedule 7 (the order each computation runs its instructions in: ``comp`` and
``pos``, read by :mod:`.hlo_align`); HloComputationProto name 1, instructions 2, id 5, root_id 6; HloInstructionProto
name 1, opcode 2, metadata 7, parameter_number 9, fusion_kind 11, custom_call_target 28, called_computation_ids 38
(packed); OpMetadata op_name 2, source_file 3, source_line 4, stack_frame_id 15; HloModuleProto.stack_frame_index 17,
a ``StackFrameIndexProto``: file_names 1, function_names 2, file_locations 3 (file_name_id 1, function_name_id 2,
line 3), stack_frames 4 (file_location_id 1, parent_frame_id 2); its ids count from 1 (0: none).

The ``desc`` column (``hlo:<opcode>:<fusion kind>:<fused opcodes>`` or ``hlo:custom-call:<target>``) is
what the categorizer's ``[[op_category]]`` rules read for JAX kernels whose name says little.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import polars as pl

from .protowire import Fields, fields_of, packed_varints

#: opcodes that only route data inside a fused computation (not what the kernel computes)
_PLUMBING = {"parameter", "tuple", "get-tuple-element", "constant", "bitcast"}
SCHEMA = {"hlo_module": pl.String, "program": pl.Int64, "instruction": pl.String, "kernel": pl.String,
          "opcode": pl.String, "fusion_kind": pl.String, "target": pl.String, "op_path": pl.String, "desc": pl.String,
          "source": pl.String, "function": pl.String, "row": pl.Int64, "comp": pl.Int64, "pos": pl.Int64}
#: ``program`` where a module has no id
NO_PROGRAM = -1


def _text(buf: np.ndarray, f: Fields) -> list[str]:
    return [buf[o : o + n].tobytes().decode("utf-8", "replace") for o, n in zip(f.off.tolist(), f.size.tolist())]


def _scatter_text(buf: np.ndarray, f: Fields, n: int) -> list[str | None]:
    out: list[str | None] = [None] * n
    for i, t in zip(f.msg.tolist(), _text(buf, f)):
        out[i] = t
    return out


def _packed(buf: np.ndarray, off: int, size: int) -> list[int]:
    return packed_varints(bytes(buf[off : off + size]))


def _packed_lists(buf: np.ndarray, f: Fields) -> dict[int, list[int]]:
    """The values of packed repeated varint fields ``f``, per message (several fields of a message: appended),
    decoded at once with numpy."""
    size = f.size.astype(np.int64)
    if not size.sum():
        return {}
    starts = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=starts[1:])
    idx = np.arange(int(starts[-1]), dtype=np.int64) - np.repeat(starts[:-1] - f.off, size)
    b = buf[idx]
    last = starts[1:][size > 0] - 1
    if (b[last] >= 0x80).any():  # a payload that ends inside a varint (damaged): the plain reader drops it
        out: dict[int, list[int]] = {}
        for i, o, k in zip(f.msg.tolist(), f.off.tolist(), f.size.tolist()):
            out.setdefault(i, []).extend(_packed(buf, o, k))
        return out
    end = b < 0x80
    which = np.cumsum(end) - end  # each byte's varint
    first = np.flatnonzero(np.r_[True, end[:-1]])
    shift = (np.arange(b.size) - first[which]) * 7
    part = np.where(shift < 64, (b & 0x7F).astype(np.uint64) << np.minimum(shift, 63).astype(np.uint64), 0)
    values = np.add.reduceat(part, first)  # a varint's 7-bit groups never overlap: their sum is their OR
    owner = np.repeat(f.msg, size)[end]
    out = {}
    for i, v in zip(owner.tolist(), values.tolist()):
        out.setdefault(i, []).append(v)
    return out


def instructions(buf: np.ndarray, protos: list[tuple[int, int]]) -> tuple[pl.DataFrame, Works]:
    """One row per instruction of every module in ``protos`` (offset, size of each ``HloProto``; ``row``: the
    instruction's number for :meth:`Works.of`), and the work model of those instructions."""
    if not protos:
        return pl.DataFrame(schema=SCHEMA), Works()
    po = np.array([p[0] for p in protos], dtype=np.int64)
    ps = np.array([p[1] for p in protos], dtype=np.int64)
    top = fields_of(buf, po, po + ps, what="HloProto").of(1, 2)
    mod = fields_of(buf, top.off, top.off + top.size, what="HloModuleProto")
    mod_name = _scatter_text(buf, mod.of(1, 2), len(top))
    # the module's id: the program id XLA's kernel events carry (two programs may share a name: a function compiled
    # for two shapes, JAX's ``jit_copy`` for every array it copied)
    mod_id = np.full(len(top), NO_PROGRAM, dtype=np.int64)
    mi = mod.of(5, 0)
    mod_id[mi.msg] = mi.value.view(np.int64)
    comps = mod.of(3, 2)
    cf = fields_of(buf, comps.off, comps.off + comps.size, what="HloComputationProto")
    comp_module = comps.msg  # computation -> module row
    comp_id = np.full(len(comps), -1, dtype=np.int64)
    cid = cf.of(5, 0)
    comp_id[cid.msg] = cid.value.view(np.int64)
    ins = cf.of(2, 2)
    inf = fields_of(buf, ins.off, ins.off + ins.size, what="HloInstructionProto")
    n = len(ins)
    name = _scatter_text(buf, inf.of(1, 2), n)
    opcode = _scatter_text(buf, inf.of(2, 2), n)
    kind = _scatter_text(buf, inf.of(11, 2), n)
    target = _scatter_text(buf, inf.of(28, 2), n)
    md = inf.of(7, 2)
    meta = fields_of(buf, md.off, md.off + md.size, what="OpMetadata")
    mdf = meta.of(2, 2)
    op_path: list[str | None] = [None] * n
    for i, t in zip(md.msg[mdf.msg].tolist(), _text(buf, mdf)):
        op_path[i] = t
    ins_comp = ins.msg  # instruction -> computation row
    ins_module = comp_module[ins_comp]
    source, function = _sources(buf, mod, md, meta, ins_module, n)
    # opcodes of each computation (per module), for what a fusion computes
    ops_of: dict[tuple[int, int], set[str]] = {}
    for m, c, op in zip(ins_module.tolist(), comp_id[ins_comp].tolist(), opcode):
        if op and op not in _PLUMBING:
            ops_of.setdefault((m, c), set()).add(op)
    called_of = _packed_lists(buf, inf.of(38, 2))
    called_v = inf.of(38, 0)  # unpacked encoding
    for i, v in zip(called_v.msg.tolist(), called_v.value.tolist()):
        called_of.setdefault(i, []).append(int(v))
    desc: list[str | None] = [None] * n
    for i in range(n):
        op = opcode[i]
        if op == "fusion":
            fused: set[str] = set()
            for c in called_of.get(i, []):
                fused |= ops_of.get((int(ins_module[i]), c), set())
            desc[i] = f"hlo:fusion:{kind[i] or ''}:{','.join(sorted(fused))}"
        elif op == "custom-call":
            desc[i] = f"hlo:custom-call:{target[i] or ''}"
        elif op:
            desc[i] = f"hlo:{op}"
    modules = [mod_name[m] for m in ins_module.tolist()]
    comp, pos = _schedule(buf, mod, inf, ins_module, comp_id[ins_comp], n)
    out = pl.DataFrame({"hlo_module": modules, "program": mod_id[ins_module], "instruction": name, "opcode": opcode, "fusion_kind": kind,
                        "target": target, "op_path": op_path, "desc": desc, "source": source, "function": function,
                        "row": np.arange(n, dtype=np.int64),
                        "comp": comp, "pos": pos},
                       schema={k: v for k, v in SCHEMA.items() if k != "kernel"})
    out = out.with_columns(pl.col("instruction").str.replace_all(".", "_", literal=True).alias("kernel"))
    out = pl.concat([out.select(list(SCHEMA)), _named_kernels(buf, inf, target, out)])
    table = out.filter(pl.col("instruction").is_not_null()).unique(["hlo_module", "program", "kernel"], keep="first",
                                                                   maintain_order=True)
    roots: dict[tuple[int, int], int] = {}  # (module row, computation id) -> its root instruction's id
    rid = cf.of(6, 0)
    for c, r in zip(rid.msg.tolist(), rid.value.view(np.int64).tolist()):
        roots[(int(comp_module[c]), int(comp_id[c]))] = r
    return table, Works(lambda: _model(buf, inf, n, name, opcode, ins_module, comp_id[ins_comp], called_of, target,
                                       roots))


def _sources(buf: np.ndarray, mod: Fields, md: Fields, meta: Fields, ins_module: np.ndarray,
             n: int) -> tuple[list[str | None], list[str | None]]:
    """Each instruction's line of the program's source (``path:line``) and the function it is in: the frame its
    metadata's ``stack_frame_id`` names in its module's stack frame index (JAX since 0.4.3x: the innermost frame of
    the user's code, JAX's own frames left out by JAX), else its ``source_file`` and ``source_line`` (older JAX, no
    function). ``md``: the instructions' metadata fields (``md.msg``: the instruction), ``meta``: their fields."""
    source: list[str | None] = [None] * n
    function: list[str | None] = [None] * n
    files = meta.of(3, 2)
    lines = {m: v for m, v in zip(meta.of(4, 0).msg.tolist(), meta.of(4, 0).value.view(np.int64).tolist())}
    for m, path in zip(files.msg.tolist(), _text(buf, files)):
        if path:
            line = lines.get(m, 0)
            source[int(md.msg[m])] = f"{path}:{line}" if line > 0 else path
    ids = meta.of(15, 0)
    index = mod.of(17, 2)
    if len(ids) == 0 or len(index) == 0:
        return source, function
    frames = _frames(buf, index)
    for m, fid in zip(ids.msg.tolist(), ids.value.view(np.int64).tolist()):
        i = int(md.msg[m])
        found = frames.get(int(ins_module[i]))
        if found is not None and 0 < fid <= len(found) and found[fid - 1] is not None:
            source[i], function[i] = found[fid - 1]
    return source, function


def _frames(buf: np.ndarray, index: Fields) -> dict[int, list[tuple[str, str | None] | None]]:
    """Per module (its row: ``index.msg``), by frame id - 1 of its ``StackFrameIndexProto`` (``index``: those fields
    of the modules), the (``path:line``, function) of the innermost frame of the user's code from that frame: the frame
    itself, or where it is in an installed package (``site-packages``, ``dist-packages``) its first caller outside
    them (the frame itself where there is none); None where a frame's ids point nowhere."""
    f = fields_of(buf, index.off, index.off + index.size, what="StackFrameIndexProto")
    names: dict[int, list[list[str]]] = {k: [[] for _ in range(len(index))] for k in (1, 2)}
    for k in (1, 2):
        got = f.of(k, 2)
        for m, t in zip(got.msg.tolist(), _text(buf, got)):
            names[k][m].append(t)

    def records(field: int, what: str) -> list[list[dict[int, int]]]:
        spans = f.of(field, 2)
        sub = fields_of(buf, spans.off, spans.off + spans.size, what=what)
        rec: list[dict[int, int]] = [{} for _ in range(len(spans))]
        for j, k, w, v in zip(sub.msg.tolist(), sub.field.tolist(), sub.wire.tolist(), sub.value.tolist()):
            if w == 0:
                rec[j][k] = v
        per: list[list[dict[int, int]]] = [[] for _ in range(len(index))]
        for j, m in enumerate(spans.msg.tolist()):
            per[m].append(rec[j])
        return per

    locations = records(3, "StackFrameIndexProto.FileLocation")
    stack = records(4, "StackFrameIndexProto.StackFrame")
    out: dict[int, list[tuple[str, str | None] | None]] = {}
    for j, module in enumerate(index.msg.tolist()):
        files, funcs, locs = names[1][j], names[2][j], locations[j]
        own: list[tuple[str, str | None, bool] | None] = []  # each frame's (path:line, function, in a package)
        for fr in stack[j]:
            loc = fr.get(1, 0)
            where = locs[loc - 1] if 0 < loc <= len(locs) else None
            file_id, func_id = (where.get(1, 0), where.get(2, 0)) if where is not None else (0, 0)
            if where is None or not 0 < file_id <= len(files):
                own.append(None)
                continue
            line, path = where.get(3, 0), files[file_id - 1]
            own.append((f"{path}:{line}" if line > 0 else path, funcs[func_id - 1] if 0 < func_id <= len(funcs) else None,
                        PACKAGE_FILE.search(path) is not None))
        parent = [fr.get(2, 0) for fr in stack[j]]
        frames: list[tuple[str, str | None] | None] = []
        for k, first in enumerate(own):
            # the innermost frame of the user's code: up the callers while a frame is in an installed package (a
            # library's own code: Transformer Engine's attention called from the user's layer), else the innermost
            at, seen = first, 0
            fid = k + 1
            while at is not None and at[2] and seen < len(own):
                fid = parent[fid - 1]
                seen += 1
                if not 0 < fid <= len(own) or own[fid - 1] is None:
                    at = first
                    break
                at = own[fid - 1]
            frames.append(None if at is None else (at[0], at[1]))
        out[int(module)] = frames
    return out


#: a file of an installed package (not the user's own code)
PACKAGE_FILE = re.compile(r"[/\\](site|dist)-packages[/\\]")


def _schedule(buf: np.ndarray, mod: Fields, inf: Fields, ins_module: np.ndarray, ins_comp: np.ndarray,
              n: int) -> tuple[np.ndarray, pl.Series]:
    """Each instruction's computation id and its position in that computation's schedule (null where the module
    holds no schedule, or the instruction is not in it): ``HloModuleProto.schedule`` (7), an ``HloScheduleProto``
    whose ``sequences`` (1) map a computation id (1) to an ``InstructionSequence`` (2) of instruction ids (1)."""
    pos = np.full(n, -1, dtype=np.int64)
    sch = mod.of(7, 2)
    if len(sch) and n:
        ids = np.full(n, -1, dtype=np.int64)
        x = inf.of(35, 0)
        ids[x.msg] = x.value.view(np.int64)
        seqs = fields_of(buf, sch.off, sch.off + sch.size, what="HloScheduleProto").of(1, 2)
        entry = fields_of(buf, seqs.off, seqs.off + seqs.size, what="sequence entry")
        key = entry.of(1, 0)
        val = entry.of(2, 2)
        comp_of_seq = np.full(len(seqs), -1, dtype=np.int64)
        comp_of_seq[key.msg] = key.value.view(np.int64)
        module_of_seq = sch.msg[seqs.msg]
        body = fields_of(buf, val.off, val.off + val.size, what="InstructionSequence")
        packed = _packed_lists(buf, body.of(1, 2))
        for i, v in zip(body.of(1, 0).msg.tolist(), body.of(1, 0).value.tolist()):
            packed.setdefault(i, []).append(int(v))
        where = {(int(m), int(i)): k for k, (m, i) in enumerate(zip(ins_module.tolist(), ids.tolist()))}
        for j, seq in packed.items():  # (j: the value's entry)
            e = int(val.msg[j])
            m = int(module_of_seq[e])
            for p, iid in enumerate(seq):
                k = where.get((m, iid))
                if k is not None and ins_comp[k] == comp_of_seq[e]:
                    pos[k] = p
    return ins_comp.astype(np.int64), pl.Series("pos", pos).set(pl.Series(pos < 0), None)


#: custom calls that run a Triton kernel XLA names after the call's ``name`` (JAX's Pallas on GPU), not the instruction
TRITON_CALLS = ("__gpu$xla.gpu.triton",)
#: custom calls that run a Mosaic GPU kernel (Pallas's Mosaic GPU backend), named ``<its JAX name>_mosaic_gpu_kernel``
MOSAIC_CALLS = ("mosaic_gpu", "mosaic_gpu_v2")
_KERNEL_NAME = re.compile(rb'name = "([^"\\]+)"')


def _named_kernels(buf: np.ndarray, inf: Fields, target: list[str | None], table: pl.DataFrame) -> pl.DataFrame:
    """Rows that name the kernels of the custom calls XLA does not name after their instruction (JAX's Pallas kernels).

    - A Triton call (a ``pallas_call``): XLA names its kernel after the ``name`` in the call's backend config
      (``{..., ir = "...", name = "pallas_matmul", num_warps = 4 : i32}``), and the calls of one name in a module
      ``name``, ``name__1``, ``name__2``, ... in turn, a config it already compiled reusing that kernel: the distinct
      configs of a name numbered in the module's instruction order (on JAX 0.11's H200 profile the grids of the
      kernels so named are their configs' grids).
    - A Mosaic GPU call: its kernel is ``<name>_mosaic_gpu_kernel``, the name the JAX op path gives the call
      (``jit(train_step)/jvp()/entry/mpmd_map`` runs ``entry_mosaic_gpu_kernel``); calls of one name share it (Mosaic
      GPU's attention backward: two calls, both ``anonymous_mosaic_gpu_kernel``), the first in the module's order
      standing for them."""
    rows: list[int] = []
    names: list[str] = []
    module = list(zip(table["hlo_module"].to_list(), table["program"].to_list()))
    calls = [i for i, t in enumerate(target) if t in TRITON_CALLS]
    if calls:
        cfg = inf.of(43, 2)
        want = np.isin(cfg.msg, np.asarray(calls, dtype=cfg.msg.dtype))
        seen: dict[tuple[Any, str], dict[bytes, str]] = {}  # ((module, program), call name) -> config -> its kernel's name
        for i, o, k in zip(cfg.msg[want].tolist(), cfg.off[want].tolist(), cfg.size[want].tolist()):
            text = buf[o : o + k].tobytes()
            found = _KERNEL_NAME.findall(text)  # (a quote inside the IR string is escaped, as \\22)
            if not found:
                continue
            name = found[-1].decode("utf-8", "replace")
            kernels = seen.setdefault((module[i], name), {})
            if text not in kernels:
                n = len(kernels)
                kernels[text] = name if n == 0 else f"{name}__{n}"
            rows.append(i)
            names.append(kernels[text])
    paths = table["op_path"].to_list()
    for i, t in enumerate(target):
        parts = (paths[i] or "").split("/") if t in MOSAIC_CALLS else []
        if len(parts) >= 2 and parts[-2]:
            rows.append(i)
            names.append(f"{parts[-2]}_mosaic_gpu_kernel")
    if not rows:
        return pl.DataFrame(schema=SCHEMA)
    return table[rows].with_columns(pl.Series("kernel", names, dtype=pl.String)).select(list(SCHEMA))


#: the work columns :meth:`Works.of` gives (FLOPs, bytes moved, element type, op class, parameters)
WORK_SCHEMA = {"flops": pl.Float64, "bytes": pl.Float64, "dtype": pl.String, "op_class": pl.String, "params": pl.String}


class Works:
    """FLOPs and bytes of instructions (:mod:`.hlo_work`), from shapes, operands and dot dimensions: computed for
    the instructions asked for (those the trace's kernels ran), not for every instruction of every module."""

    def __init__(self, model: Callable[[], tuple[Any, ...]] | None = None) -> None:
        self._build = model  #: builds the model on first use (None: no instruction)
        self._model: tuple[Any, ...] | None = None
        self._done: dict[int, dict[str, Any]] = {}  #: each instruction's work, once computed (the windows of a profile share it)

    def of(self, rows: list[int]) -> pl.DataFrame:
        """``row`` and the :data:`WORK_SCHEMA` columns of the instructions ``rows`` (rows of :func:`instructions`)."""
        if not rows or self._build is None:
            return pl.DataFrame(schema={"row": pl.Int64, **WORK_SCHEMA})
        if self._model is None:
            self._model = self._build()
        model, done = self._model, self._done
        works = [done[r] if r in done else done.setdefault(r, _work(model, r)) for r in rows]
        return pl.DataFrame({"row": rows, **{k: [w[k] for w in works] for k in WORK_SCHEMA}},
                            schema={"row": pl.Int64, **WORK_SCHEMA})


_NO_WORK: dict[str, Any] = {"flops": None, "bytes": None, "dtype": "", "op_class": "", "params": ""}


def _work(model: tuple[Any, ...], i: int) -> dict[str, Any]:
    from .hlo_work import work

    modules, comps, fused, ids, ins_module, ins_comp, roots = model
    m = int(ins_module[i])
    if (m, int(ins_comp[i])) in fused:
        return _NO_WORK
    try:
        return work(modules[m], comps[m], int(ids[i]), roots.get(m, {}))
    except (KeyError, IndexError):  # an operand or computation the module does not hold: no model
        return _NO_WORK


def _model(buf: np.ndarray, inf: Fields, n: int, name: list[str | None], opcode: list[str | None], ins_module: np.ndarray,
           ins_comp: np.ndarray, called_of: dict[int, list[int]], target: list[str | None],
           roots: dict[tuple[int, int], int]) -> tuple[Any, ...]:
    """Every instruction's shapes, operands and dot dimensions by module, and each computation's root (what
    :func:`.hlo_work.work` reads). A module's instructions are made as :func:`.hlo_work.work` first reads them
    (:class:`_Instrs`): the kernels' instructions, their operands and what they call, not every instruction of every
    module (one object each was 5 µs an instruction, 20-25 ms of a profile's 4,700)."""
    from .hlo_work import Instr

    ids = np.full(n, -1, dtype=np.int64)
    x = inf.of(35, 0)
    ids[x.msg] = x.value.view(np.int64)
    sh = inf.of(3, 2)
    spans: dict[int, tuple[int, int]] = dict(zip(sh.msg.tolist(), zip(sh.off.tolist(), sh.size.tolist())))  # the last
    operands = _packed_lists(buf, inf.of(36, 2))
    contracting: dict[int, tuple[int, ...]] = {}
    dn = inf.of(30, 2)
    if len(dn):
        df = fields_of(buf, dn.off, dn.off + dn.size, what="DotDimensionNumbers").of(1, 2)
        for i, o, k in zip(dn.msg[df.msg].tolist(), df.off.tolist(), df.size.tolist()):
            contracting[i] = tuple(_packed(buf, o, k))
    config = _scatter_text(buf, inf.of(43, 2), n)
    # an fft's type (31: FFT 0, IFFT 1, RFFT 2, IRFFT 3; absent is FFT) and lengths (32, packed), as JAX 0.11 writes them
    fft_len = _packed_lists(buf, inf.of(32, 2))
    ft = inf.of(31, 0)
    fft_type = dict(zip(ft.msg.tolist(), ft.value.tolist()))
    pn = inf.of(9, 0)  # a parameter's number
    param_number = dict(zip(pn.msg.tolist(), pn.value.view(np.int64).tolist()))

    def make(i: int) -> Instr:
        return Instr(name[i] or "", opcode[i] or "", spans.get(i), operands.get(i, []), called_of.get(i, []),
                     contracting.get(i, ()), config[i] or "", buf, target[i] or "",
                     (int(fft_type.get(i, 0)), tuple(fft_len[i])) if i in fft_len else None,
                     int(param_number.get(i, 0)) if opcode[i] == "parameter" else -1)

    # each computation's ids in the instructions' order (a stable sort by module, then computation), and each module's
    # ids -> rows (a stable sort by module: of an id twice in a module the later row, as a dict filled in order keeps)
    m_of, c_of = ins_module.astype(np.int64), ins_comp.astype(np.int64)
    comps: dict[int, dict[int, list[int]]] = {}
    order = np.lexsort((c_of, m_of))
    m_sorted, c_sorted = m_of[order], c_of[order]
    new = np.ones(n, dtype=bool)
    new[1:] = (m_sorted[1:] != m_sorted[:-1]) | (c_sorted[1:] != c_sorted[:-1])
    id_list, bounds = ids[order].tolist(), [*np.flatnonzero(new).tolist(), n]
    for a, b in zip(bounds[:-1], bounds[1:]):
        comps.setdefault(int(m_sorted[a]), {})[int(c_sorted[a])] = id_list[a:b]
    modules: dict[int, _Instrs] = {}
    order = np.argsort(m_of, kind="stable")
    m_sorted = m_of[order]
    new = np.ones(n, dtype=bool)
    new[1:] = m_sorted[1:] != m_sorted[:-1]
    id_list, row_list, bounds = ids[order].tolist(), order.tolist(), [*np.flatnonzero(new).tolist(), n]
    for a, b in zip(bounds[:-1], bounds[1:]):
        modules[int(m_sorted[a])] = _Instrs(dict(zip(id_list[a:b], row_list[a:b])), make)
    # instructions inside a fused computation never run as a kernel of their own: no work of theirs is needed
    fused = {(int(ins_module[i]), c) for i, called in called_of.items() if opcode[i] == "fusion" for c in called}
    by_module: dict[int, dict[int, int]] = {}
    for (m, c), r in roots.items():
        by_module.setdefault(m, {})[c] = r
    return modules, comps, fused, ids, ins_module, ins_comp, by_module


class _Instrs(Mapping[int, Any]):
    """One module's instructions by id (``rows``: id -> the instruction's row), each made by ``make`` when first read
    and kept (a profile's time windows share the model)."""

    def __init__(self, rows: dict[int, int], make: Callable[[int], Any]) -> None:
        self._rows, self._make = rows, make
        self._made: dict[int, Any] = {}

    def __getitem__(self, key: int) -> Any:
        ins = self._made.get(key)
        if ins is None:
            ins = self._made[key] = self._make(self._rows[key])
        return ins

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)
