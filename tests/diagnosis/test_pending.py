"""Slurm's pending reasons in words."""

from __future__ import annotations

import pytest

from ddp_tui.diagnosis import pending_reason
from ddp_tui.diagnosis.pending import _WORDS, REASON_CHARS


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("Resources", "waiting for free nodes"),
        ("Priority", "queued behind higher-priority jobs"),
        ("Dependency", "waiting for a job it depends on"),
        ("BeginTime", "waiting for its start time"),
        ("QOSMaxGRESPerUser", "at your QOS's GPU limit"),
        ("QOSMaxJobsPerUserLimit", "at your QOS's running-job limit"),
        ("AssocGrpGRES", "your account's GPU limit is reached"),
        ("PartitionTimeLimit", "over the partition's time limit"),
        ("JobHeldUser", "held by you (release it to run)"),
        ("JobHeldAdmin", "held by an administrator"),
        ("None", "not yet considered by the scheduler"),
        ("(Resources)", "waiting for free nodes"),  # as squeue's default format shows it
        ("requeued", "requeued, waiting to start again"),  # the local scheduler's word
    ],
)
def test_known_codes_in_words(code: str, words: str) -> None:
    assert pending_reason(code) == words


def test_req_node_not_avail_keeps_the_nodes_when_they_fit() -> None:
    assert pending_reason("ReqNodeNotAvail, UnavailableNodes:n[1-2]") == (
        "requested nodes not available: n[1-2]"
    )
    many = "ReqNodeNotAvail, UnavailableNodes:gpu-node[001-099,101-199]"
    assert pending_reason(many) == "requested nodes not available"


def test_an_unknown_code_is_shown_as_it_is() -> None:
    assert pending_reason("SomeNewReason") == "SomeNewReason"
    assert pending_reason("") == ""


def test_every_phrase_fits_the_column_and_differs_from_its_code() -> None:
    for code, words in _WORDS.items():
        assert words and len(words) <= REASON_CHARS, code
        assert words != code
