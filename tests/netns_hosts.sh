# netns_hosts.sh: sourced by the test scripts that run ranks on emulated hosts (not a test).
# nsp is the namespaces' prefix (GICE_NETNS_PREFIX, default gice: concurrent runs pick their
# own); netns_need_root exits 77 (skipped) without root or ip netns; netns_up N brings up
# scripts/netns-cluster.sh's N hosts ${nsp}-h1.. and takes them down when the script exits.
nsp=${GICE_NETNS_PREFIX:-gice}
netns_need_root() {
	if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
		echo "skipped: needs root and network namespaces (ip netns)"
		exit 77
	fi
}
netns_up() {
	netns_need_root
	trap 'scripts/netns-cluster.sh down' EXIT
	scripts/netns-cluster.sh up "$1" || exit 1
}
