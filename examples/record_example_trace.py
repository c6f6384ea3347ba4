"""Record the bundled example trace: a small GPT training step plus a CUDA-graph inference replay.

Run on a GPU machine (the bundled one was recorded on an NVIDIA H200):

    python examples/record_example_trace.py src/kernscope/examples/h200_gpt_train_step.pt.trace.json.gz
    python examples/record_example_trace.py gpt_long.json --full --steps=75   # a real ~200 MB trace, not gzipped

The trace has ProfilerStep#N windows, SDPA attention, GEMMs, LayerNorm, AdamW (fused multi-tensor),
cross entropy, memcpy/memset, and a cudaGraphLaunch replaying the model's forward pass.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule


class Block(nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int = 8192, d: int = 512, h: int = 8, layers: int = 4, ctx: int = 512) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def main(out: str, full: bool = False, active: int = 2, memory: bool = False) -> None:
    """``full``: record_shapes + with_stack + profile_memory (what the load benchmark replicates);
    ``memory``: profile_memory without stacks (the memory timeline's test trace)."""
    torch.manual_seed(0)
    dev = "cuda"
    model = GPT().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    data = torch.randint(0, 8192, (8, 513), device=dev)
    x, y = data[:, :-1], data[:, 1:]

    # inference graph for the replay part (captured once, outside the profiled window)
    infer_in = torch.randint(0, 8192, (4, 256), device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for _ in range(3):
            model(infer_in)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16), torch.cuda.graph(graph):
        graph_out = model(infer_in)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).float().view(-1, 8192), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        with record_function("inference_graph_replay"):
            graph.replay()
        loss.item()  # a DtoH copy and sync, as real loops log the loss

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=1, active=active),
                 record_shapes=True, with_stack=full, profile_memory=full or memory) as prof:
        for _ in range(2 + active):
            step()
            prof.step()
    torch.cuda.synchronize()
    assert graph_out.isfinite().all()
    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(tmp)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    if not out.endswith(".gz"):  # a long recording for the load benchmarks, as the profiler wrote it
        shutil.move(tmp, out)
        print(f"wrote {out}: {os.path.getsize(out) / 1e6:.2f} MB")
        return
    with open(tmp, "rb") as src, gzip.open(out, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.unlink(tmp)
    print(f"wrote {out}: {os.path.getsize(out) / 1e6:.2f} MB gzipped")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0] if args else "h200_gpt_train_step.pt.trace.json.gz", full="--full" in sys.argv, memory="--memory" in sys.argv,
         active=int(next((a.split("=")[1] for a in sys.argv if a.startswith("--steps=")), "2")))
