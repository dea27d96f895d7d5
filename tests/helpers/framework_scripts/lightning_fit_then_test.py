"""Training in the PyTorch Lightning idiom (``import pytorch_lightning as pl``): fit, then test.

A LightningModule logs ``train_loss`` (per step and epoch, on the progress bar), ``val_loss``
and ``val_acc`` each validation, and ``test_loss``/``test_acc`` in ``trainer.test``. The
Trainer runs ``strategy="ddp"`` on CPU with one process per torchrun rank (devices from
``LOCAL_WORLD_SIZE``, nodes from ``WORLD_SIZE``). What it prints is Lightning's own: the
default progress bar on stdout, its info lines (``Initializing distributed: GLOBAL_RANK: r,
MEMBER: m/2``, the model summary, ...), and at the end the table of test metrics on rank 0.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import pytorch_lightning as pl
import torch
import torch.nn.functional as F
from _leave import leave
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(n: int, seed: int, shuffle: bool = False) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, :4].sum(dim=1) > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=shuffle)


class Classifier(pl.LightningModule):
    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def _loss_acc(self, batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits, y), (logits.argmax(dim=1) == y).float().mean()

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int):
        loss, _ = self._loss_acc(batch)
        self.log("train_loss", loss, on_epoch=True, prog_bar=True, sync_dist=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        loss, acc = self._loss_acc(batch)
        self.log_dict({"val_loss": loss, "val_acc": acc}, prog_bar=True, sync_dist=True)

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        loss, acc = self._loss_acc(batch)
        self.log_dict({"test_loss": loss, "test_acc": acc}, sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    pl.seed_everything(0)
    devices = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    num_nodes = max(1, int(os.environ.get("WORLD_SIZE", "1")) // devices)
    root = tempfile.TemporaryDirectory(dir=".", prefix=".lightning_")
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=devices,
        num_nodes=num_nodes,
        strategy="ddp",
        max_epochs=args.epochs,
        default_root_dir=root.name,
        enable_checkpointing=False,
    )
    model = Classifier()
    trainer.fit(model, make_loader(512, seed=0, shuffle=True), make_loader(128, seed=1))
    trainer.test(model, make_loader(128, seed=2))
    root.cleanup()  # os._exit below skips the finalizer that would remove it
    leave()


if __name__ == "__main__":
    main()
