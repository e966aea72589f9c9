/* bench_put.c: gice-bench put, a put_signal ping-pong between two devices (two in this process,
 * or one per rank of a pair under a launcher): one-way latency and bandwidth per size. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

struct pp_args {
	int initiator, check;
	gice_conn_t c;
	uint64_t rkey;
	gice_counter_t my_sig, peer_sig;
	uint8_t *src, *dst;
	size_t bytes;
	long iters, warm;
	uint64_t *rtt, *t_start, *t_end;
	_Atomic long *bad_offset; /* first mismatching offset, or -1 */
	uint8_t *expect;          /* --check: scratch of bytes, the expected payload */
};

static void verify(struct pp_args *a, uint64_t seed)
{
	bench_pattern(a->expect, a->bytes, seed);
	if (memcmp(a->expect, a->dst, a->bytes)) {
		for (size_t i = 0; i < a->bytes; i++)
			if (a->expect[i] != a->dst[i]) {
				long expect = -1;
				atomic_compare_exchange_strong(a->bad_offset, &expect, (long)i);
				break;
			}
	}
}

static void pp_kernel(gice_kctx_t *k, void *a_)
{
	struct pp_args *a = a_;
	long total = a->warm + a->iters;

	for (long i = 0; i < total; i++) {
		uint64_t t0 = now_ns();
		if (i == a->warm)
			*a->t_start = t0;
		if (a->initiator) {
			if (a->check)
				bench_pattern(a->src, a->bytes, (uint64_t)i * 2);
			gice_put_signal(k, a->c, a->rkey, 0, a->src, a->bytes, a->peer_sig, 1, GICE_SIGNAL_ADD,
					GICE_NO_COUNTER);
			if (gice_wait_until(k, a->my_sig, GICE_CMP_GE, (uint64_t)i + 1, 0, NULL))
				return;
			if (a->check)
				verify(a, (uint64_t)i * 2 + 1);
		} else {
			if (gice_wait_until(k, a->my_sig, GICE_CMP_GE, (uint64_t)i + 1, 0, NULL))
				return;
			if (a->check) {
				verify(a, (uint64_t)i * 2);
				bench_pattern(a->src, a->bytes, (uint64_t)i * 2 + 1);
			}
			gice_put_signal(k, a->c, a->rkey, 0, a->src, a->bytes, a->peer_sig, 1, GICE_SIGNAL_ADD,
					GICE_NO_COUNTER);
		}
		if (i >= a->warm && a->rtt)
			a->rtt[i - a->warm] = now_ns() - t0;
	}
	*a->t_end = now_ns();
	gice_quiet(k);
}

/* Median per-stage times of the initiator's most recent operations (from its CT trace ring). */
static void print_stages(gice_device_t *d, size_t bytes)
{
	gice_trace_t tr[256];
	uint64_t pick[256], wire[256], done[256];
	uint32_t n = gice_device_trace(d, tr, 256);

	if (!n)
		return;
	for (uint32_t i = 0; i < n; i++) {
		pick[i] = tr[i].t_pickup - tr[i].t_issue;
		wire[i] = tr[i].t_first_tx - tr[i].t_pickup;
		done[i] = tr[i].t_complete - tr[i].t_first_tx;
	}
	fprintf(stderr, "# %zu B stages (median of last %u, us): issue->CT pickup %.3f, pickup->first packet %.3f, "
			"first packet->ack %.3f\n",
		bytes, n, pct(pick, n, 0.5), pct(wire, n, 0.5), pct(done, n, 0.5));
}

/* What each side publishes for the other: where the other writes, the counter it signals. */
struct pub {
	uint64_t key;        /* of dst */
	uint32_t sig, pad;
};

/* Ping-pong between two devices: both in this process (one rank), or pairs of ranks 0<->1,
 * 2<->3, ... each with one device (gicerun -n N; an odd last rank sits out). */
int bench_put(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	struct bench_pair p;
	struct bench_side *sd = p.sd;
	struct pub pub[2];
	uint8_t *src[2] = {NULL, NULL}, *dst[2] = {NULL, NULL};
	size_t maxb = bench_pair_sizes(&attr);
	int failed = 0;

	memset(pub, 0, sizeof(pub));
	bench_pair_open(&p, &attr);
	uint32_t world = p.world, role = p.role;
	int active = p.active;
	for (int i = 0; i < 2; i++) {
		void *m;
		uint64_t k;
		if (!sd[i].local)
			continue;
		CHECK(gice_mem_alloc(sd[i].d, maxb, &m));
		src[i] = m;
		CHECK(gice_mem_alloc(sd[i].d, maxb, &m));
		dst[i] = m;
		CHECK(gice_mem_register(sd[i].d, src[i], maxb, &k));
		CHECK(gice_mem_register(sd[i].d, dst[i], maxb, &pub[i].key));
	}
	bench_pair_connect(&p);
	const char *transport = gice_device_provider(sd[role].d);

	for (int si = 0; si < opt.nsizes; si++) {
		size_t bytes = opt.sizes[si];
		long iters = bench_default_iters(bytes), warm = iters / 10 + 1;
		uint64_t *rtt = calloc((size_t)iters, sizeof(*rtt));
		uint64_t t_start[2] = {0}, t_end[2] = {0};
		_Atomic long bad = -1;
		struct pp_args a[2];

		for (int i = 0; i < 2; i++)
			if (sd[i].local)
				CHECK(gice_counter_alloc(sd[i].d, &pub[i].sig));
		bench_pair_exchange(&p, pub, sizeof(pub[0]));
		for (int i = 0; i < 2 && active; i++) {
			if (!sd[i].local)
				continue;
			a[i] = (struct pp_args){.initiator = i == 0, .check = opt.check, .c = sd[i].c,
						.rkey = pub[1 - i].key, .my_sig = pub[i].sig, .peer_sig = pub[1 - i].sig,
						.src = src[i], .dst = dst[i], .bytes = bytes, .iters = iters,
						.warm = warm, .rtt = i == 0 ? rtt : NULL, .t_start = &t_start[i],
						.t_end = &t_end[i], .bad_offset = &bad,
						.expect = opt.check ? malloc(bytes ? bytes : 1) : NULL};
		}
		for (int i = 1; i >= 0 && active; i--)
			if (sd[i].local)
				CHECK(gice_launch(sd[i].s, pp_kernel, 1, &a[i], sizeof(a[i])));
		for (int i = 0; i < 2 && active; i++)
			if (sd[i].local)
				CHECK(gice_stream_sync(sd[i].s, 0));
		if (active && gice_counter_read(sd[role].d, pub[role].sig) != (uint64_t)(iters + warm)) {
			fprintf(stderr, "gice-bench put: %zu bytes: ping-pong stopped after %llu of %ld round trips\n",
				bytes, (unsigned long long)gice_counter_read(sd[role].d, pub[role].sig), iters + warm);
			return 1;
		}
		if (opt.check && atomic_load(&bad) >= 0) {
			fprintf(stderr, "gice-bench put: %zu bytes: payload mismatch at offset %ld\n", bytes,
				atomic_load(&bad));
			failed = 1;
		}
		if (active && sd[0].local) {
			double one_way_us = (double)(t_end[0] - t_start[0]) / 1000.0 / (double)iters / 2.0;
			for (long i = 0; i < iters; i++)
				rtt[i] /= 2; /* one-way */
			row("put", transport, (int)world, bytes, iters, pct(rtt, iters, 0.5), pct(rtt, iters, 0.99),
			    (double)bytes / one_way_us, (double)bytes / one_way_us * p.pairs);
			if (opt.stages)
				print_stages(sd[0].d, bytes);
		}
		for (int i = 0; i < 2 && active; i++)
			if (sd[i].local)
				free(a[i].expect);
		if (world > 1)
			CHECK(gice_barrier()); /* every pair done before counters are recycled */
		for (int i = 0; i < 2; i++)
			if (sd[i].local)
				CHECK(gice_counter_free(sd[i].d, pub[i].sig));
		free(rtt);
	}
	bench_pair_close(&p);
	return failed;
}
