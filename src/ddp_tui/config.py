"""Cluster profiles: where runs go and how jobs start, from TOML in the user config dir.

The file is ``$DDP_TUI_CONFIG``, else ``$XDG_CONFIG_HOME/ddp-tui/config.toml``, else
``~/.config/ddp-tui/config.toml``. Without a file there is one built-in profile, ``local``:
this machine, with Slurm when ``sbatch`` is found and the embedded scheduler otherwise::

    default = "mycluster"            # optional; the profile used when none is named

    [profiles.mycluster]
    host = "login.mycluster.edu"     # omit for this machine; else an ~/.ssh/config host
    runs_root = "~/ddp-tui-runs"
    python = "python3"
    env_setup = ["module load pytorch/2.3", "source ~/venv/bin/activate"]
    partition = "gpu"
    account = "proj123"
    time_limit = "02:00:00"
    scheduler = "slurm"              # auto | slurm | local
    poll_interval_sec = 5            # 2 to 3600; below 2 counts as 2: admins throttle fast pollers
    stall_after_min = 10             # a running job quiet this long is "stalled"; 0: never
    cancel_stalled = false           # true: cancel a stalled job instead of only marking it
    check_python = true              # before a submit: does the job's python have torch?
    env_check_wait_sec = 120         # how long a plan waits for the environment check job
                                     # (issue 36: venv/conda on Slurm, modules, containers)
    advisor_threshold = 0.8          # the scaling advice's efficiency floor, above 0 and at most 1
    local_state_dir = "~/.ddp-state" # the local scheduler's job files (default: under
                                     # $XDG_STATE_HOME, else ~/.local/state)
    notify_command = "ntfy publish --title ddp-tui mytopic"  # run on this machine, with
                                     # each event as one JSON object on stdin
    desktop_notify = "auto"          # auto | osc9 | osc777 | off (docs/notifications.md)

    [profiles.mycluster.nccl_env]
    NCCL_SOCKET_IFNAME = "ib0"
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ddp_tui.errors import DdpTuiError

if TYPE_CHECKING:
    # Imported where used: the default profile (no config file) starts the app without the
    # spec package, which the connect worker loads after the first paint.
    from ddp_tui.spec import ExperimentSpec, FieldError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 only
    import tomli as tomllib

__all__ = [
    "BUILTIN_PROFILE",
    "MIN_POLL_INTERVAL_SEC",
    "SCHEDULERS",
    "ConfigError",
    "Profile",
    "config_path",
    "default_spec",
    "dir_problem",
    "get_profile",
    "load_profiles",
]

SCHEDULERS: Final = ("auto", "slurm", "local")
#: How a desktop notification reaches the terminal: picked by the terminal, OSC 9, OSC 777,
#: or none (docs/notifications.md).
DESKTOP_NOTIFY: Final = ("auto", "osc9", "osc777", "off")
MIN_POLL_INTERVAL_SEC: Final = 2.0
#: An hour: a slower refresh is a screen that looks frozen, not a setting.
MAX_POLL_INTERVAL_SEC: Final = 3600.0
BUILTIN_PROFILE: Final = "local"
_PROFILE_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class ConfigError(DdpTuiError):
    """A problem in the config file: names the file, the line where known, and the key."""

    title = "Profile"

    def __init__(self, path: Path, message: str, *, key: str = "", line: int | None = None):
        self.path = path
        self.key = key
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


@dataclass(frozen=True)
class Profile:
    """One cluster (or this machine) and the defaults for specs submitted there."""

    name: str = BUILTIN_PROFILE
    host: str | None = None  # None: this machine
    runs_root: str = "~/ddp-tui-runs"
    python: str = "python3"
    env_setup: tuple[str, ...] = ()
    nccl_env: tuple[tuple[str, str], ...] = ()
    partition: str = ""
    account: str = ""
    qos: str = ""
    time_limit: str = "01:00:00"
    constraint: str = ""
    cpus_per_task: int | None = None
    mem: str = ""
    device: str | None = None  # None: cuda on Slurm, cpu for the local scheduler
    poll_interval_sec: float = 5.0
    local_max_concurrent: int = 1
    scheduler: str = "auto"
    # A running job with no new log bytes, progress or heartbeat for this long is stalled
    # (0: the rule is off); cancel_stalled then cancels it, else it is only marked.
    stall_after_min: float = 10.0
    cancel_stalled: bool = False
    # Before a submit, the job's python is checked for torch and torchvision once per
    # interpreter (remote/submit/prequeue.py); false: the user knows better, never check.
    check_python: bool = True
    # The environment check (remote/submit/env_preflight.py) is a one-node job: a plan waits
    # this long for its answer, then goes on with a warning (0: never wait).
    env_check_wait_sec: float = 120.0
    # The local scheduler's state directory (job files, its lock); None: the default
    # under $XDG_STATE_HOME. A key of its own, so that an unwritable HOME can be avoided.
    local_state_dir: str | None = None
    # The efficiency the scaling advice keeps to (``ddp-tui advise --threshold`` overrides).
    advisor_threshold: float = 0.8
    # A shell command run on this machine for each run end, stall and finished group, with
    # the event as one JSON object on stdin (empty: none); and the desktop notification's
    # escape sequence (docs/notifications.md).
    notify_command: str = ""
    desktop_notify: str = "auto"

    def __post_init__(self) -> None:
        # Admins throttle users who poll squeue faster than every few seconds.
        if self.poll_interval_sec < MIN_POLL_INTERVAL_SEC:
            object.__setattr__(self, "poll_interval_sec", MIN_POLL_INTERVAL_SEC)

    @property
    def is_remote(self) -> bool:
        return self.host is not None

    @property
    def nccl_env_dict(self) -> dict[str, str]:
        return dict(self.nccl_env)

    @property
    def stall_after_sec(self) -> float:
        """``stall_after_min`` in seconds; 0 when the stall rule is off."""
        return self.stall_after_min * 60.0


def _explicit_path() -> Path | None:
    """The file ``$DDP_TUI_CONFIG`` names, if it names one."""
    explicit = os.environ.get("DDP_TUI_CONFIG")
    return Path(explicit).expanduser() if explicit else None


def config_path() -> Path:
    """Where the config file is read from (it need not exist, unless ``$DDP_TUI_CONFIG``
    names it)."""
    explicit = _explicit_path()
    if explicit is not None:
        return explicit
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "ddp-tui" / "config.toml"


# --- reading ----------------------------------------------------------------------------------


def _header_re(table: str) -> re.Pattern[str]:
    parts = [rf"""(?:{re.escape(p)}|"{re.escape(p)}"|'{re.escape(p)}')""" for p in table.split(".")]
    return re.compile(r"\s*\[\s*" + r"\s*\.\s*".join(parts) + r"\s*\]")


def _key_line(text: str, table: str, key: str | None) -> int | None:
    """Best-effort line of ``key`` in ``[table]`` (tomllib keeps no positions)."""
    lines = text.splitlines()
    header = _header_re(table)
    start = next((i for i, ln in enumerate(lines) if header.match(ln)), None)
    if start is None:
        return None
    if key is None:
        return start + 1
    assign = re.compile(r"\s*" + re.escape(key) + r"\s*=")
    for i in range(start + 1, len(lines)):
        if lines[i].lstrip().startswith("["):
            break
        if assign.match(lines[i]):
            return i + 1
    sub = _header_re(f"{table}.{key}")  # a sub-table such as [profiles.x.nccl_env]
    found = next((i for i, ln in enumerate(lines) if sub.match(ln)), None)
    return (found if found is not None else start) + 1


def _top_key_line(text: str, key: str) -> int | None:
    assign = re.compile(r"\s*" + re.escape(key) + r"\s*=")
    for i, ln in enumerate(text.splitlines()):
        if ln.lstrip().startswith("["):
            return None
        if assign.match(ln):
            return i + 1
    return None


def _str(v: object) -> str:
    if not isinstance(v, str):
        raise TypeError("must be a string")
    return v


def _opt_str(v: object) -> str | None:
    if v is None or v == "":
        return None
    return _str(v)


def _path(v: object) -> str:
    if not isinstance(v, str) or not v or "\0" in v:
        raise TypeError("must be a path (a non-empty string)")
    return v


def _local_path(v: object) -> str:
    # This machine's path: "~" is this user's home, now.
    return os.path.expanduser(_path(v))


def dir_problem(path: str | Path) -> str | None:
    """Why ``path`` can be neither used as a directory nor created as one; None if it can."""
    p = Path(path)
    try:
        if p.is_dir():
            return None
        if p.exists() or p.is_symlink():
            return f"{p} exists and is not a directory"
        parent = p.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return f"{p} cannot be created: {parent} is not a directory"
    except OSError as e:  # a symlink loop, a path too long, no permission to look
        return f"{p} cannot be used: {e.strerror or e}"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{p} cannot be created: {parent} is not writable"
    return None


def _str_list(v: object) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise TypeError('must be a list of strings, e.g. ["module load pytorch"]')
    return tuple(v)


def _env(v: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        raise TypeError('must be a table of NAME = "value" strings')
    return tuple((str(k), str(x)) for k, x in v.items())


def _seconds(v: object) -> float:
    # TOML has nan and inf: inf would mean the app never refreshes again.
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float)
        or not (math.isfinite(v) and 0 < v <= MAX_POLL_INTERVAL_SEC)
    ):
        raise TypeError(
            f"must be a number of seconds, more than 0 and at most {MAX_POLL_INTERVAL_SEC:g}"
            f" (below {MIN_POLL_INTERVAL_SEC:g} counts as {MIN_POLL_INTERVAL_SEC:g})"
        )
    return float(v)


def _minutes(v: object) -> float:
    # TOML has nan and inf; neither is a time.
    if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v >= 0):
        raise TypeError("must be a number of minutes, at least 0 (0 turns it off)")
    return float(v)


def _wait_seconds(v: object) -> float:
    # TOML has nan and inf: inf would hold every plan until the job answers.
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float)
        or not (math.isfinite(v) and 0 <= v <= MAX_POLL_INTERVAL_SEC)
    ):
        raise TypeError(
            f"must be a number of seconds, at least 0 and at most {MAX_POLL_INTERVAL_SEC:g}"
        )
    return float(v)


def _fraction(v: object) -> float:
    # TOML has nan and inf; neither is an efficiency.
    if (
        isinstance(v, bool)
        or not isinstance(v, int | float)
        or not (math.isfinite(v) and 0 < v <= 1)
    ):
        raise TypeError("must be a fraction, more than 0 and at most 1 (0.8: 80% efficiency)")
    return float(v)


def _bool(v: object) -> bool:
    if not isinstance(v, bool):
        raise TypeError("must be true or false")
    return v


def _pos_int(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise TypeError("must be a whole number of at least 1")
    return v


def _opt_pos_int(v: object) -> int | None:
    return None if v is None else _pos_int(v)


def _scheduler(v: object) -> str:
    if v not in SCHEDULERS:
        raise TypeError(f"must be one of {', '.join(SCHEDULERS)}")
    return str(v)


def _desktop_notify(v: object) -> str:
    if v not in DESKTOP_NOTIFY:
        raise TypeError(f"must be one of {', '.join(DESKTOP_NOTIFY)}")
    return str(v)


def _device(v: object) -> str | None:
    if v is None or v == "":
        return None
    if v not in ("cuda", "cpu"):
        raise TypeError("must be cuda or cpu")
    return str(v)


_FIELDS: Final[dict[str, Callable[[object], Any]]] = {
    "host": _opt_str,
    "runs_root": _path,
    "python": _str,
    "env_setup": _str_list,
    "nccl_env": _env,
    "partition": _str,
    "account": _str,
    "qos": _str,
    "time_limit": _str,
    "constraint": _str,
    "cpus_per_task": _opt_pos_int,
    "mem": _str,
    "device": _device,
    "poll_interval_sec": _seconds,
    "local_max_concurrent": _pos_int,
    "scheduler": _scheduler,
    "stall_after_min": _minutes,
    "cancel_stalled": _bool,
    "check_python": _bool,
    "env_check_wait_sec": _wait_seconds,
    "local_state_dir": _local_path,
    "advisor_threshold": _fraction,
    "notify_command": _str,
    "desktop_notify": _desktop_notify,
}
#: Directories on this machine that a profile without a host must be able to use.
_LOCAL_DIRS: Final = ("runs_root", "local_state_dir")
#: Profile fields that become spec fields; checked with the spec's own validation.
_SPEC_FIELDS: Final = (
    "python",
    "env_setup",
    "nccl_env",
    "partition",
    "account",
    "qos",
    "time_limit",
    "constraint",
    "cpus_per_task",
    "mem",
)


def _parse_profile(name: str, table: Mapping[str, Any], path: Path, text: str) -> Profile:
    tname = f"profiles.{name}"
    if not _PROFILE_NAME_RE.fullmatch(name):
        raise ConfigError(
            path,
            "profile names use letters, digits, '_', '.' or '-'",
            key=tname,
            line=_key_line(text, tname, None),
        )
    values: dict[str, Any] = {}
    for key, raw in table.items():
        conv = _FIELDS.get(key)
        if conv is None:
            raise ConfigError(
                path,
                f"unknown setting; allowed: {', '.join(sorted(_FIELDS))}",
                key=f"{tname}.{key}",
                line=_key_line(text, tname, key),
            )
        try:
            values[key] = conv(raw)
        except TypeError as e:
            raise ConfigError(
                path,
                f"{e}, got {raw!r}",
                key=f"{tname}.{key}",
                line=_key_line(text, tname, key),
            ) from None
    profile = Profile(name=name, **values)
    for key in _LOCAL_DIRS:
        value = values.get(key)
        problem = (
            dir_problem(os.path.expanduser(value)) if value and not profile.is_remote else None
        )
        if problem:
            raise ConfigError(
                path,
                f"must be a directory, or one that can be created: {problem}",
                key=f"{tname}.{key}",
                line=_key_line(text, tname, key),
            )
    # Profile values end up in job scripts: hold them to the spec's rules now, not at submit.
    from ddp_tui.spec import validate

    problems = [e for e in validate(default_spec(profile)) if e.field in _SPEC_FIELDS]
    if problems:
        first: FieldError = problems[0]
        raise ConfigError(
            path,
            "; ".join(f"{e.field}: {e.message}" for e in problems),
            key=f"{tname}.{first.field}",
            line=_key_line(text, tname, first.field),
        )
    return profile


def load_profiles(path: Path | None = None) -> dict[str, Profile]:
    """Every profile in the config file, plus the built-in ``local`` one unless redefined.

    Raises :class:`ConfigError` naming the file, line and key for a malformed file."""
    return _load(config_path() if path is None else path)[0]


def _load(path: Path) -> tuple[dict[str, Profile], str | None]:
    builtin = {BUILTIN_PROFILE: Profile(name=BUILTIN_PROFILE)}
    try:
        raw_bytes = path.read_bytes()
    except FileNotFoundError:
        if path == _explicit_path():
            raise ConfigError(
                path,
                "DDP_TUI_CONFIG names this file, which does not exist"
                " (create it, or unset DDP_TUI_CONFIG for the default config file)",
            ) from None
        return builtin, None
    except OSError as e:
        raise ConfigError(path, f"cannot read: {e.strerror or e}") from None
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(path, f"is not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # Python < 3.14 only puts the position in the message: "... (at line 3, column 7)".
        m = re.search(r"\(at line (\d+), column \d+\)", str(e))
        line = int(m.group(1)) if m else None
        raise ConfigError(path, f"invalid TOML: {e}", line=line) from None

    default = data.get("default")
    for key in data:
        if key not in ("default", "profiles"):
            raise ConfigError(
                path,
                "unknown top-level key; allowed: default, [profiles.NAME] tables",
                key=key,
                line=_top_key_line(text, key) or _key_line(text, key, None),
            )
    if default is not None and not isinstance(default, str):
        raise ConfigError(
            path, "must be a profile name", key="default", line=_top_key_line(text, "default")
        )
    tables = data.get("profiles", {})
    if not isinstance(tables, dict):
        raise ConfigError(path, "must be tables: [profiles.NAME]", key="profiles")
    profiles = dict(builtin)
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise ConfigError(
                path,
                "must be a table: [profiles.NAME]",
                key=f"profiles.{name}",
                line=_top_key_line(text, "profiles"),
            )
        profiles[name] = _parse_profile(name, table, path, text)
    if default is not None and default not in profiles:
        raise ConfigError(
            path,
            f"no profile {default!r}; have: {', '.join(sorted(profiles))}",
            key="default",
            line=_top_key_line(text, "default"),
        )
    if default is None:
        user = [n for n in tables if n != BUILTIN_PROFILE]
        default = user[0] if len(user) == 1 else None
    return profiles, default


def get_profile(name: str | None = None, path: Path | None = None) -> Profile:
    """The named profile; with no name, the file's ``default``, else its only profile, else
    the built-in ``local``. Raises :class:`ConfigError` for an unknown name."""
    path = config_path() if path is None else path
    profiles, default = _load(path)
    if name is None:
        return profiles[default or BUILTIN_PROFILE]
    try:
        return profiles[name]
    except KeyError:
        raise ConfigError(
            path, f"no profile {name!r}; have: {', '.join(sorted(profiles))}"
        ) from None


def default_spec(profile: Profile, *, scheduler: str | None = None) -> ExperimentSpec:
    """A starting spec for ``profile``. ``scheduler`` is the resolved kind ("slurm"/"local")
    when known; it picks the device when the profile does not (the local scheduler: cpu/gloo)."""
    kind = scheduler or profile.scheduler
    device = profile.device or ("cpu" if kind == "local" else "cuda")
    from ddp_tui.spec import ExperimentSpec

    spec = ExperimentSpec(
        python=profile.python,
        env_setup=profile.env_setup,
        nccl_env=profile.nccl_env,
        partition=profile.partition,
        account=profile.account,
        qos=profile.qos,
        time_limit=profile.time_limit,
        constraint=profile.constraint,
        mem=profile.mem,
        device=device,
        backend="gloo" if device == "cpu" else "auto",
    )
    if profile.cpus_per_task is not None:
        spec = spec.replace(cpus_per_task=profile.cpus_per_task)
    return spec
