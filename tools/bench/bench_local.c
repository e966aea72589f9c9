/* bench_local.c: the benchmarks of one device in one process — trigger latency, launch latency,
 * the CPU of an idle device — and one core's memcpy, the reference for copies. */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tools/bench/bench.h"

/* ---------------------------------------------------------------- trigger */

struct trig_args {
	gice_trigger_t t;
	gice_counter_t r;
	long iters;
	uint64_t base; /* r's value before the first trigger */
	uint64_t *lat;
};

static void trig_kernel(gice_kctx_t *k, void *a_)
{
	struct trig_args *a = a_;

	for (long i = 0; i < a->iters; i++) {
		uint64_t t0 = now_ns();
		gice_trigger_add(k, a->t, 1);
		if (gice_wait_until(k, a->r, GICE_CMP_GE, a->base + (uint64_t)i + 1, 0, NULL))
			return;
		/* r's timestamp is when the CT, having seen the trigger, executed the armed op */
		gice_counter_state_t st;
		gice_counter_get(k->dev, a->r, &st);
		a->lat[i] = st.ts_ns - t0;
	}
}

/* Compute on an SM until the host says stop: integer arithmetic that touches no memory
 * another thread uses, with a look at the flag every 4096 steps. A deadline keeps a bench
 * whose trigger kernel could not start from spinning for good. */
struct busy_args {
	_Atomic int *stop, *started;
	uint64_t deadline_ns;
};

static void busy_kernel(gice_kctx_t *k, void *a_)
{
	struct busy_args *a = a_;
	uint64_t x = k->block + 1;

	atomic_fetch_add_explicit(a->started, 1, memory_order_relaxed);
	while (!atomic_load_explicit(a->stop, memory_order_relaxed) && now_ns() < a->deadline_ns)
		for (int i = 0; i < 4096; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	__asm__ volatile("" : : "r"(x)); /* the result is used: the loop stays */
}

/* One timed run of trig_kernel on s (t and r go on from where the last run left them: the
 * persistent descriptor's threshold has moved on with t). Returns the kernel's status; *p50 and
 * *p99 over the iterations after the warm-up tenth. */
static int trigger_run(gice_device_t *d, gice_stream_t *s, gice_trigger_t t, gice_counter_t r, long iters,
		       uint64_t *lat, double *p50, double *p99)
{
	uint64_t base = gice_counter_read(d, r);
	struct trig_args a = {.t = t, .r = r, .iters = iters, .base = base, .lat = lat};
	int rc;

	CHECK(gice_launch(s, trig_kernel, 1, &a, sizeof(a)));
	if ((rc = gice_stream_sync(s, 0)))
		return rc;
	if (gice_counter_read(d, r) - base != (uint64_t)iters) {
		fprintf(stderr, "gice-bench trigger: %llu of %ld triggers fired\n",
			(unsigned long long)(gice_counter_read(d, r) - base), iters);
		return GICE_ERR_IO;
	}
	long skip = iters / 10; /* warm-up */
	*p50 = pct(lat + skip, iters - skip, 0.5);
	*p99 = pct(lat + skip, iters - skip, 0.99);
	return GICE_OK;
}

/* Rows: the device idle (in-process), then with every other SM computing (busy-sms): a CT is
 * hardware, and should see a trigger as soon while the SMs compute. */
int bench_trigger(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	gice_device_t *d;
	gice_stream_t *s, *bs;
	gice_trigger_t t;
	gice_counter_t r;
	gice_desc_t desc;
	uint32_t sms;
	long iters = opt.iters ? opt.iters : 20000, skip = iters / 10;
	uint64_t *lat = calloc((size_t)iters, sizeof(*lat));
	double p50[2], p99[2];
	_Atomic int stop = 0, started = 0;

	if (!lat)
		die("trigger: calloc of the latencies", GICE_ERR_NO_MEMORY);
	CHECK(gice_device_open(&attr, &d));
	CHECK(gice_device_sms(d, &sms));
	CHECK(gice_stream_create(d, &s));
	CHECK(gice_stream_create(d, &bs));
	CHECK(gice_counter_alloc(d, &t));
	CHECK(gice_counter_alloc(d, &r));
	/* persistent: every increment of t fires r += 1 */
	gice_op_t op = {.type = GICE_OP_COUNTER_ADD, .signal = r, .value = 1, .completion = GICE_NO_COUNTER};
	CHECK(gice_arm(d, t, 1, 1, &op, &desc));
	CHECK(trigger_run(d, s, t, r, iters, lat, &p50[0], &p99[0]));
	row("trigger", "in-process", 1, 8, iters - skip, p50[0], p99[0], 0, 0);
	if (sms < 2) {
		printf("# trigger: busy-sms needs 2 SMs or more (GICE_SMS=%u)\n", sms);
	} else {
		/* every SM but the trigger kernel's computes, from before the first trigger on */
		struct busy_args b = {.stop = &stop, .started = &started, .deadline_ns = now_ns() + 120000000000ull};
		CHECK(gice_launch_cooperative(bs, busy_kernel, sms - 1, &b, sizeof(b)));
		while (atomic_load_explicit(&started, memory_order_relaxed) < (int)sms - 1)
			sched_yield();
		int rc = trigger_run(d, s, t, r, iters, lat, &p50[1], &p99[1]);
		atomic_store_explicit(&stop, 1, memory_order_relaxed);
		CHECK(gice_stream_sync(bs, 0));
		CHECK(rc);
		row("trigger", "busy-sms", 1, 8, iters - skip, p50[1], p99[1], 0, 0);
		printf("# trigger p50: idle %.3f us, %u of %u SMs computing %.3f us: %.2fx\n", p50[0], sms - 1, sms,
		       p50[1], p50[0] > 0 ? p50[1] / p50[0] : 0.0);
	}
	fflush(stdout);
	CHECK(gice_disarm(d, desc));
	CHECK(gice_stream_destroy(bs));
	CHECK(gice_stream_destroy(s));
	CHECK(gice_device_close(d));
	free(lat);
	return 0;
}

/* ---------------------------------------------------------------- memcpy */

/* The reference for copy bandwidth: one core's memcpy of each size (best of iters), between two
 * buffers already touched, in the same units as put. */
int bench_memcpy(void)
{
	for (int si = 0; si < opt.nsizes; si++) {
		size_t n = opt.sizes[si] ? opt.sizes[si] : 1;
		long iters = opt.iters ? opt.iters : 20;
		uint8_t *a = malloc(n), *b = malloc(n);
		uint64_t best = UINT64_MAX;
		if (!a || !b) {
			fprintf(stderr, "gice-bench memcpy: no memory for 2 x %zu bytes\n", n);
			return 1;
		}
		memset(a, 1, n);
		memset(b, 2, n);
		for (long i = 0; i < iters; i++) {
			uint64_t t0 = now_ns();
			memcpy(b, a, n);
			uint64_t t = now_ns() - t0;
			if (t < best)
				best = t;
			a[i % n]++; /* keep the copies from being optimized away */
		}
		row("memcpy", "one-core", 1, n, iters, (double)best / 1000.0, (double)best / 1000.0,
		    (double)n / ((double)best / 1000.0), (double)n / ((double)best / 1000.0));
		free(a);
		free(b);
	}
	return 0;
}

/* ---------------------------------------------------------------- launch */

static void empty_kernel(gice_kctx_t *k, void *args)
{
	(void)k;
	(void)args;
}

/* The launch path's fixed cost: gice_launch of an empty kernel of n blocks, then
 * gice_stream_sync, timed together from the host, one launch in flight at a time. */
int bench_launch(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	gice_device_t *d;
	gice_stream_t *s;
	long iters = opt.iters ? opt.iters : 10000, warm = iters / 10 + 1;
	uint64_t *lat = calloc((size_t)iters, sizeof(*lat));
	char grid[32];

	if (!lat) {
		fprintf(stderr, "gice-bench launch: no memory for %ld samples\n", iters);
		return 1;
	}
	CHECK(gice_device_open(&attr, &d));
	CHECK(gice_stream_create(d, &s));
	for (int bi = 0; bi < opt.nblocks; bi++) {
		uint32_t n = opt.blocks[bi];
		for (long i = -warm; i < iters; i++) {
			uint64_t t0 = now_ns();
			CHECK(gice_launch(s, empty_kernel, n, NULL, 0));
			CHECK(gice_stream_sync(s, 0));
			if (i >= 0)
				lat[i] = now_ns() - t0;
		}
		snprintf(grid, sizeof(grid), "blocks=%u", n);
		row("launch", grid, 1, 0, iters, pct(lat, iters, 0.5), pct(lat, iters, 0.99), 0, 0);
	}
	CHECK(gice_stream_destroy(s));
	CHECK(gice_device_close(d));
	free(lat);
	return 0;
}

/* ---------------------------------------------------------------- idle */

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU used by an idle device (all its SM, stream and CT threads), after it has been idle for
 * 10 ms, over one second, as a percentage of one core. */
int bench_idle(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	gice_device_t *d;
	gice_stream_t *s;
	struct timespec ten_ms = {0, 10000000}, one_s = {1, 0};

	CHECK(gice_device_open(&attr, &d));
	CHECK(gice_stream_create(d, &s));
	nanosleep(&ten_ms, NULL);
	double c0 = cpu_s();
	uint64_t t0 = now_ns();
	nanosleep(&one_s, NULL);
	double pct_core = (cpu_s() - c0) / ((double)(now_ns() - t0) / 1e9) * 100.0;
	if (opt.csv)
		printf("idle,%s,1,0,1,0,0,0,0\n# idle device: %.2f%% of a core\n", gice_device_provider(d), pct_core);
	else
		printf("idle device (%s): %.2f%% of one core over 1 s\n", gice_device_provider(d), pct_core);
	CHECK(gice_stream_destroy(s));
	CHECK(gice_device_close(d));
	return 0;
}
