"""Record traces of the kernels torch.compile generates from templates (FlexAttention, max-autotune), on a GPU.

    python examples/record_inductor_kernels.py OUT_DIR [SCENARIO ...]

Each scenario is trained (forward and backward) for 3 profiled steps after warm-up, with ``record_shapes=True``,
and written to ``OUT_DIR/<scenario>.pt.trace.json.gz``; ``OUT_DIR/record_info.json`` holds the versions, the GPU,
what each scenario ran and, for every Triton kernel Inductor generated, which template (if any) its source came
from (the words of the first generated file that defines it: ``flex_attention_backward_0``, ``convolution``...), so
that tests can check the categories of real generated kernel names against what produced them:

- ``flex``: ``flex_attention`` with a causal block mask (bf16, B=2, H=8, S=2048, D=64);
- ``mm_autotune``: an MLP under ``mode="max-autotune-no-cudagraphs"`` with Triton as the only GEMM backend, so its
  matrix products are Inductor's ``mm``/``addmm`` templates (``triton_tem_fused_*``);
- ``conv_autotune``: a convolution and ReLU under max-autotune with Triton as the only convolution backend;
- ``sdpa``: a compiled block calling ``scaled_dot_product_attention`` (the library's attention kernels);
- ``fp8``: ``torch._scaled_mm`` of e4m3 operands (bf16 out), eager.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile

from recording import profiled, run_all

SCENARIOS = ("flex", "mm_autotune", "conv_autotune", "sdpa", "fp8")


def flex(out: str) -> dict:
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.manual_seed(0)
    b, h, s, d = 2, 8, 2048, 64
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    mask = create_block_mask(lambda b_, h_, qi, ki: qi >= ki, None, None, s, s, device="cuda")
    attn = torch.compile(flex_attention)

    def step() -> None:
        attn(q, k, v, block_mask=mask).float().square().mean().backward()

    profiled(step, os.path.join(out, "flex.pt.trace.json.gz"), record_shapes=True)
    return {"shape": [b, h, s, d], "dtype": "bfloat16", "mask": "causal"}


def _mlp(dim: int = 2048):  # type: ignore[no-untyped-def]
    import torch

    return torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim)).cuda()


def mm_autotune(out: str) -> dict:
    import torch
    import torch._inductor.config as cfg

    torch.manual_seed(0)
    cfg.max_autotune_gemm_backends = "TRITON"
    model = _mlp().to(torch.bfloat16)
    compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
    x = torch.randn(4096, 2048, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        compiled(x).float().square().mean().backward()

    try:
        profiled(step, os.path.join(out, "mm_autotune.pt.trace.json.gz"), record_shapes=True)
    finally:
        cfg.max_autotune_gemm_backends = "ATEN,TRITON"
    return {"model": "Linear(2048, 8192) GELU Linear(8192, 2048), bf16, batch 4096", "gemm_backends": "TRITON"}


def conv_autotune(out: str) -> dict:
    import torch
    import torch._inductor.config as cfg

    torch.manual_seed(0)
    cfg.max_autotune_conv_backends = "TRITON"
    model = torch.nn.Sequential(torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU()).cuda().to(torch.bfloat16)
    model = model.to(memory_format=torch.channels_last)
    compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
    x = torch.randn(32, 64, 56, 56, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)

    def step() -> None:
        compiled(x).float().square().mean().backward()

    try:
        profiled(step, os.path.join(out, "conv_autotune.pt.trace.json.gz"), record_shapes=True)
    finally:
        cfg.max_autotune_conv_backends = "ATEN,TRITON"
    return {"model": "Conv2d(64, 128, 3, padding=1) ReLU, bf16, channels_last, batch 32x56x56",
            "conv_backends": "TRITON"}


def sdpa(out: str) -> dict:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    b, h, s, d = 4, 16, 1024, 64
    proj = torch.nn.Linear(h * d, 3 * h * d).cuda().to(torch.bfloat16)
    x = torch.randn(b, s, h * d, device="cuda", dtype=torch.bfloat16)

    def block(x: torch.Tensor) -> torch.Tensor:
        q, k, v = proj(x).view(b, s, 3, h, d).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h * d)

    compiled = torch.compile(block)

    def step() -> None:
        compiled(x).float().square().mean().backward()

    profiled(step, os.path.join(out, "sdpa.pt.trace.json.gz"), record_shapes=True)
    return {"shape": [b, h, s, d], "dtype": "bfloat16", "causal": True}


def fp8(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    m, k, n = 8192, 8192, 8192
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
    one = torch.tensor(1.0, device="cuda")

    def step() -> None:
        for _ in range(4):
            torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

    profiled(step, os.path.join(out, "fp8.pt.trace.json.gz"), record_shapes=True)
    return {"shape": [m, k, n], "dtype": "float8_e4m3fn", "out_dtype": "bfloat16", "per_step": 4}


_KERNEL_DEF = re.compile(r"^def (triton_\w+)\(", re.M)


def generated_kernels(cache_dir: str) -> dict[str, dict]:
    """Every Triton kernel Inductor wrote under ``cache_dir``: its name -> whether it is a template, and the words in
    its source that name what it came from (flex_attention, mm, convolution ...)."""
    found: dict[str, dict] = {}
    for root, _, files in os.walk(cache_dir):
        for f in files:
            if not f.endswith(".py"):
                continue
            try:
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    src = fh.read()
            except OSError:
                continue
            for m in _KERNEL_DEF.finditer(src):
                name = m.group(1)
                words = sorted({w for w in re.findall(r"flex_attention\w*|flex_decoding|convolution|conv2d|\bmm\b|"
                                                      r"addmm|bmm|template|SPARSE_\w+|BLOCK_M\b|BLOCK_K\b", src)})
                found.setdefault(name, {"files": 0, "words": words})
                found[name]["files"] += 1
    return found


def main() -> None:
    out = sys.argv[1]
    chosen = sys.argv[2:] or list(SCENARIOS)
    os.makedirs(out, exist_ok=True)
    cache = tempfile.mkdtemp(prefix="inductor_cache_")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    import torch
    import triton

    info: dict = {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
                  "gpu": torch.cuda.get_device_name(0)}
    run_all(out, {n: globals()[n] for n in SCENARIOS}, chosen, info, write=False)
    info["generated_kernels"] = generated_kernels(cache)
    with open(os.path.join(out, "record_info.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
