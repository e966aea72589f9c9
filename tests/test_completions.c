/* Description: completions that cannot stall — link configurations that cannot deadlock, and
 * failures that reach the initiator's completion counter.
 * - link: every valid (GICE_CT_CREDITS, GICE_CT_ACK_EVERY) pair moves puts bit-exact, including
 *   a window smaller than the ack interval and a window of one packet; a sender whose window is
 *   smaller than the receiver assumes still gets its ACKs (delayed ack);
 * - signals: a put (one packet, many packets, rendezvous by copy or by remote read) whose signal
 *   names an in-range counter the target has not allocated fails with GICE_ERR_NOT_FOUND, writes
 *   nothing and leaves the counter alone;
 * - immediate errors: a device call or gice_post that fails before its request is queued (e.g. a
 *   put from host memory) returns the status and records it in its completion counter, so a
 *   waiter sees it at once.
 * Every case runs in its own forked process (Check's default), so each sets its environment
 * before gice_init. Time bounds scale with CK_TIMEOUT_MULTIPLIER (sanitizer runs). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/gice.h"
#include "tests/test_util.h"
#include "emu/triggermem/triggermem.h"

#define MIB (1024u * 1024u)

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}


static uint8_t pat(uint32_t op, size_t i) { return (uint8_t)((op * 2654435761u) >> 13 ^ (uint32_t)(i * 131u + op)); }

/* ---------------------------------------------------------------- two devices, one process */

#define BUF (4 * MIB)
#define TGT (2 * MIB)

static gice_device_t *A, *B;
static uint8_t *abuf, *bbuf;
static uint64_t akey, bkey;
static gice_conn_t ab;

static void open_dev(gice_device_t **d, uint8_t **buf, uint64_t *key)
{
	gice_device_attr_t at = {.n_sms = 2, .n_cts = 2, .hbm_bytes = BUF + 4 * MIB};
	void *p;

	ck_assert_int_eq(gice_device_open(&at, d), GICE_OK);
	ck_assert_int_eq(gice_mem_alloc(*d, BUF, &p), GICE_OK);
	*buf = p;
	memset(*buf, 0, BUF);
	ck_assert_int_eq(gice_mem_register(*d, *buf, BUF, key), GICE_OK);
}

static void pair_open(void)
{
	ck_assert_int_eq(gice_init(), GICE_OK);
	open_dev(&A, &abuf, &akey);
	open_dev(&B, &bbuf, &bkey);
	ck_assert_int_eq(gice_conn_open(A, gice_device_id(B), NULL, &ab), GICE_OK);
}

static void pair_close(void)
{
	ck_assert_int_eq(gice_device_close(A), GICE_OK);
	ck_assert_int_eq(gice_device_close(B), GICE_OK);
	ck_assert_int_eq(gice_finalize(), GICE_OK);
}

/* every byte as packets through libfabric, and a stall fails within 2 s instead of hanging */
static void packets_env(void)
{
	setenv("GICE_PLANE", "net", 1);
	setenv("GICE_CT_RNDV_BYTES", "0", 1);
	setenv("GICE_TIMEOUT_MS", "2000", 1);
}

/* A put of len bytes from A to B lands bit-exact and completes OK, well before the timeout. */
static void put_and_check(uint32_t tag, size_t len)
{
	gice_counter_t done;
	uint64_t t0 = now_ms();

	ck_assert_int_eq(gice_counter_alloc(A, &done), GICE_OK);
	for (size_t j = 0; j < len; j++)
		abuf[j] = pat(tag, j);
	memset(bbuf + TGT, 0, len + 1);
	gice_op_t op = {.type = GICE_OP_PUT, .conn = ab, .local = abuf, .bytes = len, .rkey = bkey, .roff = TGT,
			.signal = GICE_NO_COUNTER, .completion = done};
	ck_assert_int_eq(gice_post(A, &op), GICE_OK);
	int rc = gice_counter_wait(A, done, GICE_CMP_GE, 1, test_scaled(10000), NULL);
	ck_assert_msg(rc == GICE_OK, "put of %zu bytes: %s after %llu ms", len, gice_status_name(rc),
		      (unsigned long long)(now_ms() - t0));
	for (size_t j = 0; j < len; j++)
		if (bbuf[TGT + j] != pat(tag, j))
			ck_abort_msg("put of %zu bytes: byte %zu is 0x%02x, expected 0x%02x", len, j, bbuf[TGT + j],
				     pat(tag, j));
	ck_assert_uint_eq(bbuf[TGT + len], 0);
	ck_assert_int_eq(gice_counter_free(A, done), GICE_OK);
}

/* ---------------------------------------------------------------- link configuration */

/* GICE_CT_CREDITS 8 < GICE_CT_ACK_EVERY 16: the sender's window closes after 8 packets of a
 * 15-packet put; the receiver must acknowledge before its ack interval runs out. */
START_TEST(credits_below_ack_every_moves_a_60000_byte_put)
{
	packets_env();
	setenv("GICE_CT_CREDITS", "8", 1);
	setenv("GICE_CT_ACK_EVERY", "16", 1);
	pair_open();
	for (uint32_t i = 0; i < 5; i++)
		put_and_check(i, 60000);
	pair_close();
}
END_TEST

static const struct {
	const char *credits, *ack_every;
} pairs[] = {{"1", "1"}, {"1", "16"}, {"2", "16"}, {"3", "7"}, {"16", "16"}, {"17", "512"}, {"1024", "1"},
	     {"1024", "512"}};

/* Each pair moves puts of 1 byte, one packet, a few packets and many packets. */
START_TEST(credit_and_ack_every_sweep_moves_bytes)
{
	static const size_t sizes[] = {1, 4000, 4001, 60000, 1000000};

	packets_env();
	setenv("GICE_CT_CREDITS", pairs[_i].credits, 1);
	setenv("GICE_CT_ACK_EVERY", pairs[_i].ack_every, 1);
	pair_open();
	for (uint32_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		put_and_check(i, sizes[i]);
	pair_close();
}
END_TEST

/* The window is the sender's setting, the ack interval the receiver's (two processes may differ):
 * a sender with 4 credits towards a receiver that assumes 128 (so acks every 16) gets its ACKs
 * from the receiver's delayed-ack timer. */
START_TEST(sender_window_smaller_than_receiver_assumes_gets_delayed_acks)
{
	packets_env();
	ck_assert_int_eq(gice_init(), GICE_OK);
	setenv("GICE_CT_CREDITS", "4", 1);
	open_dev(&A, &abuf, &akey);
	setenv("GICE_CT_CREDITS", "128", 1);
	setenv("GICE_CT_ACK_EVERY", "16", 1);
	open_dev(&B, &bbuf, &bkey);
	ck_assert_int_eq(gice_conn_open(A, gice_device_id(B), NULL, &ab), GICE_OK);
	put_and_check(1, 60000);
	put_and_check(2, 1000000);
	pair_close();
}
END_TEST

/* ---------------------------------------------------------------- signals */

/* The wire paths that take a signal: a one-packet PUT, a many-packet PUT (strong signal), a
 * PUT_RTS whose bytes the target copies on the NVLink plane, and one it reads with fi_read. */
static const struct {
	const char *name, *plane, *rndv;
	size_t len;
	int strong;
} sig_paths[] = {
	{"one-packet put", "net", "0", 1000, 0},
	{"many-packet put, strong signal", "net", "0", 60000, 1},
	{"rendezvous put, NVLink plane copy", "auto", "65536", 256 * 1024, 0},
	{"rendezvous put, remote read", "net", "65536", 256 * 1024, 1},
};

#define NCOUNTERS 256

/* A put whose signal names a counter of the target that is in range but not allocated (never,
 * or freed) fails its completion with exactly GICE_ERR_NOT_FOUND: nothing is written, the
 * counter is untouched and the target sent a NACK, counted in its rx_bad_signal. A good signal
 * then still works. */
START_TEST(put_signal_to_an_unallocated_counter_is_rejected_and_writes_nothing)
{
	char n[16];
	gice_counter_t done, freed, good;
	gice_counter_state_t st;
	gice_stats_t before, after;
	size_t len = sig_paths[_i].len;

	snprintf(n, sizeof(n), "%u", NCOUNTERS);
	setenv("GICE_COUNTERS", n, 1);
	setenv("GICE_PLANE", sig_paths[_i].plane, 1);
	setenv("GICE_CT_RNDV_BYTES", sig_paths[_i].rndv, 1);
	pair_open();
	ck_assert_int_eq(gice_counter_alloc(A, &done), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &good), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(B, &freed), GICE_OK);
	ck_assert_int_eq(gice_counter_free(B, freed), GICE_OK);
	for (size_t j = 0; j < len; j++)
		abuf[j] = pat(3, j);
	const gice_counter_t bad[] = {NCOUNTERS - 1 /* never allocated */, freed};
	for (uint32_t i = 0; i < 2; i++) {
		ck_assert_uint_ne(bad[i], good);
		memset(bbuf + TGT, 0x5a, len);
		ck_assert_int_eq(gice_device_stats(B, &before), GICE_OK);
		gice_op_t op = {.type = GICE_OP_PUT, .conn = ab, .local = abuf, .bytes = len, .rkey = bkey, .roff = TGT,
				.value = 5, .signal = bad[i],
				.signal_flags = GICE_SIGNAL_ADD | (sig_paths[_i].strong ? GICE_SIGNAL_STRONG : 0),
				.completion = done};
		ck_assert_int_eq(gice_post(A, &op), GICE_OK);
		ck_assert_int_eq(gice_counter_wait(A, done, GICE_CMP_GE, 1, test_scaled(5000), NULL), GICE_ERR_NOT_FOUND);
		ck_assert_int_eq(gice_counter_get(A, done, &st), GICE_OK);
		ck_assert_uint_eq(st.fail, 1);
		ck_assert_uint_eq(st.value, 0);
		ck_assert_int_eq(st.status, GICE_ERR_NOT_FOUND);
		ck_assert_int_eq(gice_counter_get(B, bad[i], &st), GICE_OK);
		ck_assert_uint_eq(st.value, 0);
		ck_assert_uint_eq(st.fail, 0);
		for (size_t j = 0; j < len; j++)
			if (bbuf[TGT + j] != 0x5a)
				ck_abort_msg("%s: byte %zu written (0x%02x)", sig_paths[_i].name, j, bbuf[TGT + j]);
		ck_assert_int_eq(gice_device_stats(B, &after), GICE_OK);
		ck_assert_uint_eq(after.nacks_sent, before.nacks_sent + 1);
		ck_assert_uint_eq(after.rx_bad_signal, before.rx_bad_signal + 1);
		ck_assert_int_eq(gice_counter_reset(A, done), GICE_OK);
	}
	/* the same put to an allocated counter lands, and signals */
	gice_op_t op = {.type = GICE_OP_PUT, .conn = ab, .local = abuf, .bytes = len, .rkey = bkey, .roff = TGT,
			.value = 5, .signal = good, .signal_flags = GICE_SIGNAL_ADD, .completion = done};
	ck_assert_int_eq(gice_post(A, &op), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(A, done, GICE_CMP_GE, 1, test_scaled(5000), NULL), GICE_OK);
	ck_assert_int_eq(gice_counter_wait(B, good, GICE_CMP_GE, 5, test_scaled(5000), NULL), GICE_OK);
	ck_assert_int_eq(memcmp(bbuf + TGT, abuf, len), 0);
	pair_close();
}
END_TEST

/* The query the target's CT uses: reserved ids are in use, a free or out-of-range id is not,
 * alloc and free show at once, and a process that attached the region cannot tell. */
START_TEST(triggermem_tells_whether_a_counter_is_allocated)
{
	tm_layout_t l = {.n_counters = 128, .n_cts = 2, .queue_depth = 16};
	tm_region_t *r, *att;
	uint32_t id;

	ck_assert_int_eq(tm_region_create(&l, "completions", &r), GICE_OK);
	ck_assert_int_eq(tm_counter_allocated(r, 0), 1);
	ck_assert_int_eq(tm_counter_allocated(r, 1), 1);
	ck_assert_int_eq(tm_counter_allocated(r, 2), 0);
	ck_assert_int_eq(tm_counter_allocated(r, 127), 0);
	ck_assert_int_eq(tm_counter_allocated(r, 128), 0);
	ck_assert_int_eq(tm_counter_allocated(r, UINT32_MAX), 0);
	ck_assert_int_eq(tm_counter_alloc(r, &id), GICE_OK);
	ck_assert_int_eq(tm_counter_allocated(r, id), 1);
	ck_assert_int_eq(tm_counter_free(r, id), GICE_OK);
	ck_assert_int_eq(tm_counter_allocated(r, id), 0);
	ck_assert_int_eq(tm_region_attach(tm_region_fd(r), &att), GICE_OK);
	ck_assert_int_eq(tm_counter_allocated(att, 5), GICE_ERR_UNSUPPORTED);
	tm_region_destroy(att);
	tm_region_destroy(r);
}
END_TEST

/* ---------------------------------------------------------------- immediate errors */

static uint8_t host_mem[4096]; /* not device memory */

/* The call returned status; its completion counter c must hold exactly that failure, and a wait
 * on it must end with it at once (not at the wait's 10 s timeout). */
static void check_failed_at_once(gice_device_t *d, gice_counter_t c, int status)
{
	gice_counter_state_t st;
	uint64_t t0 = now_ms();

	ck_assert_int_eq(gice_counter_wait(d, c, GICE_CMP_GE, 1, test_scaled(10000), NULL), status);
	ck_assert_uint_lt(now_ms() - t0, test_scaled(500));
	ck_assert_int_eq(gice_counter_get(d, c, &st), GICE_OK);
	ck_assert_uint_eq(st.fail, 1);
	ck_assert_uint_eq(st.value, 0);
	ck_assert_int_eq(st.status, status);
}

/* gice_post with a source outside device memory returns GICE_ERR_UNREGISTERED and its
 * completion records it; so do the other errors found before the request is queued (bad local
 * buffers of get and atomics, a bad local counter, an unknown op). A bad completion id is only
 * returned: there is no counter to record it in. */
START_TEST(host_post_immediate_errors_fail_the_completion)
{
	gice_counter_t c;
	gice_stats_t st;

	pair_open();
	ck_assert_int_eq(gice_counter_alloc(A, &c), GICE_OK);
	const struct {
		gice_op_t op;
		int status;
	} cases[] = {
		{{.type = GICE_OP_PUT, .conn = ab, .local = host_mem, .bytes = 64, .rkey = bkey, .roff = TGT,
		  .signal = GICE_NO_COUNTER},
		 GICE_ERR_UNREGISTERED},
		{{.type = GICE_OP_GET, .conn = ab, .local = host_mem, .bytes = 64, .rkey = bkey, .roff = TGT,
		  .signal = GICE_NO_COUNTER},
		 GICE_ERR_UNREGISTERED},
		{{.type = GICE_OP_ATOMIC_ADD, .conn = ab, .local = host_mem, .rkey = bkey, .roff = TGT, .value = 1,
		  .signal = GICE_NO_COUNTER},
		 GICE_ERR_UNREGISTERED},
		{{.type = GICE_OP_COUNTER_ADD, .value = 1, .signal = 0 /* reserved */}, GICE_ERR_INVALID},
		{{.type = (gice_op_type_t)99, .signal = GICE_NO_COUNTER}, GICE_ERR_INVALID},
	};
	memset(bbuf + TGT, 0x5a, 64);
	for (uint32_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gice_op_t op = cases[i].op;
		op.completion = c;
		ck_assert_int_eq(gice_post(A, &op), cases[i].status);
		check_failed_at_once(A, c, cases[i].status);
		ck_assert_int_eq(gice_counter_reset(A, c), GICE_OK);
	}
	/* a bad completion id: returned, and no counter is touched */
	gice_op_t op = cases[0].op;
	op.completion = 0;
	ck_assert_int_eq(gice_post(A, &op), GICE_ERR_INVALID);
	ck_assert_int_eq(gice_device_quiet(A, test_scaled(5000)), GICE_OK);
	ck_assert_int_eq(gice_device_stats(A, &st), GICE_OK);
	ck_assert_uint_eq(st.tx_bytes, 0); /* nothing was sent */
	for (size_t j = 0; j < 64; j++)
		ck_assert_uint_eq(bbuf[TGT + j], 0x5a);
	pair_close();
}
END_TEST

struct put_args {
	gice_conn_t conn;
	uint64_t rkey;
	gice_completion_t done;
	int *rc; /* device memory: what gice_put returned */
};

static void bad_put_kernel(gice_kctx_t *k, void *a_)
{
	struct put_args *a = a_;

	*a->rc = gice_put(k, a->conn, a->rkey, TGT, host_mem, sizeof(host_mem), a->done);
}

/* The same from a kernel, in device and in host mode: gice_put returns GICE_ERR_UNREGISTERED
 * and the completion the kernel (or the host) waits on fails with it at once. */
START_TEST(kernel_put_from_host_memory_fails_the_completion)
{
	gice_stream_t *str;
	gice_counter_t c;

	setenv("GICE_MODE", _i ? "host" : "device", 1);
	pair_open();
	ck_assert_int_eq(gice_stream_create(A, &str), GICE_OK);
	ck_assert_int_eq(gice_counter_alloc(A, &c), GICE_OK);
	int *rc = (int *)abuf;
	*rc = 12345;
	struct put_args a = {.conn = ab, .rkey = bkey, .done = c, .rc = rc};
	ck_assert_int_eq(gice_launch(str, bad_put_kernel, 1, &a, sizeof(a)), GICE_OK);
	ck_assert_int_eq(gice_stream_sync(str, test_scaled(10000)), GICE_OK);
	ck_assert_int_eq(*rc, GICE_ERR_UNREGISTERED);
	check_failed_at_once(A, c, GICE_ERR_UNREGISTERED);
	ck_assert_int_eq(gice_stream_destroy(str), GICE_OK);
	pair_close();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("completions");
	TCase *tc = tcase_create("link_config");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, credits_below_ack_every_moves_a_60000_byte_put);
	tcase_add_loop_test(tc, credit_and_ack_every_sweep_moves_bytes, 0, (int)(sizeof(pairs) / sizeof(pairs[0])));
	tcase_add_test(tc, sender_window_smaller_than_receiver_assumes_gets_delayed_acks);
	suite_add_tcase(s, tc);
	tc = tcase_create("signals");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, triggermem_tells_whether_a_counter_is_allocated);
	tcase_add_loop_test(tc, put_signal_to_an_unallocated_counter_is_rejected_and_writes_nothing, 0,
			    (int)(sizeof(sig_paths) / sizeof(sig_paths[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("immediate_errors");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, host_post_immediate_errors_fail_the_completion);
	tcase_add_loop_test(tc, kernel_put_from_host_memory_fails_the_completion, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) { return test_run_suite(suite()); }
