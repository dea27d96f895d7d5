"""Job scripts: golden files, their shape, and what really runs when bash executes them.

Execution tests run the rendered script with bash and a PATH whose ``python3``, ``srun`` and
``scontrol`` are fakes (they only record their argv): a real torch launch is the trainer's and
the cluster tests' business; here the question is what the script itself executes.
Regenerate the golden files with ``UPDATE_GOLDEN=1 pytest tests/unit/test_templates.py``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from ddp_tui.sbatch_templates import (
    PREFLIGHT_MAX_MINUTES,
    render_preflight,
    render_training,
    sbatch_directives,
    script_launch_args,
    trainer_args,
)
from ddp_tui.spec import ExperimentSpec, SpecError, validate
from tests.golden.specs import GOLDEN_DIR, GOLDEN_PREFLIGHT, GOLDEN_SPECS, run_dir_for

UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def bash_n(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-n"], input=script, capture_output=True, text=True, timeout=30, check=False
    )


def directives(script: str) -> list[str]:
    return [ln[len("#SBATCH ") :] for ln in script.splitlines() if ln.startswith("#SBATCH ")]


def _golden(path: Path, text: str) -> None:
    if UPDATE:
        path.write_text(text)
        return
    assert path.exists(), f"{path.name} missing: run with UPDATE_GOLDEN=1"
    assert text == path.read_text(), f"{path.name} differs; if intended, run with UPDATE_GOLDEN=1"


# --------------------------------------------------------------------------- golden files


@pytest.mark.parametrize("name", sorted(GOLDEN_SPECS))
def test_training_script_matches_golden(name: str) -> None:
    _golden(GOLDEN_DIR / f"{name}.sbatch", render_training(GOLDEN_SPECS[name], run_dir_for(name)))


@pytest.mark.parametrize("name", sorted(GOLDEN_PREFLIGHT))
def test_preflight_script_matches_golden(name: str) -> None:
    text = render_preflight(GOLDEN_PREFLIGHT[name], run_dir_for(name))
    _golden(GOLDEN_DIR / f"{name}.preflight.sbatch", text)


def test_every_golden_file_is_valid_bash_and_has_a_spec() -> None:
    files = sorted(GOLDEN_DIR.glob("*.sbatch"))
    expected = {f"{n}.sbatch" for n in GOLDEN_SPECS} | {
        f"{n}.preflight.sbatch" for n in GOLDEN_PREFLIGHT
    }
    assert {f.name for f in files} == expected
    for f in files:
        res = bash_n(f.read_text())
        assert res.returncode == 0, f"{f.name}: {res.stderr}"


# --------------------------------------------------------------------------- shape


def test_sbatch_flags_are_sorted_then_extras_in_order() -> None:
    spec = GOLDEN_SPECS["4node_8gpu_nccl"]
    lines = sbatch_directives(spec, "/r")
    ours = lines[: -len(spec.extra_sbatch)]
    assert ours == sorted(ours)
    assert lines[-2:] == ["--exclusive", "--mail-type=END,FAIL"]
    assert "--output=/r/slurm-%j.out" in ours and "--error=/r/slurm-%j.err" in ours
    assert "--chdir=/r" in ours and "--signal=B:USR2@300" in ours and "--requeue" in ours


def test_directives_are_the_first_lines_so_sbatch_reads_them_all() -> None:
    # sbatch stops reading #SBATCH at the first command; nothing may come before them.
    script = render_training(GOLDEN_SPECS["4node_8gpu_nccl"], "/r")
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    n = len(directives(script))
    assert all(ln.startswith("#SBATCH ") for ln in lines[1 : n + 1])
    assert not any(ln.startswith("#SBATCH") for ln in lines[n + 1 :])


def test_single_node_uses_torchrun_standalone_without_slurm_commands() -> None:
    script = render_training(ExperimentSpec(gpus_per_node=4), "/r")
    assert "-m torch.distributed.run --standalone --nnodes=1 --nproc-per-node=4" in script
    code = "\n".join(ln for ln in script.splitlines() if not ln.lstrip().startswith("#"))
    assert "srun" not in code and "scontrol show" not in code  # requeue: Slurm only
    assert "#SBATCH --gres=gpu:4" in script and "#SBATCH --ntasks-per-node=1" in script


def test_multi_node_runs_one_torchrun_per_node_with_c10d_rendezvous() -> None:
    script = render_training(ExperimentSpec(nodes=3, gpus_per_node=2, cpus_per_task=8), "/r")
    assert "srun --export=ALL --kill-on-bad-exit=1 --wait=60" in script
    assert "--nodes=3 --ntasks=3 --ntasks-per-node=1 --cpus-per-task=8" in script
    assert '--rdzv-backend=c10d --rdzv-endpoint="$HEAD:$PORT" --rdzv-id="$JOB_ID"' in script
    assert "PORT=$((20000 + JOB_ID % 10000))" in script
    assert "--standalone" not in script


def test_srun_launcher_starts_one_task_per_gpu_with_master_addr() -> None:
    script = render_training(GOLDEN_SPECS["srun_per_gpu"], "/r")
    assert "#SBATCH --ntasks-per-node=4" in script
    assert "--nodes=2 --ntasks=8 --ntasks-per-node=4" in script
    assert 'export MASTER_ADDR="$HEAD" MASTER_PORT="$PORT"' in script
    assert "torch.distributed.run" not in script
    assert '"$PYTHON" -m ddp_tui.trainer "${ARGS[@]}" &' in script


def test_cpu_runs_request_no_gpus() -> None:
    spec = GOLDEN_SPECS["2node_gloo_cpu"]
    assert not any(d.startswith("--gres") for d in sbatch_directives(spec, "/r"))
    assert "--nproc-per-node=4" in render_training(spec, "/r")


def test_requeue_off_and_no_signal_lead() -> None:
    spec = ExperimentSpec(requeue=False, signal_lead_sec=0)
    script = render_training(spec, "/r")
    assert "#SBATCH --no-requeue" in script and "#SBATCH --signal" not in script
    assert "scontrol requeue" not in script


def test_preflight_keeps_the_shape_with_a_short_limit_and_no_requeue() -> None:
    spec = GOLDEN_SPECS["4node_8gpu_nccl"]
    script = render_preflight(spec, "/r")
    ds = directives(script)
    assert f"--time=00:{PREFLIGHT_MAX_MINUTES:02d}:00" in ds
    assert "--no-requeue" in ds and "--job-name=imagenet-r50-32gpu-preflight" in ds
    assert "--nodes=4" in ds and "--gres=gpu:8" in ds and not any("signal" in d for d in ds)
    assert "-m ddp_tui.trainer.preflight" in script and "scontrol requeue" not in script
    short = render_preflight(spec.replace(time_limit="5", signal_lead_sec=60), "/r")
    assert "#SBATCH --time=00:05:00" in short


def test_trainer_args_follow_the_trainer_cli() -> None:
    args = trainer_args(GOLDEN_SPECS["1node_8gpu"])
    pairs = dict(zip(args[::2], args[1::2], strict=False))
    assert pairs["--model"] == "resnet50" and pairs["--batch-size"] == "256"
    assert pairs["--lr-scaling"] == "linear" and pairs["--base-batch-size"] == "256"
    assert pairs["--precision"] == "bf16" and pairs["--num-classes"] == "10"
    assert "--lr" not in trainer_args(ExperimentSpec())  # empty lr: the trainer's default
    # decode: auto is the trainer's own default, so job scripts without it stay as they were.
    assert "--decode" not in trainer_args(ExperimentSpec())
    folder = ExperimentSpec(dataset="imagefolder", data_root="/d", decode="gpu")
    assert trainer_args(folder)[-2:] == ["--decode", "gpu"]


def test_home_relative_python_and_paths_still_expand() -> None:
    script = render_training(GOLDEN_SPECS["4node_8gpu_nccl"], "/r")
    assert 'PYTHON="$HOME"/venvs/torch/bin/python\n' in script
    script = render_training(GOLDEN_SPECS["1node_1gpu"], "/r")
    assert '--data-root "$HOME"/data\n' in script


def test_home_relative_values_reach_the_trainer_expanded(tmp_path: Path, fake_bin: Path) -> None:
    spec = ExperimentSpec(data_root="~/data dir", extra_trainer_args=("--x", "~/y", "~"))
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run()
    assert rc == 0, out
    (argv,) = job.argv("python")
    home = str(job.run_dir.parent)
    args = _after(argv, "ddp_tui.trainer")
    assert args[args.index("--data-root") + 1] == f"{home}/data dir"
    assert args[-3:] == ["--x", f"{home}/y", home]


@pytest.mark.parametrize("run_dir", ["relative/dir", "/with space", "/a%jb", "/new\nline", ""])
def test_run_dir_must_be_a_plain_absolute_path(run_dir: str) -> None:
    with pytest.raises(SpecError) as err:
        render_training(ExperimentSpec(), run_dir)
    assert [e.field for e in err.value.errors] == ["run_dir"]


def test_render_refuses_an_invalid_spec_listing_every_error() -> None:
    with pytest.raises(SpecError) as err:
        render_training(ExperimentSpec(name="a b", nodes=0, partition="x y"), "/r")
    assert {e.field for e in err.value.errors} == {"name", "nodes", "partition"}


# --------------------------------------------------------------------------- executing scripts

FAKE_LAUNCHER = r"""#!/bin/bash
# FAKE {name} for tests: records argv and environment (NUL-separated). With
# FAKE_MODE=wait_for_term it plays a trainer: waits, and on SIGTERM "checkpoints" and exits 3.
printf '%s\0' "$@" > "$FAKE_LOG.{name}.$$"
env -0 > "$FAKE_LOG.{env}env.$$"
echo "fake {name} $$" >> "$FAKE_LOG.calls"
if [ "${{FAKE_MODE:-exit}}" = wait_for_term ]; then
    trap 'echo TERM >> "$FAKE_LOG.calls"; touch requeue.request; exit 3' TERM
    touch "$FAKE_LOG.started"
    while :; do sleep 0.05; done
fi
exit "${{FAKE_EXIT:-0}}"
"""
# The job script of an NCCL run asks its python for torch's version (`-c`, the flight recorder's
# check): the FAKE answers FAKE_TORCH_VERSION (nothing when unset) and records nothing.
FAKE_TORCH_QUERY = r"""if [ "${1:-}" = -c ]; then
    if [ -n "${FAKE_TORCH_VERSION:-}" ]; then echo "$FAKE_TORCH_VERSION"; fi
    exit 0
fi
"""
FAKE_PYTHON = FAKE_LAUNCHER.format(name="python", env="py").replace(
    "\nprintf", "\n" + FAKE_TORCH_QUERY + "printf", 1
)
FAKE_SRUN = FAKE_LAUNCHER.format(name="srun", env="srun")
FAKE_SCANCEL = r"""#!/bin/bash
# FAKE scancel for tests: records its arguments.
echo "fake scancel $*" >> "$FAKE_LOG.calls"
exit 0
"""
FAKE_SCONTROL = r"""#!/bin/bash
# FAKE scontrol for tests: expands nothing, prints two hosts; records requeue calls.
echo "fake scontrol $*" >> "$FAKE_LOG.calls"
if [ "$1 $2" = "show hostnames" ]; then printf 'n7\nn8\n'; fi
exit 0
"""


def make_fake_bin(parent: Path) -> Path:
    """A directory of fake python3/srun/scontrol that only record what they were given."""
    d = parent / "fake_bin"
    d.mkdir()
    fakes = {"python3": FAKE_PYTHON, "srun": FAKE_SRUN, "scontrol": FAKE_SCONTROL}
    fakes["scancel"] = FAKE_SCANCEL
    for name, body in fakes.items():
        (d / name).write_text(body)
        (d / name).chmod(0o755)
    return d


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    return make_fake_bin(tmp_path)


class Job:
    """A rendered script run by bash in a run dir, with the fakes first on PATH."""

    def __init__(self, tmp_path: Path, fake_bin: Path, script: str) -> None:
        self.run_dir = tmp_path / "run"
        self.run_dir.mkdir(exist_ok=True)
        self.path = self.run_dir / "job.sbatch"
        self.path.write_text(script)
        self.log = str(tmp_path / "fake")
        self.fake_bin = fake_bin

    def env(self, extra: Mapping[str, str]) -> dict[str, str]:
        env = {
            "PATH": f"{self.fake_bin}:/usr/bin:/bin",
            "HOME": str(self.run_dir.parent),
            "FAKE_LOG": self.log,
            "SLURM_JOB_ID": "1234",
            "SLURM_JOB_NUM_NODES": "2",
            "SLURM_JOB_NODELIST": "n[7-8]",
        }
        env.update(extra)
        return env

    def start(self, *, cpus: set[int] | None = None, **extra: str) -> subprocess.Popen[str]:
        """``cpus``: the CPUs the script may run on (its affinity), as a cgroup gives a job."""
        return subprocess.Popen(
            ["bash", str(self.path)],
            cwd=self.run_dir,
            env=self.env(extra),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=None if cpus is None else lambda: os.sched_setaffinity(0, cpus),
        )

    def run(self, *, cpus: set[int] | None = None, **extra: str) -> tuple[int, str]:
        proc = self.start(cpus=cpus, **extra)
        out, _ = proc.communicate(timeout=30)
        return proc.returncode, out

    def argv(self, prog: str) -> list[list[str]]:
        files = sorted(Path(self.log).parent.glob(f"{Path(self.log).name}.{prog}.*"))
        return [f.read_bytes().decode().split("\0")[:-1] for f in files]

    def environ(self, prog: str) -> dict[str, str]:
        """The environment the (single) fake ``prog`` ran with."""
        (f,) = Path(self.log).parent.glob(f"{Path(self.log).name}.{prog}env.*")
        items = f.read_bytes().decode().split("\0")[:-1]
        return dict(item.split("=", 1) for item in items)

    def calls(self) -> list[str]:
        p = Path(self.log + ".calls")
        return p.read_text().splitlines() if p.exists() else []


def _after(argv: list[str], marker: str) -> list[str]:
    return argv[argv.index(marker) + 1 :]


def _launched(argv: list[str], python: str, *, ranks_per_node: int) -> list[str]:
    """What the telemetry launch shim execs after starting the node's sampler: its own
    options first, then ``--``, the python again, and the launcher's arguments."""
    shim = ["-m", "ddp_tui.telemetry.launch", "--interval", "5"]
    assert argv[:6] == [*shim, "--ranks-per-node", str(ranks_per_node)], argv
    assert argv[6:8] == ["--", python], argv
    return argv[8:]


@pytest.fixture
def pwned() -> Iterator[Path]:
    """Where an injected command would leave its mark. A short path of its own: the hostile
    word names it three times and must stay within a field's 256 characters, however long the
    test's tmp_path is (each pytest-xdist worker adds a folder to it)."""
    with tempfile.TemporaryDirectory(prefix="pw") as folder:
        yield Path(folder) / "pwned"


def test_single_node_script_hands_every_value_to_the_trainer_intact(
    tmp_path: Path, fake_bin: Path, pwned: Path
) -> None:
    nasty = f"$(touch {pwned})`touch {pwned}`'\";touch {pwned};\\ *"
    spec = ExperimentSpec(
        device="cpu",
        gpus_per_node=2,
        dataset="pkg.data:build",
        data_root=nasty,
        target=nasty,
        extra_trainer_args=("--note", nasty, "--glob=*"),
        nccl_env=(("GLOO_SOCKET_IFNAME", nasty),),
        env_setup=(f"export FROM_ENV_SETUP='{'$'}(touch {pwned})'",),
    )
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run(DDP_TUI_SCHEDULER="local", SLURM_CPUS_ON_NODE="4")
    assert rc == 0, out
    assert not pwned.exists()
    (shim,) = job.argv("python")
    argv = _launched(shim, "python3", ranks_per_node=2)
    assert argv[:6] == ["-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                        "--nproc-per-node=2", "-m"]  # fmt: skip
    assert _after(argv, "ddp_tui.trainer") == [
        "--run-dir",
        str(job.run_dir),
        *trainer_args(spec),
    ]
    env = job.environ("py")
    threads = str(max(1, min(4, len(os.sched_getaffinity(0))) // 2))  # 2 ranks share the cores
    assert env["GLOO_SOCKET_IFNAME"] == nasty and env["OMP_NUM_THREADS"] == threads
    assert env["PYTHONPATH"] == f"{job.run_dir}/code" and env["PYTHONUNBUFFERED"] == "1"
    assert "[ddp-tui] rendezvous=localhost (torchrun --standalone)" in out
    assert not any("scontrol" in c or "srun" in c for c in job.calls())


#: The CPUs this test may run on; a case that needs more than there are is skipped.
CPUS = sorted(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("launcher", "procs", "per_task", "cpus", "slurm", "threads", "cores"),
    [
        # One process asks 4 CPUs and may run on 2 (the local scheduler on a 2-core laptop).
        ("torchrun", 1, 4, 2, None, 2, 2),
        # Two processes share those 2: one thread each (not 2 each: 4 threads on 2 cores).
        ("torchrun", 2, 4, 2, None, 1, 2),
        # Its affinity is the limit: a cgroup of one CPU gives one thread.
        ("torchrun", 1, 4, 1, None, 1, 1),
        # Slurm allocated fewer than it may run on (nothing holds it): the allocation counts.
        ("torchrun", 1, 8, 2, "1", 1, 1),
        # ... and more than asked (a whole node): it has them.
        ("torchrun", 1, 1, 2, "2", 2, 2),
        # Fewer cores than processes: still one thread each, never none.
        ("torchrun", 2, 1, 2, None, 1, 1),
        # srun, one task per process with cpus_per_task each: Slurm's count is theirs together.
        ("srun", 2, 1, 2, "2", 1, 2),
    ],
)
def test_each_rank_gets_as_many_threads_as_it_has_cores(
    tmp_path: Path,
    fake_bin: Path,
    launcher: str,
    procs: int,
    per_task: int,
    cpus: int,
    slurm: str | None,
    threads: int,
    cores: int,
) -> None:
    if len(CPUS) < cpus:
        pytest.skip(f"needs {cpus} CPUs, has {len(CPUS)}")
    spec = ExperimentSpec(
        device="cpu",
        backend="gloo",
        launcher=launcher,
        gpus_per_node=procs,
        cpus_per_task=per_task,
    )
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    env = {"SLURM_CPUS_ON_NODE": slurm} if slurm else {}
    rc, out = job.run(cpus=set(CPUS[:cpus]), DDP_TUI_SCHEDULER="local", **env)
    assert rc == 0, out
    seen = job.environ("srun" if launcher == "srun" else "py")
    assert seen["OMP_NUM_THREADS"] == str(threads), out
    assert (seen["DDP_TUI_NODE_CORES"], seen["DDP_TUI_NODE_CPUS"]) == (str(cores), str(cpus))
    line = f"threads per rank={threads} ({cores} of this node's {cpus} CPUs for {procs} rank(s))"
    assert f"[ddp-tui] {line}" in out


@pytest.mark.parametrize(
    ("nodes", "launcher", "via"),
    [(1, "torchrun", "python"), (2, "torchrun", "srun"), (1, "srun", "srun")],
)
def test_a_users_script_gets_every_hostile_word_intact_under_each_launcher(
    tmp_path: Path, fake_bin: Path, pwned: Path, nodes: int, launcher: str, via: str
) -> None:
    nasty = f"$(touch {pwned})`touch {pwned}`'\";touch {pwned};\\ *"
    spec = ExperimentSpec(
        entry="script",
        script=f"/home/u/my proj/{nasty}.py",
        script_args=shlex.join(["--out", nasty, "--glob=*", "~/data", "$HOME"]),
        project_dir="/home/u/my proj",
        metrics=f"regex:(?P<epoch>\\d+) {nasty}",
        metrics_columns=((nasty.replace(" ", "_"), "train_loss"),),
        device="cpu",
        backend="gloo",
        nodes=nodes,
        launcher=launcher,
        gpus_per_node=2,
    )
    assert validate(spec) == []
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run(DDP_TUI_SCHEDULER="local")
    assert rc == 0, out
    assert not pwned.exists()
    (argv,) = job.argv(via)
    wrapper = _after(argv, "ddp_tui.scriptrun")
    # The job's HOME is tmp_path: "~/data" expands as typed at a shell; "$HOME" stays a word.
    expected = [
        str(tmp_path) + "/data" if a == "~/data" else a
        for a in script_launch_args(spec, str(job.run_dir))
    ]
    assert wrapper == ["--run-dir", str(job.run_dir), *expected]
    assert wrapper[wrapper.index("--") + 1 :] == [
        f"{nasty}.py", "--out", nasty, "--glob=*", f"{tmp_path}/data", "$HOME"
    ]  # fmt: skip
    assert ("--local-env-from-slurm" in wrapper) == (launcher == "srun")


@pytest.mark.parametrize(
    ("entry", "device", "env_setup", "expected"),
    [
        ("script", "cpu", (), "1"),
        ("script", "cpu", ("export ACCELERATE_USE_CPU=0",), "0"),
        ("script", "cuda", (), None),
        ("trainer", "cpu", (), None),
    ],
)
def test_a_users_script_on_cpus_tells_accelerate_to_use_them(
    tmp_path: Path,
    fake_bin: Path,
    entry: str,
    device: str,
    env_setup: tuple[str, ...],
    expected: str | None,
) -> None:
    """Accelerate forms no process group on a CPU node unless ACCELERATE_USE_CPU is set: each
    rank would train alone (measured: 2 ranks, DistributedType.NO, each on all the data). A CPU
    job of a user's script sets it, unless the user's own set-up already did."""
    script = {"entry": "script", "script": "/home/u/proj/train.py"} if entry == "script" else {}
    spec = ExperimentSpec(
        **script,
        device=device,
        backend="gloo" if device == "cpu" else "nccl",
        gpus_per_node=2,
        env_setup=env_setup,
    )
    assert validate(spec) == []
    text = render_training(spec, str(tmp_path / "run"))
    assert ("ACCELERATE_USE_CPU" in text) == (entry == "script" and device == "cpu")
    job = Job(tmp_path, fake_bin, text)
    rc, out = job.run(DDP_TUI_SCHEDULER="local")
    assert rc == 0, out
    assert job.environ("py").get("ACCELERATE_USE_CPU") == expected


def test_multi_node_script_builds_the_rendezvous_from_the_allocation(
    tmp_path: Path, fake_bin: Path
) -> None:
    spec = GOLDEN_SPECS["4node_8gpu_nccl"].replace(python="python3", env_setup=())
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run()
    assert rc == 0, out
    (argv,) = job.argv("srun")
    launcher = argv[: argv.index("python3")]
    assert "--kill-on-bad-exit=1" in launcher and "--nodes=4" in launcher
    assert "--ntasks-per-node=1" in launcher and "--cpus-per-task=64" in launcher
    torchrun = argv[argv.index("python3") :]
    assert "--rdzv-endpoint=n7:21234" in torchrun and "--rdzv-id=1234" in torchrun
    assert _after(torchrun, "ddp_tui.trainer")[2:] == trainer_args(spec)
    assert "[ddp-tui] rendezvous=n7:21234" in out
    assert "[ddp-tui] world_size=32 (4 x 8) backend=nccl launcher=torchrun device=cuda" in out


def test_srun_launcher_exports_master_addr_for_the_trainer(tmp_path: Path, fake_bin: Path) -> None:
    # The fake srun can't show its environment to the trainer, so echo it from the script run.
    spec = GOLDEN_SPECS["srun_per_gpu"]
    script = render_training(spec, str(tmp_path / "run")).replace(
        "LAUNCHER_PID=$!\n", 'LAUNCHER_PID=$!\necho "MASTER=$MASTER_ADDR:$MASTER_PORT"\n', 1
    )
    job = Job(tmp_path, fake_bin, script)
    rc, out = job.run()
    assert rc == 0, out
    assert "MASTER=n7:21234" in out
    (argv,) = job.argv("srun")
    shim = argv[argv.index("python3") + 1 :]
    assert _launched(shim, "python3", ranks_per_node=spec.gpus_per_node)[:2] == [
        "-m",
        "ddp_tui.trainer",
    ]


def test_launcher_exit_status_is_the_job_exit_status(tmp_path: Path, fake_bin: Path) -> None:
    job = Job(tmp_path, fake_bin, render_training(ExperimentSpec(), str(tmp_path / "run")))
    rc, out = job.run(FAKE_EXIT="7")
    assert rc == 7
    assert "[ddp-tui] launcher exited with status 7" in out


def _wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@pytest.mark.parametrize(("scheduler", "requeued"), [("slurm", True), ("local", False)])
def test_pre_timeout_usr2_checkpoints_then_requeues_on_slurm_only(
    tmp_path: Path, fake_bin: Path, scheduler: str, requeued: bool
) -> None:
    job = Job(tmp_path, fake_bin, render_training(ExperimentSpec(), str(tmp_path / "run")))
    proc = job.start(FAKE_MODE="wait_for_term", DDP_TUI_SCHEDULER=scheduler)
    _wait_for(Path(job.log + ".started"))
    proc.send_signal(signal.SIGUSR2)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3, out  # the trainer's "checkpointed, wants requeue" code
    assert "TERM" in job.calls()  # USR2 reached the launcher as SIGTERM
    assert ("fake scontrol requeue 1234" in job.calls()) is requeued
    assert "[ddp-tui] SIGUSR2: time limit near" in out


def test_usr2_under_srun_signals_the_steps_through_slurm_not_srun(
    tmp_path: Path, fake_bin: Path
) -> None:
    # srun answers SIGTERM with SIGKILL for its tasks, so the script must not `kill` it.
    spec = ExperimentSpec(nodes=2, device="cpu", gpus_per_node=2)
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    proc = job.start(FAKE_MODE="wait_for_term")
    _wait_for(Path(job.log + ".started"))
    proc.send_signal(signal.SIGUSR2)
    deadline = time.monotonic() + 30  # bounds a hang only
    while "fake scancel --signal=TERM 1234" not in job.calls():
        assert time.monotonic() < deadline, job.calls()
        time.sleep(0.02)
    assert "TERM" not in job.calls()  # the fake srun itself was left alone
    (srun_pid,) = (int(c.split()[-1]) for c in job.calls() if c.startswith("fake srun"))
    os.kill(srun_pid, signal.SIGTERM)  # what Slurm's step signal leads to: the tasks stop
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3, out
    assert "fake scontrol requeue 1234" in job.calls()


def test_sigterm_from_a_cancel_never_requeues(tmp_path: Path, fake_bin: Path) -> None:
    # scancel TERMs every process of the job; the trainer still leaves requeue.request.
    job = Job(tmp_path, fake_bin, render_training(ExperimentSpec(), str(tmp_path / "run")))
    proc = job.start(FAKE_MODE="wait_for_term")
    _wait_for(Path(job.log + ".started"))
    proc.send_signal(signal.SIGTERM)
    (python_pid,) = (int(c.split()[-1]) for c in job.calls() if c.startswith("fake python"))
    os.kill(python_pid, signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 3, out
    assert (job.run_dir / "requeue.request").exists()
    assert not any("requeue" in c for c in job.calls() if "scontrol" in c)


def test_env_setup_lines_run_verbatim_quotes_and_all(tmp_path: Path, fake_bin: Path) -> None:
    spec = ExperimentSpec(
        env_setup=(
            """export GREETING="it's \\"quoted\\" ok" SINGLE='a "b" $HOME'""",
            'echo "setup: $GREETING / $SINGLE"',
            'if [ -n "${UNSET_BY_DESIGN}" ]; then echo never; fi',
        )
    )
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run()
    assert rc == 0, out
    assert """setup: it's "quoted" ok / a "b" $HOME""" in out


def test_header_names_job_nodes_and_rendezvous(tmp_path: Path, fake_bin: Path) -> None:
    spec = GOLDEN_SPECS["2node_gloo_cpu"]
    job = Job(tmp_path, fake_bin, render_training(spec, str(tmp_path / "run")))
    rc, out = job.run()
    assert rc == 0, out
    assert re.search(r"\[ddp-tui\] training job 1234 on \S+ at \d{4}-\d\d-\d\dT", out)
    assert "[ddp-tui] nodes=2 nodelist=n[7-8]" in out
    assert "[ddp-tui] rendezvous=n7:21234" in out
    assert "backend=gloo launcher=torchrun device=cpu" in out
