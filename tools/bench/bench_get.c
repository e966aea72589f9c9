/* bench_get.c: gice-bench get, what a get costs against a put of the same size. Between two
 * devices (two in this process, or one per rank of a pair under a launcher), side 0's kernel
 * issues --window puts (with a completion: the put is acknowledged) or --window gets of side
 * 1's memory, then waits for their completions; side 1 runs no kernel (its CTs serve both, as
 * a NIC does). Rounds of puts and of gets alternate, so that drift hits both alike. Per size, a
 * row for each, p50 and p99 from the first issue of a batch to its last completion, and a line
 * with the ratio of the p50s. --check verifies every byte each get block read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

#define ROUNDS 5

struct ga_args {
	int is_get;
	gice_conn_t c;
	uint64_t rkey;           /* put: where side 1 lands puts; get: what it serves */
	uint8_t *local;          /* put: the source; get: the destination */
	size_t bytes;
	long iters, window;
	gice_completion_t done;
	uint64_t base;           /* completions before this block */
	uint64_t *lat;           /* per batch */
	int rc;                  /* the first failure */
};

static void ga_kernel(gice_kctx_t *k, void *a_)
{
	struct ga_args *a = *(struct ga_args **)a_;
	uint64_t n = a->base;

	for (long i = 0; i < a->iters; i++) {
		uint64_t t0 = now_ns();
		for (long w = 0; w < a->window; w++) {
			int rc = a->is_get ? gice_get(k, a->c, a->local, a->rkey, 0, a->bytes, a->done)
					   : gice_put(k, a->c, a->rkey, 0, a->local, a->bytes, a->done);
			if (rc) {
				a->rc = rc;
				return;
			}
		}
		n += (uint64_t)a->window;
		if ((a->rc = gice_wait_until(k, a->done, GICE_CMP_GE, n, 0, NULL)))
			return;
		a->lat[i] = now_ns() - t0;
	}
}

/* One block of a->iters batches on side 0's stream; the completion count moves on. */
static int ga_block(const struct bench_side *s, struct ga_args *a, uint64_t *count)
{
	a->base = *count;
	a->rc = 0;
	CHECK(gice_launch(s->s, ga_kernel, 1, &a, sizeof(a)));
	CHECK(gice_stream_sync(s->s, 0));
	if (a->rc) {
		fprintf(stderr, "gice-bench get: %s of %zu bytes failed: %s\n", a->is_get ? "get" : "put", a->bytes,
			gice_status_name(a->rc));
		return 1;
	}
	*count += (uint64_t)(a->iters * a->window);
	return 0;
}

/* What side 1 publishes: where puts land, what gets read. */
struct ga_pub {
	uint64_t land_key, serve_key;
};

int bench_get(void)
{
	gice_device_attr_t attr = {.provider = opt.provider};
	struct bench_pair p;
	struct bench_side *sd = p.sd;
	struct ga_pub pub[2];
	uint8_t *buf[2][2] = {{NULL, NULL}, {NULL, NULL}}, *expect = NULL;
	long window = opt.window_set ? opt.window : 1;
	size_t maxb = bench_pair_sizes(&attr);
	int failed = 0;

	memset(pub, 0, sizeof(pub));
	bench_pair_open(&p, &attr);
	for (int i = 0; i < 2; i++) { /* side 0: put source, get destination; side 1: landing, served */
		void *m;
		uint64_t k[2];
		if (!sd[i].local)
			continue;
		for (int j = 0; j < 2; j++) {
			CHECK(gice_mem_alloc(sd[i].d, maxb, &m));
			CHECK(gice_mem_register(sd[i].d, m, maxb, &k[j]));
			buf[i][j] = m;
		}
		pub[i] = (struct ga_pub){.land_key = k[0], .serve_key = k[1]};
	}
	if (sd[1].local)
		bench_pattern(buf[1][1], maxb, 7); /* before the exchange: side 0 reads it after */
	bench_pair_connect(&p);
	bench_pair_exchange(&p, pub, sizeof(pub[0]));
	if (p.active && sd[0].local) {
		const char *transport = gice_device_provider(sd[0].d);
		gice_completion_t done;
		uint64_t count = 0, warm;
		if (opt.check && !(expect = malloc(maxb)))
			die("malloc", GICE_ERR_NO_MEMORY);
		if (expect)
			bench_pattern(expect, maxb, 7);
		CHECK(gice_counter_alloc(sd[0].d, &done));
		bench_pattern(buf[0][0], maxb, 3);
		for (int si = 0; si < opt.nsizes && !failed; si++) {
			size_t bytes = opt.sizes[si];
			long per = bench_default_iters(bytes) / ROUNDS;
			per = per ? per : 1;
			uint64_t *lat[2] = {calloc((size_t)(per * ROUNDS), 8), calloc((size_t)(per * ROUNDS), 8)};
			double p50[2];
			if (!lat[0] || !lat[1])
				die("calloc", GICE_ERR_NO_MEMORY);
			/* a batch of each, not timed; then ROUNDS rounds of a put block and a get block */
			for (int r = -1; r < ROUNDS && !failed; r++)
				for (int g = 0; g < 2 && !failed; g++) {
					struct ga_args a = {.is_get = g, .c = sd[0].c,
							    .rkey = g ? pub[1].serve_key : pub[1].land_key,
							    .local = buf[0][g], .bytes = bytes, .iters = r < 0 ? 1 : per,
							    .window = window, .done = done,
							    .lat = r < 0 ? &warm : lat[g] + r * per};
					if (g && expect)
						memset(buf[0][1], 0, bytes);
					failed = ga_block(&sd[0], &a, &count);
					if (!failed && g && expect && memcmp(buf[0][1], expect, bytes)) {
						size_t o = 0;
						while (buf[0][1][o] == expect[o])
							o++;
						fprintf(stderr, "gice-bench get: %zu bytes: mismatch at offset %zu\n", bytes, o);
						failed = 1;
					}
				}
			for (int g = 0; g < 2 && !failed; g++) {
				long n = per * ROUNDS;
				double sum = 0;
				for (long i = 0; i < n; i++)
					sum += (double)lat[g][i];
				double mb = (double)bytes * (double)window / (sum / (double)n / 1000.0);
				p50[g] = pct(lat[g], n, 0.5);
				row(g ? "get" : "put-done", transport, (int)p.world, bytes, n, p50[g], pct(lat[g], n, 0.99), mb,
				    mb * p.pairs);
			}
			if (!failed)
				printf("# get %zu B window %ld: p50 %.3f us, put to completion %.3f us: %.2fx\n", bytes, window,
				       p50[1], p50[0], p50[0] > 0 ? p50[1] / p50[0] : 0.0);
			fflush(stdout);
			free(lat[0]);
			free(lat[1]);
		}
		free(expect);
	}
	if (p.world > 1)
		CHECK(gice_barrier()); /* side 1 serves until side 0 is done */
	bench_pair_close(&p);
	return failed;
}
