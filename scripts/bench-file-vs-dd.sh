#!/usr/bin/env bash
# Storage path against dd in one run (issue 12's closing check): reading FILE (256 MiB - 1 GiB)
# into device memory, cold and warm page cache and O_DIRECT, against `dd if=FILE of=/dev/null
# bs=1M`; a checkpoint write of 256 MiB (then fsync) against `dd of=FILE2 bs=1M conv=fsync`.
# Prints each figure in MB/s and the ratios gice / dd, per run (each gice figure against the dd
# figure of the same run, measured just before it), then the median ratio over RUNS runs
# (default 1; absolute rates swing up to 2x on a shared 2-core machine: compare ratios). A warm
# read of 256 MiB takes ~15 ms, so within a run both warm figures are medians of ITERS reads
# (default 5: dd ITERS times, then gice-bench --iters ITERS). Usage:
#   [RUNS=5] [ITERS=5] [WRITE=0] scripts/bench-file-vs-dd.sh FILE [WRITE_FILE]
# WRITE_FILE defaults to FILE.w (overwritten); WRITE=0 skips the write part.
# The page cache is dropped per file with dd iflag=nocache (no root needed).
set -eu
cd "$(dirname "$0")/.."
build=${BUILD:-build}
f=${1:?usage: $0 FILE [WRITE_FILE]}
w=${2:-$f.w}
runs=${RUNS:-1}
iters=${ITERS:-5}
rbytes=$(stat -c %s "$f")
wbytes=$((256 * 1024 * 1024))

drop() { dd if="$1" iflag=nocache count=0 status=none 2>/dev/null || true; }
# dd's MB/s: bytes ($1) over the time dd itself reports (its copy loop, not its process start)
dd_mbps() { # bytes dd-args...
	local b=$1
	shift
	dd "$@" bs=1M 2>&1 >/dev/null | awk -v b="$b" '/copied/ { for (i = 1; i < NF; i++) if ($(i + 1) == "s,") t = $i }
		END { printf "%.1f", b / t / 1e6 }'
}
ratio() { echo "$1 $2" | awk '{ printf "%.2f", $1 / $2 }'; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { printf "%.2f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }


r_cold="" r_direct="" r_warm="" r_wd="" r_wc=""
for run in $(seq 1 "$runs"); do
	drop "$f"
	dd_cold=$(dd_mbps "$rbytes" if="$f" of=/dev/null)
	dd_warm=$(for i in $(seq 1 "$iters"); do echo -n " $(dd_mbps "$rbytes" if="$f" of=/dev/null)"; done | median)
	g=$("$build/bin/gice-bench" file-read --file "$f" --iters "$iters" --csv)
	col() { echo "$g" | awk -F, -v t="$1" '$2 == t { print $8 }' | tr '\n' ' ' | median; }
	echo "run $run: read $rbytes B (MB/s): dd cold $dd_cold, dd warm $dd_warm"
	echo "  gice O_DIRECT cold $(col gice-direct-cold), page cache cold $(col gice-cache-cold)," \
		"warm $(col gice-cache-warm); pread into device memory, warm: $(col pread-warm-devmem)"
	c=$(ratio "$(col gice-cache-cold)" "$dd_cold") d=$(ratio "$(col gice-direct-cold)" "$dd_cold")
	wm=$(ratio "$(col gice-cache-warm)" "$dd_warm")
	echo "  ratios gice/dd: cold cache ${c}x, O_DIRECT vs dd cold ${d}x, warm ${wm}x"
	r_cold="$r_cold $c" r_direct="$r_direct $d" r_warm="$r_warm $wm"
	[ "${WRITE:-1}" = 0 ] && continue
	dd_w=$(dd_mbps "$wbytes" if=/dev/zero of="$w" count=256 conv=fsync)
	g=$("$build/bin/gice-bench" file-write --file "$w" --sizes 256m --csv)
	col() { echo "$g" | awk -F, -v t="$1" '$2 == t { print $8 }'; }
	echo "  write 256 MiB + fsync (MB/s): dd conv=fsync $dd_w, gice O_DIRECT $(col gice-direct+fsync)," \
		"gice page cache $(col gice-cache+fsync)"
	wd=$(ratio "$(col gice-direct+fsync)" "$dd_w") wc=$(ratio "$(col gice-cache+fsync)" "$dd_w")
	echo "  ratios gice/dd: O_DIRECT ${wd}x, page cache ${wc}x"
	r_wd="$r_wd $wd" r_wc="$r_wc $wc"
	rm -f "$w"
done
if [ "$runs" -gt 1 ]; then
	echo "median of $runs runs, gice/dd: read cold cache $(echo "$r_cold" | median)x," \
		"O_DIRECT vs dd cold $(echo "$r_direct" | median)x, warm $(echo "$r_warm" | median)x" \
		"(warm per run:$r_warm)"
	[ "${WRITE:-1}" = 0 ] || echo "  write+fsync O_DIRECT $(echo "$r_wd" | median)x, page cache $(echo "$r_wc" | median)x"
fi
