# bench-lib.sh: shell helpers the comparison scripts share (sourced, not run).

# median: the median of the numbers on stdin, one a line ("n/a" when there are none)
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }

# fipp SIZE ITERS PROVIDER: libfabric's fi_pingpong over loopback (a server and a client on a
# port no socket holds), bounded by 60 s each → "usec_per_xfer MBps", or nothing when it failed.
# The port is chosen afresh each call: fipp runs in a command substitution, which cannot advance
# a counter of its caller, and fi_pingpong binds without SO_REUSEADDR, so a port that the
# previous run left in TIME-WAIT refuses the server (EADDRINUSE) for a minute.
fipp() {
	local size=$1 iters=$2 prov=$3 out port=$((47602 + RANDOM % 8000))
	if command -v ss >/dev/null; then
		while [ -n "$(ss -Htan "( sport = :$port or dport = :$port )")" ]; do port=$((port + 1)); done
	fi
	timeout 60 fi_pingpong -p "$prov" -e rdm -S "$size" -I "$iters" -B "$port" >/dev/null 2>&1 &
	local srv=$!
	sleep 0.3
	out=$(timeout 60 fi_pingpong -p "$prov" -e rdm -S "$size" -I "$iters" -P "$port" 127.0.0.1 2>/dev/null) || true
	wait "$srv" 2>/dev/null || true
	# columns: bytes iters total time MB/sec usec/xfer Mxfers/sec
	echo "$out" | awk '$1 ~ /^[0-9]/ && NF >= 6 { print $(NF-1), $(NF-2) }' | tail -1
}
