"""A stand-in for a user's training script (stdlib only), driven by its arguments."""

import argparse
import json
import os
import signal
import sys
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--first", type=int, default=1, help="the first epoch number printed")
p.add_argument("--last", type=int, default=3, help="the last epoch number printed")
p.add_argument("--loss", type=float, default=1.0, help="the first epoch's loss")
p.add_argument("--exit", type=int, default=0, help="exit code at the end")
p.add_argument("--kill-self", action="store_true", help="die of SIGKILL at the end")
p.add_argument("--crash", action="store_true", help="raise at the end")
p.add_argument("--blob", type=Path, help="a file to copy to stdout before the epochs")
p.add_argument("--env-out", type=Path, help="write the environment and cwd here")
p.add_argument("--pid-out", type=Path, help="write our pid here")
p.add_argument("--wait-for-signal", type=Path, help="write this file, then wait for SIGTERM")
p.add_argument("--tqdm", action="store_true", help="draw a tqdm-like bar in each epoch")
p.add_argument("--csv", type=Path, help="write the epochs to this CSV, not stdout")
args = p.parse_args()

if args.wait_for_signal:
    # Blocked, so only a delivered (forwarded) SIGTERM ends the wait, never the default action.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
if args.pid_out:
    args.pid_out.write_text(str(os.getpid()))
if args.env_out:
    names = [n for n in os.environ if n.startswith("DDP_TUI_")]
    names += ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"]
    env = {n: os.environ.get(n) for n in names}
    args.env_out.write_text(json.dumps({"env": env, "cwd": os.getcwd(), "argv": sys.argv}))
if args.blob:
    sys.stdout.flush()
    sys.stdout.buffer.write(args.blob.read_bytes())
    sys.stdout.buffer.flush()

out = sys.stdout
rows = ["epoch,step,train_loss_step,val_loss"]
for i, epoch in enumerate(range(args.first, args.last + 1)):
    loss = args.loss / (i + 1)
    if args.tqdm:
        for step in range(1, 11):
            bar = "#" * step + " " * (10 - step)
            rest = f"[00:01<00:01, 20.00it/s, loss={loss}]"
            out.write(f"\rEpoch {epoch}: {step * 10:3d}%|{bar}| {step}/10 {rest}")
            out.flush()
        out.write("\n")
    if args.csv:
        rows += [f"{epoch},{epoch * 10 + 5},{loss},", f"{epoch},{epoch * 10 + 9},,{loss + 0.1}"]
        args.csv.write_text("\n".join(rows) + "\n")
    else:
        print(f"Epoch {epoch} - Avg Loss: {loss:.4f}, Accuracy: {50 + epoch}%", flush=True)

if args.wait_for_signal:
    args.wait_for_signal.write_text("ready")
    got = signal.sigtimedwait([signal.SIGTERM], 120)
    print(f"got {got.si_signo if got else 'no signal'}; checkpoint saved", flush=True)
    sys.exit(int(os.environ["DDP_TUI_REQUEUE_EXIT_CODE"]))
if args.crash:
    raise RuntimeError("CUDA out of memory (not really)")
if args.kill_self:
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(args.exit)
