"""A FAKE NCCL flight recorder: dumps written in torch's format, for hangs made up by a test.

There is no NCCL on these machines, so no real dump of a real NCCL timeout can be made here.
:class:`FakeRank` records calls the way ``c10d::FlightRecorder`` does (per process group: a
``collective_seq_id`` for collectives, a ``p2p_seq_id`` for sends and receives, one
``record_id`` per rank) and dumps them as torch 2.15 writes them: a protocol-2 pickle of
plain dicts, lists and tuples (``version`` "2.10", ``pg_config`` with the ranks as text,
``pg_status``, ``entries`` with innermost-first ``frames``), or its JSON variant. The keys
match a real dump's: tests/diagnosis/test_flight_recorder.py checks them against one that
torch's own writer produced (gloo shares the writer) on this machine.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddp_tui.diagnosis.flight_recorder import dump_path

TORCH_C10D = "/opt/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
TORCH_LOGGER = "/opt/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"
USER_SCRIPT = "/home/u/proj/train.py"


def frames(
    user: Sequence[tuple[str, int]] = (("train_step", 88), ("main", 120)),
) -> list[dict[str, Any]]:
    """A Python stack at a collective, innermost first: torch's own frames, then the user's
    (name, line) in train.py."""
    return [
        {"name": "all_reduce", "filename": TORCH_C10D, "line": 2501},
        {"name": "wrapper", "filename": TORCH_LOGGER, "line": 83},
        *({"name": name, "filename": USER_SCRIPT, "line": line} for name, line in user),
    ]


@dataclass
class FakeRank:
    """One rank's FAKE recorder. ``groups``: name -> (desc, global ranks)."""

    rank: int
    world_size: int
    groups: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    entries: list[dict[str, Any]] = field(default_factory=list)
    _coll: dict[str, int] = field(default_factory=dict)
    _p2p: dict[str, int] = field(default_factory=dict)
    _ns: int = 1_700_000_000_000_000_000

    def __post_init__(self) -> None:
        self.groups.setdefault("0", ("default_pg", tuple(range(self.world_size))))

    def group(self, name: str, desc: str, ranks: Iterable[int]) -> FakeRank:
        self.groups[name] = (desc, tuple(ranks))
        return self

    def _record(self, name: str, group: str, state: str, p2p: bool, **extra: Any) -> dict[str, Any]:
        if p2p:
            self._p2p[group] = self._p2p.get(group, 0) + 1
        else:
            self._coll[group] = self._coll.get(group, 0) + 1
        self._ns += 1_000_000
        sizes = extra.pop("sizes", [[3, 4]])
        dtype = extra.pop("dtype", "Float")
        entry = {
            "record_id": len(self.entries),
            "pg_id": list(self.groups).index(group),
            "process_group": (group, self.groups[group][0]),
            "thread_name": "python",
            "thread_id": "140292447505280",
            "collective_seq_id": self._coll.get(group, 0),
            "p2p_seq_id": self._p2p.get(group, 0),
            "op_id": len(self.entries) + 1,
            "profiling_name": f"nccl:{name}",
            "time_created_ns": self._ns,
            "input_sizes": sizes,
            "input_dtypes": [dtype] * len(sizes),
            "output_sizes": sizes,
            "output_dtypes": [dtype] * len(sizes),
            "state": state,
            "time_discovered_started_ns": self._ns + 1000 if state != "scheduled" else None,
            "time_discovered_completed_ns": self._ns + 5000 if state == "completed" else None,
            "retired": state == "completed",
            "timeout_ms": 600000,
            "is_p2p": p2p,
            "frames": extra.pop("frames", frames()),
        }
        entry.update(extra)
        self.entries.append(entry)
        return entry

    def collective(
        self, op: str = "all_reduce", *, group: str = "0", state: str = "completed", **extra: Any
    ) -> FakeRank:
        self._record(op, group, state, False, **extra)
        return self

    def steps(self, n: int, op: str = "all_reduce", **extra: Any) -> FakeRank:
        """``n`` completed collectives, as a training loop's steps leave them."""
        for _ in range(n):
            self.collective(op, **extra)
        return self

    def send(
        self, dst: int, *, group: str = "0", state: str = "completed", **extra: Any
    ) -> FakeRank:
        me = self.groups[group][1].index(self.rank)
        self._record(f"send {me}->{dst}", group, state, True, **extra)
        return self

    def recv(
        self, src: int, *, group: str = "0", state: str = "completed", **extra: Any
    ) -> FakeRank:
        me = self.groups[group][1].index(self.rank)
        self._record(f"recv {me}<-{src}", group, state, True, **extra)
        return self

    def doc(self) -> dict[str, Any]:
        """The dump as torch builds it before pickling."""
        status = {}
        for i, name in enumerate(self.groups):
            done = [
                e["collective_seq_id"]
                for e in self.entries
                if e["process_group"][0] == name and e["state"] == "completed" and not e["is_p2p"]
            ]
            enq = self._coll.get(name, 0)
            status[str(i)] = {
                "last_enqueued_collective": enq,
                "last_started_collective": -1,
                "last_completed_collective": max(done, default=-1),
            }
        return {
            "version": "2.10",
            "pg_config": {
                name: {"name": name, "desc": desc, "ranks": str(list(ranks))}
                for name, (desc, ranks) in self.groups.items()
            },
            "comm_lib_version": "2.27.3",
            "pg_status": status,
            "entries": self.entries,
            "nccl_comm_state": {},
        }

    def pickled(self) -> bytes:
        return pickle.dumps(self.doc(), protocol=2)

    def json(self) -> bytes:
        """The JSON variant (torch's ``_dump_nccl_trace_json``): no frames, lists for tuples."""
        doc = self.doc()
        doc["entries"] = [{k: v for k, v in e.items() if k != "frames"} for e in doc["entries"]]
        return json.dumps(doc).encode()


def fake_hang(world_size: int, *, absent: Iterable[int], steps: int = 411) -> dict[int, FakeRank]:
    """Every rank did ``steps`` all_reduces; all but ``absent`` then entered one more, which
    never completes (it waits for them)."""
    missing = set(absent)
    ranks = {}
    for r in range(world_size):
        rank = FakeRank(r, world_size).steps(steps)
        if r not in missing:
            rank.collective(state="started")
        ranks[r] = rank
    return ranks


def write_fake_dumps(run_dir: str | Path, job_id: str, ranks: Mapping[int, FakeRank]) -> list[Path]:
    """Each rank's dump where the job script points torch: ``nccl_trace/<job>/rank_<N>``."""
    out = []
    for r, rank in ranks.items():
        path = Path(run_dir) / dump_path(job_id, r)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rank.pickled())
        out.append(path)
    return out
