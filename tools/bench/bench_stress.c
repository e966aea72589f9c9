/* bench_stress.c: gice-bench stress on the host — the pair of devices, their memory and
 * counters, the phases, the watchdog over the kernels and the final exact counts
 * (bench_stress.h). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench/bench.h"
#include "tools/bench/bench_stress.h"

/* One device of the stress pair: local (this process runs its kernels) or the partner rank's. */
struct sside {
	int local;
	gice_device_t *d;
	gice_stream_t *s;
	uint32_t gid;
	gice_conn_t c;
	uint8_t *ring, *src, *dst, *scratch;
	uint64_t ring_key, dst_key, scratch_key;
	gice_counter_t sig1, done1, sig2, done2; /* sig1: B's put signals, A's credits */
	struct kstate ks[2];                     /* phase 1, phase 2 */
	double secs[2];
};

struct spub { /* what a rank publishes for its partner */
	uint64_t ring_key, dst_key, scratch_key;
	uint32_t sig1, sig2;
};

/* Wait for the local kernels of a phase, watching their progress: a kernel's own waits time out
 * after --timeout-ms, so no progress for twice that (and 10 s) means something hangs outside
 * them. On a failure, print it and exit at once (the partner's kernels may still be waiting). */
static void stress_await(struct sside *sd, int ph, uint64_t t_start)
{
	uint64_t limit = (2 * opt.timeout_ms + 10000) * 1000000ull, last = UINT64_MAX, t_last = now_ns();
	struct timespec two_ms = {0, 2000000};

	for (;;) {
		int all = 1;
		uint64_t p = 0;
		for (int i = 0; i < 2; i++) {
			struct kstate *ks = &sd[i].ks[ph];
			if (!sd[i].local)
				continue;
			if (!atomic_load_explicit(&ks->finished, memory_order_acquire)) {
				all = 0;
				p += atomic_load_explicit(&ks->progress, memory_order_relaxed);
				continue;
			}
			if (ks->rc) {
				fflush(stdout);
				fprintf(stderr, "stress: device %u: FAILED: %s\n", sd[i].gid, ks->msg);
				_exit(1);
			}
		}
		if (all)
			break;
		if (p != last) {
			last = p;
			t_last = now_ns();
		} else if (now_ns() - t_last > limit) {
			fflush(stdout);
			fprintf(stderr, "stress: phase %d: no progress for %.0f s (every wait should have timed out after "
					"%llu ms); giving up\n",
				ph + 1, (double)limit / 1e9, (unsigned long long)opt.timeout_ms);
			_exit(1);
		}
		nanosleep(&two_ms, NULL);
	}
	for (int i = 0; i < 2; i++) {
		if (!sd[i].local)
			continue;
		CHECK(gice_stream_sync(sd[i].s, opt.timeout_ms));
		sd[i].secs[ph] = (double)(sd[i].ks[ph].t_end - t_start) / 1e9;
	}
}

/* A counter of a local device must read exactly want, with no failure recorded. */
static int stress_exact(struct sside *sd, gice_counter_t c, uint64_t want, const char *what)
{
	gice_counter_state_t st;

	CHECK(gice_counter_get(sd->d, c, &st));
	if (st.value == want && !st.fail)
		return 0;
	fprintf(stderr, "stress: device %u: FAILED: %s (counter %u) reads %llu, expected exactly %llu", sd->gid, what, c,
		(unsigned long long)st.value, (unsigned long long)want);
	if (st.fail)
		fprintf(stderr, "; it records %llu failed (last %s)", (unsigned long long)st.fail,
			gice_status_name(st.status));
	fputc('\n', stderr);
	return 1;
}

int bench_stress(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	uint32_t world = gice_world_size(), rank = gice_rank();
	uint32_t role = world == 1 ? 0 : rank & 1, partner = rank ^ 1;
	int active = world == 1 || partner < world;
	uint32_t pairs = world == 1 ? 1 : world / 2;
	long iters = opt.iters_set ? opt.iters : 10000;
	uint32_t W = opt.window;
	size_t xbytes = opt.bytes, chunk = opt.chunk && opt.chunk < xbytes ? opt.chunk : xbytes;
	size_t ring = 2 * (size_t)W * STRESS_MAX_PUT, need = ring + 2 * xbytes + (1u << 20);
	long nwin = (iters + W - 1) / W;
	size_t nchunks = xbytes ? (xbytes + chunk - 1) / chunk : 0;
	uint64_t tmo_us = opt.timeout_ms * 1000, p1bytes = 0, t0;
	struct sside sd[2];
	struct spub *all = calloc(world, sizeof(*all));
	uint32_t *sizes = malloc((size_t)(iters ? iters : 1) * sizeof(*sizes));
	int failed = 0;

	if (!all || !sizes) {
		fprintf(stderr, "stress: no memory for %ld sizes\n", iters);
		return 1;
	}
	memset(sd, 0, sizeof(sd));
	sd[0].local = world == 1 || role == 0;
	sd[1].local = world == 1 || role == 1;
	for (long i = 0; i < iters; i++) {
		sizes[i] = stress_size(i);
		p1bytes += sizes[i];
	}
	if (need > (64u << 20))
		attr.hbm_bytes = need + (16u << 20);
	for (int i = 0; i < 2; i++) {
		void *p;
		uint64_t k;
		struct sside *s = &sd[i];
		if (!s->local)
			continue;
		CHECK(gice_device_open(&attr, &s->d)); /* collective across ranks */
		s->gid = gice_device_id(s->d);
		CHECK(gice_stream_create(s->d, &s->s));
		CHECK(gice_mem_alloc(s->d, ring, &p));
		s->ring = p;
		CHECK(gice_mem_register(s->d, s->ring, ring, &s->ring_key));
		CHECK(gice_mem_alloc(s->d, 256, &p));
		s->scratch = p;
		CHECK(gice_mem_register(s->d, s->scratch, 256, &s->scratch_key));
		if (xbytes) {
			CHECK(gice_mem_alloc(s->d, xbytes, &p));
			s->src = p;
			CHECK(gice_mem_register(s->d, s->src, xbytes, &k));
			CHECK(gice_mem_alloc(s->d, xbytes, &p));
			s->dst = p;
			CHECK(gice_mem_register(s->d, s->dst, xbytes, &s->dst_key));
			stress_fill(s->src, xbytes, stress_base(STRESS_XCHG + (uint64_t)i));
			memset(s->dst, 0, xbytes);
		}
		memset(s->ring, 0, ring);
		CHECK(gice_counter_alloc(s->d, &s->sig1));
		CHECK(gice_counter_alloc(s->d, &s->done1));
		CHECK(gice_counter_alloc(s->d, &s->sig2));
		CHECK(gice_counter_alloc(s->d, &s->done2));
	}
	if (world > 1) {
		struct sside *me = &sd[role], *peer = &sd[1 - role];
		struct spub pub = {.ring_key = me->ring_key, .dst_key = me->dst_key, .scratch_key = me->scratch_key,
				   .sig1 = me->sig1, .sig2 = me->sig2};
		CHECK(gice_allgather(&pub, sizeof(pub), all));
		if (active) {
			peer->gid = gice_device_id_of(partner, 0);
			peer->ring_key = all[partner].ring_key;
			peer->dst_key = all[partner].dst_key;
			peer->scratch_key = all[partner].scratch_key;
			peer->sig1 = all[partner].sig1;
			peer->sig2 = all[partner].sig2;
		}
	}
	for (int i = 0; i < 2 && active; i++)
		if (sd[i].local)
			CHECK(gice_conn_open(sd[i].d, sd[1 - i].gid, NULL, &sd[i].c));
	if (!active)
		printf("stress: rank %u has no partner (rank %u), sitting out\n", rank, partner);
	const char *transport = gice_device_provider(sd[role].d);

	/* phase 1: windows of puts A -> B, verified by B */
	struct s1_args a1[2];
	for (int i = 0; i < 2; i++) {
		struct sside *s = &sd[i], *o = &sd[1 - i];
		a1[i] = (struct s1_args){.ks = &s->ks[0], .me = s->gid, .peer = o->gid, .c = s->c, .ring = s->ring,
					 .scratch = s->scratch, .peer_ring_key = o->ring_key,
					 .peer_scratch_key = o->scratch_key, .peer_sig = o->sig1, .sig = s->sig1,
					 .done = s->done1, .sizes = sizes, .iters = iters, .window = W, .tmo_us = tmo_us};
	}
	if (world > 1)
		CHECK(gice_barrier());
	t0 = now_ns();
	if (active && iters) {
		for (int i = 1; i >= 0; i--)
			if (sd[i].local)
				CHECK(gice_launch(sd[i].s, i ? s1_verifier : s1_sender, 1, &a1[i], sizeof(a1[i])));
		stress_await(sd, 0, t0);
	}

	/* phase 2: both ways at once */
	struct s2_args a2[2];
	for (int i = 0; i < 2; i++) {
		struct sside *s = &sd[i], *o = &sd[1 - i];
		a2[i] = (struct s2_args){.ks = &s->ks[1], .me = s->gid, .peer = o->gid, .role = i, .c = s->c,
					 .src = s->src, .dst = s->dst, .peer_dst_key = o->dst_key, .peer_sig = o->sig2,
					 .sig = s->sig2, .done = s->done2, .bytes = xbytes, .chunk = chunk, .window = W,
					 .tmo_us = tmo_us};
	}
	if (world > 1)
		CHECK(gice_barrier());
	t0 = now_ns();
	if (active && xbytes) {
		for (int i = 1; i >= 0; i--)
			if (sd[i].local)
				CHECK(gice_launch(sd[i].s, s2_kernel, 1, &a2[i], sizeof(a2[i])));
		stress_await(sd, 1, t0);
	}

	/* every counter exactly as sent: no signal lost or applied twice */
	if (world > 1)
		CHECK(gice_barrier());
	for (int i = 0; i < 2 && active; i++) {
		struct sside *s = &sd[i];
		if (!s->local)
			continue;
		if (i == 0) {
			failed |= stress_exact(s, s->sig1, (uint64_t)nwin, "credits from the verifier");
			failed |= stress_exact(s, s->done1, (uint64_t)iters, "completions of the puts");
		} else {
			failed |= stress_exact(s, s->sig1, (uint64_t)iters, "signals of the puts");
			failed |= stress_exact(s, s->done1, (uint64_t)nwin, "completions of the credits");
		}
		failed |= stress_exact(s, s->sig2, nchunks, "signals of the exchange");
		failed |= stress_exact(s, s->done2, nchunks, "completions of the exchange");
	}
	for (int i = 0; i < 2 && active && !failed; i++) {
		struct sside *s = &sd[i];
		gice_stats_t st;
		if (!s->local)
			continue;
		memset(&st, 0, sizeof(st)); /* a library without some counters leaves them 0 */
		CHECK(gice_device_stats(s->d, &st));
		double secs = s->secs[0] + s->secs[1];
		double total = (double)p1bytes + 2.0 * (double)xbytes;
		double mbps = secs > 0 ? total / secs / 1e6 : 0;
		char line[1024];
		snprintf(line, sizeof(line),
			 "stress: device %u: %ld puts + %zu B both ways intact in %.2f s (puts %llu B in %.2f s, exchange "
			 "%.2f s, %.1f MB/s, %s); retransmits %llu rto_expired %llu fast_retransmits %llu rx_csum_bad %llu "
			 "rx_dup %llu fault_drops %llu fault_dups %llu fault_reorders %llu fault_delays %llu "
			 "fault_corrupts %llu ops_timed_out %llu",
			 s->gid, iters, xbytes, secs, (unsigned long long)p1bytes, s->secs[0], s->secs[1], mbps, transport,
			 (unsigned long long)st.retransmits, (unsigned long long)st.rto_expired,
			 (unsigned long long)st.fast_retransmits, (unsigned long long)st.rx_csum_bad,
			 (unsigned long long)st.rx_dup, (unsigned long long)st.fault_drops,
			 (unsigned long long)st.fault_dups, (unsigned long long)st.fault_reorders,
			 (unsigned long long)st.fault_delays, (unsigned long long)st.fault_corrupts,
			 (unsigned long long)st.ops_timed_out);
		if (opt.csv) {
			row("stress", transport, (int)world, (size_t)total, iters, 0, 0, mbps, mbps * pairs);
			printf("# %s\n", line);
		} else {
			printf("%s\n", line);
		}
		fflush(stdout);
	}

	if (world > 1)
		CHECK(gice_barrier()); /* both sides done before either closes */
	for (int i = 0; i < 2; i++) {
		if (!sd[i].local)
			continue;
		CHECK(gice_stream_destroy(sd[i].s));
		CHECK(gice_device_close(sd[i].d));
	}
	free(sizes);
	free(all);
	return failed;
}
