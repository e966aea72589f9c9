#!/usr/bin/env bash
# Storage path against dd in one run (issue 12's closing check): reading FILE (256 MiB - 1 GiB)
# into device memory, cold and warm page cache and O_DIRECT, against `dd if=FILE of=/dev/null
# bs=1M`; a checkpoint write of 256 MiB (then fsync) against `dd of=FILE2 bs=1M conv=fsync`.
# Prints each figure in MB/s and the ratios gice / dd. Usage:
#   scripts/bench-file-vs-dd.sh FILE [WRITE_FILE]   (WRITE_FILE default FILE.w, overwritten)
# The page cache is dropped per file with dd iflag=nocache (no root needed).
set -eu
cd "$(dirname "$0")/.."
build=${BUILD:-build}
f=${1:?usage: $0 FILE [WRITE_FILE]}
w=${2:-$f.w}
bytes=$(stat -c %s "$f")

drop() { dd if="$1" iflag=nocache count=0 status=none 2>/dev/null || true; }
# dd's MB/s from its bytes and elapsed seconds
dd_mbps() { # dd args...
	local t0 t1
	t0=$(date +%s.%N)
	dd "$@" bs=1M status=none
	t1=$(date +%s.%N)
	echo "$t0 $t1" | awk -v b="$bytes" '{ printf "%.1f", b / ($2 - $1) / 1e6 }'
}

drop "$f"
dd_cold=$(dd_mbps if="$f" of=/dev/null)
dd_warm=$(dd_mbps if="$f" of=/dev/null)
g=$("$build/bin/gice-bench" file-read --file "$f" --csv)
col() { echo "$g" | awk -F, -v t="$1" '$2 == t { print $8 }'; }
echo "read $bytes B (MB/s): dd cold $dd_cold, dd warm $dd_warm"
echo "  gice O_DIRECT cold $(col gice-direct-cold), page cache cold $(col gice-cache-cold), warm $(col gice-cache-warm)"
echo "  ratios gice/dd: cold cache $(echo "$(col gice-cache-cold) $dd_cold" | awk '{ printf "%.2f", $1 / $2 }')x," \
	"O_DIRECT vs dd cold $(echo "$(col gice-direct-cold) $dd_cold" | awk '{ printf "%.2f", $1 / $2 }')x," \
	"warm $(echo "$(col gice-cache-warm) $dd_warm" | awk '{ printf "%.2f", $1 / $2 }')x"

bytes=$((256 * 1024 * 1024))
dd_w=$(dd_mbps if=/dev/zero of="$w" count=256 conv=fsync)
g=$("$build/bin/gice-bench" file-write --file "$w" --sizes 256m --csv)
echo "write 256 MiB + fsync (MB/s): dd conv=fsync $dd_w, gice O_DIRECT $(col gice-direct+fsync)," \
	"gice page cache $(col gice-cache+fsync)"
echo "  ratios gice/dd: O_DIRECT $(echo "$(col gice-direct+fsync) $dd_w" | awk '{ printf "%.2f", $1 / $2 }')x," \
	"page cache $(echo "$(col gice-cache+fsync) $dd_w" | awk '{ printf "%.2f", $1 / $2 }')x"
rm -f "$w"
