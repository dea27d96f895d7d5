"""An iteration loop with no DataLoader, in nanoGPT's idiom: token ids of shape (B, T), gradient
accumulation that divides each micro-batch's loss by the micro-steps, optionally a GradScaler,
and an evaluation under ``no_grad`` between iterations. It prints each iteration's loss as such a
script does (the divided micro-batch losses summed: the mean full-batch loss), one JSON line per
iteration, for the test to compare with what ddp-tui observed.

    python loss_inside.py --iters 12 --micro 4 [--scaler] [--second-optimizer] [--compile]

With ``--compile`` the model is compiled in place (``model.compile()``, so torch.compile traces
its hooks too), and the last line says how many graph breaks torch.compile met.
"""

from __future__ import annotations

import argparse
import json

import torch
from torch import nn

VOCAB, BATCH, SEQ = 32, 3, 5


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        self.head = nn.Linear(8, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(ids))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=12)
    p.add_argument("--micro", type=int, default=4)
    p.add_argument("--scaler", action="store_true", help="a GradScaler (device 'cpu')")
    p.add_argument("--second-optimizer", action="store_true", help="two optimizers, one backward")
    p.add_argument("--compile", action="store_true", help="model.compile(), in place")
    args = p.parse_args()
    torch.manual_seed(0)
    model = TinyLM()
    if args.compile:
        model.compile()
    params = list(model.parameters())
    optimizers = [torch.optim.AdamW(params[:2] if args.second_optimizer else params, lr=3e-3)]
    if args.second_optimizer:
        optimizers.append(torch.optim.SGD(params[2:], lr=1e-2))
    # A scale far from 1, so that a loss read without dividing it back would show.
    scaler = torch.amp.GradScaler("cpu", init_scale=4096.0, enabled=args.scaler)
    for it in range(args.iters):
        printed = 0.0
        for _ in range(args.micro):
            ids = torch.randint(0, VOCAB, (BATCH, SEQ))
            logits = model(ids[:, :-1])
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
            loss = loss / args.micro
            printed += loss.item()  # loss / micro, summed: the mean full-batch loss
            scaler.scale(loss).backward()
        for opt in optimizers:
            scaler.step(opt)
        scaler.update()
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        if it == args.iters // 2:
            with torch.no_grad():  # an evaluation: not training samples, and no backward
                model(torch.randint(0, VOCAB, (64, SEQ)))
        print(json.dumps({"iter": it + 1, "loss": printed}), flush=True)
    if args.compile:
        from torch._dynamo.utils import counters

        print(json.dumps({"graph_breaks": sum(counters["graph_break"].values())}), flush=True)


if __name__ == "__main__":
    main()
