/* Description: the launch path.
 * - gice_launch allocates nothing in steady state: each stream keeps a launch record per
 *   command queue position, reused (arguments inline up to 128 bytes, larger ones in a buffer
 *   the record keeps);
 * - arguments are copied at launch, at every size, across reuse of the records;
 * - a kernel's failure is reported once and does not stick to the record's next launch;
 * - gice_device_sms gives the SM count; gice_launch_cooperative runs a grid of that many blocks
 *   that wait on each other (a grid barrier), and refuses one block more at once with
 *   GICE_ERR_INVALID, enqueueing nothing.
 * Time bounds scale with CK_TIMEOUT_MULTIPLIER (sanitizers). */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/gice.h"
#include "tests/test_util.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
/* Count this thread's mallocs while `counting` (glibc: the library's calls resolve here). */
extern void *__libc_malloc(size_t n);
static _Thread_local int counting;
static _Thread_local long mallocs;

void *malloc(size_t n)
{
	if (counting)
		mallocs++;
	return __libc_malloc(n);
}
#endif

#define N_SMS 4

static gice_device_t *D;
static gice_stream_t *S;

static void dev_open(void)
{
	gice_device_attr_t a = {.n_sms = N_SMS, .n_cts = 1, .hbm_bytes = 16u << 20};

	/* a short queue: the records are reused many times below */
	setenv("GICE_SMT_STREAM_DEPTH", "4", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	ck_assert_int_eq(gice_device_open(&a, &D), GICE_OK);
	ck_assert_int_eq(gice_stream_create(D, &S), GICE_OK);
	unsetenv("GICE_SMT_STREAM_DEPTH");
}

static void dev_close(void)
{
	ck_assert_int_eq(gice_stream_destroy(S), GICE_OK);
	ck_assert_int_eq(gice_device_close(D), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

/* ---------------------------------------------------------------- arguments */

#define MAX_ARGS 4096

struct check {
	_Atomic uint32_t runs, bad;
};

/* args: [0..8) the address of a struct check, then bytes (seed + i) & 0xff */
static void check_args(gice_kctx_t *k, void *args)
{
	struct check *c;
	const uint8_t *p = args;

	(void)k; /* every block checks the same bytes */
	memcpy(&c, p, sizeof(c));
	uint8_t seed = p[sizeof(c)];
	size_t size = (size_t)p[sizeof(c) + 1] | (size_t)p[sizeof(c) + 2] << 8;
	for (size_t i = sizeof(c) + 3; i < size; i++)
		if (p[i] != (uint8_t)(seed + i))
			atomic_fetch_add(&c->bad, 1);
	atomic_fetch_add(&c->runs, 1);
}

static void fill_args(uint8_t *p, size_t size, struct check *c, uint8_t seed)
{
	memcpy(p, &c, sizeof(c));
	p[sizeof(c)] = seed;
	p[sizeof(c) + 1] = (uint8_t)size;
	p[sizeof(c) + 2] = (uint8_t)(size >> 8);
	for (size_t i = sizeof(c) + 3; i < size; i++)
		p[i] = (uint8_t)(seed + i);
}

START_TEST(test_args_copied_every_size)
{
	static const size_t sizes[] = {11, 64, 128, 129, 1000, MAX_ARGS, 200, 16};
	static uint8_t buf[MAX_ARGS];
	struct check c = {0};
	uint32_t launches = 0;

	dev_open();
	for (int round = 0; round < 6; round++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			fill_args(buf, sizes[i], &c, (uint8_t)(round * 16 + i));
			ck_assert_int_eq(gice_launch(S, check_args, 2, buf, sizes[i]), GICE_OK);
			memset(buf, 0xee, sizeof(buf)); /* copied at launch: the kernel must not see this */
			launches++;
			if (i % 2 == 1) /* some launches queue behind others, some run alone */
				ck_assert_int_eq(gice_stream_sync(S, 0), GICE_OK);
		}
	ck_assert_int_eq(gice_stream_sync(S, 0), GICE_OK);
	ck_assert_uint_eq(atomic_load(&c.runs), 2 * launches);
	ck_assert_uint_eq(atomic_load(&c.bad), 0);
	ck_assert_int_eq(gice_launch(S, check_args, 1, NULL, 8), GICE_ERR_INVALID);
	dev_close();
}
END_TEST

__attribute__((unused)) static void empty(gice_kctx_t *k, void *args) /* unused when sanitized */
{
	(void)k;
	(void)args;
}

/* gice_launch + sync allocate nothing once every record has been used (the old path malloc'd a
 * record per launch). */
START_TEST(test_launch_allocates_nothing)
{
#if SANITIZED
	ck_abort_msg("not run under sanitizers (they own malloc)");
#else
	static uint8_t big[1000];
	uint8_t small[32] = {1};

	dev_open();
	for (int i = 0; i < 16; i++) { /* first use of each record (and of its big buffer) */
		ck_assert_int_eq(gice_launch(S, empty, 1, small, sizeof(small)), GICE_OK);
		ck_assert_int_eq(gice_launch(S, empty, 2, big, sizeof(big)), GICE_OK);
		ck_assert_int_eq(gice_stream_sync(S, 0), GICE_OK);
	}
	int rc = GICE_OK;
	counting = 1; /* no ck_assert inside: Check allocates */
	mallocs = 0;
	for (int i = 0; i < 200 && !rc; i++)
		if (!(rc = gice_launch(S, empty, 1, small, sizeof(small))) &&
		    !(rc = gice_launch(S, empty, 2, big, sizeof(big))))
			rc = gice_stream_sync(S, 0);
	counting = 0;
	ck_assert_int_eq(rc, GICE_OK);
	ck_assert_msg(mallocs == 0, "400 launches called malloc %ld times", mallocs);
	dev_close();
#endif
}
END_TEST

/* ---------------------------------------------------------------- failures */

static void fails(gice_kctx_t *k, void *args)
{
	if (gice_block_idx(k) == *(uint32_t *)args)
		gice_kernel_fail(k, GICE_ERR_OUT_OF_BOUNDS, "index check");
}

START_TEST(test_failure_reported_once_per_launch)
{
	uint32_t block = 1, none = UINT32_MAX;

	setenv("GICE_LOG_LEVEL", "off", 1);
	dev_open();
	for (int round = 0; round < 10; round++) { /* through every record, several times */
		ck_assert_int_eq(gice_launch(S, fails, 3, &block, sizeof(block)), GICE_OK);
		ck_assert_int_eq(gice_stream_sync(S, 0), GICE_ERR_OUT_OF_BOUNDS);
		ck_assert_int_eq(gice_launch(S, fails, 3, &none, sizeof(none)), GICE_OK);
		ck_assert_int_eq(gice_stream_sync(S, 0), GICE_OK);
	}
	dev_close();
	unsetenv("GICE_LOG_LEVEL");
}
END_TEST

/* ---------------------------------------------------------------- cooperative */

struct grid {
	_Atomic uint32_t arrived, gave_up, ran;
	uint64_t deadline_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A grid barrier through a counter: each block arrives, then waits for all the others. */
static void barrier(gice_kctx_t *k, void *args)
{
	struct grid *g = *(struct grid **)args;

	atomic_fetch_add(&g->ran, 1);
	atomic_fetch_add(&g->arrived, 1);
	while (atomic_load(&g->arrived) < gice_grid_dim(k))
		if (now_ns() > g->deadline_ns) {
			atomic_fetch_add(&g->gave_up, 1);
			return;
		}
}

START_TEST(test_cooperative_grid)
{
	uint32_t n_sms = 0;

	dev_open();
	ck_assert_int_eq(gice_device_sms(D, &n_sms), GICE_OK);
	ck_assert_uint_eq(n_sms, N_SMS);
	ck_assert_int_eq(gice_device_sms(D, NULL), GICE_ERR_INVALID);
	for (int i = 0; i < 5; i++) {
		struct grid g = {.deadline_ns = now_ns() + test_scaled(10000000000ull)};
		struct grid *gp = &g;
		struct timespec ms = {0, 2000000};
		nanosleep(&ms, NULL); /* idle SMs fall asleep: the launch must wake one per block */
		ck_assert_int_eq(gice_launch_cooperative(S, barrier, n_sms, &gp, sizeof(gp)), GICE_OK);
		ck_assert_int_eq(gice_stream_sync(S, 0), GICE_OK);
		ck_assert_uint_eq(atomic_load(&g.arrived), n_sms);
		ck_assert_uint_eq(atomic_load(&g.gave_up), 0);
	}

	/* one block more than SMs: refused at once, nothing enqueued */
	struct grid g = {.deadline_ns = now_ns()};
	struct grid *gp = &g;
	ck_assert_int_eq(gice_launch_cooperative(S, barrier, n_sms + 1, &gp, sizeof(gp)), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_stream_sync(S, 0), GICE_OK);
	ck_assert_uint_eq(atomic_load(&g.ran), 0);
	ck_assert_int_eq(gice_launch_cooperative(S, barrier, 0, &gp, sizeof(gp)), GICE_ERR_INVALID);
	dev_close();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("launch");
	struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
		{"args_copied_every_size", test_args_copied_every_size},
		{"launch_allocates_nothing", test_launch_allocates_nothing},
		{"failure_reported_once_per_launch", test_failure_reported_once_per_launch},
		{"cooperative_grid", test_cooperative_grid},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (SANITIZED && cases[i].fn == test_launch_allocates_nothing) {
			test_skip_cases(1, "launch_allocates_nothing: sanitizers own malloc");
			continue;
		}
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void) { return test_run_suite(suite()); }
