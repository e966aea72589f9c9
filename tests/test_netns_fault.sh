#!/usr/bin/env bash
# Description: gice_faults_set kills or hangs a rank on another host (issue 14). Two network
# namespaces (scripts/netns-cluster.sh up 2), one rank each, over gicerun --netns's default
# provider (net): rank 0 asks rank 1 with a
# FAULT request (a control packet signed with the job's MAC, docs/protocol.md), which rank 1
# obeys (test_fault_jobs job):
# (a) kill_rank=1@0: rank 1 dies by SIGKILL; rank 0's put fails with GICE_ERR_PEER_DEAD and its
#     watchdog names rank 1;
# (b) hang_rank=1@0: rank 1's devices stop (its own put fails), rank 0's put fails with
#     GICE_ERR_PEER_HUNG naming rank 1 (the namespaces share the machine's pids), both end well;
# (c) with GICE_CT_AUTH=0 the request is refused: GICE_ERR_UNSUPPORTED, saying why.
# Skipped (77) without root or network namespaces.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
. tests/time_scale.sh
. tests/netns_hosts.sh
netns_up 2
fail=0

job() { # job KIND [gicerun options]: rank 0 kills or hangs rank 1 across the namespaces
	local kind=$1
	shift
	GICE_TIMEOUT_MS=1000 TEST_REMOTE_FAULT=$kind timeout "$(scaled 90)" \
		"$build/bin/gicerun" -n 2 --netns "${nsp}-h1,${nsp}-h2" "$@" "$build/tests/test_fault_jobs" job 2>&1
}

echo "== kill_rank=1@0 from rank 0, rank 1 on another host"
out=$(job kill --keep-going)
rc=$?
echo "$out" | grep -E 'fault injection|across machines|gicerun:|\(line'
if [ $rc = 0 ] || ! echo "$out" | grep -q 'rank 1 .*signal SIGKILL' ||
	! echo "$out" | grep -q '^\[0\] gice: rank 0: fault injection kill_rank=1: asked rank 1 (device 1, on another host) to kill itself' ||
	! echo "$out" | grep -q '^\[0\] rank 0: kill_rank=1@0 across machines: put [0-9]* to rank 1 ended GICE_ERR_PEER_DEAD' ||
	echo "$out" | grep -q '^\[0\] rank 0: .*(line [0-9]*)'; then
	echo "FAIL: a rank on another host was not killed, or rank 0 did not see it die (rc $rc)"
	fail=1
fi

echo "== hang_rank=1@0 from rank 0, rank 1 on another host"
out=$(job hang)
rc=$?
echo "$out" | grep -E 'fault injection|across machines|gicerun:|\(line'
if [ $rc != 0 ] || ! echo "$out" | grep -q '^\[1\] gice: rank 1: fault injection hang_rank=1: every device of this process stops' ||
	! echo "$out" | grep -q '^\[0\] rank 0: hang_rank=1@0 across machines: put [0-9]* to rank 1 ended GICE_ERR_PEER_HUNG'; then
	echo "FAIL: a rank on another host was not hung, or rank 0 did not see it hang (rc $rc)"
	fail=1
fi

echo "== GICE_CT_AUTH=0: the request is refused"
out=$(GICE_CT_AUTH=0 job kill)
rc=$?
echo "$out" | grep -E 'GICE_CT_AUTH|\(line'
if [ $rc = 0 ] || ! echo "$out" | grep -q 'rank 1 is on another host: asking it needs GICE_CT_AUTH=1' ||
	! echo "$out" | grep -q '^\[0\] rank 0: kill_rank=1@0: GICE_ERR_UNSUPPORTED'; then
	echo "FAIL: a request without authentication was not refused as documented (rc $rc)"
	fail=1
fi

[ $fail = 0 ] && echo "netns fault: all passed"
exit $fail
