#!/usr/bin/env bash
# compare-mpi.sh: gice's allreduce against Open MPI's MPI_Allreduce, in one run. Builds
# scripts/mpi_allreduce.c with mpicc (installing openmpi-bin and libopenmpi-dev through
# install-deps.sh when missing), then each round runs, for every rank count of RANKS (default
# "2 4"), alternating on the same machine:
#   gice  gicerun -n N gice-bench allreduce --csv --sizes SIZES  (default provider: shm, with
#         the NVLink plane between the ranks of this host)
#   ompi  mpirun -np N mpi_allreduce -s SIZES --mca pml ob1 --mca btl self,vader
# Both: float32 sums, out of place, p50 of one call on rank 0 after iters / 4 + 2 untimed calls, algbw =
# bytes / p50 and busbw = algbw * 2 (n - 1) / n (nccl-tests). Prints per rank count and size the
# medians over ROUNDS (default 3) of p50 latency and busbw, and the ratios gice / ompi (latency:
# lower is better; busbw: higher is better). SIZES: default 8 B to 64 MiB in steps of 8x (k, m
# suffixes allowed); ITERS overrides the iterations of both; RUN_TIMEOUT (default 600) s per run.
# BIND=1 (default) binds both alike, BIND=0 neither (gice's and, for more ranks than cores, Open
# MPI's default): scripts/bench-lib.sh, bind_alike.
set -eu
cd "$(dirname "$0")/.."
build=${BUILD:-build}
rounds=${ROUNDS:-3}
ranks=${RANKS:-2 4}
sizes=$(echo "${SIZES:-8,64,512,4k,32k,256k,2m,16m,64m}" | awk -F, '{ for (i = 1; i <= NF; i++) { v = $i; m = 1
	if (v ~ /[kK]$/) m = 1024; else if (v ~ /[mM]$/) m = 1048576
	sub(/[kKmM]$/, "", v); printf "%s%d", (i > 1 ? "," : ""), v * m } }')
iters=${ITERS:-}
tmo=${RUN_TIMEOUT:-600}
bench=$build/bin/gice-bench
mpi_ar=$build/scripts/mpi_allreduce
[ -x "$bench" ] && [ -x "$build/bin/gicerun" ] || { echo "build first: make" >&2; exit 1; }
if ! command -v mpicc >/dev/null || ! echo '#include <mpi.h>' | mpicc -E -x c - >/dev/null 2>&1; then
	bash scripts/install-deps.sh openmpi-bin libopenmpi-dev
fi
if [ ! -x "$mpi_ar" ] || [ scripts/mpi_allreduce.c -nt "$mpi_ar" ]; then
	mkdir -p "$(dirname "$mpi_ar")"
	mpicc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -o "$mpi_ar" scripts/mpi_allreduce.c
fi

. scripts/bench-lib.sh # median, bind_alike
bind_alike 1
mpirun=(mpirun --oversubscribe --mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo "${ompi_bind[@]}")
[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
gargs=(allreduce --csv --sizes "$sizes")
margs=(-s "$sizes")
[ -n "$iters" ] && gargs+=(--iters "$iters") && margs+=(-i "$iters")

# rows OUTPUT: "BYTES P50 BUSBW" per allreduce CSV row
rows() { sed 's/^\[[0-9]*\] //' | awk -F, '$1 == "allreduce" && NF == 9 { print $4, $6, $9 }'; }

declare -A gl gb ol ob # [ranks,bytes] -> values of the rounds, one per line
for r in $(seq "$rounds"); do
	for n in $ranks; do
		out=$(timeout "$tmo" "$build/bin/gicerun" -n "$n" --timeout "$tmo" "$bench" "${gargs[@]}" 2>&1) ||
			echo "round $r: gice-bench allreduce on $n ranks failed: $(echo "$out" | tail -3)" >&2
		while read -r b l w; do gl[$n,$b]+="$l"$'\n'; gb[$n,$b]+="$w"$'\n'; done < <(echo "$out" | rows)
		out=$(timeout "$tmo" "${mpirun[@]}" -np "$n" "$mpi_ar" "${margs[@]}" 2>&1) ||
			echo "round $r: mpi_allreduce on $n ranks failed: $(echo "$out" | tail -3)" >&2
		while read -r b l w; do ol[$n,$b]+="$l"$'\n'; ob[$n,$b]+="$w"$'\n'; done < <(echo "$out" | rows)
	done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a != "n/a" && b != "n/a" && b > 0) printf "%.2fx", a/b; else print "n/a" }'; }
echo "# allreduce (float32 sum), $rounds round(s), medians; gice shm + NVLink plane, ompi ob1 vader; BIND=$BIND"
printf '%5s %9s %11s %11s %9s %12s %12s %9s\n' ranks bytes gice_p50_us ompi_p50_us lat_ratio gice_busbw ompi_busbw bw_ratio
for n in $ranks; do
	for b in ${sizes//,/ }; do
		b=$((b / 4 * 4))
		g1=$(printf '%s' "${gl[$n,$b]:-}" | median) o1=$(printf '%s' "${ol[$n,$b]:-}" | median)
		g2=$(printf '%s' "${gb[$n,$b]:-}" | median) o2=$(printf '%s' "${ob[$n,$b]:-}" | median)
		printf '%5s %9s %11s %11s %9s %12s %12s %9s\n' "$n" "$b" "$g1" "$o1" "$(ratio "$g1" "$o1")" "$g2" "$o2" \
			"$(ratio "$g2" "$o2")"
	done
done
