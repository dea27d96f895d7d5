"""What one rank has of its node's cores, measured at one size and worked out at another.

On a GPU a rank has its device to itself. On a CPU node a job's ranks share the job's cores
there: the job script gives each rank ``max(1, cores // ranks)`` threads (its
``OMP_NUM_THREADS``; ``sbatch_templates/_job.sbatch.j2`` holds the rule, :func:`threads_per_rank`
the same for the model), and a rank's threads run on no more than its ``cpus / ranks`` share of
the CPUs the job's processes may run on. A torchrun job keeps its cores per node at every
size (one task per node holds them); an srun job gets ``cpus_per_task`` more with each task.

The model takes a rank's compute per step to scale as one over its speed on the cores it has
(docs/advisor.md, "Ranks that share a node's cores"): ``c`` on a share ``c`` of one core, and
``c ** gain`` on ``c`` cores, where ``gain`` is what threads buy this workload here, measured
by the trainer's calibration (its passes again on one thread: ``T`` threads ran ``T ** gain``
times as fast), and 1 (perfect threads) where no run measured it. On this project's busy
2-core machine ResNet-18 at 32x32 ran 1.25 times as fast on two threads as on one (gain 0.3):
two ranks of one core each then took 1.25 times as long a step as one rank of both, not twice.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


def threads_per_rank(cores: int, ranks: int) -> int:
    """The job script's threads for each of ``ranks`` ranks sharing ``cores`` cores."""
    return max(1, cores // max(1, ranks))


@dataclass(frozen=True)
class CoreShare:
    """The cores of a node that one job's ranks share, as one run had them."""

    #: The job's cores on the node: what Slurm allocated there (else what the spec asked),
    #: no more than ``cpus``. The ranks' threads are sized from them.
    cores: int
    #: The CPUs the job's processes may run on there (their affinity): the allocation where the
    #: scheduler holds a job to it, the whole machine where nothing does.
    cpus: int
    #: Ranks on the node.
    ranks: int
    #: Threads per rank (what torch had; the rule's where the run did not say).
    threads: int
    #: The cores come with each rank (srun: ``cpus_per_task`` a task), not with the node.
    per_task: bool = False
    #: How many times as fast a rank computed on its threads as on one (the calibration's
    #: measure; None: one thread, or not measured).
    speedup: float | None = None

    @property
    def per_rank(self) -> float:
        """The cores one rank really has: its threads, as far as its share of the CPUs goes."""
        return min(float(self.threads), self.cpus / max(1, self.ranks))

    def at(self, ranks: int) -> CoreShare:
        """The same job's share with ``ranks`` ranks on the node: a torchrun job's cores stay,
        an srun job's follow its tasks; a job held to its allocation runs on its cores only,
        one that is not on the CPUs it could see."""
        cores = self.cores // max(1, self.ranks) * ranks if self.per_task else self.cores
        cpus = cores if self.cpus <= self.cores else max(self.cpus, cores)
        cores = min(cores, cpus)
        return CoreShare(cores, cpus, ranks, threads_per_rank(cores, ranks), self.per_task)

    @property
    def gain(self) -> float | None:
        """The exponent its measured speedup gives: ``threads ** gain == speedup``, held to
        0..1 (more threads never made it slower for long, nor faster than one a thread)."""
        if self.speedup is None or self.threads < 2 or self.speedup <= 0:
            return None
        return min(1.0, max(0.0, math.log(self.speedup) / math.log(self.threads)))


def thread_gain(shares: Iterable[CoreShare | None]) -> float:
    """What threads buy the group's workload: the median of its runs' measures, else 1."""
    gains = [g for s in shares if s is not None and (g := s.gain) is not None]
    return statistics.median(gains) if gains else 1.0


def speed(cores: float, gain: float) -> float:
    """A rank's compute speed on ``cores`` cores, one core's being 1: a share of one core is
    that share of its time; more cores are threads, worth ``cores ** gain``."""
    return cores if cores <= 1 else float(cores**gain)


def compute_scale(
    share: CoreShare | None, device: str | None, ranks: int, gain: float = 1.0
) -> float:
    """How many times as long a rank's compute takes with ``ranks`` ranks on the node as it
    did in the run of ``share``: its speed then over its speed then, on a CPU; 1 on a GPU (a
    rank has its device), or where the run did not say what it had."""
    if device != "cpu" or share is None:
        return 1.0
    now = speed(share.at(ranks).per_rank, gain)
    return speed(share.per_rank, gain) / now if now > 0 else 1.0


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if value >= 1 and float(value).is_integer() else None


def core_share(run_json: Mapping[str, Any], spec: Mapping[str, Any]) -> CoreShare | None:
    """A run's share, from run.json's ``cpu``: the threads and ranks the trainer found, and
    the counts the job script exported (where a trainer started by hand has none, the spec's
    ask). None for a run that did not record it (a user's script, a run from before): the model
    then scales no compute by cores, as it did not before."""
    doc = run_json.get("cpu")
    if not isinstance(doc, Mapping):
        return None
    threads, ranks = _count(doc.get("threads")), _count(doc.get("ranks_on_node"))
    if threads is None or ranks is None:
        return None
    per_task = spec.get("launcher") == "srun"
    per = _count(spec.get("cpus_per_task"))
    asked = per * (ranks if per_task else 1) if per else threads * ranks
    cores = _count(doc.get("cores")) or asked
    cpus = max(_count(doc.get("cpus")) or cores, cores)
    return CoreShare(cores, cpus, ranks, threads, per_task, _speedup(run_json.get("calibration")))


def _speedup(calibration: Any) -> float | None:
    """One thread's pass over its threads' pass, from run.json's ``calibration``."""
    if not isinstance(calibration, Mapping):
        return None
    many, one = (_seconds(calibration.get(k)) for k in ("fwd_bwd_sec", "one_thread_fwd_bwd_sec"))
    return one / many if one and many else None


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value < math.inf else None
