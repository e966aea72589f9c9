#!/usr/bin/env bash
# bench-vs-fi_pingpong.sh [PROVIDER...]: run gice-bench put and libfabric's fi_pingpong on the
# same provider in one run, several rounds, and print medians and the ratios the issues name:
# 8 B one-way latency (gice / fi_pingpong, lower is better) and 1 MiB bandwidth (gice /
# fi_pingpong, higher is better). Default providers: shm tcp. Loopback only.
# RANKS=2 runs gice as two processes under gicerun (as fi_pingpong runs), else two devices in
# one process. BIND=0 (default) binds neither, BIND=1 both alike, a device or a process per CPU
# (scripts/bench-lib.sh, bind_alike). Bound, gice's tcp 1 MiB lost (0.59-0.82x against
# 1.09-1.17x unbound, 2026-12-07): a device's CT threads then share its SM thread's core.
set -eu
cd "$(dirname "$0")/.."
build=${BUILD:-build}
rounds=${ROUNDS:-3}
bench=$build/bin/gice-bench
[ -x "$bench" ] || { echo "build first: make" >&2; exit 1; }
command -v fi_pingpong >/dev/null || { echo "fi_pingpong missing (Debian libfabric-bin)" >&2; exit 1; }
export FI_TCP_IFACE=${FI_TCP_IFACE:-lo} FI_UDP_IFACE=${FI_UDP_IFACE:-lo}
# compare transport with transport: without the NVLink plane every byte crosses the provider,
# as fi_pingpong's do (GICE_PLANE=auto shows what the plane adds on one host)
export GICE_PLANE=${GICE_PLANE:-net}
. scripts/bench-lib.sh # median, fipp, bind_alike
bind_alike 0

echo "# $rounds round(s), RANKS=${RANKS:-1}, BIND=$BIND: medians"
printf '%-6s %10s %12s %12s %8s\n' provider metric gice fi_pingpong ratio
for prov in "${@:-shm tcp}"; do
	for p in $prov; do
		gl=() gb=() fl=() fb=()
		for r in $(seq "$rounds"); do
			if [ "${RANKS:-1}" = 2 ]; then
				csv=$("$build/bin/gicerun" -n 2 --timeout 300 "$bench" put --csv --provider "$p" --sizes 8,1048576 |
					sed 's/^\[[0-9]*\] //') || { echo "gice-bench failed on $p" >&2; continue; }
			else
				csv=$("$bench" put --csv --provider "$p" --sizes 8,1048576) || { echo "gice-bench failed on $p" >&2; continue; }
			fi
			gl+=("$(echo "$csv" | awk -F, '$4 == 8 {print $6}')")
			gb+=("$(echo "$csv" | awk -F, '$4 == 1048576 {print $8}')")
			read -r l _ <<<"$(fipp 8 20000 "$p")"
			read -r _ b <<<"$(fipp 1048576 200 "$p")"
			fl+=("$l")
			fb+=("$b")
		done
		gL=$(printf '%s\n' "${gl[@]}" | median) fL=$(printf '%s\n' "${fl[@]}" | median)
		gB=$(printf '%s\n' "${gb[@]}" | median) fB=$(printf '%s\n' "${fb[@]}" | median)
		printf '%-6s %10s %12s %12s %8s\n' "$p" "8B_us" "$gL" "$fL" "$(awk -v a="$gL" -v b="$fL" 'BEGIN{ if (b > 0) printf "%.2fx", a/b; else print "n/a" }')"
		printf '%-6s %10s %12s %12s %8s\n' "$p" "1MiB_MBps" "$gB" "$fB" "$(awk -v a="$gB" -v b="$fB" 'BEGIN{ if (b > 0) printf "%.2fx", a/b; else print "n/a" }')"
	done
done
