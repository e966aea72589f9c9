#!/usr/bin/env bash
# Description: gice over lossy links between emulated hosts. Two network namespaces
# (scripts/netns-cluster.sh up 2), each dropping 5% of the packets that arrive on its interface,
# at random (an nftables netdev ingress rule: this kernel has no netem), with TCP's minimum RTO
# cut to 5 ms. Across them, 2 ranks run gice-bench stress (every byte and every signal count
# checked): (a) over net (libfabric 1.17's native RDM over TCP, the default between hosts),
# where TCP recovers the losses: 10000 puts of 1 B..64 KiB, then 64 MiB both ways at once; (b) over udp datagrams (GICE_FI_PROVIDER=udp), where gice's own
# retransmission has to: the same 10000 puts, then 64 MiB both ways. Passes when both devices
# report "intact" in each run, the rules really dropped packets during it, and over udp gice
# retransmitted (retransmits > 0). The whole test stays under 3 minutes: each run is bounded.
# Skipped (77) without root, network namespaces or a working nft.
# Knobs: LOSS (drops per 100000 packets, default 5000); TCP_ARGS, UDP_ARGS (gice-bench stress
# options; default "--timeout-ms 30000" for both); TCP_TIMEOUT, UDP_TIMEOUT
# (seconds of each run, defaults 50 and 110, times CK_TIMEOUT_MULTIPLIER: a hung wait is
# reported before the run is killed).
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
. tests/time_scale.sh
. tests/netns_hosts.sh
loss=${LOSS:-5000}
tcp_args=${TCP_ARGS---timeout-ms 30000}
udp_args=${UDP_ARGS---timeout-ms 30000}
hosts=${nsp}-h1,${nsp}-h2
nft=$(command -v nft || echo /usr/sbin/nft)

netns_need_root
if [ ! -x "$nft" ]; then
	echo "skipped: needs nft (Debian nftables; scripts/install-deps.sh installs it)"
	exit 77
fi

# shellcheck disable=SC2317 # called by the trap
cleanup() {
	for i in 1 2; do
		ip netns exec "${nsp}-h$i" "$nft" delete table netdev gice_loss 2>/dev/null
	done
	scripts/netns-cluster.sh down
}
trap cleanup EXIT
trap 'exit 143' TERM INT
scripts/netns-cluster.sh up 2 || exit 1

# in each host: drop $loss of every 100000 packets arriving on its interface; TCP's 200 ms
# minimum RTO would make every lost segment cost 200 ms, so cut it to 5 ms on the subnet route
for i in 1 2; do
	ns=${nsp}-h$i dev=${nsp}-v$i
	if ! ip netns exec $ns "$nft" -f - <<-EOF; then
		table netdev gice_loss {
			chain ingress {
				type filter hook ingress device "$dev" priority 0; policy accept;
				numgen random mod 100000 < $loss counter drop
			}
		}
	EOF
		echo "skipped: nftables netdev ingress rules do not work here (nf_tables module?)"
		exit 77
	fi
	ip -n $ns route replace 10.77.0.0/24 dev $dev proto kernel scope link src 10.77.0.$i rto_min 5ms || exit 1
done
echo "loss: $loss of every 100000 packets dropped at ingress in ${nsp}-h1 and ${nsp}-h2; tcp rto_min 5ms"

# packets dropped so far by the rules of both hosts
drops() {
	local n=0 c
	for i in 1 2; do
		c=$(ip netns exec ${nsp}-h$i "$nft" list chain netdev gice_loss ingress 2>/dev/null |
			sed -n 's/.*counter packets \([0-9]*\) .*/\1/p')
		n=$((n + ${c:-0}))
	done
	echo $n
}

# sum of counter NAME over the "intact" lines in $out
stat_sum() {
	echo "$out" | grep -E 'stress: device [0-9]+: .* intact' |
		awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) s += $(i + 1) } END { print s + 0 }'
}

fail=0
summary=""
# run LABEL PROVIDER TIMEOUT ARGS: gice-bench stress ARGS on 2 ranks in the 2 hosts over PROVIDER
run() {
	local label=$1 prov=$2 tmo=$3 args=$4 before after rc t0 secs intact dropped rtx
	echo "== $label: gice-bench stress${args:+ $args}, 2 ranks on 2 hosts, GICE_FI_PROVIDER=$prov, at most $tmo s"
	before=$(drops)
	t0=$(date +%s.%N)
	# shellcheck disable=SC2086 # args are words
	out=$(GICE_FI_PROVIDER=$prov timeout -k 5 $((tmo + 10)) "$build/bin/gicerun" -n 2 --netns $hosts \
		--timeout "$tmo" "$build/bin/gice-bench" stress $args 2>&1)
	rc=$?
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	after=$(drops)
	echo "$out" | tail -40
	dropped=$((after - before))
	intact=$(echo "$out" | grep -E '^\[[01]\] stress: device [0-9]+: .* intact' | sed 's/.*stress: device \([0-9]*\):.*/\1/' |
		sort -u | wc -l)
	rtx=$(stat_sum retransmits)
	echo "-- $label: rc $rc in $secs s; $intact of 2 devices intact; $dropped packets dropped by the rules;" \
		"gice retransmits $rtx, rto_expired $(stat_sum rto_expired), fast_retransmits $(stat_sum fast_retransmits)"
	summary="$summary$label: rc $rc, ${secs} s, $dropped dropped, retransmits $rtx"$'\n'
	if [ $rc != 0 ] || [ "$intact" != 2 ]; then
		echo "FAIL: $label: stress did not end intact on both devices (rc $rc$([ $rc = 124 ] && echo ', timed out'))"
		fail=1
	fi
	if [ "$dropped" -le 0 ]; then
		echo "FAIL: $label: the nftables rules dropped no packets during the run"
		fail=1
	fi
	if [ "$prov" = udp ] && [ "$rtx" -le 0 ]; then
		echo "FAIL: $label: gice retransmitted nothing over udp (is its own retransmission in use?)"
		fail=1
	fi
}

run net net "$(scaled "${TCP_TIMEOUT:-50}")" "$tcp_args"
run udp udp "$(scaled "${UDP_TIMEOUT:-110}")" "$udp_args"

echo "== summary"
printf '%s' "$summary"
[ $fail = 0 ] && echo "netns_loss: all passed"
exit $fail
