"""Rank 0's wrapper reads the journals of :mod:`.observe`: epochs for ``metrics.csv`` as they end,
and, at the end, what the processes formed, for ``run.json``'s ``observed``.

The journals of one attempt share its prefix (the Slurm job id). The *main* journal is the one
of the process whose group rank is 0, or, before any group is formed (or where none ever is),
that of the wrapper's own child.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddp_tui.jobfiles import json_objects

from .observe import OBSERVE_DIR
from .observe.journal import PROCESS

_CLOCK_SLACK_SEC = 5.0
#: Kinds of records that show a process trained (so that, without a group, it trained alone).
_TRAINING = ("epoch", "step", "no_group")


@dataclass
class _Journal:
    path: Path
    offset: int = 0
    partial: bytes = b""
    process: dict[str, Any] = field(default_factory=dict)
    group: dict[str, Any] | None = None
    trained: bool = False
    framework: dict[str, dict[str, Any]] = field(default_factory=dict)
    device: str | None = None
    notes: list[str] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    last_epoch: dict[str, Any] | None = None
    sync: dict[str, Any] | None = None  # the last sync record (observe/sync.py)
    checksums: dict[int, float] = field(default_factory=dict)  # optimizer step -> checksum
    spawn: dict[str, Any] | None = None

    def started_before(self, since: float) -> bool:
        started = self.process.get("t")
        return isinstance(started, (int, float)) and started < since

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except OSError:
            return []
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        out = json_objects(line.decode(errors="replace") for line in lines)
        for record in out:
            self._note(record)
        return out

    def _note(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == PROCESS:
            self.process = record
        elif kind == "group":
            self.group = record
        elif kind == "sync":
            self._sync(record)
        elif kind == "spawn":
            self.spawn = record
        elif kind in _TRAINING:
            self.trained = True
            if kind == "epoch":
                self.last_epoch = record
        elif kind == "framework":
            self.framework.setdefault(str(record.get("name")), record)
        elif kind == "device":
            self.device = str(record.get("device"))
        elif kind == "phase":
            start, end = record.get("start"), record.get("end")
            seconds = end - start if isinstance(start, float) and isinstance(end, float) else None
            self.phases.append(
                {"phase": record.get("phase"), "seconds": seconds, "values": record.get("values")}
            )
        elif kind == "note":
            self.notes.append(f"{record.get('hook')}: {record.get('error')}")

    def _sync(self, record: dict[str, Any]) -> None:
        """A process that stepped an optimizer trained, whether or not an epoch was seen (an
        iteration loop with no DataLoader has none)."""
        self.sync = record
        steps, checksum = record.get("steps"), record.get("checksum")
        if isinstance(steps, int) and steps > 0:
            self.trained = True
            if isinstance(checksum, (int, float)):
                self.checksums[steps] = float(checksum)

    @property
    def rank(self) -> int | None:
        """Its group rank, or else the rank its launcher gave it."""
        rank = (self.group or {}).get("rank", self.process.get("env_rank"))
        return rank if isinstance(rank, int) else None


class Observations:
    def __init__(self, run_dir: Path, attempt: str, child_pid: int, since: float) -> None:
        self.folder = run_dir / OBSERVE_DIR
        self.prefix = f"{attempt or '0'}-"
        self.child_pid = child_pid
        # A requeued Slurm job keeps its id: its earlier attempt's journals share the prefix,
        # and are told apart by their start. Other nodes' clocks may lag a little.
        self.since = since - _CLOCK_SLACK_SEC
        self.journals: dict[str, _Journal] = {}
        self.stale: set[str] = set()
        self.main: _Journal | None = None

    def poll(self) -> list[dict[str, Any]]:
        """New records of the main journal (all journals are read, for the summary)."""
        try:
            names = [n for n in os.listdir(self.folder) if n.startswith(self.prefix)]
        except OSError:
            names = []
        for name in names:
            if name not in self.journals and name not in self.stale:
                self.journals[name] = _Journal(self.folder / name)
        fresh = {name: j.read() for name, j in self.journals.items()}
        for name in [n for n, j in self.journals.items() if j.started_before(self.since)]:
            del self.journals[name]  # an earlier attempt's
            self.stale.add(name)
            fresh.pop(name, None)
        main = self._main()
        if main is not None and main is not self.main:
            self.main = main  # chosen now: read from its start
            return _all_records(main.path)
        return fresh.get(self.main.path.name, []) if self.main is not None else []

    def _main(self) -> _Journal | None:
        for j in self.journals.values():
            if j.group is not None and j.group.get("rank") == 0:
                return j
        if self.main is not None:
            return self.main
        for j in self.journals.values():
            if j.process.get("pid") == self.child_pid:
                return j
        return None

    def shape(self) -> tuple[int, ...]:
        """Changes when something the summary reports does."""
        js = self.journals.values()
        return (
            sum(j.group is not None for j in js),
            sum(j.trained for j in js),
            sum(len(j.framework) for j in js),
            sum(j.device is not None for j in js),
            sum(len(j.notes) for j in js),
            sum(j.spawn is not None for j in js),
            sum(j.sync is not None and j.sync.get("steps") == 1 for j in js),
        )

    def summary(self, launched: int) -> dict[str, Any]:
        """What the processes formed: run.json's ``observed``."""
        journals = list(self.journals.values())
        groups = [j.group for j in journals if j.group is not None]
        alone = [j for j in journals if j.group is None and j.trained]
        sizes = Counter(int(g.get("world_size") or 0) for g in groups)
        backends = sorted({str(g.get("backend")) for g in groups})
        ranks = sorted(
            (
                {
                    "rank": g.get("rank"),
                    "world_size": g.get("world_size"),
                    "backend": g.get("backend"),
                    "host": g.get("host"),
                    "local_rank": g.get("local_rank"),
                    "device": j.device,
                    # Its step time: the last epoch's seconds and the wait for batches in them.
                    "epoch_sec": (j.last_epoch or {}).get("seconds"),
                    "data_wait_sec": (j.last_epoch or {}).get("data_wait_sec"),
                }
                for j in journals
                if (g := j.group) is not None
            ),
            key=lambda r: r["rank"] if isinstance(r["rank"], int) else -1,
        )
        world = next(iter(sizes)) if len(sizes) == 1 else None
        frameworks: dict[str, Any] = {}
        for j in journals:
            for name, record in j.framework.items():
                frameworks.setdefault(
                    name, {k: v for k, v in record.items() if k not in ("kind", "t", "name")}
                )
        spawners = [j.spawn for j in journals if j.spawn is not None]
        spawn = (
            {"launchers": len(spawners), "nprocs": spawners[0].get("nprocs")} if spawners else None
        )
        state, reason = _verdict(groups, alone, world, ranks, launched, frameworks, spawn)
        notes = sorted({n for j in journals for n in j.notes})
        trained = [j for j in journals if j.sync is not None]
        sync = sync_summary([j.sync for j in trained if j.sync is not None])
        extra: dict[str, Any] = {"spawn": spawn} if spawn else {}
        if sync["state"] != "synchronised" and (divergence := _divergence(trained)):
            extra["divergence"] = divergence
        return {
            "group": state,
            "reason": reason,
            "world_size": world,
            "backend": backends[0] if len(backends) == 1 else (",".join(backends) or None),
            "hosts": sorted({str(r["host"]) for r in ranks}),
            "ranks": ranks,
            "launched": launched,
            "trained_alone": len(alone),
            "devices": sorted({j.device for j in journals if j.device}),
            "frameworks": frameworks,
            # Rank 0's test, validate and predict runs: never epochs, but their metrics.
            "phases": self.main.phases if self.main is not None else [],
            "notes": notes,
            "sync": sync,
            **extra,
        }


#: ``observed.group`` values that mean the ranks did not train together.
ALONE = ("none", "split", "alone")


def _verdict(
    groups: list[dict[str, Any]],
    alone: list[_Journal],
    world: int | None,
    ranks: list[dict[str, Any]],
    launched: int,
    frameworks: dict[str, Any],
    spawn: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """``formed``, ``none`` (no group), ``split`` (not one group of every rank), ``alone`` (a
    group formed, but the framework ran each process on its own), or ``unknown``; and why."""
    if not groups and not alone:
        return "unknown", "nothing observed: the script imported no torch, or observing failed"
    if not groups:
        return "none", "no process group was formed: each process trained on its own"
    if alone:
        return "split", f"{len(alone)} process(es) trained without joining the process group"
    if world is None:
        sizes = sorted({int(g.get("world_size") or 0) for g in groups})
        return "split", f"the processes formed groups of different sizes: {sizes}"
    spawned = (
        f"the script spawned {spawn['nprocs']} processes in each of {spawn['launchers']} "
        "launcher process(es); "
        if spawn
        else ""
    )
    if world == 1 and launched > 1:
        return "split", "each process formed a group of its own (world size 1)"
    if len(ranks) > world:  # the same ranks twice: worlds of their own, side by side
        return "split", (
            f"{spawned}{len(ranks)} processes formed {-(-len(ranks) // world)} separate groups "
            f"of world size {world}"
        )
    spawned_total = int(spawn["launchers"]) * int(spawn["nprocs"] or 0) if spawn else 0
    if spawned_total > len(ranks):  # a launcher's spawned world failed to form, or never joined
        return "split", (
            f"{spawned}only {len(ranks)} of those {spawned_total} processes joined a group "
            f"(of world size {world})"
        )
    if len({r["rank"] for r in ranks}) != world:
        return "split", f"{len(ranks)} process(es) joined a group of world size {world}"
    accelerate = frameworks.get("accelerate")
    if accelerate and launched > 1 and int(accelerate.get("num_processes") or 0) < launched:
        kind = accelerate.get("distributed_type")
        count = accelerate.get("num_processes")
        return "alone", (
            f"Accelerate ran each process on its own (distributed type {kind}, "
            f"{count} process), though a group of {world} was formed"
        )
    return "formed", f"{spawned}{world} process(es) formed one {ranks[0]['backend']} group"


def sync_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the processes that stepped an optimizer synchronised their gradients: run.json's
    ``observed.sync`` from each one's last ``sync`` record. A DDP or FSDP wrap in any of them
    counts; gradient all-reduces count as the fewest steps any process synchronised. Ranks
    that only sent tensors point to point may be a pipeline's stages: not judged."""
    if not records:
        return {"ddp": False, "fsdp": False, "grad_sync_steps": 0, "steps": 0,
                "state": "unknown", "reason": "no optimizer step was observed"}  # fmt: skip
    ddp = any(r.get("ddp") is True for r in records)
    fsdp = any(r.get("fsdp") is True for r in records)
    synced = min(_count(r.get("grad_allreduce_steps")) for r in records)
    steps = max(_count(r.get("steps")) for r in records)
    if ddp or fsdp:
        state, reason = (
            "synchronised",
            ("DistributedDataParallel wrapped the model" if ddp else "FSDP sharded the model"),
        )
    elif synced:
        state, reason = (
            "synchronised",
            (f"the gradients were all-reduced before {synced} of {steps} optimizer steps"),
        )
    elif any(r.get("p2p") is True for r in records):  # pipeline stages: nothing to average
        state, reason = (
            "unknown",
            "no gradient all-reduce, but the ranks sent tensors point to point (pipeline "
            "stages?): not judged",
        )
    else:
        state, reason = (
            "never",
            (
                "no DistributedDataParallel or FSDP wrap, and no gradient all-reduce before any "
                f"of the {steps} optimizer steps observed"
            ),
        )
    return {"ddp": ddp, "fsdp": fsdp, "grad_sync_steps": synced, "steps": steps,
            "state": state, "reason": reason}  # fmt: skip


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def _divergence(journals: list[_Journal]) -> dict[str, Any] | None:
    """Evidence that the ranks trained different models: their parameter checksums at the
    latest optimizer step every rank wrote one for (each trained rank's first parameters)."""
    by_rank = {j.rank: j.checksums for j in journals if j.rank is not None and j.checksums}
    if len(by_rank) < 2:
        return None
    common = set.intersection(*(set(c) for c in by_rank.values()))
    if not common:
        return None
    step = max(common)
    ranks = [{"rank": r, "checksum": by_rank[r][step]} for r in sorted(by_rank)]
    values = [r["checksum"] for r in ranks]
    diverged = max(values) - min(values) > 1e-6 * max(1.0, *(abs(v) for v in values))
    text = ", ".join(f"rank {r['rank']} {r['checksum']:.5g}" for r in ranks)
    return {
        "step": step,
        "ranks": ranks,
        "diverged": diverged,
        "evidence": f"after optimizer step {step} the ranks' parameter checksums "
        + ("differ" if diverged else "agree")
        + f": {text}",
    }


def _all_records(path: Path) -> list[dict[str, Any]]:
    try:
        return json_objects(path.read_text(errors="replace").splitlines())
    except OSError:
        return []
