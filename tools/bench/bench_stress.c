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

/* What stress keeps of each local device of the pair (bench_pair). */
struct sside {
	uint8_t *ring, *src, *dst, *scratch;
	gice_counter_t done1, done2; /* completions of phase 1, phase 2 */
	struct kstate ks[2];         /* phase 1, phase 2 */
	double secs[2];
};

struct spub { /* what each side publishes for the other */
	uint64_t ring_key, dst_key, scratch_key;
	uint32_t sig1, sig2; /* sig1: B's put signals, A's credits */
};

/* Wait for the local kernels of a phase, watching their progress: a kernel's own waits time out
 * after --timeout-ms, so no progress for twice that (and 10 s) means something hangs outside
 * them. On a failure, print it and exit at once (the partner's kernels may still be waiting). */
static void stress_await(const struct bench_pair *pr, struct sside *sd, int ph, uint64_t t_start)
{
	uint64_t limit = (2 * opt.timeout_ms + 10000) * 1000000ull, last = UINT64_MAX, t_last = now_ns();
	struct timespec two_ms = {0, 2000000};

	for (;;) {
		int all = 1;
		uint64_t p = 0;
		for (int i = 0; i < 2; i++) {
			struct kstate *ks = &sd[i].ks[ph];
			if (!pr->sd[i].local)
				continue;
			if (!atomic_load_explicit(&ks->finished, memory_order_acquire)) {
				all = 0;
				p += atomic_load_explicit(&ks->progress, memory_order_relaxed);
				continue;
			}
			if (ks->rc) {
				fflush(stdout);
				fprintf(stderr, "stress: device %u: FAILED: %s\n", pr->sd[i].gid, ks->msg);
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
		if (!pr->sd[i].local)
			continue;
		CHECK(gice_stream_sync(pr->sd[i].s, opt.timeout_ms));
		sd[i].secs[ph] = (double)(sd[i].ks[ph].t_end - t_start) / 1e9;
	}
}

int bench_stress(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	struct bench_pair pr;
	struct bench_side *bs = pr.sd;
	long iters = opt.iters_set ? opt.iters : 10000;
	uint32_t W = opt.window;
	size_t xbytes = opt.bytes, chunk = opt.chunk && opt.chunk < xbytes ? opt.chunk : xbytes;
	size_t ring = 2 * (size_t)W * STRESS_MAX_PUT, need = ring + 2 * xbytes + (1u << 20);
	long nwin = (iters + W - 1) / W;
	size_t nchunks = xbytes ? (xbytes + chunk - 1) / chunk : 0;
	uint64_t tmo_us = opt.timeout_ms * 1000, p1bytes = 0, t0;
	struct sside sd[2];
	struct spub pub[2];
	uint32_t *sizes = malloc((size_t)(iters ? iters : 1) * sizeof(*sizes));
	int failed = 0;

	if (!sizes) {
		fprintf(stderr, "stress: no memory for %ld sizes\n", iters);
		return 1;
	}
	memset(sd, 0, sizeof(sd));
	memset(pub, 0, sizeof(pub));
	for (long i = 0; i < iters; i++) {
		sizes[i] = stress_size(i);
		p1bytes += sizes[i];
	}
	if (need > (64u << 20))
		attr.hbm_bytes = need + (16u << 20);
	bench_pair_open(&pr, &attr);
	uint32_t world = pr.world, role = pr.role;
	int active = pr.active;
	for (int i = 0; i < 2; i++) {
		void *p;
		uint64_t k;
		struct sside *s = &sd[i];
		gice_device_t *d = bs[i].d;
		if (!bs[i].local)
			continue;
		CHECK(gice_mem_alloc(d, ring, &p));
		s->ring = p;
		CHECK(gice_mem_register(d, s->ring, ring, &pub[i].ring_key));
		CHECK(gice_mem_alloc(d, 256, &p));
		s->scratch = p;
		CHECK(gice_mem_register(d, s->scratch, 256, &pub[i].scratch_key));
		if (xbytes) {
			CHECK(gice_mem_alloc(d, xbytes, &p));
			s->src = p;
			CHECK(gice_mem_register(d, s->src, xbytes, &k));
			CHECK(gice_mem_alloc(d, xbytes, &p));
			s->dst = p;
			CHECK(gice_mem_register(d, s->dst, xbytes, &pub[i].dst_key));
			stress_fill(s->src, xbytes, stress_base(STRESS_XCHG + (uint64_t)i));
			memset(s->dst, 0, xbytes);
		}
		memset(s->ring, 0, ring);
		CHECK(gice_counter_alloc(d, &pub[i].sig1));
		CHECK(gice_counter_alloc(d, &s->done1));
		CHECK(gice_counter_alloc(d, &pub[i].sig2));
		CHECK(gice_counter_alloc(d, &s->done2));
	}
	bench_pair_exchange(&pr, pub, sizeof(pub[0]));
	bench_pair_connect(&pr);
	if (!active)
		printf("stress: rank %u has no partner (rank %u), sitting out\n", pr.rank, pr.partner);
	const char *transport = gice_device_provider(bs[role].d);

	/* phase 1: windows of puts A -> B, verified by B */
	struct s1_args a1[2];
	for (int i = 0; i < 2; i++) {
		struct sside *s = &sd[i];
		a1[i] = (struct s1_args){.ks = &s->ks[0], .me = bs[i].gid, .peer = bs[1 - i].gid, .c = bs[i].c,
					 .ring = s->ring, .scratch = s->scratch, .peer_ring_key = pub[1 - i].ring_key,
					 .peer_scratch_key = pub[1 - i].scratch_key, .peer_sig = pub[1 - i].sig1,
					 .sig = pub[i].sig1, .done = s->done1, .sizes = sizes, .iters = iters, .window = W,
					 .tmo_us = tmo_us};
	}
	if (world > 1)
		CHECK(gice_barrier());
	t0 = now_ns();
	if (active && iters) {
		for (int i = 1; i >= 0; i--)
			if (bs[i].local)
				CHECK(gice_launch(bs[i].s, i ? s1_verifier : s1_sender, 1, &a1[i], sizeof(a1[i])));
		stress_await(&pr, sd, 0, t0);
	}

	/* phase 2: both ways at once */
	struct s2_args a2[2];
	for (int i = 0; i < 2; i++) {
		struct sside *s = &sd[i];
		a2[i] = (struct s2_args){.ks = &s->ks[1], .me = bs[i].gid, .peer = bs[1 - i].gid, .role = i,
					 .c = bs[i].c, .src = s->src, .dst = s->dst, .peer_dst_key = pub[1 - i].dst_key,
					 .peer_sig = pub[1 - i].sig2, .sig = pub[i].sig2, .done = s->done2, .bytes = xbytes,
					 .chunk = chunk, .window = W, .tmo_us = tmo_us};
	}
	if (world > 1)
		CHECK(gice_barrier());
	t0 = now_ns();
	if (active && xbytes) {
		for (int i = 1; i >= 0; i--)
			if (bs[i].local)
				CHECK(gice_launch(bs[i].s, s2_kernel, 1, &a2[i], sizeof(a2[i])));
		stress_await(&pr, sd, 1, t0);
	}

	/* every counter exactly as sent: no signal lost or applied twice */
	if (world > 1)
		CHECK(gice_barrier());
	for (int i = 0; i < 2 && active; i++) {
		struct sside *s = &sd[i];
		struct bench_side *b = &bs[i];
		if (!b->local)
			continue;
		if (i == 0) {
			failed |= bench_counter_exact("stress", b, pub[i].sig1, (uint64_t)nwin, "credits from the verifier");
			failed |= bench_counter_exact("stress", b, s->done1, (uint64_t)iters, "completions of the puts");
		} else {
			failed |= bench_counter_exact("stress", b, pub[i].sig1, (uint64_t)iters, "signals of the puts");
			failed |= bench_counter_exact("stress", b, s->done1, (uint64_t)nwin, "completions of the credits");
		}
		failed |= bench_counter_exact("stress", b, pub[i].sig2, nchunks, "signals of the exchange");
		failed |= bench_counter_exact("stress", b, s->done2, nchunks, "completions of the exchange");
	}
	for (int i = 0; i < 2 && active && !failed; i++) {
		struct sside *s = &sd[i];
		gice_stats_t st;
		if (!bs[i].local)
			continue;
		memset(&st, 0, sizeof(st)); /* a library without some counters leaves them 0 */
		CHECK(gice_device_stats(bs[i].d, &st));
		double secs = s->secs[0] + s->secs[1];
		double total = (double)p1bytes + 2.0 * (double)xbytes;
		double mbps = secs > 0 ? total / secs / 1e6 : 0;
		char line[1024];
		snprintf(line, sizeof(line),
			 "stress: device %u: %ld puts + %zu B both ways intact in %.2f s (puts %llu B in %.2f s, exchange "
			 "%.2f s, %.1f MB/s, %s); retransmits %llu rto_expired %llu fast_retransmits %llu rx_csum_bad %llu "
			 "rx_dup %llu fault_drops %llu fault_dups %llu fault_reorders %llu fault_delays %llu "
			 "fault_corrupts %llu ops_timed_out %llu",
			 bs[i].gid, iters, xbytes, secs, (unsigned long long)p1bytes, s->secs[0], s->secs[1], mbps, transport,
			 (unsigned long long)st.retransmits, (unsigned long long)st.rto_expired,
			 (unsigned long long)st.fast_retransmits, (unsigned long long)st.rx_csum_bad,
			 (unsigned long long)st.rx_dup, (unsigned long long)st.fault_drops,
			 (unsigned long long)st.fault_dups, (unsigned long long)st.fault_reorders,
			 (unsigned long long)st.fault_delays, (unsigned long long)st.fault_corrupts,
			 (unsigned long long)st.ops_timed_out);
		if (opt.csv) {
			row("stress", transport, (int)world, (size_t)total, iters, 0, 0, mbps, mbps * pr.pairs);
			printf("# %s\n", line);
		} else {
			printf("%s\n", line);
		}
		fflush(stdout);
	}

	if (world > 1)
		CHECK(gice_barrier()); /* both sides done before either closes */
	bench_pair_close(&pr);
	free(sizes);
	return failed;
}
