#!/usr/bin/env bash
# Description: the packets' authentication across processes. A 2-rank job (gicerun) whose ranks
# disagree on GICE_CT_AUTH fails at gice_device_open on every rank with GICE_ERR_CONFIG, each
# naming both settings (a device that signs would drop every unsigned packet and the job would
# only stall); a job that agrees runs, signed (the default) or not (GICE_CT_AUTH=0), and counts
# no rejected packet (rx_auth_bad 0 in GICE_STATS).
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
fail=0

out=$(timeout "$(scaled 60)" "$build/bin/gicerun" -n 2 --timeout "$(scaled 50)" sh -c \
	'[ "$GICE_RANK" = 1 ] && export GICE_CT_AUTH=0; exec '"$build"'/bin/gice-bench put --sizes 8 --iters 10' 2>&1)
rc=$?
echo "$out" | grep -E 'GICE_CT_AUTH|gice_device_open' | head -4
if [ $rc = 0 ] ||
	! echo "$out" | grep -q '^\[0\] .*device 0: GICE_CT_AUTH=1 here but 0 on rank 1 (device 1): every rank of a job must use the same setting' ||
	! echo "$out" | grep -q '^\[1\] .*device 1: GICE_CT_AUTH=0 here but 1 on rank 0 (device 0): every rank of a job must use the same setting' ||
	! echo "$out" | grep -q 'gice_device_open.*GICE_ERR_CONFIG'; then
	echo "FAIL: ranks disagreeing on GICE_CT_AUTH were not refused at open on both ranks (rc $rc)"
	fail=1
fi

for auth in 1 0; do
	out=$(GICE_CT_AUTH=$auth GICE_STATS=1 timeout "$(scaled 60)" "$build/bin/gicerun" -n 2 --timeout "$(scaled 50)" \
		"$build/bin/gice-bench" put --sizes 8,64k --iters 200 --check 2>&1)
	rc=$?
	bad=$(echo "$out" | grep -o 'rx_auth_bad [0-9]*' | sort -u | xargs)
	echo "GICE_CT_AUTH=$auth: rc $rc, $bad"
	if [ $rc != 0 ] || [ "$bad" != "rx_auth_bad 0" ]; then
		echo "FAIL: a job with GICE_CT_AUTH=$auth on both ranks: rc $rc, '$bad'"
		fail=1
	fi
done

[ $fail = 0 ] && echo "auth: all passed"
exit $fail
