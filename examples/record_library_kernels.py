"""Record traces of the CUDA libraries PyTorch calls beyond GEMM and attention, on a GPU: what scientific, audio,
vision and quantized-inference code runs, so that every kernel's category and library can be checked on real names.

    python examples/record_library_kernels.py OUT_DIR [SCENARIO ...]

Each scenario runs 3 profiled steps after warm-up (``record_shapes=True``), written to
``OUT_DIR/<scenario>.pt.trace.json.gz``; ``OUT_DIR/record_info.json`` holds the versions, the GPU and the ops each
scenario called:

- ``fft``: ``torch.fft.rfft2``/``irfft2`` of a batch of 512 x 512 images (a spectral layer's round trip) and
  ``torch.stft`` of 10 s of 16 kHz audio (Whisper's 400-point window, hop 160), forward and backward (cuFFT);
- ``linalg``: ``cholesky``, ``qr``, ``eigh``, ``svd``, ``solve``, ``inv`` and ``lu_factor`` of float32 matrices,
  batched and single (cuSOLVER, MAGMA, cuBLAS's batched solvers);
- ``sparse``: a CSR matrix times a dense one (``torch.sparse.mm``, cuSPARSE) and a 2:4 semi-structured sparse
  ``linear`` (``to_sparse_semi_structured``: CUTLASS, or cuSPARSELt where the build has it);
- ``sort_random``: ``sort``, ``topk``, ``unique``, ``nonzero``, ``histc``, ``bincount``, ``cumsum``, ``searchsorted``,
  ``multinomial``, ``randperm``, ``randn``, ``dropout`` (cub, ATen, the Philox generator);
- ``vision``: ``conv3d``, ``conv_transpose2d``, ``grid_sample``, bicubic ``interpolate``, ``avg_pool3d``,
  ``embedding_bag`` and ``unfold`` with their backward (cuDNN, ATen);
- ``int4``: weight-only int4 ``_weight_int4pack_mm`` (the tinygemm kernel that torchao's int4 inference calls).
"""

from __future__ import annotations

import os
import sys

from recording import profiled, run_all


def fft(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    img = torch.randn(16, 512, 512, device="cuda", requires_grad=True)
    filt = torch.randn(512, 257, device="cuda", dtype=torch.complex64)
    audio = torch.randn(8, 160000, device="cuda", requires_grad=True)
    window = torch.hann_window(400, device="cuda")

    def step() -> None:
        spec = torch.fft.rfft2(img) * filt  # a spectral layer: multiply in frequency space, back to space
        y = torch.fft.irfft2(spec, s=img.shape[-2:])
        mel = torch.stft(audio, n_fft=400, hop_length=160, window=window, return_complex=True).abs().square()
        (y.square().mean() + mel.mean()).backward()

    profiled(step, os.path.join(out, "fft.pt.trace.json.gz"), record_shapes=True)
    return {"ops": ["fft.rfft2", "fft.irfft2", "stft"], "image": [16, 512, 512], "audio": [8, 160000], "n_fft": 400}


def linalg(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    a = torch.randn(64, 128, 128, device="cuda")
    spd = a @ a.mT + 128 * torch.eye(128, device="cuda")
    big = torch.randn(1024, 1024, device="cuda")
    sym = big + big.T
    rhs = torch.randn(64, 128, 8, device="cuda")

    def step() -> None:
        torch.linalg.cholesky(spd)
        torch.linalg.qr(big)
        torch.linalg.eigh(sym)
        torch.linalg.svd(big[:512, :512])
        torch.linalg.solve(spd, rhs)
        torch.linalg.inv(spd)
        torch.linalg.lu_factor(big)

    profiled(step, os.path.join(out, "linalg.pt.trace.json.gz"), record_shapes=True)
    return {"ops": ["cholesky", "qr", "eigh", "svd", "solve", "inv", "lu_factor"], "batched": [64, 128, 128],
            "single": [1024, 1024], "backend": torch.backends.cuda.preferred_linalg_library().name}


def sparse(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    dense = torch.randn(4096, 4096, device="cuda")
    csr = (dense * (torch.rand_like(dense) < 0.01)).to_sparse_csr()
    rhs = torch.randn(4096, 256, device="cuda")
    info: dict = {"ops": ["sparse.mm (CSR, 1% dense)"]}
    steps = [lambda: torch.sparse.mm(csr, rhs)]
    try:
        from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured

        mask = torch.tensor([1, 1, 0, 0], device="cuda", dtype=torch.bool).tile(4096, 1024)
        w = torch.randn(4096, 4096, device="cuda", dtype=torch.float16) * mask
        x = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
        w24 = to_sparse_semi_structured(w)
        steps.append(lambda: torch.nn.functional.linear(x, w24))
        info["ops"].append("linear with a 2:4 semi-structured weight")
        info["semi_structured_backend"] = "cutlass" if SparseSemiStructuredTensor._FORCE_CUTLASS else "cusparselt"
    except Exception as e:  # noqa: BLE001 (a build without it: the CSR product alone)
        info["semi_structured_error"] = f"{type(e).__name__}: {e}"[:300]

    def step() -> None:
        for s in steps:
            s()

    profiled(step, os.path.join(out, "sparse.pt.trace.json.gz"), record_shapes=True)
    return info


def sort_random(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    x = torch.randn(1 << 22, device="cuda")
    ids = torch.randint(0, 50000, (1 << 20,), device="cuda")
    edges = torch.linspace(-3, 3, 1025, device="cuda")
    probs = torch.rand(4096, 32000, device="cuda").softmax(-1)
    h = torch.randn(4096, 4096, device="cuda")

    def step() -> None:
        torch.sort(x)
        torch.topk(x, 1000)
        torch.unique(ids)
        torch.nonzero(x > 2.0)
        torch.histc(x, bins=100, min=-3, max=3)
        torch.bincount(ids)
        torch.cumsum(x, 0)
        torch.searchsorted(edges, x)
        torch.multinomial(probs, 1)
        torch.randperm(1 << 20, device="cuda")
        torch.randn(1 << 22, device="cuda")
        torch.nn.functional.dropout(h, 0.1)

    profiled(step, os.path.join(out, "sort_random.pt.trace.json.gz"), record_shapes=True)
    return {"ops": ["sort", "topk", "unique", "nonzero", "histc", "bincount", "cumsum", "searchsorted", "multinomial",
                    "randperm", "randn", "dropout"]}


def vision(out: str) -> dict:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    vol = torch.randn(2, 16, 32, 64, 64, device="cuda", requires_grad=True)
    w3 = torch.randn(32, 16, 3, 3, 3, device="cuda", requires_grad=True)
    img = torch.randn(8, 64, 64, 64, device="cuda", requires_grad=True)
    wt = torch.randn(64, 32, 4, 4, device="cuda", requires_grad=True)
    grid = (torch.rand(8, 64, 64, 2, device="cuda") * 2 - 1)
    table = torch.randn(100000, 128, device="cuda", requires_grad=True)
    bags = torch.randint(0, 100000, (4096 * 20,), device="cuda")
    offsets = torch.arange(0, 4096 * 20, 20, device="cuda")

    def step() -> None:
        y3 = F.avg_pool3d(F.conv3d(vol, w3, padding=1), 2)
        yt = F.conv_transpose2d(img, wt, stride=2, padding=1)
        ys = F.grid_sample(img, grid, align_corners=False)
        yi = F.interpolate(img, scale_factor=2, mode="bicubic", align_corners=False)
        yu = F.unfold(img, kernel_size=3, padding=1)
        yb = F.embedding_bag(bags, table, offsets, mode="mean")
        sum(t.float().square().mean() for t in (y3, yt, ys, yi, yu, yb)).backward()

    profiled(step, os.path.join(out, "vision.pt.trace.json.gz"), record_shapes=True)
    return {"ops": ["conv3d", "avg_pool3d", "conv_transpose2d", "grid_sample", "interpolate(bicubic)", "unfold",
                    "embedding_bag"]}


def int4(out: str) -> dict:
    import torch

    torch.manual_seed(0)
    n, k, group = 4096, 4096, 128
    w = torch.randint(0, 16, (n, k), device="cuda", dtype=torch.int32)
    packed = torch._convert_weight_to_int4pack((w[:, ::2] << 4 | w[:, 1::2]).to(torch.uint8), 8)
    scales = torch.rand(k // group, n, 2, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(16, k, device="cuda", dtype=torch.bfloat16)

    def step() -> None:
        for _ in range(8):
            torch._weight_int4pack_mm(x, packed, group, scales)

    profiled(step, os.path.join(out, "int4.pt.trace.json.gz"), record_shapes=True)
    return {"m": 16, "n": n, "k": k, "group_size": group, "calls_per_step": 8, "flops_per_call": 2 * 16 * n * k}


SCENARIOS = {"fft": fft, "linalg": linalg, "sparse": sparse, "sort_random": sort_random, "vision": vision,
             "int4": int4}


def main() -> None:
    import torch

    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    chosen = sys.argv[2:] or list(SCENARIOS)
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": torch.cuda.get_device_name()}
    run_all(out, SCENARIOS, chosen, info)


if __name__ == "__main__":
    main()
