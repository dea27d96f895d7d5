"""Rules on what the observation layer saw inside a user's script (run.json's ``observed``).

A multi-rank job whose processes never trained together ends COMPLETED with exit code 0, and its
logs look fine: every rank trained on all the data, alone. Only the observed process group tells,
so this rule runs before :func:`.rules_state.completed`.
"""

from __future__ import annotations

from typing import Any

from ddp_tui.diagnosis.logscan import Scan
from ddp_tui.diagnosis.model import Diagnosis, Evidence
from ddp_tui.diagnosis.rules_base import make
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
