/* Description: SM threads — every block of a grid runs exactly once, on the device's SMs; a
 * launch wakes as many SMs as the spinning budget allows, yet blocks of a grid that wait on each
 * other all get an SM (and a cooperative launch wakes one per block); a launch whose prep fails
 * returns its status and runs nothing; idle SM and stream threads sleep; bad arguments and a full
 * stream queue are refused with their status; the parameter table. Order and concurrency of
 * streams: test_stream_order.c; stream waits, writes and teardown: test_stream_waits.c.
 */
#include <check.h>
#include <stdlib.h>
#include <time.h>

#include "emu/sm_threads/sm_threads.h"
#include "tests/test_sm_threads.h"
#include "tests/test_util.h"

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

int main(void)
{
	struct smt_case cases[] = {
		{"grid_every_block_once", test_grid_every_block_once},
		{"failed_prep_runs_nothing", test_failed_prep_runs_nothing},
		{"idle_threads_sleep", test_idle_threads_sleep},
		{"bad_arguments_and_full_queue", test_bad_arguments_and_full_queue},
		{"params_table", test_params_table},
		{"blocks_waiting_on_each_other_all_run", test_blocks_waiting_on_each_other_all_run},
	};

	return test_run_suite(smt_suite("sm_threads", cases, sizeof(cases) / sizeof(cases[0])));
}
