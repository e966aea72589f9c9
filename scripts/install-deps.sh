#!/usr/bin/env bash
# install-deps.sh [PKG...]: install the Debian packages gice needs to build and test (or the ones
# named), when missing.
# Idempotent; does nothing when everything is present. Needs root (or sudo) to install.
set -eu

pkgs="build-essential pkg-config libfabric-dev libfabric-bin liburing-dev check libsubunit-dev"
pkgs="$pkgs iproute2 procps iputils-ping"
# packet loss inside network namespaces (tests/test_netns_loss.sh; this kernel has no netem)
pkgs="$pkgs nftables"
# PMIx bootstrap, and Open MPI's mpirun for the test that launches gice through it
pkgs="$pkgs libpmix-dev openmpi-bin"
# PNG plots of scripts/compare.sh (tests/test_compare.sh)
pkgs="$pkgs gnuplot-nox"
# install-deps.sh PKG...: those packages instead (scripts/install-slurm.sh)
[ $# -gt 0 ] && pkgs="$*"
missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

echo "install-deps: installing:$missing"
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo="sudo"
	else
		echo "install-deps: need root to install:$missing" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
