"""Arbitrary content in any file of a run directory (issue 21, property test).

Each file of the run-directory contract gets random bytes, or its own content with one
field, cell or line replaced by any JSON value (wrong types, NaN, infinities, 10**18). The
CLI's readers, called as library functions for speed (the same facade calls ``ls``,
``verify``, ``resources``, ``logs``, ``why`` and ``compare`` make), must never raise, must
always list the run, and must leave the healthy run beside it as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddp_tui.config import Profile
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.cluster import Cluster
from ddp_tui.reports.text import strict_json
from tests.helpers.damage import CONTRACT_FILES, copy_run

pytestmark = pytest.mark.torch

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.sampled_from([10**12, 10**18, -1, 0])
    | st.floats()
    | st.text(max_size=12)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@dataclass
class World:
    root: Path
    state: Path
    healthy: str
    victim: Path
    originals: dict[str, bytes] = field(repr=False)  # kept out of failure reports


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, finished_trainer_run: Path) -> Iterator[World]:
    made = finished_trainer_run  # made once per suite run (tests/fixtures/shared_runs.py)
    base = tmp_path_factory.mktemp("property")
    root = base / "runs"
    healthy = copy_run(made, root, "healthy").name
    victim = copy_run(made, root, "victim")
    originals = {
        name: (victim / name).read_bytes() for name in CONTRACT_FILES if (victim / name).is_file()
    }
    yield World(root, base / "state", healthy, victim, originals)
    shutil.rmtree(base, ignore_errors=True)


def _mutated(original: bytes, name: str, value: Any, pick: int) -> bytes:
    """``original`` with one part replaced by ``value``: a field of a JSON file (of its
    ``spec`` for spec.json), a line of a JSON-lines file, a cell of metrics.csv."""
    text = original.decode("utf-8", "replace")
    if name.endswith(".json"):
        try:
            doc = json.loads(text)
        except ValueError:
            doc = {}
        target = doc.get("spec") if name == "spec.json" and isinstance(doc, dict) else doc
        if isinstance(target, dict):
            keys = sorted(target) or ["x"]
            target[keys[pick % len(keys)]] = value
        return json.dumps(doc).encode()
    lines = text.splitlines() or [""]
    i = pick % len(lines)
    if name.endswith(".jsonl"):
        try:
            rec = json.loads(lines[i])
        except ValueError:
            rec = {}
        if isinstance(rec, dict):
            keys = sorted(rec) or ["x"]
            rec[keys[(pick // len(lines)) % len(keys)]] = value
        lines[i] = json.dumps(rec)
    elif name == "metrics.csv" and len(lines) > 1:
        cells = lines[-1].split(",")
        cells[pick % len(cells)] = json.dumps(value) if not isinstance(value, str) else value
        lines[-1] = ",".join(cells)
    else:
        lines[i] = json.dumps(value)
    return ("\n".join(lines) + "\n").encode()


@st.composite
def contents(draw: st.DrawFn, world: World, name: str) -> bytes:
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    content = world.originals.get(name, b"{}")
    # Several parts at once: a wrong type among many right ones is found sooner.
    for _ in range(draw(st.integers(1, 8))):
        content = _mutated(content, name, draw(JSON), draw(st.integers(0, 10**6)))
    return content


@pytest.mark.parametrize("name", CONTRACT_FILES)
@settings(
    max_examples=40,
    deadline=None,
    # CI replays one fixed set of examples, so its verdict is the same on every run; a run
    # by hand explores new ones (7 runs of 760 examples each found nothing).
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_content_of_any_file_never_raises_and_the_run_is_listed(
    world: World, name: str, data: st.DataObject
) -> None:
    path = world.victim / name
    content = data.draw(contents(world, name), label=name)
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    try:
        profile = Profile(scheduler="local", runs_root=str(world.root))
        cluster = Cluster.open(profile, local_state_dir=str(world.state))
        try:
            runs = {v.run_id: v for v in cluster.refresh().runs}
            assert world.victim.name in runs, f"{name}: the run is not listed"
            healthy = runs[world.healthy]
            assert healthy.state is JobState.COMPLETED and healthy.epochs_done == 2
            assert not healthy.damage
            run = world.victim.name
            view = runs[run]
            json.loads(strict_json([view.last_train_loss, view.throughput, view.last_val_metric]))
            cluster.verify(run)
            cluster.resources(run)
            cluster.follow(run)
            cluster.diagnose(run)
            if view.group:
                cluster.compare(view.group)
        finally:
            cluster.close()
    finally:
        original = world.originals.get(name)
        if original is None:
            path.unlink()
        else:
            path.write_bytes(original)
