# launch_checks.sh: sourced by test_mpirun.sh and test_slurm.sh (not a test): the checks both
# launchers must pass. Each prints what it saw and sets fail=1 with a FAIL line on failure.

# check_pingpong LAUNCHER RC OUT: gice-bench put --check on 2 ranks printed its 3 sizes.
check_pingpong() {
	if [ "$2" != 0 ] || [ "$(echo "$3" | grep -c '^put ')" != 3 ] || ! echo "$3" | grep -q '^put .* 2  *8 '; then
		echo "FAIL: 2-rank ping-pong under $1 (rc $2)"
		fail=1
	fi
}

# check_ring LAUNCHER RC OUT: gice-demo on 4 ranks checked every block on each.
check_ring() {
	if [ "$2" != 0 ] || [ "$(echo "$3" | grep -c 'every block arrived intact')" != 4 ] ||
		! echo "$3" | grep -q "4 rank(s)"; then
		echo "FAIL: 4-rank ring under $1 (rc $2)"
		fail=1
	fi
}

# check_missing_rank OUT LIMIT_MS: OUT's lines start with the ms since the job's start; ranks 0
# and 2 of 3 both name missing rank 1, the first within LIMIT_MS.
check_missing_rank() {
	local first
	first=$(echo "$1" | grep 'rank(s) 1 of 3 never arrived at PMIx exchange' | head -1 | cut -d' ' -f1)
	echo "first report after ${first:-never} ms"
	if [ -z "$first" ] || [ "$(echo "$1" | grep -c 'rank(s) 1 of 3 never arrived')" != 2 ]; then
		echo "FAIL: ranks 0 and 2 did not both name missing rank 1"
		fail=1
	elif [ "$first" -gt "$2" ]; then
		echo "FAIL: missing rank reported after $first ms (want at most $2)"
		fail=1
	fi
}
