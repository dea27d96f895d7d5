"""A stand-in for a timm-style script (stdlib only): ``logging`` to stderr with meter lines
(``Loss: 1.57 (1.50)``), ``Test:`` lines after each epoch, and its own ``summary.csv`` (full
precision) and result JSON in an output directory under its working directory."""

import argparse
import csv
import json
import logging
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--output", type=Path, default=Path("output/train/exp"))
p.add_argument("--no-files", action="store_true", help="log only: write no summary, no result")
args = p.parse_args()

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")
args.output.mkdir(parents=True, exist_ok=True)
for epoch in range(args.epochs):
    train_loss = 1.0 / (epoch + 1) + 1e-5  # printed to 3 digits, written to the summary whole
    for batch in (0, 3):
        log.info(
            f"Train: {epoch} [{batch:>4d}/4 ({100 * batch // 3:>3d}%)]  "
            f"Loss: {2 * train_loss:#.3g} ({train_loss:#.3g})  Time: 0.010s,  6400.00/s  "
            f"(0.010s,  6400.00/s)  LR: 1.000e-01  Data: 0.001 (0.001)"
        )
    val_loss, top1 = train_loss / 2, 50.0 + 10 * epoch
    log.info(
        f"Test: [   1/1]  Time: 0.010 (0.010)  Loss: {val_loss:>7.4f} ({val_loss:>6.4f})  "
        f"Acc@1: {top1:>7.4f} ({top1:>7.4f})  Acc@5: 100.0000 (100.0000)"
    )
    if not args.no_files:
        summary = args.output / "summary.csv"
        new = not summary.exists()
        with summary.open("a", newline="") as fh:
            w = csv.writer(fh)
            if new:
                w.writerow(["epoch", "train_loss", "eval_loss", "eval_top1", "eval_top5", "lr"])
            w.writerow([epoch, train_loss, val_loss, top1, 100.0, 0.1])
if not args.no_files:
    (args.output / "results.json").write_text(json.dumps({"eval": {"top5": 100.0}}))
print("done", flush=True)
