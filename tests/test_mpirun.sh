#!/usr/bin/env bash
# Description: gice programs launched by Open MPI's mpirun find each other through PMIx
# (PMIX_RANK set, gice built with libpmix-dev): a 2-rank put ping-pong with every byte checked,
# the 4-rank training-step ring, trace clocks aligned with rank 0's (GICE_CLOCK_SYNC), and a
# rank that never arrives: the others fail within 2x GICE_BOOTSTRAP_TIMEOUT_MS naming it (the
# PMIx fence used to wait forever). Skipped (77) when mpirun or the PMIx build is missing.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
. tests/launch_checks.sh
if ! command -v mpirun >/dev/null 2>&1; then
	echo "skipped: mpirun (Debian openmpi-bin) is not installed"
	exit 77
fi
if ! pkg-config --exists pmix 2>/dev/null; then
	echo "skipped: gice was built without PMIx (Debian libpmix-dev)"
	exit 77
fi
mpi="mpirun --oversubscribe --bind-to none"
[ "$(id -u)" = 0 ] && mpi="$mpi --allow-run-as-root"
fail=0

echo "== mpirun -np 2: put ping-pong, payload checked"
out=$(timeout "$(scaled 120)" $mpi -np 2 "$build/bin/gice-bench" put --sizes 8,65536,1048576 --iters 200 --check 2>&1)
rc=$?
echo "$out"
check_pingpong mpirun "$rc" "$out"

echo "== mpirun -np 4: training-step ring"
out=$(timeout "$(scaled 120)" $mpi -np 4 "$build/bin/gice-demo" 2>&1)
rc=$?
echo "$out" | grep -E "gice demo|data check"
check_ring mpirun "$rc" "$out"
echo "== mpirun -np 2: trace clocks aligned with rank 0's (same machine: exact; GICE_CLOCK_SYNC=ping: measured)"
tdir=$(mktemp -d /tmp/gice-mpirun-XXXXXX)
for mode in auto ping; do
	GICE_CLOCK_SYNC=$mode GICE_TRACE=$tdir/$mode.json timeout "$(scaled 120)" $mpi -x GICE_CLOCK_SYNC -x GICE_TRACE \
		-np 2 "$build/bin/gice-bench" put --sizes 8 --iters 20 >"$tdir/$mode.out" 2>&1 ||
		{ echo "FAIL: clock $mode: the job failed"; cat "$tdir/$mode.out"; fail=1; continue; }
	clk=$(grep -o '"clock_aligned_to_rank0":[a-z]*,"clock_offset_ns":-\?[0-9]*,"clock_offset_bound_ns":[0-9]*' \
		"$tdir/$mode.1.json")
	echo "$mode: rank 1: $clk"
	case $mode in
	auto) want='"clock_aligned_to_rank0":true,"clock_offset_ns":0,"clock_offset_bound_ns":0' ;;
	ping) want='"clock_aligned_to_rank0":true,"clock_offset_ns":-?[0-9]+,"clock_offset_bound_ns":[1-9][0-9]*' ;;
	esac
	grep -qxE -- "$want" <<<"$clk" || { echo "FAIL: clock $mode: rank 1's trace says '$clk', not '$want'"; fail=1; }
done
rm -rf "$tdir"

echo "== mpirun -np 3: rank 1 never arrives, the others name it within 2x the bootstrap timeout"
factor=${CK_TIMEOUT_MULTIPLIER:-1} # sanitized builds run slower
tmo=2000
start=$(date +%s%N)
out=$(GICE_BOOTSTRAP_TIMEOUT_MS=$tmo timeout 60 $mpi -x GICE_BOOTSTRAP_TIMEOUT_MS -np 3 \
	sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec sleep 30; fi; exec "$0"' "$build/bin/gice-demo" 2>&1 |
	while IFS= read -r l; do echo "$((($(date +%s%N) - start) / 1000000)) $l"; done)
total=$((($(date +%s%N) - start) / 1000000))
echo "$out" | grep -E 'never arrived|gice_init'
echo "mpirun done after $total ms"
check_missing_rank "$out" $((2 * tmo * factor))
[ $fail = 0 ] && echo "mpirun: all passed"
exit $fail
