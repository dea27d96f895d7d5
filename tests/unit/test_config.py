"""Cluster profiles from TOML: where the file is, what it holds, and errors that point at it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ddp_tui import config
from ddp_tui.config import (
    BUILTIN_PROFILE,
    ConfigError,
    Profile,
    config_path,
    default_spec,
    get_profile,
    load_profiles,
)
from ddp_tui.spec import validate

FULL = """\
default = "hpc"

[profiles.hpc]
host = "login.hpc.example.org"
runs_root = "/scratch/me/ddp-tui-runs"
python = "~/venvs/torch/bin/python"
env_setup = ["module load pytorch/2.3", "source ~/venvs/torch/bin/activate"]
partition = "gpu"
account = "proj123"
qos = "normal"
time_limit = "04:00:00"
constraint = "a100"
cpus_per_task = 16
mem = "64G"
poll_interval_sec = 10
local_max_concurrent = 2
scheduler = "slurm"

[profiles.hpc.nccl_env]
NCCL_SOCKET_IFNAME = "ib0"
NCCL_DEBUG = "WARN"

[profiles.laptop]
scheduler = "local"
poll_interval_sec = 0.5
"""


@pytest.fixture
def cfg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("")  # no profiles yet; the test writes what it needs
    monkeypatch.setenv("DDP_TUI_CONFIG", str(path))
    return path


def test_path_prefers_env_then_xdg_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DDP_TUI_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert config_path() == tmp_path / ".config" / "ddp-tui" / "config.toml"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_path() == tmp_path / "xdg" / "ddp-tui" / "config.toml"
    monkeypatch.setenv("DDP_TUI_CONFIG", str(tmp_path / "elsewhere.toml"))
    assert config_path() == tmp_path / "elsewhere.toml"


def test_no_file_means_the_builtin_local_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DDP_TUI_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "empty"))
    assert load_profiles() == {BUILTIN_PROFILE: Profile()}
    profile = get_profile()
    assert profile.host is None and profile.scheduler == "auto"
    assert profile.runs_root == "~/ddp-tui-runs" and profile.poll_interval_sec == 5


def test_full_profile_is_read(cfg: Path) -> None:
    cfg.write_text(FULL)
    profiles = load_profiles()
    assert set(profiles) == {"hpc", "laptop", BUILTIN_PROFILE}
    hpc = get_profile()
    assert hpc.name == "hpc" and hpc.is_remote and hpc.host == "login.hpc.example.org"
    assert hpc.env_setup == ("module load pytorch/2.3", "source ~/venvs/torch/bin/activate")
    assert hpc.nccl_env_dict == {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_DEBUG": "WARN"}
    assert (hpc.poll_interval_sec, hpc.local_max_concurrent, hpc.scheduler) == (10, 2, "slurm")
    assert get_profile("laptop").poll_interval_sec == 2  # clamped: no squeue hammering


def test_only_profile_is_the_default_and_local_stays_available(cfg: Path) -> None:
    cfg.write_text('[profiles.one]\nhost = "h"\n')
    assert get_profile().name == "one"
    assert get_profile("local") == Profile()


def test_default_spec_takes_the_profile_defaults(cfg: Path) -> None:
    cfg.write_text(FULL)
    spec = default_spec(get_profile("hpc"))
    assert validate(spec) == []
    assert (spec.partition, spec.account, spec.qos, spec.time_limit) == (
        "gpu",
        "proj123",
        "normal",
        "04:00:00",
    )
    assert spec.python == "~/venvs/torch/bin/python" and spec.cpus_per_task == 16
    assert spec.nccl_env_dict["NCCL_SOCKET_IFNAME"] == "ib0" and spec.device == "cuda"
    local = default_spec(get_profile("laptop"))
    assert (local.device, local.backend) == ("cpu", "gloo") and validate(local) == []
    assert default_spec(Profile(), scheduler="local").device == "cpu"
    assert default_spec(Profile(device="cuda"), scheduler="local").device == "cuda"


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ('[profiles.a]\nhost = "x"\nhost = "y"\n', 3, "", "invalid TOML"),
        ("[profiles.a]\nscheduler = 'pbs'\n", 2, "profiles.a.scheduler", "auto, slurm, local"),
        (
            "[profiles.a]\nhost = 'h'\n\npoll_interval_sec = 'fast'\n",
            4,
            "profiles.a.poll_interval_sec",
            "must be a number",
        ),
        ("[profiles.a]\nenv_setup = 'module load x'\n", 2, "profiles.a.env_setup", "list of"),
        (
            "[profiles.a]\nlocal_max_concurrent = 0\n",
            2,
            "profiles.a.local_max_concurrent",
            "at least 1",
        ),
        ("[profiles.a]\npartiton = 'gpu'\n", 2, "profiles.a.partiton", "allowed: account"),
        ("[profiles.a]\npartition = 'gpu debug'\n", 2, "profiles.a.partition", "partition name"),
        ("[profiles.a]\ntime_limit = '1h'\n", 2, "profiles.a.time_limit", "HH:MM:SS"),
        (
            "[profiles.a]\n[profiles.a.nccl_env]\nPATH = '/x'\n",
            2,
            "profiles.a.nccl_env",
            "set by the job script",
        ),
        ("[profiles.a]\nenv_setup = ['echo \"open']\n", 2, "profiles.a.env_setup", "bash"),
        ('default = "nope"\n[profiles.a]\n', 1, "default", "have: a, local"),
        ("colour = 'red'\n", 1, "colour", "unknown top-level key"),
        ("[profiles.'bad name']\n", 1, "profiles.bad name", "profile names"),
        (
            "[profiles.a]\nstall_after_min = -1\n",
            2,
            "profiles.a.stall_after_min",
            "at least 0",
        ),
        (
            "[profiles.a]\nstall_after_min = '10m'\n",
            2,
            "profiles.a.stall_after_min",
            "number of minutes",
        ),
        ("[profiles.a]\nstall_after_min = nan\n", 2, "profiles.a.stall_after_min", "minutes"),
        ("[profiles.a]\ncancel_stalled = 1\n", 2, "profiles.a.cancel_stalled", "true or false"),
        # inf would mean the app never refreshes again; nan is no time at all.
        ("[profiles.a]\npoll_interval_sec = inf\n", 2, "profiles.a.poll_interval_sec", "at most"),
        ("[profiles.a]\npoll_interval_sec = nan\n", 2, "profiles.a.poll_interval_sec", "seconds"),
        ("[profiles.a]\npoll_interval_sec = 0\n", 2, "profiles.a.poll_interval_sec", "more than 0"),
        ("[profiles.a]\npoll_interval_sec = 3601\n", 2, "profiles.a.poll_interval_sec", "3600"),
        ("[profiles.a]\nstall_after_min = inf\n", 2, "profiles.a.stall_after_min", "minutes"),
        ("[profiles.a]\nruns_root = ''\n", 2, "profiles.a.runs_root", "non-empty"),
        ("[profiles.a]\nlocal_state_dir = 3\n", 2, "profiles.a.local_state_dir", "a path"),
    ],
)
def test_errors_name_file_line_key_and_what_is_allowed(
    cfg: Path, text: str, line: int, key: str, words: str
) -> None:
    cfg.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_profiles()
    e = err.value
    assert (e.path, e.line, e.key) == (cfg, line, key)
    assert words in e.message
    assert str(e).startswith(f"{cfg}:{line}: ")


def test_unknown_profile_name_lists_the_known_ones(cfg: Path) -> None:
    cfg.write_text(FULL)
    with pytest.raises(ConfigError, match="no profile 'hcp'; have: hpc, laptop, local"):
        get_profile("hcp")


def test_unreadable_and_non_utf8_files_are_config_errors(cfg: Path) -> None:
    cfg.write_bytes(b"default = '\xff'\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_profiles()
    cfg.unlink()
    cfg.mkdir()
    with pytest.raises(ConfigError, match="cannot read"):
        load_profiles()


def test_every_profile_setting_is_readable_from_toml() -> None:
    names = {f.name for f in dataclasses.fields(Profile)} - {"name"}
    assert set(config._FIELDS) == names


def test_the_stall_rule_is_on_after_10_minutes_and_never_cancels_by_default(cfg: Path) -> None:
    profile = get_profile()
    assert (profile.stall_after_min, profile.stall_after_sec) == (10.0, 600.0)
    assert profile.cancel_stalled is False


def test_the_stall_settings_are_read(cfg: Path) -> None:
    cfg.write_text(
        "[profiles.a]\nstall_after_min = 2.5\ncancel_stalled = true\n"
        "[profiles.off]\nstall_after_min = 0\n"
    )
    a = get_profile("a")
    assert (a.stall_after_min, a.stall_after_sec, a.cancel_stalled) == (2.5, 150.0, True)
    off = get_profile("off")
    assert (off.stall_after_min, off.stall_after_sec, off.cancel_stalled) == (0.0, 0.0, False)


def test_a_runs_root_that_is_a_regular_file_is_refused_naming_key_and_path(
    cfg: Path, tmp_path: Path
) -> None:
    a_file = tmp_path / "runs"
    a_file.write_text("not a directory")
    cfg.write_text(f"[profiles.a]\nscheduler = 'local'\nruns_root = '{a_file}'\n")
    with pytest.raises(ConfigError) as err:
        load_profiles()
    assert (err.value.key, err.value.line) == ("profiles.a.runs_root", 3)
    assert f"{a_file} exists and is not a directory" in err.value.message
    # Beneath a file, it cannot be created either.
    cfg.write_text(f"[profiles.a]\nruns_root = '{a_file}/sub'\n")
    with pytest.raises(ConfigError, match=f"cannot be created: {a_file} is not a directory"):
        load_profiles()


def test_a_runs_root_that_can_be_created_or_is_remote_is_accepted(
    cfg: Path, tmp_path: Path
) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    cfg.write_text(
        f"[profiles.new]\nruns_root = '{tmp_path}/not/yet/there'\n"
        f"[profiles.remote]\nhost = 'h'\nruns_root = '{a_file}'\n"  # a path over there
    )
    profiles = load_profiles()
    assert profiles["new"].runs_root == f"{tmp_path}/not/yet/there"
    assert not (tmp_path / "not").exists()  # reading the config creates nothing
    assert profiles["remote"].runs_root == str(a_file)


def test_a_config_variable_naming_a_missing_file_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "typo.toml"
    monkeypatch.setenv("DDP_TUI_CONFIG", str(missing))
    with pytest.raises(ConfigError) as err:
        get_profile()
    assert err.value.path == missing
    assert str(err.value).startswith(f"{missing}: DDP_TUI_CONFIG names this file")


def test_the_local_state_directory_is_a_setting(
    cfg: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg.write_text("[profiles.a]\nlocal_state_dir = '~/state'\n")
    assert get_profile("a").local_state_dir == str(tmp_path / "state")
    assert get_profile("local").local_state_dir is None  # the default under XDG_STATE_HOME
    (tmp_path / "state").write_text("")
    with pytest.raises(ConfigError) as err:
        get_profile("a")
    assert err.value.key == "profiles.a.local_state_dir"
    assert "is not a directory" in err.value.message
