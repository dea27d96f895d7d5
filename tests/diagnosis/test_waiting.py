"""Why a pending job waits: every reason code in a category, the advice, and the record."""

from __future__ import annotations

import json

import pytest

from ddp_tui.diagnosis.pending import _BY_CATEGORY, _WORDS, WaitCategory, pending_category
from ddp_tui.diagnosis.waiting import (
    Dependency,
    LimitFacts,
    PriorityFactors,
    Unavailable,
    WaitExplanation,
    needs_action,
    wait_advice,
    wait_lines,
)


def test_every_code_in_words_has_exactly_one_category() -> None:
    seen: dict[str, WaitCategory] = {}
    for category, table in _BY_CATEGORY.items():
        for code in table:
            assert code not in seen, f"{code} is under {seen[code]} and {category}"
            seen[code] = category
    assert set(seen) == set(_WORDS)
    for code, category in seen.items():
        assert pending_category(code) is category, code
        assert pending_category(f"({code})") is category, code  # squeue's default format


def test_every_category_has_codes_words_and_advice() -> None:
    for category in WaitCategory:
        assert category.words
        codes = _BY_CATEGORY[category]
        assert codes, category
        for code in codes:
            advice = wait_advice(category, code, "77")
            assert advice.endswith((".", ")")) and len(advice) > 20, (code, advice)


@pytest.mark.parametrize(
    ("code", "category"),
    [
        ("Priority", WaitCategory.PRIORITY),
        ("Resources", WaitCategory.RESOURCES),
        ("QOSMaxGRESPerUser", WaitCategory.LIMIT),
        ("AssocGrpCPUMinutesLimit", WaitCategory.LIMIT),
        # Not in the table (Slurm has more): still a limit, by its prefix.
        ("QOSGrpCPURunMinutesLimit", WaitCategory.LIMIT),
        ("AssocGrpMemRunMinutes", WaitCategory.LIMIT),
        ("Dependency", WaitCategory.DEPENDENCY),
        ("DependencyNeverSatisfied", WaitCategory.DEPENDENCY),
        ("Reservation", WaitCategory.RESERVATION),
        # As squeue and scontrol said them on the test cluster (tests/remote/data/wait):
        ("ReqNodeNotAvail, Reserved for maintenance", WaitCategory.RESERVATION),
        ("ReqNodeNotAvail, May be reserved for other job", WaitCategory.RESERVATION),
        ("ReqNodeNotAvail, UnavailableNodes:n[1-2]", WaitCategory.PARTITION),
        ("JobHeldUser", WaitCategory.HELD),
        ("JobHeldAdmin", WaitCategory.HELD),
        ("launch failed requeued held", WaitCategory.HELD),
        ("PartitionDown", WaitCategory.PARTITION),
        ("PartitionNodeLimit", WaitCategory.PARTITION),
        ("BeginTime", WaitCategory.OTHER),
        ("SomethingNew", WaitCategory.OTHER),
        ("requeued", WaitCategory.OTHER),  # the local scheduler's
        ("JobArrayTaskLimit", WaitCategory.LIMIT),  # Slurm's and the local scheduler's
    ],
)
def test_a_reason_gets_its_category(code: str, category: WaitCategory) -> None:
    assert pending_category(code) is category


def test_the_advice_names_the_job_and_what_to_run() -> None:
    assert "scontrol release 12" in wait_advice(WaitCategory.HELD, "JobHeldUser", "12")
    assert "administrator" in wait_advice(WaitCategory.HELD, "JobHeldAdmin", "12")
    never = wait_advice(WaitCategory.DEPENDENCY, "DependencyNeverSatisfied", "12")
    assert "scancel 12" in never and "Dependency=" in never
    per_job = wait_advice(WaitCategory.LIMIT, "QOSMaxGRESPerJob", "12")
    assert "never starts" in per_job and "scancel 12" in per_job
    assert "never" not in wait_advice(WaitCategory.LIMIT, "QOSMaxGRESPerUser", "12")
    local = wait_advice(WaitCategory.RESOURCES, "Resources", "3", scheduler="local")
    assert "local_max_concurrent" in local


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("JobHeldUser", True),
        ("JobHeldAdmin", True),
        ("DependencyNeverSatisfied", True),
        ("PartitionNodeLimit", True),
        ("QOSMaxWallDurationPerJobLimit", True),
        ("AssocMaxGRESPerJob", True),
        ("Priority", False),
        ("Resources", False),
        ("Dependency", False),
        ("QOSMaxJobsPerUserLimit", False),
        ("PartitionDown", False),
        ("ReqNodeNotAvail, Reserved for maintenance", False),
    ],
)
def test_needs_action_when_waiting_alone_never_starts_it(code: str, expected: bool) -> None:
    assert needs_action(pending_category(code), code) is expected


def test_a_job_that_is_not_pending_has_no_category_nor_advice() -> None:
    w = WaitExplanation.of_reason("7", "RUNNING", "None", scheduler="slurm")
    assert not w.pending and w.category is None and w.advice == "" and not w.needs_action
    assert wait_lines(w) == ["job 7: RUNNING"]
    assert w.to_dict()["category"] is None


def test_the_record_prints_every_part_and_its_json_is_strict() -> None:
    w = WaitExplanation.of_reason(
        "12",
        "PENDING",
        "AssocMaxJobsLimit",
        scheduler="slurm",
        run_id="20261128-run-ab12",
        estimated_start="2026-11-28T06:30:00 (Priority)",
        priority=(PriorityFactors("debug", 1025, 0, 0, 21, 1000, 0, tres="cpu=4"),),
        limits=(LimitFacts("association acct2/root", "MaxJobs", "", "1", "2", "assoc_mgr"),),
        dependencies=(Dependency("11", "afterok", "unfulfilled", "PENDING", "JobHeldUser"),),
        unavailable=(Unavailable("fair_share", "sshare: command not found"),),
    )
    lines = wait_lines(w)
    assert lines[0] == "20261128-run-ab12 (job 12): PENDING"
    assert "waits for: QOS or association limit" in lines
    assert "reason: at your account's running-job limit [AssocMaxJobsLimit]" in lines
    assert "estimated start: 2026-11-28T06:30:00 (Priority)" in lines
    assert (
        "priority in debug: 1025 = age 0 + fair-share 0 + job size 21 + partition 1000"
        " + QOS 0 + TRES cpu=4" in lines
    )
    assert "limit: association acct2/root: MaxJobs = 1 (2 in use)" in lines
    assert (
        "depends on job 11 (afterok, unfulfilled): job 11 is PENDING "
        "(held by you (release it to run))" in lines
    )
    assert lines[-1] == "not available: fair_share: sshare: command not found"
    doc = w.to_dict()
    text = json.dumps(doc, allow_nan=False)
    assert json.loads(text)["category"] == "limit"
    assert doc["limits"][0] == {
        "scope": "association acct2/root",
        "name": "MaxJobs",
        "tres": "",
        "limit": "1",
        "used": "2",
        "source": "assoc_mgr",
    }
    assert doc["needs_action"] is False and doc["reason_words"]
