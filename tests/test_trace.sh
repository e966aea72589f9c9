#!/usr/bin/env bash
# Description: GICE_TRACE writes a valid Chrome/Perfetto trace (Trace Event JSON) at
# gice_finalize: gice-bench put with 56 put_signals from each of its two devices gives one
# operation slice per put on each device's track (a begin and an end of one id, nothing
# unpaired), its stage slices nested inside and in order (issue <= CT pickup <= first packet <=
# completion), and one kernel slice on each device's stream track, during which that device's
# puts were issued, and one flow per put from its issue to its landing at the target; on 2 ranks
# every rank writes PATH.R.json, and scripts/gice-trace-merge puts both ranks' events in one
# file, where every flow crosses from one rank to the other (and refuses a rank given twice);
# gicerun --trace OUT.json does that merge itself (and fails, naming it, when no rank left a
# trace), and each rank's otherData says its clock offset to rank 0, estimated at bootstrap
# (here, one machine: within its bound of 0); the stages outside the engine (api_ev.h: host, kernel and stream waits with the
# waiter waking, stream writes, a ring allreduce's chunks) are well formed and in order.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gice-trace-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# check FILE PIDS OPS: FILE is a trace with processes PIDS (comma-separated) and OPS operations
# per device track, each a paired slice with its stages inside, in order
check() {
	python3 - "$@" <<'EOF'
import json, sys
path, pids, ops = sys.argv[1], sorted(int(p) for p in sys.argv[2].split(",")), int(sys.argv[3])
t = json.load(open(path))
evs = t["traceEvents"]
assert sorted({e["pid"] for e in evs}) == pids, ("pids", sorted({e["pid"] for e in evs}))
by_id = {}
for e in evs:
    if e["ph"] in "be" and e["cat"] == "gice":
        by_id.setdefault((e["pid"], e["id"]), []).append(e)
per_track = {}
for key, es in by_id.items():
    outer = [e for e in es if e["name"].startswith(("put ", "get ", "atomic "))]
    assert [e["ph"] for e in outer] == ["b", "e"], ("unpaired operation", key, outer)
    b, end = outer[0]["ts"], outer[1]["ts"]
    assert b <= end, ("operation ends before it begins", key)
    order = {"queued": 0, "ct": 1, "wire+ack": 2}
    last = b
    for name in sorted({e["name"] for e in es} - {outer[0]["name"]}, key=order.get):
        s = [e for e in es if e["name"] == name]
        assert [e["ph"] for e in s] == ["b", "e"], ("unpaired stage", key, name)
        assert last <= s[0]["ts"] <= s[1]["ts"] <= end, ("stage out of order", key, name, s, b, end)
        last = s[1]["ts"]
    per_track[(outer[0]["pid"], outer[0]["tid"])] = per_track.get((outer[0]["pid"], outer[0]["tid"]), 0) + 1
assert len(per_track) == 2 and set(per_track.values()) == {ops}, ("operations per device track", per_track)
kernels = [e for e in evs if e["ph"] == "X" and e["name"].startswith("kernel ")]
assert len(kernels) == 2 and len({(k["pid"], k["tid"]) for k in kernels}) == 2, ("one ping-pong kernel per stream", kernels[:4])
for key, es in by_id.items(): # the puts are issued by the kernel of their device, while it runs
    b = [e for e in es if e["ph"] == "b" and e["name"].startswith("put ")][0]
    assert any(k["pid"] == b["pid"] and k["tid"] // 1000 - 1 == b["tid"] and
               k["ts"] - 0.001 <= b["ts"] <= k["ts"] + k["dur"] + 0.001 for k in kernels), ("issued outside its kernel", b)
names = [e for e in evs if e["ph"] == "M" and e["name"] == "thread_name" and not e["args"]["name"].endswith(": waits")]
assert len(names) == 8, names # per device: operations, stream, issued, landed (and waits)
# one complete flow per operation: from its issue to its request landing at the target device
tails = [e for e in evs if e["ph"] == "s"]
heads = {}
for e in evs:
    if e["ph"] == "f":
        assert e["id"] not in heads, ("two flow heads", e)
        heads[e["id"]] = e
assert len(tails) == sum(per_track.values()) == len(heads), (len(tails), len(heads))
for s in tails:
    h = heads.get(s["id"])
    assert h and h["ts"] >= s["ts"] and h["tid"] != s["tid"], ("flow", s, h)
    if len(pids) > 1:
        assert h["pid"] != s["pid"], ("a flow between ranks stays in one", s, h)
print("%s: %d operations on %d device tracks, stages in order, %d flows issue -> landed" % (
    path, sum(per_track.values()), len(per_track), len(tails)))
EOF
}

out=$(GICE_TRACE="$tmp/one.json" timeout "$(scaled 120)" "$build/bin/gice-bench" put --sizes 8 --iters 50 2>&1)
rc=$?
[ "$rc" = 0 ] || { echo "FAIL: one process: rc $rc: $out"; fail=1; }
check "$tmp/one.json" 0 56 || { echo "FAIL: one process trace"; fail=1; }

out=$(GICE_TRACE="$tmp/job.json" GICE_PLANE=net timeout "$(scaled 120)" "$build/bin/gicerun" -n 2 \
	"$build/bin/gice-bench" put --sizes 8 --iters 50 2>&1)
rc=$?
[ "$rc" = 0 ] || { echo "FAIL: 2 ranks: rc $rc: $out"; fail=1; }
for r in 0 1; do
	[ -s "$tmp/job.$r.json" ] || { echo "FAIL: 2 ranks: no $tmp/job.$r.json"; fail=1; }
done
scripts/gice-trace-merge "$tmp/merged.json" "$tmp/job.0.json" "$tmp/job.1.json" || { echo "FAIL: merge"; fail=1; }
check "$tmp/merged.json" 0,1 56 || { echo "FAIL: merged trace"; fail=1; }
if scripts/gice-trace-merge "$tmp/bad.json" "$tmp/job.0.json" "$tmp/job.0.json" 2>/dev/null; then
	echo "FAIL: merging rank 0 twice succeeded"
	fail=1
fi

out=$(GICE_PLANE=net timeout "$(scaled 120)" "$build/bin/gicerun" -n 2 --trace "$tmp/run.json" \
	"$build/bin/gice-bench" put --sizes 8 --iters 50 2>&1)
rc=$?
[ "$rc" = 0 ] || { echo "FAIL: gicerun --trace: rc $rc: $out"; fail=1; }
check "$tmp/run.json" 0,1 56 || { echo "FAIL: gicerun --trace: merged trace"; fail=1; }
# each rank's otherData, with its clock offset to rank 0 from the bootstrap's pings: rank 0 exact,
# rank 1 (on this machine, whose ranks share CLOCK_MONOTONIC: true offset 0) an estimate within
# the bound the shortest ping's round trip gives
python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["otherData"]
assert d["merged_by"] == "gicerun" and [r["rank"] for r in d["per_rank"]] == [0, 1], d
r0, r1 = d["per_rank"]
assert r0["clock_aligned_to_rank0"] and r0["clock_offset_ns"] == 0 and r0["clock_offset_bound_ns"] == 0, r0
assert r1["clock_aligned_to_rank0"] and 0 < r1["clock_offset_bound_ns"] and abs(r1["clock_offset_ns"]) <= r1["clock_offset_bound_ns"], r1
print("clock offset of rank 1: %d ns, within +- %d ns" % (r1["clock_offset_ns"], r1["clock_offset_bound_ns"]))' \
	"$tmp/run.json" || { echo "FAIL: gicerun --trace: otherData"; fail=1; }
out=$(timeout "$(scaled 60)" "$build/bin/gicerun" -n 2 --trace "$tmp/none.json" true 2>&1)
rc=$?
case "$rc:$out" in
1:*"gicerun: --trace: rank 1 left no trace"*"gicerun: --trace: no rank left a trace; $tmp/none.json holds none"*) ;;
*) echo "FAIL: gicerun --trace without traces: rc $rc: $out"; fail=1 ;;
esac

# stages FILE KIND=MIN...: the stage records of FILE (cat gice-stage) are well formed — every
# async slice paired, its nested stages inside it and in order (a wait: "written -> woke" ends
# when the wait does; a chunk: arrived -> woke, reduce, send back to back), every stream wait's
# "written -> woke" inside it on its stream's track — and there are at least MIN of each KIND
stages() {
	python3 - "$@" <<'EOF2'
import json, sys
t = json.load(open(sys.argv[1]))
want = dict((a.split("=")[0], int(a.split("=")[1])) for a in sys.argv[2:])
evs = [e for e in t["traceEvents"] if e.get("cat") == "gice-stage"]
kinds = ("host wait", "kernel wait", "stream wait", "stream write", "reduce-scatter chunk", "allgather chunk")
count = dict.fromkeys(kinds, 0)
by_id = {}
for e in evs:
    if e["ph"] in "be":
        by_id.setdefault((e["pid"], e["id"]), []).append(e)
for key, es in by_id.items():
    outer = [e for e in es if e["name"].startswith(kinds)]
    assert [e["ph"] for e in outer] == ["b", "e"] and outer[0]["ts"] <= outer[1]["ts"], ("outer", key, es)
    b, end = outer[0]["ts"], outer[1]["ts"]
    kind = [k for k in kinds if outer[0]["name"].startswith(k)][0]
    count[kind] += 1
    inner = {}
    for e in es:
        if e not in outer:
            inner.setdefault(e["name"], []).append(e)
    for name, s in inner.items():
        assert [e["ph"] for e in s] == ["b", "e"] and b <= s[0]["ts"] <= s[1]["ts"] <= end, ("stage", key, name, s, b, end)
    if kind.endswith("wait"):
        assert set(inner) <= {"written -> woke"}, inner
        assert not inner or inner["written -> woke"][1]["ts"] == end, ("woke is the end of the wait", es)
    else:
        order = ["arrived -> woke", "reduce", "send"] if kind.startswith("reduce") else ["arrived -> woke", "send"]
        assert list(inner) == order or sorted(inner) == sorted(order), (kind, list(inner))
        chain = [inner[n] for n in order]
        assert chain[0][0]["ts"] == b and chain[-1][1]["ts"] == end, ("chunk stages span the chunk", es)
        for x, y in zip(chain, chain[1:]):
            assert x[1]["ts"] == y[0]["ts"], ("chunk stages back to back", x, y)
xs = [e for e in evs if e["ph"] == "X"]
for e in xs:
    if e["name"].startswith(("stream wait", "stream write")):
        count["stream wait" if e["name"].startswith("stream wait") else "stream write"] += 1
    else:
        assert e["name"] == "written -> woke", e
        assert any(w["tid"] == e["tid"] and w["name"].startswith("stream wait") and
                   w["ts"] - 0.001 <= e["ts"] and e["ts"] + e["dur"] <= w["ts"] + w["dur"] + 0.001 for w in xs), (
            "written -> woke outside its stream wait", e)
for k, n in want.items():
    assert count[k] >= n, ("too few", k, count)
print("%s: stages in order: %s" % (sys.argv[1], ", ".join("%s %d" % kv for kv in count.items() if kv[1])))
EOF2
}

# a kernel's waits (the put ping-pong), a stream's waits and writes (gice-demo's training steps),
# a host's waits (file-write), a chunked ring allreduce's chunks on 3 ranks (both phases)
stages "$tmp/one.json" "kernel wait=100" || { echo "FAIL: kernel waits"; fail=1; }
out=$(timeout "$(scaled 120)" "$build/bin/gicerun" -n 2 --trace "$tmp/demo.json" "$build/bin/gice-demo" 2>&1) ||
	{ echo "FAIL: gice-demo: $out"; fail=1; }
stages "$tmp/demo.json" "stream wait=100" "stream write=100" || { echo "FAIL: stream waits and writes"; fail=1; }
out=$(GICE_TRACE="$tmp/fw.json" timeout "$(scaled 120)" "$build/bin/gice-bench" file-write --file "$tmp/f.bin" \
	--sizes 64k 2>&1) || { echo "FAIL: file-write: $out"; fail=1; }
stages "$tmp/fw.json" "host wait=2" || { echo "FAIL: host waits"; fail=1; }
out=$(GICE_ALGO=ring GICE_CHUNK_BYTES=16384 timeout "$(scaled 120)" "$build/bin/gicerun" -n 3 --trace "$tmp/ar.json" \
	"$build/bin/gice-bench" allreduce --sizes 96k --iters 2 --check 2>&1) || { echo "FAIL: allreduce: $out"; fail=1; }
stages "$tmp/ar.json" "reduce-scatter chunk=24" "allgather chunk=12" || { echo "FAIL: collective chunks"; fail=1; }

[ $fail = 0 ] && echo "trace: all passed"
exit $fail
