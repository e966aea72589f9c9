/* gice-bench: microbenchmarks of the emulated hardware.
 *   trigger  a kernel writes a trigger word; the CT watching it fires an armed counter-add; the
 *            latency is from the trigger write to the CT's write of that counter (its timestamp).
 *   put      put_signal ping-pong between two devices through libfabric (every device talks
 *            through its endpoint): one-way latency = half the round trip, MB/s = bytes / one-way
 *            time (the fi_pingpong convention, so the two compare directly).
 *   idle     CPU used by an idle device over one second, after 10 ms of idleness.
 *   memcpy   one core's memcpy bandwidth per size: the reference for copy-engine puts.
 *   launch   gice_launch of an empty kernel + gice_stream_sync, per grid size (--blocks).
 *   stress   a checked workload for reliability testing: windows of puts of pseudo-random sizes
 *            from device A into a ring at device B, then a large exchange both ways at once;
 *            every byte and every signal count verified, one "intact" line per device with the
 *            reliability and fault counters (docs/gice-bench.md).
 * --csv prints bench,transport,ranks,bytes,iters,p50_us,p99_us,MBps,busbw_MBps. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/gice.h"

static struct {
	int csv, check, stages;
	const char *provider;
	long iters;
	int iters_set;       /* --iters given (stress: 0 skips the puts) */
	size_t sizes[32];
	int nsizes;
	size_t bytes, chunk; /* stress: exchange size and its pieces (0: one put) */
	uint32_t window;     /* stress: puts (and chunks) in flight */
	uint64_t seed;       /* stress: sizes and contents */
	uint64_t timeout_ms; /* stress: every wait */
	uint32_t blocks[32]; /* launch: grid sizes */
	int nblocks;
} opt = {.iters = 0, .bytes = 64u << 20, .chunk = 1u << 20, .window = 64, .seed = 1, .timeout_ms = 60000};

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

/* ---------------------------------------------------------------- stress */

/* A checked workload for reliability testing (lossy links, GICE_FAULTS). Phase 1: device A
 * (role 0) puts --iters messages of pseudo-random sizes into a ring at device B (role 1), each a
 * put_signal adding 1 to a counter of B, in windows of --window; B verifies every byte of each
 * window and returns a credit (an 8-byte put_signal to a counter of A) before A reuses the
 * window's ring slots. Phase 2: --bytes from A to B and from B to A at once, in --chunk pieces.
 * Contents depend only on (seed, put or direction, byte offset), so any lost, stale, duplicated
 * or corrupted byte is found. At the end every signal and completion counter must read exactly
 * what was sent. */

#define STRESS_MAX_PUT  65536u    /* largest phase-1 put; one ring slot */
#define STRESS_XCHG     (1ull << 62) /* content stream of phase 2, + sender's role */
#define STRESS_CORRUPT  1000      /* kstate.rc of a payload mismatch (not a gice status) */

static inline uint64_t mix64(uint64_t x) /* splitmix64's finalizer */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* Byte j of content stream s is byte j % 8 (little-endian) of word(base(s), j / 8). */
static uint64_t stress_base(uint64_t stream) { return mix64(opt.seed ^ mix64(stream + 0x632be59bd9b4e019ull)); }
static inline uint64_t stress_word(uint64_t base, uint64_t w) { return mix64(base + (w + 1) * 0x9e3779b97f4a7c15ull); }

static inline void store_le64(uint8_t *p, uint64_t x)
{
	for (int i = 0; i < 8; i++, x >>= 8)
		p[i] = (uint8_t)x;
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t x = 0;
	for (int i = 7; i >= 0; i--)
		x = x << 8 | p[i];
	return x;
}

static void stress_fill(uint8_t *p, size_t n, uint64_t base)
{
	size_t w = 0;
	for (; w * 8 + 8 <= n; w++)
		store_le64(p + w * 8, stress_word(base, w));
	uint64_t x = stress_word(base, w);
	for (size_t j = w * 8; j < n; j++, x >>= 8)
		p[j] = (uint8_t)x;
}

/* First offset where p differs from stream base, with the expected and found bytes; -1 if none. */
static long stress_check(const uint8_t *p, size_t n, uint64_t base, uint8_t *expect, uint8_t *found)
{
	for (size_t w = 0; w * 8 < n; w++) {
		uint64_t x = stress_word(base, w);
		size_t end = w * 8 + 8 < n ? w * 8 + 8 : n;
		if (end == w * 8 + 8 && load_le64(p + w * 8) == x)
			continue;
		for (size_t j = w * 8; j < end; j++, x >>= 8)
			if (p[j] != (uint8_t)x) {
				*expect = (uint8_t)x;
				*found = p[j];
				return (long)j;
			}
	}
	return -1;
}

/* Size of put i: 1 and 64 KiB for the first two, then 1 + a random number below 2^k with k
 * uniform in 0..16 (log-uniform: mostly small, every size class up to 64 KiB). */
static uint32_t stress_size(long i)
{
	if (i < 2)
		return i == 0 ? 1 : STRESS_MAX_PUT;
	uint64_t r = mix64(opt.seed * 0xd1b54a32d192ed03ull + (uint64_t)i);
	uint32_t k = (uint32_t)(r % 17);
	return 1 + (uint32_t)((r >> 8) & ((1ull << k) - 1));
}

/* One per kernel: written by the kernel, read by the host. */
struct kstate {
	_Atomic int finished;      /* the kernel has returned (release: rc, msg and t_end are set) */
	_Atomic uint64_t progress; /* bumped on every step, for the host's stall watchdog */
	int rc;                    /* GICE_OK, a gice status or STRESS_CORRUPT */
	uint64_t t_end;            /* now_ns() at the kernel's end */
	char msg[512];             /* what failed, with the values */
};

static void kfail(struct kstate *ks, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void kfail(struct kstate *ks, int rc, const char *fmt, ...)
{
	va_list ap;

	if (ks->rc)
		return;
	ks->rc = rc ? rc : STRESS_CORRUPT;
	va_start(ap, fmt);
	vsnprintf(ks->msg, sizeof(ks->msg), fmt, ap);
	va_end(ap);
}

static void kdone(struct kstate *ks)
{
	ks->t_end = now_ns();
	atomic_store_explicit(&ks->finished, 1, memory_order_release);
}

/* Wait until counter c >= target, at most tmo_us; on failure record what was awaited. */
static int swait(gice_kctx_t *k, struct kstate *ks, gice_counter_t c, uint64_t target, uint64_t tmo_us,
		 const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int swait(gice_kctx_t *k, struct kstate *ks, gice_counter_t c, uint64_t target, uint64_t tmo_us,
		 const char *fmt, ...)
{
	uint64_t found = 0;
	char what[256];
	va_list ap;
	int rc = gice_wait_until(k, c, GICE_CMP_GE, target, tmo_us, &found);

	if (!rc) {
		atomic_fetch_add_explicit(&ks->progress, 1, memory_order_relaxed);
		return 0;
	}
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	kfail(ks, rc, "%s: %s (%s): counter %u at %llu, expected %llu%s", what, gice_status_name(rc),
	      gice_status_str(rc), c, (unsigned long long)found, (unsigned long long)target,
	      rc == GICE_ERR_TIMED_OUT ? " (--timeout-ms)" : "");
	return rc;
}

struct s1_args {
	struct kstate *ks;
	uint32_t me, peer;           /* global device ids, for messages */
	gice_conn_t c;
	uint8_t *ring;               /* A: sources, B: targets; 2 * window slots of STRESS_MAX_PUT */
	uint8_t *scratch;            /* B: source of the credit puts */
	uint64_t peer_ring_key;      /* A: B's ring */
	uint64_t peer_scratch_key;   /* B: A's scratch, target of the credits */
	gice_counter_t peer_sig;     /* A: B's signal counter; B: A's credit counter */
	gice_counter_t sig;          /* B: bumped by every put; A: credits from B */
	gice_counter_t done;         /* own completions */
	const uint32_t *sizes;
	long iters;
	uint32_t window;
	uint64_t tmo_us;
};

static void s1_sender(gice_kctx_t *k, void *a_)
{
	struct s1_args *a = a_;
	long W = a->window, nwin = (a->iters + W - 1) / W;

	for (long w = 0; w < nwin; w++) {
		long lo = w * W, hi = lo + W < a->iters ? lo + W : a->iters;
		/* at most one window in flight: its sources are reused two windows on */
		if (w >= 1 && swait(k, a->ks, a->done, (uint64_t)lo, a->tmo_us,
				    "puts %ld..%ld to device %u: waiting for their acknowledgements", lo - W, lo - 1,
				    a->peer))
			goto out;
		/* the ring slots of window w - 2 are free once B has verified them */
		if (w >= 2 && swait(k, a->ks, a->sig, (uint64_t)(w - 1), a->tmo_us,
				    "puts %ld..%ld: waiting for device %u to verify them (credit %ld)", lo - 2 * W,
				    lo - W - 1, a->peer, w - 1))
			goto out;
		for (long i = lo; i < hi; i++) {
			size_t slot = (size_t)(w & 1) * (size_t)W + (size_t)(i - lo);
			uint8_t *src = a->ring + slot * STRESS_MAX_PUT;
			stress_fill(src, a->sizes[i], stress_base((uint64_t)i));
			int rc = gice_put_signal(k, a->c, a->peer_ring_key, slot * STRESS_MAX_PUT, src, a->sizes[i],
						 a->peer_sig, 1, GICE_SIGNAL_ADD, a->done);
			if (rc) {
				kfail(a->ks, rc, "put %ld (%u B to device %u): gice_put_signal: %s (%s)", i, a->sizes[i],
				      a->peer, gice_status_name(rc), gice_status_str(rc));
				goto out;
			}
		}
		atomic_fetch_add_explicit(&a->ks->progress, 1, memory_order_relaxed);
	}
	if (!swait(k, a->ks, a->done, (uint64_t)a->iters, a->tmo_us,
		   "all %ld puts to device %u: waiting for their acknowledgements", a->iters, a->peer))
		swait(k, a->ks, a->sig, (uint64_t)nwin, a->tmo_us, "all %ld puts: waiting for device %u to verify them",
		      a->iters, a->peer);
out:
	kdone(a->ks);
}

static void s1_verifier(gice_kctx_t *k, void *a_)
{
	struct s1_args *a = a_;
	long W = a->window, nwin = (a->iters + W - 1) / W;

	for (long w = 0; w < nwin; w++) {
		long lo = w * W, hi = lo + W < a->iters ? lo + W : a->iters;
		if (swait(k, a->ks, a->sig, (uint64_t)hi, a->tmo_us, "puts %ld..%ld from device %u: waiting for their signals",
			  lo, hi - 1, a->peer))
			goto out;
		for (long i = lo; i < hi; i++) {
			size_t slot = (size_t)(w & 1) * (size_t)W + (size_t)(i - lo);
			uint8_t e = 0, f = 0;
			long off = stress_check(a->ring + slot * STRESS_MAX_PUT, a->sizes[i], stress_base((uint64_t)i), &e, &f);
			if (off >= 0) {
				kfail(a->ks, STRESS_CORRUPT,
				      "put %ld (%u B from device %u, ring slot %zu) corrupt: first bad byte at offset %ld: "
				      "expected 0x%02x, found 0x%02x",
				      i, a->sizes[i], a->peer, slot, off, e, f);
				goto out;
			}
		}
		int rc = gice_put_signal(k, a->c, a->peer_scratch_key, 0, a->scratch, 8, a->peer_sig, 1, GICE_SIGNAL_ADD,
					 a->done);
		if (rc) {
			kfail(a->ks, rc, "credit %ld to device %u: gice_put_signal: %s (%s)", w + 1, a->peer,
			      gice_status_name(rc), gice_status_str(rc));
			goto out;
		}
		atomic_fetch_add_explicit(&a->ks->progress, 1, memory_order_relaxed);
	}
	swait(k, a->ks, a->done, (uint64_t)nwin, a->tmo_us, "%ld credits to device %u: waiting for their acknowledgements",
	      nwin, a->peer);
out:
	kdone(a->ks);
}

struct s2_args {
	struct kstate *ks;
	uint32_t me, peer;
	int role;
	gice_conn_t c;
	uint8_t *src, *dst;
	uint64_t peer_dst_key;
	gice_counter_t peer_sig, sig, done;
	size_t bytes, chunk;
	uint32_t window;
	uint64_t tmo_us;
};

/* Both devices at once: send src in chunks, then verify what the peer sent into dst. */
static void s2_kernel(gice_kctx_t *k, void *a_)
{
	struct s2_args *a = a_;
	size_t n = (a->bytes + a->chunk - 1) / a->chunk;
	uint8_t e = 0, f = 0;
	long off;

	for (size_t c = 0; c < n; c++) {
		size_t o = c * a->chunk, len = a->bytes - o < a->chunk ? a->bytes - o : a->chunk;
		if (c >= a->window && swait(k, a->ks, a->done, c - a->window + 1, a->tmo_us,
					    "exchange to device %u: waiting for acknowledgements before chunk %zu", a->peer,
					    c))
			goto out;
		int rc = gice_put_signal(k, a->c, a->peer_dst_key, o, a->src + o, len, a->peer_sig, 1, GICE_SIGNAL_ADD,
					 a->done);
		if (rc) {
			kfail(a->ks, rc, "exchange to device %u: chunk %zu (%zu B at offset %zu): gice_put_signal: %s (%s)",
			      a->peer, c, len, o, gice_status_name(rc), gice_status_str(rc));
			goto out;
		}
		atomic_fetch_add_explicit(&a->ks->progress, 1, memory_order_relaxed);
	}
	if (swait(k, a->ks, a->sig, n, a->tmo_us, "exchange from device %u: waiting for the signals of its %zu chunks",
		  a->peer, n))
		goto out;
	off = stress_check(a->dst, a->bytes, stress_base(STRESS_XCHG + (uint64_t)(1 - a->role)), &e, &f);
	if (off >= 0) {
		size_t c = (size_t)off / a->chunk, o = c * a->chunk;
		kfail(a->ks, STRESS_CORRUPT,
		      "exchange from device %u corrupt: chunk %zu (%zu B at offset %zu): first bad byte at offset %ld: "
		      "expected 0x%02x, found 0x%02x",
		      a->peer, c, a->bytes - o < a->chunk ? a->bytes - o : a->chunk, o, off, e, f);
		goto out;
	}
	swait(k, a->ks, a->done, n, a->tmo_us, "exchange to device %u: waiting for the acknowledgements of its %zu chunks",
	      a->peer, n);
out:
	kdone(a->ks);
}

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

static int bench_stress(void)
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

/* ---------------------------------------------------------------- launch */

static void empty_kernel(gice_kctx_t *k, void *args)
{
	(void)k;
	(void)args;
}

/* The launch path's fixed cost: gice_launch of an empty kernel of n blocks, then
 * gice_stream_sync, timed together from the host, one launch in flight at a time. */
static int bench_launch(void)
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
		   "[--check] [--stages]\n"
		   "       gice-bench launch [--csv] [--iters N] [--blocks 1,4,...] [--provider NAME]\n"
		   "       gice-bench stress [--csv] [--iters N] [--bytes B] [--chunk B] [--window N] [--seed S] "
		   "[--timeout-ms MS] [--provider NAME]\n");
}

/* A number with an optional k, m or g suffix (binary), within [min, max]; 0 on success. */
static int parse_num(const char *name, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (end != s && (*end == 'k' || *end == 'K'))
		v <<= 10, end++;
	else if (end != s && (*end == 'm' || *end == 'M'))
		v <<= 20, end++;
	else if (end != s && (*end == 'g' || *end == 'G'))
		v <<= 30, end++;
	if (errno || end == s || *end || *s == '-' || v < min || v > max) {
		fprintf(stderr, "gice-bench: bad %s '%s' (want %llu..%llu; k, m, g suffixes allowed)\n", name, s,
			(unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"csv", no_argument, 0, 'c'},      {"sizes", required_argument, 0, 's'},
					   {"iters", required_argument, 0, 'n'}, {"provider", required_argument, 0, 'p'},
					   {"check", no_argument, 0, 'k'},     {"help", no_argument, 0, 'h'},
					   {"stages", no_argument, 0, 'S'},    {"bytes", required_argument, 0, 'b'},
					   {"chunk", required_argument, 0, 'C'}, {"window", required_argument, 0, 'w'},
					   {"seed", required_argument, 0, 'e'}, {"timeout-ms", required_argument, 0, 't'},
					   {"blocks", required_argument, 0, 'B'}, {0, 0, 0, 0}};
	const char *sizes = "8,4096,65536,1048576", *blocks = "1,4";
	uint64_t v;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "cs:n:p:khS", lo, NULL)) != -1) {
		switch (ch) {
		case 'c': opt.csv = 1; break;
		case 's': sizes = optarg; break;
		case 'n': opt.iters = atol(optarg), opt.iters_set = 1; break;
		case 'p': opt.provider = optarg; break;
		case 'k': opt.check = 1; break;
		case 'S': opt.stages = 1; break;
		case 'b':
			if (parse_num("--bytes", optarg, 0, (1ull << 40), &v))
				return 2;
			opt.bytes = (size_t)v;
			break;
		case 'C':
			if (parse_num("--chunk", optarg, 0, (4ull << 30) - 1, &v))
				return 2;
			opt.chunk = (size_t)v;
			break;
		case 'w':
			if (parse_num("--window", optarg, 1, 1024, &v))
				return 2;
			opt.window = (uint32_t)v;
			break;
		case 'e':
			if (parse_num("--seed", optarg, 0, UINT64_MAX, &v))
				return 2;
			opt.seed = v;
			break;
		case 't':
			if (parse_num("--timeout-ms", optarg, 1, 86400000, &v))
				return 2;
			opt.timeout_ms = v;
			break;
		case 'B': blocks = optarg; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (opt.iters < 0) {
		fprintf(stderr, "gice-bench: bad --iters %ld\n", opt.iters);
		return 2;
	}
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", sizes);
	for (char *save, *t = strtok_r(buf, ",", &save); t && opt.nsizes < 32; t = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long long n = strtoull(t, &end, 0);
		if (*end == 'k' || *end == 'K')
			n <<= 10;
		else if (*end == 'm' || *end == 'M')
			n <<= 20;
		opt.sizes[opt.nsizes++] = (size_t)n;
	}
	snprintf(buf, sizeof(buf), "%s", blocks);
	for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (opt.nblocks == 32) {
			fprintf(stderr, "gice-bench: at most 32 --blocks\n");
			return 2;
		}
		if (parse_num("--blocks", t, 1, 1u << 20, &v))
			return 2;
		opt.blocks[opt.nblocks++] = (uint32_t)v;
	}
	CHECK(gice_init());
	int table = strcmp(argv[optind], "idle") && (strcmp(argv[optind], "stress") || opt.csv);
	if (table && gice_rank() == 0)
		header();
	if (!strcmp(argv[optind], "trigger"))
		rc = bench_trigger();
	else if (!strcmp(argv[optind], "put"))
		rc = bench_put();
	else if (!strcmp(argv[optind], "idle"))
		rc = bench_idle();
	else if (!strcmp(argv[optind], "memcpy"))
		rc = bench_memcpy();
	else if (!strcmp(argv[optind], "stress"))
		rc = bench_stress();
	else if (!strcmp(argv[optind], "launch"))
		rc = bench_launch();
	else {
		usage(stderr);
		rc = 2;
	}
	gice_finalize();
	return rc;
}
