#!/usr/bin/env bash
# Description: a framework's watchdog tested by fault scenarios, as a user would (issue 14):
# gice-watchdog-demo (a ring of put-with-signal steps with a per-step deadline) under gicerun -n 3
# with GICE_PLANE=net. Clean: every rank finishes. A lossy link 1->2: every rank still finishes
# (degraded, not dead) and only rank 1 reports packets lost, to rank 2. A scenario file that kills
# rank 2: ranks 0 and 1 name rank 2 dead ("process exited"). The 30th put on link 0->1 lost for
# good: rank 0 stalls and blames link 0->1.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
export GICE_PLANE=net GICE_TIMEOUT_MS=1000
demo=$build/bin/gice-watchdog-demo
run=$build/bin/gicerun
fail=0
scen=$(mktemp /tmp/gice-wd-XXXXXX)
raw=$(mktemp /tmp/gice-wd-out-XXXXXX)
trap 'rm -f "$scen" "$raw"' EXIT

job() { # gicerun arguments; prints the verdict lines, keeps all the output in $raw
	timeout "$(scaled 120)" "$run" -n 3 "$@" >"$raw" 2>&1
	grep -E '^\[[0-9]\] watchdog:|^gicerun:' "$raw"
}
failed() { # what a failing case printed besides its verdicts (stack frames left out)
	echo "FAIL: $1"
	fail=1
	grep -vE '^\[[0-9]\] watchdog:|^gicerun:|^\[[0-9]\] +#[0-9]+ ' "$raw" | tail -n 40 | sed 's/^/  | /'
	: >"$raw" # once per job
}
expect() { # name, pattern that must be in out
	grep -qE -- "$2" <<<"$out" || failed "$1: no line matching '$2'"
}
reject() { # name, pattern that must not be in out
	! grep -qE -- "$2" <<<"$out" || failed "$1: a line matches '$2'"
}

out=$(GICE_FAULTS= job "$demo" --steps 100); echo "$out"
for r in 0 1 2; do expect clean "^\[$r\] watchdog: rank $r: 100 steps ok"; done

out=$(GICE_FAULTS="drop=0.2,link=1->2,seed=3" job "$demo" --steps 100); echo "$out"
for r in 0 1 2; do expect lossy "^\[$r\] watchdog: rank $r: 100 steps ok"; done
expect lossy "rank 1: 100 steps ok; to rank 2: [0-9]+ packets, [1-9][0-9]* lost"
reject lossy "rank [02]: 100 steps ok.* [1-9][0-9]* lost"

# late enough that every rank is past its set-up (the exchange of keys) on a loaded machine:
# rank 2 killed inside that exchange makes the others fail at set-up, not at a step
kill_ms=$(scaled 5000)
printf '# rank 2 dies %s ms after its open\nkill_rank=2@%sms\n' "$kill_ms" "$kill_ms" >"$scen"
# the framework's step deadline well past gice's verdict on a dead peer (GICE_TIMEOUT_MS and a
# watchdog period), on a loaded or sanitized run too: gice names the peer first
out=$(GICE_FAULTS= job --keep-going --faults "$scen" "$demo" --steps 1000000 --step-ms "$(scaled 5)000")
echo "$out"
expect kill "gicerun: rank 2 .*SIGKILL"
for r in 0 1; do expect kill "^\[$r\] watchdog: rank $r step [0-9]+: DEAD PEER: rank 2 \(process exited\)"; done

out=$(GICE_FAULTS="nth_put=30,link=0->1" job --keep-going "$demo" --steps 100); echo "$out"
expect nth_put "^\[0\] watchdog: rank 0 step (29|30): STALLED: .* most retransmitted link: 0->1 "

[ $fail = 0 ] && echo "watchdog demo: all passed"
exit $fail
