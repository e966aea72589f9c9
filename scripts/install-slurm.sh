#!/usr/bin/env bash
# install-slurm.sh: install the Debian packages of a one-node Slurm (slurmctld, slurmd, srun,
# munge) for tests/test_slurm.sh, when missing. Idempotent and quiet: does nothing when they are
# all present. Services are not started here (the test starts its own daemons with its own
# configuration). Needs root (or sudo) to install.
set -eu
exec bash "$(dirname "$0")/install-deps.sh" slurmctld slurmd slurm-client munge
