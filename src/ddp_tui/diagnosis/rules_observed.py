"""Rules for a user's script that ended well by the scheduler's word but not by its own run files.

- A multi-rank job whose processes never trained together ends COMPLETED with exit code 0, and
  its logs look fine: every rank trained on all the data, alone. Only the process group the
  observation layer saw (run.json's ``observed``) tells.
- Ranks that formed one group but never synchronised their gradients (no DDP or FSDP wrap, no
  gradient all-reduce): the group is real, the training is not joint.
- A script that ran to the end but in which no epoch was recognised: nothing observed, nothing
  parsed. Its last lines are the evidence, and a ``--metrics regex:...`` built from them the advice.

All run before :func:`.rules_state.completed`.
"""

from __future__ import annotations

import shlex
from typing import Any

from ddp_tui.diagnosis.logscan import Scan
from ddp_tui.diagnosis.model import Diagnosis, Evidence
from ddp_tui.diagnosis.regex_hint import suggest_regex
from ddp_tui.diagnosis.rules_base import make, state_of
from ddp_tui.scriptrun.observed import ALONE

_NO_GROUP = (
    "Call torch.distributed.init_process_group() before training (it reads RANK, WORLD_SIZE, "
    "MASTER_ADDR and MASTER_PORT from the environment ddp-tui sets), wrap the model in "
    "DistributedDataParallel and give the DataLoader a DistributedSampler."
)
_ADVICE = {
    "accelerate": (
        "Accelerate forms no process group on a node without GPUs unless the script gets --cpu "
        "or the job sets ACCELERATE_USE_CPU=1 (ddp-tui exports it for --device cpu jobs; "
        "check that the environment setup does not unset it). On GPU nodes, check that every "
        "process sees a GPU."
    ),
    "lightning": (
        "Lightning forms its group from Trainer(devices=..., num_nodes=...): make devices the "
        "GPUs (or processes) per node and num_nodes the nodes, so that devices x num_nodes "
        "equals the job's ranks, with strategy='ddp'."
    ),
    "transformers": (
        "The Hugging Face Trainer joins the group the launcher's environment describes; check "
        "that the script does not run each process on its own (for example by clearing RANK "
        "or WORLD_SIZE, or with a single-process device setting)."
    ),
}


def _advice(observed: dict[str, Any]) -> str:
    frameworks = observed.get("frameworks")
    names = list(frameworks) if isinstance(frameworks, dict) else []
    for name in ("accelerate", "lightning", "transformers"):
        if name in names:
            return _ADVICE[name]
    return _NO_GROUP


def trained_alone(scan: Scan) -> Diagnosis | None:
    """A job of several ranks whose processes did not form one group and train in it."""
    run = scan.facts.run_json
    observed = run.get("observed") if isinstance(run, dict) else None
    if not isinstance(observed, dict) or observed.get("group") not in ALONE:
        return None
    launched = observed.get("launched")
    if not isinstance(launched, int) or launched < 2:
        return None
    reason = str(observed.get("reason") or "the ranks did not form one process group")
    return make(
        "trained-alone",
        "ranks trained alone",
        f"The {launched} ranks did not train together: {reason}. Each trained on its own, "
        f"so the job did the work of one process, {launched} times over.",
        _advice(observed),
        [Evidence("run.json", None, f"observed.group = {observed.get('group')}: {reason}")],
    )


_SYNC_ADVICE = (
    "Wrap the model in DistributedDataParallel after init_process_group() "
    "(model = DistributedDataParallel(model, device_ids=[local_rank]) on GPUs, without "
    "device_ids on the CPU), or all-reduce and average every gradient between backward() and "
    "optimizer.step(). Give the DataLoader a DistributedSampler so that each rank gets its own "
    "share of the data."
)


def no_grad_sync(scan: Scan) -> Diagnosis | None:
    """Ranks that formed one group and each stepped an optimizer, but never synchronised their
    gradients: no DDP or FSDP wrap, no gradient all-reduce (run.json's ``observed.sync``)."""
    run = scan.facts.run_json
    observed = run.get("observed") if isinstance(run, dict) else None
    if not isinstance(observed, dict) or observed.get("group") != "formed":
        return None
    sync = observed.get("sync")
    world = observed.get("world_size")
    if not isinstance(sync, dict) or sync.get("state") != "never":
        return None
    if not isinstance(world, int) or world < 2:
        return None
    evidence = [Evidence("run.json", None, f"observed.sync = never: {sync.get('reason')}")]
    divergence = observed.get("divergence")
    diverged = ""
    if isinstance(divergence, dict) and divergence.get("evidence"):
        evidence.append(
            Evidence("run.json", None, f"observed.divergence: {divergence['evidence']}")
        )
        if divergence.get("diverged"):
            diverged = " Their weights diverged, as the evidence shows."
    return make(
        "no-grad-sync",
        "gradients never synchronised",
        f"The {world} ranks formed one {observed.get('backend')} group but never synchronised "
        f"their gradients: {sync.get('reason')}. Each rank trained its own copy of the model, "
        f"so the job trained {world} different models instead of one.{diverged}",
        _SYNC_ADVICE,
        evidence,
    )


#: How the job script's own lines start (sbatch_templates/_job.sbatch.j2).
JOB_SCRIPT_PREFIX = "[ddp-tui] "
#: The last lines of output shown as evidence when no epoch was recognised.
LAST_LINES = 3


def no_epochs(scan: Scan) -> Diagnosis | None:
    """A script that completed with no epoch in metrics.csv: nothing recognised its epochs."""
    facts = scan.facts
    run = facts.run_json
    if facts.entry != "script" or state_of(scan) != "COMPLETED" or not isinstance(run, dict):
        return None
    if facts.exit_code not in (0, None) or run.get("epochs_completed") or facts.out is None:
        return None
    if run.get("step_windows"):  # a loop with no epochs: its step windows are the rows
        return None
    if run.get("metrics_source") == "none":
        return None
    # The script's own lines: not blank, not the job script's "[ddp-tui] ..." about itself.
    lines = [
        (n, text)
        for n, text in facts.out.lines()
        if text.strip() and not text.startswith(JOB_SCRIPT_PREFIX)
    ]
    epochs = run.get("epochs")
    hint = suggest_regex((text for _, text in lines), epochs if isinstance(epochs, int) else None)
    advice = (
        "Name the lines that carry the epochs: "
        + (f"--metrics {shlex.quote(hint)} (from the log's repeating lines), or " if hint else "")
        + "a regex:PATTERN with named groups (epoch, train_loss, val_acc, ...), a csv:PATH the "
        "script writes, or report_epoch() from ddp_tui_report."
    )
    return make(
        "no-epochs",
        "no epochs recognised",
        "The script ran to the end, but no epochs were recognised: the observation layer saw "
        "no training loop it knows, and no metrics preset matched the output.",
        advice,
        # A script that printed nothing: run.json's count is the evidence.
        [facts.out.evidence(n, text) for n, text in lines[-LAST_LINES:]]
        or [Evidence("run.json", None, "epochs_completed = 0, and the script printed nothing")],
    )
