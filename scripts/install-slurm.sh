#!/usr/bin/env bash
# install-slurm.sh: install the Debian packages of a one-node Slurm (slurmctld, slurmd, srun,
# munge) for tests/test_slurm.sh, when missing. Idempotent and quiet: does nothing when they are
# all present. Services are not started here (the test starts its own daemons with its own
# configuration). Needs root (or sudo) to install.
set -eu

pkgs="slurmctld slurmd slurm-client munge"
missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "install-slurm: installing:$missing"
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo="sudo"
	else
		echo "install-slurm: need root to install:$missing" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
