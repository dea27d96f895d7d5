"""The advice: which size, why, and the changes the measurements support."""

from __future__ import annotations

import csv
import io
import json

import pytest

from ddp_tui.advisor import AdvisorInputs, RankTime, advise
from ddp_tui.advisor.advice import best_estimate, candidate_sizes
from ddp_tui.advisor.changes import stragglers
from ddp_tui.advisor.report import advice_csv, advice_json, advice_markdown, speedup_series
from ddp_tui.reports.text import strict_json
from tests.advisor.builders import run, table


def test_sizes_reach_four_times_the_largest_and_the_partition() -> None:
    runs = [run(1, per_node=2), run(2, per_node=2)]
    assert candidate_sizes(runs, None) == [(1, 1), (2, 1), (4, 2), (8, 4)]
    assert candidate_sizes(runs, 32)[-1] == (32, 16)


def test_json_has_the_keys_the_issue_names() -> None:
    advice = advise(AdvisorInputs("g", (run(1, per_node=2), run(2, per_node=2)), (table(2),)))
    doc = json.loads(strict_json(advice_json(advice)))
    sizes = {s["world_size"]: s for s in doc["sizes"]}
    for world in (1, 2):
        m = sizes[world]["measured"]
        assert {"epoch_time_sec", "efficiency", "breakdown"} <= set(m)
        assert {"compute_sec", "data_sec", "comm_sec", "other_sec"} <= set(m["breakdown"])
    assert sizes[4]["measured"] is None
    assert {"epoch_time_sec", "efficiency", "gpu_hours_per_epoch"} <= set(sizes[4]["predicted"])
    assert sizes[2]["backtest_error"] is not None and sizes[4]["backtest_error"] is None
    assert doc["recommendation"]["world_size"] in sizes and doc["recommendation"]["reason"]


def test_threshold_picks_the_largest_size_that_keeps_it() -> None:
    runs = (run(1), run(2), run(4))
    loose = advise(AdvisorInputs("g", runs, (table(4),), threshold=0.5))
    strict = advise(AdvisorInputs("g", runs, (table(4),), threshold=0.95))
    for advice, threshold in ((loose, 0.5), (strict, 0.95)):
        rec = advice.recommendation
        assert rec.rule == "threshold" and rec.world_size is not None
        eff: dict[int, float] = {}
        for s in advice.sizes:
            estimate = best_estimate(s)
            assert estimate is not None
            eff[s.world_size] = estimate[1]
        assert eff[rec.world_size] >= threshold
        assert all(e < threshold for w, e in eff.items() if w > rec.world_size)
        assert f"{threshold:.0%}" in rec.reason
    assert loose.recommendation.world_size > strict.recommendation.world_size  # type: ignore[operator]


def test_deadline_picks_the_fewest_gpu_hours_that_meet_it() -> None:
    runs = (run(1), run(2), run(4))
    advice = advise(AdvisorInputs("g", runs, (table(4),), deadline_sec=1e9))
    # Everything meets a far deadline; efficiency < 1 makes one rank the cheapest.
    assert advice.recommendation.world_size == 1 and advice.recommendation.rule == "deadline"
    one = advice.size(1)
    assert one is not None and one.measured is not None
    tight = one.measured.epoch_time_sec * 10 * 0.6  # 10 epochs, less time than one rank needs
    advice = advise(AdvisorInputs("g", runs, (table(4),), deadline_sec=tight))
    rec = advice.recommendation
    assert rec.world_size is not None and rec.world_size > 1
    chosen = advice.size(rec.world_size)
    assert chosen is not None
    estimate = best_estimate(chosen)
    assert estimate is not None and estimate[0] * 10 <= tight
    assert "within the deadline" in rec.reason


def test_an_unmet_deadline_names_the_fastest_size() -> None:
    advice = advise(AdvisorInputs("g", (run(1), run(2)), (table(2),), deadline_sec=0.001))
    assert "no size runs" in advice.recommendation.reason


def test_changes_appear_only_where_the_measurements_support_them() -> None:
    quiet = advise(AdvisorInputs("g", (run(1), run(2)), (table(2),)))
    assert {c.kind for c in quiet.changes} & {"data_wait", "batch", "exclude"} == set()
    hungry = advise(
        AdvisorInputs(
            "g",
            (run(1, data=0.03), run(2, data=0.03, gpu_mem_peak_mib=9000, gpu_mem_total_mib=81000)),
            (table(2),),
        )
    )
    kinds = {c.kind: c for c in hungry.changes}
    assert "data_wait" in kinds and "batch" in kinds
    workers = kinds["data_wait"].numbers
    assert workers["data_share"] >= 0.10
    # Hiding the data wait speeds one rank as much as many: the epoch, not the scaling.
    assert workers["epoch_time_after_sec"] < workers["epoch_time_before_sec"]
    assert kinds["batch"].numbers["efficiency_after"] > kinds["batch"].numbers["efficiency_before"]


def test_a_heavy_allreduce_gets_accumulation_and_compression_priced() -> None:
    slow_link = table(2).__class__(  # a wire 10x slower: communication dominates
        "slow", 2, 1, tuple((m, t * 10) for m, t in table(2).rows)
    )
    from tests.advisor.builders import LINK

    link = LINK.__class__(LINK.alpha_sec * 10, LINK.beta_bytes_per_sec / 10, "intra-node", "t")
    advice = advise(AdvisorInputs("g", (run(1, link=link), run(2, link=link)), (slow_link,)))
    kinds = {c.kind: c for c in advice.changes}
    assert {"accumulation", "bf16_compression"} <= set(kinds)
    for kind in ("accumulation", "bf16_compression"):
        numbers = kinds[kind].numbers
        assert numbers["comm_share"] >= 0.15
        assert numbers["epoch_time_after_sec"] < numbers["epoch_time_before_sec"]


def test_one_bucket_gets_a_bucket_cap_change() -> None:
    from tests.advisor.builders import LINK

    link = LINK.__class__(LINK.alpha_sec, LINK.beta_bytes_per_sec / 10, "intra-node", "t")
    slow = table(2, link)
    advice = advise(
        AdvisorInputs("g", (run(1, link=link, buckets=1), run(2, link=link, buckets=1)), (slow,))
    )
    bucket = [c for c in advice.changes if c.kind == "bucket_cap"]
    assert bucket and bucket[0].numbers["buckets"] == 1


@pytest.mark.parametrize(("busy", "named"), [(0.1199, False), (0.1211, True)])
def test_a_rank_ten_percent_slower_than_the_median_is_a_straggler(busy: float, named: bool) -> None:
    # Median of three ranks: 0.11; 10% slower is 0.121.
    ranks = (
        RankTime(0, "n1", 0.13, 0.10),
        RankTime(1, "n2", 0.13, 0.11),
        RankTime(2, "n3", 0.13, busy),
    )
    found = stragglers([run(3, ranks=ranks)])
    assert [s.host for s in found] == (["n3"] if named else [])
    if named:
        advice = advise(AdvisorInputs("g", (run(1), run(3, ranks=ranks)), (table(3),)))
        exclude = [c for c in advice.changes if c.kind == "exclude"]
        assert exclude and exclude[0].numbers["host"] == "n3" and "n3" in exclude[0].text


def test_reports_carry_the_advice() -> None:
    advice = advise(AdvisorInputs("grp", (run(1), run(2)), (table(2),)))
    md = advice_markdown(advice)
    assert "## Scaling advice: grp" in md and advice.recommendation.reason[5:40] in md
    csv_text = advice_csv(advice)
    assert csv_text.startswith("world_size,nodes,gpus_per_node")
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert len(rows) == len(advice.sizes)
    assert [r["world_size"] for r in rows if r["recommended"] == "yes"] == [
        str(advice.recommendation.world_size)
    ]
    points = speedup_series(advice)
    assert points[0][1] == pytest.approx(1.0)  # the baseline's measured speedup
    for _, _, predicted, low, high in points:
        assert predicted is not None and low is not None and high is not None
        assert low <= predicted + 1e-9 <= high + 2e-9


def test_no_runs_is_advice_that_says_so() -> None:
    advice = advise(AdvisorInputs("g", ()))
    assert advice.recommendation.world_size is None and "no run" in advice.recommendation.reason
    assert advice_json(advice)["sizes"] == []


def test_sizes_past_the_partition_are_shown_but_never_recommended() -> None:
    runs = (run(1), run(2))
    free = advise(AdvisorInputs("g", runs, (table(2),), threshold=0.5))
    assert free.recommendation.world_size == 8  # efficient enough everywhere
    held = advise(AdvisorInputs("g", runs, (table(2),), threshold=0.5, max_world_size=2))
    assert held.recommendation.world_size == 2
    beyond = [s for s in held.sizes if not s.fits_partition]
    assert [s.world_size for s in beyond] == [4, 8]
    assert all(s.predicted is not None for s in beyond)
    doc = advice_json(held)
    assert [s["fits_partition"] for s in doc["sizes"]] == [True, True, False, False]
    deadline = advise(AdvisorInputs("g", runs, (table(2),), deadline_sec=1.0, max_world_size=2))
    assert deadline.recommendation.world_size in (1, 2)
