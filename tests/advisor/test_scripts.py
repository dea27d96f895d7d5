"""A user's script: the observation layer measures its epochs and its data wait, not its
all-reduce; the advisor infers the rest and says so."""

from __future__ import annotations

from ddp_tui.advisor import AdvisorInputs, advise
from ddp_tui.advisor.measure import size_run
from ddp_tui.advisor.report import advice_markdown
from ddp_tui.reports.results import RunData


def script_run(world: int, epoch: float, wait: float, samples: int | None = 4096) -> RunData:
    """Rows as the script runner merges them: epoch time and data wait observed, compute the
    rest (its all-reduce inside), throughput where the script's samples were counted."""
    rows = []
    for n in (1, 2, 3):
        rows.append(
            {
                "epoch": float(n),
                "epoch_time_sec": epoch,
                "data_load_time_sec": wait,
                "compute_time_sec": epoch - wait,
                "throughput_samples_per_sec": samples / epoch if samples else None,
                "world_size": float(world),
            }
        )
    spec = {"entry": "script", "nodes": 1, "gpus_per_node": world, "epochs": 3}
    return RunData(f"s{world}", spec, rows, {"world_size": world, "state": "completed"})


def test_a_scripts_comm_is_inferred_and_marked() -> None:
    one = size_run(script_run(1, epoch=20.0, wait=1.0))
    two = size_run(script_run(2, epoch=12.0, wait=0.5))
    assert one is not None and two is not None and two.script
    assert two.breakdown is not None
    assert set(two.breakdown.inferred) == {"compute_sec", "comm_sec", "other_sec"}
    advice = advise(AdvisorInputs("scripts", (one, two)))
    measured = advice.size(2)
    assert measured is not None and measured.measured is not None
    b = measured.measured.breakdown
    assert b is not None and "comm_sec" in b.inferred
    # Half of one rank's 19 s of non-data work is 9.5 s; the rest of the 11.5 s is the
    # all-reduce it paid for.
    assert abs(b.comm_sec - 2.0) < 1e-9 and abs(b.compute_sec - 9.5) < 1e-9
    one_b = advice.size(1).measured.breakdown  # type: ignore[union-attr]
    assert one_b is not None and one_b.comm_sec == 0.0 and "comm_sec" not in one_b.inferred
    assert any("inferred, not measured" in note for note in advice.notes)
    assert "comm 17%*" in advice_markdown(advice)
    four = advice.size(4)
    assert four is not None and four.predicted is not None
    # No gradient bytes and no preflight: the all-reduce is the measured one scaled by the
    # ring's 2(n-1)/n, exposed as it was.
    assert four.predicted.link == "scaled"
