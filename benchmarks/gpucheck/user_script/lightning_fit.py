"""A user's own Lightning script: a LightningModule, ``Trainer.fit`` then ``Trainer.test``, the
default progress bar, on whatever accelerator Lightning finds (the GPU with NCCL where there is
one). It knows nothing of ddp-tui; the GPU check submits it with ``--entry script`` and only the
defaults, and ddp-tui's observation layer must find its epochs, its metrics and its group.

    torchrun --nproc-per-node 1 lightning_fit.py --epochs 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import pytorch_lightning as pl
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: list[torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def _evaluate(self, batch: list[torch.Tensor], stage: str) -> None:
        x, y = batch
        logits = self(x)
        self.log(f"{stage}_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log(f"{stage}_acc", (logits.argmax(1) == y).float().mean(), sync_dist=True)

    def validation_step(self, batch: list[torch.Tensor], _: int) -> None:
        self._evaluate(batch, "val")

    def test_step(self, batch: list[torch.Tensor], _: int) -> None:
        self._evaluate(batch, "test")

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8192, 64, generator=gen)
    y = (x @ torch.randn(64, 10, generator=gen)).argmax(dim=1)
    train = DataLoader(TensorDataset(x[:7168], y[:7168]), batch_size=256, shuffle=True)
    held = DataLoader(TensorDataset(x[7168:], y[7168:]), batch_size=256)
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    nodes = max(int(os.environ.get("WORLD_SIZE", "1")) // per_node, 1)
    with tempfile.TemporaryDirectory(dir=".") as root:
        trainer = pl.Trainer(
            max_epochs=args.epochs,
            devices=per_node,
            num_nodes=nodes,
            strategy="ddp",
            default_root_dir=root,
            enable_checkpointing=False,
            logger=False,
        )
        model = Classifier()
        trainer.fit(model, train, held)
        trainer.test(model, held)
    # torch's NCCL and gloo can abort in their teardown at exit: leave as ddp-tui's trainer does.
    if dist.is_initialized():
        dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
