"""``make gpu-check``: ddp-tui on a GPU in one prepared run of a few minutes; see gpucheck/main.py.

    python benchmarks/gpu_check.py [--out DIR] [--only throughput,oom] [--budget-sec 330]

Without CUDA it says "no CUDA device", checks its CPU-side parts and exits 0 when they work.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# bench_trainer (the plain loop) and the gpucheck package live beside this file; the checkout's
# ddp_tui is imported from src/, so the check needs no install on a bare GPU machine.
sys.path[:0] = [str(HERE), str(HERE.parent / "src")]

from gpucheck.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
