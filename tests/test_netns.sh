#!/usr/bin/env bash
# Description: ranks on different emulated hosts. Four network namespaces on a bridge
# (scripts/netns-cluster.sh); over the libfabric tcp provider: a 2-rank put_signal ping-pong
# with every payload byte checked (gice-bench put --check), and the 4-rank training-step ring
# (gice-demo, which checks every block). Skipped (77) without root or network namespaces.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
	echo "skipped: needs root and network namespaces (ip netns)"
	exit 77
fi
trap 'scripts/netns-cluster.sh down' EXIT
scripts/netns-cluster.sh up 4 || exit 1
hosts=gice-h1,gice-h2,gice-h3,gice-h4
fail=0

echo "== 2 ranks on 2 hosts: put ping-pong, payload checked"
if ! GICE_FI_PROVIDER=tcp timeout "$(scaled 120)" "$build/bin/gicerun" -n 2 --netns gice-h1,gice-h2 \
	"$build/bin/gice-bench" put --sizes 8,4096,65536,1048576 --iters 200 --check; then
	echo "FAIL: 2-rank ping-pong across namespaces"
	fail=1
fi

echo "== 4 ranks on 4 hosts: training-step ring"
out=$(GICE_FI_PROVIDER=tcp timeout "$(scaled 120)" "$build/bin/gicerun" -n 4 --netns $hosts "$build/bin/gice-demo" 2>&1)
rc=$?
echo "$out"
if [ $rc != 0 ] || [ "$(echo "$out" | grep -c 'every block arrived intact')" != 4 ]; then
	echo "FAIL: 4-rank ring across namespaces (rc $rc)"
	fail=1
fi

echo "== a rank that dies: gicerun names it and fails"
out=$(timeout "$(scaled 60)" "$build/bin/gicerun" -n 2 --netns gice-h1,gice-h2 \
	sh -c 'if [ "$GICE_RANK" = 1 ]; then kill -KILL $$; fi; exec '"$build"'/bin/gice-demo' 2>&1)
rc=$?
echo "$out" | tail -3
if [ $rc = 0 ] || ! echo "$out" | grep -q "rank 1 .*signal SIGKILL"; then
	echo "FAIL: a killed rank was not reported (rc $rc)"
	fail=1
fi

[ $fail = 0 ] && echo "netns: all passed"
exit $fail
