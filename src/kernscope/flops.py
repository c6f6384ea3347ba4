"""The FLOP counting conventions the perf models share: attention and FFT, counted one way whether the work was read
from a PyTorch profile's op shapes (:mod:`kernscope.analyze.perf.formulas`) or from a JAX profile's HLO
(:mod:`kernscope.load.hlo_work`). Plain functions of sizes; no tables, no imports of the package."""

from __future__ import annotations

import math


def sdpa_flops(b: int, h_q: int, n_q: int, n_kv: int, d_qk: int, d_v: int, causal: bool) -> float:
    """Forward attention FLOPs: Q K^T and P V (2 * N_Q * N_KV * d each per head); half when causal."""
    f = b * h_q * (2.0 * n_q * n_kv * d_qk + 2.0 * n_q * n_kv * d_v)
    return f / 2 if causal else f


def sdpa_bwd_flops(b: int, h_q: int, n_q: int, n_kv: int, h_kv: int, d_qk: int, d_v: int, causal: bool,
                   recompute: bool = True) -> float:
    """Backward attention FLOPs: dV, dP, dQ, dK (plus the Q K^T recompute of fused kernels), the
    head reduction for grouped-query attention; half when causal. 2.5x forward for plain MHA."""
    mm = b * h_q * 2.0 * n_q * n_kv
    f = mm * d_v + mm * d_v + mm * d_qk + mm * d_qk + (mm * d_qk if recompute else 0.0)
    group = h_q // h_kv if h_kv else 1
    f += b * n_kv * (d_v + d_qk) * (group - 1)
    return f / 2 if causal else f


def fft_flops(n: int, batch: int = 1, real: bool = False) -> float:
    """FLOPs of ``batch`` transforms of ``n`` points: 5 n log2 n for a complex one (the radix-2 count that FFT benchmarks
    quote, whatever algorithm ran), half of it with a real input or output."""
    return 0.0 if n < 2 else batch * (2.5 if real else 5.0) * n * math.log2(n)
