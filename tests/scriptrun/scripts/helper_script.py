"""A script that reports through the helper, as ``code/ddp_tui_report.py`` (top-level)."""

from ddp_tui_report import report_epoch, report_step

print("Epoch 7 - Avg Loss: 9.0 (a line the helper's lines overrule)", flush=True)
for epoch in range(2):
    for step in range(1, 5):
        report_step(step, steps_per_epoch=4, loss=1.0 / step, epoch=epoch)
    report_epoch(epoch, loss=0.5 / (epoch + 1), val_accuracy=80 + epoch, samples=400, f1=0.5)
