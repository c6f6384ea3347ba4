"""Record what PyTorch Lightning's profiler writes for a short fit, on a GPU.

    python examples/record_lightning.py OUT_DIR [--devices N]

A small MLP ``LightningModule`` trained for 12 steps (and validated) by a ``Trainer`` with
``PyTorchProfiler(dirpath=OUT_DIR/lightning, filename="mlp", export_to_chrome=True)`` and Lightning's default schedule:
the folder as Lightning leaves it (its trace files and its text summary). ``OUT_DIR/record_info.json``: versions and
the files written. ``--devices 2``: the same fit under Lightning's DDP strategy on two GPUs (Lightning starts the
second process itself), each rank's profiler writing into the same folder.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    out = sys.argv[1]
    devices = int(sys.argv[sys.argv.index("--devices") + 1]) if "--devices" in sys.argv else 1
    os.makedirs(out, exist_ok=True)
    import lightning as L
    import torch
    from lightning.pytorch.profilers import PyTorchProfiler

    class MLP(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024))

        def training_step(self, batch: torch.Tensor, _: int) -> torch.Tensor:
            loss = self.net(batch).float().pow(2).mean()
            self.log("loss", loss)
            return loss

        def validation_step(self, batch: torch.Tensor, _: int) -> None:
            self.log("val_loss", self.net(batch).float().pow(2).mean())

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    torch.manual_seed(0)
    data = torch.utils.data.DataLoader(torch.randn(64 * 32, 1024), batch_size=64)
    val = torch.utils.data.DataLoader(torch.randn(64 * 4, 1024), batch_size=64)
    folder = os.path.join(out, "lightning")
    profiler = PyTorchProfiler(dirpath=folder, filename="mlp", export_to_chrome=True, record_shapes=True)
    trainer = L.Trainer(max_steps=12, accelerator="gpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                        profiler=profiler, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, limit_val_batches=4,
                        val_check_interval=6, precision="bf16-mixed")
    trainer.fit(MLP(), data, val)
    if trainer.global_rank != 0:
        return
    files = sorted(os.listdir(folder))
    info = {"torch": torch.__version__, "lightning": L.__version__, "gpu": torch.cuda.get_device_name(0), "devices": devices,
            "files": {f: os.path.getsize(os.path.join(folder, f)) for f in files}}
    with open(os.path.join(out, "record_info.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
    print(json.dumps(info["files"]))


if __name__ == "__main__":
    main()
