"""The classifier over a table of real logs, recorded from real runs on this machine.

Each file under ``tests/diagnosis/logs/`` is the unedited stderr of a real command (see
``logs/README.md`` for the command that produced it): the trainer with bad arguments, a
Python without torch, torchrun with a script that raises, segfaults or aborts on rank 1,
rendezvous that time out, a port in use. Excerpts of failures that cannot be produced here
(CUDA OOM, NCCL, slurmstepd's memory and time-limit lines) are in test_classify_fakes.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ddp_tui.diagnosis import Diagnosis, LogTail, RunFacts, classify
from ddp_tui.diagnosis.classifier import classify_strict

LOGS = Path(__file__).parent / "logs"
SCRIPT = "/tmp/h1cap/proj/train.py"  # the script the torchrun logs ran (logs/README.md)


def facts_for(name: str, **overrides: Any) -> RunFacts:
    """A FAILED run whose ``.err`` is the recorded log ``name``."""
    data = (LOGS / name).read_bytes()
    base: dict[str, Any] = {
        "state": "FAILED",
        "exit_code": 1,
        "err": LogTail.of("slurm-12.err", data, whole=True),
    }
    base.update(overrides)
    return RunFacts(**base)


def diagnose(facts: RunFacts) -> Diagnosis:
    found = classify_strict(facts)
    assert found is not None, "no diagnosis"
    assert classify(facts) == found
    assert found.evidence, found
    assert len(found.short) <= 32, found.short
    assert found.cause and found.advice
    return found


@dataclass(frozen=True)
class Case:
    log: str
    code: str
    in_cause: tuple[str, ...] = ()
    evidence: str = ""  # a piece of text that one evidence line holds
    facts: dict[str, Any] = field(default_factory=dict)


SCRIPT_RUN = {"entry": "script", "script": SCRIPT}

TABLE = [
    # The first failure: the job's python3 has no torch (srun launcher: the trainer's
    # own traceback), and the same under torchrun (runpy cannot find torch.distributed.run).
    Case("trainer_no_torch.err", "missing-module", ("'torch'", "python3"), "No module named"),
    Case(
        "torchrun_no_torch.err",
        "missing-module",
        ("/root/.pyenv/versions/3.11.7/bin/python3", "'torch'"),
        "Error while finding module specification",
    ),
    Case(
        "torchrun_script_missing_module.err",
        "missing-module",
        ("wandb_missing_pkg", "train.py:14"),
        "[rank1]: ModuleNotFoundError",
        SCRIPT_RUN,
    ),
    Case(
        "job_python_not_found.err",
        "missing-python",
        ("/opt/envs/none/bin/python3",),
        "No such file or directory",
    ),
    # The second failure, ten lines into torchrun's summary.
    Case(
        "torchrun_simple_cnn_on_tabular.err",
        "bad-argument",
        ("--model", "simple_cnn needs image input (C,H,W); the data has shape (4,)"),
        "ddp-train: error: argument --model",
    ),
    Case("trainer_bad_epochs.err", "bad-argument", ("--epochs", "at least 1"), "--epochs"),
    Case("trainer_argparse_choice.err", "bad-argument", ("--optimizer", "'adam'"), "invalid"),
    Case("script_argparse_error.err", "bad-argument", ("--lr",), "conn.py: error"),
    Case(
        "trainer_data_root_missing.err", "missing-dataset", ("/nonexist/data.csv",), "--data-root"
    ),
    Case("trainer_imagefolder_empty.err", "missing-dataset", ("/tmp/h1cap",), "no class folders"),
    # Rendezvous: rank 0 alone (its peer never started), a rank whose master never started,
    # torchrun's c10d rendezvous with one of two nodes.
    Case(
        "trainer_rendezvous_rank0_alone.err",
        "rendezvous-timeout",
        ("127.0.0.1:29778", "1 of 2"),
        "rendezvous failed: rank 0 of 2",
    ),
    Case(
        "trainer_rendezvous_no_master.err",
        "rendezvous-timeout",
        ("127.0.0.1:29777", "Rank 1 of 2"),
        "rendezvous failed: rank 1 of 2",
    ),
    Case(
        "torchrun_c10d_rendezvous_timeout.err",
        "rendezvous-timeout",
        (),
        "RendezvousTimeoutError",
    ),
    Case("trainer_port_in_use.err", "address-in-use", ("29779",), "EADDRINUSE"),
    Case("torchrun_port_in_use.err", "address-in-use", ("29779",), "EADDRINUSE"),
    Case(
        "script_connection_refused.err", "connection-refused", (), "[Errno 111] Connection refused"
    ),
    # Rank 1 fails first; rank 0's gloo errors are consequences and must not win.
    Case(
        "torchrun_keyerror_rank1.err",
        "python-exception",
        ("Rank 1", "KeyError", "train.py:5", "load()"),
        "[rank1]: KeyError: 'batch_size'",
        SCRIPT_RUN,
    ),
    Case("torchrun_segfault_rank1.err", "signal", ("Rank 1", "SIGSEGV"), "(SIGSEGV)"),
    Case("torchrun_abort_rank1.err", "signal", ("Rank 1", "SIGABRT"), "(SIGABRT)"),
    # A finished 2-rank gloo script that died at exit (the CI run of a tutorial-style
    # script that still called destroy_process_group()): named as gloo's teardown abort.
    Case(
        "torchrun_gloo_teardown_abort.err",
        "signal",
        ("Rank 1", "gloo", "at exit"),
        "terminate called without an active exception",
        SCRIPT_RUN,
    ),
    Case("bash_killed_and_segfault.err", "signal", ("SIGKILL",), "Killed"),
]


@pytest.mark.parametrize("case", TABLE, ids=[c.log.removesuffix(".err") for c in TABLE])
def test_recorded_log_is_diagnosed(case: Case) -> None:
    found = diagnose(facts_for(case.log, **case.facts))
    assert found.code == case.code, found
    for text in case.in_cause:
        assert text in found.cause, (text, found.cause)
    assert any(case.evidence in e.text for e in found.evidence), found.evidence
    assert all(e.file == "slurm-12.err" and e.line for e in found.evidence), found.evidence


def test_evidence_points_at_the_line_in_the_file() -> None:
    found = diagnose(facts_for("torchrun_keyerror_rank1.err", **SCRIPT_RUN))
    lines = (LOGS / "torchrun_keyerror_rank1.err").read_text().splitlines()
    for e in found.evidence:
        assert e.line is not None and lines[e.line - 1].strip() == e.text
    assert found.evidence[0].label == f"slurm-12.err:{found.evidence[0].line}"


def test_a_tail_that_starts_mid_file_has_no_line_numbers() -> None:
    data = (LOGS / "trainer_bad_epochs.err").read_bytes()
    facts = RunFacts(
        state="FAILED", exit_code=2, err=LogTail.of("x.err", b"partial line\n" + data, whole=False)
    )
    found = diagnose(facts)
    assert found.code == "bad-argument"
    assert [e.line for e in found.evidence] == [None]
    assert found.evidence[0].label == "x.err (tail)"


def test_the_job_scripts_rendezvous_line_names_the_address() -> None:
    # The .out of a 2-node job: these lines are what _job.sbatch.j2 echoes.
    out = (
        "[ddp-tui] training job 12 on n1 at 2026-11-24T11:00:00Z\n"
        "[ddp-tui] nodes=2 nodelist=n[1-2]\n"
        "[ddp-tui] rendezvous=n1:20012\n"
        "[ddp-tui] python=/usr/bin/python3\n"
    )
    facts = facts_for(
        "torchrun_c10d_rendezvous_timeout.err",
        out=LogTail("slurm-12.out", out),
        nodes=2,
        hosts=("n1",),
    )
    found = diagnose(facts)
    assert found.code == "rendezvous-timeout"
    assert "n1:20012" in found.cause and "Only n1 reported (1 of 2 nodes)" in found.cause


def test_run_json_names_the_rendezvous_when_the_log_does_not() -> None:
    facts = facts_for("torchrun_c10d_rendezvous_timeout.err", run_json={"rendezvous": "n3:29500"})
    assert "n3:29500" in diagnose(facts).cause


def test_the_python_the_job_script_found_is_named() -> None:
    out = "[ddp-tui] python=/opt/conda/bin/python3\n"
    facts = facts_for("trainer_no_torch.err", out=LogTail("slurm-12.out", out))
    assert "/opt/conda/bin/python3" in diagnose(facts).cause


def test_the_job_scripts_not_found_python_line_is_enough() -> None:
    out = "[ddp-tui] python=python9 (not found)\n"
    found = diagnose(RunFacts(state="FAILED", exit_code=127, out=LogTail("s.out", out)))
    assert found.code == "missing-python" and "python9" in found.cause


def test_the_launchers_exit_status_names_the_signal() -> None:
    out = "[ddp-tui] launcher exited with status 137 at 2026-11-24T11:00:00Z\n"
    found = diagnose(RunFacts(state="FAILED", exit_code=137, out=LogTail("s.out", out)))
    assert found.code == "signal" and "SIGKILL" in found.cause
    assert "OOM" in found.advice


def test_a_python_exception_without_a_user_frame_still_names_the_exception() -> None:
    err = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads\n'
        "    return _default_decoder.decode(s)\n"
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n"
    )
    found = diagnose(RunFacts(state="FAILED", exit_code=1, err=LogTail("e.err", err)))
    assert found.code == "python-exception"
    assert found.short.startswith("JSONDecodeError: Expecting")
    assert "e.err" in found.advice


def test_a_chained_exception_reports_what_ended_the_process() -> None:
    err = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 3, in <module>\n'
        "    x = {}['a']\n"
        "KeyError: 'a'\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 5, in <module>\n'
        "    raise RuntimeError('no config')\n"
        "RuntimeError: no config\n"
    )
    found = diagnose(
        RunFacts(
            state="FAILED",
            exit_code=1,
            err=LogTail("e.err", err),
            entry="script",
            script="/home/u/proj/train.py",
        )
    )
    assert found.code == "python-exception"
    assert "RuntimeError: no config" in found.cause and "train.py:5" in found.cause


def test_the_port_in_use_is_not_a_source_location_or_a_time_of_day() -> None:
    # c10d's warning format ("[W<date> <time> socket.cpp:<line>] [c10d] ..."), errno 98.
    err = (
        "[W1124 11:00:00.000 socket.cpp:401] [c10d] The server socket cannot be initialized "
        "on [::]:29500 (errno: 98 - Address already in use).\n"
    )
    found = diagnose(RunFacts(state="FAILED", exit_code=1, err=LogTail("e.err", err)))
    assert found.code == "address-in-use" and found.short == "port 29500 in use"
