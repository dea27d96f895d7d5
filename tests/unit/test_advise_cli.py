"""``ddp-tui advise``'s options, the profile's ``advisor_threshold``, and the I/O side of the
advisor (remote/groups/advising.py) on real run directories made through the store.

- ``--threshold`` takes a fraction in (0, 1] or a percentage, ``--deadline`` a duration with a
  unit or a Slurm time; anything else is refused naming the flag and the allowed forms (exit 2);
- the profile key is read, defaults to 0.8, and a value outside (0, 1] names the key and range;
- the partition's size: GPUs of a GPU partition, cores for a CPU run;
- ``step_times.jsonl``: absent is no lines, and a torn last line is not read;
- an export of a group with no steady epoch still writes the comparison, saying why there is
  no advice, and no ``advice.csv``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddp_tui.cli import main
from ddp_tui.cli.advise import parse_deadline, parse_threshold
from ddp_tui.config import ConfigError, get_profile, load_profiles
from ddp_tui.jobfiles import STEP_TIMES_FILE
from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.groups.advising import export_group, partition_size, read_step_times
from ddp_tui.remote.groups.comparison import ADVICE_HEADING
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.reports.results import RunData
from ddp_tui.spec.gpu_types import kinds_of_nodes
from ddp_tui.spec.partitions import PartitionInfo


@pytest.mark.parametrize(
    ("text", "value"), [("0.8", 0.8), ("80%", 0.8), ("1", 1.0), (" 100% ", 1.0), ("0.05", 0.05)]
)
def test_threshold_takes_a_fraction_or_a_percentage(text: str, value: float) -> None:
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90m", 5400), ("2h", 7200), ("1d", 86400), ("45s", 45), ("1.5h", 5400), ("1:30:00", 5400)],
)
def test_deadline_takes_a_unit_or_a_slurm_time(text: str, seconds: float) -> None:
    assert parse_deadline(text) == seconds


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--threshold", "1.5"], "argument --threshold: a fraction above 0 and at most 1"),
        (["--threshold", "0"], "argument --threshold: a fraction above 0 and at most 1"),
        (["--threshold", "nan"], "argument --threshold"),
        (["--threshold", "eighty"], "or a percentage: 0.8 or 80%, got 'eighty'"),
        (["--deadline", "bogus"], "argument --deadline: a duration: a number with a unit"),
        (["--deadline", "0h"], "argument --deadline: must be more than 0"),
        (["--deadline", "2 weeks"], "(30s, 90m, 2h, 1.5d), or a Slurm time (1:30:00"),
    ],
)
def test_bad_options_name_the_flag_and_what_is_allowed(
    args: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["advise", "some-group", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert words in err, err
    assert "Traceback" not in err


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("")
    monkeypatch.setenv("DDP_TUI_CONFIG", str(path))
    return path


def test_the_profile_threshold_defaults_to_80_percent_and_is_read(cfg: Path) -> None:
    assert get_profile().advisor_threshold == 0.8
    cfg.write_text("[profiles.a]\nadvisor_threshold = 0.65\n[profiles.b]\nadvisor_threshold = 1\n")
    assert get_profile("a").advisor_threshold == 0.65
    assert get_profile("b").advisor_threshold == 1.0


@pytest.mark.parametrize("value", ["0", "1.2", "-0.5", "nan", "inf", "'80%'", "true"])
def test_a_profile_threshold_outside_0_to_1_names_the_key_and_range(cfg: Path, value: str) -> None:
    cfg.write_text(f"[profiles.a]\nadvisor_threshold = {value}\n")
    with pytest.raises(ConfigError) as err:
        load_profiles()
    assert (err.value.key, err.value.line) == ("profiles.a.advisor_threshold", 2)
    assert "more than 0 and at most 1" in err.value.message


def partition(name: str, **kw: object) -> PartitionInfo:
    base: dict[str, object] = {
        "nodes": 4,
        "gpus_per_node": 8,
        "cpus_per_node": 64,
        "max_time_min": None,
        "max_nodes": None,
    }
    return PartitionInfo(name=name, **{**base, **kw})  # type: ignore[arg-type]


def test_the_partition_size_is_its_gpus_on_gpus_and_its_cores_on_the_cpu() -> None:
    parts = [
        partition("gpu", is_default=True),
        partition("big", nodes=16, max_nodes=8),
        partition("cpu", gpus_per_node=0),
    ]
    assert partition_size({"partition": "", "device": "cuda"}, parts) == 32
    # max_nodes caps what one job may take; of several partitions the largest counts.
    assert partition_size({"partition": "gpu,big", "device": "cuda"}, parts) == 64
    assert partition_size({"partition": "cpu", "device": "cuda"}, parts) is None
    assert partition_size({"partition": "nope", "device": "cuda"}, parts) is None
    assert partition_size({"partition": "cpu", "device": "cpu"}, parts) == 256
    assert partition_size({"partition": "", "device": "cuda"}, []) is None


def test_a_gpu_type_sizes_the_partition_by_its_nodes_of_that_type() -> None:
    nodes = [(f"a{i}", "gpu:a100:4", []) for i in range(6)] + [("h1", "gpu:h100:4", [])]
    parts = [partition("gpu", nodes=7, gpus_per_node=4, gpu_kinds=kinds_of_nodes(nodes))]
    assert partition_size({"partition": "gpu", "device": "cuda"}, parts) == 28
    assert partition_size({"partition": "gpu", "device": "cuda", "gpu_type": "h100"}, parts) == 4
    assert partition_size({"partition": "gpu", "device": "cuda", "gpu_type": "A100"}, parts) == 24
    # A type the partition lacks: no size is known (the plan refuses it anyway).
    assert partition_size({"partition": "gpu", "device": "cuda", "gpu_type": "v100"}, parts) is None


def make_store(tmp_path: Path) -> RunStore:
    return RunStore(LocalExecutor(), str(tmp_path / "runs"))


def test_step_times_absent_is_none_and_a_torn_last_line_is_not_read(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    ref_a = store.create_run({"name": "a"}, "a", "#!/bin/bash\n", "g")
    ref_b = store.create_run({"name": "b"}, "b", "#!/bin/bash\n", "g")
    line = {"epoch": 1, "ranks": [{"rank": 0, "host": "h", "step_median_sec": 0.1}]}
    Path(ref_a.file(STEP_TIMES_FILE)).write_text(json.dumps(line) + '\n{"epoch": 2, "ra')
    runs = [RunData(run_id=r.run_id, spec={}, metrics=[]) for r in (ref_a, ref_b)]
    assert read_step_times(store, runs) == {ref_a.run_id: [line], ref_b.run_id: []}


def test_a_group_without_a_steady_epoch_still_exports_and_says_why(tmp_path: Path) -> None:
    store = make_store(tmp_path)
    store.create_run({"name": "a", "device": "cpu"}, "a", "#!/bin/bash\n", "g")
    paths = export_group(store, "g", partitions=[])
    assert [Path(p).name for p in paths] == ["comparison.md", "comparison.csv"]
    md = Path(paths[0]).read_text()
    assert md.index(ADVICE_HEADING) > 0, md
    assert "The advice could not be computed: group 'g': no run has a steady epoch yet" in md
