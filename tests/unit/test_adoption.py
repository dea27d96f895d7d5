"""Bringing in a job ddp-tui did not submit, the pure parts: what ``scontrol show job`` says of
it (records as the Slurm test cluster printed them, Slurm 22.05), the run's name and spec made of
it, the ``#SBATCH`` lines a retry asks with, the interpreter its script runs under, and the
wrapper that runs it from its directory, run here by a real bash with a work dir holding a space
and a quote. The whole adoption, on real schedulers: tests/integration/test_adoption_local.py and
tests/integration/test_user_jobs_slurm.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ddp_tui.remote.backends.executor import LocalExecutor
from ddp_tui.remote.backends.job_request import JobRequest
from ddp_tui.remote.backends.slurm.job_request import array_task_of, parse_job_request
from ddp_tui.remote.backends.slurm.parsers import parse_show_job
from ddp_tui.remote.backends.states import JobState
from ddp_tui.remote.runs.adoption import (
    AdoptionRefused,
    adopted_name,
    adopted_spec,
    script_command,
    wrapper_directives,
)
from ddp_tui.remote.store.runs import RunStore
from ddp_tui.sbatch_templates import directive, render_adopted
from ddp_tui.spec import ExperimentSpec, SpecError, validate

W = "/home/u/my dir"
#: sbatch --hold -J 'hello world!' -N2 --ntasks-per-node=1 --gpus-per-node=1 --cpus-per-task=2
#: --mem=100M -t 5 -e e-%j.err s.sh
TWO_NODES = (
    "JobId=1 JobName=hello world! UserId=u(1000) GroupId=u(1000) MCS_label=N/A Priority=0 "
    "Nice=0 Account=root QOS=normal JobState=PENDING Reason=JobHeldUser Dependency=(null) "
    "Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:05:00 "
    "TimeMin=N/A SubmitTime=2026-11-28T07:08:27 Partition=debug AllocNode:Sid=localhost:493 "
    "ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=2-2 NumCPUs=4 NumTasks=2 "
    "CPUs/Task=2 ReqB:S:C:T=0:0:*:* TRES=cpu=4,mem=200M,node=2,billing=4,gres/gpu=2 "
    "Socks/Node=* NtasksPerN:B:S:C=1:0:*:* CoreSpec=* MinCPUsNode=2 MinMemoryNode=100M "
    f"MinTmpDiskNode=0 Features=(null) OverSubscribe=OK Command={W}/s.sh WorkDir={W} "
    f"Comment=hi  StdErr={W}/e-1.err StdIn=/dev/null StdOut={W}/slurm-1.out Power= "
    "TresPerNode=gres:gpu:1"
)
#: sbatch -n 3 --mem-per-cpu=50M s.sh, ended; and sbatch --hold --gpus=3 -N2 --exclusive.
ENDED = (
    "JobId=3 JobName=s.sh UserId=u(1000) Account=root QOS=normal JobState=COMPLETED "
    "Reason=None BatchFlag=1 ExitCode=0:0 TimeLimit=01:00:00 Partition=debug NodeList=n1 "
    "BatchHost=n1 NumNodes=1 NumCPUs=3 NumTasks=3 CPUs/Task=1 TRES=cpu=3,node=1,billing=3 "
    "NtasksPerN:B:S:C=0:0:*:* MinCPUsNode=1 MinMemoryCPU=50M Features=(null) OverSubscribe=OK "
    "Command=/w/s.sh WorkDir=/w StdErr=/w/slurm-3.out StdIn=/dev/null StdOut=/w/slurm-3.out"
)
PER_JOB = (
    "JobId=4 JobName=s.sh UserId=u(1000) Account=root QOS=normal JobState=PENDING BatchFlag=1 "
    "TimeLimit=UNLIMITED Partition=debug NumNodes=2-2 NumTasks=2 CPUs/Task=1 "
    "TRES=cpu=2,mem=8000M,node=2,billing=2,gres/gpu=3 NtasksPerN:B:S:C=0:0:*:* "
    "MinMemoryNode=0 Features=(null) OverSubscribe=NO WorkDir=/w StdErr=/w/slurm-4.out "
    "StdOut=/w/slurm-4.out TresPerJob=gres:gpu:3"
)
#: A running task of array 2 asked for by its own job number; srun's interactive job.
TASK = (
    "JobId=7 ArrayJobId=2 ArrayTaskId=1 JobName=s.sh UserId=u(1000) JobState=RUNNING "
    "BatchFlag=1 TimeLimit=01:00:00 Partition=debug NumNodes=1 NumTasks=1 CPUs/Task=1 "
    "TRES=cpu=1,node=1,billing=1 NtasksPerN:B:S:C=0:0:*:* MinMemoryNode=0 OverSubscribe=OK "
    "WorkDir=/w StdErr=/w/slurm-2_1.out StdOut=/w/slurm-2_1.out TresPerTask=gres:gpu:1"
)
INTERACTIVE = (
    "JobId=9 JobName=inter UserId=u(1000) JobState=RUNNING BatchFlag=0 TimeLimit=01:00:00 "
    "Partition=debug NodeList=n1 BatchHost=n1 NumNodes=1 NumTasks=1 CPUs/Task=1 "
    "TRES=cpu=1,node=1,billing=1 Command=sleep WorkDir=/work Power="
)


def _request(line: str, job_id: str) -> JobRequest:
    (record,) = parse_show_job(line)
    return parse_job_request(record, job_id)


def test_what_scontrol_says_a_two_node_gpu_job_asked_for() -> None:
    job = _request(TWO_NODES, "1")
    assert (job.job_id, job.name, job.state, job.batch) == (
        "1",
        "hello world!",
        JobState.PENDING,
        True,
    )
    assert (job.work_dir, job.stdout, job.stderr) == (W, f"{W}/slurm-1.out", f"{W}/e-1.err")
    assert (job.nodes, job.gpus, job.cpus_per_task, job.mem_per_node) == (2, 2, 2, "100M")
    assert (job.time_limit_sec, job.partition, job.account, job.qos) == (
        300,
        "debug",
        "root",
        "normal",
    )
    assert job.user == "u" and job.constraint == "" and job.source == "scontrol show job 1"
    assert job.options == (
        ("nodes", "2"), ("ntasks", "2"), ("ntasks-per-node", "1"), ("cpus-per-task", "2"),
        ("mem", "100M"), ("time", "00:05:00"), ("gres", "gpu:1"), ("partition", "debug"),
        ("account", "root"), ("qos", "normal"),
    )  # fmt: skip


def test_memory_per_cpu_gpus_per_job_and_per_task_no_limit_and_exclusive() -> None:
    ended = _request(ENDED, "3")
    assert ended.state is JobState.COMPLETED and ended.mem_per_node == ""
    assert ("mem-per-cpu", "50M") in ended.options and ("ntasks", "3") in ended.options
    assert not any(o == "mem" or o == "ntasks-per-node" for o, _ in ended.options)
    per_job = _request(PER_JOB, "4")
    assert per_job.time_limit_sec is None and per_job.gpus == 3
    options = dict(per_job.options)
    assert options["gpus"] == "3" and options["exclusive"] == ""
    assert "time" not in options and "mem" not in options  # 0: the partition's default
    task = _request(TASK, "7")
    assert task.job_id == "2_1"  # the id the listing and the run's attempt use
    assert dict(task.options)["gpus-per-task"] == "1"
    interactive = _request(INTERACTIVE, "9")
    assert not interactive.batch and interactive.stdout is None
    (record,) = parse_show_job(PER_JOB)
    assert array_task_of(record) is None


def test_a_run_name_is_the_jobs_name_made_valid() -> None:
    assert adopted_name("hello world!", "1") == "hello_world"
    assert adopted_name("-.x", "1") == "x"
    assert adopted_name("ü ☃", "12") == "job-12"
    assert adopted_name("___", "12_3") == "job-12_3"
    assert len(adopted_name("a" * 100, "1")) == 64
    for name in ("hello_world", "job-12_3", "a" * 64):
        assert not [e for e in validate(ExperimentSpec(name=name)) if e.field == "name"]


def test_the_spec_is_valid_and_says_what_the_job_was_given() -> None:
    spec, left_out = adopted_spec(_request(TWO_NODES, "1"), "hello_world")
    made = ExperimentSpec.from_dict(spec)
    assert validate(made) == []
    assert (made.entry, made.script, made.code_mode, made.project_dir) == (
        "script", "original.sbatch", "in-place", W,
    )  # fmt: skip
    assert (made.nodes, made.gpus_per_node, made.device) == (2, 1, "cuda")
    assert (made.cpus_per_task, made.mem, made.time_limit, made.partition) == (
        2, "100M", "00:05:00", "debug",
    )  # fmt: skip
    assert made.epochs is None and made.telemetry_sec == 0 and left_out == []
    # No GPUs: the CPU; no limit: the longest a spec says; 3 GPUs on 2 nodes: said.
    cpu, _ = adopted_spec(_request(ENDED, "3"), "s.sh")
    assert ExperimentSpec.from_dict(cpu).device == "cpu"
    uneven, left = adopted_spec(_request(PER_JOB, "4"), "s.sh")
    assert uneven["gpus_per_node"] == 1 and uneven["time_limit"] == "365-00:00:00"
    assert left == ["gpus_per_node: 3 GPUs over 2 nodes, 1 per node"]


def test_a_field_the_spec_refuses_is_left_at_its_default_and_named() -> None:
    odd = JobRequest("5", "x", JobState.PENDING, True, "/w", None, None,
                     partition="has space", mem_per_node="lots", nodes=1)  # fmt: skip
    spec, left_out = adopted_spec(odd, "x")
    assert spec["partition"] == "" and spec["mem"] == ""
    assert [item.split(":")[0] for item in left_out] == ["partition", "mem"]
    assert "'has space'" in left_out[0]
    with pytest.raises(AdoptionRefused, match="name"):
        adopted_spec(odd, "not a name!")


def test_sbatch_lines_carry_only_what_sbatch_reads_as_it_is() -> None:
    assert directive("gres", "gpu:a100:2") == "--gres=gpu:a100:2"
    assert directive("constraint", "a100&(ib|eth)") == "--constraint=a100&(ib|eth)"
    assert directive("exclusive", "") == "--exclusive"
    for bad in ("two words", "x#y", "%j", "it's", 'a"b'):
        assert directive("partition", bad) is None
    job = JobRequest("5", "x", JobState.PENDING, True, "/w", None, None,
                     options=(("partition", "a b"), ("time", "00:05:00")))  # fmt: skip
    lines, left_out = wrapper_directives(job, "x")
    assert lines == ["--job-name=x", "--time=00:05:00"]
    assert left_out == ["--partition=a b: not writable on an #SBATCH line"]


def test_the_script_runs_under_its_own_interpreter() -> None:
    assert script_command("#!/bin/bash\necho\n", "/r/o") == ["/bin/bash", "/r/o"]
    assert script_command("#!/usr/bin/env python3\n", "/r/o") == ["/usr/bin/env", "python3", "/r/o"]
    # The kernel passes the rest of the line as one argument.
    assert script_command("#! /bin/sh -e -x\n", "/r/o") == ["/bin/sh", "-e -x", "/r/o"]
    assert script_command("#!/bin/bash\t-l\n", "/r/o") == ["/bin/bash", "-l", "/r/o"]
    assert script_command("echo no line\n", "/r/o") == ["bash", "/r/o"]


def test_the_wrapper_runs_the_original_from_a_work_dir_with_a_space_and_a_quote(
    tmp_path: Path,
) -> None:
    """A real bash runs the rendered job.sbatch: it enters the work dir (named to break any
    unquoted use), passes its arguments on, and its #SBATCH lines are the run's."""
    work = tmp_path / "it's my $dir"
    work.mkdir()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    original = run_dir / "original.sbatch"
    original.write_text('#!/bin/bash\n#SBATCH -o elsewhere.out\npwd\necho "args: $*"\n')
    script = render_adopted(
        str(run_dir),
        job_id="12",
        directives=["--job-name=x", "--time=00:05:00"],
        work_dir=str(work),
        command=script_command(original.read_text(), str(original)),
    )
    assert f"#SBATCH --output={run_dir}/slurm-%j.out\n" in script
    assert f"#SBATCH --error={run_dir}/slurm-%j.err\n" in script
    assert "#SBATCH --time=00:05:00\n" in script and f"#SBATCH --chdir={run_dir}\n" in script
    res = subprocess.run(
        ["bash", "-c", script, "job.sbatch", "one", "two words"],
        capture_output=True,
        text=True,
        cwd=run_dir,
        env={**os.environ, "SLURM_SUBMIT_DIR": str(run_dir)},
        check=True,
    )
    assert res.stdout.splitlines() == [str(work), "args: one two words"]
    elsewhere = render_adopted(
        str(run_dir), job_id="12", directives=[], work_dir=str(tmp_path / "gone"), command=["pwd"]
    )
    gone = subprocess.run(["bash", "-c", elsewhere], capture_output=True, text=True, cwd=run_dir)
    assert gone.returncode == 1 and "cannot enter" in gone.stderr
    with pytest.raises(SpecError, match="run_dir"):
        render_adopted("/runs/a b", job_id="1", directives=[], work_dir="/w", command=["x"])


def test_a_run_is_made_whole_or_not_at_all(tmp_path: Path) -> None:
    """create_run's ``fill`` writes into the run before it is in place: when it fails, no
    run and no half-made directory are left."""
    store = RunStore(LocalExecutor(), str(tmp_path / "runs"))

    def fail(tmp: str) -> None:
        Path(tmp, "original.sbatch").write_text("#!/bin/bash\n")
        raise OSError(28, "No space left on device")

    spec = ExperimentSpec(name="a").to_dict()
    with pytest.raises(Exception, match="No space left"):
        store.create_run(spec, "a", "#!/bin/bash\n", kind="adopted", fill=fail, code=False)
    assert os.listdir(tmp_path / "runs") == []
    ref = store.create_run(spec, "a", "#!/bin/bash\n", kind="adopted",
                           extra={"adopted": {"job_id": "12"}}, code=False)  # fmt: skip
    assert sorted(os.listdir(ref.path)) == ["job.sbatch", "jobs.jsonl", "spec.json"]
    (info,) = store.list_runs()
    assert info.kind == "adopted" and info.damage == ()
    assert info.spec_json["adopted"] == {"job_id": "12"}
