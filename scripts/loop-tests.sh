#!/usr/bin/env bash
# loop-tests.sh NAME...: run each named test (a binary of $BUILD/tests, or tests/NAME.sh) N times,
# one after the other, to measure how often it flakes. Like run-tests.sh: a timeout per run
# (GICE_TEST_TIMEOUT, default 300 s), exit 77 is a skip. Each run's log is
# $BUILD/logs/loop/NAME.RUN.log; the logs of runs that passed are removed, those of failures
# kept. One line per failure (with its log and the first failing Check assertion), then
# "loop: NAME: N runs, F failed" per test and "loop: N runs, F failed" overall; exits 1 when
# any run failed.
#   N=20          runs per test (default 10)
#   LOAD=K        K busy loops (one per CPU to keep busy) run in the background meanwhile,
#                 each killed when the loop ends and in any case after LOAD_SECS (default 3600)
#   CK_RUN_CASE=… and the other Check/GICE variables reach the tests unchanged
set -u
build=${BUILD:-build}
runs=${N:-10}
load=${LOAD:-0}
load_secs=${LOAD_SECS:-3600}
limit=${GICE_TEST_TIMEOUT:-300}
dir="$build/logs/loop"

case $runs$load$load_secs in
*[!0-9]*) echo "loop-tests: N, LOAD and LOAD_SECS must be whole numbers" >&2; exit 2;;
esac
if [ $# = 0 ]; then
	echo "usage: [N=runs] [LOAD=cpus] $0 NAME..." >&2
	exit 2
fi
mkdir -p "$dir"

burners=""
stop_load() {
	for p in $burners; do
		kill "$p" 2>/dev/null
	done
	for p in $burners; do
		wait "$p" 2>/dev/null
	done
	burners=""
}
trap 'stop_load; exit 130' INT TERM
trap stop_load EXIT
for _ in $(seq 1 "$load"); do
	timeout "$load_secs" sh -c 'while :; do :; done' &
	burners="$burners $!"
done
[ "$load" -gt 0 ] && echo "loop: $load busy loop(s) in the background (at most ${load_secs} s)"

total=0 total_fail=0 summary=""
for t in "$@"; do
	fail=0 skip=0 secs_all=0
	for i in $(seq 1 "$runs"); do
		log="$dir/$t.$i.log"
		start=$(date +%s)
		case $t in
		*.sh) BUILD=$build timeout -k 5 "$limit" bash "tests/$t" >"$log" 2>&1 ;;
		*)    timeout -k 5 "$limit" "$build/tests/$t" >"$log" 2>&1 ;;
		esac
		rc=$?
		secs=$(( $(date +%s) - start ))
		secs_all=$((secs_all + secs))
		case $rc in
		0)  rm -f "$log";;
		77) skip=$((skip + 1)); rm -f "$log";;
		*)  fail=$((fail + 1))
		    why=$(grep -m1 -E ':[FE]:' "$log")
		    [ -z "$why" ] && why=$(grep -m1 -iE 'fail|error' "$log")
		    printf '  FAIL    %-20s run %d/%d rc=%d %ss (log %s)\n' "$t" "$i" "$runs" "$rc" "$secs" "$log"
		    [ -n "$why" ] && printf '          %s\n' "$why";;
		esac
	done
	total=$((total + runs))
	total_fail=$((total_fail + fail))
	line="loop: $t: $runs runs, $fail failed"
	[ "$skip" -gt 0 ] && line="$line, $skip skipped"
	line="$line ($((secs_all / runs)) s a run)"
	echo "$line"
	summary="$summary$line"$'\n'
done
stop_load
[ $# -gt 1 ] && printf '%s' "$summary"
echo "loop: $total runs, $total_fail failed"
[ "$total_fail" = 0 ]
