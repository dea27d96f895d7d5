"""Why a Slurm job waits, read from what the test cluster really answered.

``tests/remote/data/wait/*.json`` holds, for one job each, every command
:func:`~ddp_tui.remote.backends.slurm.wait_explainer.explain_wait` asked the Slurm test
cluster and its answer (see the README there). :class:`Recorded` plays those answers back
to the same argv (a command it was not asked before fails the test: the argv changed, record
again); the parsers read the recorded text. The live story, on the running cluster, is in
tests/integration/test_why_slurm.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from ddp_tui.diagnosis.pending import _BY_CATEGORY, WaitCategory
from ddp_tui.diagnosis.waiting import WaitExplanation
from ddp_tui.remote.backends.executor import CommandResult
from ddp_tui.remote.backends.scheduler import SchedulerUnavailable
from ddp_tui.remote.backends.slurm.wait_explainer import explain_wait
from ddp_tui.remote.backends.slurm.waiting import (
    LimitRef,
    assoc_limit,
    limit_ref,
    parse_dependency,
    parse_sprio,
    qos_limit,
    sprio_argv,
)

DATA = Path(__file__).parent / "data" / "wait"
TOOLS = ("scontrol", "squeue", "sprio", "sshare", "sacctmgr")


def _key(argv: Sequence[str]) -> tuple[str, ...]:
    """The command from its tool on: the ``env -u ...`` in front may change freely."""
    start = next(i for i, a in enumerate(argv) if a in TOOLS)
    return tuple(argv[start:])


class Recorded:
    """The test cluster's recorded answers, each to the argv that asked it."""

    def __init__(self, name: str) -> None:
        doc = json.loads((DATA / f"{name}.json").read_text())
        self.job_id: str = doc["job_id"]
        self.answers = {
            _key(a["argv"]): CommandResult(
                tuple(a["argv"]), a["returncode"], a["stdout"], a["stderr"]
            )
            for a in doc["answers"]
        }
        self.asked: list[list[tuple[str, ...]]] = []

    def run(self, argvs: Sequence[Sequence[str]]) -> list[CommandResult]:
        self.asked.append([_key(argv) for argv in argvs])
        missing = [" ".join(_key(a)) for a in argvs if _key(a) not in self.answers]
        assert not missing, f"not recorded (record again): {missing}"
        return [self.answers[_key(argv)] for argv in argvs]

    def text(self, tool: str, *words: str) -> str:
        """The recorded stdout of the one command of ``tool`` whose argv has ``words``."""
        (hit,) = [
            r.stdout for k, r in self.answers.items() if k[0] == tool and all(w in k for w in words)
        ]
        return hit


def explain(name: str) -> tuple[WaitExplanation, Recorded]:
    rec = Recorded(name)
    return explain_wait(rec.job_id, rec.run), rec


BASIC_SPRIO = (
    "the cluster runs priority/basic: jobs start in the order they came, with no priority "
    "factors to show (sprio needs priority/multifactor)"
)


def _unavailable(w: WaitExplanation) -> dict[str, str]:
    return {u.part: u.reason for u in w.unavailable}


def test_a_held_job_is_held_and_priority_basic_says_so() -> None:
    w, rec = explain("basic_held")
    assert (w.state, w.category, w.reason) == ("PENDING", WaitCategory.HELD, "JobHeldUser")
    assert w.needs_action and f"scontrol release {w.job_id}" in w.advice
    assert w.estimated_start == ""  # squeue --start: N/A|JobHeldUser
    gone = _unavailable(w)
    assert gone["priority"] == BASIC_SPRIO
    assert gone["fair_share"] == "not used under priority/basic (sshare says root: FairShare 0.0)"
    assert w.priority == () and w.fair_share == ()
    assert len(rec.asked) == 2  # two round trips: the job, then the rest in one batch


def test_a_job_behind_a_held_one_waits_for_its_dependency() -> None:
    w, _ = explain("basic_dependency")
    assert w.category is WaitCategory.DEPENDENCY and not w.needs_action
    assert w.dependency == "afterok:1(unfulfilled)"
    (dep,) = w.dependencies
    assert (dep.job_id, dep.kind, dep.status) == ("1", "afterok", "unfulfilled")
    assert (dep.state, dep.reason) == ("PENDING", "JobHeldUser")


def test_a_job_in_a_reservation_names_it_and_its_times() -> None:
    w, _ = explain("basic_reservation")
    assert w.category is WaitCategory.RESERVATION and w.reservation == "ddptui-later"
    (resv,) = w.reservations
    assert resv.name == "ddptui-later" and resv.state == "INACTIVE" and resv.nodes == "n1"
    assert resv.start < resv.end and resv.start.startswith("20")


def test_maintenance_on_the_nodes_is_a_reservation_with_the_maintenance_named() -> None:
    w, _ = explain("basic_maintenance")
    assert w.reason == "ReqNodeNotAvail, Reserved for maintenance"  # scontrol wrote _ for spaces
    assert w.category is WaitCategory.RESERVATION and w.reservation == ""
    (resv,) = w.reservations
    assert resv.name == "ddptui-maint" and "MAINT" in resv.flags and resv.state == "ACTIVE"
    assert w.estimated_start.startswith("20")


def test_a_partition_too_small_never_starts_it_and_says_which_limit() -> None:
    w, _ = explain("basic_partition_node_limit")
    assert w.category is WaitCategory.PARTITION and w.needs_action
    (part,) = w.partitions
    assert part.name == "small" and part.state == "UP"
    assert part.problems == ("the job asks for 2 nodes, MaxNodes is 1",)


def test_a_partition_down_says_so() -> None:
    w, _ = explain("basic_partition_down")
    assert w.category is WaitCategory.PARTITION and not w.needs_action
    (part,) = w.partitions
    assert part.problems == ("it is DOWN",)


def test_a_running_job_costs_one_command_and_has_no_category() -> None:
    w, rec = explain("basic_running")
    assert (w.state, w.category, w.unavailable) == ("RUNNING", None, ())
    assert len(rec.asked) == 1 and len(rec.asked[0]) == 1


def test_a_job_the_controller_does_not_know_is_unknown_with_slurms_words() -> None:
    w, _ = explain("basic_unknown")
    assert w.state == "UNKNOWN" and w.category is None
    assert _unavailable(w) == {"job": "slurm_load_jobs error: Invalid job id specified"}


def test_priority_factors_per_partition_add_up_to_the_total() -> None:
    w, _ = explain("multifactor_priority")
    assert w.category is WaitCategory.PRIORITY
    assert [p.partition for p in w.priority] == ["debug", "small"]
    for p in w.priority:
        tres = sum(float(t.partition("=")[2]) for t in p.tres.split(","))
        parts = p.age + p.fair_share + p.job_size + p.partition_factor + p.qos + p.site
        assert parts + p.assoc + tres - p.nice == p.total, p
    assert [p.total for p in w.priority] == [1025, 1033]
    (share,) = w.fair_share  # the job's account's line only
    assert (share.account, share.user, share.fair_share) == ("acct3", "root", 0.0)
    assert w.estimated_start == "2026-11-28T06:30:00 (Priority)"
    assert w.unavailable == ()


def test_an_association_limit_is_named_with_its_value_and_use() -> None:
    w, _ = explain("multifactor_assoc_limit")
    assert w.category is WaitCategory.LIMIT and w.reason == "AssocMaxJobsLimit"
    (limit,) = w.limits
    assert (limit.scope, limit.name, limit.limit, limit.used) == (
        "association acct2/root",
        "MaxJobs",
        "1",
        "1",
    )


def test_a_qos_limit_is_named_with_its_value_and_use() -> None:
    w, rec = explain("multifactor_qos_limit")
    (limit,) = w.limits
    assert (limit.scope, limit.name, limit.limit, limit.used) == ("QOS lim", "MaxJobsPU", "1", "1")
    # The same record holds the per-user GPU limit, in the user's block (uid 0).
    text = rec.text("scontrol", "qos=lim")
    gpus = qos_limit(text, LimitRef("qos", "MaxTRESPU", "gres/gpu"), uid="0", account="acct2")
    assert gpus is not None and (gpus.limit, gpus.used) == ("2", "1")
    nobody = qos_limit(text, LimitRef("qos", "MaxJobsPU"), uid="1000", account="acct2")
    assert nobody is not None and nobody.limit == ""


def test_an_association_tres_limit_is_read_from_the_users_record() -> None:
    rec = Recorded("multifactor_assoc_limit")
    text = rec.text("scontrol", "flags=assoc")
    ref = limit_ref("AssocGrpCpuLimit")
    assert ref == LimitRef("assoc", "GrpTRES", "cpu")
    found = assoc_limit(text, ref, user="root")
    assert found is not None and (found.scope, found.limit) == ("association acct2/root", "2")


# Codes that name no one limit: Slurm's own reason is as far as it goes.
NO_ONE_LIMIT = {"QOSResourceLimit", "QOSJobLimit", "QOSUsageThreshold"}


def test_every_qos_and_association_code_names_its_limit() -> None:
    codes = [c for c in _BY_CATEGORY[WaitCategory.LIMIT] if c.startswith(("QOS", "Assoc"))]
    for code in codes:
        ref = limit_ref(code)
        assert (ref is None) == (code in NO_ONE_LIMIT), code
    assert limit_ref("QOSMaxGRESPerUser") == LimitRef("qos", "MaxTRESPU", "gres/gpu")
    assert limit_ref("QOSMaxJobsPerUserLimit") == LimitRef("qos", "MaxJobsPU")
    assert limit_ref("QOSMaxSubmitJobPerUserLimit") == LimitRef("qos", "MaxSubmitJobsPU")
    assert limit_ref("QOSMaxWallDurationPerJobLimit") == LimitRef("qos", "MaxWallPJ")
    assert limit_ref("QOSMaxNodePerJobLimit") == LimitRef("qos", "MaxTRESPJ", "node")
    assert limit_ref("AssocMaxJobsLimit") == LimitRef("assoc", "MaxJobs")
    assert limit_ref("AssocGrpGRESMinutes") == LimitRef("assoc", "GrpTRESMins", "gres/gpu")
    assert limit_ref("QOSGrpCPURunMinutesLimit") == LimitRef("qos", "GrpTRESRunMins", "cpu")


def test_dependencies_as_scontrol_writes_them() -> None:
    deps = parse_dependency("afterok:12(unfulfilled),afterany:13_2+10(failed)")
    assert [(d.job_id, d.kind, d.status) for d in deps] == [
        ("12", "afterok", "unfulfilled"),
        ("13_2", "afterany", "failed"),
    ]
    (single,) = parse_dependency("singleton(unfulfilled)")
    assert (single.job_id, single.kind) == ("", "singleton")
    assert parse_dependency("(null)") == []


def test_sprio_lines_of_other_jobs_and_no_line_are_left_out() -> None:
    text = Recorded("multifactor_priority").text("sprio")
    assert len(parse_sprio(text, "6")) == 2
    assert parse_sprio(text, "7") == []
    assert parse_sprio("Unable to find jobs matching user/id(s) specified\n", "6") == []


def test_a_command_that_is_missing_or_a_batch_that_fails_leaves_the_rest() -> None:
    rec = Recorded("multifactor_priority")

    def no_sprio(argvs: Sequence[Sequence[str]]) -> list[CommandResult]:
        out = rec.run(argvs)
        # FAKE: env's own answer when sprio is not on the PATH (the integration test has
        # the real one).
        missing = CommandResult(out[0].argv, 127, "", "env: 'sprio': No such file or directory")
        return [missing if _key(a)[0] == "sprio" else r for a, r in zip(argvs, out, strict=True)]

    w = explain_wait(rec.job_id, no_sprio)
    assert _unavailable(w) == {
        "priority": "sprio: command not found (is Slurm installed, or a module loaded?)"
    }
    assert w.fair_share and w.estimated_start and w.category is WaitCategory.PRIORITY

    calls: list[int] = []

    def second_fails(argvs: Sequence[Sequence[str]]) -> list[CommandResult]:
        calls.append(len(argvs))
        if len(calls) == 2:  # FAKE: the connection drops before the second round trip
            raise SchedulerUnavailable("Slurm did not answer within 30 s")
        return rec.run(argvs)

    w = explain_wait(rec.job_id, second_fails)
    assert w.category is WaitCategory.PRIORITY
    assert set(_unavailable(w)) == {"estimated_start", "priority", "fair_share"}
    assert set(_unavailable(w).values()) == {"Slurm did not answer within 30 s"}


def test_a_job_id_that_could_be_an_option_is_refused() -> None:
    from ddp_tui.remote.backends.scheduler import SchedulerError

    with pytest.raises(SchedulerError, match="not a Slurm job id"):
        sprio_argv("-1")


def test_a_name_that_cannot_go_in_an_argv_loses_that_part_only() -> None:
    rec = Recorded("multifactor_qos_limit")
    key = next(k for k in rec.answers if k[:4] == ("scontrol", "--oneliner", "show", "job"))
    shown = rec.answers[key]
    # FAKE: a QOS name that reads as an option (no Slurm prints one); the argv refuses it.
    odd = shown.stdout.replace(" QOS=lim ", " QOS=-lim ")
    rec.answers[key] = CommandResult(shown.argv, shown.returncode, odd, shown.stderr)
    w = explain_wait(rec.job_id, rec.run)
    assert _unavailable(w) == {"limit": "not a Slurm QOS name: '-lim'"}
    assert w.priority and w.fair_share and w.category is WaitCategory.LIMIT
