#!/usr/bin/env bash
# bench-reliability.sh: what gice's reliable delivery costs, in one run, ROUNDS times (default
# 5: run-to-run noise here is large), as medians and ratios (variant / base):
#   (a) put_signal 8 B one-way latency over tcp with gice's reliability forced off
#       (GICE_RELIABLE=0) and on (GICE_RELIABLE=1);
#   (b) 1 MiB put bandwidth over udp datagrams, lossless and with GICE_FAULTS=drop=0.01
#       (seed = round), and the same over tcp.
# Every run is gice-bench put between two processes under gicerun -n 2 on loopback, with
# GICE_PLANE=net (unless set) so every byte crosses the provider. Each run is bounded by
# RUN_TIMEOUT seconds (default 120); a run that fails or times out counts as n/a.
# Knobs: ROUNDS, RUN_TIMEOUT, LAT_ITERS (default 20000), BW_ITERS (default 100), DROP (default
# 0.01).
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
rounds=${ROUNDS:-5}
tmo=${RUN_TIMEOUT:-120}
lat_iters=${LAT_ITERS:-20000}
bw_iters=${BW_ITERS:-100}
drop=${DROP:-0.01}
bench=$build/bin/gice-bench
run=$build/bin/gicerun
if [ ! -x "$bench" ] || [ ! -x "$run" ]; then
	echo "build first: make" >&2
	exit 1
fi
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_UDP_IFACE=${FI_UDP_IFACE:-lo}
export GICE_PLANE=${GICE_PLANE:-net}

# parameters this build knows (the features may be missing from an older build)
params=$("$build/bin/gice-info" -c 2>/dev/null)
for p in GICE_RELIABLE GICE_FAULTS; do
	echo "$params" | grep -q "$p" ||
		echo "note: this build has no $p (gice-info -c): the rows that use it compare like with like" >&2
done

median() { sort -g | awk '{v[NR]=$1} END { if (NR) print v[int((NR+1)/2)]; else print "n/a" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "n/a" && b != "n/a" && a > 0) printf "%.2fx", b/a; else print "n/a" }'; }

# put PROVIDER SIZE ITERS COLUMN [VAR=VALUE...]: one gice-bench put run on 2 ranks; prints the
# CSV column (6: p50_us, 8: MBps) of that size, nothing when the run fails
put() {
	local prov=$1 size=$2 iters=$3 col=$4 csv
	shift 4
	csv=$(env "$@" timeout -k 5 $((tmo + 10)) "$run" -n 2 --timeout "$tmo" \
		"$bench" put --csv --provider "$prov" --sizes "$size" --iters "$iters" 2>/dev/null |
		sed 's/^\[[0-9]*\] //') || { echo "run failed: $* gice-bench put --provider $prov --sizes $size" >&2; return; }
	echo "$csv" | awk -F, -v s="$size" -v c="$col" '$1 == "put" && $4 == s { print $c }'
}

# row CASE PROVIDER METRIC SIZE ITERS COLUMN BASE_ENV VARIANT_ENV
row() {
	local name=$1 prov=$2 metric=$3 size=$4 iters=$5 col=$6 base_env=$7 var_env=$8 b=() v=() x bm vm
	for r in $(seq "$rounds"); do
		# shellcheck disable=SC2086
		x=$(put "$prov" "$size" "$iters" "$col" ${base_env//@R/$r}) && [ -n "$x" ] && b+=("$x")
		# shellcheck disable=SC2086
		x=$(put "$prov" "$size" "$iters" "$col" ${var_env//@R/$r}) && [ -n "$x" ] && v+=("$x")
	done
	bm=$( ((${#b[@]})) && printf '%s\n' "${b[@]}" | median || echo n/a)
	vm=$( ((${#v[@]})) && printf '%s\n' "${v[@]}" | median || echo n/a)
	printf '%-30s %-5s %-10s %12s %12s %8s\n' "$name" "$prov" "$metric" "$bm" "$vm" "$(ratio "$bm" "$vm")"
}

echo "# $rounds rounds, medians; ratio = variant / base; GICE_PLANE=$GICE_PLANE, 2 ranks (gicerun -n 2)"
printf '%-30s %-5s %-10s %12s %12s %8s\n' "case (base vs variant)" prov metric base variant ratio
row "reliable off vs on" tcp 8B_us 8 "$lat_iters" 6 "GICE_RELIABLE=0" "GICE_RELIABLE=1"
row "lossless vs drop=$drop" udp 1MiB_MBps 1048576 "$bw_iters" 8 "GICE_FAULTS=" "GICE_FAULTS=drop=$drop,seed=@R"
row "lossless vs drop=$drop" tcp 1MiB_MBps 1048576 "$bw_iters" 8 "GICE_FAULTS=" "GICE_FAULTS=drop=$drop,seed=@R"
