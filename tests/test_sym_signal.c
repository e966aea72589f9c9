/* Description: symmetric counters and the waits, signals and descriptors on counters from a
 * kernel (issue 10), on 4 devices of one process. Signal-only operations to every device and
 * wait_until_all; wait_until_any (with counters left out), _some and _all_vector, and a wait over
 * a set ended by the failure recorded in one of its counters; signal fetch/test/reset from a
 * kernel, and what a reset does to armed descriptors (a persistent one keeps its next threshold,
 * a one-shot its own), the engine's and CT 0's counters refused; quiet reporting the first
 * failure since the last quiet, of a kernel's operation and of an armed one; and arming and
 * disarming one descriptor slot over and over (the disarm/re-arm race that ThreadSanitizer saw
 * in the CT engine). */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "api/gice.h"
#include "tests/test_sym.h"
#include "tests/test_util.h"

/* ---------------------------------------------------------------- signals and waits over sets */

struct all_args {
	gice_team_t *team;
	gice_counter_t c[NDEV];
};

/* Signal counter c[me] of every device (itself too), then wait for every counter. */
static void signal_all_kernel(gice_kctx_t *k, void *p)
{
	struct all_args *a = p;
	int32_t me = gice_team_rank(a->team, k->dev);

	for (uint32_t pe = 0; pe < NDEV; pe++)
		if (gice_sym_signal(k, a->team, pe, a->c[me], 1, GICE_SIGNAL_ADD, GICE_NO_COUNTER))
			gice_kernel_fail(k, GICE_ERR_INVALID, "signal");
	gice_wait_until_all(k, a->c, NDEV, NULL, GICE_CMP_GE, 1, 0);
}

START_TEST(signal_only_ops_and_wait_until_all)
{
	struct all_args a = {.team = gice_team_world()};

	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_sym_counter_alloc(&a.c[i]), GICE_OK);
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_launch(str[i], signal_all_kernel, 1, &a, sizeof(a)), GICE_OK);
	sync_all(GICE_OK);
	for (int i = 0; i < NDEV; i++)
		for (int j = 0; j < NDEV; j++)
			ck_assert_uint_eq(gice_counter_read(dev[i], a.c[j]), 1);
}
END_TEST

struct set_args {
	gice_counter_t c[3];
	uint64_t values[3];
	int mode; /* 0 any, 1 some, 2 any over nothing included, 3 all_vector */
	struct set_result {
		int rc;
		size_t idx, count, indices[3];
	} *res;
};

static void set_kernel(gice_kctx_t *k, void *p)
{
	struct set_args *a = p;
	struct set_result *r = a->res;
	const int skip_first[3] = {1, 0, 0}, skip_all[3] = {1, 1, 1};

	switch (a->mode) {
	case 0:
		r->rc = gice_wait_until_any(k, a->c, 3, skip_first, GICE_CMP_GE, 1, 0, &r->idx);
		break;
	case 1:
		r->rc = gice_wait_until_some(k, a->c, 3, NULL, GICE_CMP_GE, 1, 0, r->indices, &r->count);
		break;
	case 2:
		r->rc = gice_wait_until_any(k, a->c, 3, skip_all, GICE_CMP_GE, 1, 0, &r->idx);
		break;
	default:
		r->rc = gice_wait_until_all_vector(k, a->c, 3, NULL, GICE_CMP_GE, a->values, 0);
	}
}

START_TEST(wait_until_any_some_and_all_vector)
{
	static struct set_result res;
	struct set_args a = {.res = &res};

	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(gice_counter_alloc(dev[0], &a.c[i]), GICE_OK);
	/* any, the first counter left out: setting it does not end the wait, the third does */
	a.mode = 0;
	memset(&res, 0xff, sizeof(res));
	ck_assert_int_eq(gice_counter_set(dev[0], a.c[0], 5), GICE_OK);
	ck_assert_int_eq(gice_launch(str[0], set_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_counter_set(dev[0], a.c[2], 1), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	ck_assert_int_eq(res.rc, GICE_OK);
	ck_assert_uint_eq(res.idx, 2);
	/* some: the first and the third hold */
	a.mode = 1;
	ck_assert_int_eq(gice_launch(str[0], set_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	ck_assert_int_eq(res.rc, GICE_OK);
	ck_assert_uint_eq(res.count, 2);
	ck_assert_uint_eq(res.indices[0], 0);
	ck_assert_uint_eq(res.indices[1], 2);
	/* any with every counter left out: nothing to wait for */
	a.mode = 2;
	ck_assert_int_eq(gice_launch(str[0], set_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	ck_assert_int_eq(res.rc, GICE_ERR_NOT_FOUND);
	ck_assert_uint_eq(res.idx, SIZE_MAX);
	/* all, each counter its own value */
	a.mode = 3;
	a.values[0] = 5;
	a.values[1] = 2;
	a.values[2] = 1;
	ck_assert_int_eq(gice_launch(str[0], set_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_counter_add(dev[0], a.c[1], 2), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	ck_assert_int_eq(res.rc, GICE_OK);
}
END_TEST

START_TEST(wait_until_any_ends_with_the_failure_of_a_counter)
{
	static struct set_result res;
	struct set_args a = {.res = &res, .mode = 1};
	gice_conn_t conn;
	void *src;
	uint64_t key;

	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(gice_counter_alloc(dev[0], &a.c[i]), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(dev[0], 64, &src), GICE_OK);
	ck_assert_int_eq(gice_mem_register(dev[0], src, 64, &key), GICE_OK);
	ck_assert_int_eq(gice_conn_open(dev[0], gice_device_id(dev[1]), NULL, &conn), GICE_OK);
	/* a put with a key the peer never gave: its completion (counter 1) records GICE_ERR_BAD_KEY */
	gice_op_t op = {.type = GICE_OP_PUT, .conn = conn, .local = src, .bytes = 64, .rkey = key ^ 0x5a5a,
			.signal = GICE_NO_COUNTER, .completion = a.c[1]};
	ck_assert_int_eq(gice_post(dev[0], &op), GICE_OK);
	ck_assert_int_eq(gice_launch(str[0], set_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_ERR_BAD_KEY); /* the kernel failed with it */
	ck_assert_int_eq(res.rc, GICE_ERR_BAD_KEY);
	ck_assert_int_eq(gice_device_quiet(dev[0], 0), GICE_ERR_BAD_KEY);
}
END_TEST

/* ---------------------------------------------------------------- counters from a kernel, reset */

struct reset_args {
	gice_counter_t t, x, t2, y, fired;
	int *tests; /* results of gice_signal_test */
};

static void reset_kernel(gice_kctx_t *k, void *p)
{
	struct reset_args *a = p;

	/* persistent descriptor on t (threshold 1, period 1): fires at 1, next threshold 2 */
	gice_trigger_add(k, a->t, 1);
	gice_wait_until(k, a->x, GICE_CMP_GE, 1, 0, NULL);
	gice_signal_reset(k, a->t); /* t = 0; the descriptor still waits for 2 */
	gice_trigger_add(k, a->t, 1); /* 1: nothing fires */
	gice_trigger_add(k, a->t, 1); /* 2: fires */
	gice_wait_until(k, a->x, GICE_CMP_GE, 2, 0, NULL);
	/* one-shot on t2 at 3: 2, reset, 2 never reach it; 1 more does */
	gice_trigger_add(k, a->t2, 2);
	gice_signal_reset(k, a->t2);
	gice_trigger_add(k, a->t2, 2);
	a->tests[0] = gice_signal_test(k, a->t2, GICE_CMP_EQ, 2);
	a->tests[1] = gice_signal_test(k, a->t2, GICE_CMP_GT, 2);
	a->tests[2] = (int)gice_signal_fetch(k, a->t2);
	gice_trigger_add(k, a->t2, 1);
	gice_wait_until(k, a->y, GICE_CMP_GE, 1, 0, NULL);
	a->tests[3] = gice_signal_reset(k, 0); /* CT 0's own counter: not the program's */
	a->tests[5] = gice_signal_reset(k, a->fired); /* the engine's: neither */
	a->tests[4] = (int)gice_signal_fetch(k, UINT32_MAX - 1);
}

START_TEST(reset_keeps_armed_thresholds)
{
	static int tests[6];
	struct reset_args a = {.tests = tests};
	gice_desc_t d1, d2;

	ck_assert_int_eq(gice_counter_alloc(dev[0], &a.t), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &a.x), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &a.t2), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &a.y), GICE_OK);
	/* the engine takes a counter per CT at open, after the CTs' reserved ones and before any of
	 * ours: the one just below our first is the last CT's */
	a.fired = a.t - 1;
	gice_op_t incx = {.type = GICE_OP_COUNTER_ADD, .value = 1, .signal = a.x, .completion = GICE_NO_COUNTER};
	gice_op_t incy = {.type = GICE_OP_COUNTER_ADD, .value = 1, .signal = a.y, .completion = GICE_NO_COUNTER};
	ck_assert_int_eq(gice_arm(dev[0], a.t, 1, 1, &incx, &d1), GICE_OK);
	ck_assert_int_eq(gice_arm(dev[0], a.t2, 3, 0, &incy, &d2), GICE_OK);
	ck_assert_int_eq(gice_launch(str[0], reset_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	ck_assert_int_eq(gice_device_quiet(dev[0], 0), GICE_OK);
	ck_assert_uint_eq(gice_counter_read(dev[0], a.x), 2); /* a rebased threshold would have fired at 1 too */
	ck_assert_uint_eq(gice_counter_read(dev[0], a.y), 1);
	ck_assert_uint_eq(gice_counter_read(dev[0], a.t2), 3);
	ck_assert_int_eq(tests[0], 1);
	ck_assert_int_eq(tests[1], 0);
	ck_assert_int_eq(tests[2], 2);
	ck_assert_int_eq(tests[3], GICE_ERR_INVALID);
	ck_assert_int_eq(tests[4], 0);
	ck_assert_int_eq(tests[5], GICE_ERR_INVALID);
	ck_assert_int_eq(gice_counter_reset(dev[0], a.fired), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_disarm(dev[0], d1), GICE_OK);
}
END_TEST

/* ---------------------------------------------------------------- quiet */

struct quiet_args {
	gice_conn_t conn;
	uint64_t bad_key, good_key;
	void *src;
	gice_counter_t trig, done;
	int *rc;
};

static void quiet_kernel(gice_kctx_t *k, void *p)
{
	struct quiet_args *a = p;

	gice_put(k, a->conn, a->bad_key, 0, a->src, 64, GICE_NO_COUNTER);
	gice_put(k, a->conn, a->good_key, 0, a->src, 64, GICE_NO_COUNTER);
	a->rc[0] = gice_quiet(k); /* the first failure since the last quiet */
	a->rc[1] = gice_quiet(k); /* none since */
	/* an armed put with the bad key, fired here: quiet covers it too */
	gice_trigger_add(k, a->trig, 1);
	gice_wait_until(k, a->done, GICE_CMP_GE, 1, 100000, NULL);
	a->rc[2] = gice_quiet(k);
}

START_TEST(quiet_reports_the_first_failure_of_issued_and_armed_operations)
{
	static int rc[3];
	struct quiet_args a = {.rc = rc};
	void *dst;
	gice_desc_t d;

	ck_assert_int_eq(gice_mem_alloc(dev[0], 64, &a.src), GICE_OK);
	ck_assert_int_eq(gice_mem_register(dev[0], a.src, 64, &a.bad_key), GICE_OK); /* a key of dev 0 */
	ck_assert_int_eq(gice_mem_alloc(dev[1], 64, &dst), GICE_OK);
	ck_assert_int_eq(gice_mem_register(dev[1], dst, 64, &a.good_key), GICE_OK);
	ck_assert_int_eq(gice_conn_open(dev[0], gice_device_id(dev[1]), NULL, &a.conn), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &a.trig), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &a.done), GICE_OK);
	a.bad_key ^= 1;
	gice_op_t put = {.type = GICE_OP_PUT, .conn = a.conn, .local = a.src, .bytes = 64, .rkey = a.bad_key,
			 .signal = GICE_NO_COUNTER, .completion = a.done};
	ck_assert_int_eq(gice_arm(dev[0], a.trig, 1, 0, &put, &d), GICE_OK);
	ck_assert_int_eq(gice_launch(str[0], quiet_kernel, 1, &a, sizeof(a)), GICE_OK);
	/* the failed quiet (and the failed wait) fail the kernel: its stream reports the first */
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_ERR_BAD_KEY);
	ck_assert_int_eq(rc[0], GICE_ERR_BAD_KEY);
	ck_assert_int_eq(rc[1], GICE_OK);
	ck_assert_int_eq(rc[2], GICE_ERR_BAD_KEY);
}
END_TEST

/* ---------------------------------------------------------------- the CT engine */

START_TEST(disarm_and_rearm_one_slot_again_and_again)
{
	gice_counter_t t, x;
	gice_desc_t d;

	ck_assert_int_eq(gice_counter_alloc(dev[0], &t), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(dev[0], &x), GICE_OK);
	gice_op_t inc = {.type = GICE_OP_COUNTER_ADD, .value = 1, .signal = x, .completion = GICE_NO_COUNTER};
	for (int i = 0; i < 2000; i++) {
		/* the slot the CT has just disarmed is taken again at once, on another trigger */
		ck_assert_int_eq(gice_arm(dev[0], i % 2 ? t : x, 1000000, 0, &inc, &d), GICE_OK);
		ck_assert_int_eq(gice_disarm(dev[0], d), GICE_OK);
	}
	ck_assert_int_eq(gice_disarm(dev[0], d), GICE_ERR_NOT_FOUND);
}
END_TEST

int main(void)
{
	struct sym_case cases[] = {
		{"signal_wait_all", signal_only_ops_and_wait_until_all, 1, setup, NULL},
		{"wait_sets", wait_until_any_some_and_all_vector, 1, setup, NULL},
		{"wait_set_failure", wait_until_any_ends_with_the_failure_of_a_counter, 1, setup, NULL},
		{"reset", reset_keeps_armed_thresholds, 1, setup, NULL},
		{"quiet", quiet_reports_the_first_failure_of_issued_and_armed_operations, 1, setup, NULL},
		{"disarm_rearm", disarm_and_rearm_one_slot_again_and_again, 1, open_devices, NULL},
	};

	return test_run_suite(sym_suite("sym_signal", cases, sizeof(cases) / sizeof(cases[0])));
}
