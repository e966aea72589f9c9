#!/usr/bin/env bash
# netns-cluster.sh up K | down | status: a cluster of K emulated hosts on this machine.
# Each host is a network namespace P-hI (I = 1..K; P is $GICE_NETNS_PREFIX, default gice, so test
# runs side by side do not collide) with one veth interface P-vI holding
# 10.77.0.I/24; the other ends sit on a bridge inside its own namespace P-br, so no address
# exists outside namespaces this script created. Needs root (exit 77 with the reason otherwise).
# Use: gicerun -n K --netns gice-h1,...,gice-hK prog (gicerun binds each rank to its namespace).
set -eu

prefix=${GICE_NETNS_PREFIX:-gice}
subnet=10.77.0

need_root() {
	if [ "$(id -u)" != 0 ]; then
		echo "netns-cluster: needs root to create network namespaces" >&2
		exit 77
	fi
	if ! ip netns list >/dev/null 2>&1; then
		echo "netns-cluster: 'ip netns' does not work here" >&2
		exit 77
	fi
}

down() {
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix}-(h[0-9]+|br)$" || true); do
		ip netns del "$ns"
	done
}

up() {
	local k=$1
	case $k in '' | *[!0-9]*) echo "netns-cluster: up needs a host count" >&2; exit 2;; esac
	[ "$k" -ge 1 ] && [ "$k" -le 200 ] || { echo "netns-cluster: 1..200 hosts" >&2; exit 2; }
	down
	ip netns add ${prefix}-br
	ip -n ${prefix}-br link add br0 type bridge
	ip -n ${prefix}-br link set br0 up
	for i in $(seq 1 "$k"); do
		local ns=${prefix}-h$i
		ip netns add "$ns"
		ip link add ${prefix}-v$i type veth peer name ${prefix}-p$i
		ip link set ${prefix}-v$i netns "$ns"
		ip link set ${prefix}-p$i netns ${prefix}-br
		ip -n ${prefix}-br link set ${prefix}-p$i master br0 up
		ip -n "$ns" addr add $subnet.$i/24 dev ${prefix}-v$i
		ip -n "$ns" link set ${prefix}-v$i up
		ip -n "$ns" link set lo up
	done
	# every host reaches every other one before we say we are up
	for i in $(seq 1 "$k"); do
		for j in $(seq 1 "$k"); do
			[ "$i" = "$j" ] && continue
			ok=0
			for _ in $(seq 50); do
				if ip netns exec ${prefix}-h$i ping -c1 -W1 $subnet.$j >/dev/null 2>&1; then ok=1; break; fi
				sleep 0.1
			done
			[ $ok = 1 ] || { echo "netns-cluster: host $i cannot reach $subnet.$j" >&2; exit 1; }
		done
	done
	echo "netns-cluster: $k hosts up: $(seq -s, -f "${prefix}-h%g" 1 "$k")"
}

case ${1:-} in
up) need_root; up "${2:-}";;
down) need_root; down;;
status) ip netns list 2>/dev/null | grep -E "^${prefix}-" || echo "netns-cluster: no hosts";;
*) echo "usage: $0 up K | down | status" >&2; exit 2;;
esac
