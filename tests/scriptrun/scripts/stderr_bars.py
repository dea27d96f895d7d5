"""A stand-in for a script whose progress bars go to stderr, as tqdm's do by default (stdlib
only: the bars are drawn by hand in tqdm's format, redrawn with ``\\r``)."""

import argparse
import os
import signal
import sys
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--first", type=int, default=0, help="the first epoch number drawn")
p.add_argument("--last", type=int, default=1, help="the last epoch number drawn")
p.add_argument("--steps", type=int, default=8, help="steps per epoch")
p.add_argument("--epoch-lines", action="store_true", help="also an epoch line on stdout")
p.add_argument("--noise-kb", type=int, default=0, help="this much binary noise on stderr first")
p.add_argument("--crash", action="store_true", help="raise at the end (a traceback on stderr)")
p.add_argument("--kill-self", action="store_true", help="die of SIGKILL at the end")
p.add_argument("--err-copy", type=Path, required=True, help="a copy of all we write to stderr")
args = p.parse_args()

copy = args.err_copy.open("wb")


def err(text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    copy.write(data)
    copy.flush()
    sys.stderr.buffer.write(data)
    sys.stderr.buffer.flush()


if args.noise_kb:
    err(bytes((i * 7919) % 256 for i in range(args.noise_kb * 1024)) + b"\n")
for i, epoch in enumerate(range(args.first, args.last + 1)):
    loss = 1.0 / (i + 1)
    err(f"Epoch {epoch}:   0%|          | 0/{args.steps} [00:00<?, ?it/s]")
    for step in range(1, args.steps + 1):
        filled = step * 10 // args.steps
        bar = "█" * filled + " " * (10 - filled)
        pct = step * 100 // args.steps
        rest = f"[00:01<00:01, 16.00it/s, loss={loss}, acc={0.5 + epoch / 10}]"
        err(f"\rEpoch {epoch}: {pct:3d}%|{bar}| {step}/{args.steps} {rest}")
    err("\n")
    print(f"log: epoch {epoch} done", flush=True)
    if args.epoch_lines:
        print(f"Epoch {epoch} - Val Loss: {loss / 2:.4f}, Val Accuracy: {60 + epoch}%", flush=True)

if args.crash:
    copy.close()  # the traceback that follows is checked on its own
    raise RuntimeError("CUDA out of memory (not really)")
if args.kill_self:
    os.kill(os.getpid(), signal.SIGKILL)
