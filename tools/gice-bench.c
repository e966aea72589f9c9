/* gice-bench: microbenchmarks of the emulated hardware.
 *   trigger  a kernel writes a trigger word; the CT watching it fires an armed counter-add; the
 *            latency is from the trigger write to the CT's write of that counter (its timestamp).
 *   put      put_signal ping-pong between two devices through libfabric (every device talks
 *            through its endpoint): one-way latency = half the round trip, MB/s = bytes / one-way
 *            time (the fi_pingpong convention, so the two compare directly).
 *   idle     CPU used by an idle device over one second, after 10 ms of idleness.
 *   memcpy   one core's memcpy bandwidth per size: the reference for copy-engine puts.
 * --csv prints bench,transport,ranks,bytes,iters,p50_us,p99_us,MBps,busbw_MBps. */
#include <getopt.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/gice.h"

static struct {
	int csv, check, stages;
	const char *provider;
	long iters;
	size_t sizes[32];
	int nsizes;
} opt = {.iters = 0};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(uint64_t *v, long n, double p)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_u64);
	long i = (long)(p * (double)(n - 1) + 0.5);
	return (double)v[i] / 1000.0;
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "gice-bench: %s: %s (%s)\n", what, gice_status_name(rc), gice_status_str(rc));
	exit(1);
}
#define CHECK(call)                           \
	do {                                  \
		int rc_ = (call);             \
		if (rc_)                      \
			die(#call, rc_);      \
	} while (0)

static void header(void)
{
	if (opt.csv)
		printf("bench,transport,ranks,bytes,iters,p50_us,p99_us,MBps,busbw_MBps\n");
	else
		printf("%-8s %-14s %5s %9s %7s %9s %9s %10s %10s\n", "bench", "transport", "ranks", "bytes", "iters",
		       "p50_us", "p99_us", "MBps", "busbw_MBps");
}

static void row(const char *bench, const char *transport, int ranks, size_t bytes, long iters, double p50, double p99,
		double mbps, double busbw)
{
	if (opt.csv)
		printf("%s,%s,%d,%zu,%ld,%.3f,%.3f,%.1f,%.1f\n", bench, transport, ranks, bytes, iters, p50, p99, mbps,
		       busbw);
	else
		printf("%-8s %-14s %5d %9zu %7ld %9.3f %9.3f %10.1f %10.1f\n", bench, transport, ranks, bytes, iters, p50,
		       p99, mbps, busbw);
	fflush(stdout);
}

/* ---------------------------------------------------------------- trigger */

struct trig_args {
	gice_trigger_t t;
	gice_counter_t r;
	long iters;
	uint64_t *lat;
};

static void trig_kernel(gice_kctx_t *k, void *a_)
{
	struct trig_args *a = a_;

	for (long i = 0; i < a->iters; i++) {
		uint64_t t0 = now_ns();
		gice_trigger_add(k, a->t, 1);
		if (gice_wait_until(k, a->r, GICE_CMP_GE, (uint64_t)i + 1, 0, NULL))
			return;
		/* r's timestamp is when the CT, having seen the trigger, executed the armed op */
		gice_counter_state_t st;
		gice_counter_get(k->dev, a->r, &st);
		a->lat[i] = st.ts_ns - t0;
	}
}

static int bench_trigger(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	gice_device_t *d;
	gice_stream_t *s;
	gice_trigger_t t;
	gice_counter_t r;
	gice_desc_t desc;
	long iters = opt.iters ? opt.iters : 20000;
	uint64_t *lat = calloc((size_t)iters, sizeof(*lat));

	CHECK(gice_device_open(&attr, &d));
	CHECK(gice_stream_create(d, &s));
	CHECK(gice_counter_alloc(d, &t));
	CHECK(gice_counter_alloc(d, &r));
	/* persistent: every increment of t fires r += 1 */
	gice_op_t op = {.type = GICE_OP_COUNTER_ADD, .signal = r, .value = 1, .completion = GICE_NO_COUNTER};
	CHECK(gice_arm(d, t, 1, 1, &op, &desc));
	struct trig_args a = {.t = t, .r = r, .iters = iters, .lat = lat};
	CHECK(gice_launch(s, trig_kernel, 1, &a, sizeof(a)));
	CHECK(gice_stream_sync(s, 0));
	if (gice_counter_read(d, r) != (uint64_t)iters) {
		fprintf(stderr, "gice-bench trigger: %llu of %ld triggers fired\n",
			(unsigned long long)gice_counter_read(d, r), iters);
		return 1;
	}
	long skip = iters / 10; /* warm-up */
	row("trigger", "in-process", 1, 8, iters - skip, pct(lat + skip, iters - skip, 0.5),
	    pct(lat + skip, iters - skip, 0.99), 0, 0);
	CHECK(gice_disarm(d, desc));
	CHECK(gice_stream_destroy(s));
	CHECK(gice_device_close(d));
	free(lat);
	return 0;
}

/* ---------------------------------------------------------------- put ping-pong */

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

static void pattern(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)(seed + i);
}

static void verify(struct pp_args *a, uint64_t seed)
{
	pattern(a->expect, a->bytes, seed);
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
				pattern(a->src, a->bytes, (uint64_t)i * 2);
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
				pattern(a->src, a->bytes, (uint64_t)i * 2 + 1);
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

static long default_iters(size_t bytes)
{
	if (opt.iters)
		return opt.iters;
	return bytes <= 64 ? 20000 : bytes <= 4096 ? 10000 : bytes <= 65536 ? 2000 : 200;
}

/* One side of a ping-pong pair: local (this process runs its kernel) or remote (another rank). */
struct side {
	int local;
	gice_device_t *d;
	gice_stream_t *s;
	uint8_t *src, *dst;
	gice_conn_t c;
	uint64_t key;        /* of dst: the peer writes there */
	gice_counter_t sig;  /* the peer signals it */
};

struct pub { /* what a rank publishes for its partner (multi-rank) */
	uint64_t key;
	uint32_t sig, pad;
};

/* Ping-pong between two devices: both in this process (one rank), or pairs of ranks 0<->1,
 * 2<->3, ... each with one device (gicerun -n N; an odd last rank sits out). */
static int bench_put(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	uint32_t world = gice_world_size(), rank = gice_rank();
	uint32_t role = world == 1 ? 0 : rank & 1, partner = rank ^ 1;
	int active = world == 1 || partner < world;
	uint32_t pairs = world == 1 ? 1 : world / 2;
	struct side sd[2] = {{.local = 1}, {.local = world == 1}};
	struct pub *all = calloc(world, sizeof(*all));
	size_t maxb = 0;
	int failed = 0;

	if (world > 1) {
		sd[0].local = role == 0;
		sd[1].local = role == 1;
	}
	for (int i = 0; i < opt.nsizes; i++)
		if (opt.sizes[i] > maxb)
			maxb = opt.sizes[i];
	if (!maxb)
		maxb = 1;
	if (!attr.hbm_bytes && maxb * 2 + (1 << 20) > (64u << 20))
		attr.hbm_bytes = maxb * 2 + (16u << 20);
	for (int i = 0; i < 2; i++) {
		void *p;
		uint64_t k;
		if (!sd[i].local)
			continue;
		CHECK(gice_device_open(&attr, &sd[i].d)); /* collective across ranks */
		CHECK(gice_stream_create(sd[i].d, &sd[i].s));
		CHECK(gice_mem_alloc(sd[i].d, maxb, &p));
		sd[i].src = p;
		CHECK(gice_mem_alloc(sd[i].d, maxb, &p));
		sd[i].dst = p;
		CHECK(gice_mem_register(sd[i].d, sd[i].src, maxb, &k));
		CHECK(gice_mem_register(sd[i].d, sd[i].dst, maxb, &sd[i].key));
	}
	for (int i = 0; i < 2; i++) {
		if (!sd[i].local || !active)
			continue;
		uint32_t peer = world == 1 ? gice_device_id(sd[1 - i].d) : gice_device_id_of(partner, 0);
		CHECK(gice_conn_open(sd[i].d, peer, NULL, &sd[i].c));
	}
	const char *transport = gice_device_provider(sd[role].d);

	for (int si = 0; si < opt.nsizes; si++) {
		size_t bytes = opt.sizes[si];
		long iters = default_iters(bytes), warm = iters / 10 + 1;
		uint64_t *rtt = calloc((size_t)iters, sizeof(*rtt));
		uint64_t t_start[2] = {0}, t_end[2] = {0};
		_Atomic long bad = -1;
		struct pp_args a[2];

		for (int i = 0; i < 2; i++)
			if (sd[i].local)
				CHECK(gice_counter_alloc(sd[i].d, &sd[i].sig));
		if (world > 1) {
			struct pub me = {.key = sd[role].key, .sig = sd[role].sig};
			CHECK(gice_allgather(&me, sizeof(me), all));
			if (active) {
				sd[1 - role].key = all[partner].key;
				sd[1 - role].sig = all[partner].sig;
			}
		}
		for (int i = 0; i < 2 && active; i++) {
			if (!sd[i].local)
				continue;
			a[i] = (struct pp_args){.initiator = i == 0, .check = opt.check, .c = sd[i].c,
						.rkey = sd[1 - i].key, .my_sig = sd[i].sig, .peer_sig = sd[1 - i].sig,
						.src = sd[i].src, .dst = sd[i].dst, .bytes = bytes, .iters = iters,
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
		if (active && gice_counter_read(sd[role].d, sd[role].sig) != (uint64_t)(iters + warm)) {
			fprintf(stderr, "gice-bench put: %zu bytes: ping-pong stopped after %llu of %ld round trips\n",
				bytes, (unsigned long long)gice_counter_read(sd[role].d, sd[role].sig), iters + warm);
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
			    (double)bytes / one_way_us, (double)bytes / one_way_us * pairs);
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
				CHECK(gice_counter_free(sd[i].d, sd[i].sig));
		free(rtt);
	}
	for (int i = 0; i < 2; i++) {
		if (!sd[i].local)
			continue;
		CHECK(gice_stream_destroy(sd[i].s));
		CHECK(gice_device_close(sd[i].d));
	}
	free(all);
	return failed;
}

/* ---------------------------------------------------------------- memcpy */

/* The reference for copy bandwidth: one core's memcpy of each size (best of iters), between two
 * buffers already touched, in the same units as put. */
static int bench_memcpy(void)
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

/* ---------------------------------------------------------------- idle */

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU used by an idle device (all its SM, stream and CT threads), after it has been idle for
 * 10 ms, over one second, as a percentage of one core. */
static int bench_idle(void)
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

static void usage(FILE *f)
{
	fprintf(f, "usage: gice-bench trigger|put|idle|memcpy [--csv] [--sizes 8,4096,...] [--iters N] [--provider NAME] "
		   "[--check] [--stages]\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"csv", no_argument, 0, 'c'},      {"sizes", required_argument, 0, 's'},
					   {"iters", required_argument, 0, 'n'}, {"provider", required_argument, 0, 'p'},
					   {"check", no_argument, 0, 'k'},     {"help", no_argument, 0, 'h'},
					   {"stages", no_argument, 0, 'S'},
					   {0, 0, 0, 0}};
	const char *sizes = "8,4096,65536,1048576";
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "cs:n:p:khS", lo, NULL)) != -1) {
		switch (ch) {
		case 'c': opt.csv = 1; break;
		case 's': sizes = optarg; break;
		case 'n': opt.iters = atol(optarg); break;
		case 'p': opt.provider = optarg; break;
		case 'k': opt.check = 1; break;
		case 'S': opt.stages = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", sizes);
	for (char *save, *t = strtok_r(buf, ",", &save); t && opt.nsizes < 32; t = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long long v = strtoull(t, &end, 0);
		if (*end == 'k' || *end == 'K')
			v <<= 10;
		else if (*end == 'm' || *end == 'M')
			v <<= 20;
		opt.sizes[opt.nsizes++] = (size_t)v;
	}
	CHECK(gice_init());
	if (strcmp(argv[optind], "idle") && gice_rank() == 0)
		header();
	if (!strcmp(argv[optind], "trigger"))
		rc = bench_trigger();
	else if (!strcmp(argv[optind], "put"))
		rc = bench_put();
	else if (!strcmp(argv[optind], "idle"))
		rc = bench_idle();
	else if (!strcmp(argv[optind], "memcpy"))
		rc = bench_memcpy();
	else {
		usage(stderr);
		rc = 2;
	}
	gice_finalize();
	return rc;
}
