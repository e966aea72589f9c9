#!/usr/bin/env bash
# Description: ranks on different emulated hosts. Four network namespaces on a bridge
# (scripts/netns-cluster.sh); over gicerun --netns's default provider, net (libfabric 1.17's
# native RDM over TCP): a 2-rank put_signal ping-pong with every payload byte checked (gice-bench
# put --check; also over tcp;ofi_rxm, GICE_FI_PROVIDER=tcp), and the 4-rank training-step ring
# (gice-demo, which checks every block); symmetric memory, team barriers and a strided team on 4
# hosts (test_sym_procs job); every collective on 4 hosts, and on 2 hosts with interleaved ranks
# (the ring reordered by host: test_coll job); ranks started by hand in two namespaces pick net on
# their own (the job spans hosts), also when one is on an emulated other machine (its own
# mount and pid namespaces, a private /dev/shm); ranks that disagree on the provider fail at open, naming
# both. Skipped (77) without root or network namespaces.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
. tests/netns_hosts.sh
netns_up 4
hosts=${nsp}-h1,${nsp}-h2,${nsp}-h3,${nsp}-h4
fail=0

for prov in net tcp; do
	echo "== 2 ranks on 2 hosts: put ping-pong, payload checked, GICE_FI_PROVIDER=$prov"
	if ! GICE_FI_PROVIDER=$prov timeout "$(scaled 120)" "$build/bin/gicerun" -n 2 --netns ${nsp}-h1,${nsp}-h2 \
		"$build/bin/gice-bench" put --sizes 8,4096,65536,1048576 --iters 200 --check; then
		echo "FAIL: 2-rank ping-pong across namespaces over $prov"
		fail=1
	fi
done

echo "== 4 ranks on 4 hosts: symmetric put_signal/get ring, team barriers, a strided team (test_sym_procs job)"
if ! timeout "$(scaled 120)" "$build/bin/gicerun" -n 4 --netns $hosts "$build/tests/test_sym_procs" job; then
	echo "FAIL: symmetric memory and teams across namespaces"
	fail=1
fi

echo "== 4 ranks on 4 hosts: every collective, type and op against the host reference (test_coll job)"
if ! timeout "$(scaled 180)" "$build/bin/gicerun" -n 4 --netns $hosts "$build/tests/test_coll" job; then
	echo "FAIL: collectives across namespaces"
	fail=1
fi

echo "== 4 ranks on 2 hosts, interleaved (rank r on host r mod 2): the ring runs host by host (GICE_TOPO=auto)"
if ! timeout "$(scaled 180)" "$build/bin/gicerun" -n 4 --netns ${nsp}-h1,${nsp}-h2 \
	"$build/tests/test_coll" job; then
	echo "FAIL: collectives on 2 hosts with interleaved ranks"
	fail=1
fi

echo "== an idle device wakes when a packet arrives (CT 0 sleeps on the fabric's wait fd; tcp)"
# idle, CT 0 would look at the fabric only every GICE_CT_POLL_US (10 s here) or at the
# watchdog's passes: a put after an idle gap must complete at once (test_multiproc idle-rank).
# Over tcp;ofi_rxm: net's wait fd cannot be slept on (fabric/fab_ofi_open.c), so over net an
# idle CT 0 polls every GICE_CT_POLL_US
if ! GICE_FI_PROVIDER=tcp GICE_CT_POLL_US=10000000 GICE_CT_SPIN_US=0 \
	timeout "$(scaled 60)" "$build/bin/gicerun" -n 2 --netns ${nsp}-h1,${nsp}-h2 "$build/tests/test_multiproc" idle-rank; then
	echo "FAIL: an idle device did not wake for arriving packets (GICE_CT_POLL_US=10000000)"
	fail=1
fi

echo "== 4 ranks on 4 hosts: training-step ring"
out=$(timeout "$(scaled 120)" "$build/bin/gicerun" -n 4 --netns $hosts "$build/bin/gice-demo" 2>&1)
rc=$?
echo "$out"
if [ $rc != 0 ] || [ "$(echo "$out" | grep -c 'every block arrived intact')" != 4 ]; then
	echo "FAIL: 4-rank ring across namespaces (rc $rc)"
	fail=1
fi

echo "== a rank that dies: gicerun names it and fails"
out=$(timeout "$(scaled 60)" "$build/bin/gicerun" -n 2 --netns ${nsp}-h1,${nsp}-h2 \
	sh -c 'if [ "$GICE_RANK" = 1 ]; then kill -KILL $$; fi; exec '"$build"'/bin/gice-demo' 2>&1)
rc=$?
echo "$out" | tail -3
if [ $rc = 0 ] || ! echo "$out" | grep -q "rank 1 .*signal SIGKILL"; then
	echo "FAIL: a killed rank was not reported (rc $rc)"
	fail=1
fi

factor=${CK_TIMEOUT_MULTIPLIER:-1} # sanitized builds run slower

echo "== --netns with no GICE_FI_PROVIDER: net, said on stderr"
out=$(env -u GICE_FI_PROVIDER timeout 60 "$build/bin/gicerun" -n 2 --netns ${nsp}-h1,${nsp}-h2 \
	"$build/bin/gice-bench" put --sizes 4096 --iters 50 --check 2>&1)
rc=$?
echo "$out" | grep -E '^\[0\] put|--netns'
if [ $rc != 0 ] || ! echo "$out" | grep -q '^\[0\] put  *net ' ||
	! echo "$out" | grep -q 'gicerun: --netns: GICE_FI_PROVIDER=net for every rank'; then
	echo "FAIL: --netns without a provider did not run over net, or did not say so (rc $rc)"
	fail=1
fi
out=$(GICE_FI_PROVIDER=shm timeout 60 "$build/bin/gicerun" -n 2 --netns ${nsp}-h1,${nsp}-h2 true 2>&1)
rc=$?
echo "$out"
if [ $rc != 1 ] || ! echo "$out" | grep -q 'GICE_FI_PROVIDER=shm cannot cross network namespaces'; then
	echo "FAIL: --netns with GICE_FI_PROVIDER=shm was not refused (rc $rc)"
	fail=1
fi

echo "== ranks on 2 hosts that disagree on the provider (rank 1 GICE_FI_PROVIDER=tcp, rank 0 net): refused at open on both"
# net and tcp;ofi_rxm both run over TCP but do not speak each other's protocol: the job would stall
out=$(timeout "$(scaled 60)" "$build/bin/gicerun" -n 2 --netns ${nsp}-h1,${nsp}-h2 sh -c \
	'[ "$GICE_RANK" = 1 ] && export GICE_FI_PROVIDER=tcp; exec '"$build"'/bin/gice-bench put --sizes 8 --iters 10' 2>&1)
rc=$?
echo "$out" | grep -E 'provider .* here but|gice_device_open' | cut -c1-200 | head -4
if [ $rc = 0 ] ||
	! echo "$out" | grep -q '^\[0\] .*device 0: provider net here but tcp;ofi_rxm on rank 1 (device 1): every rank of a job must use the same one' ||
	! echo "$out" | grep -q '^\[1\] .*device 1: provider tcp;ofi_rxm here but net on rank 0 (device 0): every rank of a job must use the same one' ||
	! echo "$out" | grep -q 'gice_device_open.*GICE_ERR_CONFIG'; then
	echo "FAIL: ranks disagreeing on the provider were not refused at open on both ranks (rc $rc)"
	fail=1
fi

echo "== --netns with FI_NET_IFACE=lo inherited: replaced per rank, the job runs (over net)"
out=$(FI_NET_IFACE=lo timeout 60 "$build/bin/gicerun" -n 2 --netns ${nsp}-h1,${nsp}-h2 \
	"$build/bin/gice-bench" put --sizes 4096 --iters 50 --check 2>&1)
rc=$?
echo "$out" | grep -E '^\[0\] put|--netns'
if [ $rc != 0 ] || ! echo "$out" | grep -q '^\[0\] put  *net ' ||
	! echo "$out" | grep -q "FI_NET_IFACE=lo replaced in every rank by its namespace.s interface (${nsp}-v1, ${nsp}-v2)"; then
	echo "FAIL: FI_NET_IFACE=lo under --netns was not replaced (rc $rc)"
	fail=1
fi

# ranks started by hand (no gicerun) in two namespaces: the job spans hosts, so with no
# GICE_FI_PROVIDER every rank picks net by itself (not shm); with the interface variable of the
# provider at lo each advertises 127.0.0.1, and the device open fails on both at once
for p in "tcp FI_TCP_IFACE tcp;ofi_rxm" "- FI_NET_IFACE net"; do # -: no GICE_FI_PROVIDER
	read -r prov var shown <<<"$p"
	[ "$prov" = - ] && prov=
	echo "== ranks started by hand with $var=lo on 2 hosts, GICE_FI_PROVIDER=${prov:-(unset)}: device open fails on both within 2 s, naming $shown"
	tmp=$(mktemp -d)
	port=$((20000 + RANDOM % 20000))
	start=$(date +%s%N)
	pids=""
	for r in 0 1; do
		ip netns exec ${nsp}-h$((r + 1)) env -u GICE_FI_PROVIDER ${prov:+GICE_FI_PROVIDER=$prov} "$var=lo" \
			GICE_RANK=$r GICE_WORLD_SIZE=2 GICE_BOOTSTRAP=10.77.0.1:$port GICE_BOOTSTRAP_TIMEOUT_MS=5000 \
			timeout -k 2 30 "$build/bin/gice-demo" >"$tmp/r$r.log" 2>&1 &
		pids="$pids $!"
	done
	rcs=""
	for pid in $pids; do
		wait "$pid"
		rcs="$rcs $?"
	done
	ms=$((($(date +%s%N) - start) / 1000000))
	sed 's/^/    /' "$tmp"/r*.log
	echo "both ranks ended after $ms ms, exit statuses:$rcs"
	for r in 0 1; do
		if ! grep -q "rank [01] advertises the loopback address 127.0.0.1:[0-9]* ($shown) to rank [01] on another host" "$tmp/r$r.log" ||
			! grep -q "$var=lo" "$tmp/r$r.log"; then
			echo "FAIL: rank $r did not name the loopback address, the rank, $shown and $var=lo"
			fail=1
		fi
	done
	case "$rcs" in *" 0"*) echo "FAIL: a rank exited 0 with a loopback address across hosts"; fail=1;; esac
	if [ $ms -gt $((2000 * factor)) ]; then
		echo "FAIL: the job took $ms ms to fail (want at most $((2000 * factor)) ms)"
		fail=1
	fi
	rm -rf "$tmp"
done

echo "== ranks started by hand on 2 emulated machines, no GICE_FI_PROVIDER: the job runs over net"
# rank 1 also gets its own mount and pid namespaces with a private /dev/shm, as on another
# machine: shm (the first choice before jobs spanning hosts picked net) cannot reach rank 0 from
# there, and the job stalled until the watchdog called the peer silent
if ! command -v unshare >/dev/null; then
	echo "(left out: no unshare)"
else
	tmp=$(mktemp -d)
	port=$((20000 + RANDOM % 20000))
	ip netns exec ${nsp}-h1 env -u GICE_FI_PROVIDER GICE_FAB_IFACE=${nsp}-v1 GICE_RANK=0 GICE_WORLD_SIZE=2 \
		GICE_BOOTSTRAP=10.77.0.1:$port GICE_BOOTSTRAP_TIMEOUT_MS=5000 GICE_TIMEOUT_MS=5000 \
		timeout -k 2 "$(scaled 60)" "$build/bin/gice-bench" put --sizes 8,65536 --iters 50 --check >"$tmp/r0.log" 2>&1 &
	pid0=$!
	ip netns exec ${nsp}-h2 unshare -m -p -f --mount-proc sh -c 'mount -t tmpfs tmpfs /dev/shm && exec "$@"' sh \
		env -u GICE_FI_PROVIDER GICE_FAB_IFACE=${nsp}-v2 GICE_RANK=1 GICE_WORLD_SIZE=2 \
		GICE_BOOTSTRAP=10.77.0.1:$port GICE_BOOTSTRAP_TIMEOUT_MS=5000 GICE_TIMEOUT_MS=5000 \
		timeout -k 2 "$(scaled 60)" "$build/bin/gice-bench" put --sizes 8,65536 --iters 50 --check >"$tmp/r1.log" 2>&1
	rc1=$?
	wait $pid0
	rc0=$?
	sed 's/^/    /' "$tmp"/r*.log | grep -v '^    $' | cut -c1-200 | tail -6
	if [ $rc0 != 0 ] || [ $rc1 != 0 ] || [ "$(grep -c '^put  *net  *2 ' "$tmp/r0.log")" != 2 ]; then
		echo "FAIL: a job on 2 emulated machines did not run over net by itself (rc $rc0 $rc1)"
		fail=1
	fi
	rm -rf "$tmp"
fi

echo "== a rank killed mid-job under --keep-going: the survivor's wait ends with PEER_DEAD naming it"
# ping-pong of 8 B puts between the two hosts; rank 1 SIGKILLs itself at 1500 ms. With
# GICE_TIMEOUT_MS=1000 rank 0's kernel, waiting for the next pong, must end within 2x the
# timeout of the kill with GICE_ERR_PEER_DEAD, the abort naming device 1 (not hang, not a
# bare timeout). Each line of the job's output is stamped as it comes: the time is measured from
# the kill (gicerun's report of the SIGKILL) to the survivor's exit, not from the job's start,
# whose set-up over the namespaces varies with the machine's load (once 3.8 s more than usual).
kill_ms=$((1500 * factor)) # after set-up, which sanitized builds take longer over
stamp() { while IFS= read -r l; do echo "$(($(date +%s%N) / 1000000)) $l"; done; }
out=$(GICE_TIMEOUT_MS=1000 GICE_FAULTS=kill_rank=1@${kill_ms}ms timeout 60 "$build/bin/gicerun" -n 2 --keep-going \
	--netns ${nsp}-h1,${nsp}-h2 "$build/bin/gice-bench" put --sizes 8 --iters 100000000 2>&1 | stamp
	exit "${PIPESTATUS[0]}")
rc=$?
echo "$out" | grep -E 'aborted|gice-bench:|SIGKILL' | cut -c1-220
t_kill=$(echo "$out" | awk '/gicerun: rank 1 .* was killed by signal SIGKILL/ { print $1; exit }')
t_end=$(echo "$out" | awk '/gicerun: rank 0 .* exited/ { print $1; exit }')
if [ $rc = 0 ] || ! echo "$out" | grep -q '^[0-9]* \[0\] gice-bench: gice_stream_sync.*GICE_ERR_PEER_DEAD' ||
	! echo "$out" | grep -q '^[0-9]* \[0\] .*device 0 aborted (GICE_ERR_PEER_DEAD).*peer device 1 silent'; then
	echo "FAIL: the survivor did not end with GICE_ERR_PEER_DEAD naming device 1 (rc $rc)"
	fail=1
elif [ -z "$t_kill" ] || [ -z "$t_end" ]; then
	echo "FAIL: gicerun did not report both the kill of rank 1 and the exit of rank 0"
	fail=1
else
	ms=$((t_end - t_kill))
	echo "the survivor exited $ms ms after the kill (timeout 1000 ms)"
	if [ $ms -gt $((2000 * factor)) ]; then
		echo "FAIL: the survivor took $ms ms after the kill to fail"
		fail=1
	fi
fi

[ $fail = 0 ] && echo "netns: all passed"
exit $fail
