"""The spec is a pure domain: it and the config it feeds load nothing of the cluster layer
(``ddp_tui.remote``) or the app (``ddp_tui.tui``), checked in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["ddp_tui.spec", "ddp_tui.config"])
def test_domain_imports_no_remote_or_tui(module: str) -> None:
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m.startswith(("ddp_tui.remote", "ddp_tui.tui"))] == []


def test_partition_info_is_the_domains() -> None:
    from ddp_tui.remote.backends.scheduler import PartitionInfo as FromScheduler
    from ddp_tui.spec import PartitionInfo

    assert FromScheduler is PartitionInfo
