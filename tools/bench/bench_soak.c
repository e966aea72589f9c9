/* bench_soak.c: gice-bench soak, a long run of triggered operations whose memory must stay flat.
 * The first device of a pair arms one persistent descriptor: each increment of its trigger fires
 * an 8-byte put_signal to the second device. A kernel on the first device increments the trigger
 * and waits for that put's completion, --iters times (default 1,000,000). Meanwhile each rank's
 * host thread samples its process's resident set (VmRSS) every 1/50 of the run, without
 * touching the device. At the end every counter must read exactly --iters, and the mean RSS of
 * the last tenth of the samples must be within 5% of the first tenth's (the warm-up's allocations
 * are in both): "soak: rank R: N triggered puts, RSS first A KiB, last B KiB (+x.x%): flat" or
 * "... GROWS", exit 1. Both devices in this process when it runs alone, else one per rank. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

#define SOAK_SAMPLES 50
#define SOAK_MAX_GROWTH 0.05

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

struct soak_args {
	gice_trigger_t t;
	gice_counter_t done;
	long iters;
};

static void soak_kernel(gice_kctx_t *k, void *a_)
{
	struct soak_args *a = a_;

	for (long i = 0; i < a->iters; i++) {
		gice_trigger_add(k, a->t, 1);
		if (gice_wait_until(k, a->done, GICE_CMP_GE, (uint64_t)i + 1, 0, NULL))
			return; /* the stream sync says why */
	}
}

/* Mean of n samples. */
static double mean(const long *v, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += (double)v[i];
	return n ? s / n : 0;
}

int bench_soak(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	struct bench_pair p;
	struct bench_side *sd = p.sd;
	struct {
		uint64_t key;
		uint32_t sig, pad;
	} pub[2];
	long iters = opt.iters_set ? opt.iters : 1000000, rss[SOAK_SAMPLES];
	gice_counter_t done = 0;
	gice_trigger_t t = 0;
	gice_desc_t desc = 0;
	uint8_t *buf[2] = {NULL, NULL};
	int failed = 0, n = 0;

	memset(pub, 0, sizeof(pub));
	bench_pair_open(&p, &attr);
	for (int i = 0; i < 2; i++) {
		void *m;
		if (!sd[i].local)
			continue;
		CHECK(gice_mem_alloc(sd[i].d, 4096, &m));
		buf[i] = m;
		memset(buf[i], 0, 4096);
		CHECK(gice_mem_register(sd[i].d, buf[i], 4096, &pub[i].key));
		CHECK(gice_counter_alloc(sd[i].d, &pub[i].sig));
	}
	bench_pair_connect(&p);
	bench_pair_exchange(&p, pub, sizeof(pub[0]));
	if (!p.active)
		goto out;
	if (sd[0].local) {
		CHECK(gice_counter_alloc(sd[0].d, &t));
		CHECK(gice_counter_alloc(sd[0].d, &done));
		gice_op_t op = {.type = GICE_OP_PUT, .conn = sd[0].c, .local = buf[0], .bytes = 8, .rkey = pub[1].key,
				.roff = 0, .value = 1, .signal = pub[1].sig, .signal_flags = GICE_SIGNAL_ADD, .completion = done};
		CHECK(gice_arm(sd[0].d, t, 1, 1, &op, &desc)); /* persistent: every increment fires */
		struct soak_args a = {.t = t, .done = done, .iters = iters};
		CHECK(gice_launch(sd[0].s, soak_kernel, 1, &a, sizeof(a)));
	}
	/* the host only watches: the side's counter of this rank, sampled in 50 steps */
	const struct bench_side *w = sd[0].local ? &sd[0] : &sd[1];
	gice_counter_t watch = sd[0].local ? done : pub[1].sig;
	for (n = 0; n < SOAK_SAMPLES; n++) {
		uint64_t mark = (uint64_t)iters * (uint64_t)(n + 1) / SOAK_SAMPLES;
		int rc = gice_counter_wait(w->d, watch, GICE_CMP_GE, mark, 600000, NULL);
		if (rc) {
			fprintf(stderr, "soak: rank %u: waiting for %llu of %ld: %s\n", p.rank, (unsigned long long)mark,
				iters, gice_status_name(rc));
			failed = 1;
			break;
		}
		rss[n] = rss_kib();
	}
	if (sd[0].local) {
		CHECK(gice_stream_sync(sd[0].s, 0));
		failed |= bench_counter_exact("soak", &sd[0], done, (uint64_t)iters, "completions of the puts");
		CHECK(gice_disarm(sd[0].d, desc));
	}
	if (sd[1].local)
		failed |= bench_counter_exact("soak", &sd[1], pub[1].sig, (uint64_t)iters, "signals of the puts");
	if (!failed && n == SOAK_SAMPLES) {
		int tenth = SOAK_SAMPLES / 10;
		double first = mean(rss, tenth), last = mean(rss + SOAK_SAMPLES - tenth, tenth);
		double growth = first > 0 ? (last - first) / first : 0;
		int grows = growth > SOAK_MAX_GROWTH;
		printf("soak: rank %u: %ld triggered puts, RSS first %.0f KiB, last %.0f KiB (%+.1f%%): %s\n", p.rank,
		       iters, first, last, growth * 100, grows ? "GROWS" : "flat");
		failed |= grows;
	}
out:
	if (p.world > 1)
		CHECK(gice_barrier()); /* the receiver stays until the sender is done */
	bench_pair_close(&p);
	return failed;
}
