#!/usr/bin/env bash
# Description: the NVLink plane between ranks that disagree on it. In a 2-rank job on one host
# where one rank sets GICE_PLANE=net and the other keeps auto, neither maps the other (each
# publishes whether it allows the plane; map_peer needs both), so their rendezvous puts and gets
# go over the provider on both sides and complete with the right bytes (gice-bench --check).
# Before, the rank that mapped its peer announced its bytes on the plane and the other, which
# did not map it, read them over the provider without a grant: the job hung until its timeout.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
. tests/time_scale.sh
fail=0

for prov in shm tcp; do
	for net in 0 1; do
		for op in put get; do
			out=$(FI_TCP_IFACE=lo timeout "$(scaled 60)" "$build/bin/gicerun" -n 2 --timeout "$(scaled 50)" sh -c \
				'[ "$GICE_RANK" = '$net' ] && export GICE_PLANE=net; exec '"$build"'/bin/gice-bench '$op' --provider '$prov' --sizes 64k,1m --iters 20 --check' 2>&1)
			rc=$?
			echo "$prov, rank $net on GICE_PLANE=net: $op rc $rc"
			if [ $rc != 0 ] || echo "$out" | grep -q ' error '; then
				echo "$out" | tail -5
				echo "FAIL: $op over $prov with GICE_PLANE=net on rank $net only (rc $rc)"
				fail=1
			fi
		done
	done
done

[ $fail = 0 ] && echo "plane: all passed"
exit $fail
