#!/usr/bin/env bash
# Description: GICE_STATS prints what README's Statistics section says, on 2 ranks over the
# network plane (gice-bench put, 111 put_signals each way): GICE_STATS=1 one counter line, one
# stage line (4 stages, p50/p99/max) and one CT busy and CPU line per rank; the counters are
# consistent — a rank's tx_pkts equal its peer's rx_pkts (lossless run: both count each
# sequenced packet once, no ACKs), ops_done is the 111 operations issued; GICE_STATS=json one
# JSON object per rank that parses, with the same counters, every stage's n, p50 <= p90 <= p99
# <= max, busy shares within [0, 1], each CT thread's CPU time above 0 and no longer than its
# life, and one per device and peer whose tx_pkts are the
# peer's rx_pkts from it; the waits of the ping-pong kernel give complete_to_woke percentiles
# (a chunked ring allreduce its chunk stages: tests/test_trace.sh); a bad GICE_STATS is refused
# with its message.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
fail=0
bench=(env GICE_PLANE=net "$build/bin/gicerun" -n 2 "$build/bin/gice-bench" put --sizes 8 --iters 100)

# field NAME RANK: the value of counter NAME in rank RANK's counter line of $out
field() { echo "$out" | grep "gice stats: rank $2: tx_pkts" | tr ' ' '\n' | grep -A1 -x "$1" | tail -1; }

out=$(GICE_STATS=1 timeout "$(scaled 120)" "${bench[@]}" 2>&1 | sed 's/^\[[0-9]*\] //')
rc=$?
echo "$out" | grep "gice stats" | cut -c1-160
num='[0-9]+\.[0-9]+'
stage="($num/$num/$num|-)"
for r in 0 1; do
	[ "$(echo "$out" | grep -c "^gice stats: rank $r: tx_pkts [0-9]* rx_pkts [0-9]* ")" = 1 ] ||
		{ echo "FAIL: rank $r: no counter line"; fail=1; }
	[ "$(echo "$out" | grep -cE "^gice stats: rank $r: stages of its last [0-9]+ operations and [0-9]+ waits and chunks \(us, p50/p99/max\): issue_to_pickup $stage pickup_to_first_tx $stage first_tx_to_complete $stage issue_to_complete $num/$num/$num complete_to_woke $num/$num/$num chunk_arrived_to_woke - chunk_woke_to_reduced - chunk_reduced_to_sent -$")" = 1 ] ||
		{ echo "FAIL: rank $r: no stage line"; fail=1; }
	[ "$(echo "$out" | grep -cE "^gice stats: rank $r: CT busy share \(the rest polling or asleep\) / CPU share \(spinning included\):( d[0-9]+\.ct[0-9]+ [0-9]+\.[0-9]%/[0-9]+\.[0-9]%)+$")" = 1 ] ||
		{ echo "FAIL: rank $r: no CT busy line"; fail=1; }
	[ "$(field ops_done $r)" = 111 ] || { echo "FAIL: rank $r: ops_done $(field ops_done $r), expected 111"; fail=1; }
done
for r in 0 1; do
	p=$((1 - r))
	if [ -z "$(field tx_pkts $r)" ] || [ "$(field tx_pkts $r)" != "$(field rx_pkts $p)" ] ||
		[ "$(field tx_bytes $r)" != "$(field rx_bytes $p)" ]; then
		echo "FAIL: rank $r tx_pkts $(field tx_pkts $r) tx_bytes $(field tx_bytes $r), rank $p rx_pkts" \
			"$(field rx_pkts $p) rx_bytes $(field rx_bytes $p): expected equal"
		fail=1
	fi
done
[ "$rc" = 0 ] || { echo "FAIL: GICE_STATS=1 run exits $rc"; fail=1; }

out=$(GICE_STATS=json timeout "$(scaled 120)" "${bench[@]}" 2>&1 | sed 's/^\[[0-9]*\] //')
rc=$?
echo "$out" | grep '^{' | python3 -c '
import json, sys
ranks = {}
peers = []
for line in sys.stdin:
    o = json.loads(line)
    if "peer" in o:
        peers.append(o)
    else:
        ranks[o["rank"]] = o
assert sorted(ranks) == [0, 1], "ranks %s" % sorted(ranks)
for r, o in ranks.items():
    c, p = o["counters"], ranks[1 - r]["counters"]
    assert c["ops_done"] == 111, "rank %d ops_done %d" % (r, c["ops_done"])
    assert c["tx_pkts"] == p["rx_pkts"] and c["tx_bytes"] == p["rx_bytes"], "rank %d tx %d, peer rx %d" % (
        r, c["tx_pkts"], p["rx_pkts"])
    assert "retransmits" in c and "fault_drops" in c
    st = o["stages_us"]
    assert set(st) == {"issue_to_pickup", "pickup_to_first_tx", "first_tx_to_complete", "issue_to_complete",
                       "complete_to_woke", "chunk_arrived_to_woke", "chunk_woke_to_reduced", "chunk_reduced_to_sent"}
    assert st["issue_to_complete"]["n"] == 111 == o["operations"], st["issue_to_complete"]
    # the ping-pong kernel waits for each reply: some of its waits had to (the reply was not there yet)
    assert 0 < st["complete_to_woke"]["n"] <= o["events"], (st["complete_to_woke"], o["events"])
    for name, s in st.items():
        if s["n"]:
            assert 0 <= s["p50"] <= s["p90"] <= s["p99"] <= s["max"], (name, s)
    assert o["cts"] and all(0 <= x["busy_share"] <= 1 and x["busy_ns"] <= x["alive_ns"] for x in o["cts"]), o["cts"]
    # the CPU clock of each CT thread: it ran (its set-up at least), and no longer than it
    # lived (a millisecond of slack for the reads of the two clocks)
    assert all(0 < x["cpu_ns"] <= x["alive_ns"] + 1000000 and x["cpu_share"] <= 1.01 for x in o["cts"]), o["cts"]
# per peer: each rank's one device talks to the other's (and to itself: the loopback)
for o in peers:
    back = [q for q in peers if q["device"] == o["peer"] and q["peer"] == o["device"]]
    assert len(back) == 1 and o["peer_counters"]["tx_pkts"] == back[0]["peer_counters"]["rx_pkts"], (o, back)
assert {(o["rank"], o["peer_rank"]) for o in peers} >= {(0, 1), (1, 0)}, peers
print("json: 2 ranks, counters consistent, stages ordered, %d peer lines" % len(peers))
' || { echo "FAIL: GICE_STATS=json output"; echo "$out" | grep '^{' | cut -c1-300; fail=1; }
[ "$rc" = 0 ] || { echo "FAIL: GICE_STATS=json run exits $rc"; fail=1; }
[ "$(echo "$out" | grep -c 'gice stats: rank')" = 0 ] || { echo "FAIL: GICE_STATS=json printed text lines"; fail=1; }

out=$(GICE_STATS=2 timeout "$(scaled 60)" "$build/bin/gice-bench" put --sizes 8 --iters 10 2>&1)
rc=$?
if [ "$rc" = 0 ] || ! echo "$out" | grep -q 'GICE_STATS="2" is not 0, 1 or json'; then
	echo "FAIL: GICE_STATS=2: rc $rc, output: $out"
	fail=1
fi

[ $fail = 0 ] && echo "stats: all passed"
exit $fail
