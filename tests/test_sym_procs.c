/* Description: symmetric memory and teams across processes (issue 10): 3 ranks of a job, one
 * device each, as forked children (test_job.h). Each run: put_signal and get around the ring,
 * 50 world barriers after which every member's puts have landed, the same on a strided team of
 * the even ranks, and docs/api.md's ring allreduce. Over the default provider (shm); with a
 * gice_sym_alloc of another size on rank 1, which every rank refuses alike and rank 0 names;
 * over tcp with no NVLink plane (team barriers signal through the fabric); and with two devices
 * per rank, which the world interleaves. `test_sym_procs job` is one rank of that job for a
 * launcher: test_netns.sh runs it on 4 emulated hosts. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_job.h"
#include "tests/test_sym.h"

/* ---------------------------------------------------------------- across processes */

struct bar_sym_args {
	gice_team_t *team;
	uint64_t slots, src; /* heap offsets: BAR_ITERS rows of a uint64_t per team rank; sources */
};

/* Each iteration it: write it into this rank's slot of row it on every member (puts), barrier
 * (its quiet makes them land), then every slot of row it here must hold it. A row is written
 * only before its barrier and read only after it (fresh heap memory reads zero). */
static void barrier_sym_kernel(gice_kctx_t *k, void *p)
{
	struct bar_sym_args *a = p;
	uint32_t n = gice_team_size(a->team), me = (uint32_t)gice_team_rank(a->team, k->dev);
	uint64_t *src = gice_sym_ptr(k->dev, a->src), *slots = gice_sym_ptr(k->dev, a->slots);

	for (uint64_t it = 1; it <= BAR_ITERS; it++) {
		src[it - 1] = it; /* a source per iteration: unchanged until its put completed */
		for (uint32_t pe = 0; pe < n; pe++)
			if (gice_sym_put(k, a->team, pe, a->slots + 8 * ((it - 1) * n + me), &src[it - 1], 8,
					 GICE_NO_COUNTER))
				return;
		if (gice_team_barrier(k, a->team))
			return;
		for (uint32_t r = 0; r < n; r++)
			if (slots[(it - 1) * n + r] != it) {
				gice_kernel_fail(k, GICE_ERR_INVALID, "a member's put had not landed after the barrier");
				return;
			}
	}
}

/* A rank of a job of size ranks, one device each: ring of symmetric put_signal + get, world
 * barriers, a strided team of the even ranks; mode 1: rank 1 asks gice_sym_alloc for another
 * size, which every rank refuses alike. */
static int job_rank(int rank, int size, int mode)
{
	gice_device_t *d;
	gice_stream_t *s;
	uint64_t off[3], bad;
	struct ring_args a = {.bytes = 70000};

	FAILIF(gice_init(), "gice_init");
	FAILIF(gice_device_open(NULL, &d) || gice_stream_create(d, &s), "device");
	FAILIF(gice_sym_init(HEAP), "gice_sym_init");
	a.team = gice_team_world();
	FAILIF(gice_team_size(a.team) != (uint32_t)size, "world of %u", gice_team_size(a.team));
	FAILIF(gice_team_rank(a.team, d) != rank, "world rank %d", gice_team_rank(a.team, d));
	if (mode == 1) {
		int rc = gice_sym_alloc(rank == 1 ? 128 : 64, &bad);
		FAILIF(rc != GICE_ERR_INVALID, "mismatched alloc: %s", gice_status_name(rc));
	}
	for (int i = 0; i < 3; i++)
		FAILIF(gice_sym_alloc(a.bytes, &off[i]), "alloc");
	FAILIF(off[0] != 0, "first offset %llu", (unsigned long long)off[0]); /* nothing left of the refused one */
	a.src = off[0];
	a.dst = off[1];
	a.back = off[2];
	FAILIF(gice_sym_counter_alloc(&a.sig) || gice_sym_counter_alloc(&a.done), "counters");
	uint8_t *src = gice_sym_ptr(d, a.src);
	for (size_t j = 0; j < a.bytes; j++)
		src[j] = pat((uint32_t)rank, j);
	/* the left neighbour's get reads this source: written on every rank before any kernel runs */
	FAILIF(gice_barrier(), "barrier");
	FAILIF(gice_launch(s, ring_kernel, 1, &a, sizeof(a)), "launch");
	FAILIF(gice_stream_sync(s, 0), "ring");
	uint32_t left = (uint32_t)(rank + size - 1) % (uint32_t)size, right = (uint32_t)(rank + 1) % (uint32_t)size;
	const uint8_t *dst = gice_sym_ptr(d, a.dst), *back = gice_sym_ptr(d, a.back);
	for (size_t j = 0; j < a.bytes; j++) {
		FAILIF(dst[j] != pat(left, j), "byte %zu from rank %u", j, left);
		FAILIF(back[j] != pat(right, j), "byte %zu got from rank %u", j, right);
	}
	struct bar_sym_args b = {.team = a.team};
	size_t rows = 8ull * BAR_ITERS * (size_t)size;
	FAILIF(gice_sym_alloc(rows, &b.slots) || gice_sym_alloc(8 * BAR_ITERS, &b.src), "alloc");
	FAILIF(gice_launch(s, barrier_sym_kernel, 1, &b, sizeof(b)), "launch");
	FAILIF(gice_stream_sync(s, 0), "world barriers");
	gice_team_t *even;
	FAILIF(gice_team_split_strided(a.team, 0, 2, (uint32_t)(size + 1) / 2, &even), "split");
	FAILIF((even != NULL) != (rank % 2 == 0), "rank %d in the even team: %p", rank, (void *)even);
	FAILIF(gice_sym_alloc(rows, &b.slots) || gice_sym_alloc(8 * BAR_ITERS, &b.src), "alloc");
	if (even) {
		FAILIF(gice_team_rank(even, d) != rank / 2, "even rank");
		b.team = even;
		FAILIF(gice_launch(s, barrier_sym_kernel, 1, &b, sizeof(b)), "launch");
		FAILIF(gice_stream_sync(s, 0), "even barriers");
		FAILIF(gice_team_destroy(even), "destroy");
	}
	FAILIF(allreduce_check(&d, &s, 1, (size_t)size * 1001), "allreduce");
	FAILIF(gice_sym_fini(), "gice_sym_fini");
	FAILIF(gice_barrier(), "barrier");
	gice_stream_destroy(s);
	gice_device_close(d);
	gice_finalize();
	return 0;
}

/* A rank with two devices: the world interleaves the ranks' devices (device id = open round x
 * ranks + rank), the ring runs over all of them, and a team barrier holds them all. */
static int job_two_devices(int rank, int size)
{
	gice_device_t *d[2];
	gice_stream_t *s[2];
	struct ring_args a = {.bytes = 5000};

	FAILIF(gice_init(), "gice_init");
	for (int i = 0; i < 2; i++)
		FAILIF(gice_device_open(NULL, &d[i]) || gice_stream_create(d[i], &s[i]), "device %d", i);
	FAILIF(gice_sym_init(HEAP), "gice_sym_init");
	a.team = gice_team_world();
	uint32_t n = gice_team_size(a.team);
	FAILIF(n != 2u * (uint32_t)size || gice_team_n_local(a.team) != 2, "world of %u", n);
	FAILIF(gice_sym_alloc(a.bytes, &a.src) || gice_sym_alloc(a.bytes, &a.dst) || gice_sym_alloc(a.bytes, &a.back),
	       "alloc");
	FAILIF(gice_sym_counter_alloc(&a.sig) || gice_sym_counter_alloc(&a.done), "counters");
	for (int i = 0; i < 2; i++) {
		uint32_t me = (uint32_t)gice_team_rank(a.team, d[i]);
		FAILIF(me != (uint32_t)(i * size + rank), "device %d has world rank %u", i, me);
		uint8_t *p = gice_sym_ptr(d[i], a.src);
		for (size_t j = 0; j < a.bytes; j++)
			p[j] = pat(me, j);
	}
	FAILIF(gice_barrier(), "barrier"); /* every source written before a get reads it */
	for (int i = 0; i < 2; i++)
		FAILIF(gice_launch(s[i], ring_kernel, 1, &a, sizeof(a)), "launch");
	for (int i = 0; i < 2; i++)
		FAILIF(gice_stream_sync(s[i], 0), "ring on device %d", i);
	for (int i = 0; i < 2; i++) {
		uint32_t me = (uint32_t)gice_team_rank(a.team, d[i]), left = (me + n - 1) % n, right = (me + 1) % n;
		const uint8_t *dst = gice_sym_ptr(d[i], a.dst), *back = gice_sym_ptr(d[i], a.back);
		for (size_t j = 0; j < a.bytes; j++) {
			FAILIF(dst[j] != pat(left, j), "device %d byte %zu from world rank %u", i, j, left);
			FAILIF(back[j] != pat(right, j), "device %d byte %zu got from world rank %u", i, j, right);
		}
	}
	struct bar_sym_args b = {.team = a.team};
	FAILIF(gice_sym_alloc(8ull * BAR_ITERS * n, &b.slots) || gice_sym_alloc(8 * BAR_ITERS, &b.src), "alloc");
	for (int i = 0; i < 2; i++)
		FAILIF(gice_launch(s[i], barrier_sym_kernel, 1, &b, sizeof(b)), "launch");
	for (int i = 0; i < 2; i++)
		FAILIF(gice_stream_sync(s[i], 0), "barriers on device %d", i);
	FAILIF(gice_sym_fini(), "gice_sym_fini");
	for (int i = 0; i < 2; i++) {
		gice_stream_destroy(s[i]);
		gice_device_close(d[i]);
	}
	gice_finalize();
	return 0;
}

static int job_plain(int rank, int size) { return job_rank(rank, size, 0); }
static int job_mismatch(int rank, int size) { return job_rank(rank, size, 1); }

START_TEST(three_processes_symmetric_ring_barriers_and_split)
{
	int st[3];

	/* 0: the default provider (shm), 1: a refused allocation, 2: over tcp with no NVLink plane
	 * (team barriers signal through the fabric instead of writing peers' trigger memory), 3: two
	 * devices per rank */
	static const char *const net[] = {"GICE_PLANE=net", NULL};
	static const rank_fn fns[] = {job_plain, job_mismatch, job_plain, job_two_devices};
#ifdef __SANITIZE_THREAD__
	/* On the NVLink plane a team barrier's signal is written into this process's counter by a
	 * thread of another process, an order ThreadSanitizer cannot see: the data that landed
	 * before it (written by a CT thread here) looks racy. Through the fabric, a CT thread here
	 * applies the signal after the data, which it sees. (One process covers the plane.) */
	const int plane_off = 1;
#else
	const int plane_off = _i == 2;
#endif
	char log[] = "/tmp/gice-sym-XXXXXX";
	int fd = mkstemp(log);

	ck_assert_int_ge(fd, 0);
	close(fd);
	run_job(3, 3, fns[_i], _i == 2 ? "tcp" : NULL, plane_off ? net : NULL, st, log);
	char text[4096];
	job_log_take(log, text, sizeof(text));
	for (int r = 0; r < 3; r++)
		ck_assert_msg(st[r] == 0, "rank %d exited %d; rank 0 said: %s", r, st[r], text);
	if (_i == 1) /* rank 0 names the rank that asked for another size */
		ck_assert_msg(strstr(text, "gice_sym_alloc: rank 1 asked for 128 bytes, rank 0 for 64: nothing allocated"),
			      "rank 0 said: %s", text);
}
END_TEST

/* ---------------------------------------------------------------- suite */

static Suite *suite(void)
{
	struct sym_case cases[] = {
		{"multiproc", three_processes_symmetric_ring_barriers_and_split, 4, NULL, NULL},
	};

	return sym_suite("sym_procs", cases, sizeof(cases) / sizeof(cases[0]));
}

/* `test_sym_procs job` is one rank of the cross-process job above, started by a launcher (gicerun,
 * which sets GICE_RANK and GICE_WORLD_SIZE): test_netns.sh runs it across network namespaces. */
int main(int argc, char **argv) { return test_main_or_job(argc, argv, job_plain, suite); }
