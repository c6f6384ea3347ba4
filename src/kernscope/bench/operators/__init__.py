"""Built-in operators, each with a torch baseline and a Triton implementation written for kernscope.

Shapes follow TritonBench's defaults where it has them (e.g. attention (4, 48, 128..4096, 64)).
Triton implementations import their kernels lazily, so the CPU path needs no triton.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ...analyze.perf.formulas import gemm_bytes, gemm_flops, sdpa_bwd_flops, sdpa_flops
from ..api import Input, Operator, OperatorRegistry, impl
from .gemms import FP8Gemm, GroupedGemm, Int4Gemm
from .llm import Addmm, DecodingAttention, Embedding, GeGLU, Rope, Sum, SwiGLU, Welford


def _elt(t: Any) -> int:
    return t.element_size()


class VectorAdd(Operator):
    name = "vector_add"
    x_label = ("Size",)
    default_dtype = "float32"

    def inputs(self) -> Iterator[Input]:
        import torch

        sizes = [2**p for p in range(12, 29, 2)] if self.device.startswith("cuda") else [2**p for p in range(10, 17, 2)]
        for n in sizes:
            g = torch.Generator(device=self.device).manual_seed(n)
            x = torch.randn(n, device=self.device, dtype=self.dtype, generator=g, requires_grad=self.mode != "fwd")
            y = torch.randn(n, device=self.device, dtype=self.dtype, generator=g, requires_grad=self.mode != "fwd")
            yield Input((n,), (x, y))

    def bytes(self, inp: Input) -> float:
        return 3 * inp.args[0].numel() * _elt(inp.args[0])

    def flops(self, inp: Input) -> float | None:
        return float(inp.args[0].numel()) if self.mode == "fwd" else None  # the backward only passes gradients on

    @impl(baseline=True)
    def torch_add(self, x, y):
        """torch.add (ATen vectorized elementwise kernel)."""
        return lambda: x + y

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_add(self, x, y):
        """kernscope's Triton vector add, BLOCK=1024."""
        from ..kernels.simple import add

        return lambda: add(x, y)


class Softmax(Operator):
    name = "softmax"
    x_label = ("M", "N")

    def inputs(self) -> Iterator[Input]:
        import torch

        m = 4096 if self.device.startswith("cuda") else 64
        ns = [128 * i for i in (2, 8, 16, 32, 64, 128)] if self.device.startswith("cuda") else [64, 256]
        for n in ns:
            x = torch.randn(m, n, device=self.device, dtype=self.dtype, requires_grad=self.mode != "fwd")
            yield Input((m, n), (x,))

    def bytes(self, inp: Input) -> float:
        return 2 * inp.args[0].numel() * _elt(inp.args[0])

    @impl(baseline=True)
    def torch_softmax(self, x):
        import torch

        return lambda: torch.softmax(x, dim=-1)

    @impl
    def naive_softmax(self, x):
        """Softmax written out in torch ops (row max, exp, sum, divide): TritonBench's baseline."""
        import torch

        def f():
            z = x - x.max(dim=-1, keepdim=True)[0]
            e = torch.exp(z)
            return e / e.sum(dim=-1, keepdim=True)

        return f

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_softmax(self, x):
        """One row per program, whole row in registers."""
        from ..kernels.simple import softmax

        return lambda: softmax(x)


class _NormBase(Operator):
    x_label = ("M", "N")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        m = 4096 if self.device.startswith("cuda") else 64
        ns = [512, 1024, 2048, 4096, 8192] if self.device.startswith("cuda") else [128, 512]
        for n in ns:
            rg = self.mode != "fwd"
            x = torch.randn(m, n, device=self.device, dtype=self.dtype, requires_grad=rg)
            w = torch.rand(n, device=self.device, dtype=self.dtype, requires_grad=rg)
            b = torch.randn(n, device=self.device, dtype=self.dtype, requires_grad=rg)
            yield Input((m, n), (x, w, b))

    def bytes(self, inp: Input) -> float:
        return 2 * inp.args[0].numel() * _elt(inp.args[0])


class LayerNorm(_NormBase):
    name = "layer_norm"

    @impl(baseline=True)
    def torch_layer_norm(self, x, w, b):
        import torch.nn.functional as F

        return lambda: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_layer_norm(self, x, w, b):
        """Single-pass row LayerNorm (fp32 statistics)."""
        from ..kernels.simple import layer_norm

        return lambda: layer_norm(x, w, b, 1e-5)


class RMSNorm(_NormBase):
    name = "rms_norm"

    @impl(baseline=True, aliases=("llama_rms",))
    def torch_rms_norm(self, x, w, b):
        """LlamaRMSNorm's computation (fp32 statistics, eps 1e-6): TritonBench's llama_rms."""
        import torch

        def f():
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)

        return f

    @impl
    def torch_fused_rms_norm(self, x, w, b):
        """torch.nn.functional.rms_norm (fused ATen kernel where available)."""
        import torch.nn.functional as F

        return lambda: F.rms_norm(x, (x.shape[-1],), w, 1e-6)

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_rms_norm(self, x, w, b):
        from ..kernels.simple import rms_norm

        return lambda: rms_norm(x, w, 1e-6)


class Gemm(Operator):
    name = "gemm"
    x_label = ("M", "N", "K")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = [(s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192)] + [(4096, 4096, 14336), (4096, 14336, 4096)]
        if not self.device.startswith("cuda"):
            shapes = [(64, 64, 64), (128, 96, 160)]
        for m, n, k in shapes:
            rg = self.mode != "fwd"
            if self.dtype_name.startswith("float8"):
                a = (torch.randn(m, k, device=self.device) * 0.5).to(self.dtype)
                b = (torch.randn(n, k, device=self.device) * 0.5).to(self.dtype).t()  # column-major for _scaled_mm
            else:
                a = torch.randn(m, k, device=self.device, dtype=self.dtype, requires_grad=rg)
                b = torch.randn(k, n, device=self.device, dtype=self.dtype, requires_grad=rg)
            yield Input((m, n, k), (a, b))

    def flops(self, inp: Input) -> float:
        """2MNK forward; the backward computes dA and dB (two GEMMs of the same size)."""
        m, n, k = inp.x
        fwd = gemm_flops(m, n, k)
        return {"fwd": fwd, "bwd": 2 * fwd, "fwd_bwd": 3 * fwd}[self.mode]

    def bytes(self, inp: Input) -> float:
        m, n, k = inp.x
        e = _elt(inp.args[0])
        return gemm_bytes(m, n, k, e, e, 2 if e == 1 else e)

    @impl(baseline=True, aliases=("aten_matmul",))
    def torch_matmul(self, a, b):
        """torch.matmul (cuBLAS); for fp8 inputs, a bf16 matmul of the same fp8 values."""
        import torch

        if a.dtype.is_floating_point and a.element_size() == 1:
            return lambda: torch.matmul(a.to(torch.bfloat16), b.to(torch.bfloat16))
        return lambda: torch.matmul(a, b)

    @impl(needs_cuda=True, modes=("fwd",), aliases=("triton_tutorial_matmul",))
    def triton_matmul(self, a, b):
        """Tiled Triton GEMM, grouped ordering, autotuned over 5 tile configs, fp32 accumulate."""
        import torch

        from ..kernels.matmul import matmul

        out = torch.bfloat16 if a.element_size() == 1 else None
        return lambda: matmul(a, b, out_dtype=out)

    @impl(needs_cuda=True, modes=("fwd",), dtypes=("float8_e4m3fn",))
    def torch_scaled_mm(self, a, b):
        """torch._scaled_mm: fp8 e4m3 x fp8 e4m3 -> bf16 (sm_89+)."""
        import torch

        one = torch.ones((), device=a.device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


class CrossEntropy(Operator):
    name = "cross_entropy"
    x_label = ("Rows", "Vocab")
    default_dtype = "bfloat16"
    tolerances = {**Operator.tolerances, "bfloat16": (1e-2, 1e-2)}

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = [(r, v) for r in (4096, 8192) for v in (32000, 128256)] if self.device.startswith("cuda") else [(64, 1000)]
        for r, v in shapes:
            x = torch.randn(r, v, device=self.device, dtype=self.dtype, requires_grad=self.mode != "fwd")
            t = torch.randint(0, v, (r,), device=self.device)
            yield Input((r, v), (x, t))

    def bytes(self, inp: Input) -> float:
        return inp.args[0].numel() * _elt(inp.args[0])

    @impl(baseline=True, aliases=("cross_entropy_loss",))
    def torch_cross_entropy(self, x, t):
        import torch.nn.functional as F

        return lambda: F.cross_entropy(x.float(), t)

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_cross_entropy(self, x, t):
        """One row per program, online log-sum-exp over the vocabulary in 4096-wide chunks."""
        from ..kernels.simple import cross_entropy

        return lambda: cross_entropy(x, t)


class FlashAttention(Operator):
    name = "flash_attention"
    x_label = ("Batch", "Heads", "SeqLen", "Dhead", "causal")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        if self.device.startswith("cuda"):
            grid = [(c, d, s) for c in (False, True) for d in (64, 128) for s in (128, 256, 512, 1024, 2048, 4096)]
            b, h = 4, 48
        else:
            grid = [(False, 16, 32), (True, 16, 64)]
            b, h = 2, 2
        for causal, d, s in grid:
            rg = self.mode != "fwd"
            g = torch.Generator(device=self.device).manual_seed(s * 131 + d + causal)
            q, k, v = (torch.randn(b, h, s, d, device=self.device, dtype=self.dtype, generator=g, requires_grad=rg) for _ in range(3))
            yield Input((b, h, s, d, causal), (q, k, v), {"causal": causal})

    def flops(self, inp: Input) -> float:
        """The perf model's attention counts: forward Q K^T + P V, backward with the Q K^T recompute (2.5x)."""
        b, h, s, d, causal = inp.x
        fwd = sdpa_flops(b, h, s, s, d, d, causal)
        bwd = sdpa_bwd_flops(b, h, s, s, h, d, d, causal)
        return {"fwd": fwd, "bwd": bwd, "fwd_bwd": fwd + bwd}[self.mode]

    def _sdpa(self, backend_name: str, q, k, v, causal):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)

        def f():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return f

    @impl(baseline=True, aliases=("aten",))
    def sdpa_math(self, q, k, v, causal):
        """PyTorch SDPA, math backend (reference)."""
        return self._sdpa("MATH", q, k, v, causal)

    @impl(needs_cuda=True, aliases=("sdpa",))
    def sdpa_flash(self, q, k, v, causal):
        """PyTorch SDPA, FlashAttention-2 backend."""
        return self._sdpa("FLASH_ATTENTION", q, k, v, causal)

    @impl(needs_cuda=True, aliases=("cudnn",))
    def sdpa_cudnn(self, q, k, v, causal):
        """PyTorch SDPA, cuDNN backend."""
        return self._sdpa("CUDNN_ATTENTION", q, k, v, causal)

    @impl(needs_cuda=True)
    def sdpa_efficient(self, q, k, v, causal):
        """PyTorch SDPA, memory-efficient (CUTLASS) backend."""
        return self._sdpa("EFFICIENT_ATTENTION", q, k, v, causal)

    @impl(needs_cuda=True, aliases=("triton_tutorial_flash_v2",))
    def triton_flash(self, q, k, v, causal):
        """kernscope's Triton flash attention (FA2-style fwd + bwd)."""
        from ..kernels.flash_attn import flash_attention

        scale = 1.0 / math.sqrt(q.shape[-1])
        return lambda: flash_attention(q, k, v, causal, scale)

    @staticmethod
    def _bshd(q, k, v):
        """(B, H, S, D) -> the (B, S, H, D) layout FlashAttention's packages take, copied outside the timing."""
        return (t.transpose(1, 2).contiguous().detach().requires_grad_(t.requires_grad) for t in (q, k, v))

    @impl(needs_cuda=True, modules=("flash_attn",), nearest="sdpa_flash")
    def flash_v2(self, q, k, v, causal):
        """FlashAttention-2, the flash_attn package (output viewed back as (B, H, S, D))."""
        from flash_attn import flash_attn_func

        qs, ks, vs = self._bshd(q, k, v)
        scale = 1.0 / math.sqrt(q.shape[-1])
        return lambda: flash_attn_func(qs, ks, vs, softmax_scale=scale, causal=causal).transpose(1, 2)

    @impl(needs_cuda=True, modules=("flash_attn_interface", "fa3.hopper.flash_attn_interface"), nearest="sdpa_cudnn")
    def flash_v3(self, q, k, v, causal):
        """FlashAttention-3 (Hopper), the flash_attn_interface package (output viewed back as (B, H, S, D))."""
        try:
            from flash_attn_interface import flash_attn_func
        except ImportError:
            from fa3.hopper.flash_attn_interface import flash_attn_func

        qs, ks, vs = self._bshd(q, k, v)
        scale = 1.0 / math.sqrt(q.shape[-1])

        def f():
            out = flash_attn_func(qs, ks, vs, softmax_scale=scale, causal=causal)
            return (out[0] if isinstance(out, tuple) else out).transpose(1, 2)  # some versions return (out, lse)

        return f


BUILTIN = (VectorAdd, Softmax, LayerNorm, RMSNorm, Gemm, CrossEntropy, FlashAttention, SwiGLU, GeGLU, Embedding, Rope, Sum,
           Addmm, Welford, DecodingAttention,  # these eight: .llm
           FP8Gemm, Int4Gemm, GroupedGemm)  # .gemms


def builtin_registry() -> OperatorRegistry:
    """A fresh registry holding the built-in operators."""
    reg = OperatorRegistry()
    for cls in BUILTIN:
        reg.operator(cls)
    return reg
