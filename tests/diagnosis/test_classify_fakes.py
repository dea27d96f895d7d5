"""FAKE failures: real log text recorded elsewhere, for failures this machine cannot produce.

There is no GPU here (no CUDA out-of-memory, no NCCL), and the Slurm test cluster enforces
no memory limit. Every excerpt below is real output copied verbatim from the public issue
named beside it (only the lines around it are left out); the tests feed it to the classifier
as the ``.err`` of a FAILED run, as the facade would.
"""

from __future__ import annotations

import pytest

from ddp_tui.diagnosis import Diagnosis, LogTail, RunFacts
from ddp_tui.diagnosis.classifier import classify_strict

# github.com/lllyasviel/FramePack/issues/369 (torch >= 2.5 names it torch.OutOfMemoryError)
CUDA_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.29 GiB. GPU 0 has a "
    "total capacity of 10.74 GiB of which 3.69 GiB is free. Including non-PyTorch memory, this "
    "process has 6.68 GiB memory in use. Of the allocated memory 6.10 GiB is allocated by "
    "PyTorch, and 396.58 MiB is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n"
)
# github.com/liucongg/ChatGLM-Finetuning/issues/28 (the torch 2.0 wording)
CUDA_OOM_OLD = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 128.00 MiB (GPU 0; "
    "44.99 GiB total capacity; 6.15 GiB already allocated; 37.32 GiB free; 6.15 GiB reserved "
    "in total by PyTorch) If reserved memory is >> allocated memory try setting "
    "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management and "
    "PYTORCH_CUDA_ALLOC_CONF\n"
)
# github.com/XPixelGroup/BasicSR/issues/737
NCCL_WATCHDOG = (
    "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, "
    "NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
    "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 1] Exception (either an error or timeout) detected by watchdog at work: 808, last "
    "enqueued NCCL work: 811, last completed NCCL work: 807.\n"
)
# github.com/hkproj/pytorch-transformer-distributed/issues/1
NCCL_SYSTEM_ERROR = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1333, unhandled system error (run with NCCL_DEBUG=INFO for details), "
    "NCCL version 2.18.6\n"
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
    "device error. \n"
    "Last error:\n"
    "socketStartConnect: Connect to 192.168.19.14<52822> failed : No route to host\n"
)
# github.com/pytorch/pytorch/issues/149984
NCCL_ASYNC = (
    "Collective WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
    "Timeout(ms)=1000000) raised the following async exception: NCCL error: unhandled system "
    "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.25.1\n"
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
    "device error. \n"
)
# github.com/chrisknewman/tusas/issues/149
SLURM_OOM = (
    "slurmstepd: error: Detected 1 oom_kill event in StepId=440575.0. Some of the step tasks "
    "have been OOM Killed.\n"
    "srun: error: nid001277: tasks 1-3: Out Of Memory\n"
    "srun: Terminating StepId=440575.0\n"
    "slurmstepd: error: *** STEP 440575.0 ON nid001277 CANCELLED AT 2023-12-05T07:16:01 ***\n"
)
# github.com/hafs-community/HAFS/issues/101 (older Slurm wording)
SLURM_OOM_OLD = (
    "slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. Some of your "
    "processes may have been killed by the cgroup out-of-memory handler.\n"
    "srun: error: Orion-01-01: task 4: Out Of Memory\n"
)
# github.com/hafs-community/HAFS/issues/101
SRUN_BUS_ERROR = (
    "srun: error: Orion-18-69: task 289: Bus error\n"
    "srun: Terminating job step 3495450.0\n"
    "slurmstepd: error: *** STEP 3495450.0 ON orion-01-04 CANCELLED AT 2021-10-27T20:22:22 ***\n"
)
# github.com/ZettaAI/zetta_utils/issues/671 (node name elided there)
SLURM_TIME_LIMIT = (
    "srun: Job step aborted: Waiting up to 47 seconds for job step to finish.\n"
    "slurmstepd: error: *** JOB 494583 ON ... CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME "
    "LIMIT ***\n"
    "slurmstepd: error: *** STEP 494583.0 ON ... CANCELLED AT 2024-04-20T09:09:37 DUE TO TIME "
    "LIMIT ***\n"
)
# github.com/SystemsGenetics/GEMmaker/pull/242
SLURM_PREEMPTION = (
    "slurmstepd: error: *** JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 DUE TO "
    "PREEMPTION ***\n"
)
# github.com/pytorch/pytorch/issues/107021
C10D_CONNECT_TIMEOUT = (
    "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to "
    "connect to 192.0.0.1:1234\n"
    "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the "
    "C10d store has failed. See inner exception for details.\n"
)


def fake_run(err: str, state: str = "FAILED", **kw: object) -> Diagnosis | None:
    return classify_strict(
        RunFacts(state=state, exit_code=1, err=LogTail("slurm-9.err", err), **kw)  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("err", "state", "code", "in_cause"),
    [
        (CUDA_OOM, "FAILED", "cuda-oom", "30.29 GiB on GPU 0"),
        (CUDA_OOM_OLD, "FAILED", "cuda-oom", "128.00 MiB"),
        (NCCL_WATCHDOG, "FAILED", "nccl-timeout", "ALLREDUCE did not complete within 600 s"),
        (NCCL_SYSTEM_ERROR, "FAILED", "nccl-error", "No route to host"),
        (NCCL_ASYNC, "FAILED", "nccl-error", "unhandled system error"),
        (SLURM_OOM, "OUT_OF_MEMORY", "host-oom", "nid001277"),
        (SLURM_OOM, "FAILED", "host-oom", "nid001277"),
        (SLURM_OOM_OLD, "FAILED", "host-oom", "Orion-01-01"),
        (SRUN_BUS_ERROR, "FAILED", "signal", "SIGBUS"),
        (SLURM_TIME_LIMIT, "TIMEOUT", "time-limit", "time limit"),
        (SLURM_TIME_LIMIT, "CANCELLED", "time-limit", "time limit"),
        (SLURM_PREEMPTION, "PREEMPTED", "preempted", "preempted"),
        (SLURM_PREEMPTION, "CANCELLED", "preempted", "preempted"),
        (C10D_CONNECT_TIMEOUT, "FAILED", "rendezvous-timeout", "192.0.0.1:1234"),
    ],
    ids=lambda v: v[:24] if isinstance(v, str) else None,
)
def test_fake_recorded_excerpt(err: str, state: str, code: str, in_cause: str) -> None:
    found = fake_run(err, state)
    assert found is not None and found.code == code, found
    assert in_cause in found.cause, found.cause
    assert found.evidence and all(e.file in ("slurm-9.err", "scheduler") for e in found.evidence)
    assert len(found.short) <= 32


def test_fake_cuda_oom_advice_names_the_knobs() -> None:
    found = fake_run(CUDA_OOM)
    assert found is not None
    for knob in ("batch_per_gpu", "bf16", "more GPUs"):
        assert knob in found.advice


def test_fake_nccl_advice_names_the_interface_and_debug_variables() -> None:
    for err in (NCCL_WATCHDOG, NCCL_SYSTEM_ERROR):
        found = fake_run(err)
        assert found is not None
        assert "NCCL_SOCKET_IFNAME" in found.advice and "NCCL_DEBUG=INFO" in found.advice


def test_fake_nccl_error_evidence_includes_the_last_error_line() -> None:
    found = fake_run(NCCL_SYSTEM_ERROR)
    assert found is not None
    assert [e.line for e in found.evidence] == [1, 4]
    assert found.short == "NCCL: unhandled system error"


def test_fake_watchdog_on_a_rank_names_it() -> None:
    found = fake_run(NCCL_WATCHDOG)
    assert found is not None and "rank 1" in found.cause
    assert found.evidence[0].text.startswith("[rank1]:[E626")


def test_fake_cuda_oom_on_the_first_failing_rank_beats_the_others_timeouts() -> None:
    # Rank 0 ran out of memory; rank 1, left waiting in an all-reduce, timed out. torchrun's
    # summary (as in logs/torchrun_keyerror_rank1.err) names rank 0 as the first failure.
    err = (
        "[rank1]:" + NCCL_WATCHDOG.splitlines()[0].removeprefix("[rank1]:") + "\n"
        "[rank0]: " + CUDA_OOM + "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  rank      : 0 (local_rank: 0)\n"
        "  exitcode  : 1 (pid: 16451) \n"
    )
    found = fake_run(err)
    assert found is not None and found.code == "cuda-oom" and "Rank 0" in found.cause
