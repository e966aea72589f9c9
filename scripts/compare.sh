#!/usr/bin/env bash
# compare.sh [--quick] OUTDIR: gice against the CPU-driven way, in one run, into OUTDIR:
#   put        gice-bench put (two devices, GICE_PLANE=net: every byte crosses the provider)
#              beside libfabric's fi_pingpong on the same provider and sizes (loopback)
#   allreduce  gicerun -n 2 gice-bench allreduce beside Open MPI's MPI_Allreduce on 2 ranks
#              (scripts/mpi_allreduce.c, as scripts/compare-mpi.sh; skipped when mpicc is missing)
#   overlap    gice-bench overlap: device mode against host mode (a host proxy issues the kernels'
#              operations, as a CPU-driven stack does)
#   cpu-noise  gice-bench cpu-noise: the same, with the host threads preempted
# It writes OUTDIR/compare.csv (experiment,system,transport,ranks,bytes,metric,value: one
# measurement a line, medians over ROUNDS), the plots latency.svg and bandwidth.svg (put, by
# size), allreduce.svg, overlap.svg and cpu-noise.svg (drawn by scripts/svg-plot.awk: no
# plotting package needed) and the same as PNG (scripts/png-plot.sh: gnuplot, from Debian's
# gnuplot-nox, which make deps installs; SVG only without it), and prints the ratios gice / peer. A peer that is missing or fails
# leaves its rows out and says so; a failing gice run is an error (exit 1).
# PROVIDER (default shm), ROUNDS (default 3), SIZES (put; default 8 B to 1 MiB), AR_SIZES
# (allreduce; default 8 B to 4 MiB), RUN_TIMEOUT (default 300 s a run). --quick: two sizes,
# one round and few gice iterations (about 15 s; tests/test_compare.sh runs it).
set -eu
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = --quick ]; then
	quick=1
	shift
fi
[ $# = 1 ] || { echo "usage: scripts/compare.sh [--quick] OUTDIR" >&2; exit 2; }
dir=$1
build=${BUILD:-build}
bench=$build/bin/gice-bench
prov=${PROVIDER:-shm}
tmo=${RUN_TIMEOUT:-300}
[ -x "$bench" ] && [ -x "$build/bin/gicerun" ] || { echo "compare.sh: build first: make" >&2; exit 1; }
mkdir -p "$dir"
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_UDP_IFACE=${FI_UDP_IFACE:-lo}
. scripts/bench-lib.sh # median, fipp

if [ $quick = 1 ]; then
	rounds=1 sizes=${SIZES:-8,65536} ar_sizes=${AR_SIZES:-8,65536}
	put_it=(--iters 200) ar_it=(--iters 20) mpi_it=(-i 20) step_it=(--iters 10)
else
	rounds=${ROUNDS:-3} sizes=${SIZES:-8,512,4096,32768,262144,1048576} ar_sizes=${AR_SIZES:-8,512,4096,32768,262144,4194304}
	put_it=() ar_it=() mpi_it=() step_it=()
fi
raw=$dir/raw.txt # every measurement of every round: "experiment system transport ranks bytes metric value"
: >"$raw"
note() { echo "compare.sh: $*" >&2; }
# gice_rows: gice-bench CSV rows on stdin (ranks' prefixes removed) → raw lines of SYSTEM
gice_rows() {
	sed 's/^\[[0-9]*\] //' | awk -F, -v sys="$1" 'NF == 9 && $6 ~ /^[0-9.]+$/ {
		print $1, sys, $2, $3, $4, "p50_us", $6; print $1, sys, $2, $3, $4, "p99_us", $7
		print $1, sys, $2, $3, $4, "MBps", $8 }' >>"$raw"
}

mpi_ar=$build/scripts/mpi_allreduce
if command -v mpicc >/dev/null && command -v mpirun >/dev/null && echo '#include <mpi.h>' | mpicc -E -x c - >/dev/null 2>&1; then
	if [ ! -x "$mpi_ar" ] || [ scripts/mpi_allreduce.c -nt "$mpi_ar" ]; then
		mkdir -p "$(dirname "$mpi_ar")"
		mpicc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -o "$mpi_ar" scripts/mpi_allreduce.c
	fi
	mpirun=(mpirun --oversubscribe --mca pml ob1 --mca btl self,vader --mca oob_tcp_if_include lo)
	[ "$(id -u)" = 0 ] && mpirun+=(--allow-run-as-root)
else
	mpi_ar=
	note "no mpicc/mpirun: allreduce without Open MPI (scripts/compare-mpi.sh installs it)"
fi
command -v fi_pingpong >/dev/null || note "no fi_pingpong: put without it (Debian libfabric-bin)"

for r in $(seq "$rounds"); do
	# put: gice and fi_pingpong, same provider and sizes
	out=$(GICE_PLANE=net timeout "$tmo" "$bench" put --csv --provider "$prov" --sizes "$sizes" "${put_it[@]}" 2>&1) ||
		{ note "gice-bench put failed: $(echo "$out" | tail -3)"; exit 1; }
	echo "$out" | grep '^put,' | sed "s/^put,[^,]*,/put,$prov,/" | gice_rows gice
	if command -v fi_pingpong >/dev/null; then
		for b in ${sizes//,/ }; do
			# fi_pingpong needs many exchanges to amortise its start (200 of 8 B: ~1 ms each)
			read -r l bw <<<"$(fipp "$b" "$([ "$b" -le 65536 ] && echo 20000 || echo 200)" "$prov")" || true
			if [ -n "${l:-}" ]; then
				echo "put fi_pingpong $prov 2 $b p50_us $l" >>"$raw"
				echo "put fi_pingpong $prov 2 $b MBps $bw" >>"$raw"
			else
				note "fi_pingpong $prov $b B failed"
			fi
		done
	fi
	# allreduce: gice on 2 ranks (shm and the NVLink plane) and Open MPI (ob1, vader)
	out=$(timeout "$tmo" "$build/bin/gicerun" -n 2 --timeout "$tmo" "$bench" allreduce --csv --sizes "$ar_sizes" \
		"${ar_it[@]}" 2>&1) || { note "gice-bench allreduce failed: $(echo "$out" | tail -3)"; exit 1; }
	echo "$out" | sed 's/^\[[0-9]*\] //' | grep '^allreduce,' | gice_rows gice
	if [ -n "$mpi_ar" ]; then
		out=$(timeout "$tmo" "${mpirun[@]}" -np 2 "$mpi_ar" -s "$ar_sizes" "${mpi_it[@]}" 2>&1) &&
			echo "$out" | grep '^allreduce,' | sed 's/^allreduce,[^,]*,/allreduce,vader,/' | gice_rows ompi ||
			note "mpi_allreduce failed: $(echo "$out" | tail -3)"
	fi
	# overlap and cpu-noise: device mode against host mode (both in one process); the
	# efficiency and the threads perturbed come as '#' lines on stderr
	for exp in overlap cpu-noise; do
		out=$(timeout "$tmo" "$bench" "$exp" --csv --provider "$prov" "${step_it[@]}" 2>&1) ||
			{ note "gice-bench $exp failed: $(echo "$out" | tail -3)"; exit 1; }
		echo "$out" | awk -F, -v ex="$exp" 'NF == 9 && $6 ~ /^[0-9.]+$/ { split($2, t, "/")
			print ex, "gice-" t[2], t[1], $3, $4, $1 "_p50_us", $6; print ex, "gice-" t[2], t[1], $3, $4, $1 "_p99_us", $7 }' >>"$raw"
		echo "$out" | awk -v p="$prov" '/^# overlap (device|host) [0-9]+ B: .*efficiency/ {
			print "overlap", "gice-" $3, p, 1, $4, "efficiency", $NF }' >>"$raw"
		echo "$out" | grep "^# $exp" >&2 || true
	done
done

# compare.csv: the median of the rounds per measurement
csv=$dir/compare.csv
echo "experiment,system,transport,ranks,bytes,metric,value" >"$csv"
awk '{ k = $1 "," $2 "," $3 "," $4 "," $5 "," $6; if (!(k in n)) order[++m] = k; v[k, ++n[k]] = $7 }
	END { for (i = 1; i <= m; i++) { k = order[i]; c = n[k]
		for (a = 2; a <= c; a++) for (b = a; b > 1 && v[k, b - 1] > v[k, b]; b--) { t = v[k, b]; v[k, b] = v[k, b - 1]; v[k, b - 1] = t }
		print k "," v[k, int((c + 1) / 2)] } }' "$raw" >>"$csv"
rm -f "$raw"

# plots
sel() { awk -F, -v e="$1" -v m="$2" '$1 == e && $6 == m'  "$csv"; }
# plot NAME VAR=VALUE...: data on stdin to NAME.svg (scripts/svg-plot.awk) and NAME.png
# (scripts/png-plot.sh: gnuplot, which scripts/install-deps.sh installs; without it, SVG only)
png=1
command -v gnuplot >/dev/null 2>&1 || { png=0; echo "# no gnuplot (Debian gnuplot-nox): SVG plots only" >&2; }
plot() {
	local name=$1 data v args=()
	shift
	data=$(cat)
	for v in "$@"; do args+=(-v "$v"); done
	printf '%s\n' "$data" | awk -f scripts/svg-plot.awk "${args[@]}" >"$dir/$name.svg"
	[ $png = 0 ] || printf '%s\n' "$data" | scripts/png-plot.sh "$dir/$name.png" "$@" ||
		echo "# $name.png: gnuplot failed" >&2
}
sel put p50_us | awk -F, '{ print $2, $5, $7 }' |
	plot latency logx=1 logy=1 title="put one-way latency ($prov, p50)" xlabel="message size (bytes)" ylabel="us"
sel put MBps | awk -F, '{ print $2, $5, $7 }' |
	plot bandwidth logx=1 logy=1 title="put bandwidth ($prov)" xlabel="message size (bytes)" ylabel="MB/s"
sel allreduce p50_us | awk -F, '{ print $2, $5, $7 }' |
	plot allreduce logx=1 logy=1 title="allreduce, 2 ranks, float32 sum (p50)" xlabel="bytes" ylabel="us"
eff=$(sel overlap efficiency | awk -F, '{ printf "%s%s %s", (NR > 1 ? ", " : ""), substr($2, 6), $7 }')
awk -F, '$1 == "overlap" && $6 ~ /_p50_us$/ { sub(/_p50_us$/, "", $6); print substr($2, 6), $6, $7 }' "$csv" |
	plot overlap kind=bar title="overlap: iteration p50 (efficiency $eff)" ylabel="us"
awk -F, '$1 == "cpu-noise" { print substr($2, 6), $6, $7 }' "$csv" |
	plot cpu-noise kind=bar title="cpu-noise: iteration time, host threads preempted" ylabel="us"

# ratios
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%.2fx", a / b; else print "n/a" }'; }
val() { awk -F, -v e="$1" -v s="$2" -v b="$3" -v m="$4" '$1 == e && $2 == s && $5 == b && $6 == m { print $7 }' "$csv"; }
echo "# gice against the CPU-driven way ($prov, $rounds round(s), medians; the machine's load shows in them)"
printf '%-10s %9s %-14s %12s %12s %9s\n' experiment bytes metric gice peer ratio
for b in ${sizes//,/ }; do
	for m in p50_us MBps; do
		g=$(val put gice "$b" $m) p=$(val put fi_pingpong "$b" $m)
		printf '%-10s %9s %-14s %12s %12s %9s\n' put "$b" "$m" "$g" "${p:-n/a}" "$(ratio "$g" "$p")"
	done
done
for b in ${ar_sizes//,/ }; do
	b=$((b / 4 * 4))
	g=$(val allreduce gice "$b" p50_us) p=$(val allreduce ompi "$b" p50_us)
	printf '%-10s %9s %-14s %12s %12s %9s\n' allreduce "$b" p50_us "$g" "${p:-n/a}" "$(ratio "$g" "$p")"
done
b=$(awk -F, '$1 == "overlap" { print $5; exit }' "$csv")
g=$(val overlap gice-device "$b" efficiency) p=$(val overlap gice-host "$b" efficiency)
printf '%-10s %9s %-14s %12s %12s %9s\n' overlap "$b" "efficiency" "$g" "${p:-n/a}" "$(ratio "$g" "$p")"
for m in quiet_p99_us noisy_p99_us; do
	g=$(val cpu-noise gice-device "$b" $m) p=$(val cpu-noise gice-host "$b" $m)
	printf '%-10s %9s %-14s %12s %12s %9s\n' cpu-noise "$b" "$m" "$g" "${p:-n/a}" "$(ratio "$g" "$p")"
done
echo "# peers: put fi_pingpong, allreduce Open MPI, overlap and cpu-noise gice's host mode; wrote $csv and $dir/*.svg$([ $png = 0 ] || echo " *.png")"
