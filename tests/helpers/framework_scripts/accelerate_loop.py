"""A training loop in the Hugging Face Accelerate idiom (``Accelerator()``, no cpu flag).

``accelerator.prepare`` wraps the model, optimizer and both DataLoaders, the loop steps with
``accelerator.backward``, and evaluation gathers predictions with ``gather_for_metrics``.
The main process prints ``accelerator.state`` once (on a CPU machine it says
``Distributed environment: NO`` unless ``ACCELERATE_USE_CPU=1`` is set, then ``MULTI_CPU``),
then one line per epoch the way Accelerate's examples do:
``epoch 0: {'accuracy': 0.65, 'f1': 0.79}`` (epochs from 0, binary task, f1 of class 1).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from _leave import leave
from accelerate import Accelerator
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    logits = x[:, 0] - 0.5 * x[:, 1] + 0.3 * torch.randn(n, generator=g)
    return TensorDataset(x, (logits > 0).long())


def accuracy_f1(preds: torch.Tensor, refs: torch.Tensor) -> dict[str, float]:
    tp = ((preds == 1) & (refs == 1)).sum().item()
    fp = ((preds == 1) & (refs == 0)).sum().item()
    fn = ((preds == 0) & (refs == 1)).sum().item()
    f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
    return {"accuracy": round((preds == refs).float().mean().item(), 4), "f1": round(f1, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    accelerator = Accelerator()
    accelerator.print(accelerator.state)
    torch.manual_seed(0)
    train_dl = DataLoader(make_data(512, seed=0), batch_size=16, shuffle=True)
    eval_dl = DataLoader(make_data(200, seed=1), batch_size=32)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model, optimizer, train_dl, eval_dl = accelerator.prepare(model, optimizer, train_dl, eval_dl)

    for epoch in range(args.epochs):
        model.train()
        for x, y in train_dl:
            loss = F.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()

        model.eval()
        all_preds, all_refs = [], []
        for x, y in eval_dl:
            with torch.no_grad():
                preds = model(x).argmax(dim=-1)
            preds, refs = accelerator.gather_for_metrics((preds, y))
            all_preds.append(preds)
            all_refs.append(refs)
        metric = accuracy_f1(torch.cat(all_preds), torch.cat(all_refs))
        accelerator.print(f"epoch {epoch}: {metric}")

    accelerator.wait_for_everyone()
    leave()


if __name__ == "__main__":
    main()
