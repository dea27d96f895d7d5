"""Samplers: a resumable training sampler and a padding-free validation shard."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sized

from torch.utils.data import DistributedSampler, Sampler


class ResumableDistributedSampler(DistributedSampler[int]):
    """``DistributedSampler`` that can start part-way through an epoch.

    The order still comes from ``(seed, epoch)``, so skipping the first ``skip`` indices gives
    exactly the batches an uninterrupted run would have seen next.
    """

    def __init__(self, dataset: Sized, num_replicas: int, rank: int, seed: int) -> None:
        super().__init__(
            dataset,  # type: ignore[arg-type]
            num_replicas=num_replicas,
            rank=rank,
            shuffle=True,
            seed=seed,
            drop_last=False,
        )
        self.skip = 0

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(super().__iter__(), self.skip, None)

    def __len__(self) -> int:
        return max(0, self.num_samples - self.skip)

    def full_length(self) -> int:
        """Indices per rank in a whole epoch (padding included)."""
        return int(self.num_samples)


class ShardSampler(Sampler[int]):
    """Indices ``rank, rank + W, rank + 2W, ...``: every sample on exactly one rank, no padding.

    ``DistributedSampler`` pads the last shard by repeating samples, which would count them twice
    in a global validation metric. Validation runs the bare module (no DDP collectives), so
    uneven shard lengths are safe.
    """

    def __init__(self, length: int, rank: int, world_size: int) -> None:
        self.length = length
        self.rank = rank
        self.world_size = world_size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.length, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.length, self.world_size))
