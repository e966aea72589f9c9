#!/usr/bin/env bash
# fault_rate.sh: how close a rate cap (GICE_FAULTS=rate=...) holds a link to the cap. For each
# cap of CAPS (MB/s, default "50 100"), gice-bench rate sends 64 KiB puts from rank 0 to rank 1
# under gicerun -n 2 on loopback, with GICE_PLANE=net and GICE_CT_RNDV_BYTES=0 so that every
# byte crosses the fabric (and its injector), and the cap on link 0->1 only. Prints the cap,
# the payload rate measured and their ratio; the cap counts the 96-byte headers too, so the
# payload rate sits a little below it. Exit 1 when a ratio is outside [0.9, 1.1].
# Knobs: CAPS, ITERS (windows, default 40), PROVIDER (default shm), RUN_TIMEOUT (default 120 s).
# Timing on a shared machine is noisy: run it alone when the figure matters.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
caps=${CAPS:-"50 100"}
iters=${ITERS:-40}
prov=${PROVIDER:-shm}
tmo=${RUN_TIMEOUT:-120}
bench=$build/bin/gice-bench
run=$build/bin/gicerun
[ -x "$bench" ] && [ -x "$run" ] || { echo "build first: make" >&2; exit 1; }
export GICE_PLANE=net GICE_CT_RNDV_BYTES=0 GICE_TIMEOUT_MS=${GICE_TIMEOUT_MS:-20000}
bad=0
printf '%-10s %-12s %s\n' cap_MBps measured_MBps ratio
for cap in $caps; do
	out=$(GICE_FAULTS="rate=${cap}MBps,link=0->1" timeout "$tmo" "$run" -n 2 "$bench" rate --csv \
		--sizes 65536 --window 256 --iters "$iters" --provider "$prov" 2>/dev/null | grep -v '^#' | grep ',65536,' | head -1)
	val=$(echo "$out" | awk -F, '{print $(NF-1)}')
	if [ -z "$out" ] || [ -z "$val" ]; then
		echo "cap $cap MB/s: no result (run failed or timed out)"
		bad=1
		continue
	fi
	ratio=$(awk -v m="$val" -v c="$cap" 'BEGIN{printf "%.3f", m / c}')
	printf '%-10s %-12s %s\n' "$cap" "$val" "$ratio"
	awk -v r="$ratio" 'BEGIN{exit !(r >= 0.9 && r <= 1.1)}' || bad=1
done
exit $bad
