/* bench_first.c: gice-bench first-kernel — from a counter's write to the dependent kernel
 * running (seed 5.3): a stream wait bound to the counter, against a kernel already running that
 * polls it.
 *
 * Two devices in this process. Per iteration, device B enqueues the dependent work on its
 * stream: either (stream-wait) gice_stream_wait_value(sig >= i) then a kernel that stamps its
 * start, or (poll) one kernel that reads sig in a loop (gice_signal_fetch) until it reaches i,
 * then stamps. Then device A's kernel, after 50 us (so B is waiting by then), sends an 8-byte
 * put_signal that adds 1 to sig. The latency is the stamp minus the time sig was written
 * (the counter's ts_ns, CLOCK_MONOTONIC like the stamp). Rows first-kernel, transport
 * PROVIDER/stream-wait and PROVIDER/poll, bytes 8; p50/p99 of that latency; MBps 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

struct fk_args {
	gice_counter_t sig;
	uint64_t want;
	uint64_t *stamp;
};

static void stamp_kernel(gice_kctx_t *k, void *a_)
{
	struct fk_args *a = a_;
	(void)k;
	*a->stamp = now_ns();
}

static void poll_kernel(gice_kctx_t *k, void *a_)
{
	struct fk_args *a = a_;
	uint64_t t0 = now_ns();

	while (gice_signal_fetch(k, a->sig) < a->want)
		if (now_ns() - t0 > 10000000000ull) {
			gice_kernel_fail(k, GICE_ERR_TIMED_OUT, "polled the counter for 10 s");
			return;
		}
	*a->stamp = now_ns();
}

struct fk_put {
	gice_conn_t c;
	uint64_t rkey;
	gice_counter_t sig;
	const void *src;
};

static void put_kernel(gice_kctx_t *k, void *a_)
{
	struct fk_put *a = a_;
	uint64_t t0 = now_ns();

	while (now_ns() - t0 < 50000)
		;
	gice_put_signal(k, a->c, a->rkey, 0, a->src, 8, a->sig, 1, GICE_SIGNAL_ADD, GICE_NO_COUNTER);
}

int bench_first_kernel(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	long iters = opt.iters ? opt.iters : 500, warm = iters / 10 + 1;
	uint64_t *lat = calloc((size_t)iters, sizeof(*lat)), got = 0;
	struct bench_pair p;
	struct bench_side *a, *b;
	gice_counter_t sig;
	uint64_t key, k0;
	void *src, *dst;

	if (gice_world_size() > 1) {
		fprintf(stderr, "gice-bench first-kernel: runs in one process (two devices), not under a launcher\n");
		free(lat);
		return 1;
	}
	if (!lat)
		die("first-kernel: calloc", GICE_ERR_NO_MEMORY);
	bench_pair_open(&p, &attr);
	a = &p.sd[0], b = &p.sd[1];
	CHECK(gice_mem_alloc(a->d, 4096, &src));
	CHECK(gice_mem_alloc(b->d, 4096, &dst));
	CHECK(gice_mem_register(a->d, src, 4096, &k0));
	CHECK(gice_mem_register(b->d, dst, 4096, &key));
	CHECK(gice_counter_alloc(b->d, &sig));
	bench_pair_connect(&p);
	const char *prov = gice_device_provider(a->d);
	struct fk_put put = {.c = a->c, .rkey = key, .sig = sig, .src = src};

	for (int poll = 0; poll < 2; poll++) {
		char transport[64];
		snprintf(transport, sizeof(transport), "%s/%s", prov, poll ? "poll" : "stream-wait");
		for (long i = 0; i < iters + warm; i++) {
			uint64_t stamp = 0;
			gice_counter_state_t cs;
			struct fk_args f = {.sig = sig, .want = ++got, .stamp = &stamp};
			if (poll) {
				CHECK(gice_launch(b->s, poll_kernel, 1, &f, sizeof(f)));
			} else {
				CHECK(gice_stream_wait_value(b->s, sig, GICE_CMP_GE, got, 0));
				CHECK(gice_launch(b->s, stamp_kernel, 1, &f, sizeof(f)));
			}
			CHECK(gice_launch(a->s, put_kernel, 1, &put, sizeof(put)));
			CHECK(gice_stream_sync(b->s, 0));
			CHECK(gice_stream_sync(a->s, 0));
			CHECK(gice_counter_get(b->d, sig, &cs));
			if (cs.value != got || cs.fail) {
				fprintf(stderr, "gice-bench first-kernel: counter %u reads %llu (%llu failed), expected %llu\n",
					sig, (unsigned long long)cs.value, (unsigned long long)cs.fail,
					(unsigned long long)got);
				free(lat);
				return 1;
			}
			if (i >= warm)
				lat[i - warm] = stamp > cs.ts_ns ? stamp - cs.ts_ns : 0;
		}
		row("first-kernel", transport, 1, 8, iters, pct(lat, iters, 0.5), pct(lat, iters, 0.99), 0, 0);
	}
	free(lat);
	bench_pair_close(&p);
	return 0;
}
