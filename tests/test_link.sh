#!/usr/bin/env bash
# Description: the README's example program builds with the README's own compile line (against
# build/lib/libgice.a), and, once installed (make install PREFIX=<tmp>), with
# `pkg-config --cflags --libs gice` (shared) and `pkg-config --static --libs gice` (against
# libgice.a); each binary runs and moves its 4 KiB. pkg-config --static must not ask for
# libfabric's provider libraries (verbs, efa, psm2). Skips (77) when the library was built with
# a sanitizer (those links need the sanitizer's flags) or pkg-config is missing.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

command -v pkg-config >/dev/null || { echo "skipped: no pkg-config"; exit 77; }
[ -f "$build/lib/libgice.a" ] || fail "no $build/lib/libgice.a: build first"
if nm "$build/lib/libgice.a" 2>/dev/null | grep -q -E '__(asan|tsan)_'; then
	echo "skipped: $build/lib/libgice.a is built with a sanitizer"
	exit 77
fi

# the example: the first C block after the "## Example" heading; the line: the README's cc line
awk '/^## Example/ {ex = 1} ex && /^```c$/ {on = 1; next} on && /^```$/ {exit} on {print}' \
	"$root/README.md" >"$tmp/example.c"
[ -s "$tmp/example.c" ] || fail "no example in README.md"
line=$(grep -o '`cc [^`]*example\.c[^`]*`' "$root/README.md" | head -1 | tr -d '`')
[ -n "$line" ] || fail "no cc line for example.c in README.md"
echo "README line: $line"

run() { # name binary: it prints the sender's status and the byte the receiver read
	out=$(GICE_LOG_LEVEL=error timeout 60 "$2" 2>&1) || fail "$1: exit $?: $out"
	echo "$out" | grep -q 'receiver: byte 4095 is 42' || fail "$1: $out"
	echo "$out" | grep -q 'sender: GICE_OK' || fail "$1: $out"
	echo "$1: ok"
}

# 1. the README's line, from a directory laid out as the source tree (api/, build/)
mkdir -p "$tmp/tree"
ln -s "$root/api" "$tmp/tree/api"
ln -s "$build" "$tmp/tree/build"
cp "$tmp/example.c" "$tmp/tree/example.c"
(cd "$tmp/tree" && eval "$line -o example") || fail "the README's line does not build: $line"
run "README line" "$tmp/tree/example"

# 2. installed, through pkg-config
make -s -C "$root" --no-print-directory install BUILD="$build" PREFIX="$tmp/inst" >"$tmp/install.log" 2>&1 ||
	fail "make install: $(tail -5 "$tmp/install.log")"
export PKG_CONFIG_PATH=$tmp/inst/lib/pkgconfig
static=$(pkg-config --static --libs gice) || fail "pkg-config --static --libs gice failed"
echo "pkg-config --static --libs gice: $static"
for l in -libverbs -lefa -lpsm2 -lrdmacm; do
	case " $static " in *" $l "*) fail "pkg-config --static pulls $l" ;; esac
done
cc -std=c11 -o "$tmp/shared" "$tmp/example.c" $(pkg-config --cflags --libs gice) ||
	fail "shared link with pkg-config --cflags --libs gice"
LD_LIBRARY_PATH=$tmp/inst/lib run "pkg-config shared" "$tmp/shared"
LD_LIBRARY_PATH=$tmp/inst/lib ldd "$tmp/shared" | grep -q "$tmp/inst/lib/libgice.so" || fail "the shared binary does not use the installed libgice.so"
cc -std=c11 -o "$tmp/static" "$tmp/example.c" $(pkg-config --cflags gice) \
	$(echo "$static" | sed 's/-lgice\b/-l:libgice.a/') || fail "static link with pkg-config --static --libs gice"
run "pkg-config static" "$tmp/static"
if ldd "$tmp/static" | grep -q libgice; then fail "the static binary loads libgice.so"; fi
echo "link: all ok"
