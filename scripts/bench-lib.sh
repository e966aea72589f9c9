# bench-lib.sh: shell helpers the comparison scripts share (sourced, not run).

fipp_cpus=() # fi_pingpong's server and client CPUs (bind_alike); none: anywhere

# median: the median of the numbers on stdin, one a line ("n/a" when there are none)
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "n/a"}'; }

# bind_alike DEFAULT: both sides of a comparison bound alike or neither, as BIND (else DEFAULT)
# says, so that the two do not differ in where the scheduler may put their busy threads (it can
# leave two on one core for tens of ms while the other idles). BIND=1: gice GICE_BIND=1 (device
# k of rank r, all its threads, on the CPU (k + r) mod the CPUs it may use: one device per CPU,
# in one process or across ranks), Open MPI --bind-to core:overload-allowed (its own default
# binds 2 ranks but not 4 on 2 cores), fi_pingpong's server and client on the first two CPUs
# this shell may use; BIND=0: none of them. Sets BIND, GICE_BIND, ompi_bind (mpirun's
# arguments) and fipp_cpus.
bind_alike() {
	BIND=${BIND:-$1}
	if [ "$BIND" = 1 ]; then
		export GICE_BIND=1
		ompi_bind=(--bind-to core:overload-allowed)
		# Cpus_allowed_list: "0-1", "0,2-5": the first two CPUs (one twice on a 1-CPU machine)
		read -r -a fipp_cpus <<<"$(awk '/^Cpus_allowed_list/ { n = split($2, r, ","); c = 0
			for (i = 1; i <= n && c < 2; i++) { split(r[i], b, "-"); hi = (b[2] == "" ? b[1] : b[2]) + 0
				for (v = b[1] + 0; v <= hi && c < 2; v++) { out = out " " v; c++ } }
			if (c == 1) out = out out; print out }' /proc/self/status)"
	else
		export GICE_BIND=0
		ompi_bind=(--bind-to none)
		fipp_cpus=()
	fi
}

# fipp SIZE ITERS PROVIDER: libfabric's fi_pingpong over loopback (a server and a client on a
# port no socket holds, on the CPUs bind_alike chose, else anywhere), bounded by 60 s each →
# "usec_per_xfer MBps", or nothing when it failed.
# The port is chosen afresh each call: fipp runs in a command substitution, which cannot advance
# a counter of its caller, and fi_pingpong binds without SO_REUSEADDR, so a port that the
# previous run left in TIME-WAIT refuses the server (EADDRINUSE) for a minute.
fipp() {
	local size=$1 iters=$2 prov=$3 out port=$((47602 + RANDOM % 8000)) srv_on=() cli_on=()
	if [ ${#fipp_cpus[@]} = 2 ]; then
		srv_on=(taskset -c "${fipp_cpus[0]}")
		cli_on=(taskset -c "${fipp_cpus[1]}")
	fi
	if command -v ss >/dev/null; then
		while [ -n "$(ss -Htan "( sport = :$port or dport = :$port )")" ]; do port=$((port + 1)); done
	fi
	"${srv_on[@]}" timeout 60 fi_pingpong -p "$prov" -e rdm -S "$size" -I "$iters" -B "$port" >/dev/null 2>&1 &
	local srv=$!
	sleep 0.3
	out=$("${cli_on[@]}" timeout 60 fi_pingpong -p "$prov" -e rdm -S "$size" -I "$iters" -P "$port" 127.0.0.1 \
		2>/dev/null) || true
	wait "$srv" 2>/dev/null || true
	# columns: bytes iters total time MB/sec usec/xfer Mxfers/sec
	echo "$out" | awk '$1 ~ /^[0-9]/ && NF >= 6 { print $(NF-1), $(NF-2) }' | tail -1
}
