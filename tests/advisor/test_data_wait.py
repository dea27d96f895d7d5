"""When the ranks wait for data, the advice names the setting that would hide it (pure)."""

from __future__ import annotations

import pytest

from ddp_tui.advisor import AdvisorInputs, SizeRun, advise
from ddp_tui.advisor.cores import CoreShare
from ddp_tui.advisor.data_wait import remedies
from tests.advisor.builders import run, table

#: A node of 8 GPUs and 64 cores: 8 cores a rank.
NODE = CoreShare(cores=64, cpus=64, ranks=8, threads=8)


def hungry(world: int = 2, **extra: object) -> SizeRun:
    """A run whose ranks wait for data a quarter of each step."""
    fields: dict[str, object] = {"device": "cuda", "cores": NODE, "workers": 7, "prefetch": 4}
    fields.update(extra)
    return run(world, data=0.04, **fields)


def settings(r: SizeRun) -> list[str]:
    return [f.setting for f in remedies(r)]


def test_jpegs_decoded_on_the_host_of_a_gpu_run_go_to_the_gpu_first() -> None:
    found = remedies(hungry(dataset="imagefolder", decode="cpu", workers=2))
    assert [f.setting for f in found] == ["decode", "workers"]
    assert found[0].value == "gpu" and found[0].now == "cpu"
    assert "decode gpu (the spec's field" in found[0].text
    # 8 cores a rank: the main process takes one, two workers two, five are idle.
    assert (found[1].value, found[1].now) == (7, 2)
    assert "5 of each rank's cores are idle" in found[1].text
    # Decoded on the GPU already, or no JPEGs: nothing to move.
    assert "decode" not in settings(hungry(dataset="imagefolder", decode="gpu"))
    assert "decode" not in settings(hungry(dataset="synthetic", decode=None))


def test_memory_that_cut_the_prefetch_is_named() -> None:
    found = remedies(hungry(prefetch=1))
    assert [f.setting for f in found] == ["prefetch"]
    assert "--prefetch 2" in found[0].text
    assert settings(hungry(prefetch=1, workers=0)) != ["prefetch"]  # no workers, no prefetch


@pytest.mark.parametrize(
    ("device", "share", "workers", "ask"),
    [
        # Every core of a GPU rank busy: the main process and 7 workers. Two more a rank: 80.
        ("cuda", NODE, 7, 80),
        # A CPU rank's compute threads take its cores: two more a rank, for workers.
        ("cpu", CoreShare(cores=2, cpus=2, ranks=2, threads=1), 0, 6),
        # srun: cpus_per_task is each rank's.
        ("cpu", CoreShare(cores=8, cpus=8, ranks=2, threads=4, per_task=True), 0, 6),
    ],
)
def test_busy_cores_ask_for_more_cpus_per_task(
    device: str, share: CoreShare, workers: int, ask: int
) -> None:
    (found,) = remedies(hungry(device=device, cores=share, workers=workers))
    assert (found.setting, found.value) == ("cpus_per_task", ask)
    assert found.text.startswith(f"cpus_per_task {ask}, now ")


def test_the_change_names_the_setting_and_what_it_saves() -> None:
    base = {"dataset": "imagefolder", "decode": "cpu", "workers": 2}
    advice = advise(AdvisorInputs("g", (hungry(1, **base), hungry(2, **base)), (table(2),)))
    (change,) = [c for c in advice.changes if c.kind == "data_wait"]
    numbers = change.numbers
    assert [s["setting"] for s in numbers["settings"]] == ["decode", "workers"]
    saved = numbers["epoch_time_before_sec"] - numbers["epoch_time_after_sec"]
    assert saved > 0 and numbers["saves_sec_per_epoch"] == pytest.approx(saved)
    assert "decode gpu" in change.text and "workers 7" in change.text
    assert "; to hide it: " in change.text and change.text.endswith("an epoch)")
    # No wait worth a change: nothing said.
    quiet = advise(AdvisorInputs("g", (run(1), run(2)), (table(2),)))
    assert not [c for c in quiet.changes if c.kind == "data_wait"]
