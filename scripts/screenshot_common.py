"""What the README's screenshot scripts share: a scratch runs root with no profiles of the
user's, the real app on the embedded local scheduler, and waiting for runs to end."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.spec import ExperimentSpec
    from ddp_tui.tui.app import DdpTuiApp

SIZE = (132, 38)


def out_dir() -> Path:
    """Where the SVGs go: the first argument, else docs/screenshots."""
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    return out


@contextmanager
def scratch() -> Iterator[Path]:
    """A temporary root for runs and the local scheduler's state; the built-in profile only."""
    with tempfile.TemporaryDirectory(prefix="ddp-tui-shots-") as tmp:
        root = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        (root / "none.toml").write_text("")
        os.environ["DDP_TUI_CONFIG"] = str(root / "none.toml")
        yield root


def local_cluster(root: Path) -> Cluster:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster

    return Cluster.open(Profile(scheduler="local", runs_root=str(root / "runs")))


def local_app(root: Path) -> DdpTuiApp:
    from ddp_tui.config import Profile
    from ddp_tui.remote.cluster import Cluster
    from ddp_tui.tui.app import DdpTuiApp

    profile = Profile(scheduler="local", runs_root=str(root / "runs"))
    return DdpTuiApp(lambda _prompter: Cluster.open(profile), profile=profile)


def wait_ended(cluster: Cluster, run_ids: Iterable[str], what: str, timeout: float = 600) -> None:
    """Refresh until every run has ended, or stop the script saying ``what`` did not."""
    wanted = set(run_ids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = {v.run_id: v.state for v in cluster.refresh().runs}
        if all(states[r].is_terminal for r in wanted):
            return
        time.sleep(2)
    raise SystemExit(f"{what} did not finish in {timeout / 60:.0f} minutes")


def small_mlp_spec(name: str, epochs: int) -> ExperimentSpec:
    """The real trainer at its smallest: an MLP on synthetic 8x8 images, on the CPU, with
    this interpreter (seconds per run on 2 cores)."""
    from ddp_tui.spec import ExperimentSpec

    return ExperimentSpec(
        name=name,
        model="mlp",
        dataset="synthetic",
        synthetic_samples=2048,
        synthetic_val_samples=512,
        synthetic_shape="1,8,8",
        num_classes=4,
        device="cpu",
        backend="gloo",
        cpus_per_task=1,
        epochs=epochs,
        schedule="none",
        workers=0,
        python=sys.executable,
    )
