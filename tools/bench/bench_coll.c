/* bench_coll.c: gice-bench allreduce, the team collectives. Every device of the job (two in this
 * process when it runs alone, else one per rank) runs one kernel per size that times --iters
 * calls of gice_coll_allreduce_k (float32 sums, out of place, on the world team) after
 * iters / 4 + 2 untimed ones (threads still spinning after the set-up settle); the host is idle
 * meanwhile. Rank 0 prints p50 and p99 of one call (its first device's) and, as nccl-tests
 * define them, algbw = bytes / p50 time (MBps) and busbw = algbw * 2 (n - 1) / n (busbw_MBps).
 * --check then runs one allreduce of known values per size and compares every element with the
 * host reference. Sizes: --sizes, default 8 B to 64 MiB in steps of 8x. GICE_ALGO and
 * GICE_CHUNK_BYTES choose the algorithm. */
#include <stdio.h>
#include <stdlib.h>

#include "tools/bench/bench.h"

struct coll_args {
	gice_team_t *team;
	uint64_t a, b;
	size_t count;
	long iters;
	uint64_t *t; /* per call, ns; filled by the kernel of the first device here */
	gice_device_t *first;
};

static void allreduce_kernel(gice_kctx_t *k, void *a_)
{
	struct coll_args *a = a_;
	int mine = k->dev == a->first;

	for (long i = -(a->iters / 4 + 2); i < a->iters; i++) {
		uint64_t t0 = now_ns();
		if (gice_coll_allreduce_k(k, a->team, a->a, a->b, a->count, GICE_FLOAT32, GICE_RED_SUM))
			return;
		if (mine && i >= 0)
			a->t[i] = now_ns() - t0;
	}
}

static long coll_iters(size_t bytes)
{
	if (opt.iters)
		return opt.iters;
	return bytes <= 4096 ? 2000 : bytes <= 65536 ? 500 : bytes <= (1u << 20) ? 100 : bytes <= (16u << 20) ? 20 : 10;
}

static void run(gice_stream_t **s, uint32_t n_local, struct coll_args *a)
{
	for (uint32_t i = 0; i < n_local; i++)
		CHECK(gice_launch(s[i], allreduce_kernel, 1, a, sizeof(*a)));
	for (uint32_t i = 0; i < n_local; i++)
		CHECK(gice_stream_sync(s[i], 0));
}

int bench_allreduce(void)
{
	static const size_t dflt[] = {8, 64, 512, 4096, 32768, 262144, 2u << 20, 16u << 20, 64u << 20};
	uint32_t n_local = gice_world_size() == 1 ? 2 : 1;
	size_t sizes[32], nsizes = 0, max = 0;
	gice_device_t *d[2];
	gice_stream_t *s[2];
	struct coll_args a = {0};
	int bad = 0;

	if (opt.nsizes_set)
		for (int i = 0; i < opt.nsizes; i++)
			sizes[nsizes++] = opt.sizes[i];
	else
		for (size_t i = 0; i < sizeof(dflt) / sizeof(dflt[0]); i++)
			sizes[nsizes++] = dflt[i];
	for (size_t i = 0; i < nsizes; i++)
		max = sizes[i] > max ? sizes[i] : max;
	max = (max + 255) / 256 * 256;
	size_t heap = 2 * max + (16u << 20);
	gice_device_attr_t attr = {.provider = opt.provider, .hbm_bytes = heap + (16u << 20)};
	for (uint32_t i = 0; i < n_local; i++) {
		CHECK(gice_device_open(&attr, &d[i]));
		CHECK(gice_stream_create(d[i], &s[i]));
	}
	CHECK(gice_sym_init(heap));
	a.team = gice_team_world();
	a.first = d[0];
	CHECK(gice_coll_init(a.team));
	CHECK(gice_sym_alloc(max, &a.a));
	CHECK(gice_sym_alloc(max, &a.b));
	uint32_t n = gice_team_size(a.team);
	for (size_t si = 0; si < nsizes; si++) {
		size_t bytes = sizes[si] / 4 * 4;
		a.count = bytes / 4;
		a.iters = coll_iters(bytes);
		if (!(a.t = calloc((size_t)a.iters, sizeof(uint64_t))))
			die("calloc", GICE_ERR_NO_MEMORY);
		for (uint32_t i = 0; i < n_local; i++) {
			float *x = gice_sym_ptr(d[i], a.a);
			for (size_t j = 0; j < a.count; j++)
				x[j] = 1.0f;
		}
		run(s, n_local, &a);
		if (gice_rank() == 0) {
			double p50 = pct(a.t, a.iters, 0.5), algbw = p50 > 0 ? (double)bytes / p50 : 0;
			row("allreduce", gice_device_provider(d[0]), (int)n, bytes, a.iters, p50, pct(a.t, a.iters, 0.99),
			    algbw, algbw * 2.0 * (n - 1) / n);
		}
		free(a.t);
		if (!opt.check)
			continue;
		/* known values: rank r holds (r + 1) * (j % 7); the sum is (j % 7) n (n + 1) / 2, exact */
		long iters = a.iters;
		a.iters = 0; /* only the untimed calls: b = sum of a */
		for (uint32_t i = 0; i < n_local; i++) {
			float *x = gice_sym_ptr(d[i], a.a);
			int32_t r = gice_team_rank(a.team, d[i]);
			for (size_t j = 0; j < a.count; j++)
				x[j] = (float)((r + 1) * (int)(j % 7));
		}
		run(s, n_local, &a);
		for (uint32_t i = 0; i < n_local; i++) {
			const float *y = gice_sym_ptr(d[i], a.b);
			for (size_t j = 0; j < a.count && !bad; j++)
				if (y[j] != (float)((j % 7) * n * (n + 1) / 2)) {
					fprintf(stderr, "allreduce: %zu bytes: rank %u element %zu: %g, expected %g: FAILED\n",
						bytes, gice_rank(), j, (double)y[j], (double)((j % 7) * n * (n + 1) / 2));
					bad = 1;
				}
		}
		a.iters = iters;
	}
	CHECK(gice_sym_fini());
	for (uint32_t i = 0; i < n_local; i++) {
		CHECK(gice_stream_destroy(s[i]));
		CHECK(gice_device_close(d[i]));
	}
	return bad;
}
