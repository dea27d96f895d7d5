"""The rules on a user's script that ended COMPLETED: ranks that trained alone (run.json's
``observed``), and a script in which no epoch was recognised (with a regex built from its log)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ddp_tui.diagnosis.classifier import classify_strict
from ddp_tui.diagnosis.model import LogTail, RunFacts
from ddp_tui.diagnosis.regex_hint import pattern_for, suggest_regex
from ddp_tui.scriptrun.presets import UserRegex
from ddp_tui.scriptrun.records import EpochRecord, Record

OUT = "\n".join(
    [
        "[ddp-tui] training job 7 on n1",
        *(f"[GPU0] Epoch {e} | Batchsize: 32 | Steps: 8" for e in range(3)),
        "[ddp-tui] launcher exited with status 0",
    ]
)


def script_facts(run_json: dict[str, Any], out: str = OUT) -> RunFacts:
    return RunFacts(
        state="COMPLETED",
        exit_code=0,
        entry="script",
        world_size=2,
        run_json={"epochs": 3, "metrics_source": "auto", **run_json},
        out=LogTail("slurm-7.out", out),
    )


@pytest.mark.parametrize(
    ("observed", "words"),
    [
        ({"group": "none", "reason": "no process group was formed"}, "init_process_group"),
        (
            {"group": "alone", "reason": "Accelerate ran each process on its own",
             "frameworks": {"accelerate": {"num_processes": 1}}},
            "ACCELERATE_USE_CPU=1",
        ),
        (
            {"group": "split", "reason": "each process formed a group of its own",
             "frameworks": {"lightning": {}}},
            "devices x num_nodes",
        ),
    ],
)  # fmt: skip
def test_ranks_that_trained_alone_are_named_with_their_frameworks_fix(
    observed: dict[str, Any], words: str
) -> None:
    facts = script_facts({"epochs_completed": 3, "observed": {"launched": 2, **observed}})
    found = classify_strict(facts)
    assert found is not None and found.code == "trained-alone" and found.needs_fix
    assert observed["reason"] in found.cause and words in found.advice
    assert found.evidence[0].file == "run.json"


def test_a_group_formed_by_every_rank_completes() -> None:
    observed = {"group": "formed", "launched": 2, "reason": "2 process(es) formed one group"}
    found = classify_strict(script_facts({"epochs_completed": 3, "observed": observed}))
    assert found is not None and found.code == "completed"


def test_one_process_alone_is_not_a_problem() -> None:
    observed = {"group": "none", "launched": 1, "reason": "no process group was formed"}
    found = classify_strict(script_facts({"epochs_completed": 3, "observed": observed}))
    assert found is not None and found.code == "completed"


def test_no_epochs_shows_the_last_lines_and_a_regex_that_finds_them() -> None:
    found = classify_strict(script_facts({"epochs_completed": 0}))
    assert found is not None and found.code == "no-epochs" and found.short == "no epochs recognised"
    assert [e.text for e in found.evidence] == [
        f"[GPU0] Epoch {e} | Batchsize: 32 | Steps: 8" for e in range(3)
    ]  # the job script's own "[ddp-tui]" lines are not the script's
    hint = re.search(r"--metrics '(regex:[^']+)'", found.advice)
    assert hint is not None, found.advice
    # The suggestion, run through the wrapper's own regex source, gives the three epochs.
    source = UserRegex(hint.group(1).removeprefix("regex:"))
    out: list[Record] = []
    data = OUT.encode() + b"\n"
    source.scan(data, 0, len(data), out)
    assert [r.epoch for r in out if isinstance(r, EpochRecord)] == [0, 1, 2]


def test_a_script_with_epochs_or_without_output_parsing_is_not_no_epochs() -> None:
    assert classify_strict(script_facts({"epochs_completed": 2})).code == "completed"  # type: ignore[union-attr]
    none = script_facts({"epochs_completed": 0, "metrics_source": "none"})
    assert classify_strict(none).code == "completed"  # type: ignore[union-attr]


def test_the_pattern_names_numbers_by_the_word_before_them() -> None:
    line = "iteration 4 mean-loss=0.25 (acc 91.2%) lr: 1e-3"
    pattern = pattern_for(line)
    m = re.search(pattern, line)
    assert m is not None
    assert m.groupdict() == {"train_loss": "0.25", "train_acc": "91.2%", "lr": "1e-3"}


def test_the_suggestion_prefers_the_line_seen_once_per_epoch() -> None:
    lines = ["step 1 loss 0.5"] * 12 + ["Validation: acc 0.8 loss 0.4"] * 3 + ["done"]
    assert suggest_regex(lines, 3) == "regex:" + pattern_for("Validation: acc 0.8 loss 0.4")
    assert suggest_regex(["just words", "no numbers"], 3) is None


def test_one_process_that_never_syncs_its_gradients_has_nothing_to_sync_with() -> None:
    sync = {"state": "never", "reason": "no DistributedDataParallel or FSDP wrap"}
    observed = {"group": "formed", "launched": 1, "world_size": 1, "sync": sync,
                "reason": "1 process(es) formed one gloo group"}  # fmt: skip
    found = classify_strict(script_facts({"epochs_completed": 3, "observed": observed}))
    assert found is not None and found.code == "completed"
    found = classify_strict(
        script_facts({"epochs_completed": 3, "observed": {**observed, "world_size": 2}})
    )
    assert found is not None and found.code == "no-grad-sync" and found.needs_fix
