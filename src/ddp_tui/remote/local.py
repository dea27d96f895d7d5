"""The embedded default scheduler: one-node jobs as detached local process groups.

Without Slurm (a workstation, a laptop, a fresh CI machine) this runs the same
``job.sbatch`` as ``bash job.sbatch`` (its ``#SBATCH`` lines are comments to bash),
with numeric job ids, Slurm-like states and exit codes.

How a job runs, and why it survives the app:

* Every job has a JSON file in the state directory; all changes happen under one
  ``flock`` on ``<state>/lock``, so the app, the CLI and the supervisors never race.
* Starting a job launches a small supervisor (``python -c`` importing this module;
  no torch), which forks, detaches with ``setsid`` and runs ``bash job.sbatch`` in
  a new process group of its own. The supervisor waits for it, records the exit
  code, and starts the next pending job: the queue moves on even after the app is
  closed, and whoever calls :meth:`LocalScheduler.poll` also advances it.
* Cancel and requeue mark the job and send SIGTERM to its supervisor, which sends
  SIGTERM to the job's group and SIGKILL after the grace period.
* A supervisor or job that died without a word (a reboot, ``kill -9``) is noticed
  from ``/proc``: a pid counts as alive only with the same start time as recorded,
  so a reused pid is never mistaken for the job.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ddp_tui.remote.scheduler import JobStatus, PartitionInfo, Scheduler, SchedulerError
from ddp_tui.remote.states import JobState

DEFAULT_MAX_RUNNING = 1
DEFAULT_CANCEL_GRACE_SEC = 10.0
_WAIT_TICK = 0.1
_LAUNCH_TIMEOUT = 60.0

_ACTION_CANCEL = "cancel"
_ACTION_REQUEUE = "requeue"


def default_state_dir() -> Path:
    """``$XDG_STATE_HOME/ddp-tui/local`` (``~/.local/state/ddp-tui/local``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(base) / "ddp-tui" / "local"


# -- #SBATCH parsing -----------------------------------------------------------

_SHORT_OPTS = {"-o": "output", "-e": "error", "-N": "nodes", "-J": "job-name", "-D": "chdir"}


def sbatch_options(script: str) -> dict[str, str]:
    """The ``#SBATCH`` options of ``script`` as long names without dashes.

    Like sbatch, only the lines before the first command count. Flags without a
    value map to "".
    """
    opts: dict[str, str] = {}
    for raw in script.splitlines():
        line = raw.strip()
        if not line or (line.startswith("#!") and not opts):
            continue
        if not line.startswith("#"):
            break
        if not line.startswith("#SBATCH"):
            continue
        rest = line[len("#SBATCH") :]
        try:
            tokens = shlex.split(rest, comments=True)
        except ValueError:
            tokens = rest.split()
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            i += 1
            if tok.startswith("--"):
                key, eq, value = tok[2:].partition("=")
                if not eq and i < len(tokens) and not tokens[i].startswith("-"):
                    value = tokens[i]
                    i += 1
                opts[key] = value
            elif tok[:2] in _SHORT_OPTS:
                value = tok[2:]
                if not value and i < len(tokens):
                    value = tokens[i]
                    i += 1
                opts[_SHORT_OPTS[tok[:2]]] = value
    return opts


def requested_nodes(script: str) -> int:
    """The minimum node count the script asks for (``--nodes=2-4`` asks for 2); 1 if unset."""
    value = sbatch_options(script).get("nodes", "")
    m = re.match(r"\s*(\d+)", value)
    return int(m.group(1)) if m else 1


def refuse_multi_node(nodes: int) -> None:
    """Raise the scheduler's refusal for a job of more than one node."""
    if nodes > 1:
        raise SchedulerError(
            f"the local scheduler runs one-node jobs only; this job asks for {nodes} nodes"
            " — use a Slurm profile"
        )


_PATTERN = re.compile(r"%(\d*)([%jJxuNnstAa])")


def expand_log_pattern(pattern: str, job_id: str, job_name: str) -> str:
    """Resolve sbatch's filename patterns (``%j``, ``%x``, ``%u``, ``%N``, ...) for one job."""
    values = {
        "j": job_id,
        "J": job_id,
        "A": job_id,
        "a": "0",
        "x": job_name,
        "u": _user(),
        "N": socket.gethostname(),
        "n": "0",
        "s": "batch",
        "t": "0",
    }

    def sub(m: re.Match[str]) -> str:
        if m.group(2) == "%":
            return "%"
        value = values[m.group(2)]
        width = m.group(1)
        return value.zfill(int(width)) if width and value.isdigit() else value

    return _PATTERN.sub(sub, pattern)


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return os.environ.get("USER", "user")


# -- processes ---------------------------------------------------------------


def _proc_stat(pid: int | str) -> tuple[str, int, int] | None:
    """(state letter, process group, start time in clock ticks) from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; fields resume after the last ")".
    rest = data[data.rfind(")") + 2 :].split()
    try:
        return rest[0], int(rest[2]), int(rest[19])
    except (IndexError, ValueError):
        return None


def _has_proc() -> bool:
    return os.path.isdir("/proc/self")


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot), to tell a reused pid apart."""
    st = _proc_stat(pid)
    return st[2] if st else None


def pid_alive(pid: int | None, start: int | None) -> bool:
    """Whether ``pid`` runs and is the same process that started at ``start``."""
    if not pid:
        return False
    if _has_proc():
        st = _proc_stat(pid)
        if st is None or st[0] in ("Z", "X", "x"):
            return False
        return start is None or st[2] == start
    try:  # no /proc (macOS): existence only
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is left in process group ``pgid``."""
    if _has_proc():
        # kill(0) would also count zombies that a non-reaping init keeps around.
        for name in os.listdir("/proc"):
            if name.isdigit():
                st = _proc_stat(name)
                if st is not None and st[1] == pgid and st[0] not in ("Z", "X", "x"):
                    return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


# -- job records -----------------------------------------------------------------


@dataclass
class LocalJob:
    """One job's state file."""

    job_id: str
    run_dir: str
    script: str
    name: str
    out_path: str
    err_path: str
    state: str = JobState.PENDING.value
    reason: str = ""
    submitted_at: float = 0.0
    started_at: float | None = None
    ended_at: float | None = None
    supervisor_pid: int | None = None
    supervisor_start: int | None = None
    job_pid: int | None = None  # also the job's process group id
    job_start: int | None = None
    exit_code: int | None = None
    kill_signal: int | None = None
    action: str = ""  # "cancel" | "requeue" while the supervisor stops the job
    grace_sec: float = DEFAULT_CANCEL_GRACE_SEC
    restart_count: int = 0

    @property
    def job_state(self) -> JobState:
        try:
            return JobState(self.state)
        except ValueError:
            return JobState.UNKNOWN

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LocalJob:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


def _iso(t: float | None) -> str:
    if t is None:
        return ""
    return datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def _hms(sec: float) -> str:
    s = int(sec)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


# -- the scheduler -------------------------------------------------------------------


class LocalScheduler(Scheduler):
    """One-node jobs on this machine, at most ``max_running`` at once."""

    name = "local"

    def __init__(
        self,
        state_dir: str | Path | None = None,
        *,
        max_running: int = DEFAULT_MAX_RUNNING,
        cancel_grace_sec: float = DEFAULT_CANCEL_GRACE_SEC,
        python: str | None = None,
        _save_settings: bool = True,
    ) -> None:
        if max_running < 1:
            raise ValueError("max_running must be at least 1")
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.max_running = max_running
        self.cancel_grace_sec = cancel_grace_sec
        self.python = python or sys.executable
        self._jobs_dir = self.state_dir / "jobs"
        self._logs_dir = self.state_dir / "logs"
        self._cache: dict[str, tuple[tuple[int, int, int], LocalJob]] = {}
        self._gpus: int | None = None
        for d in (self.state_dir, self._jobs_dir, self._logs_dir):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
        if _save_settings:
            # Supervisors read these when they advance the queue with the app closed.
            with self._locked():
                settings = {"max_running": max_running, "cancel_grace_sec": cancel_grace_sec}
                if self._read_settings() != settings:
                    self._write_json(self.state_dir / "settings.json", settings)

    @classmethod
    def from_state_dir(cls, state_dir: str | Path) -> LocalScheduler:
        """An instance with the settings the app last saved there (used by supervisors)."""
        probe = cls(state_dir, _save_settings=False)
        s = probe._read_settings()
        return cls(
            state_dir,
            max_running=int(s.get("max_running", DEFAULT_MAX_RUNNING)),
            cancel_grace_sec=float(s.get("cancel_grace_sec", DEFAULT_CANCEL_GRACE_SEC)),
            _save_settings=False,
        )

    # -- Scheduler API ----------------------------------------------------------------

    def submit(self, script_path: str, run_dir: str) -> str:
        try:
            text = Path(script_path).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise SchedulerError(f"cannot read {script_path}: {exc.strerror}") from exc
        if not os.path.isdir(run_dir):
            raise SchedulerError(f"run directory {run_dir} does not exist")
        refuse_multi_node(requested_nodes(text))
        opts = sbatch_options(text)
        run_abs = os.path.abspath(run_dir)
        name = opts.get("job-name") or os.path.basename(run_abs)
        with self._locked():
            job_id = self._next_id()
            out_pat = opts.get("output") or "slurm-%j.out"
            err_pat = opts.get("error") or (
                opts["output"] if opts.get("output") else "slurm-%j.err"
            )
            job = LocalJob(
                job_id=job_id,
                run_dir=run_abs,
                script=os.path.abspath(script_path),
                name=name,
                out_path=os.path.join(run_abs, expand_log_pattern(out_pat, job_id, name)),
                err_path=os.path.join(run_abs, expand_log_pattern(err_pat, job_id, name)),
                submitted_at=time.time(),
                grace_sec=self.cancel_grace_sec,
            )
            self._save(job)
            self._advance()
        return job_id

    def poll(self, job_ids: Sequence[str]) -> dict[str, JobStatus]:
        with self._locked():
            self._advance()
            out: dict[str, JobStatus] = {}
            for jid in job_ids:
                job = self._load(jid)
                if job is not None:
                    out[jid] = self._status(job)
            return out

    def list_jobs(self) -> list[JobStatus]:
        """Every job this state directory knows, oldest first."""
        with self._locked():
            self._advance()
            return [self._status(j) for j in self._all_jobs()]

    def cancel(self, job_id: str) -> None:
        with self._locked():
            job = self._require(job_id)
            state = job.job_state
            if state.is_terminal:
                return
            if state is JobState.PENDING:
                job.state = JobState.CANCELLED.value
                job.ended_at = time.time()
                job.reason = "cancelled while pending"
                self._save(job)
                return
            self._stop(job, _ACTION_CANCEL)

    def requeue(self, job_id: str) -> None:
        with self._locked():
            job = self._require(job_id)
            state = job.job_state
            if state is JobState.PENDING:
                return
            if state.is_terminal:
                self._back_to_pending(job, "requeued")
                self._save(job)
                self._advance()
                return
            self._stop(job, _ACTION_REQUEUE)

    def version(self) -> str:
        return "local"

    def identity(self) -> str:
        # Job ids are counters in this state directory: they mean nothing elsewhere.
        return f"local:{socket.gethostname()}:{self.state_dir}"

    def partitions(self) -> list[PartitionInfo]:
        return [
            PartitionInfo(
                name="local",
                nodes=1,
                gpus_per_node=self._gpu_count(),
                cpus_per_node=os.cpu_count() or 1,
                max_time_min=None,
                max_nodes=1,
                is_default=True,
                states=("idle",),
            )
        ]

    def accounting(self, job_id: str) -> str:
        with self._locked():
            job = self._load(job_id)
        if job is None:
            return ""
        st = self._status(job)
        code = "" if job.exit_code is None else f"{job.exit_code}:{job.kill_signal or 0}"
        rows = [
            ("JobID", job.job_id),
            ("JobName", job.name),
            ("State", st.state.value),
            ("ExitCode", code),
            ("Submit", _iso(job.submitted_at)),
            ("Start", _iso(job.started_at)),
            ("End", _iso(job.ended_at)),
            ("Elapsed", _hms(st.elapsed_sec)),
            ("NNodes", "1"),
            ("NodeList", st.node_list),
            ("WorkDir", job.run_dir),
            ("Restarts", str(job.restart_count)),
        ]
        if job.reason:
            rows.append(("Reason", job.reason))
        width = max(len(k) for k, _ in rows)
        lines = ["ddp-tui local scheduler accounting"]
        lines += [f"{k.ljust(width)}  {v}" for k, v in rows]
        return "\n".join(lines) + "\n"

    # -- state files ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        # One open file description per acquisition: threads of one process exclude
        # each other too. Never nest.
        fd = os.open(self.state_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _read_settings(self) -> dict[str, Any]:
        try:
            doc = json.loads((self.state_dir / "settings.json").read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    @staticmethod
    def _write_json(path: Path, doc: Any) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(doc, fh, indent=1)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _job_path(self, job_id: str) -> Path:
        return self._jobs_dir / f"{job_id}.json"

    def _next_id(self) -> str:
        path = self.state_dir / "next_id"
        try:
            nxt = int(path.read_text().strip())
        except (OSError, ValueError):
            nxt = 1
        # Never reuse an id, even if next_id was lost.
        nxt = max([nxt, *(int(i) + 1 for i in self._job_ids())])
        path.write_text(f"{nxt + 1}\n")
        return str(nxt)

    def _job_ids(self) -> list[str]:
        ids = [n[:-5] for n in os.listdir(self._jobs_dir) if n.endswith(".json")]
        return sorted((i for i in ids if i.isdigit()), key=int)

    def _load(self, job_id: str) -> LocalJob | None:
        if not job_id.isdigit():
            return None
        path = self._job_path(job_id)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        cached = self._cache.get(job_id)
        if cached is not None and cached[0] == key:
            return replace(cached[1])  # callers change and save their copy
        try:
            doc = json.loads(path.read_text())
            job = LocalJob.from_dict(doc)
        except (OSError, ValueError, TypeError):
            return None
        self._cache[job_id] = (key, job)
        return replace(job)

    def _require(self, job_id: str) -> LocalJob:
        job = self._load(job_id)
        if job is None:
            raise SchedulerError(f"no local job {job_id} (state directory {self.state_dir})")
        return job

    def _save(self, job: LocalJob) -> None:
        path = self._job_path(job.job_id)
        self._write_json(path, asdict(job))
        self._cache.pop(job.job_id, None)

    def _all_jobs(self) -> list[LocalJob]:
        return [j for j in (self._load(i) for i in self._job_ids()) if j is not None]

    # -- queue --------------------------------------------------------------------------------

    def _advance(self) -> None:
        """Notice lost jobs, then start pending jobs while slots are free. Lock held."""
        jobs = [j for j in self._all_jobs() if not j.job_state.is_terminal]
        busy = 0
        for job in jobs:
            if job.job_state is JobState.RUNNING:
                alive = pid_alive(job.supervisor_pid, job.supervisor_start)
                if alive or self._reconcile_lost(job):
                    busy += 1
        for job in jobs:
            if busy >= self.max_running:
                break
            if job.job_state is JobState.PENDING and self._start(job):
                busy += 1

    def _start(self, job: LocalJob) -> bool:
        """Launch the job's supervisor; False if that failed (the job is then FAILED)."""
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from ddp_tui.remote.local import supervise_main; supervise_main(sys.argv[2:])"
        )
        pkg_parent = str(Path(__file__).resolve().parents[2])
        argv = [self.python, "-c", code, pkg_parent, str(self.state_dir), job.job_id]
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=_LAUNCH_TIMEOUT,
                cwd=self.state_dir,
                close_fds=True,
                check=False,
            )
            pid = int(proc.stdout.decode().strip())
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            job.state = JobState.FAILED.value
            job.ended_at = time.time()
            job.reason = f"could not start the job supervisor: {exc}"
            self._save(job)
            return False
        job.state = JobState.RUNNING.value
        job.reason = ""
        job.supervisor_pid = pid
        job.supervisor_start = process_start(pid)
        job.job_pid = job.job_start = None
        job.started_at = time.time()
        job.ended_at = None
        job.exit_code = job.kill_signal = None
        self._save(job)
        return True

    def _reconcile_lost(self, job: LocalJob) -> bool:
        """The supervisor is gone without a final word. Returns True if the job still runs."""
        if pid_alive(job.job_pid, job.job_start):
            lost = "supervisor lost; the exit code will be unknown"
            if job.reason != lost:
                job.reason = lost
                self._save(job)
            return True
        job.ended_at = time.time()
        if job.action == _ACTION_CANCEL:
            job.state = JobState.CANCELLED.value
        elif job.action == _ACTION_REQUEUE:
            self._back_to_pending(job, "requeued")
        else:
            job.state = JobState.FAILED.value
            job.reason = (
                "the job's supervisor ended without recording an exit code"
                " (killed, or the machine restarted)"
            )
        self._save(job)
        return False

    def _stop(self, job: LocalJob, action: str) -> None:
        """Ask a running job's supervisor to stop it (TERM, then KILL after the grace)."""
        job.action = action
        job.grace_sec = self.cancel_grace_sec
        self._save(job)
        sup = job.supervisor_pid
        if sup is not None and pid_alive(sup, job.supervisor_start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(sup, signal.SIGTERM)
            return
        # No supervisor to be graceful for us: stop whatever is left at once.
        if job.job_pid and pid_alive(job.job_pid, job.job_start):
            _signal_group(job.job_pid, signal.SIGKILL)
            job.job_pid = None
        self._reconcile_lost(job)

    @staticmethod
    def _back_to_pending(job: LocalJob, reason: str) -> None:
        job.state = JobState.PENDING.value
        job.reason = reason
        job.action = ""
        job.restart_count += 1
        job.supervisor_pid = job.supervisor_start = None
        job.job_pid = job.job_start = None
        job.started_at = job.ended_at = None

    def _status(self, job: LocalJob) -> JobStatus:
        state = job.job_state
        reason = job.reason
        if state is JobState.RUNNING and job.action == _ACTION_CANCEL:
            state, reason = JobState.COMPLETING, "cancelling"
        elif state is JobState.RUNNING and job.action == _ACTION_REQUEUE:
            state, reason = JobState.REQUEUED, "requeueing"
        elif state is JobState.PENDING and not reason:
            reason = "Resources"
        end = job.ended_at if job.ended_at is not None else time.time()
        elapsed = max(0.0, end - job.started_at) if job.started_at is not None else 0.0
        return JobStatus(
            job_id=job.job_id,
            state=state,
            raw_state=state.value,
            reason=reason,
            nodes=1,
            node_list=socket.gethostname() if job.started_at is not None else "",
            elapsed_sec=elapsed,
            exit_code=job.exit_code,
            start=_iso(job.started_at),
            end=_iso(job.ended_at),
            name=job.name,
        )

    def _gpu_count(self) -> int:
        if self._gpus is None:
            self._gpus = 0
            exe = shutil.which("nvidia-smi")
            if exe:
                try:
                    res = subprocess.run([exe, "-L"], capture_output=True, timeout=10, check=False)
                    if res.returncode == 0:
                        self._gpus = sum(
                            1 for ln in res.stdout.decode().splitlines() if ln.startswith("GPU ")
                        )
                except (OSError, subprocess.TimeoutExpired):
                    pass
        return self._gpus

    # -- the supervisor (runs in its own detached process) ---------------------------------

    def _job_env(self, job: LocalJob) -> dict[str, str]:
        # Variables of an enclosing Slurm allocation would mislead the job.
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        host = socket.gethostname()
        env.update(
            SLURM_JOB_ID=job.job_id,
            SLURM_JOBID=job.job_id,
            SLURM_JOB_NAME=job.name,
            SLURM_JOB_NUM_NODES="1",
            SLURM_NNODES="1",
            SLURM_JOB_NODELIST=host,
            SLURM_NODELIST=host,
            SLURM_SUBMIT_DIR=job.run_dir,
            SLURM_RESTART_COUNT=str(job.restart_count),
            DDP_TUI_SCHEDULER="local",
        )
        return env

    def _supervise(self, job_id: str) -> None:
        with self._locked():
            job = self._load(job_id)
            if job is None or job.job_state is not JobState.RUNNING:
                return
            if job.supervisor_pid != os.getpid():
                return  # a stale launch: another supervisor owns this job
            if job.action:
                self._finish(job, None)
                return
            try:
                proc = self._spawn(job)
            except OSError as exc:
                job.reason = f"could not start bash: {exc}"
                self._finish(job, 127)
                return
            job.job_pid = proc.pid
            job.job_start = process_start(proc.pid)
            job.started_at = time.time()
            self._save(job)

        # Block in waitpid; the signal handlers below stop the job meanwhile.
        _STOP.arm(proc.pid, self._job_path(job_id), self.cancel_grace_sec)
        rc = proc.wait()
        signal.setitimer(signal.ITIMER_REAL, 0)
        pgid = proc.pid
        # Like Slurm at the end of a job: nothing of it may linger.
        if group_alive(pgid):
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + min(_STOP.grace(), 5.0)
            while group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(_WAIT_TICK)
            _signal_group(pgid, signal.SIGKILL)
        with self._locked():
            job = self._load(job_id)
            if job is not None and job.supervisor_pid == os.getpid():
                self._finish(job, rc)

    def _spawn(self, job: LocalJob) -> subprocess.Popen[bytes]:
        for p in (job.out_path, job.err_path):
            os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
        # Append: a requeued job writes on into the same files, as Slurm does.
        with contextlib.ExitStack() as stack:
            out = stack.enter_context(open(job.out_path, "ab"))
            err = (
                out
                if job.err_path == job.out_path
                else stack.enter_context(open(job.err_path, "ab"))
            )
            return subprocess.Popen(
                ["bash", job.script],
                cwd=job.run_dir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=self._job_env(job),
                start_new_session=True,
                close_fds=True,
            )

    def _finish(self, job: LocalJob, rc: int | None) -> None:
        """Record how the job ended and start the next. Lock held."""
        job.ended_at = time.time()
        if rc is not None:
            job.exit_code = rc if rc >= 0 else 128 - rc
            job.kill_signal = -rc if rc < 0 else None
        if job.action == _ACTION_REQUEUE:
            self._back_to_pending(job, "requeued")
        elif job.action == _ACTION_CANCEL:
            job.state = JobState.CANCELLED.value
        elif rc == 0:
            job.state = JobState.COMPLETED.value
        else:
            job.state = JobState.FAILED.value
            if not job.reason:
                job.reason = (
                    f"killed by signal {job.kill_signal}"
                    if job.kill_signal
                    else f"exit code {job.exit_code}"
                )
        self._save(job)
        self._advance()


class _Stopper:
    """A supervisor's reaction to SIGTERM: TERM the job's group, KILL it after the grace.

    The work happens in signal handlers (they run in the main thread while it waits
    in ``waitpid``), so a waiting supervisor costs no wake-ups at all.
    """

    def __init__(self) -> None:
        self.requested = False
        self.pgid: int | None = None
        self.job_file: Path | None = None
        self.default_grace = DEFAULT_CANCEL_GRACE_SEC

    def arm(self, pgid: int, job_file: Path, default_grace: float) -> None:
        self.pgid, self.job_file, self.default_grace = pgid, job_file, default_grace
        if self.requested:  # asked to stop before the job had started
            self._term()

    def grace(self) -> float:
        # No lock here: a handler may run while the main thread holds it. The file
        # is replaced atomically, so an unlocked read sees a whole version.
        if self.job_file is None:
            return self.default_grace
        try:
            return float(json.loads(self.job_file.read_text())["grace_sec"])
        except (OSError, ValueError, KeyError, TypeError):
            return self.default_grace

    def on_stop(self, signum: int, frame: object) -> None:
        if not self.requested:
            self.requested = True
            self._term()

    def on_alarm(self, signum: int, frame: object) -> None:
        if self.pgid is not None:
            _signal_group(self.pgid, signal.SIGKILL)

    def _term(self) -> None:
        if self.pgid is not None:
            _signal_group(self.pgid, signal.SIGTERM)
            signal.setitimer(signal.ITIMER_REAL, max(self.grace(), 0.01))


_STOP = _Stopper()


def supervise_main(argv: Sequence[str]) -> None:
    """Entry point of a job's supervisor: ``<state_dir> <job_id>``.

    Prints the pid of the detached supervisor and returns at once; the detached
    process runs the job and exits when it has recorded the outcome.
    """
    state_dir, job_id = argv
    # Installed before the fork, so a cancel that comes very early is not lost.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _STOP.on_stop)
    signal.signal(signal.SIGALRM, _STOP.on_alarm)
    pid = os.fork()
    if pid:
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()
        os._exit(0)
    os.setsid()
    log = os.open(
        os.path.join(state_dir, "logs", f"{job_id}.supervisor.log"),
        os.O_WRONLY | os.O_CREAT | os.O_APPEND,
        0o600,
    )
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(devnull)
    os.close(log)
    try:
        LocalScheduler.from_state_dir(state_dir)._supervise(job_id)
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)
