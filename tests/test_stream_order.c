/* Description: order of SM streams — two streams run concurrently (a kernel on one finishes
 * only if the other's runs meanwhile), many short kernels on several streams all run; one stream
 * runs in order: a kernel starts after the one before it ended, and what is queued behind a
 * launch its enqueuer started directly still waits for its end; host threads that enqueue onto
 * one stream at once (no lock) lose nothing, run nothing twice, and each one's commands run in
 * its order.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>

#include "emu/sm_threads/sm_threads.h"
#include "tests/test_sm_threads.h"
#include "tests/test_util.h"

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

int main(void)
{
	struct smt_case cases[] = {
		{"two_streams_concurrent", test_two_streams_concurrent},
		{"many_kernels_many_streams", test_many_kernels_many_streams},
		{"in_order_on_one_stream", test_in_order_on_one_stream},
		{"command_behind_a_direct_launch_waits_for_it", test_command_behind_a_direct_launch_waits_for_it},
		{"concurrent_enqueuers_keep_each_ones_order", test_concurrent_enqueuers_keep_each_ones_order},
	};

	return test_run_suite(smt_suite("stream_order", cases, sizeof(cases) / sizeof(cases[0])));
}
