#!/usr/bin/env bash
# Description: every gice-bench sub-command runs, briefly, and prints what docs/gice-bench.md
# says: the CSV header, then rows of the 9 columns (bench, transport, ranks, bytes, iters and
# four numbers), one per size or grid (put and get with --check passing); trigger its idle and
# busy-sms rows and their ratio line (with one SM, the idle row and a line saying why there is
# no other); get a put-done and a get row and a ratio line per size, in one process and on 2
# ranks; rate also its
# '# rate S B window W: N msgs/s' and '# issue S B window W: X ns a put to issue, Y ns a put
# waiting' lines after each row, in one process and on 2 ranks under
# gicerun (GICE_PLANE=net); idle and stress their comment lines; file-read and file-write
# seven and three rows per size; soak its verdict per rank;
# allreduce a row per size, its --check passing, and the other collectives a row per size;
# overlap its comm, compute and overlap rows and efficiency line per mode, cpu-noise its quiet
# and noisy rows and a line naming the perturbed threads per mode, first-kernel its two rows;
# a usage error exits 2. The figures themselves are not judged here.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
bench=$build/bin/gice-bench
header='bench,transport,ranks,bytes,iters,p50_us,p99_us,MBps,busbw_MBps'
fail=0

# run NAME CMD...: sets out (ranks' prefixes removed) and rc
run() {
	local name=$1
	shift
	out=$(timeout "$(scaled 120)" "$@" 2>&1)
	rc=$?
	out=$(echo "$out" | sed 's/^\[[0-9]*\] //')
	echo "== $name (rc $rc)"
	echo "$out" | head -20
}

# rows BENCH "BYTES,ITERS ..." [RANKS]: out has the header and exactly these rows of BENCH, each
# of 9 fields with RANKS (default 1) and numbers in the last 4
rows() {
	local b=$1 want=$2 ranks=${3:-1} got
	got=$(echo "$out" | awk -F, -v b="$b" -v r="$ranks" '$1 == b && NF == 9 && $3 == r &&
		$6 ~ /^[0-9.]+$/ && $7 ~ /^[0-9.]+$/ && $8 ~ /^[0-9.]+$/ && $9 ~ /^[0-9.]+$/ { print $4 "," $5 }' | xargs)
	if [ "$rc" != 0 ] || [ "$(echo "$out" | grep -c "^$header\$")" != 1 ] || [ "$got" != "$want" ] ||
		[ "$(echo "$out" | grep -c "^$b,")" != "$(echo "$want" | wc -w)" ]; then
		echo "FAIL: $b: rc $rc, rows (bytes,iters) '$got', expected '$want' after one header"
		fail=1
	fi
}

# has PATTERN COUNT: out has COUNT lines matching the extended regex PATTERN
has() {
	if [ "$(echo "$out" | grep -cE "$1")" != "$2" ]; then
		echo "FAIL: expected $2 line(s) matching '$1'"
		fail=1
	fi
}

run "trigger" "$bench" trigger --csv --iters 200
rows trigger "8,180 8,180"
has '^trigger,in-process,1,8,180,' 1
has '^trigger,busy-sms,1,8,180,' 1
has '^# trigger p50: idle [0-9.]+ us, [0-9]+ of [0-9]+ SMs computing [0-9.]+ us: [0-9.]+x$' 1
run "trigger, one SM" env GICE_SMS=1 "$bench" trigger --csv --iters 200
rows trigger "8,180"
has '^# trigger: busy-sms needs 2 SMs or more \(GICE_SMS=1\)$' 1
run "put" "$bench" put --csv --iters 100 --sizes 8,4k --check
rows put "8,100 4096,100"
run "get" "$bench" get --csv --iters 100 --sizes 8,4k,256k --check
rows put-done "8,100 4096,100 262144,100"
rows get "8,100 4096,100 262144,100"
has '^# get (8|4096|262144) B window 1: p50 [0-9.]+ us, put to completion [0-9.]+ us: [0-9.]+x$' 3
run "get, 2 ranks" env GICE_PLANE=net "$build/bin/gicerun" -n 2 "$bench" get --csv --sizes 8,64k --window 4 --iters 50 --check
rows put-done "8,50 65536,50" 2
rows get "8,50 65536,50" 2
has '^# get (8|65536) B window 4: p50 [0-9.]+ us, put to completion [0-9.]+ us: [0-9.]+x$' 2
run "launch" "$bench" launch --csv --iters 100 --blocks 1,2
rows launch "0,100 0,100"
run "memcpy" "$bench" memcpy --csv --iters 3 --sizes 8,64k
rows memcpy "8,3 65536,3"

run "rate, one process" "$bench" rate --csv --iters 640
rows rate "8,640 4096,640"
has '^# rate (8|4096) B window 64: [0-9]+ msgs/s$' 2
has '^# issue (8|4096) B window 64: [0-9]+ ns a put to issue, [0-9]+ ns a put waiting$' 2
run "rate, 2 ranks" env GICE_PLANE=net "$build/bin/gicerun" -n 2 "$bench" rate --csv --sizes 1,64k --window 16 --iters 100
rows rate "1,112 65536,112" 2
has '^# rate (1|65536) B window 16: [0-9]+ msgs/s$' 2
has '^# issue (1|65536) B window 16: [0-9]+ ns a put to issue, [0-9]+ ns a put waiting$' 2

run "idle" "$bench" idle --csv
has '^idle,[^,]+,1,0,1,0,0,0,0$' 1
has '^# idle device: [0-9.]+% of a core$' 1
run "stress" "$bench" stress --csv --iters 100 --bytes 256k --chunk 64k
rows stress "859155,100 859155,100"
has '^# stress: device [01]: 100 puts \+ 262144 B both ways intact' 2

tmpf=$(mktemp "${TMPDIR:-/tmp}/gice-bench-file-XXXXXX")
head -c 4194304 /dev/zero > "$tmpf"
run "file-read" "$bench" file-read --csv --file "$tmpf" --sizes 1m,4m
rows file-read "1048576,1 1048576,1 1048576,1 1048576,1 1048576,1 1048576,1 1048576,1 4194304,1 4194304,1 4194304,1 4194304,1 4194304,1 4194304,1 4194304,1"
run "file-write" "$bench" file-write --csv --file "$tmpf" --sizes 2m
rows file-write "2097152,1 2097152,1 2097152,1"
run "file-read without --file" "$bench" file-read
[ "$rc" = 2 ] || { echo "FAIL: file-read without --file exits $rc, expected 2"; fail=1; }
rm -f "$tmpf"

run "soak, 2 ranks" "$build/bin/gicerun" -n 2 "$bench" soak --iters 20000
has '^soak: rank [01]: 20000 triggered puts, RSS first [0-9]+ KiB, last [0-9]+ KiB \([-+][0-9.]+%\): flat$' 2
[ "$rc" = 0 ] || { echo "FAIL: soak exits $rc"; fail=1; }

run "barrier, one process" "$bench" barrier --csv --iters 200
rows sync "0,200" 2
rows barrier "0,200" 2
run "barrier, 3 ranks" env GICE_PLANE=net "$build/bin/gicerun" -n 3 "$bench" barrier --csv --iters 200
rows sync "0,200" 3
rows barrier "0,200" 3

run "allreduce, one process" "$bench" allreduce --csv --sizes 8,4k,300k --iters 20 --check
rows allreduce "8,20 4096,20 307200,20" 2
run "allreduce, 3 ranks" "$build/bin/gicerun" -n 3 "$bench" allreduce --csv --sizes 8,300k --iters 20 --check
rows allreduce "8,20 307200,20" 3
for b in allgather reduce_scatter broadcast alltoall; do
	run "$b, 3 ranks" "$build/bin/gicerun" -n 3 "$bench" $b --csv --sizes 96,300k --iters 20
	rows $b "96,20 307200,20" 3
done
run "overlap, both modes" "$bench" overlap --csv --iters 20 --sizes 64k
rows comm "65536,20 65536,20"
rows compute "65536,20 65536,20"
rows overlap "65536,20 65536,20"
has '^comm,[^,]+/device,' 1
has '^overlap,[^,]+/host,' 1
has '^# overlap (device|host) 65536 B: compute-only [0-9.]+ us, compute\+comm [0-9.]+ us, comm-only [0-9.]+ us: efficiency [0-9.]+$' 2
run "overlap, 2 ranks, host mode" env GICE_MODE=host "$build/bin/gicerun" -n 2 "$bench" overlap --csv --iters 10 --sizes 64k
rows overlap "65536,10" 2
has '^# overlap host 65536 B: .*efficiency [0-9.]+$' 1
run "cpu-noise" "$bench" cpu-noise --csv --iters 40 --sizes 64k
rows quiet "65536,40 65536,40"
rows noisy "65536,40 65536,40"
has '^# cpu-noise device 65536 B: p50 [0-9.]+ -> [0-9.]+ us, p99 [0-9.]+ -> [0-9.]+ us, max [0-9.]+ -> [0-9.]+ us \(quiet -> noisy\); [0-9]+ delays of 20-400 us injected into: main \(tid [0-9]+\)$' 1
has '^# cpu-noise host 65536 B: .* injected into: main \(tid [0-9]+\), gice-d0-proxy \(tid [0-9]+\)$' 1
run "first-kernel" "$bench" first-kernel --csv --iters 50
rows first-kernel "8,50 8,50"
has '^first-kernel,[^,]+/stream-wait,' 1
has '^first-kernel,[^,]+/poll,' 1
run "overlap --iters 401" "$bench" overlap --iters 401
[ "$rc" = 2 ] || { echo "FAIL: overlap --iters 401 exits $rc, expected 2"; fail=1; }

run "usage error" "$bench" rate --window 0
[ "$rc" = 2 ] || { echo "FAIL: rate --window 0 exits $rc, expected 2"; fail=1; }
run "unknown command" "$bench" nosuch
[ "$rc" = 2 ] || { echo "FAIL: nosuch exits $rc, expected 2"; fail=1; }

[ $fail = 0 ] && echo "bench: all passed"
exit $fail
