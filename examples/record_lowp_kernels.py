"""Record traces of the low-precision and grouped GEMMs that inference and mixture-of-experts code calls, on a GPU.

    python examples/record_lowp_kernels.py OUT_DIR [SCENARIO ...]

Each scenario runs 3 profiled steps after warm-up (``record_shapes=True``), written to
``OUT_DIR/<scenario>.pt.trace.json.gz``; ``OUT_DIR/record_info.json`` holds the versions, the GPU and what each
scenario ran (shapes, dtypes, calls per step), so that tests can check the perf model's FLOPs and bytes against what
ran:

- ``grouped_mm``: a mixture-of-experts layer's expert GEMMs as one ``torch._grouped_mm`` (bf16, 8 experts, 4096
  tokens routed in unequal groups, hidden 2048, expert width 4096), forward and backward;
- ``int8``: ``torch._int_mm`` of int8 matrices (4096 x 4096 by 4096 x 4096, int32 out), 4 calls a step;
- ``fp8_rowwise``: ``torch._scaled_mm`` of float8_e4m3fn matrices with row-wise scales (one per row of A, one per
  column of B; bf16 out), 4 calls a step;
- ``decode_attention``: ``scaled_dot_product_attention`` of one query token against a 4,096-token KV cache with
  grouped-query heads (``enable_gqa``: 32 query heads, 8 KV heads, bf16, batch 16), 8 calls a step: the decode
  phase's attention.
"""

from __future__ import annotations

import os
import sys

from recording import profiled, run_all


def grouped_mm(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    experts, hidden, width = 8, 2048, 4096
    sizes = [256, 768, 512, 384, 640, 512, 128, 896]  # tokens per expert (4096 in all), multiples of 16
    offs = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
    x = torch.randn(sum(sizes), hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(experts, hidden, width, device="cuda", dtype=torch.bfloat16) * hidden ** -0.5).requires_grad_()

    def step() -> None:
        y = torch._grouped_mm(x, w, offs=offs)
        y.float().square().mean().backward()

    profiled(step, os.path.join(out, "grouped_mm.pt.trace.json.gz"), record_shapes=True)
    return {"experts": experts, "tokens_per_expert": sizes, "hidden": hidden, "width": width, "dtype": "bfloat16",
            "forward_flops": 2 * sum(sizes) * hidden * width}


def int8(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    n = 4096
    a = torch.randint(-128, 127, (n, n), device="cuda", dtype=torch.int8)
    b = torch.randint(-128, 127, (n, n), device="cuda", dtype=torch.int8)

    def step() -> None:
        for _ in range(4):
            torch._int_mm(a, b)

    profiled(step, os.path.join(out, "int8.pt.trace.json.gz"), record_shapes=True)
    return {"m": n, "n": n, "k": n, "calls_per_step": 4, "flops_per_call": 2 * n**3}


def fp8_rowwise(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    m, k, n = 8192, 4096, 4096
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    sa = torch.rand(m, 1, device="cuda") + 0.5
    sb = torch.rand(1, n, device="cuda") + 0.5

    def step() -> None:
        for _ in range(4):
            torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    profiled(step, os.path.join(out, "fp8_rowwise.pt.trace.json.gz"), record_shapes=True)
    return {"m": m, "n": n, "k": k, "calls_per_step": 4, "flops_per_call": 2 * m * n * k, "scales": "row-wise"}


def decode_attention(out: str) -> dict:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    b, hq, hkv, s, d = 16, 32, 8, 4096, 128
    q = torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        with torch.no_grad():
            for _ in range(8):
                F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    profiled(step, os.path.join(out, "decode_attention.pt.trace.json.gz"), record_shapes=True)
    return {"batch": b, "q_heads": hq, "kv_heads": hkv, "kv_len": s, "head_dim": d, "calls_per_step": 8,
            "kv_bytes_per_call": 2 * b * hkv * s * d * 2}


SCENARIOS = {"grouped_mm": grouped_mm, "int8": int8, "fp8_rowwise": fp8_rowwise, "decode_attention": decode_attention}


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import torch

    info: dict = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name(0)}
    run_all(out, SCENARIOS, sys.argv[2:] or list(SCENARIOS), info)


if __name__ == "__main__":
    main()
