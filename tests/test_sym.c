/* Description: symmetric memory, symmetric counters, teams and the device calls built on them
 * (issue 10): puts, gets and signal-only operations named by (team rank, heap offset) with no
 * key exchanged by the program, between 4 devices of one process and between 3 processes;
 * wait_until_all/any/some; signal fetch/test/reset and what a reset does to armed descriptors;
 * team split (strided, by color and key), rank translation and the dissemination team barrier;
 * the grid barrier of one launch; quiet reporting the first failure, of a kernel's operation and
 * of an armed one; the exact errors of a bad team rank, an offset outside the heap, bad
 * allocations and splits; and arming and disarming one descriptor slot over and over (the
 * disarm/re-arm race that ThreadSanitizer saw in the CT engine). */
#include <check.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/gice.h"
#include "tests/test_job.h"

#define NDEV 4
#define HEAP (1u << 20)

static gice_device_t *dev[NDEV];
static gice_stream_t *str[NDEV];

static void open_devices(void)
{
	ck_assert_int_eq(gice_init(), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		gice_device_attr_t a = {.n_sms = 4, .n_cts = 2, .hbm_bytes = 16u << 20};
		ck_assert_int_eq(gice_device_open(&a, &dev[i]), GICE_OK);
		ck_assert_int_eq(gice_stream_create(dev[i], &str[i]), GICE_OK);
	}
}

static void setup(void)
{
	open_devices();
	ck_assert_int_eq(gice_sym_init(HEAP), GICE_OK);
}

static void teardown(void)
{
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_stream_destroy(str[i]), GICE_OK);
	gice_sym_fini(); /* GICE_ERR_INVALID in the cases that never initialised it */
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_device_close(dev[i]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

/* What gice logs (stderr) between capture_begin and capture_end, into text. */
static int saved_stderr = -1;
static char capture_path[] = "/tmp/gice-sym-log-XXXXXX";

static void capture_begin(void)
{
	memcpy(capture_path + sizeof(capture_path) - 7, "XXXXXX", 6); /* mkstemp filled it last time */
	int fd = mkstemp(capture_path);

	ck_assert_int_ge(fd, 0);
	fflush(stderr);
	saved_stderr = dup(2);
	ck_assert_int_ge(dup2(fd, 2), 0);
	close(fd);
}

static void capture_end(char *text, size_t len)
{
	FILE *f;
	size_t n;

	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	f = fopen(capture_path, "r");
	ck_assert_ptr_nonnull(f);
	n = fread(text, 1, len - 1, f);
	text[n] = 0;
	fclose(f);
	unlink(capture_path);
}

#define ASSERT_LOGGED(text, what) ck_assert_msg(strstr(text, what), "not logged: %s\nlogged: %s", what, text)

static void sync_all(int expect)
{
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_stream_sync(str[i], 0), expect);
}

/* ---------------------------------------------------------------- symmetric put, get, signal */

struct ring_args {
	gice_team_t *team;
	uint64_t src, dst, back; /* heap offsets */
	size_t bytes;
	gice_counter_t sig, done;
};

/* To the right neighbour's dst, with a signal; then back from its src into back. */
static void ring_kernel(gice_kctx_t *k, void *p)
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

static uint8_t pat(uint32_t rank, size_t i) { return (uint8_t)(i * 7 + rank * 13 + 1); }

START_TEST(sym_put_signal_and_get_around_a_ring_of_four_devices)
{
	static const size_t sizes[] = {1000, 100000};
	struct ring_args a = {.team = gice_team_world(), .bytes = sizes[_i]};

	ck_assert_ptr_nonnull(a.team);
	ck_assert_uint_eq(gice_team_size(a.team), NDEV);
	ck_assert_int_eq(gice_sym_alloc(a.bytes, &a.src), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(a.bytes, &a.dst), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(a.bytes, &a.back), GICE_OK);
	ck_assert_int_eq(gice_sym_counter_alloc(&a.sig), GICE_OK);
	ck_assert_int_eq(gice_sym_counter_alloc(&a.done), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		ck_assert_int_eq(gice_team_rank(a.team, dev[i]), i);
		uint8_t *s = gice_sym_ptr(dev[i], a.src);
		for (size_t j = 0; j < a.bytes; j++)
			s[j] = pat((uint32_t)i, j);
	}
	for (int i = 0; i < NDEV; i++)
		ck_assert_int_eq(gice_launch(str[i], ring_kernel, 1, &a, sizeof(a)), GICE_OK);
	sync_all(GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		uint32_t left = (uint32_t)(i + NDEV - 1) % NDEV, right = (uint32_t)(i + 1) % NDEV;
		const uint8_t *d = gice_sym_ptr(dev[i], a.dst), *b = gice_sym_ptr(dev[i], a.back);
		for (size_t j = 0; j < a.bytes; j++) {
			ck_assert_msg(d[j] == pat(left, j), "device %d byte %zu from the left", i, j);
			ck_assert_msg(b[j] == pat(right, j), "device %d byte %zu got from the right", i, j);
		}
		ck_assert_uint_eq(gice_counter_read(dev[i], a.sig), 1);
	}
}
END_TEST

START_TEST(sym_alloc_gives_the_same_offsets_and_counter_ids_everywhere)
{
	uint64_t o1, o2, o3;
	gice_counter_t c1, c2, plain;

	ck_assert_int_eq(gice_sym_alloc(100, &o1), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(5000, &o2), GICE_OK);
	ck_assert_uint_eq(o1, 0);
	ck_assert_uint_eq(o2, 256); /* 256-byte aligned, first fit */
	ck_assert_int_eq(gice_sym_free(o1), GICE_OK);
	ck_assert_int_eq(gice_sym_alloc(200, &o3), GICE_OK);
	ck_assert_uint_eq(o3, 0); /* the hole is reused */
	ck_assert_int_eq(gice_sym_counter_alloc(&c1), GICE_OK);
	ck_assert_int_eq(gice_sym_counter_alloc(&c2), GICE_OK);
	ck_assert_uint_ne(c1, c2);
	for (int i = 0; i < NDEV; i++) {
		gice_counter_state_t st;
		ck_assert_int_eq(gice_counter_get(dev[i], c1, &st), GICE_OK);
		ck_assert_uint_eq(st.value, 0);
		ck_assert_ptr_eq(gice_sym_ptr(dev[i], o2), (uint8_t *)gice_sym_ptr(dev[i], 0) + 256);
		/* a plain counter is never one of the symmetric ids */
		ck_assert_int_eq(gice_counter_alloc(dev[i], &plain), GICE_OK);
		ck_assert_uint_ne(plain, c1);
		ck_assert_uint_ne(plain, c2);
	}
	ck_assert_int_eq(gice_sym_counter_free(c1), GICE_OK);
	ck_assert_ptr_null(gice_sym_ptr(dev[0], HEAP));
	ck_assert_uint_eq(gice_sym_heap_bytes(), HEAP);
}
END_TEST

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

static void allreduce_kernel(gice_kctx_t *k, void *p)
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
static int allreduce_check(gice_device_t *const *devs, gice_stream_t *const *strs, int n_local, size_t count)
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

START_TEST(a_ring_allreduce_written_with_symmetric_puts_and_signals)
{
	ck_assert_int_eq(allreduce_check(dev, str, NDEV, NDEV * 3000), 0);
}
END_TEST

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

/* ---------------------------------------------------------------- negative cases */

struct neg_args {
	gice_team_t *team;
	gice_counter_t done;
	int *rc;
};

static void neg_kernel(gice_kctx_t *k, void *p)
{
	struct neg_args *a = p;
	void *src = gice_sym_ptr(k->dev, 0);

	a->rc[0] = gice_sym_put(k, a->team, NDEV, 0, src, 8, a->done);
	a->rc[1] = gice_sym_put(k, a->team, 1, HEAP - 10, src, 100, GICE_NO_COUNTER);
	a->rc[2] = gice_sym_get(k, a->team, 1, src, HEAP, 1, GICE_NO_COUNTER);
	a->rc[3] = gice_sym_signal(k, a->team, 7, 0, 1, 0, GICE_NO_COUNTER);
	a->rc[4] = gice_sym_put(k, NULL, 0, 0, src, 8, GICE_NO_COUNTER);
	a->rc[5] = gice_sym_peer_ptr(k, a->team, 1, HEAP - 4, 8) == NULL;
	a->rc[6] = gice_sym_peer_ptr(k, a->team, 1, 64, 8) == (uint8_t *)gice_sym_ptr(dev[1], 64);
	a->rc[7] = gice_sym_fence(k, a->team, 9);
}

START_TEST(bad_team_rank_and_offset_outside_the_heap_fail_exactly)
{
	static int rc[8];
	struct neg_args a = {.team = gice_team_world(), .rc = rc};
	gice_counter_state_t st;

	static char text[8192];

	ck_assert_int_eq(gice_counter_alloc(dev[0], &a.done), GICE_OK);
	capture_begin();
	ck_assert_int_eq(gice_launch(str[0], neg_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	capture_end(text, sizeof(text));
	ASSERT_LOGGED(text, "gice_sym_put on device 0: team rank 4 out of range (team of 4)");
	ASSERT_LOGGED(text, "gice_sym_put on device 0: offset 1048566 + 100 bytes outside the 1048576-byte symmetric heap");
	ASSERT_LOGGED(text, "gice_sym_get on device 0: offset 1048576 + 1 bytes outside the 1048576-byte symmetric heap");
	ASSERT_LOGGED(text, "gice_sym_signal on device 0: team rank 7 out of range (team of 4)");
	ASSERT_LOGGED(text, "gice_sym_put on device 0: no team");
	ck_assert_int_eq(rc[0], GICE_ERR_INVALID);
	ck_assert_int_eq(rc[1], GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(rc[2], GICE_ERR_OUT_OF_BOUNDS);
	ck_assert_int_eq(rc[3], GICE_ERR_INVALID);
	ck_assert_int_eq(rc[4], GICE_ERR_INVALID);
	ck_assert_int_eq(rc[5], 1);
	ck_assert_int_eq(rc[6], 1);
	ck_assert_int_eq(rc[7], GICE_ERR_INVALID);
	/* the completion records the error the call returned */
	ck_assert_int_eq(gice_counter_get(dev[0], a.done, &st), GICE_OK);
	ck_assert_int_eq(st.status, GICE_ERR_INVALID);
	ck_assert_uint_eq(st.fail, 1);
}
END_TEST

START_TEST(bad_allocations_and_splits_fail_exactly)
{
	uint64_t off;
	gice_team_t *t;

	static char text[8192];

	capture_begin();
	ck_assert_int_eq(gice_sym_alloc(0, &off), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_sym_alloc(HEAP + 1, &off), GICE_ERR_NO_MEMORY);
	capture_end(text, sizeof(text));
	ASSERT_LOGGED(text, "gice_sym_alloc of 0 bytes: empty");
	ASSERT_LOGGED(text, "gice_sym_alloc of 1048577 bytes: no room in the 1048576-byte symmetric heap (largest hole 1048576)");
	ck_assert_int_eq(gice_sym_free(12345), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_sym_init(HEAP), GICE_ERR_INVALID); /* already */
	capture_begin();
	ck_assert_int_eq(gice_team_split_strided(gice_team_world(), 2, 2, 2, &t), GICE_ERR_INVALID);
	capture_end(text, sizeof(text));
	ASSERT_LOGGED(text, "gice_team_split_strided(start 2, stride 2, size 2): rank 4 is past the parent's 4 ranks");
	ck_assert_int_eq(gice_team_split_strided(gice_team_world(), 0, 0, 2, &t), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_team_destroy(gice_team_world()), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_sym_fini(), GICE_OK);
	ck_assert_int_eq(gice_sym_fini(), GICE_ERR_INVALID);
	ck_assert_ptr_null(gice_team_world());
	ck_assert_int_eq(gice_sym_alloc(64, &off), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_sym_counter_alloc(&(gice_counter_t){0}), GICE_ERR_INVALID);
	ck_assert_ptr_null(gice_sym_ptr(dev[0], 0));
}
END_TEST

/* A communication pool of 2 MiB: the heap comes out of it, and one larger than it does not fit. */
static void open_devices_comm_pool(void)
{
	setenv("GICE_COMM_POOL_BYTES", "2m", 1);
	open_devices();
}

START_TEST(the_heap_comes_from_the_communication_pool)
{
	gice_pool_usage_t u;

	ck_assert_int_eq(gice_sym_init(4u << 20), GICE_ERR_NO_MEMORY);
	ck_assert_ptr_null(gice_team_world());
	ck_assert_int_eq(gice_sym_init(HEAP), GICE_OK);
	for (int i = 0; i < NDEV; i++) {
		ck_assert_int_eq(gice_pool_usage(dev[i], GICE_POOL_COMM, &u), GICE_OK);
		ck_assert_uint_eq(u.bytes, 2u << 20);
		ck_assert_uint_ge(u.used, HEAP);
		ck_assert_int_eq(gice_pool_usage(dev[i], GICE_POOL_COMPUTE, &u), GICE_OK);
		ck_assert_uint_lt(u.used, HEAP);
	}
}
END_TEST

/* ---------------------------------------------------------------- teams */

START_TEST(split_strided_and_by_color_with_rank_translation)
{
	gice_team_t *w = gice_team_world(), *s, *c[NDEV];
	const int colors[NDEV] = {0, 1, 0, GICE_TEAM_NO_COLOR}, keys[NDEV] = {0, 5, -2, 0};

	ck_assert_int_eq(gice_team_split_strided(w, 1, 2, 2, &s), GICE_OK);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(gice_team_size(s), 2);
	ck_assert_int_eq(gice_team_rank(s, dev[1]), 0);
	ck_assert_int_eq(gice_team_rank(s, dev[3]), 1);
	ck_assert_int_eq(gice_team_rank(s, dev[0]), -1);
	ck_assert_int_eq(gice_team_translate_rank(s, 1, w), 3);
	ck_assert_int_eq(gice_team_translate_rank(w, 2, s), -1);
	ck_assert_int_eq(gice_team_translate_rank(w, 9, s), -1);
	ck_assert_uint_eq(gice_team_device_id(s, 1), gice_device_id(dev[3]));
	ck_assert_uint_eq(gice_team_device_id(s, 2), UINT32_MAX);
	ck_assert_uint_eq(gice_team_n_local(s), 2);
	ck_assert_ptr_eq(gice_team_local(s, 1), dev[3]);

	ck_assert_uint_eq(gice_team_n_local(w), NDEV);
	ck_assert_int_eq(gice_team_split(w, colors, keys, c), GICE_OK);
	ck_assert_ptr_nonnull(c[0]);
	ck_assert_ptr_eq(c[0], c[2]);
	ck_assert_ptr_nonnull(c[1]);
	ck_assert_ptr_ne(c[0], c[1]);
	ck_assert_ptr_null(c[3]);
	ck_assert_uint_eq(gice_team_size(c[0]), 2);
	ck_assert_int_eq(gice_team_rank(c[0], dev[2]), 0); /* key -2 before key 0 */
	ck_assert_int_eq(gice_team_rank(c[0], dev[0]), 1);
	ck_assert_uint_eq(gice_team_size(c[1]), 1);
	ck_assert_int_eq(gice_team_translate_rank(c[0], 0, s), -1);
	ck_assert_int_eq(gice_team_translate_rank(c[1], 0, s), 0);
	ck_assert_int_eq(gice_team_destroy(s), GICE_OK);
	ck_assert_int_eq(gice_team_destroy(c[0]), GICE_OK);
	ck_assert_int_eq(gice_team_destroy(c[1]), GICE_OK);
}
END_TEST

#define BAR_ITERS 50
static _Atomic uint32_t bar_slot[NDEV];

struct bar_args {
	gice_team_t *team;
	int sync_only;
};

/* Each iteration: publish it, barrier, every member must have published it. */
static void barrier_kernel(gice_kctx_t *k, void *p)
{
	struct bar_args *a = p;
	uint32_t n = gice_team_size(a->team);

	for (uint32_t it = 1; it <= BAR_ITERS; it++) {
		atomic_store(&bar_slot[gice_team_rank(a->team, k->dev)], it);
		if ((a->sync_only ? gice_team_sync(k, a->team) : gice_team_barrier(k, a->team)))
			return;
		for (uint32_t r = 0; r < n; r++)
			if (atomic_load(&bar_slot[r]) < it) {
				gice_kernel_fail(k, GICE_ERR_INVALID, "a member was behind after the barrier");
				return;
			}
	}
}

START_TEST(team_barrier_holds_every_member_back)
{
	gice_team_t *teams[3] = {gice_team_world()}, *c[NDEV];
	const int colors[NDEV] = {0, 1, 1, 1}, keys[NDEV] = {0};

	/* the world (4: 2 rounds), a team of 3 (2 rounds, not a power of two), a team of 1 */
	ck_assert_int_eq(gice_team_split(teams[0], colors, keys, c), GICE_OK);
	teams[1] = c[1];
	teams[2] = c[0];
	for (int t = 0; t < 3; t++)
		for (int sync_only = 0; sync_only < 2; sync_only++) {
			struct bar_args a = {.team = teams[t], .sync_only = sync_only};
			for (int i = 0; i < NDEV; i++)
				atomic_store(&bar_slot[i], 0);
			for (int i = 0; i < NDEV; i++)
				if (gice_team_rank(teams[t], dev[i]) >= 0)
					ck_assert_int_eq(gice_launch(str[i], barrier_kernel, 1, &a, sizeof(a)), GICE_OK);
			sync_all(GICE_OK);
		}
}
END_TEST

struct nonmember_args {
	gice_team_t *team;
	int *rc;
};

static void nonmember_kernel(gice_kctx_t *k, void *p)
{
	struct nonmember_args *a = p;

	a->rc[0] = gice_team_barrier(k, a->team);
}

START_TEST(team_barrier_from_a_device_not_in_the_team_fails)
{
	static int rc[1];
	gice_team_t *s;

	ck_assert_int_eq(gice_team_split_strided(gice_team_world(), 1, 1, 2, &s), GICE_OK);
	struct nonmember_args a = {.team = s, .rc = rc};
	ck_assert_int_eq(gice_launch(str[0], nonmember_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_ERR_INVALID);
	ck_assert_int_eq(rc[0], GICE_ERR_INVALID);
}
END_TEST

/* ---------------------------------------------------------------- grid barrier */

static _Atomic uint32_t grid_count;

static void grid_kernel(gice_kctx_t *k, void *p)
{
	(void)p;
	for (uint32_t it = 1; it <= 100; it++) {
		atomic_fetch_add(&grid_count, 1);
		if (gice_grid_sync(k))
			return;
		if (atomic_load(&grid_count) < it * k->nblocks) {
			gice_kernel_fail(k, GICE_ERR_INVALID, "a block was behind after gice_grid_sync");
			return;
		}
	}
}

START_TEST(grid_sync_holds_every_block_of_a_cooperative_launch)
{
	uint32_t sms;

	ck_assert_int_eq(gice_device_sms(dev[0], &sms), GICE_OK);
	atomic_store(&grid_count, 0);
	ck_assert_int_eq(gice_launch_cooperative(str[0], grid_kernel, sms, NULL, 0), GICE_OK);
	ck_assert_int_eq(gice_launch_cooperative(str[0], grid_kernel, sms, NULL, 0), GICE_OK); /* record reused */
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_OK);
	ck_assert_uint_eq(atomic_load(&grid_count), 200 * sms);
}
END_TEST

static void early_return_kernel(gice_kctx_t *k, void *p)
{
	(void)p;
	if (k->block == 0)
		gice_grid_sync(k);
}

/* No NVLink plane: team barriers signal through the fabric. */
static void setup_net(void)
{
	setenv("GICE_PLANE", "net", 1);
	setup();
}

/* One device and a short stall timeout (a loaded machine's watchdog still sees its CTs move). */
static void setup_short_timeout(void)
{
	setenv("GICE_TIMEOUT_MS", "1000", 1);
	ck_assert_int_eq(gice_init(), GICE_OK);
	gice_device_attr_t a = {.n_sms = 2, .n_cts = 1, .hbm_bytes = 16u << 20};
	ck_assert_int_eq(gice_device_open(&a, &dev[0]), GICE_OK);
	ck_assert_int_eq(gice_stream_create(dev[0], &str[0]), GICE_OK);
}

static void teardown_one(void)
{
	ck_assert_int_eq(gice_stream_destroy(str[0]), GICE_OK);
	ck_assert_int_eq(gice_device_close(dev[0]), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

START_TEST(grid_sync_with_a_block_that_returned_times_out)
{
	ck_assert_int_eq(gice_launch_cooperative(str[0], early_return_kernel, 2, NULL, 0), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str[0], 0), GICE_ERR_TIMED_OUT);
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
	char text[4096] = {0};
	FILE *f = fopen(log, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	unlink(log);
	text[n] = 0;
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
	Suite *s = suite_create("sym");
	struct {
		const char *name;
		const TTest *test;
		int loops;
		void (*setup)(void);
		void (*teardown)(void);
	} cases[] = {
		{"sym_ring", sym_put_signal_and_get_around_a_ring_of_four_devices, 2, setup, NULL},
		{"allreduce", a_ring_allreduce_written_with_symmetric_puts_and_signals, 1, setup, NULL},
		{"sym_alloc", sym_alloc_gives_the_same_offsets_and_counter_ids_everywhere, 1, setup, NULL},
		{"signal_wait_all", signal_only_ops_and_wait_until_all, 1, setup, NULL},
		{"wait_sets", wait_until_any_some_and_all_vector, 1, setup, NULL},
		{"wait_set_failure", wait_until_any_ends_with_the_failure_of_a_counter, 1, setup, NULL},
		{"reset", reset_keeps_armed_thresholds, 1, setup, NULL},
		{"quiet", quiet_reports_the_first_failure_of_issued_and_armed_operations, 1, setup, NULL},
		{"negative_device", bad_team_rank_and_offset_outside_the_heap_fail_exactly, 1, setup, NULL},
		{"negative_host", bad_allocations_and_splits_fail_exactly, 1, setup, NULL},
		{"comm_pool", the_heap_comes_from_the_communication_pool, 1, open_devices_comm_pool, NULL},
		{"team_split", split_strided_and_by_color_with_rank_translation, 1, setup, NULL},
		{"team_barrier", team_barrier_holds_every_member_back, 1, setup, NULL},
		{"team_barrier_net", team_barrier_holds_every_member_back, 1, setup_net, NULL},
		{"team_nonmember", team_barrier_from_a_device_not_in_the_team_fails, 1, setup, NULL},
		{"grid_sync", grid_sync_holds_every_block_of_a_cooperative_launch, 1, setup, NULL},
		{"grid_sync_timeout", grid_sync_with_a_block_that_returned_times_out, 1, setup_short_timeout, teardown_one},
		{"disarm_rearm", disarm_and_rearm_one_slot_again_and_again, 1, open_devices, NULL},
		{"multiproc", three_processes_symmetric_ring_barriers_and_split, 4, NULL, NULL},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_set_timeout(tc, 120);
		if (cases[i].setup)
			tcase_add_checked_fixture(tc, cases[i].setup, cases[i].teardown ? cases[i].teardown : teardown);
		tcase_add_loop_test(tc, cases[i].test, 0, cases[i].loops);
		suite_add_tcase(s, tc);
	}
	return s;
}

/* `test_sym job` is one rank of the cross-process job above, started by a launcher (gicerun,
 * which sets GICE_RANK and GICE_WORLD_SIZE): test_netns.sh runs it across network namespaces. */
int main(int argc, char **argv) { return test_main_or_job(argc, argv, job_plain, suite); }
