#!/usr/bin/env bash
# Description: the demo as users run it — one process with 4 devices, `gicerun -n 4` (make run)
# and 2 ranks with 2 devices each — checks every block it moves and says so on every rank; 64
# ranks of one SM each on this machine's cores (16 when built with a sanitizer) do too, and none
# of them warns (early heartbeats of peers that finished their open first are not dropped
# packets); with --checkpoint, every step's block is also checkpointed to a file and reloaded by
# triggers, and checked on the device.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
fail=0

check() { # name expected-ranks command...
	local name=$1 want=$2
	shift 2
	out=$(timeout "$(scaled 120)" "$@" 2>&1)
	rc=$?
	echo "$out" | grep -E "gice demo|data check"
	if [ $rc != 0 ] || [ "$(echo "$out" | grep -c 'every block arrived intact')" != "$want" ]; then
		echo "FAIL: $name (rc $rc)"
		echo "$out" | grep -v -E "gice demo|data check" | tail -60 | sed 's/^/  | /'
		fail=1
	fi
}

check "one process, 4 devices" 1 "$build/bin/gice-demo"
check "gicerun -n 4" 4 "$build/bin/gicerun" -n 4 "$build/bin/gice-demo"
check "gicerun -n 2 --devices-per-rank 2" 2 "$build/bin/gicerun" -n 2 --devices-per-rank 2 "$build/bin/gice-demo"
many=64
nm "$build/lib/libgice.a" 2>/dev/null | grep -q -E '__(asan|tsan)_' && many=16
check "GICE_SMS=1 gicerun -n $many" $many env GICE_SMS=1 "$build/bin/gicerun" -n $many --timeout "$(scaled 100)" \
	"$build/bin/gice-demo"
if grep -E '^\[[0-9]+\] gice\[rank [0-9]+ pid [0-9]+\] (warn|error)' <<<"$out" | head -5 | grep .; then
	echo "FAIL: GICE_SMS=1 gicerun -n $many: warnings (above)"
	fail=1
fi
ckdir=$(mktemp -d "${TMPDIR:-/tmp}/gice-demo-ckpt-XXXXXX")
out=$(timeout "$(scaled 120)" "$build/bin/gicerun" -n 2 "$build/bin/gice-demo" --checkpoint "$ckdir" 2>&1)
rc=$?
echo "$out" | grep -E "checkpoint"
if [ $rc != 0 ] || [ "$(echo "$out" | grep -c 'every checkpoint intact')" != 2 ] ||
	[ "$(ls "$ckdir" | wc -l)" != 2 ]; then
	echo "FAIL: gicerun -n 2 gice-demo --checkpoint (rc $rc)"
	fail=1
fi
rm -rf "$ckdir"
[ $fail = 0 ] && echo "demo: all passed"
exit $fail
