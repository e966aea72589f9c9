#!/usr/bin/env bash
# run-tests.sh NAME...: run each test binary of $BUILD/tests (or script tests/NAME.sh) with a
# timeout, a log per test,
# and print a closing "N passed, N failed, N skipped" line. Exit 77 from a test means skipped.
set -u
build=${BUILD:-build}
limit=${GICE_TEST_TIMEOUT:-300}
mkdir -p "$build/logs"
pass=0 fail=0 skip=0 failed=""
for t in "$@"; do
	log="$build/logs/$t.log"
	start=$(date +%s)
	case $t in
	*.sh) BUILD=$build timeout -k 5 "$limit" bash "tests/$t" >"$log" 2>&1 ;;
	*)    timeout -k 5 "$limit" "$build/tests/$t" >"$log" 2>&1 ;;
	esac
	rc=$?
	secs=$(( $(date +%s) - start ))
	case $rc in
	0)  pass=$((pass + 1)); printf '  PASS    %-28s %4ss  %s\n' "$t" "$secs" "$(grep -E '^[0-9]+%: Checks' "$log" | tail -1)";;
	77) skip=$((skip + 1)); printf '  SKIP    %-28s %s\n' "$t" "$(tail -1 "$log")";;
	*)  fail=$((fail + 1)); failed="$failed $t"
	    printf '  FAIL    %-28s rc=%d (log %s)\n' "$t" "$rc" "$log"
	    # the failing Check assertions first (CI output may keep only part of the tail)
	    grep -E '^[^ ]+:[0-9]+:[EF]:' "$log" | head -5 | sed 's/^/    ! /'
	    tail -25 "$log" | sed 's/^/    | /';;
	esac
done
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
