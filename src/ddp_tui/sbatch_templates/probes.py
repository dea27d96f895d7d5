"""The scripts of the small jobs a submit sends to find something out before the real job
queues: the detection probe (what a partition offers, ``detect.sh.j2``) and the environment
check (``env_check.sbatch.j2``: torch, CUDA and NCCL inside the spec's environment)."""

from __future__ import annotations

from ddp_tui.sbatch_templates import _ENV, _launch_words, check_run_dir, sbatch_directives
from ddp_tui.sbatch_templates.environment import environment_context
from ddp_tui.spec import ExperimentSpec


def render_detect_probe() -> str:
    """The detection probe's script: it takes no values, every answer comes from the node."""
    return _ENV.get_template("detect.sh.j2").render({})


#: The environment check's allocation: one task on one node, for at most five minutes.
ENV_CHECK_MINUTES = 5
ENV_CHECK_JOB_NAME = "ddp-tui-envcheck"


def env_check_directives(spec: ExperimentSpec, check_dir: str) -> list[str]:
    """The check's ``#SBATCH`` options: the training job's place (partition, account, QOS,
    constraint, GPU type, extra lines) with one task, one core and, for cuda, one GPU; no
    memory or mail options, no requeue, no signal; ``--export=NONE`` where the job has it."""
    shape = spec.replace(
        nodes=1, gpus_per_node=1, launcher="torchrun", cpus_per_task=1, mem="",
        mail_type="", mail_user="",
    )  # fmt: skip
    return sbatch_directives(
        shape,
        check_dir,
        job_name=ENV_CHECK_JOB_NAME,
        time_minutes=ENV_CHECK_MINUTES,
        requeue=False,
        signal=False,
    )


def render_env_check(spec: ExperimentSpec, check_dir: str, *, code: str, exit_mark: str) -> str:
    """The environment check's job script for ``spec``, in ``check_dir`` (an absolute path
    that can go on ``#SBATCH`` lines): ``code`` is the Python it runs, and ``exit_mark`` starts
    its last line. Raises :class:`~ddp_tui.spec.SpecError` where ``check_dir`` cannot be used."""
    check_run_dir(check_dir)
    # The job's own activation and launch words (one node: the launcher's, _launch_words).
    ctx = {
        **_launch_words(environment_context(spec, check_dir, mode="torchrun_single")),
        "spec": spec,
        "check_dir": check_dir,
        "directives": env_check_directives(spec, check_dir),
        "env_setup": list(spec.env_setup),
        "code": code,
        "mark": exit_mark.removesuffix("-exit"),
        "exit_mark": exit_mark,
    }
    return _ENV.get_template("env_check.sbatch.j2").render(ctx)
