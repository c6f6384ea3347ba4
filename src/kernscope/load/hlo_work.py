"""What an HLO instruction computes and moves: FLOPs of its matrix products and the bytes of its operands
and results, from the shapes in the profile's ``HloProto`` (the perf model of JAX kernels).

Shapes (``ShapeProto``: element_type 2, dimensions 3, tuple_shapes 4), operands (``operand_ids`` 36),
``dot_dimension_numbers`` (30: lhs/rhs contracting 1/2, lhs/rhs batch 3/4) and a cuBLAS custom call's
``backend_config`` (43, JSON with ``gemm_backend_config.dot_dimension_numbers``) give:

- ``dot``: FLOPs = 2 x (elements of the result) x (product of the lhs contracting dimensions);
- a fusion: the FLOPs of the dots in the computations it calls; bytes = its operands + its result;
- a cuBLAS custom call (``__cublas$gemm``, ``__cublas$lt$matmul``): as a dot of its first two operands; cuDNN's
  convolutions (:func:`_conv_flops`) and fused attention (:func:`_fmha_flops`), and Transformer Engine's fused attention
  (:func:`_te_attention_flops`), from their shapes and config; any other custom call (cuSOLVER, a Pallas kernel) has
  unknown FLOPs (None): counted as 0 they were rated on the bandwidth roof, and a batched QR read "0% of its
  memory-bound roofline";
- an ``fft``: 5 n log2 n per complex transform (half for RFFT and IRFFT), as the PyTorch model's;
- anything else (an elementwise or reduction fusion): a FLOP per result element of each arithmetic instruction in
  it (``add``, ``multiply``, ``exponential``, ... :data:`_ARITH`, transcendentals counted as one, as the PyTorch
  model's elementwise ops) and per input element of each reduction; 0 for pure data movement (copies,
  transposes, broadcasts, converts); rated on the bandwidth roof either way (their arithmetic intensity is low);
  bytes as above, except where it reads or writes only part of a buffer (a slice, a dynamic slice or update, a
  gather or scatter, in it or fused into it): :func:`partial_bytes` then counts what it touches.

Element types are XLA's ``PrimitiveType`` numbers, given here as the Kineto type names the perf model's
dtype table knows.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..flops import fft_flops, sdpa_bwd_flops, sdpa_flops

#: XLA PrimitiveType -> (Kineto type name, bytes per element)
ELEMENT_TYPES: dict[int, tuple[str, float]] = {
    1: ("bool", 1), 2: ("signed char", 1), 3: ("short int", 2), 4: ("int", 4), 5: ("long int", 8),
    6: ("unsigned char", 1), 7: ("short int", 2), 8: ("int", 4), 9: ("long int", 8), 10: ("c10::half", 2),
    11: ("float", 4), 12: ("double", 8), 15: ("c10::complex<float>", 8), 16: ("c10::bfloat16", 2),
    18: ("c10::complex<double>", 16), 19: ("c10::float8_e5m2", 1), 20: ("c10::float8_e4m3fn", 1),
    21: ("c10::float8_e4m3b11fnuz", 1), 22: ("c10::float8_e5m2fnuz", 1), 23: ("c10::float8_e4m3fnuz", 1),
}


#: opcodes that touch only part of a buffer: operand + result sizes would overstate the bytes moved
_PARTIAL = {"dynamic-slice", "dynamic-update-slice", "slice", "gather", "scatter"}
#: elementwise opcodes that compute: a FLOP per element of their result
_ARITH = frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2", "negate", "abs",
    "clamp", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "sqrt", "rsqrt", "cbrt",
    "sine", "cosine", "tan", "erf"})
#: opcodes that apply their computation (``to_apply``) once per element of their first operand
_REDUCING = frozenset({"reduce", "reduce-window"})
#: opcodes whose called computations are part of their work (fused or called bodies; a reduction's scalar
#: ``to_apply`` is not counted again: the reduction counts it per element)
_BODIES = frozenset({"fusion", "call"})


def _arith_flops(module: Mapping[int, Instr], ins: Instr) -> float:
    """The elementwise FLOPs of one instruction: an arithmetic one's result elements, a reduction's input's."""
    if ins.opcode in _ARITH:
        return float(_elements(ins.shape.dims)) if ins.shape is not None and ins.shape.dtype else 0.0
    if ins.opcode in _REDUCING and ins.operands and ins.operands[0] in module:
        first = module[ins.operands[0]].shape
        return float(_elements(first.dims)) if first is not None and first.dtype else 0.0
    return 0.0


@dataclass(frozen=True)
class Shape:
    dtype: str  #: Kineto type name ("" when unknown or a tuple)
    dims: tuple[int, ...]
    bytes: float  #: total bytes (tuples: the sum of their parts)
    first: Shape | None = None  #: a tuple's first element (a custom call's result; its workspace follows); else itself
    #: a tuple's bytes without its trailing scratch (1-D ``s8``/``u8`` elements after the first: a library call's
    #: workspace)
    outputs: float = 0.0


@dataclass
class Instr:
    name: str
    opcode: str
    span: tuple[int, int] | None  #: where its ShapeProto is (read on first use: most shapes are never needed)
    operands: list[int]  #: instruction ids
    called: list[int]  #: computation ids
    contracting: tuple[int, ...] = ()  #: dot: the lhs contracting dimensions
    backend_config: str = ""
    buf: Any = None
    target: str = ""  #: a custom call's target (``__cudnn$convForward``, ...)
    fft: tuple[int, tuple[int, ...]] | None = None  #: an fft's type (FFT 0, IFFT 1, RFFT 2, IRFFT 3) and lengths
    parameter: int = -1  #: a parameter's number (a fused computation's parameter k is its fusion's operand k)

    @functools.cached_property
    def shape(self) -> Shape | None:
        return shape(self.buf, *self.span) if self.span is not None and self.buf is not None else None


def _elements(dims: tuple[int, ...]) -> int:
    return math.prod(dims) if dims else 1


#: cuDNN's (and MIOpen's, under the same names) convolution custom calls: which operand or result is the convolution's
#: output (y, or its gradient) and which its filter (w, or its gradient): "result" or an operand's index
_CONVS: dict[str, tuple[int | str, int | str]] = {
    "__cudnn$convForward": ("result", 1), "__cudnn$convBiasActivationForward": ("result", 1),
    "__cudnn$convBackwardInput": (0, 1), "__cudnn$convBackwardFilter": (1, "result")}


def _conv_flops(ins: Instr, operands: list[Shape | None]) -> tuple[float | None, dict[str, Any]]:
    """A convolution's FLOPs, 2 x (elements of y) x (elements of w) / (w's output features): each output element
    is a dot over w's other dimensions (its input features, grouped, and its window). The output features are the one
    dimension size y and w share, other than 1 (a batch of one, a window of one); where several sizes are shared and
    differ, the FLOPs are unknown (None)."""
    def pick(which: int | str) -> Shape | None:
        if which == "result":
            return ins.shape.first if ins.shape is not None else None
        return operands[int(which)] if int(which) < len(operands) else None

    y_at, w_at = _CONVS[ins.target]
    y, w = pick(y_at), pick(w_at)
    if y is None or w is None or not y.dims or not w.dims:
        return None, {}
    shared = set(y.dims) & set(w.dims)
    if len(shared) > 1:
        shared.discard(1)
    if len(shared) != 1:
        return None, {"y": list(y.dims), "w": list(w.dims)}
    features = shared.pop()
    return 2.0 * _elements(y.dims) * _elements(w.dims) / features, {"y": list(y.dims), "w": list(w.dims)}


def _fft_flops(ins: Instr, operands: list[Shape | None]) -> tuple[float | None, dict[str, Any]]:
    """An fft's FLOPs, as the PyTorch model counts them: 5 n log2 n per complex transform of n points (the product of
    its lengths), half with a real input or output (RFFT, IRFFT); the batch is the complex or real side's elements
    over n (IRFFT: its real result's)."""
    kind, lengths = ins.fft if ins.fft is not None else (0, ())
    n = _elements(lengths)
    side = (ins.shape.first if ins.shape is not None else None) if kind == 3 else (operands[0] if operands else None)
    if side is None or not side.dims or n < 2:
        return None, {}
    batch = _elements(side.dims) // n
    names = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}
    return fft_flops(n, batch, real=kind in (2, 3)), {"fft": names.get(kind, str(kind)), "lengths": list(lengths),
                                                      "batch": batch}


def _fmha_flops(ins: Instr, operands: list[Shape | None], backward: bool) -> tuple[float | None, dict[str, Any]]:
    """cuDNN's fused attention (``__cudnn$fmhaSoftmax...``, what ``jax.nn.dot_product_attention`` runs): Q·Kᵀ and
    P·V over the score matrix its backend config names (``intermediate_tensor_shape``: batch x heads x queries x
    keys), 2 x scores x (d_qk + d_v) FLOPs forward, 2.5 times that backward (dV, dP, dQ, dK and the Q·Kᵀ recompute),
    half of it with a causal mask: the PyTorch model's conventions. Q, K, V are its first three operands, their head
    dimension the last. None where the config or the operands are not readable."""
    try:
        cfg = json.loads(ins.backend_config)["cudnn_fmha_backend_config"]
        scores_dims = [int(x) for x in cfg["intermediate_tensor_shape"]["dimensions"]]
    except (ValueError, TypeError, KeyError):
        return None, {}
    if len(scores_dims) != 4 or len(operands) < 3 or any(o is None or not o.dims for o in operands[:3]):
        return None, {}
    d_qk, d_v = operands[0].dims[-1], operands[2].dims[-1]  # type: ignore[union-attr]
    causal = str(cfg.get("mask_type", "")).upper().startswith("CAUSAL") or bool(cfg.get("is_causal_mask"))
    b, h, n_q, n_kv = scores_dims
    flops = sdpa_bwd_flops(b, h, n_q, n_kv, h, d_qk, d_v, causal) if backward else sdpa_flops(b, h, n_q, n_kv, d_qk, d_v, causal)
    return flops, {"scores": scores_dims, "d_qk": d_qk, "d_v": d_v, "causal": causal}


#: Transformer Engine's JAX fused attention (its XLA FFI custom calls)
TE_ATTENTION = ("te_fused_attn_forward_ffi", "te_fused_attn_backward_ffi")
#: TE's mask types (``NVTE_Mask_Type``) the model knows: no mask; causal, top-left and bottom-right (a padding mask
#: runs over fewer tokens than the maximum lengths the config gives: not modeled)
_TE_MASKS = {0: False, 2: True, 4: True}
#: TE's layouts from ``NVTE_T3HD`` (10) on (``NVTE_QKV_Layout``): the packed (THD) ones, whose lengths vary (the
#: config's maximum an upper bound), then mixed formats and paged KV caches; not modeled
_TE_PACKED_LAYOUTS = 10
_MLIR_ATTR = re.compile(r"(\w+) = (-?[0-9][0-9.e+-]*|true|false)")


def _te_attention_flops(ins: Instr, backward: bool) -> tuple[float | None, dict[str, Any]]:
    """Transformer Engine's fused attention in JAX (``te_fused_attn_forward_ffi``, ``..._backward_ffi``): its backend
    config is the call's attributes (``{attn_heads = 16 : i64, input_batch = 2 : i64, q_max_seqlen = 2048 : i64,
    mask_type = 2 : i64, ...}``), the SDPA model's FLOPs from them (as :func:`_fmha_flops`). None for a padding mask,
    a packed (THD) layout or a sliding window: the lengths the kernel runs over are not in the config."""
    a = {k: v for k, v in _MLIR_ATTR.findall(ins.backend_config)}
    try:
        b, h, h_kv = int(a["input_batch"]), int(a["attn_heads"]), int(a["num_gqa_groups"])
        n_q, n_kv, d_qk, d_v = int(a["q_max_seqlen"]), int(a["kv_max_seqlen"]), int(a["qk_head_dim"]), int(a["v_head_dim"])
        mask, layout = int(a["mask_type"]), int(a.get("qkv_layout", 0))
        window = (int(a.get("window_size_left", -1)), int(a.get("window_size_right", -1)))
    except (KeyError, ValueError):
        return None, {}
    if mask not in _TE_MASKS or layout >= _TE_PACKED_LAYOUTS or window[0] >= 0 or window[1] > 0:
        return None, {"mask_type": mask, "qkv_layout": layout}
    causal = _TE_MASKS[mask]
    flops = sdpa_bwd_flops(b, h, n_q, n_kv, h_kv, d_qk, d_v, causal) if backward else sdpa_flops(b, h, n_q, n_kv, d_qk, d_v, causal)
    return flops, {"scores": [b, h, n_q, n_kv], "kv_heads": h_kv, "d_qk": d_qk, "d_v": d_v, "causal": causal}


def dot_flops(lhs: Shape | None, out: Shape | None, contracting: tuple[int, ...]) -> float | None:
    if lhs is None or out is None or any(c >= len(lhs.dims) for c in contracting):
        return None
    k = math.prod(lhs.dims[c] for c in contracting) if contracting else 1
    return 2.0 * _elements(out.dims) * k


def _cublas_contracting(config: str) -> tuple[int, ...] | None:
    """The lhs contracting dimensions of a cuBLAS call's backend config (None: not a GEMM config)."""
    if "gemm_backend_config" not in config:
        return None
    try:
        dn = json.loads(config)["gemm_backend_config"]["dot_dimension_numbers"]
        return tuple(int(x) for x in dn.get("lhs_contracting_dimensions", []))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def shape(buf: Any, off: int, size: int, depth: int = 0) -> Shape | None:
    """A ``ShapeProto`` at ``buf[off:off+size]`` (tuples summed, 8 levels deep at most). Plain Python over the
    few bytes of one shape (thousands of instructions: numpy per field would cost more than the reading)."""
    return _shape(bytes(buf[off : off + size]), depth)


def _shape(data: bytes, depth: int) -> Shape | None:
    code, dims, parts, p, n = 0, [], [], 0, len(data)
    while p < n:
        tag, p = _read(data, p)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            v, p = _read(data, p)
            if field == 2:
                code = v
            elif field == 3:
                dims.append(v)
        elif wire == 2:
            ln, p = _read(data, p)
            chunk = data[p : p + ln]
            p += ln
            if field == 3:  # packed dimensions
                q = 0
                while q < len(chunk):
                    v, q = _read(chunk, q)
                    dims.append(v)
            elif field == 4 and depth < 8:
                parts.append(_shape(chunk, depth + 1))
        elif wire in (1, 5):
            p += 8 if wire == 1 else 4
        else:
            return None  # not a ShapeProto we can read
    if parts:
        kept = list(parts)
        while len(kept) > 1 and kept[-1] is not None and kept[-1].dtype in ("signed char", "unsigned char") and len(kept[-1].dims) == 1:
            kept.pop()
        return Shape("", (), float(sum(x.bytes for x in parts if x is not None)), parts[0],
                     float(sum(x.bytes for x in kept if x is not None)))
    name, width = ELEMENT_TYPES.get(code, ("", 0.0))
    d = tuple(x if x < 2**62 else 0 for x in dims)
    s = Shape(name, d, float(_elements(d) * width))
    return Shape(s.dtype, s.dims, s.bytes, s)


def _read(data: bytes, p: int) -> tuple[int, int]:
    v = shift = 0
    while p < len(data):
        b = data[p]
        p += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, p
        shift += 7
    return v, p


def work(module: Mapping[int, Instr], comps: dict[int, list[int]], instr_id: int,
         roots: dict[int, int] | None = None) -> dict[str, Any]:
    """FLOPs (None: a matrix product whose shapes are not usable), bytes, dtype, class and parameters of
    instruction ``instr_id`` of ``module`` (id -> Instr; ``comps``: computation id -> its instruction ids; ``roots``:
    computation id -> its root instruction's id, what :func:`partial_bytes` reads)."""
    ins = module[instr_id]
    operands = [module[o].shape for o in ins.operands if o in module]
    in_bytes = sum(s.bytes for s in operands if s is not None)
    out_bytes = ins.shape.bytes if ins.shape is not None else 0.0
    if ins.opcode == "custom-call" and ins.shape is not None and ins.shape.first is not None and not ins.shape.dtype:
        # (a library call's result tuple: its outputs, then its workspace: cuDNN's attention backward writes dQ, dK and
        # dV; only dQ was counted)
        out_bytes = ins.shape.outputs
    flops: float | None = 0.0
    params: dict[str, Any] = {}
    op_class = "XLA fusion" if ins.opcode == "fusion" else f"XLA {ins.opcode}"
    # (a multi-output fusion's result is a tuple: its first element's type)
    dtype = (ins.shape.dtype or (ins.shape.first.dtype if ins.shape.first is not None else "")) if ins.shape is not None else ""
    dots: list[Instr] = []
    partial = ins.opcode in _PARTIAL
    needs: _Needs | None = None
    arith = _arith_flops(module, ins)
    if ins.opcode == "dot":
        dots = [ins]
    elif ins.opcode == "fusion":
        seen: set[int] = set()
        todo = [(c, True) for c in ins.called]
        top = set(comps.get(ins.called[0], [])) if len(ins.called) == 1 else set()
        each: list[tuple[int, float]] = []  # (instruction, its elementwise FLOPs)
        while todo:  # the fused computation, and those it calls (nested fusions; a reduction's scalar computation
            # is searched for dots but its arithmetic is not counted again: the reduction counts it per element)
            c, counted = todo.pop()
            if c in seen:
                continue
            seen.add(c)
            for i in comps.get(c, []):
                sub = module[i]
                if sub.opcode == "dot":
                    dots.append(sub)
                partial |= sub.opcode in _PARTIAL
                if counted:
                    each.append((i, _arith_flops(module, sub)))
                todo += [(d, counted and sub.opcode in _BODIES) for d in sub.called]
        needs = _needs(module, comps, roots or {}, instr_id) if partial else None
        # (where the fusion reads part of a buffer, an op of its body computes only the elements its results need)
        arith = float(sum(round(f * (min(needs.share.get(i, 0.0), 1.0) if needs is not None and i in top else 1.0))
                          for i, f in each))
    gemm: list[tuple[Shape | None, Shape | None, tuple[int, ...]]] = []
    for d in dots:
        gemm.append((module[d.operands[0]].shape if d.operands and d.operands[0] in module else None, d.shape, d.contracting))
    contracting = _cublas_contracting(ins.backend_config) if ins.opcode == "custom-call" else None
    if contracting is not None and operands:  # a cuBLAS call: a dot of its first two operands
        gemm.append((operands[0], ins.shape.first if ins.shape is not None else None, contracting))
    if gemm:
        op_class = "GEMM"
        found = [dot_flops(lhs, out, c) for lhs, out, c in gemm]
        flops = None if any(f is None for f in found) else float(sum(f for f in found if f is not None))
        lhs0, out0, c0 = gemm[0]
        dtype = (lhs0.dtype if lhs0 is not None else "") or dtype
        if len(gemm) == 1 and lhs0 is not None and out0 is not None:
            params = {"lhs": list(lhs0.dims), "out": list(out0.dims), "contracting": list(c0)}
    elif ins.opcode == "fft" and ins.fft is not None and ins.fft[1]:
        flops, params = _fft_flops(ins, operands)
    elif ins.opcode == "custom-call" and ins.target in _CONVS:
        op_class = "CONV"
        flops, params = _conv_flops(ins, operands)
    elif ins.opcode == "custom-call" and ins.target.startswith("__cudnn$fmha"):
        op_class = "SDPA_bwd" if "Backward" in ins.target else "SDPA_fwd"
        flops, params = _fmha_flops(ins, operands, backward=op_class == "SDPA_bwd")
    elif ins.opcode == "custom-call" and ins.target in TE_ATTENTION:
        op_class = "SDPA_bwd" if "backward" in ins.target else "SDPA_fwd"
        flops, params = _te_attention_flops(ins, backward=op_class == "SDPA_bwd")
    elif ins.opcode == "custom-call":
        flops = None  # a library call other than cuBLAS's GEMM, a convolution or fused attention (cuSOLVER, a Pallas
        # kernel): its work is unknown
    else:
        flops = arith
    if partial and needs is None:  # (a slice, gather ... alone)
        needs = _needs(module, comps, roots or {}, instr_id)
    moved = (None if needs is None else needs.read + needs.written) if partial else in_bytes + out_bytes
    return {"flops": flops, "bytes": moved, "dtype": dtype, "op_class": op_class,
            "params": json.dumps(params) if params else ""}


#: opcodes that read only the part of their first operand their result holds (the rest of their operands whole)
_READS_PART = frozenset({"slice", "dynamic-slice", "gather"})
#: opcodes whose every result element needs the elements at its place in each operand (an operand's share read is
#: the result's share needed): elementwise arithmetic, conversions, selections, comparisons, and the views and
#: permutations that keep the element count
_SAME_SHARE = _ARITH | frozenset({
    "convert", "bitcast-convert", "select", "compare", "and", "or", "not", "xor", "sign", "floor", "ceil",
    "round-nearest-afz", "round-nearest-even", "is-finite", "real", "imag", "complex", "shift-left",
    "shift-right-logical", "shift-right-arithmetic", "popcnt", "count-leading-zeros", "copy", "bitcast", "reshape",
    "transpose", "reverse", "reduce", "concatenate", "pad", "dynamic-update-slice"})


@dataclass(frozen=True)
class _Needs:
    """What an instruction that touches part of a buffer needs (:func:`_needs`)."""

    share: dict[int, float]  #: instruction of its body -> the share of its elements the results need (may pass 1)
    written: float  #: bytes it writes
    read: float  #: bytes it reads


def _needs(module: Mapping[int, Instr], comps: dict[int, list[int]], roots: dict[int, int], instr_id: int) -> _Needs | None:
    """The shares, reads and writes of :func:`partial_bytes` (None where the body or its root is unknown)."""
    ins = module[instr_id]
    if ins.opcode == "fusion":
        if len(ins.called) != 1 or ins.called[0] not in comps or ins.called[0] not in roots:
            return None
        body = comps[ins.called[0]]
        root = roots[ins.called[0]]
        param = {module[i].parameter: i for i in body if module[i].opcode == "parameter"}
        inputs = [param.get(k, -1) for k in range(len(ins.operands))]
    else:  # alone: its operands stand for the parameters, it is the body
        body, root, inputs = [instr_id], instr_id, list(ins.operands)
    inside = set(body)

    def size(i: int) -> float:
        s = module[i].shape if i in module else None
        return s.bytes if s is not None else 0.0

    def elements(i: int) -> int:
        s = module[i].shape if i in module else None
        return _elements(s.dims) if s is not None and s.dtype else 0

    def through(i: int) -> int:  # an instruction's source, past bitcasts (views that move nothing)
        while i in inside and module[i].opcode == "bitcast" and module[i].operands:
            i = module[i].operands[0]
        return i

    written = 0.0
    share: dict[int, float] = {}
    fixed: dict[tuple[int, int], float] = {}  # (instruction, operand position) -> the share it needs there
    outs = module[root].operands if module[root].opcode == "tuple" else [root]
    for o in outs:
        share[o] = 1.0
        x = through(o)
        ops = module[x].operands if x in module else []
        op = module[x].opcode if x in module else ""
        if op == "dynamic-update-slice" and len(ops) >= 2 and through(ops[0]) in inputs:
            written += size(ops[1])
            fixed[(x, 0)] = 0.0
        elif op == "scatter" and len(ops) >= 3 and len(ops) % 2 == 1:
            n = len(ops) // 2  # (operands..., indices, updates...)
            for j in range(n):
                if through(ops[j]) in inputs:
                    written += size(ops[n + 1 + j])
                    fixed[(x, j)] = size(ops[n + 1 + j]) / size(ops[j]) if size(ops[j]) else 1.0
                else:
                    written += size(ops[j])
        else:
            written += size(o)
    # the body's instructions, each after all its users (a depth-first post order from the results, reversed)
    order: list[int] = []
    seen: set[int] = set()
    stack = [(o, False) for o in outs]
    while stack:
        i, done = stack.pop()
        if done:
            order.append(i)
            continue
        if i in seen or i not in inside:
            continue
        seen.add(i)
        stack.append((i, True))
        stack += [(o, False) for o in module[i].operands]
    for i in reversed(order):
        u = min(share.get(i, 0.0), 1.0)
        user = module[i]
        for pos, o in enumerate(user.operands):
            if (i, pos) in fixed:
                need = fixed[(i, pos)]
            elif u == 0.0:
                need = 0.0
            elif user.opcode in _READS_PART:
                need = u * elements(i) / elements(o) if pos == 0 and elements(o) else 1.0
            elif user.opcode in _SAME_SHARE:
                need = u
            else:
                need = 1.0
            share[o] = share.get(o, 0.0) + need
    read = 0.0
    for k, p in enumerate(inputs):
        whole = size(ins.operands[k])
        read += whole if p < 0 else float(round(whole * min(share.get(p, 0.0), 1.0)))  # (whole bytes)
    return _Needs(share, written, read)


def partial_bytes(module: Mapping[int, Instr], comps: dict[int, list[int]], roots: dict[int, int],
                  instr_id: int) -> float | None:
    """The bytes an instruction that reads or writes part of a buffer moves (a slice, dynamic slice or update, gather
    or scatter, alone or in a fusion): what it reads of each operand plus what it writes of each result.

    - **Written:** each result whole, except a dynamic update slice or a scatter into an operand (into a fused
      parameter): XLA updates that buffer in place, so it writes the update's bytes and reads nothing else of the
      buffer (a scatter reads the region it combines into: the updates' bytes).
    - **Read:** each operand's share that the results need. The needed share of every instruction of the fused
      computation is followed back from the results: a slice, dynamic slice or gather needs of its first operand its
      result's elements (times its own share); an elementwise op, conversion, view or permutation (:data:`_SAME_SHARE`)
      needs the same share of each operand; any other op (a broadcast, a dot) its operands whole. Several uses add
      up, to the whole at most. A gather fused over an elementwise op over a 128 MB parameter so reads the gathered
      elements of it, not the parameter (and :func:`work` counts that op's FLOPs for those elements only).

    None where the instruction's fused computation or its root is not in ``comps``/``roots``."""
    n = _needs(module, comps, roots, instr_id)
    return None if n is None else n.read + n.written
