"""Closed-form FLOPs and bytes moved per operator call, from the shapes the profiler records.

One registry maps op names to models (``@model("aten::mm", ...)``, like TritonBench's decorator
registries); each model reads one call's ``Input Dims`` / ``Input type`` / ``Concrete Inputs`` and
returns a :class:`Work`, or None when the shapes do not allow a model. The plain formulas
(:func:`gemm_flops`, :func:`sdpa_flops`, ...) are public: the benchmark harness uses the same ones.

Conventions (they follow TraceLens where the choice is a convention; docs/perf.md lists where we differ
and why):

- FLOPs count a multiply-add as 2. Elementwise ops count 1 FLOP per output element; copies and
  fills count 0 (they only move data).
- Bytes are the tensors' sizes: every input read once, every output written once (perfect caching).
- Causal attention counts half of the full score matrix (N_Q == N_KV).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...flops import fft_flops as fft_flops  # (the shared conventions, public here too)
from ...flops import sdpa_bwd_flops as sdpa_bwd_flops
from ...flops import sdpa_flops as sdpa_flops
from .dtypes import SCALAR_TYPES, bytes_per_element, short_name

Shape = tuple[int, ...]


class NoModel(ValueError):
    """A call whose recorded arguments a model cannot use (not a 2-D GEMM, shapes that do not broadcast, no element
    type ...): the op gets no model, with this reason. Any other exception from a model is a bug and propagates."""


@dataclass(frozen=True)
class Work:
    """What one call does: FLOPs, bytes moved, and how to place it on the roofline."""

    flops: float
    bytes: float | None  #: None when an element type is unknown
    op_class: str  #: sheet name: GEMM, CONV_fwd, SDPA_fwd, UnaryElementwise, ...
    unit: str  #: "matrix" (tensor cores / MFMA peak) or "vector" (CUDA cores / SIMD peak)
    dtype: str  #: Kineto type of the operand whose precision sets the peak
    params: dict[str, Any] = field(default_factory=dict)  #: e.g. M, N, K, B for a GEMM


@dataclass(frozen=True)
class Call:
    """One op call's recorded arguments, parsed (``dims[i]`` is () for a 0-d tensor or a non-tensor)."""

    name: str
    dims: tuple[Any, ...]
    types: tuple[str, ...]
    concrete: tuple[str, ...]
    strides: tuple[Any, ...] = ()  #: ``Input Strides`` where recorded: () when not

    def distinct(self, i: int) -> int:
        """Distinct elements of tensor operand ``i``: its size, less the dimensions of stride 0 (an ``expand``ed
        tensor repeats its elements there; read once each, as every operand is), and no more than the elements its
        strides span (a view of overlapping windows, ``unfold`` or ``stft``'s frames, holds fewer elements than its
        size: 8 x 1001 frames of 400 samples 160 apart are 1.28 M elements, not 3.2 M). Its size where no strides
        are recorded."""
        shape = self.shape(i)
        st = self.strides[i] if i < len(self.strides) else None
        if not isinstance(st, (list, tuple)) or not _is_shape(st) or len(st) != len(shape):
            return numel(shape)
        if not numel(shape):
            return 0
        span = sum((n - 1) * abs(int(s)) for n, s in zip(shape, st)) + 1
        return min(numel([n for n, s in zip(shape, st) if s != 0]), span)

    def sparse(self, i: int) -> bool:
        """Operand ``i`` is a sparse tensor (COO, CSR, ...): the profiler records its shape but no strides (``[]``, as
        for a 0-d tensor). False where no strides are recorded."""
        st = self.strides[i] if i < len(self.strides) else None
        return isinstance(st, (list, tuple)) and not st and bool(self.dim(i)) and _is_shape(self.dim(i))

    def is_tensor(self, i: int) -> bool:
        return i < len(self.types) and bytes_per_element(self.types[i]) is not None and _is_shape(self.dim(i))

    def dim(self, i: int) -> Any:
        return self.dims[i] if i < len(self.dims) else ()

    def shape(self, i: int) -> Shape:
        d = self.dim(i)
        if not _is_shape(d):
            raise NoModel(f"argument {i} is not a tensor shape")
        return tuple(int(x) for x in d)

    def bpe(self, i: int) -> int:
        b = bytes_per_element(self.types[i] if i < len(self.types) else None)
        if b is None:
            raise NoModel(f"argument {i} has no element type")
        return b

    def text(self, i: int) -> str:
        return self.concrete[i] if i < len(self.concrete) else ""

    def flag(self, i: int, default: bool = False) -> bool:
        t = self.text(i).strip().lower()
        if t in ("true", "1"):
            return True
        if t in ("false", "0"):
            return False
        return default

    def ints(self, i: int) -> list[int] | None:
        """An int list (``[1, 2]``) or single int (``-1``) in ``Concrete Inputs``, or None."""
        t = self.text(i).strip()
        if not t or t.lower() == "none":
            return None
        try:
            if t.startswith("["):
                inner = t.strip("[]").strip()
                return [int(x) for x in inner.split(",")] if inner else []
            return [int(t)]
        except ValueError:
            return None


def _is_shape(d: Any) -> bool:
    return isinstance(d, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in d)


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def broadcast(*shapes: Sequence[int]) -> Shape:
    """NumPy broadcasting of shapes; raises NoModel when they do not broadcast."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(nd):
        sizes = {s[len(s) - nd + k] for s in shapes if len(s) - nd + k >= 0} - {1}
        if len(sizes) > 1:
            raise NoModel(f"shapes {shapes} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


# -- public formulas ---------------------------------------------------------------------------------
def gemm_flops(m: int, n: int, k: int, batch: int = 1, bias: bool = False) -> float:
    """FLOPs of ``batch`` GEMMs (M x K) @ (K x N): 2MNK each, plus M*N for a bias add."""
    return float(batch) * (2.0 * m * n * k + (m * n if bias else 0))


def gemm_bytes(m: int, n: int, k: int, bpe_a: int, bpe_b: int, bpe_out: int, batch: int = 1,
               bias_elems: int = 0, bpe_bias: int = 0) -> float:
    """Bytes of ``batch`` GEMMs: A and B read, C written once (plus the bias read)."""
    return float(batch) * (m * k * bpe_a + k * n * bpe_b + m * n * bpe_out) + bias_elems * bpe_bias


def sdpa_bytes(b: int, h_q: int, n_q: int, n_kv: int, h_kv: int, d_qk: int, d_v: int, bpe: int) -> float:
    """Forward attention bytes: Q, K, V read and O written once (fused kernels never store P)."""
    return float(bpe) * (b * n_q * h_q * d_qk + b * n_kv * h_kv * (d_qk + d_v) + b * n_q * h_q * d_v)


def sdpa_bwd_bytes(b: int, h_q: int, n_q: int, n_kv: int, h_kv: int, d_qk: int, d_v: int, bpe: int) -> float:
    """Backward attention bytes: Q, K, V, dO read; dQ, dK, dV written."""
    q = b * n_q * h_q * d_qk
    kv = b * n_kv * h_kv * (d_qk + d_v)
    do = b * n_q * h_q * d_v
    return float(bpe) * (2 * q + 2 * kv + do)


# -- registry ------------------------------------------------------------------------------------------
Model = Callable[[Call], "Work | None"]


@dataclass(frozen=True)
class Entry:
    op_class: str
    fn: Model


class Registry:
    """op name -> model. ``register`` is a decorator; later registrations override earlier ones.
    ``register_pattern`` maps names by a regex (Inductor's generated kernels, whose CPU op is named like the kernel:
    ``triton_tem_fused_addmm_relu_0``); an exact name wins over a pattern, an earlier pattern over a later one."""

    def __init__(self) -> None:
        self._models: dict[str, Entry] = {}
        self._patterns: list[tuple[re.Pattern[str], Entry]] = []

    def register(self, *names: str, op_class: str) -> Callable[[Model], Model]:
        def deco(fn: Model) -> Model:
            for n in names:
                self._models[n] = Entry(op_class, fn)
            return fn

        return deco

    def register_pattern(self, pattern: str, *, op_class: str) -> Callable[[Model], Model]:
        def deco(fn: Model) -> Model:
            self._patterns.append((re.compile(pattern), Entry(op_class, fn)))
            return fn

        return deco

    def names(self) -> frozenset[str]:
        """The op names modeled by name (the patterns' names are found by :meth:`select`)."""
        return frozenset(self._models)

    def select(self, names: Iterable[str]) -> list[str]:
        """Of ``names`` (a trace's distinct op names), those a model takes: by name or by a pattern; sorted."""
        return sorted(n for n in set(names) if self._entry(n) is not None)

    def _entry(self, name: str) -> Entry | None:
        e = self._models.get(name)
        if e is None:
            e = next((e for pat, e in self._patterns if pat.search(name)), None)
        return e

    def op_class(self, name: str) -> str | None:
        e = self._entry(name)
        return e.op_class if e else None

    def work(self, call: Call) -> Work | None:
        """The model's answer for one call, or None (unknown op, or shapes the model cannot use)."""
        return self.attempt(call)[0]

    def attempt(self, call: Call) -> tuple[Work | None, str | None]:
        """(the model's answer, None), or (None, why not): the op is not modeled, or its model raised
        :class:`NoModel`. A model's other exceptions are bugs: they propagate, never read as "no model"."""
        e = self._entry(call.name)
        if e is None:
            return None, "no model for this op"
        try:
            return e.fn(call), None
        except NoModel as why:
            return None, str(why) or "shapes not usable"


REGISTRY = Registry()
model = REGISTRY.register
model_pattern = REGISTRY.register_pattern


# -- GEMM -------------------------------------------------------------------------------------------
def _gemm(call: Call, a: int, b: int, bias: int | None, out_bpe: int | None = None) -> Work:
    if call.sparse(a) or call.sparse(b):  # (torch.sparse.mm of a CSR matrix runs as aten::addmm)
        raise NoModel("a sparse operand: its FLOPs depend on its nonzeros, which the profile does not record")
    sa, sb = call.shape(a), call.shape(b)
    if len(sa) == 2 and len(sb) == 2:
        batch, (m, k), n = 1, sa, sb[1]
        if sb[0] != k:
            raise NoModel("inner dimensions differ")
    elif len(sa) == 3 and len(sb) == 3:
        batch, m, k, n = sa[0], sa[1], sa[2], sb[2]
    else:
        raise NoModel("not a 2-D or 3-D GEMM")
    has_bias = bias is not None and call.is_tensor(bias)
    bias_elems = numel(call.shape(bias)) if has_bias and bias is not None else 0
    ba, bb = call.bpe(a), call.bpe(b)
    bo = out_bpe or ba
    params = {"M": m, "N": n, "K": k, "B": batch, "bias": has_bias}
    return Work(gemm_flops(m, n, k, batch, has_bias), gemm_bytes(m, n, k, ba, bb, bo, batch, bias_elems, ba), "GEMM",
                "matrix", call.types[a], params)


@model("aten::mm", "aten::bmm", op_class="GEMM")
def _mm(call: Call) -> Work:
    return _gemm(call, 0, 1, None)


@model("aten::addmm", "aten::baddbmm", op_class="GEMM")
def _addmm(call: Call) -> Work:
    return _gemm(call, 1, 2, 0)


@model("aten::_scaled_mm", op_class="GEMM")
def _scaled_mm(call: Call) -> Work:
    out = call.ints(6)
    bpe_out = bytes_per_element(SCALAR_TYPES.get(out[0], "")) if out else None
    if bpe_out is None:
        bpe_out = 2 if call.bpe(0) == 1 else call.bpe(0)
    return _gemm(call, 0, 1, 4, bpe_out)


@model("aten::_int_mm", op_class="GEMM")
def _int_mm(call: Call) -> Work:
    """int8 A (M x K) @ int8 B (K x N), int32 out (rated against the int8 peak: operations, not floating-point)."""
    return _gemm(call, 0, 1, None, 4)


def _weight_only(call: Call, m: int, k: int, n: int, weight_bytes: int, scale_bytes: int) -> Work:
    """A weight-only quantized GEMM: activations A (M x K, their type also the output's) by a packed low-precision weight
    (K x N; ``weight_bytes`` as stored) and its scales, dequantized in the kernel and multiplied at A's precision
    (rated against that peak)."""
    a = call.bpe(0)
    return Work(gemm_flops(m, n, k, 1, False), float(m * k * a + weight_bytes + scale_bytes + m * n * a), "GEMM", "matrix",
                call.types[0], {"M": m, "N": n, "K": k, "B": 1, "bias": False})


@model("aten::_weight_int4pack_mm", op_class="GEMM")
def _weight_int4pack_mm(call: Call) -> Work:
    """int4 weight-only GEMM (torchao's int4 inference, the tinygemm kernel): A (M x K) by a weight packed two int4
    values a byte (stored as int32 tiles: N x K / 2 bytes in all), with a scale and a zero point per group of K
    (``qScaleAndZeros``: K / group x N x 2, A's type)."""
    (m, k), w, sz = call.shape(0), call.shape(1), call.shape(3)
    if len(sz) != 3 or sz[2] != 2:
        raise NoModel("scales and zeros are not groups x N x 2")
    return _weight_only(call, m, k, sz[1], numel(w) * call.bpe(1), numel(sz) * call.bpe(3))


@model("aten::_weight_int8pack_mm", op_class="GEMM")
def _weight_int8pack_mm(call: Call) -> Work:
    """int8 weight-only GEMM: A (M x K) by an int8 weight stored N x K, one scale per output column (N)."""
    (m, k), (n, kw) = call.shape(0), call.shape(1)
    if kw != k:
        raise NoModel("inner dimensions differ")
    return _weight_only(call, m, k, n, n * k * call.bpe(1), numel(call.shape(2)) * call.bpe(2))


def _semi_structured(call: Call, m: int, n: int, k: int, compressed: int, dense: int, out_bpe: int | None) -> Work:
    """A 2:4 semi-structured sparse GEMM (M x K, two of every four values along K zero, by K x N): the products it does,
    2 x M x N x K / 2, rated against the dense peak (the sparse tensor cores' "2x" peak counts the skipped zeros);
    bytes: the compressed operand as stored (values and metadata), the dense one and the output."""
    bpe = call.bpe(dense)
    moved = numel(call.shape(compressed)) * call.bpe(compressed) + numel(call.shape(dense)) * bpe + m * n * (out_bpe or bpe)
    return Work(gemm_flops(m, n, k) / 2, float(moved), "GEMM", "matrix", call.types[dense],
                {"M": m, "N": n, "K": k, "B": 1, "bias": False, "sparsity": "2:4"})


@model("aten::_cslt_sparse_mm", op_class="GEMM")
def _cslt_sparse_mm(call: Call) -> Work:
    """cuSPARSELt's 2:4 GEMM (``to_sparse_semi_structured``, ``F.linear`` by a pruned weight): the compressed A
    (M x (K/2 + metadata)) by the dense B (K x N)."""
    (m, _), (k, n) = call.shape(0), call.shape(1)
    out = call.ints(4)
    out_bpe = bytes_per_element(SCALAR_TYPES.get(out[0], "")) if out else None
    return _semi_structured(call, m, n, k, 0, 1, out_bpe)


@model("aten::_sparse_semi_structured_mm", op_class="GEMM")
def _sparse_semi_structured_mm(call: Call) -> Work:
    """CUTLASS's 2:4 GEMM: the compressed A (M x K/2, its metadata apart) by the dense B (K x N)."""
    (m, _), (k, n) = call.shape(0), call.shape(2)
    return _semi_structured(call, m, n, k, 0, 2, None)


@model("aten::_sparse_semi_structured_linear", op_class="GEMM")
def _sparse_semi_structured_linear(call: Call) -> Work:
    """CUTLASS's 2:4 linear: the input (..., K) by the compressed weight (N x K/2, its metadata apart)."""
    x, (n, _) = call.shape(0), call.shape(1)
    if not x:
        raise NoModel("a 0-d input")
    return _semi_structured(call, numel(x[:-1]), n, x[-1], 1, 0, None)


# -- FFT ---------------------------------------------------------------------------------------------
def _fft(call: Call, kind: str) -> Work:
    """``aten::_fft_c2c(x, dim, norm, forward)``, ``_fft_r2c(x, dim, norm, onesided)``, ``_fft_c2r(x, dim, norm,
    last_dim_size)``: the transform's size is the product of the dimensions ``dim`` (the last of a c2r its
    ``last_dim_size``); the rest are a batch. Bytes: the input read and the output written once (a complex element is
    two of its real type's; a onesided real transform keeps n // 2 + 1 of the last dimension)."""
    x = call.shape(0)
    dims = call.ints(1)
    if not x or not dims or any(not -len(x) <= d < len(x) for d in dims):
        raise NoModel("no transformed dimensions")
    dims = sorted({d % len(x) for d in dims})
    sizes = [x[d] for d in dims]
    batch = numel(x) // max(numel(sizes), 1)
    bpe = call.bpe(0)
    if kind == "c2r":
        last = call.ints(3)
        if not last:
            raise NoModel("no last_dim_size")
        sizes[-1] = last[0]
        out = [*x]
        out[dims[-1]] = last[0]
        moved = numel(x) * bpe + numel(out) * bpe // 2  # complex in, real out
    elif kind == "r2c":
        out = [*x]
        if call.flag(3, True):
            out[dims[-1]] = x[dims[-1]] // 2 + 1
        moved = numel(x) * bpe + numel(out) * 2 * bpe  # real in, complex out
    else:
        moved = 2 * numel(x) * bpe
    n = numel(sizes)
    return Work(fft_flops(n, batch, real=kind != "c2c"), float(moved), "FFT", "vector", call.types[0],
                {"n": n, "batch": batch, "kind": kind})


@model("aten::_fft_c2c", op_class="FFT")
def _fft_c2c(call: Call) -> Work:
    return _fft(call, "c2c")


@model("aten::_fft_r2c", op_class="FFT")
def _fft_r2c(call: Call) -> Work:
    return _fft(call, "r2c")


@model("aten::_fft_c2r", op_class="FFT")
def _fft_c2r(call: Call) -> Work:
    return _fft(call, "c2r")


def _grouped(call: Call, offs: int, out_dtype: int, bias: int | None) -> Work:
    """A grouped GEMM (a mixture of experts' expert GEMMs as one call), by which operand is grouped along ``offs``
    (each group's end in the grouped dimension):

    - 2-D A (M_total x K) by 3-D B (G x K x N): the rows of A in groups, each by its own B: out M_total x N;
    - 3-D A (G x M x K) by 2-D B (K x N_total): the columns of B in groups: out M x N_total;
    - 2-D A (M x K_total) by 2-D B (K_total x N): the inner dimension in groups (an expert's weight gradient),
      out G x M x N (``offs`` gives G);
    - 3-D by 3-D (G x M x K by G x K x N): a batched GEMM, out G x M x N.

    Every group's FLOPs sum to 2 M K N of the grouped dimension's total: the sizes of the groups do not matter."""
    sa, sb = call.shape(0), call.shape(1)
    g = call.shape(offs)[0] if call.is_tensor(offs) and len(call.shape(offs)) == 1 else None
    if len(sa) == 2 and len(sb) == 3:
        (m, k), (g, kb, n) = sa, sb
        out = m * n
    elif len(sa) == 3 and len(sb) == 2:
        (g, m, k), (kb, n) = sa, sb
        out = m * n
    elif len(sa) == 2 and len(sb) == 2:
        if g is None:
            raise NoModel("a grouped inner dimension without offsets")
        (m, k), (kb, n) = sa, sb
        out = g * m * n
    elif len(sa) == 3 and len(sb) == 3:
        (g, m, k), (gb, kb, n) = sa, sb
        if gb != g:
            raise NoModel("group counts differ")
        m, out = g * m, g * m * n  # (G GEMMs: counted as one of G x M rows)
    else:
        raise NoModel("not a 2-D or 3-D grouped GEMM")
    if kb != k:
        raise NoModel("inner dimensions differ")
    types = call.ints(out_dtype)
    bpe_out = bytes_per_element(SCALAR_TYPES.get(types[0], "")) if types else None
    if bpe_out is None:
        bpe_out = 2 if call.bpe(0) == 1 else call.bpe(0)  # (fp8 operands give bf16 unless told)
    has_bias = bias is not None and call.is_tensor(bias)
    bias_bytes = numel(call.shape(bias)) * call.bpe(bias) if has_bias and bias is not None else 0
    moved = numel(sa) * call.bpe(0) + numel(sb) * call.bpe(1) + out * bpe_out + bias_bytes
    return Work(gemm_flops(m, n, k), float(moved), "GEMM", "matrix", call.types[0],
                {"M": m, "N": n, "K": k, "groups": g, "bias": has_bias})


@model("aten::_grouped_mm", op_class="GEMM")
def _grouped_mm(call: Call) -> Work:
    # _grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None)
    return _grouped(call, 2, 4, 3)


@model("aten::_scaled_grouped_mm", op_class="GEMM")
def _scaled_grouped_mm(call: Call) -> Work:
    # _scaled_grouped_mm(self, mat2, scale_a, scale_b, offs=None, bias=None, scale_result=None, out_dtype=None, ...)
    return _grouped(call, 4, 7, 5)


@model("aten::matmul", op_class="GEMM")
def _matmul(call: Call) -> Work:
    sa, sb = call.shape(0), call.shape(1)
    a2 = (1, sa[0]) if len(sa) == 1 else sa
    b2 = (sb[0], 1) if len(sb) == 1 else sb
    m, k, n = a2[-2], a2[-1], b2[-1]
    if len(b2) == 2:  # batch dims of A fold into M
        m, batch = numel(a2[:-1]), 1
    else:
        batch = numel(broadcast(a2[:-2], b2[:-2]))
    ba, bb = call.bpe(0), call.bpe(1)
    return Work(gemm_flops(m, n, k, batch), gemm_bytes(m, n, k, ba, bb, ba, batch), "GEMM", "matrix", call.types[0],
                {"M": m, "N": n, "K": k, "B": batch, "bias": False})


@model("aten::linear", op_class="GEMM")
def _linear(call: Call) -> Work:
    x, w = call.shape(0), call.shape(1)
    m, k, n = numel(x[:-1]), x[-1], w[0]
    bias = call.is_tensor(2)
    bias_elems = numel(call.shape(2)) if bias else 0
    b = call.bpe(0)
    return Work(gemm_flops(m, n, k, 1, bias), gemm_bytes(m, n, k, b, call.bpe(1), b, 1, bias_elems, b), "GEMM", "matrix",
                call.types[0], {"M": m, "N": n, "K": k, "B": 1, "bias": bias})


# -- convolution ------------------------------------------------------------------------------------------
def _per_dim(values: list[int] | None, n: int, default: int) -> list[int]:
    if not values:
        return [default] * n
    return values * n if len(values) == 1 else values


def _conv_out(x: Shape, w: Shape, stride: list[int], padding: list[int], dilation: list[int], transposed: bool,
              output_padding: list[int], groups: int) -> Shape:
    sp = len(x) - 2
    out = []
    for i in range(sp):
        k = w[2 + i]
        if transposed:
            out.append((x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) + output_padding[i] + 1)
        else:
            out.append((x[2 + i] + 2 * padding[i] - dilation[i] * (k - 1) - 1) // stride[i] + 1)
    cout = w[1] * groups if transposed else w[0]
    return (x[0], cout, *out)


def _conv(call: Call, *, bias: int | None, stride: int, padding: int, dilation: int, transposed: int | None,
          output_padding: int | None, groups: int | None) -> Work:
    x, w = call.shape(0), call.shape(1)
    sp = len(x) - 2
    if sp < 1 or len(w) != len(x):
        raise NoModel("not a convolution")
    pad_text = call.text(padding).strip("'\" ").lower()
    st = _per_dim(call.ints(stride), sp, 1)
    dl = _per_dim(call.ints(dilation), sp, 1)
    is_t = transposed is not None and call.flag(transposed)
    g = (call.ints(groups) or [1])[0] if groups is not None else 1
    if pad_text == "same":
        pd = [(dl[i] * (w[2 + i] - 1)) // 2 for i in range(sp)]
    else:
        pd = _per_dim(call.ints(padding), sp, 0)
    op = _per_dim(call.ints(output_padding) if output_padding is not None else None, sp, 0)
    out = _conv_out(x, w, st, pd, dl, is_t, op, g)
    if pad_text == "same":
        out = (out[0], out[1], *x[2:])
    has_bias = bias is not None and call.is_tensor(bias)
    per_elem = 2 * numel(w[1:])
    flops = (numel(x) if is_t else numel(out)) * per_elem + (numel(out) if has_bias else 0)
    bpe = call.bpe(0)
    moved = (numel(x) + numel(w) + (out[1] if has_bias else 0) + numel(out)) * bpe
    params = {"input_shape": x, "filter_shape": w, "output_shape": out, "stride": st, "padding": pd, "dilation": dl,
              "groups": g, "transposed": is_t, "bias": has_bias}
    return Work(float(flops), float(moved), "CONV_fwd", "matrix", call.types[0], params)


@model("aten::convolution", "aten::_convolution", op_class="CONV_fwd")
def _convolution(call: Call) -> Work:
    return _conv(call, bias=2, stride=3, padding=4, dilation=5, transposed=6, output_padding=7, groups=8)


@model("aten::conv1d", "aten::conv2d", "aten::conv3d", op_class="CONV_fwd")
def _convnd(call: Call) -> Work:
    return _conv(call, bias=2, stride=3, padding=4, dilation=5, transposed=None, output_padding=None, groups=6)


@model("aten::cudnn_convolution", op_class="CONV_fwd")
def _cudnn_conv(call: Call) -> Work:
    return _conv(call, bias=None, padding=2, stride=3, dilation=4, transposed=None, output_padding=None, groups=5)


@model("aten::miopen_convolution", op_class="CONV_fwd")
def _miopen_conv(call: Call) -> Work:
    return _conv(call, bias=2, padding=3, stride=4, dilation=5, transposed=None, output_padding=None, groups=6)


@model("aten::convolution_backward", op_class="CONV_bwd")
def _conv_bwd(call: Call) -> Work:
    """grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
    output_mask: input, weight and bias gradients as the mask asks."""
    go, x, w = call.shape(0), call.shape(1), call.shape(2)
    mask_t = call.text(10).strip("[] ").split(",")
    mask = [m.strip().lower() == "true" for m in mask_t] if len(mask_t) == 3 else [True, True, True]
    is_t = call.flag(7)
    per_elem = 2 * numel(w[1:])
    mm = (numel(x) if is_t else numel(go)) * per_elem
    bpe = call.bpe(0)
    flops = (mm if mask[0] else 0) + (mm if mask[1] else 0) + (numel(go) if mask[2] else 0)
    moved = 0
    if mask[0]:
        moved += numel(go) + numel(w) + numel(x)
    if mask[1]:
        moved += numel(go) + numel(x) + numel(w)
    if mask[2]:
        moved += numel(go) + go[1]
    return Work(float(flops), float(moved * bpe), "CONV_bwd", "matrix", call.types[0],
                {"input_shape": x, "filter_shape": w, "output_shape": go, "output_mask": mask})


# -- attention -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Sdpa:
    q: int  #: argument index of the query
    layout: str  #: "bhnd" (SDPA ops) or "bnhd" (flash/efficient kernels' own ops)
    causal: int  #: argument index of is_causal
    backward: bool


_SDPA: dict[str, _Sdpa] = {
    "aten::scaled_dot_product_attention": _Sdpa(0, "bhnd", 5, False),
    "aten::_scaled_dot_product_attention_math": _Sdpa(0, "bhnd", 5, False),
    "aten::_scaled_dot_product_flash_attention": _Sdpa(0, "bhnd", 4, False),
    "aten::_scaled_dot_product_efficient_attention": _Sdpa(0, "bhnd", 6, False),
    "aten::_scaled_dot_product_cudnn_attention": _Sdpa(0, "bhnd", 6, False),
    "aten::_cudnn_attention_forward": _Sdpa(0, "bhnd", 10, False),
    "aten::_flash_attention_forward": _Sdpa(0, "bnhd", 8, False),
    "flash_attn::_flash_attn_forward": _Sdpa(0, "bnhd", 5, False),
    "aten::_scaled_dot_product_flash_attention_backward": _Sdpa(1, "bhnd", 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": _Sdpa(1, "bhnd", 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _Sdpa(1, "bhnd", 14, True),
    "aten::_cudnn_attention_backward": _Sdpa(1, "bhnd", 14, True),
    "aten::_flash_attention_backward": _Sdpa(1, "bnhd", 11, True),
    "flash_attn::_flash_attn_backward": _Sdpa(1, "bnhd", 11, True),
}


def _bhnd(shape: Shape, layout: str) -> tuple[int, int, int, int]:
    if len(shape) == 3:  # (B*H, N, d) or unbatched (H, N, d)
        shape = (1, *shape) if layout == "bhnd" else (1, shape[0], shape[1], shape[2])
    if len(shape) != 4:
        raise NoModel("attention tensors must be 3-D or 4-D")
    if layout == "bhnd":
        return shape[0], shape[1], shape[2], shape[3]
    return shape[0], shape[2], shape[1], shape[3]


def _attention(call: Call) -> Work:
    spec = _SDPA[call.name]
    b, h_q, n_q, d_qk = _bhnd(call.shape(spec.q), spec.layout)
    _, h_kv, n_kv, _ = _bhnd(call.shape(spec.q + 1), spec.layout)
    _, _, _, d_v = _bhnd(call.shape(spec.q + 2), spec.layout)
    causal = call.flag(spec.causal)
    if causal and n_q != n_kv:
        raise NoModel("causal attention with N_Q != N_KV")
    bpe = call.bpe(spec.q)
    params = {"B": b, "H_Q": h_q, "H_KV": h_kv, "N_Q": n_q, "N_KV": n_kv, "d_qk": d_qk, "d_v": d_v, "causal": causal}
    if spec.backward:
        return Work(sdpa_bwd_flops(b, h_q, n_q, n_kv, h_kv, d_qk, d_v, causal),
                    sdpa_bwd_bytes(b, h_q, n_q, n_kv, h_kv, d_qk, d_v, bpe), "SDPA_bwd", "matrix", call.types[spec.q],
                    params)
    return Work(sdpa_flops(b, h_q, n_q, n_kv, d_qk, d_v, causal), sdpa_bytes(b, h_q, n_q, n_kv, h_kv, d_qk, d_v, bpe),
                "SDPA_fwd", "matrix", call.types[spec.q], params)


for _name, _spec in _SDPA.items():
    model(_name, op_class="SDPA_bwd" if _spec.backward else "SDPA_fwd")(_attention)


# -- elementwise -----------------------------------------------------------------------------------------
_UNARY = (
    "abs", "neg", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan",
    "tanh", "sigmoid", "silu", "gelu", "relu", "hardtanh", "hardswish", "hardsigmoid", "leaky_relu", "elu", "selu",
    "celu", "softplus", "mish", "erf", "erfc", "erfinv", "reciprocal", "sign", "sgn", "floor", "ceil", "round",
    "trunc", "frac", "clamp", "clamp_min", "clamp_max", "nan_to_num", "logical_not", "bitwise_not", "square", "pow",
    "sinh", "cosh", "asin", "acos", "atan", "threshold", "relu6", "logit", "digamma", "lgamma", "isnan", "isinf"
)
_BINARY = (
    "add", "sub", "mul", "div", "rsub", "true_divide", "floor_divide", "remainder", "fmod", "maximum", "minimum",
    "atan2", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_xor", "hypot", "copysign", "xlogy", "where", "addcmul", "addcdiv", "lerp", "masked_fill",
    "threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
    "hardtanh_backward", "leaky_relu_backward", "elu_backward", "softplus_backward", "hardswish_backward",
    "mish_backward", "native_dropout_backward"
)
#: the entries of ``_BINARY`` that take three tensor operands
_TERNARY = frozenset(("where", "addcmul", "addcdiv", "lerp", "masked_fill"))
_BOOL_OUT = frozenset((
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf"
))


def _kind(type_name: str) -> int:
    """PyTorch's type promotion categories: bool 0, integers 1, floating 2, complex 3 (a 0-d operand of a higher one
    decides the result's type; of the same or a lower one, not)."""
    t = type_name.lower()
    if "complex" in t:
        return 3
    if any(w in t for w in ("float", "double", "half", "bfloat")):
        return 2
    return 0 if t == "bool" else 1


def _elementwise(call: Call) -> Work:
    base = call.name.removeprefix("aten::")
    in_place = base.endswith("_") and not base.endswith("__")
    base = base.rstrip("_")
    tensors = [i for i in range(len(call.types)) if call.is_tensor(i)]
    if not tensors:
        raise NoModel("no tensor operand")
    first = tensors[0]
    if base in _UNARY and len(tensors) >= 2 and len(call.shape(tensors[1])) > 0 and base != "pow":
        tensors = tensors[:1]  # a trailing out= tensor is handled below as the output
    arity = 3 if base in _TERNARY else 2 if base in _BINARY else len(tensors)
    if len(tensors) > arity:  # mul(self, other, out=): the out= tensor is written (below), not read
        tensors = tensors[:arity]
    # operands: tensors read (a 0-d tensor is one element); the output shape broadcasts the operands
    shapes = [call.shape(i) for i in tensors]
    out_shape = broadcast(*shapes)
    bpes = [call.bpe(i) for i in tensors]
    nd = [i for i, s in zip(tensors, shapes) if len(s) > 0]
    # a 0-d tensor operand (a scalar: torch.fft's normalization multiplies by a 0-d double) takes no part in the
    # result's type where a tensor with dimensions is there: the output and the row are that tensor's type (the
    # 0-d double's 8 bytes an element made such a multiply read "7.6 TB/s, 159% of its roofline" on an H200)
    main = nd[0] if nd and _kind(call.types[first]) <= _kind(call.types[nd[0]]) else first
    if base in _BOOL_OUT:
        bpe_out = 1
    elif len(nd) >= 2:
        bpe_out = max(call.bpe(i) for i in nd)
    else:
        bpe_out = call.bpe(main)
    distinct = [call.distinct(i) for i in tensors]
    read = sum(d * b for d, b in zip(distinct, bpes))
    n_out = numel(out_shape)
    op_class = "UnaryElementwise" if len(tensors) == 1 else "BinaryElementwise" if len(tensors) == 2 else "TernaryElementwise"
    params: dict[str, Any] = {"shapes": shapes, "out_shape": out_shape, "in_place": in_place}
    if any(d != numel(sh) for d, sh in zip(distinct, shapes)):  # an expanded operand: its distinct elements read
        params["distinct"] = distinct
    return Work(float(n_out), float(read + n_out * bpe_out), op_class, "vector", call.types[main], params)


for _b in _UNARY + _BINARY:
    model(f"aten::{_b}", f"aten::{_b}_", op_class="Elementwise")(_elementwise)


@model("aten::copy_", "aten::clone", "aten::_to_copy", op_class="Copy")
def _copy(call: Call) -> Work:
    """copy_(dst, src): src read (its distinct elements: an expanded or overlapping view reads fewer than its size), dst
    written; clone/_to_copy(src, dtype, ...): src read, a new tensor written."""
    params: dict[str, Any] = {}
    if call.name == "aten::copy_":
        dst, read = call.shape(0), call.distinct(1)
        moved = numel(dst) * call.bpe(0) + read * call.bpe(1)
        if read != numel(call.shape(1)):  # an expanded or overlapping source: its distinct elements read
            params.update(shapes=[dst, call.shape(1)], distinct=[numel(dst), read])
        dtype = call.types[0]
        src_t = call.types[1] if len(call.types) > 1 else ""
        if src_t and short_name(src_t) != short_name(dtype):  # a cast: the row's type is the destination's
            params["from"] = short_name(src_t)
    else:
        dst = call.shape(0)
        code = call.ints(1) if call.name == "aten::_to_copy" else None
        out_t = SCALAR_TYPES.get(code[0], "") if code else ""
        out_b = bytes_per_element(out_t) or call.bpe(0)
        read = call.distinct(0)
        moved = read * call.bpe(0) + numel(dst) * out_b
        if read != numel(dst):
            params.update(shapes=[dst], distinct=[read])
        dtype = call.types[0]
        if out_t and short_name(out_t) != short_name(dtype):  # a cast: the row's type is the source's
            params["to"] = short_name(out_t)
    return Work(0.0, float(moved), "Copy", "vector", dtype, {"shape": dst, **params})


@model("aten::fill_", "aten::zero_", op_class="Copy")
def _fill(call: Call) -> Work:
    s = call.shape(0)
    return Work(0.0, float(numel(s) * call.bpe(0)), "Copy", "vector", call.types[0], {"shape": s})


@model("aten::cat", "aten::stack", op_class="Copy")
def _cat(call: Call) -> Work:
    parts = call.dim(0)
    if not isinstance(parts, list) or not parts or not all(_is_shape(p) for p in parts):
        raise NoModel("no shapes for the tensor list")
    n = sum(numel(p) for p in parts)
    bpe = 2 if call.types[0] == "TensorList" else call.bpe(0)  # element type of a list is not recorded
    return Work(0.0, float(2 * n * bpe), "Copy", "vector", "", {"inputs": len(parts), "elements": n, "assumed_bpe": bpe})


@model("aten::upsample_nearest1d", "aten::upsample_nearest2d", "aten::upsample_nearest3d", op_class="UnaryElementwise")
def _upsample(call: Call) -> Work:
    x = call.shape(0)
    size = call.ints(1)
    if not size:
        raise NoModel("output size not recorded")
    out = (*x[:2], *size)
    b = call.bpe(0)
    return Work(float(numel(out)), float((numel(x) + numel(out)) * b), "UnaryElementwise", "vector", call.types[0],
                {"input_shape": x, "output_shape": out})


# -- normalization -----------------------------------------------------------------------------------------
def _norm_work(n: int, c: int, bpe_in: int, bpe_out: int, *, affine: bool, bias: bool, dtype: str,
               params: dict[str, Any]) -> Work:
    """Forward norm with statistics computed from the input (TraceLens's accounting): FLOPs 6C + 5N; bytes
    read input + write output + (mean, var, saved mean/var, weight, bias) x C."""
    flops = 3 * c + 3 * n + 3 * c + 2 * n
    tensors = 2 + (1 if affine else 0) + (1 if affine and bias else 0) + 2
    return Work(float(flops), float(n * (bpe_in + bpe_out) + tensors * c * bpe_in), "Normalization", "vector", dtype,
                {**params, "num_channels": c, "affine": affine, "bias": bias})


@model("aten::layer_norm", "aten::native_layer_norm", op_class="Normalization")
def _layer_norm(call: Call) -> Work:
    x = call.shape(0)
    norm = call.ints(1)
    c = numel(norm) if norm else x[-1]
    b = call.bpe(0)
    return _norm_work(numel(x), c, b, b, affine=call.is_tensor(2), bias=call.is_tensor(3), dtype=call.types[0],
                      params={"shape": x})


@model("aten::batch_norm", "aten::native_batch_norm", "aten::_batch_norm_impl_index", "aten::cudnn_batch_norm",
       "aten::miopen_batch_norm", "aten::_native_batch_norm_legit", op_class="Normalization")
def _batch_norm(call: Call) -> Work:
    x = call.shape(0)
    b = call.bpe(0)
    return _norm_work(numel(x), x[1], b, b, affine=call.is_tensor(1), bias=call.is_tensor(2), dtype=call.types[0],
                      params={"shape": x})


@model("aten::group_norm", "aten::native_group_norm", op_class="Normalization")
def _group_norm(call: Call) -> Work:
    x = call.shape(0)
    b = call.bpe(0)
    return _norm_work(numel(x), x[1], b, b, affine=call.is_tensor(1), bias=call.is_tensor(2), dtype=call.types[0],
                      params={"shape": x})


@model("aten::rms_norm", "aten::_fused_rms_norm", op_class="Normalization")
def _rms_norm(call: Call) -> Work:
    """R rows of C: R(2C + 2) FLOPs for the statistics, N (x 2 with a weight) to apply; bytes in + out + weight."""
    x = call.shape(0)
    norm = call.ints(1)
    c = numel(norm) if norm else x[-1]
    n = numel(x)
    affine = call.is_tensor(2)
    b = call.bpe(0)
    flops = (n // c) * (2 * c + 2) + n * (2 if affine else 1)
    return Work(float(flops), float(2 * n * b + (c * b if affine else 0)), "Normalization", "vector", call.types[0],
                {"shape": x, "num_channels": c, "affine": affine})


@model("aten::native_batch_norm_backward", op_class="Normalization")
def _batch_norm_bwd(call: Call) -> Work:
    """grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask."""
    x = call.shape(1)
    return _norm_bwd(call, x, x[1], grad=0, inp=1, affine=call.is_tensor(2), mask_at=9)


@model("aten::cudnn_batch_norm_backward", "aten::miopen_batch_norm_backward", op_class="Normalization")
def _cudnn_batch_norm_bwd(call: Call) -> Work:
    """input, grad_output, weight, running_mean, running_var, save_mean, save_var, epsilon[, reserve]."""
    x = call.shape(0)
    return _norm_bwd(call, x, x[1], grad=1, inp=0, affine=call.is_tensor(2), mask_at=None)


def _norm_bwd(call: Call, x: Shape, c: int, *, grad: int, inp: int, affine: bool, mask_at: int | None) -> Work:
    """Input gradient 9N FLOPs (4N without it); grad_out and input read, grad_in written; statistics, weight
    read and weight/bias gradients written per channel."""
    n = numel(x)
    mask_t = call.text(mask_at).strip("[] ").split(",") if mask_at is not None else []
    mask = [m.strip().lower() == "true" for m in mask_t] if len(mask_t) == 3 else [True, True, True]
    b = call.bpe(inp)
    flops = 4 * n + (5 * n if mask[0] else 0)
    moved = n * call.bpe(grad) + n * b * (2 if mask[0] else 1) + c * b
    if affine:
        moved += c * b + c * b * (int(mask[1]) + int(mask[2]))
    return Work(float(flops), float(moved), "Normalization", "vector", call.types[inp],
                {"shape": x, "num_channels": c, "output_mask": mask})


@model("aten::native_layer_norm_backward", op_class="Normalization")
def _layer_norm_bwd(call: Call) -> Work:
    """grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask."""
    x = call.shape(1)
    norm = call.ints(2)
    return _norm_bwd(call, x, numel(norm) if norm else x[-1], grad=0, inp=1, affine=call.is_tensor(5), mask_at=7)


# -- pooling -----------------------------------------------------------------------------------------------
def _pool_out(x: Shape, kernel: list[int], stride: list[int], padding: list[int], dilation: list[int],
              ceil_mode: bool) -> Shape:
    sp = len(kernel)
    out = []
    for i in range(sp):
        size = x[len(x) - sp + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1
        o = (-(-size // stride[i]) if ceil_mode else size // stride[i]) + 1
        if ceil_mode and (o - 1) * stride[i] >= x[len(x) - sp + i] + padding[i]:
            o -= 1
        out.append(o)
    return (*x[: len(x) - sp], *out)


@model("aten::max_pool2d_with_indices", "aten::max_pool3d_with_indices", "aten::avg_pool2d", "aten::avg_pool3d",
       "aten::max_pool2d", op_class="Pooling")
def _pool(call: Call) -> Work:
    """self, kernel_size, stride, padding, [dilation,] ceil_mode: one FLOP per window element of each output;
    input read, output (and the int64 indices of max pooling) written."""
    x = call.shape(0)
    sp = 3 if "3d" in call.name else 2
    kernel = _per_dim(call.ints(1), sp, 1)
    stride = _per_dim(call.ints(2), sp, 0)
    stride = [s or k for s, k in zip(stride, kernel)]
    padding = _per_dim(call.ints(3), sp, 0)
    is_max = "max" in call.name
    dilation = _per_dim(call.ints(4), sp, 1) if is_max else [1] * sp
    ceil_mode = call.flag(5 if is_max else 4)
    out = _pool_out(x, kernel, stride, padding, dilation, ceil_mode)
    b = call.bpe(0)
    moved = numel(x) * b + numel(out) * b + (numel(out) * 8 if call.name.endswith("with_indices") else 0)
    return Work(float(numel(out) * numel(kernel)), float(moved), "Pooling", "vector", call.types[0],
                {"input_shape": x, "output_shape": out, "kernel": kernel})


@model("aten::max_pool2d_with_indices_backward", "aten::max_pool3d_with_indices_backward",
       "aten::avg_pool2d_backward", "aten::avg_pool3d_backward", op_class="Pooling")
def _pool_bwd(call: Call) -> Work:
    """grad_output, self, ...: grad_output (and indices) read, grad_input written."""
    go, x = call.shape(0), call.shape(1)
    b = call.bpe(0)
    idx = numel(go) * 8 if "max" in call.name else 0
    return Work(float(numel(go)), float(numel(go) * b + idx + numel(x) * b), "Pooling", "vector", call.types[0],
                {"grad_shape": go, "input_shape": x})


@model("aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d", "aten::adaptive_avg_pool3d",
       "aten::_adaptive_avg_pool3d", op_class="Pooling")
def _adaptive_pool(call: Call) -> Work:
    x = call.shape(0)
    size = call.ints(1) or []
    out = (*x[: len(x) - len(size)], *size)
    b = call.bpe(0)
    return Work(float(numel(x)), float((numel(x) + numel(out)) * b), "Pooling", "vector", call.types[0],
                {"input_shape": x, "output_shape": out})


# -- reductions, softmax -----------------------------------------------------------------------------------
#: op -> (index of dim in Concrete Inputs, index of keepdim, output element type override, returns indices too)
_REDUCE: dict[str, tuple[int | None, int | None, str | None, bool]] = {
    "sum": (1, 2, None, False), "mean": (1, 2, None, False), "nansum": (1, 2, None, False),
    "amax": (1, 2, None, False), "amin": (1, 2, None, False), "prod": (1, 2, None, False),
    "max": (1, 2, None, True), "min": (1, 2, None, True),
    "argmax": (1, 2, "long int", False), "argmin": (1, 2, "long int", False),
    "all": (1, 2, "bool", False), "any": (1, 2, "bool", False),
    "logsumexp": (1, 2, None, False),
    "norm": (2, 3, None, False), "linalg_vector_norm": (2, 3, None, False), "linalg_norm": (2, 3, None, False),
    "var": (1, 3, None, False), "std": (1, 3, None, False),
    "cumsum": (None, None, None, False), "cumprod": (None, None, None, False),
}


def _reduce(call: Call) -> Work:
    base = call.name.removeprefix("aten::")
    if base in ("max", "min") and call.is_tensor(1):  # max(a, b): elementwise
        return _elementwise(call)
    dim_i, keep_i, out_type, indices = _REDUCE[base]
    x = call.shape(0)
    n_in = numel(x)
    dims = call.ints(dim_i) if dim_i is not None else None
    if dim_i is None:  # scans keep the shape
        n_out = n_in
    elif not dims or not x:  # a full reduction
        n_out, indices = 1, False
    else:
        red = {d % len(x) for d in dims}
        keep = call.flag(keep_i) if keep_i is not None else False
        n_out = numel([1 if i in red else s for i, s in enumerate(x)] if keep else [s for i, s in enumerate(x) if i not in red])
    b_in = call.bpe(0)
    b_out = (bytes_per_element(out_type) if out_type else None) or b_in
    moved = n_in * b_in + n_out * b_out + (n_out * 8 if indices else 0)
    return Work(float(n_in), float(moved), "Reduce_fwd", "vector", call.types[0], {"input_shape": x, "output_elems": n_out})


for _r in _REDUCE:
    model(f"aten::{_r}", op_class="Reduce_fwd")(_reduce)


@model("aten::_softmax", "aten::softmax", "aten::_log_softmax", "aten::log_softmax", op_class="Softmax")
def _softmax(call: Call) -> Work:
    """3 FLOPs per element (max, exp-sum, scale); input read, output written (fp32 output with half_to_float)."""
    x = call.shape(0)
    n = numel(x)
    b = call.bpe(0)
    b_out = 4 if call.name.startswith("aten::_") and call.flag(2) else b
    return Work(3.0 * n, float(n * (b + b_out)), "Softmax", "vector", call.types[0], {"shape": x})


@model("aten::_softmax_backward_data", "aten::_log_softmax_backward_data", op_class="Softmax")
def _softmax_bwd(call: Call) -> Work:
    """grad_output, output read; grad_input written; 3 FLOPs per element."""
    x = call.shape(0)
    n = numel(x)
    return Work(3.0 * n, float(n * (call.bpe(0) + call.bpe(1) + call.bpe(0))), "Softmax", "vector", call.types[0],
                {"shape": x})


# -- embedding, gather ---------------------------------------------------------------------------------------
@model("aten::embedding", op_class="Embedding")
def _embedding(call: Call) -> Work:
    """weight (V, D), indices: the indexed rows read and written, the indices read; no FLOPs."""
    w, idx = call.shape(0), call.shape(1)
    n = numel(idx)
    d = numel(w[1:])
    return Work(0.0, float(n * d * 2 * call.bpe(0) + n * call.bpe(1)), "Embedding", "vector", call.types[0],
                {"weight": w, "indices": idx})


@model("aten::index_select", op_class="Embedding")
def _index_select(call: Call) -> Work:
    x, idx = call.shape(0), call.shape(2)
    dim = (call.ints(1) or [0])[0] % max(len(x), 1)
    out = numel(x[:dim]) * numel(idx) * numel(x[dim + 1:])
    return Work(0.0, float(2 * out * call.bpe(0) + numel(idx) * call.bpe(2)), "Embedding", "vector", call.types[0],
                {"input_shape": x, "indices": idx})


@model("aten::gather", op_class="Embedding")
def _gather(call: Call) -> Work:
    """self, dim, index: an element of self read and written per index element; the index read once per distinct
    element (an index ``expand``ed along the gathered rows, as a tied embedding's, is read once)."""
    idx = call.shape(2)
    n = numel(idx)
    return Work(0.0, float(2 * n * call.bpe(0) + call.distinct(2) * call.bpe(2)), "Embedding", "vector", call.types[0],
                {"indices": idx})


@model("aten::embedding_dense_backward", op_class="Embedding")
def _embedding_bwd(call: Call) -> Work:
    """grad_output (..., D), indices, num_weights: gradients accumulated into a (V, D) table."""
    g, idx = call.shape(0), call.shape(1)
    v = (call.ints(2) or [0])[0]
    d = g[-1]
    b = call.bpe(0)
    return Work(float(numel(g)), float(numel(g) * b + numel(idx) * call.bpe(1) + v * d * b), "Embedding", "vector",
                call.types[0], {"grad_shape": g, "num_weights": v})


# -- optimizers --------------------------------------------------------------------------------------------------
#: FLOPs per parameter of one fused optimizer step
_OPT_FLOPS = {"adam": 12, "adamw": 13, "sgd": 3}


def _tensor_list(call: Call, i: int) -> list[Shape]:
    d = call.dim(i)
    if not isinstance(d, list) or not d or not all(_is_shape(p) for p in d):
        raise NoModel("tensor list shapes not recorded")
    return [tuple(p) for p in d]


@model("aten::_fused_adam_", "aten::_fused_adamw_", "aten::_fused_sgd_", op_class="Optimizer")
def _fused_opt(call: Call) -> Work:
    """params, grads, then the states (exp_avgs, exp_avg_sqs, max_exp_avg_sqs where AMSGrad keeps them | momentum
    buffers) and the step counts (one 0-d tensor per parameter): every element of every list read once, the params
    and the states written. A list's element type is not recorded: 4 bytes assumed (fp32 master state), which the
    perf model corrects from the kernel's name where it names one. The step counts are one element per tensor, not
    per parameter (a list of them counted as a whole list of parameters: 8 passes over the parameters for AdamW's
    7)."""
    kind = call.name.removeprefix("aten::_fused_").rstrip("_")
    p = sum(numel(s) for s in _tensor_list(call, 0))
    listed = [i for i in range(len(call.types)) if call.types[i] == "TensorList" and _listed(call, i)]
    read = sum(numel(s) for i in listed for s in _tensor_list(call, i))
    # (written: the params and each state list as long as the params: not grads, not the step counts)
    states = [i for i in listed[2:] if sum(numel(s) for s in _tensor_list(call, i)) == p]
    written = p * (1 + len(states))
    return Work(float(_OPT_FLOPS[kind] * p), float((read + written) * 4), "Optimizer", "vector", "float",
                {"params": p, "tensor_lists": len(listed), "assumed_bpe": 4})


def _listed(call: Call, i: int) -> bool:
    try:
        return bool(_tensor_list(call, i))
    except ValueError:
        return False


# -- Inductor's templates ------------------------------------------------------------------------------------------
# torch.compile's max-autotune and FlexAttention generate Triton kernels from templates; the profiler records each
# launch as a CPU op named like the kernel (``triton_tem_fused_addmm_relu_0``), whose recorded arguments are the
# kernel's buffers: its inputs, the epilogue's extra inputs and its output, in an order the name does not tell. A
# matrix product's three matrices (M x K, K x N, M x N) are found among them by their shared sizes, which give its
# FLOPs whatever their roles; a convolution's input, filter and output by their batch and channels.
#: the fused ops of an Inductor template kernel's name, after ``triton_tem_fused_``
_TEMPLATE = r"^triton_tem_(?:fused_)?(?:\w*_)?"


def _tensors(call: Call) -> list[int]:
    return [i for i in range(len(call.dims)) if call.is_tensor(i)]


def _moved(call: Call) -> float:
    """Bytes of every recorded buffer of a generated kernel, each moved once (inputs read, the output written)."""
    return float(sum(call.distinct(i) * call.bpe(i) for i in _tensors(call)))


def _triangle(x: Shape, y: Shape, z: Shape) -> int | None:
    """The product a * b * c where the three 2-D shapes are {a, b}, {b, c} and {a, c} (a matrix product's A, B and
    C in some order and orientation), else None."""
    for p, q in ((x[0], x[1]), (x[1], x[0])):  # p: the size x shares with y
        for other in ((y[1],) if y[0] == p else ()) + ((y[0],) if y[1] == p else ()):
            if sorted(z) == sorted((q, other)):
                return p * q * other
    return None


@model_pattern(_TEMPLATE + r"(?:mm|addmm|bmm|baddbmm)(?:_|$)", op_class="GEMM")
def _inductor_gemm(call: Call) -> Work:
    """A matrix-product template (``triton_tem_fused_mm_0``, ``..._addmm_t_0``, ``..._bmm_1``): 2 * M * N * K FLOPs
    (times the batch) from the three matrices among its buffers, each buffer moved once."""
    found: set[tuple[int, int]] = set()  # (batch, M * N * K) of every three buffers that fit
    dtype = ""
    shapes = [(i, call.shape(i)) for i in _tensors(call)]
    for (i, x), (_, y), (_, z) in itertools.combinations(shapes, 3):
        if len(x) == len(y) == len(z) == 3 and x[0] == y[0] == z[0]:
            batch, x, y, z = x[0], x[1:], y[1:], z[1:]
        elif len(x) == len(y) == len(z) == 2:
            batch = 1
        else:
            continue
        mnk = _triangle(x, y, z)
        if mnk is not None:
            found.add((batch, mnk))
            dtype = dtype or call.types[i]
    if not found:
        raise NoModel("no three buffers of a matrix product (M x K, K x N, M x N) among the kernel's arguments")
    if len(found) > 1:
        raise NoModel("the kernel's buffers fit several matrix products")
    batch, mnk = found.pop()
    return Work(2.0 * batch * mnk, _moved(call), "GEMM", "matrix", dtype, {"B": batch, "MNK": mnk, "template": True})


@model_pattern(_TEMPLATE + r"convolution(?:_|$)", op_class="CONV_fwd")
def _inductor_conv(call: Call) -> Work:
    """A convolution template (``triton_tem_fused_convolution_0``): input (N, C_in, *), filter (C_out, C_in / groups,
    *k) and output (N, C_out, *) among its buffers; 2 * C_in / groups * prod(k) FLOPs per output element. Where input
    and output could trade places (C_in == C_out), the output is the one no larger than the input (a stride shrinks
    it); a fit that stays ambiguous gets no model."""
    shapes = [(i, call.shape(i)) for i in _tensors(call)]
    fits = {(i, x, w, o) for (i, x), (_, w), (_, o) in itertools.permutations(shapes, 3)
            if len(x) == len(w) == len(o) >= 3 and x[0] == o[0] and w[0] == o[1] and w[1] > 0 and x[1] % w[1] == 0}
    if len({numel(o) * numel(w[1:]) for _, _, w, o in fits}) > 1:
        fits = {f for f in fits if numel(f[3][2:]) <= numel(f[1][2:])}
    if not fits or len({numel(o) * numel(w[1:]) for _, _, w, o in fits}) > 1:
        raise NoModel("no single input, filter and output of a convolution among the kernel's arguments")
    i, x, w, o = min(fits)
    return Work(2.0 * numel(o) * numel(w[1:]), _moved(call), "CONV_fwd", "matrix", call.types[i],
                {"input_shape": x, "filter_shape": w, "output_shape": o, "groups": x[1] // w[1], "template": True})


@model_pattern(_TEMPLATE + r"flex_attention", op_class="SDPA_fwd")
def _flex_attention(call: Call) -> Work:
    raise NoModel("FlexAttention: its work depends on the block mask, whose contents the profile does not record")


#: Inductor's pointwise, reduction and persistent-reduction kernels (``triton_poi_fused_gelu_1``,
#: ``triton_red_fused_sum_2``, ``triton_per_fused__softmax_1``): memory-bound fusions of ATen ops
_FUSED = r"^triton_(poi|red|per)_"
#: op classes of :data:`_FUSED` kernels, by their flavor
FUSED_CLASSES = {"poi": "FusedPointwise", "red": "FusedReduce", "per": "FusedReduce"}


def _iterations(call: Call) -> int | None:
    """A generated kernel's iteration count: the product of its trailing integer scalars (``xnumel``, with ``ynumel``
    for a tiled pointwise kernel and ``r0_numel`` for a reduction; at most three), as ``Concrete Inputs`` records them;
    None where none is recorded."""
    sizes: list[int] = []
    for i in range(len(call.dims) - 1, -1, -1):
        t = call.text(i).strip()
        if call.is_tensor(i) or len(sizes) == 3 or not t.isdigit():
            break
        sizes.append(int(t))
    return math.prod(sizes) if sizes else None


def _inductor_fused(call: Call) -> Work:
    """An Inductor fusion of pointwise ops or of a reduction, over ``n`` iterations (:func:`_iterations`): 1 FLOP each,
    and each recorded buffer read or written once, but no more of its elements than there are iterations (a fusion
    that gathers rows reads a few of a large table's: an embedding, the loss's target logits). An estimate both ways:
    a buffer updated in place (Inductor's ``in_out_ptr``) is read and written but counted once."""
    tensors = _tensors(call)
    n = _iterations(call)
    if not tensors or n is None:
        raise NoModel("the generated kernel's buffers or its iteration count (xnumel) are not recorded")
    big = max(tensors, key=lambda i: (numel(call.shape(i)), -i))
    flavor = re.match(_FUSED, call.name)
    cls = FUSED_CLASSES[flavor.group(1)] if flavor else "FusedPointwise"
    moved = float(sum(min(call.distinct(i), n) * call.bpe(i) for i in tensors))
    return Work(float(n), moved, cls, "vector", call.types[big], {"buffers": len(tensors), "iterations": n})


for _flavor, _cls in (("poi", "FusedPointwise"), ("red", "FusedReduce"), ("per", "FusedReduce")):
    model_pattern(rf"^triton_{_flavor}_", op_class=_cls)(_inductor_fused)


@model_pattern(r"^aten::_foreach_", op_class="Optimizer")
def _foreach(call: Call) -> Work:
    """``torch._foreach_*`` (the default, ``foreach``, optimizers' step; gradient clipping's norms): listed with its
    reason, so that the GPU time of an optimizer step is not left unexplained. The profiler records no element type
    for a TensorList argument, and (PyTorch 2.11) no shapes for a foreach op's lists: no FLOPs or bytes are made up."""
    _tensor_list(call, 0)
    raise NoModel("no model for tensor-list (foreach) ops")
