"""Rules for a job that never got going: no such Python, a missing module, and the
trainer's own refusals (a bad argument, a dataset that is not where it looked).

The trainer's wording is its own (``ddp_tui.trainer.errors.UsageError``, printed by
``trainer/__main__.py`` as ``ddp-train: error: argument --x: message``, exit code 2), so
these patterns follow it; argparse's own errors look alike after a ``usage:`` line.
"""

from __future__ import annotations

import os
import re

from ddp_tui.diagnosis.logscan import Hit, Scan, clue
from ddp_tui.diagnosis.model import Diagnosis
from ddp_tui.diagnosis.rules_base import make
from ddp_tui.diagnosis.tracebacks import traceback_of, user_frame

# bash: "/var/spool/slurmd/job00012/slurm_script: line 95: /opt/env/bin/python3: No such
# file or directory" (or "...: python9: command not found"); srun: "slurmstepd: error:
# execve(): /opt/env/bin/python3: No such file or directory".
_NO_PYTHON = clue(
    r"(?:: line \d+: |execve\(\): )(?P<path>\S*python\S*): "
    r"(?:No such file or directory|command not found)\s*$",
    "No such file or directory",
    "command not found",
)
_NO_MODULE = clue(r"No module named '?(?P<module>[\w.]+)'?", "No module named")
#: Modules the built-in trainer needs: the job's Python is the wrong one.
_TRAINER_NEEDS = ("torch", "torchvision")

# ddp-train: error: argument --model: simple_cnn needs image input (C,H,W); the data ...
_TRAINER_ERROR = clue(
    r"^ddp-train: error: (?:argument (?P<arg>\S+): )?(?P<msg>.+)$", "ddp-train: error: "
)
_USAGE = clue(r"^usage: (?P<prog>.+?)(?: \[| -|$)", "usage: ")
_ARGPARSE_ERROR = clue(r"^(?P<prog>[^:\n]+): error: (?P<msg>.+)$", ": error: ")
#: Slurm's tools print "<tool>: error: ..." too; they are not argument errors.
_NOT_ARGPARSE = ("srun", "slurmstepd", "sbatch", "salloc", "scontrol", "scancel", "sacct")
#: The trainer's --data-root messages that mean "the data is not there" (trainer/args.py,
#: data.py, images.py, tabular.py, train.py), with the path they name as group "where".
_NOT_THERE = re.compile(
    r"^(?P<where>\S+) does not exist$"
    r"|not found: looked in (?P<where2>\S+)"
    r"|no class folders with images under (?P<where3>\S+)"
    r"|^(?P<where4>\S+) holds no train\.csv"
    r"|is required for --dataset"
    r"|the training set of \S+ is empty"
    r"|download failed"
)


# /usr/bin/python3: Error while finding module specification for 'torch.distributed.run'
#   (ModuleNotFoundError: No module named 'torch')
_RUNPY = re.compile(r"^(?P<python>\S+): Error while finding module specification")


def _python_used(scan: Scan, hit: Hit) -> str:
    """The interpreter the job ran: as its own error names it, as the job script's
    ``python=`` line says, else the spec's."""
    runpy = _RUNPY.match(hit.line.text)
    if runpy is not None:
        return runpy.group("python")
    return scan.job_says("python") or scan.facts.python or "python3"


def missing_python(scan: Scan) -> Diagnosis | None:
    """The job's ``python`` does not exist on the node."""
    hit = scan.find(_NO_PYTHON)
    if hit is None:
        said = scan.job_says("python")
        if not said.endswith("(not found)"):
            return None
        hit = scan.find(clue(r"^\[ddp-tui\] python=", "[ddp-tui] python="))
        path = said.removesuffix("(not found)").strip()
    else:
        path = hit.group("path")
    return make(
        "missing-python",
        f"no {os.path.basename(path) or 'python'} on the node",
        f"The job's Python, {path}, does not exist on the node (or is not on its PATH).",
        "Set python in the profile (or the spec) to an interpreter that exists on the "
        "compute nodes, or make env_setup load it (module load, conda activate, or "
        "source a venv's bin/activate).",
        [hit],
    )


def missing_module(scan: Scan) -> Diagnosis | None:
    """``No module named 'torch'`` and the like, from the interpreter or an import."""
    hit = scan.find(_NO_MODULE)
    if hit is None:
        return None
    module = hit.group("module")
    top = module.split(".", 1)[0]
    python = _python_used(scan, hit)
    tb = traceback_of(scan, hit.line)
    frame = user_frame(tb, scan.facts) if tb is not None else None
    where = f", imported at {frame.where}" if frame is not None else ""
    if top in _TRAINER_NEEDS:
        cause = (
            f"The job's Python ({python}) has no module named {module!r}: it is not the "
            "interpreter with PyTorch installed."
        )
        advice = (
            "Set python in the profile to the interpreter that has torch and torchvision, "
            "or make env_setup activate its environment (module load, conda activate, "
            f"source .../bin/activate); or install them there: {python} -m pip install "
            "torch torchvision."
        )
    else:
        cause = f"The job's Python ({python}) has no module named {module!r}{where}."
        advice = (
            f"Install the package that provides {top} into the job's Python ({python} -m pip "
            f"install ...), or fix python/env_setup in the profile so the job runs the "
            f"environment that has it. If {top} is your own code, put it on PYTHONPATH or in "
            "the project directory."
        )
    return make(
        "missing-module", f"no module {module}", cause, advice, [hit, frame.src if frame else None]
    )


def _argparse_error(scan: Scan) -> Hit | None:
    """An ``error:`` line from a parser that printed its ``usage:`` line before it."""
    usages = [h.group("prog").strip() for h in scan.find_all(_USAGE, limit=20)]
    if not usages:
        return None
    for hit in scan.find_all(_ARGPARSE_ERROR, limit=50):
        prog = hit.group("prog").strip()
        if prog.split()[0] in _NOT_ARGPARSE:
            continue
        if any(usage.startswith(prog) or prog.startswith(usage) for usage in usages):
            return hit
    return None


def trainer_usage(scan: Scan) -> Diagnosis | None:
    """The trainer refused an argument (exit code 2), or the data was not where it looked."""
    hit = scan.find(_TRAINER_ERROR) or _argparse_error(scan)
    if hit is None:
        return None
    argument = hit.group("arg") if "arg" in hit.match.groupdict() else ""
    message = hit.group("msg").strip()
    not_there = _NOT_THERE.search(message) if argument == "--data-root" else None
    if not_there is not None:
        groups = ("where", "where2", "where3", "where4")
        where = next((not_there[g] for g in groups if not_there[g]), scan.facts.data_root)
        looked = f" It looked in {where}." if where and where not in message else ""
        dataset = f" for dataset {scan.facts.dataset}" if scan.facts.dataset else ""
        return make(
            "missing-dataset",
            "dataset not found",
            f"The trainer found no data{dataset}: {message}.{looked}",
            "Set data_root to a path that exists on the compute nodes (a filesystem they "
            "share), with the layout the dataset needs; for a torchvision dataset, turn on "
            "download (the nodes need internet access) or fetch it beforehand on a login node.",
            [hit],
        )
    named = argument or "argument"
    advice = (
        f"Change {named} in the spec (Compose) and submit again; the message says what it accepts."
    )
    if "needs image input" in message:
        advice = (
            "Choose a model that takes this data: mlp for tabular or flat data, simple_cnn or "
            "a torchvision model for images (C,H,W)."
        )
    return make(
        "bad-argument",
        f"bad argument {argument}" if argument else "bad argument",
        f"The trainer refused {named}: {message}" if argument else f"Bad argument: {message}",
        advice,
        [hit],
    )
