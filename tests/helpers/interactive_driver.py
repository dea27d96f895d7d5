"""One interactive command through ``SSHExecutor.interactive`` on this process's terminal,
for the tests of the SSH pty bridge: ``python -m tests.helpers.interactive_driver DEST
SSH_CONFIG KNOWN_HOSTS CWD ARGV...``; exits with the remote command's status."""

from __future__ import annotations

import sys

from ddp_tui.remote.backends.ssh import SSHExecutor


def main(args: list[str]) -> int:
    destination, config, known_hosts, cwd, *argv = args
    with SSHExecutor(
        destination, ssh_config_path=config, known_hosts_path=known_hosts, connect_timeout=10
    ) as executor:
        executor.connect()
        print("driver: connected", flush=True)
        status = executor.interactive(argv, cwd=cwd or None)
    print(f"driver: exit status {status}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
