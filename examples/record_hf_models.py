"""Record traces of Hugging Face transformers models (random weights from a config: no download), on a GPU.

    python examples/record_hf_models.py OUT_DIR

- ``llama_train.pt.trace.json.gz``: a small Llama (4 layers, hidden 1024, 16 heads, 4 KV heads, SDPA attention,
  bf16) trained with AdamW for 3 profiled steps, recorded with every option users turn on
  (``record_shapes``, ``with_stack``, ``profile_memory``, ``with_flops``, ``with_modules``);
- ``llama_generate.pt.trace.json.gz``: ``model.generate`` of 32 new tokens for a batch of 4 (a KV cache, small
  kernels: the decode phase users profile), 3 profiled steps of one generate call each.

``OUT_DIR/record_info.json``: versions, the GPU, the model's configuration and the losses.
"""

from __future__ import annotations

import os
import sys

from recording import profiled, run_all


def _model():  # type: ignore[no-untyped-def]
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                      num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048,
                      attn_implementation="sdpa", torch_dtype="bfloat16")
    return cfg, LlamaForCausalLM(cfg).to("cuda", torch.bfloat16)


def train(out: str) -> dict:
    import torch

    cfg, model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, cfg.vocab_size, (8, 512), device="cuda")
    losses: list[float] = []

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))

    profiled(step, os.path.join(out, "llama_train.pt.trace.json.gz"), warmup=2, sync_each=False, record_shapes=True,
             with_stack=True, profile_memory=True, with_flops=True, with_modules=True)
    return {"config": cfg.to_diff_dict(), "batch": [8, 512], "last_loss": losses[-1]}


def generate(out: str) -> dict:
    import torch

    cfg, model = _model()
    model.eval()
    ids = torch.randint(0, cfg.vocab_size, (4, 128), device="cuda")
    shapes: list[list[int]] = []

    def step() -> None:
        with torch.no_grad():
            y = model.generate(ids, max_new_tokens=32, min_new_tokens=32, do_sample=False)
        shapes.append(list(y.shape))

    profiled(step, os.path.join(out, "llama_generate.pt.trace.json.gz"), warmup=2, sync_each=False, record_shapes=True)
    return {"prompt": [4, 128], "new_tokens": 32, "out_shape": shapes[-1]}


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import torch
    import transformers

    info: dict = {"torch": torch.__version__, "transformers": transformers.__version__,
                  "gpu": torch.cuda.get_device_name(0)}
    run_all(out, {"train": train, "generate": generate}, ["train", "generate"], info, key="runs")


if __name__ == "__main__":
    main()
