"""``classify(facts)``: the first rule that recognises the run, in a fixed order.

The order goes from the most specific to the most general:

1. the scheduler's own verdicts (completed, time limit, preemption, node failure, host out
   of memory, cancel, lost), which no log line can overrule, except that a cancel whose log
   says "DUE TO TIME LIMIT" is the time limit;
2. a job that never got going (no such Python, a missing module, a file the code snapshot
   left out, a refused argument or dataset);
3. the causes a rank dies of (a disk it cannot write, out of memory), then a hang the NCCL
   flight recorder's dumps show, a failed job on a full runs root (whose logs could not
   say so), launchers whose own spawned worlds collided, then rendezvous and network
   failures and NCCL's own lines;
4. what most failures end with (a signal, a Python traceback), last.

The conclusions drawn from the observation journals (run.json's ``observed``: ranks that
trained alone, gradients never synchronised, no epochs recognised) come first for a job that
ended cleanly, whose logs show nothing wrong. For a job that failed they come after every
rule that reads its logs: the first real error in any rank's output is what ended it, and
``why`` quotes it.

A log that no rule recognises gives None: "no diagnosis" is better than a wrong one.
"""

from __future__ import annotations

from ddp_tui.diagnosis import (
    rules_crash,
    rules_device,
    rules_disk,
    rules_flight,
    rules_memory,
    rules_network,
    rules_observed,
    rules_setup,
    rules_snapshot,
    rules_spawn,
    rules_state,
)
from ddp_tui.diagnosis.logscan import Scan
from ddp_tui.diagnosis.model import Diagnosis, RunFacts
from ddp_tui.diagnosis.rules_base import ACTIVE_STATES, Rule, state_of

#: From the observation journals and run.json: what the logs of a clean end cannot show.
OBSERVED_RULES: tuple[Rule, ...] = (
    rules_observed.trained_alone,
    rules_observed.no_grad_sync,  # a group that formed, but trained N models
    rules_observed.no_epochs,
)
#: The scheduler's verdicts.
STATE_RULES: tuple[Rule, ...] = (
    rules_state.completed,
    rules_state.time_limit,
    rules_state.preempted,
    rules_state.node_fail,
    rules_memory.host_oom_state,
    rules_state.cancelled,
    rules_state.lost,
)
#: The logs' own errors, the most specific first.
LOG_RULES: tuple[Rule, ...] = (
    rules_setup.missing_python,
    rules_setup.missing_module,
    rules_snapshot.left_out_of_snapshot,  # before the traceback it ends
    rules_setup.trainer_usage,
    rules_disk.disk_full,  # before the network rules: its peers then lose their connections
    rules_memory.cuda_oom,
    rules_memory.host_oom,
    rules_device.cuda_unavailable,  # before its peers' lost connections and its traceback
    rules_flight.collective_hang,  # the dumps name the call and who missed it
    # A full disk keeps the failed rank's own words out of the logs, not its peers' lost
    # connections: before the network rules, after the causes that name themselves.
    rules_disk.disk_full_by_space,
    rules_spawn.spawn_collision,  # before address-in-use: the port is the script's own
    rules_network.address_in_use,
    rules_network.rendezvous,
    rules_network.connection_refused,
    rules_network.nccl_timeout,
    rules_network.nccl_error,
    rules_crash.signal_in_log,
    rules_crash.python_exception,
    rules_crash.signal_from_exit,
)
#: A job that ended cleanly: the journals' conclusions before "completed" (it exits 0).
RULES: tuple[Rule, ...] = OBSERVED_RULES + STATE_RULES + LOG_RULES
#: A job that failed: its first real error before the journals' conclusions.
FAILED_RULES: tuple[Rule, ...] = STATE_RULES + LOG_RULES + OBSERVED_RULES


def ended_cleanly(scan: Scan) -> bool:
    """COMPLETED with exit code 0 (or none given): nothing in the logs ended it."""
    return state_of(scan) == "COMPLETED" and scan.facts.exit_code in (0, None)


def classify_strict(facts: RunFacts) -> Diagnosis | None:
    """:func:`classify` without its safety net: a rule's bug raises (for the tests)."""
    scan = Scan(facts)
    if not state_of(scan) or state_of(scan) in ACTIVE_STATES:
        return None
    for rule in RULES if ended_cleanly(scan) else FAILED_RULES:
        found = rule(scan)
        if found is not None:
            return found
    return None


def classify(facts: RunFacts) -> Diagnosis | None:
    """Why the run ended as it did, with evidence, or None when nothing is recognised.

    Never raises: a diagnosis is advice shown beside the state, and a rule that trips over
    a strange log must not break the Jobs refresh or ``ddp-tui why``.
    """
    try:
        return classify_strict(facts)
    except Exception:  # the safety net described above; the tests call classify_strict
        return None
