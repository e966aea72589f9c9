/* bench_coll.c: gice-bench allreduce (and allgather, reduce_scatter, broadcast, alltoall), the
 * team collectives. Every device of the job (two in this process when it runs alone, else one
 * per rank) runs one kernel per size that times --iters calls of the collective's kernel form
 * (float32, sums, out of place, world team, root 0) after iters / 4 + 2 untimed ones (threads
 * still spinning after the set-up settle); the host is idle meanwhile. Rank 0 prints p50 and p99
 * of one call (its first device's) and, as nccl-tests define them, algbw = bytes / p50 (MBps;
 * bytes: the whole buffer — allgather's recv, reduce_scatter's send, one rank's alltoall send)
 * and busbw (busbw_MBps) = algbw x 2(n-1)/n for allreduce, x 1 for broadcast, x (n-1)/n for the
 * others. allreduce --check then runs one call of known values per size and compares every
 * element with the host reference. Sizes: --sizes, default 8 B to 64 MiB in steps of 8x.
 * GICE_ALGO and GICE_CHUNK_BYTES choose the allreduce's algorithm. */
#include <stdio.h>
#include <stdlib.h>

#include "tools/bench/bench.h"

/* The collective timed: gice-bench allreduce | allgather | reduce_scatter | broadcast | alltoall */
enum bench_coll { BC_ALLREDUCE, BC_ALLGATHER, BC_REDUCE_SCATTER, BC_BROADCAST, BC_ALLTOALL };
static const char *const bc_name[] = {"allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall"};

struct coll_args {
	enum bench_coll which;
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
		int rc;
		switch (a->which) {
		case BC_ALLGATHER:
			rc = gice_coll_allgather_k(k, a->team, a->a, a->b, a->count, GICE_FLOAT32);
			break;
		case BC_REDUCE_SCATTER:
			rc = gice_coll_reduce_scatter_k(k, a->team, a->a, a->b, a->count, GICE_FLOAT32, GICE_RED_SUM);
			break;
		case BC_BROADCAST:
			rc = gice_coll_broadcast_k(k, a->team, a->a, a->b, a->count, GICE_FLOAT32, 0);
			break;
		case BC_ALLTOALL:
			rc = gice_coll_alltoall_k(k, a->team, a->a, a->b, a->count, GICE_FLOAT32);
			break;
		default:
			rc = gice_coll_allreduce_k(k, a->team, a->a, a->b, a->count, GICE_FLOAT32, GICE_RED_SUM);
			break;
		}
		if (rc)
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

static int bench_coll(enum bench_coll which)
{
	static const size_t dflt[] = {8, 64, 512, 4096, 32768, 262144, 2u << 20, 16u << 20, 64u << 20};
	uint32_t n_local = gice_world_size() == 1 ? 2 : 1;
	size_t sizes[32], nsizes = 0, max = 0;
	gice_device_t *d[2];
	gice_stream_t *s[2];
	struct coll_args a = {.which = which};
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
		/* bytes: the whole buffer, as nccl-tests count it (allgather: recv; reduce_scatter: send;
		 * alltoall: one rank's send); count: what the call takes */
		size_t per = which == BC_ALLREDUCE || which == BC_BROADCAST ? 1 : n;
		a.count = sizes[si] / 4 / per;
		size_t bytes = a.count * 4 * per;
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
			/* busbw: allreduce 2(n-1)/n, broadcast 1, the others (n-1)/n (nccl-tests) */
			double f = which == BC_ALLREDUCE ? 2.0 * (n - 1) / n : which == BC_BROADCAST ? 1.0 : (double)(n - 1) / n;
			row(bc_name[which], gice_device_provider(d[0]), (int)n, bytes, a.iters, p50, pct(a.t, a.iters, 0.99),
			    algbw, algbw * f);
		}
		free(a.t);
		if (!opt.check || which != BC_ALLREDUCE)
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

int bench_allreduce(void) { return bench_coll(BC_ALLREDUCE); }
int bench_allgather(void) { return bench_coll(BC_ALLGATHER); }
int bench_reduce_scatter(void) { return bench_coll(BC_REDUCE_SCATTER); }
int bench_broadcast(void) { return bench_coll(BC_BROADCAST); }
int bench_alltoall(void) { return bench_coll(BC_ALLTOALL); }
