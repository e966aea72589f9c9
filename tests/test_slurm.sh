#!/usr/bin/env bash
# Description: gice programs launched by Slurm's srun. A one-node Slurm (Debian packages,
# installed by scripts/install-slurm.sh when missing) is started here with its configuration and
# state in a temporary directory, no cgroups (proctrack/linuxproc, task/none), one node of 2 CPUs
# on 127.0.0.1, and its own munged; all of it is stopped at the end. Then:
#   - srun --mpi=pmix -n 2: a put ping-pong with every payload byte checked (gice-bench --check);
#   - srun --mpi=pmix -n 4 --overcommit: the 4-rank training-step ring (gice-demo);
#   - a rank that never arrives: the others fail within 2x GICE_BOOTSTRAP_TIMEOUT_MS naming it;
#   - srun -n 2 without --mpi=pmix: every task fails gice_init saying how to launch, instead of
#     running two one-rank jobs that exit 0.
# Skipped (77) with the reason when not root, gice has no PMIx, or Slurm cannot be installed or
# started. Every command is bounded by a timeout: a hung daemon cannot hang the run.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/launch_checks.sh
factor=${CK_TIMEOUT_MULTIPLIER:-1} # sanitized builds run slower

skip() {
	echo "skipped: $*"
	exit 77
}
[ "$(id -u)" = 0 ] || skip "needs root (starts munged, slurmctld and slurmd)"
pkg-config --exists pmix 2>/dev/null || skip "gice was built without PMIx (Debian libpmix-dev)"
if ! out=$(timeout 300 scripts/install-slurm.sh 2>&1); then
	echo "$out"
	skip "cannot install Slurm (scripts/install-slurm.sh failed)"
fi
for c in munged slurmctld slurmd srun sinfo; do
	command -v $c >/dev/null 2>&1 || skip "$c is not installed"
done

tmp=$(mktemp -d /tmp/gice-slurm.XXXXXX)
chmod 711 "$tmp" # munged wants its socket's directory searchable by all
daemons=""
cleanup() {
	for p in $daemons; do kill -TERM "$p" 2>/dev/null; done
	for _ in $(seq 30); do
		alive=""
		for p in $daemons; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
		[ -z "$alive" ] && break
		sleep 0.1
	done
	for p in $alive; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# two TCP ports nobody listens on (for slurmctld and slurmd)
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 20000))
		ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo $p; return; }
	done
	echo 0
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
[ "$ctld_port" = "$slurmd_port" ] && slurmd_port=$((ctld_port + 1))
node=$(hostname -s)
mkdir -p "$tmp/state" "$tmp/spool"
cp /etc/munge/munge.key "$tmp/munge.key" 2>/dev/null || skip "no munge key (/etc/munge/munge.key)"
chmod 600 "$tmp/munge.key"

cat >"$tmp/slurm.conf" <<EOF
ClusterName=gicetest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge.sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SwitchType=switch/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
InactiveLimit=0
KillWait=2
MinJobAge=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=gice Nodes=$node Default=YES MaxTime=5 State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf

# the daemons in the foreground of background jobs, each bounded in case cleanup never runs
timeout 300 munged -F --force --socket="$tmp/munge.sock" --key-file="$tmp/munge.key" \
	--pid-file="$tmp/munged.pid" --seed-file="$tmp/munged.seed" --log-file="$tmp/munged.log" \
	>"$tmp/munged.out" 2>&1 &
daemons="$daemons $!"
timeout 300 slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
daemons="$daemons $!"
timeout 300 slurmd -D -f "$SLURM_CONF" -N "$node" >"$tmp/slurmd.out" 2>&1 &
daemons="$daemons $!"

up=0
for _ in $(seq 100); do
	state=$(timeout 5 sinfo -h -n "$node" -o %t 2>/dev/null)
	case $state in idle*) up=1; break;; esac
	sleep 0.2
done
if [ $up = 0 ]; then
	for f in munged.out slurmctld.log slurmctld.out slurmd.log slurmd.out; do
		[ -s "$tmp/$f" ] && { echo "--- $f"; tail -15 "$tmp/$f"; }
	done
	skip "Slurm did not start: node $node is '${state:-unknown}' after 20 s (logs above)"
fi
if ! timeout 10 srun --mpi=list 2>&1 | grep -q pmix; then
	skip "this Slurm has no PMIx plugin (srun --mpi=list)"
fi
echo "slurm: node $node idle (slurmctld port $ctld_port, slurmd port $slurmd_port)"
fail=0

echo "== srun --mpi=pmix -n 2: put ping-pong, payload checked"
out=$(timeout 60 srun --mpi=pmix -n 2 "$build/bin/gice-bench" put --sizes 8,65536,1048576 --iters 200 --check 2>&1)
rc=$?
echo "$out"
check_pingpong "srun --mpi=pmix" "$rc" "$out"

echo "== srun --mpi=pmix -n 4 --overcommit: training-step ring"
out=$(timeout 60 srun --mpi=pmix -n 4 --overcommit "$build/bin/gice-demo" 2>&1)
rc=$?
echo "$out" | grep -E "gice demo|data check|error"
check_ring "srun --mpi=pmix" "$rc" "$out"

echo "== srun --mpi=pmix -n 3: rank 1 never arrives, the others name it within 2x the bootstrap timeout"
tmo=2000
for attempt in 1 2 3; do
	start=$(date +%s%N)
	out=$(GICE_BOOTSTRAP_TIMEOUT_MS=$tmo timeout 60 srun --mpi=pmix -n 3 --overcommit --kill-on-bad-exit=1 \
		sh -c 'if [ "$SLURM_PROCID" = 1 ]; then exec sleep 30; fi; exec "$0"' "$build/bin/gice-demo" 2>&1 |
		while IFS= read -r l; do echo "$((($(date +%s%N) - start) / 1000000)) $l"; done)
	total=$((($(date +%s%N) - start) / 1000000))
	echo "$out" | grep -v -E '^[0-9]+ *$'
	# Slurm failing to start the step at all (a loaded slurmd: no task ran) says nothing
	# about gice: the step again
	echo "$out" | grep -q -E 'task [0-9]+ launch failed|aborted before step completely launched' || break
	echo "srun could not launch the step (attempt $attempt): again"
	sleep 2
done
echo "srun done after $total ms"
check_missing_rank "$out" $((2 * tmo * factor))

echo "== srun -n 2 without --mpi=pmix: gice_init fails saying how to launch"
out=$(timeout 60 srun -n 2 "$build/bin/gice-demo" 2>&1)
rc=$?
echo "$out" | grep -v '^srun: error: .*: task' | head -6
if [ $rc = 0 ] || [ "$(echo "$out" | grep -c 'this process is one of 2 tasks (SLURM_STEP_NUM_TASKS=2).*srun --mpi=pmix')" != 2 ]; then
	echo "FAIL: srun -n 2 without PMIx did not fail on both tasks with the how-to-launch message (rc $rc)"
	fail=1
fi
out=$(timeout 60 srun --mpi=pmi2 -n 2 "$build/bin/gice-demo" 2>&1)
rc=$?
if [ $rc = 0 ] || [ "$(echo "$out" | grep -c 'this process is one of 2 tasks')" != 2 ]; then
	echo "$out" | head -6
	echo "FAIL: srun --mpi=pmi2 -n 2 did not fail on both tasks with the how-to-launch message (rc $rc)"
	fail=1
fi

[ $fail = 0 ] && echo "slurm: all passed"
exit $fail
