#!/usr/bin/env bash
# bench-rate-vs-ompi.sh: the message rate of gice against Open MPI's, in one run. Builds
# scripts/mpi_rate.c (osu_mbw_mr style) with mpicc, then each round runs, on 2 ranks over
# loopback only:
#   gice  gicerun -n 2 gice-bench rate --provider shm | tcp (GICE_PLANE=net: every byte crosses
#         the provider; FI_TCP_IFACE=lo)
#   ompi  mpirun -np 2 mpi_rate --mca pml ob1 --mca btl self,vader | self,tcp
#         (btl_tcp_if_include lo; mpirun's own traffic also on lo)
# and prints per transport and size the medians of messages/s and the ratio gice / ompi (higher
# is better). Both sides: SIZES (default 8,4096) bytes, WINDOW (default 64) in flight, an ack
# per window; ITERS messages per size (default: gice-bench's, 20000 up to 64 B, 10000 up to
# 4 KiB). ROUNDS (default 3) rounds; a failed run shows as n/a. RUN_TIMEOUT (default 300) s per
# run. BIND=1 (default) binds both alike (Open MPI's own default binds its 2 ranks, gice's does
# not), BIND=0 neither: scripts/bench-lib.sh, bind_alike. Needs mpicc (libopenmpi-dev:
# installed through install-deps.sh when missing).
set -eu
cd "$(dirname "$0")/.."
build=${BUILD:-build}
rounds=${ROUNDS:-3}
# sizes in bytes: a k or m suffix multiplies by 1024 or 1048576, as in gice-bench
sizes=$(echo "${SIZES:-8,4096}" | awk -F, '{ for (i = 1; i <= NF; i++) { v = $i; m = 1
	if (v ~ /[kK]$/) m = 1024; else if (v ~ /[mM]$/) m = 1048576
	sub(/[kKmM]$/, "", v); printf "%s%d", (i > 1 ? "," : ""), v * m } }')
window=${WINDOW:-64}
iters=${ITERS:-}
tmo=${RUN_TIMEOUT:-300}
bench=$build/bin/gice-bench
mpi_rate=$build/scripts/mpi_rate
[ -x "$bench" ] && [ -x "$build/bin/gicerun" ] || { echo "build first: make" >&2; exit 1; }
if ! command -v mpicc >/dev/null || ! echo '#include <mpi.h>' | mpicc -E -x c - >/dev/null 2>&1; then
	bash scripts/install-deps.sh openmpi-bin libopenmpi-dev
fi
if [ ! -x "$mpi_rate" ] || [ scripts/mpi_rate.c -nt "$mpi_rate" ]; then
	mkdir -p "$(dirname "$mpi_rate")"
	mpicc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -o "$mpi_rate" scripts/mpi_rate.c
fi

# loopback only, for both libraries
export FI_TCP_IFACE=lo GICE_PLANE=net
. scripts/bench-lib.sh # median, bind_alike
bind_alike 1
mpirun=(mpirun --oversubscribe -np 2 --mca pml ob1 --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo
	"${ompi_bind[@]}")
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
common=(--sizes "$sizes" --window "$window")
[ -n "$iters" ] && common+=(--iters "$iters")
mpi_args=(-s "$sizes" -w "$window")
[ -n "$iters" ] && mpi_args+=(-i "$iters")

# rates OUTPUT: "SIZE MSGS_PER_S" per '# rate S B window W: N msgs/s' line
rates() { sed 's/^\[[0-9]*\] //' | awk '$1 == "#" && $2 == "rate" { print $3, $(NF-1) }'; }

declare -A g o # [transport,size] -> rates of the rounds, one per line
for r in $(seq "$rounds"); do
	for t in shm tcp; do
		btl=vader
		[ $t = tcp ] && btl=tcp
		out=$(timeout "$tmo" "$build/bin/gicerun" -n 2 --timeout "$tmo" "$bench" rate --csv --provider $t \
			"${common[@]}" 2>&1) || echo "round $r: gice-bench rate --provider $t failed: $(echo "$out" | tail -3)" >&2
		while read -r s v; do g[$t,$s]+="$v"$'\n'; done < <(echo "$out" | rates)
		out=$(timeout "$tmo" "${mpirun[@]}" --mca btl self,$btl "$mpi_rate" -t "ompi-$btl" "${mpi_args[@]}" 2>&1) ||
			echo "round $r: mpi_rate over $btl failed: $(echo "$out" | tail -3)" >&2
		while read -r s v; do o[$t,$s]+="$v"$'\n'; done < <(echo "$out" | rates)
	done
done

echo "# message rate, $rounds round(s), window $window, 2 ranks on loopback, BIND=$BIND: medians of messages/s"
printf '%-16s %8s %14s %14s %10s\n' transport bytes gice_msgs/s ompi_msgs/s gice/ompi
for t in shm tcp; do
	label="shm/vader"
	[ $t = tcp ] && label="tcp/tcp"
	for s in ${sizes//,/ }; do
		gm=$(printf '%s' "${g[$t,$s]:-}" | median) om=$(printf '%s' "${o[$t,$s]:-}" | median)
		printf '%-16s %8s %14s %14s %10s\n' "$label" "$s" "$gm" "$om" \
			"$(awk -v a="$gm" -v b="$om" 'BEGIN{ if (a != "n/a" && b != "n/a" && b > 0) printf "%.3fx", a/b; else print "n/a" }')"
	done
done
