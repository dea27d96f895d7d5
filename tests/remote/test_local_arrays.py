"""The local scheduler reads ``#SBATCH --array`` as sbatch does: its indices and its %K."""

from __future__ import annotations

import pytest

from ddp_tui.remote.backends.local.directives import expand_log_pattern, parse_array
from ddp_tui.remote.backends.scheduler import SchedulerError


@pytest.mark.parametrize(
    ("value", "indices", "limit"),
    [
        ("0-5%2", [0, 1, 2, 3, 4, 5], 2),
        ("0-5", [0, 1, 2, 3, 4, 5], 0),
        ("1,3,5", [1, 3, 5], 0),
        ("0-10:5", [0, 5, 10], 0),
        ("3", [3], 0),
        ("4,0-1%1", [0, 1, 4], 1),
    ],
)
def test_array_values_give_their_indices_and_throttle(
    value: str, indices: list[int], limit: int
) -> None:
    assert parse_array(value) == (indices, limit)


@pytest.mark.parametrize("value", ["", "a-b", "5-1", "0-3%0", "0-3%x", "0-1001", "1;2"])
def test_a_bad_array_value_is_refused_naming_it(value: str) -> None:
    with pytest.raises(SchedulerError, match="--array="):
        parse_array(value)


def test_an_array_task_names_its_logs_by_array_and_index() -> None:
    assert expand_log_pattern("/a/slurm-%A_%a.out", "7_3", "grid", array=("7", 3)) == (
        "/a/slurm-7_3.out"
    )
    assert expand_log_pattern("slurm-%j.out", "7", "grid") == "slurm-7.out"
