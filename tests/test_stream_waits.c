/* Description: stream waits and writes — a stream wait starts the kernels behind it when the
 * counter arrives (no host polling), stream writes (set and add) reach a host waiting on the
 * counter; a timed-out wait becomes the stream's sticky error, skips later work (on_done still
 * runs) and is reported once, a failed counter ends a wait with its status; sync of an idle
 * stream returns at once and sync gives up at its own timeout; stream destroy with a timeout
 * leaves the stream alive, and device destroy completes queued work.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include "emu/sm_threads/sm_threads.h"
#include "tests/test_sm_threads.h"
#include "tests/test_util.h"

/* ---- stream waits and writes ---- */

struct late_writer {
	tm_region_t *tm;
	uint32_t id;
	unsigned delay_ms;
	uint64_t written_ns;
};

static void *late_writer_main(void *p)
{
	struct late_writer *w = p;

	sleep_ms(w->delay_ms);
	w->written_ns = gice_now_ns();
	tm_counter_add(w->tm, w->id, 1);
	return NULL;
}

START_TEST(test_kernel_waits_for_counter)
{
	struct fx f;
	smt_stream_t *s;
	struct stamp st = {0};
	pthread_t t;

	fx_open(&f, N_SMS);
	struct late_writer w = {.tm = f.tm, .id = counter(&f), .delay_ms = 40};
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	ck_assert_int_eq(smt_wait_value(s, w.id, TM_CMP_GE, 1, 10 * SEC), GICE_OK);
	ck_assert_int_eq(smt_launch(s, stamp_block, &st, 4, NULL), GICE_OK);
	ck_assert_int_eq(pthread_create(&t, NULL, late_writer_main, &w), 0);
	sleep_ms(20);
	ck_assert_uint_eq(atomic_load(&st.runs), 0); /* not started 20 ms in */
	/* no host polling: the host only syncs, after the writer is done */
	pthread_join(t, NULL);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_uint_eq(atomic_load(&st.runs), 4);
	ck_assert_uint_ge(atomic_load(&st.started_ns), w.written_ns);
	fx_close(&f);
}
END_TEST

START_TEST(test_write_value_reaches_waiter)
{
	struct fx f;
	smt_stream_t *s;
	uint64_t found = 0;

	fx_open(&f, N_SMS);
	uint32_t gate = counter(&f), c = counter(&f);
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	/* the writes happen only after the gate opens, while the host already waits on c */
	ck_assert_int_eq(smt_wait_value(s, gate, TM_CMP_EQ, 1, 10 * SEC), GICE_OK);
	ck_assert_int_eq(smt_write_value(s, c, 5, 0), GICE_OK);
	ck_assert_int_eq(smt_write_value(s, c, 3, 1), GICE_OK);
	tm_counter_set(f.tm, gate, 1);
	ck_assert_int_eq(tm_counter_wait(f.tm, c, TM_CMP_EQ, 8, 10 * SEC, 10000, &found), GICE_OK);
	ck_assert_uint_eq(found, 8);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	/* set replaces the value */
	ck_assert_int_eq(smt_write_value(s, c, 2, 0), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_uint_eq(tm_counter_read(f.tm, c), 2);
	fx_close(&f);
}
END_TEST

/* ---- timeouts ---- */

static void count_done(void *p)
{
	struct stamp *st = p;

	atomic_fetch_add(&st->runs, 1000); /* on_done marks itself apart from block runs */
}

START_TEST(test_wait_timeout_sticky_error)
{
	struct fx f;
	smt_stream_t *s;
	struct stamp st = {0}, st2 = {0};

	fx_open(&f, N_SMS);
	uint32_t never = counter(&f), c = counter(&f);
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	uint64_t t0 = gice_now_ns();
	ck_assert_int_eq(smt_wait_value(s, never, TM_CMP_GE, 1, 30 * MS), GICE_OK);
	ck_assert_int_eq(smt_launch(s, stamp_block, &st, 8, count_done), GICE_OK);
	ck_assert_int_eq(smt_write_value(s, c, 7, 0), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_ERR_TIMED_OUT);
	ck_assert_uint_ge(gice_now_ns() - t0, 30 * MS);
	/* later work skipped; on_done still ran so the caller could free arg */
	ck_assert_uint_eq(atomic_load(&st.runs), 1000);
	ck_assert_uint_eq(tm_counter_read(f.tm, c), 0);

	/* the error was reported once; the stream works again */
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_int_eq(smt_launch(s, stamp_block, &st2, 8, NULL), GICE_OK);
	ck_assert_int_eq(smt_write_value(s, c, 7, 0), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_uint_eq(atomic_load(&st2.runs), 8);
	ck_assert_uint_eq(tm_counter_read(f.tm, c), 7);

	/* a failed counter ends the wait with its status */
	tm_counter_fail(f.tm, never, GICE_ERR_PEER_DEAD);
	ck_assert_int_eq(smt_wait_value(s, never, TM_CMP_GE, 1, 10 * SEC), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_ERR_PEER_DEAD);
	fx_close(&f);
}
END_TEST

START_TEST(test_sync_idle_and_sync_timeout)
{
	struct fx f;
	smt_stream_t *s;

	fx_open(&f, N_SMS);
	uint32_t c = counter(&f);
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	uint64_t t0 = gice_now_ns();
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_uint_lt(gice_now_ns() - t0, test_scaled(50 * MS));

	/* sync gives up at its own timeout; the stream is unaffected */
	ck_assert_int_eq(smt_wait_value(s, c, TM_CMP_GE, 1, 10 * SEC), GICE_OK);
	t0 = gice_now_ns();
	ck_assert_int_eq(smt_stream_sync(s, 20 * MS), GICE_ERR_TIMED_OUT);
	ck_assert_uint_ge(gice_now_ns() - t0, 20 * MS);
	ck_assert_uint_lt(gice_now_ns() - t0, test_scaled(2 * SEC));
	tm_counter_add(f.tm, c, 1);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	fx_close(&f);
}
END_TEST

/* ---- teardown ---- */

static void slow_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct stamp *st = p;

	sleep_ms(1);
	atomic_fetch_add(&st->runs, 1);
}

START_TEST(test_destroy_completes_queued_work)
{
	struct fx f;
	smt_stream_t *s1, *s2;
	struct stamp st = {0};
	pthread_t t;

	fx_open(&f, N_SMS);
	struct late_writer w = {.tm = f.tm, .id = counter(&f), .delay_ms = 20};
	uint32_t c = counter(&f);
	ck_assert_int_eq(smt_stream_create(f.d, &s1), GICE_OK);
	ck_assert_int_eq(smt_stream_create(f.d, &s2), GICE_OK);

	/* stream destroy with a timeout: left alive while it waits, then destroyed */
	ck_assert_int_eq(smt_wait_value(s2, w.id, TM_CMP_GE, 1, 10 * SEC), GICE_OK);
	ck_assert_int_eq(smt_launch(s2, slow_block, &st, 8, NULL), GICE_OK);
	ck_assert_int_eq(smt_stream_destroy(s2, 5 * MS), GICE_ERR_TIMED_OUT);
	ck_assert_int_eq(pthread_create(&t, NULL, late_writer_main, &w), 0);
	ck_assert_int_eq(smt_stream_destroy(s2, 10 * SEC), GICE_OK);
	pthread_join(t, NULL);
	ck_assert_uint_eq(atomic_load(&st.runs), 8);

	/* device destroy with work still queued on a stream */
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(smt_launch(s1, slow_block, &st, 16, NULL), GICE_OK);
	ck_assert_int_eq(smt_write_value(s1, c, 1, 1), GICE_OK);
	fx_close(&f);
	ck_assert_uint_eq(atomic_load(&st.runs), 8 + 160);
}
END_TEST

int main(void)
{
	struct smt_case cases[] = {
		{"kernel_waits_for_counter", test_kernel_waits_for_counter},
		{"write_value_reaches_waiter", test_write_value_reaches_waiter},
		{"wait_timeout_sticky_error", test_wait_timeout_sticky_error},
		{"sync_idle_and_sync_timeout", test_sync_idle_and_sync_timeout},
		{"destroy_completes_queued_work", test_destroy_completes_queued_work},
	};

	return test_run_suite(smt_suite("stream_waits", cases, sizeof(cases) / sizeof(cases[0])));
}
