"""Operators of LLM blocks, added for TritonBench users (issue #27): SwiGLU/GeGLU gates, embedding lookup,
rotary embedding, row sum, row variance/mean (welford), addmm and decoding attention. Each has a torch baseline
and a Triton kernel of ours (``bench/kernels/more.py``, ``matmul.py``, ``decode_attn.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...analyze.perf.formulas import gemm_bytes, gemm_flops, sdpa_flops
from ..api import Input, Operator, impl


def _elt(t: Any) -> int:
    return t.element_size()


class _Glu(Operator):
    """A GLU gate of an MLP: ``act(gate) * up`` on (tokens, hidden) activations (the elementwise part of a
    Llama/Gemma MLP; its two GEMMs are the gemm operator's)."""

    x_label = ("Tokens", "Hidden")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = [(4096, h) for h in (4096, 8192, 11008, 14336)] if self.device.startswith("cuda") else [(64, 256)]
        for t, h in shapes:
            g = torch.Generator(device=self.device).manual_seed(t * 7 + h)
            a, b = (torch.randn(t, h, device=self.device, dtype=self.dtype, generator=g,
                                requires_grad=self.mode != "fwd") for _ in range(2))
            yield Input((t, h), (a, b))

    def bytes(self, inp: Input) -> float:
        return 3 * inp.args[0].numel() * _elt(inp.args[0])


class SwiGLU(_Glu):
    name = "swiglu"

    @impl(baseline=True)
    def torch_swiglu(self, a, b):
        """F.silu(gate) * up (two ATen kernels)."""
        import torch.nn.functional as F

        return lambda: F.silu(a) * b

    @impl(needs_cuda=True)
    def triton_swiglu(self, a, b):
        """One fused Triton pass, fp32 math; backward: one pass for both gradients."""
        from ..kernels.more import glu_autograd

        return lambda: glu_autograd(a, b, gelu=False)


class GeGLU(_Glu):
    name = "geglu"

    @impl(baseline=True)
    def torch_geglu(self, a, b):
        """F.gelu(gate, approximate="tanh") * up."""
        import torch.nn.functional as F

        return lambda: F.gelu(a, approximate="tanh") * b

    @impl(needs_cuda=True)
    def triton_geglu(self, a, b):
        """One fused Triton pass, fp32 math, GELU's tanh approximation; backward: one pass for both gradients."""
        from ..kernels.more import glu_autograd

        return lambda: glu_autograd(a, b, gelu=True)


class Embedding(Operator):
    name = "embedding"
    x_label = ("Tokens", "Vocab", "Dim")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(t, v, 4096) for v in (32000, 128256) for t in (2048, 8192, 32768)]
                  if self.device.startswith("cuda") else [(64, 1000, 64)])
        for t, v, d in shapes:
            g = torch.Generator(device=self.device).manual_seed(t + v + d)
            w = torch.randn(v, d, device=self.device, dtype=self.dtype, generator=g, requires_grad=self.mode != "fwd")
            ids = torch.randint(0, v, (t,), device=self.device, generator=g)
            yield Input((t, v, d), (ids, w))

    def bytes(self, inp: Input) -> float:
        ids, w = inp.args
        return 2 * ids.numel() * w.shape[1] * _elt(w) + ids.numel() * ids.element_size()

    @impl(baseline=True)
    def torch_embedding(self, ids, w):
        """F.embedding (ATen index_select kernel)."""
        import torch.nn.functional as F

        return lambda: F.embedding(ids, w)

    @impl(needs_cuda=True)
    def triton_embedding(self, ids, w):
        """One program per token copies its row; backward: each token's gradient added to its row (fp32 atomics)."""
        from ..kernels.more import embedding_autograd

        return lambda: embedding_autograd(ids, w)


class Rope(Operator):
    name = "rope"
    x_label = ("Batch", "Heads", "SeqLen", "Dhead")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(4, 32, s, 128) for s in (512, 1024, 2048, 4096, 8192)] if self.device.startswith("cuda")
                  else [(1, 2, 16, 32)])
        for b, h, s, d in shapes:
            g = torch.Generator(device=self.device).manual_seed(b * h + s + d)
            x = torch.randn(b, h, s, d, device=self.device, dtype=self.dtype, generator=g, requires_grad=self.mode != "fwd")
            inv = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=self.device, dtype=torch.float32) / d))
            ang = torch.outer(torch.arange(s, device=self.device, dtype=torch.float32), inv)  # (S, D/2)
            yield Input((b, h, s, d), (x, ang.cos().contiguous(), ang.sin().contiguous()))

    def bytes(self, inp: Input) -> float:
        return 2 * inp.args[0].numel() * _elt(inp.args[0])

    @impl(baseline=True, aliases=("apply_rotary_pos_emb",))
    def torch_rope(self, x, cos, sin):
        """x·cos + rotate_half(x)·sin in torch ops (Llama's apply_rotary_pos_emb), fp32 math."""
        import torch

        c, s = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
        half = x.shape[-1] // 2

        def f():
            rot = torch.cat((-x[..., half:], x[..., :half]), -1)
            return (x * c + rot * s).to(x.dtype)

        return f

    @impl(needs_cuda=True)
    def triton_rope(self, x, cos, sin):
        """One program per (batch, head, position) row, fp32 math; backward: the rotation by the opposite angle."""
        from ..kernels.more import rope_autograd

        return lambda: rope_autograd(x, cos, sin)


class Sum(Operator):
    name = "sum"
    x_label = ("M", "N")
    default_dtype = "float32"
    #: an fp32 sum of N values is exact to ~sqrt(N)·eps·|x| whatever the order: on the H100 ATen's reduce and our
    #: kernel are both 1.1e-5..1.2e-4 from the fp64 sum at N = 1,024..65,536, so sums near 0 need an atol
    tolerances = {**Operator.tolerances, "float32": (1e-4, 1e-3)}

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(4096, 1024), (4096, 4096), (4096, 16384), (16384, 4096), (1024, 65536)]
                  if self.device.startswith("cuda") else [(64, 256)])
        for m, n in shapes:
            g = torch.Generator(device=self.device).manual_seed(m + n)
            x = torch.randn(m, n, device=self.device, dtype=self.dtype, generator=g, requires_grad=self.mode != "fwd")
            yield Input((m, n), (x,))

    def bytes(self, inp: Input) -> float:
        x = inp.args[0]
        return x.numel() * _elt(x) + x.shape[0] * _elt(x)

    def flops(self, inp: Input) -> float | None:
        return float(inp.args[0].numel()) if self.mode == "fwd" else None

    @impl(baseline=True)
    def torch_sum(self, x):
        """x.sum(-1) (ATen reduce kernel)."""
        return lambda: x.sum(-1)

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_sum(self, x):
        """One program per row, fp32 accumulation in 4096-wide chunks."""
        from ..kernels.more import row_sum

        return lambda: row_sum(x)


class Addmm(Operator):
    name = "addmm"
    x_label = ("M", "N", "K")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(4096, 4096, 4096), (8192, 8192, 8192), (20120, 512, 1536), (34579, 512, 1536), (16384, 1024, 4096)]
                  if self.device.startswith("cuda") else [(64, 32, 48)])
        for m, n, k in shapes:
            g = torch.Generator(device=self.device).manual_seed(m + n + k)
            rg = self.mode != "fwd"
            a = torch.randn(m, k, device=self.device, dtype=self.dtype, generator=g, requires_grad=rg)
            b = torch.randn(k, n, device=self.device, dtype=self.dtype, generator=g, requires_grad=rg)
            bias = torch.randn(n, device=self.device, dtype=self.dtype, generator=g, requires_grad=rg)
            yield Input((m, n, k), (bias, a, b))

    def flops(self, inp: Input) -> float:
        m, n, k = inp.x
        return float(gemm_flops(m, n, k) + m * n)

    def bytes(self, inp: Input) -> float:
        m, n, k = inp.x
        e = _elt(inp.args[1])
        return gemm_bytes(m, n, k, e, e, e) + n * e

    @impl(baseline=True, aliases=("aten_addmm",))
    def torch_addmm(self, bias, a, b):
        """torch.addmm (cuBLAS(Lt) GEMM with the bias in its epilogue)."""
        import torch

        return lambda: torch.addmm(bias, a, b)

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_addmm(self, bias, a, b):
        """kernscope's Triton GEMM with the bias added to the fp32 accumulator in its epilogue."""
        from ..kernels.matmul import matmul

        return lambda: matmul(a, b, bias=bias)


class Welford(Operator):
    """Row variance and mean (LayerNorm's statistics), as TritonBench's welford operator."""

    name = "welford"
    x_label = ("M", "N")
    default_dtype = "float32"
    tolerances = {**Operator.tolerances, "float32": (1e-4, 1e-4)}

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(4096, n) for n in (1024, 2048, 4096, 8192, 16384)] if self.device.startswith("cuda")
                  else [(64, 256)])
        for m, n in shapes:
            g = torch.Generator(device=self.device).manual_seed(m * 3 + n)
            x = 2.0 + torch.randn(m, n, device=self.device, dtype=self.dtype, generator=g,
                                  requires_grad=self.mode != "fwd")
            yield Input((m, n), (x.detach().requires_grad_(self.mode != "fwd"),))

    def bytes(self, inp: Input) -> float:
        x = inp.args[0]
        return x.numel() * _elt(x) + 2 * x.shape[0] * _elt(x)

    @impl(baseline=True)
    def torch_var_mean(self, x):
        """torch.var_mean(x, -1, correction=0) (ATen's Welford reduction)."""
        import torch

        return lambda: torch.var_mean(x, dim=-1, correction=0)

    @impl(needs_cuda=True, modes=("fwd",))
    def triton_var_mean(self, x):
        """One program per row, the row in registers, fp32 mean then centred sum of squares."""
        from ..kernels.more import var_mean

        return lambda: var_mean(x)


class DecodingAttention(Operator):
    """One new token per sequence attending to a long KV cache, grouped-query heads (LLM decoding)."""

    name = "decoding_attention"
    x_label = ("Batch", "Heads", "KVHeads", "KVLen", "Dhead")
    default_dtype = "bfloat16"

    def inputs(self) -> Iterator[Input]:
        import torch

        shapes = ([(1, 32, 8, s, 128) for s in (4096, 16384, 65536, 131072)] + [(16, 32, 8, s, 128) for s in (2048, 8192, 32768)]
                  if self.device.startswith("cuda") else [(2, 4, 2, 300, 64)])
        for b, h, hkv, s, d in shapes:
            g = torch.Generator(device=self.device).manual_seed(b * h + hkv + s + d)
            q = torch.randn(b, h, 1, d, device=self.device, dtype=self.dtype, generator=g)
            k, v = (torch.randn(b, hkv, s, d, device=self.device, dtype=self.dtype, generator=g) for _ in range(2))
            yield Input((b, h, hkv, s, d), (q, k, v))

    def flops(self, inp: Input) -> float:
        b, h, _, s, d = inp.x
        return sdpa_flops(b, h, 1, s, d, d, False)

    def bytes(self, inp: Input) -> float:
        """The KV cache read once, the query read and the output written."""
        b, h, hkv, s, d = inp.x
        return (2 * b * hkv * s * d + 2 * b * h * d) * _elt(inp.args[0])

    @impl(baseline=True, modes=("fwd",), aliases=("aten", "sdpa"))
    def torch_sdpa(self, q, k, v):
        """F.scaled_dot_product_attention with enable_gqa=True (PyTorch picks the backend)."""
        import torch.nn.functional as F

        return lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    @impl(needs_cuda=True, modes=("fwd",), aliases=("triton_decode",))
    def triton_splitk(self, q, k, v):
        """kernscope's Triton split-K decoding (flash-decoding): KV chunks in parallel, merged by log-sum-exp."""
        from ..kernels.decode_attn import decode_attention

        return lambda: decode_attention(q, k, v)
