"""ddp-tui: run PyTorch DDP experiments on Slurm clusters from a terminal app."""

__version__ = "0.1.0"
