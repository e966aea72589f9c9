/* test_sym.h: what the test_sym_*.c binaries (symmetric memory, symmetric counters, teams and
 * the device calls built on them) share. The fixture: NDEV devices of this process, a stream
 * each (dev, str), and a symmetric heap of HEAP bytes (setup; open_devices without the heap;
 * teardown). The ring kernel (put_signal to the right neighbour's heap, then a get back from
 * it, with pat's bytes) and docs/api.md's hand-written ring allreduce (allreduce_check), which
 * run both on the devices of one process and on the ranks of a job (test_sym_procs.c).
 * sym_suite: a binary's suite of sym_case entries, each with its fixture and a 120 s timeout. */
#ifndef GICE_TEST_SYM_H
#define GICE_TEST_SYM_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api/gice.h"

#define NDEV 4
#define HEAP (1u << 20)

static gice_device_t *dev[NDEV];
static gice_stream_t *str[NDEV];

static inline void open_devices(void)
{
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		gice_device_attr_t a = {.n_sms = 4, .n_cts = 2, .hbm_bytes = 16u << 20};
		ck_assert_int_eq(gice_device_open(&a, &dev[i]), GICE_OK);
		ck_assert_int_eq(gice_stream_create(dev[i], &str[i]), GICE_OK);
	}
}

static inline void setup(void)
{
	open_devices();
	ck_assert_int_eq(gice_sym_init(HEAP), GICE_OK);
}

static inline void teardown(void)
{
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_stream_destroy(str[i]), GICE_OK);
	gice_sym_fini(); /* GICE_ERR_INVALID in the cases that never initialised it */
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

static inline void sync_all(int expect)
{
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_stream_sync(str[i], 0), expect);
}

/* ---------------------------------------------------------------- the ring: put_signal, then get */

struct ring_args {
	gice_team_t *team;
	uint64_t src, dst, back; /* heap offsets */
	size_t bytes;
	gice_counter_t sig, done;
};

/* To the right neighbour's dst, with a signal; then back from its src into back. */
static inline void ring_kernel(gice_kctx_t *k, void *p)
{
	struct ring_args *a = p;
	int32_t me = gice_team_rank(a->team, k->dev);
	uint32_t n = gice_team_size(a->team), right = ((uint32_t)me + 1) % n;

	if (gice_sym_put_signal(k, a->team, right, a->dst, gice_sym_ptr(k->dev, a->src), a->bytes, a->sig, 1,
				GICE_SIGNAL_ADD, a->done) ||
	    gice_wait_until(k, a->sig, GICE_CMP_GE, 1, 0, NULL) || gice_sym_fence(k, a->team, right) ||
	    gice_sym_get(k, a->team, right, gice_sym_ptr(k->dev, a->back), a->src, a->bytes, a->done) ||
	    gice_wait_until(k, a->done, GICE_CMP_GE, 2, 0, NULL))
		gice_kernel_fail(k, GICE_ERR_INVALID, "ring");
}

static inline uint8_t pat(uint32_t rank, size_t i) { return (uint8_t)(i * 7 + rank * 13 + 1); }

/* ---------------------------------------------------------------- a hand-written ring allreduce
 * docs/api.md's porting example: a ring allreduce (reduce-scatter, then allgather) of int64
 * sums written with symmetric put_signal and counter waits only, as one would port an NVSHMEM
 * kernel. count is a multiple of the team size. */
struct ar_args {
	gice_team_t *team;
	uint64_t data, recv;  /* heap offsets: count int64 in and out; 2 (n - 1) chunks landing zone */
	size_t count;
	gice_counter_t sig, done; /* symmetric: chunks arrived here; this device's puts completed */
};

static inline void allreduce_kernel(gice_kctx_t *k, void *p)
{
	struct ar_args *a = p;
	uint32_t n = gice_team_size(a->team), me = (uint32_t)gice_team_rank(a->team, k->dev), right = (me + 1) % n;
	size_t m = a->count / n, cb = m * sizeof(int64_t);
	int64_t *data = gice_sym_ptr(k->dev, a->data), *recv = gice_sym_ptr(k->dev, a->recv);
	int rc = GICE_OK;

	/* reduce-scatter: step s sends chunk me - s to the right (slot s there), receives chunk
	 * me - s - 1 from the left into slot s and adds it in; a strong signal counts a step only
	 * once every earlier put from that neighbour has landed */
	for (uint32_t s = 0; s + 1 < n && !rc; s++) {
		size_t cs = (me + n - s) % n, cr = (me + 2 * n - s - 1) % n;
		rc = gice_sym_put_signal(k, a->team, right, a->recv + s * cb, &data[cs * m], cb, a->sig, 1,
					 GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, a->done);
		if (!rc)
			rc = gice_wait_until(k, a->sig, GICE_CMP_GE, s + 1, 0, NULL);
		for (size_t i = 0; !rc && i < m; i++)
			data[cr * m + i] += recv[s * m + i];
	}
	/* the chunks sent so far are overwritten below: their puts must have completed */
	if (!rc && n > 1)
		rc = gice_wait_until(k, a->done, GICE_CMP_GE, n - 1, 0, NULL);
	/* allgather: this device holds the sum of chunk me + 1; pass the sums around */
	for (uint32_t t = 0; t + 1 < n && !rc; t++) {
		size_t cs = (me + 1 + n - t) % n, cr = (me + n - t) % n, slot = n - 1 + t;
		rc = gice_sym_put_signal(k, a->team, right, a->recv + slot * cb, &data[cs * m], cb, a->sig, 1,
					 GICE_SIGNAL_ADD | GICE_SIGNAL_STRONG, a->done);
		if (!rc)
			rc = gice_wait_until(k, a->sig, GICE_CMP_GE, slot + 1, 0, NULL);
		if (!rc)
			memcpy(&data[cr * m], &recv[slot * m], cb);
	}
	if (!rc) /* every put done everywhere before the buffers are used again */
		rc = gice_team_barrier(k, a->team);
	if (rc)
		gice_kernel_fail(k, rc, "allreduce");
}

/* Allocate and fill (device of team rank r: r * 1000 + i), run, check the sums. Returns 0. */
static inline int allreduce_check(gice_device_t *const *devs, gice_stream_t *const *strs, int n_local, size_t count)
{
	struct ar_args a = {.team = gice_team_world(), .count = count};
	uint32_t n = gice_team_size(a.team);

	if (gice_sym_alloc(count * 8, &a.data) || gice_sym_alloc(2 * n * (count / n) * 8 + 8, &a.recv) ||
	    gice_sym_counter_alloc(&a.sig) || gice_sym_counter_alloc(&a.done))
		return 1;
	for (int i = 0; i < n_local; i++) {
		int64_t *d = gice_sym_ptr(devs[i], a.data), r = gice_team_rank(a.team, devs[i]);
		for (size_t j = 0; j < count; j++)
			d[j] = r * 1000 + (int64_t)j;
	}
	for (int i = 0; i < n_local; i++)
		if (gice_launch(strs[i], allreduce_kernel, 1, &a, sizeof(a)))
			return 2;
	for (int i = 0; i < n_local; i++)
		if (gice_stream_sync(strs[i], 0))
			return 3;
	for (int i = 0; i < n_local; i++) {
		const int64_t *d = gice_sym_ptr(devs[i], a.data);
		for (size_t j = 0; j < count; j++)
			if (d[j] != 1000 * (int64_t)n * (n - 1) / 2 + (int64_t)n * (int64_t)j) {
				fprintf(stderr, "allreduce: device %d element %zu: %lld\n", i, j, (long long)d[j]);
				return 4;
			}
	}
	return 0;
}

/* rounds of a team barrier test (test_sym_team.c, test_sym_procs.c) */
#define BAR_ITERS 50

/* A case of a test_sym_* binary: its test run loops times, with fixture setup (none when NULL)
 * and teardown (the one above when NULL). */
struct sym_case {
	const char *name;
	const TTest *test;
	int loops;
	void (*setup)(void);
	void (*teardown)(void);
};

static inline Suite *sym_suite(const char *name, const struct sym_case *cases, size_t n)
{
	Suite *s = suite_create(name);

	for (size_t i = 0; i < n; i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 120);
		if (cases[i].setup)
			tcase_add_checked_fixture(tc, cases[i].setup, cases[i].teardown ? cases[i].teardown : teardown);
		tcase_add_loop_test(tc, cases[i].test, 0, cases[i].loops);
		suite_add_tcase(s, tc);
	}
	return s;
}

#endif
