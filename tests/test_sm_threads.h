/* test_sm_threads.h: what the binaries of the SM threads and their streams share
 * (test_sm_threads.c: grids, the launch path, idle threads, argument checks and parameters;
 * test_stream_order.c: order within a stream, concurrency between streams and between host
 * threads enqueuing onto one; test_stream_waits.c: stream waits and writes, sync, timeouts and
 * teardown). The fixture struct fx is a trigger memory region and an SM device over it
 * (fx_open, fx_close); counter() allocates one of its counters; sleep_ms sleeps. stamp_block
 * is a kernel that records when its first block started and counts its block runs in a struct
 * stamp. smt_suite: a binary's suite of smt_case entries, each with a 30 s timeout. */
#ifndef GICE_TEST_SM_THREADS_H
#define GICE_TEST_SM_THREADS_H

#include <check.h>
#include <stdint.h>
#include <time.h>

#include "emu/sm_threads/sm_threads.h"
#include "tests/test_util.h"

#define MS 1000000ull
#define SEC (1000 * MS)
#define N_SMS 4

static inline void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

struct fx {
	tm_region_t *tm;
	smt_dev_t *d;
};

static inline void fx_open(struct fx *f, uint32_t n_sms)
{
	tm_layout_t l = {.n_counters = 256, .n_cts = 2, .queue_depth = 8};

	ck_assert_int_eq(tm_region_create(&l, "smt-test", &f->tm), GICE_OK);
	ck_assert_int_eq(smt_create(n_sms, 0, f->tm, &f->d), GICE_OK);
	ck_assert_uint_eq(smt_num_sms(f->d), n_sms);
}

static inline void fx_close(struct fx *f)
{
	smt_destroy(f->d);
	tm_region_destroy(f->tm);
}

static inline uint32_t counter(struct fx *f)
{
	uint32_t id;

	ck_assert_int_eq(tm_counter_alloc(f->tm, &id), GICE_OK);
	return id;
}

struct stamp {
	_Atomic uint64_t started_ns;
	_Atomic uint32_t runs;
};

static inline void stamp_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct stamp *st = p;

	uint64_t zero = 0;
	atomic_compare_exchange_strong(&st->started_ns, &zero, gice_now_ns());
	atomic_fetch_add(&st->runs, 1);
}

/* A case of a test_sm_threads / test_stream_* binary. */
struct smt_case {
	const char *name;
	const TTest *fn;
};

static inline Suite *smt_suite(const char *name, const struct smt_case *cases, size_t n)
{
	Suite *s = suite_create(name);

	for (size_t i = 0; i < n; i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_test(tc, cases[i].fn);
		tcase_set_timeout(tc, 30);
		suite_add_tcase(s, tc);
	}
	return s;
}

#endif
