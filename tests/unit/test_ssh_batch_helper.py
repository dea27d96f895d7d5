"""The remote batch helper is a real module sent as text: what it must keep to run there.

It runs as ``python3 -I -S -c <text>`` on a host that has no ddp_tui, so it may import
builtin modules only; and its greeting must be the bytes the client waits for.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from ddp_tui.remote.backends.executor import Batch, FileRead, LocalExecutor
from ddp_tui.remote.backends.ssh import batch_helper
from ddp_tui.remote.backends.ssh.batch import (
    HELPER_HELLO,
    PY_HELPER,
    build_request,
    new_nonce,
    parse_response,
)


def test_helper_text_is_the_module_file() -> None:
    assert Path(batch_helper.__file__).read_text(encoding="utf-8") == PY_HELPER
    assert batch_helper.HELLO == HELPER_HELLO


def test_helper_imports_only_builtin_modules() -> None:
    imported: list[str] = []
    for node in ast.walk(ast.parse(PY_HELPER)):
        if isinstance(node, ast.Import):
            imported += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            imported.append(node.module or "")
    assert imported and set(imported) <= set(sys.builtin_module_names), imported


def test_served_helper_greets_then_answers_each_request_line(tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_bytes(b"0123456789")
    batch = Batch(commands=[["echo", "hi"]], reads=[FileRead(str(data), offset=3, max_bytes=4)])
    reads = [(r.path, r.offset, r.max_bytes) for r in batch.reads]
    nonces = [new_nonce(), new_nonce()]
    requests = b"".join(build_request(n, batch.commands, reads, with_script=False) for n in nonces)
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", PY_HELPER, "serve"],
        input=requests,
        capture_output=True,
        check=True,
        timeout=60,
    )
    assert proc.stdout.startswith(HELPER_HELLO)
    expected = LocalExecutor().run_batch(batch)
    answers = proc.stdout[len(HELPER_HELLO) :]
    second = answers.index(f"{nonces[1]} BEGIN".encode())
    assert parse_response(batch, nonces[0], answers[:second], b"", 0, "here") == expected
    assert parse_response(batch, nonces[1], answers[second:], b"", 0, "here") == expected
