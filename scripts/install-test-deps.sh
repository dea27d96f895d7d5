#!/usr/bin/env bash
# Install the system packages the integration tests use: a real Slurm cluster
# (tests/fixtures/slurm_cluster.py), a real OpenSSH server, tmux, and podman for container jobs.
# Idempotent: does nothing when everything is installed. Without root or apt-get it
# installs nothing and says so; the tests that need these packages then skip.
set -euo pipefail

PACKAGES=(
    slurmctld slurmd slurm-client munge   # not slurm-wlm: that pulls in 43 packages
    slurmdbd mariadb-server               # real sacct needs accounting in a database
    openssh-server openssh-client passwd libpam-modules socat   # sshd tests: PAM users, ProxyCommand
    iproute2                              # ip netns / veth / bridge for the nodes
    tmux
    podman runc   # container jobs (tests/fixtures/podman_image.py); runc: crun fails on a cgroup v1 hybrid
)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed"; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-test-deps: all present (${PACKAGES[*]})"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-test-deps: not root; skipping ${missing[*]} (the Slurm/SSH tests will skip)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-test-deps: no apt-get; install ${missing[*]} by hand (the Slurm/SSH tests will skip)"
    exit 0
fi

echo "install-test-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A fresh image has no package lists; refresh only when an install cannot find them.
if ! apt-get install -y -q --no-install-recommends "${missing[@]}"; then
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
