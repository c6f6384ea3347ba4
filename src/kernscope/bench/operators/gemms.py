"""The GEMM family added for TritonBench users (issue #27): the fp8 GEMM with per-tensor scales, the weight-only
int4 GEMM (bf16 activations, int4 weights in groups of 128) and the grouped GEMM of MoE experts. Each has a torch
baseline and a Triton kernel of ours (``bench/kernels/matmul.py``, ``bench/kernels/quant.py``); forward only, as
TritonBench runs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...analyze.perf.formulas import gemm_bytes, gemm_flops
from ..api import Input, Operator, impl

#: the fp8 e4m3 format's largest finite value: per-tensor scales map each tensor's absolute maximum onto it
FP8_E4M3_MAX = 448.0


class FP8Gemm(Operator):
    """``(A_fp8 · scale_a) @ (B_fp8 · scale_b)`` to bf16: A and B quantized to fp8 e4m3 with per-tensor scales from
    their absolute maximum (the usual fp8 recipe), B column-major as cuBLASLt wants it."""

    name = "fp8_gemm"
    x_label = ("M", "N", "K")
    default_dtype = "float8_e4m3fn"
    #: both round to bf16 once (2^-8 relative), but Hopper's fp8 tensor-core accumulation differs between cuBLASLt and
    #: Triton over long K: on the H200, max |diff| 0.016-0.094 for K <= 8192 and 0.125 (4 bf16 ulps at ~5; outputs to
    #: ~12) at K = 14,336, far below the inputs' fp8 rounding (2^-4 relative)
    tolerances = {**Operator.tolerances, "float8_e4m3fn": (2e-2, 1.5e-1)}

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(s, s, s) for s in (1024, 2048, 4096, 8192)] + [(8192, 4096, 14336), (8192, 14336, 4096)]
                  if self.device.startswith("cuda") else [(64, 96, 128)])
        for m, n, k in shapes:
            g = torch.Generator(device=self.device).manual_seed(m + 3 * n + 7 * k)
            a = torch.randn(m, k, device=self.device, generator=g)
            b = torch.randn(n, k, device=self.device, generator=g) * 0.02  # weights: smaller than activations
            sa, sb = (t.abs().max().float() / FP8_E4M3_MAX for t in (a, b))
            a8 = (a / sa).to(self.dtype)
            b8 = (b / sb).to(self.dtype).t()  # (K, N), column-major
            yield Input((m, n, k), (a8, b8, sa.reshape(()), sb.reshape(())))

    def flops(self, inp: Input) -> float:
        m, n, k = inp.x
        return gemm_flops(m, n, k)

    def bytes(self, inp: Input) -> float:
        m, n, k = inp.x
        return gemm_bytes(m, n, k, 1, 1, 2)

    @impl(baseline=True, modes=("fwd",), aliases=("torch_scaled_mm",))
    def torch_fp8_gemm(self, a, b, sa, sb):
        """torch._scaled_mm (cuBLASLt's fp8 GEMM on sm_89+), per-tensor scales, bf16 out."""
        import torch

        return lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_fp8_gemm(self, a, b, sa, sb):
        """kernscope's Triton GEMM on fp8 inputs (fp32 accumulate), the scales applied in its epilogue, bf16 out."""
        import torch

        from ..kernels.matmul import matmul

        return lambda: matmul(a, b, out_dtype=torch.bfloat16, scale_a=sa, scale_b=sb)


#: int4 weights share one scale per this many rows of K (the common group size of weight-only quantization)
INT4_GROUP = 128


def pack_int4(q: Any) -> Any:
    """(K, N) int8 values in [-8, 7] -> (K / 2, N) uint8: row 2i in the low nibble, row 2i + 1 in the high one,
    each stored as value + 8."""
    import torch

    u = (q.to(torch.int16) + 8).to(torch.uint8)
    return u[0::2] | (u[1::2] << 4)


def unpack_int4(packed: Any) -> Any:
    """The inverse of :func:`pack_int4`: (K / 2, N) uint8 -> (K, N) int8."""
    import torch

    lo = (packed & 0xF).to(torch.int8) - 8
    hi = (packed >> 4).to(torch.int8) - 8
    return torch.stack((lo, hi), 1).reshape(-1, packed.shape[1])


class Int4Gemm(Operator):
    """``x @ dequant(W)``: bf16 activations (M, K) times int4 weights (K, N), symmetric, one bf16 scale per 128 rows
    of K and column (weight-only quantization, as in LLM decoding)."""

    name = "bf16xint4_gemm"
    x_label = ("M", "N", "K")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(m, 4096, 4096) for m in (1, 16, 64, 256, 1024, 4096)] + [(16, 14336, 4096), (16, 4096, 14336)]
                  if self.device.startswith("cuda") else [(4, 64, 256)])
        for m, n, k in shapes:
            g = torch.Generator(device=self.device).manual_seed(m + 5 * n + 11 * k)
            x = torch.randn(m, k, device=self.device, dtype=self.dtype, generator=g)
            w = torch.randn(k, n, device=self.device, generator=g) * 0.02
            scale = (w.reshape(k // INT4_GROUP, INT4_GROUP, n).abs().amax(1) / 7.0).clamp_min(1e-8)
            q = torch.clamp(torch.round(w / scale.repeat_interleave(INT4_GROUP, 0)), -8, 7).to(torch.int8)
            yield Input((m, n, k), (x, pack_int4(q), scale.to(self.dtype)))

    def flops(self, inp: Input) -> float:
        m, n, k = inp.x
        return gemm_flops(m, n, k)

    def bytes(self, inp: Input) -> float:
        """Activations and output in bf16, the weights at half a byte, the scales."""
        m, n, k = inp.x
        return m * k * 2 + k * n / 2 + (k // INT4_GROUP) * n * 2 + m * n * 2

    @impl(baseline=True, modes=("fwd",))
    def torch_dequant_mm(self, x, packed, scale):
        """The weights unpacked and scaled to bf16 in torch ops, then x @ W (cuBLAS): what runs without a fused kernel."""
        import torch

        def f():
            w = unpack_int4(packed).to(x.dtype) * torch.repeat_interleave(scale, INT4_GROUP, 0)
            return x @ w

        return f

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_int4_gemm(self, x, packed, scale):
        """kernscope's Triton GEMM reading int4 weights: unpacked in registers, each K tile's dot scaled once (fp32)."""
        from ..kernels.quant import int4_gemm

        return lambda: int4_gemm(x, packed, scale, INT4_GROUP)


class GroupedGemm(Operator):
    """MoE expert GEMMs: the tokens routed to each of G experts (rows of X grouped by expert, counts uneven and
    multiples of 16) times that expert's weight (G, K, N), all in one call."""

    name = "grouped_gemm"
    x_label = ("Groups", "M", "N", "K")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(8, 4096, 14336, 4096), (8, 16384, 14336, 4096), (64, 16384, 1408, 2048), (128, 16384, 768, 2048)]
                  if self.device.startswith("cuda") else [(4, 96, 48, 64)])
        for groups, m, n, k in shapes:
            g = torch.Generator(device="cpu").manual_seed(groups + m + n + k)
            # uneven routing: expert popularity from a skewed distribution, counts in multiples of 16
            weight = torch.rand(groups, generator=g) ** 2 + 0.05
            counts = torch.multinomial(weight / weight.sum(), m // 16, replacement=True, generator=g).bincount(minlength=groups) * 16
            offs = counts.cumsum(0).to(torch.int32).to(self.device)
            gd = torch.Generator(device=self.device).manual_seed(groups * 7 + n)
            x = torch.randn(m, k, device=self.device, dtype=self.dtype, generator=gd)
            w = (torch.randn(groups, n, k, device=self.device, dtype=self.dtype, generator=gd) * 0.02).transpose(1, 2)
            yield Input((groups, m, n, k), (x, w, offs))

    def flops(self, inp: Input) -> float:
        _, m, n, k = inp.x
        return gemm_flops(m, n, k)

    def bytes(self, inp: Input) -> float:
        groups, m, n, k = inp.x
        e = inp.args[0].element_size()
        return (m * k + groups * k * n + m * n) * e

    @impl(baseline=True, modes=("fwd",))
    def torch_grouped_mm(self, x, w, offs):
        """torch._grouped_mm: every expert's GEMM in one call (CUTLASS grouped GEMM on sm_90)."""
        import torch

        return lambda: torch._grouped_mm(x, w, offs=offs)

    @impl(modes=("fwd",))
    def torch_loop_mm(self, x, w, offs):
        """One torch.mm per expert, written out (what a model without a grouped kernel runs)."""
        import torch

        ends = offs.cpu().tolist()  # outside the timing
        spans = list(zip([0, *ends[:-1]], ends))

        def f():
            out = torch.empty((x.shape[0], w.shape[2]), device=x.device, dtype=x.dtype)
            for e, (a, b) in enumerate(spans):
                if b > a:
                    torch.mm(x[a:b], w[e], out=out[a:b])
            return out

        return f

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_grouped_gemm(self, x, w, offs):
        """kernscope's Triton grouped GEMM: one launch, programs walk every expert's tiles."""
        from ..kernels.quant import grouped_gemm, grouped_gemm_sizes

        sizes = grouped_gemm_sizes(offs)  # outside the timing
        return lambda: grouped_gemm(x, w, offs, sizes)
