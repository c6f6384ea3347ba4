"""Record traces of Hugging Face transformers models (random weights from a config: no download), on a GPU.

    python examples/record_hf_models.py OUT_DIR [train generate generate_static trainer train_compiled moe_train]
        (default: the first two)

- ``llama_train.pt.trace.json.gz``: a small Llama (4 layers, hidden 1024, 16 heads, 4 KV heads, SDPA attention,
  bf16) trained with AdamW for 3 profiled steps, recorded with every option users turn on
  (``record_shapes``, ``with_stack``, ``profile_memory``, ``with_flops``, ``with_modules``);
- ``llama_generate.pt.trace.json.gz``: ``model.generate`` of 32 new tokens for a batch of 4 (a KV cache, small
  kernels: the decode phase users profile), 3 profiled steps of one generate call each;
- ``llama_generate_static.pt.trace.json.gz``: the same ``generate`` with a static KV cache, which makes ``generate``
  compile the decoding forward itself (CUDA graphs: the decode steps replayed as graphs, as inference servers run them);
- ``llama_trainer.pt.trace.json.gz``: the Llama trained by a Hugging Face ``Trainer`` (batch 4, gradient accumulation
  2: two forward and backward passes per optimizer step), the profiler stepped by a ``TrainerCallback`` at each
  optimizer step (``schedule(wait=2, warmup=1, active=3)``), as Hugging Face's recipe records it;
- ``llama_train_compiled.pt.trace.json.gz``: the training of ``train`` under ``torch.compile`` (Inductor's fused
  Triton kernels; ``record_shapes`` only);
- ``mixtral_train.pt.trace.json.gz``: a small Mixtral (8 experts, 2 per token) trained eagerly.

``OUT_DIR/record_info.json``: versions, the GPU, the model's configuration and the losses.
"""

from __future__ import annotations

import os
import sys

from recording import profiled, run_all, save_chrome_gz


def _model():  # type: ignore[no-untyped-def]
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
                      num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048,
                      attn_implementation="sdpa", torch_dtype="bfloat16")
    return cfg, LlamaForCausalLM(cfg).to("cuda", torch.bfloat16)


def _trained(model, forward, vocab: int, path: str, warmup: int = 2, **options) -> float:  # type: ignore[no-untyped-def]
    """``model`` trained by ``forward`` (itself, or compiled) with AdamW on a batch of 8 x 512 tokens, profiled into
    ``path`` (``options``: the profiler's); the last loss."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(0, vocab, (8, 512), device="cuda")
    losses: list[float] = []

    def step() -> None:
        loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss))

    profiled(step, path, warmup=warmup, sync_each=False, **options)
    return losses[-1]


def _generated(model, vocab: int, path: str, warmup: int = 2, **kwargs) -> list[int]:  # type: ignore[no-untyped-def]
    """``model.generate`` of 32 new tokens for a batch of 4 prompts of 128 (``kwargs``: generate's), profiled into
    ``path``; the output's shape."""
    import torch

    model.eval()
    ids = torch.randint(0, vocab, (4, 128), device="cuda")
    shapes: list[list[int]] = []

    def step() -> None:
        with torch.no_grad():
            y = model.generate(ids, max_new_tokens=32, min_new_tokens=32, do_sample=False, **kwargs)
        shapes.append(list(y.shape))

    profiled(step, path, warmup=warmup, sync_each=False, record_shapes=True)
    return shapes[-1]


def train(out: str) -> dict:
    cfg, model = _model()
    last = _trained(model, model, cfg.vocab_size, os.path.join(out, "llama_train.pt.trace.json.gz"), record_shapes=True,
                    with_stack=True, profile_memory=True, with_flops=True, with_modules=True)
    return {"config": cfg.to_diff_dict(), "batch": [8, 512], "last_loss": last}


def train_compiled(out: str) -> dict:
    """The Llama of ``train`` under ``torch.compile`` (Inductor's default mode: its fused Triton kernels, no CUDA
    graphs), AdamW; recorded with ``record_shapes``."""
    import torch

    cfg, model = _model()
    last = _trained(model, torch.compile(model), cfg.vocab_size,
                    os.path.join(out, "llama_train_compiled.pt.trace.json.gz"), warmup=3, record_shapes=True)
    return {"batch": [8, 512], "compile": "default", "last_loss": last}


def moe_train(out: str) -> dict:
    """A small Mixtral (mixture of experts: 8 experts, 2 active per token, 4 layers, random weights) trained eagerly
    with AdamW: the router's top-k and the experts' token gathers and scatters, as Hugging Face runs them."""
    import torch
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2048, num_hidden_layers=4,
                        num_attention_heads=16, num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2,
                        max_position_embeddings=2048, attn_implementation="sdpa", torch_dtype="bfloat16")
    model = MixtralForCausalLM(cfg).to("cuda", torch.bfloat16)
    last = _trained(model, model, cfg.vocab_size, os.path.join(out, "mixtral_train.pt.trace.json.gz"),
                    record_shapes=True)
    return {"config": cfg.to_diff_dict(), "batch": [8, 512], "last_loss": last}


def generate(out: str) -> dict:
    cfg, model = _model()
    shape = _generated(model, cfg.vocab_size, os.path.join(out, "llama_generate.pt.trace.json.gz"))
    return {"prompt": [4, 128], "new_tokens": 32, "out_shape": shape}


def generate_static(out: str) -> dict:
    # a static KV cache: generate compiles the decoding forward itself (its CompileConfig: CUDA graphs), and the decode
    # steps replay graphs, as inference servers run them (compiling model.forward by hand as well reused a graph's
    # output after a later replay had overwritten it: "accessing tensor output of CUDAGraphs that has been overwritten")
    cfg, model = _model()
    shape = _generated(model, cfg.vocab_size, os.path.join(out, "llama_generate_static.pt.trace.json.gz"), warmup=3,
                       cache_implementation="static")
    return {"prompt": [4, 128], "new_tokens": 32, "out_shape": shape, "cache": "static",
            "compile_config": str(getattr(model.generation_config, "compile_config", None))}


def trainer(out: str) -> dict:
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    from transformers import Trainer, TrainerCallback, TrainingArguments

    cfg, model = _model()
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(0, cfg.vocab_size, (512,), generator=g) for _ in range(96)]
    data = [{"input_ids": r, "labels": r} for r in rows]
    path = os.path.join(out, "llama_trainer.pt.trace.json.gz")
    seen: list[int] = []

    class ProfilerStep(TrainerCallback):  # type: ignore[misc]
        """The profiler's step at each optimizer step (Hugging Face's recipe for torch.profiler with a Trainer)."""

        def __init__(self, prof: profile) -> None:
            self.prof = prof

        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(state.global_step)
            self.prof.step()

    args = TrainingArguments(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=4,
                             gradient_accumulation_steps=2, max_steps=8, learning_rate=1e-5, logging_steps=100,
                             save_strategy="no", report_to=[], dataloader_num_workers=0, seed=0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 schedule=schedule(wait=2, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: save_chrome_gz(p, path), record_shapes=True) as prof:
        t = Trainer(model=model, args=args, train_dataset=data, callbacks=[ProfilerStep(prof)])
        result = t.train()
    return {"batch": 4, "gradient_accumulation_steps": 2, "seq": 512, "optimizer_steps": seen,
            "profiled_optimizer_steps": "4-6 (schedule wait=2, warmup=1, active=3)", "train_loss": result.training_loss}


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    import torch
    import transformers

    info: dict = {"torch": torch.__version__, "transformers": transformers.__version__,
                  "gpu": torch.cuda.get_device_name(0)}
    runs = {"train": train, "generate": generate, "generate_static": generate_static, "trainer": trainer,
            "train_compiled": train_compiled, "moe_train": moe_train}
    run_all(out, runs, sys.argv[2:] or ["train", "generate"], info, key="runs")


if __name__ == "__main__":
    main()
