#!/usr/bin/env bash
# Description: scripts/compare.sh --quick runs end to end (gice against fi_pingpong, Open MPI and
# its own host mode, whichever peers are installed) and writes what docs/gice-bench.md says:
# compare.csv with its header and gice's rows — put and allreduce p50 at both sizes, the overlap
# efficiency and the cpu-noise quiet/noisy p50 and p99 of both modes — and five SVG plots that
# parse as XML, the put plots with a line of gice's points, the overlap and cpu-noise plots with
# a bar per mode and row, each with its PNG twin (gnuplot); without OUTDIR it is a usage error
# (exit 2). The figures are not judged.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gice-compare-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

out=$(BUILD=$build RUN_TIMEOUT=$(scaled 60) timeout "$(scaled 300)" scripts/compare.sh --quick "$tmp/out" 2>&1)
rc=$?
echo "$out" | head -20
[ "$rc" = 0 ] || { echo "FAIL: compare.sh --quick: rc $rc"; fail=1; }
python3 - "$tmp/out" <<'EOF2' || fail=1
import csv, os, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
rows = list(csv.reader(open(os.path.join(d, "compare.csv"))))
assert rows[0] == ["experiment", "system", "transport", "ranks", "bytes", "metric", "value"], rows[0]
have = {(r[0], r[1], r[4], r[5]) for r in rows[1:] if float(r[6]) >= 0}
want = {("put", "gice", b, m) for b in ("8", "65536") for m in ("p50_us", "MBps")}
want |= {("allreduce", "gice", b, "p50_us") for b in ("8", "65536")}
want |= {("overlap", "gice-" + m, "1048576", "efficiency") for m in ("device", "host")}
want |= {("cpu-noise", "gice-" + m, "1048576", q + "_" + p) for m in ("device", "host")
         for q in ("quiet", "noisy") for p in ("p50_us", "p99_us")}
assert want <= have, ("missing rows", sorted(want - have))
ns = "{http://www.w3.org/2000/svg}"
for name, lines, bars in (("latency", 1, 0), ("bandwidth", 1, 0), ("allreduce", 1, 0), ("overlap", 0, 6),
                          ("cpu-noise", 0, 8)):
    root = ET.parse(os.path.join(d, name + ".svg")).getroot()
    assert root.tag == ns + "svg", (name, root.tag)
    polys = [p for p in root.iter(ns + "polyline") if len(p.get("points").split()) >= 2]
    rects = [r for r in root.iter(ns + "rect") if r.find(ns + "title") is not None]
    assert len(polys) >= lines and len(rects) >= bars, (name, len(polys), len(rects))
    png = open(os.path.join(d, name + ".png"), "rb").read()  # gnuplot: make deps installs it
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000, (name, len(png))
print("compare: %d rows, every gice row there, 5 plots drawn as SVG and PNG" % (len(rows) - 1))
EOF2
out=$(scripts/compare.sh 2>&1)
rc=$?
[ "$rc" = 2 ] && echo "$out" | grep -q '^usage: scripts/compare.sh \[--quick\] OUTDIR$' ||
	{ echo "FAIL: compare.sh without OUTDIR: rc $rc: $out"; fail=1; }

[ $fail = 0 ] && echo "compare: all passed"
exit $fail
