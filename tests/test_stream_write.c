/* Description: a stream's counter write hands what it triggers to the device's engines on the
 * stream thread (smt_set_engine_step): the step runs with the CTs that watch the counter as its
 * ring mask, and a write to a counter no CT watches runs no step at all (it would be a pass over
 * every tile and the link for nothing). */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include "emu/sm_threads/sm_threads.h"
#include "tests/test_util.h"

#define SEC 1000000000ull

struct steps {
	_Atomic uint32_t n, ring;
	pthread_t caller;
};

static int count_step(void *arg, uint32_t ring)
{
	struct steps *st = arg;

	st->caller = pthread_self();
	atomic_store(&st->ring, ring);
	atomic_fetch_add(&st->n, 1);
	return 0;
}

static struct steps st;
static tm_region_t *tm;
static smt_dev_t *dev;
static smt_stream_t *s;

static void setup(void)
{
	tm_layout_t l = {.n_counters = 64, .n_cts = 4, .queue_depth = 8};

	memset(&st, 0, sizeof(st));
	ck_assert_int_eq(tm_region_create(&l, "smt-write-test", &tm), GICE_OK);
	ck_assert_int_eq(smt_create(2, 0, tm, &dev), GICE_OK);
	smt_set_engine_step(dev, count_step, &st);
	ck_assert_int_eq(smt_stream_create(dev, &s), GICE_OK);
}

static void teardown(void)
{
	smt_destroy(dev);
	tm_region_destroy(tm);
}

START_TEST(test_write_to_a_watched_counter_steps_its_cts)
{
	uint32_t c;

	ck_assert_int_eq(tm_counter_alloc(tm, &c), GICE_OK);
	tm_counter_watch(tm, c, 1, 1);
	tm_counter_watch(tm, c, 3, 1);
	ck_assert_int_eq(smt_write_value(s, c, 5, 1), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_uint_eq(tm_counter_read(tm, c), 5);
	uint32_t steps = atomic_load(&st.n), ring = atomic_load(&st.ring);
	ck_assert_uint_eq(steps, 1);
	ck_assert_uint_eq(ring, (1u << 1) | (1u << 3));
	ck_assert(!pthread_equal(st.caller, pthread_self())); /* the stream thread's, not the host's */
}
END_TEST

START_TEST(test_write_to_an_unwatched_counter_runs_no_step)
{
	uint32_t c;

	ck_assert_int_eq(tm_counter_alloc(tm, &c), GICE_OK);
	ck_assert_int_eq(smt_write_value(s, c, 7, 0), GICE_OK);
	ck_assert_int_eq(smt_write_value(s, c, 2, 1), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_uint_eq(tm_counter_read(tm, c), 9);
	uint32_t steps = atomic_load(&st.n);
	ck_assert_uint_eq(steps, 0);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("stream_write");
	TCase *tc = tcase_create("stream_write");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_write_to_a_watched_counter_steps_its_cts);
	tcase_add_test(tc, test_write_to_an_unwatched_counter_runs_no_step);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(su, tc);
	return test_run_suite(su);
}
