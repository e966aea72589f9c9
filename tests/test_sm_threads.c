/* Description: SM threads and streams — every block of a grid runs exactly once, streams run
 * concurrently and each in order (also when several host threads enqueue onto one at once, with
 * no lock; a launch whose prep fails runs nothing), stream waits start kernels when a counter arrives (no host
 * polling), stream writes reach waiters, a timed-out wait becomes the stream's sticky error and
 * skips later work, destroy completes queued work, and idle SM/stream threads sleep.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu/sm_threads/sm_threads.h"
#include "tests/test_util.h"

#define MS 1000000ull
#define SEC (1000 * MS)
#define N_SMS 4

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

struct fx {
	tm_region_t *tm;
	smt_dev_t *d;
};

static void fx_open(struct fx *f, uint32_t n_sms)
{
	tm_layout_t l = {.n_counters = 256, .n_cts = 2, .queue_depth = 8};

	ck_assert_int_eq(tm_region_create(&l, "smt-test", &f->tm), GICE_OK);
	ck_assert_int_eq(smt_create(n_sms, 0, f->tm, &f->d), GICE_OK);
	ck_assert_uint_eq(smt_num_sms(f->d), n_sms);
}

static void fx_close(struct fx *f)
{
	smt_destroy(f->d);
	tm_region_destroy(f->tm);
}

static uint32_t counter(struct fx *f)
{
	uint32_t id;

	ck_assert_int_eq(tm_counter_alloc(f->tm, &id), GICE_OK);
	return id;
}

/* ---- grid ---- */

#define GRID 1000

struct grid {
	_Atomic uint64_t sum[GRID];
	_Atomic uint32_t runs[GRID];
	_Atomic uint32_t bad_sm, bad_nblocks;
	_Atomic uint32_t sms_used;
};

static void grid_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct grid *g = p;

	atomic_fetch_add(&g->sum[block], block);
	atomic_fetch_add(&g->runs[block], 1);
	if (sm >= N_SMS)
		atomic_fetch_add(&g->bad_sm, 1);
	else
		atomic_fetch_or(&g->sms_used, 1u << sm);
	if (nblocks != GRID)
		atomic_fetch_add(&g->bad_nblocks, 1);
}

START_TEST(test_grid_every_block_once)
{
	struct fx f;
	smt_stream_t *s;
	struct grid *g = calloc(1, sizeof(*g));

	fx_open(&f, N_SMS);
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	for (int rep = 0; rep < 3; rep++)
		ck_assert_int_eq(smt_launch(s, grid_block, g, GRID, NULL), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	for (uint32_t b = 0; b < GRID; b++) {
		ck_assert_uint_eq(atomic_load(&g->runs[b]), 3);
		ck_assert_uint_eq(atomic_load(&g->sum[b]), 3ull * b);
	}
	ck_assert_uint_eq(atomic_load(&g->bad_sm), 0);
	ck_assert_uint_eq(atomic_load(&g->bad_nblocks), 0);
	ck_assert_uint_ne(atomic_load(&g->sms_used), 0);
	ck_assert_int_eq(smt_stream_destroy(s, 10 * SEC), GICE_OK);
	fx_close(&f);
	free(g);
}
END_TEST

/* ---- concurrency between streams ---- */

struct rendezvous {
	_Atomic uint32_t flag;
	_Atomic uint32_t a_saw_flag;
};

static void waits_for_flag(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct rendezvous *r = p;
	uint64_t end = gice_now_ns() + test_scaled(5 * SEC);

	while (!atomic_load(&r->flag) && gice_now_ns() < end)
		sleep_ms(1);
	atomic_store(&r->a_saw_flag, atomic_load(&r->flag));
}

static void sets_flag(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct rendezvous *r = p;

	atomic_store(&r->flag, 1);
}

START_TEST(test_two_streams_concurrent)
{
	struct fx f;
	smt_stream_t *s1, *s2;
	struct rendezvous r = {0};

	fx_open(&f, N_SMS);
	ck_assert_int_eq(smt_stream_create(f.d, &s1), GICE_OK);
	ck_assert_int_eq(smt_stream_create(f.d, &s2), GICE_OK);
	/* A can only finish if B, on the other stream, runs while A is running */
	ck_assert_int_eq(smt_launch(s1, waits_for_flag, &r, 1, NULL), GICE_OK);
	sleep_ms(5);
	ck_assert_int_eq(smt_launch(s2, sets_flag, &r, 1, NULL), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s2, 10 * SEC), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s1, 10 * SEC), GICE_OK);
	ck_assert_uint_eq(atomic_load(&r.a_saw_flag), 1);
	fx_close(&f); /* destroys the streams too */
}
END_TEST

/* many short kernels on several streams at once: exercises reuse of kernel records */
#define STRESS_STREAMS 4
#define STRESS_KERNELS 300

struct stress_arg {
	_Atomic uint64_t *total;
	uint32_t stream;
};

static void stress_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct stress_arg *a = p;

	atomic_fetch_add(a->total, 1);
}

static void stress_done(void *p)
{
	free(p);
}

START_TEST(test_many_kernels_many_streams)
{
	struct fx f;
	smt_stream_t *s[STRESS_STREAMS];
	_Atomic uint64_t total = 0;
	uint64_t want = 0;

	fx_open(&f, N_SMS);
	for (int i = 0; i < STRESS_STREAMS; i++)
		ck_assert_int_eq(smt_stream_create(f.d, &s[i]), GICE_OK);
	for (int k = 0; k < STRESS_KERNELS; k++)
		for (int i = 0; i < STRESS_STREAMS; i++) {
			struct stress_arg *a = malloc(sizeof(*a));
			uint32_t nb = 1 + (uint32_t)((k * 7 + i) % 9);
			a->total = &total;
			a->stream = (uint32_t)i;
			ck_assert_int_eq(smt_launch(s[i], stress_block, a, nb, stress_done), GICE_OK);
			want += nb;
		}
	for (int i = 0; i < STRESS_STREAMS; i++)
		ck_assert_int_eq(smt_stream_sync(s[i], 20 * SEC), GICE_OK);
	ck_assert_uint_eq(atomic_load(&total), want);
	fx_close(&f);
}
END_TEST

/* ---- order within a stream ---- */

#define ORDER_N 64

struct order {
	uint32_t data[ORDER_N]; /* plain memory: ordering must come from the stream */
	uint32_t ok[ORDER_N];
};

static void order_a(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct order *o = p;

	if (block % 8 == 0)
		sleep_ms(2); /* slow blocks: B would overtake them if it were not ordered */
	o->data[block] = block + 1;
}

static void order_b(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct order *o = p;
	uint32_t good = 1;

	for (uint32_t i = 0; i < ORDER_N; i++)
		good &= o->data[i] == i + 1;
	o->ok[block] = good;
}

START_TEST(test_in_order_on_one_stream)
{
	struct fx f;
	smt_stream_t *s;
	struct order *o = calloc(1, sizeof(*o));

	fx_open(&f, N_SMS);
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	ck_assert_int_eq(smt_launch(s, order_a, o, ORDER_N, NULL), GICE_OK);
	ck_assert_int_eq(smt_launch(s, order_b, o, ORDER_N, NULL), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	for (uint32_t i = 0; i < ORDER_N; i++)
		ck_assert_uint_eq(o->ok[i], 1);
	fx_close(&f);
	free(o);
}
END_TEST

/* ---- stream waits and writes ---- */

struct stamp {
	_Atomic uint64_t started_ns;
	_Atomic uint32_t runs;
};

static void stamp_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct stamp *st = p;

	uint64_t zero = 0;
	atomic_compare_exchange_strong(&st->started_ns, &zero, gice_now_ns());
	atomic_fetch_add(&st->runs, 1);
}

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

/* A launch onto an idle stream is started by its enqueuer (no stream thread hop); what is
 * queued behind it still waits for its end: a write stays unseen while the kernel runs. */
struct held {
	_Atomic int release, ran;
};

static void held_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct held *h = p;
	uint64_t t0 = gice_now_ns();

	(void)block, (void)nblocks, (void)sm;
	while (!atomic_load(&h->release) && gice_now_ns() - t0 < 10 * SEC)
		;
	atomic_fetch_add(&h->ran, 1);
}

START_TEST(test_command_behind_a_direct_launch_waits_for_it)
{
	struct fx f;
	smt_stream_t *s;

	fx_open(&f, N_SMS);
	uint32_t c = counter(&f);
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	for (int round = 0; round < 3; round++) {
		struct held h = {0};
		ck_assert_int_eq(smt_launch(s, held_block, &h, 2, NULL), GICE_OK); /* the stream is idle */
		ck_assert_int_eq(smt_write_value(s, c, (uint64_t)round + 1, 0), GICE_OK);
		ck_assert_int_eq(smt_launch(s, held_block, &h, 1, NULL), GICE_OK); /* queued: the stream thread's */
		sleep_ms(30);
		ck_assert_uint_eq(tm_counter_read(f.tm, c), (uint64_t)round); /* the kernel still runs */
		ck_assert_int_eq(atomic_load(&h.ran), 0);
		atomic_store(&h.release, 1);
		ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
		ck_assert_uint_eq(tm_counter_read(f.tm, c), (uint64_t)round + 1);
		ck_assert_int_eq(atomic_load(&h.ran), 3);
	}
	ck_assert_int_eq(smt_stream_destroy(s, 10 * SEC), GICE_OK);
	fx_close(&f);
}
END_TEST

static void count_done(void *p)
{
	struct stamp *st = p;

	atomic_fetch_add(&st->runs, 1000); /* on_done marks itself apart from block runs */
}

/* ---- concurrent enqueuers ---- */

#define ENQ_THREADS 4
#define ENQ_N 1000 /* per thread, two commands each: within the depth the test sets */

struct enq_shared {
	smt_stream_t *s;
	pthread_barrier_t go; /* the threads enqueue at the same time */
	uint32_t counter;
	_Atomic int64_t last[ENQ_THREADS]; /* the last launch of each thread that ran */
	_Atomic uint32_t runs, out_of_order, failed;
};

struct enq_cmd {
	struct enq_shared *sh;
	uint32_t t, i;
};

static struct enq_cmd enq_cmds[ENQ_THREADS][ENQ_N];

static void enq_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct enq_cmd *c = p;

	/* one stream runs in order: each thread's launches in the order it enqueued them */
	if (atomic_load(&c->sh->last[c->t]) != (int64_t)c->i - 1)
		atomic_fetch_add(&c->sh->out_of_order, 1);
	atomic_store(&c->sh->last[c->t], c->i);
	atomic_fetch_add(&c->sh->runs, 1);
}

static void *enq_main(void *p)
{
	struct enq_cmd *mine = p;
	struct enq_shared *sh = mine[0].sh;

	pthread_barrier_wait(&sh->go);
	for (uint32_t i = 0; i < ENQ_N; i++)
		if (smt_launch(sh->s, enq_block, &mine[i], 1, NULL) || smt_write_value(sh->s, sh->counter, 1, 1))
			atomic_fetch_add(&sh->failed, 1);
	return NULL;
}

/* Host threads enqueue onto one stream at once (no lock: claims published in order): nothing
 * is lost or run twice, and each thread's commands run in its order. */
START_TEST(test_concurrent_enqueuers_keep_each_ones_order)
{
	struct fx f;
	struct enq_shared sh = {0};
	pthread_t th[ENQ_THREADS];

	setenv("GICE_SMT_STREAM_DEPTH", "16384", 1); /* every command of a round fits */
	fx_open(&f, N_SMS);
	sh.counter = counter(&f);
	ck_assert_int_eq(smt_stream_create(f.d, &sh.s), GICE_OK);
	ck_assert_int_eq(pthread_barrier_init(&sh.go, NULL, ENQ_THREADS), 0);
	for (int round = 0; round < 5; round++) {
		for (uint32_t t = 0; t < ENQ_THREADS; t++) {
			atomic_store(&sh.last[t], -1);
			for (uint32_t i = 0; i < ENQ_N; i++)
				enq_cmds[t][i] = (struct enq_cmd){&sh, t, i};
		}
		atomic_store(&sh.runs, 0);
		for (uint32_t t = 0; t < ENQ_THREADS; t++)
			ck_assert_int_eq(pthread_create(&th[t], NULL, enq_main, enq_cmds[t]), 0);
		for (uint32_t t = 0; t < ENQ_THREADS; t++)
			pthread_join(th[t], NULL);
		ck_assert_int_eq(smt_stream_sync(sh.s, 10 * SEC), GICE_OK);
		ck_assert_uint_eq(atomic_load(&sh.failed), 0);
		ck_assert_uint_eq(atomic_load(&sh.out_of_order), 0);
		ck_assert_uint_eq(atomic_load(&sh.runs), ENQ_THREADS * ENQ_N);
		ck_assert_uint_eq(tm_counter_read(f.tm, sh.counter), (uint64_t)(round + 1) * ENQ_THREADS * ENQ_N);
		for (uint32_t t = 0; t < ENQ_THREADS; t++)
			ck_assert_int_eq(atomic_load(&sh.last[t]), ENQ_N - 1);
	}
	ck_assert_int_eq(smt_stream_destroy(sh.s, 10 * SEC), GICE_OK);
	pthread_barrier_destroy(&sh.go);
	fx_close(&f);
}
END_TEST

static int prep_refuse(void *ctx, uint32_t index, void **arg) { return GICE_ERR_NO_MEMORY; }

static int prep_stamp(void *ctx, uint32_t index, void **arg)
{
	*arg = ctx;
	return GICE_OK;
}

/* A launch whose prep fails returns its status and runs nothing; the stream goes on. */
START_TEST(test_failed_prep_runs_nothing)
{
	struct fx f;
	smt_stream_t *s;
	struct stamp st = {0};

	fx_open(&f, N_SMS);
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	ck_assert_int_eq(smt_launch_prep(s, stamp_block, 1, 0, NULL, prep_refuse, &st), GICE_ERR_NO_MEMORY);
	ck_assert_int_eq(smt_launch_prep(s, stamp_block, 2, 0, NULL, prep_stamp, &st), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_uint_eq(atomic_load(&st.runs), 2);
	ck_assert_int_eq(smt_stream_destroy(s, 10 * SEC), GICE_OK);
	fx_close(&f);
}
END_TEST

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

/* ---- idle CPU ---- */

static uint64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

START_TEST(test_idle_threads_sleep)
{
	struct fx f;
	smt_stream_t *s1, *s2;
	struct stamp st = {0};

	fx_open(&f, N_SMS);
	ck_assert_int_eq(smt_stream_create(f.d, &s1), GICE_OK);
	ck_assert_int_eq(smt_stream_create(f.d, &s2), GICE_OK);
	ck_assert_int_eq(smt_launch(s1, stamp_block, &st, 16, NULL), GICE_OK);
	ck_assert_int_eq(smt_launch(s2, stamp_block, &st, 16, NULL), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s1, 10 * SEC), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s2, 10 * SEC), GICE_OK);
	sleep_ms(50);
	uint64_t c0 = process_cpu_ns(), t0 = gice_now_ns();
	sleep_ms(200);
	uint64_t cpu = process_cpu_ns() - c0, el = gice_now_ns() - t0;
	ck_assert_msg(cpu * 20 < el, "idle device used %llu ns of CPU in %llu ns (>= 5%% of a core)",
		      (unsigned long long)cpu, (unsigned long long)el);
	fx_close(&f);
}
END_TEST

/* ---- launch path ---- */

static void nop_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
}

struct barrier {
	_Atomic uint32_t arrived;
	_Atomic uint32_t gave_up;
};

/* Each block arrives, then waits (holding its SM) until every block of the grid has. */
static void barrier_block(void *p, uint32_t block, uint32_t nblocks, uint32_t sm)
{
	struct barrier *b = p;
	uint64_t end = gice_now_ns() + 20 * SEC;

	atomic_fetch_add(&b->arrived, 1);
	while (atomic_load(&b->arrived) < nblocks)
		if (gice_now_ns() > end) {
			atomic_fetch_add(&b->gave_up, 1);
			return;
		}
}

/* A launch wakes at most as many SMs as the spinning budget allows (GICE_SMT_SPINNERS + 1); the
 * blocks of a grid that wait on each other still all get an SM (woken when blocks stay
 * unclaimed), and a cooperative launch wakes one per block at once. */
START_TEST(test_blocks_waiting_on_each_other_all_run)
{
	struct fx f;
	smt_stream_t *s;

	setenv("GICE_SMT_SPINNERS", "1", 1);
	fx_open(&f, N_SMS);
	unsetenv("GICE_SMT_SPINNERS");
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	for (int coop = 0; coop < 2; coop++)
		for (int i = 0; i < 3; i++) {
			struct barrier b = {0};
			sleep_ms(5); /* the SMs go to sleep */
			ck_assert_int_eq(smt_launch_flags(s, barrier_block, &b, N_SMS, coop ? SMT_LAUNCH_COOP : 0, NULL),
					 GICE_OK);
			ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
			ck_assert_uint_eq(atomic_load(&b.arrived), N_SMS);
			ck_assert_uint_eq(atomic_load(&b.gave_up), 0);
		}
	ck_assert_int_eq(smt_stream_destroy(s, 10 * SEC), GICE_OK);
	fx_close(&f);
}
END_TEST

/* ---- argument checks and limits ---- */


START_TEST(test_bad_arguments_and_full_queue)
{
	struct fx f;
	smt_stream_t *s;
	smt_dev_t *d = (smt_dev_t *)0x1;

	fx_open(&f, N_SMS);
	ck_assert_int_eq(smt_create(0, 1, f.tm, &d), GICE_ERR_INVALID);
	ck_assert_int_eq(smt_create(257, 1, f.tm, &d), GICE_ERR_INVALID);
	ck_assert_ptr_eq(d, (smt_dev_t *)0x1);

	setenv("GICE_SMT_STREAM_DEPTH", "4", 1);
	ck_assert_int_eq(smt_stream_create(f.d, &s), GICE_OK);
	unsetenv("GICE_SMT_STREAM_DEPTH");
	uint32_t c = counter(&f);
	ck_assert_int_eq(smt_launch(s, NULL, NULL, 1, NULL), GICE_ERR_INVALID);
	ck_assert_int_eq(smt_launch(s, nop_block, NULL, 0, NULL), GICE_ERR_INVALID);
	ck_assert_int_eq(smt_wait_value(s, 256, TM_CMP_GE, 1, SEC), GICE_ERR_INVALID);
	ck_assert_int_eq(smt_wait_value(s, c, (tm_cmp_t)42, 1, SEC), GICE_ERR_INVALID);
	ck_assert_int_eq(smt_write_value(s, 1000, 1, 0), GICE_ERR_INVALID);

	/* the running wait holds its slot: 1 wait + 3 more fill a ring of 4 */
	ck_assert_int_eq(smt_wait_value(s, c, TM_CMP_GE, 1, 10 * SEC), GICE_OK);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(smt_launch(s, nop_block, NULL, 2, NULL), GICE_OK);
	ck_assert_int_eq(smt_launch(s, nop_block, NULL, 2, NULL), GICE_ERR_NO_MEMORY);
	tm_counter_add(f.tm, c, 1);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	ck_assert_int_eq(smt_launch(s, nop_block, NULL, 2, NULL), GICE_OK);
	ck_assert_int_eq(smt_stream_sync(s, 10 * SEC), GICE_OK);
	fx_close(&f);
}
END_TEST

START_TEST(test_params_table)
{
	uint64_t v;

	for (const gice_param_t *p = smt_params; p->name; p++) {
		ck_assert_ptr_nonnull(p->help);
		ck_assert_int_eq(gice_param_u64(p, &v), GICE_OK);
	}
	/* defaults (the effective values may come from the environment) */
	ck_assert_str_eq(gice_param_find(smt_params, "GICE_SMS")->defval, "4");
	ck_assert_str_eq(gice_param_find(smt_params, "GICE_SMT_SPIN_US")->defval, "20");
	ck_assert_str_eq(gice_param_find(smt_params, "GICE_SMT_STREAM_DEPTH")->defval, "1024");
}
END_TEST

static void add(Suite *s, const char *name, const TTest *fn)
{
	TCase *tc = tcase_create(name);

	tcase_add_test(tc, fn);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
}

int main(void)
{
	Suite *s = suite_create("sm_threads");
	SRunner *sr;
	int failed;

	add(s, "grid_every_block_once", test_grid_every_block_once);
	add(s, "two_streams_concurrent", test_two_streams_concurrent);
	add(s, "many_kernels_many_streams", test_many_kernels_many_streams);
	add(s, "in_order_on_one_stream", test_in_order_on_one_stream);
	add(s, "kernel_waits_for_counter", test_kernel_waits_for_counter);
	add(s, "write_value_reaches_waiter", test_write_value_reaches_waiter);
	add(s, "command_behind_a_direct_launch_waits_for_it", test_command_behind_a_direct_launch_waits_for_it);
	add(s, "concurrent_enqueuers_keep_each_ones_order", test_concurrent_enqueuers_keep_each_ones_order);
	add(s, "failed_prep_runs_nothing", test_failed_prep_runs_nothing);
	add(s, "wait_timeout_sticky_error", test_wait_timeout_sticky_error);
	add(s, "sync_idle_and_sync_timeout", test_sync_idle_and_sync_timeout);
	add(s, "destroy_completes_queued_work", test_destroy_completes_queued_work);
	add(s, "idle_threads_sleep", test_idle_threads_sleep);
	add(s, "bad_arguments_and_full_queue", test_bad_arguments_and_full_queue);
	add(s, "params_table", test_params_table);
	add(s, "blocks_waiting_on_each_other_all_run", test_blocks_waiting_on_each_other_all_run);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
