/* bench_team.c: gice-bench barrier, the team barriers of the symmetric API. Every device of the
 * job (two in this process when it runs alone, else one per rank) runs one kernel that times
 * --iters calls (default 2000) of gice_team_sync, then as many of gice_team_barrier, on the world
 * team; rank 0 prints p50 and p99 of one call (its first device's). */
#include <stdlib.h>

#include "tools/bench/bench.h"

struct team_args {
	gice_team_t *team;
	long iters;
	uint64_t *t_sync, *t_bar; /* per call, ns; filled by the kernel of the first device here */
	gice_device_t *first;
};

static void team_kernel(gice_kctx_t *k, void *a_)
{
	struct team_args *a = a_;
	int mine = k->dev == a->first;

	if (gice_team_sync(k, a->team)) /* warm-up, and everyone has arrived */
		return;
	for (long i = 0; i < a->iters; i++) {
		uint64_t t0 = now_ns();
		if (gice_team_sync(k, a->team))
			return;
		if (mine)
			a->t_sync[i] = now_ns() - t0;
	}
	for (long i = 0; i < a->iters; i++) {
		uint64_t t0 = now_ns();
		if (gice_team_barrier(k, a->team))
			return;
		if (mine)
			a->t_bar[i] = now_ns() - t0;
	}
}

int bench_barrier(void)
{
	uint32_t n = gice_world_size() == 1 ? 2 : 1;
	gice_device_attr_t attr = {.provider = opt.provider};
	gice_device_t *d[2];
	gice_stream_t *s[2];
	struct team_args a = {.iters = opt.iters ? opt.iters : 2000};

	a.t_sync = calloc((size_t)a.iters, sizeof(uint64_t));
	a.t_bar = calloc((size_t)a.iters, sizeof(uint64_t));
	if (!a.t_sync || !a.t_bar)
		die("calloc", GICE_ERR_NO_MEMORY);
	for (uint32_t i = 0; i < n; i++) {
		CHECK(gice_device_open(&attr, &d[i]));
		CHECK(gice_stream_create(d[i], &s[i]));
	}
	CHECK(gice_sym_init(1u << 20));
	a.team = gice_team_world();
	a.first = d[0];
	for (uint32_t i = 0; i < n; i++)
		CHECK(gice_launch(s[i], team_kernel, 1, &a, sizeof(a)));
	for (uint32_t i = 0; i < n; i++)
		CHECK(gice_stream_sync(s[i], 0));
	if (gice_rank() == 0) {
		const char *tr = gice_device_provider(d[0]);
		uint32_t size = gice_team_size(a.team);
		row("sync", tr, (int)size, 0, a.iters, pct(a.t_sync, a.iters, 0.5), pct(a.t_sync, a.iters, 0.99), 0, 0);
		row("barrier", tr, (int)size, 0, a.iters, pct(a.t_bar, a.iters, 0.5), pct(a.t_bar, a.iters, 0.99), 0,
		    0);
	}
	CHECK(gice_sym_fini());
	for (uint32_t i = 0; i < n; i++) {
		CHECK(gice_stream_destroy(s[i]));
		CHECK(gice_device_close(d[i]));
	}
	free(a.t_sync);
	free(a.t_bar);
	return 0;
}
